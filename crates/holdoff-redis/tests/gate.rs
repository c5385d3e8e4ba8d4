//! `RedisGate` against a real `redis-server` that each test starts on a free loopback port.

use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use holdoff::Policy;
use holdoff::clock::{Clock, TokioClock};
use holdoff::gate::{Gate, GateStore, NotBefore};
use holdoff::retry::Retrier;
use holdoff_redis::{ErrorKind, FailureMode, RedisGate};
use holdoff_testkit::redis::{RedisServer, inspect, silent_server};
use holdoff_testkit::{Reply, TestServer};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

mod support;
use support::{Stopped, calls};

async fn sleep(by: Duration) {
    TokioClock.sleep_until(TokioClock.now() + by).await;
}

/// Milliseconds since the epoch, rounded up as the gate stores them.
fn millis(at: SystemTime) -> u128 {
    let nanos = at
        .duration_since(SystemTime::UNIX_EPOCH)
        .expect("after 1970")
        .as_nanos();
    nanos.div_ceil(1_000_000)
}

mod raise {
    use super::*;

    #[tokio::test]
    async fn keeps_the_later_time_and_expires_the_key_at_it() {
        let redis = RedisServer::start();
        let gate = RedisGate::builder(redis.url()).build().expect("gate");
        let now = TokioClock.wall_now();
        let later = now + Duration::from_secs(5);

        assert!(gate.try_raise("api", later).await.expect("raise"));
        assert!(
            !gate
                .try_raise("api", now + Duration::from_secs(2))
                .await
                .expect("raise")
        );

        let stored = gate.try_get("api").await.expect("get").expect("closed");
        // Stored in whole milliseconds, rounded up.
        assert!(stored >= later);
        assert_eq!(millis(stored), millis(later));
        let mut connection = inspect(&redis).await;
        let pttl: i64 = redis::cmd("PTTL")
            .arg("holdoff:gate:api")
            .query_async(&mut connection)
            .await
            .expect("PTTL");
        assert!(pttl > 0 && pttl <= 5_001, "PTTL {pttl}");
    }

    #[tokio::test]
    async fn leaves_nothing_behind_once_the_window_has_passed() {
        let redis = RedisServer::start();
        let gate = RedisGate::builder(redis.url()).build().expect("gate");
        let soon = TokioClock.wall_now() + Duration::from_millis(100);
        gate.try_raise("api", soon).await.expect("raise");
        sleep(Duration::from_millis(300)).await;
        let mut connection = inspect(&redis).await;
        let keys: Vec<String> = redis::cmd("KEYS")
            .arg("*")
            .query_async(&mut connection)
            .await
            .expect("KEYS");
        assert!(keys.is_empty(), "left behind: {keys:?}");
        assert_eq!(gate.try_get("api").await.expect("get"), None);
    }
}

mod get {
    use super::*;

    #[tokio::test]
    async fn answers_the_wall_time_that_gate_turns_into_a_local_instant() {
        let redis = RedisServer::start();
        let store = RedisGate::builder(redis.url()).build().expect("gate");
        let until_wall = TokioClock.wall_now() + Duration::from_secs(3);
        store
            .raise("api", TokioClock.now(), until_wall)
            .await
            .expect("infallible");
        let Ok(Some(NotBefore::Wall(wall))) = store.get("api").await else {
            panic!("expected a wall time");
        };
        assert_eq!(millis(wall), millis(until_wall));

        let gate = Gate::new(store);
        let opens = gate
            .opens_at("api", &TokioClock)
            .await
            .expect("infallible")
            .expect("closed");
        let ahead = opens - TokioClock.now();
        assert!(
            ahead > Duration::from_millis(2_500) && ahead <= Duration::from_millis(3_001),
            "{ahead:?}"
        );
        assert_eq!(
            gate.opens_at("other", &TokioClock)
                .await
                .expect("infallible"),
            None
        );
    }

    #[tokio::test]
    async fn prefixes_isolate_gates() {
        let redis = RedisServer::start();
        let a = RedisGate::builder(redis.url())
            .prefix("a:")
            .build()
            .expect("gate");
        let b = RedisGate::builder(redis.url())
            .prefix("b:")
            .build()
            .expect("gate");
        a.try_raise("api", TokioClock.wall_now() + Duration::from_secs(5))
            .await
            .expect("raise");
        assert!(a.try_get("api").await.expect("get").is_some());
        assert_eq!(b.try_get("api").await.expect("get"), None);
        assert_eq!(a.redis_key("api"), "a:api");
    }

