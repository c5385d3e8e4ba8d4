//! The retry policy and the pure decision (DESIGN, "The decision", steps 1–10).
//!
//! [`Policy::decide`] reads no clock and draws no random number: the receipt time, the local
//! backoff and the jitter draw are all arguments, so the same inputs always give the same
//! verdict, and it allocates nothing.

use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use http::{Method, StatusCode};

use crate::backoff::Backoff;
use crate::decision::{Decision, DeferReason, Diagnostics, GiveUpReason, Permitted, Verdict};
use crate::jitter::Jitter;
use crate::response::{HintForm, Interval, Receipt, ResponseInfo};

/// What to do with a malformed hint.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum OnMalformed {
    /// Stop with [`Decision::Malformed`] (the default): a broken hint is a bug to see.
    #[default]
    Error,
    /// Drop the hint, record it in the diagnostics, and decide as if none was sent.
    Fallback,
}

/// Recognises a 429 that means "quota spent" rather than "slow down": waiting won't help.
pub trait QuotaClassifier: Send + Sync + fmt::Debug {
    /// Whether this 429 response says the quota is exhausted.
    fn is_quota_exhausted(&self, response: &ResponseInfo<'_>) -> bool;
}

/// The default classifier: OpenAI's `insufficient_quota` error (`error.code` or
/// `error.type`) in a JSON body.
#[derive(Clone, Copy, Debug, Default)]
pub struct OpenAiQuota;

impl QuotaClassifier for OpenAiQuota {
    fn is_quota_exhausted(&self, response: &ResponseInfo<'_>) -> bool {
        #[derive(serde::Deserialize)]
        struct Body<'a> {
            #[serde(borrow)]
            error: Option<Error<'a>>,
        }
        #[derive(serde::Deserialize)]
        struct Error<'a> {
            #[serde(borrow)]
            code: Option<Cow<'a, str>>,
            #[serde(borrow, rename = "type")]
            kind: Option<Cow<'a, str>>,
        }
        const QUOTA: &str = "insufficient_quota";
        // A cheap check first: most 429 bodies are not OpenAI quota errors.
        if !contains(response.body, QUOTA.as_bytes()) {
            return false;
        }
        match serde_json::from_slice::<Body<'_>>(response.body) {
            Ok(Body { error: Some(e) }) => {
                e.code.as_deref() == Some(QUOTA) || e.kind.as_deref() == Some(QUOTA)
            }
            _ => false,
        }
    }
}

/// A classifier that never says "quota exhausted".
#[derive(Clone, Copy, Debug, Default)]
pub struct NoQuotaClassifier;

impl QuotaClassifier for NoQuotaClassifier {
    fn is_quota_exhausted(&self, _: &ResponseInfo<'_>) -> bool {
        false
    }
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

/// A set of HTTP status codes (100–599), stored as bits.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct StatusSet([u64; 8]);

impl StatusSet {
    /// No status.
    pub const EMPTY: StatusSet = StatusSet([0; 8]);

    /// The default retryable statuses: 408, 429, 500, 502, 503, 504.
    pub fn default_retryable() -> StatusSet {
        [408, 429, 500, 502, 503, 504]
            .into_iter()
            .filter_map(|code| StatusCode::from_u16(code).ok())
            .collect()
    }

    fn slot(status: StatusCode) -> (usize, u64) {
        let bit = usize::from(status.as_u16()) - 100;
        (bit / 64, 1 << (bit % 64))
    }

    /// Adds a status.
    pub fn insert(&mut self, status: StatusCode) {
        let (word, mask) = Self::slot(status);
        self.0[word] |= mask;
    }

    /// Removes a status.
    pub fn remove(&mut self, status: StatusCode) {
        let (word, mask) = Self::slot(status);
        self.0[word] &= !mask;
    }

    /// Whether the set holds `status`.
    pub fn contains(&self, status: StatusCode) -> bool {
        let (word, mask) = Self::slot(status);
        self.0[word] & mask != 0
    }
}

impl FromIterator<StatusCode> for StatusSet {
    fn from_iter<I: IntoIterator<Item = StatusCode>>(iter: I) -> StatusSet {
        let mut set = StatusSet::EMPTY;
        iter.into_iter().for_each(|s| set.insert(s));
        set
    }
}

impl fmt::Debug for StatusSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_set()
            .entries(
                (100..600)
                    .filter_map(|c| StatusCode::from_u16(c).ok())
                    .filter(|s| self.contains(*s))
                    .map(|s| s.as_u16()),
            )
            .finish()
    }
}

