//! The request log line: one per request, at `info`, or `warn` with the reason when the proxy
//! failed it.

use std::fmt;
use std::time::Instant;

use holdoff::clock::Clock;
use http::request::Parts;
use http::{Method, StatusCode};

use super::shared::Shared;
use super::stage::{ClientId, RequestMeta};

/// What the request log line says about a request.
pub(crate) struct Line<'a> {
    pub(crate) method: &'a Method,
    pub(crate) url: &'a dyn fmt::Display,
    pub(crate) mode: &'static str,
    pub(crate) client: Who<'a>,
}

/// The client as logged.
#[derive(Clone, Copy)]
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
    pub(crate) fn from_meta(meta: &'a RequestMeta) -> Line<'a> {
        Line {
            method: &meta.method,
            url: meta.target.uri(),
            mode: meta.mode.as_str(),
            client: Who::Id(&meta.client),
        }
    }

    /// For a request answered before it was routed: as received, the client by proxy user
    /// or the connection's `identity`.
    pub(crate) fn early(
        parts: &'a Parts,
        identity: &'a ClientId,
        user: Option<&'a str>,
        mode: &'static str,
    ) -> Line<'a> {
        Line {
            method: &parts.method,
            url: &parts.uri,
            mode,
            client: user.map_or(Who::Id(identity), Who::User),
        }
    }
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
