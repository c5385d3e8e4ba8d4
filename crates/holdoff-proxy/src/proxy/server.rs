//! Accepting connections (within the connection limits), serving them with hyper, and
//! shutting down in order.

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::{Pin, pin};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use holdoff::clock::Clock;
use http_body::{Frame, SizeHint};
use hyper::body::Incoming;
use hyper::rt::{Read, Write};
use hyper::server::conn::{http1, http2};
use hyper::service::{HttpService, service_fn};
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::net::{TcpListener, TcpSocket, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_util::sync::CancellationToken;

use super::Shared;
use super::affinity::Affinity;
use super::connect::PlainTunnel;
use super::handler::{self, Aborted, Inbound};
use super::idle::{Activity, Busy, Idle};
use super::io::ClientIo;
use super::peers::{PeerSlot, Peers, Refusals};
use super::process;
use super::stage::ClientId;
use crate::{Body, BoxError};

/// How long to pause accepting after an error such as running out of file descriptors.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(50);

/// How many connections may wait to be accepted. What tokio's `bind` asks for, 128, a burst
/// of clients fills (a test suite starting its workers at once, or one peer flooding the
/// port while its connections are refused); the kernel caps it (Linux: `somaxconn`, 4096
/// by default).
const BACKLOG: u32 = 1024;

/// Binds the proxy's port, with room for [`BACKLOG`] connections waiting to be accepted.
pub(crate) fn listen(addr: SocketAddr) -> io::Result<TcpListener> {
    let socket = match addr {
        SocketAddr::V4(_) => TcpSocket::new_v4()?,
        SocketAddr::V6(_) => TcpSocket::new_v6()?,
    };
    // As tokio's `bind`: a proxy started again can bind its port at once. Not on Windows,
    // where it would let another socket take the port over.
    #[cfg(not(windows))]
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(BACKLOG)
}

/// How many client connections are served at once.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Limits {
    /// In all: past it, clients wait in the backlog.
    pub(crate) connections: usize,
    /// From one peer address: past it, its connections are refused as they are accepted, so
    /// that one peer cannot take every slot and keep everyone else waiting.
    pub(crate) per_peer: usize,
}

/// One client connection to the proxy's own port.
pub(crate) struct Conn {
    pub(crate) shared: Arc<Shared>,
    pub(crate) peer: SocketAddr,
    /// Who its requests come from unless they name their client: its process, or its peer
    /// address (see `process`). Found before the first request.
    pub(crate) identity: ClientId,
    /// Whether the proxy handles it (see `filter`): if not, it passes through untouched.
    pub(crate) handled: bool,
    /// Its own upstream connection, once it has one: HTTP/1.1 only, whose requests come one
    /// at a time.
    pub(crate) affinity: Affinity,
    /// Whether it speaks HTTP/2 (h2c): its requests run concurrently, so they go to the
    /// shared upstream pool and never to `affinity`, which nothing polls for it.
    pub(crate) h2: bool,
    /// How many requests on it have reached the proxy.
    pub(crate) calls: AtomicU64,
    /// Held for as long as the connection, or a tunnel made of it, lives.
    _slot: Arc<Slot>,
}

impl Conn {
    /// The connection inside a tunnel made of this one that carries plain HTTP: served as if
    /// the client had connected to the proxy's port again, with its own upstream connection,
    /// by the same client.
    pub(crate) fn inside_tunnel(&self, h2: bool) -> Conn {
        Conn {
            shared: Arc::clone(&self.shared),
            peer: self.peer,
            identity: self.identity.clone(),
            handled: self.handled,
            affinity: Affinity::default(),
            h2,
            calls: AtomicU64::new(0),
            _slot: Arc::clone(&self._slot),
        }
    }
}

/// A connection's place under the connection limits.
struct Slot {
    _connection: OwnedSemaphorePermit,
    _peer: PeerSlot,
}

