//! The retry loop: drives an async operation under a [`Policy`], a [`Clock`] and a
//! cancellation signal, asking the pure decision what to do after every failed attempt.

use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use http::{HeaderMap, Method, StatusCode};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::clock::{Clock, TokioClock};
use crate::decision::{Decision, DeferReason, GiveUpReason, Permitted};
use crate::error::ParseError;
use crate::gate::{Gate, GateStore, MemoryGateStore};
use crate::policy::{Attempt, JitterDraw, Policy};
use crate::report::RetryReport;
use crate::request::Markers;
use crate::response::{Receipt, ResponseInfo};

/// What an attempt returned, as far as the loop needs to see it.
///
/// Implemented for `http::Response<B>`; implement it for a client's own response type. A
/// `reqwest::Response` is not one, but converts into one: return
/// `http::Response::from(response)` from the operation (or use holdoff-reqwest's
/// middleware, which runs this loop around reqwest for you).
pub trait Response {
    /// The status.
    fn status(&self) -> StatusCode;
    /// The headers.
    fn headers(&self) -> &HeaderMap;
    /// The body if it is already in memory, for the quota classifier; empty otherwise.
    fn body_bytes(&self) -> &[u8] {
        &[]
    }

    /// When the header section arrived, read on the loop's clock, for a client that did
    /// more before handing the response over (such as reading the start of its body for
    /// [`Response::body_bytes`]): every wait counts from the head, not from the body. `None`
    /// (the default): when the loop gets the response.
    fn received(&self) -> Option<Receipt> {
        None
    }
}

impl<B> Response for http::Response<B> {
    fn status(&self) -> StatusCode {
        http::Response::status(self)
    }
    fn headers(&self) -> &HeaderMap {
        http::Response::headers(self)
    }
}

mod event;
mod outcome;
#[cfg(test)]
mod tests;

pub use event::{AttemptEvent, trace_attempt};
pub use outcome::{Last, Outcome};
use outcome::{Step, Stop, next_step};

