//! Two `holdoff proxy` replicas sharing their state in a real Redis Cluster (three primaries,
//! three replicas, created by the test on free loopback ports): they judge as one, and a
//! primary killed mid-run costs each replica one line when it fails open and one when it is
//! back — never a wrong verdict; over TLS, they verify the cluster against the configured CA.

mod support;

use std::time::Duration;

use holdoff_testkit::redis_cluster::RedisCluster;
use holdoff_testkit::tls::TestCa;
use holdoff_testkit::{Reply, TestServer};
use support::{Proxy, TempDir, curl_as, runtime, within};

/// Watches every plain-HTTP URL on loopback, whatever its port.
const WATCH: &str = "http://127.0.0.1:*/*";
/// How long a replica may take to use the shared state again: a failover takes about 2 s
/// here, and each replica's circuit breaker probes the cluster at intervals doubling to 5 s.
const RECOVERY: Duration = Duration::from_secs(30);
/// Clients throttled before the kill: their windows spread over every primary.
const CLIENTS: usize = 12;

#[test]
fn two_replicas_judge_as_one_on_a_cluster_and_outlive_a_primary_killed_mid_run() {
    let rt = runtime();
    let upstream = rt.block_on(TestServer::start());
    upstream.set_default("/api", Reply::ok("hello"));
    upstream.script(
        "/limited",
        (0..CLIENTS).map(|_| Reply::too_many_requests("3600")),
    );
    upstream.set_default("/limited", Reply::ok("hello"));
    let mut cluster = RedisCluster::start();
    let seeds: Vec<String> = cluster.seeds().iter().map(|s| format!("{s:?}")).collect();
    let dir = TempDir::new("shared-cluster");
    let config = dir.write(
        "holdoff.json",
        &format!(
            r#"{{ "state": {{ "redisCluster": [{}], "prefix": "holdoff-test:",
                             "timeoutMs": 300, "onFailure": "fail-open" }} }}"#,
            seeds.join(", ")
        ),
    );
    let a = Proxy::start(&["-c", &config, "-u", WATCH]);
    let b = Proxy::start(&["-c", &config, "-u", WATCH]);
    let (api, limited) = (upstream.url("/api"), upstream.url("/limited"));

    // Throttled through A, retried at once through B: B knows A's windows.
    let clients: Vec<String> = (0..CLIENTS).map(|i| format!("worker-{i}")).collect();
    for who in &clients {
        assert_eq!(curl_as(&a, who, &limited), "429", "the upstream's 429");
        assert_eq!(
            curl_as(&b, who, &limited),
            "429",
            "{who}: premature through B"
        );
    }
    assert_eq!(upstream.requests_to("/limited").len(), CLIENTS);

    cluster.wait_until_replicated();
    let victim = cluster.primaries()[0];
    cluster.kill(victim);
    // Meanwhile traffic flows through both, and A — failing open on its own state, or
    // judging with the cluster — answers every early retry as premature, never compliant.
    let mut rounds = 0;
    let back = within(RECOVERY, || {
        rounds += 1;
        assert_eq!(curl_as(&a, &format!("new-{rounds}"), &api), "200");
        assert_eq!(curl_as(&b, &format!("new-{rounds}"), &api), "200");
        for who in &clients {
            assert_eq!(
                curl_as(&a, who, &limited),
                "429",
                "{who}: premature through A"
            );
        }
        // B is back when it judges A's windows from the cluster again (failing open, it
        // knows none of them: the first retry goes through, unjudged).
        if !clients
            .iter()
            .all(|who| curl_as(&b, who, &limited) == "429")
        {
            return false;
        }
        // A is back when it judges a window B has just opened.
        let fresh = format!("fresh-{rounds}");
        upstream.script("/limited", [Reply::too_many_requests("3600")]);
        assert_eq!(curl_as(&b, &fresh, &limited), "429", "the upstream's 429");
        curl_as(&a, &fresh, &limited) == "429"
    });
    assert!(
        back,
        "both replicas use the cluster again after the failover"
    );
    assert!(
        !cluster.primaries().contains(&victim),
        "a replica took over"
    );

    let (a, b) = (a.stop(), b.stop());
    for log in [&a, &b] {
        assert_eq!(
            log.matches("shared state failed; failing open").count(),
            1,
            "one line when it opened:\n{log}"
        );
        assert_eq!(
            log.matches("shared state is reachable again").count(),
            1,
            "one line when it closed:\n{log}"
        );
        assert_eq!(
            log.matches("(cluster)").count(),
            2,
            "the two lines name the cluster, and nothing else does:\n{log}"
        );
        assert!(
            !log.contains("Failed to connect"),
            "not a line per failed attempt to reach the dead node:\n{log}"
        );
        assert!(
            log.contains(" 0 compliant"),
            "no early retry passed:\n{log}"
        );
    }
}

#[test]
fn two_replicas_share_a_tls_cluster_verified_against_the_configured_ca() {
    let rt = runtime();
    let upstream = rt.block_on(TestServer::start());
    upstream.script("/api", [Reply::too_many_requests("30")]);
    upstream.set_default("/api", Reply::ok("hello"));
    let ca = TestCa::new("holdoff shared-cluster test CA");
    let leaf = ca.peer_leaf(&[]);
    let cluster = RedisCluster::start_tls(ca.pem(), &leaf.cert_pem, &leaf.key_pem);
    let dir = TempDir::new("shared-cluster-tls");
    dir.write("redis-ca.pem", ca.pem());
    let seeds: Vec<String> = cluster.seeds().iter().map(|s| format!("{s:?}")).collect();
    assert!(
        seeds.iter().all(|s| s.starts_with("\"rediss://")),
        "{seeds:?}"
    );
    // A generous timeout: a replica's first operation connects to every primary, a TLS
    // handshake each, on a machine busy with other tests; a timeout would fail it open.
    let config = |ca_file: &str| {
        format!(
            r#"{{ "state": {{ "redisCluster": [{}], "prefix": "holdoff-test:",
                             "timeoutMs": 3000 {ca_file} }} }}"#,
            seeds.join(", ")
        )
    };
    let trusting = dir.write("holdoff.json", &config(r#", "caFile": "redis-ca.pem""#));
    let a = Proxy::start(&["-c", &trusting, "-u", WATCH]);
    let b = Proxy::start(&["-c", &trusting, "-u", WATCH]);

    let url = upstream.url("/api");
    assert_eq!(curl_as(&a, "worker-1", &url), "429", "the upstream's 429");
    assert_eq!(curl_as(&b, "worker-1", &url), "429", "judged through TLS");
    assert_eq!(upstream.requests_to("/api").len(), 1);
    let b = b.stop();
    assert!(b.contains("holdoff judge: 1 premature"), "{b}");
    assert!(!b.contains("shared state failed"), "{b}");

    // Without the CA, no node's certificate is trusted: the replica says so and fails open,
    // never connecting unverified.
    let untrusting = dir.write("untrusting.json", &config(""));
    let c = Proxy::start(&["-c", &untrusting, "-u", WATCH]);
    assert_eq!(curl_as(&c, "worker-9", &url), "200");
    let c = c.stop();
    assert!(c.contains("shared state failed; failing open"), "{c}");
    drop(a);
}
