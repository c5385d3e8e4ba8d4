//! One request: authenticate, route, identify, run the pipeline, forward, log.

use std::fmt;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

use holdoff::Receipt;
use holdoff::clock::Clock;
use http::header::{HOST, USER_AGENT};
use http::request::Parts;
use http::uri::{Authority, PathAndQuery, Scheme};
use http::{HeaderMap, Method, Request, Response, StatusCode, Uri, Version};
use hyper::body::Incoming;
use hyper::upgrade::OnUpgrade;
use hyper_util::rt::TokioIo;

use super::affinity::{Outbound, Sent};
use super::connect::{self, Tunnel};
use super::headers::{CLIENT_HEADER, add_via, strip_hop_by_hop, wants_upgrade};
use super::server::Conn;
use super::stage::{Action, ClientId, Mode, RequestMeta};
use super::{Route, Shared, reply, unread};
use crate::Body;
use crate::body::Unread;
use crate::config::{UrlParts, proxy_user};

/// Where a request came from: the proxy's own port, or inside an intercepted tunnel.
#[derive(Clone)]
pub(crate) enum Origin {
    Plain(Arc<Conn>),
    Tunnel(Arc<Tunnel>),
}

impl Origin {
    fn conn(&self) -> &Arc<Conn> {
        match self {
            Origin::Plain(conn) => conn,
            Origin::Tunnel(tunnel) => &tunnel.conn,
        }
    }
}

/// The service's error: hyper drops the connection (HTTP/1.1) or resets the stream (HTTP/2)
/// without an answer.
#[derive(Debug)]
pub(crate) struct Aborted;

impl fmt::Display for Aborted {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("the request was dropped without an answer")
    }
}

impl std::error::Error for Aborted {}

