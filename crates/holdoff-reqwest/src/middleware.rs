//! The middleware: runs holdoff's retry loop around the rest of the middleware chain.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use holdoff::gate::{Gate, GateStore, MemoryGateStore};
use holdoff::request::Markers;
use holdoff::retry::{AttemptEvent, Last, Outcome, Retrier};
use holdoff::{Decision, DeferReason, GiveUpReason, Policy, RetryReport};
use http::Extensions;
use reqwest::{Request, Response};
use reqwest_middleware::{Middleware, Next};
use tokio_util::sync::CancellationToken;

use crate::body::Attempted;
use crate::error::{Error, ErrorKind};
use crate::options::gate_key;

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
/// use holdoff_reqwest::holdoff::{Backoff, Policy};
/// use holdoff_reqwest::holdoff::gate::Gate;
/// use holdoff_reqwest::HoldoffMiddleware;
/// use std::sync::Arc;
/// use std::time::Duration;
///
/// let policy = Policy::default()
///     .with_max_attempts(4)
///     .with_backoff(Backoff::exponential(Duration::from_millis(500), Duration::from_secs(8)));
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
    /// `scheme://host:port` unless they carry a [`GateKey`](crate::GateKey).
    pub fn gate<S2: GateStore>(self, gate: Arc<Gate<S2>>) -> HoldoffMiddleware<S2> {
        HoldoffMiddleware {
            policy: self.policy,
            gate: Some(gate),
            timeout: self.timeout,
            seed: self.seed,
            requests: self.requests,
        }
    }

    /// Every request must be done within `timeout` of entering the middleware, waits and
    /// attempts included: an attempt still running then is cut, and a retry that would not
    /// finish by then (estimated from how long the last attempt took) is not started. A
    /// request's own [`Timeout`](crate::Timeout) or [`Deadline`](crate::Deadline) overrides
    /// or tightens it.
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

#[async_trait::async_trait]
impl<S: GateStore + 'static> Middleware for HoldoffMiddleware<S> {
    async fn handle(
        &self,
        request: Request,
        extensions: &mut Extensions,
        next: Next<'_>,
    ) -> reqwest_middleware::Result<Response> {
        let method = request.method().clone();
        let markers = Markers::of(request.headers(), extensions);
        let timeout = markers.timeout.or(self.timeout);
        let key = markers.gate_key.clone().or_else(|| gate_key(request.url()));

        // A request with a streaming body is sent once as it is; if a retry turns out to be
        // needed, the loop is stopped before it waits and the caller gets a clear error.
        let (mut first, template) = match request.try_clone() {
            Some(copy) => (Some(copy), Some(request)),
            None => (Some(request), None),
        };
        let cloneable = template.is_some();
        let stop = CancellationToken::new();

        let mut retrier = Retrier::new(self.policy.clone(), method)
            .repeat_safe(markers.repeat_safe)
            .transient_if(is_transient)
            .cancel_on(stop.clone())
            .on_attempt(move |event: &AttemptEvent<'_>| {
                if !cloneable && matches!(event.decision, Decision::Retry { .. }) {
                    stop.cancel();
                }
            });
        if let Some(timeout) = timeout {
            retrier = retrier.timeout(timeout);
        }
        if let Some(deadline) = markers.deadline {
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
        let policy = &self.policy;
        let operation = |_attempt: u32| {
            let request = first
                .take()
                .or_else(|| template.as_ref().and_then(Request::try_clone));
            let next = next.clone();
            async move {
                let Some(request) = request else {
                    // Unreachable: the loop is stopped before a second attempt of a request
                    // that cannot be cloned.
                    let report =
                        RetryReport::new(1, Decision::GiveUp(GiveUpReason::BodyNotCloneable));
                    return Err(Error::new(ErrorKind::BodyNotCloneable, report).into());
                };
                let mut extensions = extensions.lock().await;
                let response = next.run(request, &mut extensions).await?;
                drop(extensions);
                Ok(Attempted::read(response, policy).await?)
            }
        };
        let (outcome, report) = match (&self.gate, key) {
            (Some(gate), Some(key)) => retrier.gate(Arc::clone(gate), key).run(operation).await,
            _ => retrier.run(operation).await,
        };
        finish(outcome, report)
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

/// Turns the loop's outcome into what the caller of the middleware gets: the last response
/// with the report in its extensions, or an error that carries the report.
fn finish(
    outcome: Outcome<Attempted, reqwest_middleware::Error>,
    report: RetryReport,
) -> reqwest_middleware::Result<Response> {
    let last = match outcome {
        Outcome::Success(response)
        | Outcome::Redirect { response, .. }
        | Outcome::Malformed { response, .. } => Last::Response(response),
        Outcome::GaveUp { last, .. } => last,
        Outcome::Deferred {
            last: Some(last), ..
        } => last,
        Outcome::Deferred { last: None, reason } => {
            // Nothing came back: the first attempt was cut at the deadline, or the gate held
            // the request past it before anything was sent.
            let kind = match reason {
                DeferReason::DeadlineReached => ErrorKind::DeadlineReached,
                _ => ErrorKind::DeferredAtGate,
            };
            return Err(Error::new(kind, report).into());
        }
        Outcome::Cancelled { last } => {
            // Only the middleware's own token cancels: a retry is needed, but the request's
            // body cannot be cloned.
            let permitted = report.permitted;
            let decision = Decision::GiveUp(GiveUpReason::BodyNotCloneable);
            let error = Error::new(
                ErrorKind::BodyNotCloneable,
                report.with_decision(decision, permitted),
            );
            return Err(match last {
                Some(Last::Response(attempted)) => error.with_response(attempted.response),
                Some(Last::Error(source)) => error.with_source(source),
                None => error,
            }
            .into());
        }
        // `Outcome` may grow; an outcome this version does not know still carries its report.
        _ => return Err(Error::new(ErrorKind::Unknown, report).into()),
    };
    match last {
        Last::Response(attempted) => {
            let mut response = attempted.response;
            response.extensions_mut().insert(report);
            Ok(response)
        }
        Last::Error(error) => Err(Error::new(ErrorKind::Transport, report)
            .with_source(error)
            .into()),
    }
}
