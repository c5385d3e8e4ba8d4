//! The judge: did every client wait as long as it was told?
//!
//! Every hint a client receives through the proxy opens a *window* under a key (by default
//! client + method + URL) that lasts until the permitted time. A later request under that key
//! is *premature* if it comes before the permitted time (it is answered again without reaching
//! the upstream, and the window stays open) and *compliant* if it comes at or after it (how
//! late is recorded, and the window closes).
//!
//! The judge is pure: every method takes the monotonic time as an argument, and it does no
//! I/O. It keeps a 32-byte entry per open window (a 128-bit key digest and two offsets), in
//! sharded maps, so a million open windows fit in a few tens of megabytes and checks on
//! different keys rarely contend.

mod key;
mod stage;

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

pub(crate) use key::{KeyHasher, KeyText, KeyUrl};
pub use key::{KeyMode, KeyParts, WindowKey};
pub use stage::{JudgeEvent, JudgeStage, Verdict};
pub(crate) use stage::{Origin, fail_closed_answer, wall_of};

const SHARDS: usize = 32;

/// What a premature retry does to its window.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Penalty {
    /// The window keeps its permitted time.
    #[default]
    None,
    /// The window starts over: the full wait counts again from the premature request.
    Sliding,
}

/// The verdict on one request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Check {
    /// No window is open under the request's key: nothing to judge.
    Open,
    /// The request came before the permitted time. The window stays open.
    Premature {
        /// When the window was opened (the throttled response passed to the client).
        throttled_at: Instant,
        /// When a retry is permitted now (later than before under a sliding penalty).
        permitted_at: Instant,
        /// How early the request came, against the permitted time it broke.
        early_by: Duration,
    },
    /// The request came at or after the permitted time. The window is closed.
    Compliant {
        /// When the window was opened.
        throttled_at: Instant,
        /// When a retry was permitted.
        permitted_at: Instant,
        /// How long after the permitted time the request came.
        late_by: Duration,
    },
}

/// The times of one open window, as [`Judge::window`] reads them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WindowTimes {
    /// When the window was opened (the throttled response passed to the client).
    pub throttled_at: Instant,
    /// When a retry is permitted.
    pub permitted_at: Instant,
}

/// How many retries a [`Judge`] has judged, by verdict.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct VerdictCounts {
    /// Retries that came before the permitted time.
    pub premature: u64,
    /// Retries that came at or after it.
    pub compliant: u64,
}

/// One open window: offsets in nanoseconds from the judge's epoch, on the monotonic clock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Window {
    opened: u64,
    permitted: u64,
}

/// Judges retries against the windows that hints open. Share it behind an `Arc`.
#[derive(Debug)]
pub struct Judge {
    mode: KeyMode,
    penalty: Penalty,
    retention: Duration,
    hasher: KeyHasher,
    epoch: Instant,
    shards: Box<[Mutex<HashMap<WindowKey, Window>>]>,
    /// Verdicts so far, for metrics: `[premature, compliant]`.
    verdicts: [AtomicU64; 2],
}

impl Judge {
    /// A judge keying windows by `mode`. `epoch` is any instant no later than the first one
    /// the judge will see (e.g. when the proxy started).
    pub fn new(mode: KeyMode, epoch: Instant) -> Judge {
        Judge {
            mode,
            penalty: Penalty::None,
            retention: Duration::from_secs(600),
            hasher: KeyHasher::new(),
            epoch,
            shards: (0..SHARDS).map(|_| Mutex::new(HashMap::new())).collect(),
            verdicts: Default::default(),
        }
    }

    /// What a premature retry does to its window.
    pub fn penalty(mut self, penalty: Penalty) -> Judge {
        self.penalty = penalty;
        self
    }

    /// How long a window stays after its permitted time, waiting for a (late, compliant)
    /// retry before it is evicted (10 minutes by default).
    pub fn retention(mut self, retention: Duration) -> Judge {
        self.retention = retention;
        self
    }

    /// The key mode.
    pub fn mode(&self) -> &KeyMode {
        &self.mode
    }

    /// What a premature retry does to its window.
    pub fn penalty_mode(&self) -> Penalty {
        self.penalty
    }

    /// How long a window stays after its permitted time.
    pub fn retention_period(&self) -> Duration {
        self.retention
    }

