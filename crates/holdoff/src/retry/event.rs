//! One attempt, as the loop and the tower and reqwest integrations report it: to a
//! [`Retrier::on_attempt`](super::Retrier::on_attempt) observer and to `tracing`.

use http::StatusCode;

use crate::decision::{Decision, Permitted, Verdict};

/// One attempt, as reported to [`Retrier::on_attempt`](super::Retrier::on_attempt) (and to
/// `tracing`).
#[derive(Clone, Copy, Debug)]
#[non_exhaustive]
pub struct AttemptEvent<'a> {
    /// Which attempt, from 1.
    pub number: u32,
    /// The response status, or `None` for a transport error.
    pub status: Option<StatusCode>,
    /// What was decided.
    pub decision: Decision,
    /// When the server permits the next request; `None` when it named no time.
    pub permitted: Option<Permitted>,
    /// The full verdict, for a response.
    pub verdict: Option<&'a Verdict<'a>>,
}

impl<'a> AttemptEvent<'a> {
    /// Attempt `number` got `status` (or a transport error) and `decision`.
    pub fn new(
        number: u32,
        status: Option<StatusCode>,
        decision: Decision,
        permitted: Option<Permitted>,
    ) -> Self {
        AttemptEvent {
            number,
            status,
            decision,
            permitted,
            verdict: None,
        }
    }

    /// The same event with the verdict behind it.
    pub fn with_verdict(self, verdict: &'a Verdict<'a>) -> Self {
        AttemptEvent {
            verdict: Some(verdict),
            ..self
        }
    }
}

/// Emits the `tracing` event (`holdoff attempt`, level INFO) that every judged attempt gets,
/// in the loop and in the tower and reqwest integrations alike.
pub fn trace_attempt(event: &AttemptEvent<'_>) {
    let diagnostics = event.verdict.map(|v| v.diagnostics);
    tracing::info!(
        attempt = event.number,
        status = event.status.map(|s| s.as_u16()),
        action = event.decision.action(),
        reason = event.decision.reason().as_str(),
        wait_ms = event.decision.wait().map(|w| w.as_millis() as u64),
        permitted_in_ms = event.permitted.map(|p| p.after.as_millis() as u64),
        hint_source = diagnostics.and_then(|d| d.source).map(|s| s.header_name()),
        skew_s = diagnostics.and_then(|d| d.skew).map(|s| s.as_secs_i64()),
        "holdoff attempt"
    );
}
