//! [`Breaker`]: after a failure, stop asking Redis on the request path, and ask it again in
//! the background until it answers.
//!
//! Without one, every request waits out the timeout while Redis is hung or gone: a proxy that
//! serves 25,000 requests a second in front of a healthy Redis serves about 50 behind a
//! stopped one, each 500 ms late. With one, only the operation that meets the failure (and
//! those already in flight with it) waits; every later one is answered at once, by the
//! caller's failure mode, until a probe gets an answer.
//!
//! - **Closed**: operations go to Redis. A timeout or a connection failure opens it. An error
//!   *answer* (a script error, a wrong type) does not: Redis answered, so it is reachable.
//! - **Open**: operations fail at once with [`ErrorKind::CircuitOpen`], without touching
//!   Redis. One task probes it (`PING`, within the same timeout) after [`FIRST_PROBE`], then
//!   at intervals that double up to [`MAX_PROBE_INTERVAL`]; the first answer closes it.
//!
//! It logs once each way: a `warn` when it opens (the error, and what callers get meanwhile)
//! and an `info` or `warn` ([`Words::closed_level`]) when it closes (how long it was open).

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::{Duration, Instant};

use holdoff::clock::Clock;

use crate::error::{Error, ErrorKind};

/// How long after opening the first probe goes out: long enough that a Redis that just
/// dropped a connection is not hit at once, short enough that a restart is noticed quickly.
pub(crate) const FIRST_PROBE: Duration = Duration::from_millis(250);

/// The longest interval between probes (they double from [`FIRST_PROBE`]): a Redis that has
/// been gone for a while is asked every 5 s, one `PING` per breaker, and is back in use at
/// most 5 s after it answers again.
pub(crate) const MAX_PROBE_INTERVAL: Duration = Duration::from_secs(5);

/// One probe of Redis: `Ok` once it answers.
pub(crate) type Probe =
    Arc<dyn Fn() -> Pin<Box<dyn Future<Output = Result<(), Error>> + Send>> + Send + Sync>;

/// How a breaker's two log lines word it.
pub(crate) struct Words {
    /// What they call the thing behind the breaker: `redis gate`, `shared state`.
    pub(crate) name: &'static str,
    /// What the line that says it closed adds: what works again.
    pub(crate) back: &'static str,
    /// That line's level: `info`, or `warn` where a log read at `warn` must show the end of
    /// an outage as well as its start (the proxy's, whose tests and users read it so).
    pub(crate) closed_level: tracing::Level,
}

/// A circuit breaker in front of one Redis; see the [module](self).
pub(crate) struct Breaker {
    shared: Arc<Shared>,
}

struct Shared {
    words: Words,
    url: String,
    clock: Arc<dyn Clock>,
    probe: Probe,
    /// What callers get while it is open, for the log line that says it opened.
    meanwhile: Mutex<String>,
    /// Mirrors `state` for the closed path, which then takes no lock.
    open: AtomicBool,
    /// Counts closings: an operation that started before the last one and fails after it
    /// belongs to an outage already over, and opens nothing.
    epoch: AtomicU64,
    openings: AtomicU64,
    state: Mutex<State>,
}

enum State {
    Closed,
    Open {
        since: Instant,
        /// Whether a probe task is running (one is started again if its runtime went away).
        probing: bool,
        /// Which opening this is (1 for the first), so that a probe task of an earlier one
        /// never speaks for this one.
        opening: u64,
    },
}

impl Breaker {
    /// A closed breaker for the Redis at `url` (already redacted), reading `clock`, with
    /// `probe` to ask Redis while it is open, its log lines worded by `words`; set what
    /// callers get meanwhile with [`Breaker::set_meanwhile`].
    pub(crate) fn new(words: Words, url: String, clock: Arc<dyn Clock>, probe: Probe) -> Breaker {
        Breaker {
            shared: Arc::new(Shared {
                words,
                url,
                clock,
                probe,
                meanwhile: Mutex::new("callers answer by their failure mode".to_owned()),
                open: AtomicBool::new(false),
                epoch: AtomicU64::new(0),
                openings: AtomicU64::new(0),
                state: Mutex::new(State::Closed),
            }),
        }
    }

    /// What callers get while it is open, as the log line that says it opened tells it.
    pub(crate) fn set_meanwhile(&self, meanwhile: String) {
        *lock(&self.shared.meanwhile) = meanwhile;
    }

