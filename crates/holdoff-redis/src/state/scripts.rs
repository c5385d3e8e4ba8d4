//! The Lua scripts Redis runs for the proxy's state, and their replies read back: every
//! operation is one script, atomic on the server and timed by Redis's own clock.

use std::time::Duration;

use holdoff_proxy::fault::Taken;
use holdoff_proxy::fault::{BudgetCheck, Spent};
use holdoff_proxy::shared::SharedCheck;

/// Helpers every script starts with. Lua numbers are doubles: every value here is an integer
/// below 2^53, where doubles are exact, and is divided and written with care.
pub(super) const PRELUDE: &str = r"
-- Redis's clock in microseconds since the Unix epoch (about 2^51 today).
local function now_us()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end
-- a / b rounded down and up, for integers a >= 0, b > 0: exact, where math.floor(a / b)
-- could round a quotient just below an integer up to it.
local function div(a, b)
  return (a - math.fmod(a, b)) / b
end
local function div_ceil(a, b)
  local r = math.fmod(a, b)
  if r > 0 then return (a - r) / b + 1 end
  return a / b
end
-- An integer as an argument: Lua itself would write 1.7e+15 and lose digits.
local function int(n)
  return string.format('%.0f', n)
end
-- Expires `key` at `us` (microseconds since the epoch), rounded up to a millisecond.
local function expire_at(key, us)
  redis.call('PEXPIREAT', key, int(div_ceil(us, 1000)))
end
";

/// Opens a window, keeping the later permitted time.
///
/// KEYS[1]: the window, a hash of `o` (opened), `p` (permitted), both in µs since the epoch,
/// and `r` (retention, µs). ARGV[1]: the wait, ARGV[2]: the retention, in µs.
/// Returns 1 if it moved the permitted time, 0 if the window was already open as long.
pub(super) const OPEN: &str = r"
local now = now_us()
local permitted = now + tonumber(ARGV[1])
local retention = tonumber(ARGV[2])
local stored = tonumber(redis.call('HGET', KEYS[1], 'p'))
if stored and stored >= permitted then
  return 0
end
redis.call('HSET', KEYS[1], 'o', int(now), 'p', int(permitted), 'r', int(retention))
expire_at(KEYS[1], permitted + retention)
return 1
";

/// Judges a request arriving now, as `Judge::check` does.
///
/// KEYS[1]: the window (see [`OPEN`]). ARGV[1]: `1` for a sliding penalty, `0` for none.
/// Returns `{0}` (open), `{1, since_throttle, early_by, permitted_in}` (premature) or
/// `{2, since_throttle, late_by}` (compliant; the window is deleted), in µs.
pub(super) const CHECK: &str = r"
local now = now_us()
local w = redis.call('HMGET', KEYS[1], 'o', 'p', 'r')
local opened, permitted = tonumber(w[1]), tonumber(w[2])
if not (opened and permitted) then
  return {0}
end
-- TIME is a wall clock: should it step back, nothing reads as negative.
local since = math.max(now - opened, 0)
if now >= permitted then
  redis.call('DEL', KEYS[1])
  return {2, since, now - permitted}
end
local early = permitted - now
if ARGV[1] == '1' then
  -- The full wait again from this request; the key lives on for its retention after it.
  permitted = now + math.max(permitted - opened, 0)
  redis.call('HSET', KEYS[1], 'o', int(now), 'p', int(permitted))
  expire_at(KEYS[1], permitted + (tonumber(w[3]) or 0))
end
return {1, since, early, permitted - now}
";

/// Counts a request, as `RateLimiter::take` does, on Redis's clock.
///
/// KEYS[1]: the counter, a hash: `w` (window index) and `n` (units used in it) for a fixed
/// window; `s` (when the window started) and `n` for one from the first request; `w`, `n` and
/// `p` (units used in the previous window) for a sliding one; `m` (missing tokens × window)
/// and `u` (last update) for a bucket. ARGV: the algorithm (`fixed`, `first`, `sliding`,
/// `bucket`), the limit, the window in units, the cost, and the unit in
/// µs. Time runs in whole units (1 µs unless limit × window would leave exact doubles).
/// Returns `{allowed, remaining, reset, retry_after}`, times in units, retry_after -1 when
/// allowed. A refused request writes nothing (the next one computes the same state from what
/// is stored), so a refused request creates no key.
pub(super) const TAKE: &str = r"
local key = KEYS[1]
local algorithm = ARGV[1]
local limit, window, cost = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local unit = tonumber(ARGV[5])
local now = div(now_us(), unit)

