//! `RedisState` against a real `redis-server` that each test starts on a free loopback port.

use std::time::Duration;

use holdoff::clock::{Clock, SystemClock, TokioClock};
use holdoff_proxy::fault::{Algorithm, Limit, Taken};
use holdoff_proxy::judge::{Judge, KeyMode, KeyParts, Penalty, WindowKey};
use holdoff_proxy::shared::{CounterKey, SharedCheck, SharedState, StateError};
use holdoff_redis::{ErrorKind, RedisState};
use holdoff_testkit::redis::{RedisServer, inspect, silent_server};

mod support;
use support::{Stopped, calls};

const S: Duration = Duration::from_secs(1);
const MS: Duration = Duration::from_millis(1);
/// Long enough that a fixed window aligned to the epoch does not end mid-test (it could, if
/// the test ran across midnight UTC, a chance of about one in ten million).
const DAY: Duration = Duration::from_secs(86_400);

/// The window key of `url` (one judge per test, so keys agree within it).
fn key(judge: &Judge, url: &str) -> WindowKey {
    judge.key(&KeyParts {
        client: "client",
        method: "GET",
        url,
        origin: "https://api.example",
        header: None,
    })
}

fn judge() -> Judge {
    Judge::new(KeyMode::Url, SystemClock.now())
}

fn counter(scope: &str) -> CounterKey {
    CounterKey {
        rule: "0123456789abcdef0123456789abcdef".to_owned(),
        scope: scope.to_owned(),
    }
}

fn limit(algorithm: Algorithm, limit: u64, window: Duration, cost: u64) -> Limit {
    Limit {
        algorithm,
        limit,
        window,
        cost,
    }
}

async fn sleep(by: Duration) {
    TokioClock.sleep_until(TokioClock.now() + by).await;
}

async fn exists(redis: &RedisServer, key: &str) -> bool {
    let n: i64 = redis::cmd("EXISTS")
        .arg(key)
        .query_async(&mut inspect(redis).await)
        .await
        .expect("EXISTS");
    n == 1
}

/// The key's time to live in milliseconds (-2: no key, -1: no expiry).
async fn pttl(redis: &RedisServer, key: &str) -> i64 {
    redis::cmd("PTTL")
        .arg(key)
        .query_async(&mut inspect(redis).await)
        .await
        .expect("PTTL")
}

async fn dbsize(redis: &RedisServer) -> i64 {
    redis::cmd("DBSIZE")
        .query_async(&mut inspect(redis).await)
        .await
        .expect("DBSIZE")
}

fn kind(error: &StateError) -> ErrorKind {
    error
        .downcast_ref::<holdoff_redis::Error>()
        .expect("a holdoff_redis::Error")
        .kind()
}

mod window {
    use super::*;

    #[tokio::test]
    async fn a_check_before_the_permitted_time_is_premature_and_keeps_it() {
        let redis = RedisServer::start();
        let state = RedisState::builder(redis.url()).build().expect("state");
        let key = key(&judge(), "https://api.example/a");
        state.open(key, 5 * S, 60 * S).await.expect("open");

        let SharedCheck::Premature {
            since_throttle,
            early_by,
            permitted_in,
        } = state.check(key, Penalty::None).await.expect("check")
        else {
            panic!("expected premature");
        };
        assert!(since_throttle < S, "{since_throttle:?}");
        assert!(early_by > 4 * S && early_by <= 5 * S, "{early_by:?}");
        assert_eq!(permitted_in, early_by);
        assert_eq!(early_by + since_throttle, 5 * S);

        let name = state.window_key(key);
        assert!(exists(&redis, &name).await);
        // The permitted time plus the retention, in milliseconds, rounded up.
        let ttl = pttl(&redis, &name).await;
        assert!(ttl > 64_000 && ttl <= 65_001, "PTTL {ttl}");
    }

