//! tower's `Retry` with `RetryPolicy`, driving a real hyper-util client against a real
//! server on loopback, under tokio's paused time: every instant asserted is exact.
//!
//! One request is in flight at a time, so no timer is pending while bytes cross the socket
//! and paused time only jumps over the policy's own waits.

mod common;

use std::convert::Infallible;
use std::fmt;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use common::{client, get, plain, post};
use holdoff::clock::{Clock, TokioClock};
use holdoff::{Backoff, Decision, DeferReason, Jitter, OnMalformed, Reason};
use holdoff_testkit::{Reply, TestServer};
use holdoff_tower::{CloneBody, RepeatSafe, RetryPolicy, RetryReport};
use http::{Request, Response};
use http_body_util::Full;
use hyper::body::{Frame, Incoming};
use tower::ServiceExt;
use tower::retry::Retry;

/// Sends `request` through `Retry` with `policy` and a fresh client.
async fn send(policy: RetryPolicy, request: Request<Full<Bytes>>) -> Response<Incoming> {
    Retry::new(policy, client())
        .oneshot(request)
        .await
        .expect("a response")
}

fn report<B>(response: &Response<B>) -> RetryReport {
    response
        .extensions()
        .get::<RetryReport>()
        .expect("the policy judged the response")
        .clone()
}

/// The gaps between consecutive arrivals at `path`.
fn gaps(server: &TestServer, path: &str) -> Vec<Duration> {
    server
        .requests_to(path)
        .windows(2)
        .map(|pair| pair[1].at - pair[0].at)
        .collect()
}

mod hints {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_retry_comes_exactly_the_delay_after_receipt() {
        let server = TestServer::start().await;
        server.script("/v1/items", [Reply::unavailable("2")]);
        let start = TokioClock.now();

        let response = send(RetryPolicy::new(plain()), get(&server.url("/v1/items"))).await;

        assert_eq!(response.status(), 200);
        assert_eq!(gaps(&server, "/v1/items"), [Duration::from_secs(2)]);
        assert_eq!(server.requests_to("/v1/items")[0].at, start);
        let report = report(&response);
        assert_eq!((report.attempts, report.reason()), (2, Reason::Success));
    }

    #[tokio::test(start_paused = true)]
    async fn the_longer_of_hint_and_backoff_wins() {
        let server = TestServer::start().await;
        server.script("/backoff", [Reply::unavailable("2")]);
        server.script("/hint", [Reply::unavailable("7")]);
        let policy =
            RetryPolicy::new(plain().with_backoff(Backoff::Constant(Duration::from_secs(5))));

        send(policy.clone(), get(&server.url("/backoff"))).await;
        send(policy, get(&server.url("/hint"))).await;

        assert_eq!(gaps(&server, "/backoff"), [Duration::from_secs(5)]);
        assert_eq!(gaps(&server, "/hint"), [Duration::from_secs(7)]);
    }

    #[tokio::test(start_paused = true)]
    async fn jitter_is_added_per_request_from_a_seedable_source() {
        let server = TestServer::start().await;
        let mut runs = Vec::new();
        for run in ["/1", "/2"] {
            let policy =
                RetryPolicy::new(plain().with_jitter(Jitter::Uniform(Duration::from_secs(1))))
                    .seed(7);
            let service = Retry::new(policy, client());
            let mut waits = Vec::new();
            for request in ["/a", "/b"] {
                let path = format!("{run}{request}");
                server.script(&path, [Reply::unavailable("2")]);
                // A clone of the service per request, as tasks sharing a client do.
                service
                    .clone()
                    .oneshot(get(&server.url(&path)))
                    .await
                    .expect("a response");
                waits.extend(gaps(&server, &path));
            }
            runs.push(waits);
        }

        let (two, three) = (Duration::from_secs(2), Duration::from_secs(3));
        assert!(runs[0].iter().all(|wait| *wait >= two && *wait <= three));
        assert_ne!(runs[0][0], runs[0][1], "each request draws its own jitter");
        assert_eq!(runs[0], runs[1], "the same seed draws the same jitter");
    }

