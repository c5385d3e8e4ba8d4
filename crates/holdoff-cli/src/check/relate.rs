//! What one scenario's row says about another's: the findings only several rows show,
//! settled once the rows they depend on are in. Pure.

use super::Row;
use super::scenarios::{MIN_BACKOFF, Rule};
use super::verdict::Verdict;

/// What earlier rows say about `row`: the findings only several rows show, settled once the
/// rows before it are.
pub(crate) fn settle(earlier: &[Row], row: &mut Row) {
    undated_skew(earlier, row);
    weekday_as_zero(earlier, row);
}

/// A client that retries early on `http-date` does not wait for an HTTP-date at all, so its
/// early retry on `clock-behind` says nothing about the server's `Date`: it is the same
/// finding as `http-date`'s.
fn undated_skew(earlier: &[Row], row: &mut Row) {
    if row.scenario.rule != Rule::Skew
        || row.outcome.verdict != Verdict::Warn
        || !row.outcome.retried()
    {
        return;
    }
    let Some(undated) = earlier
        .iter()
        .find(|row| row.scenario.name == "http-date" && row.outcome.verdict == Verdict::Fail)
        .and_then(|row| row.outcome.finding.clone())
    else {
        return;
    };
    let early = row
        .outcome
        .why
        .split(" by the server's clock")
        .next()
        .unwrap_or_default();
    row.outcome.why = format!(
        "{early}: it retries early on http-date too, so it does not wait for an HTTP-date at \
         all, whatever the server's clock"
    );
    row.outcome.finding = Some(undated);
}

/// A retry at once after a wrong weekday is what a robust parser does (the date is past), but
/// a client that reads `malformed` as zero may not have parsed it at all: a warning, then.
fn weekday_as_zero(earlier: &[Row], row: &mut Row) {
    let backoff = MIN_BACKOFF.as_secs_f64();
    let at_once = row
        .outcome
        .first_retry_after_s
        .is_some_and(|after| after < backoff);
    let zero = earlier
        .iter()
        .any(|row| row.scenario.rule == Rule::Malformed && row.outcome.verdict == Verdict::Fail);
    if row.scenario.rule != Rule::Weekday || !at_once || !zero {
        return;
    }
    row.outcome.verdict = Verdict::Warn;
    row.outcome.why = format!(
        "{}; but it reads other malformed hints as zero too, so it may not have parsed this one \
         at all",
        row.outcome.why
    );
    row.outcome.finding = Some("reads a malformed Retry-After as zero".to_owned());
}

/// A cap is a wait that stops growing across the long hints: named once, with its measured
/// value, on every long scenario it cut short. A wait no longer than the client's waits on
/// the default suite's short hints is no cap but a wait that never read the hint.
pub(crate) fn name_caps(rows: &mut [Row]) {
    let long = |row: &Row| matches!(row.scenario.rule, Rule::Long | Rule::Hour);
    let cut: Vec<f64> = rows
        .iter()
        .filter(|row| long(row) && row.outcome.verdict == Verdict::Fail)
        .filter_map(|row| row.outcome.first_retry_after_s)
        .collect();
    let Some((least, most)) = bounds(&cut) else {
        return;
    };
    // Another long hint waited out whole, shorter than where the others were cut: the wait
    // grew with the hint, then stopped.
    let honoured_shorter = rows.iter().any(|row| {
        long(row)
            && row.outcome.verdict == Verdict::Pass
            && row
                .outcome
                .first_retry_after_s
                .is_some_and(|after| after <= least)
    });
    if cut.len() < 2 && !honoured_shorter {
        return;
    }
    if most > least * 1.15 + 1.0 {
        return;
    }
    let short: Vec<f64> = rows
        .iter()
        .filter(|row| matches!(row.scenario.rule, Rule::Hint | Rule::Millis))
        .filter_map(|row| row.outcome.first_retry_after_s)
        .collect();
    let fixed = bounds(&short).is_some_and(|(_, most_short)| most_short * 1.15 + 0.5 >= least);
    let finding = match fixed {
        true => format!(
            "does not read Retry-After: waits about {} s whatever the hint",
            about(least)
        ),
        false => format!("caps long hints at about {} s", about(least)),
    };
    for row in rows
        .iter_mut()
        .filter(|row| long(row) && row.outcome.verdict == Verdict::Fail)
    {
        let why = match fixed {
            true => "the same wait as after the short hints: it does not read the hint",
            false => "its wait stopped growing with the hint: a cap",
        };
        row.outcome.why = format!("{}; {why}", row.outcome.why);
        row.outcome.finding = Some(finding.clone());
    }
}

/// `secs` as the summary says it: whole seconds, but a tenth below one (a jittered backoff of
/// 0.12 s is not "about 0 s").
fn about(secs: f64) -> String {
    match secs < 1.0 {
        true => format!("{secs:.1}"),
        false => format!("{secs:.0}"),
    }
}

/// The least and the most of `values`, if any.
fn bounds(values: &[f64]) -> Option<(f64, f64)> {
    let first = *values.first()?;
    Some(values.iter().fold((first, first), |(lo, hi), &value| {
        (lo.min(value), hi.max(value))
    }))
}

#[cfg(test)]
mod tests {
    use super::about;

    #[test]
    fn says_a_wait_below_a_second_in_tenths() {
        assert_eq!(about(0.12), "0.1");
        assert_eq!(about(2.04), "2");
        assert_eq!(about(59.6), "60");
    }
}
