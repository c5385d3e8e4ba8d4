//! How the retries for one task ended: the one report that the retry loop returns and that
//! the tower and reqwest integrations attach to the response they hand back.

use std::time::SystemTime;

use crate::decision::{Decision, DeferReason, GiveUpReason, Permitted, Reason, Verdict};
use crate::error::ParseError;
use crate::hints::HintSource;
use crate::response::Skew;

/// How the retries for one task ended.
///
/// [`Retrier::run`](crate::retry::Retrier::run) returns one with every outcome; holdoff-tower
/// and holdoff-reqwest insert the same type into the extensions of the response they hand
/// back. A deferral is an ordinary value: persist [`RetryReport::requeue_at`] and re-queue
/// the task for then, instead of retrying early.
///
/// # Examples
///
/// ```
/// use holdoff::RetryReport;
/// use std::time::SystemTime;
///
/// fn requeue(report: &RetryReport) -> Option<SystemTime> {
///     if report.is_deferred() {
///         // The server's time when it named one; else the caller's own backoff decides.
///         report.requeue_at()
///     } else {
///         None
///     }
/// }
/// # let _ = requeue;
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct RetryReport {
    /// How many attempts were sent, the first included.
    pub attempts: u32,
    /// The last decision: [`Decision::Done`] for a success, a [`Decision::Defer`] or a
    /// [`Decision::GiveUp`] (also [`GiveUpReason::Cancelled`] and
    /// [`GiveUpReason::PermanentError`]), or [`Decision::Malformed`].
    pub decision: Decision,
    /// When the server permits the next request (receipt of the last response plus its hint,
    /// or when a shared gate opens for a task deferred there), on both clocks. `None` when
    /// the last response named no time: no hint, or only a malformed one.
    pub permitted: Option<Permitted>,
    /// Which header gave the last response's hint (`Retry-After` or a vendor hint), if any.
    pub hint_source: Option<HintSource>,
    /// How far the server's clock (`Date + Age`) was from ours, if the last response had a
    /// valid `Date`.
    pub skew: Option<Skew>,
    /// The malformed `Retry-After` value, with its raw bytes, when the decision was
    /// [`Decision::Malformed`].
    pub malformed: Option<ParseError>,
}

impl RetryReport {
    /// A report of `attempts` attempts that ended with `decision`, and no response details.
    pub fn new(attempts: u32, decision: Decision) -> RetryReport {
        RetryReport {
            attempts,
            decision,
            permitted: None,
            hint_source: None,
            skew: None,
            malformed: None,
        }
    }

    /// The report of attempt `attempts` judged by `verdict`.
    pub fn of_verdict(attempts: u32, verdict: &Verdict<'_>) -> RetryReport {
        let malformed = match verdict.decision {
            Decision::Malformed(kind) => Some(ParseError::new(
                kind,
                verdict.diagnostics.raw.unwrap_or_default(),
            )),
            _ => None,
        };
        RetryReport {
            attempts,
            decision: verdict.decision,
            permitted: verdict.permitted,
            hint_source: verdict.diagnostics.source,
            skew: verdict.diagnostics.skew,
            malformed,
        }
    }

    /// The same report with this decision and permitted time (e.g. a shared gate deferred
    /// the retry that the response called for).
    pub fn with_decision(self, decision: Decision, permitted: Option<Permitted>) -> RetryReport {
        RetryReport {
            decision,
            permitted,
            ..self
        }
    }

    /// Why the retries ended, e.g. [`Reason::DeadlineExceeded`] (`deadline-exceeded`).
    pub fn reason(&self) -> Reason {
        self.decision.reason()
    }

    /// Whether a retry is permitted later but not within the task's limits: the task should
    /// be re-queued, not dropped.
    pub fn is_deferred(&self) -> bool {
        matches!(self.decision, Decision::Defer(_))
    }

    /// Why the task was deferred, if it was.
    pub fn deferred(&self) -> Option<DeferReason> {
        match self.decision {
            Decision::Defer(reason) => Some(reason),
            _ => None,
        }
    }

    /// The wall-clock time the server permits the next request: the value to persist when
    /// re-queueing. `None` when the server named no time (or it is not representable).
    pub fn requeue_at(&self) -> Option<SystemTime> {
        self.permitted.and_then(|p| p.wall)
    }

    /// Why the policy gave up, if it did.
    pub fn gave_up(&self) -> Option<GiveUpReason> {
        match self.decision {
            Decision::GiveUp(reason) => Some(reason),
            _ => None,
        }
    }
}
