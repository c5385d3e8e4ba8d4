//! The running proxy: [`ProxyServer`] binds, accepts, serves and shuts down; each request goes
//! through the [`Stage`]s of a [`Pipeline`].
//!
//! Files, in the order a request meets them:
//!
//! - `server` accepts connections onto threads of their own, within the limits (`peers` counts
//!   each peer's), tells HTTP/2 from HTTP/1.1 and shuts down in order;
//! - `conn` is a client connection, and where a request on it comes from; `io` is its socket
//!   (a gentle close, a send timeout, first bytes read and given back); `process` finds which
//!   process a loopback client is, and `filter` whether the proxy handles it;
//! - `serve` serves HTTP on a connection, `idle` closes it once nothing was in flight for a
//!   while;
//! - `handler` takes one request through: `early` answers it before routing (its proxy
//!   credentials checked by `auth`), `route` finds where it goes (`target` reads the URL) and
//!   who sent it, `headers` rewrites hop-by-hop fields and `Via`;
//! - `connect` answers a `CONNECT`, and `tunnel` serves the tunnel: intercepted or plain HTTP
//!   served again by `serve`, anything else blind;
//! - `pipeline` orders the stages and `stage` is their interface; `unread` settles a body the
//!   proxy answers without reading;
//! - `upstream` is the way out, and `affinity` a client connection's own upstream connection;
//! - `reply` makes the proxy's own answers, `log` writes the request log line, `stats` counts;
//! - `shared` is what every connection and request shares: the plan `ProxyServer::bind`
//!   compiles, the counters and the shutdown's tokens.
//!
//! No two files import each other, directly or round a loop (`tests/layers.rs`). A tunnel's
//! recursion, the HTTP inside it served by the same code that answered its `CONNECT`, goes
//! through a type parameter instead: `connect::ServeTunnel`, which `server` and `tunnel` set to
//! `tunnel::Tunnels`, and `serve` and `handler` pass down.

mod affinity;
mod auth;
mod conn;
mod connect;
mod early;
mod filter;
mod handler;
mod headers;
mod idle;
mod io;
mod log;
mod peers;
mod pipeline;
mod process;
pub(crate) mod reply;
mod route;
mod serve;
mod server;
mod shared;
#[cfg(target_os = "linux")]
mod sock_diag;
mod stage;
mod stats;
mod target;
mod tunnel;
mod unread;
mod upstream;

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize};
use std::time::Duration;

use hyper::server::conn::{http1, http2};
use hyper_util::rt::{TokioExecutor, TokioTimer};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

pub use filter::ConnectionFilter;
pub use pipeline::{Pipeline, UPKEEP_EVERY};
pub use stage::{Action, ClientId, Finish, Mode, Notes, RequestMeta, Stage};
pub use stats::Summary;
pub use target::Target;

use crate::config::{CaSource, ConfigError, ProxyConfig, WatchList};
use crate::error::ProxyError;
use crate::tls::{CertificateAuthority, LeafCache, upstream_client_config};
use shared::{QuietLines, Route, Shared};
use stats::Stats;
use upstream::Upstreams;

/// How much of a response hyper buffers for one client (HTTP/1.1), or one stream (HTTP/2),
/// before it waits for the client to read; hyper's own default is 400 KiB. The kernel's
/// socket buffer holds more, and keeps a client that reads at speed busy all the same; this
/// bounds what a client that stops reading holds until the send timeout closes it.
const CLIENT_BUFFER: usize = 64 * 1024;

/// A bound proxy, ready to serve.
///
/// # Examples
///
/// ```no_run
/// use holdoff_proxy::{ProxyConfig, ProxyServer};
///
/// # async fn run() -> Result<(), holdoff_proxy::ProxyError> {
/// let mut config = ProxyConfig::default();
/// config.listen = "127.0.0.1:0".parse().unwrap();
/// let server = ProxyServer::bind(config, Vec::new()).await?;
/// println!("listening on http://{}", server.local_addr());
/// let summary = server.run_until(async { let _ = tokio::signal::ctrl_c().await; }).await;
/// eprintln!("{summary}");
/// # Ok(())
/// # }
/// ```
pub struct ProxyServer {
    listener: TcpListener,
    shared: Arc<Shared>,
    stop: CancellationToken,
    ca: Option<Arc<CertificateAuthority>>,
    grace: Duration,
    limits: server::Limits,
    connection_threads: usize,
    /// Addresses this process serves besides the proxy's port (see `add_own_address`).
    also_own: Vec<SocketAddr>,
}

