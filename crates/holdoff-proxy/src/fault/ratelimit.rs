//! Rate limiting: fixed window, sliding window and token bucket, with the response headers
//! each style of API sends and a `Retry-After` past the limit.
//!
//! Pure: [`RateLimiter::take`] is given the monotonic time and reads no clock. The wait past
//! the limit is exact to the nanosecond here; when it becomes a header it is rounded *up* to
//! whole seconds ([`ceil_secs`](crate::secs::ceil_secs)), so a client that honours it never comes back too soon.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use http::{HeaderName, HeaderValue};

use crate::secs::ceil_secs;

/// How capacity is counted and returned.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Algorithm {
    /// `limit` per window; the count resets when a window ends (windows are aligned to the
    /// limiter's epoch).
    FixedWindow,
    /// The previous window's count, weighted by how much of it still overlaps the last
    /// `window`, plus the current window's: no burst of 2 × limit at a window edge.
    SlidingWindow,
    /// A bucket of `limit` tokens refilled continuously at `limit` per `window`.
    TokenBucket,
    /// `limit` per window, each window starting at the first request after the last one
    /// ended (per key): Microsoft Dev Proxy's RateLimitingPlugin.
    FixedFromFirstRequest,
}

/// A limit: at most `limit` units per `window`, each request costing `cost`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limit {
    /// The algorithm.
    pub algorithm: Algorithm,
    /// Units per window (tokens in a full bucket).
    pub limit: u64,
    /// The window (the time a bucket takes to refill from empty).
    pub window: Duration,
    /// Units one request costs.
    pub cost: u64,
}

/// What the limiter decided for one request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Taken {
    /// Whether the request is within the limit (its cost was taken).
    pub allowed: bool,
    /// Units left after this request.
    pub remaining: u64,
    /// Time until the limit is whole again (the window ends, the bucket is full).
    pub reset: Duration,
    /// For a refused request: the time until this request's cost fits again.
    pub retry_after: Option<Duration>,
}

#[derive(Clone, Copy, Debug, Default)]
struct State {
    /// Fixed and sliding: the index of the current window; from the first request: 1 once a
    /// window has started; bucket: unused.
    window: u64,
    /// Fixed, sliding, from the first request: units used in the current window; bucket:
    /// tokens × 1e9 missing.
    used: u128,
    /// Sliding: units used in the previous window.
    previous: u64,
    /// Bucket: when `used` was last brought up to date; from the first request: when the
    /// window started (nanoseconds from the epoch).
    updated: u64,
}

/// A rate limiter with one counter per key (a client, or one shared key).
#[derive(Debug)]
pub(crate) struct RateLimiter {
    limit: Limit,
    epoch: Instant,
    counters: Mutex<HashMap<String, State>>,
}

impl RateLimiter {
    /// A limiter whose fixed windows start at `epoch`.
    ///
    /// # Panics
    ///
    /// Never: a zero window or limit is treated as "always over the limit" by [`take`]
    /// (config validation refuses them first).
    ///
    /// [`take`]: RateLimiter::take
    pub(crate) fn new(limit: Limit, epoch: Instant) -> RateLimiter {
        RateLimiter {
            limit,
            epoch,
            counters: Mutex::new(HashMap::new()),
        }
    }

    /// Counts a request under `key` at `now`.
    pub(crate) fn take(&self, key: &str, now: Instant) -> Taken {
        let Limit {
            algorithm,
            limit,
            window,
            cost,
        } = self.limit;
        let window_ns = window.as_nanos();
        if window_ns == 0 || limit == 0 || cost > limit {
            return Taken::never_fits(window);
        }
        let at = now.saturating_duration_since(self.epoch).as_nanos();
        let mut counters = self.counters.lock().unwrap_or_else(PoisonError::into_inner);
        if !counters.contains_key(key) {
            counters.insert(key.to_owned(), State::default());
        }
        // Inserted just above, so never missing; were it missing, refusing beats panicking.
        let Some(state) = counters.get_mut(key) else {
            return Taken::never_fits(window);
        };
        match algorithm {
            Algorithm::FixedWindow => fixed(state, at, window_ns, limit, cost),
            Algorithm::SlidingWindow => sliding(state, at, window_ns, limit, cost),
            Algorithm::TokenBucket => bucket(state, at, window_ns, limit, cost),
            Algorithm::FixedFromFirstRequest => from_first(state, at, window_ns, limit, cost),
        }
    }