    #[tokio::test]
    async fn a_check_at_or_after_the_permitted_time_is_compliant_and_deletes_it() {
        let redis = RedisServer::start();
        let state = RedisState::builder(redis.url()).build().expect("state");
        let key = key(&judge(), "https://api.example/a");
        state.open(key, 30 * MS, 60 * S).await.expect("open");
        sleep(50 * MS).await;

        let SharedCheck::Compliant {
            since_throttle,
            late_by,
        } = state.check(key, Penalty::None).await.expect("check")
        else {
            panic!("expected compliant");
        };
        assert!(
            since_throttle >= 50 * MS && since_throttle < S,
            "{since_throttle:?}"
        );
        assert_eq!(since_throttle, 30 * MS + late_by);
        assert!(!exists(&redis, &state.window_key(key)).await);
        assert_eq!(
            state.check(key, Penalty::None).await.expect("check"),
            SharedCheck::Open
        );
    }

    #[tokio::test]
    async fn a_check_without_a_window_is_open_and_writes_nothing() {
        let redis = RedisServer::start();
        let state = RedisState::builder(redis.url()).build().expect("state");
        let key = key(&judge(), "https://api.example/a");
        assert_eq!(
            state.check(key, Penalty::Sliding).await.expect("check"),
            SharedCheck::Open
        );
        assert_eq!(dbsize(&redis).await, 0);
    }

    #[tokio::test]
    async fn reopening_keeps_the_later_permitted_time() {
        let redis = RedisServer::start();
        let state = RedisState::builder(redis.url()).build().expect("state");
        let key = key(&judge(), "https://api.example/a");
        let early_by = async || match state.check(key, Penalty::None).await.expect("check") {
            SharedCheck::Premature { early_by, .. } => early_by,
            other => panic!("expected premature, not {other:?}"),
        };

        state.open(key, 10 * S, 60 * S).await.expect("open");
        state.open(key, 2 * S, 60 * S).await.expect("open");
        let left = early_by().await;
        assert!(left > 9 * S && left <= 10 * S, "{left:?}");

        state.open(key, 20 * S, 60 * S).await.expect("open");
        let left = early_by().await;
        assert!(left > 19 * S && left <= 20 * S, "{left:?}");
        let ttl = pttl(&redis, &state.window_key(key)).await;
        assert!(ttl > 79_000 && ttl <= 80_001, "PTTL {ttl}");
    }

    #[tokio::test]
    async fn a_sliding_penalty_restarts_the_full_wait_from_the_premature_request() {
        let redis = RedisServer::start();
        let state = RedisState::builder(redis.url()).build().expect("state");
        let key = key(&judge(), "https://api.example/a");
        state.open(key, 5 * S, 60 * S).await.expect("open");
        sleep(30 * MS).await;

        let SharedCheck::Premature {
            since_throttle,
            early_by,
            permitted_in,
        } = state.check(key, Penalty::Sliding).await.expect("check")
        else {
            panic!("expected premature");
        };
        assert!(since_throttle >= 30 * MS, "{since_throttle:?}");
        assert_eq!(early_by, 5 * S - since_throttle);
        // The whole wait again, from this request: later than before.
        assert_eq!(permitted_in, 5 * S);
        // Its retention runs from the new permitted time.
        let ttl = pttl(&redis, &state.window_key(key)).await;
        assert!(ttl > 64_900 && ttl <= 65_001, "PTTL {ttl}");

        // The window now counts from the premature request.
        let SharedCheck::Premature { since_throttle, .. } =
            state.check(key, Penalty::None).await.expect("check")
        else {
            panic!("expected premature");
        };
        assert!(since_throttle < 30 * MS, "{since_throttle:?}");
    }

    #[tokio::test]
    async fn no_penalty_keeps_the_permitted_time() {
        let redis = RedisServer::start();
        let state = RedisState::builder(redis.url()).build().expect("state");
        let key = key(&judge(), "https://api.example/a");
        state.open(key, 5 * S, 60 * S).await.expect("open");
        let first = state.check(key, Penalty::None).await.expect("check");
        let second = state.check(key, Penalty::None).await.expect("check");
        let (
            SharedCheck::Premature {
                since_throttle: a, ..
            },
            SharedCheck::Premature {
                since_throttle: b,
                early_by,
                permitted_in,
            },
        ) = (first, second)
        else {
            panic!("expected premature twice");
        };
        assert!(b >= a);
        assert_eq!(permitted_in, early_by);
        assert_eq!(b + early_by, 5 * S);
    }
}

