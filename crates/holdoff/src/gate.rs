//! The gate: one server's "not before T" shared by every task that calls it.
//!
//! When any task learns a hint for a key (by default scheme + host + port), every task about
//! to call that key waits until T too, and each resumes at T plus its own jitter draw, so they
//! come back spread over the window rather than at one instant.
//!
//! The store behind the gate is a [`GateStore`]: [`MemoryGateStore`] ships here; a Redis store
//! serves a fleet of processes without changing callers.

use std::collections::HashMap;
use std::convert::Infallible;
use std::future::Future;
use std::sync::{Mutex, PoisonError, RwLock};
use std::time::{Duration, Instant, SystemTime};

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use crate::clock::Clock;
use crate::jitter::Jitter;

/// When a key opens again, as a store keeps it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NotBefore {
    /// On this process's monotonic clock (in-memory stores).
    Instant(Instant),
    /// On the wall clock (stores shared between processes, whose monotonic clocks differ).
    Wall(SystemTime),
}

/// Where a gate keeps its "not before T" per key.
///
/// `raise` only ever moves T later: a store must keep the later of what it has and what it
/// is given, atomically, so concurrent raises never shorten a wait.
pub trait GateStore: Send + Sync {
    /// Why the store could not answer.
    type Error: std::error::Error + Send + Sync + 'static;

    /// The time `key` opens again, if it is closed.
    fn get(&self, key: &str)
    -> impl Future<Output = Result<Option<NotBefore>, Self::Error>> + Send;

    /// Keeps `key` closed until at least this time (given on both clocks; the store keeps
    /// whichever it can share).
    fn raise(
        &self,
        key: &str,
        until: Instant,
        until_wall: SystemTime,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send;
}

/// The in-memory store: a map from key to monotonic instant behind a read-write lock.
///
/// A check takes a read lock and looks the key up without allocating. Entries that have
/// passed are dropped when the map grows.
#[derive(Debug, Default)]
pub struct MemoryGateStore {
    map: RwLock<HashMap<Box<str>, Instant>>,
}

impl MemoryGateStore {
    /// An empty store.
    pub fn new() -> MemoryGateStore {
        MemoryGateStore::default()
    }

    /// The time `key` opens again, read synchronously.
    pub fn get_now(&self, key: &str) -> Option<Instant> {
        self.map
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(key)
            .copied()
    }

    /// How many keys the store holds.
    pub fn len(&self) -> usize {
        self.map
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }

    /// Whether the store holds no key.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn raise_now(&self, key: &str, until: Instant) {
        let mut map = self.map.write().unwrap_or_else(PoisonError::into_inner);
        if map.len() >= 1024 && !map.contains_key(key) {
            // Drop keys that opened long before this one closes, to keep the map bounded by
            // the number of keys closed at once.
            map.retain(|_, at| *at + Duration::from_secs(60) > until);
        }
        match map.get_mut(key) {
            Some(at) => *at = (*at).max(until),
            None => {
                map.insert(key.into(), until);
            }
        }
    }
}

impl GateStore for MemoryGateStore {
    type Error = Infallible;

    async fn get(&self, key: &str) -> Result<Option<NotBefore>, Infallible> {
        Ok(self.get_now(key).map(NotBefore::Instant))
    }

    async fn raise(&self, key: &str, until: Instant, _: SystemTime) -> Result<(), Infallible> {
        self.raise_now(key, until);
        Ok(())
    }
}

/// A shared "not before T" per key, with the jitter that spreads waiting tasks.
///
/// Share one gate behind an `Arc` between every task (and every client) that calls the same
/// servers.
///
/// # Examples
///
/// ```
/// use holdoff::clock::{Clock, ManualClock};
/// use holdoff::gate::Gate;
/// use std::time::{Duration, SystemTime};
///
/// # tokio_test_block_on(async {
/// let clock = ManualClock::new(SystemTime::UNIX_EPOCH);
/// let gate = Gate::in_memory();
/// let until = clock.now() + Duration::from_secs(2);
/// gate.raise("https://api.example:443", until, clock.wall_now() + Duration::from_secs(2)).await.unwrap();
/// assert_eq!(gate.opens_at("https://api.example:443", &clock).await.unwrap(), Some(until));
/// # });
/// # fn tokio_test_block_on<F: std::future::Future>(f: F) -> F::Output {
/// #     tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(f)
/// # }
/// ```
#[derive(Debug)]
pub struct Gate<S = MemoryGateStore> {
    store: S,
    spread: Jitter,
    rng: Mutex<SmallRng>,
}