    /// Forgets counters idle for more than two windows (they would read as fresh anyway).
    pub(crate) fn evict(&self, now: Instant) -> usize {
        let at = now.saturating_duration_since(self.epoch).as_nanos();
        let window_ns = self.limit.window.as_nanos().max(1);
        let mut counters = self.counters.lock().unwrap_or_else(PoisonError::into_inner);
        let before = counters.len();
        let current = (at / window_ns) as u64;
        counters.retain(|_, state| match self.limit.algorithm {
            Algorithm::TokenBucket | Algorithm::FixedFromFirstRequest => {
                at.saturating_sub(u128::from(state.updated)) < 2 * window_ns
            }
            _ => current.saturating_sub(state.window) < 2,
        });
        before - counters.len()
    }
}

impl Taken {
    /// The answer to a request whose cost can never fit under a limit with this `window` (a
    /// zero limit or window, or a cost above the limit): refused, retry after a window (at
    /// least a second). Config validation refuses such limits first; a shared store answers
    /// them alike without asking.
    pub fn never_fits(window: Duration) -> Taken {
        Taken {
            allowed: false,
            remaining: 0,
            reset: window,
            retry_after: Some(window.max(Duration::from_secs(1))),
        }
    }
}

fn nanos(n: u128) -> Duration {
    let secs = u64::try_from(n / 1_000_000_000).unwrap_or(u64::MAX);
    Duration::new(secs, (n % 1_000_000_000) as u32)
}

fn fixed(state: &mut State, at: u128, window: u128, limit: u64, cost: u64) -> Taken {
    let index = (at / window) as u64;
    if index != state.window {
        *state = State {
            window: index,
            ..State::default()
        };
    }
    let reset = nanos(u128::from(index + 1) * window - at);
    count(state, reset, limit, cost)
}

/// A window that starts at the first request after the last one ended, as Dev Proxy's
/// RateLimitingPlugin keeps it.
fn from_first(state: &mut State, at: u128, window: u128, limit: u64, cost: u64) -> Taken {
    let started = u128::from(state.updated);
    if state.window == 0 || at >= started + window {
        *state = State {
            window: 1,
            updated: u64::try_from(at).unwrap_or(u64::MAX),
            ..State::default()
        };
    }
    let reset = nanos((u128::from(state.updated) + window).saturating_sub(at));
    count(state, reset, limit, cost)
}

/// Takes `cost` from the window `state` is in, which ends in `reset`.
fn count(state: &mut State, reset: Duration, limit: u64, cost: u64) -> Taken {
    let used = state.used as u64;
    if used + cost <= limit {
        state.used += u128::from(cost);
        Taken {
            allowed: true,
            remaining: limit - used - cost,
            reset,
            retry_after: None,
        }
    } else {
        Taken {
            allowed: false,
            remaining: limit - used,
            reset,
            retry_after: Some(reset),
        }
    }
}

fn sliding(state: &mut State, at: u128, window: u128, limit: u64, cost: u64) -> Taken {
    let index = (at / window) as u64;
    if index != state.window {
        state.previous = if index == state.window + 1 {
            state.used as u64
        } else {
            0
        };
        state.used = 0;
        state.window = index;
    }
    let into = at - u128::from(index) * window; // nanoseconds into the current window
    let current = state.used as u64;
    // The previous window still counts for the part of it within the last `window`:
    // previous × (window − into) / window, rounded up so the estimate never undercounts.
    let weighted = (u128::from(state.previous) * (window - into)).div_ceil(window) as u64;
    let estimate = weighted + current;
    let reset = nanos(u128::from(index + 1) * window - at);
    if estimate + cost <= limit {
        state.used += u128::from(cost);
        return Taken {
            allowed: true,
            remaining: limit - estimate - cost,
            reset,
            retry_after: None,
        };
    }
    // When does `estimate + cost` fit? If the current window alone is too full, not before
    // the next window, where today's count becomes the weighted one; otherwise as soon as the
    // previous window's weight has decayed enough.
    let budget = limit - cost; // what the estimate may be
    let retry_after = if current > budget {
        // In the next window: current × (window − t) / window ≤ budget.
        let t = window - (u128::from(budget) * window) / u128::from(current);
        nanos(u128::from(index + 1) * window + t - at)
    } else {
        // In this window: previous × (window − into') / window ≤ budget − current.
        let room = u128::from(budget - current);
        let into_needed = window - (room * window) / u128::from(state.previous.max(1));
        nanos(into_needed.saturating_sub(into).max(1))
    };
    Taken {
        allowed: false,
        remaining: limit.saturating_sub(estimate),
        reset,
        retry_after: Some(retry_after),
    }
}

