//! A [`reqwest_middleware`] middleware that honours `Retry-After` exactly as holdoff does:
//! the server's hint is a lower bound that is never shortened, a retry that cannot fit before
//! the task's deadline is deferred instead of sent early, and one server's hint can hold
//! every request to it through a shared gate.
//!
//! ```
//! use holdoff_reqwest::holdoff::Policy;
//! use holdoff_reqwest::HoldoffMiddleware;
//! use std::time::Duration;
//!
//! # let _ = rustls::crypto::aws_lc_rs::default_provider().install_default(); // see tests/middleware.rs
//! let client = reqwest_middleware::ClientBuilder::new(reqwest::Client::new())
//!     // Each request, waits and attempts included, is done within 30 s.
//!     .with(HoldoffMiddleware::new(Policy::default()).timeout(Duration::from_secs(30)))
//!     .build();
//! # let _ = client;
//! ```
//!
//! Requests then go out as with reqwest, and each response says what the middleware did:
//!
//! ```
//! use holdoff_reqwest::holdoff::{Policy, Reason};
//! use holdoff_reqwest::{HoldoffMiddleware, RetryReportExt};
//! use std::time::Duration;
//! # use holdoff_testkit::{Reply, TestServer};
//!
//! # #[tokio::main(flavor = "current_thread", start_paused = true)]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # let server = TestServer::start().await;
//! # server.script("/v1/chat", [Reply::too_many_requests("2")]);
//! # let url = server.url("/v1/chat");
//! // The server is on loopback: keep any HTTP_PROXY out of the way.
//! # let _ = rustls::crypto::aws_lc_rs::default_provider().install_default(); // see tests/middleware.rs
//! let http = reqwest::Client::builder().no_proxy().build()?;
//! let client = reqwest_middleware::ClientBuilder::new(http)
//!     .with(HoldoffMiddleware::new(Policy::default()).timeout(Duration::from_secs(30)))
//!     .build();
//!
//! // The server answers `429` with `Retry-After: 2`, then `200`: the middleware waits
//! // 2 seconds (never less) and sends the request again.
//! let response = client.get(&url).send().await?;
//! assert_eq!(response.status(), 200);
//! let report = response.retry_report().expect("a report");
//! assert_eq!((report.attempts, report.reason()), (2, Reason::Success));
//! # Ok(())
//! # }
//! ```
//!
//! # What the caller gets
//!
//! Every outcome carries a [`RetryReport`]: how many attempts were sent, the last
//! [`Decision`](holdoff::Decision) and its reason, and when the server permits the next
//! request. It is holdoff's own report, the one holdoff-tower attaches and
//! [`holdoff::retry::Retrier`] returns. A response has it in its extensions
//! ([`RetryReportExt::retry_report`]); an error is this crate's [`Error`], whose
//! [`Error::report`] is the same report.
//!
//! - **Success**, a **redirect** (when reqwest does not follow redirects itself), or **gave
//!   up** (status not retryable, not safe to repeat, attempts exhausted, quota exhausted):
//!   `Ok` with the last response.
//! - **Deferred** (the hint does not fit before the deadline, or exceeds the policy's
//!   `max_wait`, 60 s by default; or the retry would still be running at the deadline):
//!   `Ok` with the last response, the report saying why and when a retry is permitted
//!   ([`RetryReport::requeue_at`] is the value to persist), so a job queue can re-queue the
//!   task instead of retrying early. A request that the [gate](holdoff::gate) holds past its
//!   deadline before anything was sent fails with [`ErrorKind::DeferredAtGate`], which
//!   carries the same times.
//! - **The deadline came during an attempt**: the attempt is cut there. After an earlier
//!   response, `Ok` with that response, its report saying `deadline-reached`; on the first
//!   attempt, [`ErrorKind::DeadlineReached`].
//! - **Malformed hint** with [`OnMalformed::Error`](holdoff::OnMalformed::Error) (the
//!   default): `Ok` with the response, not an error, so the caller sees the `503` it got; the
//!   report's [`RetryReport::malformed`] carries the raw value. Choose
//!   [`OnMalformed::Fallback`](holdoff::OnMalformed::Fallback) to retry on the local backoff
//!   instead.
//! - **Transport errors** (connection refused, reset, TLS, timeout) are retried on the local
//!   backoff alone for requests that are safe to repeat; when the retries end on one, the
//!   caller gets [`ErrorKind::Transport`], with reqwest's error as its
//!   [`source`](std::error::Error::source) (and [`Error::transport`]) and the report.
//!
//! Every [`Error`] reaches the caller as `reqwest_middleware::Error::Middleware`; downcast
//! it to `holdoff_reqwest::Error` (see its example). A response that is not a success is
//! still `Ok`: use reqwest's `error_for_status` when it should be an error.
//!
//! # The deadline
//!
//! [`HoldoffMiddleware::timeout`], or a request's [`Timeout`] or [`Deadline`], bounds the
//! whole task: waits, and the attempts themselves. An attempt still running at the deadline
//! is cut. A retry is not started when the time left after its wait is less than the last
//! attempt took (the estimate of how long the next one will take): the report says
//! `attempt-would-not-fit`. Without a deadline, no single wait is longer than the policy's
//! `max_wait` ([`Policy::DEFAULT_MAX_WAIT`](holdoff::Policy::DEFAULT_MAX_WAIT), 60 s, by
//! default), but attempts are not cut: set one.
//!
//! # Per-request options
//!
//! Attach these with `RequestBuilder::with_extension`:
//!
//! - [`RepeatSafe`]: retry a `POST` (or `PATCH`) that the server de-duplicates. A request
//!   with an `Idempotency-Key` header is safe to repeat without it.
//! - [`Deadline`] or [`Timeout`]: when the whole task, waits and attempts included, must be
//!   done.
//! - [`GateKey`]: which key the request shares hints under, instead of
//!   `scheme://host:port`.
//!
//! # Bodies that cannot be cloned
//!
//! Each attempt sends a copy of the request, so its body must be cloneable: bytes, a string
//! or a `Vec<u8>`, not a stream. A request with a streaming body is still sent once. If the
//! response does not call for a retry, the caller gets it as usual; if it does, the
//! middleware stops at once, without waiting, and fails with
//! [`ErrorKind::BodyNotCloneable`]: the error says what the server answered and when it
//! permits a retry, and hands back the response ([`Error::into_response`]). It never
//! silently skips a retry the policy asked for.
//!
//! # Quota errors
//!
//! The policy's quota classifier reads the body of a `429` (e.g. OpenAI's
//! `insufficient_quota`, which no amount of waiting fixes). The middleware reads up to the
//! first 64 KiB of a `429`'s body for it and hands the response back with the whole body
//! still readable. Other responses' bodies are not touched, nor a `429`'s when the
//! classifier reads none ([`NoQuotaClassifier`](holdoff::NoQuotaClassifier)).
//!
//! The cost: the decision about a `429` waits for the start of its body — nothing against a
//! server that sends head and body together, the gap between them against one that does
//! not (tens of milliseconds, measured), and a body that never comes holds the attempt
//! until the task's deadline cuts it. The retry does not wait for it: the receipt is the
//! head's arrival, so a retry is due the hint's time after the head, however late the body
//! came. To judge heads alone, set
//! `Policy::with_quota_classifier(Arc::new(NoQuotaClassifier))`: a spent quota is then
//! retried like any other `429`, until the attempts run out.
//!
//! # Time
//!
//! Waits run on tokio's clock ([`TokioClock`](holdoff::clock::TokioClock)), so tests under
//! tokio's paused time (`#[tokio::test(start_paused = true)]`) retry at exact virtual
//! instants and never really sleep. A [`Deadline`] is an instant on that same clock. A
//! response's receipt is taken when its head arrives (also for a `429` whose body the quota
//! classifier then reads); every wait counts from there.
//!
//! # Cancellation
//!
//! The task's deadline and cancellation are one mechanism: the deadline stops an attempt or
//! a wait as cancellation would, and hands back the report. Dropping the future returned by
//! `send()` stops the middleware wherever it is, in the middle of a wait included (without a
//! report); `tokio::time::timeout` or `tokio::select!` around `send()`
//! cancel that way.
//!
//! # Features
//!
//! The crate has no features of its own and turns on none of reqwest's: TLS, HTTP/2 and the
//! rest are the client's choice.
#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod body;
mod error;
mod middleware;
mod options;
mod report;

pub use error::{Error, ErrorKind};
/// The core crate, so that one dependency is enough.
pub use holdoff;
pub use holdoff::RetryReport;
pub use holdoff::request::{Deadline, GateKey, RepeatSafe, Timeout};
pub use middleware::HoldoffMiddleware;
pub use report::RetryReportExt;
