//! From what the judge recorded in one scenario's event log to its verdict: pure, no I/O.
//!
//! A verdict says only what was measured. A retry at or after a hint shows that the client
//! *waited* that long, not that it *read* the hint; a client that made no retry *gave up*
//! (or was still waiting when stopped), which shows nothing about how it honours a hint and is
//! never counted as honouring one.
//!
//! This file holds the [`Outcome`] and the walk over the event log ([`judge`]); `rules.rs`
//! holds the rules per scenario family that give the verdict.

mod rules;

use std::time::SystemTime;

use holdoff_proxy::judge::Verdict as Judged;
use holdoff_proxy::report::Event;
use serde::Serialize;

use self::rules::{backs_off, margin, no_retry, retried};
use super::scenarios::Rule;

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
    /// The client made no retry: it exited (or, where waiting is all there is to show, was
    /// still waiting when stopped). Nothing about honouring a hint was shown.
    GaveUp,
    /// A pass measured too close to its threshold, on a machine too busy to tell it from a
    /// fail, even when measured again.
    Unreliable,
    /// Nothing was tested: no request reached the proxy, or none was throttled.
    NotApplicable,
}

impl Verdict {
    /// `pass`, `fail`, `warn`, `gave up`, `unreliable` or `n/a`, as in the table.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Verdict::Pass => "pass",
            Verdict::Fail => "fail",
            Verdict::Warn => "warn",
            Verdict::GaveUp => "gave up",
            Verdict::Unreliable => "unreliable",
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
    /// When the first retry reached the proxy.
    #[serde(skip)]
    pub(crate) first_retry_at: Option<SystemTime>,
    /// Seconds from each throttle to the retry that came under it, in order.
    pub(crate) waits: Vec<f64>,
    /// For a pass decided by a threshold (the permitted time, or the minimum backoff): how far
    /// past it the closest retry came, in seconds. A busy machine delays a retry by about its
    /// own scheduling lateness, so a margin within that lateness could be an early retry made
    /// late: such a pass is measured again ([`Verdict::Unreliable`] if it stays that close).
    pub(crate) margin_s: Option<f64>,
    /// When the retry that decided [`Outcome::margin_s`] reached the proxy.
    #[serde(skip)]
    pub(crate) margin_at: Option<SystemTime>,
    /// When its throttle was sent, where the threshold is the minimum backoff: a client that
    /// retries at once is runnable the whole gap, and a busy machine can delay it by as long
    /// as its CPUs were contended since ([`super::noise::Sampler::stalled`]). `None` where
    /// the client slept until a permitted time, when only its wake-up can be late.
    #[serde(skip)]
    pub(crate) margin_since: Option<SystemTime>,
    /// The command's exit status, when it exited by itself.
    pub(crate) exit_code: Option<i32>,
    /// Whether the command was stopped at the scenario's time limit.
    pub(crate) timed_out: bool,
    /// The last lines the command wrote.
    pub(crate) output: Tails,
    /// With `--parallel`, each copy's first wait, sorted.
    pub(crate) copy_waits: Vec<f64>,
}

/// The last lines a command wrote on stdout and stderr, as the reports keep them.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub(crate) struct Tails {
    pub(crate) stdout: Vec<String>,
    pub(crate) stderr: Vec<String>,
}

impl Tails {
    /// How many lines of each are kept.
    const LINES: usize = 5;
    /// How many characters of a line are kept.
    const WIDTH: usize = 200;

    /// The last lines of `stdout` and `stderr` (blank ones left out, long ones cut).
    pub(crate) fn of(stdout: &str, stderr: &str) -> Tails {
        let last = |text: &str| {
            let lines: Vec<String> = text
                .lines()
                .map(str::trim_end)
                .filter(|line| !line.trim().is_empty())
                .map(|line| shorten(line, Self::WIDTH))
                .collect();
            lines[lines.len().saturating_sub(Self::LINES)..].to_vec()
        };
        Tails {
            stdout: last(stdout),
            stderr: last(stderr),
        }
    }

