//! Answering a `CONNECT`: refused, or the tunnel opened ([`Opened`]) and handed to what serves
//! tunnels ([`ServeTunnel`], `tunnel.rs`): a watched host is intercepted (TLS terminated with a
//! leaf certificate, the requests inside served like any other); any other is tunnelled
//! blind. A tunnel that may go blind connects to its target before the `CONNECT` is answered.

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;

use holdoff::Receipt;
use http::header::PROXY_AUTHORIZATION;
use http::request::Parts;
use http::uri::{Authority, PathAndQuery, Scheme};
use http::{HeaderValue, Method, Request, Response, StatusCode, Uri};
use hyper::upgrade::OnUpgrade;
use rustls::ServerConfig;
use tokio::net::TcpStream;

use super::conn::{Conn, Tunnel};
use super::log::{Line, Who, log};
use super::reply::{Refusal, to_itself};
use super::shared::{Route, Shared};
use super::target::default_port;
use crate::body::Body;
use crate::config::{UrlParts, proxy_user};

/// What serves a tunnel once its `CONNECT` is answered (`tunnel::Tunnels`, which spawns it).
///
/// A type parameter of the request handler rather than an import: the HTTP inside a tunnel is
/// served by the same code that answered its `CONNECT` (the serving of HTTP, the handler, this
/// file), so the recursion is the protocol's. Passed down from the top (`server`), it keeps
/// the files below from importing what is above them, and costs nothing at run time.
pub(crate) trait ServeTunnel: 'static {
    /// Serves `opened` once hyper hands over the client's connection (`on_upgrade`).
    fn serve(shared: &Shared, opened: Opened, on_upgrade: OnUpgrade);
}

/// A tunnel that carries plain HTTP: its requests are addressed to the tunnel's
/// target, `http://host:port/path`, and served as plain requests to the proxy's port are.
pub(crate) struct PlainTunnel {
    /// Where the client asked to go, without the port when it is 80.
    authority: Authority,
    /// The `Proxy-Authorization` of the `CONNECT`, which names (and admitted) the client for
    /// every request inside.
    credentials: Option<HeaderValue>,
}

impl PlainTunnel {
    /// Whether the watch list watches the first request of the tunnel, whose head starts
    /// `first`: its path if the request line is there, else `/` (the h2c preface has none).
    pub(crate) fn watches(&self, shared: &Shared, first: &[u8]) -> bool {
        let path = first
            .split(|b| *b == b' ')
            .nth(1)
            .filter(|_| first.windows(2).any(|w| w == b"\r\n"))
            .and_then(|target| Uri::try_from(target).ok());
        // The h2c preface's `*`, or `OPTIONS *`, name no path.
        let path = path
            .as_ref()
            .and_then(Uri::path_and_query)
            .map(PathAndQuery::as_str)
            .filter(|path| path.starts_with('/'))
            .unwrap_or("/");
        let url = UrlParts {
            scheme: "http",
            host: self.authority.host(),
            port: self.authority.port_u16(),
            path_and_query: path,
        };
        shared.watch.watching_with(|| url).is_some()
    }

    /// Gives `request` the absolute URL of the tunnel's target, and the `CONNECT`'s
    /// credentials unless it has its own. A `CONNECT` inside is left as it is.
    pub(crate) fn address<B>(&self, request: &mut Request<B>) {
        if request.method() == Method::CONNECT {
            return;
        }
        let path = request
            .uri()
            .path_and_query()
            .cloned()
            .unwrap_or_else(|| PathAndQuery::from_static("/"));
        let mut parts = http::uri::Parts::default();
        parts.scheme = Some(Scheme::HTTP);
        parts.authority = Some(self.authority.clone());
        parts.path_and_query = Some(path);
        // `OPTIONS *` has no absolute form: the handler refuses it as it is.
        if let Ok(uri) = Uri::from_parts(parts) {
            *request.uri_mut() = uri;
        }
        if let Some(credentials) = &self.credentials
            && !request.headers().contains_key(PROXY_AUTHORIZATION)
        {
            request
                .headers_mut()
                .insert(PROXY_AUTHORIZATION, credentials.clone());
        }
    }
}

