//! One request: authenticate (with a limit on guessing), route, identify, run the pipeline,
//! forward, log.

use std::fmt;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use holdoff::Receipt;
use http::header::{HOST, USER_AGENT};
use http::request::Parts;
use http::uri::{Authority, PathAndQuery, Scheme};
use http::{HeaderMap, Method, Request, Response, StatusCode, Uri, Version};
use hyper::body::Incoming;
use hyper::upgrade::OnUpgrade;
use hyper_util::rt::TokioIo;

use super::affinity::{Outbound, Sent};
use super::auth::Admission;
use super::connect::{self, Tunnel};
use super::headers::{CLIENT_HEADER, add_via, has_several_hosts, strip_hop_by_hop, wants_upgrade};
use super::log::{Line, log};
use super::reply::{self, Refusal};
use super::server::Conn;
use super::stage::{Action, ClientId, Mode, Notes, RequestMeta};
use super::upstream::{Failure, stalled};
use super::{Route, Shared, Target, default_port, unread};
use crate::Body;
use crate::body::{Progress, Unread};
use crate::config::{UrlParts, proxy_user};

/// Where a request came from: the proxy's own port, or inside an intercepted tunnel.
#[derive(Clone)]
pub(crate) enum Inbound {
    Plain(Arc<Conn>),
    Tunnel(Arc<Tunnel>),
}

