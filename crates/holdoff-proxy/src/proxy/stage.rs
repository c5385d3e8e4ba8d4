//! The pipeline every proxied request passes through: [`Stage`]s, what they decide
//! ([`Action`]) and what they know ([`RequestMeta`]).

use std::fmt;
use std::future::Future;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::pin::Pin;
use std::sync::Arc;
use std::time::Instant;

use holdoff::Receipt;
use http::{HeaderValue, Method, Request, Response};

use super::target::Target;
use crate::ascii::{ipv4_text, u32_text};
use crate::body::Body;

/// One step of the pipeline, e.g. a fault injector or the judge.
///
/// Stages are given to [`ProxyServer::bind`](crate::ProxyServer::bind) in a
/// [`Pipeline`](crate::Pipeline), which fixes their order. For each
/// request, `on_request` runs on each stage in turn until one answers; the request then goes
/// upstream (if nobody answered), and `on_response` runs on the same stages in reverse order
/// — the stage that answered first, then those before it, as layers unwinding. Proxy-made
/// answers (`502`, `504`) go through `on_response` too. Stages see plain HTTP, intercepted
/// HTTPS and reverse-proxy requests alike; blind tunnels carry no requests to see.
///
/// A stage sees the request as it will go upstream: absolute URI (`http://…`, `https://…`),
/// HTTP/1.1, hop-by-hop fields and `X-Holdoff-Client` removed, `Via` added, and `Host` set to
/// the upstream's in reverse mode. The body is still unread.
///
/// Both methods run on the request's task: they must not block. Wait with [`Action::Later`].
///
/// # Examples
///
/// ```
/// use holdoff_proxy::{Action, Body, RequestMeta, Stage};
/// use http::{Request, Response, StatusCode};
///
/// /// Answers every watched request with 429 itself.
/// struct AlwaysThrottle;
///
/// impl Stage for AlwaysThrottle {
///     fn on_request(&self, request: Request<Body>, meta: &RequestMeta) -> Action {
///         if meta.watched.is_none() {
///             return Action::Continue(request);
///         }
///         let mut response = Response::new(Body::from("slow down\n"));
///         *response.status_mut() = StatusCode::TOO_MANY_REQUESTS;
///         response.headers_mut().insert("retry-after", "2".parse().unwrap());
///         Action::Respond(response)
///     }
/// }
/// ```
pub trait Stage: Send + Sync + 'static {
    /// Looks at the request, and modifies it, answers it, or waits before deciding.
    ///
    /// The stage owns the request while it decides, so it can read the body (e.g. into a
    /// buffer, inside [`Action::Later`]) and hand back a request with that buffer as its body.
    fn on_request(&self, request: Request<Body>, meta: &RequestMeta) -> Action;

    /// Looks at, or modifies, the response before it goes back to the client: an upstream's,
    /// another stage's, or one the proxy made. The body is not read yet; a stage can replace
    /// it (e.g. to cut it short). What the stage's `on_request` left for it is a note on the
    /// response: [`Notes::take`].
    fn on_response(&self, response: &mut Response<Body>, meta: &RequestMeta) {
        let _ = (response, meta);
    }

    /// Something this stage must finish before the response goes to the client, after its
    /// `on_response`: e.g. writing the window a hint opens to state other proxies share, so
    /// that no retry can reach them before it is there. The proxy awaits it; `None` (the
    /// default) when there is nothing to wait for.
    fn finish_response(&self, response: &Response<Body>, meta: &RequestMeta) -> Option<Finish> {
        let _ = (response, meta);
        None
    }

    /// Upkeep, off the request path: drop what has expired by `now` (the judge's closed
    /// windows, idle rate-limit counters). The server calls it every
    /// [`Pipeline::upkeep_every`](crate::Pipeline::upkeep_every) while it serves; it must be
    /// quick, as `on_request` must.
    fn maintain(&self, now: Instant) {
        let _ = now;
    }
}

