//! Honour HTTP `Retry-After` exactly as RFC 9110 defines it.
//!
//! holdoff parses the hint strictly (delay-seconds or any of the three HTTP-date formats),
//! turns it into an interval measured against the right clock, and decides, for every failed
//! attempt, whether to retry at a given instant, defer the task, or give up. The server's hint
//! is a *lower bound*: it is never shortened, never capped, and never read as zero when it is
//! malformed.
//!
//! ```
//! use holdoff::{Attempt, Decision, JitterDraw, Policy, Receipt, ResponseInfo};
//! use http::{Method, StatusCode};
//! use std::time::{Duration, Instant, SystemTime};
//!
//! // The response's header section arrived now: read both clocks once.
//! let receipt = Receipt { instant: Instant::now(), wall: SystemTime::now() };
//! let response = ResponseInfo::new(StatusCode::TOO_MANY_REQUESTS, receipt)
//!     .with_retry_after(b"120");
//!
//! let policy = Policy::default();
//! let attempt = Attempt {
//!     method: &Method::GET,
//!     repeat_safe: false,
//!     number: 1,
//!     backoff: policy.backoff_for(1),
//!     jitter: JitterDraw::Exact(Duration::ZERO),
//!     remaining: None,
//! };
//! let verdict = policy.decide(&response, &attempt);
//! assert_eq!(verdict.decision, Decision::Retry {
//!     wait: Duration::from_secs(120),
//!     at: receipt.instant + Duration::from_secs(120),
//! });
//! ```
//!
//! # Time
//!
//! Two clocks that never mix. A date-form hint is turned into an interval `H` once, at
//! receipt, against the server's own clock (`Date + Age`) when the response has a valid
//! `Date`, else against the local wall clock; from then on only the monotonic clock counts, so
//! a wall-clock step during a wait changes nothing. The [`clock`] module is the only place
//! that reads a clock; [`Policy::decide`] takes the readings as arguments.
//!
//! # Strictness
//!
//! [`RetryAfter::parse`] accepts exactly RFC 9110's grammar: digits only for delays,
//! case-sensitive names, `GMT` only, the weekday that the date falls on, dates that exist.
//! Anything else is a [`ParseError`] that carries the raw bytes. Parsing allocates nothing
//! for valid input.
//!
//! # Features
//!
//! Both are on by default.
//!
//! - `retry`: the async retry loop ([`retry`], [`retry::Retrier`]), the shared [`gate`],
//!   [`clock::TokioClock`] and [`Jitter::draw`]. Brings tokio, tokio-util, rand and tracing.
//! - `json`: [`OpenAiQuota`], the classifier that reads OpenAI's `insufficient_quota` error
//!   from a JSON body, and [`Policy::default`]'s classifier. Brings serde and serde_json.
//!   Without it, [`Policy::default`] classifies with [`NoQuotaClassifier`]: a 429 that says
//!   the quota is spent is retried like any other unless [`Policy::quota_classifier`] says
//!   otherwise.
//!
//! With `default-features = false` what is left is the parser ([`RetryAfter`],
//! [`HttpDate`], [`ParseError`]), the vendor hints ([`VendorHints`]), the pure decision
//! ([`Policy::decide`], [`Policy::earliest`]), [`Jitter::scale`] for a draw made by the
//! caller, and [`clock::Clock`] with [`clock::ManualClock`] and [`clock::SystemClock`], none
//! of which need a runtime; the only dependency is `http`, besides `sfv` for the `RateLimit`
//! fields.
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
mod response;
#[cfg(feature = "retry")]
#[cfg_attr(docsrs, doc(cfg(feature = "retry")))]
pub mod retry;

pub use backoff::Backoff;
pub use date::{DateFormat, HttpDate};
pub use decision::{Decision, DeferReason, Diagnostics, GiveUpReason, Permitted, Reason, Verdict};
pub use error::{ParseError, ParseErrorKind};
pub use header::{RetryAfter, from_str_now};
pub use hints::{HINT_HEADERS, HintSource, Precedence, VendorHints};
pub use jitter::Jitter;
#[cfg(feature = "json")]
pub use policy::OpenAiQuota;
pub use policy::{
    Attempt, JitterDraw, NoQuotaClassifier, OnMalformed, Policy, QuotaClassifier, StatusSet,
};
pub use response::{Earliest, HintForm, Reading, Receipt, Reference, ResponseInfo, Skew};
