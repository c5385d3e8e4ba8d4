//! Request bodies that an answer made before reading them leaves behind.
//!
//! A stage (a fault, a mock, the judge) usually answers before the client has sent its body.
//! HTTP allows it, but clients trip over it: over HTTP/2, curl 7.88 (Debian 12's) fails most
//! such uploads with `(92) Stream error in the HTTP/2 framing layer` when the answer, and the
//! `RST_STREAM(NO_ERROR)` that ends the stream after it (RFC 9113 §8.1), arrive mid-upload;
//! over HTTP/1.1, a connection whose request was not read to its end cannot carry the next
//! one, and closing it with unread bytes in the socket can reset the answer away. So before
//! such an answer goes, the rest of the body is read and thrown away, up to [`LIMIT`] bytes
//! and for at most [`TIME`]. Past either, the answer goes anyway: over HTTP/2 the stream is
//! reset with `NO_ERROR` once the answer is complete (h2 does that when the request body is
//! dropped unread), over HTTP/1.1 it says `Connection: close` and the connection closes after
//! it; never is a half-read connection reused.

use std::time::Duration;

use holdoff::clock::Clock;
use http::header::CONNECTION;
use http::{HeaderValue, Response, Uri, Version};
use http_body::Body as _;
use http_body_util::BodyExt;
use hyper::body::Incoming;

use crate::body::Body;

/// The most bytes of a request body read and thrown away before an answer that does not need
/// them: 1 MiB, hyper's HTTP/2 stream window (what a client may send before anyone reads).
pub(crate) const LIMIT: u64 = 1024 * 1024;

/// How long the rest of a body may take to arrive before the answer goes without it: a client
/// that stalls its upload does not hold its answer for ever.
pub(crate) const TIME: Duration = Duration::from_secs(10);

/// Reads and throws away what is left of `body`, if anything, before `response` answers
/// the request; past [`LIMIT`] or [`TIME`], marks `response` so that the connection is not
/// reused (HTTP/1.1), and lets the body go (HTTP/2: the stream is reset with `NO_ERROR` after
/// the answer).
pub(crate) async fn settle(
    clock: &impl Clock,
    body: Option<Incoming>,
    version: Version,
    url: &Uri,
    response: &mut Response<Body>,
) {
    let Some(mut body) = body.filter(|body| !body.is_end_stream()) else {
        return;
    };
    let mut read = 0;
    let rest = if body.size_hint().lower() > LIMIT {
        // It says it is larger: no use reading any of it.
        Rest::Over
    } else if let Some(deadline) = clock.now().checked_add(TIME) {
        tokio::select! {
            rest = discard(&mut body, &mut read) => rest,
            () = clock.sleep_until(deadline) => Rest::Stalled,
        }
    } else {
        discard(&mut body, &mut read).await
    };
    let why = match rest {
        Rest::Ended => return,
        Rest::Broke(err) => {
            // The stream or the connection is gone already: nothing to keep clean.
            tracing::debug!(url = %url, error = %err, "a request body answered unread broke off");
            return;
        }
        Rest::Over => "it is larger than the limit",
        Rest::Stalled => "its rest did not arrive in time",
    };
    let ending = if version == Version::HTTP_2 {
        "its stream is reset with NO_ERROR after the answer"
    } else {
        response
            .headers_mut()
            .insert(CONNECTION, HeaderValue::from_static("close"));
        "its connection closes after the answer"
    };
    tracing::debug!(
        url = %url,
        read,
        limit = LIMIT,
        "a request body answered unread was not read to its end: {why}; {ending}"
    );
}

/// How reading the rest of a body ended.
enum Rest {
    /// At its end: the request is over.
    Ended,
    /// More than [`LIMIT`] bytes.
    Over,
    /// Not at its end within [`TIME`].
    Stalled,
    /// The client reset the stream, closed the connection, or sent a malformed chunk.
    Broke(hyper::Error),
}

/// Reads `body` until it ends or more than [`LIMIT`] bytes were read, counting them in `read`
/// (which the caller sees even if it stops waiting).
async fn discard(body: &mut Incoming, read: &mut u64) -> Rest {
    while *read <= LIMIT {
        match body.frame().await {
            None => return Rest::Ended,
            Some(Err(err)) => return Rest::Broke(err),
            Some(Ok(frame)) => match frame.into_data() {
                Ok(data) => *read += data.len() as u64,
                // Trailers come last.
                Err(_) => return Rest::Ended,
            },
        }
    }
    Rest::Over
}
