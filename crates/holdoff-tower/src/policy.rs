//! The retry policy: holdoff's decision behind tower's `retry::Policy`.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use holdoff::clock::{Clock, Sleep, TokioClock};
use holdoff::gate::{Gate, GateStore, MemoryGateStore};
use holdoff::retry::AttemptEvent;
use holdoff::{
    Attempt, Decision, DeferReason, JitterDraw, Permitted, Policy, Receipt, ResponseInfo,
    RetryReport,
};
use http::{Request, Response, StatusCode};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use crate::body::CloneBody;
use crate::future::{self, Wait};
use crate::request::{ReportSlot, gate_key, markers};

/// A [`tower::retry::Policy`] for `http::Request`/`http::Response` that honours the server's
/// hint (`Retry-After` and the vendor hints) as a lower bound, defers what cannot fit before
/// the task's deadline, and shares hints through an optional [`Gate`].
///
/// tower clones the policy for every request, so each request has its own attempt count,
/// deadline and jitter draws; the gate, the seed source and the count of [unclonable
/// requests](RetryPolicy::unclonable_requests) are shared by every clone, behind an `Arc`.
///
/// # Examples
///
/// ```
/// use holdoff_tower::holdoff::gate::Gate;
/// use holdoff_tower::holdoff::{Backoff, Policy};
/// use holdoff_tower::RetryPolicy;
/// use std::sync::Arc;
/// use std::time::Duration;
///
/// let gate = Arc::new(Gate::in_memory());
/// let policy = RetryPolicy::new(
///     Policy::default().with_backoff(Backoff::exponential(Duration::from_secs(1), Duration::from_secs(30))),
/// )
/// .timeout(Duration::from_secs(60))
/// .gate(gate);
/// let layer = holdoff_tower::RetryLayer::new(policy);
/// # let _ = layer;
/// ```
pub struct RetryPolicy<C = TokioClock, S = MemoryGateStore> {
    policy: Policy,
    clock: C,
    gate: Option<Arc<Gate<S>>>,
    timeout: Option<Duration>,
    /// Seeds each request's own random source. Shared by every clone, so requests sent
    /// through clones of one service (one per task, say) never draw the same jitter.
    seeds: Arc<Mutex<SmallRng>>,
    unclonable: Arc<AtomicU64>,
    /// Per request: attempts sent and judged so far (0 on the service's own policy).
    attempts: u32,
    /// Per request: the task must be done by then.
    deadline: Option<Instant>,
    /// Per request: the jitter draws.
    rng: SmallRng,
    /// Per request: when the attempt in flight was sent, to estimate the next one's length.
    sent: Option<Instant>,
}

impl RetryPolicy<TokioClock, MemoryGateStore> {
    /// A policy that retries as `policy` says, on tokio's clock, with no deadline and no
    /// gate.
    pub fn new(policy: Policy) -> Self {
        RetryPolicy {
            policy,
            clock: TokioClock,
            gate: None,
            timeout: None,
            seeds: Arc::new(Mutex::new(SmallRng::from_os_rng())),
            unclonable: Arc::new(AtomicU64::new(0)),
            attempts: 0,
            deadline: None,
            rng: SmallRng::from_os_rng(),
            sent: None,
        }
    }
}

impl<C: Clock + Clone, S: GateStore> RetryPolicy<C, S> {
    /// Uses this clock (e.g. a [`ManualClock`](holdoff::clock::ManualClock) in tests).
    pub fn clock<C2: Clock + Clone>(self, clock: C2) -> RetryPolicy<C2, S> {
        RetryPolicy {
            clock,
            policy: self.policy,
            gate: self.gate,
            timeout: self.timeout,
            seeds: self.seeds,
            unclonable: self.unclonable,
            attempts: self.attempts,
            deadline: self.deadline,
            rng: self.rng,
            sent: self.sent,
        }
    }

    /// Shares hints through `gate`: a hinted failure closes the request's key (by default
    /// `scheme://host:port`, or its [`GateKey`](crate::GateKey)) for everyone, and a retry
    /// waits while the key is closed.
    ///
    /// The first attempt of a request is not held at the gate: tower asks the policy only
    /// after an attempt.
    pub fn gate<S2: GateStore>(self, gate: Arc<Gate<S2>>) -> RetryPolicy<C, S2> {
        RetryPolicy {
            gate: Some(gate),
            clock: self.clock,
            policy: self.policy,
            timeout: self.timeout,
            seeds: self.seeds,
            unclonable: self.unclonable,
            attempts: self.attempts,
            deadline: self.deadline,
            rng: self.rng,
            sent: self.sent,
        }
    }