impl Gate<MemoryGateStore> {
    /// An in-memory gate that spreads waiting tasks over up to 1 s.
    pub fn in_memory() -> Gate<MemoryGateStore> {
        Gate::new(MemoryGateStore::new())
    }
}

impl<S: GateStore> Gate<S> {
    /// A gate over `store`, spreading waiting tasks over up to 1 s
    /// ([`Jitter::Uniform`]`(1 s)`).
    pub fn new(store: S) -> Gate<S> {
        Gate {
            store,
            spread: Jitter::Uniform(Duration::from_secs(1)),
            rng: Mutex::new(SmallRng::from_rng(&mut rand::rng())),
        }
    }

    /// How to spread the tasks that were held at the gate.
    pub fn spread(mut self, spread: Jitter) -> Gate<S> {
        self.spread = spread;
        self
    }

    /// Seeds the spread's random source, for reproducible tests.
    pub fn seed(self, seed: u64) -> Gate<S> {
        Gate {
            rng: Mutex::new(SmallRng::seed_from_u64(seed)),
            ..self
        }
    }

    /// The store behind the gate.
    pub fn store(&self) -> &S {
        &self.store
    }

    /// When `key` opens again, on `clock`'s monotonic clock; `None` if it is open.
    ///
    /// # Errors
    ///
    /// The store's error, if it could not answer.
    pub async fn opens_at<C: Clock + ?Sized>(
        &self,
        key: &str,
        clock: &C,
    ) -> Result<Option<Instant>, S::Error> {
        let now = clock.now();
        let at = match self.store.get(key).await? {
            None => return Ok(None),
            Some(NotBefore::Instant(at)) => at,
            // A shared wall time becomes an interval on this process's clocks, once.
            Some(NotBefore::Wall(wall)) => match wall.duration_since(clock.wall_now()) {
                Ok(ahead) => now.checked_add(ahead).unwrap_or(now),
                Err(_) => now,
            },
        };
        Ok((at > now).then_some(at))
    }

    /// When a task about to call `key` may go: `None` if the key is open, else the time it
    /// opens plus this task's own jitter draw.
    ///
    /// # Errors
    ///
    /// The store's error, if it could not answer.
    pub async fn admit_at<C: Clock + ?Sized>(
        &self,
        key: &str,
        clock: &C,
    ) -> Result<Option<Instant>, S::Error> {
        let Some(opens) = self.opens_at(key, clock).await? else {
            return Ok(None);
        };
        let unit: f64 = self
            .rng
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .random();
        let jitter = self.spread.scale(opens - clock.now(), unit);
        Ok(Some(opens.checked_add(jitter).unwrap_or(opens)))
    }

    /// Closes `key` until at least `until` (given on both clocks).
    ///
    /// # Errors
    ///
    /// The store's error, if it could not record it.
    pub async fn raise(
        &self,
        key: &str,
        until: Instant,
        until_wall: SystemTime,
    ) -> Result<(), S::Error> {
        self.store.raise(key, until, until_wall).await
    }
}