mod take {
    use super::*;
    use test_case::test_case;

    /// Takes `n` in a row and returns them.
    async fn takes(state: &RedisState, counter: &CounterKey, limit: Limit, n: usize) -> Vec<Taken> {
        let mut taken = Vec::new();
        for _ in 0..n {
            taken.push(state.take(counter, limit).await.expect("take"));
        }
        taken
    }

    #[test_case(Algorithm::FixedWindow; "fixed window")]
    #[test_case(Algorithm::FixedFromFirstRequest; "fixed window from the first request")]
    #[test_case(Algorithm::SlidingWindow; "sliding window")]
    #[test_case(Algorithm::TokenBucket; "token bucket")]
    #[tokio::test]
    async fn admits_exactly_the_limit_in_a_burst(algorithm: Algorithm) {
        let redis = RedisServer::start();
        let state = RedisState::builder(redis.url()).build().expect("state");
        let window = DAY;
        let limit = limit(algorithm, 5, window, 1);
        let counter = counter("alice");

        let taken = takes(&state, &counter, limit, 6).await;
        let remaining: Vec<u64> = taken.iter().map(|t| t.remaining).collect();
        assert_eq!(remaining, [4, 3, 2, 1, 0, 0]);
        assert!(
            taken[..5]
                .iter()
                .all(|t| t.allowed && t.retry_after.is_none())
        );
        let refused = taken[5];
        assert!(!refused.allowed);
        let retry_after = refused.retry_after.expect("a wait");
        assert!(retry_after > Duration::ZERO);
        assert!(refused.reset <= window);
        match algorithm {
            // Until the window ends.
            Algorithm::FixedWindow => assert_eq!(retry_after, refused.reset),
            // Until the window the first request started ends: a whole window from it.
            Algorithm::FixedFromFirstRequest => {
                assert_eq!(taken[0].reset, window);
                assert_eq!(retry_after, refused.reset);
            }
            // Into the next window, until 5 × (window − t) / window ≤ 4: a fifth of it.
            Algorithm::SlidingWindow => assert_eq!(retry_after, refused.reset + window / 5),
            // One token, refilled at 5 an hour.
            _ => assert!(retry_after <= window / 5 && retry_after > window / 5 - S),
        }

        let ttl = pttl(&redis, &state.counter_key(&counter)).await;
        let most = match algorithm {
            Algorithm::SlidingWindow => 2 * window,
            _ => window,
        };
        assert!(ttl > 0 && ttl <= most.as_millis() as i64 + 1, "PTTL {ttl}");
    }

    #[test_case(Algorithm::FixedWindow; "fixed window")]
    #[test_case(Algorithm::FixedFromFirstRequest; "fixed window from the first request")]
    #[test_case(Algorithm::SlidingWindow; "sliding window")]
    #[test_case(Algorithm::TokenBucket; "token bucket")]
    #[tokio::test]
    async fn counts_the_cost_of_each_request(algorithm: Algorithm) {
        let redis = RedisServer::start();
        let state = RedisState::builder(redis.url()).build().expect("state");
        let limit = limit(algorithm, 10, DAY, 3);
        let taken = takes(&state, &counter(""), limit, 4).await;
        let seen: Vec<(bool, u64)> = taken.iter().map(|t| (t.allowed, t.remaining)).collect();
        assert_eq!(seen, [(true, 7), (true, 4), (true, 1), (false, 1)]);
    }