    /// Closes the window under `key`, if one is open (a shared store judged it elsewhere).
    pub(crate) fn close(&self, key: WindowKey) {
        self.shard(key)
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&key);
    }

    /// Counts a verdict made elsewhere (by a shared store) in [`Judge::verdicts`].
    pub(crate) fn count(&self, premature: bool) {
        self.verdicts[usize::from(!premature)].fetch_add(1, Ordering::Relaxed);
    }

    /// The key a request falls under.
    pub fn key(&self, parts: &KeyParts<'_>) -> WindowKey {
        self.hasher.key(&self.mode, parts)
    }

    /// [`Judge::key`] of parts written on demand, without building their strings.
    pub(crate) fn key_of(&self, parts: &KeyText<'_>) -> WindowKey {
        self.hasher.key_of(&self.mode, parts)
    }

    fn offset(&self, at: Instant) -> u64 {
        u64::try_from(at.saturating_duration_since(self.epoch).as_nanos()).unwrap_or(u64::MAX)
    }

    fn instant(&self, offset: u64) -> Instant {
        self.epoch
            .checked_add(Duration::from_nanos(offset))
            .unwrap_or(self.epoch)
    }

    fn shard(&self, key: WindowKey) -> &Mutex<HashMap<WindowKey, Window>> {
        &self.shards[key.shard(SHARDS)]
    }

    /// A hint reached the client at `now`: keep `key` closed until `permitted_at`. An open
    /// window keeps the later of the two permitted times.
    pub fn open(&self, key: WindowKey, now: Instant, permitted_at: Instant) {
        let (opened, permitted) = (self.offset(now), self.offset(permitted_at));
        let mut shard = self
            .shard(key)
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        shard
            .entry(key)
            .and_modify(|w| {
                if permitted > w.permitted {
                    *w = Window { opened, permitted };
                }
            })
            .or_insert(Window { opened, permitted });
    }

    /// Judges a request under `key` arriving at `now`.
    pub fn check(&self, key: WindowKey, now: Instant) -> Check {
        let at = self.offset(now);
        let mut shard = self
            .shard(key)
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let Some(window) = shard.get_mut(&key) else {
            return Check::Open;
        };
        let throttled_at = self.instant(window.opened);
        if at >= window.permitted {
            let window = *window;
            shard.remove(&key);
            self.verdicts[1].fetch_add(1, Ordering::Relaxed);
            return Check::Compliant {
                throttled_at,
                permitted_at: self.instant(window.permitted),
                late_by: Duration::from_nanos(at - window.permitted),
            };
        }
        let early_by = Duration::from_nanos(window.permitted - at);
        self.verdicts[0].fetch_add(1, Ordering::Relaxed);
        if self.penalty == Penalty::Sliding {
            let wait = window.permitted - window.opened;
            *window = Window {
                opened: at,
                permitted: at.saturating_add(wait),
            };
        }
        Check::Premature {
            throttled_at,
            permitted_at: self.instant(window.permitted),
            early_by,
        }
    }

    /// Drops windows whose permitted time passed more than the retention period ago.
    /// Returns how many were dropped.
    pub fn evict(&self, now: Instant) -> usize {
        let horizon = self
            .offset(now)
            .saturating_sub(u64::try_from(self.retention.as_nanos()).unwrap_or(u64::MAX));
        self.shards
            .iter()
            .map(|shard| {
                let mut shard = shard.lock().unwrap_or_else(PoisonError::into_inner);
                let before = shard.len();
                shard.retain(|_, w| w.permitted >= horizon);
                before - shard.len()
            })
            .sum()
    }

    /// How many windows are open.
    pub fn open_windows(&self) -> usize {
        self.shards
            .iter()
            .map(|s| s.lock().unwrap_or_else(PoisonError::into_inner).len())
            .sum()
    }

    /// The window open under `key`, if any; reading it changes nothing.
    pub fn window(&self, key: WindowKey) -> Option<WindowTimes> {
        let shard = self
            .shard(key)
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        shard.get(&key).map(|window| WindowTimes {
            throttled_at: self.instant(window.opened),
            permitted_at: self.instant(window.permitted),
        })
    }

    /// How many retries [`Judge::check`] has found premature and compliant so far.
    pub fn verdicts(&self) -> VerdictCounts {
        VerdictCounts {
            premature: self.verdicts[0].load(Ordering::Relaxed),
            compliant: self.verdicts[1].load(Ordering::Relaxed),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: Duration = Duration::from_secs(1);

    fn parts<'a>(client: &'a str) -> KeyParts<'a> {
        KeyParts {
            client,
            method: "GET",
            url: "https://api.example/v1/items",
            origin: "https://api.example:443",
            header: None,
        }
    }

    mod check {
        use super::*;

        #[test]
        fn nothing_is_judged_without_a_window() {
            let t0 = holdoff::clock::SystemClock.now();
            let judge = Judge::new(KeyMode::default(), t0);
            assert_eq!(judge.check(judge.key(&parts("alice")), t0), Check::Open);
        }

        #[test]
        fn an_early_retry_is_premature_and_keeps_the_window() {
            let t0 = holdoff::clock::SystemClock.now();
            let judge = Judge::new(KeyMode::default(), t0);
            let key = judge.key(&parts("alice"));
            judge.open(key, t0, t0 + 2 * S);
            assert_eq!(
                judge.check(key, t0 + S / 2),
                Check::Premature {
                    throttled_at: t0,
                    permitted_at: t0 + 2 * S,
                    early_by: S + S / 2,
                }
            );
            assert_eq!(judge.open_windows(), 1);
        }

        #[test]
        fn a_retry_at_the_permitted_time_is_compliant_and_closes_the_window() {
            let t0 = holdoff::clock::SystemClock.now();
            let judge = Judge::new(KeyMode::default(), t0);
            let key = judge.key(&parts("alice"));
            judge.open(key, t0, t0 + 2 * S);
            assert_eq!(
                judge.check(key, t0 + 2 * S),
                Check::Compliant {
                    throttled_at: t0,
                    permitted_at: t0 + 2 * S,
                    late_by: Duration::ZERO,
                }
            );
            assert_eq!(judge.check(key, t0 + 2 * S), Check::Open);
        }

        #[test]
        fn clients_do_not_share_windows_by_default_but_do_by_host() {
            let t0 = holdoff::clock::SystemClock.now();
            let judge = Judge::new(KeyMode::default(), t0);
            judge.open(judge.key(&parts("alice")), t0, t0 + 2 * S);
            assert_eq!(judge.check(judge.key(&parts("bob")), t0 + S), Check::Open);

            let judge = Judge::new(KeyMode::Host, t0);
            judge.open(judge.key(&parts("alice")), t0, t0 + 2 * S);
            assert!(matches!(
                judge.check(judge.key(&parts("bob")), t0 + S),
                Check::Premature { .. }
            ));
        }

        #[test]
        fn a_sliding_penalty_restarts_the_wait() {
            let t0 = holdoff::clock::SystemClock.now();
            let judge = Judge::new(KeyMode::default(), t0).penalty(Penalty::Sliding);
            let key = judge.key(&parts("alice"));
            judge.open(key, t0, t0 + 2 * S);
            let Check::Premature {
                permitted_at,
                early_by,
                ..
            } = judge.check(key, t0 + S)
            else {
                panic!("expected premature");
            };
            assert_eq!(early_by, S);
            assert_eq!(permitted_at, t0 + 3 * S);
            assert!(matches!(
                judge.check(key, t0 + 2 * S + S / 2),
                Check::Premature { .. }
            ));
        }

        #[test]
        fn reopening_keeps_the_later_time() {
            let t0 = holdoff::clock::SystemClock.now();
            let judge = Judge::new(KeyMode::default(), t0);
            let key = judge.key(&parts("alice"));
            judge.open(key, t0, t0 + 5 * S);
            judge.open(key, t0 + S, t0 + 2 * S);
            assert!(matches!(
                judge.check(key, t0 + 3 * S),
                Check::Premature { .. }
            ));
        }
    }

    mod evict {
        use super::*;

        #[test]
        fn drops_only_windows_past_their_retention() {
            let t0 = holdoff::clock::SystemClock.now();
            let judge = Judge::new(KeyMode::default(), t0).retention(10 * S);
            judge.open(judge.key(&parts("alice")), t0, t0 + S);
            judge.open(judge.key(&parts("bob")), t0, t0 + 20 * S);
            assert_eq!(judge.evict(t0 + 5 * S), 0);
            assert_eq!(judge.evict(t0 + 12 * S), 1);
            assert_eq!(judge.open_windows(), 1);
        }
    }

    mod window {
        use super::*;

        #[test]
        fn reads_the_times_without_closing_the_window() {
            let t0 = holdoff::clock::SystemClock.now();
            let judge = Judge::new(KeyMode::default(), t0);
            let key = judge.key(&parts("alice"));
            assert_eq!(judge.window(key), None);
            judge.open(key, t0 + S, t0 + 3 * S);
            let times = WindowTimes {
                throttled_at: t0 + S,
                permitted_at: t0 + 3 * S,
            };
            assert_eq!(judge.window(key), Some(times));
            assert_eq!(judge.window(key), Some(times));
            assert_eq!(judge.open_windows(), 1);
        }
    }

    mod verdicts {
        use super::*;

        #[test]
        fn counts_each_verdict_and_not_unjudged_requests() {
            let t0 = holdoff::clock::SystemClock.now();
            let judge = Judge::new(KeyMode::default(), t0);
            let key = judge.key(&parts("alice"));
            judge.check(key, t0);
            judge.open(key, t0, t0 + 2 * S);
            judge.check(key, t0 + S);
            judge.check(key, t0 + S);
            judge.check(key, t0 + 2 * S);
            assert_eq!(
                judge.verdicts(),
                VerdictCounts {
                    premature: 2,
                    compliant: 1,
                }
            );
        }
    }
}
