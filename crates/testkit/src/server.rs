//! The scripted upstream: a real HTTP/1.1 server on a free loopback port.

use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::future;
use std::net::{Ipv4Addr, SocketAddr};
use std::pin::pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use holdoff::clock::Clock;
#[cfg(feature = "tokio-clock")]
use holdoff::clock::TokioClock;
use http::header::DATE;
use http::{Request, Response};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::{JoinHandle, JoinSet};

use crate::recorded::Recorded;
use crate::reply::{Action, Reply, imf_fixdate};
use crate::socket::ResettableStream;

/// How long a connection may take, once shutdown begins, to finish the response it is
/// writing. Scripted delays and bodies still arriving are cut at once; only a client that
/// stops reading can make shutdown wait this long.
const GRACE: Duration = Duration::from_secs(5);

/// A real HTTP/1.1 server on `127.0.0.1`, on a port the OS picked, that answers each path
/// from a script and records every request.
///
/// Each request to a path takes the next [`Reply`] queued for it with
/// [`TestServer::script`]; once the queue is empty the path's default answers
/// ([`TestServer::set_default`], or `200 ok`). Requests are served on keep-alive
/// connections, any number of them at once.
///
/// # Examples
///
/// ```
/// use holdoff_testkit::{Reply, TestServer};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let server = TestServer::start().await;
/// server.script("/v1/chat", [Reply::too_many_requests("2"), Reply::ok("done")]);
/// server.set_default("/health", Reply::status(204));
/// assert!(server.url("/v1/chat").starts_with("http://127.0.0.1:"));
/// server.shutdown().await;
/// # }
/// ```
pub struct TestServer {
    addr: SocketAddr,
    shared: Arc<Shared>,
    stop: watch::Sender<bool>,
    task: Option<JoinHandle<()>>,
}

/// State shared by the handle and every connection.
struct Shared {
    clock: Arc<dyn Clock>,
    routes: Mutex<HashMap<String, Route>>,
    /// Every request recorded so far, sorted by arrival; a watch so tests can await a count.
    log: watch::Sender<Vec<Recorded>>,
    next_sequence: AtomicU64,
}

/// One path's script.
#[derive(Default)]
struct Route {
    queue: VecDeque<Reply>,
    default: Option<Reply>,
}

/// What one connection's requests share.
struct Connection {
    id: u64,
    peer: SocketAddr,
    /// Raised by a [`Reply::reset`] to make the connection's close a TCP reset.
    reset: Arc<AtomicBool>,
}

/// The service's error: the script (or a broken request) ends the connection without a
/// response. hyper closes the connection when the service fails.
#[derive(Debug)]
struct Closed;

impl fmt::Display for Closed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("connection closed without a response")
    }
}

impl std::error::Error for Closed {}

impl TestServer {
    /// Starts a server on `127.0.0.1:0`, on the current tokio runtime, recording arrivals
    /// with [`TokioClock`] (so tests under tokio's paused time see virtual instants).
    ///
    /// # Panics
    ///
    /// Outside a tokio runtime with IO and time enabled, or if no loopback port can be bound.
    #[cfg(feature = "tokio-clock")]
    pub async fn start() -> TestServer {
        TestServer::start_with_clock(TokioClock).await
    }

    /// Starts a server that reads `clock` for arrival times, [`Reply::delay`] and
    /// [`Reply::date_now`], e.g. the [`ManualClock`](holdoff::clock::ManualClock) that the
    /// client under test uses.
    ///
    /// # Panics
    ///
    /// Outside a tokio runtime with IO and time enabled, or if no loopback port can be bound.
    pub async fn start_with_clock(clock: impl Clock + 'static) -> TestServer {
        let listener = match TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await {
            Ok(listener) => listener,
            Err(error) => panic!("failed to bind the test server to 127.0.0.1:0: {error}"),
        };
        let addr = match listener.local_addr() {
            Ok(addr) => addr,
            Err(error) => panic!("failed to read the test server's address: {error}"),
        };
        let shared = Arc::new(Shared {
            clock: Arc::new(clock),
            routes: Mutex::new(HashMap::new()),
            log: watch::Sender::new(Vec::new()),
            next_sequence: AtomicU64::new(0),
        });
        let (stop, stopped) = watch::channel(false);
        let task = tokio::spawn(serve(listener, Arc::clone(&shared), stopped));
        TestServer {
            addr,
            shared,
            stop,
            task: Some(task),
        }
    }

