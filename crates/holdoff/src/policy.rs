//! The retry policy and the pure decision (DESIGN, "The decision", steps 1–10).
//!
//! [`Policy::decide`] reads no clock and draws no random number: the receipt time, the local
//! backoff and the jitter draw are all arguments, so the same inputs always give the same
//! verdict, and it allocates nothing.

#[cfg(feature = "json")]
use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use http::{Method, StatusCode};

use crate::backoff::Backoff;
use crate::decision::{Decision, DeferReason, Diagnostics, GiveUpReason, Permitted, Verdict};
use crate::hints::{self, Precedence, VendorHints};
use crate::jitter::Jitter;
use crate::response::{Earliest, HintForm, Interval, ResponseInfo};

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

    /// Whether [`QuotaClassifier::is_quota_exhausted`] reads [`ResponseInfo::body`]: a client
    /// reads the start of a 429's body for it only then ([`Policy::reads_body`]). `true`
    /// unless a classifier says otherwise.
    fn reads_body(&self) -> bool {
        true
    }
}

/// The default classifier: OpenAI's `insufficient_quota` error (`error.code` or
/// `error.type`) in a JSON body.
#[cfg(feature = "json")]
#[cfg_attr(docsrs, doc(cfg(feature = "json")))]
#[derive(Clone, Copy, Debug, Default)]
pub struct OpenAiQuota;

#[cfg(feature = "json")]
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

    fn reads_body(&self) -> bool {
        false
    }
}

#[cfg(feature = "json")]
fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

/// A set of HTTP status codes (every code `http` accepts, 100–999), stored as bits.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct StatusSet([u64; 15]);

impl StatusSet {
    /// No status.
    pub const EMPTY: StatusSet = StatusSet([0; 15]);

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
                (100..1000)
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
/// inputs the decision needs. Build one with [`Attempt::new`] or [`Policy::attempt`].
#[derive(Clone, Copy, Debug)]
#[non_exhaustive]
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
    /// How long this attempt took, from sending the request to receipt: the estimate of how
    /// long the next attempt will take, so that a retry that cannot finish before the
    /// deadline is not started.
    pub took: Duration,
}

impl<'a> Attempt<'a> {
    /// Attempt `number` (from 1) at `method`: not marked safe to repeat, no backoff, no
    /// jitter, no deadline.
    pub fn new(method: &'a Method, number: u32) -> Attempt<'a> {
        Attempt {
            method,
            repeat_safe: false,
            number,
            backoff: Duration::ZERO,
            jitter: JitterDraw::Exact(Duration::ZERO),
            remaining: None,
            took: Duration::ZERO,
        }
    }

    /// Marks the request safe (or not) to repeat whatever its method.
    pub fn with_repeat_safe(self, repeat_safe: bool) -> Self {
        Attempt {
            repeat_safe,
            ..self
        }
    }

    /// The local backoff `B`.
    pub fn with_backoff(self, backoff: Duration) -> Self {
        Attempt { backoff, ..self }
    }

    /// The jitter draw `j`.
    pub fn with_jitter(self, jitter: JitterDraw) -> Self {
        Attempt { jitter, ..self }
    }

    /// The time left before the task's deadline, at receipt.
    pub fn with_remaining(self, remaining: Option<Duration>) -> Self {
        Attempt { remaining, ..self }
    }

    /// How long the attempt took, from sending to receipt (the estimate of the next one).
    pub fn with_took(self, took: Duration) -> Self {
        Attempt { took, ..self }
    }

    /// Step 8: a deferral when waiting `wait` and then retrying would not end before the
    /// deadline. The retry is estimated to take as long as this attempt did
    /// ([`Attempt::took`]).
    fn defer_for_deadline(&self, wait: Duration) -> Option<Decision> {
        let left = self.remaining?;
        if wait >= left {
            Some(Decision::Defer(DeferReason::DeadlineExceeded))
        } else if wait.saturating_add(self.took) >= left {
            Some(Decision::Defer(DeferReason::AttemptWouldNotFit))
        } else {
            None
        }
    }
}

/// How to retry: which statuses, how many attempts, how long to wait at most, the local
/// backoff and jitter. A plain value, cheap to clone per request.
///
/// [`Policy::default`]'s quota classifier is [`OpenAiQuota`] with the `json` feature (on by
/// default) and [`NoQuotaClassifier`] without it: without `json`, a 429 whose body says the
/// quota is spent is retried like any other 429 unless [`Policy::with_quota_classifier`] sets one.
///
/// # Examples
///
/// The canonical case: the server asks for 30 s, the local backoff is 8 s, 12 s remain
/// before the deadline. Retrying at 8 s or at 12 s would both be early, so the task is
/// deferred, with a retry permitted 30 s after receipt.
///
/// ```
/// use holdoff::{Attempt, Decision, DeferReason, Policy, Receipt, ResponseInfo};
/// use http::{Method, StatusCode};
/// use std::time::{Duration, Instant, SystemTime};
///
/// let receipt = Receipt { instant: Instant::now(), wall: SystemTime::now() };
/// let response = ResponseInfo::new(StatusCode::SERVICE_UNAVAILABLE, receipt).with_retry_after(b"30");
/// let attempt = Attempt::new(&Method::GET, 1)
///     .with_backoff(Duration::from_secs(8))
///     .with_remaining(Some(Duration::from_secs(12)));
/// let verdict = Policy::default().decide(&response, &attempt);
/// assert_eq!(verdict.decision, Decision::Defer(DeferReason::DeadlineExceeded));
/// assert_eq!(verdict.permitted.expect("a hint").after, Duration::from_secs(30));
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
    vendor_hints: VendorHints,
    precedence: Precedence,
    rate_limited_403: bool,
}

impl Default for Policy {
    /// Retries 408, 429, 500, 502, 503 and 504, up to 5 attempts, defers a hint longer than
    /// [`Policy::DEFAULT_MAX_WAIT`] (60 s), malformed hints are errors, [`Backoff::default`],
    /// [`Jitter::default`], and [`OpenAiQuota`] with the `json` feature,
    /// [`NoQuotaClassifier`] without it.
    fn default() -> Policy {
        Policy {
            retryable: StatusSet::default_retryable(),
            max_attempts: 5,
            max_wait: Some(Policy::DEFAULT_MAX_WAIT),
            on_malformed: OnMalformed::Error,
            backoff: Backoff::default(),
            jitter: Jitter::default(),
            #[cfg(feature = "json")]
            classifier: Arc::new(OpenAiQuota),
            #[cfg(not(feature = "json"))]
            classifier: Arc::new(NoQuotaClassifier),
            vendor_hints: VendorHints::ALL,
            precedence: Precedence::RetryAfter,
            rate_limited_403: true,
        }
    }
}