type Observer = Arc<dyn Fn(&AttemptEvent<'_>) + Send + Sync>;
type ErrorClassifier<E> = Arc<dyn Fn(&E) -> bool + Send + Sync>;

/// Runs an operation until it succeeds, the policy gives up or defers, or it is cancelled.
///
/// The loop never sees the request, so it is told what the idempotency rule needs: the
/// method, when it is built ([`Retrier::new`]), or the whole request's head
/// ([`Retrier::for_request`], which also reads the [markers](crate::request)). A `POST` is
/// not retried unless marked safe to repeat.
///
/// # Examples
///
/// ```
/// use holdoff::retry::{Outcome, Retrier};
/// use holdoff::Policy;
/// use http::Method;
/// use std::time::Duration;
///
/// # tokio::runtime::Builder::new_current_thread().enable_time().start_paused(true).build().unwrap().block_on(async {
/// let mut calls = 0;
/// let (outcome, report) = Retrier::new(Policy::default(), Method::GET)
///     .timeout(Duration::from_secs(30)) // the whole task: waits and attempts
///     .run(|_attempt| {
///         calls += 1;
///         let status = if calls < 3 { 503 } else { 200 };
///         async move {
///             let response = http::Response::builder()
///                 .status(status)
///                 .header("retry-after", "2")
///                 .body(())
///                 .unwrap();
///             Ok::<_, std::io::Error>(response)
///         }
///     })
///     .await;
/// assert!(outcome.is_success());
/// assert_eq!((calls, report.attempts), (3, 3));
/// # });
/// ```
///
/// With reqwest, hand the loop an `http::Response`: reqwest's response converts into one
/// (`http::Response::from(response)`), or use holdoff-reqwest's middleware, which runs this
/// loop for you.
///
/// # The deadline
///
/// [`Retrier::timeout`] or [`Retrier::deadline`] bounds the whole task, attempts included:
/// an attempt still running at the deadline is cut, and the outcome is
/// [`Outcome::Deferred`] with [`DeferReason::DeadlineReached`] and the report. A retry is
/// not started when the time left after its wait is less than the last attempt took (the
/// estimate of how long the next one will take): [`DeferReason::AttemptWouldNotFit`].
/// Without a deadline no single wait is longer than the policy's `max_wait`
/// ([`Policy::DEFAULT_MAX_WAIT`], 60 s, by default), but attempts are not cut.
///
/// # Cancellation
///
/// The deadline and cancellation are one mechanism: an attempt or a wait ends at once when
/// the [`CancellationToken`] given to [`Retrier::cancel_on`] fires (the outcome is
/// [`Outcome::Cancelled`]) as when the deadline comes, each with its report. Dropping the
/// future returned by [`Retrier::run`] stops the loop wherever it is.
pub struct Retrier<C = TokioClock, S = MemoryGateStore, E = ()> {
    policy: Policy,
    clock: C,
    method: Method,
    repeat_safe: bool,
    deadline: Option<Instant>,
    timeout: Option<Duration>,
    cancel: Option<CancellationToken>,
    gate: Option<(Arc<Gate<S>>, String)>,
    rng: SmallRng,
    observer: Option<Observer>,
    transient: Option<ErrorClassifier<E>>,
}

impl<E> Retrier<TokioClock, MemoryGateStore, E> {
    /// A loop for a request with this `method`, under this policy: tokio's clock, no
    /// deadline, no gate, not marked safe to repeat; every transport error counts as
    /// transient.
    pub fn new(policy: Policy, method: Method) -> Self {
        Retrier {
            policy,
            clock: TokioClock,
            method,
            repeat_safe: false,
            deadline: None,
            timeout: None,
            cancel: None,
            gate: None,
            rng: SmallRng::from_rng(&mut rand::rng()),
            observer: None,
            transient: None,
        }
    }

    /// A loop for `request` (its head is enough: `request.map(|_| ())` or the `Parts`'s
    /// pieces): its method, and the markers it carries — an `Idempotency-Key` header or
    /// [`RepeatSafe`](crate::request::RepeatSafe), a [`Deadline`](crate::request::Deadline),
    /// a [`Timeout`](crate::request::Timeout).
    pub fn for_request<B>(policy: Policy, request: &http::Request<B>) -> Self {
        let markers = Markers::of(request.headers(), request.extensions());
        let mut retrier = Retrier::new(policy, request.method().clone());
        retrier.repeat_safe = markers.repeat_safe;
        retrier.deadline = markers.deadline;
        retrier.timeout = markers.timeout;
        retrier
    }
}

impl<C, S, E> fmt::Debug for Retrier<C, S, E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Retrier")
            .field("policy", &self.policy)
            .field("method", &self.method)
            .field("repeat_safe", &self.repeat_safe)
            .field("deadline", &self.deadline)
            .field("gate", &self.gate.as_ref().map(|(_, key)| key))
            .finish_non_exhaustive()
    }
}

impl<C: Clock, S: GateStore, E> Retrier<C, S, E> {
    /// Uses this clock (e.g. a [`ManualClock`](crate::clock::ManualClock) in tests).
    pub fn clock<C2: Clock>(self, clock: C2) -> Retrier<C2, S, E> {
        Retrier {
            clock,
            policy: self.policy,
            method: self.method,
            repeat_safe: self.repeat_safe,
            deadline: self.deadline,
            timeout: self.timeout,
            cancel: self.cancel,
            gate: self.gate,
            rng: self.rng,
            observer: self.observer,
            transient: self.transient,
        }
    }

    /// Shares hints for `key` through `gate`: waits while the key is closed, and closes it
    /// for everyone when a response says so. See [`gate::key_of`](crate::gate::key_of).
    pub fn gate<S2: GateStore>(
        self,
        gate: Arc<Gate<S2>>,
        key: impl Into<String>,
    ) -> Retrier<C, S2, E> {
        Retrier {
            gate: Some((gate, key.into())),
            clock: self.clock,
            policy: self.policy,
            method: self.method,
            repeat_safe: self.repeat_safe,
            deadline: self.deadline,
            timeout: self.timeout,
            cancel: self.cancel,
            rng: self.rng,
            observer: self.observer,
            transient: self.transient,
        }
    }

    /// Which transport errors are worth retrying (all, by default).
    pub fn transient_if(
        mut self,
        is_transient: impl Fn(&E) -> bool + Send + Sync + 'static,
    ) -> Self {
        self.transient = Some(Arc::new(is_transient));
        self
    }

    /// Marks the request safe to repeat even if its method is not idempotent (e.g. it
    /// carries an `Idempotency-Key`).
    pub fn repeat_safe(mut self, safe: bool) -> Self {
        self.repeat_safe = safe;
        self
    }

