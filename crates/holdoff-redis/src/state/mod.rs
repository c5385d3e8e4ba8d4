//! [`RedisState`]: the proxy's open windows and rate-limit counters, shared by its replicas
//! through Redis.

use std::cell::RefCell;
use std::fmt;
use std::future::{Future, ready};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use holdoff_proxy::fault::{Algorithm, Limit, Taken};
use holdoff_proxy::fault::{BudgetCheck, TokenBudget, Usage};
use holdoff_proxy::judge::{Penalty, WindowKey};
use holdoff_proxy::shared::{
    Circuit, CounterKey, OnFailure, SharedCheck, SharedState, StateFuture,
};
use redis::FromRedisValue;

use crate::breaker::Breaker;
use crate::connection::{Client, Connection, Lua, Nodes};
use crate::error::{Error, ErrorKind};

mod builder;
mod scripts;

pub use builder::RedisStateBuilder;
use scripts::{MAX_EXACT, budget_checked, checked, micros_up, scale, taken};

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
/// Every script reads and writes its one key and no other, so on a Redis Cluster
/// ([`RedisState::cluster_builder`]) each runs on the primary that serves that key's slot,
/// and the keys spread over every primary. (A `{…}` in the prefix would be a hash tag, and
/// send every key to one slot.)
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
    open: Lua,
    check: Lua,
    take: Lua,
    budget_check: Lua,
    budget_spend: Lua,
    url: String,
    prefix: String,
}

/// How a store reaches Redis: a connection per thread, each operation within the timeout.
/// The circuit breaker's probe has one too.
#[derive(Clone)]
struct Link {
    client: Client,
    /// Tells this store's connections apart from other stores' in [`CONNECTIONS`].
    id: u64,
    /// Moves on at every failure of a single server: a thread's connection from an earlier
    /// generation is dropped and made anew on its next use, so that no thread goes back to
    /// Redis, once the circuit closes, on a connection broken during the outage. A cluster's
    /// connection is kept: it mends itself node by node (a node it cannot reach, slots that
    /// moved), where a new one would wait again for every seed, a dead one included.
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
        RedisStateBuilder::new(Nodes::Server(url.into()))
    }

    /// Settings for a store on the Redis Cluster that `seeds` belong to
    /// (`redis://[user][:password@]host:port`, or `rediss://` with the `tls` feature): a few
    /// of its nodes, any of them, from which the client learns the others and which slots
    /// each serves. They share one password and either all use TLS or none; the cluster has
    /// database 0 only.
    ///
    /// Each operation touches one key, so it runs on the one primary that serves the key's
    /// slot; the client follows `MOVED` and `ASK` when slots move, and learns the slots anew
    /// when a replica takes over from a failed primary.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// use holdoff_redis::RedisState;
    ///
    /// # async fn example() -> Result<(), holdoff_redis::Error> {
    /// let state = RedisState::cluster_builder(["redis://10.0.0.1:7000", "redis://10.0.0.2:7000"])
    ///     .prefix("myapi:")
    ///     .build()?;
    /// # Ok(()) }
    /// ```
    pub fn cluster_builder<S: Into<String>>(
        seeds: impl IntoIterator<Item = S>,
    ) -> RedisStateBuilder {
        RedisStateBuilder::new(Nodes::Cluster(seeds.into_iter().map(Into::into).collect()))
    }

    /// The Redis URL with its password replaced by `***` (a cluster's seeds so, separated by
    /// commas and followed by ` (cluster)`).
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
    static CONNECTIONS: RefCell<Vec<(u64, u64, Connection)>> =
        const { RefCell::new(Vec::new()) };
}

impl Link {
    /// This thread's connection, made now if it has none of the current generation
    /// (connecting itself waits for the first command, on whatever runtime then runs here).
    fn connection(&self) -> Result<Connection, Error> {
        let generation = self.generation.load(Ordering::Acquire);
        CONNECTIONS.with_borrow_mut(|connections| {
            if let Some(at) = connections.iter().position(|(id, _, _)| *id == self.id) {
                if connections[at].1 == generation {
                    return Ok(connections[at].2.clone());
                }
                connections.swap_remove(at);
            }
            let connection = self.client.connect(self.timeout)?;
            connections.push((self.id, generation, connection.clone()));
            Ok(connection)
        })
    }

    /// `operation` on this thread's connection, within the timeout; after a failure of a
    /// single server, every thread's connection is made anew.
    async fn bounded<T, F>(&self, operation: impl FnOnce(Connection) -> F) -> Result<T, Error>
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
        if outcome.is_err() && !self.client.is_cluster() {
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
        script: &Lua,
        key: String,
        args: &[&str],
    ) -> Result<T, Error> {
        let operation = self
            .link
            .bounded(|mut connection| async move { script.run(&mut connection, &key, args).await });
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