impl Policy {
    /// The longest hint [`Policy::default`] waits for: 60 s. A server that asks for longer
    /// gets the method's "stop or defer the task": the task is deferred
    /// ([`DeferReason::HintExceedsMaxWait`]) with the time the server permits, never retried
    /// sooner, and the caller re-queues it. A minute is about as long as one call should
    /// keep its caller waiting; a hint of an hour is a job for a queue, not for `send()`.
    /// Set another bound, or none, with [`Policy::with_max_wait`].
    ///
    /// It bounds each wait, not the call: without a task deadline, a call can still wait
    /// for up to `max_attempts - 1` hints of up to a minute each, and an attempt is never
    /// cut. Give the task a deadline (every integration has a `timeout`) to bound the call.
    pub const DEFAULT_MAX_WAIT: Duration = Duration::from_secs(60);

    /// The statuses to retry.
    pub fn with_retryable(mut self, statuses: StatusSet) -> Policy {
        self.retryable = statuses;
        self
    }

    /// How many attempts in all, the first included. A hint adds none.
    pub fn with_max_attempts(mut self, attempts: u32) -> Policy {
        self.max_attempts = attempts;
        self
    }

    /// Defer instead of waiting when the server asks for more than this
    /// ([`Policy::DEFAULT_MAX_WAIT`] by default; `None` waits for any hint, however long).
    /// The hint itself is never capped.
    pub fn with_max_wait(mut self, max_wait: Option<Duration>) -> Policy {
        self.max_wait = max_wait;
        self
    }

    /// What to do with a malformed hint.
    pub fn with_on_malformed(mut self, on_malformed: OnMalformed) -> Policy {
        self.on_malformed = on_malformed;
        self
    }

    /// The local backoff. Its cap limits the backoff only, never the hint.
    pub fn with_backoff(mut self, backoff: Backoff) -> Policy {
        self.backoff = backoff;
        self
    }

    /// The jitter strategy.
    pub fn with_jitter(mut self, jitter: Jitter) -> Policy {
        self.jitter = jitter;
        self
    }

    /// The quota-exhaustion classifier for 429 responses.
    pub fn with_quota_classifier(mut self, classifier: Arc<dyn QuotaClassifier>) -> Policy {
        self.classifier = classifier;
        self
    }

    /// Which vendor hints to read besides `Retry-After` (all, by default).
    pub fn with_vendor_hints(mut self, hints: VendorHints) -> Policy {
        self.vendor_hints = hints;
        self
    }

    /// Which hints decide when a response carries several: by default `Retry-After` (and its
    /// millisecond spellings) over the reset-style fields, as the IETF RateLimit draft says;
    /// [`Precedence::Longest`] waits for the longest of all.
    pub fn with_hint_precedence(mut self, precedence: Precedence) -> Policy {
        self.precedence = precedence;
        self
    }

    /// Whether a 403 with `X-RateLimit-Remaining: 0` (GitHub's rate-limit answer) is retried
    /// like a 429 (on by default). A 403 with only a `Retry-After` is never retried.
    pub fn with_rate_limited_403(mut self, retry: bool) -> Policy {
        self.rate_limited_403 = retry;
        self
    }

    /// The statuses the policy retries (besides a rate-limited 403 and a 413 with a hint).
    pub fn retryable(&self) -> StatusSet {
        self.retryable
    }

    /// How many attempts in all, the first included.
    pub fn max_attempts(&self) -> u32 {
        self.max_attempts
    }

    /// The longest hint the policy waits for before deferring, if any.
    pub fn max_wait(&self) -> Option<Duration> {
        self.max_wait
    }

    /// What the policy does with a malformed hint.
    pub fn on_malformed(&self) -> OnMalformed {
        self.on_malformed
    }

    /// The local backoff.
    pub fn backoff(&self) -> Backoff {
        self.backoff
    }

    /// The jitter strategy.
    pub fn jitter(&self) -> Jitter {
        self.jitter
    }

    /// The vendor hints the policy reads.
    pub fn vendor_hints(&self) -> VendorHints {
        self.vendor_hints
    }

    /// Which hints decide when a response carries several.
    pub fn hint_precedence(&self) -> Precedence {
        self.precedence
    }

    /// Whether a rate-limited 403 is retried.
    pub fn rate_limited_403(&self) -> bool {
        self.rate_limited_403
    }

    /// Whether deciding about a response with `status` reads its body: only a 429, and only
    /// when the quota classifier looks at bodies ([`QuotaClassifier::reads_body`]). A client
    /// that must read the body to hand it over can skip that otherwise.
    pub fn reads_body(&self, status: StatusCode) -> bool {
        status == StatusCode::TOO_MANY_REQUESTS && self.classifier.reads_body()
    }

