//! The demo's two clients. Each sends one request at a time, walking `/v1/items/1` to
//! `/v1/items/5` over and over until the demo's end, and names itself in `X-Holdoff-Client`
//! so that the judge tells them apart.
//!
//! - `holdoff-client` uses reqwest with holdoff-reqwest's middleware: it waits at least as long
//!   as each `Retry-After` says, shares each hint with its later requests to the same URL
//!   through a gate, and defers a retry that would fall after the demo's end instead of sending
//!   it early.
//! - `naive-client` retries 100 ms after any 429 or 503, up to 3 times, whatever
//!   `Retry-After` says: the common hand-written retry loop.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use holdoff::Policy;
use holdoff::clock::{Clock, TokioClock};
use holdoff::gate::Gate;
use holdoff_reqwest::{Deadline, ErrorKind, GateKey, HoldoffMiddleware, RetryReportExt};
use http::StatusCode;

/// The header the proxy identifies clients by.
const CLIENT_HEADER: &str = "x-holdoff-client";
/// The client that uses holdoff.
pub(crate) const HOLDOFF_CLIENT: &str = "holdoff-client";
/// The client that retries after 100 ms.
pub(crate) const NAIVE_CLIENT: &str = "naive-client";

/// The URLs each client walks: `/v1/items/1` to `/v1/items/ITEMS`.
const ITEMS: u32 = 5;
/// The pause between one request (retries included) and the next, as a polling client has.
const PAUSE: Duration = Duration::from_millis(200);
/// How long the naive client waits before a retry.
const NAIVE_DELAY: Duration = Duration::from_millis(100);
/// How many times the naive client retries one request.
const NAIVE_RETRIES: u32 = 3;

/// What the clients did, from their side: requests sent (retries included) and those that
/// failed outright (no response).
#[derive(Debug, Default)]
pub(crate) struct Tally {
    sent: AtomicU64,
    failed: AtomicU64,
    first_failure: Mutex<Option<String>>,
}

impl Tally {
    /// Requests sent so far, retries included.
    pub(crate) fn sent(&self) -> u64 {
        self.sent.load(Ordering::Relaxed)
    }

    /// Requests that got no response, and why the first of them failed.
    pub(crate) fn failed(&self) -> (u64, Option<String>) {
        let first = self
            .first_failure
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        (self.failed.load(Ordering::Relaxed), first)
    }

    fn count(&self, attempts: u32) {
        self.sent.fetch_add(u64::from(attempts), Ordering::Relaxed);
    }

    fn fail(&self, client: &str, err: &dyn std::error::Error) {
        self.failed.fetch_add(1, Ordering::Relaxed);
        let mut first = self
            .first_failure
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if first.is_none() {
            let mut message = format!("{client}: {err}");
            let mut source = err.source();
            while let Some(cause) = source {
                message.push_str(&format!(": {cause}"));
                source = cause.source();
            }
            *first = Some(message);
        }
    }
}

/// The HTTP client both use: plain HTTP, and no proxy from the environment (the demo's proxy
/// is the URL they are given).
///
/// # Errors
///
/// A message for the user when reqwest cannot build a client.
pub(crate) fn http() -> Result<reqwest::Client, String> {
    // The clients speak plain HTTP, but a workspace build may turn on reqwest's
    // `rustls-no-provider` feature (another crate's tests do), and reqwest then needs a
    // process-wide provider to build any client. It fails only if one is already installed.
    let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
    reqwest::Client::builder()
        .no_proxy()
        .build()
        .map_err(|err| format!("failed to build the demo's HTTP client: {err}"))
}

/// The URLs a client walks, round and round.
fn urls(base: &str) -> impl Iterator<Item = String> + '_ {
    (1..=ITEMS)
        .cycle()
        .map(move |n| format!("{base}/v1/items/{n}"))
}

/// Runs the holdoff client against `base` until `end`.
pub(crate) async fn holdoff(
    http: reqwest::Client,
    base: &str,
    end: Instant,
    seed: u64,
    tally: &Tally,
) {
    let clock = TokioClock;
    let client = reqwest_middleware::ClientBuilder::new(http)
        .with(
            HoldoffMiddleware::new(Policy::default())
                .gate(Arc::new(Gate::in_memory()))
                .seed(seed),
        )
        .build();
    for url in urls(base) {
        if clock.now() >= end {
            break;
        }
        let sent = client
            .get(&url)
            .header(CLIENT_HEADER, HOLDOFF_CLIENT)
            // The judge keys windows by client and URL: so does the gate.
            .with_extension(GateKey(url.clone()))
            // A retry permitted only after the end is deferred, never sent early.
            .with_extension(Deadline(end))
            .send()
            .await;
        match sent {
            Ok(response) => {
                tally.count(response.retry_report().map_or(1, |report| report.attempts));
                // The body is read, as a real client would, so the connection can be reused.
                if let Err(err) = response.bytes().await {
                    tally.fail(HOLDOFF_CLIENT, &err);
                }
            }
            // The gate holds this URL until after the end (nothing was sent), or the end came
            // while the request was out (it was cut there).
            Err(reqwest_middleware::Error::Middleware(err))
                if err
                    .downcast_ref::<holdoff_reqwest::Error>()
                    .is_some_and(|err| {
                        matches!(
                            err.kind(),
                            ErrorKind::DeferredAtGate | ErrorKind::DeadlineReached
                        )
                    }) => {}
            Err(err) => {
                tally.count(1);
                tally.fail(HOLDOFF_CLIENT, &err);
            }
        }
        pause(&clock, end).await;
    }
}

/// Runs the naive client against `base` until `end`.
pub(crate) async fn naive(http: reqwest::Client, base: &str, end: Instant, tally: &Tally) {
    let clock = TokioClock;
    for url in urls(base) {
        if clock.now() >= end {
            break;
        }
        for retry in 0..=NAIVE_RETRIES {
            tally.count(1);
            let sent = http
                .get(&url)
                .header(CLIENT_HEADER, NAIVE_CLIENT)
                .send()
                .await;
            let status = match sent {
                Ok(response) => {
                    let status = response.status();
                    if let Err(err) = response.bytes().await {
                        tally.fail(NAIVE_CLIENT, &err);
                    }
                    status
                }
                Err(err) => {
                    tally.fail(NAIVE_CLIENT, &err);
                    break;
                }
            };
            let throttled = matches!(
                status,
                StatusCode::TOO_MANY_REQUESTS | StatusCode::SERVICE_UNAVAILABLE
            );
            let retry_at = clock.now() + NAIVE_DELAY;
            if !throttled || retry == NAIVE_RETRIES || retry_at >= end {
                break;
            }
            clock.sleep_until(retry_at).await;
        }
        pause(&clock, end).await;
    }
}

/// Waits [`PAUSE`], or until `end` if that comes first.
async fn pause(clock: &TokioClock, end: Instant) {
    clock.sleep_until((clock.now() + PAUSE).min(end)).await;
}