    /// The address the server listens on: `127.0.0.1` and the port the OS picked.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:PORT` followed by `path` (a `/` is put in front of it if missing);
    /// `path` may carry a query.
    pub fn url(&self, path: &str) -> String {
        let slash = if path.starts_with('/') { "" } else { "/" };
        format!("http://{}{slash}{path}", self.addr)
    }

    /// Queues replies for `path`, after any still queued: each request to `path` takes the
    /// next one, in arrival order.
    ///
    /// `path` is matched exactly against the request's path, without the query. The reply is
    /// chosen when the request's header section arrives, before its body is read.
    pub fn script(&self, path: &str, replies: impl IntoIterator<Item = Reply>) {
        lock(&self.shared.routes)
            .entry(path.to_owned())
            .or_default()
            .queue
            .extend(replies);
    }

    /// Sets what `path` answers once its script is used up (by default `200 ok`, as
    /// [`Reply::default`]).
    pub fn set_default(&self, path: &str, reply: Reply) {
        lock(&self.shared.routes)
            .entry(path.to_owned())
            .or_default()
            .default = Some(reply);
    }

    /// How many scripted replies for `path` no request has taken yet.
    pub fn remaining(&self, path: &str) -> usize {
        lock(&self.shared.routes)
            .get(path)
            .map_or(0, |route| route.queue.len())
    }

    /// Every request received so far, in arrival order.
    ///
    /// A request is listed once its body has arrived (or broken off); one whose body is still
    /// arriving is not listed yet.
    pub fn requests(&self) -> Vec<Recorded> {
        self.shared.log.borrow().clone()
    }

    /// The requests whose path (without the query) is `path`, in arrival order.
    pub fn requests_to(&self, path: &str) -> Vec<Recorded> {
        self.shared
            .log
            .borrow()
            .iter()
            .filter(|request| request.path() == path)
            .cloned()
            .collect()
    }

    /// Waits until at least `count` requests are listed, then returns them all (as
    /// [`TestServer::requests`]).
    ///
    /// It waits for ever if they never come: bound it with `tokio::time::timeout` where that
    /// can happen.
    pub async fn wait_for_requests(&self, count: usize) -> Vec<Recorded> {
        let mut log = self.shared.log.subscribe();
        // The sender lives in `self.shared`, so the channel cannot close while we wait.
        match log.wait_for(|requests| requests.len() >= count).await {
            Ok(requests) => requests.clone(),
            Err(_) => self.requests(),
        }
    }

    /// Stops accepting connections, ends scripted delays and hung requests, closes idle
    /// keep-alive connections, lets responses being written finish (for up to 5 seconds), and
    /// returns once every connection is closed.
    ///
    /// Dropping the server starts the same shutdown without waiting for it.
    pub async fn shutdown(mut self) {
        self.stop.send_replace(true);
        if let Some(task) = self.task.take() {
            // The task only fails if a connection task panicked; nothing is left to close.
            let _ = task.await;
        }
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.stop.send_replace(true);
    }
}

impl fmt::Debug for TestServer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TestServer")
            .field("addr", &self.addr)
            .field("requests", &self.shared.log.borrow().len())
            .finish_non_exhaustive()
    }
}

impl Shared {
    /// The reply for the next request to `path`.
    fn next_reply(&self, path: &str) -> Reply {
        let mut routes = lock(&self.routes);
        let Some(route) = routes.get_mut(path) else {
            return Reply::default();
        };
        route
            .queue
            .pop_front()
            .or_else(|| route.default.clone())
            .unwrap_or_default()
    }

    /// Adds `request` to the log, keeping it sorted by arrival.
    fn record(&self, request: Recorded) {
        self.log.send_modify(|log| {
            let at = log.partition_point(|earlier| earlier.sequence < request.sequence);
            log.insert(at, request);
        });
    }
}

/// Locks a mutex, recovering it if a panicking holder poisoned it: every update to the
/// routes is a single step, so the state is consistent either way.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Resolves once shutdown has begun (or the server handle is gone).
async fn stopped(stop: &mut watch::Receiver<bool>) {
    // An error means the sender was dropped, which is a shutdown too.
    let _ = stop.wait_for(|stopped| *stopped).await;
}

/// Accepts connections until shutdown, then waits for every connection to close.
async fn serve(listener: TcpListener, shared: Arc<Shared>, mut stop: watch::Receiver<bool>) {
    let mut connections = JoinSet::new();
    let mut next_id = 0;
    loop {
        tokio::select! {
            () = stopped(&mut stop) => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, peer)) => {
                    let connection = Connection {
                        id: next_id,
                        peer,
                        reset: Arc::new(AtomicBool::new(false)),
                    };
                    next_id += 1;
                    connections.spawn(serve_connection(
                        stream,
                        connection,
                        Arc::clone(&shared),
                        stop.clone(),
                    ));
                }
                // A connection that failed before it was accepted (e.g. reset while in the
                // backlog) concerns that client only. Running out of file descriptors would
                // repeat: yield so the connections that hold them can finish.
                Err(_) => tokio::task::yield_now().await,
            },
            // Reap finished connections so the set does not grow with every one ever served.
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
    drop(listener);
    while connections.join_next().await.is_some() {}
}