    #[test_case(Algorithm::FixedWindow, 60 * MS; "fixed window")]
    #[test_case(Algorithm::SlidingWindow, 60 * MS; "sliding window")]
    #[test_case(Algorithm::TokenBucket, 100 * MS; "token bucket")]
    #[tokio::test]
    async fn waiting_the_retry_after_is_enough(algorithm: Algorithm, window: Duration) {
        let redis = RedisServer::start();
        let state = RedisState::builder(redis.url()).build().expect("state");
        let limit = limit(algorithm, 2, window, 1);
        let counter = counter("");
        let mut taken = takes(&state, &counter, limit, 3).await;
        // A burst that straddled a window edge is admitted again: take until refused.
        while taken.last().is_some_and(|t| t.allowed) {
            taken.push(state.take(&counter, limit).await.expect("take"));
        }
        let wait = taken.last().and_then(|t| t.retry_after).expect("refused");
        assert!(wait <= 2 * window, "{wait:?}");
        sleep(wait).await;
        assert!(state.take(&counter, limit).await.expect("take").allowed);
    }

    #[test_case(0, S, 1; "a zero limit")]
    #[test_case(5, Duration::ZERO, 1; "a zero window")]
    #[test_case(2, S, 3; "a cost above the limit")]
    #[tokio::test]
    async fn what_never_fits_is_refused_without_asking_redis(
        count: u64,
        window: Duration,
        cost: u64,
    ) {
        let mut redis = RedisServer::start();
        let state = RedisState::builder(redis.url()).build().expect("state");
        redis.stop();
        for algorithm in [
            Algorithm::FixedWindow,
            Algorithm::SlidingWindow,
            Algorithm::TokenBucket,
        ] {
            let taken = state
                .take(&counter(""), limit(algorithm, count, window, cost))
                .await
                .expect("no round trip");
            assert!(!taken.allowed);
            assert_eq!(taken.remaining, 0);
            assert_eq!(taken.retry_after, Some(window.max(S)));
        }
    }

    #[tokio::test]
    async fn counts_scopes_apart() {
        let redis = RedisServer::start();
        let state = RedisState::builder(redis.url()).build().expect("state");
        let limit = limit(Algorithm::FixedWindow, 1, DAY, 1);
        assert!(
            state
                .take(&counter("alice"), limit)
                .await
                .expect("take")
                .allowed
        );
        assert!(
            state
                .take(&counter("bob"), limit)
                .await
                .expect("take")
                .allowed
        );
        assert!(
            !state
                .take(&counter("alice"), limit)
                .await
                .expect("take")
                .allowed
        );
        assert_eq!(
            state.counter_key(&counter("bob")),
            "holdoff:rl:0123456789abcdef0123456789abcdef:bob"
        );
    }
}

/// Four replicas, each with its own store and connection, take from one counter at once.
mod replicas {
    use super::*;
    use test_case::test_case;

    #[test_case(Algorithm::FixedWindow; "fixed window")]
    #[test_case(Algorithm::SlidingWindow; "sliding window")]
    #[test_case(Algorithm::TokenBucket; "token bucket")]
    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn admit_exactly_the_limit_together(algorithm: Algorithm) {
        let redis = RedisServer::start();
        let replicas: Vec<RedisState> = (0..4)
            .map(|_| RedisState::builder(redis.url()).build().expect("state"))
            .collect();
        let limit = limit(algorithm, 50, DAY, 1);
        let tasks: Vec<_> = (0..200)
            .map(|i| {
                let state = replicas[i % 4].clone();
                tokio::spawn(async move { state.take(&counter("shared"), limit).await })
            })
            .collect();
        let mut remaining = Vec::new();
        for task in tasks {
            let taken = task.await.expect("task").expect("take");
            if taken.allowed {
                remaining.push(taken.remaining);
            }
        }
        // Each admission saw the one before it: 49, 48, …, 0, once each.
        remaining.sort_unstable();
        assert_eq!(remaining, (0..50).collect::<Vec<u64>>());
    }
}

mod password {
    use super::*;

