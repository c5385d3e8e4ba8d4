//! What the middleware did with a request, attached to the response it hands back.

use std::time::{Instant, SystemTime};

use holdoff::{Decision, DeferReason, GiveUpReason, HintSource, ParseError, Reason};

/// How the middleware's retries for one request ended, attached to the response it hands
/// back (in the response's extensions; read it with [`RetryReport::of`]).
///
/// A deferred request is an ordinary response, not an error: the caller decides whether to
/// re-queue the task for [`RetryReport::permitted_wall`] instead of retrying early.
///
/// # Examples
///
/// ```
/// use holdoff_reqwest::{RetryOutcome, RetryReport};
///
/// fn requeue_at(response: &reqwest::Response) -> Option<std::time::SystemTime> {
///     let report = RetryReport::of(response)?;
///     match report.outcome {
///         RetryOutcome::Deferred(_) => report.permitted_wall,
///         _ => None,
///     }
/// }
/// # let _ = requeue_at;
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct RetryReport {
    /// How many requests were sent, the first included.
    pub attempts: u32,
    /// How the retries ended.
    pub outcome: RetryOutcome,
    /// When the server permits the next request (receipt of the last response plus its
    /// hint, or when the gate opens for a task deferred there), on the monotonic clock.
    /// `None` when not representable.
    pub permitted_at: Option<Instant>,
    /// The same time on the wall clock: the value to persist when re-queueing the task.
    pub permitted_wall: Option<SystemTime>,
    /// Which header gave the last response's hint (`Retry-After` or a vendor hint), if any.
    pub hint_source: Option<HintSource>,
}

/// How the middleware's retries for one request ended.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum RetryOutcome {
    /// A 2xx response.
    Success,
    /// A 3xx with `Location` (seen only when the client does not follow redirects itself):
    /// the server permits following it at `at`.
    Redirect {
        /// Receipt plus the response's hint.
        at: Instant,
    },
    /// A retry is permitted, but not within the task's deadline or the policy's `max_wait`:
    /// the response is the last one received.
    Deferred(DeferReason),
    /// Retrying would not help or is not allowed: the response is the last one received.
    GaveUp(GiveUpReason),
    /// The response carried a malformed hint and the policy treats that as an error
    /// ([`holdoff::OnMalformed::Error`], the default); the error carries the raw value.
    Malformed(ParseError),
}

impl RetryOutcome {
    /// Why, as holdoff's flat reason (`success`, `deadline-exceeded`, `quota-exhausted`, …).
    pub fn reason(&self) -> Reason {
        match self {
            RetryOutcome::Success => Reason::Success,
            RetryOutcome::Redirect { .. } => Reason::Redirect,
            RetryOutcome::Deferred(reason) => Decision::Defer(*reason).reason(),
            RetryOutcome::GaveUp(reason) => Decision::GiveUp(*reason).reason(),
            RetryOutcome::Malformed(error) => Decision::Malformed(error.kind()).reason(),
        }
    }
}

impl RetryReport {
    /// The report the middleware attached to `response`, if it went through the middleware.
    pub fn of(response: &reqwest::Response) -> Option<&RetryReport> {
        response.extensions().get::<RetryReport>()
    }

    /// Why the retries ended, as holdoff's flat reason; see [`RetryOutcome::reason`].
    pub fn reason(&self) -> Reason {
        self.outcome.reason()
    }
}
