//! From what the judge recorded in one scenario's event log to its verdict: pure, no I/O.

use std::time::SystemTime;

use holdoff_proxy::judge::Verdict as Judged;
use holdoff_proxy::report::{Event, RESUME_SPREAD};
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
    /// What a fail or warn says about the client, short, for the summary: scenarios with the
    /// same finding are named together.
    pub(crate) finding: Option<String>,
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

/// The verdict under `rule` on the events of one scenario's run; `hint` is the wait the
/// scenario asked for, in seconds, where the rule explains with it; `timed_out` when the
/// command was stopped at the time limit.
pub(crate) fn judge(rule: Rule, hint: Option<u64>, events: &[Event], timed_out: bool) -> Outcome {
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
        finding: None,
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
            .map(|retry| (retry.after, retry.early_by_ms))
    };
    let early = "retries before Retry-After permits";
    let zero_backoff = |after: f64, what: &str| {
        format!(
            "retried {after:.3} s after {what}, sooner than the {} minimum backoff",
            min_backoff()
        )
    };
    let (verdict, why, finding) = match rule {
        Rule::Hint => match broke(&[Judged::Premature]) {
            Some((after, by)) => (
                Verdict::Fail,
                early_retry(after, by),
                Some(early.to_owned()),
            ),
            None if retries.is_empty() => {
                pass("did not retry, so never before Retry-After permitted")
            }
            None => pass("waited at least as long as Retry-After asked"),
        },
        Rule::Skew => match broke(&[Judged::Premature]) {
            Some((after, by)) => (
                Verdict::Fail,
                format!(
                    "{} by the server's clock, an hour behind: what a client does that \
                     measures the date against its own clock instead of the response's Date",
                    early_retry(after, by)
                ),
                Some("ignores the server's Date (measures dates by its own clock)".to_owned()),
            ),
            None if retries.is_empty() && timed_out => (
                Verdict::Warn,
                "was still waiting at the time limit, though the date was 3 s after the \
                 server's Date: by its own clock the date is an hour past, and it read that \
                 as a long wait"
                    .to_owned(),
                Some("reads a past date as a long wait".to_owned()),
            ),
            None if retries.is_empty() => {
                pass("did not retry, so never before Retry-After permitted")
            }
            None => pass("waited as long as the date asked by the server's own clock (its Date)"),
        },
        Rule::Millis => match (broke(&[Judged::Premature]), first_retry_after_s) {
            (Some((after, by)), _) => (
                Verdict::Fail,
                early_retry(after, by),
                Some(early.to_owned()),
            ),
            (None, None) => pass("did not retry, so never before either hint permitted"),
            (None, Some(after)) if hint.is_some_and(|secs| after >= secs as f64) => pass(format!(
                "waited {after:.2} s: Retry-After's {} s, the longer of the two hints",
                hint.unwrap_or_default()
            )),
            (None, Some(after)) => pass(format!(
                "waited {after:.2} s: retry-after-ms's 1.5 s, not Retry-After's {} s (both \
                 are the server's)",
                hint.unwrap_or_default()
            )),
        },
        Rule::Malformed => match broke(&[Judged::ReadAsZero, Judged::Premature]) {
            Some((after, _)) => (
                Verdict::Fail,
                format!(
                    "{}: it read the hint as zero",
                    zero_backoff(after, "a malformed Retry-After")
                ),
                Some("reads a malformed Retry-After as zero".to_owned()),
            ),
            None if retries.is_empty() && timed_out => (
                Verdict::Warn,
                "did not retry before the time limit: it neither backed off nor gave up, but \
                 waits on a hint it should have rejected"
                    .to_owned(),
                Some("waits on a malformed Retry-After".to_owned()),
            ),
            None if retries.is_empty() => {
                pass("gave up on a malformed Retry-After rather than read it as zero")
            }
            None => pass(format!(
                "backed off at least {} after a malformed Retry-After",
                min_backoff()
            )),
        },
        Rule::NoHint => match broke(&[Judged::NoBackoff, Judged::Premature]) {
            Some((after, _)) => (
                Verdict::Fail,
                format!(
                    "{}: no backoff at all",
                    zero_backoff(after, "a 429 with no hint")
                ),
                Some("does not back off without a hint".to_owned()),
            ),
            None if retries.is_empty() => pass("did not retry a 429 without a hint"),
            None => pass(format!(
                "backed off at least {} after a 429 with no hint",
                min_backoff()
            )),
        },
        Rule::PastDate => match broke(&[Judged::Premature]) {
            Some((after, by)) => (
                Verdict::Fail,
                early_retry(after, by),
                Some(early.to_owned()),
            ),
            None if retries.is_empty() && timed_out => (
                Verdict::Warn,
                "was still waiting at the time limit, though a date in the past permits a \
                 retry at once"
                    .to_owned(),
                Some("reads a past date as a long wait".to_owned()),
            ),
            None if retries.is_empty() => {
                pass("did not retry; a date in the past permitted it at once")
            }
            None => pass("retried: a date in the past permits a retry at once"),
        },
        Rule::Quota => match broke(&[Judged::NoBackoff, Judged::Premature]) {
            Some((after, _)) => (
                Verdict::Fail,
                zero_backoff(after, "a quota 429"),
                Some("hammers a used-up quota".to_owned()),
            ),
            None => match first_retry_after_s {
                Some(after) => (
                    Verdict::Warn,
                    format!(
                        "retried a quota 429 after {after:.2} s: the quota is used up, waiting \
                         won't help"
                    ),
                    Some("retries a used-up quota".to_owned()),
                ),
                None => pass("did not retry a 429 for a used-up quota"),
            },
        },
        Rule::Post => match broke(&[Judged::Premature]) {
            Some((after, by)) => (
                Verdict::Fail,
                early_retry(after, by),
                Some(early.to_owned()),
            ),
            None => match retries.iter().find(|retry| !retry.keyed) {
                Some(blind) => (
                    Verdict::Warn,
                    format!(
                        "repeated the POST {:.2} s later without an Idempotency-Key: a hint \
                         does not make a POST safe",
                        blind.after
                    ),
                    Some("repeats a POST without an Idempotency-Key".to_owned()),
                ),
                None if retries.is_empty() => pass("did not repeat a POST it had no key for"),
                None => pass("repeated the POST after the hint, with an Idempotency-Key"),
            },
        },
        Rule::Long | Rule::Hour => match broke(&[Judged::Premature]) {
            // Sooner than a third of the hint is no cap, but a backoff that never read it
            // (the caps of real SDKs, 60 s and 120 s, are a third of 150 s or more).
            Some((after, by)) if after < hint.unwrap_or_default() as f64 / 3.0 => (
                Verdict::Fail,
                early_retry(after, by),
                Some(early.to_owned()),
            ),
            Some((after, by)) => (
                Verdict::Fail,
                format!(
                    "{}: it caps a {} s hint at about {after:.0} s",
                    early_retry(after, by),
                    hint.unwrap_or_default()
                ),
                Some(format!("caps long hints at about {after:.0} s")),
            ),
            None if rule == Rule::Hour && retries.is_empty() && timed_out => (
                Verdict::Warn,
                format!(
                    "still waiting when stopped: waiting out a {} s hint blocks the task; give \
                     up or defer it",
                    hint.unwrap_or_default()
                ),
                Some("waits out an hour's hint, blocking the task".to_owned()),
            ),
            None if retries.is_empty() && timed_out => {
                pass("was still waiting for the hint when stopped, never retrying before it")
            }
            None if retries.is_empty() => pass("gave up rather than retry before the hint"),
            None => pass("waited the whole hint, uncapped"),
        },
    };
    outcome.verdict = verdict;
    outcome.why = why;
    outcome.finding = finding;
    outcome
}