    #[tokio::test]
    async fn times_out_instead_of_hanging_on_a_silent_server() {
        let (url, _held) = silent_server().await;
        let gate = RedisGate::builder(url)
            .timeout(Duration::from_millis(200))
            .build()
            .expect("gate");
        let started = TokioClock.now();
        let error = gate.try_get("api").await.expect_err("no answer");
        assert_eq!(error.kind(), ErrorKind::Timeout);
        assert!(TokioClock.now() - started < Duration::from_secs(2));
        assert_eq!(gate.errors(), 1);
        assert!(!gate.is_healthy());
    }
}

mod password {
    use super::*;

    #[tokio::test]
    async fn is_used_and_never_shown() {
        let redis = RedisServer::start_with(&["--requirepass", "hunter2"]);
        let url = format!("redis://:hunter2@127.0.0.1:{}/0", redis.port());
        let gate = RedisGate::builder(&url).build().expect("gate");
        gate.try_raise("api", TokioClock.wall_now() + Duration::from_secs(1))
            .await
            .expect("authenticated");
        assert!(!format!("{gate:?}").contains("hunter2"));
        assert_eq!(
            gate.url(),
            format!("redis://:***@127.0.0.1:{}/0", redis.port())
        );

        let wrong = RedisGate::builder(format!("redis://:wrong-pass@127.0.0.1:{}/0", redis.port()))
            .build()
            .expect("gate");
        let error = wrong.try_get("api").await.expect_err("wrong password");
        let mut text = format!("{error} {error:?}");
        let mut source = std::error::Error::source(&error);
        while let Some(cause) = source {
            text += &cause.to_string();
            source = cause.source();
        }
        assert!(!text.contains("wrong-pass"), "{text}");
        assert!(!format!("{:?}", RedisGate::builder(&url)).contains("hunter2"));
    }
}

#[cfg(feature = "tls")]
mod tls {
    use super::*;
    use holdoff_testkit::tls::TestCa;

    #[tokio::test]
    async fn a_rediss_server_is_verified_against_the_given_ca() {
        let ca = TestCa::new("holdoff gate test CA");
        let leaf = ca.leaf(&[]);
        let redis = RedisServer::start_tls(&leaf.cert_pem, &leaf.key_pem);
        let gate = RedisGate::builder(redis.url())
            .root_ca(ca.pem().as_bytes())
            .build()
            .expect("gate");
        let later = TokioClock.wall_now() + Duration::from_secs(2);
        assert!(gate.try_raise("api", later).await.expect("raise over TLS"));
        assert!(gate.try_get("api").await.expect("get over TLS").is_some());

        // The system's roots do not know this CA: refused, never connected unverified.
        let untrusting = RedisGate::builder(redis.url())
            .timeout(Duration::from_millis(500))
            .build()
            .expect("gate");
        let error = untrusting.try_get("api").await.expect_err("untrusted");
        // The handshake fails at once; the connection's own retries may run out the time.
        assert!(
            matches!(error.kind(), ErrorKind::Connection | ErrorKind::Timeout),
            "{error:?}"
        );
    }

    #[tokio::test]
    async fn a_ca_that_is_not_pem_is_refused_when_building() {
        let error = RedisGate::builder("rediss://127.0.0.1:6379/0")
            .root_ca(b"not a certificate".to_vec())
            .build()
            .expect_err("not PEM");
        assert_eq!(error.kind(), ErrorKind::InvalidCa);
    }
}

mod skew {
    use super::*;

    #[tokio::test]
    async fn is_small_against_a_redis_on_the_same_machine() {
        let redis = RedisServer::start();
        let gate = RedisGate::builder(redis.url()).build().expect("gate");
        let (holdoff::Skew::Ahead(by) | holdoff::Skew::Behind(by)) =
            gate.skew().await.expect("TIME");
        assert!(by < Duration::from_millis(100), "{by:?}");
    }
}

mod redis_killed {
    use super::*;

    /// Polls until `gate` reaches Redis again: recovery must come without help.
    async fn wait_until_healthy(gate: &RedisGate) {
        let started = TokioClock.now();
        while gate.try_get("probe").await.is_err() {
            assert!(
                TokioClock.now() - started < Duration::from_secs(10),
                "no recovery"
            );
            sleep(Duration::from_millis(50)).await;
        }
        assert!(gate.is_healthy());
    }