    #[tokio::test]
    async fn is_used_and_never_shown() {
        let redis = RedisServer::start_with(&["--requirepass", "hunter2"]);
        let url = format!("redis://:hunter2@127.0.0.1:{}/0", redis.port());
        let state = RedisState::builder(&url).build().expect("state");
        let key = key(&judge(), "https://api.example/a");
        state.open(key, S, S).await.expect("authenticated");
        assert!(matches!(
            state.check(key, Penalty::None).await,
            Ok(SharedCheck::Premature { .. })
        ));

        assert_eq!(
            state.location(),
            format!("redis://:***@127.0.0.1:{}/0", redis.port())
        );
        assert!(!format!("{state:?}").contains("hunter2"));
        assert!(!format!("{:?}", RedisState::builder(&url)).contains("hunter2"));

        let wrong =
            RedisState::builder(format!("redis://:wrong-pass@127.0.0.1:{}/0", redis.port()))
                .build()
                .expect("state");
        let error = wrong
            .check(key, Penalty::None)
            .await
            .expect_err("wrong password");
        let mut text = format!("{error} {error:?}");
        let mut source = error.source();
        while let Some(cause) = source {
            text += &cause.to_string();
            source = cause.source();
        }
        assert!(!text.contains("wrong-pass"), "{text}");
    }
}

mod prefix {
    use super::*;

    #[tokio::test]
    async fn keeps_stores_apart() {
        let redis = RedisServer::start();
        let a = RedisState::builder(redis.url())
            .prefix("a:")
            .build()
            .expect("state");
        let b = RedisState::builder(redis.url())
            .prefix("b:")
            .build()
            .expect("state");
        let key = key(&judge(), "https://api.example/a");
        a.open(key, 5 * S, S).await.expect("open");
        assert_eq!(
            b.check(key, Penalty::None).await.expect("check"),
            SharedCheck::Open
        );
        assert!(matches!(
            a.check(key, Penalty::None).await,
            Ok(SharedCheck::Premature { .. })
        ));
        assert_eq!(a.window_key(key), format!("a:w:{key}"));

        let limit = limit(Algorithm::TokenBucket, 1, 3_600 * S, 1);
        assert!(a.take(&counter(""), limit).await.expect("take").allowed);
        assert!(b.take(&counter(""), limit).await.expect("take").allowed);
    }
}

mod redis_down {
    use super::*;

    /// Polls until `state` reaches Redis again: recovery must come without help.
    async fn wait_until_reachable(state: &RedisState, key: WindowKey) {
        let started = TokioClock.now();
        while state.check(key, Penalty::None).await.is_err() {
            assert!(TokioClock.now() - started < 10 * S, "no recovery");
            sleep(50 * MS).await;
        }
    }

    #[tokio::test]
    async fn fails_fast_and_recovers_by_itself_after_a_restart() {
        let mut redis = RedisServer::start();
        let state = RedisState::builder(redis.url())
            .timeout(200 * MS)
            .build()
            .expect("state");
        let key = key(&judge(), "https://api.example/a");
        state.open(key, 30 * S, S).await.expect("open");

        redis.stop();
        let started = TokioClock.now();
        let error = state.check(key, Penalty::None).await.expect_err("down");
        assert!(TokioClock.now() - started < 2 * S);
        assert!(
            matches!(kind(&error), ErrorKind::Connection | ErrorKind::Timeout),
            "{error:?}"
        );
        let limit = limit(Algorithm::FixedWindow, 1, S, 1);
        assert!(state.take(&counter(""), limit).await.is_err());

        redis.restart();
        wait_until_reachable(&state, key).await;
        // A new, empty Redis (nothing is saved), without the scripts: they load again.
        assert_eq!(
            state.check(key, Penalty::None).await.expect("check"),
            SharedCheck::Open
        );
        state.open(key, 30 * S, S).await.expect("open");
        assert!(state.take(&counter(""), limit).await.expect("take").allowed);
    }

    #[tokio::test]
    async fn a_store_built_while_redis_is_down_connects_once_it_is_up() {
        let mut redis = RedisServer::start();
        redis.stop();
        let state = RedisState::builder(redis.url())
            .timeout(200 * MS)
            .build()
            .expect("built without connecting");
        let key = key(&judge(), "https://api.example/a");
        let started = TokioClock.now();
        assert!(state.open(key, S, S).await.is_err());
        assert!(TokioClock.now() - started < 2 * S);

        redis.restart();
        wait_until_reachable(&state, key).await;
    }

