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
use crate::decision::{Decision, DeferReason, GiveUpReason, Permitted, Verdict};
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

/// The last thing an attempt produced: a response or a transport error.
#[derive(Debug)]
pub enum Last<R, E> {
    /// A response.
    Response(R),
    /// A transport error (connect refused, reset, timeout, …).
    Error(E),
}

impl<R, E> Last<R, E> {
    /// The response, if it was one.
    pub fn into_response(self) -> Option<R> {
        match self {
            Last::Response(r) => Some(r),
            Last::Error(_) => None,
        }
    }
}

enum Step<R, E> {
    Stop(Outcome<R, E>),
    RetryAt(Instant, Last<R, E>),
}

/// Why the loop stopped before an attempt or a wait had finished.
#[derive(Clone, Copy, Debug)]
enum Stop {
    /// The cancellation token fired.
    Cancelled,
    /// The task's deadline came.
    DeadlineReached,
}

impl Stop {
    /// The outcome and report when attempt `number` (or the wait after it) was stopped,
    /// `report` being the last attempt's that was judged.
    fn end<R, E>(
        self,
        number: u32,
        last: Option<Last<R, E>>,
        report: RetryReport,
    ) -> (Outcome<R, E>, RetryReport) {
        match self {
            Stop::Cancelled => {
                let permitted = report.permitted;
                let decision = Decision::GiveUp(GiveUpReason::Cancelled);
                (
                    Outcome::Cancelled { last },
                    report.with_decision(decision, permitted),
                )
            }
            Stop::DeadlineReached => {
                // The cut attempt counts as sent; it named no time of its own.
                let reason = DeferReason::DeadlineReached;
                let report = RetryReport::new(number, Decision::Defer(reason));
                (Outcome::Deferred { reason, last }, report)
            }
        }
    }
}

/// Where a retry, a deferral or a give-up leads, with what the attempt produced.
fn next_step<R, E>(decision: Decision, last: Last<R, E>) -> Step<R, E> {
    Step::Stop(match decision {
        Decision::Retry { at, .. } => return Step::RetryAt(at, last),
        Decision::Defer(reason) => Outcome::Deferred {
            reason,
            last: Some(last),
        },
        Decision::GiveUp(reason) => Outcome::GaveUp { reason, last },
        // Done, redirects and malformed hints need the response, and are handled where it
        // is; `decide_error` never gives them.
        _ => Outcome::GaveUp {
            reason: GiveUpReason::PermanentError,
            last,
        },
    })
}

/// How a run of the loop ended. The [`RetryReport`] returned beside it says how many
/// attempts were sent and when the server permits the next request.
#[derive(Debug)]
#[non_exhaustive]
#[must_use = "a deferred task must be re-queued for `RetryReport::requeue_at`, not dropped"]
pub enum Outcome<R, E> {
    /// A 2xx response.
    Success(R),
    /// A 3xx with `Location`: the client should follow it at `at`.
    Redirect {
        /// The redirect response.
        response: R,
        /// When to follow it (receipt + hint).
        at: Instant,
    },
    /// A retry is permitted later, but not within the deadline or `max_wait`, or the
    /// deadline came during an attempt ([`DeferReason::DeadlineReached`]): re-queue the task
    /// for [`RetryReport::requeue_at`] instead of retrying early.
    Deferred {
        /// Why the task was deferred.
        reason: DeferReason,
        /// The last response (or error); `None` when the task was deferred at the gate
        /// before any attempt was sent, or its first attempt was cut at the deadline.
        last: Option<Last<R, E>>,
    },
    /// Retrying would not help or is not allowed.
    GaveUp {
        /// Why.
        reason: GiveUpReason,
        /// The last response or error.
        last: Last<R, E>,
    },
    /// The cancellation token fired, during an attempt or a wait.
    Cancelled {
        /// The last response or error before the cancellation, if any.
        last: Option<Last<R, E>>,
    },
    /// The server sent a malformed hint and the policy treats that as an error.
    Malformed {
        /// The parse error, with the raw value.
        error: ParseError,
        /// The response that carried it.
        response: R,
    },
}

