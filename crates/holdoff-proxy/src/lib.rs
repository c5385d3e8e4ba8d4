//! The throttling proxy engine behind `holdoff proxy`: a forward proxy (plain HTTP,
//! `CONNECT` tunnels, HTTPS interception with a local CA, HTTP/1.1 and HTTP/2) or a reverse
//! proxy in front of one upstream, with a pipeline of [`Stage`]s that every request passes
//! through, in the order a [`Pipeline`] fixes.
//!
//! ```no_run
//! use std::sync::Arc;
//! use holdoff::clock::TokioClock;
//! use holdoff_proxy::{Action, Body, Pipeline, ProxyConfig, ProxyServer, RequestMeta, Stage};
//! use http::Request;
//!
//! /// Tags every response that passes.
//! struct Tag;
//!
//! impl Stage for Tag {
//!     fn on_request(&self, request: Request<Body>, _: &RequestMeta) -> Action {
//!         Action::Continue(request)
//!     }
//!     fn on_response(&self, response: &mut http::Response<Body>, _: &RequestMeta) {
//!         response.headers_mut().insert("x-seen-by", "holdoff".parse().unwrap());
//!     }
//! }
//!
//! # #[tokio::main] async fn main() -> Result<(), holdoff_proxy::ProxyError> {
//! let mut config = ProxyConfig::default();
//! config.listen = "127.0.0.1:0".parse().unwrap();
//! config.urls_to_watch = vec!["https://api.example.com/*".parse()?];
//! let pipeline = Pipeline::builder(Arc::new(TokioClock)).stage(Arc::new(Tag)).build();
//! let server = ProxyServer::bind(config, pipeline).await?;
//! println!("listening on http://{}", server.local_addr());
//! let summary = server.run_until(async { let _ = tokio::signal::ctrl_c().await; }).await;
//! eprintln!("{summary}");
//! # Ok(()) }
//! ```
//!
//! # Modes
//!
//! - **Forward** (the default): absolute-form requests (`GET http://host/path`) are forwarded;
//!   a `CONNECT` to a host the watch list names is intercepted — TLS is terminated with a
//!   certificate the local CA issues for that host, and the requests inside go through the
//!   pipeline — and any other `CONNECT` is tunnelled blind.
//! - **Reverse** ([`ProxyConfig::upstream`]): every request goes to the one upstream.
//!
//! Hop-by-hop headers are removed (RFC 9110 §7.6.1), `Via: 1.1 holdoff` is added both ways,
//! bodies stream through unbuffered, WebSocket upgrades pass through, and upstream
//! connections are pooled (HTTP/1.1 or HTTP/2 by ALPN).
//!
//! # Safety
//!
//! The proxy binds loopback unless configured otherwise, and refuses a non-loopback address
//! without proxy credentials. Bad traffic gets a status and a one-line plain-text reason —
//! malformed `400`, head too large `431`, unreachable or failing upstream `502`, upstream too
//! slow `504`, an untrusted upstream certificate `502` saying so — never a panic. Idle
//! connections time out, and connections are capped.
//!
//! # Time
//!
//! The proxy reads one clock, the [`Pipeline`]'s ([`TokioClock`](holdoff::clock::TokioClock)
//! unless another is given): receipt times ([`RequestMeta::received`]) as each request head
//! arrives, the stages' windows, delays and rate limits, idle connections and the upkeep
//! that drops expired state. A test can drive it all with a
//! [`ManualClock`](holdoff::clock::ManualClock). The network deadlines inside tokio's and
//! hyper's I/O (connecting, TLS handshakes, the upstream timeout, a stalled body) use tokio's
//! timer.
//!
//! # Cancellation
//!
//! [`ProxyServer::run_until`] stops accepting when its signal completes (or a
//! [`ShutdownHandle`] is used), lets requests in flight finish within
//! [`ProxyConfig::grace`], then cuts the connections left, tunnels included, and returns a
//! [`Summary`].
//!
//! # Logging
//!
//! One `tracing` event per request, target `holdoff::request`, with the fields `method`,
//! `url`, `status`, `duration_ms`, `mode` (`forward`, `intercepted`, `reverse`, `tunnel`),
//! `client`, and `error` when the proxy failed the request (then at `warn`).
#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod ascii;
mod body;
mod config;
mod control;
mod error;
pub mod fault;
pub mod judge;
pub mod jwt;
mod lines;
mod pipeline;
mod proxy;
pub mod report;
mod secs;
pub mod shared;
mod stages;
pub mod tls;

pub use body::{Body, BoxError};
pub use config::{
    CaSource, ClientIdMode, ConfigError, Credentials, DEFAULT_PORT, ProxyConfig, Upstream,
    WatchPattern,
};
pub use control::{Control, KEPT_VERDICTS, MockRequestSender, RecordingSwitch, VerdictFeed};
pub use error::{ErrorKind, ProxyError};
pub use pipeline::PipelineBuilder;
pub use proxy::{
    Action, ClientId, ConnectionFilter, Finish, Mode, Notes, Pipeline, ProxyServer, RequestMeta,
    ShutdownHandle, Stage, Summary, Target, UPKEEP_EVERY,
};
pub use stages::{
    DEFAULT_MIN_BACKOFF, FaultCounts, FaultStage, JudgeStage, KEPT_EVENTS, MetricsStage,
    OpenWindows, WindowBook, WindowInfo,
};
