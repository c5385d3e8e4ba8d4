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
/// Copies without jitter come back as far apart as the machine spreads them; copies with
/// jitter, as far as their draws do. [`told`] weighs the spread: a herd when it is within the
/// noise ([`lockstep`]) or one a jitter of a tenth of the wait gives less than once in a
/// thousand runs ([`HERD_ODDS`]); no herd when it is a sizeable share of the wait
/// ([`NOISE_SHARE`]) on cores that were not crowded (`crowding`, the share of the time some
/// task waited for a CPU while the retries were on their way, below [`CROWDED`]); else
/// [`Verdict::Unreliable`]. With five copies or more, the earliest and the latest are left
/// out of the spread: one copy the scheduler held back is not jitter.
pub(crate) fn herd(copies: Vec<Outcome>, noise: Noise, crowding: f64) -> Outcome {
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
    if worst.verdict != Verdict::Pass || waits.len() < 2 {
        return worst;
    }
    let middle = match waits.len() {
        0..=4 => &waits[..],
        n => &waits[1..n - 1],
    };
    let spread = middle.last().unwrap_or(&0.0) - middle.first().unwrap_or(&0.0);
    let trimmed = middle.len() < waits.len();
    let apart = match trimmed {
        false => format!("{:.0} ms apart", spread * 1000.0),
        true => format!(
            "{:.0} ms apart (but the earliest and the latest)",
            spread * 1000.0
        ),
    };
    let copies = waits.len();
    match told(spread, least, copies, trimmed, lockstep(noise), crowding) {
        Told::Apart => {}
        Told::Herd(closer) => {
            worst.verdict = Verdict::Warn;
            worst.why = format!(
                "{copies} copies came back {apart} after their throttles, {closer}: a herd, \
                 for want of jitter in the backoff"
            );
            worst.finding = Some("backs off in lockstep (no jitter)".to_owned());
        }
        Told::Untold(but) => {
            worst.verdict = Verdict::Unreliable;
            worst.why = format!("{copies} copies came back {apart}{but}");
        }
    }
    worst
}

/// What the spread of copies' waits tells of their jitter.
enum Told {
    /// They came back farther apart than copies without jitter do: no herd.
    Apart,
    /// A herd: the waits were this close.
    Herd(String),
    /// It cannot be told, for this reason.
    Untold(String),
}

/// What copies' waits `spread` apart tell, the shortest wait `least`; `within` how close the
/// machine's noise spreads copies without jitter ([`lockstep`]), `crowding` the share of the
/// time some task waited for a CPU while the retries were on their way.
fn told(spread: f64, least: f64, copies: usize, trimmed: bool, within: f64, crowding: f64) -> Told {
    let telling = least * NOISE_SHARE;
    if spread >= within.max(telling) {
        return match crowding >= CROWDED {
            false => Told::Apart,
            true => Told::Untold(format!(
                ", but some task waited for a CPU {:.0} % of the time the retries were on their \
                 way: on cores that crowded, copies without jitter come back as far apart",
                crowding * 100.0
            )),
        };
    }
    if spread < within && within <= telling {
        return Told::Herd(format!(
            "within the {:.0} ms the machine's noise allows",
            within * 1000.0
        ));
    }
    if tenth_jitter_odds(spread / least, copies, trimmed) < HERD_ODDS {
        return Told::Herd(
            "closer than a jitter of a tenth of the wait brings them but once in over a \
             thousand runs"
                .to_owned(),
        );
    }
    if within > telling {
        return Told::Untold(format!(
            ", but the machine's scheduling noise allows {:.0} ms, too large a share of a \
             {least:.2} s wait to tell a small jitter from none",
            within * 1000.0
        ));
    }
    Told::Untold(format!(
        ": farther apart than the {:.0} ms the machine's measured noise allows for none, but \
         closer than the {:.0} ms a jitter of a tenth of the wait spreads them all but once in \
         a hundred runs; copies contending for the cores spread so far without jitter, so it \
         cannot be told",
        within * 1000.0,
        telling * 1000.0
    ))
}

/// The share of the time some task may wait for a CPU while copies retry for copies that came
/// back far apart to pass: past it, copies without jitter were seen spread as far. Eight
/// copies of a Python client on an idle two-core machine keep it at 0.07–0.63 by themselves.
const CROWDED: f64 = 0.75;

/// How unlikely a spread must be for copies with a jitter of a tenth of the wait for it to be
/// a herd whatever the noise: the noise only spreads copies further.
const HERD_ODDS: f64 = 0.001;

/// The chance that `copies` copies, each waiting the same time plus a jitter drawn uniformly
/// from up to a tenth of it, come back within `share` of that wait of each other — the
/// earliest and the latest left out when `trimmed`.
///
/// The distance between the j-th and the k-th of n uniform draws on [0, 1] is distributed as
/// Beta(k − j, n − k + j + 1): Beta(n − 3, 4) for the second to the last but one, Beta(n − 1,
/// 2) for all. For whole a and b, Beta(a, b)'s distribution function at x is the chance that
/// at least a of a + b − 1 draws fall below x, a binomial tail of b terms.
fn tenth_jitter_odds(share: f64, copies: usize, trimmed: bool) -> f64 {
    let x = (share / 0.1).clamp(0.0, 1.0);
    let (a, b) = match trimmed {
        true => (copies.saturating_sub(3), 4),
        false => (copies.saturating_sub(1), 2),
    };
    let draws = a + b - 1;
    (a..=draws)
        .map(|below| {
            let above = draws - below;
            // draws choose above, with above < b ≤ 4 factors.
            let ways =
                (1..=above).fold(1.0, |ways, i| ways * (draws - above + i) as f64 / i as f64);
            ways * x.powi(below as i32) * (1.0 - x).powi(above as i32)
        })
        .sum()
}

