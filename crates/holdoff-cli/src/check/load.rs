//! Verdicts that weigh the machine's noise: copies of a scenario judged together for a herd
//! ([`herd`]), and a pass too close to its threshold measured again ([`close_call`],
//! [`remeasured`]). Pure: the noise is measured elsewhere ([`super::noise`]) and given.

use std::time::Duration;

use holdoff_proxy::report::RESUME_SPREAD;

use super::noise::Noise;
use super::scenarios::Rule;
use super::verdict::{Outcome, Run, Verdict, judge};

/// The verdict on `copies` of one scenario run at once (`--parallel`), `noise` the machine's
/// scheduling lateness meanwhile: the worst copy's, and a warning when they all came back the
/// same time after their throttles — clients told to back off together that return in lockstep
/// are a herd, for want of jitter.
///
/// Copies without jitter come back as far apart as the machine's noise spreads them; copies
/// with jitter, as far as their jitter does. So waits closer together than the noise allows
/// for ([`lockstep`]) are a herd — unless that allowance is itself a sizeable share of the
/// wait ([`NOISE_SHARE`]), when a jitter of a tenth of the wait could not be told from none:
/// then the row is [`Verdict::Unreliable`]. With five copies or more, the earliest and the
/// latest are left out of the spread: one copy the scheduler held back is not jitter.
pub(crate) fn herd(copies: Vec<Outcome>, noise: Noise) -> Outcome {
    let count = copies.len();
    let rank = |verdict| match verdict {
        Verdict::Fail => 5,
        Verdict::Warn => 4,
        Verdict::Unreliable => 3,
        Verdict::Pass => 2,
        Verdict::GaveUp => 1,
        Verdict::NotApplicable => 0,
    };
    let mut waits: Vec<f64> = copies
        .iter()
        .filter_map(|copy| copy.first_retry_after_s)
        .collect();
    waits.sort_by(f64::total_cmp);
    let mut worst = copies
        .into_iter()
        .max_by_key(|copy| rank(copy.verdict))
        .unwrap_or_else(|| {
            let none = Run {
                events: &[],
                timed_out: false,
                last_words: None,
            };
            judge(Rule::NoHint, None, &none)
        });
    if count < 2 {
        return worst;
    }
    let (Some(&least), Some(&most)) = (waits.first(), waits.last()) else {
        worst.did = format!("{count} copies; {}", worst.did);
        return worst;
    };
    worst.did = format!(
        "{count} copies; {} retried after {least:.2}–{most:.2} s",
        waits.len()
    );
    worst.copy_waits = waits.clone();
    let middle = match waits.len() {
        0..=4 => &waits[..],
        n => &waits[1..n - 1],
    };
    let spread = middle.last().unwrap_or(&0.0) - middle.first().unwrap_or(&0.0);
    let within = lockstep(noise);
    if worst.verdict != Verdict::Pass || waits.len() < 2 || spread >= within {
        return worst;
    }
    let apart = match middle.len() == waits.len() {
        true => format!("{:.0} ms apart", spread * 1000.0),
        false => format!(
            "{:.0} ms apart (but the earliest and the latest)",
            spread * 1000.0
        ),
    };
    if within > least * NOISE_SHARE {
        worst.verdict = Verdict::Unreliable;
        worst.why = format!(
            "{} copies came back {apart}, but the machine's scheduling noise allows {:.0} ms, \
             too large a share of a {least:.2} s wait to tell a small jitter from none",
            waits.len(),
            within * 1000.0
        );
        return worst;
    }
    worst.verdict = Verdict::Warn;
    worst.why = format!(
        "{} copies throttled together came back {apart}, within the {:.0} ms the machine's \
         noise allows: a herd, for want of jitter in the backoff",
        waits.len(),
        within * 1000.0
    );
    worst.finding = Some("backs off in lockstep (no jitter)".to_owned());
    worst
}

/// How close copies' waits must be to be in lockstep: the judge's herd spread
/// ([`RESUME_SPREAD`], 10 ms: a sleep's wake-up, a client's own stack and the proxy's reading
/// spread copies without jitter over a few ms on an idle machine), and twice the 99th
/// percentile of the machine's scheduling lateness while their retries were on the way.
fn lockstep(noise: Noise) -> f64 {
    RESUME_SPREAD.as_secs_f64() + 2.0 * noise.p99.as_secs_f64()
}

/// The largest share of a wait the lockstep bound may be for a herd to be told: a jitter of a
/// tenth of the wait spreads eight copies' middle six over more than a fifth of it but about
/// once in a hundred runs at this bound (and once in a thousand at an idle machine's), so it
/// is not taken for none; past it, the row is unreliable.
const NOISE_SHARE: f64 = 0.02;

/// Whether a pass came so close to its threshold that the machine's scheduling lateness just
/// before its deciding retry (`late`, [`super::noise::Sampler::before`]) could have carried
/// an early retry past it: then it is measured again.
pub(crate) fn close_call(outcome: &Outcome, late: Duration) -> bool {
    outcome.verdict == Verdict::Pass
        && outcome
            .margin_s
            .is_some_and(|margin| margin < late.as_secs_f64())
}

