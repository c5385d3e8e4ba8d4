//! `RedisState` and `RedisGate` on a real Redis Cluster — three primaries, three replicas —
//! that each test creates on free loopback ports; and what a primary killed mid-run costs.

use std::io::Write;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use holdoff::clock::{Clock, SystemClock, TokioClock};
use holdoff::gate::{GateStore, NotBefore};
use holdoff_proxy::fault::{Algorithm, Limit};
use holdoff_proxy::judge::{Judge, KeyMode, KeyParts, Penalty, WindowKey};
use holdoff_proxy::shared::{CounterKey, SharedCheck, SharedState, StateError};
use holdoff_redis::{ErrorKind, RedisGate, RedisState, RedisStateBuilder};
use holdoff_testkit::redis_cluster::RedisCluster;

const S: Duration = Duration::from_secs(1);
const MS: Duration = Duration::from_millis(1);
const DAY: Duration = Duration::from_secs(86_400);
/// Each operation's timeout in the tests that kill a primary: short, so that the one that
/// meets the dead primary fails soon.
const TIMEOUT: Duration = Duration::from_millis(300);
/// How long a test waits for a killed primary's replica to take over and for every store's
/// circuit to close: a failover takes about 2 s here (a 1 s node timeout), and the probes
/// back off to every 5 s.
const RECOVERY: Duration = Duration::from_secs(30);

fn judge() -> Judge {
    Judge::new(KeyMode::Url, SystemClock.now())
}

/// The window keys of `n` URLs: enough that every primary serves some.
fn keys(judge: &Judge, n: usize) -> Vec<WindowKey> {
    (0..n)
        .map(|i| {
            judge.key(&KeyParts {
                client: "client",
                method: "GET",
                url: &format!("https://api.example/{i}"),
                origin: "https://api.example",
                header: None,
            })
        })
        .collect()
}

fn counter(scope: &str) -> CounterKey {
    CounterKey {
        rule: "0123456789abcdef0123456789abcdef".to_owned(),
        scope: scope.to_owned(),
    }
}

fn limit(algorithm: Algorithm, limit: u64) -> Limit {
    Limit {
        algorithm,
        limit,
        window: DAY,
        cost: 1,
    }
}

async fn sleep(by: Duration) {
    TokioClock.sleep_until(TokioClock.now() + by).await;
}

fn kind(error: &StateError) -> ErrorKind {
    error
        .downcast_ref::<holdoff_redis::Error>()
        .expect("a holdoff_redis::Error")
        .kind()
}

/// The ports of the primaries that serve `names`, each once.
fn primaries_of(cluster: &RedisCluster, names: &[String]) -> Vec<u16> {
    let mut ports: Vec<u16> = names.iter().map(|n| cluster.primary_of(n)).collect();
    ports.sort_unstable();
    ports.dedup();
    ports
}

/// What the stores log at `warn` and above on this thread, while the value lives.
struct Logs {
    lines: Arc<Mutex<Vec<u8>>>,
    _guard: tracing::subscriber::DefaultGuard,
}

#[derive(Clone)]
struct Sink(Arc<Mutex<Vec<u8>>>);

impl Write for Sink {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Logs {
    /// Captures this thread's events: the tests run on a current-thread runtime, so the
    /// stores' probes and the cluster connections' tasks run here too.
    fn capture() -> Logs {
        let lines = Arc::new(Mutex::new(Vec::new()));
        let sink = Sink(Arc::clone(&lines));
        let subscriber = tracing_subscriber::fmt()
            .with_max_level(tracing::Level::WARN)
            .with_ansi(false)
            .with_writer(move || sink.clone())
            .finish();
        Logs {
            lines,
            _guard: tracing::subscriber::set_default(subscriber),
        }
    }

    /// The lines logged so far that contain `text`.
    fn containing(&self, text: &str) -> Vec<String> {
        let lines = self.lines.lock().unwrap_or_else(PoisonError::into_inner);
        String::from_utf8_lossy(&lines)
            .lines()
            .filter(|l| l.contains(text))
            .map(str::to_owned)
            .collect()
    }
}

mod state {
    use super::*;

