//! Idle tracking: the requests in flight on a connection, and the one timer that closes it
//! once none was for the idle timeout.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;

use holdoff::clock::Clock;

/// Requests in flight on a connection, and when the last one ended.
pub(crate) struct Activity {
    in_flight: AtomicUsize,
    last: std::sync::Mutex<std::time::Instant>,
    /// The pipeline's, which the idle timer reads too.
    clock: Arc<dyn Clock>,
}

impl Activity {
    pub(crate) fn new(clock: Arc<dyn Clock>) -> Activity {
        Activity {
            in_flight: AtomicUsize::new(0),
            last: std::sync::Mutex::new(clock.now()),
            clock,
        }
    }

    fn last(&self) -> std::time::Instant {
        *self
            .last
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// One request in flight, until its response body is done (sent in full, or dropped): the
/// connection was last busy then.
pub(crate) struct Busy(Arc<Activity>);

impl Busy {
    pub(crate) fn start(activity: Arc<Activity>) -> Busy {
        activity.in_flight.fetch_add(1, Ordering::Relaxed);
        Busy(activity)
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        *self
            .0
            .last
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = self.0.clock.now();
        self.0.in_flight.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Completes once the connection has had no request in flight for `timeout`.
///
/// The connection's task polls it at every wake-up, several times per request. Its one timer
/// is polled only when armed and when it has fired, which a waker of its own (the alarm)
/// says; every other poll reads one flag. Fired while a request was in flight, or before the
/// last one ended a timeout ago, it is armed again for then.
pub(crate) struct Idle<'a, C> {
    activity: &'a Activity,
    clock: &'a C,
    timeout: Duration,
    sleep: Option<holdoff::clock::Sleep>,
    alarm: Arc<Alarm>,
    /// The alarm as the waker the timer is polled with.
    alarm_waker: Waker,
}

impl<'a, C: Clock> Idle<'a, C> {
    pub(crate) fn new(activity: &'a Activity, clock: &'a C, timeout: Duration) -> Idle<'a, C> {
        let alarm = Arc::new(Alarm::default());
        Idle {
            activity,
            clock,
            timeout,
            sleep: None,
            alarm_waker: Waker::from(Arc::clone(&alarm)),
            alarm,
        }
    }
}

impl<C: Clock> Future for Idle<'_, C> {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = self.get_mut();
        loop {
            let sleep = match &mut this.sleep {
                Some(sleep) => {
                    if !this.alarm.rang.swap(false, Ordering::AcqRel) {
                        return Poll::Pending;
                    }
                    sleep
                }
                None => {
                    let now = this.clock.now();
                    let since = if this.activity.in_flight.load(Ordering::Relaxed) > 0 {
                        now
                    } else {
                        this.activity.last()
                    };
                    let deadline = since + this.timeout;
                    if deadline <= now {
                        return Poll::Ready(());
                    }
                    // The task to wake when the alarm rings: a task's waker stays the same,
                    // so it is only looked at when the timer is armed.
                    this.alarm.wake_on_ring(cx.waker());
                    this.sleep.insert(this.clock.sleep_until(deadline))
                }
            };
            let mut alarm = Context::from_waker(&this.alarm_waker);
            if sleep.as_mut().poll(&mut alarm).is_pending() {
                return Poll::Pending;
            }
            this.sleep = None;
        }
    }
}

/// The idle timer's waker: notes that the timer fired, and wakes the connection's task.
#[derive(Default)]
struct Alarm {
    rang: AtomicBool,
    task: std::sync::Mutex<Option<Waker>>,
}

impl Alarm {
    fn wake_on_ring(&self, task: &Waker) {
        let mut slot = self
            .task
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if !slot.as_ref().is_some_and(|known| known.will_wake(task)) {
            *slot = Some(task.clone());
        }
    }
}

impl Wake for Alarm {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.rang.store(true, Ordering::Release);
        let task = self
            .task
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(task) = task.as_ref() {
            task.wake_by_ref();
        }
    }
}

#[cfg(test)]
mod tests {
    use std::pin::pin;

    use super::*;
    use holdoff::clock::TokioClock;

    mod idle {
        use super::*;

        const TIMEOUT: Duration = Duration::from_secs(30);

        #[tokio::test(start_paused = true)]
        async fn an_idle_connection_times_out_a_timeout_after_it_started() {
            let clock = TokioClock;
            let started = clock.now();
            let activity = Activity::new(Arc::new(clock));
            Idle::new(&activity, &clock, TIMEOUT).await;
            assert_eq!(clock.now() - started, TIMEOUT);
        }

        #[tokio::test(start_paused = true)]
        async fn a_request_in_flight_keeps_it_open_and_the_count_starts_when_it_ends() {
            let clock = TokioClock;
            let started = clock.now();
            let activity = Arc::new(Activity::new(Arc::new(clock)));
            let busy = Busy::start(Arc::clone(&activity));
            let mut idle = pin!(Idle::new(&activity, &clock, TIMEOUT));

            // The timer fires at 30 s with the request still in flight, and is armed again.
            let open = tokio::time::timeout(Duration::from_secs(45), idle.as_mut()).await;
            assert!(open.is_err(), "timed out with a request in flight");
            drop(busy);
            idle.await;
            assert_eq!(clock.now() - started, Duration::from_secs(45) + TIMEOUT);
        }
    }
}