/// The jitter to add to `max(H, B)` for one attempt.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum JitterDraw {
    /// This exact amount (e.g. `holdoff explain --jitter`).
    Exact(Duration),
    /// A uniform draw in `[0, 1]`, scaled by the policy's [`Jitter`] once `max(H, B)` is known.
    Unit(f64),
}

/// One failed attempt, as the caller saw it: which request, which attempt, and the local
/// inputs the decision needs.
#[derive(Clone, Copy, Debug)]
pub struct Attempt<'a> {
    /// The request method.
    pub method: &'a Method,
    /// The caller marked the request safe to repeat (e.g. it carries an `Idempotency-Key`).
    pub repeat_safe: bool,
    /// Which attempt this was, from 1.
    pub number: u32,
    /// The local backoff `B` for this attempt (see [`Policy::backoff_for`]).
    pub backoff: Duration,
    /// The jitter draw `j`.
    pub jitter: JitterDraw,
    /// Time left before the task's deadline, at receipt (`L`); `None` for no deadline.
    pub remaining: Option<Duration>,
}

/// How to retry: which statuses, how many attempts, how long to wait at most, the local
/// backoff and jitter. A plain value, cheap to clone per request.
///
/// # Examples
///
/// The canonical case: the server asks for 30 s, the local backoff is 8 s, 12 s remain
/// before the deadline. Retrying at 8 s or at 12 s would both be early, so the task is
/// deferred, with a retry permitted 30 s after receipt.
///
/// ```
/// use holdoff::{Attempt, Decision, DeferReason, JitterDraw, Policy, Receipt, ResponseInfo};
/// use http::{Method, StatusCode};
/// use std::time::{Duration, Instant, SystemTime};
///
/// let receipt = Receipt { instant: Instant::now(), wall: SystemTime::now() };
/// let response = ResponseInfo::new(StatusCode::SERVICE_UNAVAILABLE, receipt).with_retry_after(b"30");
/// let attempt = Attempt {
///     method: &Method::GET,
///     repeat_safe: false,
///     number: 1,
///     backoff: Duration::from_secs(8),
///     jitter: JitterDraw::Exact(Duration::ZERO),
///     remaining: Some(Duration::from_secs(12)),
/// };
/// let verdict = Policy::default().decide(&response, &attempt);
/// assert_eq!(verdict.decision, Decision::Defer(DeferReason::DeadlineExceeded));
/// assert_eq!(verdict.permitted.after, Duration::from_secs(30));
/// ```
#[derive(Clone, Debug)]
pub struct Policy {
    retryable: StatusSet,
    max_attempts: u32,
    max_wait: Option<Duration>,
    on_malformed: OnMalformed,
    backoff: Backoff,
    jitter: Jitter,
    classifier: Arc<dyn QuotaClassifier>,
}

impl Default for Policy {
    /// Retries 408, 429, 500, 502, 503 and 504, up to 5 attempts, no `max_wait`, malformed
    /// hints are errors, [`Backoff::default`], [`Jitter::default`], [`OpenAiQuota`].
    fn default() -> Policy {
        Policy {
            retryable: StatusSet::default_retryable(),
            max_attempts: 5,
            max_wait: None,
            on_malformed: OnMalformed::Error,
            backoff: Backoff::default(),
            jitter: Jitter::default(),
            classifier: Arc::new(OpenAiQuota),
        }
    }
}

impl Policy {
    /// The statuses to retry.
    pub fn retryable(mut self, statuses: StatusSet) -> Policy {
        self.retryable = statuses;
        self
    }

    /// How many attempts in all, the first included. A hint adds none.
    pub fn max_attempts(mut self, attempts: u32) -> Policy {
        self.max_attempts = attempts;
        self
    }

    /// Defer instead of waiting when the server asks for more than this. The hint itself is
    /// never capped.
    pub fn max_wait(mut self, max_wait: Option<Duration>) -> Policy {
        self.max_wait = max_wait;
        self
    }

    /// What to do with a malformed hint.
    pub fn on_malformed(mut self, on_malformed: OnMalformed) -> Policy {
        self.on_malformed = on_malformed;
        self
    }

    /// The local backoff. Its cap limits the backoff only, never the hint.
    pub fn backoff(mut self, backoff: Backoff) -> Policy {
        self.backoff = backoff;
        self
    }

    /// The jitter strategy.
    pub fn jitter(mut self, jitter: Jitter) -> Policy {
        self.jitter = jitter;
        self
    }

    /// The quota-exhaustion classifier for 429 responses.
    pub fn quota_classifier(mut self, classifier: Arc<dyn QuotaClassifier>) -> Policy {
        self.classifier = classifier;
        self
    }

    /// The configured attempt limit.
    pub fn attempt_limit(&self) -> u32 {
        self.max_attempts
    }