if algorithm == 'fixed' then
  local index = div(now, window)
  local reset = (index + 1) * window - now
  local h = redis.call('HMGET', key, 'w', 'n')
  local used = 0
  if tonumber(h[1]) == index then used = tonumber(h[2]) or 0 end
  if used + cost <= limit then
    used = used + cost
    redis.call('HSET', key, 'w', int(index), 'n', int(used))
    expire_at(key, (index + 1) * window * unit)
    return {1, limit - used, reset, -1}
  end
  return {0, math.max(limit - used, 0), reset, reset}
end

if algorithm == 'first' then
  local h = redis.call('HMGET', key, 's', 'n')
  local start, used = tonumber(h[1]), tonumber(h[2]) or 0
  if start == nil or now >= start + window then start, used = now, 0 end
  local reset = start + window - now
  if used + cost <= limit then
    used = used + cost
    redis.call('HSET', key, 's', int(start), 'n', int(used))
    expire_at(key, (start + window) * unit)
    return {1, limit - used, reset, -1}
  end
  return {0, math.max(limit - used, 0), reset, reset}
end

if algorithm == 'sliding' then
  local index = div(now, window)
  local h = redis.call('HMGET', key, 'w', 'n', 'p')
  local stored = tonumber(h[1])
  local current, previous = 0, 0
  if stored == index then
    current, previous = tonumber(h[2]) or 0, tonumber(h[3]) or 0
  elseif stored == index - 1 then
    previous = tonumber(h[2]) or 0
  end
  local into = now - index * window
  -- The previous window counts for its part within the last `window`, rounded up so the
  -- estimate never undercounts.
  local estimate = div_ceil(previous * (window - into), window) + current
  local reset = (index + 1) * window - now
  if estimate + cost <= limit then
    redis.call('HSET', key, 'w', int(index), 'n', int(current + cost), 'p', int(previous))
    -- Read again in the next window, as its previous one.
    expire_at(key, (index + 2) * window * unit)
    return {1, limit - estimate - cost, reset, -1}
  end
  local budget = limit - cost
  local retry
  if current > budget then
    -- In the next window, once current × (window − t) / window ≤ budget.
    local t = window - div(budget * window, current)
    retry = (index + 1) * window + t - now
  else
    -- In this window, once previous × (window − into') / window ≤ budget − current.
    local into_needed = window - div((budget - current) * window, math.max(previous, 1))
    retry = math.max(into_needed - into, 1)
  end
  return {0, math.max(limit - estimate, 0), reset, retry}
end

-- bucket: refilled at `limit` per `window`; `missing` counts missing tokens × window, so
-- each unit of time refills `limit` of it, in exact integers.
local h = redis.call('HMGET', key, 'm', 'u')
local missing = tonumber(h[1]) or 0
local elapsed = math.min(math.max(now - (tonumber(h[2]) or now), 0), window)
missing = math.max(missing - elapsed * limit, 0)
local present = limit * window - missing
local need = cost * window
if present >= need then
  missing = missing + need
  local reset = div_ceil(missing, limit)
  redis.call('HSET', key, 'm', int(missing), 'u', int(now))
  -- Gone when the bucket would be full again: a fresh one reads alike.
  expire_at(key, (now + reset) * unit)
  return {1, div(present - need, window), reset, -1}
end
return {0, div(present, window), div_ceil(missing, limit), div_ceil(need - present, limit)}
";

/// Checks a token budget, as `TokenWindows::check` does, on Redis's clock.
///
/// KEYS[1]: the budget, a hash of `i` (the window's identity: when it started, µs since the
/// epoch), `e` (when it ends, µs), `p` and `c` (prompt and completion tokens used). ARGV: the
/// window in µs, the prompt and the completion limits. A window starts when there is none or
/// the last has ended, and the key expires when it ends. Returns `{0, reset, id}` (within),
/// `{1, reset, id}` (prompt used up) or `{2, reset, id}` (completion used up), reset in µs.
pub(super) const BUDGET_CHECK: &str = r"
local now = now_us()
local h = redis.call('HMGET', KEYS[1], 'i', 'e', 'p', 'c')
local id, ends = tonumber(h[1]), tonumber(h[2])
local prompt, completion = tonumber(h[3]) or 0, tonumber(h[4]) or 0
if not (id and ends) or now >= ends then
  id, ends, prompt, completion = now, now + tonumber(ARGV[1]), 0, 0
  redis.call('HSET', KEYS[1], 'i', int(id), 'e', int(ends), 'p', 0, 'c', 0)
  expire_at(KEYS[1], ends)
end
local verdict = 0
if prompt >= tonumber(ARGV[2]) then
  verdict = 1
elseif completion >= tonumber(ARGV[3]) then
  verdict = 2
end
return {verdict, ends - now, id}
";

/// Counts tokens in a budget's window, unless it has ended, as `TokenWindows::spend` does.
///
/// KEYS[1]: the budget (see [`BUDGET_CHECK`]). ARGV: the window's identity, the prompt and
/// the completion tokens. Returns 1 if they were counted, 0 if the window is gone.
pub(super) const BUDGET_SPEND: &str = r"
if redis.call('HGET', KEYS[1], 'i') ~= ARGV[1] then
  return 0
end
redis.call('HINCRBY', KEYS[1], 'p', ARGV[2])
redis.call('HINCRBY', KEYS[1], 'c', ARGV[3])
return 1
";

/// The largest wait or retention in µs (about 35 years): times stay below 2^53 in Lua.
pub(super) const MAX_MICROS: u64 = 1 << 50;
/// The largest product the scripts form (limit × window): exact in a double.
pub(super) const MAX_EXACT: u64 = 1 << 52;

/// A [`BUDGET_CHECK`] reply as a [`BudgetCheck`].
pub(super) fn budget_checked(reply: &[i64]) -> Option<BudgetCheck> {
    let [verdict, reset, id] = *reply else {
        return None;
    };
    let reset = Duration::from_micros(u64::try_from(reset).ok()?);
    let window = u64::try_from(id).ok()?;
    match verdict {
        0 => Some(BudgetCheck::Within { window }),
        1 => Some(BudgetCheck::Exhausted {
            spent: Spent::Prompt,
            reset,
        }),
        2 => Some(BudgetCheck::Exhausted {
            spent: Spent::Completion,
            reset,
        }),
        _ => None,
    }
}

/// `d` in whole microseconds, rounded up, at most [`MAX_MICROS`].
pub(super) fn micros_up(d: Duration) -> u64 {
    u64::try_from(d.as_nanos().div_ceil(1_000))
        .unwrap_or(u64::MAX)
        .min(MAX_MICROS)
}

/// The [`CHECK`] script's answer; `None` if it is not one.
pub(super) fn checked(reply: &[i64]) -> Option<SharedCheck> {
    let us = |n: i64| u64::try_from(n).ok().map(Duration::from_micros);
    Some(match *reply {
        [0] => SharedCheck::Open,
        [1, since, early, permitted_in] => SharedCheck::Premature {
            since_throttle: us(since)?,
            early_by: us(early)?,
            permitted_in: us(permitted_in)?,
        },
        [2, since, late] => SharedCheck::Compliant {
            since_throttle: us(since)?,
            late_by: us(late)?,
        },
        _ => return None,
    })
}

/// The [`TAKE`] script's answer, its times in units of `unit` µs; `None` if it is not one.
pub(super) fn taken(reply: &[i64], unit: u64) -> Option<Taken> {
    let time = |units: i64| {
        let us = u64::try_from(units).ok()?.checked_mul(unit)?;
        Some(Duration::from_micros(us))
    };
    let [allowed, remaining, reset, retry_after] = *reply else {
        return None;
    };
    let allowed = allowed == 1;
    Some(Taken {
        allowed,
        remaining: u64::try_from(remaining).ok()?,
        reset: time(reset)?,
        retry_after: if allowed {
            None
        } else {
            Some(time(retry_after)?)
        },
    })
}

/// The unit of time (µs, a power of ten) in which limit × window stays at most
/// [`MAX_EXACT`], and the window in that unit.
pub(super) fn scale(limit: u64, window_us: u64) -> (u64, u64) {
    let mut unit = 1;
    loop {
        let window = window_us.div_ceil(unit);
        if limit.saturating_mul(window) <= MAX_EXACT || window == 1 {
            return (unit, window);
        }
        unit *= 10;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    mod scale {
        use super::*;

        #[test]
        fn keeps_microseconds_while_the_product_is_exact() {
            assert_eq!(scale(1_000, 3_600_000_000), (1, 3_600_000_000));
        }

        #[test]
        fn coarsens_time_for_a_large_daily_limit() {
            // 1 000 000 a day: 8.64e16 in µs, 8.64e14 in units of 100 µs.
            let (unit, window) = scale(1_000_000, 86_400_000_000);
            assert_eq!((unit, window), (100, 864_000_000));
            assert!(1_000_000 * window <= MAX_EXACT);
        }

        #[test]
        fn ends_at_a_one_unit_window() {
            assert_eq!(scale(MAX_EXACT, 10), (10, 1));
        }
    }

    mod micros_up {
        use super::*;

        #[test]
        fn rounds_up_and_caps() {
            assert_eq!(micros_up(Duration::from_nanos(1)), 1);
            assert_eq!(micros_up(Duration::from_micros(30)), 30);
            assert_eq!(micros_up(Duration::MAX), MAX_MICROS);
        }
    }
}