impl<R, E> Outcome<R, E> {
    /// The last response, whatever the outcome, if there was one.
    pub fn into_response(self) -> Option<R> {
        match self {
            Outcome::Success(r) | Outcome::Redirect { response: r, .. } => Some(r),
            Outcome::Malformed { response, .. } => Some(response),
            Outcome::GaveUp { last, .. } => last.into_response(),
            Outcome::Deferred { last, .. } | Outcome::Cancelled { last } => {
                last.and_then(Last::into_response)
            }
        }
    }

    /// Whether the run succeeded.
    pub fn is_success(&self) -> bool {
        matches!(self, Outcome::Success(_))
    }
}

/// One attempt, as reported to [`Retrier::on_attempt`] (and to `tracing`).
#[derive(Clone, Copy, Debug)]
#[non_exhaustive]
pub struct AttemptEvent<'a> {
    /// Which attempt, from 1.
    pub number: u32,
    /// The response status, or `None` for a transport error.
    pub status: Option<StatusCode>,
    /// What was decided.
    pub decision: Decision,
    /// When the server permits the next request; `None` when it named no time.
    pub permitted: Option<Permitted>,
    /// The full verdict, for a response.
    pub verdict: Option<&'a Verdict<'a>>,
}

impl<'a> AttemptEvent<'a> {
    /// Attempt `number` got `status` (or a transport error) and `decision`.
    pub fn new(
        number: u32,
        status: Option<StatusCode>,
        decision: Decision,
        permitted: Option<Permitted>,
    ) -> Self {
        AttemptEvent {
            number,
            status,
            decision,
            permitted,
            verdict: None,
        }
    }

    /// The same event with the verdict behind it.
    pub fn with_verdict(self, verdict: &'a Verdict<'a>) -> Self {
        AttemptEvent {
            verdict: Some(verdict),
            ..self
        }
    }
}