    /// The command's last words: its last line on stderr, else on stdout.
    pub(crate) fn last_words(&self) -> Option<&str> {
        self.stderr
            .last()
            .or(self.stdout.last())
            .map(String::as_str)
    }
}

impl Outcome {
    /// Whether the client retried at all in this scenario.
    pub(crate) fn retried(&self) -> bool {
        self.retries > 0
    }
}

/// One scenario's run, as the verdict needs it.
pub(crate) struct Run<'a> {
    /// Its event log.
    pub(crate) events: &'a [Event],
    /// Whether the command was stopped at the time limit.
    pub(crate) timed_out: bool,
    /// The last line the command wrote (on stderr, else stdout), shown when it exited
    /// non-zero.
    pub(crate) last_words: Option<&'a str>,
}

/// The verdict under `rule` on one scenario's run; `hint` is the wait the scenario asked for,
/// in seconds, where the rule explains with it.
pub(crate) fn judge(rule: Rule, hint: Option<u64>, run: &Run<'_>) -> Outcome {
    let timed_out = run.timed_out;
    let mut requests = 0;
    let mut exit_code = None;
    let mut throttled_at = None;
    let mut retries = Vec::new();
    for event in run.events {
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
                late_by_ms,
                idempotency_key,
                ..
            } => retries.push(Retried {
                at: *retried_at,
                opened: *opened,
                verdict: *verdict,
                after: secs_between(*opened, *retried_at),
                early_by_ms: *early_by_ms,
                late_by_ms: *late_by_ms,
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
        first_retry_at: retries.first().map(|retry| retry.at),
        waits: retries.iter().map(|retry| retry.after).collect(),
        margin_s: None,
        margin_at: None,
        margin_since: None,
        exit_code,
        timed_out,
        output: Tails::default(),
        copy_waits: Vec::new(),
    };
    let ended = match (timed_out, exit_code) {
        (true, _) => "stopped at the time limit".to_owned(),
        (false, Some(code)) => match run.last_words.filter(|_| code != 0) {
            Some(said) => format!("exited {code}: {}", shorten(said, 60)),
            None => format!("exited {code}"),
        },
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
    if rule == Rule::Redirect {
        outcome.did = outcome
            .did
            .replace("retried", "followed")
            .replace("gave up", "did not follow");
    }
    let (verdict, why, finding) = match retries.is_empty() {
        true => no_retry(rule, hint, timed_out),
        false => retried(rule, hint, &retries, timed_out, &ended),
    };
    if verdict == Verdict::Pass
        && let Some((margin, retry)) = margin(rule, &retries)
    {
        outcome.margin_s = Some(margin);
        outcome.margin_at = Some(retry.at);
        outcome.margin_since = backs_off(rule).then_some(retry.opened);
    }
    outcome.verdict = verdict;
    outcome.why = why;
    outcome.finding = finding;
    outcome
}

/// `text`, cut to at most `max` characters with an ellipsis, at a space when there is one in
/// its second half.
fn shorten(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((cut, _)) => {
            let head = &text[..cut];
            let head = match head.rfind(' ') {
                Some(space) if space > cut / 2 => &head[..space],
                _ => head,
            };
            format!("{} …", head.trim_end())
        }
        None => text.to_owned(),
    }
}

/// A retry the judge saw, as the verdict needs it.
struct Retried {
    /// When it reached the proxy.
    at: SystemTime,
    /// When the window it came under opened: its throttle.
    opened: SystemTime,
    verdict: Judged,
    /// Seconds after the throttle.
    after: f64,
    early_by_ms: Option<f64>,
    late_by_ms: Option<f64>,
    /// Whether it carried an `Idempotency-Key`.
    keyed: bool,
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
pub(crate) fn at(base: SystemTime, secs: f64) -> SystemTime {
    base + std::time::Duration::from_secs_f64(secs)
}

#[cfg(test)]
/// Events and runs for the verdict tests, here and in the modules that build on verdicts.
#[cfg(test)]
pub(crate) mod fixtures {
    use super::*;
    use std::time::UNIX_EPOCH;

    pub(crate) const T0: SystemTime = UNIX_EPOCH;

    pub(crate) fn throttle() -> Event {
        serde_json::from_value(serde_json::json!({
            "event": "throttle", "at": "1970-01-01T00:00:00.000Z", "client": "127.0.0.1",
            "method": "GET", "url": "http://127.0.0.1:1/x", "status": 429,
            "permitted_at": "1970-01-01T00:00:02.000Z",
        }))
        .unwrap()
    }

    pub(crate) fn retry(verdict: &str, after: f64, early_ms: Option<f64>) -> Event {
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
            late_by_ms: match verdict {
                "compliant" => Some((after - 2.0).max(0.0) * 1000.0),
                _ => None,
            },
            throttled_client: None,
        }
    }

    pub(crate) fn finish(requests: u64) -> Event {
        finish_with(requests, 0)
    }

    pub(crate) fn finish_with(requests: u64, exit_code: i32) -> Event {
        serde_json::from_value(serde_json::json!({
            "event": "finish", "at": "1970-01-01T00:00:05.000Z", "requests": requests,
            "exit_code": exit_code,
        }))
        .unwrap()
    }

    /// The verdict under `rule` on `events`, the command having exited by itself.
    pub(crate) fn judged(rule: Rule, hint: Option<u64>, events: &[Event]) -> Outcome {
        judge(rule, hint, &ran(events, false))
    }

    pub(crate) fn ran(events: &[Event], timed_out: bool) -> Run<'_> {
        Run {
            events,
            timed_out,
            last_words: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::fixtures::*;
    use super::*;

    mod judge {
        use super::*;

        #[test]
        fn fails_a_retry_before_the_hint_and_says_how_early() {
            let events = [
                throttle(),
                retry("premature", 0.01, Some(1990.0)),
                finish(2),
            ];
            let outcome = judged(Rule::Hint, Some(2), &events);
            assert_eq!(outcome.verdict, Verdict::Fail);
            assert_eq!(outcome.did, "retried after 0.01 s");
            assert!(outcome.why.contains("1.99 s before"), "{}", outcome.why);
        }

        #[test]
        fn passes_a_retry_after_the_hint_saying_only_what_was_measured() {
            let events = [throttle(), retry("compliant", 2.1, None), finish(2)];
            let outcome = judged(Rule::Hint, Some(2), &events);
            assert_eq!(outcome.verdict, Verdict::Pass);
            assert_eq!(
                outcome.why,
                "retried after 2.10 s, never before the hint permitted"
            );
            let margin = outcome.margin_s.unwrap();
            assert!((margin - 0.1).abs() < 1e-9, "{margin}");
        }

        #[test]
        fn calls_no_retry_giving_up_never_a_pass() {
            let gave_up = judged(Rule::Hint, Some(2), &[throttle(), finish(1)]);
            assert_eq!(gave_up.verdict, Verdict::GaveUp);
            assert_eq!(gave_up.did, "gave up (exited 0)");
            assert!(!gave_up.retried());
        }

        #[test]
        fn shows_the_last_words_of_a_command_that_failed() {
            let events = [throttle(), finish_with(1, 1)];
            let run = Run {
                events: &events,
                timed_out: false,
                last_words: Some(
                    "NameError: uninitialized constant Faraday::Retry (a long Ruby message that \
                     goes on)",
                ),
            };
            let outcome = judge(Rule::Hint, Some(2), &run);
            assert_eq!(
                outcome.did,
                "gave up (exited 1: NameError: uninitialized constant Faraday::Retry (a long …)"
            );
        }

        #[test]
        fn says_giving_up_is_right_where_it_is() {
            let quota = judged(Rule::Quota, None, &[throttle(), finish(1)]);
            assert_eq!(quota.verdict, Verdict::Pass);
            assert!(quota.why.contains("which is right"), "{}", quota.why);
            let hour = judged(Rule::Hour, Some(3600), &[throttle(), finish(1)]);
            assert_eq!(hour.verdict, Verdict::Pass);
        }

        #[test]
        fn fails_a_malformed_hint_read_as_zero_and_passes_a_backoff() {
            let zero = [
                throttle(),
                retry("read_as_zero", 0.01, Some(90.0)),
                finish(2),
            ];
            assert_eq!(judged(Rule::Malformed, None, &zero).verdict, Verdict::Fail);
            let backed = [throttle(), retry("compliant", 1.0, None), finish(2)];
            let outcome = judged(Rule::Malformed, None, &backed);
            assert_eq!(outcome.verdict, Verdict::Pass);
            // Measured against the minimum backoff.
            assert!((outcome.margin_s.unwrap() - 0.9).abs() < 1e-9);
        }

        #[test]
        fn passes_a_wrong_weekday_read_as_the_past_date_it_names() {
            let at_once = [
                throttle(),
                retry("read_as_zero", 0.01, Some(90.0)),
                finish(2),
            ];
            let outcome = judged(Rule::Weekday, None, &at_once);
            assert_eq!(outcome.verdict, Verdict::Pass);
            assert!(outcome.why.contains("RFC 9110 §5.6.7"), "{}", outcome.why);
            let waiting = judge(Rule::Weekday, None, &ran(&[throttle(), finish(1)], true));
            assert_eq!(waiting.verdict, Verdict::Warn);
        }

        #[test]
        fn warns_on_no_backoff_after_no_hint_as_the_judge_does() {
            let events = [throttle(), retry("no_backoff", 0.01, Some(90.0)), finish(2)];
            let outcome = judged(Rule::NoHint, None, &events);
            assert_eq!(outcome.verdict, Verdict::Warn);
            assert_eq!(
                outcome.finding.as_deref(),
                Some("does not back off without a hint")
            );
        }

        #[test]
        fn warns_on_a_clock_behind_read_by_the_clients_own_clock() {
            let early = [
                throttle(),
                retry("premature", 0.02, Some(2980.0)),
                finish(2),
            ];
            let outcome = judged(Rule::Skew, Some(3), &early);
            assert_eq!(outcome.verdict, Verdict::Warn);
            assert!(
                outcome
                    .finding
                    .as_deref()
                    .is_some_and(|finding| finding.starts_with("reads dates by its own clock")),
                "{outcome:?}"
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
            let blind = judged(Rule::Post, Some(1), &[throttle(), keyed(false), finish(2)]);
            assert_eq!(blind.verdict, Verdict::Warn);
            assert!(
                blind.why.contains("without an Idempotency-Key"),
                "{}",
                blind.why
            );
            let safe = judged(Rule::Post, Some(1), &[throttle(), keyed(true), finish(2)]);
            assert_eq!(safe.verdict, Verdict::Pass);
            let early = [throttle(), retry("premature", 0.01, Some(990.0)), finish(2)];
            assert_eq!(judged(Rule::Post, Some(1), &early).verdict, Verdict::Fail);
            let none = judged(Rule::Post, Some(1), &[finish(1)]);
            assert_eq!(none.verdict, Verdict::NotApplicable);
            assert_eq!(none.why, "the client sent no POST: nothing was tested");
        }

        #[test]
        fn warns_on_a_retried_quota_429() {
            let retried = [throttle(), retry("compliant", 1.0, None), finish(2)];
            let outcome = judged(Rule::Quota, None, &retried);
            assert_eq!(outcome.verdict, Verdict::Warn);
            assert!(
                outcome.why.contains("waiting won't help"),
                "{}",
                outcome.why
            );
            let hammered = [throttle(), retry("no_backoff", 0.01, Some(90.0)), finish(2)];
            let outcome = judged(Rule::Quota, None, &hammered);
            assert_eq!(outcome.finding.as_deref(), Some("hammers a used-up quota"));
        }

        #[test]
        fn warns_when_a_past_date_is_still_waited_for_at_the_time_limit() {
            let waiting = judge(Rule::PastDate, None, &ran(&[throttle(), finish(1)], true));
            assert_eq!(waiting.verdict, Verdict::Warn);
            assert_eq!(waiting.did, "no retry before the time limit (stopped)");
            let retried = [throttle(), retry("compliant", 0.01, None), finish(2)];
            assert_eq!(
                judged(Rule::PastDate, None, &retried).verdict,
                Verdict::Pass
            );
        }

        #[test]
        fn counts_every_retry() {
            let events = [
                throttle(),
                retry("premature", 0.01, Some(1990.0)),
                retry("premature", 0.02, Some(1980.0)),
                finish(3),
            ];
            let outcome = judged(Rule::Hint, Some(2), &events);
            assert_eq!(outcome.did, "retried 2 times, first after 0.01 s");
            assert_eq!(outcome.retries, 2);
            assert_eq!(outcome.waits, [0.01, 0.02]);
        }

        #[test]
        fn is_not_applicable_without_traffic_never_a_pass() {
            let outcome = judged(Rule::Hint, Some(2), &[finish(0)]);
            assert_eq!(outcome.verdict, Verdict::NotApplicable);
            assert!(outcome.why.contains("nothing was tested"));
        }

        #[test]
        fn wants_waits_that_grow_after_repeated_throttles_without_a_hint() {
            let flat = [
                throttle(),
                retry("compliant", 1.0, None),
                retry("compliant", 1.01, None),
                finish(3),
            ];
            let outcome = judged(Rule::Backoff, None, &flat);
            assert_eq!(outcome.verdict, Verdict::Warn);
            assert_eq!(
                outcome.finding.as_deref(),
                Some("backs off without growing the wait")
            );
            let growing = [
                throttle(),
                retry("compliant", 1.0, None),
                retry("compliant", 2.1, None),
                finish(3),
            ];
            let outcome = judged(Rule::Backoff, None, &growing);
            assert_eq!(outcome.verdict, Verdict::Pass);
            assert_eq!(outcome.why, "its waits grew: 1.00 and 2.10 s");
        }

        #[test]
        fn says_how_a_persistent_throttle_ended() {
            let bounded = [
                throttle(),
                retry("compliant", 1.0, None),
                retry("compliant", 1.0, None),
                finish_with(3, 1),
            ];
            let run = Run {
                events: &bounded,
                timed_out: false,
                last_words: Some("HTTP 429 after 3 attempts"),
            };
            let outcome = judge(Rule::Persistent, Some(1), &run);
            assert_eq!(outcome.verdict, Verdict::Pass);
            assert_eq!(
                outcome.why,
                "stopped after 2 retries over 2.0 s, none early; then exited 1: HTTP 429 after 3 \
                 attempts"
            );
            let endless = judge(Rule::Persistent, Some(1), &ran(&bounded, true));
            assert_eq!(endless.verdict, Verdict::Warn);
        }

        #[test]
        fn fails_a_wait_that_does_not_follow_a_longer_hint() {
            let fixed = [throttle(), retry("premature", 5.0, Some(6000.0)), finish(2)];
            let outcome = judged(Rule::Reads, Some(11), &fixed);
            assert_eq!(outcome.verdict, Verdict::Fail);
            assert_eq!(
                outcome.finding.as_deref(),
                Some("does not read Retry-After: its wait is the same whatever the hint")
            );
            let reader = [throttle(), retry("compliant", 11.01, None), finish(2)];
            let outcome = judged(Rule::Reads, Some(11), &reader);
            assert_eq!(outcome.verdict, Verdict::Pass);
            assert!(
                outcome.why.contains("it reads Retry-After"),
                "{}",
                outcome.why
            );
        }

        #[test]
        fn says_where_a_client_with_two_hints_retried() {
            let longer = [throttle(), retry("compliant", 3.01, None), finish(2)];
            let outcome = judged(Rule::Millis, Some(3), &longer);
            assert_eq!(outcome.verdict, Verdict::Pass);
            assert!(
                outcome.why.contains("at or after both hints"),
                "{}",
                outcome.why
            );
            let shorter = [throttle(), retry("compliant", 1.51, None), finish(2)];
            let outcome = judged(Rule::Millis, Some(3), &shorter);
            assert!(
                outcome.why.contains("before Retry-After's 3 s"),
                "{}",
                outcome.why
            );
        }
    }
}
