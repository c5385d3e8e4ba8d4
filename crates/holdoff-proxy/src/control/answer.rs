//! The control API's answers: a body with its content type, text, JSON.

use bytes::Bytes;
use http::header::CONTENT_TYPE;
use http::{HeaderValue, Response, StatusCode};
use http_body_util::Full;
use serde::Serialize;

/// An answer of the control API.
pub(super) type Answer = Response<Full<Bytes>>;

/// `body` with `status` and `content_type`.
pub(super) fn with_type(
    status: StatusCode,
    content_type: &'static str,
    body: impl Into<Bytes>,
) -> Answer {
    let mut answer = Response::new(Full::new(body.into()));
    *answer.status_mut() = status;
    answer
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    answer
}

/// Plain text.
pub(super) fn text(status: StatusCode, body: impl Into<Bytes>) -> Answer {
    with_type(status, "text/plain; charset=utf-8", body)
}

/// `200` with `value` as pretty JSON.
pub(super) fn json(value: &impl Serialize) -> Answer {
    json_with(StatusCode::OK, value)
}

/// `status` with `value` as pretty JSON (or `500` saying why it could not be written).
pub(super) fn json_with(status: StatusCode, value: &impl Serialize) -> Answer {
    match serde_json::to_vec_pretty(value) {
        Ok(mut body) => {
            body.push(b'\n');
            with_type(status, "application/json", body)
        }
        Err(err) => text(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("failed to write JSON: {err}\n"),
        ),
    }
}
