//! One worker of a fleet that shares its `Retry-After` waits through Redis.
//!
//! Each worker calls the same API a few times through reqwest and holdoff's middleware, with
//! a [`Gate`] whose store is a [`RedisGate`]: when any worker is told "retry after 4 s", every
//! worker waits for that time before calling the API again. Start several of them against one
//! Redis (docs/library.md's "A fleet behind one quota" has the whole sequence):
//!
//! ```sh
//! cargo run -p holdoff-redis --example fleet_worker -- redis://127.0.0.1:6390/0 http://127.0.0.1:8080/ worker-1
//! ```

use std::sync::Arc;
use std::time::Duration;

use holdoff_redis::holdoff::Policy;
use holdoff_redis::holdoff::clock::{Clock, TokioClock};
use holdoff_redis::holdoff::gate::Gate;
use holdoff_redis::{FailureMode, RedisGate};
use holdoff_reqwest::{HoldoffMiddleware, RetryReportExt};

/// Calls each worker makes.
const CALLS: usize = 5;

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let (Some(redis), Some(url)) = (args.next(), args.next()) else {
        return Err("usage: fleet_worker REDIS_URL API_URL [NAME]".into());
    };
    let name = args.next().unwrap_or_else(|| "worker".to_owned());

    let store = RedisGate::builder(&redis)
        .on_failure(FailureMode::FailOpen)
        .build()?;
    let gate = Arc::new(Gate::new(store));
    // reqwest needs a TLS provider when a workspace build turned on `rustls-no-provider`; it
    // fails only if one is installed already.
    let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
    let http = reqwest::Client::builder().no_proxy().build()?;
    let client = reqwest_middleware::ClientBuilder::new(http)
        .with(
            HoldoffMiddleware::new(Policy::default())
                .gate(gate)
                .timeout(Duration::from_secs(60)),
        )
        .build();

    let started = TokioClock.now();
    for call in 1..=CALLS {
        let response = client
            .get(&url)
            .header("x-holdoff-client", &name)
            .send()
            .await?;
        let attempts = response.retry_report().map_or(1, |report| report.attempts);
        println!(
            "{name} call {call}: {} after {attempts} attempt(s), at +{:.1?}",
            response.status(),
            TokioClock.now() - started
        );
    }
    Ok(())
}
