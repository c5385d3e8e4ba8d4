//! Which client connections the proxy handles: a per-connection predicate
//! ([`ConnectionFilter`]), asked once per connection before its first request. A connection it
//! turns down is passed through untouched: its requests skip every stage (no faults, no
//! judge, no metrics) and its `CONNECT` tunnels are blind, never intercepted.

use std::net::SocketAddr;
use std::sync::{Arc, OnceLock};

use super::process;
use super::stage::ClientId;

/// Decides, once per client connection, whether the proxy handles it; see
/// [`ProxyServer::filter_connections`](crate::ProxyServer::filter_connections).
///
/// It is called off the async threads, so it may read files (e.g. under `/proc`).
///
/// # Examples
///
/// ```
/// use std::net::SocketAddr;
/// use holdoff_proxy::ConnectionFilter;
///
/// /// Handles only the connections of process 4242.
/// struct Only(u32);
///
/// impl ConnectionFilter for Only {
///     fn handles(&self, _peer: SocketAddr, pid: Option<u32>) -> bool {
///         pid == Some(self.0)
///     }
/// }
/// ```
pub trait ConnectionFilter: Send + Sync + 'static {
    /// Whether the connection from `peer` is handled; `pid` is the process at its other end,
    /// where the system says which (Linux, a loopback peer), else `None`.
    fn handles(&self, peer: SocketAddr, pid: Option<u32>) -> bool;
}

/// The server's filter, if one was set before it ran.
#[derive(Default)]
pub(crate) struct Filter(OnceLock<Arc<dyn ConnectionFilter>>);

impl Filter {
    /// Sets it; only the first call counts.
    pub(crate) fn set(&self, filter: Arc<dyn ConnectionFilter>) {
        let _ = self.0.set(filter);
    }

    /// Whether the connection from `peer` to `local`, whose identity is `identity`, is
    /// handled: always without a filter.
    pub(crate) async fn handles(
        &self,
        peer: SocketAddr,
        local: std::io::Result<SocketAddr>,
        identity: &ClientId,
    ) -> bool {
        let Some(filter) = self.0.get().cloned() else {
            return true;
        };
        // The process is known already unless --client-id peer kept it from being looked up.
        let known = match identity {
            ClientId::Process { pid, .. } => Some(*pid),
            _ => None,
        };
        let local = local.ok();
        tokio::task::spawn_blocking(move || {
            let pid = known.or_else(|| local.and_then(|local| process::pid_of(peer, local)));
            filter.handles(peer, pid)
        })
        .await
        // Only a panic in the filter: the connection is then not handled.
        .unwrap_or(false)
    }
}
