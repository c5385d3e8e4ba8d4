//! From what the judge recorded in one scenario's event log to its verdict: pure, no I/O.

use std::time::SystemTime;

use holdoff_proxy::judge::Verdict as Judged;
use holdoff_proxy::report::Event;
use serde::Serialize;

use super::scenarios::{Rule, min_backoff};

/// A scenario's verdict.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Verdict {
    /// The client did what the scenario asks.
    Pass,
    /// The client broke the scenario's rule.
    Fail,
    /// Allowed, but worth a look.
    Warn,
    /// Nothing was tested: no request reached the proxy, or none was throttled.
    NotApplicable,
}

impl Verdict {
    /// `pass`, `fail`, `warn` or `n/a`, as in the table.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Verdict::Pass => "pass",
            Verdict::Fail => "fail",
            Verdict::Warn => "warn",
            Verdict::NotApplicable => "n/a",
        }
    }
}

/// What the client did in one scenario, as measured, and the verdict on it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub(crate) struct Outcome {
    /// The verdict.
    pub(crate) verdict: Verdict,
    /// What the client did, e.g. `retried after 2.01 s`.
    pub(crate) did: String,
    /// Why the verdict, one sentence.
    pub(crate) why: String,
    /// Requests the proxy answered.
    pub(crate) requests: u64,
    /// Requests the judge saw under the throttle's window (retries).
    pub(crate) retries: usize,
    /// Seconds from the throttle to the first retry.
    pub(crate) first_retry_after_s: Option<f64>,
    /// The command's exit status, when it exited by itself.
    pub(crate) exit_code: Option<i32>,
    /// Whether the command was stopped at the scenario's time limit.
    pub(crate) timed_out: bool,
}

