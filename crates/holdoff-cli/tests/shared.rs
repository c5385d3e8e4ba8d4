//! Two `holdoff proxy` replicas sharing their state in a real `redis-server` (each test starts
//! its own on a free loopback port): windows opened through one are judged through the other,
//! a rate limit admits exactly N across both, and each failure mode holds while Redis is down
//! and ends by itself when it is back; over TLS too, verified against the configured CA.

mod support;

use std::process::{Command, Output};
use std::time::Duration;

use holdoff_testkit::redis::RedisServer;
use holdoff_testkit::tls::TestCa;
use holdoff_testkit::{Reply, TestServer};
use support::{Proxy, TempDir, curl_as, runtime, within};

/// Watches every plain-HTTP URL on loopback, whatever its port.
const WATCH: &str = "http://127.0.0.1:*/*";
/// How long a replica may take to use the shared state again: after Redis comes back, a
/// replica returns to it when its circuit breaker's next background probe gets an answer, at
/// most 5 s after the one before.
const RECOVERY: Duration = Duration::from_secs(10);

/// A config sharing state in `redis`, with `rest` (more top-level keys, with a trailing comma).
fn shared_config(redis: &RedisServer, state: &str, rest: &str) -> String {
    format!(
        r#"{{
  {rest}
  "state": {{ "redis": "{}", "prefix": "holdoff-test:", "timeoutMs": 300 {state} }}
}}"#,
        redis.url()
    )
}

/// Two replicas with the same config.
fn replicas(config: &str) -> (Proxy, Proxy) {
    (
        Proxy::start(&["-c", config, "-u", WATCH]),
        Proxy::start(&["-c", config, "-u", WATCH]),
    )
}

#[test]
fn a_retry_through_the_other_replica_is_still_premature() {
    let rt = runtime();
    let upstream = rt.block_on(TestServer::start());
    upstream.script("/api", [Reply::too_many_requests("30")]);
    upstream.set_default("/api", Reply::ok("hello"));
    let redis = RedisServer::start();
    let dir = TempDir::new("shared-judge");
    let config = dir.write("holdoff.json", &shared_config(&redis, "", ""));
    let (a, b) = replicas(&config);

    let url = upstream.url("/api");
    assert_eq!(
        curl_as(&a, "worker-1", &url),
        "429",
        "the upstream's own 429"
    );
    assert_eq!(
        curl_as(&b, "worker-1", &url),
        "429",
        "replica B knows the window A opened"
    );
    assert_eq!(
        curl_as(&b, "worker-2", &url),
        "200",
        "another client has no window"
    );
    assert_eq!(
        upstream.requests_to("/api").len(),
        2,
        "the premature retry never reached the upstream"
    );

    let (a, b) = (a.stop(), b.stop());
    assert!(
        a.contains("holdoff judge: 0 premature and 0 compliant retries."),
        "{a}"
    );
    assert!(b.contains("holdoff judge: 1 premature"), "{b}");
}

#[test]
fn a_compliant_retry_through_the_other_replica_closes_the_window_for_both() {
    let rt = runtime();
    let upstream = rt.block_on(TestServer::start());
    // `Retry-After: 0`: the retry is permitted at once, so it is compliant without waiting.
    upstream.script("/api", [Reply::too_many_requests("0")]);
    upstream.set_default("/api", Reply::ok("hello"));
    let redis = RedisServer::start();
    let dir = TempDir::new("shared-compliant");
    let config = dir.write("holdoff.json", &shared_config(&redis, "", ""));
    let (a, b) = replicas(&config);

    let url = upstream.url("/api");
    assert_eq!(curl_as(&a, "worker-1", &url), "429");
    assert_eq!(curl_as(&b, "worker-1", &url), "200");
    assert_eq!(curl_as(&a, "worker-1", &url), "200", "no window is left");
    assert_eq!(
        redis_keys(&redis),
        "",
        "a closed window leaves no key behind"
    );

    let b = b.stop();
    assert!(
        b.contains("holdoff judge: 0 premature and 1 compliant retry."),
        "{b}"
    );
    drop(a);
}