    #[tokio::test]
    async fn fail_open_answers_from_local_state_counts_and_recovers() {
        let mut redis = RedisServer::start();
        let gate = RedisGate::builder(redis.url())
            .timeout(Duration::from_millis(200))
            .on_failure(FailureMode::FailOpen)
            .build()
            .expect("gate");
        let in_redis = TokioClock.wall_now() + Duration::from_secs(30);
        gate.try_raise("theirs", in_redis).await.expect("raise");
        assert!(gate.try_get("theirs").await.expect("get").is_some());

        redis.stop();
        // Raised by another process, so unknown here: open.
        assert_eq!(gate.get("theirs").await, Ok(None));
        assert!(gate.errors() >= 1);
        assert!(!gate.is_healthy());
        // Raised by this process while Redis is away: it still holds here.
        let mine = TokioClock.now() + Duration::from_secs(5);
        gate.raise("mine", mine, TokioClock.wall_now() + Duration::from_secs(5))
            .await
            .expect("infallible");
        assert_eq!(gate.get("mine").await, Ok(Some(NotBefore::Instant(mine))));
        let errors = gate.errors();
        assert!(errors >= 3, "{errors}");

        redis.restart();
        wait_until_healthy(&gate).await;
        // A new, empty Redis (nothing is saved): the gate works on it.
        assert!(gate.try_raise("theirs", in_redis).await.expect("raise"));
        assert!(gate.try_get("theirs").await.expect("get").is_some());
    }

    #[tokio::test]
    async fn fail_closed_holds_every_key_and_recovers() {
        let mut redis = RedisServer::start();
        let hold = Duration::from_secs(2);
        let gate = RedisGate::builder(redis.url())
            .timeout(Duration::from_millis(200))
            .on_failure(FailureMode::FailClosed { hold })
            .build()
            .expect("gate");
        assert_eq!(gate.get("api").await, Ok(None));

        redis.stop();
        let before = TokioClock.now();
        let Ok(Some(NotBefore::Instant(at))) = gate.get("api").await else {
            panic!("fail-closed must answer closed");
        };
        assert!(at >= before + hold && at <= TokioClock.now() + hold);
        assert!(gate.errors() >= 1);

        redis.restart();
        wait_until_healthy(&gate).await;
        assert_eq!(gate.get("api").await, Ok(None));
    }
}

/// After one failure the gate stops asking Redis, answering by its failure mode at once,
/// and a probe in the background brings it back.
mod breaker {
    use super::*;

    use holdoff::clock::ManualClock;

    const TIMEOUT: Duration = Duration::from_millis(150);
    const CALLS: usize = 50;

    /// Waits (in real time, briefly each) until a probe has closed the circuit: it must
    /// close without help.
    async fn wait_until_closed(gate: &RedisGate) {
        for _ in 0..200 {
            if gate.is_healthy() {
                return;
            }
            sleep(Duration::from_millis(50)).await;
        }
        panic!("the circuit never closed");
    }

    #[tokio::test]
    async fn a_hung_redis_is_asked_once_and_used_again_once_it_resumes() {
        let redis = RedisServer::start();
        let gate = RedisGate::builder(redis.url())
            .timeout(TIMEOUT)
            .on_failure(FailureMode::FailOpen)
            .build()
            .expect("gate");
        assert_eq!(gate.try_get("api").await.expect("get"), None);
        let before = calls(&redis, &["get"]).await[0];

        let stopped = Stopped::stop(&redis).await;
        let error = gate.try_get("api").await.expect_err("hung");
        assert_eq!(error.kind(), ErrorKind::Timeout);
        assert!(!gate.is_healthy());
        for _ in 0..CALLS {
            let refused = gate.try_get("api").await.expect_err("open");
            assert_eq!(refused.kind(), ErrorKind::CircuitOpen);
            // Through the gate: this process's own state, here nothing.
            assert_eq!(gate.get("api").await, Ok(None));
        }
        assert_eq!(gate.openings(), 1);
        assert_eq!(gate.errors(), 1 + 2 * CALLS as u64);

        stopped.resume();
        wait_until_closed(&gate).await;
        // What was sent while it hung has been served now: of 101 reads, one reached it.
        assert_eq!(calls(&redis, &["get"]).await[0], before + 1);
        assert_eq!(gate.try_get("api").await.expect("get"), None);
        assert_eq!(calls(&redis, &["get"]).await[0], before + 2);
        assert!(calls(&redis, &["ping"]).await[0] >= 1, "probed with PING");
        assert_eq!(gate.openings(), 1);
    }

