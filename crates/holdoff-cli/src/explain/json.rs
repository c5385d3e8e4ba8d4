//! The explanation for scripts: exactly one JSON object on one line.
//!
//! The keys of `input`, `hint`, `decision` and `diagnostics` are fixed; more may be added.

use std::borrow::Cow;
use std::io::{self, Write};

use holdoff::{HintForm, OnMalformed};
use serde::Serialize;

use super::{Explanation, millis, rfc3339, rfc3339_unix};

#[derive(Serialize)]
struct Report<'a> {
    /// The raw value (lossy UTF-8).
    input: Cow<'a, str>,
    hint: Hint,
    decision: DecisionOut,
    diagnostics: DiagnosticsOut,
    /// The assumptions the decision was made under.
    request: RequestOut,
}

#[derive(Serialize)]
#[serde(tag = "form", rename_all = "snake_case")]
enum Hint {
    Delay {
        /// Saturated at `u64::MAX` when the value was larger.
        seconds: u64,
        saturated: bool,
    },
    Date {
        unix: i64,
        format: &'static str,
        /// The same instant in RFC 3339.
        date: Option<String>,
    },
    Invalid {
        error: String,
        error_kind: &'static str,
    },
    Absent,
}

#[derive(Serialize)]
struct DecisionOut {
    action: &'static str,
    reason: &'static str,
    /// For `retry` and `follow_redirect`.
    wait_ms: Option<u64>,
    /// Receipt + `wait_ms` on the wall clock.
    wait_until: Option<String>,
    /// `H`: null when the retry time cannot be represented.
    permitted_in_ms: Option<u64>,
    /// Receipt + `H` on the wall clock.
    permitted_at: Option<String>,
}

#[derive(Serialize)]
struct DiagnosticsOut {
    reference: &'static str,
    /// Server clock (`Date + Age`) minus local clock, in whole seconds.
    skew_s: Option<i64>,
    clamped_past: bool,
    dropped_malformed: bool,
    /// `H`, null when there was no usable hint (or it does not fit).
    hint_ms: Option<u64>,
    backoff_ms: Option<u64>,
    jitter_ms: Option<u64>,
    /// `max(H, B) + j`, also when the decision did not get that far.
    computed_wait_ms: Option<u64>,
    /// `Date + Age` in RFC 3339, when `--date` was given.
    server_clock: Option<String>,
}

#[derive(Serialize)]
struct RequestOut {
    status: u16,
    method: String,
    idempotent: bool,
    repeat_safe: bool,
    attempt: u32,
    max_attempts: u32,
    remaining_ms: Option<u64>,
    max_wait_ms: Option<u64>,
    on_malformed: &'static str,
    /// The local wall clock at receipt.
    received_at: Option<String>,
    date: Option<String>,
    age_s: Option<u64>,
}

/// Writes the report and a newline.
pub(super) fn write(e: &Explanation<'_>, out: &mut impl Write) -> io::Result<()> {
    serde_json::to_writer(&mut *out, &report(e)).map_err(io::Error::from)?;
    writeln!(out)
}

fn report<'a>(e: &Explanation<'a>) -> Report<'a> {
    let inputs = e.inputs;
    let verdict = &e.verdict;
    let diagnostics = &verdict.diagnostics;
    let hint = match diagnostics.hint {
        HintForm::Delay { delay, saturated } => Hint::Delay {
            seconds: delay.as_secs(),
            saturated,
        },
        HintForm::Date(date) => Hint::Date {
            unix: date.unix_seconds(),
            format: date.format().as_str(),
            date: rfc3339_unix(date.unix_seconds().into()),
        },
        HintForm::Malformed(kind) => Hint::Invalid {
            error: e
                .error
                .as_ref()
                .map_or_else(|| kind.as_str().to_owned(), ToString::to_string),
            error_kind: kind.as_str(),
        },
        // `Absent`, and any form a later holdoff adds.
        _ => Hint::Absent,
    };
    let wait = verdict.decision.wait();
    let permitted = verdict.permitted;
    let decision = DecisionOut {
        action: verdict.decision.action(),
        reason: verdict.decision.reason().as_str(),
        wait_ms: wait.and_then(millis),
        wait_until: wait.and_then(|w| e.wall_after(w)),
        permitted_in_ms: permitted.and_then(|p| p.at.and(millis(p.after))),
        permitted_at: permitted.and_then(|p| p.wall).and_then(rfc3339),
    };
    let diagnostics = DiagnosticsOut {
        reference: diagnostics.reference.as_str(),
        skew_s: diagnostics.skew.map(holdoff::Skew::as_secs_i64),
        clamped_past: diagnostics.clamped_past,
        dropped_malformed: diagnostics.dropped_malformed,
        hint_ms: e.hint.and_then(millis),
        backoff_ms: millis(inputs.backoff),
        jitter_ms: millis(inputs.jitter),
        computed_wait_ms: millis(e.wait),
        server_clock: e.server_clock().and_then(rfc3339_unix),
    };
    let request = RequestOut {
        status: inputs.status.as_u16(),
        method: inputs.method.to_string(),
        idempotent: inputs.method.is_idempotent(),
        repeat_safe: inputs.repeat_safe,
        attempt: inputs.attempt.number,
        max_attempts: inputs.attempt.max,
        remaining_ms: inputs.remaining.and_then(millis),
        max_wait_ms: inputs.max_wait.and_then(millis),
        on_malformed: match inputs.on_malformed {
            OnMalformed::Error => "error",
            OnMalformed::Fallback => "fallback",
        },
        received_at: rfc3339(inputs.receipt.wall),
        date: inputs.date.as_ref().map(|(raw, _)| raw.clone()),
        age_s: inputs.age.as_ref().map(|(age, _)| *age),
    };
    Report {
        input: String::from_utf8_lossy(&inputs.raw),
        hint,
        decision,
        diagnostics,
        request,
    }
}
