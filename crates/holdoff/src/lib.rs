//! Honour HTTP `Retry-After` exactly as RFC 9110 defines it.
//!
//! holdoff parses the hint strictly (delay-seconds or any of the three HTTP-date formats),
//! turns it into an interval measured against the right clock, and decides, for every failed
//! attempt, whether to retry at a given instant, defer the task, or give up. The server's hint
//! is a *lower bound*: it is never shortened, never capped, and never read as zero when it is
//! malformed.
//!
//! With reqwest or tower, use holdoff-reqwest's middleware or holdoff-tower's retry policy:
//! they run this crate's loop for you and attach the same [`RetryReport`] to the response.
//!
//! # Retrying a request
//!
//! [`retry::Retrier`] drives any async client: the operation sends one attempt, the loop
//! decides after each response, waits on the right clock, and returns how it ended with a
//! [`RetryReport`]. It is told the request's method (or reads it, and the
//! [markers](request), from the request with [`Retrier::for_request`](retry::Retrier::for_request)):
//! a `POST` is never retried unless marked safe to repeat.
//!
//! ```
//! # #[cfg(feature = "retry")] {
//! use holdoff::retry::{Outcome, Retrier};
//! use holdoff::Policy;
//! use http::Method;
//! use std::time::Duration;
//!
//! # tokio::runtime::Builder::new_current_thread().enable_time().start_paused(true).build().unwrap().block_on(async {
//! // Stands in for your client: a 429 with `Retry-After: 2`, then 200.
//! let mut calls = 0;
//! let send = |_attempt: u32| {
//!     calls += 1;
//!     let status = if calls == 1 { 429 } else { 200 };
//!     let response = http::Response::builder().status(status).header("retry-after", "2");
//!     std::future::ready(Ok::<_, std::io::Error>(response.body(()).unwrap()))
//! };
//!
//! let (outcome, report) = Retrier::new(Policy::default(), Method::GET)
//!     .timeout(Duration::from_secs(30)) // the whole task: waits and attempts
//!     .run(send)
//!     .await;
//! match outcome {
//!     Outcome::Success(response) => assert_eq!(response.status(), 200),
//!     // A hint longer than the time left: re-queue for when the server permits it.
//!     Outcome::Deferred { .. } => { let _requeue = report.requeue_at(); }
//!     other => panic!("{other:?}"),
//! }
//! assert_eq!(report.attempts, 2);
//! # });
//! # }
//! ```
//!
//! # Sharing one server's hint
//!
//! A [`gate::Gate`] shared by every task that calls a server: when one learns "not before T",
//! every task about to call it waits until T too, and they resume spread by jitter, not
//! together. [`retry::Retrier::gate`] uses it; holdoff-redis keeps it in Redis for a fleet.
//!
//! # The pure decision
//!
//! Under the loop is [`Policy::decide`]: no clock reads, no randomness, no I/O, no
//! allocation. The receipt time, the backoff and the jitter draw are arguments, so the same
//! inputs always give the same [`Verdict`].
//!
//! ```
//! use holdoff::{Attempt, Decision, DeferReason, Policy, Receipt, ResponseInfo};
//! use http::{Method, StatusCode};
//! use std::time::{Duration, Instant, SystemTime};
//!
//! // The response's header section arrived now: read both clocks once.
//! let receipt = Receipt { instant: Instant::now(), wall: SystemTime::now() };
//! let response = ResponseInfo::new(StatusCode::SERVICE_UNAVAILABLE, receipt)
//!     .with_retry_after(b"30");
//!
//! // The server asks 30 s, the local backoff is 8 s, 12 s remain before the deadline.
//! let attempt = Attempt::new(&Method::GET, 1)
//!     .with_backoff(Duration::from_secs(8))
//!     .with_remaining(Some(Duration::from_secs(12)));
//! let verdict = Policy::default().decide(&response, &attempt);
//! // Retrying at 8 s or at 12 s would both be early: defer, and say when it is permitted.
//! assert_eq!(verdict.decision, Decision::Defer(DeferReason::DeadlineExceeded));
//! assert_eq!(verdict.permitted.map(|p| p.after), Some(Duration::from_secs(30)));
//! ```
//!
//! A response with no hint, or only a malformed one, names no time: its
//! [`Verdict::permitted`] is `None`, never "now".
//!
//! # Time
//!
//! Two clocks that never mix. A date-form hint is turned into an interval `H` once, at
//! receipt, against the server's own clock (`Date + Age`) when the response has a valid
//! `Date`, else against the local wall clock; from then on only the monotonic clock counts, so
//! a wall-clock step during a wait changes nothing. The [`clock`] module is the only place
//! that reads a clock; [`Policy::decide`] takes the readings as arguments, and the loop takes
//! a [`clock::Clock`] (tokio's by default; a [`clock::ManualClock`] in tests).
//!
//! # The deadline
//!
//! A task's deadline ([`Retrier::timeout`](retry::Retrier::timeout), or the
//! [`request::Deadline`] and [`request::Timeout`] markers) bounds the whole task: an attempt
//! still running at the deadline is cut ([`DeferReason::DeadlineReached`]), and a retry is
//! not started when the time left after its wait is less than the last attempt took, the
//! estimate of how long the next one will take ([`DeferReason::AttemptWouldNotFit`]). Both
//! are deferrals with the report. Without a deadline, [`Policy::default`] still never waits
//! hours: a hint longer than [`Policy::DEFAULT_MAX_WAIT`] (60 s) defers the task (the
//! method's "stop or defer the task"); attempts, though, are cut only by a deadline, so set
//! one.
//!
//! # Cancellation
//!
//! The deadline and cancellation are one mechanism: an attempt or a wait ends at once when
//! the `CancellationToken` given to [`Retrier::cancel_on`](retry::Retrier::cancel_on) fires,
//! as when the deadline comes. Dropping the future that
//! [`Retrier::run`](retry::Retrier::run) returns stops the loop wherever it is.
//!
//! # Strictness
//!
//! [`RetryAfter::parse`] accepts exactly RFC 9110's grammar: digits only for delays,
//! case-sensitive names, `GMT` only, the weekday that the date falls on, dates that exist.
//! Anything else is a [`ParseError`] that carries the raw bytes and says what was wrong
//! ([`ParseErrorKind`]). Parsing allocates nothing for valid input.
//!
//! # Features
//!
//! All three are on by default.
//!
//! - `retry`: the async retry loop ([`retry`], [`retry::Retrier`]), the shared [`gate`] and
//!   [`clock::TokioClock`]. Brings tokio, tokio-util, rand and tracing.
//! - `json`: [`OpenAiQuota`], the classifier that reads OpenAI's `insufficient_quota` error
//!   from a JSON body, and [`Policy::default`]'s classifier. Brings serde and serde_json.
//!   Without it, [`Policy::default`] classifies with [`NoQuotaClassifier`]: a 429 that says
//!   the quota is spent is retried like any other unless
//!   [`Policy::with_quota_classifier`] says otherwise.
//! - `ratelimit-fields`: read the IETF `RateLimit` structured field
//!   (draft-ietf-httpapi-ratelimit-headers-11) as a vendor hint, with the `sfv` parser. Off,
//!   that field is not read; `Retry-After` and every other vendor hint still are.
//!
//! With `default-features = false` what is left is the parser ([`RetryAfter`],
//! [`HttpDate`], [`ParseError`]), the vendor hints ([`VendorHints`]), the pure decision
//! ([`Policy::decide`], [`Policy::earliest`]), the report and markers ([`RetryReport`],
//! [`request`]), [`Jitter::scale`] for a draw made by the caller, and [`clock::Clock`] with
//! [`clock::ManualClock`] and [`clock::SystemClock`], none of which need a runtime; the only
//! dependency is `http`.
#![forbid(unsafe_code)]
#![deny(missing_docs)]
#![cfg_attr(docsrs, feature(doc_cfg))]

mod backoff;
pub mod clock;
mod date;
mod decision;
mod error;
#[cfg(feature = "retry")]
#[cfg_attr(docsrs, doc(cfg(feature = "retry")))]
pub mod gate;
mod header;
mod hints;
mod jitter;
mod policy;
mod report;
pub mod request;
mod response;
#[cfg(feature = "retry")]
#[cfg_attr(docsrs, doc(cfg(feature = "retry")))]
pub mod retry;

pub use backoff::Backoff;
pub use date::{DateFormat, HttpDate};
pub use decision::{Decision, DeferReason, Diagnostics, GiveUpReason, Permitted, Reason, Verdict};
pub use error::{ParseError, ParseErrorKind};
pub use header::RetryAfter;
pub use hints::{HINT_HEADERS, HintSource, Precedence, VendorHints};
pub use jitter::Jitter;
#[cfg(feature = "json")]
pub use policy::OpenAiQuota;
pub use policy::{
    Attempt, JitterDraw, NoQuotaClassifier, OnMalformed, Policy, QuotaClassifier, StatusSet,
};
pub use report::{Requeue, RetryReport};
pub use response::{Earliest, HintForm, Reading, Receipt, Reference, ResponseInfo, Skew};
