//! The crate's error: what failed, with the Redis client's error as the source.

use std::fmt;

/// Why a Redis operation failed.
#[derive(Debug)]
pub struct Error {
    kind: ErrorKind,
    source: Option<redis::RedisError>,
}

/// What kind of failure an [`Error`] is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The Redis URL could not be understood (it is never echoed: it may hold a password).
    InvalidUrl,
    /// The CA certificate given for a `rediss://` server is not a PEM certificate.
    InvalidCa,
    /// Redis did not answer within the configured timeout.
    Timeout,
    /// Redis could not be reached, or the connection broke; or, in a cluster, the node that
    /// serves the key could not be (its slot is moving, or no primary serves it).
    Connection,
    /// Not asked: an operation timed out or could not reach Redis a moment ago, and Redis is
    /// asked again only once a probe in the background gets an answer. Returned at once.
    CircuitOpen,
    /// Redis answered with an error or with a value of the wrong shape.
    Response,
    /// The operation asks for something this version cannot do in Redis (a rate-limit
    /// algorithm it does not know).
    Unsupported,
}

impl Error {
    /// What kind of failure this is.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    pub(crate) fn new(kind: ErrorKind) -> Error {
        Error { kind, source: None }
    }

    pub(crate) fn from_redis(error: redis::RedisError) -> Error {
        let kind = if error.is_timeout() {
            ErrorKind::Timeout
        } else if error.is_io_error()
            || error.is_connection_refusal()
            || error.is_connection_dropped()
            || error.is_unrecoverable_error()
            || unserved(&error)
        {
            ErrorKind::Connection
        } else {
            ErrorKind::Response
        };
        Error {
            kind,
            source: Some(error),
        }
    }
}

/// Whether a cluster says that a key's slot has no one to serve it now: a redirection still
/// unsettled when the client's retries ran out (`MOVED`, `ASK`), a slot being moved
/// (`TRYAGAIN`), slots no primary serves (`CLUSTERDOWN`, `MASTERDOWN`), or no connection
/// to the node that serves it. Redis answered, but the key cannot be reached: to the
/// circuit breaker, the same as a server that cannot be.
fn unserved(error: &redis::RedisError) -> bool {
    use redis::{ErrorKind as K, ServerErrorKind as S};
    error.is_cluster_error()
        || matches!(
            error.kind(),
            K::ClusterConnectionNotFound | K::Server(S::MasterDown | S::BusyLoading)
        )
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self.kind {
            ErrorKind::InvalidUrl => "parse the redis url",
            ErrorKind::InvalidCa => "read the CA certificate for redis (expected PEM)",
            ErrorKind::Timeout => "get an answer from redis in time",
            ErrorKind::Connection => "reach redis",
            ErrorKind::CircuitOpen => "ask redis, which failed a moment ago and is being probed",
            ErrorKind::Response => "get a usable answer from redis",
            ErrorKind::Unsupported => {
                "count with a rate-limit algorithm redis state does not support"
            }
        })
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source
            .as_ref()
            .map(|e| e as &(dyn std::error::Error + 'static))
    }
}