/// A pass, and why.
fn pass(why: impl Into<String>) -> (Verdict, String, Option<String>) {
    (Verdict::Pass, why.into(), None)
}

/// The verdict on `copies` of one scenario run at once (`--parallel`): the worst copy's, and
/// a warning when they all came back the same time after their throttles — clients told to
/// back off together that return in lockstep are a herd, for want of jitter.
pub(crate) fn herd(copies: Vec<Outcome>) -> Outcome {
    let count = copies.len();
    let rank = |verdict| match verdict {
        Verdict::Fail => 3,
        Verdict::Warn => 2,
        Verdict::Pass => 1,
        Verdict::NotApplicable => 0,
    };
    let waits: Vec<f64> = copies
        .iter()
        .filter_map(|copy| copy.first_retry_after_s)
        .collect();
    let mut worst = copies
        .into_iter()
        .max_by_key(|copy| rank(copy.verdict))
        .unwrap_or_else(|| judge(Rule::NoHint, None, &[], false));
    if count < 2 {
        return worst;
    }
    let (least, most) = waits.iter().fold((f64::MAX, f64::MIN), |(lo, hi), &wait| {
        (lo.min(wait), hi.max(wait))
    });
    if waits.len() >= 2 {
        worst.did = format!(
            "{count} copies; {} retried after {least:.2}–{most:.2} s",
            waits.len()
        );
    } else {
        worst.did = format!("{count} copies; {}", worst.did);
    }
    let spread = most - least;
    if worst.verdict == Verdict::Pass && waits.len() >= 2 && spread < lockstep(least) {
        worst.verdict = Verdict::Warn;
        worst.why = format!(
            "{} copies throttled together came back {:.0} ms apart: a herd, for want of \
             jitter in the backoff",
            waits.len(),
            spread * 1000.0
        );
        worst.finding = Some("backs off in lockstep (no jitter)".to_owned());
    }
    worst
}