    #[tokio::test]
    async fn times_out_instead_of_hanging_on_a_silent_server() {
        let (url, _held) = silent_server().await;
        let state = RedisState::builder(url)
            .timeout(200 * MS)
            .build()
            .expect("state");
        let key = key(&judge(), "https://api.example/a");
        let started = TokioClock.now();
        let error = state
            .check(key, Penalty::None)
            .await
            .expect_err("no answer");
        assert_eq!(kind(&error), ErrorKind::Timeout);
        assert!(TokioClock.now() - started < 2 * S);
    }
}

/// After one failure the store stops asking Redis, failing at once, so that the proxy answers
/// by its failure mode without waiting; a probe in the background brings it back.
mod breaker {
    use super::*;

    use std::net::{Ipv4Addr, SocketAddr};
    use std::sync::Arc;

    use holdoff_proxy::JudgeStage;
    use holdoff_proxy::shared::{Circuit, OnFailure, SharedStore};
    use holdoff_proxy::{ProxyConfig, ProxyServer, Stage};
    use holdoff_testkit::{Reply, TestServer};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    const TIMEOUT: Duration = Duration::from_millis(150);
    const CALLS: usize = 50;

    /// Waits (in real time, briefly each) until a probe has closed the circuit: it must
    /// close without help.
    async fn wait_until_closed(state: &RedisState) {
        for _ in 0..200 {
            if !state.is_open() {
                return;
            }
            sleep(50 * MS).await;
        }
        panic!("the circuit never closed");
    }

    fn store(state: &RedisState, on_failure: OnFailure) -> Arc<SharedStore> {
        Arc::new(SharedStore::new(Arc::new(state.clone()), on_failure))
    }

    /// `CALLS` checks and takes: each fails at once, as refused by the open circuit, and the
    /// store answers none of them.
    async fn refused(store: &SharedStore, key: WindowKey) {
        let limit = limit(Algorithm::FixedWindow, 10, DAY, 1);
        for _ in 0..CALLS {
            let outcome = store.state().check(key, Penalty::None).await;
            let error = outcome.as_ref().expect_err("open");
            assert_eq!(kind(error), ErrorKind::CircuitOpen);
            assert_eq!(store.settle(outcome), None);
            let outcome = store.state().take(&counter(""), limit).await;
            assert_eq!(
                kind(outcome.as_ref().expect_err("open")),
                ErrorKind::CircuitOpen
            );
            assert_eq!(store.settle(outcome), None);
        }
    }

    #[tokio::test]
    async fn a_hung_redis_is_asked_once_and_used_again_once_it_resumes() {
        let redis = RedisServer::start();
        let state = RedisState::builder(redis.url())
            .timeout(TIMEOUT)
            .build()
            .expect("state");
        let store = store(&state, OnFailure::FailOpen);
        let key = key(&judge(), "https://api.example/a");
        state.open(key, 30 * S, S).await.expect("open");
        let names = ["exists", "evalsha", "eval"];
        let before = calls(&redis, &names).await;

        let stopped = Stopped::stop(&redis).await;
        let outcome = store.state().check(key, Penalty::None).await;
        assert_eq!(
            kind(outcome.as_ref().expect_err("hung")),
            ErrorKind::Timeout
        );
        assert_eq!(store.settle(outcome), None);
        refused(&store, key).await;
        let open = Circuit {
            open: true,
            openings: 1,
        };
        assert_eq!(store.circuit(), Some(open));
        assert!(!store.is_up());
        assert_eq!(store.failures(), 1 + 2 * CALLS as u64);

        stopped.resume();
        wait_until_closed(&state).await;
        assert!(store.is_up());
        // What was sent while it hung has been served now: of 101 operations, one reached
        // it (the first check's EXISTS), and no script.
        let after = calls(&redis, &names).await;
        assert_eq!(after, [before[0] + 1, before[1], before[2]]);
        assert!(matches!(
            store.state().check(key, Penalty::None).await,
            Ok(SharedCheck::Premature { .. })
        ));
        assert_eq!(state.openings(), 1);
    }

