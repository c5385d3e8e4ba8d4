//! The middleware against a real HTTP server on loopback, with a real reqwest client, under
//! tokio's paused time: every retry instant asserted here is exact.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use holdoff::clock::{Clock, TokioClock};
use holdoff::gate::Gate;
use holdoff::{
    Backoff, Decision, DeferReason, GiveUpReason, HintSource, Jitter, OnMalformed, Policy, Reason,
};
use holdoff_reqwest::{
    Deadline, Error, ErrorKind, GateKey, HoldoffMiddleware, RepeatSafe, RetryReport,
    RetryReportExt, Timeout,
};
use holdoff_testkit::{Recorded, Reply, TestServer};
use http::Extensions;
use reqwest::{Request, Response};
use reqwest_middleware::{ClientBuilder, ClientWithMiddleware, Middleware, Next};

/// The hint alone decides: no local backoff, no jitter.
fn plain_policy() -> Policy {
    Policy::default()
        .with_backoff(Backoff::None)
        .with_jitter(Jitter::None)
}

fn client(middleware: HoldoffMiddleware) -> ClientWithMiddleware {
    ClientBuilder::new(reqwest_client())
        .with(middleware)
        .build()
}

/// When the whole workspace is built together, another crate's tests turn on reqwest's
/// `rustls-no-provider` feature for this crate too; reqwest then needs a process-wide rustls
/// provider before it builds a client. Harmless when the feature is off.
fn ring_for_reqwest() {
    let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
}

fn reqwest_client() -> reqwest::Client {
    ring_for_reqwest();
    reqwest::Client::builder()
        .no_proxy()
        .build()
        .expect("a reqwest client")
}

/// When each request arrived, counted from the first.
fn offsets(requests: &[Recorded]) -> Vec<Duration> {
    requests
        .iter()
        .map(|request| request.at - requests[0].at)
        .collect()
}

/// A loopback port nobody listens on.
fn refused_url() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("address").port();
    drop(listener);
    format!("http://127.0.0.1:{port}/v1/chat")
}

fn report(response: &Response) -> RetryReport {
    response
        .retry_report()
        .cloned()
        .expect("the middleware attaches a report")
}

fn holdoff_error(error: reqwest_middleware::Error) -> Error {
    match error {
        reqwest_middleware::Error::Middleware(error) => {
            error.downcast::<Error>().expect("a holdoff_reqwest::Error")
        }
        reqwest_middleware::Error::Reqwest(error) => panic!("expected holdoff's error: {error}"),
    }
}

/// Records when each attempt passes through it, below the holdoff middleware: it sees
/// attempts that never reach a server, too.
#[derive(Clone, Default)]
struct Attempts(Arc<Mutex<Vec<Instant>>>);

impl Attempts {
    fn offsets(&self) -> Vec<Duration> {
        let seen = self.0.lock().expect("lock");
        seen.iter().map(|at| *at - seen[0]).collect()
    }
}

#[async_trait::async_trait]
impl Middleware for Attempts {
    async fn handle(
        &self,
        request: Request,
        extensions: &mut Extensions,
        next: Next<'_>,
    ) -> reqwest_middleware::Result<Response> {
        self.0.lock().expect("lock").push(TokioClock.now());
        next.run(request, extensions).await
    }
}

mod retry_after {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn retries_exactly_when_the_hint_permits() {
        let server = TestServer::start().await;
        server.script("/v1/chat", [Reply::too_many_requests("2")]);
        let response = client(HoldoffMiddleware::new(plain_policy()))
            .get(server.url("/v1/chat"))
            .send()
            .await
            .expect("a response");

        assert_eq!(response.status(), 200);
        let report = report(&response);
        assert_eq!(report.attempts, 2);
        assert_eq!(report.reason(), Reason::Success);
        assert_eq!(response.text().await.expect("body"), "ok");
        assert_eq!(
            offsets(&server.requests_to("/v1/chat")),
            [Duration::ZERO, Duration::from_secs(2)]
        );
    }