    #[tokio::test]
    async fn keys_spread_over_every_primary_and_each_is_judged_and_counted_there() {
        let cluster = RedisCluster::start();
        let state = RedisState::cluster_builder(cluster.seeds())
            .build()
            .expect("state");
        let judge = judge();
        let keys = keys(&judge, 24);
        for &key in &keys {
            state.open(key, 60 * S, 60 * S).await.expect("open");
        }
        for &key in &keys {
            assert!(matches!(
                state.check(key, Penalty::None).await.expect("check"),
                SharedCheck::Premature { .. }
            ));
        }
        let names: Vec<String> = keys.iter().map(|&k| state.window_key(k)).collect();
        assert_eq!(primaries_of(&cluster, &names), cluster.primaries());

        let scopes: Vec<String> = (0..24).map(|i| format!("client-{i}")).collect();
        for scope in &scopes {
            let counter = counter(scope);
            for expected in [true, true, false] {
                let taken = (state
                    .take(&counter, limit(Algorithm::SlidingWindow, 2))
                    .await)
                    .expect("take");
                assert_eq!(taken.allowed, expected, "{scope}");
            }
        }
        let names: Vec<String> = scopes
            .iter()
            .map(|s| state.counter_key(&counter(s)))
            .collect();
        assert_eq!(primaries_of(&cluster, &names), cluster.primaries());
    }

    #[tokio::test]
    async fn two_stores_judge_and_count_as_one() {
        let cluster = RedisCluster::start();
        judges_and_counts_as_one(&cluster, |b| b).await;
    }

    /// The same on a Valkey cluster, where `valkey-server` is installed (Debian 12 has no
    /// package of it; the test says so and passes without it).
    #[tokio::test]
    async fn two_stores_on_valkey_judge_and_count_as_one() {
        let installed = std::process::Command::new("valkey-server")
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success());
        if !installed {
            eprintln!("valkey-server is not installed: the Valkey cluster test is skipped");
            return;
        }
        let cluster = RedisCluster::start_with("valkey-server");
        judges_and_counts_as_one(&cluster, |b| b).await;
    }

    /// Each store's builder `configured` (given the CA to verify a TLS cluster against).
    pub(super) async fn judges_and_counts_as_one(
        cluster: &RedisCluster,
        configured: impl Fn(RedisStateBuilder) -> RedisStateBuilder,
    ) {
        let build = || {
            configured(RedisState::cluster_builder(cluster.seeds()).prefix("one-api:"))
                .build()
                .expect("state")
        };
        let (a, b) = (build(), build());
        let judge = judge();
        let keys = keys(&judge, 12);
        // Both stores connect (to every primary, over TLS a handshake each) before the
        // 40 ms windows are opened, so that none is spent connecting.
        for store in [&a, &b] {
            for &key in &keys {
                store.check(key, Penalty::None).await.expect("connect");
            }
        }
        for &key in &keys {
            a.open(key, 40 * MS, 60 * S).await.expect("open");
        }
        for &key in &keys {
            assert!(matches!(
                b.check(key, Penalty::None).await.expect("check"),
                SharedCheck::Premature { .. }
            ));
        }
        sleep(50 * MS).await;
        for &key in &keys {
            assert!(matches!(
                b.check(key, Penalty::None).await.expect("check"),
                SharedCheck::Compliant { .. }
            ));
            assert_eq!(
                a.check(key, Penalty::None).await.expect("check"),
                SharedCheck::Open,
                "the compliant retry through B closed it for A too"
            );
        }

        for algorithm in [
            Algorithm::FixedWindow,
            Algorithm::SlidingWindow,
            Algorithm::TokenBucket,
        ] {
            let counter = counter(&format!("{algorithm:?}"));
            let mut admitted = 0;
            for i in 0..20 {
                let store = if i % 2 == 0 { &a } else { &b };
                let taken = store.take(&counter, limit(algorithm, 10)).await;
                admitted += usize::from(taken.expect("take").allowed);
            }
            assert_eq!(admitted, 10, "{algorithm:?}: one limit across both");
        }
    }

