//! [`RedisGate`]: the gate's "not before T" per key, shared by every process through Redis.

use std::convert::Infallible;
use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime};

use holdoff::Skew;
use holdoff::clock::{Clock, TokioClock};
use holdoff::gate::{GateStore, MemoryGateStore, NotBefore};

use crate::breaker::{Breaker, Probe, Words};
use crate::connection::{Connection, Lua, Nodes};
use crate::error::{Error, ErrorKind};

/// Keeps the later of the stored time and the given one, and makes the key expire at it.
///
/// KEYS[1]: the key; ARGV[1]: "not before", in wall-clock milliseconds since the Unix epoch.
/// Returns 1 if it moved the time, 0 if the stored time was already as late.
const RAISE: &str = r"
local given = tonumber(ARGV[1])
local stored = tonumber(redis.call('GET', KEYS[1]))
if stored ~= nil and stored >= given then
  return 0
end
redis.call('SET', KEYS[1], ARGV[1])
redis.call('PEXPIREAT', KEYS[1], ARGV[1])
return 1
";

/// What the gate answers while Redis cannot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum FailureMode {
    /// Carry on with this process's own state: a key is closed only if this process closed
    /// it itself. Work goes on; the fleet may call a throttled server early.
    FailOpen,
    /// Treat every key as closed for `hold` from each check, so nothing calls out until Redis
    /// is back (or `hold` has passed and the next check is refused again).
    FailClosed {
        /// How long one failed check keeps a key closed.
        hold: Duration,
    },
}

/// Settings for a [`RedisGate`]; see [`RedisGate::builder`].
#[derive(Clone)]
pub struct RedisGateBuilder {
    nodes: Nodes,
    prefix: String,
    timeout: Duration,
    root_ca: Option<Vec<u8>>,
    mode: FailureMode,
    clock: Arc<dyn Clock>,
}

impl fmt::Debug for RedisGateBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisGateBuilder")
            .field("url", &self.nodes.redacted())
            .field("prefix", &self.prefix)
            .field("timeout", &self.timeout)
            .field("mode", &self.mode)
            .finish_non_exhaustive()
    }
}

impl RedisGateBuilder {
    /// The defaults: keys under `holdoff:gate:`, 500 ms per operation, failing open.
    fn new(nodes: Nodes) -> RedisGateBuilder {
        RedisGateBuilder {
            nodes,
            prefix: "holdoff:gate:".to_owned(),
            timeout: Duration::from_millis(500),
            root_ca: None,
            mode: FailureMode::FailOpen,
            clock: Arc::new(TokioClock),
        }
    }

    /// The prefix put before every key (default `holdoff:gate:`): gates with different
    /// prefixes on one Redis never see each other's keys.
    pub fn prefix(mut self, prefix: impl Into<String>) -> RedisGateBuilder {
        self.prefix = prefix.into();
        self
    }

    /// How long one operation (connecting included) may take before it counts as a failure
    /// (default 500 ms).
    pub fn timeout(mut self, timeout: Duration) -> RedisGateBuilder {
        self.timeout = timeout;
        self
    }

    /// Verifies a `rediss://` server against this CA certificate (PEM) instead of the
    /// system's roots: for a Redis whose certificate a private CA issued.
    #[cfg(feature = "tls")]
    #[cfg_attr(docsrs, doc(cfg(feature = "tls")))]
    pub fn root_ca(mut self, pem: impl Into<Vec<u8>>) -> RedisGateBuilder {
        self.root_ca = Some(pem.into());
        self
    }

    /// What to answer while Redis cannot (default [`FailureMode::FailOpen`]).
    pub fn on_failure(mut self, mode: FailureMode) -> RedisGateBuilder {
        self.mode = mode;
        self
    }

    /// The clock for timeouts, skew, [`FailureMode::FailClosed`] holds and the circuit
    /// breaker's probes (default [`TokioClock`]).
    pub fn clock(mut self, clock: impl Clock + 'static) -> RedisGateBuilder {
        self.clock = Arc::new(clock);
        self
    }

