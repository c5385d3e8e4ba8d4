//! The middleware: runs holdoff's retry loop around the rest of the middleware chain.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant, SystemTime};

use holdoff::gate::{Gate, GateStore, MemoryGateStore};
use holdoff::retry::{AttemptEvent, Deferred, Last, Outcome, Retrier, StopReason};
use holdoff::{Decision, GiveUpReason, HintSource, Policy};
use http::{Extensions, HeaderName};
use reqwest::{Request, Response};
use reqwest_middleware::{Middleware, Next};
use tokio_util::sync::CancellationToken;

use crate::body::Attempted;
use crate::error::{Error, ErrorKind};
use crate::options::{Deadline, GateKey, RepeatSafe, Timeout, gate_key};
use crate::report::{RetryOutcome, RetryReport};

/// The header that makes a request safe to repeat, whatever its method.
const IDEMPOTENCY_KEY: HeaderName = HeaderName::from_static("idempotency-key");

/// A `reqwest_middleware::Middleware` that retries under a holdoff [`Policy`]: it treats the
/// server's `Retry-After` (and vendor hints) as a lower bound, never retries before it,
/// defers instead of waiting past a deadline, and can share hints between requests through a
/// [`Gate`].
///
/// See the [crate documentation](crate) for what the caller gets back in each case.
///
/// # Examples
///
/// ```
/// use holdoff::{Backoff, Policy};
/// use holdoff::gate::Gate;
/// use holdoff_reqwest::HoldoffMiddleware;
/// use std::sync::Arc;
/// use std::time::Duration;
///
/// let policy = Policy::default()
///     .max_attempts(4)
///     .backoff(Backoff::exponential(Duration::from_millis(500), Duration::from_secs(8)));
/// # let _ = rustls::crypto::aws_lc_rs::default_provider().install_default(); // see tests/middleware.rs
/// let client = reqwest_middleware::ClientBuilder::new(reqwest::Client::new())
///     .with(
///         HoldoffMiddleware::new(policy)
///             .gate(Arc::new(Gate::in_memory()))
///             .timeout(Duration::from_secs(60)),
///     )
///     .build();
/// # let _ = client;
/// ```
pub struct HoldoffMiddleware<S = MemoryGateStore> {
    policy: Policy,
    gate: Option<Arc<Gate<S>>>,
    timeout: Option<Duration>,
    seed: Option<u64>,
    /// Requests seen so far, to give each one its own jitter sequence under a fixed seed.
    requests: AtomicU64,
}

impl HoldoffMiddleware<MemoryGateStore> {
    /// A middleware that retries under `policy`, with no gate, no task deadline and an
    /// unseeded jitter source.
    pub fn new(policy: Policy) -> Self {
        HoldoffMiddleware {
            policy,
            gate: None,
            timeout: None,
            seed: None,
            requests: AtomicU64::new(0),
        }
    }
}

impl<S: GateStore> HoldoffMiddleware<S> {
    /// Shares hints through `gate` between every request (and every client) that uses it:
    /// when one response closes a server, every request to it waits. Requests are keyed by
    /// `scheme://host:port` unless they carry a [`GateKey`].
    pub fn gate<S2: GateStore>(self, gate: Arc<Gate<S2>>) -> HoldoffMiddleware<S2> {
        HoldoffMiddleware {
            policy: self.policy,
            gate: Some(gate),
            timeout: self.timeout,
            seed: self.seed,
            requests: self.requests,
        }
    }

    /// Every request must be done within `timeout` of entering the middleware, waits
    /// included; a request's own [`Timeout`] or [`Deadline`] overrides or tightens it.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// Seeds the jitter, for reproducible runs. Each request draws from its own sequence
    /// (the seed plus the request's number), so requests still spread out.
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = Some(seed);
        self
    }
}

impl<S> fmt::Debug for HoldoffMiddleware<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HoldoffMiddleware")
            .field("policy", &self.policy)
            .field("gate", &self.gate.is_some())
            .field("timeout", &self.timeout)
            .field("seed", &self.seed)
            .finish_non_exhaustive()
    }
}

/// What the loop decided after the last attempt, as the middleware reports it.
#[derive(Clone, Copy, Debug, Default)]
struct Seen {
    attempts: u32,
    decision: Option<Decision>,
    permitted_after: Duration,
    permitted_at: Option<Instant>,
    permitted_wall: Option<SystemTime>,
    hint_source: Option<HintSource>,
}