/// The verdict under `rule` on the events of one scenario's run; `timed_out` when the command
/// was stopped at the time limit.
pub(crate) fn judge(rule: Rule, events: &[Event], timed_out: bool) -> Outcome {
    let mut requests = 0;
    let mut exit_code = None;
    let mut throttled_at = None;
    let mut retries = Vec::new();
    for event in events {
        match event {
            Event::Finish {
                requests: count,
                exit_code: code,
                ..
            } => {
                requests = *count;
                exit_code = *code;
            }
            Event::Throttle { at, .. } if throttled_at.is_none() => throttled_at = Some(*at),
            Event::Retry {
                verdict,
                throttled_at: opened,
                retried_at,
                early_by_ms,
                idempotency_key,
                ..
            } => retries.push(Retried {
                verdict: *verdict,
                after: secs_between(*opened, *retried_at),
                early_by_ms: *early_by_ms,
                keyed: *idempotency_key,
            }),
            _ => {}
        }
    }
    let first_retry_after_s = retries.first().map(|retry| retry.after);
    let mut outcome = Outcome {
        verdict: Verdict::NotApplicable,
        did: String::new(),
        why: String::new(),
        requests,
        retries: retries.len(),
        first_retry_after_s,
        exit_code,
        timed_out,
    };
    let ended = match (timed_out, exit_code) {
        (true, _) => "stopped at the time limit".to_owned(),
        (false, Some(code)) => format!("exited {code}"),
        (false, None) => "ended by a signal".to_owned(),
    };
    if requests == 0 || throttled_at.is_none() {
        outcome.did = match requests {
            0 => format!("sent no request through the proxy, {ended}"),
            _ => format!("sent {requests} request(s), none throttled, {ended}"),
        };
        outcome.why = match (requests, rule) {
            (0, _) => "no request reached the proxy: nothing was tested".to_owned(),
            (_, Rule::Post) => "the client sent no POST: nothing was tested".to_owned(),
            _ => "no request was throttled: nothing was tested".to_owned(),
        };
        return outcome;
    }
    outcome.did = match first_retry_after_s {
        None if timed_out => "no retry before the time limit (stopped)".to_owned(),
        None => format!("gave up ({ended})"),
        Some(after) if retries.len() == 1 => format!("retried after {after:.2} s"),
        Some(after) => format!("retried {} times, first after {after:.2} s", retries.len()),
    };
    let broke = |wanted: &[Judged]| {
        retries
            .iter()
            .find(|retry| wanted.contains(&retry.verdict))
            .map(|retry| (retry.verdict, retry.after, retry.early_by_ms))
    };
    let (verdict, why) = match rule {
        Rule::Hint => match broke(&[Judged::Premature]) {
            Some((_, after, early)) => (Verdict::Fail, early_retry(after, early)),
            None if retries.is_empty() => (
                Verdict::Pass,
                "did not retry, so never before Retry-After permitted".to_owned(),
            ),
            None => (
                Verdict::Pass,
                "waited at least as long as Retry-After asked".to_owned(),
            ),
        },
        Rule::Malformed => match broke(&[Judged::ReadAsZero, Judged::Premature]) {
            Some((_, after, _)) => (
                Verdict::Fail,
                format!(
                    "retried {after:.3} s after a malformed Retry-After, sooner than the \
                     {} minimum backoff: it read the hint as zero",
                    min_backoff()
                ),
            ),
            None if retries.is_empty() && timed_out => (
                Verdict::Pass,
                "did not retry before the time limit, so never read the malformed hint as zero"
                    .to_owned(),
            ),
            None if retries.is_empty() => (
                Verdict::Pass,
                "gave up on a malformed Retry-After rather than read it as zero".to_owned(),
            ),
            None => (
                Verdict::Pass,
                format!(
                    "backed off at least {} after a malformed Retry-After",
                    min_backoff()
                ),
            ),
        },
        Rule::NoHint => match broke(&[Judged::NoBackoff, Judged::Premature]) {
            Some((_, after, _)) => (
                Verdict::Fail,
                format!(
                    "retried {after:.3} s after a 429 with no hint, sooner than the \
                     {} minimum backoff: no backoff at all",
                    min_backoff()
                ),
            ),
            None if retries.is_empty() => (
                Verdict::Pass,
                "did not retry a 429 without a hint".to_owned(),
            ),
            None => (
                Verdict::Pass,
                format!(
                    "backed off at least {} after a 429 with no hint",
                    min_backoff()
                ),
            ),
        },
        Rule::PastDate => match broke(&[Judged::Premature]) {
            Some((_, after, early)) => (Verdict::Fail, early_retry(after, early)),
            None if retries.is_empty() && timed_out => (
                Verdict::Warn,
                "was still waiting at the time limit, though a date in the past permits a \
                 retry at once"
                    .to_owned(),
            ),
            None if retries.is_empty() => (
                Verdict::Pass,
                "did not retry; a date in the past permitted it at once".to_owned(),
            ),
            None => (
                Verdict::Pass,
                "retried: a date in the past permits a retry at once".to_owned(),
            ),
        },
        Rule::Quota => match broke(&[Judged::NoBackoff, Judged::Premature]) {
            Some((_, after, _)) => (
                Verdict::Fail,
                format!(
                    "retried {after:.3} s after a quota 429, sooner than the {} minimum \
                     backoff",
                    min_backoff()
                ),
            ),
            None => match first_retry_after_s {
                Some(after) => (
                    Verdict::Warn,
                    format!(
                        "retried a quota 429 after {after:.2} s: the quota is used up, waiting \
                         won't help"
                    ),
                ),
                None => (
                    Verdict::Pass,
                    "did not retry a 429 for a used-up quota".to_owned(),
                ),
            },
        },
        Rule::Post => match broke(&[Judged::Premature]) {
            Some((_, after, early)) => (Verdict::Fail, early_retry(after, early)),
            None => match retries.iter().find(|retry| !retry.keyed) {
                Some(blind) => (
                    Verdict::Warn,
                    format!(
                        "repeated the POST {:.2} s later without an Idempotency-Key: a hint \
                         does not make a POST safe",
                        blind.after
                    ),
                ),
                None if retries.is_empty() => (
                    Verdict::Pass,
                    "did not repeat a POST it had no key for".to_owned(),
                ),
                None => (
                    Verdict::Pass,
                    "repeated the POST after the hint, with an Idempotency-Key".to_owned(),
                ),
            },
        },
    };
    outcome.verdict = verdict;
    outcome.why = why;
    outcome
}

