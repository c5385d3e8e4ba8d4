//! How the retries for one task ended: the one report that the retry loop returns and that
//! the tower and reqwest integrations attach to the response they hand back.

use std::time::SystemTime;

use crate::decision::{Decision, DeferReason, GiveUpReason, Permitted, Reason, Verdict};
use crate::error::ParseError;
use crate::hints::HintSource;
use crate::response::Skew;

/// When a task may be sent again, as [`RetryReport::requeue_at`] reads the last response.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Requeue {
    /// The server permits the next request at this wall-clock time.
    At(SystemTime),
    /// The server named no usable time: no hint, only a malformed one, or no response at all
    /// (a transport error, an attempt cut at the deadline). The caller's own backoff decides.
    NoHint,
    /// The server named a time too far away for the clocks to represent (e.g.
    /// `Retry-After: 99999999999999999999`): it asks never to be retried on a timer.
    BeyondRange,
}

impl Requeue {
    /// The time, for [`Requeue::At`].
    pub fn time(self) -> Option<SystemTime> {
        match self {
            Requeue::At(at) => Some(at),
            Requeue::NoHint | Requeue::BeyondRange => None,
        }
    }
}

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
/// use holdoff::{Requeue, RetryReport};
/// use std::time::{Duration, SystemTime};
///
/// /// When to run a deferred job again; `None`: drop it and tell someone.
/// fn next_run(report: &RetryReport, now: SystemTime, own_backoff: Duration) -> Option<SystemTime> {
///     match report.requeue_at() {
///         Requeue::At(at) => Some(at),
///         // The server named no usable time: the queue's own backoff decides.
///         Requeue::NoHint => Some(now + own_backoff),
///         // The server asked for longer than any clock can say: never retry on a timer.
///         Requeue::BeyondRange => None,
///         _ => None,
///     }
/// }
/// # let _ = next_run;
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

    /// When the server permits the next request, on the wall clock: the value to persist
    /// when re-queueing. "No usable hint" ([`Requeue::NoHint`]: the caller's own backoff
    /// decides) and "a hint too long to represent" ([`Requeue::BeyondRange`], e.g.
    /// `Retry-After: 99999999999999999999`: do not retry on a timer) are told apart.
    pub fn requeue_at(&self) -> Requeue {
        match self.permitted {
            None => Requeue::NoHint,
            Some(Permitted { wall: Some(at), .. }) => Requeue::At(at),
            Some(Permitted { wall: None, .. }) => Requeue::BeyondRange,
        }
    }

    /// Why the policy gave up, if it did.
    pub fn gave_up(&self) -> Option<GiveUpReason> {
        match self.decision {
            Decision::GiveUp(reason) => Some(reason),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Attempt, Policy, Receipt, ResponseInfo};
    use http::{Method, StatusCode};
    use std::time::Duration;

    fn report_of(retry_after: Option<&[u8]>) -> RetryReport {
        let receipt = Receipt {
            instant: crate::clock::SystemClock.now(),
            wall: SystemTime::UNIX_EPOCH + Duration::from_secs(784_111_777),
        };
        let mut response = ResponseInfo::new(StatusCode::SERVICE_UNAVAILABLE, receipt);
        if let Some(value) = retry_after {
            response = response.with_retry_after(value);
        }
        let verdict = Policy::default().decide(&response, &Attempt::new(&Method::GET, 1));
        RetryReport::of_verdict(1, &verdict)
    }

    mod requeue_at {
        use super::*;

        #[test]
        fn is_the_servers_time_when_it_named_one() {
            let report = report_of(Some(b"120"));
            let expected = SystemTime::UNIX_EPOCH + Duration::from_secs(784_111_777 + 120);
            assert_eq!(report.requeue_at(), Requeue::At(expected));
            assert_eq!(report.requeue_at().time(), Some(expected));
        }

        #[test]
        fn tells_no_hint_from_a_hint_beyond_range() {
            assert_eq!(report_of(None).requeue_at(), Requeue::NoHint);
            assert_eq!(report_of(Some(b"soon")).requeue_at(), Requeue::NoHint);
            let forever = report_of(Some(b"99999999999999999999"));
            assert_eq!(forever.requeue_at(), Requeue::BeyondRange);
            assert_eq!(forever.requeue_at().time(), None);
        }
    }
}