#[async_trait::async_trait]
impl<S: GateStore + 'static> Middleware for HoldoffMiddleware<S> {
    async fn handle(
        &self,
        request: Request,
        extensions: &mut Extensions,
        next: Next<'_>,
    ) -> reqwest_middleware::Result<Response> {
        let method = request.method().clone();
        let repeat_safe = extensions.get::<RepeatSafe>().is_some()
            || request.headers().contains_key(IDEMPOTENCY_KEY);
        let timeout = extensions.get::<Timeout>().map(|t| t.0).or(self.timeout);
        let deadline = extensions.get::<Deadline>().map(|d| d.0);
        let key = extensions
            .get::<GateKey>()
            .map(|key| key.0.clone())
            .or_else(|| gate_key(request.url()));

        // A request with a streaming body is sent once as it is; if a retry turns out to be
        // needed, the loop is stopped before it waits and the caller gets a clear error.
        let (mut first, template) = match request.try_clone() {
            Some(copy) => (Some(copy), Some(request)),
            None => (Some(request), None),
        };
        let cloneable = template.is_some();
        let stop = CancellationToken::new();
        let seen = Arc::new(Mutex::new(Seen::default()));

        let mut retrier = Retrier::new(self.policy.clone())
            .method(method)
            .repeat_safe(repeat_safe)
            .transient_if(is_transient)
            .cancel_on(stop.clone())
            .on_attempt({
                let seen = Arc::clone(&seen);
                move |event: &AttemptEvent<'_>| {
                    *seen.lock().unwrap_or_else(PoisonError::into_inner) = Seen::from(event);
                    if !cloneable && matches!(event.decision, Decision::Retry { .. }) {
                        stop.cancel();
                    }
                }
            });
        if let Some(timeout) = timeout {
            retrier = retrier.timeout(timeout);
        }
        if let Some(deadline) = deadline {
            retrier = retrier.deadline(deadline);
        }
        if let Some(seed) = self.seed {
            let n = self.requests.fetch_add(1, Ordering::Relaxed);
            retrier = retrier.seed(seed.wrapping_add(n));
        }

        // Attempts run one after another, so the lock is never contended: it only lets each
        // attempt's future borrow the caller's extensions, which later middleware may write.
        let extensions = tokio::sync::Mutex::new(extensions);
        let extensions = &extensions;
        let operation = |_attempt: u32| {
            let request = first
                .take()
                .or_else(|| template.as_ref().and_then(Request::try_clone));
            let next = next.clone();
            async move {
                let Some(request) = request else {
                    // Unreachable: the loop is stopped before a second attempt of a request
                    // that cannot be cloned.
                    return Err(Error::new(ErrorKind::BodyNotCloneable).into());
                };
                let mut extensions = extensions.lock().await;
                let response = next.run(request, &mut extensions).await?;
                drop(extensions);
                Ok(Attempted::read(response).await?)
            }
        };
        let outcome = match (&self.gate, key) {
            (Some(gate), Some(key)) => retrier.gate(Arc::clone(gate), key).run(operation).await,
            _ => retrier.run(operation).await,
        };
        let seen = *seen.lock().unwrap_or_else(PoisonError::into_inner);
        finish(outcome, seen)
    }
}

/// Transport errors worth retrying: the connection failed, timed out, or broke off.
fn is_transient(error: &reqwest_middleware::Error) -> bool {
    match error {
        reqwest_middleware::Error::Reqwest(error) => {
            error.is_connect() || error.is_timeout() || error.is_request() || error.is_body()
        }
        // Another middleware's error: nothing says that sending again would help.
        reqwest_middleware::Error::Middleware(_) => false,
    }
}

impl From<&AttemptEvent<'_>> for Seen {
    fn from(event: &AttemptEvent<'_>) -> Seen {
        Seen {
            attempts: event.number,
            decision: Some(event.decision),
            permitted_after: event.permitted.after,
            permitted_at: event.permitted.at,
            permitted_wall: event.permitted.wall,
            hint_source: event.verdict.and_then(|v| v.diagnostics.source),
        }
    }
}

/// Turns the loop's outcome into what the caller of the middleware gets.
fn finish(
    outcome: Outcome<Attempted, reqwest_middleware::Error>,
    seen: Seen,
) -> reqwest_middleware::Result<Response> {
    let report = |outcome: RetryOutcome| RetryReport {
        attempts: seen.attempts,
        outcome,
        permitted_at: seen.permitted_at,
        permitted_wall: seen.permitted_wall,
        hint_source: seen.hint_source,
    };
    let (last, report) = match outcome {
        Outcome::Success(response) => (Last::Response(response), report(RetryOutcome::Success)),
        Outcome::Redirect { response, at } => (
            Last::Response(response),
            report(RetryOutcome::Redirect { at }),
        ),
        Outcome::Malformed { error, response } => (
            Last::Response(response),
            report(RetryOutcome::Malformed(error)),
        ),
        Outcome::GaveUp { reason, last } => {
            let reason = match (reason, seen.decision) {
                (StopReason::Policy(reason), _) | (_, Some(Decision::GiveUp(reason))) => reason,
                // Only a permanent transport error ends the loop without a policy reason,
                // and that error is returned as it is below.
                _ => GiveUpReason::StatusNotRetryable,
            };
            (last, report(RetryOutcome::GaveUp(reason)))
        }
        Outcome::Deferred(Deferred {
            reason,
            permitted_at,
            permitted_wall,
            last,
        }) => {
            let Some(last) = last else {
                // Deferred at the gate before anything was sent.
                return Err(Error::new(ErrorKind::DeferredAtGate)
                    .with_permitted(None, permitted_at, permitted_wall)
                    .into());
            };
            let report = RetryReport {
                permitted_at,
                permitted_wall,
                ..report(RetryOutcome::Deferred(reason))
            };
            (last, report)
        }
        Outcome::Cancelled { last } => {
            // Only the middleware's own token cancels: a retry is needed, but the request's
            // body cannot be cloned.
            let error = Error::new(ErrorKind::BodyNotCloneable).with_permitted(
                Some(seen.permitted_after),
                seen.permitted_at,
                seen.permitted_wall,
            );
            return Err(match last {
                Some(Last::Response(attempted)) => error.with_response(attempted.response),
                Some(Last::Error(source)) => error.with_source(source),
                None => error,
            }
            .into());
        }
        // `Outcome` may grow; an outcome this version does not know has no report to give.
        _ => return Err(anyhow::anyhow!("holdoff ended a request in an unknown way").into()),
    };
    match last {
        Last::Response(attempted) => {
            let mut response = attempted.response;
            response.extensions_mut().insert(report);
            Ok(response)
        }
        Last::Error(error) => Err(error),
    }
}