    /// The task must be done by this instant: no wait that cannot fit is started, no retry
    /// that would still be running then, and an attempt still running then is cut.
    pub fn deadline(mut self, deadline: Instant) -> Self {
        self.deadline = Some(deadline);
        self
    }

    /// The task must be done within this long of [`Retrier::run`] starting, waits and
    /// attempts included (see [`Retrier::deadline`]).
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// Stops at once, even mid-wait, when `token` is cancelled.
    pub fn cancel_on(mut self, token: CancellationToken) -> Self {
        self.cancel = Some(token);
        self
    }

    /// Seeds the jitter's random source, for reproducible runs.
    pub fn seed(mut self, seed: u64) -> Self {
        self.rng = SmallRng::seed_from_u64(seed);
        self
    }

    /// Calls `observer` after every attempt (for metrics).
    pub fn on_attempt(
        mut self,
        observer: impl Fn(&AttemptEvent<'_>) + Send + Sync + 'static,
    ) -> Self {
        self.observer = Some(Arc::new(observer));
        self
    }

    /// Runs `operation` (given the attempt number, from 1) until the policy is done with it.
    /// Returns how it ended and the [`RetryReport`]: attempts sent, the last decision, and
    /// when the server permits the next request.
    pub async fn run<F, Fut, R>(self, operation: F) -> (Outcome<R, E>, RetryReport)
    where
        F: FnMut(u32) -> Fut,
        Fut: Future<Output = Result<R, E>>,
        R: Response,
    {
        let span = tracing::debug_span!("holdoff.retry", method = %self.method);
        // `instrument`, not `enter`: a guard held across `.await` would lend the span to
        // whatever else runs on this thread while the loop waits.
        self.run_in_span(operation).instrument(span).await
    }

    async fn run_in_span<F, Fut, R>(mut self, mut operation: F) -> (Outcome<R, E>, RetryReport)
    where
        F: FnMut(u32) -> Fut,
        Fut: Future<Output = Result<R, E>>,
        R: Response,
    {
        let deadline = self.effective_deadline();
        let mut last: Option<Last<R, E>> = None;
        let mut report = RetryReport::new(0, Decision::GiveUp(GiveUpReason::Cancelled));
        let mut number = 0u32;
        loop {
            number += 1;
            if let Some(stop) = self.wait_at_gate(deadline, &mut last, &report).await {
                return stop;
            }
            let sent = self.clock.now();
            let result = match self.until_stopped(operation(number), deadline).await {
                Ok(result) => result,
                Err(stop) => return stop.end(number, last, report),
            };
            let receipt = match &result {
                Ok(response) => response.received(),
                Err(_) => None,
            }
            .unwrap_or_else(|| Receipt::now(&self.clock));
            let unit: f64 = self.rng.random();
            let attempt = self
                .policy
                .attempt(&self.method, number)
                .with_repeat_safe(self.repeat_safe)
                .with_jitter(JitterDraw::Unit(unit))
                .with_remaining(deadline.map(|d| d.saturating_duration_since(receipt.instant)))
                .with_took(receipt.instant.saturating_duration_since(sent));
            let (step, judged) = match result {
                Ok(response) => {
                    self.after_response(number, response, &attempt, receipt)
                        .await
                }
                Err(error) => self.after_error(number, error, &attempt, receipt),
            };
            report = judged;
            match step {
                Step::Stop(outcome) => return (outcome, report),
                Step::RetryAt(at, previous) => {
                    last = Some(previous);
                    // The decision never retries at or past the deadline, so only the
                    // cancellation token can end this wait early.
                    if let Err(stop) = self
                        .until_stopped(self.clock.sleep_until(at), deadline)
                        .await
                    {
                        return stop.end(number, last, report);
                    }
                }
            }
        }
    }

    async fn after_response<R: Response>(
        &self,
        number: u32,
        response: R,
        attempt: &Attempt<'_>,
        receipt: Receipt,
    ) -> (Step<R, E>, RetryReport) {
        let status = response.status();
        let info = ResponseInfo::from_headers(status, response.headers(), receipt)
            .with_body(response.body_bytes());
        let verdict = self.policy.decide(&info, attempt);
        self.observe(
            AttemptEvent::new(number, Some(status), verdict.decision, verdict.permitted)
                .with_verdict(&verdict),
        );
        let report = RetryReport::of_verdict(number, &verdict);
        if let Some(permitted) = verdict.permitted
            && !status.is_success()
            && !permitted.after.is_zero()
        {
            self.close_gate(permitted).await;
        }
        let step = match report.decision {
            Decision::Done => Step::Stop(Outcome::Success(response)),
            Decision::FollowRedirect { at, .. } => Step::Stop(Outcome::Redirect { response, at }),
            Decision::Malformed(kind) => Step::Stop(Outcome::Malformed {
                error: report
                    .malformed
                    .clone()
                    .unwrap_or_else(|| ParseError::new(kind, b"")),
                response,
            }),
            decision => next_step(decision, Last::Response(response)),
        };
        (step, report)
    }

    fn after_error<R>(
        &self,
        number: u32,
        error: E,
        attempt: &Attempt<'_>,
        receipt: Receipt,
    ) -> (Step<R, E>, RetryReport) {
        if self
            .transient
            .as_ref()
            .is_some_and(|is_transient| !is_transient(&error))
        {
            tracing::debug!(attempt = number, "permanent transport error: not retried");
            let decision = Decision::GiveUp(GiveUpReason::PermanentError);
            self.observe(AttemptEvent::new(number, None, decision, None));
            let outcome = Outcome::GaveUp {
                reason: GiveUpReason::PermanentError,
                last: Last::Error(error),
            };
            return (Step::Stop(outcome), RetryReport::new(number, decision));
        }
        // A transport error names no time: the local backoff alone decides.
        let decision = self.policy.decide_error(attempt, receipt.instant);
        self.observe(AttemptEvent::new(number, None, decision, None));
        (
            next_step(decision, Last::Error(error)),
            RetryReport::new(number, decision),
        )
    }

    fn effective_deadline(&self) -> Option<Instant> {
        let markers = Markers {
            deadline: self.deadline,
            timeout: self.timeout,
            ..Markers::default()
        };
        markers.deadline_from(self.clock.now(), None)
    }

    /// Waits while the gate holds the key. Returns an outcome if the run must stop.
    async fn wait_at_gate<R>(
        &mut self,
        deadline: Option<Instant>,
        last: &mut Option<Last<R, E>>,
        report: &RetryReport,
    ) -> Option<(Outcome<R, E>, RetryReport)> {
        let (gate, key) = self.gate.as_ref()?;
        let admit = match gate.admit_at(key, &self.clock).await {
            Ok(admit) => admit?,
            Err(error) => {
                // A gate that cannot answer must not stop the work: go on without it.
                tracing::warn!(%error, key = %key, "gate unavailable; not waiting on it");
                return None;
            }
        };
        if deadline.is_some_and(|d| admit >= d) {
            let reason = DeferReason::DeadlineExceeded;
            let permitted = Permitted::until(self.clock.now(), self.clock.wall_now(), admit);
            let report = report
                .clone()
                .with_decision(Decision::Defer(reason), Some(permitted));
            let outcome = Outcome::Deferred {
                reason,
                last: last.take(),
            };
            return Some((outcome, report));
        }
        tracing::debug!(key = %key, "held at the gate");
        let wait = self.until_stopped(self.clock.sleep_until(admit), deadline);
        match wait.await {
            Ok(()) => None,
            Err(stop) => Some(stop.end(report.attempts, last.take(), report.clone())),
        }
    }

    async fn close_gate(&self, permitted: Permitted) {
        let (Some((gate, key)), Some(at), Some(wall)) = (&self.gate, permitted.at, permitted.wall)
        else {
            return;
        };
        if let Err(error) = gate.raise(key, at, wall).await {
            tracing::warn!(%error, key = %key, "could not share the hint through the gate");
        }
    }

    /// Runs `fut` unless the cancellation token fires or the task's deadline comes first:
    /// one mechanism bounds attempts and waits alike.
    async fn until_stopped<T>(
        &self,
        fut: impl Future<Output = T>,
        deadline: Option<Instant>,
    ) -> Result<T, Stop> {
        let cancelled = async {
            match &self.cancel {
                Some(token) => token.cancelled().await,
                None => std::future::pending().await,
            }
        };
        let deadline_reached = async {
            match deadline {
                Some(deadline) => self.clock.sleep_until(deadline).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            biased;
            () = cancelled => Err(Stop::Cancelled),
            () = deadline_reached => Err(Stop::DeadlineReached),
            value = fut => Ok(value),
        }
    }

    fn observe(&self, event: AttemptEvent<'_>) {
        trace_attempt(&event);
        if let Some(observer) = &self.observer {
            observer(&event);
        }
    }
}