/// [`handle`], boxed: the request handler's future, which hyper moves into place for every
/// request, stays small when the rare paths it may take are behind a pointer.
pub(crate) fn boxed<T: ServeTunnel>(
    conn: Arc<Conn>,
    parts: Parts,
    received: Receipt,
) -> Pin<Box<dyn Future<Output = Response<Body>> + Send>> {
    Box::pin(async move { handle::<T>(&conn, parts, received).await })
}

/// Answers a `CONNECT`, and has `T` serve the tunnel that follows it.
async fn handle<T: ServeTunnel>(
    conn: &Arc<Conn>,
    mut parts: Parts,
    received: Receipt,
) -> Response<Body> {
    let shared = &*conn.shared;
    let user: Option<Arc<str>> = proxy_user(&parts.headers).map(Into::into);
    let who = match &user {
        Some(user) => Who::User(user),
        None => Who::Id(&conn.identity),
    };
    let asked = Asked {
        shared,
        who,
        received,
    };
    let leaves = match &shared.route {
        Route::Forward { leaves } => leaves.as_ref(),
        Route::Reverse(upstream) => {
            let refusal = Refusal::new(
                StatusCode::BAD_REQUEST,
                format!("this is a reverse proxy for {upstream}; it does not take CONNECT"),
            );
            return asked.refuse(&parts, refusal, "tunnel");
        }
    };
    let Some(authority) = parts
        .uri
        .authority()
        .cloned()
        .filter(|a| a.port_u16().is_some())
    else {
        let refusal = Refusal::new(
            StatusCode::BAD_REQUEST,
            "CONNECT needs a host and a port (CONNECT host:443)",
        );
        return asked.refuse(&parts, refusal, "tunnel");
    };
    // A tunnel to the proxy itself would carry the next `CONNECT` to it, and that one the
    // next; one to its control API would let a client under test change what it records.
    let port = authority
        .port_u16()
        .unwrap_or_else(|| default_port("https"));
    if let Some(own) = shared.own.named_by(authority.host(), port) {
        return asked.refuse(&parts, to_itself(authority.as_str(), own), "tunnel");
    }
    let Some(on_upgrade) = parts.extensions.remove::<OnUpgrade>() else {
        // hyper always provides it on an HTTP/1.1 connection that allows upgrades.
        let refusal = Refusal::new(
            StatusCode::BAD_REQUEST,
            "this connection cannot be tunnelled",
        );
        return asked.refuse(&parts, refusal, "tunnel");
    };

    let watched = leaves
        .filter(|_| conn.handled)
        .zip(shared.watch.intercepting(authority.host()));
    let config = match watched {
        Some((leaves, _pattern)) => match leaves.server_config(authority.host()) {
            Ok(config) => Some(config),
            Err(err) => {
                let refusal = Refusal::new(
                    StatusCode::BAD_GATEWAY,
                    format!("cannot issue a certificate for {}: {err}", authority.host()),
                );
                return asked.refuse(&parts, refusal, "intercepted");
            }
        },
        None => None,
    };
    // A tunnel that may go blind connects before it is answered, so that a client is told
    // when the target is unreachable (an intercepted one connects with its first request).
    let upstream = match &config {
        Some(_) => None,
        None => match connect_upstream(shared, &authority).await {
            Ok(upstream) => Some(upstream),
            Err(refusal) => return asked.refuse(&parts, refusal, "tunnel"),
        },
    };
    let mode = if config.is_some() {
        "intercepted"
    } else {
        "tunnel"
    };
    let opened = Opened {
        plain: PlainTunnel {
            authority: without_default_port(authority.clone(), default_port("http")),
            credentials: parts.headers.get(PROXY_AUTHORIZATION).cloned(),
        },
        tunnel: Tunnel {
            conn: Arc::clone(conn),
            authority: without_default_port(authority.clone(), default_port("https")),
            user: user.clone(),
            affinity: None,
        },
        target: authority,
        config,
        upstream,
    };
    // The CONNECT is no request of its own: the requests inside are counted as they come.
    asked.log(&parts, StatusCode::OK, mode, None);
    T::serve(shared, opened, on_upgrade);
    Response::new(Body::empty())
}