    #[tokio::test(start_paused = true)]
    async fn waits_for_a_backoff_longer_than_the_hint() {
        let server = TestServer::start().await;
        server.script("/v1/chat", [Reply::too_many_requests("2")]);
        let policy = plain_policy().with_backoff(Backoff::Constant(Duration::from_secs(5)));
        let response = client(HoldoffMiddleware::new(policy))
            .get(server.url("/v1/chat"))
            .send()
            .await
            .expect("a response");

        assert_eq!(response.status(), 200);
        assert_eq!(
            offsets(&server.requests_to("/v1/chat")),
            [Duration::ZERO, Duration::from_secs(5)]
        );
    }

    #[tokio::test(start_paused = true)]
    async fn honours_a_vendor_millisecond_hint() {
        let server = TestServer::start().await;
        server.script(
            "/graph",
            [Reply::status(429).header("retry-after-ms", "1500")],
        );
        let response = client(HoldoffMiddleware::new(plain_policy()))
            .get(server.url("/graph"))
            .send()
            .await
            .expect("a response");

        assert_eq!(response.status(), 200);
        assert_eq!(
            offsets(&server.requests_to("/graph")),
            [Duration::ZERO, Duration::from_millis(1500)]
        );
    }

    #[tokio::test(start_paused = true)]
    async fn stops_after_the_last_attempt_and_hands_back_the_last_response() {
        let server = TestServer::start().await;
        server.set_default("/busy", Reply::unavailable("1").body("busy"));
        let response = client(HoldoffMiddleware::new(plain_policy().with_max_attempts(3)))
            .get(server.url("/busy"))
            .send()
            .await
            .expect("a response");

        assert_eq!(response.status(), 503);
        let report = report(&response);
        assert_eq!(report.attempts, 3);
        assert_eq!(
            report.decision,
            Decision::GiveUp(GiveUpReason::AttemptsExhausted)
        );
        assert_eq!(response.text().await.expect("body"), "busy");
        assert_eq!(
            offsets(&server.requests_to("/busy")),
            [
                Duration::ZERO,
                Duration::from_secs(1),
                Duration::from_secs(2)
            ]
        );
    }
}

mod deadline {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn defers_a_hint_that_cannot_fit_without_waiting() {
        // The canonical case: the server asks 30 s, the backoff is 8 s, 12 s remain.
        let server = TestServer::start().await;
        server.script("/jobs", [Reply::unavailable("30")]);
        let policy = plain_policy().with_backoff(Backoff::Constant(Duration::from_secs(8)));
        let start = TokioClock.now();
        let response = client(HoldoffMiddleware::new(policy))
            .get(server.url("/jobs"))
            .with_extension(Timeout(Duration::from_secs(12)))
            .send()
            .await
            .expect("a response");