    /// An attempt at `method`, numbered from 1, with this policy's backoff `B` for it, no
    /// jitter and no deadline (set them with [`Attempt::with_jitter`] and
    /// [`Attempt::with_remaining`]).
    pub fn attempt<'m>(&self, method: &'m Method, number: u32) -> Attempt<'m> {
        Attempt::new(method, number).with_backoff(self.backoff_for(number))
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
        let interval = Interval::of(response, self.vendor_hints, self.precedence);
        let mut diagnostics = Diagnostics {
            raw: response.retry_after,
            hint: interval.form,
            source: interval.source,
            malformed_vendor: interval.malformed_vendor,
            dropped_malformed: false,
            clamped_past: interval.clamped_past,
            reference: interval.reference,
            skew: interval.skew,
            interval: interval.interval,
            wait: None,
            backoff: attempt.backoff,
            jitter: Duration::ZERO,
        };
        let decision = self.decision(response, attempt, &interval, &mut diagnostics);
        Verdict {
            decision,
            permitted: interval.interval.map(|after| {
                Permitted::after_receipt(response.receipt.instant, response.receipt.wall, after)
            }),
            diagnostics,
        }
    }

    /// The earliest time `response`'s hints allow a retry under the most lenient reading its
    /// headers allow: what a *judge* of clients uses, where [`Policy::decide`] (a client) takes
    /// the strictest. A date-form hint is read a second sooner for each clock field of whole
    /// seconds it is measured against; `Retry-After` and its millisecond spellings decide over
    /// the reset-style fields whatever [`Policy::hint_precedence`] says, and the shortest of
    /// the deciding group counts. Pure, like [`Policy::decide`].
    ///
    /// # Examples
    ///
    /// ```
    /// use holdoff::{Earliest, HintSource, Policy, Receipt, ResponseInfo};
    /// use http::StatusCode;
    /// use std::time::{Duration, Instant, SystemTime};
    ///
    /// let receipt = Receipt { instant: Instant::now(), wall: SystemTime::now() };
    /// let response = ResponseInfo::new(StatusCode::TOO_MANY_REQUESTS, receipt)
    ///     .with_date(b"Sun, 06 Nov 1994 08:49:37 GMT")
    ///     .with_retry_after(b"Sun, 06 Nov 1994 08:49:39 GMT");
    /// let Earliest::At { after, source, .. } = Policy::default().earliest(&response) else {
    ///     panic!("a usable hint");
    /// };
    /// // The server's clock was anywhere in [08:49:37, 08:49:38): at least 1 s to wait.
    /// assert_eq!((after, source), (Duration::from_secs(1), HintSource::RetryAfter));
    /// ```
    pub fn earliest(&self, response: &ResponseInfo<'_>) -> Earliest {
        Interval::of(response, self.vendor_hints, Precedence::RetryAfter).earliest()
    }

    /// Decides what to do after `attempt` failed without a response (connection refused,
    /// reset, timeout), at `now`: retry on the local backoff alone if the request may be
    /// repeated and attempts and time are left. Pure, like [`Policy::decide`].
    pub fn decide_error(&self, attempt: &Attempt<'_>, now: Instant) -> Decision {
        if !attempt.method.is_idempotent() && !attempt.repeat_safe {
            return Decision::GiveUp(GiveUpReason::NonIdempotent);
        }
        if attempt.number >= self.max_attempts {
            return Decision::GiveUp(GiveUpReason::AttemptsExhausted);
        }
        let jitter = match attempt.jitter {
            JitterDraw::Exact(j) => j,
            JitterDraw::Unit(unit) => self.jitter.scale(attempt.backoff, unit),
        };
        let wait = attempt.backoff.saturating_add(jitter);
        if let Some(defer) = attempt.defer_for_deadline(wait) {
            return defer;
        }
        match now.checked_add(wait) {
            Some(at) => Decision::Retry { wait, at },
            None => Decision::Defer(DeferReason::BeyondClockRange),
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
        let hint = interval.interval;
        if status.is_redirection() && response.has_location {
            if let Some(error) = self.malformed(interval, diagnostics) {
                return error;
            }
            let wait = hint.unwrap_or(Duration::ZERO);
            return match receipt.checked_add(wait) {
                Some(at) => Decision::FollowRedirect { wait, at },
                None => Decision::Defer(DeferReason::BeyondClockRange),
            };
        }
        let rate_limited_403 = status == StatusCode::FORBIDDEN
            && self.rate_limited_403
            && response.headers.is_some_and(hints::rate_limited);
        // RFC 9110 §15.5.14: a 413 server sends Retry-After when the condition is temporary,
        // to say when to try again. Without one, a 413 stays final.
        let temporary_413 = status == StatusCode::PAYLOAD_TOO_LARGE
            && (response.retry_after.is_some() || hint.is_some());
        if !self.retryable.contains(status) && !rate_limited_403 && !temporary_413 {
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
        if let Some(error) = self.malformed(interval, diagnostics) {
            return error;
        }
        // 6. The hint is a lower bound; the backoff's cap never touches it.
        let base = hint.unwrap_or(Duration::ZERO).max(attempt.backoff);
        let jitter = match attempt.jitter {
            JitterDraw::Exact(j) => j,
            JitterDraw::Unit(unit) => self.jitter.scale(base, unit),
        };
        diagnostics.jitter = jitter;
        let wait = base.saturating_add(jitter);
        diagnostics.wait = Some(wait);
        // 7. Never cap the hint: defer instead.
        if let (Some(max_wait), Some(hint)) = (self.max_wait, hint)
            && hint > max_wait
        {
            return Decision::Defer(DeferReason::HintExceedsMaxWait);
        }
        // 8. A wait that does not fit before the deadline is deferred, not shortened; so is
        // a retry that would still be running at the deadline.
        if let Some(defer) = attempt.defer_for_deadline(wait) {
            return defer;
        }
        // 9. and 10.
        match receipt.checked_add(wait) {
            Some(at) => Decision::Retry { wait, at },
            None => Decision::Defer(DeferReason::BeyondClockRange),
        }
    }
}

impl Policy {
    /// Step 5: an error for a malformed `Retry-After`, or (with `fallback`) a note that it was
    /// dropped. The malformed value never made it into `H`; a valid vendor hint still counts.
    fn malformed(
        &self,
        interval: &Interval,
        diagnostics: &mut Diagnostics<'_>,
    ) -> Option<Decision> {
        let HintForm::Malformed(kind) = interval.form else {
            return None;
        };
        match self.on_malformed {
            OnMalformed::Error => Some(Decision::Malformed(kind)),
            OnMalformed::Fallback => {
                diagnostics.dropped_malformed = true;
                None
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decision::Reason;
    use crate::error::ParseErrorKind;
    use crate::response::Receipt;
    use crate::response::{Reference, Skew};
    use std::time::UNIX_EPOCH;

    /// 1994-11-06T08:49:37Z, the RFC's example instant.
    const RFC_EXAMPLE: u64 = 784_111_777;

    fn headers(pairs: &[(&'static str, &'static str)]) -> http::HeaderMap {
        pairs
            .iter()
            .map(|(k, v)| {
                let value = http::HeaderValue::from_static(v);
                (http::HeaderName::from_static(k), value)
            })
            .collect()
    }

    fn receipt() -> Receipt {
        Receipt {
            instant: crate::clock::SystemClock.now(),
            wall: UNIX_EPOCH + Duration::from_secs(RFC_EXAMPLE),
        }
    }

    fn get(number: u32) -> Attempt<'static> {
        Attempt {
            method: &Method::GET,
            repeat_safe: false,
            number,
            backoff: Duration::ZERO,
            jitter: JitterDraw::Exact(Duration::ZERO),
            remaining: None,
            took: Duration::ZERO,
        }
    }

    fn secs(s: u64) -> Duration {
        Duration::from_secs(s)
    }

    fn decide(response: ResponseInfo<'_>, attempt: Attempt<'_>) -> Decision {
        Policy::default().decide(&response, &attempt).decision
    }

    fn unavailable(hint: &[u8]) -> ResponseInfo<'_> {
        ResponseInfo::new(StatusCode::SERVICE_UNAVAILABLE, receipt()).with_retry_after(hint)
    }

    mod decide {
        use super::*;

        #[test]
        fn a_413_with_a_hint_is_temporary_and_waits_for_it() {
            let r = receipt();
            let hinted = ResponseInfo::new(StatusCode::PAYLOAD_TOO_LARGE, r).with_retry_after(b"5");
            assert_eq!(
                decide(hinted, get(1)),
                Decision::Retry {
                    wait: secs(5),
                    at: r.instant + secs(5)
                }
            );
            let bare = ResponseInfo::new(StatusCode::PAYLOAD_TOO_LARGE, r);
            assert_eq!(
                decide(bare, get(1)),
                Decision::GiveUp(GiveUpReason::StatusNotRetryable)
            );
            let malformed =
                ResponseInfo::new(StatusCode::PAYLOAD_TOO_LARGE, r).with_retry_after(b"soon");
            assert_eq!(
                decide(malformed, get(1)),
                Decision::Malformed(crate::ParseErrorKind::NeitherDelayNorDate)
            );
        }

        #[test]
        fn only_a_classifier_that_reads_bodies_makes_a_429_body_worth_reading() {
            #[derive(Debug)]
            struct Reads;
            impl QuotaClassifier for Reads {
                fn is_quota_exhausted(&self, response: &ResponseInfo<'_>) -> bool {
                    !response.body.is_empty()
                }
            }
            let reading = Policy::default().with_quota_classifier(Arc::new(Reads));
            assert!(reading.reads_body(StatusCode::TOO_MANY_REQUESTS));
            assert!(!reading.reads_body(StatusCode::SERVICE_UNAVAILABLE));
            let blind = Policy::default().with_quota_classifier(Arc::new(NoQuotaClassifier));
            assert!(!blind.reads_body(StatusCode::TOO_MANY_REQUESTS));
        }

        #[test]
        fn a_retry_that_would_still_run_at_the_deadline_is_not_started() {
            // The wait (2 s) fits in the 5 s left, but the attempt took 3 s: the retry would
            // end at 5 s or later.
            let response = unavailable(b"2");
            let slow = Attempt {
                remaining: Some(secs(5)),
                took: secs(3),
                ..get(1)
            };
            assert_eq!(
                decide(response, slow),
                Decision::Defer(DeferReason::AttemptWouldNotFit)
            );
            let quick = Attempt {
                took: Duration::from_millis(2_900),
                ..slow
            };
            assert!(matches!(decide(response, quick), Decision::Retry { .. }));
        }

        #[test]
        fn a_wait_that_does_not_fit_is_named_before_the_attempt() {
            let attempt = Attempt {
                remaining: Some(secs(5)),
                took: secs(3),
                ..get(1)
            };
            assert_eq!(
                decide(unavailable(b"6"), attempt),
                Decision::Defer(DeferReason::DeadlineExceeded)
            );
        }

        #[test]
        fn a_transport_error_counts_the_attempt_too() {
            let attempt = Attempt {
                backoff: secs(1),
                remaining: Some(secs(5)),
                took: secs(4),
                ..get(1)
            };
            let now = receipt().instant;
            assert_eq!(
                Policy::default().decide_error(&attempt, now),
                Decision::Defer(DeferReason::AttemptWouldNotFit)
            );
        }

        #[test]
        fn the_canonical_case_defers_to_the_hint() {
            // The server asks 30 s, the local backoff is 8 s, 12 s remain.
            let r = receipt();
            let response =
                ResponseInfo::new(StatusCode::SERVICE_UNAVAILABLE, r).with_retry_after(b"30");
            let attempt = Attempt {
                backoff: secs(8),
                remaining: Some(secs(12)),
                ..get(1)
            };
            let verdict = Policy::default().decide(&response, &attempt);
            assert_eq!(
                verdict.decision,
                Decision::Defer(DeferReason::DeadlineExceeded)
            );
            assert_eq!(verdict.permitted.expect("a hint").after, secs(30));
            assert_eq!(
                verdict.permitted.expect("a hint").at,
                Some(r.instant + secs(30))
            );
            assert_eq!(
                verdict.permitted.expect("a hint").wall,
                Some(r.wall + secs(30))
            );
        }

        #[test]
        fn success_is_done_and_its_hint_only_noted() {
            let response = ResponseInfo::new(StatusCode::OK, receipt()).with_retry_after(b"60");
            let verdict = Policy::default().decide(&response, &get(1));
            assert_eq!(verdict.decision, Decision::Done);
            assert_eq!(verdict.permitted.expect("a hint").after, secs(60));
        }

        #[test]
        fn a_redirect_is_followed_after_the_hint() {
            let r = receipt();
            let response = ResponseInfo::new(StatusCode::MOVED_PERMANENTLY, r)
                .with_retry_after(b"5")
                .with_location(true);
            assert_eq!(
                decide(response, get(1)),
                Decision::FollowRedirect {
                    wait: secs(5),
                    at: r.instant + secs(5)
                }
            );
        }

        #[test]
        fn a_redirect_without_location_is_not_retried() {
            let response = ResponseInfo::new(StatusCode::FOUND, receipt());
            assert_eq!(
                decide(response, get(1)),
                Decision::GiveUp(GiveUpReason::StatusNotRetryable)
            );
        }

        #[test]
        fn a_hint_grants_no_permission_to_a_403() {
            let response =
                ResponseInfo::new(StatusCode::FORBIDDEN, receipt()).with_retry_after(b"1");
            assert_eq!(
                decide(response, get(1)),
                Decision::GiveUp(GiveUpReason::StatusNotRetryable)
            );
        }

        #[test]
        fn every_default_retryable_status_is_retried() {
            for code in [408, 429, 500, 502, 503, 504] {
                let status = StatusCode::from_u16(code).expect("valid");
                let response = ResponseInfo::new(status, receipt()).with_retry_after(b"1");
                assert!(
                    matches!(decide(response, get(1)), Decision::Retry { .. }),
                    "{code} should be retried"
                );
            }
            let response = ResponseInfo::new(StatusCode::NOT_IMPLEMENTED, receipt());
            assert_eq!(
                decide(response, get(1)),
                Decision::GiveUp(GiveUpReason::StatusNotRetryable)
            );
        }

        #[test]
        fn a_hint_does_not_make_a_post_safe() {
            let attempt = Attempt {
                method: &Method::POST,
                ..get(1)
            };
            assert_eq!(
                decide(unavailable(b"1"), attempt),
                Decision::GiveUp(GiveUpReason::NonIdempotent)
            );
        }

        #[test]
        fn a_post_marked_safe_to_repeat_is_retried() {
            let attempt = Attempt {
                method: &Method::POST,
                repeat_safe: true,
                ..get(1)
            };
            assert!(matches!(
                decide(unavailable(b"1"), attempt),
                Decision::Retry { .. }
            ));
        }

        #[test]
        fn idempotent_methods_are_retried() {
            for method in [
                Method::GET,
                Method::HEAD,
                Method::OPTIONS,
                Method::TRACE,
                Method::PUT,
                Method::DELETE,
            ] {
                let attempt = Attempt {
                    method: &method,
                    ..get(1)
                };
                assert!(
                    matches!(decide(unavailable(b"1"), attempt), Decision::Retry { .. }),
                    "{method}"
                );
            }
            let attempt = Attempt {
                method: &Method::PATCH,
                ..get(1)
            };
            assert_eq!(
                decide(unavailable(b"1"), attempt),
                Decision::GiveUp(GiveUpReason::NonIdempotent)
            );
        }

        #[test]
        fn a_hint_adds_no_attempts() {
            assert_eq!(
                decide(unavailable(b"1"), get(5)),
                Decision::GiveUp(GiveUpReason::AttemptsExhausted)
            );
            assert!(matches!(
                decide(unavailable(b"1"), get(4)),
                Decision::Retry { .. }
            ));
        }

        #[test]
        #[cfg(feature = "json")]
        fn a_spent_openai_quota_is_not_retried() {
            let body = br#"{"error": {"message": "You exceeded your current quota.", "type": "insufficient_quota", "param": null, "code": "insufficient_quota"}}"#;
            let response = ResponseInfo::new(StatusCode::TOO_MANY_REQUESTS, receipt())
                .with_retry_after(b"20")
                .with_body(body);
            let verdict = Policy::default().decide(&response, &get(1));
            assert_eq!(
                verdict.decision,
                Decision::GiveUp(GiveUpReason::QuotaExhausted)
            );
            assert_eq!(verdict.permitted.expect("a hint").after, secs(20));
        }

        #[test]
        fn an_openai_rate_limit_is_retried() {
            let body = br#"{"error": {"message": "Rate limit reached", "type": "requests", "code": "rate_limit_exceeded"}}"#;
            let response = ResponseInfo::new(StatusCode::TOO_MANY_REQUESTS, receipt())
                .with_retry_after(b"20")
                .with_body(body);
            assert!(matches!(decide(response, get(1)), Decision::Retry { .. }));
        }

        #[test]
        fn quota_words_in_a_non_json_body_do_not_count() {
            let response = ResponseInfo::new(StatusCode::TOO_MANY_REQUESTS, receipt())
                .with_retry_after(b"1")
                .with_body(b"insufficient_quota");
            assert!(matches!(decide(response, get(1)), Decision::Retry { .. }));
        }

        #[test]
        fn a_malformed_hint_is_an_error_by_default() {
            let verdict = Policy::default().decide(&unavailable(b"1.5"), &get(1));
            assert_eq!(
                verdict.decision,
                Decision::Malformed(ParseErrorKind::BadDelay)
            );
            assert_eq!(verdict.decision.reason(), Reason::MalformedRetryAfter);
            assert_eq!(verdict.diagnostics.raw, Some(&b"1.5"[..]));
        }

        #[test]
        fn a_malformed_hint_falls_back_to_the_backoff_when_asked() {
            let policy = Policy::default().with_on_malformed(OnMalformed::Fallback);
            let r = receipt();
            let response =
                ResponseInfo::new(StatusCode::SERVICE_UNAVAILABLE, r).with_retry_after(b"soon");
            let attempt = Attempt {
                backoff: secs(2),
                ..get(1)
            };
            let verdict = policy.decide(&response, &attempt);
            assert_eq!(
                verdict.decision,
                Decision::Retry {
                    wait: secs(2),
                    at: r.instant + secs(2)
                }
            );
            assert!(verdict.diagnostics.dropped_malformed);
            // A malformed hint names no time: never "permitted now".
            assert_eq!(verdict.permitted, None);
        }

        #[test]
        fn repeated_retry_after_fields_are_a_list() {
            let mut headers = http::HeaderMap::new();
            headers.append(
                http::header::RETRY_AFTER,
                http::HeaderValue::from_static("5"),
            );
            headers.append(
                http::header::RETRY_AFTER,
                http::HeaderValue::from_static("5"),
            );
            let response =
                ResponseInfo::from_headers(StatusCode::SERVICE_UNAVAILABLE, &headers, receipt());
            assert_eq!(
                decide(response, get(1)),
                Decision::Malformed(ParseErrorKind::List)
            );
        }

        #[test]
        fn the_wait_is_the_longer_of_hint_and_backoff_plus_jitter() {
            let r = receipt();
            let attempt = Attempt {
                backoff: secs(3),
                jitter: JitterDraw::Exact(Duration::from_millis(250)),
                ..get(1)
            };
            let longer_hint =
                ResponseInfo::new(StatusCode::SERVICE_UNAVAILABLE, r).with_retry_after(b"10");
            assert_eq!(
                decide(longer_hint, attempt).wait(),
                Some(Duration::from_millis(10_250))
            );
            let shorter_hint =
                ResponseInfo::new(StatusCode::SERVICE_UNAVAILABLE, r).with_retry_after(b"1");
            assert_eq!(
                decide(shorter_hint, attempt).wait(),
                Some(Duration::from_millis(3_250))
            );
        }

        #[test]
        fn the_backoff_cap_never_caps_the_hint() {
            let policy = Policy::default()
                .with_max_wait(None)
                .with_backoff(Backoff::exponential(secs(1), secs(4)));
            let attempt = Attempt {
                backoff: policy.backoff_for(4),
                ..get(4)
            };
            let verdict = policy.decide(&unavailable(b"600"), &attempt);
            assert_eq!(verdict.decision.wait(), Some(secs(600)));
        }

        #[test]
        fn a_hint_beyond_max_wait_defers_instead_of_being_capped() {
            let policy = Policy::default().with_max_wait(Some(secs(10)));
            let verdict = policy.decide(&unavailable(b"30"), &get(1));
            assert_eq!(
                verdict.decision,
                Decision::Defer(DeferReason::HintExceedsMaxWait)
            );
            assert_eq!(verdict.permitted.expect("a hint").after, secs(30));
            // A long backoff is the client's own choice: max_wait limits only the hint.
            let attempt = Attempt {
                backoff: secs(20),
                ..get(1)
            };
            assert!(matches!(
                policy.decide(&unavailable(b"5"), &attempt).decision,
                Decision::Retry { .. }
            ));
        }

        #[test]
        fn by_default_a_hint_beyond_a_minute_defers_the_task() {
            let verdict = Policy::default().decide(&unavailable(b"3600"), &get(1));
            assert_eq!(
                verdict.decision,
                Decision::Defer(DeferReason::HintExceedsMaxWait)
            );
            assert_eq!(verdict.permitted.expect("a hint").after, secs(3600));
            assert!(matches!(
                Policy::default()
                    .decide(&unavailable(b"60"), &get(1))
                    .decision,
                Decision::Retry { .. }
            ));
        }

        #[test]
        fn a_wait_equal_to_the_time_left_is_deferred() {
            let attempt = Attempt {
                remaining: Some(secs(30)),
                ..get(1)
            };
            assert_eq!(
                decide(unavailable(b"30"), attempt),
                Decision::Defer(DeferReason::DeadlineExceeded)
            );
            let attempt = Attempt {
                remaining: Some(secs(31)),
                ..get(1)
            };
            assert!(matches!(
                decide(unavailable(b"30"), attempt),
                Decision::Retry { .. }
            ));
        }

        #[test]
        fn jitter_can_push_a_wait_past_the_deadline() {
            let attempt = Attempt {
                remaining: Some(secs(31)),
                jitter: JitterDraw::Exact(secs(1)),
                ..get(1)
            };
            assert_eq!(
                decide(unavailable(b"30"), attempt),
                Decision::Defer(DeferReason::DeadlineExceeded)
            );
        }

        #[test]
        fn a_wait_beyond_the_clock_defers_without_panicking() {
            let verdict = Policy::default()
                .with_max_wait(None)
                .decide(&unavailable(b"99999999999999999999999"), &get(1));
            assert_eq!(
                verdict.decision,
                Decision::Defer(DeferReason::BeyondClockRange)
            );
            assert_eq!(
                verdict.permitted.expect("a hint").after,
                Duration::from_secs(u64::MAX)
            );
            assert_eq!(verdict.permitted.expect("a hint").at, None);
            assert!(matches!(
                verdict.diagnostics.hint,
                HintForm::Delay {
                    saturated: true,
                    ..
                }
            ));
        }

        #[test]
        fn no_hint_waits_the_backoff() {
            let r = receipt();
            let response = ResponseInfo::new(StatusCode::BAD_GATEWAY, r);
            let attempt = Attempt {
                backoff: secs(4),
                ..get(2)
            };
            let verdict = Policy::default().decide(&response, &attempt);
            assert_eq!(
                verdict.decision,
                Decision::Retry {
                    wait: secs(4),
                    at: r.instant + secs(4)
                }
            );
            assert_eq!(verdict.permitted, None);
            assert_eq!(verdict.diagnostics.hint, HintForm::Absent);
        }

        #[test]
        fn proportional_jitter_scales_with_the_wait() {
            let policy = Policy::default().with_jitter(Jitter::Proportional(0.5));
            let attempt = Attempt {
                jitter: JitterDraw::Unit(1.0),
                ..get(1)
            };
            let verdict = policy.decide(&unavailable(b"10"), &attempt);
            assert_eq!(verdict.decision.wait(), Some(secs(15)));
            assert_eq!(verdict.diagnostics.jitter, secs(5));
        }
    }

    mod date_hints {
        use super::*;

        const HINT: &[u8] = b"Sun, 06 Nov 1994 08:50:37 GMT"; // one minute after RFC_EXAMPLE

        #[test]
        fn without_date_the_local_clock_is_the_reference() {
            let verdict = Policy::default().decide(&unavailable(HINT), &get(1));
            assert_eq!(verdict.permitted.expect("a hint").after, secs(60));
            assert_eq!(verdict.diagnostics.reference, Reference::LocalClock);
            assert_eq!(verdict.diagnostics.skew, None);
        }

        #[test]
        fn with_date_the_server_clock_is_the_reference() {
            // The server's clock reads 20 s ahead of ours: it means 40 s from now, not 60.
            let response = unavailable(HINT).with_date(b"Sun, 06 Nov 1994 08:49:57 GMT");
            let verdict = Policy::default().decide(&response, &get(1));
            assert_eq!(verdict.permitted.expect("a hint").after, secs(40));
            assert_eq!(verdict.diagnostics.reference, Reference::ServerDate);
            assert_eq!(verdict.diagnostics.skew, Some(Skew::Ahead(secs(20))));
            assert_eq!(verdict.diagnostics.skew.map(Skew::as_secs_i64), Some(20));
        }

        #[test]
        fn age_moves_the_server_clock_forward() {
            let response = unavailable(HINT)
                .with_date(b"Sun, 06 Nov 1994 08:49:37 GMT")
                .with_age(b"15");
            let verdict = Policy::default().decide(&response, &get(1));
            assert_eq!(verdict.permitted.expect("a hint").after, secs(45));
            assert_eq!(verdict.diagnostics.skew, Some(Skew::Ahead(secs(15))));
        }

        #[test]
        fn a_server_behind_us_is_reported_as_negative_skew() {
            let response = unavailable(HINT).with_date(b"Sun, 06 Nov 1994 08:48:37 GMT");
            let verdict = Policy::default().decide(&response, &get(1));
            assert_eq!(verdict.permitted.expect("a hint").after, secs(120));
            assert_eq!(verdict.diagnostics.skew.map(Skew::as_secs_i64), Some(-60));
        }

        #[test]
        fn a_date_less_than_its_resolution_behind_is_no_skew() {
            // `Date` has whole seconds: our clock 0.99 s past it is a server in step.
            let mut r = receipt();
            r.wall += Duration::from_millis(990);
            let response = ResponseInfo::new(StatusCode::SERVICE_UNAVAILABLE, r)
                .with_retry_after(HINT)
                .with_date(b"Sun, 06 Nov 1994 08:49:37 GMT");
            let verdict = Policy::default().decide(&response, &get(1));
            assert_eq!(verdict.diagnostics.skew, Some(Skew::Ahead(Duration::ZERO)));

            r.wall += Duration::from_millis(10);
            let response = ResponseInfo::new(StatusCode::SERVICE_UNAVAILABLE, r)
                .with_retry_after(HINT)
                .with_date(b"Sun, 06 Nov 1994 08:49:37 GMT");
            let verdict = Policy::default().decide(&response, &get(1));
            assert_eq!(
                verdict.diagnostics.skew,
                Some(Skew::Behind(Skew::RESOLUTION))
            );
        }

        #[test]
        fn an_invalid_date_header_falls_back_to_the_local_clock() {
            let response = unavailable(HINT).with_date(b"yesterday");
            let verdict = Policy::default().decide(&response, &get(1));
            assert_eq!(verdict.permitted.expect("a hint").after, secs(60));
            assert_eq!(verdict.diagnostics.reference, Reference::LocalClock);
        }

        #[test]
        fn a_past_date_clamps_to_zero_and_says_so() {
            let verdict =
                Policy::default().decide(&unavailable(b"Sun, 06 Nov 1994 08:00:00 GMT"), &get(1));
            assert_eq!(verdict.permitted.expect("a hint").after, Duration::ZERO);
            assert!(verdict.diagnostics.clamped_past);
            assert!(matches!(verdict.decision, Decision::Retry { .. }));
        }

        #[test]
        fn sub_second_receipt_times_are_kept() {
            let r = Receipt {
                instant: crate::clock::SystemClock.now(),
                wall: UNIX_EPOCH + Duration::from_millis(RFC_EXAMPLE * 1000 + 250),
            };
            let response =
                ResponseInfo::new(StatusCode::SERVICE_UNAVAILABLE, r).with_retry_after(HINT);
            let verdict = Policy::default().decide(&response, &get(1));
            assert_eq!(
                verdict.permitted.expect("a hint").after,
                Duration::from_millis(59_750)
            );
        }
    }

    mod vendor_hints {
        use super::*;
        use crate::hints::{HintSource, VendorHints};

        #[test]
        fn a_longer_vendor_hint_beats_retry_after_and_is_named() {
            let h = headers(&[("retry-after", "1"), ("retry-after-ms", "2500")]);
            let response = ResponseInfo::from_headers(StatusCode::TOO_MANY_REQUESTS, &h, receipt());
            let verdict = Policy::default().decide(&response, &get(1));
            assert_eq!(verdict.decision.wait(), Some(Duration::from_millis(2500)));
            assert_eq!(verdict.diagnostics.source, Some(HintSource::RetryAfterMs));
            assert_eq!(
                verdict.permitted.expect("a hint").after,
                Duration::from_millis(2500)
            );
        }

        #[test]
        fn a_shorter_vendor_hint_never_shortens_retry_after() {
            let h = headers(&[("retry-after", "10"), ("x-ms-retry-after-ms", "100")]);
            let response =
                ResponseInfo::from_headers(StatusCode::SERVICE_UNAVAILABLE, &h, receipt());
            let verdict = Policy::default().decide(&response, &get(1));
            assert_eq!(verdict.decision.wait(), Some(secs(10)));
            assert_eq!(verdict.diagnostics.source, Some(HintSource::RetryAfter));
        }

        #[test]
        fn vendor_hints_can_be_switched_off() {
            let h = headers(&[("retry-after-ms", "2500")]);
            let response = ResponseInfo::from_headers(StatusCode::TOO_MANY_REQUESTS, &h, receipt());
            let policy = Policy::default().with_vendor_hints(VendorHints::NONE);
            assert_eq!(
                policy.decide(&response, &get(1)).decision.wait(),
                Some(Duration::ZERO)
            );
        }

        #[test]
        fn a_github_rate_limit_403_waits_for_the_reset() {
            // Receipt is RFC_EXAMPLE; the reset is 50 s later.
            let h = headers(&[
                ("x-ratelimit-remaining", "0"),
                ("x-ratelimit-reset", "784111827"),
            ]);
            let response = ResponseInfo::from_headers(StatusCode::FORBIDDEN, &h, receipt());
            let verdict = Policy::default().decide(&response, &get(1));
            assert_eq!(verdict.decision.wait(), Some(secs(50)));
            assert_eq!(
                verdict.diagnostics.source,
                Some(HintSource::XRateLimitReset)
            );
            let strict = Policy::default().with_rate_limited_403(false);
            assert_eq!(
                strict.decide(&response, &get(1)).decision,
                Decision::GiveUp(GiveUpReason::StatusNotRetryable)
            );
        }

        #[test]
        fn a_plain_403_is_not_retried_even_with_rate_limit_headers_left() {
            let h = headers(&[("x-ratelimit-remaining", "12"), ("retry-after", "5")]);
            let response = ResponseInfo::from_headers(StatusCode::FORBIDDEN, &h, receipt());
            assert_eq!(
                decide(response, get(1)),
                Decision::GiveUp(GiveUpReason::StatusNotRetryable)
            );
        }

        #[test]
        fn a_malformed_retry_after_falls_back_to_a_valid_vendor_hint() {
            let h = headers(&[("retry-after", "soon"), ("retry-after-ms", "700")]);
            let response =
                ResponseInfo::from_headers(StatusCode::SERVICE_UNAVAILABLE, &h, receipt());
            let policy = Policy::default().with_on_malformed(OnMalformed::Fallback);
            let verdict = policy.decide(&response, &get(1));
            assert_eq!(verdict.decision.wait(), Some(Duration::from_millis(700)));
            assert!(verdict.diagnostics.dropped_malformed);
        }

        #[test]
        fn a_malformed_vendor_hint_is_reported_not_read_as_zero() {
            let h = headers(&[("retry-after", "3"), ("retry-after-ms", "-1")]);
            let response =
                ResponseInfo::from_headers(StatusCode::SERVICE_UNAVAILABLE, &h, receipt());
            let verdict = Policy::default().decide(&response, &get(1));
            assert_eq!(verdict.decision.wait(), Some(secs(3)));
            assert_eq!(
                verdict.diagnostics.malformed_vendor,
                Some(HintSource::RetryAfterMs)
            );
        }
    }

    mod precedence {
        use super::*;
        use crate::hints::{HintSource, Precedence};

        #[test]
        fn retry_after_decides_over_a_longer_reset() {
            let h = headers(&[("retry-after", "1"), ("ratelimit-reset", "100")]);
            let response = ResponseInfo::from_headers(StatusCode::TOO_MANY_REQUESTS, &h, receipt());
            let verdict = Policy::default().decide(&response, &get(1));
            assert_eq!(verdict.decision.wait(), Some(secs(1)));
            assert_eq!(verdict.diagnostics.source, Some(HintSource::RetryAfter));
        }

        #[test]
        fn a_millisecond_spelling_decides_with_retry_after_over_resets() {
            let h = headers(&[
                ("retry-after-ms", "1500"),
                ("x-ratelimit-reset-requests", "6m0s"),
            ]);
            let response = ResponseInfo::from_headers(StatusCode::TOO_MANY_REQUESTS, &h, receipt());
            let verdict = Policy::default().decide(&response, &get(1));
            assert_eq!(verdict.decision.wait(), Some(Duration::from_millis(1500)));
            assert_eq!(verdict.diagnostics.source, Some(HintSource::RetryAfterMs));
        }

        #[test]
        fn the_aws_header_decides_with_retry_after_the_longest_winning() {
            let h = headers(&[
                ("retry-after", "1"),
                ("x-amz-retry-after", "2500"),
                ("ratelimit-reset", "100"),
            ]);
            let response = ResponseInfo::from_headers(StatusCode::TOO_MANY_REQUESTS, &h, receipt());
            let verdict = Policy::default().decide(&response, &get(1));
            assert_eq!(verdict.decision.wait(), Some(Duration::from_millis(2500)));
            assert_eq!(verdict.diagnostics.source, Some(HintSource::XAmzRetryAfter));

            let h = headers(&[("retry-after", "4"), ("x-amz-retry-after", "2500")]);
            let response = ResponseInfo::from_headers(StatusCode::TOO_MANY_REQUESTS, &h, receipt());
            let verdict = Policy::default().decide(&response, &get(1));
            assert_eq!(verdict.decision.wait(), Some(secs(4)));
            assert_eq!(verdict.diagnostics.source, Some(HintSource::RetryAfter));
        }

        #[test]
        fn retry_after_decides_over_the_ietf_ratelimit_field() {
            let h = headers(&[
                ("retry-after", "2"),
                ("ratelimit-policy", "\"default\";q=100;w=60"),
                ("ratelimit", "\"default\";r=0;t=50"),
            ]);
            let response = ResponseInfo::from_headers(StatusCode::TOO_MANY_REQUESTS, &h, receipt());
            let verdict = Policy::default().decide(&response, &get(1));
            assert_eq!(verdict.decision.wait(), Some(secs(2)));
            assert_eq!(verdict.diagnostics.source, Some(HintSource::RetryAfter));
        }

        #[test]
        fn resets_decide_when_no_retry_after_is_usable() {
            let h = headers(&[("retry-after", "soon"), ("ratelimit-reset", "45")]);
            let response = ResponseInfo::from_headers(StatusCode::TOO_MANY_REQUESTS, &h, receipt());
            let policy = Policy::default().with_on_malformed(OnMalformed::Fallback);
            let verdict = policy.decide(&response, &get(1));
            assert_eq!(verdict.decision.wait(), Some(secs(45)));
            assert_eq!(verdict.diagnostics.source, Some(HintSource::RateLimitReset));
        }

        #[test]
        fn the_longest_wins_when_asked() {
            let h = headers(&[("retry-after", "1"), ("ratelimit-reset", "45")]);
            let response = ResponseInfo::from_headers(StatusCode::TOO_MANY_REQUESTS, &h, receipt());
            let policy = Policy::default().with_hint_precedence(Precedence::Longest);
            let verdict = policy.decide(&response, &get(1));
            assert_eq!(verdict.decision.wait(), Some(secs(45)));
            assert_eq!(verdict.diagnostics.source, Some(HintSource::RateLimitReset));
        }
    }

    mod earliest {
        use super::*;
        use crate::hints::HintSource;
        use crate::response::{Earliest, Reading};

        fn at(after: Duration, source: HintSource, reading: Reading) -> Earliest {
            Earliest::At {
                after,
                source,
                reading,
            }
        }

        #[test]
        fn a_delay_is_exact() {
            assert_eq!(
                Policy::default().earliest(&unavailable(b"2")),
                at(secs(2), HintSource::RetryAfter, Reading::Delay)
            );
        }

        #[test]
        fn a_date_against_a_whole_second_date_is_a_second_sooner() {
            // Receipt is 08:49:37.000 on our clock; the server says it is 08:49:37 (anywhere
            // in [37, 38)) and asks for 08:49:39.
            let response = unavailable(b"Sun, 06 Nov 1994 08:49:39 GMT")
                .with_date(b"Sun, 06 Nov 1994 08:49:37 GMT");
            assert_eq!(
                Policy::default().earliest(&response),
                at(
                    secs(1),
                    HintSource::RetryAfter,
                    Reading::DateAgainstServer { age: false }
                )
            );
            // A client takes the strict end of the same interval.
            assert_eq!(
                Policy::default()
                    .decide(&response, &get(1))
                    .permitted
                    .expect("a hint")
                    .after,
                secs(2)
            );
        }

        #[test]
        fn an_age_counts_a_second_more() {
            let response = unavailable(b"Sun, 06 Nov 1994 08:49:49 GMT")
                .with_date(b"Sun, 06 Nov 1994 08:49:37 GMT")
                .with_age(b"5");
            assert_eq!(
                Policy::default().earliest(&response),
                at(
                    secs(5),
                    HintSource::RetryAfter,
                    Reading::DateAgainstServer { age: true }
                )
            );
        }

        #[test]
        fn without_date_the_local_clock_counts_with_the_dates_second() {
            assert_eq!(
                Policy::default().earliest(&unavailable(b"Sun, 06 Nov 1994 08:49:40 GMT")),
                at(secs(2), HintSource::RetryAfter, Reading::DateAgainstLocal)
            );
        }

        #[test]
        fn a_past_date_is_zero_not_negative() {
            let response = unavailable(b"Sun, 06 Nov 1994 08:49:37 GMT")
                .with_date(b"Sun, 06 Nov 1994 08:49:37 GMT");
            assert!(matches!(
                Policy::default().earliest(&response),
                Earliest::At {
                    after: Duration::ZERO,
                    ..
                }
            ));
        }

        #[test]
        fn retry_after_decides_over_resets_and_the_shortest_spelling_counts() {
            let h = headers(&[
                ("retry-after", "2"),
                ("retry-after-ms", "1500"),
                ("ratelimit-reset", "100"),
            ]);
            let response = ResponseInfo::from_headers(StatusCode::TOO_MANY_REQUESTS, &h, receipt());
            assert_eq!(
                Policy::default().earliest(&response),
                at(
                    Duration::from_millis(1500),
                    HintSource::RetryAfterMs,
                    Reading::Delay
                )
            );
        }

        #[test]
        fn resets_count_only_without_a_usable_retry_after() {
            let h = headers(&[("retry-after", "soon"), ("ratelimit-reset", "100")]);
            let response = ResponseInfo::from_headers(StatusCode::TOO_MANY_REQUESTS, &h, receipt());
            assert_eq!(
                Policy::default().earliest(&response),
                at(secs(100), HintSource::RateLimitReset, Reading::Reset)
            );
        }

        #[test]
        fn a_malformed_hint_is_malformed_and_none_is_absent() {
            assert_eq!(
                Policy::default().earliest(&unavailable(b"soon")),
                Earliest::Malformed {
                    source: HintSource::RetryAfter
                }
            );
            let h = headers(&[("retry-after-ms", "-1")]);
            let response = ResponseInfo::from_headers(StatusCode::TOO_MANY_REQUESTS, &h, receipt());
            assert_eq!(
                Policy::default().earliest(&response),
                Earliest::Malformed {
                    source: HintSource::RetryAfterMs
                }
            );
            let response = ResponseInfo::new(StatusCode::TOO_MANY_REQUESTS, receipt());
            assert_eq!(Policy::default().earliest(&response), Earliest::Absent);
        }
    }

    mod status_set {
        use super::*;

        #[test]
        fn holds_exactly_what_was_inserted() {
            let mut set = StatusSet::EMPTY;
            set.insert(StatusCode::from_u16(599).expect("valid"));
            set.insert(StatusCode::CONTINUE);
            assert!(set.contains(StatusCode::CONTINUE));
            assert!(set.contains(StatusCode::from_u16(599).expect("valid")));
            assert!(!set.contains(StatusCode::OK));
            set.remove(StatusCode::CONTINUE);
            assert!(!set.contains(StatusCode::CONTINUE));
            assert_eq!(
                format!("{:?}", StatusSet::default_retryable()),
                "{408, 429, 500, 502, 503, 504}"
            );
        }

        #[test]
        fn holds_every_code_http_accepts() {
            let mut set = StatusSet::EMPTY;
            for code in 100..=999 {
                let status = StatusCode::from_u16(code).expect("valid");
                assert!(!set.contains(status));
                set.insert(status);
                assert!(set.contains(status));
            }
        }
    }
}