/// Emits the `tracing` event (`holdoff attempt`, level INFO) that every judged attempt gets,
/// in the loop and in the tower and reqwest integrations alike.
pub fn trace_attempt(event: &AttemptEvent<'_>) {
    let diagnostics = event.verdict.map(|v| v.diagnostics);
    tracing::info!(
        attempt = event.number,
        status = event.status.map(|s| s.as_u16()),
        action = event.decision.action(),
        reason = event.decision.reason().as_str(),
        wait_ms = event.decision.wait().map(|w| w.as_millis() as u64),
        permitted_in_ms = event.permitted.map(|p| p.after.as_millis() as u64),
        hint_source = diagnostics.and_then(|d| d.source).map(|s| s.header_name()),
        skew_s = diagnostics.and_then(|d| d.skew).map(|s| s.as_secs_i64()),
        "holdoff attempt"
    );
}

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backoff::Backoff;
    use crate::jitter::Jitter;
    use std::sync::Mutex;

    fn reply(status: u16, retry_after: Option<&str>) -> Result<http::Response<()>, std::io::Error> {
        let mut builder = http::Response::builder().status(status);
        if let Some(value) = retry_after {
            builder = builder.header("retry-after", value);
        }
        Ok(builder.body(()).expect("valid response"))
    }

    fn get(policy: Policy) -> Retrier<TokioClock, MemoryGateStore, std::io::Error> {
        Retrier::new(policy, Method::GET)
    }

    fn plain_policy() -> Policy {
        Policy::default()
            .with_backoff(Backoff::None)
            .with_jitter(Jitter::None)
    }

    /// Runs `script` (one reply per attempt) and returns the outcome and the instant of
    /// every attempt, relative to the start.
    async fn run_script(
        retrier: Retrier<TokioClock, MemoryGateStore, std::io::Error>,
        script: Vec<Result<http::Response<()>, std::io::Error>>,
    ) -> (
        Outcome<http::Response<()>, std::io::Error>,
        Vec<Duration>,
        RetryReport,
    ) {
        let start = TokioClock.now();
        let calls = Arc::new(Mutex::new(Vec::new()));
        let mut script = script.into_iter();
        let seen = calls.clone();
        let (outcome, report) = retrier
            .run(move |_| {
                seen.lock().expect("lock").push(TokioClock.now() - start);
                let next = script.next().unwrap_or_else(|| reply(200, None));
                async move { next }
            })
            .await;
        let calls = calls.lock().expect("lock").clone();
        (outcome, calls, report)
    }

    mod run {
        use super::*;

        #[tokio::test(start_paused = true)]
        async fn retries_exactly_when_the_hint_permits() {
            let (outcome, calls, report) = run_script(
                get(plain_policy()),
                vec![reply(503, Some("2")), reply(429, Some("5"))],
            )
            .await;
            assert!(outcome.is_success());
            assert_eq!(
                (report.attempts, report.reason()),
                (3, crate::Reason::Success)
            );
            assert_eq!(
                calls,
                [
                    Duration::ZERO,
                    Duration::from_secs(2),
                    Duration::from_secs(7)
                ]
            );
        }

        #[tokio::test(start_paused = true)]
        async fn never_retries_before_the_backoff() {
            let policy = plain_policy().with_backoff(Backoff::Constant(Duration::from_secs(5)));
            let (_, calls, _) = run_script(get(policy), vec![reply(503, Some("1"))]).await;
            assert_eq!(calls, [Duration::ZERO, Duration::from_secs(5)]);
        }

        #[tokio::test(start_paused = true)]
        async fn defers_when_the_wait_cannot_fit_and_does_not_sleep() {
            let start = TokioClock.now();
            let retrier =
                get(plain_policy().with_backoff(Backoff::Constant(Duration::from_secs(8))))
                    .timeout(Duration::from_secs(12));
            let (outcome, calls, report) = run_script(retrier, vec![reply(503, Some("30"))]).await;
            let Outcome::Deferred { reason, last } = outcome else {
                panic!("expected a deferral, got {outcome:?}");
            };
            assert_eq!(reason, DeferReason::DeadlineExceeded);
            assert!(matches!(last, Some(Last::Response(_))));
            assert_eq!(report.deferred(), Some(DeferReason::DeadlineExceeded));
            assert_eq!(
                report.permitted.and_then(|p| p.at),
                Some(start + Duration::from_secs(30))
            );
            assert!(matches!(report.requeue_at(), crate::Requeue::At(_)));
            assert_eq!(calls.len(), 1);
            assert_eq!(TokioClock.now(), start, "no virtual time may pass");
        }

        #[tokio::test(start_paused = true)]
        async fn does_not_retry_a_post_unless_marked_safe() {
            let retrier = Retrier::new(plain_policy(), Method::POST);
            let (outcome, calls, report) = run_script(retrier, vec![reply(503, Some("1"))]).await;
            assert!(matches!(
                outcome,
                Outcome::GaveUp {
                    reason: GiveUpReason::NonIdempotent,
                    ..
                }
            ));
            assert_eq!(calls.len(), 1);
            assert_eq!(report.gave_up(), Some(GiveUpReason::NonIdempotent));

            let retrier = Retrier::new(plain_policy(), Method::POST).repeat_safe(true);
            let (outcome, calls, report) = run_script(retrier, vec![reply(503, Some("1"))]).await;
            assert!(outcome.is_success());
            assert_eq!((calls.len(), report.attempts), (2, 2));
        }

        #[tokio::test(start_paused = true)]
        async fn reads_the_method_and_markers_of_a_request() {
            let post = http::Request::post("http://127.0.0.1:1/v1/jobs")
                .body(())
                .expect("request");
            let (outcome, calls, _) = run_script(
                Retrier::for_request(plain_policy(), &post),
                vec![reply(503, Some("1"))],
            )
            .await;
            assert!(matches!(outcome, Outcome::GaveUp { .. }));
            assert_eq!(calls.len(), 1);

            let keyed = http::Request::post("http://127.0.0.1:1/v1/jobs")
                .header("Idempotency-Key", "8e03978e")
                .extension(crate::request::Timeout(Duration::from_secs(10)))
                .body(())
                .expect("request");
            let (outcome, calls, report) = run_script(
                Retrier::for_request(plain_policy(), &keyed),
                vec![reply(503, Some("1")), reply(503, Some("30"))],
            )
            .await;
            assert!(matches!(outcome, Outcome::Deferred { .. }), "{outcome:?}");
            assert_eq!(calls.len(), 2);
            assert_eq!(report.deferred(), Some(DeferReason::DeadlineExceeded));
        }

        #[tokio::test(start_paused = true)]
        async fn hands_back_a_malformed_hint_with_its_raw_value() {
            let (outcome, calls, report) =
                run_script(get(plain_policy()), vec![reply(503, Some("1.5"))]).await;
            let Outcome::Malformed { error, response } = outcome else {
                panic!("expected malformed, got {outcome:?}");
            };
            assert_eq!(error.raw(), b"1.5");
            assert_eq!(response.status(), 503);
            assert_eq!(calls.len(), 1);
            assert_eq!(
                report.malformed.as_ref().map(ParseError::raw),
                Some(&b"1.5"[..])
            );
            // A malformed hint names no time: never "permitted now".
            assert_eq!(report.permitted, None);
        }

        #[tokio::test(start_paused = true)]
        async fn stops_after_the_last_attempt() {
            let retrier = get(plain_policy().with_max_attempts(3));
            let (outcome, calls, report) =
                run_script(retrier, (0..5).map(|_| reply(503, Some("1"))).collect()).await;
            assert!(matches!(
                outcome,
                Outcome::GaveUp {
                    reason: GiveUpReason::AttemptsExhausted,
                    ..
                }
            ));
            assert_eq!(calls.len(), 3);
            assert_eq!(report.attempts, 3);
        }

        #[tokio::test(start_paused = true)]
        async fn retries_transport_errors_on_the_backoff_alone() {
            let policy = plain_policy().with_backoff(Backoff::exponential(
                Duration::from_secs(1),
                Duration::from_secs(60),
            ));
            let refused = || Err(std::io::Error::from(std::io::ErrorKind::ConnectionRefused));
            let (outcome, calls, report) =
                run_script(get(policy), vec![refused(), refused()]).await;
            assert!(outcome.is_success());
            assert_eq!(report.attempts, 3);
            assert_eq!(
                calls,
                [
                    Duration::ZERO,
                    Duration::from_secs(1),
                    Duration::from_secs(3)
                ]
            );
        }

        #[tokio::test(start_paused = true)]
        async fn gives_up_on_a_permanent_transport_error() {
            let retrier = get(plain_policy())
                .transient_if(|e: &std::io::Error| e.kind() != std::io::ErrorKind::InvalidInput);
            let start = TokioClock.now();
            let (outcome, report) = retrier
                .run(|_| async {
                    Err::<http::Response<()>, _>(std::io::Error::from(
                        std::io::ErrorKind::InvalidInput,
                    ))
                })
                .await;
            assert!(matches!(
                outcome,
                Outcome::GaveUp {
                    reason: GiveUpReason::PermanentError,
                    last: Last::Error(_)
                }
            ));
            assert_eq!(report.reason(), crate::Reason::PermanentError);
            assert_eq!(TokioClock.now(), start);
        }

        #[tokio::test(start_paused = true)]
        async fn reports_every_attempt() {
            let seen = Arc::new(Mutex::new(Vec::new()));
            let record = seen.clone();
            let retrier = get(plain_policy()).on_attempt(move |event| {
                record.lock().expect("lock").push((
                    event.number,
                    event.status.map(|s| s.as_u16()),
                    event.decision.action(),
                ));
            });
            let _ = run_script(retrier, vec![reply(503, Some("1"))]).await;
            assert_eq!(
                *seen.lock().expect("lock"),
                [(1, Some(503), "retry"), (2, Some(200), "done")]
            );
        }
    }

    mod cancellation {
        use super::*;

        #[tokio::test(start_paused = true)]
        async fn interrupts_a_one_hour_wait_at_once() {
            let token = CancellationToken::new();
            let cancel = token.clone();
            let start = TokioClock.now();
            // Cancel as soon as the first attempt has been decided: mid-wait.
            let retrier = get(plain_policy().with_max_wait(None))
                .cancel_on(token)
                .on_attempt(move |_| cancel.cancel());
            let (outcome, calls, report) =
                run_script(retrier, vec![reply(503, Some("3600"))]).await;
            assert!(matches!(
                outcome,
                Outcome::Cancelled {
                    last: Some(Last::Response(_))
                }
            ));
            assert_eq!(calls.len(), 1);
            assert_eq!(report.gave_up(), Some(GiveUpReason::Cancelled));
            assert_eq!(
                report.permitted.map(|p| p.after),
                Some(Duration::from_secs(3600))
            );
            assert_eq!(TokioClock.now(), start, "no virtual time may pass");
        }

        #[tokio::test(start_paused = true)]
        async fn dropping_the_future_stops_the_wait() {
            let start = TokioClock.now();
            let policy = plain_policy().with_max_wait(None);
            let run = run_script(get(policy), vec![reply(503, Some("3600"))]);
            let raced = tokio::select! {
                _ = run => "run",
                () = std::future::ready(()) => "dropped",
            };
            assert_eq!(raced, "dropped");
            assert_eq!(TokioClock.now(), start);
        }
    }

    mod deadline {
        use super::*;
        use crate::clock::ManualClock;
        use std::time::SystemTime;

        fn manual() -> ManualClock {
            ManualClock::new(SystemTime::UNIX_EPOCH)
        }

        /// A GET on `clock` that must be done within 5 s.
        fn within_5s(clock: &ManualClock) -> Retrier<ManualClock, MemoryGateStore, std::io::Error> {
            get(plain_policy())
                .clock(clock.clone())
                .timeout(Duration::from_secs(5))
        }

        #[tokio::test]
        async fn cuts_an_attempt_still_running_at_the_deadline() {
            let clock = manual();
            let start = clock.now();
            let server = clock.clone();
            let (outcome, report) = within_5s(&clock)
                .run(move |_| {
                    // An answer that would come after 10 s; the clock moves 5 s meanwhile.
                    let server = server.clone();
                    async move {
                        server.advance(Duration::from_secs(5));
                        server.sleep_until(start + Duration::from_secs(10)).await;
                        reply(200, None)
                    }
                })
                .await;
            let Outcome::Deferred { reason, last } = outcome else {
                panic!("expected a deadline result, got {outcome:?}");
            };
            assert_eq!(reason, DeferReason::DeadlineReached);
            assert!(last.is_none(), "the cut attempt gave nothing");
            assert_eq!(report.attempts, 1);
            assert_eq!(report.reason(), crate::Reason::DeadlineReached);
            assert_eq!(clock.now(), start + Duration::from_secs(5));
            assert_eq!(clock.sleepers(), 0, "the cut attempt was dropped");
        }

        #[tokio::test]
        async fn does_not_start_a_retry_that_would_not_finish_in_time() {
            let clock = manual();
            let start = clock.now();
            let server = clock.clone();
            let (outcome, report) = within_5s(&clock)
                .run(move |_| {
                    // Each answer takes 3 s; the hint (1 s) fits in the 2 s left, the retry
                    // that would follow it does not.
                    server.advance(Duration::from_secs(3));
                    std::future::ready(reply(503, Some("1")))
                })
                .await;
            let Outcome::Deferred { reason, last } = outcome else {
                panic!("expected a deferral, got {outcome:?}");
            };
            assert_eq!(reason, DeferReason::AttemptWouldNotFit);
            assert!(matches!(last, Some(Last::Response(_))));
            assert_eq!(report.attempts, 1);
            assert_eq!(report.reason(), crate::Reason::AttemptWouldNotFit);
            assert_eq!(
                report.permitted.and_then(|p| p.at),
                Some(start + Duration::from_secs(4)),
                "the server's time is kept for the re-queue"
            );
            assert_eq!(
                clock.now(),
                start + Duration::from_secs(3),
                "no wait was started"
            );
        }

        #[tokio::test]
        async fn retries_while_a_retry_still_fits() {
            let clock = manual();
            let server = clock.clone();
            let mut calls = 0u32;
            let run = within_5s(&clock).run(move |_| {
                calls += 1;
                server.advance(Duration::from_secs(1));
                let answer = if calls == 1 {
                    reply(503, Some("1"))
                } else {
                    reply(200, None)
                };
                std::future::ready(answer)
            });
            let driver = async {
                // The wait after the first answer: release it once it is registered.
                while clock.sleepers() < 2 {
                    tokio::task::yield_now().await;
                }
                let next = clock.next_deadline().expect("a wait");
                clock.advance(next - clock.now());
            };
            let ((outcome, report), ()) = tokio::join!(run, driver);
            assert!(outcome.is_success(), "{outcome:?}");
            assert_eq!(report.attempts, 2);
        }

        #[tokio::test]
        async fn cancellation_stops_an_attempt_in_flight_the_same_way() {
            let clock = manual();
            let token = CancellationToken::new();
            let cancel = token.clone();
            let (outcome, report) = within_5s(&clock)
                .cancel_on(token)
                .run(move |_| {
                    cancel.cancel();
                    std::future::pending::<Result<http::Response<()>, std::io::Error>>()
                })
                .await;
            assert!(
                matches!(outcome, Outcome::Cancelled { last: None }),
                "{outcome:?}"
            );
            assert_eq!(report.gave_up(), Some(GiveUpReason::Cancelled));
            assert_eq!(clock.sleepers(), 0, "the deadline's sleep was dropped too");
        }
    }

    mod gate {
        use super::*;
        use crate::gate::Gate;

        #[tokio::test(start_paused = true)]
        async fn holds_every_task_until_the_hint_and_spreads_them() {
            let gate = Arc::new(
                Gate::in_memory()
                    .spread(Jitter::Uniform(Duration::from_secs(1)))
                    .seed(3),
            );
            let start = TokioClock.now();
            let first = Arc::new(std::sync::atomic::AtomicBool::new(true));
            let calls = Arc::new(Mutex::new(Vec::<Duration>::new()));
            let mut tasks = tokio::task::JoinSet::new();
            for task in 0..200u64 {
                let (gate, first, calls) = (gate.clone(), first.clone(), calls.clone());
                tasks.spawn(async move {
                    // Task 0 goes first and learns the hint; the others arrive just after.
                    if task > 0 {
                        TokioClock
                            .sleep_until(start + Duration::from_millis(10))
                            .await;
                    }
                    get(plain_policy())
                        .seed(task)
                        .gate(gate, "http://api.test:80")
                        .run(move |_| {
                            calls.lock().expect("lock").push(TokioClock.now() - start);
                            let throttled = first.swap(false, std::sync::atomic::Ordering::SeqCst);
                            async move {
                                if throttled {
                                    reply(503, Some("2"))
                                } else {
                                    reply(200, None)
                                }
                            }
                        })
                        .await
                        .0
                        .is_success()
                });
            }
            while let Some(done) = tasks.join_next().await {
                assert!(done.expect("task"));
            }
            let mut calls = calls.lock().expect("lock").clone();
            calls.sort();
            assert_eq!(
                calls.len(),
                201,
                "one throttled call, then one call per task"
            );
            assert_eq!(calls[0], Duration::ZERO);
            let resumed = &calls[1..];
            assert!(
                resumed.iter().all(|t| *t >= Duration::from_secs(2)),
                "nobody early: {:?}",
                resumed[0]
            );
            assert!(resumed.iter().all(|t| *t <= Duration::from_secs(3)));
            // Spread over the window, not bunched: every quarter of the second has many.
            for quarter in 0..4u32 {
                let lo = Duration::from_secs(2) + Duration::from_millis(250) * quarter;
                let hi = lo + Duration::from_millis(250);
                let n = resumed.iter().filter(|t| **t >= lo && **t < hi).count();
                assert!(n >= 25, "quarter {quarter} has only {n} resumptions");
            }
        }
    }
}