/// Serves one connection's requests until the client closes it, the script ends it, or
/// shutdown.
async fn serve_connection(
    stream: TcpStream,
    connection: Connection,
    shared: Arc<Shared>,
    mut stop: watch::Receiver<bool>,
) {
    // Responses are small and written whole: do not let Nagle hold them back.
    let _ = stream.set_nodelay(true);
    let io = TokioIo::new(ResettableStream::new(stream, Arc::clone(&connection.reset)));
    let connection = Arc::new(connection);
    let service_stop = stop.clone();
    let service = service_fn(move |request| {
        answer(
            Arc::clone(&shared),
            Arc::clone(&connection),
            service_stop.clone(),
            request,
        )
    });
    let mut builder = http1::Builder::new();
    // Exactly the scripted headers: a test that scripts no Date must get none.
    builder.auto_date_header(false);
    let mut served = pin!(builder.serve_connection(io, service));
    tokio::select! {
        // Errors here are the client's (a malformed request, which hyper has answered with
        // 400, or a broken connection) or the script's (a reset): the connection is over
        // either way.
        _ = served.as_mut() => return,
        () = stopped(&mut stop) => {}
    }
    served.as_mut().graceful_shutdown();
    let _ = tokio::time::timeout(GRACE, served).await;
}

/// Records one request and answers it from the script.
async fn answer(
    shared: Arc<Shared>,
    connection: Arc<Connection>,
    mut stop: watch::Receiver<bool>,
    request: Request<Incoming>,
) -> Result<Response<Full<Bytes>>, Closed> {
    let at = shared.clock.now();
    let wall = shared.clock.wall_now();
    let sequence = shared.next_sequence.fetch_add(1, Ordering::Relaxed);
    let reply = shared.next_reply(request.uri().path());

    let (head, body) = request.into_parts();
    let (body, body_complete) = read_body(body, &mut stop).await;
    shared.record(Recorded {
        method: head.method,
        uri: head.uri,
        version: head.version,
        headers: head.headers,
        body,
        body_complete,
        at,
        wall,
        peer: connection.peer,
        connection: connection.id,
        sequence,
    });
    if !body_complete {
        return Err(Closed);
    }

    if let Some(delay) = reply.delay {
        let clock = Arc::clone(&shared.clock);
        let elapsed = async move {
            match at.checked_add(delay) {
                Some(deadline) => clock.sleep_until(deadline).await,
                // Beyond the clock's range: never.
                None => future::pending().await,
            }
        };
        tokio::select! {
            () = elapsed => {}
            () = stopped(&mut stop) => return Err(Closed),
        }
    }

    match reply.action {
        Action::Reset => {
            connection.reset.store(true, Ordering::Release);
            Err(Closed)
        }
        Action::Respond => respond(reply, &*shared.clock).ok_or(Closed),
    }
}

/// Reads a request body to its end, or as far as it goes before the client breaks it off or
/// the server shuts down; the flag says whether it arrived in full.
async fn read_body(mut body: Incoming, stop: &mut watch::Receiver<bool>) -> (Bytes, bool) {
    let mut received = BytesMut::new();
    loop {
        let frame = tokio::select! {
            frame = body.frame() => frame,
            () = stopped(stop) => return (received.freeze(), false),
        };
        match frame {
            None => return (received.freeze(), true),
            Some(Ok(frame)) => {
                if let Some(data) = frame.data_ref() {
                    received.extend_from_slice(data);
                }
            }
            Some(Err(_)) => return (received.freeze(), false),
        }
    }
}

/// Builds the response a [`Reply`] describes; `None` if [`Reply::date_now`] finds the wall
/// clock outside the years an HTTP-date can carry.
fn respond(reply: Reply, clock: &dyn Clock) -> Option<Response<Full<Bytes>>> {
    let mut response = Response::new(Full::new(reply.body));
    *response.status_mut() = reply.status;
    let headers = response.headers_mut();
    for (name, value) in reply.headers {
        headers.append(name, value);
    }
    if reply.date_now {
        headers.insert(DATE, imf_fixdate(clock.wall_now())?);
    }
    Some(response)
}
