//! Answers the proxy makes itself: a [`Refusal`], a status and a one-line plain-text reason.

use std::fmt;
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use http::header::{CACHE_CONTROL, CONTENT_TYPE, PROXY_AUTHENTICATE, RETRY_AFTER};
use http::{HeaderValue, Response, StatusCode};

use crate::body::Body;
use crate::secs::ceil_secs;

/// An answer the proxy (or one of its stages) makes itself instead of the upstream's: a status
/// and why, in one line. The client reads `holdoff: {reason}` as a plain-text body; the log
/// and [`Display`](fmt::Display) give the reason alone.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Refusal {
    pub(crate) status: StatusCode,
    /// One line, without the `holdoff: ` the body starts with, nor a newline.
    pub(crate) reason: String,
}

impl Refusal {
    pub(crate) fn new(status: StatusCode, reason: impl Into<String>) -> Refusal {
        Refusal {
            status,
            reason: reason.into(),
        }
    }

    /// The body the client reads: `holdoff: {reason}` and a newline.
    pub(crate) fn body_text(&self) -> String {
        format!("holdoff: {}\n", self.reason)
    }

    /// The response: the status, and the reason as a plain-text body.
    pub(crate) fn into_response(self) -> Response<Body> {
        let mut response = Response::new(Body::from(self.body_text()));
        *response.status_mut() = self.status;
        response.headers_mut().insert(
            CONTENT_TYPE,
            HeaderValue::from_static("text/plain; charset=utf-8"),
        );
        response
    }
}

impl Refusal {
    /// The response as the API at `host` writes its errors: Microsoft Graph's JSON error body
    /// for a Graph host ([`graph_error`]), the plain-text one otherwise.
    pub(crate) fn into_response_for(self, host: &str) -> Response<Body> {
        if is_graph_host(host) {
            graph_error(self.status, &self.body_text())
        } else {
            self.into_response()
        }
    }
}

/// Whether `host` is Microsoft Graph's, in any of its clouds (`graph.microsoft.com`,
/// `graph.microsoft.us`, `dod-graph.microsoft.us`, `microsoftgraph.chinacloudapi.cn`), as Dev
/// Proxy tells them.
pub(crate) fn is_graph_host(host: &str) -> bool {
    let starts = |prefix: &str| {
        host.get(..prefix.len())
            .is_some_and(|head| head.eq_ignore_ascii_case(prefix))
    };
    starts("graph.microsoft.") || starts("dod-graph.microsoft.") || starts("microsoftgraph.")
}

/// An answer of the proxy's own in Microsoft Graph's shape, as Dev Proxy answers Graph
/// requests: `{"error": {"code": "Too Many Requests", "message": …}}` (the code is the
/// status's reason phrase, as Dev Proxy writes it), `application/json`, `no-store`.
pub(crate) fn graph_error(status: StatusCode, message: &str) -> Response<Body> {
    let body = serde_json::json!({
        "error": {
            "code": status.canonical_reason().unwrap_or("Error"),
            "message": message.trim_end(),
        }
    });
    let mut response = Response::new(Body::from(body.to_string()));
    *response.status_mut() = status;
    let headers = response.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

/// Marks an answer the proxy made about its own state, not the API's (the judge's refusal of
/// a premature retry, the fail-closed answer while the shared store is down): its
/// `Retry-After` opens no judge window.
#[derive(Clone, Copy, Debug)]
pub(crate) struct OwnAnswer;

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.reason)
    }
}

/// `407` with the challenge that makes clients send their proxy credentials.
pub(crate) fn proxy_auth_required() -> Response<Body> {
    let mut response = Refusal::new(
        StatusCode::PROXY_AUTHENTICATION_REQUIRED,
        "proxy authentication required: send Proxy-Authorization with the user and password \
         given to --proxy-auth (e.g. http://user:password@host:port as the proxy URL)",
    )
    .into_response();
    response.headers_mut().insert(
        PROXY_AUTHENTICATE,
        HeaderValue::from_static("Basic realm=\"holdoff\""),
    );
    response
}

/// `429` with `Retry-After` for a peer that failed proxy authentication too often: the proxy
/// asks it to wait, as it asks clients of a throttled API to.
pub(crate) fn auth_locked(peer: IpAddr, retry_after: Duration) -> Response<Body> {
    let seconds = ceil_secs(retry_after).max(1);
    let mut response = Refusal::new(
        StatusCode::TOO_MANY_REQUESTS,
        format!(
            "too many failed proxy authentication attempts from {peer}; retry after {seconds}s"
        ),
    )
    .into_response();
    response
        .headers_mut()
        .insert(RETRY_AFTER, HeaderValue::from(seconds));
    response
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
