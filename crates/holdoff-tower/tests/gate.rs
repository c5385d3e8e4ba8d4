//! The gate, cancellation and the deadline, with concurrent requests: a `ManualClock` shared
//! by the policy and the server, so that time moves only when the test says, however the
//! socket I/O is scheduled. Real time serves only as a guard that a step finishes.

mod common;

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use common::{PATIENCE, client, get, plain};
use holdoff::clock::{Clock, ManualClock};
use holdoff::gate::Gate;
use holdoff::{Jitter, Reason};
use holdoff_testkit::{Reply, TestServer};
use holdoff_tower::{RetryPolicy, RetryReport};
use http::Response;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use tokio::task::JoinHandle;
use tower::ServiceExt;
use tower::retry::Retry;

type Service = Retry<RetryPolicy<ManualClock>, Client<HttpConnector, Full<Bytes>>>;

fn manual_clock() -> ManualClock {
    ManualClock::new(UNIX_EPOCH + Duration::from_secs(1_700_000_000))
}

/// Waits (in real time, at most [`PATIENCE`]) until `ready` holds.
async fn until(what: &str, mut ready: impl FnMut() -> bool) {
    let polled = async {
        while !ready() {
            tokio::task::yield_now().await;
        }
    };
    tokio::time::timeout(PATIENCE, polled)
        .await
        .unwrap_or_else(|_| panic!("timed out waiting until {what}"));
}

fn spawn_get(service: &Service, url: String) -> JoinHandle<Response<Incoming>> {
    let service = service.clone();
    tokio::spawn(async move { service.oneshot(get(&url)).await.expect("a response") })
}

async fn finish<T>(task: impl Future<Output = Result<T, tokio::task::JoinError>>) -> T {
    tokio::time::timeout(PATIENCE, task)
        .await
        .expect("finished in time")
        .expect("the task did not panic")
}

mod gate {
    use super::*;

    #[tokio::test]
    async fn a_hint_holds_other_requests_to_the_same_host() {
        let clock = manual_clock();
        let server = TestServer::start_with_clock(clock.clone()).await;
        server.script("/a", [Reply::unavailable("5")]);
        server.script("/b", [Reply::unavailable("1")]);
        let gate = Arc::new(Gate::in_memory().spread(Jitter::None));
        let policy = RetryPolicy::new(plain())
            .clock(clock.clone())
            .gate(Arc::clone(&gate));
        let service = Retry::new(policy, client());
        let key = holdoff::gate::key_of(&server.url("/").parse().expect("uri")).expect("key");

        // /a learns "not before 5 s" for the host and waits for it.
        let a = spawn_get(&service, server.url("/a"));
        until("/a waits", || clock.sleepers() == 1).await;
        let opens = server.requests_to("/a")[0].at + Duration::from_secs(5);
        assert_eq!(gate.store().get_now(&key), Some(opens));
        // /b, on the same host, is told 1 s, but the gate holds it until /a's time.
        let b = spawn_get(&service, server.url("/b"));
        until("/b waits", || clock.sleepers() == 2).await;
        assert_eq!(clock.next_deadline(), Some(opens));

        clock.advance(Duration::from_secs(1));
        assert_eq!(clock.sleepers(), 2, "the gate, not /b's own hint, decides");
        clock.advance(Duration::from_secs(4));
        let (a, b) = (finish(a).await, finish(b).await);

        assert_eq!((a.status().as_u16(), b.status().as_u16()), (200, 200));
        assert_eq!(server.requests_to("/a")[1].at, opens);
        assert_eq!(server.requests_to("/b")[1].at, opens);
        let report = b.extensions().get::<RetryReport>().expect("a report");
        assert_eq!((report.attempts, report.reason()), (2, Reason::Success));
    }

