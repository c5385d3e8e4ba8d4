//! The judge: did every client wait as long as it was told?
//!
//! Every hint a client receives through the proxy opens a *window* under a key (by default
//! client + method + URL) that lasts until the permitted time. A later request under that key
//! is *premature* if it comes before the permitted time (it is answered again without reaching
//! the upstream, and the window stays open) and *compliant* if it comes at or after it (how
//! late is recorded, and the window closes).
//!
//! A window is of a [`WindowKind`]: a usable hint's lasts until its earliest reading (one
//! too long for the clock never closes, until evicted); a malformed hint's, and a hint-less
//! throttle's, last the minimum backoff, and a retry inside them is [`Check::TooSoon`].
//!
//! The judge is pure: every method takes the monotonic time as an argument, and it does no
//! I/O. It keeps a 40-byte entry per open window (a 128-bit key digest, two offsets and the
//! kind), in sharded maps, so a million open windows fit in a few tens of megabytes and checks
//! on different keys rarely contend.

mod event;
mod key;
mod siblings;

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use crate::proxy::RequestMeta;

pub use crate::lines::LINES_PER_SECOND;
pub use event::{HintKind, JudgeEvent, Record, ThrottleEvent, Verdict};
pub(crate) use key::{KeyHasher, KeyText, KeyUrl};
pub use key::{KeyMode, KeyParts, WindowKey};
pub(crate) use siblings::{SiblingCheck, Siblings};

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

/// What opened a window, which decides what a retry inside it is.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum WindowKind {
    /// A usable hint: the window lasts until its earliest reading.
    #[default]
    Hinted,
    /// A hint that could not be read: never read as zero, the window lasts the minimum
    /// backoff.
    Malformed,
    /// A throttle without a hint: the window lasts the minimum backoff, and closes at the
    /// first request under it, whose gap is measured.
    NoHint,
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
    /// The request came inside a window that never closes: its hint was too long for the
    /// monotonic clock. The window stays open.
    Unbounded {
        /// When the window was opened.
        throttled_at: Instant,
    },
    /// The request came sooner than the minimum backoff after a throttle whose hint was
    /// malformed (the window stays open) or missing (the window closes).
    TooSoon {
        /// What opened the window: [`WindowKind::Malformed`] or [`WindowKind::NoHint`].
        kind: WindowKind,
        /// When the window was opened.
        throttled_at: Instant,
        /// When the minimum backoff was over.
        permitted_at: Instant,
        /// How early the request came, against it.
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
pub(crate) struct WindowTimes {
    /// When the window was opened (the throttled response passed to the client).
    pub throttled_at: Instant,
    /// When a retry is permitted.
    pub permitted_at: Instant,
}

/// How many retries a [`Judge`] has judged, by verdict.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct VerdictCounts {
    /// Retries that came before the permitted time (or inside a window that never closes).
    pub premature: u64,
    /// Retries that came sooner than the minimum backoff after a malformed or missing hint.
    pub too_soon: u64,
    /// Retries that came at or after it.
    pub compliant: u64,
}

/// One open window: offsets in nanoseconds from the judge's epoch, on the monotonic clock.
/// A window that never closes has `permitted` [`NEVER`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Window {
    opened: u64,
    permitted: u64,
    kind: WindowKind,
}

/// The permitted offset of a window that never closes.
const NEVER: u64 = u64::MAX;

/// Where [`Judge::verdicts`] counts each verdict.
const PREMATURE: usize = 0;
const COMPLIANT: usize = 1;
const TOO_SOON: usize = 2;

/// A shard's part of a cap of `max` windows: its share and a quarter more, at least one.
fn per_shard(max: usize) -> usize {
    max.div_ceil(SHARDS).saturating_mul(5).div_ceil(4).max(1)
}

/// Drops the oldest eighth (at least one) of a full shard's windows, by when they opened:
/// their clients have had the longest to come back. Returns how many.
fn drop_oldest(shard: &mut HashMap<WindowKey, Window>) -> usize {
    let count = (shard.len() / 8).max(1);
    let mut opened: Vec<u64> = shard.values().map(|window| window.opened).collect();
    let (_, cutoff, _) = opened.select_nth_unstable(count - 1);
    let cutoff = *cutoff;
    let mut left = count;
    shard.retain(|_, window| {
        let drop = left > 0 && window.opened <= cutoff;
        left -= usize::from(drop);
        !drop
    });
    count - left
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
    /// The most windows a shard holds: the cap on open windows over the shards.
    per_shard: usize,
    /// Windows dropped to stay under the cap before they were judged or retained long
    /// enough: retries under them go unjudged, and the reports say how many.
    evicted: AtomicU64,
    /// Verdicts so far, for metrics: `[premature, compliant, too soon]`.
    verdicts: [AtomicU64; 3],
    /// Who was told to wait on each method and URL, to tell another process that came back
    /// inside that wait (keyed by client only).
    siblings: Siblings,
}