/// A retry the judge saw, as the verdict needs it.
struct Retried {
    verdict: Judged,
    /// Seconds after the throttle.
    after: f64,
    early_by_ms: Option<f64>,
    /// Whether it carried an `Idempotency-Key`.
    keyed: bool,
}

/// Why a retry `after` seconds after the throttle, `early` ms before the permitted time, fails.
fn early_retry(after: f64, early: Option<f64>) -> String {
    format!(
        "retried {after:.2} s after the throttle, {} before Retry-After permitted",
        early.map_or_else(
            || "inside a window that never closes".to_owned(),
            |ms| format!("{:.2} s", ms / 1000.0)
        )
    )
}

/// Seconds from `from` to `to`, negative if `to` came first.
fn secs_between(from: SystemTime, to: SystemTime) -> f64 {
    match to.duration_since(from) {
        Ok(after) => after.as_secs_f64(),
        Err(err) => -err.duration().as_secs_f64(),
    }
}

/// A time `secs` after `base`, for tests.
#[cfg(test)]
fn at(base: SystemTime, secs: f64) -> SystemTime {
    base + std::time::Duration::from_secs_f64(secs)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::UNIX_EPOCH;

    const T0: SystemTime = UNIX_EPOCH;

    fn throttle() -> Event {
        serde_json::from_value(serde_json::json!({
            "event": "throttle", "at": "1970-01-01T00:00:00.000Z", "client": "127.0.0.1",
            "method": "GET", "url": "http://127.0.0.1:1/x", "status": 429,
            "permitted_at": "1970-01-01T00:00:02.000Z",
        }))
        .unwrap()
    }

    fn retry(verdict: &str, after: f64, early_ms: Option<f64>) -> Event {
        Event::Retry {
            verdict: serde_json::from_value(serde_json::json!(verdict)).unwrap(),
            client: "127.0.0.1".into(),
            user_agent: None,
            idempotency_key: false,
            method: "GET".into(),
            url: "http://127.0.0.1:1/x".into(),
            throttled_at: T0,
            permitted_at: Some(at(T0, 2.0)),
            retried_at: at(T0, after),
            early_by_ms: early_ms,
            late_by_ms: None,
        }
    }

    fn finish(requests: u64) -> Event {
        serde_json::from_value(serde_json::json!({
            "event": "finish", "at": "1970-01-01T00:00:05.000Z", "requests": requests,
            "exit_code": 0,
        }))
        .unwrap()
    }

    mod judge {
        use super::*;

        #[test]
        fn fails_a_retry_before_the_hint_and_says_how_early() {
            let events = [
                throttle(),
                retry("premature", 0.01, Some(1990.0)),
                finish(2),
            ];
            let outcome = judge(Rule::Hint, &events, false);
            assert_eq!(outcome.verdict, Verdict::Fail);
            assert_eq!(outcome.did, "retried after 0.01 s");
            assert!(outcome.why.contains("1.99 s before"), "{}", outcome.why);
        }

        #[test]
        fn passes_a_retry_after_the_hint_or_none() {
            let events = [throttle(), retry("compliant", 2.1, None), finish(2)];
            assert_eq!(judge(Rule::Hint, &events, false).verdict, Verdict::Pass);
            let gave_up = judge(Rule::Hint, &[throttle(), finish(1)], false);
            assert_eq!(gave_up.verdict, Verdict::Pass);
            assert_eq!(gave_up.did, "gave up (exited 0)");
        }

        #[test]
        fn fails_a_malformed_hint_read_as_zero_and_passes_a_backoff() {
            let zero = [
                throttle(),
                retry("read_as_zero", 0.01, Some(90.0)),
                finish(2),
            ];
            assert_eq!(judge(Rule::Malformed, &zero, false).verdict, Verdict::Fail);
            let backed = [throttle(), retry("compliant", 1.0, None), finish(2)];
            assert_eq!(
                judge(Rule::Malformed, &backed, false).verdict,
                Verdict::Pass
            );
        }

        #[test]
        fn fails_no_backoff_after_no_hint() {
            let events = [throttle(), retry("no_backoff", 0.01, Some(90.0)), finish(2)];
            assert_eq!(judge(Rule::NoHint, &events, false).verdict, Verdict::Fail);
        }

        #[test]
        fn warns_on_a_post_repeated_without_a_key_and_passes_one_with() {
            let keyed = |key: bool| {
                let mut event = retry("compliant", 1.2, None);
                if let Event::Retry {
                    idempotency_key, ..
                } = &mut event
                {
                    *idempotency_key = key;
                }
                event
            };
            let blind = judge(Rule::Post, &[throttle(), keyed(false), finish(2)], false);
            assert_eq!(blind.verdict, Verdict::Warn);
            assert!(
                blind.why.contains("without an Idempotency-Key"),
                "{}",
                blind.why
            );
            let safe = judge(Rule::Post, &[throttle(), keyed(true), finish(2)], false);
            assert_eq!(safe.verdict, Verdict::Pass);
            let early = [throttle(), retry("premature", 0.01, Some(990.0)), finish(2)];
            assert_eq!(judge(Rule::Post, &early, false).verdict, Verdict::Fail);
            let none = judge(Rule::Post, &[finish(1)], false);
            assert_eq!(none.verdict, Verdict::NotApplicable);
            assert_eq!(none.why, "the client sent no POST: nothing was tested");
        }

        #[test]
        fn warns_on_a_retried_quota_429_and_fails_one_without_backoff() {
            let retried = [throttle(), retry("compliant", 1.0, None), finish(2)];
            let outcome = judge(Rule::Quota, &retried, false);
            assert_eq!(outcome.verdict, Verdict::Warn);
            assert!(
                outcome.why.contains("waiting won't help"),
                "{}",
                outcome.why
            );
            let hammered = [throttle(), retry("no_backoff", 0.01, Some(90.0)), finish(2)];
            assert_eq!(judge(Rule::Quota, &hammered, false).verdict, Verdict::Fail);
            let gave_up = judge(Rule::Quota, &[throttle(), finish(1)], false);
            assert_eq!(gave_up.verdict, Verdict::Pass);
        }

        #[test]
        fn warns_when_a_past_date_is_still_waited_for_at_the_time_limit() {
            let waiting = judge(Rule::PastDate, &[throttle(), finish(1)], true);
            assert_eq!(waiting.verdict, Verdict::Warn);
            let retried = [throttle(), retry("compliant", 0.01, None), finish(2)];
            assert_eq!(
                judge(Rule::PastDate, &retried, false).verdict,
                Verdict::Pass
            );
            let gave_up = judge(Rule::PastDate, &[throttle(), finish(1)], false);
            assert_eq!(gave_up.verdict, Verdict::Pass);
        }

        #[test]
        fn counts_every_retry() {
            let events = [
                throttle(),
                retry("premature", 0.01, Some(1990.0)),
                retry("premature", 0.02, Some(1980.0)),
                finish(3),
            ];
            let outcome = judge(Rule::Hint, &events, false);
            assert_eq!(outcome.did, "retried 2 times, first after 0.01 s");
            assert_eq!(outcome.retries, 2);
        }

        #[test]
        fn is_not_applicable_without_traffic_never_a_pass() {
            let outcome = judge(Rule::Hint, &[finish(0)], false);
            assert_eq!(outcome.verdict, Verdict::NotApplicable);
            assert!(outcome.why.contains("nothing was tested"));
            let stopped = judge(Rule::Hint, &[throttle(), finish(1)], true);
            assert_eq!(stopped.did, "no retry before the time limit (stopped)");
        }
    }
}