    #[tokio::test(start_paused = true)]
    async fn a_date_hint_is_measured_against_the_server_clock() {
        // The server's clock is an hour off ours, either way. Measured against our clock,
        // the hint would mean 3610 s, or a date already past (a retry at once); measured
        // against the server's `Date`, as RFC 9110 means it, it is 10 s.
        let server = TestServer::start().await;
        let skews = [("/ahead", true), ("/behind", false)];
        for (path, ahead) in skews {
            // TokioClock's wall clock is the real one, even under paused time.
            let ours = TokioClock.wall_now();
            let hour = Duration::from_secs(3600);
            let theirs = if ahead { ours + hour } else { ours - hour };
            server.script(
                path,
                [Reply::status(503)
                    .retry_after_date(theirs + Duration::from_secs(10))
                    .date(theirs)],
            );

            send(RetryPolicy::new(plain()), get(&server.url(path))).await;

            assert_eq!(gaps(&server, path), [Duration::from_secs(10)], "{path}");
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_429_without_a_quota_error_is_retried() {
        let server = TestServer::start().await;
        server.script("/v1/chat", [Reply::too_many_requests("3")]);

        let response = send(RetryPolicy::new(plain()), get(&server.url("/v1/chat"))).await;

        assert_eq!(response.status(), 200);
        assert_eq!(gaps(&server, "/v1/chat"), [Duration::from_secs(3)]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_vendor_hint_in_milliseconds_is_honoured() {
        let server = TestServer::start().await;
        server.script(
            "/v1/chat",
            [Reply::status(429).header("retry-after-ms", "1500")],
        );

        send(RetryPolicy::new(plain()), get(&server.url("/v1/chat"))).await;

        assert_eq!(gaps(&server, "/v1/chat"), [Duration::from_millis(1500)]);
    }
}

mod deferral {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_wait_that_cannot_fit_before_the_deadline_is_deferred() {
        // The canonical case: the server asks 30 s, the local backoff is 8 s, 12 s remain.
        // Retrying at 8 s or at 12 s would both be early.
        let server = TestServer::start().await;
        server.script("/v1/items", [Reply::unavailable("30")]);
        let policy =
            RetryPolicy::new(plain().with_backoff(Backoff::Constant(Duration::from_secs(8))))
                .timeout(Duration::from_secs(12));
        let start = TokioClock.now();

        let response = send(policy, get(&server.url("/v1/items"))).await;

        assert_eq!(response.status(), 503);
        let seen = server.requests_to("/v1/items");
        assert_eq!(seen.len(), 1, "no retry");
        assert_eq!(TokioClock.now(), start, "no time spent waiting");
        let report = report(&response);
        assert_eq!(
            report.decision,
            Decision::Defer(DeferReason::DeadlineExceeded)
        );
        assert_eq!(report.reason().as_str(), "deadline-exceeded");
        assert_eq!(report.attempts, 1);
        assert_eq!(
            report.permitted.expect("a hint").after,
            Duration::from_secs(30)
        );
        assert_eq!(
            report.permitted.expect("a hint").at,
            Some(seen[0].at + Duration::from_secs(30))
        );
        assert!(report.permitted.expect("a hint").wall.is_some());
    }

    #[tokio::test(start_paused = true)]
    async fn a_request_carries_its_own_timeout() {
        // No timeout on the policy: the request's own `Timeout` marker is its deadline.
        let server = TestServer::start().await;
        server.script("/v1/items", [Reply::unavailable("30")]);
        let mut request = get(&server.url("/v1/items"));
        request
            .extensions_mut()
            .insert(holdoff_tower::Timeout(Duration::from_secs(12)));

        let response = send(RetryPolicy::new(plain()), request).await;

        assert_eq!(server.requests_to("/v1/items").len(), 1, "no retry");
        let report = report(&response);
        assert_eq!(report.deferred(), Some(DeferReason::DeadlineExceeded));
        assert!(report.requeue_at().time().is_some());
    }

    #[tokio::test(start_paused = true)]
    async fn a_request_deadline_tightens_the_policy_timeout() {
        let server = TestServer::start().await;
        server.script("/v1/items", [Reply::unavailable("3")]);
        let policy = RetryPolicy::new(plain()).timeout(Duration::from_secs(60));
        let mut request = get(&server.url("/v1/items"));
        let deadline = TokioClock.now() + Duration::from_secs(2);
        request
            .extensions_mut()
            .insert(holdoff_tower::Deadline(deadline));

        let response = send(policy, request).await;

        assert_eq!(server.requests_to("/v1/items").len(), 1, "no retry");
        assert_eq!(report(&response).reason(), Reason::DeadlineExceeded);
    }

    #[tokio::test(start_paused = true)]
    async fn a_hint_beyond_max_wait_is_deferred_not_capped() {
        let server = TestServer::start().await;
        server.script("/v1/items", [Reply::unavailable("600")]);
        let policy = RetryPolicy::new(plain().with_max_wait(Some(Duration::from_secs(60))));

        let response = send(policy, get(&server.url("/v1/items"))).await;

        assert_eq!(server.requests_to("/v1/items").len(), 1);
        let report = report(&response);
        assert_eq!(report.reason(), Reason::HintExceedsMaxWait);
        assert_eq!(
            report.permitted.expect("a hint").after,
            Duration::from_secs(600)
        );
    }

    #[tokio::test(start_paused = true)]
    async fn each_request_has_its_own_deadline_and_attempts() {
        // One service, two requests in turn. The second is sent 3 s after the first: its
        // 3 s wait fits its own 5 s, though not what was left of the first request's.
        let server = TestServer::start().await;
        server.script("/a", [Reply::unavailable("3")]);
        server.script("/b", [Reply::unavailable("3")]);
        let policy = RetryPolicy::new(plain().with_max_attempts(2)).timeout(Duration::from_secs(5));
        let mut service = Retry::new(policy, client());

        let first = (&mut service).oneshot(get(&server.url("/a"))).await;
        let second = (&mut service).oneshot(get(&server.url("/b"))).await;

        for response in [first, second] {
            let report = report(&response.expect("a response"));
            assert_eq!((report.attempts, report.reason()), (2, Reason::Success));
        }
        assert_eq!(gaps(&server, "/a"), [Duration::from_secs(3)]);
        assert_eq!(gaps(&server, "/b"), [Duration::from_secs(3)]);
    }
}

mod give_up {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_post_is_not_retried() {
        let server = TestServer::start().await;
        server.script("/v1/jobs", [Reply::unavailable("1")]);

        let response = send(
            RetryPolicy::new(plain()),
            post(&server.url("/v1/jobs"), "{}"),
        )
        .await;

        assert_eq!(response.status(), 503);
        assert_eq!(server.requests_to("/v1/jobs").len(), 1);
        let report = report(&response);
        assert_eq!(report.reason(), Reason::NonIdempotent);
        assert_eq!(
            report.permitted.expect("a hint").after,
            Duration::from_secs(1)
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_post_with_an_idempotency_key_is_retried_with_the_same_body() {
        let server = TestServer::start().await;
        server.script("/v1/jobs", [Reply::unavailable("1")]);
        let mut request = post(&server.url("/v1/jobs"), "{\"n\":1}");
        request
            .headers_mut()
            .insert("idempotency-key", "8e03978e".parse().expect("value"));

        let response = send(RetryPolicy::new(plain()), request).await;

        assert_eq!(response.status(), 200);
        assert_eq!(gaps(&server, "/v1/jobs"), [Duration::from_secs(1)]);
        for seen in server.requests_to("/v1/jobs") {
            assert_eq!(seen.body, "{\"n\":1}");
            assert_eq!(seen.header("idempotency-key"), Some("8e03978e"));
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_post_marked_repeat_safe_is_retried() {
        let server = TestServer::start().await;
        server.script("/v1/jobs", [Reply::unavailable("1")]);
        let mut request = post(&server.url("/v1/jobs"), "{}");
        request.extensions_mut().insert(RepeatSafe);

        let response = send(RetryPolicy::new(plain()), request).await;

        assert_eq!(response.status(), 200);
        assert_eq!(server.requests_to("/v1/jobs").len(), 2);
    }

    #[tokio::test(start_paused = true)]
    async fn the_last_attempt_is_returned_with_the_reason() {
        let server = TestServer::start().await;
        server.script("/v1/items", (0..5).map(|_| Reply::unavailable("1")));

        let response = send(
            RetryPolicy::new(plain().with_max_attempts(3)),
            get(&server.url("/v1/items")),
        )
        .await;

        assert_eq!(response.status(), 503);
        let one = Duration::from_secs(1);
        assert_eq!(gaps(&server, "/v1/items"), [one, one]);
        let report = report(&response);
        assert_eq!(
            (report.attempts, report.reason()),
            (3, Reason::AttemptsExhausted)
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_status_not_retried_is_returned_at_once_with_its_hint() {
        let server = TestServer::start().await;
        server.script("/v1/items", [Reply::status(403).retry_after("5")]);

        let response = send(RetryPolicy::new(plain()), get(&server.url("/v1/items"))).await;

        assert_eq!(server.requests_to("/v1/items").len(), 1);
        assert_eq!(report(&response).reason(), Reason::StatusNotRetryable);
    }
}

mod malformed {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_malformed_hint_is_not_retried_by_default() {
        let server = TestServer::start().await;
        server.script("/v1/items", [Reply::unavailable("1.5")]);
        let start = TokioClock.now();

        let response = send(RetryPolicy::new(plain()), get(&server.url("/v1/items"))).await;

        assert_eq!(response.status(), 503);
        assert_eq!(response.headers()["retry-after"], "1.5");
        assert_eq!(server.requests_to("/v1/items").len(), 1);
        assert_eq!(TokioClock.now(), start);
        let report = report(&response);
        assert_eq!(report.reason().as_str(), "malformed-retry-after");
        assert!(matches!(report.decision, Decision::Malformed(_)));
    }

    #[tokio::test(start_paused = true)]
    async fn with_fallback_a_malformed_hint_is_dropped_never_read_as_zero() {
        let server = TestServer::start().await;
        server.script("/v1/items", [Reply::unavailable("1.5")]);
        let policy = plain()
            .with_on_malformed(OnMalformed::Fallback)
            .with_backoff(Backoff::Constant(Duration::from_secs(4)));

        let response = send(RetryPolicy::new(policy), get(&server.url("/v1/items"))).await;

        assert_eq!(response.status(), 200);
        assert_eq!(gaps(&server, "/v1/items"), [Duration::from_secs(4)]);
    }
}

mod transport_errors {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_reset_is_retried_on_the_backoff_alone() {
        let server = TestServer::start().await;
        server.script("/v1/items", [Reply::reset()]);
        let policy = plain().with_backoff(Backoff::Constant(Duration::from_secs(2)));

        let response = send(RetryPolicy::new(policy), get(&server.url("/v1/items"))).await;

        assert_eq!(response.status(), 200);
        assert_eq!(gaps(&server, "/v1/items"), [Duration::from_secs(2)]);
        assert_eq!(report(&response).attempts, 2);
    }

    #[tokio::test(start_paused = true)]
    async fn a_reset_post_is_not_retried() {
        let server = TestServer::start().await;
        server.script("/v1/jobs", [Reply::reset()]);
        let policy = plain().with_backoff(Backoff::Constant(Duration::from_secs(2)));

        let result = Retry::new(RetryPolicy::new(policy), client())
            .oneshot(post(&server.url("/v1/jobs"), "{}"))
            .await;

        assert!(result.is_err());
        assert_eq!(server.requests_to("/v1/jobs").len(), 1);
    }
}

mod bodies {
    use super::*;

    /// A body that is read as it is sent, like an upload from a file or a channel.
    struct Upload(Option<Bytes>);

    impl hyper::body::Body for Upload {
        type Data = Bytes;
        type Error = Infallible;

        fn poll_frame(
            self: Pin<&mut Self>,
            _: &mut Context<'_>,
        ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
            Poll::Ready(self.get_mut().0.take().map(|data| Ok(Frame::data(data))))
        }
    }

    impl CloneBody for Upload {
        fn try_clone_body(&self) -> Option<Self> {
            None
        }
    }

    /// Collects the messages of the warnings this crate logs, on the current thread.
    #[derive(Clone, Default)]
    struct Warnings(Arc<Mutex<Vec<String>>>);

    impl tracing::Subscriber for Warnings {
        fn enabled(&self, _: &tracing::Metadata<'_>) -> bool {
            true
        }
        fn new_span(&self, _: &tracing::span::Attributes<'_>) -> tracing::span::Id {
            tracing::span::Id::from_u64(1)
        }
        fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}
        fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
        fn event(&self, event: &tracing::Event<'_>) {
            struct Message(String);
            impl tracing::field::Visit for Message {
                fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn fmt::Debug) {
                    if field.name() == "message" {
                        self.0 = format!("{value:?}");
                    }
                }
            }
            let metadata = event.metadata();
            if *metadata.level() == tracing::Level::WARN
                && metadata.target().starts_with("holdoff_tower")
            {
                let mut message = Message(String::new());
                event.record(&mut message);
                self.0.lock().expect("lock").push(message.0);
            }
        }
        fn enter(&self, _: &tracing::span::Id) {}
        fn exit(&self, _: &tracing::span::Id) {}
    }

    #[tokio::test(start_paused = true)]
    async fn a_body_that_cannot_be_cloned_is_sent_once_and_said_so() {
        let warnings = Warnings::default();
        let _guard = tracing::subscriber::set_default(warnings.clone());
        let server = TestServer::start().await;
        server.script("/v1/files", [Reply::unavailable("1")]);
        let policy = RetryPolicy::new(plain());
        let request = Request::put(server.url("/v1/files"))
            .body(Upload(Some(Bytes::from_static(b"chunk"))))
            .expect("request");

        let response = Retry::new(policy.clone(), client())
            .oneshot(request)
            .await
            .expect("a response");

        assert_eq!(response.status(), 503);
        let seen = server.requests_to("/v1/files");
        assert_eq!(seen.len(), 1, "not retried");
        assert_eq!(seen[0].body, "chunk");
        assert!(
            response.extensions().get::<RetryReport>().is_none(),
            "tower never showed the policy this response"
        );
        assert_eq!(policy.unclonable_requests(), 1);
        assert_eq!(
            *warnings.0.lock().expect("lock"),
            ["the request body cannot be cloned, so the request will not be retried"]
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_post_that_would_not_be_retried_anyway_is_not_counted() {
        let warnings = Warnings::default();
        let _guard = tracing::subscriber::set_default(warnings.clone());
        let server = TestServer::start().await;
        let policy = RetryPolicy::new(plain());
        let request = Request::post(server.url("/v1/files"))
            .body(Upload(Some(Bytes::from_static(b"chunk"))))
            .expect("request");

        let response = Retry::new(policy.clone(), client())
            .oneshot(request)
            .await
            .expect("a response");

        assert_eq!(response.status(), 200);
        assert_eq!(policy.unclonable_requests(), 0);
        assert!(warnings.0.lock().expect("lock").is_empty());
    }
}
