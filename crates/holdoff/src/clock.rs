//! Time as an injectable dependency: the only module that reads a clock or sleeps.
//!
//! Two clocks that never mix: the monotonic [`Instant`] for waiting and deadlines, the wall
//! [`SystemTime`] only to turn an HTTP-date into an interval and to stamp reports.

#![allow(clippy::disallowed_methods)] // This module is where clock reads are allowed.

use std::collections::BTreeMap;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant, SystemTime};

/// A boxed sleep future returned by [`Clock::sleep_until`].
pub type Sleep = Pin<Box<dyn Future<Output = ()> + Send + 'static>>;

/// A source of time: monotonic now, wall now, and sleeping until a monotonic instant.
///
/// `TokioClock` (with the `retry` feature) is the real one; [`ManualClock`] is for tests,
/// which advance it by hand.
pub trait Clock: Send + Sync {
    /// The monotonic clock, for waits and deadlines.
    fn now(&self) -> Instant;
    /// The wall clock, for HTTP-dates and report stamps only.
    fn wall_now(&self) -> SystemTime;
    /// A future that completes once [`Clock::now`] has reached `deadline`.
    fn sleep_until(&self, deadline: Instant) -> Sleep;
}

impl<C: Clock + ?Sized> Clock for Arc<C> {
    fn now(&self) -> Instant {
        (**self).now()
    }
    fn wall_now(&self) -> SystemTime {
        (**self).wall_now()
    }
    fn sleep_until(&self, deadline: Instant) -> Sleep {
        (**self).sleep_until(deadline)
    }
}

/// The real clock, through tokio's timer, so tokio's paused test time applies to it too.
///
/// [`Clock::now`] and [`Clock::sleep_until`] need a tokio runtime with the time driver.
#[cfg(feature = "retry")]
#[cfg_attr(docsrs, doc(cfg(feature = "retry")))]
#[derive(Clone, Copy, Debug, Default)]
pub struct TokioClock;

#[cfg(feature = "retry")]
impl Clock for TokioClock {
    fn now(&self) -> Instant {
        tokio::time::Instant::now().into_std()
    }
    fn wall_now(&self) -> SystemTime {
        SystemTime::now()
    }
    fn sleep_until(&self, deadline: Instant) -> Sleep {
        Box::pin(tokio::time::sleep_until(deadline.into()))
    }
}

/// The process's clocks read directly, for code outside any runtime (e.g. a CLI that
/// only needs "now").
#[derive(Clone, Copy, Debug, Default)]
pub struct SystemClock;

impl SystemClock {
    /// The monotonic clock.
    pub fn now(&self) -> Instant {
        Instant::now()
    }
    /// The wall clock.
    pub fn wall_now(&self) -> SystemTime {
        SystemTime::now()
    }
    /// Blocks this thread for `duration`: for code outside any runtime, such as a loop
    /// waiting for a file another process is writing. Never call it from async code, whose
    /// thread runs other tasks: there, sleep with [`Clock::sleep_until`].
    pub fn block_for(&self, duration: Duration) {
        std::thread::sleep(duration);
    }
}

/// A clock that moves only when a test advances it; sleeps end when it passes their deadline.
///
/// The wall clock moves with the monotonic one, and can also be stepped on its own (as NTP
/// would) with [`ManualClock::set_wall`] to show that waits do not depend on it.
///
/// # Examples
///
/// ```
/// use holdoff::clock::{Clock, ManualClock};
/// use std::time::{Duration, SystemTime};
///
/// let clock = ManualClock::new(SystemTime::UNIX_EPOCH);
/// let start = clock.now();
/// clock.advance(Duration::from_secs(30));
/// assert_eq!(clock.now() - start, Duration::from_secs(30));
/// assert_eq!(clock.wall_now(), SystemTime::UNIX_EPOCH + Duration::from_secs(30));
/// ```
#[derive(Clone)]
pub struct ManualClock {
    inner: Arc<Mutex<ManualState>>,
}

struct ManualState {
    now: Instant,
    wall: SystemTime,
    next_id: u64,
    sleepers: BTreeMap<(Instant, u64), Waker>,
}

