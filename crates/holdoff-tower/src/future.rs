//! The wait before a retry, and the gate's part in it.
//!
//! tower asks the policy synchronously whether to retry, so the gate (whose store is async)
//! is polled once on the spot: the in-memory store answers at once, and the policy can still
//! defer a retry that the gate would hold past the deadline. A store that needs I/O (Redis)
//! answers later, inside the wait.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::{Instant, SystemTime};

use holdoff::clock::{Clock, Sleep};
use holdoff::gate::{Gate, GateStore};

/// What to do instead of sending the retry at once.
pub(crate) enum Wait {
    /// Sleep, then retry.
    Sleep(Sleep),
    /// The gate holds the key until this instant, at or past the task's deadline: defer.
    Deferred(Instant),
}

type Boxed<T> = Pin<Box<dyn Future<Output = T> + Send>>;

/// Polls `future` once without a waker to call back; the in-memory gate is always ready.
fn poll_once<T>(future: &mut Boxed<T>) -> Poll<T> {
    future
        .as_mut()
        .poll(&mut Context::from_waker(Waker::noop()))
}

/// The wait before retrying at `at`: until `at`, or later if `gate` holds `key` longer.
pub(crate) fn hold<C, S>(
    clock: &C,
    gate: Option<(&Arc<Gate<S>>, String)>,
    at: Instant,
    deadline: Option<Instant>,
) -> Wait
where
    C: Clock + Clone + 'static,
    S: GateStore + 'static,
{
    let Some((gate, key)) = gate else {
        return Wait::Sleep(clock.sleep_until(at));
    };
    let mut admit: Boxed<Option<Instant>> = {
        let (gate, clock) = (Arc::clone(gate), clock.clone());
        Box::pin(async move {
            match gate.admit_at(&key, &clock).await {
                Ok(admit) => admit,
                Err(error) => {
                    // A gate that cannot answer must not stop the work: go on without it.
                    tracing::warn!(%error, key = %key, "gate unavailable; not waiting on it");
                    None
                }
            }
        })
    };
    match poll_once(&mut admit) {
        Poll::Ready(admit) => {
            let until = admit.map_or(at, |admit| admit.max(at));
            if deadline.is_some_and(|deadline| until >= deadline) {
                return Wait::Deferred(until);
            }
            if until > at {
                tracing::debug!("held at the gate");
            }
            Wait::Sleep(clock.sleep_until(until))
        }
        Poll::Pending => {
            let clock = clock.clone();
            Wait::Sleep(Box::pin(async move {
                let until = admit.await.map_or(at, |admit| admit.max(at));
                if deadline.is_some_and(|deadline| until >= deadline) {
                    // tower has been told to retry and cannot be told otherwise: wait for the
                    // gate rather than retry early.
                    tracing::warn!("the gate holds the key past the task's deadline");
                }
                clock.sleep_until(until).await;
            }))
        }
    }
}

/// Closes `key` on `gate` until `until`, for every task that shares the gate. Done on the
/// spot when the store answers at once, else on the current tokio runtime.
pub(crate) fn share<S>(gate: &Arc<Gate<S>>, key: String, until: Instant, until_wall: SystemTime)
where
    S: GateStore + 'static,
{
    let gate = Arc::clone(gate);
    let mut raise: Boxed<()> = Box::pin(async move {
        if let Err(error) = gate.raise(&key, until, until_wall).await {
            tracing::warn!(%error, key = %key, "could not share the hint through the gate");
        }
    });
    if poll_once(&mut raise).is_ready() {
        return;
    }
    match tokio::runtime::Handle::try_current() {
        Ok(runtime) => drop(runtime.spawn(raise)),
        Err(_) => tracing::warn!("no tokio runtime to share the hint through the gate"),
    }
}