    /// The gate store. It connects on first use, not here, and reconnects by itself after
    /// a failure, so a process may start while Redis is down.
    ///
    /// Must be called inside a tokio runtime (the connection's background tasks run on it).
    ///
    /// # Errors
    ///
    /// [`ErrorKind::InvalidUrl`] if the URL is not a Redis URL this build can use (a
    /// `rediss://` URL needs the `tls` feature); for a cluster, if there are no seeds, or
    /// they disagree on the password or on TLS, or one names a database other than 0 or a
    /// Unix socket.
    pub fn build(self) -> Result<RedisGate, Error> {
        let connection = (self.nodes)
            .client(self.timeout, self.root_ca.as_deref())?
            .connect(self.timeout)?;
        let url = self.nodes.redacted();
        let probe: Probe = {
            let (connection, timeout, clock) =
                (connection.clone(), self.timeout, Arc::clone(&self.clock));
            Arc::new(move || {
                let (mut connection, clock) = (connection.clone(), Arc::clone(&clock));
                Box::pin(async move { within(&*clock, timeout, connection.probe()).await })
            })
        };
        let words = Words {
            name: "redis gate",
            back: "sharing the gate through it again",
            closed_level: tracing::Level::INFO,
        };
        let breaker = Breaker::new(words, url.clone(), Arc::clone(&self.clock), probe);
        breaker.set_meanwhile(match self.mode {
            FailureMode::FailOpen => {
                "failing open: a key is closed only where this process closed it".to_owned()
            }
            FailureMode::FailClosed { hold } => {
                format!("failing closed: every key is closed for {hold:?} from each check")
            }
        });
        Ok(RedisGate {
            connection,
            raise: Lua::new(RAISE.to_owned()),
            url,
            prefix: self.prefix,
            timeout: self.timeout,
            mode: self.mode,
            clock: self.clock,
            local: MemoryGateStore::new(),
            breaker,
            errors: AtomicU64::new(0),
        })
    }
}

/// A [`GateStore`] in Redis: one "not before T" per key, shared by every process that uses
/// the same Redis and prefix.
///
/// T is stored as absolute wall-clock milliseconds since the Unix epoch, because processes'
/// monotonic clocks cannot be compared. [`GateStore::get`] answers
/// [`NotBefore::Wall`], which [`Gate`](holdoff::gate::Gate) turns into an instant on the
/// reading process's own monotonic clock, once, at read time
/// (`now + (T - wall_now)`): from then on the wait does not depend on the wall clock.
/// Clocks that disagree shift every wait by their difference; [`RedisGate::skew`] measures
/// it against Redis's `TIME`.
///
/// - `raise` is one atomic script: it keeps the later T and makes the key expire at T
///   (`PEXPIREAT`), so nothing is left behind once the window has passed.
/// - `get` is one `GET`.
/// - While Redis is unreachable or slow, the answer follows the [`FailureMode`], at once: a
///   circuit breaker opens on the first timeout or connection failure, and until a `PING` in
///   the background gets an answer (after 250 ms, then at intervals doubling to 5 s), no
///   operation waits for Redis. The change of state is logged once each way (`warn` when it
///   opens, with the error; `info` when it closes, with how long it was open), failures are
///   counted ([`RedisGate::errors`], [`RedisGate::openings`]), and the connection comes back
///   by itself.
///
/// # Examples
///
/// ```no_run
/// use std::sync::Arc;
/// use holdoff_redis::holdoff::gate::Gate;
/// use holdoff_redis::RedisGate;
///
/// # async fn example() -> Result<(), holdoff_redis::Error> {
/// let store = RedisGate::builder("redis://:password@127.0.0.1:6379/0").build()?;
/// let gate = Arc::new(Gate::new(store));
/// # Ok(()) }
/// ```
pub struct RedisGate {
    connection: Connection,
    raise: Lua,
    url: String,
    prefix: String,
    timeout: Duration,
    mode: FailureMode,
    clock: Arc<dyn Clock>,
    /// What this process raised itself, answered in [`FailureMode::FailOpen`].
    local: MemoryGateStore,
    breaker: Breaker,
    errors: AtomicU64,
}