/// Why a tunnel's target is refused as a loop.
enum Loop {
    /// It is this proxy.
    Itself(SocketAddr),
    /// It is another holdoff proxy on this machine, this pid.
    Other(u32),
}

/// Connects to a tunnel's target, within the upstream timeout; or the answer that says why not.
/// A name is looked up first, and refused if it leads back to the proxy.
pub(crate) async fn connect_upstream(
    shared: &Shared,
    target: &Authority,
) -> Result<TcpStream, Refusal> {
    let target = target.as_str();
    let connect = async {
        let addrs: Vec<SocketAddr> = tokio::net::lookup_host(target).await?.collect();
        if let Some(own) = addrs.iter().find_map(|addr| shared.own.reached_by(*addr)) {
            return Ok(Err(Loop::Itself(own)));
        }
        // Another holdoff proxy on this machine: tunnels between the two would nest without
        // end, one `CONNECT` a level, from a single write.
        if let Some(addr) = addrs
            .iter()
            .find(|addr| addr.ip().to_canonical().is_loopback())
        {
            let port = addr.port();
            let other =
                tokio::task::spawn_blocking(move || super::process::other_instance_listening(port))
                    .await
                    .ok()
                    .flatten();
            if let Some(pid) = other {
                return Ok(Err(Loop::Other(pid)));
            }
        }
        TcpStream::connect(&addrs[..]).await.map(Ok)
    };
    match tokio::time::timeout(shared.upstream_timeout, connect).await {
        Ok(Ok(Ok(stream))) => Ok(stream),
        Ok(Ok(Err(Loop::Itself(own)))) => Err(to_itself(target, own)),
        Ok(Ok(Err(Loop::Other(pid)))) => Err(Refusal::new(
            StatusCode::LOOP_DETECTED,
            format!(
                "{target} is another holdoff proxy on this machine (pid {pid}): tunnels between \
                 two proxies chain without end; point the client at one of them"
            ),
        )),
        Ok(Err(err)) => Err(Refusal::new(
            StatusCode::BAD_GATEWAY,
            format!("could not connect to {target}: {err}"),
        )),
        Err(_) => Err(Refusal::new(
            StatusCode::GATEWAY_TIMEOUT,
            format!(
                "could not connect to {target} within {}s",
                shared.upstream_timeout.as_secs_f64()
            ),
        )),
    }
}

/// `host:443` → `host` (`default` 443), or `host:80` → `host` (80): the form `https://host/…`
/// (or `http://host/…`) URLs and `Host` headers use.
fn without_default_port(authority: Authority, default: u16) -> Authority {
    if authority.port_u16() != Some(default) {
        return authority;
    }
    Authority::from_maybe_shared(bytes::Bytes::copy_from_slice(authority.host().as_bytes()))
        .unwrap_or(authority)
}

/// A `CONNECT` being answered: what its log line needs besides the request.
struct Asked<'a> {
    shared: &'a Shared,
    who: Who<'a>,
    received: Receipt,
}

impl Asked<'_> {
    /// Answers with `refusal`, counted as an error, and logs it.
    fn refuse(&self, parts: &Parts, refusal: Refusal, mode: &'static str) -> Response<Body> {
        self.shared.stats.error();
        self.log(parts, refusal.status, mode, Some(&refusal.reason));
        refusal.into_response()
    }

    fn log(&self, parts: &Parts, status: StatusCode, mode: &'static str, error: Option<&str>) {
        let line = Line {
            method: &parts.method,
            url: &parts.uri,
            mode,
            client: self.who,
        };
        log(
            self.shared,
            &line,
            self.received.instant,
            Some(status),
            error,
        );
    }
}

/// A tunnel the client was told it has, before its first bytes say what it carries.
pub(crate) struct Opened {
    /// For TLS.
    pub(crate) tunnel: Tunnel,
    /// For plain HTTP.
    pub(crate) plain: PlainTunnel,
    /// Where the client asked to go, with its port: for a blind tunnel.
    pub(crate) target: Authority,
    /// The leaf certificate for the host, when it is watched: TLS is intercepted.
    pub(crate) config: Option<Arc<ServerConfig>>,
    /// The connection to the target, made before the `CONNECT` was answered, when TLS would
    /// be tunnelled blind.
    pub(crate) upstream: Option<TcpStream>,
}