    /// Each request must be done within this long of `Retry` being called with it: a retry
    /// whose wait would not end before then is deferred, never shortened. A request's own
    /// [`Timeout`](holdoff::request::Timeout) replaces it, and its
    /// [`Deadline`](holdoff::request::Deadline) tightens it.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// Seeds the jitter's random source, for reproducible runs: each new request takes
    /// its own stream from it, in the order tower is called.
    pub fn seed(mut self, seed: u64) -> Self {
        self.seeds = Arc::new(Mutex::new(SmallRng::seed_from_u64(seed)));
        self.rng = self.next_rng();
        self
    }

    /// A random source for a new request.
    fn next_rng(&self) -> SmallRng {
        let mut seeds = self.seeds.lock().unwrap_or_else(PoisonError::into_inner);
        SmallRng::seed_from_u64(seeds.random())
    }

    /// The decision policy.
    pub fn policy(&self) -> &Policy {
        &self.policy
    }

    /// How many requests this policy and its clones let through unretried because their
    /// body could not be cloned (each is also logged with `tracing::warn!`). Requests that
    /// could not be retried anyway (a POST without an `Idempotency-Key`) are not counted.
    pub fn unclonable_requests(&self) -> u64 {
        self.unclonable.load(Ordering::Relaxed)
    }

    fn after_response<B>(
        &self,
        response: &mut Response<B>,
        attempt: &Attempt<'_>,
        receipt: Receipt,
        key: Option<String>,
        slot: Option<&ReportSlot>,
    ) -> Option<Sleep>
    where
        C: 'static,
        S: 'static,
    {
        let status = response.status();
        let verdict = self.policy.decide(
            &ResponseInfo::from_headers(status, response.headers(), receipt),
            attempt,
        );
        let mut report = RetryReport::of_verdict(attempt.number, &verdict);
        if let (Some(gate), Some(key), Some(permitted)) = (&self.gate, &key, verdict.permitted)
            && let (Some(at), Some(wall)) = (permitted.at, permitted.wall)
            && !status.is_success()
            && !permitted.after.is_zero()
        {
            future::share(gate, key.clone(), at, wall);
        }
        if let Decision::Retry { at, .. } = report.decision {
            match self.wait(at, key) {
                Wait::Sleep(sleep) => {
                    observe(&report, Some(status), slot);
                    return Some(sleep);
                }
                Wait::Deferred(until) => {
                    let held = Permitted::until(receipt.instant, receipt.wall, until);
                    report = report
                        .with_decision(Decision::Defer(DeferReason::DeadlineExceeded), Some(held));
                }
            }
        }
        observe(&report, Some(status), slot);
        response.extensions_mut().insert(report);
        None
    }

    fn after_error(
        &self,
        attempt: &Attempt<'_>,
        receipt: Receipt,
        key: Option<String>,
        slot: Option<&ReportSlot>,
    ) -> Option<Sleep>
    where
        C: 'static,
        S: 'static,
    {
        // A transport error names no time: the local backoff alone decides.
        let decision = self.policy.decide_error(attempt, receipt.instant);
        let mut report = RetryReport::new(attempt.number, decision);
        let mut sleep = None;
        if let Decision::Retry { at, .. } = decision {
            match self.wait(at, key) {
                Wait::Sleep(wait) => sleep = Some(wait),
                Wait::Deferred(until) => {
                    let held = Permitted::until(receipt.instant, receipt.wall, until);
                    report = report
                        .with_decision(Decision::Defer(DeferReason::DeadlineExceeded), Some(held));
                }
            }
        }
        observe(&report, None, slot);
        sleep
    }

    fn wait(&self, at: Instant, key: Option<String>) -> Wait
    where
        C: 'static,
        S: 'static,
    {
        let gate = self.gate.as_ref().zip(key);
        future::hold(&self.clock, gate, at, self.deadline)
    }
}

impl<C, S> RetryPolicy<C, S> {
    /// The clock, for [`Retry`](crate::Retry) to read the same time as the policy.
    pub(crate) fn clock_ref(&self) -> &C {
        &self.clock
    }