/// Single-threaded runtimes on threads of their own, connections spread over them in turn.
///
/// A connection stays on its thread for its whole life, with every request on it and its own
/// upstream connection: no task ever moves between threads and no thread wakes another, as
/// in an event loop per core. The threads end when the value is dropped.
pub(crate) struct Workers {
    handles: Vec<tokio::runtime::Handle>,
    next: AtomicUsize,
    stop: CancellationToken,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl Workers {
    /// `count` threads; none when it is 0 or a runtime cannot be built (connections are then
    /// served on the caller's runtime).
    pub(crate) fn start(count: usize) -> Workers {
        let stop = CancellationToken::new();
        let mut handles = Vec::new();
        let mut threads = Vec::new();
        for index in 0..count {
            let runtime = match tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            {
                Ok(runtime) => runtime,
                Err(err) => {
                    tracing::warn!(error = %err, "could not start a connection thread; serving on fewer");
                    break;
                }
            };
            handles.push(runtime.handle().clone());
            let stop = stop.clone();
            let thread = std::thread::Builder::new()
                .name(format!("holdoff-conn-{index}"))
                .spawn(move || runtime.block_on(stop.cancelled()));
            match thread {
                Ok(thread) => threads.push(thread),
                Err(err) => {
                    handles.pop();
                    tracing::warn!(error = %err, "could not start a connection thread; serving on fewer");
                    break;
                }
            }
        }
        Workers {
            handles,
            next: AtomicUsize::new(0),
            stop,
            threads,
        }
    }

    /// The runtime the next connection goes to, if there are any.
    fn next(&self) -> Option<&tokio::runtime::Handle> {
        let index = self.next.fetch_add(1, Ordering::Relaxed);
        self.handles.get(index.checked_rem(self.handles.len())?)
    }
}

impl Drop for Workers {
    fn drop(&mut self) {
        self.stop.cancel();
        for thread in self.threads.drain(..) {
            let _ = thread.join();
        }
    }
}

/// Accepts until `signal` or `stop`, then drains: idle connections close, requests in flight
/// get `grace` to finish, and whatever is left is cut.
pub(crate) async fn serve(
    listener: TcpListener,
    shared: Arc<Shared>,
    signal: impl Future<Output = ()>,
    stop: CancellationToken,
    grace: Duration,
    limits: Limits,
    workers: Workers,
) {
    let mut signal = pin!(signal);
    let slots = Arc::new(Semaphore::new(limits.connections));
    let peers = Peers::new(limits.per_peer);
    let mut refusals = Refusals::default();
    let upkeep = tokio::spawn(upkeep(Arc::clone(&shared)));
    loop {
        // Wait for a free slot before accepting: past the limit, clients wait in the
        // backlog instead of costing memory here.
        let permit = tokio::select! {
            biased;
            () = &mut signal => break,
            () = stop.cancelled() => break,
            () = refusals.due() => {
                refusals.log(&shared.clock);
                continue;
            }
            permit = Arc::clone(&slots).acquire_owned() => match permit {
                Ok(permit) => permit,
                Err(_) => break,
            },
        };
        let (stream, peer) = tokio::select! {
            biased;
            () = &mut signal => break,
            () = stop.cancelled() => break,
            () = refusals.due() => {
                refusals.log(&shared.clock);
                continue;
            }
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(err) => {
                    // A connection reset in the backlog concerns that client only; running out
                    // of descriptors would repeat at once, so pause.
                    tracing::warn!(error = %err, "failed to accept a connection");
                    let clock = &shared.clock;
                    clock.sleep_until(clock.now() + ACCEPT_BACKOFF).await;
                    continue;
                }
            },
        };
        // An IPv4 client of a dual-stack socket is the same peer as over IPv4.
        let ip = peer.ip().to_canonical();
        let Some(peer_slot) = peers.admit(ip) else {
            // Closed at once: a peer at its limit costs nothing but this.
            drop(stream);
            refusals.refused(ip, limits.per_peer, &shared.clock);
            continue;
        };
        let _ = stream.set_nodelay(true);
        let accepted = Accepted {
            shared: Arc::clone(&shared),
            peer,
            slot: Slot {
                _connection: permit,
                _peer: peer_slot,
            },
        };
        match workers.next() {
            Some(runtime) => {
                // Registered with the thread's own reactor: the socket goes over as std's.
                match stream.into_std() {
                    Ok(stream) => {
                        let task = shared.tasks.track_future(async move {
                            match TcpStream::from_std(stream) {
                                Ok(stream) => serve_plain(accepted, stream).await,
                                Err(err) => {
                                    tracing::warn!(error = %err, "failed to take a connection over")
                                }
                            }
                        });
                        runtime.spawn(task);
                    }
                    Err(err) => tracing::warn!(error = %err, "failed to hand a connection over"),
                }
            }
            None => {
                shared.tasks.spawn(serve_plain(accepted, stream));
            }
        }
    }
    drop(listener);
    upkeep.abort();
    refusals.log(&shared.clock);
    tracing::debug!("stopped accepting; draining connections");
    shared.draining.store(true, Ordering::Release);
    shared.drain.cancel();
    shared.tasks.close();
    if tokio::time::timeout(grace, shared.tasks.wait())
        .await
        .is_err()
    {
        tracing::debug!(
            left = shared.tasks.len(),
            "grace period over; cutting connections"
        );
        shared.cut.cancel();
        shared.tasks.wait().await;
    }
    drop(workers);
}