/// What stages leave on a request for its response: a typed note each, which the proxy carries
/// from the request to whichever response comes back — the upstream's, a later stage's answer,
/// or one the proxy made itself.
///
/// A stage leaves a note in [`Stage::on_request`] with [`Notes::leave`] and takes it back in
/// [`Stage::on_response`] with [`Notes::take`]; a private type per stage keeps notes apart.
/// Notes live exactly as long as the request: one that is reset, aborted, cut by shutdown or
/// dropped when its client goes away drops its notes with it, so a stage keeps no per-request
/// state of its own and has nothing to sweep.
///
/// # Examples
///
/// ```
/// use holdoff_proxy::{Action, Body, Notes, RequestMeta, Stage};
/// use http::{Request, Response};
///
/// /// Tells the client how long its request took to reach the proxy's last stage.
/// struct Timing;
///
/// #[derive(Clone)]
/// struct Seen(std::time::Instant);
///
/// impl Stage for Timing {
///     fn on_request(&self, mut request: Request<Body>, meta: &RequestMeta) -> Action {
///         Notes::leave(&mut request, Seen(meta.received.instant));
///         Action::Continue(request)
///     }
///
///     fn on_response(&self, response: &mut Response<Body>, _: &RequestMeta) {
///         if let Some(Seen(at)) = Notes::take::<Seen>(response) {
///             let _ = at; // e.g. a Server-Timing header
///         }
///     }
/// }
/// ```
#[derive(Clone, Debug, Default)]
pub struct Notes(http::Extensions);

impl Notes {
    /// Leaves `note` on `request` for its response, replacing a note of the same type.
    pub fn leave<T: Clone + Send + Sync + 'static>(request: &mut Request<Body>, note: T) {
        request
            .extensions_mut()
            .get_or_insert_default::<Notes>()
            .0
            .insert(note);
    }

    /// Takes the note of type `T` the request left, from its response.
    pub fn take<T: Clone + Send + Sync + 'static>(response: &mut Response<Body>) -> Option<T> {
        response
            .extensions_mut()
            .get_mut::<Notes>()?
            .0
            .remove::<T>()
    }

    /// The note of type `T` on `request`, a default one left first if there is none: for a
    /// stage that adds to its note as it decides.
    pub fn entry<T: Default + Clone + Send + Sync + 'static>(
        request: &mut Request<Body>,
    ) -> &mut T {
        request
            .extensions_mut()
            .get_or_insert_default::<Notes>()
            .0
            .get_or_insert_default::<T>()
    }

    /// Moves the note of type `T` from `request` to `response`: for a stage that answers
    /// itself after leaving a note, which would otherwise go with the request it drops.
    pub fn carry<T: Clone + Send + Sync + 'static>(
        request: &mut Request<Body>,
        response: &mut Response<Body>,
    ) {
        let Some(note) = request
            .extensions_mut()
            .get_mut::<Notes>()
            .and_then(|notes| notes.0.remove::<T>())
        else {
            return;
        };
        response
            .extensions_mut()
            .get_or_insert_default::<Notes>()
            .0
            .insert(note);
    }

    /// Moves every note `request` carries to `response`: a stage that answers a request
    /// itself hands its answer the notes the stages before it, and its own earlier steps, left
    /// (a rate limit's headers on an auth refusal), whichever step answered.
    pub fn hand_over<B>(request: &mut Request<B>, response: &mut Response<Body>) {
        if let Some(notes) = request.extensions_mut().remove::<Notes>() {
            notes.deliver(response);
        }
    }

    /// The note of type `T` the request left, on its response, left in place: for
    /// [`Stage::finish_response`], which sees the response but cannot change it.
    pub fn get<T: Clone + Send + Sync + 'static>(response: &Response<Body>) -> Option<&T> {
        response.extensions().get::<Notes>()?.0.get::<T>()
    }

    /// Moves the notes `request` carries into these: a stage may answer with a response of
    /// its own and drop the request, and the notes of the stages before it must not go with it.
    pub(crate) fn gather<B>(&mut self, request: &mut Request<B>) {
        if request.extensions().is_empty() {
            return;
        }
        if let Some(notes) = request.extensions_mut().remove::<Notes>() {
            self.0.extend(notes.0);
        }
    }

    /// For tests that drive stages by hand: what the proxy does between a request's
    /// `on_request`s and its response's `on_response`s, the notes moved from one to the other.
    #[cfg(test)]
    pub(crate) fn pass(request: &mut Request<Body>, response: &mut Response<Body>) {
        let mut notes = Notes::default();
        notes.gather(request);
        notes.deliver(response);
    }

    /// Puts these notes on `response`, for the stages' `on_response`, beside any the
    /// response already carries ([`Notes::carry`]).
    pub(crate) fn deliver<B>(self, response: &mut Response<B>) {
        if self.0.is_empty() {
            return;
        }
        match response.extensions_mut().get_mut::<Notes>() {
            Some(notes) => notes.0.extend(self.0),
            None => {
                response.extensions_mut().insert(self);
            }
        }
    }
}

