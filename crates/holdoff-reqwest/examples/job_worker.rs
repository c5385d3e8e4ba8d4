//! A job worker that re-queues deferred tasks instead of retrying them early.
//!
//! Each job may take at most 2 seconds, waits included. When the API asks for longer than
//! that (`Retry-After: 3`), holdoff does not shorten the wait and does not give up: it defers
//! the job, reporting when a retry is permitted, and the worker puts the job back in its queue
//! for exactly then. Jobs that fit are retried in place.
//!
//! ```sh
//! cargo run -p holdoff-reqwest --example job_worker
//! ```

mod support;

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::time::{Duration, Instant};

use holdoff_reqwest::holdoff::clock::{Clock, TokioClock};
use holdoff_reqwest::holdoff::{Backoff, Jitter, Policy};
use holdoff_reqwest::{HoldoffMiddleware, RetryReportExt, Timeout};

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    // Job 1 is throttled briefly (retried in place); job 2 for longer than its budget
    // (deferred and re-queued); job 3 goes straight through.
    let api = support::Api::start(&[
        ("/jobs/1", &["503 Service Unavailable\r\nretry-after: 1"]),
        ("/jobs/2", &["429 Too Many Requests\r\nretry-after: 3"]),
    ])
    .await?;

    let policy = Policy::default()
        .with_backoff(Backoff::None)
        .with_jitter(Jitter::Uniform(Duration::from_millis(50)));
    let http = reqwest::Client::builder().no_proxy().build()?;
    let client = reqwest_middleware::ClientBuilder::new(http)
        .with(HoldoffMiddleware::new(policy))
        .build();

    let clock = TokioClock;
    let started = clock.now();
    // The queue: jobs ordered by the earliest time they may run.
    let mut queue: BinaryHeap<Reverse<(Instant, u32)>> =
        (1..=3).map(|job| Reverse((started, job))).collect();
    while let Some(Reverse((due, job))) = queue.pop() {
        clock.sleep_until(due).await;
        let response = client
            .get(api.url(&format!("/jobs/{job}")))
            .with_extension(Timeout(Duration::from_secs(2)))
            .send()
            .await?;
        let report = response
            .retry_report()
            .ok_or("the middleware attached no report")?;
        let at = clock.now() - started;
        match (report.is_deferred(), report.permitted.and_then(|p| p.at)) {
            (true, Some(permitted)) => {
                println!(
                    "+{at:.1?} job {job}: deferred ({}), re-queued for +{:.1?}",
                    report.reason(),
                    permitted - started
                );
                queue.push(Reverse((permitted, job)));
            }
            _ => println!(
                "+{at:.1?} job {job}: {} after {} attempt(s)",
                response.status(),
                report.attempts
            ),
        }
    }
    Ok(())
}
