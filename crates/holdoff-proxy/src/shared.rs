//! State that several proxy replicas share: the judge's open windows and the rate limiters'
//! counters.
//!
//! One proxy keeps both in memory. Replicas in front of the same API share them through a
//! [`SharedState`] store (`holdoff-redis` provides one in Redis), so that a retry sent to
//! replica B too soon after a throttle from replica A is still caught, and a limit of N per
//! window admits N requests across all the replicas together.
//!
//! # Time
//!
//! A store keeps time on its own clock (Redis's `TIME`), never the replicas': a window is
//! opened with the wait that is left, not a timestamp, and a check answers in durations
//! measured against the store's now. Replicas on different machines therefore agree without
//! comparing their clocks.
//!
//! # Failures
//!
//! Each replica keeps its own in-memory state as well, always. While the store fails,
//! [`SharedStore`] answers by its [`OnFailure`] mode — carry on with the replica's own state,
//! or answer as throttled — logs the change of state once (not once per request), counts the
//! failures, and goes back to the store by itself as soon as an operation succeeds again.
//!
//! A store with a circuit breaker ([`SharedState::circuit`]; `holdoff-redis`'s has one) fails
//! fast: after one operation times out or cannot reach it, the next ones fail at once,
//! without waiting for it, until a probe in the background gets an answer. The store then
//! logs the two changes itself, when they happen, in the words of the proxy's failure mode
//! ([`SharedState::set_on_failure`]).

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use http::{Response, StatusCode, header::RETRY_AFTER};

use crate::body::Body;
use crate::fault::ratelimit::{Limit, Taken};
use crate::fault::tokens::{BudgetCheck, TokenBudget, Usage};
use crate::judge::{Penalty, WindowKey};
use crate::proxy::reply::{OwnAnswer, Refusal};
use crate::secs::ceil_secs;

/// Why a store operation failed (unreachable, timed out, a bad answer).
pub type StateError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// What a store operation yields, later.
pub type StateFuture<T> = Pin<Box<dyn Future<Output = Result<T, StateError>> + Send + 'static>>;

/// A store of windows and counters that several proxies share.
///
/// Every operation is atomic in the store (two replicas checking the same key at once see one
/// verdict each, in some order) and bounded by the store's own timeout. Keys are namespaced by
/// the store and expire by themselves: nothing is left behind once a window closes or a
/// counter goes idle.
pub trait SharedState: Send + Sync + fmt::Debug + 'static {
    /// Judges a request under `key` arriving now (the store's now): like
    /// [`Judge::check`](crate::judge::Judge::check), with `penalty` applied to a premature
    /// request's window.
    fn check(&self, key: WindowKey, penalty: Penalty) -> StateFuture<SharedCheck>;

    /// A hint reached a client: keep `key` closed for `wait` from now (the store's now). An
    /// open window keeps the later of the two permitted times. The window is kept for
    /// `retention` past its permitted time, for a late retry to close it, then expires.
    fn open(&self, key: WindowKey, wait: Duration, retention: Duration) -> StateFuture<()>;

    /// Counts a request of `limit.cost` under the counter `counter` (see [`CounterKey`]):
    /// as the fault stage's own limiter counts, with fixed windows aligned to the Unix epoch on
    /// the store's clock.
    fn take(&self, counter: &CounterKey, limit: Limit) -> StateFuture<Taken>;

    /// Checks a language-model request against the token budget `counter`, as the fault
    /// stage's own budgets do, with windows on the store's clock. A store without token budgets fails (the default).
    fn budget_check(&self, counter: &CounterKey, budget: TokenBudget) -> StateFuture<BudgetCheck> {
        let _ = (counter, budget);
        Box::pin(std::future::ready(Err(
            "this store keeps no token budgets".into()
        )))
    }

    /// Counts `usage` in the window `window` of the token budget `counter`, unless that
    /// window has ended, as the fault stage's own budgets do.
    /// A store without token budgets fails (the default).
    fn budget_spend(&self, counter: &CounterKey, window: u64, usage: Usage) -> StateFuture<()> {
        let _ = (counter, window, usage);
        Box::pin(std::future::ready(Err(
            "this store keeps no token budgets".into()
        )))
    }

    /// Where the state is, for logs: e.g. `redis://127.0.0.1:6379/0`, never with a password.
    fn location(&self) -> String;

    /// The store's circuit breaker as it stands, if it has one (`None`, the default, if
    /// not).
    ///
    /// A store with one answers every operation at once with an error while it is open, and
    /// logs when it opens and closes itself: [`SharedStore`] then logs neither.
    fn circuit(&self) -> Option<Circuit> {
        None
    }

    /// Tells the store what the proxy answers while it fails ([`SharedStore::new`] does),
    /// for a store that logs its own failures to say so. Does nothing by default.
    fn set_on_failure(&self, on_failure: OnFailure) {
        let _ = on_failure;
    }
}

