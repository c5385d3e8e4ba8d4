//! A client connection: just accepted ([`Accepted`]), then served ([`Conn`]); where each
//! request on it comes from ([`Inbound`]), its own port or an intercepted [`Tunnel`] made of
//! it.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64};

use http::uri::Authority;
use tokio::sync::OwnedSemaphorePermit;

use super::affinity::Affinity;
use super::peers::{PeerSlot, Peers};
use super::shared::Shared;
use super::stage::ClientId;

/// One client connection to the proxy's own port.
pub(crate) struct Conn {
    pub(crate) shared: Arc<Shared>,
    pub(crate) peer: SocketAddr,
    /// Who its requests come from unless they name their client: its process, or its peer
    /// address (see `process`). Found before the first request.
    pub(crate) identity: ClientId,
    /// Whether the proxy handles it (see `filter`): if not, it passes through untouched.
    pub(crate) handled: bool,
    /// Its own upstream connection, once it has one: HTTP/1.1 only, whose requests come one
    /// at a time.
    pub(crate) affinity: Affinity,
    /// Whether it speaks HTTP/2 (h2c): its requests run concurrently, so they go to the
    /// shared upstream pool and never to `affinity`, which nothing polls for it.
    pub(crate) h2: bool,
    /// How many requests on it have reached the proxy.
    pub(crate) calls: AtomicU64,
    /// Raised when a stage drops one of its HTTP/1 requests without an answer (a `reset`
    /// fault): the TCP connection, the tunnel's for one inside a tunnel, then closes with a
    /// reset (RST), which clients see as `ECONNRESET`, not with a FIN.
    pub(crate) reset: Arc<AtomicBool>,
    /// Held for as long as the connection, or a tunnel made of it, lives.
    _slot: Arc<Slot>,
}

impl Conn {
    /// The connection from `peer` that holds `slot`, once its client is known (`identity`),
    /// whether the proxy handles it, and whether it speaks HTTP/2.
    pub(crate) fn new(
        shared: Arc<Shared>,
        peer: SocketAddr,
        slot: Slot,
        identity: ClientId,
        handled: bool,
        h2: bool,
    ) -> Conn {
        Conn {
            shared,
            peer,
            identity,
            handled,
            affinity: Affinity::default(),
            h2,
            calls: AtomicU64::new(0),
            reset: Arc::new(AtomicBool::new(false)),
            _slot: Arc::new(slot),
        }
    }

    /// The connection inside a tunnel made of this one that carries plain HTTP: served as if
    /// the client had connected to the proxy's port again, with its own upstream connection,
    /// by the same client.
    pub(crate) fn inside_tunnel(&self, h2: bool) -> Conn {
        Conn {
            shared: Arc::clone(&self.shared),
            peer: self.peer,
            identity: self.identity.clone(),
            handled: self.handled,
            affinity: Affinity::default(),
            h2,
            calls: AtomicU64::new(0),
            reset: Arc::clone(&self.reset),
            _slot: Arc::clone(&self._slot),
        }
    }
}

/// A connection's place under the connection limits.
pub(crate) struct Slot {
    _connection: OwnedSemaphorePermit,
    _peer: PeerSlot,
}

impl Slot {
    /// One of all places (`connection`) and one of its peer's.
    pub(crate) fn new(connection: OwnedSemaphorePermit, peer: PeerSlot) -> Slot {
        Slot {
            _connection: connection,
            _peer: peer,
        }
    }
}

/// How a connection just accepted counts against the per-peer limit.
pub(crate) enum Admission {
    /// Counted against its peer address already.
    Admitted(PeerSlot),
    /// To be counted against its process, once known: a loopback peer while clients are
    /// told apart by process.
    ByProcess(Arc<Peers>),
}

/// A connection just accepted, on its way to its thread.
pub(crate) struct Accepted {
    pub(crate) shared: Arc<Shared>,
    pub(crate) peer: SocketAddr,
    /// Its place among all connections.
    pub(crate) connection: OwnedSemaphorePermit,
    pub(crate) admission: Admission,
}

impl Accepted {
    /// A connection from `peer`, holding its place among all (`connection`) and admitted
    /// against its peer as `admission` says.
    pub(crate) fn new(
        shared: Arc<Shared>,
        peer: SocketAddr,
        connection: OwnedSemaphorePermit,
        admission: Admission,
    ) -> Accepted {
        Accepted {
            shared,
            peer,
            connection,
            admission,
        }
    }
}

/// Where a request came from: the proxy's own port, or inside an intercepted tunnel.
#[derive(Clone)]
pub(crate) enum Inbound {
    Plain(Arc<Conn>),
    Tunnel(Arc<Tunnel>),
}

impl Inbound {
    pub(crate) fn conn(&self) -> &Arc<Conn> {
        match self {
            Inbound::Plain(conn) => conn,
            Inbound::Tunnel(tunnel) => &tunnel.conn,
        }
    }
}

/// An intercepted tunnel: what its requests share.
pub(crate) struct Tunnel {
    /// The client connection the tunnel was made on.
    pub(crate) conn: Arc<Conn>,
    /// Where the client asked to go, without the port when it is 443.
    pub(crate) authority: Authority,
    /// The proxy user of the `CONNECT`, which names the client for every request inside.
    pub(crate) user: Option<Arc<str>>,
    /// Its own upstream connection, when the client chose HTTP/1.1 (HTTP/2 requests run
    /// concurrently and share the pool).
    pub(crate) affinity: Option<Affinity>,
}