fn bucket(state: &mut State, at: u128, window: u128, limit: u64, cost: u64) -> Taken {
    // Tokens are counted in units of 1/window of a token per nanosecond: `missing` is the
    // number of missing tokens × window (exact integer arithmetic, no drift).
    let full = u128::from(limit) * window;
    let elapsed = at.saturating_sub(u128::from(state.updated));
    state.updated = u64::try_from(at).unwrap_or(u64::MAX);
    // Each nanosecond refills `limit` / `window` tokens, i.e. `limit` units of `missing`.
    let missing = state.used.saturating_sub(elapsed * u128::from(limit));
    let present = full - missing; // tokens × window
    let need = u128::from(cost) * window;
    if present >= need {
        state.used = missing + need;
        let remaining = ((present - need) / window) as u64;
        Taken {
            allowed: true,
            remaining,
            reset: nanos((missing + need).div_ceil(u128::from(limit))),
            retry_after: None,
        }
    } else {
        state.used = missing;
        Taken {
            allowed: false,
            remaining: (present / window) as u64,
            reset: nanos(missing.div_ceil(u128::from(limit))),
            retry_after: Some(nanos((need - present).div_ceil(u128::from(limit)))),
        }
    }
}

/// The largest Structured Fields Integer (RFC 9651 §3.3.1).
const SF_INTEGER_MAX: u64 = 999_999_999_999_999;

/// The name of the one quota policy the IETF fields describe.
const IETF_POLICY: &str = "default";

/// Which headers a rate-limited API sends.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum HeaderStyle {
    /// The IETF structured fields as draft-ietf-httpapi-ratelimit-headers-11 writes them:
    /// `RateLimit-Policy: "default";q=100;w=60` (quota, window in seconds) and
    /// `RateLimit: "default";r=42;t=17` (remaining, seconds to the reset).
    #[default]
    Ietf,
    /// The older draft: `RateLimit-Limit`, `RateLimit-Remaining`, `RateLimit-Reset`.
    Draft,
    /// `X-RateLimit-Limit`, `X-RateLimit-Remaining`, `X-RateLimit-Reset` (GitHub and many
    /// others).
    XRateLimit,
    /// No rate-limit headers (the 429 still carries `Retry-After`).
    None,
}

/// How a reset time is written in the `*-Reset` headers.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ResetFormat {
    /// Seconds until the reset, rounded up.
    #[default]
    SecondsLeft,
    /// The reset as Unix epoch seconds, rounded up (GitHub).
    EpochSeconds,
}