    /// The task timeout set with [`RetryPolicy::timeout`].
    pub(crate) fn timeout_setting(&self) -> Option<Duration> {
        self.timeout
    }
}

/// One event per judged attempt, the same as holdoff's own retry loop emits; the report is
/// also left in the request's slot, for [`Retry`](crate::Retry) to hand back with an error.
fn observe(report: &RetryReport, status: Option<StatusCode>, slot: Option<&ReportSlot>) {
    if let Some(slot) = slot {
        slot.judged(report);
    }
    holdoff::retry::trace_attempt(&AttemptEvent::new(
        report.attempts,
        status,
        report.decision,
        report.permitted,
    ));
}

impl<B, ResB, E, C, S> tower::retry::Policy<Request<B>, Response<ResB>, E> for RetryPolicy<C, S>
where
    B: CloneBody,
    C: Clock + Clone + 'static,
    S: GateStore + 'static,
{
    type Future = Sleep;

    fn retry(
        &mut self,
        request: &mut Request<B>,
        result: &mut Result<Response<ResB>, E>,
    ) -> Option<Sleep> {
        self.attempts = self.attempts.saturating_add(1);
        let receipt = Receipt::now(&self.clock);
        let unit: f64 = self.rng.random();
        let attempt: Attempt<'_> = self
            .policy
            .attempt(request.method(), self.attempts)
            .with_repeat_safe(markers(request).repeat_safe)
            .with_jitter(JitterDraw::Unit(unit))
            .with_remaining(
                self.deadline
                    .map(|deadline| deadline.saturating_duration_since(receipt.instant)),
            )
            .with_took(self.sent.map_or(Duration::ZERO, |sent| {
                receipt.instant.saturating_duration_since(sent)
            }));
        let key = self.gate.as_ref().and_then(|_| gate_key(request));
        let slot = ReportSlot::of(request);
        match result {
            Ok(response) => self.after_response(response, &attempt, receipt, key, slot),
            Err(_) => self.after_error(&attempt, receipt, key, slot),
        }
    }

    fn clone_request(&mut self, request: &Request<B>) -> Option<Request<B>> {
        let Some(body) = request.body().try_clone_body() else {
            if request.method().is_idempotent() || markers(request).repeat_safe {
                self.unclonable.fetch_add(1, Ordering::Relaxed);
                // The path without the query, which may carry credentials.
                tracing::warn!(
                    method = %request.method(),
                    host = request.uri().host(),
                    path = request.uri().path(),
                    "the request body cannot be cloned, so the request will not be retried"
                );
            }
            return None;
        };
        if self.attempts == 0 {
            // A new request: tower asks the service's own policy for the copy, then clones
            // the policy for the request, so what is set here becomes the request's own. Its
            // own `Deadline` or `Timeout` tightens or replaces the policy's timeout.
            self.deadline = markers(request).deadline_from(self.clock.now(), self.timeout);
            self.rng = self.next_rng();
        }
        // The copy is kept for a retry; the request itself goes out now.
        self.sent = Some(self.clock.now());
        if let Some(slot) = ReportSlot::of(request) {
            slot.sending();
        }
        let mut copy = Request::new(body);
        *copy.method_mut() = request.method().clone();
        *copy.uri_mut() = request.uri().clone();
        *copy.version_mut() = request.version();
        *copy.headers_mut() = request.headers().clone();
        *copy.extensions_mut() = request.extensions().clone();
        Some(copy)
    }
}

impl<C: Clone, S> Clone for RetryPolicy<C, S> {
    fn clone(&self) -> Self {
        RetryPolicy {
            policy: self.policy.clone(),
            clock: self.clock.clone(),
            gate: self.gate.clone(),
            timeout: self.timeout,
            seeds: Arc::clone(&self.seeds),
            unclonable: Arc::clone(&self.unclonable),
            attempts: self.attempts,
            deadline: self.deadline,
            rng: self.rng.clone(),
            sent: self.sent,
        }
    }
}

impl<C, S> fmt::Debug for RetryPolicy<C, S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RetryPolicy")
            .field("policy", &self.policy)
            .field("gate", &self.gate.is_some())
            .field("timeout", &self.timeout)
            .field("attempts", &self.attempts)
            .field("deadline", &self.deadline)
            .finish_non_exhaustive()
    }
}
