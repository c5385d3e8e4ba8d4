//! How a run of the loop ended ([`Outcome`]), what its last attempt produced ([`Last`]), and
//! the step a decision leads to.

use std::time::Instant;

use crate::decision::{Decision, DeferReason, GiveUpReason};
use crate::error::ParseError;
use crate::report::RetryReport;

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

pub(super) enum Step<R, E> {
    Stop(Outcome<R, E>),
    RetryAt(Instant, Last<R, E>),
}

/// Why the loop stopped before an attempt or a wait had finished.
#[derive(Clone, Copy, Debug)]
pub(super) enum Stop {
    /// The cancellation token fired.
    Cancelled,
    /// The task's deadline came.
    DeadlineReached,
}

impl Stop {
    /// The outcome and report when attempt `number` (or the wait after it) was stopped,
    /// `report` being the last attempt's that was judged.
    pub(super) fn end<R, E>(
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
pub(super) fn next_step<R, E>(decision: Decision, last: Last<R, E>) -> Step<R, E> {
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