/// `curl --parallel` sending `count` requests through `proxy` at once, as one client;
/// the status codes it printed.
fn burst(proxy: &Proxy, url: &str, count: usize) -> std::thread::JoinHandle<Vec<String>> {
    let proxy = format!("http://{}", proxy.addr);
    let url = url.to_owned();
    std::thread::spawn(move || {
        let mut command = Command::new("curl");
        command
            .args(["-s", "--parallel", "--parallel-max", "16", "-x", &proxy])
            .args(["-H", "X-Holdoff-Client: load"]);
        for _ in 0..count {
            command.args(["-o", "/dev/null", "-w", "%{http_code}\n", &url]);
        }
        let Output { stdout, .. } = command.output().expect("run curl");
        String::from_utf8_lossy(&stdout)
            .lines()
            .map(str::to_owned)
            .collect()
    })
}

/// The rate limit of `limit` requests per hour, by `algorithm`, through two replicas hit with
/// 3 × `limit` concurrent requests: exactly `limit` are admitted in total.
fn admits_exactly_the_limit_across_replicas(algorithm: &str) {
    let limit = 25;
    let rt = runtime();
    let upstream = rt.block_on(TestServer::start());
    upstream.set_default("/api", Reply::ok("hello"));
    let redis = RedisServer::start();
    let dir = TempDir::new("shared-limit");
    let rules = format!(
        r#""rateLimits": [{{ "algorithm": "{algorithm}", "limit": {limit}, "windowSeconds": 3600,
                            "scope": "shared" }}],"#
    );
    let config = dir.write("holdoff.json", &shared_config(&redis, "", &rules));
    let (a, b) = replicas(&config);

    let url = upstream.url("/api");
    let loads = [
        burst(&a, &url, limit * 3 / 2),
        burst(&b, &url, limit * 3 / 2),
    ];
    let statuses: Vec<String> = loads
        .into_iter()
        .flat_map(|load| load.join().expect("curl thread"))
        .collect();
    let admitted = statuses.iter().filter(|s| *s == "200").count();
    let refused = statuses.iter().filter(|s| *s == "429").count();
    assert_eq!(statuses.len(), 2 * (limit * 3 / 2), "{statuses:?}");
    // A fixed or sliding window starting on the hour mid-test would admit up to twice as
    // many; an hour-long window makes that a once-an-hour coincidence of a few seconds,
    // which the upstream's count below still tells apart from double counting.
    assert_eq!(
        (admitted, refused),
        (limit, statuses.len() - limit),
        "{algorithm}: {statuses:?}"
    );
    assert_eq!(upstream.requests_to("/api").len(), limit);
}

#[test]
fn a_fixed_window_limit_admits_exactly_n_across_replicas() {
    admits_exactly_the_limit_across_replicas("fixed-window");
}

#[test]
fn a_sliding_window_limit_admits_exactly_n_across_replicas() {
    admits_exactly_the_limit_across_replicas("sliding-window");
}

#[test]
fn a_token_bucket_limit_admits_exactly_n_across_replicas() {
    admits_exactly_the_limit_across_replicas("token-bucket");
}

/// Every key in `redis`, one per line, sorted.
fn redis_keys(redis: &RedisServer) -> String {
    let output = Command::new("redis-cli")
        .args(["-p", &redis.port().to_string(), "--raw", "KEYS", "*"])
        .output()
        .expect("redis-cli comes with redis-server");
    let mut keys: Vec<String> = String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(str::to_owned)
        .filter(|line| !line.is_empty())
        .collect();
    keys.sort();
    keys.join("\n")
}