    /// The configured jitter strategy.
    pub fn jitter_strategy(&self) -> Jitter {
        self.jitter
    }

    /// The local backoff `B` after attempt `number`.
    pub fn backoff_for(&self, number: u32) -> Duration {
        self.backoff.delay(number)
    }

    /// Decides what to do after `attempt` got `response` (DESIGN, steps 1–10, in order).
    ///
    /// Pure: no clock reads, no randomness, no allocation. Every verdict carries the
    /// permitted-retry time (receipt + `H`).
    pub fn decide<'a>(&self, response: &ResponseInfo<'a>, attempt: &Attempt<'_>) -> Verdict<'a> {
        let interval = Interval::of(response);
        let mut diagnostics = Diagnostics {
            raw: response.retry_after,
            hint: interval.form,
            dropped_malformed: false,
            clamped_past: interval.clamped_past,
            reference: interval.reference,
            skew: interval.skew,
            backoff: attempt.backoff,
            jitter: Duration::ZERO,
        };
        let decision = self.decision(response, attempt, &interval, &mut diagnostics);
        let hint = if diagnostics.dropped_malformed {
            Duration::ZERO
        } else {
            interval.interval.unwrap_or(Duration::ZERO)
        };
        Verdict {
            decision,
            permitted: permitted(response.receipt, hint),
            diagnostics,
        }
    }

    fn decision(
        &self,
        response: &ResponseInfo<'_>,
        attempt: &Attempt<'_>,
        interval: &Interval,
        diagnostics: &mut Diagnostics<'_>,
    ) -> Decision {
        let status = response.status;
        let receipt = response.receipt.instant;
        // 1. Success, redirect, or a status the policy does not retry.
        if status.is_success() {
            return Decision::Done;
        }
        let mut hint = interval.interval;
        if status.is_redirection() && response.has_location {
            if let HintForm::Malformed(kind) = interval.form {
                match self.on_malformed {
                    OnMalformed::Error => return Decision::Malformed(kind),
                    OnMalformed::Fallback => diagnostics.dropped_malformed = true,
                }
            }
            let wait = hint.unwrap_or(Duration::ZERO);
            return match receipt.checked_add(wait) {
                Some(at) => Decision::FollowRedirect { wait, at },
                None => Decision::Defer(DeferReason::BeyondClockRange),
            };
        }
        if !self.retryable.contains(status) {
            return Decision::GiveUp(GiveUpReason::StatusNotRetryable);
        }
        // 2. A hint does not make a POST safe.
        if !attempt.method.is_idempotent() && !attempt.repeat_safe {
            return Decision::GiveUp(GiveUpReason::NonIdempotent);
        }
        // 3. A hint adds no attempts.
        if attempt.number >= self.max_attempts {
            return Decision::GiveUp(GiveUpReason::AttemptsExhausted);
        }
        // 4. Waiting won't refill a spent quota.
        if status == StatusCode::TOO_MANY_REQUESTS && self.classifier.is_quota_exhausted(response) {
            return Decision::GiveUp(GiveUpReason::QuotaExhausted);
        }
        // 5. A malformed hint is never read as zero.
        if let HintForm::Malformed(kind) = interval.form {
            match self.on_malformed {
                OnMalformed::Error => return Decision::Malformed(kind),
                OnMalformed::Fallback => {
                    diagnostics.dropped_malformed = true;
                    hint = None;
                }
            }
        }
        // 6. The hint is a lower bound; the backoff's cap never touches it.
        let base = hint.unwrap_or(Duration::ZERO).max(attempt.backoff);
        let jitter = match attempt.jitter {
            JitterDraw::Exact(j) => j,
            JitterDraw::Unit(unit) => self.jitter.scale(base, unit),
        };
        diagnostics.jitter = jitter;
        let wait = base.saturating_add(jitter);
        // 7. Never cap the hint: defer instead.
        if let (Some(max_wait), Some(hint)) = (self.max_wait, hint) {
            if hint > max_wait {
                return Decision::Defer(DeferReason::HintExceedsMaxWait);
            }
        }
        // 8. A wait that does not fit before the deadline is deferred, not shortened.
        if attempt.remaining.is_some_and(|left| wait >= left) {
            return Decision::Defer(DeferReason::DeadlineExceeded);
        }
        // 9. and 10.
        match receipt.checked_add(wait) {
            Some(at) => Decision::Retry { wait, at },
            None => Decision::Defer(DeferReason::BeyondClockRange),
        }
    }
}

fn permitted(receipt: Receipt, after: Duration) -> Permitted {
    Permitted {
        after,
        at: receipt.instant.checked_add(after),
        wall: receipt.wall.checked_add(after),
    }
}
