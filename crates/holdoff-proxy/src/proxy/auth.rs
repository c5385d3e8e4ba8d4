//! Proxy authentication: the credentials a proxy checks, and a lockout for a peer that keeps
//! guessing them.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv6Addr};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use http::HeaderMap;

/// Failed proxy authentication attempts after which a peer is refused for the rest of the
/// window: ten guesses a minute, where nothing stopped 54,000 a second.
const MAX_FAILURES: u32 = 10;

/// The window [`MAX_FAILURES`] are counted in, from a peer's first failure.
const FAILURE_WINDOW: Duration = Duration::from_secs(60);

/// At most this many peers are remembered; past it, the oldest window is forgotten first.
const MAX_PEERS: usize = 4096;

/// The credentials a proxy checks, and the failed attempts of each peer.
///
/// A peer (an IPv4 address, or an IPv6 /64, which one host usually holds whole) whose
/// attempts failed [`MAX_FAILURES`] times within [`FAILURE_WINDOW`] gets `429` with
/// `Retry-After` for every further attempt until the window is over, right credentials
/// included: otherwise the one guess that is accepted would still tell itself apart. A request
/// without credentials (the first of a challenge) is no failed attempt.
#[derive(Debug)]
pub(crate) struct ProxyAuth {
    credentials: crate::config::Credentials,
    /// How many peers have a record: none, the usual case, and no lock is taken.
    tracked: AtomicUsize,
    peers: Mutex<Peers>,
}

/// The peers with failures in their current window.
#[derive(Debug, Default)]
struct Peers {
    failures: HashMap<IpAddr, Failures>,
    /// When windows that are over are next forgotten, all at once.
    sweep_at: Option<Instant>,
}

/// A peer's failures in its current window.
#[derive(Clone, Copy, Debug)]
struct Failures {
    since: Instant,
    count: u32,
}

impl Failures {
    fn over(&self, now: Instant) -> bool {
        now.saturating_duration_since(self.since) >= FAILURE_WINDOW
    }
}

/// What a proxy makes of a request's credentials.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Admission {
    /// The right credentials.
    Accepted,
    /// None, or wrong ones: `407`.
    Refused,
    /// The peer failed too often: `429`, to retry after this long.
    Locked { retry_after: Duration },
}

impl ProxyAuth {
    pub(crate) fn new(credentials: crate::config::Credentials) -> ProxyAuth {
        ProxyAuth {
            credentials,
            tracked: AtomicUsize::new(0),
            peers: Mutex::new(Peers::default()),
        }
    }

    /// Checks the credentials in `headers`, sent by `peer` at `now`.
    pub(crate) fn admit(&self, headers: &HeaderMap, peer: IpAddr, now: Instant) -> Admission {
        let peer = peer_key(peer);
        if self.tracked.load(Ordering::Acquire) > 0
            && let Some(retry_after) = self.locked(peer, now)
        {
            return Admission::Locked { retry_after };
        }
        if self.credentials.accepts(headers) {
            return Admission::Accepted;
        }
        if headers.contains_key(http::header::PROXY_AUTHORIZATION) {
            self.failed(peer, now);
        }
        Admission::Refused
    }

    fn peers(&self) -> std::sync::MutexGuard<'_, Peers> {
        self.peers.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// How long `peer` is still refused, if it is; forgets the windows that are over once a
    /// window.
    fn locked(&self, peer: IpAddr, now: Instant) -> Option<Duration> {
        let mut peers = self.peers();
        if peers.sweep_at.is_none_or(|at| at <= now) {
            peers.failures.retain(|_, failures| !failures.over(now));
            peers.sweep_at = now.checked_add(FAILURE_WINDOW);
            self.tracked.store(peers.failures.len(), Ordering::Release);
        }
        let failures = peers.failures.get(&peer)?;
        if failures.over(now) || failures.count < MAX_FAILURES {
            return None;
        }
        let end = failures.since.checked_add(FAILURE_WINDOW)?;
        Some(end.saturating_duration_since(now))
    }

