//! What every connection and request of a running proxy shares ([`Shared`]): the compiled
//! plan, the counters, the shutdown's tokens and the budgets of the log lines a flood makes.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize};
use std::time::Duration;

use holdoff::clock::Clock;
use hyper::server::conn::{http1, http2};
use hyper_util::rt::TokioExecutor;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::auth::ProxyAuth;
use super::filter::Filter;
use super::headers::Via;
use super::pipeline::Pipeline;
use super::stats::Stats;
use super::upstream::{Own, Upstreams};
use crate::config::{ClientIdMode, Upstream, WatchList};
use crate::tls::LeafCache;

/// What every connection and request shares: the compiled plan and the counters.
pub(crate) struct Shared {
    pub(super) route: Route,
    pub(super) watch: WatchList,
    /// Proxy credentials, and the failed attempts of each peer.
    pub(super) auth: Option<ProxyAuth>,
    pub(super) upstreams: Upstreams,
    /// The stages, the clock the proxy reads and the upkeep it runs.
    pub(super) pipeline: Pipeline,
    pub(super) stats: Stats,
    /// The pipeline's clock, for the stages' times and the server's own.
    pub(super) clock: Arc<dyn Clock>,
    pub(super) next_id: AtomicU64,
    pub(super) local_addr: SocketAddr,
    /// Its own addresses, which nothing is forwarded or tunnelled to.
    pub(super) own: Own,
    /// Its `Via` entry, which says a request came back.
    pub(super) via: Via,
    pub(super) upstream_timeout: Duration,
    pub(super) idle_timeout: Duration,
    pub(super) send_timeout: Duration,
    pub(super) max_header_bytes: usize,
    pub(super) client_id: ClientIdMode,
    /// Which connections are handled (see `ProxyServer::filter_connections`).
    pub(super) filter: Filter,
    pub(super) http1: http1::Builder,
    pub(super) http2: http2::Builder<TokioExecutor>,
    /// Every connection and tunnel task, to wait for at shutdown.
    pub(super) tasks: TaskTracker,
    /// Raised at shutdown: finish what is in flight, take nothing new.
    pub(super) drain: CancellationToken,
    /// Set just before `drain` is raised, for a look that takes no lock.
    pub(super) draining: AtomicBool,
    /// Raised when the grace period is over: drop everything.
    pub(super) cut: CancellationToken,
    /// Connections dropped by `cut`.
    pub(super) cut_count: AtomicU64,
    /// Client connections with an upstream connection of their own.
    pub(super) affine_count: AtomicUsize,
    /// TLS for those connections: the pool's verification, HTTP/1.1 only.
    pub(super) affine_tls: tokio_rustls::TlsConnector,
    pub(super) ca_path: Option<Arc<Path>>,
    /// Log lines that a flood of clients would make by the thousand: a few a second each.
    pub(super) quiet: QuietLines,
}

/// The budgets of the log lines a flood makes one of per client or request: a few a second,
/// and a count of the rest, as the judge's verdict lines (see `lines`).
#[derive(Debug, Default)]
pub(crate) struct QuietLines {
    /// Connections closed because the client read nothing for `send_timeout`.
    pub(crate) send_timeout: crate::lines::Budget,
    /// Requests refused because their peer is locked out after failed proxy authentication.
    pub(crate) locked_out: crate::lines::Budget,
    /// Connections refused for the per-peer limit once their process was known.
    pub(crate) per_peer: crate::lines::Budget,
}

/// The second since the Unix epoch of `at`, for a [`QuietLines`] budget.
pub(crate) fn second_of(at: std::time::SystemTime) -> u64 {
    at.duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| since.as_secs())
}

/// Where requests go.
pub(super) enum Route {
    /// A forward proxy; `leaves` is set when something can be intercepted.
    Forward { leaves: Option<LeafCache> },
    /// A reverse proxy in front of one upstream.
    Reverse(Upstream),
}