    #[tokio::test]
    async fn a_slot_moving_to_another_primary_is_followed_without_a_failure() {
        let logs = Logs::capture();
        let cluster = RedisCluster::start();
        let state = RedisState::cluster_builder(cluster.seeds())
            .timeout(TIMEOUT)
            .build()
            .expect("state");
        let judge = judge();
        let key = keys(&judge, 1)[0];
        let name = state.window_key(key);
        state.open(key, DAY, DAY).await.expect("open");
        let from = cluster.primary_of(&name);
        let to = *cluster
            .primaries()
            .iter()
            .find(|&&p| p != from)
            .expect("another primary");
        let premature = async || {
            let found = state.check(key, Penalty::None).await.expect("check");
            assert!(matches!(found, SharedCheck::Premature { .. }), "{found:?}");
            // A write on the moving slot, too: the window keeps the later time.
            state.open(key, DAY, DAY).await.expect("open");
        };

        let migration = cluster.migrate(&name, to);
        premature().await;
        // The key is on the new primary, the slot not yet: the old one answers ASK.
        migration.move_keys();
        premature().await;
        // The slot is the new primary's: every other node answers MOVED.
        migration.finish();
        premature().await;
        assert_eq!(cluster.primary_of(&name), to);
        assert_eq!(state.openings(), 0);
        assert_eq!(logs.containing("WARN").len(), 0, "nothing to say");
    }

    #[tokio::test]
    async fn a_primary_killed_mid_run_costs_one_opening_each_and_no_wrong_verdict() {
        outlives_a_primary_killed_mid_run(RedisCluster::start(), |b| b).await;
    }

    /// Two stores on `cluster`, each builder `configured`, while one of its primaries is
    /// killed: every answer right, one opening and one line each way per store, and
    /// everything served again after the failover.
    pub(super) async fn outlives_a_primary_killed_mid_run(
        mut cluster: RedisCluster,
        configured: impl Fn(RedisStateBuilder) -> RedisStateBuilder,
    ) {
        let logs = Logs::capture();
        let build = || {
            configured(RedisState::cluster_builder(cluster.seeds()).timeout(TIMEOUT))
                .build()
                .expect("state")
        };
        let stores = [build(), build()];
        let judge = judge();
        let keys = keys(&judge, 24);
        for (i, &key) in keys.iter().enumerate() {
            stores[i % 2].open(key, DAY, DAY).await.expect("open");
        }
        // Redis replicates asynchronously: a window acknowledged a moment before a crash may
        // be lost in the failover (and a retry on it go unjudged). Not here.
        cluster.wait_until_replicated();
        let victim = cluster.primary_of(&stores[0].window_key(keys[0]));
        cluster.kill(victim);

        // Every answer the stores give is right (each window is still open), whichever
        // primary serves it; the rest are failures, answered by the proxy's failure mode.
        let (mut right, mut failed) = (0, 0);
        let started = TokioClock.now();
        loop {
            let mut all_answered = true;
            for &key in &keys {
                for store in &stores {
                    match store.check(key, Penalty::None).await {
                        Ok(SharedCheck::Premature { .. }) => right += 1,
                        Ok(other) => panic!("a wrong verdict during the failover: {other:?}"),
                        Err(error) => {
                            assert!(
                                matches!(
                                    kind(&error),
                                    ErrorKind::CircuitOpen
                                        | ErrorKind::Timeout
                                        | ErrorKind::Connection
                                ),
                                "{error:?}"
                            );
                            failed += 1;
                            all_answered = false;
                        }
                    }
                }
            }
            if all_answered && stores.iter().all(|s| s.openings() == 1) {
                break;
            }
            assert!(
                TokioClock.now() - started < RECOVERY,
                "not back within {RECOVERY:?}: {right} right, {failed} failed, {:?}",
                stores.iter().map(RedisState::is_open).collect::<Vec<_>>()
            );
            sleep(20 * MS).await;
        }
        assert!(failed > 0, "the kill went unnoticed");
        for store in &stores {
            assert!(!store.is_open());
            assert_eq!(store.openings(), 1, "one opening per store");
        }
        // One line each way per store, and no other warning.
        let url = stores[0].url().to_owned();
        assert_eq!(logs.containing("shared state failed").len(), 2);
        assert_eq!(logs.containing("shared state is reachable again").len(), 2);
        assert_eq!(logs.containing(&url).len(), 4);

        // A replica took over, and everything is served again, writes included.
        assert!(!cluster.primaries().contains(&victim));
        for (i, &key) in keys.iter().enumerate() {
            let store = &stores[i % 2];
            store.open(key, DAY, DAY).await.expect("open");
            let taken = store.take(&counter(&i.to_string()), limit(Algorithm::FixedWindow, 5));
            assert!(taken.await.expect("take").allowed);
        }
    }
}