/// How close copies' waits must be to be in lockstep: the judge's herd spread
/// ([`RESUME_SPREAD`], 10 ms: a sleep's wake-up, a client's own stack and the proxy's reading
/// spread copies without jitter over a few ms on an idle machine), and twice the 99th
/// percentile of the machine's scheduling lateness while their retries were on the way.
fn lockstep(noise: Noise) -> f64 {
    RESUME_SPREAD.as_secs_f64() + 2.0 * noise.p99.as_secs_f64()
}

/// The share of the wait that tells a jitter: a jitter of a tenth of the wait spreads eight
/// copies' middle six over more than a fifth of it all but about once in a hundred runs. A
/// spread this wide is no herd (on cores that were not crowded); a lockstep bound this wide
/// could not tell a jitter from none, so a spread within it is unreliable, not a herd.
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
            let outcome = herd(vec![copy(1.0), copy(1.004), copy(1.008)], quiet(), 0.0);
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
                herd(vec![copy(1.0), copy(1.03), copy(1.08)], quiet(), 0.0).verdict,
                Verdict::Pass
            );
            let hammering = [throttle(), retry("no_backoff", 0.01, Some(90.0)), finish(2)];
            let worst = herd(
                vec![copy(1.0), judged(Rule::NoHint, None, &hammering)],
                quiet(),
                0.0,
            );
            assert_eq!(worst.verdict, Verdict::Warn);
            assert_eq!(
                herd(vec![copy(1.0)], quiet(), 0.0).did,
                "retried after 1.00 s"
            );
        }

        #[test]
        fn cannot_tell_copies_spread_more_than_the_noise_but_less_than_a_jitter() {
            // 14 ms apart at a 1 s wait: past the 12 ms a quiet machine allows, short of the
            // 20 ms a jitter of a tenth of the wait spreads eight copies 99 runs in 100.
            let waits = [1.005, 1.006, 1.007, 1.014, 1.016, 1.018, 1.02, 1.027];
            let outcome = herd(waits.into_iter().map(copy).collect(), quiet(), 0.0);
            assert_eq!(outcome.verdict, Verdict::Unreliable, "{}", outcome.why);
            assert!(outcome.why.contains("cannot be told"), "{}", outcome.why);
            assert_eq!(outcome.finding, None);
            // The same spread at a 4 s wait is one a jitter of a tenth gives once in 370,000
            // runs: a herd, even when the noise allows 90 ms.
            let loud = Noise {
                max: Duration::from_millis(60),
                p99: Duration::from_millis(40),
            };
            let longer = waits.into_iter().map(|wait| copy(wait + 3.0)).collect();
            let outcome = herd(longer, loud, 0.0);
            assert_eq!(outcome.verdict, Verdict::Warn, "{}", outcome.why);
            assert!(outcome.why.contains("over a thousand"), "{}", outcome.why);
            // Past the 20 ms, the copies had a jitter.
            let apart = || waits.into_iter().map(|wait| copy(1.0 + (wait - 1.0) * 2.0));
            assert_eq!(herd(apart().collect(), quiet(), 0.0).verdict, Verdict::Pass);
            // Unless the cores were so crowded that copies without jitter spread as far.
            let crowded = herd(apart().collect(), quiet(), 0.8);
            assert_eq!(crowded.verdict, Verdict::Unreliable, "{}", crowded.why);
            assert!(
                crowded.why.contains("waited for a CPU 80 %"),
                "{}",
                crowded.why
            );
            // A herd is a herd however crowded.
            let close = herd(vec![copy(1.0), copy(1.004), copy(1.008)], quiet(), 1.0);
            assert_eq!(close.verdict, Verdict::Warn);
        }

        #[test]
        fn the_odds_of_a_jitter_of_a_tenth_are_those_of_uniform_draws() {
            // Two copies: 1 − (1 − x)², x the share of the jitter.
            assert!((tenth_jitter_odds(0.05, 2, false) - 0.75).abs() < 1e-12);
            // Eight copies' middle six within a fifth of the jitter: about once in a hundred.
            let fifth = tenth_jitter_odds(0.02, 8, true);
            assert!((fifth - 0.010_406).abs() < 1e-6, "{fifth}");
            assert_eq!(tenth_jitter_odds(0.2, 8, true), 1.0);
            assert_eq!(tenth_jitter_odds(0.0, 8, true), 0.0);
        }

        #[test]
        fn cannot_tell_a_herd_when_the_noise_is_a_large_share_of_the_wait() {
            let loud = Noise {
                max: Duration::from_millis(40),
                p99: Duration::from_millis(30),
            };
            let outcome = herd(vec![copy(1.0), copy(1.02), copy(1.05)], loud, 0.0);
            assert_eq!(outcome.verdict, Verdict::Unreliable);
        }
    }
}