#[test]
fn failing_open_keeps_judging_with_the_replicas_own_state_and_recovers() {
    let rt = runtime();
    let upstream = rt.block_on(TestServer::start());
    upstream.set_default("/api", Reply::ok("hello"));
    upstream.script("/limited", [Reply::too_many_requests("30")]);
    upstream.set_default("/limited", Reply::ok("hello"));
    let mut redis = RedisServer::start();
    let dir = TempDir::new("shared-fail-open");
    let config = dir.write(
        "holdoff.json",
        &shared_config(&redis, r#", "onFailure": "fail-open""#, ""),
    );
    let (a, b) = replicas(&config);
    let (api, limited) = (upstream.url("/api"), upstream.url("/limited"));

    redis.stop();
    for _ in 0..3 {
        assert_eq!(curl_as(&a, "worker-1", &api), "200", "traffic flows");
    }
    // Throttled and retried early through the same replica: its own state catches it.
    assert_eq!(curl_as(&a, "worker-1", &limited), "429");
    assert_eq!(curl_as(&a, "worker-1", &limited), "429", "premature");
    assert_eq!(upstream.requests_to("/limited").len(), 1);

    redis.restart();
    // The first operations after the restart may still find the connection broken (and fail
    // open); it reconnects by itself. Throttle a fresh client through B and retry at once
    // through A until A judges it from the shared window again.
    let mut attempt = 0;
    let judged_across = within(RECOVERY, || {
        attempt += 1;
        let who = format!("after-restart-{attempt}");
        upstream.script("/limited", [Reply::too_many_requests("30")]);
        assert_eq!(curl_as(&b, &who, &limited), "429", "the upstream's 429");
        curl_as(&a, &who, &limited) == "429"
    });
    assert!(
        judged_across,
        "sharing resumes by itself once Redis is back"
    );

    let a = a.stop();
    assert_eq!(
        a.matches("shared state failed; failing open").count(),
        1,
        "logged once per change, not per request:\n{a}"
    );
    assert!(a.contains("shared state is reachable again"), "{a}");
    assert!(!a.contains("secret"), "{a}");
    drop(b);
}

#[test]
fn failing_closed_answers_503_until_redis_is_back() {
    let rt = runtime();
    let upstream = rt.block_on(TestServer::start());
    upstream.set_default("/api", Reply::ok("hello"));
    let mut redis = RedisServer::start_with(&["--requirepass", "secret-pw"]);
    let url = redis.url().replacen("redis://", "redis://:secret-pw@", 1);
    let dir = TempDir::new("shared-fail-closed");
    let config = dir.write(
        "holdoff.json",
        &format!(
            r#"{{ "state": {{ "redis": "{url}", "timeoutMs": 300, "onFailure": "fail-closed",
                             "holdSeconds": 7 }} }}"#
        ),
    );
    let a = Proxy::start(&["-c", &config, "-u", WATCH]);
    let api = upstream.url("/api");
    assert_eq!(curl_as(&a, "worker-1", &api), "200");

    redis.stop();
    let body = TempDir::new("closed-body");
    let output = Command::new("curl")
        .args(["-s", "-D", "-", "-o"])
        .arg(body.path().join("body"))
        .args(["-x", &a.url(), &api])
        .output()
        .expect("run curl");
    let head = String::from_utf8_lossy(&output.stdout).to_ascii_lowercase();
    assert!(head.starts_with("http/1.1 503"), "{head}");
    assert!(head.contains("retry-after: 7"), "{head}");
    assert_eq!(
        upstream.requests_to("/api").len(),
        1,
        "nothing was forwarded"
    );

    redis.restart();
    let back = within(RECOVERY, || curl_as(&a, "worker-1", &api) == "200");
    assert!(back, "recovers by itself once Redis is back");

    let a = a.stop();
    assert_eq!(a.matches("failing closed").count(), 1, "{a}");
    assert!(a.contains("shared state is reachable again"), "{a}");
    assert!(
        !a.contains("secret-pw"),
        "the password never reaches the log:\n{a}"
    );
}

#[test]
fn replicas_share_state_over_tls_verified_against_the_configured_ca() {
    let rt = runtime();
    let upstream = rt.block_on(TestServer::start());
    upstream.script("/api", [Reply::too_many_requests("30")]);
    upstream.set_default("/api", Reply::ok("hello"));
    let ca = TestCa::new("holdoff shared-state test CA");
    let leaf = ca.leaf(&[]);
    let redis = RedisServer::start_tls(&leaf.cert_pem, &leaf.key_pem);
    assert!(redis.url().starts_with("rediss://"), "{}", redis.url());
    let dir = TempDir::new("shared-tls");
    dir.write("redis-ca.pem", ca.pem());
    let config = dir.write(
        "holdoff.json",
        &shared_config(&redis, r#", "caFile": "redis-ca.pem""#, ""),
    );
    let (a, b) = replicas(&config);

    let url = upstream.url("/api");
    assert_eq!(curl_as(&a, "worker-1", &url), "429");
    assert_eq!(curl_as(&b, "worker-1", &url), "429", "judged through TLS");
    assert_eq!(upstream.requests_to("/api").len(), 1);
    let b = b.stop();
    assert!(b.contains("holdoff judge: 1 premature"), "{b}");
    assert!(!b.contains("shared state failed"), "{b}");

    // Without the CA, the server's certificate is not trusted: the replica says so and fails
    // open, never connecting unverified.
    let untrusting = dir.write("untrusting.json", &shared_config(&redis, "", ""));
    let c = Proxy::start(&["-c", &untrusting, "-u", WATCH]);
    assert_eq!(curl_as(&c, "worker-9", &url), "200");
    let c = c.stop();
    assert!(c.contains("shared state failed; failing open"), "{c}");
    drop(a);
}