/// The service: every request on every client connection comes here.
pub(crate) async fn handle(
    origin: Origin,
    request: Request<Incoming>,
) -> Result<Response<Body>, Aborted> {
    let conn = origin.conn();
    let shared = &*conn.shared;
    let received = Receipt::now(&shared.clock);
    let (mut parts, body) = request.into_parts();

    let tunnel = match &origin {
        Origin::Tunnel(tunnel) => Some(&**tunnel),
        Origin::Plain(_) => {
            conn.calls.fetch_add(1, Ordering::Relaxed);
            if let Some(credentials) = &shared.auth {
                if !credentials.accepts(&parts.headers) {
                    let mut response = reply::proxy_auth_required();
                    let body = Some(body);
                    unread::settle(
                        &shared.clock,
                        body,
                        parts.version,
                        &parts.uri,
                        &mut response,
                    )
                    .await;
                    let line = Line::early(&parts, conn, None, plain_mode(shared));
                    return Ok(finish_early(shared, line, received, response, None));
                }
            }
            if parts.method == Method::CONNECT {
                return Ok(connect::boxed(conn, parts, received).await);
            }
            None
        }
    };

    let (mode, uri) = match target(shared, tunnel, &parts) {
        Ok(target) => target,
        Err((status, message)) => {
            let mut response = reply::text(status, message.clone());
            let body = Some(body);
            unread::settle(
                &shared.clock,
                body,
                parts.version,
                &parts.uri,
                &mut response,
            )
            .await;
            let user = proxy_user(&parts.headers);
            let line = Line::early(&parts, conn, user.as_deref(), plain_mode(shared));
            let error = Some(reason(&message));
            return Ok(finish_early(shared, line, received, response, error));
        }
    };
    let client = identify(&mut parts.headers, tunnel, &conn.identity);
    let user_agent = parts.headers.get(USER_AGENT).cloned();
    let watched = shared
        .watch
        .watching_with(|| url_parts(&uri))
        .map(|pattern| Arc::clone(pattern.shared()));

    let upgrade = parts.version == Version::HTTP_11 && wants_upgrade(&parts.headers);
    let client_upgrade = if upgrade {
        parts.extensions.remove::<OnUpgrade>()
    } else {
        None
    };
    strip_hop_by_hop(&mut parts.headers, upgrade);
    add_via(&mut parts.headers, parts.version);
    match (&shared.route, mode) {
        (Route::Reverse(upstream), _) => {
            parts.headers.insert(HOST, upstream.host_header().clone());
        }
        // RFC 9112 §3.2.2: the target's authority replaces whatever Host said.
        (_, Mode::Forward) => set_host(&mut parts.headers, &uri),
        _ => {}
    }
    // The client picks HTTP/1.1 or HTTP/2 per upstream connection by ALPN; a request asking
    // for HTTP/2 explicitly would be refused on an HTTP/1.1 one.
    let version = std::mem::replace(&mut parts.version, Version::HTTP_11);

    let meta = RequestMeta {
        id: shared.next_id.fetch_add(1, Ordering::Relaxed),
        client,
        peer: conn.peer,
        received,
        method: parts.method.clone(),
        user_agent,
        uri: uri.clone(),
        mode,
        watched,
    };
    parts.uri = uri;
    let (body, lent) = Body::lend(body);
    let request = Request::from_parts(parts, body);
    // Says so in the log if shutdown cuts the request before it has an answer.
    let unanswered = Unanswered {
        shared,
        meta: &meta,
    };

    let (decision, seen) = run_stages(shared, request, &meta).await;
    let (mut response, failure) = match decision {
        Decision::Forward(request) => {
            // The body went upstream: whatever becomes of it there, nobody waits for it here.
            drop(lent);
            forward(shared, &origin, request, client_upgrade).await
        }
        Decision::Answer(mut response) => {
            // The one place where an answer replaces the upstream's: what the stage left of
            // the request body is read first.
            let body = lent.and_then(Unread::take);
            unread::settle(&shared.clock, body, version, &meta.uri, &mut response).await;
            (response, None)
        }
        Decision::Abort => {
            std::mem::forget(unanswered);
            shared.stats.aborted();
            log(
                shared,
                &Line::from_meta(&meta),
                received.instant,
                None,
                Some("a stage dropped the request without an answer"),
            );
            return Err(Aborted);
        }
    };
    for stage in shared.stages[..seen].iter().rev() {
        stage.on_response(&mut response, &meta);
        if let Some(finish) = stage.finish_response(&response, &meta) {
            finish.await;
        }
    }
    std::mem::forget(unanswered);
    shared.stats.response(response.status());
    log(
        shared,
        &Line::from_meta(&meta),
        received.instant,
        Some(response.status()),
        failure.as_deref(),
    );
    Ok(response)
}

/// A request on its way to an answer: dropped before it has one (the future is cancelled),
/// it logs why if shutdown cut it. Forgotten once the answer is there.
struct Unanswered<'a> {
    shared: &'a Shared,
    meta: &'a RequestMeta,
}

impl Drop for Unanswered<'_> {
    fn drop(&mut self) {
        if self.shared.cut.is_cancelled() {
            log(
                self.shared,
                &Line::from_meta(self.meta),
                self.meta.received.instant,
                None,
                Some("cut: the proxy shut down and the grace period ended before the response"),
            );
        }
    }
}

/// The mode of a request on the proxy's own port.
fn plain_mode(shared: &Shared) -> &'static str {
    match shared.route {
        Route::Forward { .. } => Mode::Forward.as_str(),
        Route::Reverse(_) => Mode::Reverse.as_str(),
    }
}

