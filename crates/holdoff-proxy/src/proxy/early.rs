//! The proxy's answers before it routes a request: a request that came back through this
//! proxy, a client without the right proxy credentials (or locked out for guessing them), an
//! invalid request; each answered once what the client sent of its body is read, and logged.

use std::time::Instant;

use holdoff::Receipt;
use http::request::Parts;
use http::{Method, Response, StatusCode};
use hyper::body::Incoming;

use super::auth::Admission;
use super::conn::{Conn, Tunnel};
use super::headers::has_several_hosts;
use super::log::{Line, log};
use super::reply::{self, Refusal};
use super::shared::{Route, Shared, second_of};
use super::stage::Mode;
use super::unread;
use crate::body::Body;
use crate::config::proxy_user;

/// An answer the proxy makes before routing a request, with what its log line says.
pub(crate) struct EarlyAnswer {
    response: Response<Body>,
    /// Why, when the request failed (the log line is a warning, and it counts as an error);
    /// `None` for a credentials challenge.
    error: Option<String>,
    /// Whether the log names the client by its proxy user: only once its credentials are
    /// known to be right.
    named: bool,
    /// A refusal of a locked-out peer: its log lines are budgeted, a flood making thousands.
    locked: bool,
}

impl EarlyAnswer {
    /// `refusal`, before the client's credentials were checked.
    fn anonymous(refusal: Refusal) -> EarlyAnswer {
        EarlyAnswer {
            error: Some(refusal.reason.clone()),
            response: refusal.into_response(),
            named: false,
            locked: false,
        }
    }

    /// `refusal`, after the client's credentials were checked.
    pub(crate) fn named(refusal: Refusal) -> EarlyAnswer {
        EarlyAnswer {
            named: true,
            ..EarlyAnswer::anonymous(refusal)
        }
    }
}

/// Whether, and how, the proxy answers a request itself before routing it: it came back
/// through this proxy (its own `Via`), its credentials are not right (on the proxy's own
/// port), or it is invalid (two `Host`s).
pub(crate) fn refuse(
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
            let locked = response.status() == StatusCode::TOO_MANY_REQUESTS;
            return Some(EarlyAnswer {
                response,
                error: None,
                named: false,
                locked,
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
pub(crate) async fn answer_early(
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
        locked,
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
    let logged = !locked || {
        let take = shared.quiet.locked_out.take(second_of(received.wall));
        if take.left_out > 0 {
            tracing::info!(
                target: "holdoff::request",
                "{} more refusals of locked-out clients (429) were left out of the log",
                take.left_out
            );
        }
        take.log
    };
    finish_early(shared, line, received, response, error.as_deref(), logged)
}

/// The mode of a request on the proxy's own port.
fn plain_mode(shared: &Shared) -> &'static str {
    match shared.route {
        Route::Forward { .. } => Mode::Forward.as_str(),
        Route::Reverse(_) => Mode::Reverse.as_str(),
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
    logged: bool,
) -> Response<Body> {
    if error.is_some() {
        shared.stats.error();
    }
    if *line.method != Method::CONNECT {
        shared.stats.response(response.status());
    }
    if !logged {
        return response;
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