    #[tokio::test]
    async fn a_killed_redis_is_not_asked_until_it_is_back_on_its_port() {
        let mut redis = RedisServer::start();
        let gate = RedisGate::builder(redis.url())
            .timeout(TIMEOUT)
            .on_failure(FailureMode::FailOpen)
            .build()
            .expect("gate");
        let mine = TokioClock.now() + Duration::from_secs(30);
        gate.raise(
            "mine",
            mine,
            TokioClock.wall_now() + Duration::from_secs(30),
        )
        .await
        .expect("infallible");

        redis.stop();
        let error = gate.try_get("api").await.expect_err("killed");
        assert!(
            matches!(error.kind(), ErrorKind::Connection | ErrorKind::Timeout),
            "{error:?}"
        );
        for _ in 0..CALLS {
            let refused = gate.try_get("api").await.expect_err("open");
            assert_eq!(refused.kind(), ErrorKind::CircuitOpen);
            assert_eq!(gate.get("mine").await, Ok(Some(NotBefore::Instant(mine))));
        }
        assert!(!gate.is_healthy());
        assert_eq!(gate.openings(), 1);

        redis.restart();
        wait_until_closed(&gate).await;
        // A new, empty Redis: the gate reads it again, one GET per read.
        assert_eq!(calls(&redis, &["get"]).await[0], 0);
        assert_eq!(gate.get("mine").await, Ok(None));
        assert_eq!(gate.get("theirs").await, Ok(None));
        assert_eq!(calls(&redis, &["get"]).await[0], 2);
        assert_eq!(gate.openings(), 1);
    }

    #[tokio::test]
    async fn fail_closed_answers_closed_at_once_and_probes_on_the_gates_clock() {
        let mut redis = RedisServer::start();
        let hold = Duration::from_secs(2);
        // Nothing waits on this clock unless the test moves it: not the answers, not the
        // probe.
        let clock = ManualClock::new(SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000));
        let gate = RedisGate::builder(redis.url())
            .timeout(TIMEOUT)
            .on_failure(FailureMode::FailClosed { hold })
            .clock(clock.clone())
            .build()
            .expect("gate");
        assert_eq!(gate.get("api").await, Ok(None));

        // A refused connection fails without a timeout.
        redis.stop();
        let closed = Ok(Some(NotBefore::Instant(clock.now() + hold)));
        assert_eq!(gate.get("api").await, closed);
        assert!(!gate.is_healthy());
        for _ in 0..CALLS {
            assert_eq!(gate.get("api").await, closed);
        }
        assert_eq!(
            gate.try_get("api").await.expect_err("open").kind(),
            ErrorKind::CircuitOpen
        );

        redis.restart();
        // Back on its port (the restart's own readiness check is one PING), but not probed
        // before the gate's clock says so.
        let pings = calls(&redis, &["ping"]).await[0];
        sleep(Duration::from_millis(300)).await;
        assert!(!gate.is_healthy());
        assert_eq!(calls(&redis, &["ping"]).await[0], pings);
        // Each step lets the next probe go out.
        for _ in 0..100 {
            if gate.is_healthy() {
                break;
            }
            clock.advance(Duration::from_secs(5));
            sleep(Duration::from_millis(50)).await;
        }
        assert!(gate.is_healthy(), "the circuit never closed");
        assert!(calls(&redis, &["ping"]).await[0] > pings);
        assert_eq!(gate.get("api").await, Ok(None));
        assert_eq!(gate.openings(), 1);
    }
}

/// How many round trips to Redis the gate costs, counted by Redis itself.
mod round_trips {
    use super::*;

    #[tokio::test]
    async fn a_check_is_one_get_and_a_raise_one_script() {
        let redis = RedisServer::start();
        let store = RedisGate::builder(redis.url()).build().expect("gate");
        // The connection and the script are set up once per process, not per call.
        store
            .try_raise("warm", TokioClock.wall_now())
            .await
            .expect("warm up");
        let gate = Gate::new(store);
        let names = ["get", "evalsha", "eval", "script|load"];
        let before = calls(&redis, &names).await;

        for i in 0..10 {
            let until = TokioClock.now() + Duration::from_secs(60);
            gate.raise(
                &format!("api-{i}"),
                until,
                TokioClock.wall_now() + Duration::from_secs(60),
            )
            .await
            .expect("raise");
        }
        for i in 0..100 {
            gate.admit_at(&format!("api-{}", i % 20), &TokioClock)
                .await
                .expect("check");
        }

        let after = calls(&redis, &names).await;
        let sent: Vec<u64> = after.iter().zip(&before).map(|(a, b)| a - b).collect();
        // 100 checks, one GET each; 10 raises, one EVALSHA each, whose script reads the key
        // with a GET of its own (Redis counts it with the others): 110 GETs, not 120.
        assert_eq!(sent, [110, 10, 0, 0], "GET, EVALSHA, EVAL, SCRIPT LOAD");
    }
}