/// What [`Stage::finish_response`] hands the proxy to await.
pub type Finish = Pin<Box<dyn Future<Output = ()> + Send + 'static>>;

/// What a [`Stage`] decided about a request.
#[non_exhaustive]
pub enum Action {
    /// Go on: to the next stage, or upstream after the last.
    Continue(Request<Body>),
    /// Answer the client with this, without going upstream.
    Respond(Response<Body>),
    /// Decide later: the pipeline awaits the future and then acts on what it yields (e.g. a
    /// latency fault sleeps, then continues). Only this variant allocates.
    Later(Pin<Box<dyn Future<Output = Action> + Send + 'static>>),
    /// Drop the request without an answer: an HTTP/1.1 connection is closed, an HTTP/2
    /// stream reset. For network faults.
    Abort,
}

impl Action {
    /// [`Action::Later`] from any future.
    pub fn later(future: impl Future<Output = Action> + Send + 'static) -> Action {
        Action::Later(Box::pin(future))
    }
}

impl fmt::Debug for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Action::Continue(request) => f
                .debug_tuple("Continue")
                .field(&format_args!("{} {}", request.method(), request.uri()))
                .finish(),
            Action::Respond(response) => {
                f.debug_tuple("Respond").field(&response.status()).finish()
            }
            Action::Later(_) => f.write_str("Later(..)"),
            Action::Abort => f.write_str("Abort"),
        }
    }
}

/// What the proxy knows about a request besides the request itself.
///
/// Read before any stage runs; stages cannot change it.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct RequestMeta {
    /// A number unique to this request within the process, counted from 0.
    pub id: u64,
    /// Who sent it.
    pub client: ClientId,
    /// The client's socket address.
    pub peer: SocketAddr,
    /// When its head had arrived, on both clocks.
    pub received: Receipt,
    /// The request method.
    pub method: Method,
    /// Its `User-Agent`, if it sent one.
    pub user_agent: Option<HeaderValue>,
    /// The absolute URL it is going to, read once: `http://host/path` (forward),
    /// `https://host/path` (intercepted), or the upstream's URL (reverse).
    pub target: Target,
    /// How it reached the proxy.
    pub mode: Mode,
    /// The watch-list pattern that watches this URL, as written; `None` when the URL is not
    /// watched.
    pub watched: Option<Arc<str>>,
}

impl RequestMeta {
    /// What the proxy would know of a watched forward-mode `GET` of `target` from
    /// `127.0.0.1`, received at `received`: for driving a stage by hand, in a test or a
    /// benchmark. Its fields are public, to be set to the case at hand.
    ///
    /// # Examples
    ///
    /// ```
    /// use holdoff::Receipt;
    /// use holdoff::clock::TokioClock;
    /// use holdoff_proxy::{ClientId, RequestMeta, Target};
    ///
    /// let mut meta = RequestMeta::new(
    ///     Target::new("https://api.test/v1/items".parse().unwrap()),
    ///     Receipt::now(&TokioClock),
    /// );
    /// meta.client = ClientId::Header("worker-3".into());
    /// assert_eq!(meta.target.host(), "api.test");
    /// ```
    pub fn new(target: Target, received: Receipt) -> RequestMeta {
        RequestMeta {
            id: 0,
            client: ClientId::Peer(IpAddr::V4(Ipv4Addr::LOCALHOST)),
            peer: SocketAddr::from((Ipv4Addr::LOCALHOST, 40_000)),
            received,
            method: Method::GET,
            user_agent: None,
            target,
            mode: Mode::Forward,
            watched: Some("*".into()),
        }
    }

