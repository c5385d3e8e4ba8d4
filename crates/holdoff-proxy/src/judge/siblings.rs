//! Windows by method and URL alone, for telling when *another* process came back early.
//!
//! The judge keys windows by client by default, and under `holdoff run` a client is a
//! process: pytest-xdist's workers are judged apart, as they should be. But a shell loop of
//! `curl`s is a process per request, so no request ever falls in its own window, and a
//! command that hammers a throttled URL from fresh processes would pass unseen. [`Siblings`]
//! keeps, for each method and URL a process was throttled on, who was told to wait and until
//! when; a request from another process inside that wait is reported as
//! [`Verdict::Sibling`](super::Verdict::Sibling). It is a finding of its own, not a
//! violation: two independent processes may well ask for the same URL (`--judge-key
//! method-url` judges all of them as one client instead).
//!
//! Pure, as the judge is: every method takes the time.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use super::WindowKey;

/// How many method-and-URL windows are kept at most. Past it, expired ones are dropped, and a
/// new one is not kept while none has expired: a missed report, never a false one.
const KEPT: usize = 1 << 16;

/// Who was told to wait on a method and URL, and until when.
#[derive(Clone, Debug)]
struct Told {
    pid: u32,
    client: Arc<str>,
    throttled_at: Instant,
    /// `None`: a wait too long for the clock.
    permitted_at: Option<Instant>,
}

/// A request that came inside another process's wait.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct SiblingCheck {
    /// The process that was told to wait (`ClientId`'s display form).
    pub client: Arc<str>,
    /// When it was throttled.
    pub throttled_at: Instant,
    /// When it was permitted to retry; `None` for a wait too long for the clock.
    pub permitted_at: Option<Instant>,
    /// How long before that the request came; `None` against a wait that never ends.
    pub early_by: Option<Duration>,
}

/// The processes told to wait, by a key of method and URL.
#[derive(Debug, Default)]
pub(crate) struct Siblings {
    told: Mutex<HashMap<WindowKey, Told>>,
    /// Whether `told` may hold anything: most runs throttle nothing, and their requests then
    /// take no lock here.
    any: AtomicBool,
}

impl Siblings {
    /// Process `pid` (`client`, written on demand) was throttled on `key` at `now` and told to
    /// wait until `permitted_at` (`None`: a wait too long for the clock). The latest process
    /// throttled is kept, with the later of the two waits.
    pub(crate) fn open(
        &self,
        key: WindowKey,
        pid: u32,
        client: impl FnOnce() -> Arc<str>,
        now: Instant,
        permitted_at: Option<Instant>,
    ) {
        let mut told = self.told.lock().unwrap_or_else(PoisonError::into_inner);
        if told.len() >= KEPT && !told.contains_key(&key) {
            told.retain(|_, t| t.permitted_at.is_none_or(|at| at > now));
            if told.len() >= KEPT {
                return;
            }
        }
        let later = |a: Option<Instant>, b: Option<Instant>| match (a, b) {
            (Some(a), Some(b)) => Some(a.max(b)),
            _ => None,
        };
        let permitted_at = match told.get(&key) {
            Some(earlier) => later(earlier.permitted_at, permitted_at),
            None => permitted_at,
        };
        told.insert(
            key,
            Told {
                pid,
                client: client(),
                throttled_at: now,
                permitted_at,
            },
        );
        self.any.store(true, Ordering::Release);
    }

    /// Whether any process may be waiting: when not, there is nothing to check.
    pub(crate) fn any(&self) -> bool {
        self.any.load(Ordering::Acquire)
    }

    /// A request from process `pid` on `key` at `now`: inside the wait another process was
    /// told, or `None`.
    pub(crate) fn check(&self, key: WindowKey, pid: u32, now: Instant) -> Option<SiblingCheck> {
        let told = self.told.lock().unwrap_or_else(PoisonError::into_inner);
        let t = told.get(&key)?;
        if t.pid == pid || t.permitted_at.is_some_and(|at| at <= now) {
            return None;
        }
        Some(SiblingCheck {
            client: Arc::clone(&t.client),
            throttled_at: t.throttled_at,
            permitted_at: t.permitted_at,
            early_by: t.permitted_at.map(|at| at - now),
        })
    }

    /// Drops the waits that are over by `now`, and those that never end once they are as old
    /// as `oldest` allows; returns how many.
    pub(crate) fn evict(&self, now: Instant, oldest: Duration) -> usize {
        let mut told = self.told.lock().unwrap_or_else(PoisonError::into_inner);
        let before = told.len();
        told.retain(|_, t| match t.permitted_at {
            Some(at) => at > now,
            None => now.saturating_duration_since(t.throttled_at) < oldest,
        });
        if told.is_empty() {
            self.any.store(false, Ordering::Release);
        }
        before - told.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(n: u64) -> WindowKey {
        WindowKey::numbered(n)
    }

    /// Any instant: the windows are measured from it.
    fn start() -> Instant {
        holdoff::clock::Clock::now(&holdoff::clock::ManualClock::new(std::time::UNIX_EPOCH))
    }

    #[test]
    fn another_process_inside_the_wait_is_found_the_same_one_is_not() {
        let siblings = Siblings::default();
        let t0 = start();
        let secs = Duration::from_secs;
        assert!(!siblings.any());
        siblings.open(
            key(1),
            100,
            || "pid 100 (curl)".into(),
            t0,
            Some(t0 + secs(2)),
        );
        assert!(siblings.any());
        // The process that was told: its own window is the judge's business, not this.
        assert_eq!(siblings.check(key(1), 100, t0 + secs(1)), None);
        let found = siblings.check(key(1), 101, t0 + secs(1)).expect("inside");
        assert_eq!(&*found.client, "pid 100 (curl)");
        assert_eq!(found.early_by, Some(secs(1)));
        assert_eq!(found.throttled_at, t0);
        // Another URL, or after the wait: nothing.
        assert_eq!(siblings.check(key(2), 101, t0 + secs(1)), None);
        assert_eq!(siblings.check(key(1), 101, t0 + secs(2)), None);
        assert_eq!(siblings.evict(t0 + secs(2), secs(600)), 1);
        assert!(!siblings.any());
    }

    #[test]
    fn the_latest_process_told_is_kept_with_the_later_wait() {
        let siblings = Siblings::default();
        let t0 = start();
        let secs = Duration::from_secs;
        siblings.open(key(1), 100, || "a".into(), t0, Some(t0 + secs(5)));
        siblings.open(key(1), 101, || "b".into(), t0 + secs(1), Some(t0 + secs(2)));
        // 101 was told last; the wait is still 100's, the later.
        assert_eq!(siblings.check(key(1), 101, t0 + secs(3)), None);
        let found = siblings.check(key(1), 100, t0 + secs(3)).expect("inside");
        assert_eq!((&*found.client, found.early_by), ("b", Some(secs(2))));
    }

    #[test]
    fn a_wait_that_never_ends_is_dropped_once_old() {
        let siblings = Siblings::default();
        let t0 = start();
        siblings.open(key(1), 100, || "a".into(), t0, None);
        let found = siblings
            .check(key(1), 7, t0 + Duration::from_secs(9))
            .unwrap();
        assert_eq!((found.permitted_at, found.early_by), (None, None));
        assert_eq!(
            siblings.evict(t0 + Duration::from_secs(9), Duration::from_secs(10)),
            0
        );
        assert_eq!(
            siblings.evict(t0 + Duration::from_secs(10), Duration::from_secs(10)),
            1
        );
    }
}