/// A close call's verdict after it was measured again alone (`again`; `noise` and
/// `again_noise` the lateness before each one's deciding retry): the second measurement if it
/// is clear of the noise, else [`Verdict::Unreliable`].
pub(crate) fn remeasured(
    first: &Outcome,
    noise: Duration,
    again: Outcome,
    again_noise: Duration,
) -> Outcome {
    let ms = |secs: f64| secs * 1000.0;
    let first_margin = first.margin_s.unwrap_or_default();
    let first_note = format!(
        "a first run passed {:.0} ms past the threshold, within the machine's scheduling noise \
         ({:.0} ms)",
        ms(first_margin),
        ms(noise.as_secs_f64())
    );
    if close_call(&again, again_noise) {
        let mut outcome = again;
        outcome.verdict = Verdict::Unreliable;
        outcome.why = format!(
            "{first_note}, and measured again alone {:.0} ms past it, within the noise ({:.0} \
             ms): an early retry made late by a busy machine would look the same",
            ms(outcome.margin_s.unwrap_or_default()),
            ms(again_noise.as_secs_f64())
        );
        outcome.finding = None;
        return outcome;
    }
    let mut outcome = again;
    outcome.why = format!("{} (measured again alone: {first_note})", outcome.why);
    outcome
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::check::verdict::fixtures::*;

    mod close_calls {
        use super::*;

        #[test]
        fn are_passes_within_the_lateness_before_their_retry() {
            let events = [throttle(), retry("compliant", 2.003, None), finish(2)];
            let outcome = judged(Rule::Hint, Some(2), &events);
            assert!(close_call(&outcome, Duration::from_millis(5)));
            assert!(!close_call(&outcome, Duration::from_millis(1)));
            // A fail is no close call: a busy machine makes retries later, never earlier.
            let early = [throttle(), retry("premature", 1.99, Some(10.0)), finish(2)];
            assert!(!close_call(
                &judged(Rule::Hint, Some(2), &early),
                Duration::from_secs(1)
            ));
        }

        #[test]
        fn measured_again_within_the_noise_are_unreliable() {
            let events = [throttle(), retry("compliant", 0.13, None), finish(2)];
            let first = judged(Rule::Malformed, None, &events);
            let noisy = Duration::from_millis(80);
            let again = remeasured(&first, noisy, first.clone(), noisy);
            assert_eq!(again.verdict, Verdict::Unreliable);
            assert!(again.why.contains("within the noise"), "{}", again.why);
            let at_once = [
                throttle(),
                retry("read_as_zero", 0.004, Some(96.0)),
                finish(2),
            ];
            let clear = judged(Rule::Malformed, None, &at_once);
            let again = remeasured(&first, noisy, clear, Duration::from_millis(1));
            assert_eq!(again.verdict, Verdict::Fail);
            assert!(again.why.contains("measured again alone"), "{}", again.why);
        }
    }

    mod herd {
        use super::*;

        fn copy(after: f64) -> Outcome {
            let events = [throttle(), retry("compliant", after, None), finish(2)];
            judged(Rule::NoHint, None, &events)
        }

        fn quiet() -> Noise {
            Noise {
                max: Duration::from_millis(2),
                p99: Duration::from_millis(1),
            }
        }

        #[test]
        fn warns_when_copies_come_back_closer_than_the_noise_allows() {
            let outcome = herd(vec![copy(1.0), copy(1.004), copy(1.008)], quiet());
            assert_eq!(outcome.verdict, Verdict::Warn);
            assert_eq!(outcome.did, "3 copies; 3 retried after 1.00–1.01 s");
            assert_eq!(
                outcome.finding.as_deref(),
                Some("backs off in lockstep (no jitter)")
            );
        }

        #[test]
        fn passes_jittered_copies_and_keeps_the_worst_verdict() {
            assert_eq!(
                herd(vec![copy(1.0), copy(1.03), copy(1.08)], quiet()).verdict,
                Verdict::Pass
            );
            let hammering = [throttle(), retry("no_backoff", 0.01, Some(90.0)), finish(2)];
            let worst = herd(
                vec![copy(1.0), judged(Rule::NoHint, None, &hammering)],
                quiet(),
            );
            assert_eq!(worst.verdict, Verdict::Warn);
            assert_eq!(herd(vec![copy(1.0)], quiet()).did, "retried after 1.00 s");
        }

        #[test]
        fn cannot_tell_a_herd_when_the_noise_is_a_large_share_of_the_wait() {
            let loud = Noise {
                max: Duration::from_millis(40),
                p99: Duration::from_millis(30),
            };
            let outcome = herd(vec![copy(1.0), copy(1.02), copy(1.05)], loud);
            assert_eq!(outcome.verdict, Verdict::Unreliable);
        }
    }
}
