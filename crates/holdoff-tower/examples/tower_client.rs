//! A tower + hyper client whose retries honour `Retry-After`.
//!
//! holdoff-tower's [`RetryLayer`] (tower's `Retry` with holdoff's [`RetryPolicy`]) in front
//! of a hyper-util client.
//! The local server (`start_api`) answers `503` with `Retry-After: 1`, then with an HTTP-date two
//! seconds ahead of its own (skewed) clock, then `200`.
//!
//! ```sh
//! cargo run -p holdoff-tower --example tower_client
//! ```

use std::convert::Infallible;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use bytes::Bytes;
use holdoff_tower::holdoff::clock::{Clock, TokioClock};
use holdoff_tower::holdoff::{Backoff, HttpDate, Policy};
use holdoff_tower::{RetryLayer, RetryPolicy, RetryReport};
use http_body_util::{Empty, Full};
use hyper::body::Incoming;
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioIo};
use tower::{ServiceBuilder, ServiceExt};

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let (url, arrivals) = start_api().await?;

    let client = Client::builder(TokioExecutor::new()).build_http::<Empty<Bytes>>();
    let policy = Policy::default().with_backoff(Backoff::Constant(Duration::from_millis(100)));
    let service = ServiceBuilder::new()
        .layer(RetryLayer::new(
            RetryPolicy::new(policy).timeout(Duration::from_secs(30)),
        ))
        .service(client);

    let started = TokioClock.now();
    let request = http::Request::get(url).body(Empty::new())?;
    let response = service.oneshot(request).await?;
    let report = response
        .extensions()
        .get::<RetryReport>()
        .ok_or("the policy attached no report")?;
    println!(
        "{} after {} attempts in {:.1?} ({})",
        response.status(),
        report.attempts,
        TokioClock.now() - started,
        report.reason()
    );
    let arrivals = arrivals.lock().unwrap_or_else(PoisonError::into_inner);
    for (n, at) in arrivals.iter().enumerate() {
        println!("  attempt {} sent at +{:.3?}", n + 1, *at - started);
    }
    Ok(())
}

/// A stand-in for the API on a free loopback port (any server would do): `503` with
/// `Retry-After: 1`, then `503` with a `Date` an hour ahead of ours and a `Retry-After`
/// date two seconds after it, then `200`. Returns its URL and when each request arrived.
async fn start_api() -> std::io::Result<(String, Arc<Mutex<Vec<Instant>>>)> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let url = format!("http://{}/v1/items", listener.local_addr()?);
    let arrivals = Arc::new(Mutex::new(Vec::new()));
    let seen = Arc::clone(&arrivals);
    let count = Arc::new(AtomicUsize::new(0));
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let (seen, count) = (Arc::clone(&seen), Arc::clone(&count));
            let service = hyper::service::service_fn(move |_: http::Request<Incoming>| {
                seen.lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .push(TokioClock.now());
                // The server's clock runs an hour ahead of ours: its HTTP-date still means
                // "2 s from now", because holdoff measures it against the server's `Date`.
                let server_now = TokioClock.wall_now() + Duration::from_secs(3600);
                let date = |at| HttpDate::from_system_time(at).map(|d| d.to_string());
                let (status, headers) = match count.fetch_add(1, Ordering::SeqCst) {
                    0 => (503, vec![("retry-after", Some("1".to_owned()))]),
                    1 => (
                        503,
                        vec![
                            ("date", date(server_now)),
                            ("retry-after", date(server_now + Duration::from_secs(2))),
                        ],
                    ),
                    _ => (200, vec![]),
                };
                let mut response = http::Response::new(Full::new(Bytes::new()));
                *response.status_mut() = http::StatusCode::from_u16(status).unwrap_or_default();
                for (name, value) in headers {
                    if let Some(value) = value.and_then(|v| v.parse().ok()) {
                        response.headers_mut().insert(name, value);
                    }
                }
                std::future::ready(Ok::<_, Infallible>(response))
            });
            tokio::spawn(
                hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service),
            );
        }
    });
    Ok((url, arrivals))
}