/// The headers describing `taken` under `limit`, in `style`. `wall_now` dates an epoch-seconds
/// reset. Every number is a plain integer (no separators).
///
/// [`HeaderStyle::Ietf`] follows draft-ietf-httpapi-ratelimit-headers-11 (its sections):
///
/// - `RateLimit-Policy` (§3) is a List of one quota policy Item, the String `"default"`, with
///   `q` (§3.1.1), the limit in quota units, and `w` (§3.1.3), the window in whole seconds,
///   rounded up (the draft has no sub-second windows and no zero one: a zero window, which
///   config validation refuses anyway, is left out). `qu` (§3.1.2) is left out: the unit is
///   the default, `requests` (a `cost` above 1 makes one request take several). `pk`
///   (§3.1.4) is optional and left out: a client gains nothing from its own identity echoed.
/// - `RateLimit` (§4) is a List of one service limit Item naming the same policy, with `r`
///   (§4.1.1), the units remaining, and `t` (§4.1.2), the seconds until more quota, rounded
///   up. On a refusal `t` is the time until this request fits again, the `Retry-After` sent
///   with it: §6 asks that `Retry-After` not point earlier than `t`, and a client that reads
///   only `RateLimit` then waits as long as one that reads `Retry-After`. Otherwise it is
///   the time until the limit is whole again.
///
/// Integers are capped at the Structured Fields maximum, 999 999 999 999 999 (RFC 9651
/// §3.3.1), so the fields stay valid for any config.
pub(crate) fn headers(
    limit: &Limit,
    taken: &Taken,
    style: HeaderStyle,
    reset_format: ResetFormat,
    wall_now: SystemTime,
) -> Vec<(HeaderName, HeaderValue)> {
    let reset_left = ceil_secs(taken.reset);
    let reset = match reset_format {
        ResetFormat::SecondsLeft => reset_left,
        ResetFormat::EpochSeconds => {
            let now = wall_now.duration_since(UNIX_EPOCH).unwrap_or_default();
            ceil_secs(now + taken.reset)
        }
    };
    let number = |n: u64| HeaderValue::from(n);
    match style {
        HeaderStyle::None => Vec::new(),
        HeaderStyle::Ietf => {
            let sf = |n: u64| n.min(SF_INTEGER_MAX);
            let mut policy = format!("\"{IETF_POLICY}\";q={}", sf(limit.limit));
            if !limit.window.is_zero() {
                policy.push_str(&format!(";w={}", sf(ceil_secs(limit.window))));
            }
            let more_quota = match taken.retry_after {
                Some(wait) if !taken.allowed => ceil_secs(wait),
                _ => reset_left,
            };
            let state = format!(
                "\"{IETF_POLICY}\";r={};t={}",
                sf(taken.remaining),
                sf(more_quota)
            );
            [("ratelimit-policy", policy), ("ratelimit", state)]
                .into_iter()
                .filter_map(|(name, value)| {
                    Some((
                        HeaderName::from_static(name),
                        HeaderValue::try_from(value).ok()?,
                    ))
                })
                .collect()
        }
        HeaderStyle::Draft => vec![
            (
                HeaderName::from_static("ratelimit-limit"),
                number(limit.limit),
            ),
            (
                HeaderName::from_static("ratelimit-remaining"),
                number(taken.remaining),
            ),
            (HeaderName::from_static("ratelimit-reset"), number(reset)),
        ],
        HeaderStyle::XRateLimit => vec![
            (
                HeaderName::from_static("x-ratelimit-limit"),
                number(limit.limit),
            ),
            (
                HeaderName::from_static("x-ratelimit-remaining"),
                number(taken.remaining),
            ),
            (HeaderName::from_static("x-ratelimit-reset"), number(reset)),
        ],
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use holdoff::clock::SystemClock;

    const S: Duration = Duration::from_secs(1);
    const MS: Duration = Duration::from_millis(1);

    fn limiter(algorithm: Algorithm, limit: u64, window: Duration) -> (RateLimiter, Instant) {
        let t0 = SystemClock.now();
        let limit = Limit {
            algorithm,
            limit,
            window,
            cost: 1,
        };
        (RateLimiter::new(limit, t0), t0)
    }

    fn admitted(l: &RateLimiter, key: &str, at: Instant, n: usize) -> usize {
        (0..n).filter(|_| l.take(key, at).allowed).count()
    }

    mod fixed_window {
        use super::*;

        #[test]
        fn admits_the_limit_then_says_when_the_window_ends() {
            let (l, t0) = limiter(Algorithm::FixedWindow, 3, 10 * S);
            assert_eq!(admitted(&l, "a", t0 + 2 * S, 3), 3);
            let refused = l.take("a", t0 + 2 * S + 250 * MS);
            assert!(!refused.allowed);
            assert_eq!(refused.remaining, 0);
            assert_eq!(refused.retry_after, Some(7 * S + 750 * MS));
            assert_eq!(ceil_secs(refused.retry_after.unwrap_or_default()), 8);
            assert!(l.take("a", t0 + 10 * S).allowed);
        }

        #[test]
        fn counts_keys_apart() {
            let (l, t0) = limiter(Algorithm::FixedWindow, 1, 10 * S);
            assert!(l.take("alice", t0).allowed);
            assert!(l.take("bob", t0).allowed);
            assert!(!l.take("alice", t0).allowed);
        }
    }

    mod fixed_from_first_request {
        use super::*;

        #[test]
        fn starts_the_window_at_the_first_request_and_the_next_after_it_ends() {
            let (l, t0) = limiter(Algorithm::FixedFromFirstRequest, 2, 10 * S);
            // The first request comes 7 s after the limiter's epoch: its window ends at 17 s,
            // where an aligned window would have ended at 10 s.
            let first = l.take("a", t0 + 7 * S);
            assert!(first.allowed);
            assert_eq!(first.reset, 10 * S);
            assert!(l.take("a", t0 + 12 * S).allowed);
            let refused = l.take("a", t0 + 16 * S);
            assert!(!refused.allowed);
            assert_eq!(refused.retry_after, Some(S));
            // The next window starts with the first request after 17 s, not at 17 s.
            let later = l.take("a", t0 + 30 * S);
            assert!(later.allowed);
            assert_eq!((later.remaining, later.reset), (1, 10 * S));
            assert!(l.take("a", t0 + 39 * S).allowed);
            assert!(!l.take("a", t0 + 39 * S + 500 * MS).allowed);
        }

        #[test]
        fn keeps_each_keys_window_apart_and_evicts_idle_ones() {
            let (l, t0) = limiter(Algorithm::FixedFromFirstRequest, 1, 10 * S);
            assert!(l.take("alice", t0).allowed);
            let bob = l.take("bob", t0 + 5 * S);
            assert!(bob.allowed);
            assert_eq!(bob.reset, 10 * S);
            assert!(!l.take("alice", t0 + 9 * S).allowed);
            assert_eq!(l.evict(t0 + 22 * S), 1, "alice's window is two windows old");
            assert_eq!(l.evict(t0 + 26 * S), 1);
        }
    }

    mod sliding_window {
        use super::*;

        #[test]
        fn a_full_previous_window_still_counts_at_the_edge() {
            let (l, t0) = limiter(Algorithm::SlidingWindow, 10, 10 * S);
            assert_eq!(admitted(&l, "a", t0 + 9 * S, 10), 10);
            // One second into the next window, 90 % of the previous 10 still counts: 9.
            assert_eq!(admitted(&l, "a", t0 + 11 * S, 10), 1);
        }

        #[test]
        fn the_wait_it_gives_is_enough() {
            let (l, t0) = limiter(Algorithm::SlidingWindow, 10, 10 * S);
            admitted(&l, "a", t0 + 9 * S, 10);
            let refused = l.take("a", t0 + 9 * S);
            let wait = refused.retry_after.expect("refused");
            assert!(!l.take("a", t0 + 9 * S + wait - MS).allowed);
            assert!(l.take("a", t0 + 9 * S + wait).allowed);
        }
    }

    mod token_bucket {
        use super::*;

        #[test]
        fn refills_continuously() {
            let (l, t0) = limiter(Algorithm::TokenBucket, 10, 10 * S);
            assert_eq!(admitted(&l, "a", t0, 12), 10);
            let refused = l.take("a", t0);
            assert_eq!(refused.retry_after, Some(S));
            assert!(!l.take("a", t0 + S - MS).allowed);
            assert!(l.take("a", t0 + S).allowed);
            // Four more seconds, four more tokens (the one at 1 s was used).
            assert_eq!(admitted(&l, "a", t0 + 5 * S, 10), 4);
        }

        #[test]
        fn reports_the_time_to_a_full_bucket() {
            let (l, t0) = limiter(Algorithm::TokenBucket, 10, 10 * S);
            let taken = l.take("a", t0);
            assert_eq!(taken.remaining, 9);
            assert_eq!(taken.reset, S);
        }
    }

    mod take {
        use super::*;

        #[test]
        fn a_cost_above_the_limit_never_fits() {
            let t0 = SystemClock.now();
            let l = RateLimiter::new(
                Limit {
                    algorithm: Algorithm::TokenBucket,
                    limit: 2,
                    window: S,
                    cost: 3,
                },
                t0,
            );
            assert!(!l.take("a", t0).allowed);
        }

        #[test]
        fn admits_exactly_the_limit_under_concurrency() {
            let (l, t0) = limiter(Algorithm::FixedWindow, 100, 60 * S);
            let l = std::sync::Arc::new(l);
            let handles: Vec<_> = (0..8)
                .map(|_| {
                    let l = l.clone();
                    std::thread::spawn(move || admitted(&l, "shared", t0 + S, 50))
                })
                .collect();
            let total: usize = handles.into_iter().map(|h| h.join().unwrap_or(0)).sum();
            assert_eq!(total, 100);
        }
    }

    mod headers {
        use super::*;

        fn value(headers: &[(HeaderName, HeaderValue)], name: &str) -> String {
            headers
                .iter()
                .find(|(n, _)| n == name)
                .and_then(|(_, v)| v.to_str().ok())
                .unwrap_or_default()
                .to_owned()
        }

        #[test]
        fn writes_each_style_with_plain_integers() {
            let limit = Limit {
                algorithm: Algorithm::FixedWindow,
                limit: 1000,
                window: 60 * S,
                cost: 1,
            };
            let taken = Taken {
                allowed: true,
                remaining: 999,
                reset: 16 * S + MS,
                retry_after: None,
            };
            let wall = UNIX_EPOCH + Duration::from_secs(1_700_000_000);
            let ietf = headers(
                &limit,
                &taken,
                HeaderStyle::Ietf,
                ResetFormat::SecondsLeft,
                wall,
            );
            assert_eq!(value(&ietf, "ratelimit-policy"), "\"default\";q=1000;w=60");
            assert_eq!(value(&ietf, "ratelimit"), "\"default\";r=999;t=17");
            let x = headers(
                &limit,
                &taken,
                HeaderStyle::XRateLimit,
                ResetFormat::EpochSeconds,
                wall,
            );
            assert_eq!(value(&x, "x-ratelimit-limit"), "1000");
            assert_eq!(value(&x, "x-ratelimit-reset"), "1700000017");
            let draft = headers(
                &limit,
                &taken,
                HeaderStyle::Draft,
                ResetFormat::SecondsLeft,
                wall,
            );
            assert_eq!(value(&draft, "ratelimit-reset"), "17");
        }

        fn ietf(limit: &Limit, taken: &Taken) -> Vec<(HeaderName, HeaderValue)> {
            headers(
                limit,
                taken,
                HeaderStyle::Ietf,
                ResetFormat::SecondsLeft,
                UNIX_EPOCH,
            )
        }

        /// Each field is a Structured Fields List of one Item, the String `"default"`, with
        /// exactly the parameters draft-11 defines, each of its type.
        fn ietf_items(headers: &[(HeaderName, HeaderValue)]) -> [(String, Vec<String>); 2] {
            ["ratelimit-policy", "ratelimit"].map(|name| {
                let raw = value(headers, name);
                let list: sfv::List = sfv::Parser::new(raw.as_bytes()).parse().unwrap();
                assert_eq!(list.len(), 1, "{name}: {raw}");
                let sfv::ListEntry::Item(item) = &list[0] else {
                    panic!("{name}: {raw} is an inner list")
                };
                assert_eq!(
                    item.bare_item.as_string().map(|s| s.as_str()),
                    Some("default")
                );
                for (key, value) in &item.params {
                    let n = value.as_integer().map(i64::from);
                    assert!(n.is_some_and(|n| n >= 0), "{name}: {key} in {raw}");
                }
                let keys = item.params.keys().map(|k| k.as_str().to_owned()).collect();
                (raw, keys)
            })
        }

        #[test]
        fn writes_draft_11_syntax() {
            let limit = Limit {
                algorithm: Algorithm::FixedWindow,
                limit: 100,
                window: 60 * S,
                cost: 1,
            };
            let taken = Taken {
                allowed: true,
                remaining: 42,
                reset: 17 * S,
                retry_after: None,
            };
            let [(policy, policy_keys), (state, state_keys)] = ietf_items(&ietf(&limit, &taken));
            assert_eq!(policy, "\"default\";q=100;w=60");
            assert_eq!(policy_keys, ["q", "w"]);
            assert_eq!(state, "\"default\";r=42;t=17");
            assert_eq!(state_keys, ["r", "t"]);
        }

        #[test]
        fn a_refusal_says_when_this_request_fits_again() {
            // A sliding window: the request fits again well before the window ends.
            let limit = Limit {
                algorithm: Algorithm::SlidingWindow,
                limit: 10,
                window: 60 * S,
                cost: 1,
            };
            let taken = Taken {
                allowed: false,
                remaining: 0,
                reset: 50 * S,
                retry_after: Some(4 * S + MS),
            };
            let fields = ietf(&limit, &taken);
            assert_eq!(value(&fields, "ratelimit"), "\"default\";r=0;t=5");
            ietf_items(&fields);
        }

        #[test]
        fn windows_are_whole_nonzero_seconds_and_integers_stay_in_range() {
            let taken = Taken {
                allowed: true,
                remaining: u64::MAX,
                reset: Duration::from_secs(u64::MAX),
                retry_after: None,
            };
            let mut limit = Limit {
                algorithm: Algorithm::TokenBucket,
                limit: u64::MAX,
                window: 250 * MS,
                cost: 1,
            };
            let fields = ietf(&limit, &taken);
            let max = "999999999999999";
            assert_eq!(
                value(&fields, "ratelimit-policy"),
                format!("\"default\";q={max};w=1")
            );
            assert_eq!(
                value(&fields, "ratelimit"),
                format!("\"default\";r={max};t={max}")
            );
            ietf_items(&fields);
            limit.window = Duration::ZERO;
            assert_eq!(
                value(&ietf(&limit, &taken), "ratelimit-policy"),
                format!("\"default\";q={max}")
            );
        }
    }
}
