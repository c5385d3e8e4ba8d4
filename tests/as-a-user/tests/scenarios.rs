//! The cases a new user tries first, through each way holdoff offers to send a request —
//! holdoff-reqwest's middleware, holdoff's own `Retrier`, holdoff-tower's layer — against a
//! real HTTP server on loopback, under tokio's paused clock (no real sleeping). Every measured
//! gap between two attempts is checked against the hint the server sent: never shorter. Then
//! the deadline (a slow server under a 5 s timeout), a default that never waits for hours, and
//! a report with every outcome, transport errors included.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use holdoff::retry::{Outcome, Retrier};
use holdoff::{
    DeferReason, GiveUpReason, HttpDate, ParseErrorKind, Policy, Reason, Requeue, RetryReport, Skew,
};
use holdoff_reqwest::{HoldoffMiddleware, RetryReportExt};
use holdoff_tower::{RetryLayer, RetryPolicy};
use http::{Method, Request, Response, StatusCode};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::time::Instant;
use tower::{ServiceBuilder, ServiceExt};

/// One scripted answer: a status and its headers, sent after `delay`.
#[derive(Clone)]
struct Answer {
    status: u16,
    headers: Vec<(&'static str, String)>,
    delay: Duration,
}

fn answer(status: u16, headers: &[(&'static str, &str)]) -> Answer {
    let headers = headers.iter().map(|(k, v)| (*k, (*v).to_owned())).collect();
    Answer {
        status,
        headers,
        delay: Duration::ZERO,
    }
}

impl Answer {
    /// The same answer, sent `delay` after the request arrives (on tokio's paused clock).
    fn after(self, delay: Duration) -> Answer {
        Answer { delay, ..self }
    }
}

/// A server that gives each request the next scripted answer, then the last answer (`200`
/// when there is none), and records when each request arrived (on tokio's clock, which the
/// test pauses).
struct Server {
    addr: SocketAddr,
    arrivals: Arc<Mutex<Vec<Instant>>>,
}

impl Server {
    async fn start(script: Vec<Answer>) -> Server {
        Server::start_then(script, answer(200, &[])).await
    }

    /// A server that answers `then` once the script has run out.
    async fn start_then(script: Vec<Answer>, then: Answer) -> Server {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("address");
        let arrivals = Arc::new(Mutex::new(Vec::new()));
        let script = Arc::new(Mutex::new(script.into_iter()));
        let seen = Arc::clone(&arrivals);
        let then = then.clone();
        tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    return;
                };
                let (script, seen) = (Arc::clone(&script), Arc::clone(&seen));
                let then = then.clone();
                let service = service_fn(move |_request: Request<Incoming>| {
                    seen.lock().expect("lock").push(Instant::now());
                    let next = script.lock().expect("lock").next();
                    let next = next.unwrap_or_else(|| then.clone());
                    let mut response = Response::new(Full::new(Bytes::from_static(b"{}")));
                    *response.status_mut() = StatusCode::from_u16(next.status).expect("status");
                    for (name, value) in next.headers {
                        response
                            .headers_mut()
                            .append(name, value.parse().expect("value"));
                    }
                    async move {
                        tokio::time::sleep(next.delay).await;
                        Ok::<_, Infallible>(response)
                    }
                });
                tokio::spawn(async move {
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        Server { addr, arrivals }
    }

    fn url(&self) -> String {
        format!("http://{}/v1/items", self.addr)
    }

    fn requests(&self) -> usize {
        self.arrivals.lock().expect("lock").len()
    }

    /// The gaps between consecutive arrivals.
    fn gaps(&self) -> Vec<Duration> {
        let arrivals = self.arrivals.lock().expect("lock");
        arrivals.windows(2).map(|w| w[1] - w[0]).collect()
    }
}

/// The three ways to send, each as a user of the published crates would set it up.
#[derive(Clone, Copy, Debug)]
enum Way {
    Reqwest,
    Retrier,
    Tower,
}

const WAYS: [Way; 3] = [Way::Reqwest, Way::Retrier, Way::Tower];

/// Sends one request the `way` says, with an optional whole-task timeout, and returns the
/// final status with the report.
async fn send(
    way: Way,
    method: Method,
    url: &str,
    timeout: Option<Duration>,
) -> (u16, RetryReport) {
    match try_send(way, method, url, timeout).await {
        (Some(status), report) => (status, report),
        (None, report) => panic!("{way:?}: expected a response, got an error; {report:?}"),
    }
}

/// Sends one request the `way` says and returns the final status, if a response came back,
/// with the report, which every outcome carries: errors included.
async fn try_send(
    way: Way,
    method: Method,
    url: &str,
    timeout: Option<Duration>,
) -> (Option<u16>, RetryReport) {
    let policy = Policy::default();
    match way {
        Way::Reqwest => {
            let mut middleware = HoldoffMiddleware::new(policy);
            if let Some(timeout) = timeout {
                middleware = middleware.timeout(timeout);
            }
            let http = reqwest::Client::builder()
                .no_proxy()
                .build()
                .expect("client");
            let client = reqwest_middleware::ClientBuilder::new(http)
                .with(middleware)
                .build();
            match client.request(method, url).send().await {
                Ok(response) => {
                    let report = response.retry_report().expect("a report").clone();
                    (Some(response.status().as_u16()), report)
                }
                Err(reqwest_middleware::Error::Middleware(error)) => {
                    let error = error
                        .downcast::<holdoff_reqwest::Error>()
                        .expect("holdoff's error");
                    (None, error.report().clone())
                }
                Err(other) => panic!("a bare error, without a report: {other}"),
            }
        }
        Way::Retrier => {
            let client = Client::builder(TokioExecutor::new()).build_http::<Full<Bytes>>();
            let mut retrier = Retrier::new(policy, method.clone());
            if let Some(timeout) = timeout {
                retrier = retrier.timeout(timeout);
            }
            let (outcome, report) = retrier
                .run(|_attempt| {
                    let request = Request::builder()
                        .method(method.clone())
                        .uri(url)
                        .body(Full::new(Bytes::new()))
                        .expect("request");
                    client.request(request)
                })
                .await;
            let status = match outcome {
                Outcome::Cancelled { .. } => panic!("nothing cancels here"),
                other => other
                    .into_response()
                    .map(|response| response.status().as_u16()),
            };
            (status, report)
        }
        Way::Tower => {
            let client = Client::builder(TokioExecutor::new()).build_http::<Full<Bytes>>();
            let mut retry = RetryPolicy::new(policy);
            if let Some(timeout) = timeout {
                retry = retry.timeout(timeout);
            }
            let service = ServiceBuilder::new()
                .layer(RetryLayer::new(retry))
                .service(client);
            let request = Request::builder()
                .method(method)
                .uri(url)
                .body(Full::new(Bytes::new()))
                .expect("request");
            match service.oneshot(request).await {
                Ok(response) => {
                    let report = response
                        .extensions()
                        .get::<RetryReport>()
                        .expect("a report");
                    (Some(response.status().as_u16()), report.clone())
                }
                Err(error) => (None, error.report().clone()),
            }
        }
    }
}

#[tokio::test(start_paused = true)]
async fn a_429_with_delay_seconds_is_retried_no_sooner_than_the_hint() {
    for way in WAYS {
        let server = Server::start(vec![answer(429, &[("retry-after", "2")])]).await;
        let (status, report) = send(way, Method::GET, &server.url(), None).await;
        assert_eq!((status, report.attempts), (200, 2), "{way:?}");
        assert_eq!(report.reason(), Reason::Success, "{way:?}");
        let gaps = server.gaps();
        assert!(
            gaps[0] >= Duration::from_secs(2),
            "{way:?} retried after {:?}",
            gaps[0]
        );
    }
}

#[tokio::test(start_paused = true)]
async fn a_503_with_an_http_date_waits_until_that_date_on_the_servers_clock() {
    for way in WAYS {
        // The server's clock (`Date`) and the date it names, three seconds apart.
        let now = SystemTime::now();
        let date = HttpDate::from_system_time(now).expect("a date").to_string();
        let later = HttpDate::from_system_time(now + Duration::from_secs(3))
            .expect("a date")
            .to_string();
        let script = vec![answer(503, &[("date", &date), ("retry-after", &later)])];
        let server = Server::start(script).await;
        let (status, report) = send(way, Method::GET, &server.url(), None).await;
        assert_eq!((status, report.attempts), (200, 2), "{way:?}");
        let gaps = server.gaps();
        assert!(
            gaps[0] >= Duration::from_secs(3),
            "{way:?} retried after {:?}",
            gaps[0]
        );
    }
}

#[tokio::test(start_paused = true)]
async fn a_hint_longer_than_the_deadline_is_deferred_with_the_servers_time() {
    for way in WAYS {
        let server = Server::start(vec![answer(503, &[("retry-after", "30")])]).await;
        let start = Instant::now();
        let (status, report) = send(
            way,
            Method::GET,
            &server.url(),
            Some(Duration::from_secs(5)),
        )
        .await;
        assert_eq!(
            (status, report.attempts),
            (503, 1),
            "{way:?}: not retried early"
        );
        assert_eq!(
            report.deferred(),
            Some(DeferReason::DeadlineExceeded),
            "{way:?}"
        );
        let permitted = report.permitted.expect("the server named a time");
        assert_eq!(permitted.after, Duration::from_secs(30), "{way:?}");
        assert!(
            matches!(report.requeue_at(), Requeue::At(_)),
            "{way:?}: a time to persist"
        );
        assert_eq!(Instant::now(), start, "{way:?}: no time spent waiting");
    }
}

#[tokio::test(start_paused = true)]
async fn a_post_is_not_retried_unless_marked_safe() {
    for way in WAYS {
        let server = Server::start(vec![answer(503, &[("retry-after", "1")])]).await;
        let (status, report) = send(way, Method::POST, &server.url(), None).await;
        assert_eq!((status, report.attempts), (503, 1), "{way:?}");
        assert_eq!(
            report.gave_up(),
            Some(GiveUpReason::NonIdempotent),
            "{way:?}"
        );
        assert!(server.gaps().is_empty(), "{way:?} sent the POST again");
    }
}

#[tokio::test(start_paused = true)]
async fn retry_after_soon_is_malformed_never_read_as_zero() {
    for way in WAYS {
        let server = Server::start(vec![answer(503, &[("retry-after", "soon")])]).await;
        let (status, report) = send(way, Method::GET, &server.url(), None).await;
        assert_eq!(
            (status, report.attempts),
            (503, 1),
            "{way:?}: not retried at once"
        );
        assert_eq!(report.reason(), Reason::MalformedRetryAfter, "{way:?}");
        let error = report.malformed.as_ref().expect("the raw value");
        assert_eq!(error.raw(), b"soon");
        assert_eq!(error.kind(), ParseErrorKind::NeitherDelayNorDate);
        // The server named no time: no "permitted now" for a queue to retry at.
        assert_eq!(report.permitted, None, "{way:?}");
        assert_eq!(report.requeue_at(), Requeue::NoHint, "{way:?}");
    }
}

/// A GET to `server` that must be done within 5 s: the status if a response came back, the
/// report, and how long it took on the paused clock.
async fn get_within_5s(way: Way, server: &Server) -> (Option<u16>, RetryReport, Duration) {
    let start = Instant::now();
    let timeout = Some(Duration::from_secs(5));
    let (status, report) = try_send(way, Method::GET, &server.url(), timeout).await;
    (status, report, Instant::now() - start)
}

/// The slow server: every answer takes 3 s; the first is a `503` with
/// `Retry-After: 1`. Under a 5 s timeout, the retry would end at 7 s: it is not started.
#[tokio::test(start_paused = true)]
async fn a_slow_server_under_a_5s_timeout_ends_in_time_with_a_deadline_result() {
    for way in WAYS {
        let slow = Duration::from_secs(3);
        let first = answer(503, &[("retry-after", "1")]).after(slow);
        let server = Server::start_then(vec![first], answer(200, &[]).after(slow)).await;
        let (status, report, took) = get_within_5s(way, &server).await;
        assert!(took <= Duration::from_secs(5), "{way:?}: past the deadline");
        assert_eq!(status, Some(503), "{way:?}: the last response");
        assert_eq!(
            report.deferred(),
            Some(DeferReason::AttemptWouldNotFit),
            "{way:?}"
        );
        assert_eq!(report.attempts, 1, "{way:?}");
        assert_eq!(
            server.requests(),
            1,
            "{way:?}: no retry that could not finish"
        );
        assert!(
            matches!(report.requeue_at(), Requeue::At(_)),
            "{way:?}: the server's time"
        );
    }
}

/// An attempt still running at the deadline is cut there.
#[tokio::test(start_paused = true)]
async fn an_attempt_still_running_at_the_deadline_is_cut() {
    for way in WAYS {
        let server = Server::start(vec![answer(200, &[]).after(Duration::from_secs(10))]).await;
        let (status, report, took) = get_within_5s(way, &server).await;
        assert_eq!(took, Duration::from_secs(5), "{way:?}: cut at 5 s");
        assert_eq!(status, None, "{way:?}: nothing came back");
        assert_eq!(report.reason(), Reason::DeadlineReached, "{way:?}");
        assert_eq!(report.attempts, 1, "{way:?}");
        assert_eq!(report.requeue_at(), Requeue::NoHint, "{way:?}");
    }
}

/// The README's snippet sets no deadline: a server that asks for an hour gets a deferral at
/// once, never a send that waits for hours.
#[tokio::test(start_paused = true)]
async fn without_a_deadline_a_one_hour_hint_is_deferred_not_waited_for() {
    for way in WAYS {
        let server = Server::start(vec![answer(429, &[("retry-after", "3600")])]).await;
        let start = Instant::now();
        let (status, report) = send(way, Method::GET, &server.url(), None).await;
        assert_eq!(Instant::now(), start, "{way:?}: no waiting");
        assert_eq!((status, report.attempts), (429, 1), "{way:?}");
        assert_eq!(
            report.deferred(),
            Some(DeferReason::HintExceedsMaxWait),
            "{way:?}"
        );
        let permitted = report.permitted.expect("the server named a time");
        assert_eq!(
            permitted.after,
            Duration::from_secs(3600),
            "{way:?}: never capped"
        );
    }
}

/// Connection refused: the error comes back with the report, through every way.
#[tokio::test(start_paused = true)]
async fn a_transport_error_carries_the_report() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let url = format!(
        "http://{}/v1/items",
        listener.local_addr().expect("address")
    );
    drop(listener);
    for way in WAYS {
        let (status, report) =
            try_send(way, Method::GET, &url, Some(Duration::from_secs(60))).await;
        assert_eq!(status, None, "{way:?}");
        assert_eq!(report.attempts, 5, "{way:?}: the default five attempts");
        assert_eq!(report.reason(), Reason::AttemptsExhausted, "{way:?}");
        assert_eq!(report.requeue_at(), Requeue::NoHint, "{way:?}");
    }
}

/// `Retry-After: 99999999999999999999` asks for longer than any clock can say: a queue must
/// not read it as "no hint" and fall back to its own short backoff.
#[tokio::test(start_paused = true)]
async fn a_hint_beyond_range_is_not_spelled_like_no_hint() {
    for way in WAYS {
        let forever = answer(503, &[("retry-after", "99999999999999999999")]);
        let server = Server::start(vec![forever]).await;
        let (status, report) = send(way, Method::GET, &server.url(), None).await;
        assert_eq!((status, report.attempts), (503, 1), "{way:?}");
        assert!(report.is_deferred(), "{way:?}");
        assert_eq!(report.requeue_at(), Requeue::BeyondRange, "{way:?}");

        let silent = Server::start_then(vec![], answer(503, &[])).await;
        let (_, report) = send(
            way,
            Method::GET,
            &silent.url(),
            Some(Duration::from_secs(60)),
        )
        .await;
        assert_eq!(report.requeue_at(), Requeue::NoHint, "{way:?}");
    }
}

/// A well-synchronised server's `Date` has whole seconds: it is up to a second behind our
/// clock, and that is no skew. (hyper's server writes `Date` on every response from the
/// clock of this very process.)
#[tokio::test(start_paused = true)]
async fn a_date_within_its_one_second_resolution_is_no_skew() {
    let second = |t: SystemTime| {
        t.duration_since(SystemTime::UNIX_EPOCH)
            .expect("after 1970")
            .as_secs()
    };
    for way in WAYS {
        let server = Server::start(vec![]).await;
        // A run that crosses a second boundary may see the `Date` a whole second behind:
        // then it is run again.
        for _ in 0..5 {
            let before = SystemTime::now();
            let (status, report) = send(way, Method::GET, &server.url(), None).await;
            if second(before) != second(SystemTime::now()) {
                continue;
            }
            assert_eq!(status, 200, "{way:?}");
            assert_eq!(
                report.skew,
                Some(Skew::Ahead(Duration::ZERO)),
                "{way:?}: {report:?}"
            );
            break;
        }
    }
    assert_eq!(Skew::RESOLUTION, Duration::from_secs(1));
}

/// A body that cannot be cloned is named for what it is when a retry is needed.
#[tokio::test(start_paused = true)]
async fn a_body_that_cannot_be_cloned_is_named_not_cancelled() {
    let server = Server::start(vec![answer(503, &[("retry-after", "1")])]).await;
    let http = reqwest::Client::builder()
        .no_proxy()
        .build()
        .expect("client");
    let client = reqwest_middleware::ClientBuilder::new(http)
        .with(HoldoffMiddleware::new(Policy::default()).timeout(Duration::from_secs(30)))
        .build();
    let error = client
        .put(server.url())
        .body(reqwest::Body::wrap(String::from("a stream")))
        .send()
        .await
        .expect_err("cannot be sent again");
    let reqwest_middleware::Error::Middleware(error) = error else {
        panic!("expected holdoff's error: {error}");
    };
    let error = error
        .downcast::<holdoff_reqwest::Error>()
        .expect("holdoff's error");
    assert_eq!(error.kind(), holdoff_reqwest::ErrorKind::BodyNotCloneable);
    assert_eq!(
        error.report().gave_up(),
        Some(GiveUpReason::BodyNotCloneable)
    );
    assert_eq!(server.requests(), 1);
}