impl ManualClock {
    /// A clock whose wall time starts at `wall`.
    pub fn new(wall: SystemTime) -> ManualClock {
        ManualClock {
            inner: Arc::new(Mutex::new(ManualState {
                now: Instant::now(),
                wall,
                next_id: 0,
                sleepers: BTreeMap::new(),
            })),
        }
    }

    fn state(&self) -> MutexGuard<'_, ManualState> {
        // A panic while the lock is held leaves the state consistent: recover it.
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Moves both clocks forward by `by` and wakes every sleep that is now due.
    pub fn advance(&self, by: Duration) {
        let wakers = {
            let mut state = self.state();
            state.now += by;
            state.wall += by;
            let due = state.now;
            let later = state.sleepers.split_off(&(due, u64::MAX));
            std::mem::replace(&mut state.sleepers, later)
        };
        wakers.into_values().for_each(Waker::wake);
    }

    /// Steps the wall clock alone, leaving the monotonic clock (and every wait) as it is.
    pub fn set_wall(&self, wall: SystemTime) {
        self.state().wall = wall;
    }

    /// How many sleeps are waiting on this clock.
    pub fn sleepers(&self) -> usize {
        self.state().sleepers.len()
    }

    /// The earliest deadline any sleep is waiting for.
    pub fn next_deadline(&self) -> Option<Instant> {
        self.state().sleepers.keys().next().map(|(at, _)| *at)
    }
}

impl fmt::Debug for ManualClock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = self.state();
        f.debug_struct("ManualClock")
            .field("now", &state.now)
            .field("wall", &state.wall)
            .field("sleepers", &state.sleepers.len())
            .finish()
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Instant {
        self.state().now
    }
    fn wall_now(&self) -> SystemTime {
        self.state().wall
    }
    fn sleep_until(&self, deadline: Instant) -> Sleep {
        Box::pin(ManualSleep {
            clock: self.clone(),
            deadline,
            id: None,
        })
    }
}

struct ManualSleep {
    clock: ManualClock,
    deadline: Instant,
    id: Option<u64>,
}

impl Future for ManualSleep {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let deadline = self.deadline;
        let mut state = self.clock.state();
        if state.now >= deadline {
            return Poll::Ready(());
        }
        let id = match self.id {
            Some(id) => id,
            None => {
                let id = state.next_id;
                state.next_id += 1;
                id
            }
        };
        state.sleepers.insert((deadline, id), cx.waker().clone());
        drop(state);
        self.id = Some(id);
        Poll::Pending
    }
}

impl Drop for ManualSleep {
    fn drop(&mut self) {
        if let Some(id) = self.id {
            self.clock.state().sleepers.remove(&(self.deadline, id));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    mod manual_clock {
        use super::*;

        fn poll_once(sleep: &mut Sleep) -> Poll<()> {
            let mut cx = Context::from_waker(Waker::noop());
            sleep.as_mut().poll(&mut cx)
        }

        #[test]
        fn a_sleep_ends_only_when_the_clock_reaches_it() {
            let clock = ManualClock::new(SystemTime::UNIX_EPOCH);
            let mut sleep = clock.sleep_until(clock.now() + Duration::from_secs(10));
            assert!(poll_once(&mut sleep).is_pending());
            clock.advance(Duration::from_secs(9));
            assert!(poll_once(&mut sleep).is_pending());
            clock.advance(Duration::from_secs(1));
            assert!(poll_once(&mut sleep).is_ready());
        }

        #[test]
        fn dropping_a_sleep_unregisters_it() {
            let clock = ManualClock::new(SystemTime::UNIX_EPOCH);
            let mut sleep = clock.sleep_until(clock.now() + Duration::from_secs(1));
            assert!(poll_once(&mut sleep).is_pending());
            assert_eq!(clock.sleepers(), 1);
            drop(sleep);
            assert_eq!(clock.sleepers(), 0);
        }

        #[test]
        fn stepping_the_wall_clock_leaves_waits_alone() {
            let clock = ManualClock::new(SystemTime::UNIX_EPOCH);
            let mut sleep = clock.sleep_until(clock.now() + Duration::from_secs(5));
            assert!(poll_once(&mut sleep).is_pending());
            clock.set_wall(SystemTime::UNIX_EPOCH + Duration::from_secs(3600));
            assert!(poll_once(&mut sleep).is_pending());
            assert_eq!(clock.next_deadline().map(|d| d > clock.now()), Some(true));
        }
    }
}