impl Inbound {
    fn conn(&self) -> &Arc<Conn> {
        match self {
            Inbound::Plain(conn) => conn,
            Inbound::Tunnel(tunnel) => &tunnel.conn,
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
    inbound: Inbound,
    request: Request<Incoming>,
) -> Result<Response<Body>, Aborted> {
    let conn = inbound.conn();
    let shared = &*conn.shared;
    let received = Receipt::now(&shared.clock);
    if request.method() != http::Method::CONNECT {
        shared.stats.received();
    }
    let (mut parts, body) = request.into_parts();
    // Credentials in the URL go nowhere: not upstream, nor to the log, the stages, the event
    // log or the reports, which all see this URL.
    strip_userinfo(&mut parts.uri);

    let tunnel = match &inbound {
        Inbound::Tunnel(tunnel) => Some(&**tunnel),
        Inbound::Plain(_) => {
            conn.calls.fetch_add(1, Ordering::Relaxed);
            None
        }
    };
    if let Some(answer) = refuse(shared, conn, tunnel, &parts, received.instant) {
        return Ok(answer_early(shared, conn, &parts, body, received, answer).await);
    }
    if tunnel.is_none() && parts.method == Method::CONNECT {
        return Ok(connect::boxed(conn, parts, received).await);
    }

    let (mode, uri) = match target(shared, tunnel, &parts) {
        Ok(target) => target,
        Err(refusal) => {
            let answer = EarlyAnswer::named(refusal);
            return Ok(answer_early(shared, conn, &parts, body, received, answer).await);
        }
    };
    let client = identify(&mut parts.headers, tunnel, &conn.identity);
    let user_agent = parts.headers.get(USER_AGENT).cloned();
    let target = Target::new(uri);
    let watched = shared
        .watch
        .watching_with(|| url_parts(&target))
        .map(|pattern| Arc::clone(pattern.shared()));

    let upgrade = parts.version == Version::HTTP_11 && wants_upgrade(&parts.headers);
    let client_upgrade = if upgrade {
        parts.extensions.remove::<OnUpgrade>()
    } else {
        None
    };
    strip_hop_by_hop(&mut parts.headers, upgrade);
    shared.via.add(&mut parts.headers, parts.version);
    match (&shared.route, mode) {
        (Route::Reverse(upstream), _) => {
            parts.headers.insert(HOST, upstream.host_header().clone());
        }
        // RFC 9112 §3.2.2: the target's authority replaces whatever Host said.
        (_, Mode::Forward) => set_host(&mut parts.headers, target.uri()),
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
        target,
        mode,
        watched,
    };
    parts.uri = meta.target.uri().clone();
    let (body, lent) = Body::lend(body);
    let request = Request::from_parts(parts, body);
    // Says so in the log if shutdown cuts the request before it has an answer.
    let unanswered = Unanswered {
        shared,
        meta: &meta,
    };

    let (decision, seen, notes) = match conn.handled {
        true => run_stages(shared, request, &meta).await,
        // A connection the filter turned down: untouched, seen by no stage.
        false => (Decision::Forward(request), 0, Notes::default()),
    };
    let (mut response, failure) = match decision {
        Decision::Forward(request) => {
            // The body went upstream: whatever becomes of it there, nobody waits for it here.
            drop(lent);
            forward(shared, &inbound, request, client_upgrade).await
        }
        Decision::Answer(mut response) => {
            // The one place where an answer replaces the upstream's: what the stage left of
            // the request body is read first.
            let body = lent.and_then(Unread::take);
            unread::settle(
                &shared.clock,
                body,
                version,
                meta.target.uri(),
                &mut response,
            )
            .await;
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
    notes.deliver(&mut response);
    for stage in shared.pipeline.stages()[..seen].iter().rev() {
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

/// An answer the proxy makes before routing a request, with what its log line says.
struct EarlyAnswer {
    response: Response<Body>,
    /// Why, when the request failed (the log line is a warning, and it counts as an error);
    /// `None` for a credentials challenge.
    error: Option<String>,
    /// Whether the log names the client by its proxy user: only once its credentials are
    /// known to be right.
    named: bool,
}

impl EarlyAnswer {
    /// `refusal`, before the client's credentials were checked.
    fn anonymous(refusal: Refusal) -> EarlyAnswer {
        EarlyAnswer {
            error: Some(refusal.reason.clone()),
            response: refusal.into_response(),
            named: false,
        }
    }

    /// `refusal`, after the client's credentials were checked.
    fn named(refusal: Refusal) -> EarlyAnswer {
        EarlyAnswer {
            named: true,
            ..EarlyAnswer::anonymous(refusal)
        }
    }
}

/// Whether, and how, the proxy answers a request itself before routing it: it came back
/// through this proxy (its own `Via`), its credentials are not right (on the proxy's own
/// port), or it is invalid (two `Host`s).
fn refuse(
    shared: &Shared,
    conn: &Conn,
    tunnel: Option<&Tunnel>,
    parts: &Parts,
    now: Instant,
) -> Option<EarlyAnswer> {
    if shared.via.seen_in(&parts.headers) {
        return Some(EarlyAnswer::anonymous(Refusal::new(
            StatusCode::LOOP_DETECTED,
            "the request came back through this proxy (its Via names this proxy): it would \
             loop; it is not forwarded again",
        )));
    }
    if let (None, Some(auth)) = (tunnel, &shared.auth) {
        let response = match auth.admit(&parts.headers, conn.peer.ip(), now) {
            Admission::Accepted => None,
            Admission::Refused => Some(reply::proxy_auth_required()),
            Admission::Locked { retry_after } => {
                Some(reply::auth_locked(conn.peer.ip(), retry_after))
            }
        };
        if let Some(response) = response {
            return Some(EarlyAnswer {
                response,
                error: None,
                named: false,
            });
        }
    }
    if has_several_hosts(&parts.headers) {
        return Some(EarlyAnswer::named(Refusal::new(
            StatusCode::BAD_REQUEST,
            "the request has more than one Host header, which makes it invalid (RFC 9112 §3.2)",
        )));
    }
    None
}

/// Answers a request the proxy refused before routing it, once what the client sent of its
/// body is read (see `unread`), and logs it.
async fn answer_early(
    shared: &Shared,
    conn: &Conn,
    parts: &Parts,
    body: Incoming,
    received: Receipt,
    answer: EarlyAnswer,
) -> Response<Body> {
    let EarlyAnswer {
        mut response,
        error,
        named,
    } = answer;
    let body = Some(body);
    unread::settle(
        &shared.clock,
        body,
        parts.version,
        &parts.uri,
        &mut response,
    )
    .await;
    let user = named.then(|| proxy_user(&parts.headers)).flatten();
    let line = Line::early(parts, &conn.identity, user.as_deref(), plain_mode(shared));
    finish_early(shared, line, received, response, error.as_deref())
}

/// The mode of a request on the proxy's own port.
fn plain_mode(shared: &Shared) -> &'static str {
    match shared.route {
        Route::Forward { .. } => Mode::Forward.as_str(),
        Route::Reverse(_) => Mode::Reverse.as_str(),
    }
}

/// Where the request goes: its mode and absolute URL; or why it cannot go anywhere.
fn target(shared: &Shared, tunnel: Option<&Tunnel>, parts: &Parts) -> Result<(Mode, Uri), Refusal> {
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
                return Err(Refusal::new(
                    StatusCode::BAD_REQUEST,
                    format!(
                        "this is a forward proxy: send absolute-form requests \
                         (GET http://host/path) or CONNECT, not `{} {}`",
                        parts.method,
                        uri.path()
                    ),
                ));
            };
            if *scheme != Scheme::HTTP && *scheme != Scheme::HTTPS {
                return Err(Refusal::new(
                    StatusCode::BAD_REQUEST,
                    format!("cannot forward {scheme} URLs, only http and https"),
                ));
            }
            let port = authority
                .port_u16()
                .unwrap_or_else(|| default_port(scheme.as_str()));
            if let Some(own) = shared.own.named_by(authority.host(), port) {
                return Err(to_itself(&uri.to_string(), own));
            }
            Ok((Mode::Forward, uri.clone()))
        }
    }
}

fn absolute(scheme: Scheme, authority: Authority, path: PathAndQuery) -> Result<Uri, Refusal> {
    let mut parts = http::uri::Parts::default();
    parts.scheme = Some(scheme);
    parts.authority = Some(authority);
    parts.path_and_query = Some(path);
    Uri::from_parts(parts).map_err(|err| {
        Refusal::new(
            StatusCode::BAD_REQUEST,
            format!("cannot build the request URL: {err}"),
        )
    })
}

/// The answer to a request or tunnel to `target`, which is this proxy's own address `own`.
pub(crate) fn to_itself(target: &str, own: SocketAddr) -> Refusal {
    Refusal::new(
        StatusCode::LOOP_DETECTED,
        format!(
            "{target} is this proxy's own address ({own}): it would loop, or reach the proxy's \
             control API; it is not forwarded"
        ),
    )
}

/// Removes the user information from `uri` (`http://user:password@host/`): it is no part of
/// where the request goes (RFC 9110 §4.2.4), and a password must not reach a log.
fn strip_userinfo(uri: &mut Uri) {
    let Some(host) = uri
        .authority()
        .and_then(|authority| authority.as_str().rsplit_once('@'))
        .map(|(_, host)| host.to_owned())
    else {
        return;
    };
    let mut parts = uri.clone().into_parts();
    parts.authority = Authority::try_from(host).ok();
    match Uri::from_parts(parts) {
        Ok(stripped) => *uri = stripped,
        // `user@` and nothing else: no host left to go to.
        Err(_) => *uri = Uri::from_static("/"),
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
    if !same && let Ok(host) = http::HeaderValue::from_str(authority.as_str()) {
        headers.insert(HOST, host);
    }
}

/// The URL as the watch list sees it.
fn url_parts(target: &Target) -> UrlParts<'_> {
    UrlParts {
        scheme: target.scheme(),
        host: target.host(),
        port: target.non_default_port(),
        path_and_query: target.path_and_query(),
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

/// Runs the stages in order until one answers; returns what to do, how many stages saw the
/// request (those get `on_response`), and the notes they left for the response.
///
/// The notes come off the request after each stage, so that they survive a stage that
/// answers and drops the request; they are owned by the request's future, so they go with
/// it whatever becomes of it.
async fn run_stages(
    shared: &Shared,
    mut request: Request<Body>,
    meta: &RequestMeta,
) -> (Decision, usize, Notes) {
    let mut notes = Notes::default();
    for (index, stage) in shared.pipeline.stages().iter().enumerate() {
        let mut action = stage.on_request(request, meta);
        request = loop {
            match action {
                Action::Continue(mut request) => {
                    notes.gather(&mut request);
                    break request;
                }
                Action::Respond(response) => {
                    return (Decision::Answer(response), index + 1, notes);
                }
                Action::Later(future) => action = future.await,
                Action::Abort => return (Decision::Abort, index + 1, notes),
            }
        };
    }
    (
        Decision::Forward(request),
        shared.pipeline.stages().len(),
        notes,
    )
}

/// Sends the request upstream and prepares the response for the client; an upstream failure
/// becomes the proxy's own answer, with its reason for the log.
async fn forward(
    shared: &Shared,
    inbound: &Inbound,
    request: Request<Body>,
    client_upgrade: Option<OnUpgrade>,
) -> (Response<Body>, Option<String>) {
    let upgrade = client_upgrade.is_some();
    let url = request.uri().clone();
    // An HTTP/1.1 client connection or tunnel, sending one request at a time: from its second
    // request on, its own upstream connection (see `affinity`). An h2c connection's requests
    // run concurrently, and nothing polls an affine connection for it: the shared pool.
    let affine = match inbound {
        _ if upgrade => None,
        Inbound::Plain(conn) if conn.h2 => None,
        Inbound::Plain(conn) => Some(&conn.affinity),
        Inbound::Tunnel(tunnel) => tunnel.affinity.as_ref(),
    };
    // A body is timed as it goes: the upstream timeout counts from its last frame, so an
    // upload that streams for longer is not cut while it moves (see `upstream::stalled`).
    let (request, progress) = {
        let (parts, body) = request.into_parts();
        let (body, progress) = body.outgoing();
        (Request::from_parts(parts, body), progress)
    };
    let timeout = shared.upstream_timeout;
    let sent = match affine {
        Some(affinity) => {
            let out = Outbound {
                count: &shared.affine_count,
                // With a body, `stalled` times the request, not this.
                timeout: if progress.is_some() { UNTIMED } else { timeout },
                clock: &*shared.clock,
                tls: &shared.affine_tls,
            };
            let sent = affinity.send(request, &out);
            let sent = match &progress {
                None => sent.await,
                Some(progress) => tokio::select! {
                    sent = sent => sent,
                    stall = stalled(progress, timeout) => {
                        Sent::Done(Err(stall.failure(upstream_of(&url), timeout)))
                    }
                },
            };
            match sent {
                Sent::Done(result) => result,
                Sent::Declined(request) => {
                    shared
                        .upstreams
                        .send(request, upgrade, progress.clone())
                        .await
                }
            }
        }
        None => {
            shared
                .upstreams
                .send(request, upgrade, progress.clone())
                .await
        }
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
            // The upstream timeout again: how long the proxy waits on the upstream for
            // anything, the next bytes of its body included. (The idle timeout is the
            // client's: how long its connection may sit with nothing in flight.)
            let body = |body| Body::upstream(body, url, timeout);
            (response.map(body), None)
        }
        Err(failure) => {
            // A request body the client broke (a malformed chunk) is its fault, whatever the
            // upstream made of the half it got.
            let failure = match progress.as_deref().and_then(Progress::broke) {
                Some(reason) => Failure::ClientBody {
                    reason: reason.to_owned(),
                },
                None => failure,
            };
            shared.stats.error();
            let refusal = failure.refusal();
            let error = refusal.reason.clone();
            (refusal.into_response(), Some(error))
        }
    }
}

/// What an affine connection is given as its timeout when `stalled` times the request: far
/// enough never to fire first.
const UNTIMED: Duration = Duration::from_secs(365 * 24 * 60 * 60);

/// The upstream of `url`, as failures name it.
fn upstream_of(url: &Uri) -> String {
    url.authority()
        .map_or_else(String::new, ToString::to_string)
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

#[cfg(test)]
mod tests {
    use super::*;

    mod strip_userinfo {
        use super::*;

        fn stripped(uri: &str) -> String {
            let mut uri: Uri = uri.parse().unwrap();
            strip_userinfo(&mut uri);
            uri.to_string()
        }

        #[test]
        fn removes_the_user_and_password_and_keeps_the_rest() {
            assert_eq!(
                stripped("http://user:pw@127.0.0.1:8080/a?b=c"),
                "http://127.0.0.1:8080/a?b=c"
            );
            assert_eq!(
                stripped("https://a%40b:p@c@example.com/"),
                "https://example.com/"
            );
            assert_eq!(stripped("http://user@[::1]/"), "http://[::1]/");
        }

        #[test]
        fn leaves_a_url_without_any_alone() {
            assert_eq!(stripped("http://example.com/@x"), "http://example.com/@x");
            assert_eq!(stripped("/origin/form"), "/origin/form");
        }
    }
}
