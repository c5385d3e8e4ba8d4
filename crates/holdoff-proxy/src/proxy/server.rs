//! Accepting connections (within the connection limits) onto threads of their own, telling
//! HTTP/2 from HTTP/1.1 on each, and shutting down in order.

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use holdoff::clock::Clock;
use hyper_util::rt::TokioIo;
use tokio::net::{TcpListener, TcpSocket, TcpStream};
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

use super::conn::Slot;
use super::conn::{Accepted, Admission, Conn, Inbound};
use super::io::{ClientIo, PREFACE};
use super::peers::{PeerKey, Peers, Refusals, refused_line};
use super::process;
use super::serve::{draining, serve_http};
use super::shared::{Shared, second_of};
use super::stage::ClientId;
use super::tunnel::Tunnels;

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
        let admission = if process::tells_processes_apart(shared.client_id, ip) {
            // Counted per process, once its process is known (see `serve_plain`).
            Admission::ByProcess(Arc::clone(&peers))
        } else {
            let key = PeerKey::Address(ip);
            let Some(peer_slot) = peers.admit(key) else {
                // Closed at once: a peer at its limit costs nothing but this.
                drop(stream);
                refusals.refused(key, limits.per_peer, &shared.clock);
                continue;
            };
            Admission::Admitted(peer_slot)
        };
        let _ = stream.set_nodelay(true);
        let accepted = Accepted::new(Arc::clone(&shared), peer, permit, admission);
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

/// Runs the stages' upkeep every [`Pipeline::upkeep_every`](super::pipeline::Pipeline::upkeep_every)
/// of the pipeline's clock, for as long as the server accepts.
async fn upkeep(shared: Arc<Shared>) {
    let clock = &shared.clock;
    let every = shared.pipeline.upkeep_every();
    loop {
        clock.sleep_until(clock.now() + every).await;
        shared.pipeline.maintain();
    }
}

/// Serves a connection to the proxy's port: HTTP/1.1 with upgrades (for `CONNECT` and
/// WebSocket), or HTTP/2 if it opens with the preface. One that sends nothing that tells
/// which within the idle timeout is closed then, as is one that sends nothing before
/// shutdown begins.
async fn serve_plain(accepted: Accepted, stream: TcpStream) {
    let Accepted {
        shared,
        peer,
        connection,
        admission,
    } = accepted;
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
    let peer_slot = match admission {
        Admission::Admitted(slot) => slot,
        Admission::ByProcess(peers) => {
            let key = match &identity {
                ClientId::Process { pid, .. } => PeerKey::Process(*pid),
                _ => PeerKey::Address(peer.ip().to_canonical()),
            };
            let Some(slot) = peers.admit(key) else {
                let take = (shared.quiet.per_peer).take(second_of(shared.clock.wall_now()));
                if take.left_out > 0 {
                    tracing::warn!(
                        "{} more connections refused for the per-peer limit were left out of \
                         the log",
                        take.left_out
                    );
                }
                if take.log {
                    refused_line(key, peers.limit());
                }
                return;
            };
            slot
        }
    };
    let slot = Slot::new(connection, peer_slot);
    let handled = shared
        .filter
        .handles(peer, stream.local_addr(), &identity)
        .await;
    let conn = Arc::new(Conn::new(
        Arc::clone(&shared),
        peer,
        slot,
        identity,
        handled,
        h2,
    ));
    let io = TokioIo::new(ClientIo::new(stream, first, Arc::clone(&conn)));
    let inbound = Inbound::Plain(Arc::clone(&conn));
    // HTTP/2 requests run concurrently: they use the shared upstream pool.
    let affinity = (!h2).then_some(&conn.affinity);
    serve_http::<_, Tunnels>(&shared, io, inbound, h2, peer, affinity, None).await;
    conn.affinity.close(&shared.affine_count);
}

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