    /// For unit tests: a forward-mode GET of `url` by the client `header:CLIENT`, watched,
    /// received at `at`.
    #[cfg(test)]
    pub(crate) fn for_test(id: u64, client: &str, url: &str, at: Receipt) -> RequestMeta {
        RequestMeta {
            id,
            client: ClientId::Header(client.into()),
            ..RequestMeta::new(Target::new(url.parse().expect("a test URL")), at)
        }
    }
}

/// How a request reached the proxy.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Mode {
    /// A plain-HTTP request to the forward proxy (absolute-form).
    Forward,
    /// A request inside an intercepted `CONNECT` tunnel, decrypted.
    Intercepted,
    /// A request to the reverse proxy.
    Reverse,
}

impl Mode {
    /// `forward`, `intercepted` or `reverse`, as logged.
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Forward => "forward",
            Mode::Intercepted => "intercepted",
            Mode::Reverse => "reverse",
        }
    }
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Who sent a request, in order of precedence: the names a client gives itself, then what
/// the proxy can tell about its connection.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ClientId {
    /// The user name of the proxy credentials (`http://alice@127.0.0.1:8000`), on the
    /// request or, inside a tunnel, on its `CONNECT`.
    ProxyUser(Arc<str>),
    /// The `X-Holdoff-Client` header (which is not forwarded).
    Header(Arc<str>),
    /// The process at the other end of a loopback connection (Linux: found under `/proc`
    /// once per connection), unless
    /// [`ClientIdMode::Peer`](crate::ClientIdMode::Peer) turns the lookup off.
    Process {
        /// Its process id.
        pid: u32,
        /// Its name, as `/proc/PID/comm` says (at most 15 bytes, e.g. `python3`).
        name: Arc<str>,
    },
    /// The client's IP address.
    Peer(IpAddr),
}

impl fmt::Display for ClientId {
    /// `user:alice`, `header:worker-3`, `process:python3[4242]` or `127.0.0.1`: distinct
    /// for distinct identities.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ClientId::ProxyUser(user) => write!(f, "user:{user}"),
            ClientId::Header(name) => write!(f, "header:{name}"),
            ClientId::Process { pid, name } => {
                // Piece by piece: the judge writes a key from this for every request.
                f.write_str("process:")?;
                f.write_str(name)?;
                f.write_str("[")?;
                f.write_str(u32_text(*pid, &mut [0; 10]))?;
                f.write_str("]")
            }
            ClientId::Peer(IpAddr::V4(ip)) => f.write_str(ipv4_text(*ip, &mut [0; 15])),
            ClientId::Peer(ip) => write!(f, "{ip}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_peer_displays_as_its_address() {
        for text in [
            "0.0.0.0",
            "127.0.0.1",
            "10.20.30.40",
            "99.100.9.255",
            "255.255.255.255",
        ] {
            let ip: IpAddr = text.parse().unwrap();
            assert_eq!(ClientId::Peer(ip).to_string(), text);
        }
        let v6: IpAddr = "::1".parse().unwrap();
        assert_eq!(ClientId::Peer(v6).to_string(), "::1");
        assert_eq!(ClientId::ProxyUser("ann".into()).to_string(), "user:ann");
        assert_eq!(ClientId::Header("w-3".into()).to_string(), "header:w-3");
        let process = ClientId::Process {
            pid: 4242,
            name: "python3".into(),
        };
        assert_eq!(process.to_string(), "process:python3[4242]");
    }
}