/// Where the request goes: its mode and absolute URL; or why it cannot go anywhere.
fn target(
    shared: &Shared,
    tunnel: Option<&Tunnel>,
    parts: &Parts,
) -> Result<(Mode, Uri), (StatusCode, String)> {
    let path = || {
        parts
            .uri
            .path_and_query()
            .cloned()
            .unwrap_or_else(|| PathAndQuery::from_static("/"))
    };
    if let Some(tunnel) = tunnel {
        // The tunnel's authority, not the request's Host: that is where the client connected.
        let uri = absolute(Scheme::HTTPS, tunnel.authority.clone(), path())?;
        return Ok((Mode::Intercepted, uri));
    }
    match &shared.route {
        Route::Reverse(upstream) => {
            let uri = absolute(
                upstream.scheme().clone(),
                upstream.authority().clone(),
                path(),
            )?;
            Ok((Mode::Reverse, uri))
        }
        Route::Forward { .. } => {
            let uri = &parts.uri;
            let (Some(scheme), Some(authority)) = (uri.scheme(), uri.authority()) else {
                return Err((
                    StatusCode::BAD_REQUEST,
                    format!(
                        "holdoff: this is a forward proxy: send absolute-form requests \
                         (GET http://host/path) or CONNECT, not `{} {}`\n",
                        parts.method,
                        uri.path()
                    ),
                ));
            };
            if *scheme != Scheme::HTTP && *scheme != Scheme::HTTPS {
                return Err((
                    StatusCode::BAD_REQUEST,
                    format!("holdoff: cannot forward {scheme} URLs, only http and https\n"),
                ));
            }
            if targets_self(shared.local_addr, scheme, authority) {
                return Err((
                    StatusCode::LOOP_DETECTED,
                    "holdoff: the request is addressed to this proxy itself\n".to_owned(),
                ));
            }
            Ok((Mode::Forward, uri.clone()))
        }
    }
}

fn absolute(
    scheme: Scheme,
    authority: Authority,
    path: PathAndQuery,
) -> Result<Uri, (StatusCode, String)> {
    let mut parts = http::uri::Parts::default();
    parts.scheme = Some(scheme);
    parts.authority = Some(authority);
    parts.path_and_query = Some(path);
    Uri::from_parts(parts).map_err(|err| {
        (
            StatusCode::BAD_REQUEST,
            format!("holdoff: cannot build the request URL: {err}\n"),
        )
    })
}

/// Whether `scheme://authority` is the proxy's own listening address.
fn targets_self(local: SocketAddr, scheme: &Scheme, authority: &Authority) -> bool {
    let default = if *scheme == Scheme::HTTPS { 443 } else { 80 };
    if authority.port_u16().unwrap_or(default) != local.port() {
        return false;
    }
    let host = authority.host();
    if host.eq_ignore_ascii_case("localhost") {
        return true;
    }
    let literal = host.trim_start_matches('[').trim_end_matches(']');
    match literal.parse::<IpAddr>() {
        Ok(ip) => ip == local.ip() || (local.ip().is_unspecified() && ip.is_loopback()),
        Err(_) => false,
    }
}

/// Sets `Host` to the authority of `uri`, unless it says that already (it usually does, and
/// then nothing is copied).
fn set_host(headers: &mut HeaderMap, uri: &Uri) {
    let Some(authority) = uri.authority() else {
        return;
    };
    let same = headers.get(HOST).is_some_and(|host| {
        host.as_bytes()
            .eq_ignore_ascii_case(authority.as_str().as_bytes())
    });
    if !same {
        if let Ok(host) = http::HeaderValue::from_str(authority.as_str()) {
            headers.insert(HOST, host);
        }
    }
}

/// The URL as the watch list sees it.
fn url_parts(uri: &Uri) -> UrlParts<'_> {
    let scheme = uri.scheme_str().unwrap_or("http");
    let default = if scheme.eq_ignore_ascii_case("https") {
        443
    } else {
        80
    };
    UrlParts {
        scheme,
        host: uri.host().unwrap_or(""),
        port: uri.port_u16().filter(|port| *port != default),
        path_and_query: uri.path_and_query().map_or("/", PathAndQuery::as_str),
    }
}