/// Stops a running [`ProxyServer`] from anywhere, as the shutdown signal does.
#[derive(Clone, Debug)]
pub struct ShutdownHandle {
    stop: CancellationToken,
}

impl ShutdownHandle {
    /// Starts the shutdown: stop accepting, let requests in flight finish within the grace
    /// period, then cut what is left.
    pub fn shutdown(&self) {
        self.stop.cancel();
    }
}

impl ProxyServer {
    /// Checks `config`, binds its address, and loads what it needs: the upstream root
    /// certificates, and the interception CA when something can be intercepted. Every request
    /// passes `pipeline`'s stages, and the proxy reads its clock: see [`Pipeline`]. A
    /// `Vec<Arc<dyn Stage>>` is a pipeline of those stages, in order.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::Config`](crate::ErrorKind::Config) when the configuration is invalid or
    /// unsafe (see [`ProxyConfig::validate`]); [`ErrorKind::Bind`](crate::ErrorKind::Bind)
    /// when the address cannot be bound; [`ErrorKind::Ca`](crate::ErrorKind::Ca) or
    /// [`ErrorKind::UpstreamRoots`](crate::ErrorKind::UpstreamRoots) when certificates
    /// cannot be loaded.
    pub async fn bind(
        config: ProxyConfig,
        pipeline: impl Into<Pipeline>,
    ) -> Result<ProxyServer, ProxyError> {
        let pipeline = pipeline.into();
        config.validate()?;
        let listener =
            server::listen(config.listen).map_err(|err| ProxyError::bind(config.listen, err))?;
        let local_addr = listener
            .local_addr()
            .map_err(|err| ProxyError::bind(config.listen, err))?;
        let limits = server::Limits {
            connections: config.max_connections,
            per_peer: config.connections_per_peer(),
        };

        let ca = if config.intercepts() {
            // Off the runtime's threads: loading may wait for another process writing the CA.
            let source = config.ca.clone();
            match tokio::task::spawn_blocking(move || load_ca(&source)).await {
                Ok(loaded) => Some(loaded?),
                // Only a panic: a blocking task is cancelled only as the runtime shuts down,
                // which drops this future too.
                Err(err) => std::panic::resume_unwind(err.into_panic()),
            }
        } else {
            None
        };
        let tls =
            upstream_client_config(&config.upstream_ca).map_err(ProxyError::upstream_roots)?;
        let (route, watch) = match config.upstream {
            Some(upstream) if config.urls_to_watch.is_empty() => {
                // In front of one upstream the user chose, everything is of interest.
                let everything = "*".parse().map_err(ProxyError::from)?;
                (Route::Reverse(upstream), WatchList::new([everything]))
            }
            Some(upstream) => (
                Route::Reverse(upstream),
                WatchList::new(config.urls_to_watch),
            ),
            None => {
                let leaves = ca.as_ref().map(|ca| LeafCache::new(Arc::clone(ca)));
                (
                    Route::Forward { leaves },
                    WatchList::new(config.urls_to_watch),
                )
            }
        };

        // No header read timeout, nor a timer: `serve_http` times idle connections out, with
        // one timer per connection rather than one per request. hyper's buffer also holds a
        // request head, so it is never smaller than the largest head accepted.
        let mut http1 = http1::Builder::new();
        http1
            .max_header_size(config.max_header_bytes)
            .max_buf_size(CLIENT_BUFFER.max(config.max_header_bytes))
            .keep_alive(true);
        let mut http2 = http2::Builder::new(TokioExecutor::new());
        http2
            .timer(TokioTimer::new())
            .max_header_list_size(u32::try_from(config.max_header_bytes).unwrap_or(u32::MAX))
            .max_send_buf_size(CLIENT_BUFFER)
            .keep_alive_interval(config.idle_timeout);

        let ca_path = ca.as_ref().and_then(|ca| ca.cert_path()).map(Arc::from);
        let mut affine_tls = tls.clone();
        affine_tls.alpn_protocols = vec![b"http/1.1".to_vec()];
        let shared = Arc::new(Shared {
            route,
            watch,
            auth: config.proxy_auth.map(auth::ProxyAuth::new),
            upstreams: Upstreams::new(tls, config.upstream_timeout),
            clock: Arc::clone(pipeline.clock()),
            pipeline,
            stats: Stats::default(),
            next_id: AtomicU64::new(0),
            local_addr,
            own: upstream::Own::new(local_addr),
            via: headers::Via::new(),
            upstream_timeout: config.upstream_timeout,
            idle_timeout: config.idle_timeout,
            send_timeout: config.send_timeout,
            max_header_bytes: config.max_header_bytes,
            client_id: config.client_id,
            filter: filter::Filter::default(),
            http1,
            http2,
            tasks: TaskTracker::new(),
            drain: CancellationToken::new(),
            draining: AtomicBool::new(false),
            cut: CancellationToken::new(),
            cut_count: AtomicU64::new(0),
            affine_count: AtomicUsize::new(0),
            affine_tls: Arc::new(affine_tls).into(),
            ca_path,
            quiet: QuietLines::default(),
        });
        Ok(ProxyServer {
            listener,
            shared,
            stop: CancellationToken::new(),
            ca,
            grace: config.grace,
            limits,
            connection_threads: config.connection_threads,
            also_own: Vec::new(),
        })
    }

