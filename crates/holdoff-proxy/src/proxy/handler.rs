//! One request: refused early or routed, identified, passed through the pipeline's stages,
//! forwarded upstream (or answered by a stage), logged. A `CONNECT` is answered by `connect`,
//! and its tunnel served by what the caller names.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use holdoff::Receipt;
use http::header::{HOST, USER_AGENT};
use http::request::Parts;
use http::{Method, Request, Response, StatusCode, Uri, Version};
use hyper::body::Incoming;
use hyper::upgrade::OnUpgrade;
use hyper_util::rt::TokioIo;
use tokio_util::either::Either;

use super::affinity::{Outbound, Sent};
use super::conn::Inbound;
use super::connect::{self, ServeTunnel};
use super::early::{EarlyAnswer, answer_early, refuse};
use super::headers::{add_via, strip_hop_by_hop, wants_upgrade};
use super::log::{Line, log};
use super::route::{identify, set_host, strip_userinfo, target, url_parts};
use super::shared::{Route, Shared};
use super::stage::{Action, Mode, Notes, RequestMeta};
use super::target::Target;
use super::unread;
use super::upstream::{Failure, UPSTREAM_BUFFER, stalled};
use crate::body::Body;
use crate::body::{Progress, Unread};

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

/// The service: every request on every client connection comes here, and its answer goes
/// back through `finish`. The tunnel a `CONNECT` opens is served by `T` (see
/// [`ServeTunnel`]).
///
/// What can be decided without waiting is decided now, as hyper hands the request over; the
/// future returned holds only what the request needs from then on. hyper moves that future
/// into place for every request, and a move copies all of it, so it is kept small: the rare
/// paths (an early answer, a `CONNECT`, an upstream timed while a body streams) wait behind a
/// pointer, and nothing large is held twice across an `await`.
pub(crate) fn handle<T: ServeTunnel, R: Send + 'static>(
    inbound: Inbound,
    request: Request<Incoming>,
    finish: impl FnOnce(Response<Body>) -> R + Send + 'static,
) -> impl Future<Output = Result<R, Aborted>> + Send + 'static {
    match admit::<T>(inbound, request) {
        Admitted::Rare(answer) => Either::Left(async move { Ok(finish(answer.await)) }),
        Admitted::Go(go) => Either::Right(respond(go, finish)),
    }
}

/// A request as the proxy takes it on: answered on a rare path, or on its way through the
/// stages.
#[expect(
    clippy::large_enum_variant,
    reason = "`Go` is the common case, moved once into its future; boxing it costs an allocation"
)]
enum Admitted {
    Rare(Pin<Box<dyn Future<Output = Response<Body>> + Send>>),
    Go(Go),
}

/// A routed request, and what its answer needs.
struct Go {
    inbound: Inbound,
    meta: RequestMeta,
    request: Request<Body>,
    /// The way back to the request body, for an answer that leaves some of it unread.
    lent: Option<Unread>,
    /// The client's side of an upgrade (WebSocket) it asked for.
    client_upgrade: Option<OnUpgrade>,
    /// The version the client spoke.
    version: Version,
}

