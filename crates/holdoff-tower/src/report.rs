//! Why the policy stopped retrying, carried on the response it let through.

use holdoff::{Decision, HintSource, Permitted, Reason, Skew};

/// What the policy decided about the response it returned: inserted into the response's
/// extensions whenever the policy stops (success, deferral, give-up, malformed hint).
///
/// A deferred request is an ordinary value: persist [`Permitted::wall`] and re-queue the
/// task for then, instead of retrying early.
///
/// A response with no report was never judged by the policy: tower does not ask the policy
/// about a request it could not copy (see [`CloneBody`](crate::CloneBody)).
///
/// # Examples
///
/// ```
/// use holdoff::Reason;
/// use holdoff_tower::RetryReport;
///
/// fn requeue_at<B>(response: &http::Response<B>) -> Option<std::time::SystemTime> {
///     let report = response.extensions().get::<RetryReport>()?;
///     match report.reason() {
///         Reason::DeadlineExceeded | Reason::HintExceedsMaxWait => report.permitted.wall,
///         _ => None,
///     }
/// }
/// # assert_eq!(requeue_at(&http::Response::new(())), None);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct RetryReport {
    /// How many attempts were sent, this one included.
    pub attempts: u32,
    /// The decision about this response. [`Decision::Retry`] never appears here: the policy
    /// retried instead of returning the response.
    pub decision: Decision,
    /// When the server permits the next request (receipt + hint; receipt when there was no
    /// hint). When a shared gate held the key past the task's deadline, the gate's time.
    pub permitted: Permitted,
    /// Which header gave the hint, if any.
    pub hint_source: Option<HintSource>,
    /// How far the server's clock (`Date + Age`) was from ours, if the response had a `Date`.
    pub skew: Option<Skew>,
}

impl RetryReport {
    /// Why the policy stopped, e.g. [`Reason::DeadlineExceeded`] (`deadline-exceeded`).
    pub fn reason(&self) -> Reason {
        self.decision.reason()
    }
}
