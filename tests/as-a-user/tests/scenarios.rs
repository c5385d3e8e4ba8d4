//! The five cases a new user tries first, through each way holdoff offers to send a request —
//! holdoff-reqwest's middleware, holdoff's own `Retrier`, holdoff-tower's policy — against a
//! real HTTP server on loopback, under tokio's paused clock (no real sleeping). Every measured
//! gap between two attempts is checked against the hint the server sent: never shorter.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use holdoff::retry::{Outcome, Retrier};
use holdoff::{DeferReason, GiveUpReason, HttpDate, ParseErrorKind, Policy, Reason, RetryReport};
use holdoff_reqwest::{HoldoffMiddleware, RetryReportExt};
use holdoff_tower::RetryPolicy;
use http::{Method, Request, Response, StatusCode};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::time::Instant;
use tower::{ServiceBuilder, ServiceExt};

/// One scripted answer: a status and its headers.
#[derive(Clone)]
struct Answer {
    status: u16,
    headers: Vec<(&'static str, String)>,
}

fn answer(status: u16, headers: &[(&'static str, &str)]) -> Answer {
    let headers = headers.iter().map(|(k, v)| (*k, (*v).to_owned())).collect();
    Answer { status, headers }
}

/// A server that gives each request the next scripted answer, then `200`, and records when
/// each request arrived (on tokio's clock, which the test pauses).
struct Server {
    addr: SocketAddr,
    arrivals: Arc<Mutex<Vec<Instant>>>,
}

impl Server {
    async fn start(script: Vec<Answer>) -> Server {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("address");
        let arrivals = Arc::new(Mutex::new(Vec::new()));
        let script = Arc::new(Mutex::new(script.into_iter()));
        let seen = Arc::clone(&arrivals);
        tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else { return };
                let (script, seen) = (Arc::clone(&script), Arc::clone(&seen));
                let service = service_fn(move |_request: Request<Incoming>| {
                    seen.lock().expect("lock").push(Instant::now());
                    let next = script.lock().expect("lock").next();
                    let next = next.unwrap_or_else(|| answer(200, &[]));
                    let mut response = Response::new(Full::new(Bytes::from_static(b"{}")));
                    *response.status_mut() = StatusCode::from_u16(next.status).expect("status");
                    for (name, value) in next.headers {
                        response.headers_mut().append(name, value.parse().expect("value"));
                    }
                    async move { Ok::<_, Infallible>(response) }
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
async fn send(way: Way, method: Method, url: &str, timeout: Option<Duration>) -> (u16, RetryReport) {
    let policy = Policy::default();
    match way {
        Way::Reqwest => {
            let mut middleware = HoldoffMiddleware::new(policy);
            if let Some(timeout) = timeout {
                middleware = middleware.timeout(timeout);
            }
            let http = reqwest::Client::builder().no_proxy().build().expect("client");
            let client = reqwest_middleware::ClientBuilder::new(http).with(middleware).build();
            let response = client.request(method, url).send().await.expect("a response");
            let report = response.retry_report().expect("a report").clone();
            (response.status().as_u16(), report)
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
                other => other.into_response().expect("a response").status().as_u16(),
            };
            (status, report)
        }
        Way::Tower => {
            let client = Client::builder(TokioExecutor::new()).build_http::<Full<Bytes>>();
            let mut retry = RetryPolicy::new(policy);
            if let Some(timeout) = timeout {
                retry = retry.timeout(timeout);
            }
            let service = ServiceBuilder::new().retry(retry).service(client);
            let request = Request::builder()
                .method(method)
                .uri(url)
                .body(Full::new(Bytes::new()))
                .expect("request");
            let response = service.oneshot(request).await.expect("a response");
            let report = response.extensions().get::<RetryReport>().expect("a report").clone();
            (response.status().as_u16(), report)
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
        assert!(gaps[0] >= Duration::from_secs(2), "{way:?} retried after {:?}", gaps[0]);
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
        assert!(gaps[0] >= Duration::from_secs(3), "{way:?} retried after {:?}", gaps[0]);
    }
}

#[tokio::test(start_paused = true)]
async fn a_hint_longer_than_the_deadline_is_deferred_with_the_servers_time() {
    for way in WAYS {
        let server = Server::start(vec![answer(503, &[("retry-after", "30")])]).await;
        let start = Instant::now();
        let (status, report) =
            send(way, Method::GET, &server.url(), Some(Duration::from_secs(5))).await;
        assert_eq!((status, report.attempts), (503, 1), "{way:?}: not retried early");
        assert_eq!(report.deferred(), Some(DeferReason::DeadlineExceeded), "{way:?}");
        let permitted = report.permitted.expect("the server named a time");
        assert_eq!(permitted.after, Duration::from_secs(30), "{way:?}");
        assert!(report.requeue_at().is_some(), "{way:?}: a time to persist");
        assert_eq!(Instant::now(), start, "{way:?}: no time spent waiting");
    }
}

#[tokio::test(start_paused = true)]
async fn a_post_is_not_retried_unless_marked_safe() {
    for way in WAYS {
        let server = Server::start(vec![answer(503, &[("retry-after", "1")])]).await;
        let (status, report) = send(way, Method::POST, &server.url(), None).await;
        assert_eq!((status, report.attempts), (503, 1), "{way:?}");
        assert_eq!(report.gave_up(), Some(GiveUpReason::NonIdempotent), "{way:?}");
        assert!(server.gaps().is_empty(), "{way:?} sent the POST again");
    }
}

#[tokio::test(start_paused = true)]
async fn retry_after_soon_is_malformed_never_read_as_zero() {
    for way in WAYS {
        let server = Server::start(vec![answer(503, &[("retry-after", "soon")])]).await;
        let (status, report) = send(way, Method::GET, &server.url(), None).await;
        assert_eq!((status, report.attempts), (503, 1), "{way:?}: not retried at once");
        assert_eq!(report.reason(), Reason::MalformedRetryAfter, "{way:?}");
        let error = report.malformed.as_ref().expect("the raw value");
        assert_eq!(error.raw(), b"soon");
        assert_eq!(error.kind(), ParseErrorKind::NeitherDelayNorDate);
        // The server named no time: no "permitted now" for a queue to retry at.
        assert_eq!(report.permitted, None, "{way:?}");
        assert_eq!(report.requeue_at(), None, "{way:?}");
    }
}