        assert_eq!(response.status(), 503);
        assert_eq!(TokioClock.now(), start, "no virtual time may pass");
        let requests = server.requests_to("/jobs");
        assert_eq!(requests.len(), 1);
        let report = report(&response);
        assert_eq!(report.attempts, 1);
        assert_eq!(
            report.decision,
            Decision::Defer(DeferReason::DeadlineExceeded)
        );
        assert_eq!(report.reason(), Reason::DeadlineExceeded);
        assert_eq!(report.hint_source, Some(HintSource::RetryAfter));
        assert_eq!(
            report.permitted.and_then(|p| p.at),
            Some(requests[0].at + Duration::from_secs(30))
        );
        let wall = report.requeue_at().time().expect("a wall time");
        let after = wall
            .duration_since(requests[0].wall)
            .expect("permitted after the request");
        // The wall clock is real even under paused time: allow for the test's own run time.
        assert!(
            after >= Duration::from_secs(30) && after < Duration::from_secs(31),
            "{after:?}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn takes_an_instant_as_the_deadline() {
        let server = TestServer::start().await;
        server.script("/jobs", [Reply::too_many_requests("30")]);
        let deadline = TokioClock.now() + Duration::from_secs(10);
        let response = client(HoldoffMiddleware::new(plain_policy()))
            .get(server.url("/jobs"))
            .with_extension(Deadline(deadline))
            .send()
            .await
            .expect("a response");

        assert_eq!(response.status(), 429);
        assert_eq!(
            report(&response).decision,
            Decision::Defer(DeferReason::DeadlineExceeded)
        );
        assert_eq!(server.requests_to("/jobs").len(), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn retries_when_the_hint_fits_the_default_timeout() {
        let server = TestServer::start().await;
        server.script("/jobs", [Reply::too_many_requests("2")]);
        let middleware = HoldoffMiddleware::new(plain_policy()).timeout(Duration::from_secs(3));
        let response = client(middleware)
            .get(server.url("/jobs"))
            .send()
            .await
            .expect("a response");

        assert_eq!(response.status(), 200);
        assert_eq!(
            offsets(&server.requests_to("/jobs")),
            [Duration::ZERO, Duration::from_secs(2)]
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_request_timeout_replaces_the_default() {
        let server = TestServer::start().await;
        server.script("/jobs", [Reply::too_many_requests("2")]);
        let middleware = HoldoffMiddleware::new(plain_policy()).timeout(Duration::from_secs(60));
        let response = client(middleware)
            .get(server.url("/jobs"))
            .with_extension(Timeout(Duration::from_secs(1)))
            .send()
            .await
            .expect("a response");

        assert_eq!(response.status(), 429);
        assert_eq!(server.requests_to("/jobs").len(), 1);
    }
}

mod idempotency {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn does_not_retry_a_post() {
        let server = TestServer::start().await;
        server.script("/v1/jobs", [Reply::unavailable("1")]);
        let response = client(HoldoffMiddleware::new(plain_policy()))
            .post(server.url("/v1/jobs"))
            .body("{}")
            .send()
            .await
            .expect("a response");

        assert_eq!(response.status(), 503);
        let report = report(&response);
        assert_eq!(
            report.decision,
            Decision::GiveUp(GiveUpReason::NonIdempotent)
        );
        assert_eq!(report.reason().as_str(), "non-idempotent");
        assert_eq!(server.requests_to("/v1/jobs").len(), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn retries_a_post_marked_safe_to_repeat() {
        let server = TestServer::start().await;
        server.script("/v1/jobs", [Reply::unavailable("1")]);
        let response = client(HoldoffMiddleware::new(plain_policy()))
            .post(server.url("/v1/jobs"))
            .body("{\"job\":1}")
            .with_extension(RepeatSafe)
            .send()
            .await
            .expect("a response");

        assert_eq!(response.status(), 200);
        let requests = server.requests_to("/v1/jobs");
        assert_eq!(offsets(&requests), [Duration::ZERO, Duration::from_secs(1)]);
        assert!(requests.iter().all(|r| r.body == "{\"job\":1}"));
    }

    #[tokio::test(start_paused = true)]
    async fn retries_a_post_with_an_idempotency_key() {
        let server = TestServer::start().await;
        server.script("/v1/jobs", [Reply::too_many_requests("3")]);
        let response = client(HoldoffMiddleware::new(plain_policy()))
            .post(server.url("/v1/jobs"))
            .header("Idempotency-Key", "job-42")
            .body("{\"job\":42}")
            .send()
            .await
            .expect("a response");

        assert_eq!(response.status(), 200);
        let requests = server.requests_to("/v1/jobs");
        assert_eq!(offsets(&requests), [Duration::ZERO, Duration::from_secs(3)]);
        assert!(
            requests
                .iter()
                .all(|r| r.header("idempotency-key") == Some("job-42") && r.body == "{\"job\":42}")
        );
    }
}

mod quota {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn does_not_retry_a_spent_quota_and_keeps_its_body() {
        let server = TestServer::start().await;
        server.script("/v1/chat", [Reply::insufficient_quota()]);
        let response = client(HoldoffMiddleware::new(plain_policy()))
            .post(server.url("/v1/chat"))
            .header("idempotency-key", "chat-1")
            .send()
            .await
            .expect("a response");

        assert_eq!(response.status(), 429);
        assert_eq!(server.requests_to("/v1/chat").len(), 1);
        let report = report(&response);
        assert_eq!(
            report.decision,
            Decision::GiveUp(GiveUpReason::QuotaExhausted)
        );
        assert_eq!(report.reason().as_str(), "quota-exhausted");
        assert_eq!(
            response.headers()["content-type"],
            "application/json",
            "headers survive the body being read"
        );
        let body: serde_json::Value =
            serde_json::from_slice(&response.bytes().await.expect("body")).expect("JSON");
        assert_eq!(body["error"]["code"], "insufficient_quota");
    }

    #[tokio::test(start_paused = true)]
    async fn retries_a_rate_limit_that_is_not_a_spent_quota() {
        let server = TestServer::start().await;
        server.script(
            "/v1/chat",
            [Reply::too_many_requests("1").json(&serde_json::json!({
                "error": {"type": "requests", "code": "rate_limit_exceeded"}
            }))],
        );
        let response = client(HoldoffMiddleware::new(plain_policy()))
            .get(server.url("/v1/chat"))
            .send()
            .await
            .expect("a response");

        assert_eq!(response.status(), 200);
        assert_eq!(
            offsets(&server.requests_to("/v1/chat")),
            [Duration::ZERO, Duration::from_secs(1)]
        );
    }

    #[tokio::test(start_paused = true)]
    async fn hands_back_a_long_429_body_whole() {
        // Longer than the part read for the classifier, so the rest is streamed after it.
        let long: String = (0..200_000u32)
            .map(|i| char::from(b'a' + (i % 26) as u8))
            .collect();
        let server = TestServer::start().await;
        server.script(
            "/v1/chat",
            [Reply::too_many_requests("1").body(long.clone())],
        );
        let response = client(HoldoffMiddleware::new(plain_policy().with_max_attempts(1)))
            .get(server.url("/v1/chat"))
            .send()
            .await
            .expect("a response");

        assert_eq!(response.status(), 429);
        assert_eq!(response.url().as_str(), server.url("/v1/chat"));
        assert_eq!(response.content_length(), Some(200_000));
        assert_eq!(response.text().await.expect("body"), long);
    }
}

mod malformed {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn hands_back_the_response_by_default() {
        let server = TestServer::start().await;
        server.script("/v1/chat", [Reply::unavailable("1.5")]);
        let response = client(HoldoffMiddleware::new(plain_policy()))
            .get(server.url("/v1/chat"))
            .send()
            .await
            .expect("a response");

        assert_eq!(response.status(), 503);
        assert_eq!(server.requests_to("/v1/chat").len(), 1);
        let report = report(&response);
        assert_eq!(report.reason(), Reason::MalformedRetryAfter);
        let Some(error) = report.malformed.clone() else {
            panic!("expected a malformed hint, got {:?}", report.decision);
        };
        assert_eq!(error.raw(), b"1.5");
    }

    #[tokio::test(start_paused = true)]
    async fn falls_back_to_the_backoff_when_configured() {
        let server = TestServer::start().await;
        server.script("/v1/chat", [Reply::unavailable("1.5")]);
        let policy = plain_policy()
            .with_on_malformed(OnMalformed::Fallback)
            .with_backoff(Backoff::Constant(Duration::from_secs(3)));
        let response = client(HoldoffMiddleware::new(policy))
            .get(server.url("/v1/chat"))
            .send()
            .await
            .expect("a response");

        assert_eq!(response.status(), 200);
        assert_eq!(
            offsets(&server.requests_to("/v1/chat")),
            [Duration::ZERO, Duration::from_secs(3)]
        );
    }
}

mod streaming_body {
    use super::*;

    /// A body reqwest cannot clone: it is streamed, not held as bytes.
    fn stream(text: &str) -> reqwest::Body {
        reqwest::Body::wrap(text.to_owned())
    }

    #[tokio::test(start_paused = true)]
    async fn is_sent_once_and_fails_clearly_when_a_retry_is_needed() {
        let server = TestServer::start().await;
        server.script("/upload", [Reply::unavailable("2").body("busy")]);
        let start = TokioClock.now();
        let error = client(HoldoffMiddleware::new(plain_policy()))
            .put(server.url("/upload"))
            .body(stream("payload"))
            .send()
            .await
            .expect_err("a stream cannot be sent again");

        assert_eq!(TokioClock.now(), start, "no wait may start");
        let requests = server.requests_to("/upload");
        assert_eq!(requests.len(), 1);
        assert_eq!(requests[0].body, "payload");
        let message = error.to_string();
        assert!(
            message.starts_with(
                "retry a request whose body is a stream that cannot be cloned: the server \
                 answered 503 Service Unavailable and permits a retry after 2s ("
            ),
            "{message}"
        );
        assert!(
            message.ends_with(
                "; send the body as bytes (e.g. `reqwest::Body::from(Vec<u8>)`) so that holdoff \
                 can retry it, or retry it yourself"
            ),
            "{message}"
        );
        let error = holdoff_error(error);
        assert_eq!(error.kind(), ErrorKind::BodyNotCloneable);
        assert_eq!(
            error.report().decision,
            Decision::GiveUp(GiveUpReason::BodyNotCloneable)
        );
        assert_eq!(error.status(), Some(http::StatusCode::SERVICE_UNAVAILABLE));
        assert_eq!(
            error.permitted_at(),
            Some(requests[0].at + Duration::from_secs(2))
        );
        let response = error
            .into_response()
            .expect("the response that was not retried");
        assert_eq!(response.text().await.expect("body"), "busy");
    }

    #[tokio::test(start_paused = true)]
    async fn succeeds_when_no_retry_is_needed() {
        let server = TestServer::start().await;
        let response = client(HoldoffMiddleware::new(plain_policy()))
            .put(server.url("/upload"))
            .body(stream("payload"))
            .send()
            .await
            .expect("a response");

        assert_eq!(response.status(), 200);
        assert_eq!(report(&response).reason(), Reason::Success);
        assert_eq!(server.requests_to("/upload").len(), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn fails_clearly_when_a_transport_error_calls_for_a_retry() {
        let start = TokioClock.now();
        let error = client(HoldoffMiddleware::new(plain_policy()))
            .put(refused_url())
            .body(stream("payload"))
            .send()
            .await
            .expect_err("nobody listens");

        assert_eq!(TokioClock.now(), start, "no wait may start");
        assert!(
            error.to_string().starts_with(
                "retry a request whose body is a stream that cannot be cloned: the first \
                 attempt failed; send the body as bytes"
            ),
            "{error}"
        );
        let error = holdoff_error(error);
        assert_eq!(error.kind(), ErrorKind::BodyNotCloneable);
        assert_eq!(error.report().reason(), Reason::BodyNotCloneable);
        assert_eq!(error.status(), None);
        let source = std::error::Error::source(&error).expect("the transport error");
        let source = source
            .downcast_ref::<reqwest_middleware::Error>()
            .expect("reqwest-middleware's error");
        assert!(matches!(source, reqwest_middleware::Error::Reqwest(e) if e.is_connect()));
    }

    #[tokio::test(start_paused = true)]
    async fn a_post_that_would_not_be_retried_anyway_is_an_ordinary_response() {
        let server = TestServer::start().await;
        server.script("/upload", [Reply::unavailable("2")]);
        let response = client(HoldoffMiddleware::new(plain_policy()))
            .post(server.url("/upload"))
            .body(stream("payload"))
            .send()
            .await
            .expect("a response");

        assert_eq!(response.status(), 503);
        assert_eq!(
            report(&response).decision,
            Decision::GiveUp(GiveUpReason::NonIdempotent)
        );
    }
}

mod deadline_bounds_the_task {
    use super::*;

    fn within_5s() -> ClientWithMiddleware {
        client(HoldoffMiddleware::new(plain_policy()).timeout(Duration::from_secs(5)))
    }

    #[tokio::test(start_paused = true)]
    async fn cuts_a_first_attempt_still_running_at_the_deadline() {
        let server = TestServer::start().await;
        server.script("/slow", [Reply::ok("late").delay(Duration::from_secs(10))]);
        let start = TokioClock.now();
        let error = within_5s()
            .get(server.url("/slow"))
            .send()
            .await
            .expect_err("cut at the deadline");

        assert_eq!(TokioClock.now() - start, Duration::from_secs(5));
        let error = holdoff_error(error);
        assert_eq!(error.kind(), ErrorKind::DeadlineReached);
        assert_eq!(
            (error.report().attempts, error.report().reason()),
            (1, Reason::DeadlineReached)
        );
        assert!(
            error
                .to_string()
                .contains("deadline came while the attempt was running")
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_retry_cut_at_the_deadline_returns_the_last_response() {
        let server = TestServer::start().await;
        server.script(
            "/slow",
            [
                Reply::unavailable("1"),
                Reply::ok("late").delay(Duration::from_secs(10)),
            ],
        );
        let start = TokioClock.now();
        let response = within_5s()
            .get(server.url("/slow"))
            .send()
            .await
            .expect("the last response");

        assert_eq!(TokioClock.now() - start, Duration::from_secs(5));
        assert_eq!(response.status(), 503);
        let report = report(&response);
        assert_eq!(
            (report.attempts, report.reason()),
            (2, Reason::DeadlineReached)
        );
        assert!(report.is_deferred());
    }

    #[tokio::test(start_paused = true)]
    async fn does_not_start_a_retry_that_would_not_finish_in_time() {
        let server = TestServer::start().await;
        let slow = |reply: Reply| reply.delay(Duration::from_secs(3));
        server.script("/slow", [slow(Reply::unavailable("1"))]);
        server.set_default("/slow", slow(Reply::ok("ok")));
        let start = TokioClock.now();
        let response = within_5s()
            .get(server.url("/slow"))
            .send()
            .await
            .expect("the 503");

        // Answered at 3 s: a 1 s wait fits in the 2 s left, a 3 s attempt after it does not.
        assert_eq!(TokioClock.now() - start, Duration::from_secs(3));
        assert_eq!(response.status(), 503);
        let report = report(&response);
        assert_eq!(
            report.decision,
            Decision::Defer(DeferReason::AttemptWouldNotFit)
        );
        assert_eq!(server.requests_to("/slow").len(), 1);
        assert!(report.requeue_at().time().is_some(), "the server's time");
    }
}

mod transport {
    use super::*;

    fn counted(middleware: HoldoffMiddleware, attempts: &Attempts) -> ClientWithMiddleware {
        ClientBuilder::new(reqwest_client())
            .with(middleware)
            .with(attempts.clone())
            .build()
    }

    #[tokio::test(start_paused = true)]
    async fn retries_a_refused_connection_on_the_backoff_then_fails() {
        let policy = plain_policy()
            .with_max_attempts(4)
            .with_backoff(Backoff::exponential(
                Duration::from_secs(1),
                Duration::from_secs(60),
            ));
        let attempts = Attempts::default();
        let error = counted(HoldoffMiddleware::new(policy), &attempts)
            .get(refused_url())
            .send()
            .await
            .expect_err("nobody listens");

        let error = holdoff_error(error);
        assert_eq!(error.kind(), ErrorKind::Transport);
        assert!(
            matches!(error.transport(), Some(reqwest_middleware::Error::Reqwest(e)) if e.is_connect()),
            "{error}"
        );
        assert_eq!(
            (error.report().attempts, error.report().reason()),
            (4, Reason::AttemptsExhausted)
        );
        assert_eq!(error.report().requeue_at(), holdoff::Requeue::NoHint);
        assert_eq!(
            error.to_string(),
            "send the request: attempt 4 failed without a response, and the retries ended \
             there (attempts-exhausted)"
        );
        assert_eq!(
            attempts.offsets(),
            [
                Duration::ZERO,
                Duration::from_secs(1),
                Duration::from_secs(3),
                Duration::from_secs(7)
            ]
        );
    }

    #[tokio::test(start_paused = true)]
    async fn does_not_retry_a_post_whose_connection_was_refused() {
        let attempts = Attempts::default();
        let error = counted(HoldoffMiddleware::new(plain_policy()), &attempts)
            .post(refused_url())
            .body("{}")
            .send()
            .await
            .expect_err("nobody listens");

        let error = holdoff_error(error);
        assert_eq!(error.kind(), ErrorKind::Transport);
        assert_eq!(
            (error.report().attempts, error.report().reason()),
            (1, Reason::NonIdempotent)
        );
        assert_eq!(attempts.offsets(), [Duration::ZERO]);
    }

    #[tokio::test(start_paused = true)]
    async fn retries_after_a_reset_connection() {
        let server = TestServer::start().await;
        server.script("/v1/chat", [Reply::reset()]);
        let policy = plain_policy().with_backoff(Backoff::Constant(Duration::from_secs(2)));
        let response = client(HoldoffMiddleware::new(policy))
            .get(server.url("/v1/chat"))
            .send()
            .await
            .expect("a response");

        assert_eq!(response.status(), 200);
        assert_eq!(report(&response).attempts, 2);
        assert_eq!(
            offsets(&server.requests_to("/v1/chat")),
            [Duration::ZERO, Duration::from_secs(2)]
        );
    }
}

mod gate {
    use super::*;

    fn gated(max_attempts: u32) -> ClientWithMiddleware {
        let gate = Arc::new(Gate::in_memory().spread(Jitter::None));
        client(HoldoffMiddleware::new(plain_policy().with_max_attempts(max_attempts)).gate(gate))
    }

    #[tokio::test(start_paused = true)]
    async fn holds_other_requests_to_the_same_server_until_the_hint() {
        let server = TestServer::start().await;
        server.script("/a", [Reply::too_many_requests("2")]);
        let client = gated(1);
        let first = client.get(server.url("/a")).send().await.expect("response");
        assert_eq!(first.status(), 429);
        let second = client.get(server.url("/b")).send().await.expect("response");
        assert_eq!(second.status(), 200);

        let a = server.requests_to("/a");
        let b = server.requests_to("/b");
        assert_eq!(b[0].at - a[0].at, Duration::from_secs(2));
    }

    #[tokio::test(start_paused = true)]
    async fn a_gate_key_of_its_own_is_not_held() {
        let server = TestServer::start().await;
        server.script("/a", [Reply::too_many_requests("2")]);
        let client = gated(1);
        client.get(server.url("/a")).send().await.expect("response");
        client
            .get(server.url("/b"))
            .with_extension(GateKey("another tenant".into()))
            .send()
            .await
            .expect("response");

        let a = server.requests_to("/a");
        let b = server.requests_to("/b");
        assert_eq!(b[0].at, a[0].at);
    }

    #[tokio::test(start_paused = true)]
    async fn defers_before_sending_when_the_gate_opens_after_the_deadline() {
        let server = TestServer::start().await;
        server.script("/a", [Reply::too_many_requests("30")]);
        let client = gated(1);
        client.get(server.url("/a")).send().await.expect("response");
        let error = client
            .get(server.url("/b"))
            .with_extension(Timeout(Duration::from_secs(10)))
            .send()
            .await
            .expect_err("the gate is closed past the deadline");

        let error = holdoff_error(error);
        assert_eq!(error.kind(), ErrorKind::DeferredAtGate);
        let a = server.requests_to("/a");
        assert_eq!(
            error.permitted_at(),
            Some(a[0].at + Duration::from_secs(30))
        );
        assert!(server.requests_to("/b").is_empty());
    }
}

mod quota_body {
    use super::*;
    use holdoff::NoQuotaClassifier;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// A server that answers its first connection with the head of a `429 Retry-After: 1`
    /// whose chunked body never comes, and every later one with `200`. Returns its URL.
    async fn head_then_silence() -> String {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let url = format!("http://{}/v1/chat", listener.local_addr().expect("addr"));
        tokio::spawn(async move {
            let mut held = Vec::new();
            for n in 0.. {
                let Ok((mut stream, _)) = listener.accept().await else {
                    return;
                };
                let mut request = [0u8; 4096];
                let _ = stream.read(&mut request).await;
                let head: &[u8] = if n == 0 {
                    b"HTTP/1.1 429 Too Many Requests\r\nretry-after: 1\r\n\
                      transfer-encoding: chunked\r\n\r\n"
                } else {
                    b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\nok"
                };
                let _ = stream.write_all(head).await;
                // Keep the throttled connection open, its body unsent.
                held.push(stream);
            }
        });
        url
    }

    #[tokio::test(start_paused = true)]
    async fn a_429_body_is_not_awaited_when_the_classifier_reads_none() {
        let url = head_then_silence().await;
        let policy = plain_policy().with_quota_classifier(Arc::new(NoQuotaClassifier));
        let client = client(HoldoffMiddleware::new(policy));
        let start = TokioClock.now();

        let response = client.get(&url).send().await.expect("a response");

        assert_eq!(response.status(), 200);
        assert_eq!(report(&response).attempts, 2);
        // Judged on the head: the retry came 1 s after it, not after a body.
        assert_eq!(TokioClock.now() - start, Duration::from_secs(1));
    }

    /// A server whose first answer is a `429 Retry-After: 2` whose body comes 1 s after its
    /// head, and `200` after that. Returns its URL and when each request arrived.
    async fn head_then_late_body() -> (String, Arc<Mutex<Vec<Instant>>>) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let url = format!("http://{}/v1/chat", listener.local_addr().expect("addr"));
        let arrivals = Arc::new(Mutex::new(Vec::new()));
        let seen = Arc::clone(&arrivals);
        tokio::spawn(async move {
            for n in 0.. {
                let Ok((mut stream, _)) = listener.accept().await else {
                    return;
                };
                let mut request = [0u8; 4096];
                let _ = stream.read(&mut request).await;
                seen.lock().expect("lock").push(TokioClock.now());
                if n == 0 {
                    let _ = stream
                        .write_all(
                            b"HTTP/1.1 429 Too Many Requests\r\nretry-after: 2\r\n\
                              content-length: 2\r\nconnection: close\r\n\r\n",
                        )
                        .await;
                    TokioClock
                        .sleep_until(TokioClock.now() + Duration::from_secs(1))
                        .await;
                    let _ = stream.write_all(b"{}").await;
                } else {
                    let _ = stream
                        .write_all(
                            b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\nok",
                        )
                        .await;
                }
            }
        });
        (url, arrivals)
    }

    #[tokio::test(start_paused = true)]
    async fn a_late_429_body_delays_the_decision_not_the_retry() {
        let (url, arrivals) = head_then_late_body().await;
        let response = client(HoldoffMiddleware::new(plain_policy()))
            .get(&url)
            .send()
            .await
            .expect("a response");

        assert_eq!(response.status(), 200);
        let arrivals = arrivals.lock().expect("lock").clone();
        // Two seconds after the head, as the hint says: not three, after the body.
        assert_eq!(arrivals[1] - arrivals[0], Duration::from_secs(2));
    }

    #[tokio::test(start_paused = true)]
    async fn the_default_classifier_waits_for_the_start_of_a_429_body() {
        let url = head_then_silence().await;
        let client = client(HoldoffMiddleware::new(plain_policy()));

        let sent = tokio::time::timeout(Duration::from_secs(30), client.get(&url).send()).await;

        assert!(sent.is_err(), "the body it reads never comes: {sent:?}");
    }
}