    /// Whether it is open.
    pub(crate) fn is_open(&self) -> bool {
        self.shared.open.load(Ordering::Acquire)
    }

    /// How many times it has opened.
    pub(crate) fn openings(&self) -> u64 {
        self.shared.openings.load(Ordering::Relaxed)
    }

    /// Runs `operation` (already bounded by a timeout) if the breaker is closed, and opens it
    /// if the operation times out or cannot reach Redis.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::CircuitOpen`] at once while it is open, without running `operation`;
    /// otherwise the operation's own error.
    pub(crate) async fn call<T>(
        &self,
        operation: impl Future<Output = Result<T, Error>>,
    ) -> Result<T, Error> {
        let epoch = self.admit()?;
        let outcome = operation.await;
        if let Err(error) = &outcome
            && matches!(error.kind(), ErrorKind::Timeout | ErrorKind::Connection)
        {
            self.trip(epoch, error);
        }
        outcome
    }

    /// The epoch to run an operation in, or the refusal while open (making sure a probe
    /// runs).
    fn admit(&self) -> Result<u64, Error> {
        let shared = &self.shared;
        let epoch = shared.epoch.load(Ordering::Acquire);
        if !shared.open.load(Ordering::Acquire) {
            return Ok(epoch);
        }
        let opening = match &mut *lock(&shared.state) {
            State::Closed => return Ok(shared.epoch.load(Ordering::Acquire)),
            State::Open { probing: true, .. } => None,
            State::Open {
                probing, opening, ..
            } => {
                *probing = true;
                Some(*opening)
            }
        };
        if let Some(opening) = opening {
            spawn_probe(shared, opening);
        }
        Err(Error::new(ErrorKind::CircuitOpen))
    }

    /// Opens the breaker after `error`, unless it is open already or the operation that met
    /// the error started before the last closing.
    fn trip(&self, epoch: u64, error: &Error) {
        let shared = &self.shared;
        let opening = {
            let mut state = lock(&shared.state);
            if !matches!(*state, State::Closed) || shared.epoch.load(Ordering::Acquire) != epoch {
                return;
            }
            let opening = shared.openings.fetch_add(1, Ordering::Relaxed) + 1;
            *state = State::Open {
                since: shared.clock.now(),
                probing: true,
                opening,
            };
            shared.open.store(true, Ordering::Release);
            opening
        };
        // Outside the lock: a task the runtime refuses is dropped at once, and its guard
        // takes the lock.
        spawn_probe(shared, opening);
        tracing::warn!(
            url = %shared.url,
            error = %Chain(error),
            "{} failed; {}; redis is not asked again until it answers a probe in the background \
             (after {:?}, then backing off to every {:?})",
            shared.words.name,
            lock(&shared.meanwhile),
            FIRST_PROBE,
            MAX_PROBE_INTERVAL,
        );
    }
}

impl fmt::Debug for Breaker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Breaker")
            .field("open", &self.is_open())
            .field("openings", &self.openings())
            .finish_non_exhaustive()
    }
}

impl Shared {
    /// Closes the breaker after a probe got an answer.
    fn close(&self) {
        let mut state = lock(&self.state);
        let State::Open { since, .. } = *state else {
            return;
        };
        *state = State::Closed;
        self.epoch.fetch_add(1, Ordering::AcqRel);
        self.open.store(false, Ordering::Release);
        let open_for = self.clock.now().saturating_duration_since(since);
        // To the millisecond: the probe's own timing is coarser than that.
        let open_for =
            Duration::from_millis(u64::try_from(open_for.as_millis()).unwrap_or(u64::MAX));
        let Words { name, back, .. } = self.words;
        if self.words.closed_level == tracing::Level::WARN {
            tracing::warn!(url = %self.url, "{name} is reachable again after {open_for:?}; {back}");
        } else {
            tracing::info!(url = %self.url, "{name} is reachable again after {open_for:?}; {back}");
        }
    }
}

/// Starts the probe task for `opening` on the current runtime. With no runtime, marks that
/// none runs, so that the next refused operation tries again.
fn spawn_probe(shared: &Arc<Shared>, opening: u64) {
    let running = Running {
        shared: Arc::downgrade(shared),
        opening,
    };
    match tokio::runtime::Handle::try_current() {
        Ok(runtime) => drop(runtime.spawn(probe(running))),
        // Dropping the guard says so.
        Err(_) => drop(running),
    }
}

