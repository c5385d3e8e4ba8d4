//! The explanation for people: a heading with the value, then aligned `label  text` rows.

use std::io::{self, Write};
use std::time::Duration;

use holdoff::{Decision, Earliest, HintForm, HintSource, Reason, Reference, Skew, StatusSet};
use http::StatusCode;

use super::{Explanation, rfc3339, rfc3339_unix};
use crate::duration::friendly;

/// Writes the explanation: the value, the decision, then the context it was made in.
pub(super) fn write(e: &Explanation<'_>, out: &mut impl Write) -> io::Result<()> {
    let groups = [value_rows(e), decision_rows(e), context_rows(e)];
    let width = groups
        .iter()
        .flatten()
        .map(|(label, _)| label.len())
        .max()
        .unwrap_or(0);
    writeln!(out, "Retry-After: {}", quoted(&e.inputs.raw))?;
    for group in &groups {
        writeln!(out)?;
        for (label, text) in group {
            writeln!(out, "  {label:width$}  {text}")?;
        }
    }
    Ok(())
}

type Rows = Vec<(&'static str, String)>;

/// What the value is, and when the server permits a retry.
fn value_rows(e: &Explanation<'_>) -> Rows {
    let mut rows = Rows::new();
    match e.verdict.diagnostics.hint {
        HintForm::Delay { delay, saturated } => {
            rows.push(("value", delay_value(delay, saturated)));
        }
        HintForm::Date(date) => {
            let format = match date.format() {
                holdoff::DateFormat::ImfFixdate => "IMF-fixdate, the preferred format".to_owned(),
                other => format!("{other}, an obsolete format senders must not generate"),
            };
            rows.push(("value", format!("an HTTP-date ({format})")));
            let when = rfc3339_unix(date.unix_seconds().into()).unwrap_or_default();
            rows.push(("date", format!("{when} (Unix {})", date.unix_seconds())));
        }
        HintForm::Malformed(kind) => {
            rows.push(("value", format!("malformed ({})", kind.as_str())));
            if let Some(error) = &e.error {
                rows.push(("error", error.to_string()));
            }
        }
        // `Absent`, and any form a later holdoff adds.
        _ => rows.push(("value", "none".to_owned())),
    }
    rows.push(("hint", hint(e)));
    if let Some(text) = decided_by(e) {
        rows.push(("decided by", text));
    }
    rows.push(("permitted", permitted(e)));
    if let Some(text) = judged(e) {
        rows.push(("judged", text));
    }
    rows
}

/// Which header decided, when the response had others that could have.
fn decided_by(e: &Explanation<'_>) -> Option<String> {
    if e.inputs.headers.is_empty() {
        return None;
    }
    let source = e.verdict.diagnostics.source?;
    Some(match source {
        HintSource::RetryAfter
        | HintSource::RetryAfterMs
        | HintSource::XMsRetryAfterMs
        | HintSource::XAmzRetryAfter => {
            format!(
                "{source}: Retry-After and its millisecond spellings take precedence over \
                 reset-style fields (the IETF RateLimit draft); the longest of them counts"
            )
        }
        _ => format!("{source}: no usable Retry-After was sent, so the reset decides"),
    })
}

/// When a judge (`holdoff proxy`) would call a retry early, when that differs from the
/// strict reading above: an HTTP-date's whole seconds, or several hints.
fn judged(e: &Explanation<'_>) -> Option<String> {
    let Earliest::At {
        after,
        source,
        reading,
    } = e.earliest
    else {
        return None;
    };
    if e.hint == Some(after) {
        return None;
    }
    Some(format!(
        "early only before {} after receipt, by {source}'s earliest reading: {}",
        friendly(after),
        reading.describe()
    ))
}

/// The decision, why, and what to do.
fn decision_rows(e: &Explanation<'_>) -> Rows {
    let decision = e.verdict.decision;
    let mut rows = vec![
        (
            "decision",
            format!("{} ({})", decision.action(), decision.reason()),
        ),
        ("why", why(e)),
    ];
    if matches!(decision, Decision::Retry { .. } | Decision::Defer(_)) {
        rows.push(("wait", arithmetic(e)));
    }
    rows.push(("do", advice(e)));
    rows
}

/// The request, the clocks, and the skew.
fn context_rows(e: &Explanation<'_>) -> Rows {
    let source = if e.inputs.now_given {
        "from --now"
    } else {
        "the real clock"
    };
    let received = rfc3339(e.inputs.receipt.wall).unwrap_or_else(|| "out of range".to_owned());
    let mut rows = vec![
        ("request", request(e)),
        (
            "received",
            format!("{received} (local wall clock, {source})"),
        ),
    ];
    if let Some(text) = reference(e) {
        rows.push(("reference", text));
    }
    rows.push(("skew", skew(e)));
    rows
}

/// The value as typed: bare when it reads unambiguously, else quoted with escapes.
fn quoted(raw: &[u8]) -> String {
    let plain = !raw.is_empty()
        && raw.iter().all(|b| b.is_ascii_graphic() || *b == b' ')
        && !raw.starts_with(b" ")
        && !raw.ends_with(b" ");
    if plain {
        return String::from_utf8_lossy(raw).into_owned();
    }
    let mut out = String::from("\"");
    for chunk in raw.utf8_chunks() {
        out.extend(chunk.valid().escape_debug());
        for byte in chunk.invalid() {
            out.push_str(&format!("\\x{byte:02x}"));
        }
    }
    out.push('"');
    out
}

fn delay_value(delay: Duration, saturated: bool) -> String {
    let secs = delay.as_secs();
    if saturated {
        format!(
            "delay-seconds, more than {secs} seconds: saturated upward to the largest \
             delay (a very long wait, never a short one)"
        )
    } else if secs == 1 {
        "delay-seconds: 1 second".to_owned()
    } else if secs < 60 {
        format!("delay-seconds: {secs} seconds")
    } else {
        format!("delay-seconds: {secs} seconds ({})", long(delay))
    }
}

/// `H` and where it came from.
fn hint(e: &Explanation<'_>) -> String {
    let diagnostics = &e.verdict.diagnostics;
    let Some(h) = e.hint else {
        return match diagnostics.hint {
            HintForm::Malformed(_) if diagnostics.dropped_malformed => {
                "none: the malformed value was dropped (--on-malformed fallback)".to_owned()
            }
            HintForm::Malformed(_) => "none: a malformed value is never read as zero".to_owned(),
            _ => "none".to_owned(),
        };
    };
    let HintForm::Date(date) = diagnostics.hint else {
        return format!("{} after receipt", long(h));
    };
    let (clock, reference_unix_nanos) = match (diagnostics.reference, e.server_clock()) {
        (Reference::ServerDate, Some(server)) => ("the server's clock", server * 1_000_000_000),
        _ => (
            "the local clock at receipt",
            unix_nanos(e.inputs.receipt.wall),
        ),
    };
    let offset = i128::from(date.unix_seconds()) * 1_000_000_000 - reference_unix_nanos;
    let distance = friendly(nanos_to_duration(offset.unsigned_abs()));
    if diagnostics.clamped_past {
        format!("0s: the date is {distance} before {clock}, so it is clamped to zero")
    } else {
        format!("{}: the date is {distance} after {clock}", long(h))
    }
}

/// When the server permits the next request (receipt + `H`).
fn permitted(e: &Explanation<'_>) -> String {
    let (Some(permitted), Some(_)) = (e.verdict.permitted, e.hint) else {
        return match e.verdict.diagnostics.hint {
            HintForm::Malformed(_) => {
                "unknown: the server's value is malformed, so it sets no time".to_owned()
            }
            _ => "at any time: the server set no earliest time".to_owned(),
        };
    };
    let wall = permitted.wall.and_then(rfc3339);
    match (permitted.at, wall) {
        (Some(_), Some(wall)) if permitted.after.is_zero() => format!("now, at {wall}"),
        (Some(_), Some(wall)) => format!("in {}, at {wall}", friendly(permitted.after)),
        _ => format!(
            "in {}, beyond the range of this machine's clocks",
            friendly(permitted.after)
        ),
    }
}

/// The decision in one sentence.
fn why(e: &Explanation<'_>) -> String {
    let inputs = e.inputs;
    let status = status_name(inputs.status);
    let after_receipt = match e.hint {
        Some(h) => format!("a retry is permitted {} after receipt", friendly(h)),
        None => "the server set no earliest time".to_owned(),
    };
    match e.verdict.decision.reason() {
        Reason::Success => format!(
            "{status} is a success; there is nothing to retry, and a Retry-After on a \
             success is noted but not used"
        ),
        Reason::Redirect => {
            let when = match e.verdict.decision.wait() {
                Some(wait) if !wait.is_zero() => {
                    format!("once the hint has passed, in {}", friendly(wait))
                }
                _ => "now: the hint sets no wait".to_owned(),
            };
            format!("{status} is a redirect (a Location is assumed); follow it {when}")
        }
        Reason::Retryable => {
            let mut text = match e.hint {
                Some(h) if h >= inputs.backoff => format!(
                    "the server asks for {}, {} the local backoff of {}, so the hint sets the \
                     wait",
                    friendly(h),
                    if h == inputs.backoff {
                        "as long as"
                    } else {
                        "longer than"
                    },
                    friendly(inputs.backoff)
                ),
                Some(h) => format!(
                    "the local backoff of {} is longer than the server's hint of {}, so the \
                     backoff sets the wait",
                    friendly(inputs.backoff),
                    friendly(h)
                ),
                None => format!(
                    "{}, so the local backoff of {} sets the wait",
                    no_hint(e),
                    friendly(inputs.backoff)
                ),
            };
            if !inputs.jitter.is_zero() {
                text.push_str(&format!(", plus {} of jitter", friendly(inputs.jitter)));
            }
            if let Some(left) = inputs.remaining {
                text.push_str(&format!("; it fits in the {} remaining", friendly(left)));
            }
            text
        }
        Reason::DeadlineExceeded => {
            let left = friendly(inputs.remaining.unwrap_or_default());
            match e.hint {
                Some(h) if h == e.wait => {
                    format!(
                        "the server asks for {} but only {left} remain before the deadline; \
                         {after_receipt}",
                        friendly(h)
                    )
                }
                _ => format!(
                    "the wait of {} does not fit in the {left} remaining before the deadline; \
                     {after_receipt}",
                    friendly(e.wait)
                ),
            }
        }
        Reason::HintExceedsMaxWait => format!(
            "the server asks for {}, more than the --max-wait of {}; the hint is never capped, \
             so the task is deferred; {after_receipt}",
            friendly(e.hint.unwrap_or_default()),
            friendly(inputs.max_wait.unwrap_or_default()),
        ),
        Reason::BeyondClockRange => format!(
            "a wait of {} goes beyond the range of this machine's monotonic clock; it is \
             never shortened, so the task is deferred",
            friendly(e.wait)
        ),
        Reason::StatusNotRetryable => format!(
            "{status} is not a status the policy retries ({}); a Retry-After grants no \
             permission",
            retryable_statuses()
        ),
        Reason::NonIdempotent => format!(
            "{} is not idempotent and the request is not marked safe to repeat; a \
             Retry-After does not make it safe",
            inputs.method
        ),
        Reason::AttemptsExhausted => format!(
            "attempt {} was the last of {}; a Retry-After adds no attempts",
            inputs.attempt.number, inputs.attempt.max
        ),
        Reason::QuotaExhausted => {
            "the 429 says the quota is spent; waiting will not help".to_owned()
        }
        Reason::MalformedRetryAfter => "the value is malformed and --on-malformed is error; \
                                         a malformed hint is never read as zero"
            .to_owned(),
        other => other.to_string(),
    }
}

/// Why there is no hint, for a decision that went on without one.
fn no_hint(e: &Explanation<'_>) -> &'static str {
    if e.verdict.diagnostics.dropped_malformed {
        "the malformed value was dropped (--on-malformed fallback)"
    } else {
        "there is no usable hint"
    }
}

/// `max(H, B) + j = wait`.
fn arithmetic(e: &Explanation<'_>) -> String {
    let hint = match e.hint {
        Some(h) => format!("hint {}", friendly(h)),
        None => "no hint".to_owned(),
    };
    let backoff = if e.inputs.backoff_is_default {
        format!(
            "backoff {} (default for attempt {})",
            friendly(e.inputs.backoff),
            e.inputs.attempt.number
        )
    } else {
        format!("backoff {}", friendly(e.inputs.backoff))
    };
    format!(
        "max({hint}, {backoff}) + jitter {} = {}",
        friendly(e.inputs.jitter),
        friendly(e.wait)
    )
}

/// What a client should do now.
fn advice(e: &Explanation<'_>) -> String {
    let inputs = e.inputs;
    let requeue = || match e.verdict.permitted {
        Some(permitted) => match (permitted.at, permitted.wall.and_then(rfc3339)) {
            (Some(_), Some(at)) => {
                format!("re-queue the task for {at} or later; do not retry before then")
            }
            _ => "park the task: no clock here can count that far; do not retry early".to_owned(),
        },
        None => "re-queue the task with more time; the server set no earliest time".to_owned(),
    };
    match e.verdict.decision {
        Decision::Done => "nothing: the request succeeded".to_owned(),
        Decision::FollowRedirect { wait, .. } => match e.wall_after(wait) {
            Some(at) if !wait.is_zero() => {
                format!("follow the Location in {}, at {at}", friendly(wait))
            }
            _ => "follow the Location now".to_owned(),
        },
        Decision::Retry { wait, .. } => match e.wall_after(wait) {
            Some(at) => format!("retry in {}, at {at}", friendly(wait)),
            None => format!("retry in {}", friendly(wait)),
        },
        Decision::Defer(_) => requeue(),
        Decision::GiveUp(_) => match e.verdict.decision.reason() {
            Reason::StatusNotRetryable => format!(
                "do not retry; report the {} to the caller",
                status_name(inputs.status)
            ),
            Reason::NonIdempotent => "do not retry automatically; if the request is safe to \
                                      repeat (e.g. it carries an Idempotency-Key), mark it so \
                                      (--idempotent)"
                .to_owned(),
            Reason::AttemptsExhausted => match e.verdict.permitted.and_then(|p| p.wall) {
                Some(at) if let Some(at) = rfc3339(at) => format!(
                    "stop and report the failure; a new task may run from {at}, when the server \
                     permits it"
                ),
                _ => "stop and report the failure".to_owned(),
            },
            _ => "do not retry; report the failure".to_owned(),
        },
        Decision::Malformed(_) => "do not retry at once: report the server's bad header, or \
                                   drop the hint and fall back to the local backoff \
                                   (--on-malformed fallback)"
            .to_owned(),
        _ => "see the decision above".to_owned(),
    }
}

fn request(e: &Explanation<'_>) -> String {
    let inputs = e.inputs;
    let method = &inputs.method;
    let safety = match (method.is_idempotent(), inputs.repeat_safe) {
        (true, _) => "idempotent",
        (false, true) => "not idempotent, marked safe to repeat",
        (false, false) => "not idempotent",
    };
    format!(
        "{method} ({safety}), attempt {} of {}, got {}",
        inputs.attempt.number,
        inputs.attempt.max,
        status_name(inputs.status)
    )
}

/// Whose clock a date hint is measured against; `None` when that does not matter.
fn reference(e: &Explanation<'_>) -> Option<String> {
    match e.verdict.diagnostics.hint {
        HintForm::Date(_) => {}
        HintForm::Delay { .. } => {
            return Some("none needed: delay-seconds count from receipt".to_owned());
        }
        _ => return None,
    }
    match (
        e.verdict.diagnostics.reference,
        &e.inputs.date,
        e.server_clock(),
    ) {
        (Reference::ServerDate, Some((raw, _)), Some(server)) => {
            let server = rfc3339_unix(server).unwrap_or_else(|| "out of range".to_owned());
            Some(match &e.inputs.age {
                Some((age, _)) => format!(
                    "the server's clock: Date {raw} + Age {} = {server}",
                    friendly(Duration::from_secs(*age))
                ),
                None => format!("the server's clock: Date {raw} ({server})"),
            })
        }
        _ => Some("the local wall clock at receipt (no --date given)".to_owned()),
    }
}

fn skew(e: &Explanation<'_>) -> String {
    match e.verdict.diagnostics.skew {
        Some(Skew::Ahead(d)) if d.is_zero() => {
            "none: the server's clock agrees with ours".to_owned()
        }
        Some(Skew::Ahead(d)) => format!("the server's clock is {} ahead of ours", friendly(d)),
        Some(Skew::Behind(d)) => format!("the server's clock is {} behind ours", friendly(d)),
        None if e.inputs.age.is_some() => {
            "unknown: no --date given (--age is only used with it)".to_owned()
        }
        None => "unknown: no --date given".to_owned(),
    }
}

/// [`friendly`], with the number of years when that is hard to see (`213503982334601d7h15s`).
fn long(duration: Duration) -> String {
    const SECS_PER_YEAR: u64 = 31_556_952; // 365.2425 days
    let years = duration.as_secs() / SECS_PER_YEAR;
    if years == 0 {
        friendly(duration)
    } else {
        format!("{} (about {years} years)", friendly(duration))
    }
}

/// `503 Service Unavailable`, or just `599` when the code has no name. RFC 9110's reason
/// phrases, where they renamed what the `http` crate still calls by RFC 7231's names.
fn status_name(status: StatusCode) -> String {
    let rfc9110 = match status.as_u16() {
        413 => Some("Content Too Large"),
        422 => Some("Unprocessable Content"),
        _ => status.canonical_reason(),
    };
    match rfc9110 {
        Some(reason) => format!("{} {reason}", status.as_u16()),
        None => status.as_u16().to_string(),
    }
}

/// The statuses the default policy retries, e.g. `408, 429, 500, 502, 503, 504`.
fn retryable_statuses() -> String {
    let set = StatusSet::default_retryable();
    (100..600)
        .filter_map(|code| StatusCode::from_u16(code).ok())
        .filter(|status| set.contains(*status))
        .map(|status| status.as_u16().to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

fn unix_nanos(time: std::time::SystemTime) -> i128 {
    match time.duration_since(std::time::UNIX_EPOCH) {
        Ok(after) => after.as_nanos() as i128,
        Err(before) => -(before.duration().as_nanos() as i128),
    }
}

fn nanos_to_duration(nanos: u128) -> Duration {
    let secs = u64::try_from(nanos / 1_000_000_000).unwrap_or(u64::MAX);
    Duration::new(secs, (nanos % 1_000_000_000) as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    mod quoted {
        use super::*;

        #[test]
        fn leaves_plain_values_bare() {
            assert_eq!(quoted(b"120"), "120");
            assert_eq!(
                quoted(b"Sun, 06 Nov 1994 08:49:37 GMT"),
                "Sun, 06 Nov 1994 08:49:37 GMT"
            );
        }

        #[test]
        fn quotes_what_would_otherwise_be_invisible() {
            assert_eq!(quoted(b""), "\"\"");
            assert_eq!(quoted(b" 120\t"), "\" 120\\t\"");
            assert_eq!(quoted(b"12\xff"), "\"12\\xff\"");
            assert_eq!(quoted("１２０".as_bytes()), "\"１２０\"");
        }
    }

    mod retryable_statuses {
        use super::*;

        #[test]
        fn lists_the_default_policy() {
            assert_eq!(retryable_statuses(), "408, 429, 500, 502, 503, 504");
        }
    }
}