/// Runs the stages' upkeep every [`Pipeline::upkeep_every`](super::Pipeline::upkeep_every)
/// of the pipeline's clock, for as long as the server accepts.
async fn upkeep(shared: Arc<Shared>) {
    let clock = &shared.clock;
    let every = shared.pipeline.upkeep_every();
    loop {
        clock.sleep_until(clock.now() + every).await;
        shared.pipeline.maintain();
    }
}

/// A connection just accepted, on its way to its thread.
struct Accepted {
    shared: Arc<Shared>,
    peer: SocketAddr,
    slot: Slot,
}

/// Serves a connection to the proxy's port: HTTP/1.1 with upgrades (for `CONNECT` and
/// WebSocket), or HTTP/2 if it opens with the preface. One that sends nothing that tells
/// which within the idle timeout is closed then, as is one that sends nothing before
/// shutdown begins.
async fn serve_plain(accepted: Accepted, stream: TcpStream) {
    let Accepted { shared, peer, slot } = accepted;
    let clock = &shared.clock;
    let silent = clock.sleep_until(clock.now() + shared.idle_timeout);
    let opened = async {
        tokio::select! {
            opening = opening(&stream) => opening.ok_or("it closed"),
            () = silent => Err("it sent no request within the idle timeout"),
            () = draining(&shared) => Err("shutdown began before it sent a request"),
        }
    };
    // Who is at the other end is found while the client sends its first request.
    let (opened, identity) = tokio::join!(
        opened,
        process::identity(shared.client_id, peer, stream.local_addr()),
    );
    let Opening { h2, first } = match opened {
        Ok(opening) => opening,
        Err(why) => {
            tracing::debug!(client = %peer.ip(), "closing a connection: {why}");
            return;
        }
    };
    let handled = shared
        .filter
        .handles(peer, stream.local_addr(), &identity)
        .await;
    let conn = Arc::new(Conn {
        shared: Arc::clone(&shared),
        peer,
        identity,
        handled,
        affinity: Affinity::default(),
        h2,
        calls: AtomicU64::new(0),
        _slot: Arc::new(slot),
    });
    let io = TokioIo::new(ClientIo::new(stream, first, Arc::clone(&conn)));
    let inbound = Inbound::Plain(Arc::clone(&conn));
    // HTTP/2 requests run concurrently: they use the shared upstream pool.
    let affinity = (!h2).then_some(&conn.affinity);
    serve_http(&shared, io, inbound, h2, peer, affinity, None).await;
    conn.affinity.close(&shared.affine_count);
}

/// What an HTTP/2 client with prior knowledge (h2c, RFC 9113 §3.3) sends first.
pub(crate) const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// How a client opens a connection to the proxy's port.
struct Opening {
    /// With the HTTP/2 preface: plain HTTP/2 (gRPC and other h2c clients, mostly in front of
    /// a reverse proxy) is served as such, everything else as HTTP/1.1.
    h2: bool,
    /// What was read to tell, for the server to read again.
    first: Vec<u8>,
}

