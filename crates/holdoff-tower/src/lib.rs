//! A [`tower::retry::Policy`] that honours HTTP `Retry-After` as RFC 9110 defines it.
//!
//! Put [`RetryLayer`] in front of a hyper-util client (or an axum app's outbound calls): it
//! is tower's `Retry` middleware driven by [`RetryPolicy`], bounded by the task's deadline
//! and with a report on every error. Every failed attempt is judged by
//! [`holdoff::Policy::decide`], so the server's hint is a *lower bound* that is never
//! shortened, a wait that cannot fit before the deadline is deferred instead of cut short,
//! a POST is not repeated unless marked safe, and a malformed hint is never read as zero.
//!
//! ```
//! use bytes::Bytes;
//! use holdoff_tower::holdoff::{Policy, Reason};
//! use holdoff_tower::{RetryLayer, RetryPolicy, RetryReport};
//! use http_body_util::Empty;
//! use hyper_util::client::legacy::Client;
//! use hyper_util::rt::TokioExecutor;
//! use std::time::Duration;
//! use tower::{ServiceBuilder, ServiceExt};
//! # use holdoff_testkit::{Reply, TestServer};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # let runtime = tokio::runtime::Builder::new_current_thread()
//! #     .enable_all().start_paused(true).build()?;
//! # runtime.block_on(async {
//! # let server = TestServer::start().await;
//! # server.script("/v1/items", [Reply::unavailable("2")]);
//! # let url = server.url("/v1/items");
//! let client = Client::builder(TokioExecutor::new()).build_http::<Empty<Bytes>>();
//! // Each request, waits and attempts included, is done within 30 s.
//! let policy = RetryPolicy::new(Policy::default()).timeout(Duration::from_secs(30));
//! let service = ServiceBuilder::new()
//!     .layer(RetryLayer::new(policy))
//!     .service(client);
//!
//! // The server answers `503 Retry-After: 2`, then `200`: the retry waits at least 2 s.
//! let request = http::Request::get(url).body(Empty::new())?;
//! let response = service.oneshot(request).await?;
//! assert_eq!(response.status(), 200);
//! let report = response.extensions().get::<RetryReport>().expect("judged by the policy");
//! assert_eq!((report.attempts, report.reason()), (2, Reason::Success));
//! # Ok::<_, Box<dyn std::error::Error>>(())
//! # })
//! # }
//! ```
//!
//! # What the caller sees
//!
//! When the policy stops — success, a deferral, a give-up, a malformed hint — the response
//! it returns carries a [`RetryReport`] in its extensions: how many attempts were sent, the
//! [`Decision`](holdoff::Decision) and its [`Reason`](holdoff::Reason), and when the server
//! permits the next request, on both clocks. A deferred task (the hint does not fit in the
//! [timeout](RetryPolicy::timeout), or exceeds the policy's `max_wait`) can be re-queued for
//! [`RetryReport::requeue_at`]; the report is holdoff's own [`holdoff::RetryReport`], the one
//! [`holdoff::retry::Retrier`] and holdoff-reqwest return. Every judged attempt is also a
//! `tracing` event (`holdoff attempt`).
//!
//! A transport error (connection refused, reset) is retried on the local backoff alone,
//! for requests that may be repeated. When the retries end on one, [`Retry`] returns an
//! [`Error`] of kind [`ErrorKind::Transport`]: the client's own error
//! ([`Error::into_source`], and [`source`](std::error::Error::source)) with the same
//! [`RetryReport`].
//!
//! # The deadline
//!
//! [`RetryPolicy::timeout`], or a request's own [`Deadline`] or [`Timeout`], bounds the
//! whole task: waits, and the attempts themselves. With [`RetryLayer`], an attempt still
//! running at the deadline is cut, and the call fails with [`ErrorKind::DeadlineReached`]
//! and the report. A retry is not started when the time left after its wait is less than
//! the last attempt took (the estimate of how long the next one will take): the response
//! comes back with a report saying `attempt-would-not-fit`. Without a deadline no single wait
//! is longer than the policy's `max_wait`
//! ([`Policy::DEFAULT_MAX_WAIT`](holdoff::Policy::DEFAULT_MAX_WAIT), 60 s, by default), but
//! attempts are not cut: set one.
//!
//! tower's own `ServiceBuilder::retry(RetryPolicy)` still works and judges every attempt
//! the same way, but it cannot cut an attempt nor attach a report to an error: use
//! [`RetryLayer`].
//!
//! # Bodies
//!
//! tower keeps a copy of every request so that it can send it again, made by
//! [`CloneBody::try_clone_body`]. Bodies held in memory (`Full`, `Empty`, `Bytes`,
//! `String`, `Vec<u8>`) are copied cheaply. Streaming bodies (`BoxBody`, `UnsyncBoxBody`,
//! `StreamBody`, hyper's `Incoming`) do not implement [`CloneBody`], so a retry layer over a
//! client that sends them **does not compile**: with tower, such a request would be sent
//! once and its response never shown to the policy, a retry layer that never retries.
//! Buffer the body into a `Full` first.
//!
//! The compiler says so as `error[E0599]: the method `call` exists for struct
//! `holdoff_tower::Retry<…>`, but its trait bounds were not satisfied`, whose first note is
//! `` `BoxBody<…>: CloneBody` ``. With `oneshot` the same error names only `Service<_>`:
//! when `oneshot` does not resolve, look at the request's body type first.
//!
//! ```compile_fail
//! use bytes::Bytes;
//! use holdoff_tower::holdoff::Policy;
//! use holdoff_tower::RetryPolicy;
//! use http_body_util::combinators::BoxBody;
//! use hyper_util::client::legacy::Client;
//! use hyper_util::rt::TokioExecutor;
//! use tower::{ServiceBuilder, ServiceExt};
//!
//! type Body = BoxBody<Bytes, std::convert::Infallible>;
//! let client = Client::builder(TokioExecutor::new()).build_http::<Body>();
//! let service = ServiceBuilder::new()
//!     .layer(holdoff_tower::RetryLayer::new(RetryPolicy::new(Policy::default())))
//!     .service(client);
//! let request = http::Request::get("http://127.0.0.1:1/").body(Body::default()).unwrap();
//! let _ = service.oneshot(request); // error: `BoxBody<…>` cannot be sent twice
//! ```
//!
//! A body type of your own may implement [`CloneBody`] and return `None` for some values;
//! such a request is sent once, its response carries no [`RetryReport`], and the policy
//! says so with a `tracing::warn!` and counts it in [`RetryPolicy::unclonable_requests`].
//!
//! # Per-request markers
//!
//! The markers are holdoff's own ([`holdoff::request`]), the same types that
//! holdoff-reqwest reads, inserted into the request's extensions:
//!
//! - [`RepeatSafe`]: retry a `POST` (or `PATCH`) that the server de-duplicates. A request
//!   with an `Idempotency-Key` header needs no marker.
//! - [`Deadline`] or [`Timeout`]: when the whole task, waits and attempts included, must be
//!   done; they tighten or replace [`RetryPolicy::timeout`].
//! - [`GateKey`]: which key the request shares hints under.
//!
//! # Response bodies and quota errors
//!
//! tower shows the policy the response before its body is read, so the policy judges
//! headers only. holdoff's quota classifier (OpenAI's `insufficient_quota` 429, which
//! waiting will not fix) reads the body, and so does not apply here: such a 429 is retried
//! like any other 429, until the attempts run out. Where that matters, drive the request
//! with [`holdoff::retry::Retrier`] and a response type that hands it the body
//! ([`holdoff::retry::Response::body_bytes`]).
//!
//! # The gate
//!
//! With [`RetryPolicy::gate`], a hinted failure closes the request's key (its
//! `scheme://host:port`, or a [`GateKey`]) for every request sharing the gate, and a retry
//! waits for the later of its own time and the gate's. A retry that the gate would hold
//! past the task's deadline is deferred. tower consults the policy only after an attempt,
//! so a request's *first* attempt is not held at the gate.
//!
//! # Time
//!
//! Two clocks that never mix, as in [`holdoff`]: the receipt of each response is read on
//! both (monotonic and wall) once its headers arrive; a date-form hint becomes an interval
//! then, measured against the server's own `Date` when it has one, and from then on only the
//! monotonic clock counts. The clock is [`TokioClock`](holdoff::clock::TokioClock) unless
//! [`RetryPolicy::clock`] sets another, so tokio's paused test time applies, and a
//! [`ManualClock`](holdoff::clock::ManualClock) can stand in for it. The jitter draws come
//! from a seedable generator ([`RetryPolicy::seed`]), one stream per request.
//!
//! # Cancellation
//!
//! The wait before a retry is an ordinary future inside tower's response future: dropping
//! the response future (a `tokio::time::timeout` around the call, a `select!`, a client that
//! goes away) cancels the wait at once, and no further attempt is sent. The task's deadline
//! is the same mechanism, applied by [`Retry`] itself, which hands back the report.
#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod body;
mod error;
mod future;
mod layer;
mod policy;
mod request;

pub use body::CloneBody;
pub use error::{Error, ErrorKind};
/// The core crate, so that one dependency is enough.
pub use holdoff;
pub use holdoff::RetryReport;
pub use holdoff::request::{Deadline, GateKey, RepeatSafe, Timeout};
pub use layer::{ResponseFuture, Retry, RetryLayer};
pub use policy::RetryPolicy;
