//! The rules per scenario family: from the retries the judge saw under a scenario's rule to
//! a verdict, why, and the finding for the summary.

use holdoff_proxy::judge::Verdict as Judged;

use super::super::scenarios::{MIN_BACKOFF, Rule, min_backoff};
use super::{Retried, Verdict};

/// A verdict, why, and the finding for the summary.
type Judgement = (Verdict, String, Option<String>);

/// The verdict on a client that made no retry: it gave up (the command exited), or it was
/// still waiting at the time limit.
pub(super) fn no_retry(rule: Rule, hint: Option<u64>, timed_out: bool) -> Judgement {
    let hint = hint.unwrap_or_default();
    if !timed_out {
        return match rule {
            Rule::Quota => {
                pass("gave up, which is right: the quota is used up, and waiting won't help")
            }
            Rule::Hour => pass(format!(
                "gave up (or deferred the task) rather than wait {hint} s, which is right for a \
                 task that cannot wait that long"
            )),
            Rule::Post => pass(
                "did not repeat a POST it had no key for, which is right: a hint \
                                does not make a POST safe",
            ),
            _ => (
                Verdict::GaveUp,
                "made no retry, so nothing about how it honours the hint was shown".to_owned(),
                None,
            ),
        };
    }
    match rule {
        Rule::Skew | Rule::PastDate | Rule::Weekday => (
            Verdict::Warn,
            "was still waiting at the time limit, though the date permitted a retry at once (by \
             the client's own clock, too): it read a past date as a long wait"
                .to_owned(),
            Some("reads a past date as a long wait".to_owned()),
        ),
        Rule::Malformed => (
            Verdict::Warn,
            "did not retry before the time limit: it neither backed off nor gave up, but waits \
             on a hint it should have rejected"
                .to_owned(),
            Some("waits on a malformed Retry-After".to_owned()),
        ),
        Rule::Hour => (
            Verdict::Warn,
            format!(
                "still waiting when stopped: waiting out a {hint} s hint blocks the task; give up \
                 or defer it"
            ),
            Some("waits out an hour's hint, blocking the task".to_owned()),
        ),
        Rule::Quota => pass("did not retry the used-up quota before the time limit"),
        Rule::Post => pass("did not repeat the POST before the time limit"),
        Rule::NoHint | Rule::Backoff => (
            Verdict::Warn,
            "no retry before the time limit after a 429 with no hint: a backoff that long \
             stalls the task"
                .to_owned(),
            Some("waits past the time limit after a 429 with no hint".to_owned()),
        ),
        Rule::Hint
        | Rule::Millis
        | Rule::Long
        | Rule::Reads
        | Rule::Persistent
        | Rule::Reset
        | Rule::Redirect => (
            Verdict::Warn,
            format!(
                "no retry before the time limit, though a retry was permitted {hint} s after the \
                 throttle: it waits far longer than asked"
            ),
            Some("waits far longer than the hint asks".to_owned()),
        ),
    }
}