/// Probes until Redis answers, then closes the breaker. It holds the breaker weakly: once the
/// store is dropped, it ends.
async fn probe(running: Running) {
    let mut interval = FIRST_PROBE;
    loop {
        let Some(wait) = running.with(|s| s.clock.sleep_until(s.clock.now() + interval)) else {
            return;
        };
        wait.await;
        let Some(attempt) = running.with(|s| (s.probe)()) else {
            return;
        };
        if attempt.await.is_ok() {
            running.with(|s| s.close());
            return;
        }
        interval = (interval * 2).min(MAX_PROBE_INTERVAL);
    }
}

/// Held by the probe task of one opening: if the task is dropped before it closed the
/// breaker (its runtime shut down), the next refused operation starts another.
struct Running {
    shared: Weak<Shared>,
    opening: u64,
}

impl Running {
    /// `f` of the breaker, unless it is gone. No strong reference outlives the call, so the
    /// task never keeps a dropped store alive across a wait.
    fn with<T>(&self, f: impl FnOnce(&Shared) -> T) -> Option<T> {
        self.shared.upgrade().map(|shared| f(&shared))
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.with(|shared| {
            if let State::Open {
                probing, opening, ..
            } = &mut *lock(&shared.state)
                && *opening == self.opening
            {
                *probing = false;
            }
        });
    }
}

/// The lock, even if a thread panicked holding it: the state stays consistent at every
/// point a panic could happen (none is expected while it is held).
fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// An error and its chain of causes, for one log line: `reach redis: Connection refused`.
struct Chain<'a>(&'a Error);