/// How much is read at once to see what a client speaks: a whole request head, mostly, which
/// hyper then parses without reading again.
const FIRST_READ: usize = 8 * 1024;

/// Reads the client's first bytes until they tell whether it opens with the HTTP/2 preface;
/// `None` if it closes before sending any, or its connection fails.
///
/// It reads rather than peeks: a peek finds the same bytes again at once, so a client that
/// stops half-way through the preface would be looked at in a loop until the idle timeout;
/// a read waits for more.
async fn opening(stream: &TcpStream) -> Option<Opening> {
    let mut first = Vec::new();
    loop {
        stream.readable().await.ok()?;
        // Not kept while waiting: only what was read is.
        let mut chunk = [0u8; FIRST_READ];
        match stream.try_read(&mut chunk) {
            // Closed after a piece of the preface: HTTP/1.1 refuses it as it is.
            Ok(0) if first.is_empty() => return None,
            Ok(0) => return Some(Opening { h2: false, first }),
            Ok(n) => first.extend_from_slice(&chunk[..n]),
            // Readiness that was not (it is cleared, and waited for again).
            Err(err) if err.kind() == io::ErrorKind::WouldBlock => continue,
            Err(_) => return None,
        }
        let seen = first.len().min(PREFACE.len());
        if first[..seen] != PREFACE[..seen] {
            return Some(Opening { h2: false, first });
        }
        if seen == PREFACE.len() {
            return Some(Opening { h2: true, first });
        }
    }
}