    /// Counts a failed attempt by `peer`.
    fn failed(&self, peer: IpAddr, now: Instant) {
        let mut peers = self.peers();
        let peers = &mut *peers;
        if !peers.failures.contains_key(&peer) && peers.failures.len() >= MAX_PEERS {
            peers.failures.retain(|_, failures| !failures.over(now));
            if peers.failures.len() >= MAX_PEERS {
                let oldest = peers
                    .failures
                    .iter()
                    .min_by_key(|(_, failures)| failures.since)
                    .map(|(peer, _)| *peer);
                if let Some(oldest) = oldest {
                    peers.failures.remove(&oldest);
                }
            }
        }
        let fresh = Failures {
            since: now,
            count: 0,
        };
        let failures = peers.failures.entry(peer).or_insert(fresh);
        if failures.over(now) {
            *failures = fresh;
        }
        failures.count = failures.count.saturating_add(1);
        if failures.count == MAX_FAILURES {
            tracing::warn!(
                client = %peer,
                "{MAX_FAILURES} failed proxy authentication attempts from {peer} within {}s: \
                 its attempts get 429 until the window is over",
                FAILURE_WINDOW.as_secs()
            );
        }
        self.tracked.store(peers.failures.len(), Ordering::Release);
    }
}

/// The key a peer's failures are counted under: its address, or for IPv6 its /64.
fn peer_key(peer: IpAddr) -> IpAddr {
    match peer.to_canonical() {
        IpAddr::V6(v6) => {
            let prefix = u128::from(v6) & !((1u128 << 64) - 1);
            IpAddr::V6(Ipv6Addr::from(prefix))
        }
        v4 => v4,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    mod proxy_auth {
        use super::*;
        use headers::authorization::Basic;
        use headers::{Authorization, HeaderMapExt, ProxyAuthorization};
        use holdoff::clock::SystemClock;

        fn auth() -> ProxyAuth {
            ProxyAuth::new("alice:secret".parse().unwrap())
        }

        fn basic(user: &str, password: &str) -> HeaderMap {
            let mut headers = HeaderMap::new();
            headers.typed_insert(ProxyAuthorization::<Basic>(
                Authorization::basic(user, password).0,
            ));
            headers
        }

        const PEER: IpAddr = IpAddr::V4(std::net::Ipv4Addr::LOCALHOST);

        /// `count` wrong guesses by `peer` at `now`.
        fn guess(auth: &ProxyAuth, peer: IpAddr, now: Instant, count: u32) {
            for _ in 0..count {
                assert_eq!(
                    auth.admit(&basic("alice", "guess"), peer, now),
                    Admission::Refused
                );
            }
        }

        #[test]
        fn locks_a_peer_out_after_too_many_failures_until_the_window_is_over() {
            let auth = auth();
            let start = SystemClock.now();
            guess(&auth, PEER, start, MAX_FAILURES);
            let later = start + Duration::from_secs(20);
            // Right credentials too: the one guess accepted would tell itself apart.
            assert_eq!(
                auth.admit(&basic("alice", "secret"), PEER, later),
                Admission::Locked {
                    retry_after: FAILURE_WINDOW - Duration::from_secs(20)
                }
            );
            let other = IpAddr::V4(std::net::Ipv4Addr::new(127, 0, 0, 2));
            assert_eq!(
                auth.admit(&basic("alice", "secret"), other, later),
                Admission::Accepted
            );
            let over = start + FAILURE_WINDOW;
            assert_eq!(
                auth.admit(&basic("alice", "secret"), PEER, over),
                Admission::Accepted
            );
            assert_eq!(auth.tracked.load(Ordering::Relaxed), 0, "forgotten");
        }

        #[test]
        fn fewer_failures_or_none_sent_lock_nobody_out() {
            let auth = auth();
            let now = SystemClock.now();
            guess(&auth, PEER, now, MAX_FAILURES - 1);
            for _ in 0..3 * MAX_FAILURES {
                assert_eq!(auth.admit(&HeaderMap::new(), PEER, now), Admission::Refused);
            }
            assert_eq!(
                auth.admit(&basic("alice", "secret"), PEER, now),
                Admission::Accepted
            );
        }

        #[test]
        fn counts_an_ipv6_peer_by_its_64() {
            let auth = auth();
            let now = SystemClock.now();
            for host in 0..MAX_FAILURES {
                let peer = IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, host as u16));
                guess(&auth, peer, now, 1);
            }
            let next = IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 9, 9, 9, 9));
            assert!(matches!(
                auth.admit(&basic("alice", "secret"), next, now),
                Admission::Locked { .. }
            ));
            let elsewhere = IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 0, 1, 0, 0, 0, 1));
            assert_eq!(
                auth.admit(&basic("alice", "secret"), elsewhere, now),
                Admission::Accepted
            );
        }

        #[test]
        fn remembers_a_bounded_number_of_peers() {
            let auth = auth();
            let now = SystemClock.now();
            for n in 0..MAX_PEERS as u32 + 100 {
                guess(&auth, IpAddr::V4(n.into()), now, 1);
            }
            assert_eq!(auth.peers().failures.len(), MAX_PEERS);
        }
    }
}
