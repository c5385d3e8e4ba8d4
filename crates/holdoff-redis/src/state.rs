//! [`RedisState`]: the proxy's open windows and rate-limit counters, shared by its replicas
//! through Redis.

use std::cell::RefCell;
use std::fmt;
use std::future::{Future, ready};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use holdoff::clock::TokioClock;
use holdoff_proxy::fault::{Algorithm, Limit, Taken};
use holdoff_proxy::fault::{BudgetCheck, Spent, TokenBudget, Usage};
use holdoff_proxy::judge::{Penalty, WindowKey};
use holdoff_proxy::shared::{
    Circuit, CounterKey, OnFailure, SharedCheck, SharedState, StateFuture,
};
use redis::aio::ConnectionManager;
use redis::{FromRedisValue, Script};

use crate::breaker::{Breaker, Probe, Words};
use crate::error::{Error, ErrorKind};
use crate::url::{client, manager, redact};

/// Helpers every script starts with. Lua numbers are doubles: every value here is an integer
/// below 2^53, where doubles are exact, and is divided and written with care.
const PRELUDE: &str = r"
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
const OPEN: &str = r"
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
const CHECK: &str = r"
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
const TAKE: &str = r"
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
const BUDGET_CHECK: &str = r"
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
const BUDGET_SPEND: &str = r"
if redis.call('HGET', KEYS[1], 'i') ~= ARGV[1] then
  return 0
end
redis.call('HINCRBY', KEYS[1], 'p', ARGV[2])
redis.call('HINCRBY', KEYS[1], 'c', ARGV[3])
return 1
";

/// The largest wait or retention in µs (about 35 years): times stay below 2^53 in Lua.
const MAX_MICROS: u64 = 1 << 50;
/// The largest product the scripts form (limit × window): exact in a double.
const MAX_EXACT: u64 = 1 << 52;

/// Settings for a [`RedisState`]; see [`RedisState::builder`].
#[derive(Clone)]
pub struct RedisStateBuilder {
    url: String,
    prefix: String,
    timeout: Duration,
    root_ca: Option<Vec<u8>>,
}

impl fmt::Debug for RedisStateBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisStateBuilder")
            .field("url", &redact(&self.url))
            .field("prefix", &self.prefix)
            .field("timeout", &self.timeout)
            .finish()
    }
}

impl RedisStateBuilder {
    /// The prefix put before every key (default `holdoff:`): proxies with different prefixes
    /// on one Redis never see each other's windows or counters.
    pub fn prefix(mut self, prefix: impl Into<String>) -> RedisStateBuilder {
        self.prefix = prefix.into();
        self
    }