/// A store's circuit breaker, as it stands: see [`SharedState::circuit`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Circuit {
    /// Whether it is open: the store is not asked, every operation fails at once (and the
    /// proxy answers by its failure mode), until a probe in the background gets an answer.
    pub open: bool,
    /// How many times it has opened.
    pub openings: u64,
}

/// What a store found for a request, in durations against the store's now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SharedCheck {
    /// No window is open under the key.
    Open,
    /// Before the permitted time; the window stays open.
    Premature {
        /// How long ago the window was opened.
        since_throttle: Duration,
        /// How early the request came, against the permitted time it broke.
        early_by: Duration,
        /// How long until a retry is permitted now (later than `early_by` under a sliding
        /// penalty).
        permitted_in: Duration,
    },
    /// At or after the permitted time; the window is closed.
    Compliant {
        /// How long ago the window was opened.
        since_throttle: Duration,
        /// How long after the permitted time the request came.
        late_by: Duration,
    },
}

/// The name of one rate-limit counter: the rule, then whose counter it is.
///
/// The rule part is a digest of what the rule counts (limit, window, cost, algorithm, URL
/// pattern, method, scope), so replicas with the same rule share its counters, and a rule
/// edited in a config file starts fresh ones.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct CounterKey {
    /// The rule's digest, 32 lowercase hex digits.
    pub rule: String,
    /// The client's identity for a per-client limit; empty for a shared one.
    pub scope: String,
}

impl fmt::Display for CounterKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.rule, self.scope)
    }
}

/// What the proxy answers while its [`SharedState`] store fails.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum OnFailure {
    /// Carry on with this replica's own state (windows it opened, requests it counted), and
    /// say so loudly. Traffic flows; a retry sent to another replica may go unjudged.
    #[default]
    FailOpen,
    /// Answer every watched request `503` with `Retry-After: hold`, without forwarding it,
    /// until the store is back.
    FailClosed {
        /// The wait sent with each refusal.
        hold: Duration,
    },
}

impl OnFailure {
    /// What the proxy does while the store fails, for a log line: `failing open: …` or
    /// `failing closed: …`.
    pub fn meanwhile(self) -> String {
        match self {
            OnFailure::FailOpen => "failing open: this replica judges and rate-limits with its \
                                    own state until it is back"
                .to_owned(),
            OnFailure::FailClosed { hold } => format!(
                "failing closed: watched requests get 503 with Retry-After: {} until it is back",
                ceil_secs(hold)
            ),
        }
    }
}

/// The answer to a watched request while the store fails and the mode is fail-closed: `503`
/// with `Retry-After: hold`, which opens no judge window (it is the proxy's, not the API's).
pub(crate) fn fail_closed_answer(hold: Duration) -> Response<Body> {
    let seconds = ceil_secs(hold);
    let mut response = Refusal::new(
        StatusCode::SERVICE_UNAVAILABLE,
        format!("the shared state is unreachable and the proxy fails closed; retry in {seconds}s"),
    )
    .into_response();
    response.headers_mut().insert(RETRY_AFTER, seconds.into());
    response.extensions_mut().insert(OwnAnswer);
    response
}

/// A [`SharedState`] store with its failure mode, health and failure count; shared by the
/// judge and the fault stage of one proxy.
#[derive(Debug)]
pub struct SharedStore {
    state: Arc<dyn SharedState>,
    on_failure: OnFailure,
    /// Whether the last operation succeeded (so a change is logged once).
    up: AtomicBool,
    failures: AtomicU64,
}