/// How close copies' waits of at least `least` seconds must be to be in lockstep: the judge's
/// herd spread, or 5% of the wait when that is more. Each copy's wait is measured from its own
/// throttle, so how far apart the copies started does not count; what does is the scheduler's
/// noise on a loaded machine (tens of ms on a 1 s sleep), which is not jitter — a backoff
/// jittered by under 5% still brings the herd back together.
fn lockstep(least: f64) -> f64 {
    RESUME_SPREAD.as_secs_f64().max(least * 0.05)
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
            let outcome = judge(Rule::Hint, None, &events, false);
            assert_eq!(outcome.verdict, Verdict::Fail);
            assert_eq!(outcome.did, "retried after 0.01 s");
            assert!(outcome.why.contains("1.99 s before"), "{}", outcome.why);
        }

        #[test]
        fn passes_a_retry_after_the_hint_or_none() {
            let events = [throttle(), retry("compliant", 2.1, None), finish(2)];
            assert_eq!(
                judge(Rule::Hint, None, &events, false).verdict,
                Verdict::Pass
            );
            let gave_up = judge(Rule::Hint, None, &[throttle(), finish(1)], false);
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
            assert_eq!(
                judge(Rule::Malformed, None, &zero, false).verdict,
                Verdict::Fail
            );
            let backed = [throttle(), retry("compliant", 1.0, None), finish(2)];
            assert_eq!(
                judge(Rule::Malformed, None, &backed, false).verdict,
                Verdict::Pass
            );
        }

        #[test]
        fn fails_no_backoff_after_no_hint() {
            let events = [throttle(), retry("no_backoff", 0.01, Some(90.0)), finish(2)];
            assert_eq!(
                judge(Rule::NoHint, None, &events, false).verdict,
                Verdict::Fail
            );
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
            let blind = judge(
                Rule::Post,
                None,
                &[throttle(), keyed(false), finish(2)],
                false,
            );
            assert_eq!(blind.verdict, Verdict::Warn);
            assert!(
                blind.why.contains("without an Idempotency-Key"),
                "{}",
                blind.why
            );
            let safe = judge(
                Rule::Post,
                None,
                &[throttle(), keyed(true), finish(2)],
                false,
            );
            assert_eq!(safe.verdict, Verdict::Pass);
            let early = [throttle(), retry("premature", 0.01, Some(990.0)), finish(2)];
            assert_eq!(
                judge(Rule::Post, None, &early, false).verdict,
                Verdict::Fail
            );
            let none = judge(Rule::Post, None, &[finish(1)], false);
            assert_eq!(none.verdict, Verdict::NotApplicable);
            assert_eq!(none.why, "the client sent no POST: nothing was tested");
        }

        #[test]
        fn warns_on_a_retried_quota_429_and_fails_one_without_backoff() {
            let retried = [throttle(), retry("compliant", 1.0, None), finish(2)];
            let outcome = judge(Rule::Quota, None, &retried, false);
            assert_eq!(outcome.verdict, Verdict::Warn);
            assert!(
                outcome.why.contains("waiting won't help"),
                "{}",
                outcome.why
            );
            let hammered = [throttle(), retry("no_backoff", 0.01, Some(90.0)), finish(2)];
            assert_eq!(
                judge(Rule::Quota, None, &hammered, false).verdict,
                Verdict::Fail
            );
            let gave_up = judge(Rule::Quota, None, &[throttle(), finish(1)], false);
            assert_eq!(gave_up.verdict, Verdict::Pass);
        }

        #[test]
        fn warns_when_a_past_date_is_still_waited_for_at_the_time_limit() {
            let waiting = judge(Rule::PastDate, None, &[throttle(), finish(1)], true);
            assert_eq!(waiting.verdict, Verdict::Warn);
            let retried = [throttle(), retry("compliant", 0.01, None), finish(2)];
            assert_eq!(
                judge(Rule::PastDate, None, &retried, false).verdict,
                Verdict::Pass
            );
            let gave_up = judge(Rule::PastDate, None, &[throttle(), finish(1)], false);
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
            let outcome = judge(Rule::Hint, None, &events, false);
            assert_eq!(outcome.did, "retried 2 times, first after 0.01 s");
            assert_eq!(outcome.retries, 2);
        }

        #[test]
        fn is_not_applicable_without_traffic_never_a_pass() {
            let outcome = judge(Rule::Hint, None, &[finish(0)], false);
            assert_eq!(outcome.verdict, Verdict::NotApplicable);
            assert!(outcome.why.contains("nothing was tested"));
            let stopped = judge(Rule::Hint, None, &[throttle(), finish(1)], true);
            assert_eq!(stopped.did, "no retry before the time limit (stopped)");
        }
    }

    mod long_hints {
        use super::*;

        #[test]
        fn name_the_cap_of_a_client_that_retries_before_a_long_hint() {
            let capped = [
                throttle(),
                retry("premature", 60.2, Some(29_800.0)),
                finish(2),
            ];
            let outcome = judge(Rule::Long, Some(90), &capped, false);
            assert_eq!(outcome.verdict, Verdict::Fail);
            assert_eq!(
                outcome.finding.as_deref(),
                Some("caps long hints at about 60 s")
            );
            assert!(outcome.why.contains("caps a 90 s hint"), "{}", outcome.why);
            // Sooner than a third of the hint is no cap: the hint was not read at all.
            let at_once = [
                throttle(),
                retry("premature", 1.01, Some(88_990.0)),
                finish(2),
            ];
            let outcome = judge(Rule::Long, Some(90), &at_once, false);
            assert_eq!(
                outcome.finding.as_deref(),
                Some("retries before Retry-After permits")
            );
        }

        #[test]
        fn pass_waiting_or_giving_up_and_warn_on_waiting_out_an_hour() {
            let waited = [throttle(), retry("compliant", 90.1, None), finish(2)];
            assert_eq!(
                judge(Rule::Long, Some(90), &waited, false).verdict,
                Verdict::Pass
            );
            let gave_up = [throttle(), finish(1)];
            assert_eq!(
                judge(Rule::Hour, Some(3600), &gave_up, false).verdict,
                Verdict::Pass
            );
            let waiting = judge(Rule::Hour, Some(3600), &gave_up, true);
            assert_eq!(waiting.verdict, Verdict::Warn);
            assert!(waiting.why.contains("blocks the task"), "{}", waiting.why);
            let still = judge(Rule::Long, Some(150), &gave_up, true);
            assert_eq!(still.verdict, Verdict::Pass);
        }

        #[test]
        fn say_which_hint_a_client_with_two_used() {
            let longer = [throttle(), retry("compliant", 3.01, None), finish(2)];
            let outcome = judge(Rule::Millis, Some(3), &longer, false);
            assert_eq!(outcome.verdict, Verdict::Pass);
            assert!(outcome.why.contains("Retry-After's 3 s"), "{}", outcome.why);
            let shorter = [throttle(), retry("compliant", 1.51, None), finish(2)];
            let outcome = judge(Rule::Millis, Some(3), &shorter, false);
            assert_eq!(outcome.verdict, Verdict::Pass);
            assert!(
                outcome.why.contains("retry-after-ms's 1.5 s"),
                "{}",
                outcome.why
            );
        }

        #[test]
        fn blame_an_early_retry_on_an_hour_behind_clock_on_the_date() {
            let early = [
                throttle(),
                retry("premature", 0.02, Some(2980.0)),
                finish(2),
            ];
            let outcome = judge(Rule::Skew, None, &early, false);
            assert_eq!(outcome.verdict, Verdict::Fail);
            assert!(outcome.why.contains("Date"), "{}", outcome.why);
        }
    }

    mod herd {
        use super::*;

        fn copy(after: f64) -> Outcome {
            let events = [throttle(), retry("compliant", after, None), finish(2)];
            judge(Rule::NoHint, None, &events, false)
        }

        #[test]
        fn warns_when_copies_come_back_in_lockstep() {
            let outcome = herd(vec![copy(1.0), copy(1.004), copy(1.03)]);
            assert_eq!(outcome.verdict, Verdict::Warn);
            assert_eq!(outcome.did, "3 copies; 3 retried after 1.00–1.03 s");
            assert_eq!(
                outcome.finding.as_deref(),
                Some("backs off in lockstep (no jitter)")
            );
        }

        #[test]
        fn passes_jittered_copies_and_keeps_the_worst_verdict() {
            assert_eq!(
                herd(vec![copy(1.0), copy(1.3), copy(1.8)]).verdict,
                Verdict::Pass
            );
            let hammering = [throttle(), retry("no_backoff", 0.01, Some(90.0)), finish(2)];
            let worst = herd(vec![
                copy(1.0),
                judge(Rule::NoHint, None, &hammering, false),
            ]);
            assert_eq!(worst.verdict, Verdict::Fail);
            assert_eq!(herd(vec![copy(1.0)]).did, "retried after 1.00 s");
        }
    }
}