/// Who sent the request: proxy credentials (on the request, or on the tunnel's `CONNECT`),
/// then `X-Holdoff-Client`, then the connection's own identity (its process, or its peer
/// address), found once for the connection. `X-Holdoff-Client` is removed either way.
fn identify(headers: &mut HeaderMap, tunnel: Option<&Tunnel>, connection: &ClientId) -> ClientId {
    let named = headers.remove(CLIENT_HEADER);
    if let Some(user) = proxy_user(headers) {
        return ClientId::ProxyUser(user.into());
    }
    if let Some(user) = tunnel.and_then(|tunnel| tunnel.user.as_ref()) {
        return ClientId::ProxyUser(Arc::clone(user));
    }
    if let Some(name) = named
        .as_ref()
        .and_then(|value| value.to_str().ok())
        .map(str::trim)
        .filter(|name| !name.is_empty())
    {
        return ClientId::Header(name.into());
    }
    connection.clone()
}

enum Decision {
    Forward(Request<Body>),
    Answer(Response<Body>),
    Abort,
}

/// Runs the stages in order until one answers; returns what to do and how many stages saw
/// the request (those get `on_response`).
async fn run_stages(
    shared: &Shared,
    mut request: Request<Body>,
    meta: &RequestMeta,
) -> (Decision, usize) {
    for (index, stage) in shared.stages.iter().enumerate() {
        let mut action = stage.on_request(request, meta);
        request = loop {
            match action {
                Action::Continue(request) => break request,
                Action::Respond(response) => return (Decision::Answer(response), index + 1),
                Action::Later(future) => action = future.await,
                Action::Abort => return (Decision::Abort, index + 1),
            }
        };
    }
    (Decision::Forward(request), shared.stages.len())
}

/// Sends the request upstream and prepares the response for the client; an upstream failure
/// becomes the proxy's own answer, with its reason for the log.
async fn forward(
    shared: &Shared,
    origin: &Origin,
    request: Request<Body>,
    client_upgrade: Option<OnUpgrade>,
) -> (Response<Body>, Option<String>) {
    let upgrade = client_upgrade.is_some();
    let url = request.uri().clone();
    // An HTTP/1.1 client connection or tunnel, sending one request at a time: from its second
    // request on, its own upstream connection (see `affinity`). An h2c connection's requests
    // run concurrently, and nothing polls an affine connection for it: the shared pool.
    let affine = match origin {
        _ if upgrade => None,
        Origin::Plain(conn) if conn.h2 => None,
        Origin::Plain(conn) => Some(&conn.affinity),
        Origin::Tunnel(tunnel) => tunnel.affinity.as_ref(),
    };
    let sent = match affine {
        Some(affinity) => {
            let out = Outbound {
                count: &shared.affine_count,
                timeout: shared.upstream_timeout,
                clock: &shared.clock,
                tls: &shared.affine_tls,
            };
            match affinity.send(request, &out).await {
                Sent::Done(result) => result,
                Sent::Declined(request) => shared.upstreams.send(request, upgrade).await,
            }
        }
        None => shared.upstreams.send(request, upgrade).await,
    };
    match sent {
        Ok(mut response) => {
            let switching = response.status() == StatusCode::SWITCHING_PROTOCOLS;
            if let (true, Some(client_upgrade)) = (switching, client_upgrade) {
                let upstream_upgrade = hyper::upgrade::on(&mut response);
                shared.tasks.spawn(relay_upgrade(
                    shared.cut.clone(),
                    client_upgrade,
                    upstream_upgrade,
                ));
            }
            strip_hop_by_hop(response.headers_mut(), switching && upgrade);
            let version = response.version();
            add_via(response.headers_mut(), version);
            *response.version_mut() = Version::HTTP_11;
            (response.map(|body| Body::upstream(body, url)), None)
        }
        Err(failure) => {
            shared.stats.error();
            let message = failure.message();
            let error = reason(&message).to_owned();
            (reply::text(failure.status(), message), Some(error))
        }
    }
}

