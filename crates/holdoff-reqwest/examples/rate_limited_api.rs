//! A client calling a rate-limited API with reqwest and holdoff.
//!
//! The "API" is a local server (`support/mod.rs`) that answers `429 Too Many Requests` with
//! `Retry-After: 1`, then `503` with `retry-after-ms: 1500`, then `200`. The middleware
//! waits exactly as long as each answer asks (never less), and the response tells what it did.
//!
//! ```sh
//! cargo run -p holdoff-reqwest --example rate_limited_api
//! ```

mod support;

use std::time::Duration;

use holdoff_reqwest::holdoff::clock::{Clock, TokioClock};
use holdoff_reqwest::holdoff::{Backoff, Jitter, Policy};
use holdoff_reqwest::{HoldoffMiddleware, RetryReportExt};

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let api = support::Api::start(&[(
        "/v1/completions",
        &[
            "429 Too Many Requests\r\nretry-after: 1",
            "503 Service Unavailable\r\nretry-after-ms: 1500",
        ],
    )])
    .await?;

    let policy = Policy::default()
        .with_backoff(Backoff::exponential(
            Duration::from_millis(200),
            Duration::from_secs(10),
        ))
        .with_jitter(Jitter::Uniform(Duration::from_millis(100)));
    let http = reqwest::Client::builder().no_proxy().build()?;
    let client = reqwest_middleware::ClientBuilder::new(http)
        .with(HoldoffMiddleware::new(policy).timeout(Duration::from_secs(30)))
        .build();

    let started = TokioClock.now();
    let response = client
        .post(api.url("/v1/completions"))
        .header("idempotency-key", "job-42")
        .body(r#"{"prompt": "hello"}"#)
        .send()
        .await?;
    let report = response
        .retry_report()
        .ok_or("the middleware attached no report")?;
    println!(
        "{} after {} attempts in {:.1?} ({})",
        response.status(),
        report.attempts,
        TokioClock.now() - started,
        report.reason()
    );
    for (n, at) in api.arrivals("/v1/completions").iter().enumerate() {
        println!("  attempt {} sent at +{:.3?}", n + 1, *at - started);
    }
    Ok(())
}
