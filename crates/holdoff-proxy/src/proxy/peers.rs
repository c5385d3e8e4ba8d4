//! Connections per peer: the places each peer holds against the per-peer limit, and the
//! connections refused past it, summed up in the log.

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::fmt;
use std::net::IpAddr;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use holdoff::clock::{Clock, Sleep};

/// How often a peer's refused connections are summed up in the log.
const REFUSALS_EVERY: Duration = Duration::from_secs(10);

/// Whom the per-peer limit counts: a peer address; or, when clients are told apart by
/// process, the process behind a loopback connection. Under `holdoff run` every client is the
/// one loopback address, and a limit on the address let one process that opens connections
/// without end take every place of the others.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum PeerKey {
    Address(IpAddr),
    Process(u32),
}

impl fmt::Display for PeerKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PeerKey::Address(ip) => write!(f, "{ip}"),
            PeerKey::Process(pid) => write!(f, "process {pid}"),
        }
    }
}

/// The connections each peer holds, against the per-peer limit.
pub(crate) struct Peers {
    limit: usize,
    held: Mutex<HashMap<PeerKey, usize>>,
}

impl Peers {
    pub(crate) fn new(limit: usize) -> Arc<Peers> {
        Arc::new(Peers {
            limit,
            held: Mutex::new(HashMap::new()),
        })
    }

    /// A place for one more connection from `key`, or `None` when it holds the limit.
    pub(crate) fn admit(self: &Arc<Self>, key: PeerKey) -> Option<PeerSlot> {
        let mut held = self.held.lock().unwrap_or_else(PoisonError::into_inner);
        let count = held.entry(key).or_insert(0);
        if *count >= self.limit {
            return None;
        }
        *count += 1;
        Some(PeerSlot {
            peers: Arc::clone(self),
            key,
        })
    }

    /// The most connections one peer may hold.
    pub(crate) fn limit(&self) -> usize {
        self.limit
    }
}

/// One connection counted against its peer, until dropped.
pub(crate) struct PeerSlot {
    peers: Arc<Peers>,
    key: PeerKey,
}

impl Drop for PeerSlot {
    fn drop(&mut self) {
        let mut held = self
            .peers
            .held
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        // A peer with no connection left takes no room.
        if let Entry::Occupied(mut count) = held.entry(self.key) {
            *count.get_mut() -= 1;
            if *count.get() == 0 {
                count.remove();
            }
        }
    }
}

/// The line for a connection refused for the per-peer limit.
pub(crate) fn refused_line(peer: PeerKey, limit: usize) {
    tracing::warn!(
        client = %peer,
        limit,
        "refused a connection from {peer}: it already holds {limit}, the most one peer may \
         (max_connections_per_peer); more refusals are summed up",
    );
}

/// Connections refused for the per-peer limit, put in the log at most once per
/// [`REFUSALS_EVERY`], however many: the first at once, those after it summed up per peer.
#[derive(Default)]
pub(crate) struct Refusals {
    /// Refused since the last line, per peer.
    counts: HashMap<PeerKey, u64>,
    /// When the last line was written.
    last_line: Option<Instant>,
    /// Set while some are counted: when to log them.
    due: Option<Sleep>,
}

impl Refusals {
    pub(crate) fn refused(&mut self, peer: PeerKey, limit: usize, clock: &impl Clock) {
        let now = clock.now();
        match self.last_line.map(|last| last + REFUSALS_EVERY) {
            Some(quiet_until) if now < quiet_until => {
                *self.counts.entry(peer).or_default() += 1;
                if self.due.is_none() {
                    self.due = Some(clock.sleep_until(quiet_until));
                }
            }
            _ => {
                self.last_line = Some(now);
                refused_line(peer, limit);
            }
        }
    }

    /// Completes once counted refusals are due in the log; never while there are none.
    pub(crate) async fn due(&mut self) {
        match &mut self.due {
            Some(due) => due.as_mut().await,
            None => std::future::pending().await,
        }
    }

    /// Logs the refusals counted, one line per peer.
    pub(crate) fn log(&mut self, clock: &impl Clock) {
        self.due = None;
        if self.counts.is_empty() {
            return;
        }
        let now = clock.now();
        let since = self
            .last_line
            .map_or(Duration::ZERO, |last| now.saturating_duration_since(last));
        self.last_line = Some(now);
        for (ip, count) in self.counts.drain() {
            tracing::warn!(
                client = %ip,
                count,
                "refused {count} more connections from {ip} in the last {:.1}s: it holds the \
                 most one peer may",
                since.as_secs_f64()
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use holdoff::clock::TokioClock;

    mod peers {
        use super::*;

        #[test]
        fn admit_each_peer_up_to_the_limit_and_take_places_back() {
            let peers = Peers::new(2);
            let (one, other) = (PeerKey::Process(100), PeerKey::Process(101));
            let first = peers.admit(one).unwrap();
            let _second = peers.admit(one).unwrap();
            assert!(peers.admit(one).is_none(), "a third from one peer");
            assert!(
                peers.admit(other).is_some(),
                "another peer is not counted with it"
            );
            drop(first);
            assert!(
                peers.admit(one).is_some(),
                "a closed connection's place is free again"
            );
        }

        #[test]
        fn forget_a_peer_with_no_connection_left() {
            let peers = Peers::new(1);
            drop(peers.admit(PeerKey::Address(IpAddr::from([127, 0, 0, 1]))));
            assert!(peers.held.lock().unwrap().is_empty());
        }
    }

    mod refusals {
        use super::*;

        #[tokio::test(start_paused = true)]
        async fn log_the_first_at_once_and_sum_up_the_rest_after_a_while() {
            let clock = TokioClock;
            let started = clock.now();
            let ip = PeerKey::Address(IpAddr::from([127, 0, 0, 1]));
            let mut refusals = Refusals::default();
            refusals.refused(ip, 2, &clock);
            assert!(refusals.counts.is_empty(), "the first is logged at once");
            refusals.refused(ip, 2, &clock);
            refusals.refused(ip, 2, &clock);
            assert_eq!(refusals.counts[&ip], 2);

            refusals.due().await;
            assert_eq!(clock.now() - started, REFUSALS_EVERY);
            refusals.log(&clock);
            assert!(refusals.counts.is_empty());
            let more = tokio::time::timeout(REFUSALS_EVERY * 2, refusals.due()).await;
            assert!(more.is_err(), "due with nothing to log");
        }
    }
}