    /// How long one operation (connecting included) may take before it fails with
    /// [`ErrorKind::Timeout`] (default 500 ms).
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
    /// [`ErrorKind::InvalidUrl`] if the URL is not a Redis URL this build can use (a
    /// `rediss://` URL needs the `tls` feature).
    pub fn build(self) -> Result<RedisState, Error> {
        let link = Link {
            client: client(&self.url, self.root_ca.as_deref())?,
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            generation: Arc::new(AtomicU64::new(0)),
            timeout: self.timeout,
        };
        let url = redact(&self.url);
        let probe: Probe = {
            let link = link.clone();
            Arc::new(move || {
                let link = link.clone();
                Box::pin(async move { link.query::<()>(redis::cmd("PING")).await })
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
        let script = |body: &str| Script::new(&format!("{PRELUDE}{body}"));
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

/// A [`SharedState`] in Redis: the windows and rate-limit counters that proxy replicas in
/// front of one API share.
///
/// Each operation is one Lua script, run atomically by Redis in one round trip (`EVALSHA`;
/// the script is loaded again by itself after a Redis restart). Concurrent operations share
/// a multiplexed connection per thread and are pipelined on it. Each is bounded by the timeout,
/// connecting included, and the connection comes back by itself after a failure.
///
/// # Failures
///
/// A circuit breaker stands in front of Redis: once an operation times out or cannot reach
/// it, every later one fails at once with [`ErrorKind::CircuitOpen`], never waiting for
/// Redis, and the proxy's `SharedStore` answers it by its failure mode. A task in the
/// background sends `PING` (within the same timeout) 250 ms after the failure, then at
/// intervals doubling up to 5 s, and the first answer closes the circuit. Every thread's
/// connection is made anew after a failure. The store logs when the circuit opens, with the
/// error and the proxy's failure mode, and when it closes, with how long it was open; both at
/// `warn`, so that a proxy logging at `warn` shows the end of an outage as well as its start.
/// [`RedisState::is_open`] and [`RedisState::openings`] say the same.
///
/// # Keys
///
/// - `{prefix}w:{window key}`: an open window, a hash of when it opened, its permitted time
///   and its retention. It expires its retention after the permitted time (moved along by a
///   sliding penalty), and a compliant check deletes it.
/// - `{prefix}rl:{rule}:{scope}`: a rate-limit counter, a hash. A fixed window's expires when
///   the window ends, a sliding window's when the next one ends, a bucket's when it would be
///   full again. A refused request creates no counter.
/// - `{prefix}tk:{rule}:{scope}`: a token budget's window, a hash of its identity, its end
///   and the tokens used; it expires when the window ends.
///
/// # Time
///
/// Every time is read from Redis's clock (`TIME`) inside the scripts, never the proxies', in
/// microseconds (Redis 5 or later replicates a script's effects, so this is allowed). Fixed
/// windows are aligned to multiples of the window since the Unix epoch on that clock. Times
/// the caller waits on are rounded up, never down: a `retry_after` is never shorter than
/// the true wait. Waits and retentions are capped at about 35 years, limits at 2^52; a limit
/// whose limit × window in µs exceeds 2^52 is counted in coarser time (ms, …), so that every
/// number stays exact in Lua's doubles.
///
/// # Examples
///
/// ```no_run
/// use std::sync::Arc;
/// use std::time::Duration;
/// use holdoff_proxy::shared::{OnFailure, SharedStore};
/// use holdoff_redis::RedisState;
///
/// # async fn example() -> Result<(), holdoff_redis::Error> {
/// let state = RedisState::builder("redis://:password@10.0.0.5:6379/0")
///     .prefix("myapi:")
///     .timeout(Duration::from_millis(200))
///     .build()?;
/// let store = SharedStore::new(Arc::new(state), OnFailure::FailOpen);
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct RedisState {
    inner: Arc<Inner>,
}

struct Inner {
    link: Link,
    breaker: Breaker,
    open: Script,
    check: Script,
    take: Script,
    budget_check: Script,
    budget_spend: Script,
    url: String,
    prefix: String,
}

/// How a store reaches Redis: a connection per thread, each operation within the timeout.
/// The circuit breaker's probe has one too.
#[derive(Clone)]
struct Link {
    client: redis::Client,
    /// Tells this store's connections apart from other stores' in [`CONNECTIONS`].
    id: u64,
    /// Moves on at every failure: a thread's connection from an earlier generation is
    /// dropped and made anew on its next use, so that no thread goes back to Redis, once
    /// the circuit closes, on a connection broken during the outage.
    generation: Arc<AtomicU64>,
    timeout: Duration,
}

impl fmt::Debug for RedisState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisState")
            .field("url", &self.inner.url)
            .field("prefix", &self.inner.prefix)
            .field("timeout", &self.inner.link.timeout)
            .field("circuit", &self.inner.breaker)
            .finish_non_exhaustive()
    }
}

impl RedisState {
    /// Settings for a store on the Redis at `url`
    /// (`redis://[user][:password@]host[:port][/db]`, or `rediss://` with the `tls` feature).
    pub fn builder(url: impl Into<String>) -> RedisStateBuilder {
        RedisStateBuilder {
            url: url.into(),
            prefix: "holdoff:".to_owned(),
            timeout: Duration::from_millis(500),
            root_ca: None,
        }
    }

    /// The Redis URL with its password replaced by `***`.
    pub fn url(&self) -> &str {
        &self.inner.url
    }

    /// The Redis key of the window `key`: `{prefix}w:{key}`.
    pub fn window_key(&self, key: WindowKey) -> String {
        format!("{}w:{key}", self.inner.prefix)
    }

    /// The Redis key of the counter `counter`: `{prefix}rl:{rule}:{scope}`.
    pub fn counter_key(&self, counter: &CounterKey) -> String {
        format!("{}rl:{}:{}", self.inner.prefix, counter.rule, counter.scope)
    }

    /// The Redis key of the token budget `counter`: `{prefix}tk:{rule}:{scope}`.
    pub fn budget_key(&self, counter: &CounterKey) -> String {
        format!("{}tk:{}:{}", self.inner.prefix, counter.rule, counter.scope)
    }

    /// Whether the circuit is open: from an operation that timed out or could not reach
    /// Redis until a probe in the background gets an answer. Meanwhile every operation fails
    /// at once with [`ErrorKind::CircuitOpen`], without asking Redis.
    pub fn is_open(&self) -> bool {
        self.inner.breaker.is_open()
    }

    /// How many times the circuit has opened since the store was built.
    pub fn openings(&self) -> u64 {
        self.inner.breaker.openings()
    }
}

/// Numbers the stores, for [`CONNECTIONS`].
static NEXT_ID: AtomicU64 = AtomicU64::new(0);

thread_local! {
    /// This thread's connection for each store (by id), with the generation it was made in;
    /// made on first use on the thread.
    ///
    /// A proxy serves each client connection on one thread with a runtime of its own: a
    /// connection per thread keeps each Redis round trip on that thread too, its driver
    /// polled by the same runtime as the request waiting for it, instead of crossing to
    /// another thread and back twice per request.
    static CONNECTIONS: RefCell<Vec<(u64, u64, ConnectionManager)>> =
        const { RefCell::new(Vec::new()) };
}

impl Link {
    /// This thread's connection, made now if it has none of the current generation
    /// (connecting itself waits for the first command, on whatever runtime then runs here).
    fn connection(&self) -> Result<ConnectionManager, Error> {
        let generation = self.generation.load(Ordering::Acquire);
        CONNECTIONS.with_borrow_mut(|connections| {
            if let Some(at) = connections.iter().position(|(id, _, _)| *id == self.id) {
                if connections[at].1 == generation {
                    return Ok(connections[at].2.clone());
                }
                connections.swap_remove(at);
            }
            let connection = manager(self.client.clone(), self.timeout)?;
            connections.push((self.id, generation, connection.clone()));
            Ok(connection)
        })
    }

    /// `operation` on this thread's connection, within the timeout; after a failure, every
    /// thread's connection is made anew.
    async fn bounded<T, F>(
        &self,
        operation: impl FnOnce(ConnectionManager) -> F,
    ) -> Result<T, Error>
    where
        F: Future<Output = redis::RedisResult<T>>,
    {
        let outcome = match self.connection() {
            Ok(connection) => {
                match tokio::time::timeout(self.timeout, operation(connection)).await {
                    Ok(result) => result.map_err(Error::from_redis),
                    Err(_) => Err(Error::new(ErrorKind::Timeout)),
                }
            }
            Err(error) => Err(error),
        };
        if outcome.is_err() {
            self.generation.fetch_add(1, Ordering::AcqRel);
        }
        outcome
    }

    /// One command, within the timeout.
    async fn query<T: FromRedisValue>(&self, command: redis::Cmd) -> Result<T, Error> {
        self.bounded(|mut connection| async move { command.query_async(&mut connection).await })
            .await
    }
}

impl Inner {
    /// Whether `key` exists, through the circuit breaker.
    async fn exists(&self, key: &str) -> Result<bool, Error> {
        let mut command = redis::cmd("EXISTS");
        command.arg(key);
        self.breaker.call(self.link.query(command)).await
    }

    /// Runs `script` on `key` with `args`, through the circuit breaker.
    async fn run<T: FromRedisValue>(
        &self,
        script: &Script,
        key: String,
        args: &[&str],
    ) -> Result<T, Error> {
        let mut invocation = script.key(key);
        for arg in args {
            invocation.arg(*arg);
        }
        let operation = self.link.bounded(|mut connection| async move {
            invocation.invoke_async(&mut connection).await
        });
        self.breaker.call(operation).await
    }
}

impl SharedState for RedisState {
    fn check(&self, key: WindowKey, penalty: Penalty) -> StateFuture<SharedCheck> {
        let inner = Arc::clone(&self.inner);
        let key = self.window_key(key);
        let sliding = if penalty == Penalty::Sliding {
            "1"
        } else {
            "0"
        };
        Box::pin(async move {
            // Most requests have no window: one plain EXISTS answers them, far cheaper for
            // Redis than a script. A window found runs the script, which reads it again
            // atomically (a window closed in between reads as open there too).
            if !inner.exists(&key).await? {
                return Ok(SharedCheck::Open);
            }
            let reply: Vec<i64> = inner.run(&inner.check, key, &[sliding]).await?;
            checked(&reply).ok_or_else(|| Error::new(ErrorKind::Response).into())
        })
    }

    fn open(&self, key: WindowKey, wait: Duration, retention: Duration) -> StateFuture<()> {
        let inner = Arc::clone(&self.inner);
        let key = self.window_key(key);
        // Rounded up: the window never closes before the wait has passed.
        let (wait, retention) = (
            micros_up(wait).to_string(),
            micros_up(retention).to_string(),
        );
        Box::pin(async move {
            let _moved: i64 = inner.run(&inner.open, key, &[&wait, &retention]).await?;
            Ok(())
        })
    }

    fn take(&self, counter: &CounterKey, limit: Limit) -> StateFuture<Taken> {
        let Limit {
            algorithm,
            limit: count,
            window,
            cost,
        } = limit;
        if window.is_zero() || count == 0 || cost > count {
            return Box::pin(ready(Ok(Taken::never_fits(window))));
        }
        let name = match algorithm {
            Algorithm::FixedWindow => "fixed",
            Algorithm::SlidingWindow => "sliding",
            Algorithm::TokenBucket => "bucket",
            Algorithm::FixedFromFirstRequest => "first",
            _ => return Box::pin(ready(Err(Error::new(ErrorKind::Unsupported).into()))),
        };
        let count = count.min(MAX_EXACT);
        let cost = cost.min(count);
        let window_us = micros_up(window);
        let (unit, window_units) = match algorithm {
            // No product to keep exact, and windows stay aligned to the microsecond.
            Algorithm::FixedWindow | Algorithm::FixedFromFirstRequest => (1, window_us),
            _ => scale(count, window_us),
        };
        let inner = Arc::clone(&self.inner);
        let key = self.counter_key(counter);
        let args = [count, window_units, cost, unit].map(|n| n.to_string());
        Box::pin(async move {
            let reply: Vec<i64> = inner
                .run(
                    &inner.take,
                    key,
                    &[name, &args[0], &args[1], &args[2], &args[3]],
                )
                .await?;
            taken(&reply, unit).ok_or_else(|| Error::new(ErrorKind::Response).into())
        })
    }

    fn budget_check(&self, counter: &CounterKey, budget: TokenBudget) -> StateFuture<BudgetCheck> {
        let inner = Arc::clone(&self.inner);
        let key = self.budget_key(counter);
        // Lua compares the limits as doubles: a limit above 2^52 is as good as none.
        let args = [
            micros_up(budget.window).max(1),
            budget.prompt.min(MAX_EXACT),
            budget.completion.min(MAX_EXACT),
        ]
        .map(|n| n.to_string());
        Box::pin(async move {
            let reply: Vec<i64> = inner
                .run(&inner.budget_check, key, &[&args[0], &args[1], &args[2]])
                .await?;
            budget_checked(&reply).ok_or_else(|| Error::new(ErrorKind::Response).into())
        })
    }

    fn budget_spend(&self, counter: &CounterKey, window: u64, usage: Usage) -> StateFuture<()> {
        let inner = Arc::clone(&self.inner);
        let key = self.budget_key(counter);
        let args = [
            window,
            usage.prompt.min(MAX_EXACT),
            usage.completion.min(MAX_EXACT),
        ]
        .map(|n| n.to_string());
        Box::pin(async move {
            let _counted: i64 = inner
                .run(&inner.budget_spend, key, &[&args[0], &args[1], &args[2]])
                .await?;
            Ok(())
        })
    }

    fn location(&self) -> String {
        self.inner.url.clone()
    }

    fn circuit(&self) -> Option<Circuit> {
        Some(Circuit {
            open: self.is_open(),
            openings: self.openings(),
        })
    }

    fn set_on_failure(&self, on_failure: OnFailure) {
        self.inner.breaker.set_meanwhile(on_failure.meanwhile());
    }
}

/// A [`BUDGET_CHECK`] reply as a [`BudgetCheck`].
fn budget_checked(reply: &[i64]) -> Option<BudgetCheck> {
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
fn micros_up(d: Duration) -> u64 {
    u64::try_from(d.as_nanos().div_ceil(1_000))
        .unwrap_or(u64::MAX)
        .min(MAX_MICROS)
}

/// The [`CHECK`] script's answer; `None` if it is not one.
fn checked(reply: &[i64]) -> Option<SharedCheck> {
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
fn taken(reply: &[i64], unit: u64) -> Option<Taken> {
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
fn scale(limit: u64, window_us: u64) -> (u64, u64) {
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