    /// The address the proxy listens on (with the port the OS picked for port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.shared.local_addr
    }

    /// Registers another address this process serves, such as its control API or its
    /// metrics: the proxy refuses requests and tunnels to it (`508 Loop Detected`), as it
    /// refuses those to its own port. A client under test must not reach the control API
    /// through the proxy, nor the proxy itself. Only addresses added before it runs count.
    pub fn add_own_address(&mut self, addr: SocketAddr) {
        self.also_own.push(addr);
    }

    /// Handles only the client connections `filter` accepts; the others pass through
    /// untouched (no stage sees their requests, their tunnels are blind). Only the first
    /// filter set before the server runs counts.
    pub fn filter_connections(&mut self, filter: Arc<dyn ConnectionFilter>) {
        self.shared.filter.set(filter);
    }

    /// The interception CA, when something can be intercepted.
    pub fn ca(&self) -> Option<&Arc<CertificateAuthority>> {
        self.ca.as_ref()
    }

    /// A handle that stops the server once it runs.
    pub fn shutdown_handle(&self) -> ShutdownHandle {
        ShutdownHandle {
            stop: self.stop.clone(),
        }
    }

    /// Serves until `signal` completes or a [`ShutdownHandle`] is used; then stops accepting,
    /// lets requests in flight finish within the grace period, cuts what is left, and returns
    /// what happened.
    pub async fn run_until(self, signal: impl Future<Output = ()>) -> Summary {
        self.shared.own.set_others(self.also_own);
        let started = self.shared.clock.now();
        server::serve(
            self.listener,
            Arc::clone(&self.shared),
            signal,
            self.stop,
            self.grace,
            self.limits,
            server::Workers::start(self.connection_threads),
        )
        .await;
        let uptime = self.shared.clock.now().saturating_duration_since(started);
        let cut = self
            .shared
            .cut_count
            .load(std::sync::atomic::Ordering::Relaxed);
        self.shared.stats.summary(uptime, cut)
    }

    /// Serves until a [`ShutdownHandle`] is used.
    pub async fn run(self) -> Summary {
        self.run_until(std::future::pending()).await
    }
}

impl std::fmt::Debug for ProxyServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProxyServer")
            .field("local_addr", &self.shared.local_addr)
            .field("ca", &self.ca)
            .finish_non_exhaustive()
    }
}

fn load_ca(source: &CaSource) -> Result<Arc<CertificateAuthority>, ProxyError> {
    let ca = match source {
        CaSource::Provided(ca) => return Ok(Arc::clone(ca)),
        CaSource::Ephemeral => CertificateAuthority::ephemeral(),
        CaSource::Dir(dir) => CertificateAuthority::load_or_create(dir),
        CaSource::DefaultDir => {
            let dir = CertificateAuthority::default_dir().ok_or(ConfigError::NoCaDir)?;
            CertificateAuthority::load_or_create(&dir)
        }
    };
    ca.map(Arc::new).map_err(ProxyError::ca)
}