/// A cluster whose nodes serve TLS and talk TLS to each other: the stores verify every node
/// against the CA they are given, follow the slot map to the nodes' TLS ports, and outlive a
/// primary's failure as over plain TCP.
#[cfg(feature = "tls")]
mod tls {
    use super::*;
    use holdoff_testkit::tls::TestCa;

    fn tls_cluster(ca: &TestCa) -> RedisCluster {
        let leaf = ca.peer_leaf(&[]);
        RedisCluster::start_tls(ca.pem(), &leaf.cert_pem, &leaf.key_pem)
    }

    #[tokio::test]
    async fn two_stores_verified_against_the_ca_judge_and_count_as_one() {
        let ca = TestCa::new("holdoff cluster test CA");
        let cluster = tls_cluster(&ca);
        assert!(cluster.seeds().iter().all(|s| s.starts_with("rediss://")));
        state::judges_and_counts_as_one(&cluster, |b| b.root_ca(ca.pem())).await;

        // The system's roots do not know this CA: refused, never connected unverified.
        let untrusting = RedisState::cluster_builder(cluster.seeds())
            .timeout(TIMEOUT)
            .build()
            .expect("state");
        let judge = judge();
        let key = keys(&judge, 1)[0];
        let error = untrusting
            .check(key, Penalty::None)
            .await
            .expect_err("a cluster whose CA the store does not trust");
        assert!(
            matches!(kind(&error), ErrorKind::Connection | ErrorKind::Timeout),
            "{error:?}"
        );
    }

    #[tokio::test]
    async fn a_primary_killed_mid_run_costs_one_opening_each_and_no_wrong_verdict() {
        let ca = TestCa::new("holdoff cluster test CA");
        let trusting = |b: RedisStateBuilder| b.root_ca(ca.pem());
        state::outlives_a_primary_killed_mid_run(tls_cluster(&ca), trusting).await;
    }
}

mod gate {
    use super::*;

    #[tokio::test]
    async fn two_gates_share_every_key_and_a_killed_primary_costs_one_opening_each() {
        let logs = Logs::capture();
        let mut cluster = RedisCluster::start();
        let build = || {
            RedisGate::cluster_builder(cluster.seeds())
                .timeout(TIMEOUT)
                .build()
                .expect("gate")
        };
        let (writer, reader) = (build(), build());
        let names: Vec<String> = (0..24).map(|i| format!("api-{i}.example")).collect();
        let until = SystemClock.wall_now() + 3600 * S;
        for name in &names {
            writer
                .raise(name, TokioClock.now() + 3600 * S, until)
                .await
                .expect("raise");
        }
        let mut at = Vec::new();
        for name in &names {
            let read = reader.try_get(name).await.expect("get");
            assert!(read.is_some_and(|t| t >= until), "{name}: {read:?}");
            at.push(read);
        }
        let keys: Vec<String> = names.iter().map(|n| reader.redis_key(n)).collect();
        assert_eq!(primaries_of(&cluster, &keys), cluster.primaries());

        cluster.wait_until_replicated();
        let victim = cluster.primary_of(&keys[0]);
        cluster.kill(victim);
        let started = TokioClock.now();
        loop {
            let mut all_answered = true;
            for (name, at) in names.iter().zip(&at) {
                // The writer answers from its own state meanwhile: still closed.
                let closed = writer.get(name).await.expect("infallible");
                assert!(
                    matches!(closed, Some(NotBefore::Wall(_) | NotBefore::Instant(_))),
                    "{name} opened early"
                );
                match reader.try_get(name).await {
                    Ok(read) => assert_eq!(read, *at, "{name}: a wrong time"),
                    Err(_) => all_answered = false,
                }
            }
            let gates = [&writer, &reader];
            if all_answered && gates.iter().all(|g| g.openings() == 1 && g.is_healthy()) {
                break;
            }
            assert!(
                TokioClock.now() - started < RECOVERY,
                "not back within {RECOVERY:?}"
            );
            sleep(20 * MS).await;
        }
        assert_eq!(logs.containing("redis gate failed").len(), 2);
        assert!(!cluster.primaries().contains(&victim));
        for name in &names {
            let later = until + 60 * S;
            let moved = reader.try_raise(name, later).await.expect("raise");
            assert!(moved, "{name}");
        }
    }
}