    #[tokio::test]
    async fn a_retry_the_gate_would_hold_past_the_deadline_is_deferred() {
        let clock = manual_clock();
        let server = TestServer::start_with_clock(clock.clone()).await;
        server.script("/b", [Reply::unavailable("1")]);
        let gate = Arc::new(Gate::in_memory().spread(Jitter::None));
        let key = holdoff::gate::key_of(&server.url("/").parse().expect("uri")).expect("key");
        // Another task learned "not before 60 s" for this host.
        let opens = clock.now() + Duration::from_secs(60);
        gate.raise(&key, opens, clock.wall_now() + Duration::from_secs(60))
            .await
            .expect("in memory");
        let policy = RetryPolicy::new(plain())
            .clock(clock.clone())
            .gate(gate)
            .timeout(Duration::from_secs(30));
        let service = Retry::new(policy, client());

        let response = finish(spawn_get(&service, server.url("/b"))).await;

        assert_eq!(response.status(), 503);
        assert_eq!(server.requests_to("/b").len(), 1);
        let report = response.extensions().get::<RetryReport>().expect("report");
        assert_eq!(report.reason(), Reason::DeadlineExceeded);
        assert_eq!(report.permitted.expect("a hint").at, Some(opens));
        assert_eq!(
            report.permitted.expect("a hint").after,
            Duration::from_secs(60)
        );
        let wall = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_060);
        assert_eq!(report.permitted.expect("a hint").wall, Some(wall));
    }
}

mod cancellation {
    use super::*;

    #[tokio::test]
    async fn dropping_the_response_future_ends_the_wait_at_once() {
        let clock = manual_clock();
        let server = TestServer::start_with_clock(clock.clone()).await;
        server.script("/v1/items", [Reply::unavailable("3600")]);
        // An hour is past the default `max_wait`: lift it to wait that long.
        let policy = RetryPolicy::new(plain().with_max_wait(None)).clock(clock.clone());
        let service = Retry::new(policy, client());
        let start = clock.now();

        let call = spawn_get(&service, server.url("/v1/items"));
        until("the hour-long wait begins", || clock.sleepers() == 1).await;
        assert_eq!(
            clock.next_deadline(),
            Some(start + Duration::from_secs(3600))
        );
        call.abort();
        let aborted = tokio::time::timeout(PATIENCE, call).await.expect("ended");
        assert!(aborted.expect_err("aborted").is_cancelled());

        assert_eq!(clock.sleepers(), 0, "the wait is gone");
        assert_eq!(clock.now(), start, "without any time passing");
        clock.advance(Duration::from_secs(3600));
        assert_eq!(server.requests_to("/v1/items").len(), 1);
    }
}

mod deadline {
    use super::*;
    use holdoff_tower::ErrorKind;

    /// The deadline is a sleep on the policy's clock, like every wait: on a manual clock, the
    /// attempt is cut when the test moves the clock to it, and not before.
    #[tokio::test]
    async fn the_layer_cuts_an_attempt_when_the_clock_reaches_the_deadline() {
        let clock = manual_clock();
        let server = TestServer::start_with_clock(clock.clone()).await;
        server.script("/slow", [Reply::ok("late").delay(Duration::from_secs(10))]);
        let policy = RetryPolicy::new(plain())
            .clock(clock.clone())
            .timeout(Duration::from_secs(5));
        let service = holdoff_tower::Retry::new(policy, client());
        let start = clock.now();
        let url = server.url("/slow");
        let call = tokio::spawn(async move { service.oneshot(get(&url)).await });

        // The server's 10 s answer and the 5 s deadline both wait on the manual clock.
        until("the attempt is out", || clock.sleepers() == 2).await;
        clock.advance(Duration::from_secs(4));
        assert!(!call.is_finished(), "not cut before the deadline");
        clock.advance(Duration::from_secs(1));
        let error = finish(call).await.expect_err("cut at the deadline");

        assert_eq!(error.kind(), ErrorKind::DeadlineReached);
        assert_eq!(
            (error.report().attempts, error.report().reason()),
            (1, Reason::DeadlineReached)
        );
        assert_eq!(clock.now(), start + Duration::from_secs(5));
        assert_eq!(server.requests_to("/slow").len(), 1);
    }
}
