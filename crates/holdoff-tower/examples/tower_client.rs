//! A tower + hyper client whose retries honour `Retry-After`.
//!
//! tower's `Retry` middleware with holdoff's [`RetryPolicy`] in front of a hyper-util client.
//! The local test server answers `503` with `Retry-After: 1`, then with an HTTP-date two
//! seconds ahead of its own (skewed) clock, then `200`.
//!
//! ```sh
//! cargo run -p holdoff-tower --example tower_client
//! ```

use std::time::Duration;

use bytes::Bytes;
use holdoff::clock::{Clock, TokioClock};
use holdoff::{Backoff, Policy};
use holdoff_testkit::{Reply, TestServer};
use holdoff_tower::{RetryLayer, RetryPolicy, RetryReport};
use http_body_util::Empty;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use tower::{ServiceBuilder, ServiceExt};

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let api = TestServer::start().await;
    // The server's clock runs an hour ahead of ours: its HTTP-date still means "2 s from now"
    // because holdoff measures it against the server's own `Date`.
    let server_now = TokioClock.wall_now() + Duration::from_secs(3600);
    api.script(
        "/v1/items",
        [
            Reply::unavailable("1"),
            Reply::status(503)
                .date(server_now)
                .retry_after_date(server_now + Duration::from_secs(2)),
        ],
    );

    let client = Client::builder(TokioExecutor::new()).build_http::<Empty<Bytes>>();
    let policy = Policy::default().with_backoff(Backoff::Constant(Duration::from_millis(100)));
    let service = ServiceBuilder::new()
        .layer(RetryLayer::new(
            RetryPolicy::new(policy).timeout(Duration::from_secs(30)),
        ))
        .service(client);

    let started = TokioClock.now();
    let request = http::Request::get(api.url("/v1/items")).body(Empty::new())?;
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
    for (n, request) in api.requests_to("/v1/items").iter().enumerate() {
        println!("  attempt {} sent at +{:.3?}", n + 1, request.at - started);
    }
    api.shutdown().await;
    Ok(())
}