/// The verdict on a client that retried.
pub(super) fn retried(
    rule: Rule,
    hint: Option<u64>,
    retries: &[Retried],
    timed_out: bool,
    ended: &str,
) -> Judgement {
    let broke = |wanted: &[Judged]| {
        retries
            .iter()
            .find(|retry| wanted.contains(&retry.verdict))
            .map(|retry| (retry.after, retry.early_by_ms))
    };
    let early = || Some(EARLY.to_owned());
    let first = retries[0].after;
    let waited = waited(retries);
    let zero_backoff = |after: f64, what: &str| {
        format!(
            "retried {after:.3} s after {what}, sooner than the {} minimum backoff",
            min_backoff()
        )
    };
    match rule {
        Rule::Hint => match broke(&[Judged::Premature]) {
            Some((after, by)) => (Verdict::Fail, early_retry(after, by), early()),
            None => pass(format!("{waited}, never before the hint permitted")),
        },
        Rule::Skew => match broke(&[Judged::Premature]) {
            Some((after, by)) => (
                Verdict::Warn,
                format!(
                    "{} by the server's clock, an hour behind: what a client does that measures \
                     the date by its own clock (RFC 9110 names no clock for an HTTP-date, so a \
                     warning)",
                    early_retry(after, by)
                ),
                Some(
                    "reads dates by its own clock: a server whose clock is behind sees early \
                     retries"
                        .to_owned(),
                ),
            ),
            None => pass(format!(
                "{waited}, never before the date by the server's clock (its Date)"
            )),
        },
        Rule::Millis => match broke(&[Judged::Premature]) {
            Some((after, by)) => (Verdict::Fail, early_retry(after, by), early()),
            None if hint.is_some_and(|secs| first >= secs as f64) => {
                pass(format!("{waited}, at or after both hints"))
            }
            None => pass(format!(
                "{waited}: at or after retry-after-ms's 1.5 s, before Retry-After's {} s (both \
                 are the server's; the judge takes the earlier)",
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
            None => pass(format!(
                "{waited}, at least the {} minimum backoff after a malformed Retry-After",
                min_backoff()
            )),
        },
        // The judge's parser rejects a weekday that is not the date's (RFC 9110's grammar),
        // so a retry within the minimum backoff is its `read_as_zero`; but §5.6.7 asks
        // recipients to be robust in parsing timestamps, and a robust parser reads the date
        // (in the past), which permits a retry at once.
        Rule::Weekday => match broke(&[Judged::ReadAsZero, Judged::Premature]) {
            Some((after, _)) => pass(format!(
                "retried {after:.3} s after it: as a robust parser reads it (RFC 9110 §5.6.7), \
                 the date is in the past and permits a retry at once"
            )),
            None => pass(format!(
                "{waited}: it backed off as after a malformed hint, which a strict parser \
                 would call it"
            )),
        },
        Rule::NoHint | Rule::Backoff => match broke(&[Judged::NoBackoff, Judged::Premature]) {
            Some((after, _)) => (
                Verdict::Warn,
                format!(
                    "{}: no backoff at all (RFC 9110 asks for none without a hint, so a \
                     warning, as the judge says)",
                    zero_backoff(after, "a 429 with no hint")
                ),
                Some("does not back off without a hint".to_owned()),
            ),
            None if rule == Rule::Backoff => backoff(retries),
            None => pass(format!(
                "{waited}, at least the {} minimum backoff after a 429 with no hint",
                min_backoff()
            )),
        },
        Rule::PastDate => match broke(&[Judged::Premature]) {
            Some((after, by)) => (Verdict::Fail, early_retry(after, by), early()),
            None => pass(format!(
                "{waited}: a date in the past permits a retry at once"
            )),
        },
        Rule::Quota => match broke(&[Judged::NoBackoff, Judged::Premature]) {
            Some((after, _)) => (
                Verdict::Warn,
                format!(
                    "{}: the quota is used up, waiting won't help, and it did not even wait",
                    zero_backoff(after, "a quota 429")
                ),
                Some("hammers a used-up quota".to_owned()),
            ),
            None => (
                Verdict::Warn,
                format!(
                    "retried a quota 429 after {first:.2} s: the quota is used up, waiting won't help"
                ),
                Some("retries a used-up quota".to_owned()),
            ),
        },
        Rule::Post => match broke(&[Judged::Premature]) {
            Some((after, by)) => (Verdict::Fail, early_retry(after, by), early()),
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
                None => pass(format!(
                    "{waited}, never before the hint, with an Idempotency-Key"
                )),
            },
        },
        // A cap is named across the long scenarios ([`name_caps`]): one early retry alone
        // does not tell a cap from a backoff that never read the hint.
        Rule::Long | Rule::Hour => match broke(&[Judged::Premature]) {
            Some((after, by)) => (Verdict::Fail, early_retry(after, by), early()),
            None => pass(format!("{waited}: the whole hint, uncapped")),
        },
        Rule::Redirect => match broke(&[Judged::Premature]) {
            Some((after, by)) => (
                Verdict::Warn,
                format!(
                    "{}: RFC 9110 §10.2.3 asks a client to wait that long before following",
                    early_retry(after, by).replace("retried", "followed the redirect")
                ),
                Some("follows a redirect before its Retry-After".to_owned()),
            ),
            None => pass(format!(
                "{}, never before the hint",
                waited.replace("retried", "followed the redirect")
            )),
        },
        Rule::Reads => match broke(&[Judged::Premature]) {
            Some((after, by)) => (
                Verdict::Fail,
                format!(
                    "{}: its wait did not grow with the hint",
                    early_retry(after, by)
                ),
                Some(
                    "does not read Retry-After: its wait is the same whatever the hint".to_owned(),
                ),
            ),
            None => pass(format!(
                "{waited}, never before a hint longer than any wait it made before: its wait \
                 follows the hint, so it reads Retry-After"
            )),
        },
        Rule::Persistent => match broke(&[Judged::Premature]) {
            Some((after, by)) => (Verdict::Fail, early_retry(after, by), early()),
            None if timed_out => (
                Verdict::Warn,
                format!(
                    "still retrying at the time limit after {} retries, each throttled: are its \
                     retries bounded?",
                    retries.len()
                ),
                Some("retries a persistent throttle without a bound in sight".to_owned()),
            ),
            None => pass(format!(
                "stopped after {} retries over {:.1} s, none early; then {ended}",
                retries.len(),
                retries.iter().map(|retry| retry.after).sum::<f64>()
            )),
        },
        Rule::Reset => match broke(&[Judged::Premature]) {
            Some((after, by)) => (
                Verdict::Warn,
                format!(
                    "{} (X-RateLimit-Reset, with X-RateLimit-Remaining: 0 and no Retry-After)",
                    early_retry(after, by).replace("Retry-After", "the reset")
                ),
                Some("retries before X-RateLimit-Reset".to_owned()),
            ),
            None => pass(format!("{waited}, never before the reset")),
        },
    }
}

/// The summary's phrase for a retry before the permitted time.
const EARLY: &str = "retries before Retry-After permits";

/// `backoff`: three throttles without a hint, every retry at least the minimum backoff
/// later. The waits should grow (exponential backoff); flat ones warn.
fn backoff(retries: &[Retried]) -> Judgement {
    let waits: Vec<f64> = retries.iter().map(|retry| retry.after).collect();
    let listed = list_secs(&waits);
    // Growing: each wait at least 20% over the one before (a doubling with jitter can come
    // back shorter than 2x, never flat).
    let grows = waits.windows(2).all(|pair| pair[1] >= pair[0] * 1.2);
    match (waits.len(), grows) {
        (1, _) => pass(format!(
            "waited {listed} before its one retry, at least the {} minimum backoff",
            min_backoff()
        )),
        (_, true) => pass(format!("its waits grew: {listed}")),
        (_, false) => (
            Verdict::Warn,
            format!(
                "its waits did not grow: {listed}; a server still throttling is told the same \
                 load again (exponential backoff grows them)"
            ),
            Some("backs off without growing the wait".to_owned()),
        ),
    }
}

/// `1.00, 2.01 and 4.03 s`.
fn list_secs(waits: &[f64]) -> String {
    let each: Vec<String> = waits.iter().map(|wait| format!("{wait:.2}")).collect();
    match each.split_last() {
        Some((last, [])) => format!("{last} s"),
        Some((last, rest)) => format!("{} and {last} s", rest.join(", ")),
        None => String::new(),
    }
}

/// What the client measurably did: `retried after 2.01 s`, or for several retries each wait.
fn waited(retries: &[Retried]) -> String {
    match retries {
        [one] => format!("retried after {:.2} s", one.after),
        many => {
            let waits: Vec<f64> = many.iter().map(|retry| retry.after).collect();
            format!("retried after {}", list_secs(&waits))
        }
    }
}

/// Whether `rule`'s threshold is the minimum backoff (else a permitted time, or none).
pub(super) fn backs_off(rule: Rule) -> bool {
    matches!(
        rule,
        Rule::Malformed | Rule::NoHint | Rule::Backoff | Rule::Quota
    )
}

/// How far past its threshold a pass's closest retry came, in seconds, and that retry: the
/// permitted time for a hint, the minimum backoff for a malformed hint or none.
pub(super) fn margin(rule: Rule, retries: &[Retried]) -> Option<(f64, &Retried)> {
    let backoff = MIN_BACKOFF.as_secs_f64();
    let past = |retry: &Retried| match rule {
        _ if backs_off(rule) => Some(retry.after - backoff),
        Rule::PastDate | Rule::Weekday => None,
        _ => retry.late_by_ms.map(|ms| ms / 1000.0),
    };
    retries
        .iter()
        .filter_map(|retry| Some((past(retry)?, retry)))
        .min_by(|a, b| a.0.total_cmp(&b.0))
}

/// A pass, and why.
fn pass(why: impl Into<String>) -> Judgement {
    (Verdict::Pass, why.into(), None)
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