impl SharedStore {
    /// `state`, answering by `on_failure` while it fails (and telling it so, for its logs).
    pub fn new(state: Arc<dyn SharedState>, on_failure: OnFailure) -> SharedStore {
        state.set_on_failure(on_failure);
        SharedStore {
            state,
            on_failure,
            up: AtomicBool::new(true),
            failures: AtomicU64::new(0),
        }
    }

    /// The store.
    pub fn state(&self) -> &Arc<dyn SharedState> {
        &self.state
    }

    /// The failure mode.
    pub fn on_failure(&self) -> OnFailure {
        self.on_failure
    }

    /// Whether the store is in use: its circuit is closed, for a store with a breaker;
    /// otherwise, the last operation succeeded (true before the first).
    pub fn is_up(&self) -> bool {
        match self.state.circuit() {
            Some(circuit) => !circuit.open,
            None => self.up.load(Ordering::Relaxed),
        }
    }

    /// How many operations have failed so far, those a store's open circuit refused
    /// included.
    pub fn failures(&self) -> u64 {
        self.failures.load(Ordering::Relaxed)
    }

    /// The store's circuit breaker as it stands, if it has one.
    pub fn circuit(&self) -> Option<Circuit> {
        self.state.circuit()
    }

    /// Notes an operation's outcome, logging when the store goes down or comes back (unless
    /// it has a circuit breaker, which logs that itself), and hands back its value.
    pub fn settle<T>(&self, outcome: Result<T, StateError>) -> Option<T> {
        let logs_itself = self.state.circuit().is_some();
        match outcome {
            Ok(value) => {
                if !self.up.swap(true, Ordering::Relaxed) && !logs_itself {
                    tracing::warn!(
                        target: "holdoff::shared",
                        state = %self.state.location(),
                        "shared state is reachable again; judging and rate limiting with it"
                    );
                }
                Some(value)
            }
            Err(error) => {
                self.failures.fetch_add(1, Ordering::Relaxed);
                if self.up.swap(false, Ordering::Relaxed) && !logs_itself {
                    tracing::error!(
                        target: "holdoff::shared",
                        state = %self.state.location(),
                        error = %error,
                        "shared state failed; {}",
                        self.on_failure.meanwhile()
                    );
                }
                None
            }
        }
    }
}

/// A store that is never reachable, for testing what the proxy says while one fails.
#[cfg(test)]
#[derive(Debug)]
pub(crate) struct Unreachable;

#[cfg(test)]
impl SharedState for Unreachable {
    fn check(&self, _: WindowKey, _: Penalty) -> StateFuture<SharedCheck> {
        Box::pin(std::future::ready(Err("refused".into())))
    }

    fn open(&self, _: WindowKey, _: Duration, _: Duration) -> StateFuture<()> {
        Box::pin(std::future::ready(Err("refused".into())))
    }

    fn take(&self, _: &CounterKey, _: Limit) -> StateFuture<Taken> {
        Box::pin(std::future::ready(Err("refused".into())))
    }

    fn location(&self) -> String {
        "redis://127.0.0.1:1/0".to_owned()
    }
}

/// For tests: a store that fails every operation, whose circuit breaker stands as the test
/// sets it.
#[cfg(test)]
#[derive(Debug)]
pub(crate) struct Breakered(pub(crate) std::sync::Mutex<Circuit>);

#[cfg(test)]
impl SharedState for Breakered {
    fn check(&self, key: WindowKey, penalty: Penalty) -> StateFuture<SharedCheck> {
        Unreachable.check(key, penalty)
    }

    fn open(&self, key: WindowKey, wait: Duration, retention: Duration) -> StateFuture<()> {
        Unreachable.open(key, wait, retention)
    }

    fn take(&self, counter: &CounterKey, limit: Limit) -> StateFuture<Taken> {
        Unreachable.take(counter, limit)
    }

    fn location(&self) -> String {
        Unreachable.location()
    }

    fn circuit(&self) -> Option<Circuit> {
        Some(
            *self
                .0
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        )
    }
}
