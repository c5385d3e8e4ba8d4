//! What the policy decided for one failed attempt, and why.

use std::fmt;
use std::time::{Duration, Instant, SystemTime};

use crate::error::ParseErrorKind;
use crate::hints::HintSource;
use crate::response::{HintForm, Reference, Skew};

/// What to do after an attempt.
///
/// A deferral is an ordinary value: persist [`Verdict::permitted`] and re-queue the task for
/// then, instead of retrying early.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Decision {
    /// The response was a success; nothing to retry.
    Done,
    /// A 3xx with `Location`: follow it once `wait` has passed.
    FollowRedirect {
        /// How long to wait (the hint `H`).
        wait: Duration,
        /// When to follow, on the monotonic clock.
        at: Instant,
    },
    /// Retry once `wait` has passed.
    Retry {
        /// `max(H, B) + j`.
        wait: Duration,
        /// When to retry, on the monotonic clock.
        at: Instant,
    },
    /// A retry is permitted, but not within this task's limits: re-queue it for later.
    Defer(DeferReason),
    /// Retrying will not help, or is not allowed.
    GiveUp(GiveUpReason),
    /// The hint was malformed and the policy says that is an error
    /// (`on_malformed = error`); the raw value is in [`Diagnostics::raw`].
    Malformed(ParseErrorKind),
}

/// Why a retry was deferred.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum DeferReason {
    /// The server's hint is longer than the policy's `max_wait`. The hint is never capped.
    HintExceedsMaxWait,
    /// The wait does not fit in the time left before the task's deadline.
    DeadlineExceeded,
    /// The wait fits before the task's deadline, but the retry would not: the time left
    /// after the wait is less than the last attempt took, the estimate of how long the next
    /// one will take.
    AttemptWouldNotFit,
    /// The deadline came while an attempt was in flight, and the attempt was cut there.
    DeadlineReached,
    /// The retry time cannot be represented on the monotonic clock.
    BeyondClockRange,
}

/// Why the policy gave up.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum GiveUpReason {
    /// The status is not one the policy retries. A hint grants no permission.
    StatusNotRetryable,
    /// The method is not idempotent and the request was not marked safe to repeat.
    NonIdempotent,
    /// No attempts are left. A hint adds none.
    AttemptsExhausted,
    /// A 429 that means the quota is spent (e.g. OpenAI's `insufficient_quota`): waiting
    /// will not help.
    QuotaExhausted,
    /// A transport error that the caller's classifier says is not transient (the retry
    /// loop's `transient_if`).
    PermanentError,
    /// The caller cancelled the task, during an attempt or a wait.
    Cancelled,
    /// A retry was called for, but the request's body is a stream that was consumed by the
    /// attempt and cannot be sent again.
    BodyNotCloneable,
}

/// Every reason a decision can give, as one flat set (the JSON `reason`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Reason {
    /// 2xx.
    Success,
    /// 3xx with `Location`.
    Redirect,
    /// A retryable failure that will be retried.
    Retryable,
    /// See [`GiveUpReason::StatusNotRetryable`].
    StatusNotRetryable,
    /// See [`GiveUpReason::NonIdempotent`].
    NonIdempotent,
    /// See [`GiveUpReason::AttemptsExhausted`].
    AttemptsExhausted,
    /// See [`GiveUpReason::QuotaExhausted`].
    QuotaExhausted,
    /// See [`GiveUpReason::PermanentError`].
    PermanentError,
    /// See [`GiveUpReason::Cancelled`].
    Cancelled,
    /// See [`GiveUpReason::BodyNotCloneable`].
    BodyNotCloneable,
    /// See [`Decision::Malformed`].
    MalformedRetryAfter,
    /// See [`DeferReason::HintExceedsMaxWait`].
    HintExceedsMaxWait,
    /// See [`DeferReason::DeadlineExceeded`].
    DeadlineExceeded,
    /// See [`DeferReason::AttemptWouldNotFit`].
    AttemptWouldNotFit,
    /// See [`DeferReason::DeadlineReached`].
    DeadlineReached,
    /// See [`DeferReason::BeyondClockRange`].
    BeyondClockRange,
}