/// The default cap on open windows: at 85 to 175 bytes a window, under 200 MB.
pub const DEFAULT_MAX_WINDOWS: usize = 1_000_000;

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
            per_shard: per_shard(DEFAULT_MAX_WINDOWS),
            evicted: AtomicU64::new(0),
            verdicts: Default::default(),
            siblings: Siblings::default(),
        }
    }

    /// About `max` windows open at most: each shard holds its share and a quarter more, so
    /// that keys crowding one shard do not drop windows before `max` are open. Past it,
    /// opening one drops the oldest of its shard's, an eighth at a time, counted by
    /// [`Judge::evicted`]. A flood of long hints on distinct URLs then costs bounded memory,
    /// and the reports say how many windows went unjudged.
    pub fn max_windows(mut self, max: usize) -> Judge {
        self.per_shard = per_shard(max);
        self
    }

    /// How many windows were dropped to stay under [`Judge::max_windows`].
    pub fn evicted(&self) -> u64 {
        self.evicted.load(Ordering::Relaxed)
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
        let slot = if premature { PREMATURE } else { COMPLIANT };
        self.verdicts[slot].fetch_add(1, Ordering::Relaxed);
    }

    /// The key a request falls under.
    pub fn key(&self, parts: &KeyParts<'_>) -> WindowKey {
        self.hasher.key(&self.mode, parts)
    }

    /// [`Judge::key`] of parts written on demand, without building their strings.
    pub(crate) fn key_of(&self, parts: &KeyText<'_>) -> WindowKey {
        self.hasher.key_of(&self.mode, parts)
    }

    /// The key of the request `meta` describes (`header` is its value of the header a
    /// [`KeyMode::Header`] judge keys by): what the proxy's stages file and look up its
    /// windows under. The key of [`Judge::key`] for the same parts as they display, written
    /// from the request's client and [`Target`](crate::Target) without building a string.
    pub fn key_for(&self, meta: &RequestMeta, header: Option<&str>) -> WindowKey {
        self.keys_for(meta, header, false).0
    }

    /// [`Judge::key_for`], and with `stable` the key a store several proxies share files it
    /// under: from one writing of the parts.
    pub(crate) fn keys_for(
        &self,
        meta: &RequestMeta,
        header: Option<&str>,
        stable: bool,
    ) -> (WindowKey, Option<WindowKey>) {
        let origin = meta.target.origin();
        let text = KeyText {
            client: &meta.client,
            method: meta.method.as_str(),
            url: KeyUrl::Target(&meta.target),
            origin: &origin,
            header,
        };
        let local = self.key_of(&text);
        let shared = stable.then(|| KeyHasher::Stable.key_of(&self.mode, &text));
        (local, shared)
    }

    /// The processes told to wait, by method and URL.
    pub(crate) fn siblings(&self) -> &Siblings {
        &self.siblings
    }

    /// The key of the request `meta` describes by its method and URL alone, whoever the
    /// client: what [`Judge::siblings`] files waits under. `None` unless windows are keyed by
    /// client: under any other key, another client's request is judged by the window itself.
    pub(crate) fn sibling_key(&self, meta: &RequestMeta) -> Option<WindowKey> {
        if self.mode != KeyMode::ClientMethodUrl {
            return None;
        }
        let origin = meta.target.origin();
        let text = KeyText {
            client: &meta.client,
            method: meta.method.as_str(),
            url: KeyUrl::Target(&meta.target),
            origin: &origin,
            header: None,
        };
        Some(self.hasher.key_of(&KeyMode::MethodUrl, &text))
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
        self.open_as(key, now, Some(permitted_at), WindowKind::Hinted);
    }

    /// A throttle reached the client at `now`: keep `key` closed until `permitted_at` (never,
    /// for `None`: a hint too long for the clock), judging what comes sooner as `kind` says.
    /// An open window keeps the later of the two permitted times; at the same time, a hint
    /// wins over a missing or malformed one.
    pub(crate) fn open_as(
        &self,
        key: WindowKey,
        now: Instant,
        permitted_at: Option<Instant>,
        kind: WindowKind,
    ) {
        let opened = self.offset(now);
        let permitted = permitted_at.map_or(NEVER, |at| self.offset(at).min(NEVER - 1));
        let window = Window {
            opened,
            permitted,
            kind,
        };
        let mut shard = self
            .shard(key)
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if shard.len() >= self.per_shard && !shard.contains_key(&key) {
            let dropped = drop_oldest(&mut shard);
            self.evicted.fetch_add(dropped as u64, Ordering::Relaxed);
        }
        shard
            .entry(key)
            .and_modify(|w| {
                let hinted = |k| k == WindowKind::Hinted;
                if permitted > w.permitted
                    || (permitted == w.permitted && hinted(kind) && !hinted(w.kind))
                {
                    *w = window;
                }
            })
            .or_insert(window);
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
            self.verdicts[COMPLIANT].fetch_add(1, Ordering::Relaxed);
            return Check::Compliant {
                throttled_at,
                permitted_at: self.instant(window.permitted),
                late_by: Duration::from_nanos(at - window.permitted),
            };
        }
        if window.permitted == NEVER {
            self.verdicts[PREMATURE].fetch_add(1, Ordering::Relaxed);
            return Check::Unbounded { throttled_at };
        }
        let early_by = Duration::from_nanos(window.permitted - at);
        let permitted_at = self.instant(window.permitted);
        match window.kind {
            WindowKind::Hinted => {}
            kind => {
                self.verdicts[TOO_SOON].fetch_add(1, Ordering::Relaxed);
                // A hint-less throttle's window measures one gap: the next request is
                // forwarded, and whatever it gets opens the next window.
                if kind == WindowKind::NoHint {
                    shard.remove(&key);
                }
                return Check::TooSoon {
                    kind,
                    throttled_at,
                    permitted_at,
                    early_by,
                };
            }
        }
        self.verdicts[PREMATURE].fetch_add(1, Ordering::Relaxed);
        if self.penalty == Penalty::Sliding {
            let wait = window.permitted - window.opened;
            window.opened = at;
            window.permitted = at.saturating_add(wait).min(NEVER - 1);
        }
        Check::Premature {
            throttled_at,
            permitted_at: self.instant(window.permitted),
            early_by,
        }
    }

    /// Drops windows whose permitted time passed more than the retention period ago, and
    /// windows that never close once they have been open that long. Returns how many were
    /// dropped.
    pub fn evict(&self, now: Instant) -> usize {
        let horizon = self
            .offset(now)
            .saturating_sub(u64::try_from(self.retention.as_nanos()).unwrap_or(u64::MAX));
        let keep = |w: &Window| match w.permitted {
            NEVER => w.opened >= horizon,
            permitted => permitted >= horizon,
        };
        self.siblings.evict(now, self.retention);
        self.shards
            .iter()
            .map(|shard| {
                let mut shard = shard.lock().unwrap_or_else(PoisonError::into_inner);
                let before = shard.len();
                shard.retain(|_, w| keep(w));
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
    pub(crate) fn window(&self, key: WindowKey) -> Option<WindowTimes> {
        let shard = self
            .shard(key)
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        shard.get(&key).map(|window| WindowTimes {
            throttled_at: self.instant(window.opened),
            permitted_at: self.instant(window.permitted),
        })
    }

    /// How many retries [`Judge::check`] has found premature, too soon and compliant so far.
    pub fn verdicts(&self) -> VerdictCounts {
        VerdictCounts {
            premature: self.verdicts[PREMATURE].load(Ordering::Relaxed),
            too_soon: self.verdicts[TOO_SOON].load(Ordering::Relaxed),
            compliant: self.verdicts[COMPLIANT].load(Ordering::Relaxed),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    mod key_for {
        use super::*;
        use holdoff::Receipt;
        use holdoff::clock::SystemClock;

        #[test]
        fn is_the_key_of_the_requests_parts_as_they_display() {
            let at = Receipt {
                instant: SystemClock.now(),
                wall: SystemClock.wall_now(),
            };
            let modes = [
                KeyMode::ClientMethodUrl,
                KeyMode::MethodUrl,
                KeyMode::Host,
                KeyMode::Url,
                KeyMode::Header("x-tenant".to_owned()),
            ];
            for mode in modes {
                let judge = Judge::new(mode.clone(), at.instant);
                for url in ["https://API.test:443/v1/x?y=1", "http://127.0.0.1:8080/"] {
                    let meta = RequestMeta::for_test(1, "w-1", url, at);
                    let (client, target) = (meta.client.to_string(), meta.target.to_string());
                    let origin = meta.target.origin().to_string();
                    let parts = KeyParts {
                        client: &client,
                        method: "GET",
                        url: &target,
                        origin: &origin,
                        header: Some("acme"),
                    };
                    assert_eq!(
                        judge.key_for(&meta, Some("acme")),
                        judge.key(&parts),
                        "{mode:?} {url}"
                    );
                }
            }
        }
    }

    mod spellings {
        use super::*;
        use holdoff::Receipt;
        use holdoff::clock::SystemClock;

        #[test]
        fn of_one_url_share_one_window() {
            // A window opened on one spelling catches a retry on another: the host's case and
            // a default port written (with a leading zero, even) make no other URL.
            let at = Receipt {
                instant: SystemClock.now(),
                wall: SystemClock.wall_now(),
            };
            let judge = Judge::new(KeyMode::default(), at.instant);
            let key = |url| judge.key_for(&RequestMeta::for_test(1, "w-1", url, at), None);
            let opened = key("http://example.test:80/x");
            for url in [
                "http://example.test/x",
                "http://EXAMPLE.test/x",
                "http://example.test:080/x",
                "HTTP://Example.Test:80/x",
            ] {
                assert_eq!(key(url), opened, "{url}");
            }
            assert_ne!(key("http://example.test:8080/x"), opened);
        }
    }

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

    mod kinds {
        use super::*;

        const MIN: Duration = Duration::from_millis(100);

        #[test]
        fn a_retry_inside_a_malformed_hints_backoff_is_too_soon_and_keeps_the_window() {
            let t0 = holdoff::clock::SystemClock.now();
            let judge = Judge::new(KeyMode::default(), t0);
            let key = judge.key(&parts("alice"));
            judge.open_as(key, t0, Some(t0 + MIN), WindowKind::Malformed);
            let ms = Duration::from_millis;
            assert_eq!(
                judge.check(key, t0 + ms(5)),
                Check::TooSoon {
                    kind: WindowKind::Malformed,
                    throttled_at: t0,
                    permitted_at: t0 + MIN,
                    early_by: ms(95),
                }
            );
            assert!(matches!(
                judge.check(key, t0 + ms(10)),
                Check::TooSoon { .. }
            ));
            assert!(matches!(
                judge.check(key, t0 + MIN),
                Check::Compliant { .. }
            ));
            assert_eq!(judge.verdicts().too_soon, 2);
        }

        #[test]
        fn a_hintless_window_measures_one_gap() {
            let t0 = holdoff::clock::SystemClock.now();
            let judge = Judge::new(KeyMode::default(), t0);
            let key = judge.key(&parts("alice"));
            judge.open_as(key, t0, Some(t0 + MIN), WindowKind::NoHint);
            assert!(matches!(
                judge.check(key, t0),
                Check::TooSoon {
                    kind: WindowKind::NoHint,
                    ..
                }
            ));
            assert_eq!(judge.check(key, t0), Check::Open);
        }

        #[test]
        fn a_window_beyond_the_clock_never_closes_until_evicted() {
            let t0 = holdoff::clock::SystemClock.now();
            let judge = Judge::new(KeyMode::default(), t0).retention(10 * S);
            let key = judge.key(&parts("alice"));
            judge.open_as(key, t0, None, WindowKind::Hinted);
            for later in [S, 9 * S] {
                assert_eq!(
                    judge.check(key, t0 + later),
                    Check::Unbounded { throttled_at: t0 }
                );
            }
            assert_eq!(judge.verdicts().premature, 2);
            assert_eq!(judge.evict(t0 + 5 * S), 0);
            assert_eq!(judge.evict(t0 + 11 * S), 1);
        }

        #[test]
        fn a_hint_wins_over_a_missing_one_at_the_same_time() {
            let t0 = holdoff::clock::SystemClock.now();
            let judge = Judge::new(KeyMode::default(), t0);
            let key = judge.key(&parts("alice"));
            judge.open_as(key, t0, Some(t0 + MIN), WindowKind::NoHint);
            judge.open_as(key, t0, Some(t0 + MIN), WindowKind::Hinted);
            assert!(matches!(judge.check(key, t0), Check::Premature { .. }));
        }
    }

    mod evict {
        use super::*;

        #[test]
        fn a_full_judge_drops_its_oldest_windows_and_counts_them() {
            let t0 = holdoff::clock::SystemClock.now();
            let judge = Judge::new(KeyMode::default(), t0).max_windows(64);
            let year = Duration::from_secs(365 * 24 * 3600);
            let keys: Vec<WindowKey> = (0..2_000)
                .map(|i| judge.key(&parts(&format!("client-{i}"))))
                .collect();
            for (i, key) in keys.iter().enumerate() {
                let at = t0 + Duration::from_millis(i as u64);
                judge.open(*key, at, at + year);
            }
            let open = judge.open_windows();
            assert!(open <= 96, "{open} windows open: 3 a shard at most");
            assert_eq!(judge.evicted() as usize + open, keys.len());
            // The newest is still judged; the oldest went, unjudged.
            let now = t0 + Duration::from_secs(1);
            assert!(matches!(
                judge.check(keys[keys.len() - 1], now),
                Check::Premature { .. }
            ));
            assert_eq!(judge.check(keys[0], now), Check::Open);
            // Reopening a window that is there drops nothing.
            let before = judge.evicted();
            judge.open(keys[keys.len() - 1], now, now + year);
            assert_eq!(judge.evicted(), before);
        }

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
                    too_soon: 0,
                    compliant: 1,
                }
            );
        }
    }
}