/// Refuses, or routes and identifies, a request: everything done before the first wait.
fn admit<T: ServeTunnel>(inbound: Inbound, request: Request<Incoming>) -> Admitted {
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
        return early(inbound, parts, body, received, answer);
    }
    if tunnel.is_none() && parts.method == Method::CONNECT {
        return Admitted::Rare(connect::boxed::<T>(Arc::clone(conn), parts, received));
    }

    let (mode, uri) = match target(shared, tunnel, &parts) {
        Ok(target) => target,
        Err(refusal) => {
            return early(inbound, parts, body, received, EarlyAnswer::named(refusal));
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
    Admitted::Go(Go {
        inbound,
        meta,
        request: Request::from_parts(parts, body),
        lent,
        client_upgrade,
        version,
    })
}

/// A request refused before routing, answered once what the client sent of its body is read.
fn early(
    inbound: Inbound,
    parts: Parts,
    body: Incoming,
    received: Receipt,
    answer: EarlyAnswer,
) -> Admitted {
    Admitted::Rare(Box::pin(async move {
        let conn = inbound.conn();
        answer_early(&conn.shared, conn, &parts, body, received, answer).await
    }))
}

/// Runs a routed request through the stages, and upstream unless one answers; logs it.
///
/// Not an `async fn`: one would move `go` into a second copy of itself, and hold both across
/// each `await`. The block takes each of its fields in place.
#[expect(
    clippy::manual_async_fn,
    reason = "an `async fn` would hold `go` twice (see above)"
)]
fn respond<R>(
    go: Go,
    finish: impl FnOnce(Response<Body>) -> R + Send,
) -> impl Future<Output = Result<R, Aborted>> + Send {
    async move {
        let shared = &*go.inbound.conn().shared;
        // Says so in the log if shutdown cuts the request before it has an answer.
        let unanswered = Unanswered {
            shared,
            meta: &go.meta,
        };
        let (decision, seen, notes) = match go.inbound.conn().handled {
            true => run_stages(shared, go.request, &go.meta).await,
            // A connection the filter turned down: untouched, seen by no stage.
            false => (Decision::Forward(go.request), 0, Notes::default()),
        };
        let (mut response, failure) = match decision {
            Decision::Forward(request) => {
                // The body went upstream: whatever becomes of it there, nobody waits for it here.
                drop(go.lent);
                forward(shared, &go.inbound, request, go.client_upgrade).await
            }
            Decision::Answer(mut response) => {
                // The one place where an answer replaces the upstream's: what the stage left of
                // the request body is read first.
                let body = go.lent.and_then(Unread::take);
                unread::settle(
                    &shared.clock,
                    body,
                    go.version,
                    go.meta.target.uri(),
                    &mut response,
                )
                .await;
                (response, None)
            }
            Decision::Abort => {
                std::mem::forget(unanswered);
                shared.stats.aborted();
                let conn = go.inbound.conn();
                if !conn.h2 {
                    // HTTP/2 resets the stream alone; HTTP/1 the connection, with an RST.
                    conn.reset.store(true, std::sync::atomic::Ordering::Relaxed);
                }
                log(
                    shared,
                    &Line::from_meta(&go.meta),
                    go.meta.received.instant,
                    None,
                    Some("a stage dropped the request without an answer"),
                );
                return Err(Aborted);
            }
        };
        notes.deliver(&mut response);
        for stage in shared.pipeline.stages()[..seen].iter().rev() {
            stage.on_response(&mut response, &go.meta);
            if let Some(finish) = stage.finish_response(&response, &go.meta) {
                finish.await;
            }
        }
        std::mem::forget(unanswered);
        shared.stats.response(response.status());
        log(
            shared,
            &Line::from_meta(&go.meta),
            go.meta.received.instant,
            Some(response.status()),
            failure.as_deref(),
        );
        Ok(finish(response))
    }
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
///
/// What needs no wait is done first, outside the future (see `respond`).
fn forward<'a>(
    shared: &'a Shared,
    inbound: &'a Inbound,
    request: Request<Body>,
    client_upgrade: Option<OnUpgrade>,
) -> impl Future<Output = (Response<Body>, Option<String>)> + Send + 'a {
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
    async move {
        let sent = match affine {
            Some(affinity) => {
                let out = Outbound {
                    count: &shared.affine_count,
                    // With a body, `stalled` times the request, not this.
                    timeout: if progress.is_some() { UNTIMED } else { timeout },
                    clock: &*shared.clock,
                    tls: &shared.affine_tls,
                };
                let sent = match &progress {
                    None => affinity.send(request, &out).await,
                    // Boxed: the pair is as large again as the send alone (see `handle`).
                    Some(progress) => {
                        Box::pin(async {
                            tokio::select! {
                                sent = affinity.send(request, &out) => sent,
                                stall = stalled(progress, timeout) => {
                                    Sent::Done(Err(stall.failure(upstream_of(&url), timeout)))
                                }
                            }
                        })
                        .await
                    }
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
        let sent = sent.and_then(|response| match head_size(&response) {
            size if size > UPSTREAM_BUFFER => Err(Failure::HeadTooLarge {
                target: upstream_of(&url),
            }),
            _ => Ok(response),
        });
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
}

/// What an affine connection is given as its timeout when `stalled` times the request: far
/// enough never to fire first.
const UNTIMED: Duration = Duration::from_secs(365 * 24 * 60 * 60);

/// The upstream of `url`, as failures name it.
/// About how many bytes `response`'s head took on the wire: its status line and fields, as
/// HTTP/1.1 writes them. hyper refuses a head larger than its read buffer
/// ([`UPSTREAM_BUFFER`]) only when the buffer fills before the head ends, which depends on how
/// the bytes arrived: a head a little over the limit passed one time and failed the next.
/// Measured here, every head over the limit is refused alike.
fn head_size<B>(response: &Response<B>) -> usize {
    const STATUS_LINE: usize = "HTTP/1.1 200 OK\r\n".len();
    let fields: usize = (response.headers().iter())
        .map(|(name, value)| name.as_str().len() + value.len() + ": \r\n".len())
        .sum();
    STATUS_LINE + fields + "\r\n".len()
}

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
