//! What the test server saw: one entry per request.

use std::net::SocketAddr;
use std::time::{Instant, SystemTime};

use bytes::Bytes;
use http::header::AsHeaderName;
use http::{HeaderMap, Method, Uri, Version};

/// A request as the test server received it.
///
/// The arrival times are read from the server's clock when the request's header section has
/// been parsed, before its body is read, so they are the instants a client's retry is judged
/// by. With the default [`TokioClock`](holdoff::clock::TokioClock) they follow tokio's paused
/// time in tests that use it.
#[derive(Clone, Debug)]
pub struct Recorded {
    /// The request method.
    pub method: Method,
    /// The request target as sent: origin-form (`/path?query`) from ordinary clients,
    /// absolute-form from clients that talk to a forward proxy.
    pub uri: Uri,
    /// The HTTP version of the request line.
    pub version: Version,
    /// The request headers, in the order received.
    pub headers: HeaderMap,
    /// The body bytes received (all of them when [`Recorded::body_complete`] is true).
    pub body: Bytes,
    /// Whether the body arrived in full; false when the client closed or broke the
    /// connection mid-body, or the server shut down while it was arriving.
    pub body_complete: bool,
    /// Arrival on the server clock's monotonic time.
    pub at: Instant,
    /// Arrival on the server clock's wall time.
    pub wall: SystemTime,
    /// The client's address.
    pub peer: SocketAddr,
    /// The connection the request came on, numbered from 0 in the order the server accepted
    /// them: two requests with the same number shared a kept-alive connection.
    pub connection: u64,
    /// Arrival order over all connections, to keep [`TestServer::requests`] sorted even
    /// when bodies finish arriving out of order.
    ///
    /// [`TestServer::requests`]: crate::TestServer::requests
    pub(crate) sequence: u64,
}

impl Recorded {
    /// The path of the request target, without the query.
    pub fn path(&self) -> &str {
        self.uri.path()
    }

    /// The path and query of the request target (`/search?q=1`).
    pub fn path_and_query(&self) -> &str {
        self.uri
            .path_and_query()
            .map_or_else(|| self.uri.path(), |target| target.as_str())
    }

    /// The first value of header `name`, if it is present and visible ASCII.
    pub fn header(&self, name: impl AsHeaderName) -> Option<&str> {
        self.headers.get(name)?.to_str().ok()
    }
}