impl fmt::Display for Chain<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)?;
        let mut source = std::error::Error::source(self.0);
        while let Some(error) = source {
            write!(f, ": {error}")?;
            source = error.source();
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use std::sync::atomic::AtomicUsize;

    use holdoff::clock::TokioClock;

    const MS: Duration = Duration::from_millis(1);

    /// A breaker whose probe answers as `up` says, counting probes.
    fn breaker(up: &Arc<AtomicBool>, probes: &Arc<AtomicUsize>) -> Breaker {
        let (up, probes) = (Arc::clone(up), Arc::clone(probes));
        let probe: Probe = Arc::new(move || {
            probes.fetch_add(1, Ordering::SeqCst);
            let up = up.load(Ordering::SeqCst);
            Box::pin(async move {
                if up {
                    Ok(())
                } else {
                    Err(Error::new(ErrorKind::Connection))
                }
            })
        });
        let words = Words {
            name: "test store",
            back: "back in use",
            closed_level: tracing::Level::INFO,
        };
        Breaker::new(
            words,
            "redis://127.0.0.1:1/0".to_owned(),
            Arc::new(TokioClock),
            probe,
        )
    }

    fn down() -> (Arc<AtomicBool>, Arc<AtomicUsize>) {
        (Arc::new(AtomicBool::new(false)), Arc::default())
    }

    async fn fail(breaker: &Breaker, kind: ErrorKind) -> Error {
        let outcome = breaker.call(async { Err::<(), _>(Error::new(kind)) }).await;
        outcome.expect_err("failed")
    }

    /// An operation that succeeds, counting the times it ran.
    async fn succeed(breaker: &Breaker, ran: &AtomicUsize) -> Result<(), Error> {
        breaker
            .call(async {
                ran.fetch_add(1, Ordering::SeqCst);
                Ok(())
            })
            .await
    }

    /// Lets the probe task run until the clock reaches `at` (tokio's paused time jumps to
    /// each timer as soon as every task waits).
    async fn until(at: Instant) {
        TokioClock.sleep_until(at).await;
    }

    mod call {
        use super::*;

        #[tokio::test(start_paused = true)]
        async fn refuses_at_once_after_a_timeout_without_running_the_operation() {
            let (up, probes) = down();
            let breaker = breaker(&up, &probes);
            let ran = AtomicUsize::new(0);
            succeed(&breaker, &ran).await.expect("closed");
            assert_eq!(
                fail(&breaker, ErrorKind::Timeout).await.kind(),
                ErrorKind::Timeout
            );
            assert!(breaker.is_open());

            let started = TokioClock.now();
            for _ in 0..100 {
                let refused = succeed(&breaker, &ran).await.expect_err("open");
                assert_eq!(refused.kind(), ErrorKind::CircuitOpen);
            }
            assert_eq!(ran.load(Ordering::SeqCst), 1, "only the first ran");
            assert_eq!(TokioClock.now(), started, "no refusal waited");
            assert_eq!(breaker.openings(), 1);
        }

        #[tokio::test(start_paused = true)]
        async fn a_connection_failure_opens_it_too_and_once() {
            let (up, probes) = down();
            let breaker = breaker(&up, &probes);
            fail(&breaker, ErrorKind::Connection).await;
            assert!(breaker.is_open());
            assert_eq!(
                fail(&breaker, ErrorKind::Connection).await.kind(),
                ErrorKind::CircuitOpen
            );
            assert_eq!(breaker.openings(), 1);
        }

        #[tokio::test(start_paused = true)]
        async fn an_error_answer_leaves_it_closed() {
            let (up, probes) = down();
            let breaker = breaker(&up, &probes);
            fail(&breaker, ErrorKind::Response).await;
            assert!(!breaker.is_open());
            assert_eq!(breaker.openings(), 0);
        }

        #[tokio::test(start_paused = true)]
        async fn a_failure_from_before_the_last_closing_opens_nothing() {
            let (up, probes) = (Arc::new(AtomicBool::new(true)), Arc::default());
            let breaker = breaker(&up, &probes);
            // An operation starts before the outage...
            let epoch = breaker.admit().expect("closed");
            fail(&breaker, ErrorKind::Connection).await;
            until(TokioClock.now() + FIRST_PROBE + MS).await;
            assert!(!breaker.is_open(), "the probe closed it");
            // ...and fails only now.
            breaker.trip(epoch, &Error::new(ErrorKind::Timeout));
            assert!(!breaker.is_open());
            assert_eq!(breaker.openings(), 1);
        }
    }

    mod probe {
        use super::*;

        #[tokio::test(start_paused = true)]
        async fn backs_off_by_doubling_to_the_cap_and_closes_on_the_first_answer() {
            let (up, probes) = down();
            let breaker = breaker(&up, &probes);
            let opened = TokioClock.now();
            fail(&breaker, ErrorKind::Connection).await;
            // Probes 0.25, 0.75, 1.75, 3.75, 7.75, 12.75 and 17.75 s after opening.
            let count = || probes.load(Ordering::SeqCst);
            for (at, expected) in [(249, 0), (251, 1), (749, 1), (751, 2), (1_751, 3)] {
                until(opened + at * MS).await;
                assert_eq!(count(), expected, "at {at} ms");
            }
            until(opened + 12_751 * MS).await;
            assert_eq!(count(), 6, "at most 5 s apart");
            assert!(breaker.is_open());

            up.store(true, Ordering::SeqCst);
            until(opened + 17_751 * MS).await;
            assert_eq!(count(), 7);
            assert!(!breaker.is_open());
            let ran = AtomicUsize::new(0);
            succeed(&breaker, &ran).await.expect("closed again");
            assert_eq!(ran.load(Ordering::SeqCst), 1);

            // Nothing probes while it is closed.
            until(opened + 60_000 * MS).await;
            assert_eq!(count(), 7);
        }

        #[tokio::test(start_paused = true)]
        async fn starts_again_when_its_runtime_went_away() {
            let (up, probes) = down();
            let breaker = Arc::new(breaker(&up, &probes));
            // Opened on a runtime that then shuts down, taking the probe task with it.
            let other = Arc::clone(&breaker);
            std::thread::spawn(move || {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_time()
                    .build()
                    .expect("runtime");
                runtime.block_on(fail(&other, ErrorKind::Connection));
            })
            .join()
            .expect("thread");
            assert!(breaker.is_open());

            up.store(true, Ordering::SeqCst);
            let ran = AtomicUsize::new(0);
            let refused = succeed(&breaker, &ran).await.expect_err("open");
            assert_eq!(refused.kind(), ErrorKind::CircuitOpen);
            until(TokioClock.now() + FIRST_PROBE + MS).await;
            assert!(!breaker.is_open(), "a new probe closed it");
        }

        #[tokio::test(start_paused = true)]
        async fn ends_once_the_breaker_is_dropped() {
            let (up, probes) = down();
            let breaker = breaker(&up, &probes);
            let opened = TokioClock.now();
            fail(&breaker, ErrorKind::Connection).await;
            until(opened + FIRST_PROBE + MS).await;
            assert_eq!(probes.load(Ordering::SeqCst), 1);
            drop(breaker);
            until(opened + 60_000 * MS).await;
            assert_eq!(probes.load(Ordering::SeqCst), 1);
        }
    }
}