    #[tokio::test]
    async fn a_killed_redis_is_not_asked_until_it_is_back_on_its_port() {
        let mut redis = RedisServer::start();
        let state = RedisState::builder(redis.url())
            .timeout(TIMEOUT)
            .build()
            .expect("state");
        let store = store(&state, OnFailure::FailOpen);
        let key = key(&judge(), "https://api.example/a");
        state.open(key, 30 * S, S).await.expect("open");

        redis.stop();
        let outcome = store.state().check(key, Penalty::None).await;
        let error = outcome.as_ref().expect_err("killed");
        assert!(
            matches!(kind(error), ErrorKind::Connection | ErrorKind::Timeout),
            "{error:?}"
        );
        assert_eq!(store.settle(outcome), None);
        refused(&store, key).await;
        assert!(state.is_open());
        assert_eq!(state.openings(), 1);

        redis.restart();
        wait_until_closed(&state).await;
        // A new, empty Redis: one EXISTS per check again.
        assert_eq!(calls(&redis, &["exists"]).await, [0]);
        assert_eq!(
            store
                .state()
                .check(key, Penalty::None)
                .await
                .expect("check"),
            SharedCheck::Open
        );
        assert_eq!(calls(&redis, &["exists"]).await, [1]);
        assert_eq!(state.openings(), 1);
    }

    /// One GET through the forward proxy at `proxy`: the status and the `Retry-After`.
    async fn get(proxy: SocketAddr, url: &str) -> (u16, Option<String>) {
        let mut stream = tokio::net::TcpStream::connect(proxy)
            .await
            .expect("connect");
        let host = url
            .strip_prefix("http://")
            .and_then(|rest| rest.split('/').next())
            .expect("an http:// url");
        let head = format!("GET {url} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n");
        stream.write_all(head.as_bytes()).await.expect("send");
        let mut raw = Vec::new();
        stream.read_to_end(&mut raw).await.expect("read");
        let text = String::from_utf8_lossy(&raw).into_owned();
        let mut lines = text.split("\r\n");
        let status = lines
            .next()
            .and_then(|line| line.split(' ').nth(1))
            .and_then(|code| code.parse().ok())
            .expect("a status line");
        let retry_after = lines.take_while(|line| !line.is_empty()).find_map(|line| {
            let (name, value) = line.split_once(':')?;
            name.eq_ignore_ascii_case("retry-after")
                .then(|| value.trim().to_owned())
        });
        (status, retry_after)
    }

    #[tokio::test]
    async fn a_proxy_failing_closed_refuses_at_once_without_asking_a_hung_redis() {
        let redis = RedisServer::start();
        let upstream = TestServer::start().await;
        upstream.set_default("/api", Reply::ok("hello"));
        let state = RedisState::builder(redis.url())
            .timeout(TIMEOUT)
            .build()
            .expect("state");
        let store = store(&state, OnFailure::FailClosed { hold: 7 * S });
        let judge = Judge::new(KeyMode::default(), TokioClock.now());
        let stage: Arc<dyn Stage> =
            Arc::new(JudgeStage::new(Arc::new(judge), Arc::new(TokioClock)).with_shared(store));
        let mut config = ProxyConfig::default();
        config.listen = SocketAddr::from((Ipv4Addr::LOCALHOST, 0));
        let server = ProxyServer::bind(config, vec![stage]).await.expect("bind");
        let (proxy, handle) = (server.local_addr(), server.shutdown_handle());
        let running = tokio::spawn(server.run());
        let url = upstream.url("/api");
        assert_eq!(get(proxy, &url).await, (200, None));
        let before = calls(&redis, &["exists"]).await[0];

        let stopped = Stopped::stop(&redis).await;
        for _ in 0..20 {
            assert_eq!(get(proxy, &url).await, (503, Some("7".to_owned())));
        }
        assert_eq!(upstream.requests_to("/api").len(), 1, "none was forwarded");
        assert!(state.is_open());

        stopped.resume();
        wait_until_closed(&state).await;
        assert_eq!(
            calls(&redis, &["exists"]).await[0],
            before + 1,
            "only the first request's check reached redis"
        );
        assert_eq!(get(proxy, &url).await, (200, None));
        assert_eq!(state.openings(), 1);
        handle.shutdown();
        running.await.expect("the proxy");
    }
}