impl fmt::Debug for RedisGate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisGate")
            .field("url", &self.url)
            .field("prefix", &self.prefix)
            .field("timeout", &self.timeout)
            .field("mode", &self.mode)
            .field("healthy", &self.is_healthy())
            .field("errors", &self.errors.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

impl RedisGate {
    /// Settings for a gate on the Redis at `url` (`redis://[user][:password@]host[:port][/db]`,
    /// or `rediss://` with the `tls` feature).
    pub fn builder(url: impl Into<String>) -> RedisGateBuilder {
        RedisGateBuilder::new(Nodes::Server(url.into()))
    }

    /// Settings for a gate on the Redis Cluster that `seeds` belong to
    /// (`redis://[user][:password@]host:port`, or `rediss://` with the `tls` feature): a few
    /// of its nodes, any of them, from which the client learns the others. They share one
    /// password and either all use TLS or none.
    ///
    /// Each key is one Redis key, read and raised on the primary that serves its slot; the
    /// client follows `MOVED` and `ASK` when slots move, and learns the slots anew when a
    /// replica takes over from a failed primary.
    pub fn cluster_builder<S: Into<String>>(
        seeds: impl IntoIterator<Item = S>,
    ) -> RedisGateBuilder {
        RedisGateBuilder::new(Nodes::Cluster(seeds.into_iter().map(Into::into).collect()))
    }

    /// The Redis URL with its password replaced by `***` (a cluster's seeds so, separated by
    /// commas and followed by ` (cluster)`).
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The Redis key that holds `key`'s time.
    pub fn redis_key(&self, key: &str) -> String {
        format!("{}{key}", self.prefix)
    }

    /// How many operations have failed since the gate was built, those refused while the
    /// circuit was open included.
    pub fn errors(&self) -> u64 {
        self.errors.load(Ordering::Relaxed)
    }

    /// Whether the circuit is closed: false from an operation that timed out or could not
    /// reach Redis until a probe in the background gets an answer. While it is false, no
    /// operation asks Redis, and each fails at once with [`ErrorKind::CircuitOpen`].
    pub fn is_healthy(&self) -> bool {
        !self.breaker.is_open()
    }

    /// How many times the circuit has opened since the gate was built.
    pub fn openings(&self) -> u64 {
        self.breaker.openings()
    }

    /// The time `key` opens again as Redis has it, without the failure mode.
    ///
    /// # Errors
    ///
    /// When Redis cannot answer in time, or holds something that is not a time; at once,
    /// with [`ErrorKind::CircuitOpen`], while the circuit is open.
    pub async fn try_get(&self, key: &str) -> Result<Option<SystemTime>, Error> {
        let mut connection = self.connection.clone();
        let key = self.redis_key(key);
        let millis: Option<u64> = self
            .bounded(async move {
                redis::cmd("GET")
                    .arg(key)
                    .query_async(&mut connection)
                    .await
            })
            .await?;
        Ok(millis.map(|ms| SystemTime::UNIX_EPOCH + Duration::from_millis(ms)))
    }

    /// Closes `key` until at least `until` (wall clock) in Redis, without the failure mode.
    /// Returns whether the stored time moved.
    ///
    /// # Errors
    ///
    /// When Redis cannot answer in time; at once, with [`ErrorKind::CircuitOpen`], while the
    /// circuit is open.
    pub async fn try_raise(&self, key: &str, until: SystemTime) -> Result<bool, Error> {
        let millis = wall_millis(until);
        let mut connection = self.connection.clone();
        let (key, millis) = (self.redis_key(key), millis.to_string());
        let moved: i64 = self
            .bounded(async move { self.raise.run(&mut connection, &key, &[&millis]).await })
            .await?;
        Ok(moved == 1)
    }

    /// How far Redis's clock (`TIME`) is from this process's wall clock, taking the local
    /// reading halfway through the round trip.
    ///
    /// Every process reads T against its own wall clock, so a process whose clock is behind
    /// the one that wrote T waits that much longer, and one ahead waits that much less.
    ///
    /// # Errors
    ///
    /// When Redis cannot answer in time; at once, with [`ErrorKind::CircuitOpen`], while the
    /// circuit is open.
    pub async fn skew(&self) -> Result<Skew, Error> {
        let mut connection = self.connection.clone();
        let before = self.clock.wall_now();
        let (secs, micros): (u64, u64) = self
            .bounded(async move { redis::cmd("TIME").query_async(&mut connection).await })
            .await?;
        let after = self.clock.wall_now();
        let local = before + after.duration_since(before).unwrap_or_default() / 2;
        let redis =
            SystemTime::UNIX_EPOCH + Duration::from_secs(secs) + Duration::from_micros(micros);
        Ok(match redis.duration_since(local) {
            Ok(ahead) => Skew::Ahead(ahead),
            Err(behind) => Skew::Behind(behind.duration()),
        })
    }

    /// Runs one Redis operation within the timeout, through the circuit breaker, and counts
    /// failures.
    async fn bounded<T>(
        &self,
        operation: impl Future<Output = redis::RedisResult<T>>,
    ) -> Result<T, Error> {
        let outcome = self
            .breaker
            .call(within(&*self.clock, self.timeout, operation))
            .await;
        if outcome.is_err() {
            self.errors.fetch_add(1, Ordering::Relaxed);
        }
        outcome
    }
}

/// `operation`, or [`ErrorKind::Timeout`] once `timeout` has passed on `clock`.
async fn within<T>(
    clock: &dyn Clock,
    timeout: Duration,
    operation: impl Future<Output = redis::RedisResult<T>>,
) -> Result<T, Error> {
    let deadline = clock.now() + timeout;
    tokio::select! {
        result = operation => result.map_err(Error::from_redis),
        () = clock.sleep_until(deadline) => Err(Error::new(ErrorKind::Timeout)),
    }
}

impl GateStore for RedisGate {
    /// Never returned: while Redis cannot answer, the [`FailureMode`] answers instead.
    type Error = Infallible;

    async fn get(&self, key: &str) -> Result<Option<NotBefore>, Infallible> {
        Ok(match self.try_get(key).await {
            Ok(wall) => wall.map(NotBefore::Wall),
            Err(_) => match self.mode {
                FailureMode::FailOpen => self.local.get_now(key).map(NotBefore::Instant),
                FailureMode::FailClosed { hold } => {
                    let now = self.clock.now();
                    Some(NotBefore::Instant(now.checked_add(hold).unwrap_or(now)))
                }
            },
        })
    }

    async fn raise(
        &self,
        key: &str,
        until: Instant,
        until_wall: SystemTime,
    ) -> Result<(), Infallible> {
        // Kept here too, for fail-open answers while Redis is away.
        self.local.raise(key, until, until_wall).await?;
        // A failure is already counted and logged; the mode governs the next `get`.
        let _ = self.try_raise(key, until_wall).await;
        Ok(())
    }
}

/// Milliseconds since the Unix epoch, rounded up so a reader never opens early; 0 before it.
fn wall_millis(at: SystemTime) -> u64 {
    let since = at
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap_or_default();
    let millis = since.as_millis() + u128::from(!since.subsec_nanos().is_multiple_of(1_000_000));
    u64::try_from(millis).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    mod wall_millis {
        use super::*;

        #[test]
        fn rounds_up_to_the_next_millisecond() {
            let at = SystemTime::UNIX_EPOCH + Duration::from_micros(1_500);
            assert_eq!(wall_millis(at), 2);
            assert_eq!(
                wall_millis(SystemTime::UNIX_EPOCH + Duration::from_millis(7)),
                7
            );
        }

        #[test]
        fn is_zero_before_the_epoch() {
            assert_eq!(
                wall_millis(SystemTime::UNIX_EPOCH - Duration::from_secs(1)),
                0
            );
        }
    }
}
