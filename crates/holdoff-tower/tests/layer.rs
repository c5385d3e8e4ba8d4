//! holdoff-tower's own `Retry` (through `RetryLayer`): the deadline bounds attempts as well
//! as waits, and every error carries the report. A real hyper-util client against a real
//! server on loopback, under tokio's paused time: every instant asserted is exact.

mod common;

use std::time::Duration;

use common::{client, get, plain, post};
use holdoff::clock::{Clock, TokioClock};
use holdoff::{Backoff, Decision, DeferReason, Reason, Requeue};
use holdoff_testkit::{Reply, TestServer};
use holdoff_tower::{ErrorKind, RetryLayer, RetryPolicy, RetryReport};
use tower::{ServiceBuilder, ServiceExt};

/// A hyper-util client behind `RetryLayer` with `policy`, done within 5 s.
fn within_5s(
    policy: holdoff::Policy,
) -> holdoff_tower::Retry<
    hyper_util::client::legacy::Client<
        hyper_util::client::legacy::connect::HttpConnector,
        http_body_util::Full<bytes::Bytes>,
    >,
> {
    let policy = RetryPolicy::new(policy).timeout(Duration::from_secs(5));
    ServiceBuilder::new()
        .layer(RetryLayer::new(policy))
        .service(client())
}

/// A loopback port nobody listens on.
fn refused_url() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("address").port();
    drop(listener);
    format!("http://127.0.0.1:{port}/v1/items")
}

mod deadline {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn cuts_an_attempt_still_running_at_the_deadline() {
        let server = TestServer::start().await;
        server.script(
            "/slow",
            [
                Reply::unavailable("1"),
                Reply::ok("late").delay(Duration::from_secs(10)),
            ],
        );
        let start = TokioClock.now();
        let error = within_5s(plain())
            .oneshot(get(&server.url("/slow")))
            .await
            .expect_err("cut at the deadline");

        assert_eq!(TokioClock.now() - start, Duration::from_secs(5));
        assert_eq!(error.kind(), ErrorKind::DeadlineReached);
        assert_eq!(
            (error.report().attempts, error.report().reason()),
            (2, Reason::DeadlineReached)
        );
        assert_eq!(
            error.to_string(),
            "send the request: the task's deadline came while attempt 2 was running; \
             re-queue the task, or give it a longer timeout"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn does_not_start_a_retry_that_would_not_finish_in_time() {
        let server = TestServer::start().await;
        let slow = |reply: Reply| reply.delay(Duration::from_secs(3));
        server.script("/slow", [slow(Reply::unavailable("1"))]);
        server.set_default("/slow", slow(Reply::ok("ok")));
        let start = TokioClock.now();
        let response = within_5s(plain())
            .oneshot(get(&server.url("/slow")))
            .await
            .expect("the 503");

        // Answered at 3 s: a 1 s wait fits in the 2 s left, a 3 s attempt after it does not.
        assert_eq!(TokioClock.now() - start, Duration::from_secs(3));
        assert_eq!(response.status(), 503);
        let report = response
            .extensions()
            .get::<RetryReport>()
            .expect("a report");
        assert_eq!(
            report.decision,
            Decision::Defer(DeferReason::AttemptWouldNotFit)
        );
        assert_eq!(server.requests_to("/slow").len(), 1);
    }
}

mod transport {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_refused_connection_comes_back_with_the_report() {
        let policy = plain()
            .with_max_attempts(3)
            .with_backoff(Backoff::Constant(Duration::from_secs(1)));
        let error = within_5s(policy)
            .oneshot(get(&refused_url()))
            .await
            .expect_err("nobody listens");

        assert_eq!(error.kind(), ErrorKind::Transport);
        let report = error.report();
        assert_eq!(
            (report.attempts, report.reason()),
            (3, Reason::AttemptsExhausted)
        );
        assert_eq!(report.requeue_at(), Requeue::NoHint);
        let source = error.source_error().expect("the client's error");
        assert!(source.is_connect(), "{source}");
        assert!(std::error::Error::source(&error).is_some());
    }

    #[tokio::test(start_paused = true)]
    async fn a_post_that_is_not_retried_says_why() {
        let server = TestServer::start().await;
        server.script("/v1/jobs", [Reply::reset()]);
        let error = within_5s(plain())
            .oneshot(post(&server.url("/v1/jobs"), "{}"))
            .await
            .expect_err("reset");

        assert_eq!(error.kind(), ErrorKind::Transport);
        assert_eq!(
            (error.report().attempts, error.report().reason()),
            (1, Reason::NonIdempotent)
        );
        assert_eq!(server.requests_to("/v1/jobs").len(), 1);
    }
}
