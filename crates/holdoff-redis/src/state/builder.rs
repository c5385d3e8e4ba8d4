//! [`RedisStateBuilder`]: the settings of a [`RedisState`](super::RedisState).

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use holdoff::clock::TokioClock;
use holdoff_proxy::shared::OnFailure;

use crate::breaker::{Breaker, Probe, Words};
use crate::connection::{Lua, Nodes};
use crate::error::Error;

use super::scripts::{BUDGET_CHECK, BUDGET_SPEND, CHECK, OPEN, PRELUDE, TAKE};
use super::{Inner, Link, NEXT_ID, RedisState};

/// Settings for a [`RedisState`]; see [`RedisState::builder`].
#[derive(Clone)]
pub struct RedisStateBuilder {
    nodes: Nodes,
    prefix: String,
    timeout: Duration,
    root_ca: Option<Vec<u8>>,
}

impl fmt::Debug for RedisStateBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisStateBuilder")
            .field("url", &self.nodes.redacted())
            .field("prefix", &self.prefix)
            .field("timeout", &self.timeout)
            .finish()
    }
}

impl RedisStateBuilder {
    /// The defaults: keys under `holdoff:`, 500 ms per operation, the system's roots.
    pub(super) fn new(nodes: Nodes) -> RedisStateBuilder {
        RedisStateBuilder {
            nodes,
            prefix: "holdoff:".to_owned(),
            timeout: Duration::from_millis(500),
            root_ca: None,
        }
    }

    /// The prefix put before every key (default `holdoff:`): proxies with different prefixes
    /// on one Redis never see each other's windows or counters.
    pub fn prefix(mut self, prefix: impl Into<String>) -> RedisStateBuilder {
        self.prefix = prefix.into();
        self
    }

    /// How long one operation (connecting included) may take before it fails with
    /// [`ErrorKind::Timeout`](crate::ErrorKind::Timeout) (default 500 ms).
    pub fn timeout(mut self, timeout: Duration) -> RedisStateBuilder {
        self.timeout = timeout;
        self
    }

    /// Verifies a `rediss://` server against this CA certificate (PEM) instead of the
    /// system's roots: for a Redis whose certificate a private CA issued.
    #[cfg(feature = "tls")]
    #[cfg_attr(docsrs, doc(cfg(feature = "tls")))]
    pub fn root_ca(mut self, pem: impl Into<Vec<u8>>) -> RedisStateBuilder {
        self.root_ca = Some(pem.into());
        self
    }

    /// The store. It connects on first use, not here, and reconnects by itself after a
    /// failure, so a proxy may start while Redis is down.
    ///
    /// Must be called inside a tokio runtime (the connection's background tasks run on it).
    ///
    /// # Errors
    ///
    /// [`ErrorKind::InvalidUrl`](crate::ErrorKind::InvalidUrl) if the URL is not a Redis URL
    /// this build can use (a `rediss://` URL needs the `tls` feature); for a cluster, if
    /// there are no seeds, or they disagree on the password or on TLS, or one names a
    /// database other than 0 or a Unix socket.
    pub fn build(self) -> Result<RedisState, Error> {
        let link = Link {
            client: self.nodes.client(self.timeout, self.root_ca.as_deref())?,
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            generation: Arc::new(AtomicU64::new(0)),
            timeout: self.timeout,
        };
        let url = self.nodes.redacted();
        let probe: Probe = {
            let link = link.clone();
            Arc::new(move || {
                let link = link.clone();
                Box::pin(async move {
                    link.bounded(|mut connection| async move { connection.probe().await })
                        .await
                })
            })
        };
        let words = Words {
            name: "shared state",
            back: "judging and rate limiting with it",
            // The proxy logs at `warn` in tests and often in CI: the end of an outage must
            // show there too.
            closed_level: tracing::Level::WARN,
        };
        // The proxy's connections are served on runtimes of their own, whose timers follow
        // tokio's clock: so do the probes.
        let breaker = Breaker::new(words, url.clone(), Arc::new(TokioClock), probe);
        breaker.set_meanwhile(OnFailure::default().meanwhile());
        let script = |body: &str| Lua::new(format!("{PRELUDE}{body}"));
        Ok(RedisState {
            inner: Arc::new(Inner {
                link,
                breaker,
                open: script(OPEN),
                check: script(CHECK),
                take: script(TAKE),
                budget_check: script(BUDGET_CHECK),
                budget_spend: script(BUDGET_SPEND),
                url,
                prefix: self.prefix,
            }),
        })
    }
}
