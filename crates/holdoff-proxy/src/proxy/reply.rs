//! Answers the proxy makes itself: a status and a one-line plain-text reason.

use http::header::{CONTENT_TYPE, PROXY_AUTHENTICATE};
use http::{HeaderValue, Response, StatusCode};

use crate::Body;

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
