//! The retry layer: tower's `Retry` with [`RetryPolicy`], bounded by the task's deadline and
//! with a report on every error.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use holdoff::RetryReport;
use holdoff::clock::{Clock, TokioClock};
use holdoff::gate::MemoryGateStore;
use holdoff::request::Deadline;
use http::Request;
use tower::{Layer, Service};

use crate::body::CloneBody;
use crate::error::Error;
use crate::policy::RetryPolicy;
use crate::request::{ReportSlot, markers};

/// Wraps a service in [`Retry`]: tower's retry middleware driven by a [`RetryPolicy`], with
/// the task's deadline bounding attempts as well as waits, and a [`RetryReport`] on every
/// error.
///
/// # Examples
///
/// ```
/// use holdoff_tower::holdoff::Policy;
/// use holdoff_tower::{RetryLayer, RetryPolicy};
/// use std::time::Duration;
///
/// let layer = RetryLayer::new(RetryPolicy::new(Policy::default()).timeout(Duration::from_secs(30)));
/// let client = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
///     .build_http::<http_body_util::Full<bytes::Bytes>>();
/// let service = tower::ServiceBuilder::new().layer(layer).service(client);
/// # let _ = service;
/// ```
#[derive(Clone, Debug)]
pub struct RetryLayer<C = TokioClock, S = MemoryGateStore> {
    policy: RetryPolicy<C, S>,
}

impl<C, S> RetryLayer<C, S> {
    /// A layer that retries under `policy`.
    pub fn new(policy: RetryPolicy<C, S>) -> Self {
        RetryLayer { policy }
    }
}

impl<Svc, C: Clone, S> Layer<Svc> for RetryLayer<C, S> {
    type Service = Retry<Svc, C, S>;

    fn layer(&self, service: Svc) -> Retry<Svc, C, S> {
        Retry::new(self.policy.clone(), service)
    }
}

/// tower's retry middleware under a [`RetryPolicy`], bounded by the task's deadline.
///
/// What tower's own `Retry` cannot do, this adds around it:
///
/// - **The deadline bounds the task.** The policy's [timeout](RetryPolicy::timeout), or the
///   request's own [`Deadline`](crate::Deadline) or [`Timeout`](crate::Timeout), ends the
///   call: an attempt still running then is cut, and the call fails with
///   [`ErrorKind::DeadlineReached`](crate::ErrorKind::DeadlineReached) and the report.
/// - **A report with every error.** A transport error that ends the retries comes back as
///   [`ErrorKind::Transport`](crate::ErrorKind::Transport): the error itself
///   ([`Error::into_source`]) and the [`RetryReport`].
///
/// Responses carry their report in their extensions, as with tower's `Retry`.
pub struct Retry<Svc, C = TokioClock, S = MemoryGateStore> {
    inner: tower::retry::Retry<RetryPolicy<C, S>, Svc>,
    clock: C,
    timeout: Option<Duration>,
}

impl<Svc, C: Clone, S> Retry<Svc, C, S> {
    /// `service`, retried under `policy`.
    pub fn new(policy: RetryPolicy<C, S>, service: Svc) -> Self {
        Retry {
            clock: policy.clock_ref().clone(),
            timeout: policy.timeout_setting(),
            inner: tower::retry::Retry::new(policy, service),
        }
    }
}

impl<Svc: Clone, C: Clone, S> Clone for Retry<Svc, C, S> {
    fn clone(&self) -> Self {
        Retry {
            inner: self.inner.clone(),
            clock: self.clock.clone(),
            timeout: self.timeout,
        }
    }
}

impl<Svc: fmt::Debug, C, S> fmt::Debug for Retry<Svc, C, S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Retry")
            .field("inner", &self.inner)
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

/// The future [`Retry`] returns.
pub type ResponseFuture<T, E> = Pin<Box<dyn Future<Output = Result<T, Error<E>>> + Send>>;

impl<B, Svc, C, S> Service<Request<B>> for Retry<Svc, C, S>
where
    // Named first, so that a body that cannot be sent twice is the first thing the compiler
    // says about a `call` or `oneshot` that does not resolve.
    B: CloneBody,
    tower::retry::Retry<RetryPolicy<C, S>, Svc>: Service<Request<B>>,
    <tower::retry::Retry<RetryPolicy<C, S>, Svc> as Service<Request<B>>>::Future: Send + 'static,
    C: Clock + Clone + 'static,
{
    type Response = <tower::retry::Retry<RetryPolicy<C, S>, Svc> as Service<Request<B>>>::Response;
    type Error = Error<<tower::retry::Retry<RetryPolicy<C, S>, Svc> as Service<Request<B>>>::Error>;
    type Future = ResponseFuture<
        Self::Response,
        <tower::retry::Retry<RetryPolicy<C, S>, Svc> as Service<Request<B>>>::Error,
    >;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        // Nothing was sent yet: the report says so.
        self.inner
            .poll_ready(cx)
            .map_err(|error| Error::transport(error, RetryReport::new(0, not_sent())))
    }

    fn call(&mut self, mut request: Request<B>) -> Self::Future {
        // The deadline is fixed here, once, and handed to the policy as the request's own
        // `Deadline`, so that the policy's decisions and the cut below agree on it.
        let deadline = markers(&request).deadline_from(self.clock.now(), self.timeout);
        if let Some(deadline) = deadline {
            request.extensions_mut().insert(Deadline(deadline));
        }
        let slot = ReportSlot::default();
        request.extensions_mut().insert(slot.clone());
        let response = self.inner.call(request);
        let cut = deadline.map(|deadline| self.clock.sleep_until(deadline));
        Box::pin(async move {
            let result = match cut {
                None => Some(response.await),
                Some(cut) => tokio::select! {
                    biased;
                    result = response => Some(result),
                    () = cut => None,
                },
            };
            match result {
                Some(Ok(response)) => Ok(response),
                Some(Err(error)) => {
                    let report = slot
                        .last()
                        .unwrap_or_else(|| RetryReport::new(1, not_sent()));
                    Err(Error::transport(error, report))
                }
                None => Err(Error::deadline_reached(slot.cut())),
            }
        })
    }
}

/// The decision reported for an error that came before the policy judged any attempt.
fn not_sent() -> holdoff::Decision {
    holdoff::Decision::GiveUp(holdoff::GiveUpReason::PermanentError)
}