/// Serves HTTP on `io`, HTTP/2 if `h2`, until the client leaves or shutdown ends it; polls
/// the connection's own upstream connection (`affinity`) beside it. In a tunnel that carries
/// plain HTTP (`plain`), each request is first addressed to the tunnel's target.
pub(crate) async fn serve_http<I>(
    shared: &Shared,
    io: I,
    inbound: Inbound,
    h2: bool,
    peer: SocketAddr,
    affinity: Option<&Affinity>,
    plain: Option<Arc<PlainTunnel>>,
) where
    I: Read + Write + Unpin + Send + 'static,
{
    // Neither protocol is left to time idle connections out: HTTP/2 has no idle timeout (its
    // pings keep a quiet client alive), and hyper's HTTP/1.1 header timeout registers and
    // drops a timer for every request. Each request counts as in flight until its response
    // body is done, and one timer per connection closes it once none was for a while.
    let activity = Arc::new(Activity::new(Arc::clone(&shared.clock)));
    let tracked = Arc::clone(&activity);
    let service = service_fn(move |mut request| {
        if let Some(plain) = &plain {
            plain.address(&mut request);
        }
        let busy = Busy::start(Arc::clone(&tracked));
        let answer = handler::handle(inbound.clone(), request);
        async move {
            let response = answer.await?;
            Ok::<_, Aborted>(response.map(|body| Tracked { body, _busy: busy }))
        }
    });
    let outcome = if h2 {
        let connection = shared.http2.serve_connection(io, service);
        drive(shared, connection, None, &activity).await
    } else {
        let connection = shared.http1.serve_connection(io, service).with_upgrades();
        drive(shared, connection, affinity, &activity).await
    };
    match outcome {
        Some(Ok(())) => {}
        Some(Err(err)) => connection_error(shared, &err, peer),
        None => {
            shared.cut_count.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// A hyper connection that can be asked to finish gracefully.
trait Graceful: Future<Output = Result<(), hyper::Error>> {
    /// Whether an idle connection is asked to finish (HTTP/2: `GOAWAY`, then the streams
    /// still open end) rather than closed at once (HTTP/1.1, where an idle connection has
    /// nothing in flight, but may have half a request head that never completes).
    const FINISHES_WHEN_IDLE: bool;

    fn graceful_shutdown(self: Pin<&mut Self>);
}

impl<I, S> Graceful for http1::UpgradeableConnection<I, S>
where
    I: Read + Write + Unpin + Send + 'static,
    S: HttpService<Incoming>,
    S::ResBody: 'static,
    <S::ResBody as http_body::Body>::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    const FINISHES_WHEN_IDLE: bool = false;

    fn graceful_shutdown(self: Pin<&mut Self>) {
        http1::UpgradeableConnection::graceful_shutdown(self);
    }
}

impl<I, S> Graceful for http2::Connection<I, S, TokioExecutor>
where
    I: Read + Write + Unpin + 'static,
    S: HttpService<Incoming>,
    S::ResBody: 'static,
    <S::ResBody as http_body::Body>::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    TokioExecutor: hyper::rt::bounds::Http2ServerConnExec<S::Future, S::ResBody>,
{
    const FINISHES_WHEN_IDLE: bool = true;

    fn graceful_shutdown(self: Pin<&mut Self>) {
        http2::Connection::graceful_shutdown(self);
    }
}

/// Runs `connection` to its end, or, once shutdown begins or it has been idle too long, asks
/// it to finish and runs it until then or until the grace period is over (`None`: it was
/// cut). An idle HTTP/1.1 connection is closed at once.
async fn drive<C: Graceful>(
    shared: &Shared,
    connection: C,
    affinity: Option<&Affinity>,
    activity: &Activity,
) -> Option<Result<(), hyper::Error>> {
    let mut connection = pin!(connection);
    let count = &shared.affine_count;
    let idle = Idle::new(activity, &shared.clock, shared.idle_timeout);
    tokio::select! {
        biased;
        result = with_upstream(connection.as_mut(), affinity, count) => return Some(result),
        () = draining(shared) => {}
        () = idle => {
            tracing::debug!("closing an idle connection");
            if !C::FINISHES_WHEN_IDLE {
                return Some(Ok(()));
            }
        }
    }
    connection.as_mut().graceful_shutdown();
    tokio::select! {
        result = with_upstream(connection.as_mut(), affinity, count) => Some(result),
        () = shared.cut.cancelled() => None,
    }
}

/// Completes once shutdown begins. A connection's task is polled several times per request,
/// and the token's own future takes a lock and registers again on each poll: this one
/// registers once, then looks at one flag.
async fn draining(shared: &Shared) {
    let mut cancelled = pin!(shared.drain.cancelled());
    let mut registered = false;
    std::future::poll_fn(|cx| {
        if registered && !shared.draining.load(Ordering::Acquire) {
            return std::task::Poll::Pending;
        }
        registered = true;
        cancelled.as_mut().poll(cx)
    })
    .await;
}

/// A response body that keeps its request in flight until it is done.
struct Tracked {
    body: Body,
    _busy: Busy,
}

impl http_body::Body for Tracked {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

/// Polls `connection`, and after it the client's own upstream connection, in one task.
fn with_upstream<'a, C: Future>(
    mut connection: Pin<&'a mut C>,
    affinity: Option<&'a Affinity>,
    count: &'a AtomicUsize,
) -> impl Future<Output = C::Output> + 'a {
    std::future::poll_fn(move |cx| {
        let served = connection.as_mut().poll(cx);
        if let Some(affinity) = affinity {
            affinity.poll_upstream(count, cx);
        }
        served
    })
}

/// Logs why a connection ended badly; hyper has already answered what can be answered.
fn connection_error(shared: &Shared, err: &hyper::Error, peer: SocketAddr) {
    if err.is_parse_too_large() {
        shared.stats.rejected();
        tracing::warn!(
            client = %peer.ip(),
            limit = shared.max_header_bytes,
            "refused a request whose head is too large (431)"
        );
    } else if err.is_parse() {
        shared.stats.rejected();
        tracing::warn!(client = %peer.ip(), error = %err, "refused a malformed request (400)");
    } else if err.is_timeout() {
        tracing::debug!(client = %peer.ip(), "closed an idle connection");
    } else {
        tracing::debug!(client = %peer.ip(), error = %err, "a client connection ended");
    }
}