/// The default gate key of a URI: `scheme://host:port`, lowercase, with the scheme's default
/// port filled in. `None` when the URI has no host.
pub fn key_of(uri: &http::Uri) -> Option<String> {
    let host = uri.host()?.to_ascii_lowercase();
    let scheme = uri.scheme_str().unwrap_or("http").to_ascii_lowercase();
    let port = uri.port_u16().or(match scheme.as_str() {
        "https" | "wss" => Some(443),
        "http" | "ws" => Some(80),
        _ => None,
    });
    Some(match port {
        Some(port) => format!("{scheme}://{host}:{port}"),
        None => format!("{scheme}://{host}"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::ManualClock;

    fn block_on<F: Future>(f: F) -> F::Output {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("runtime")
            .block_on(f)
    }

    mod gate {
        use super::*;

        #[test]
        fn an_open_key_admits_at_once() {
            let clock = ManualClock::new(SystemTime::UNIX_EPOCH);
            let gate = Gate::in_memory();
            assert_eq!(block_on(gate.admit_at("k", &clock)), Ok(None));
        }

        #[test]
        fn raising_never_moves_the_time_earlier() {
            let clock = ManualClock::new(SystemTime::UNIX_EPOCH);
            let gate = Gate::in_memory();
            let now = clock.now();
            let wall = clock.wall_now();
            block_on(async {
                gate.raise("k", now + Duration::from_secs(10), wall)
                    .await
                    .ok();
                gate.raise("k", now + Duration::from_secs(3), wall)
                    .await
                    .ok();
                assert_eq!(
                    gate.opens_at("k", &clock).await,
                    Ok(Some(now + Duration::from_secs(10)))
                );
            });
        }

        #[test]
        fn a_passed_time_is_open() {
            let clock = ManualClock::new(SystemTime::UNIX_EPOCH);
            let gate = Gate::in_memory();
            let now = clock.now();
            block_on(async {
                gate.raise("k", now + Duration::from_secs(1), clock.wall_now())
                    .await
                    .ok();
                clock.advance(Duration::from_secs(1));
                assert_eq!(gate.opens_at("k", &clock).await, Ok(None));
            });
        }

        #[test]
        fn held_tasks_are_spread_after_the_opening() {
            let clock = ManualClock::new(SystemTime::UNIX_EPOCH);
            let gate = Gate::in_memory()
                .spread(Jitter::Uniform(Duration::from_secs(1)))
                .seed(9);
            let opens = clock.now() + Duration::from_secs(2);
            block_on(async {
                gate.raise("k", opens, clock.wall_now()).await.ok();
                let mut admits = Vec::new();
                for _ in 0..100 {
                    let at = gate
                        .admit_at("k", &clock)
                        .await
                        .ok()
                        .flatten()
                        .expect("closed");
                    assert!(at >= opens && at <= opens + Duration::from_secs(1));
                    admits.push(at);
                }
                admits.sort();
                admits.dedup();
                assert!(admits.len() > 90, "draws should differ");
                let span = *admits.last().expect("some") - admits[0];
                assert!(span > Duration::from_millis(800), "span {span:?}");
            });
        }

        #[test]
        fn a_wall_time_from_a_shared_store_becomes_a_local_instant() {
            struct WallStore(SystemTime);
            impl GateStore for WallStore {
                type Error = Infallible;
                async fn get(&self, _: &str) -> Result<Option<NotBefore>, Infallible> {
                    Ok(Some(NotBefore::Wall(self.0)))
                }
                async fn raise(
                    &self,
                    _: &str,
                    _: Instant,
                    _: SystemTime,
                ) -> Result<(), Infallible> {
                    Ok(())
                }
            }
            let clock = ManualClock::new(SystemTime::UNIX_EPOCH + Duration::from_secs(100));
            let gate = Gate::new(WallStore(SystemTime::UNIX_EPOCH + Duration::from_secs(105)));
            assert_eq!(
                block_on(gate.opens_at("k", &clock)),
                Ok(Some(clock.now() + Duration::from_secs(5)))
            );
        }
    }

    mod key_of {
        use super::*;

        #[test]
        fn fills_in_default_ports() {
            let key = |s: &str| key_of(&s.parse().expect("uri"));
            assert_eq!(
                key("https://api.example/v1?x=1").as_deref(),
                Some("https://api.example:443")
            );
            assert_eq!(
                key("http://api.example/").as_deref(),
                Some("http://api.example:80")
            );
            assert_eq!(
                key("http://127.0.0.1:3000/a").as_deref(),
                Some("http://127.0.0.1:3000")
            );
            assert_eq!(
                key("HTTPS://API.Example/").as_deref(),
                Some("https://api.example:443")
            );
            assert_eq!(key("/relative"), None);
        }
    }
}
