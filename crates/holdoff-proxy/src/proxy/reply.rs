//! Answers the proxy makes itself: a status and a one-line plain-text reason.

use std::net::IpAddr;
use std::time::Duration;

use http::header::{CONTENT_TYPE, PROXY_AUTHENTICATE, RETRY_AFTER};
use http::{HeaderValue, Response, StatusCode};

use crate::Body;
use crate::fault::ratelimit::ceil_secs;

/// A response with `status` and `message` (one line, ending in a newline) as its body.
pub(crate) fn text(status: StatusCode, message: impl Into<String>) -> Response<Body> {
    let mut response = Response::new(Body::from(message.into()));
    *response.status_mut() = status;
    response.headers_mut().insert(
        CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}

/// `407` with the challenge that makes clients send their proxy credentials.
pub(crate) fn proxy_auth_required() -> Response<Body> {
    let mut response = text(
        StatusCode::PROXY_AUTHENTICATION_REQUIRED,
        "holdoff: proxy authentication required: send Proxy-Authorization with the user and \
         password given to --proxy-auth (e.g. http://user:password@host:port as the proxy URL)\n",
    );
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
    let mut response = text(
        StatusCode::TOO_MANY_REQUESTS,
        format!(
            "holdoff: too many failed proxy authentication attempts from {peer}; retry after \
             {seconds}s\n"
        ),
    );
    response
        .headers_mut()
        .insert(RETRY_AFTER, HeaderValue::from(seconds));
    response
}