/// Four processes share one key: one learns `Retry-After: 2`, and none of them calls the
/// server again before the permitted time.
mod fleet {
    use super::*;

    const URL: &str = "HOLDOFF_REDIS_TEST_URL";
    const TARGET: &str = "HOLDOFF_REDIS_TEST_TARGET";

    /// The worker: one call through a `Retrier` with the Redis gate. It runs only when the
    /// `fleet` test starts this test binary as a child process with the variables set.
    #[tokio::test]
    async fn worker_process() {
        let (Ok(url), Ok(target)) = (std::env::var(URL), std::env::var(TARGET)) else {
            return;
        };
        let store = RedisGate::builder(url).build().expect("gate");
        let gate = Arc::new(Gate::new(store));
        let (outcome, _report) =
            Retrier::<_, _, std::io::Error>::new(Policy::default(), http::Method::GET)
                .gate(gate, "fleet-key")
                .run(|_| get(&target))
                .await;
        assert!(outcome.is_success(), "worker did not get through");
    }

    /// A minimal HTTP/1.1 GET of `/x`, one connection per request.
    async fn get(addr: &str) -> Result<http::Response<()>, std::io::Error> {
        let mut stream = tokio::net::TcpStream::connect(addr).await?;
        stream
            .write_all(
                format!("GET /x HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n").as_bytes(),
            )
            .await?;
        let mut raw = Vec::new();
        stream.read_to_end(&mut raw).await?;
        let text = String::from_utf8_lossy(&raw);
        let head = text.split("\r\n\r\n").next().unwrap_or_default();
        let mut lines = head.split("\r\n");
        let status: u16 = lines
            .next()
            .and_then(|l| l.split(' ').nth(1))
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| std::io::Error::other("no status line"))?;
        let mut response = http::Response::builder().status(status);
        for line in lines {
            if let Some((name, value)) = line.split_once(':') {
                response = response.header(name.trim(), value.trim());
            }
        }
        response.body(()).map_err(std::io::Error::other)
    }

    fn spawn_worker(redis: &RedisServer, server: &TestServer) -> tokio::process::Child {
        tokio::process::Command::new(std::env::current_exe().expect("test binary"))
            .args(["fleet::worker_process", "--exact", "--test-threads=1"])
            .env(URL, redis.url())
            .env(TARGET, server.addr().to_string())
            .stdout(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("spawn worker")
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn no_worker_calls_before_the_permitted_time() {
        let redis = RedisServer::start();
        let server = TestServer::start().await;
        server.script("/x", [Reply::too_many_requests("2")]);
        server.set_default("/x", Reply::ok("ok"));
        let watcher = RedisGate::builder(redis.url()).build().expect("gate");

        // The first worker meets the 429 and closes the gate for everyone...
        let mut workers = vec![spawn_worker(&redis, &server)];
        let started = TokioClock.now();
        while watcher.try_get("fleet-key").await.expect("get").is_none() {
            assert!(
                TokioClock.now() - started < Duration::from_secs(20),
                "gate never closed"
            );
            sleep(Duration::from_millis(10)).await;
        }
        // ...and the other three start while it is closed.
        workers.extend((0..3).map(|_| spawn_worker(&redis, &server)));
        for mut worker in workers {
            let status = tokio::time::timeout(Duration::from_secs(30), worker.wait())
                .await
                .expect("worker finished in time")
                .expect("worker status");
            assert!(status.success(), "worker failed: {status}");
        }

        let requests = server.requests_to("/x");
        assert_eq!(requests.len(), 5, "one 429, then one success per worker");
        // The 429 left the server after its request arrived, so arrival + 2 s is no later
        // than the permitted time.
        let permitted = requests[0].at + Duration::from_secs(2);
        for request in &requests[1..] {
            assert!(
                request.at >= permitted,
                "a request came {:?} early",
                permitted - request.at
            );
        }
    }
}