/// Relays the bytes of an upgraded connection (WebSocket) both ways until either side ends.
async fn relay_upgrade(
    cut: tokio_util::sync::CancellationToken,
    client: OnUpgrade,
    upstream: OnUpgrade,
) {
    let (client, upstream) = match tokio::try_join!(client, upstream) {
        Ok(both) => both,
        Err(err) => {
            tracing::debug!(error = %err, "an upgrade did not complete");
            return;
        }
    };
    let mut client = TokioIo::new(client);
    let mut upstream = TokioIo::new(upstream);
    tokio::select! {
        result = tokio::io::copy_bidirectional(&mut client, &mut upstream) => {
            if let Err(err) = result {
                tracing::debug!(error = %err, "an upgraded connection ended");
            }
        }
        () = cut.cancelled() => {}
    }
}

/// What the request log line says about a request.
pub(crate) struct Line<'a> {
    pub(crate) method: &'a Method,
    pub(crate) url: &'a dyn fmt::Display,
    pub(crate) mode: &'static str,
    pub(crate) client: Who<'a>,
}

/// The client as logged.
pub(crate) enum Who<'a> {
    Id(&'a ClientId),
    User(&'a str),
}

impl fmt::Display for Who<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Who::Id(id) => id.fmt(f),
            Who::User(user) => write!(f, "user:{user}"),
        }
    }
}

impl<'a> Line<'a> {
    fn from_meta(meta: &'a RequestMeta) -> Line<'a> {
        Line {
            method: &meta.method,
            url: &meta.uri,
            mode: meta.mode.as_str(),
            client: Who::Id(&meta.client),
        }
    }

    /// For a request answered before it was routed: as received, the client by proxy user
    /// or the connection's identity.
    fn early(
        parts: &'a Parts,
        conn: &'a Conn,
        user: Option<&'a str>,
        mode: &'static str,
    ) -> Line<'a> {
        Line {
            method: &parts.method,
            url: &parts.uri,
            mode,
            client: user.map_or(Who::Id(&conn.identity), Who::User),
        }
    }
}

/// Answers a request the proxy refused before routing it, and logs it. A refused `CONNECT`
/// (`407`) is not counted as a request: tunnels are counted apart.
fn finish_early(
    shared: &Shared,
    line: Line<'_>,
    received: Receipt,
    response: Response<Body>,
    error: Option<&str>,
) -> Response<Body> {
    if error.is_some() {
        shared.stats.error();
    }
    if *line.method != Method::CONNECT {
        shared.stats.response(response.status());
    }
    log(
        shared,
        &line,
        received.instant,
        Some(response.status()),
        error,
    );
    response
}

/// The one-line reason of a message made for a client, for the log: without the `holdoff: `
/// prefix and the newline.
pub(crate) fn reason(message: &str) -> &str {
    message.trim_end().trim_start_matches("holdoff: ")
}

/// The request log line: one per request, at `info`, or `warn` with the reason when the proxy
/// failed it.
pub(crate) fn log(
    shared: &Shared,
    line: &Line<'_>,
    received: Instant,
    status: Option<StatusCode>,
    error: Option<&str>,
) {
    let enabled = match error {
        None => tracing::enabled!(target: "holdoff::request", tracing::Level::INFO),
        Some(_) => tracing::enabled!(target: "holdoff::request", tracing::Level::WARN),
    };
    if !enabled {
        // Not even the clock is read.
        return;
    }
    let elapsed = shared.clock.now().saturating_duration_since(received);
    // Milliseconds with microsecond precision: 1.234.
    let duration_ms = elapsed.as_micros() as f64 / 1000.0;
    let status = status.map_or(0, |status| status.as_u16());
    match error {
        None => tracing::info!(
            target: "holdoff::request",
            method = %line.method,
            url = %line.url,
            status,
            duration_ms,
            mode = %line.mode,
            client = %line.client,
        ),
        Some(error) => tracing::warn!(
            target: "holdoff::request",
            method = %line.method,
            url = %line.url,
            status,
            duration_ms,
            mode = %line.mode,
            client = %line.client,
            error = %error,
        ),
    }
}