impl Reason {
    /// The kebab-case name, e.g. `deadline-exceeded`.
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::Success => "success",
            Reason::Redirect => "redirect",
            Reason::Retryable => "retryable",
            Reason::StatusNotRetryable => "status-not-retryable",
            Reason::NonIdempotent => "non-idempotent",
            Reason::AttemptsExhausted => "attempts-exhausted",
            Reason::QuotaExhausted => "quota-exhausted",
            Reason::PermanentError => "permanent-error",
            Reason::Cancelled => "cancelled",
            Reason::BodyNotCloneable => "body-not-cloneable",
            Reason::MalformedRetryAfter => "malformed-retry-after",
            Reason::HintExceedsMaxWait => "hint-exceeds-max-wait",
            Reason::DeadlineExceeded => "deadline-exceeded",
            Reason::AttemptWouldNotFit => "attempt-would-not-fit",
            Reason::DeadlineReached => "deadline-reached",
            Reason::BeyondClockRange => "beyond-clock-range",
        }
    }
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Decision {
    /// The action's kebab-case name, as [`Reason::as_str`] names reasons: `done`,
    /// `follow-redirect`, `retry`, `defer`, `give-up` or `error`.
    pub fn action(&self) -> &'static str {
        match self {
            Decision::Done => "done",
            Decision::FollowRedirect { .. } => "follow-redirect",
            Decision::Retry { .. } => "retry",
            Decision::Defer(_) => "defer",
            Decision::GiveUp(_) => "give-up",
            Decision::Malformed(_) => "error",
        }
    }

    /// Why.
    pub fn reason(&self) -> Reason {
        match self {
            Decision::Done => Reason::Success,
            Decision::FollowRedirect { .. } => Reason::Redirect,
            Decision::Retry { .. } => Reason::Retryable,
            Decision::Defer(DeferReason::HintExceedsMaxWait) => Reason::HintExceedsMaxWait,
            Decision::Defer(DeferReason::DeadlineExceeded) => Reason::DeadlineExceeded,
            Decision::Defer(DeferReason::AttemptWouldNotFit) => Reason::AttemptWouldNotFit,
            Decision::Defer(DeferReason::DeadlineReached) => Reason::DeadlineReached,
            Decision::Defer(DeferReason::BeyondClockRange) => Reason::BeyondClockRange,
            Decision::GiveUp(GiveUpReason::StatusNotRetryable) => Reason::StatusNotRetryable,
            Decision::GiveUp(GiveUpReason::NonIdempotent) => Reason::NonIdempotent,
            Decision::GiveUp(GiveUpReason::AttemptsExhausted) => Reason::AttemptsExhausted,
            Decision::GiveUp(GiveUpReason::QuotaExhausted) => Reason::QuotaExhausted,
            Decision::GiveUp(GiveUpReason::PermanentError) => Reason::PermanentError,
            Decision::GiveUp(GiveUpReason::Cancelled) => Reason::Cancelled,
            Decision::GiveUp(GiveUpReason::BodyNotCloneable) => Reason::BodyNotCloneable,
            Decision::Malformed(_) => Reason::MalformedRetryAfter,
        }
    }

    /// How long to wait before acting, for a retry or a redirect.
    pub fn wait(&self) -> Option<Duration> {
        match self {
            Decision::Retry { wait, .. } | Decision::FollowRedirect { wait, .. } => Some(*wait),
            _ => None,
        }
    }
}

/// When the server permits the next request: receipt + `H`, for a response whose hint could
/// be read. A verdict carries one ([`Verdict::permitted`]) whatever it decided, so a deferred
/// or abandoned task can be re-queued for the right time.
///
/// A response with no hint, or only a malformed one, named no time: its verdict has none,
/// rather than "now". A hint of `0` or a date in the past does name one: receipt.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Permitted {
    /// `H`, counted from receipt.
    pub after: Duration,
    /// Receipt + `H` on the monotonic clock; `None` when not representable.
    pub at: Option<Instant>,
    /// Receipt + `H` on the wall clock, for persisting; `None` when not representable.
    pub wall: Option<SystemTime>,
}

impl Permitted {
    /// `after` past a receipt read at `instant` and `wall`, on both clocks.
    pub fn after_receipt(instant: Instant, wall: SystemTime, after: Duration) -> Permitted {
        Permitted {
            after,
            at: instant.checked_add(after),
            wall: wall.checked_add(after),
        }
    }

    /// At `until` on the monotonic clock, for a receipt read at `instant` and `wall` (e.g.
    /// when a shared gate holds a key until then): the wall time is receipt + the same span.
    pub fn until(instant: Instant, wall: SystemTime, until: Instant) -> Permitted {
        let after = until.saturating_duration_since(instant);
        Permitted {
            after,
            at: Some(until),
            wall: wall.checked_add(after),
        }
    }
}

/// How the decision read the response, for logs and `holdoff explain`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Diagnostics<'a> {
    /// The raw `Retry-After` value.
    pub raw: Option<&'a [u8]>,
    /// The `Retry-After` hint as understood.
    pub hint: HintForm,
    /// Which header gave `H`: `Retry-After` or the vendor hint that asked for longer.
    pub source: Option<HintSource>,
    /// A malformed vendor hint that was reported and ignored.
    pub malformed_vendor: Option<HintSource>,
    /// Whether a malformed hint was dropped (`on_malformed = fallback`).
    pub dropped_malformed: bool,
    /// Whether a date-form hint lay in the past and was clamped to zero.
    pub clamped_past: bool,
    /// Whose clock a date-form hint was measured against.
    pub reference: Reference,
    /// Server clock (`Date + Age`) minus local wall clock at receipt, when `Date` was valid.
    pub skew: Option<Skew>,
    /// `H`, when the response set one (`None`: no hint, or only a malformed one).
    pub interval: Option<Duration>,
    /// `max(H, B) + j`, when the decision got that far (also for deferrals).
    pub wait: Option<Duration>,
    /// The local backoff `B` that was used.
    pub backoff: Duration,
    /// The jitter `j` that was used.
    pub jitter: Duration,
}

/// A decision with the permitted-retry time and the diagnostics behind it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Verdict<'a> {
    /// What to do.
    pub decision: Decision,
    /// When the server permits the next request; `None` when the response named no time
    /// (no hint, or only a malformed one).
    pub permitted: Option<Permitted>,
    /// How the response was read.
    pub diagnostics: Diagnostics<'a>,
}
