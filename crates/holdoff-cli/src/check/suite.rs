//! The suite as it runs: the scenarios side by side, each row printed in the table's order as
//! soon as it is settled, a pass too close to its threshold for the machine's noise measured
//! again alone, the caps named across the long scenarios, and `reads-hint` when every wait
//! exceeded its hint.

use std::io::{self, IsTerminal, Write};
use std::sync::Arc;
use std::time::Duration;

use holdoff::clock::{Clock, TokioClock};

use super::scenarios::{Rule, Scenario, Setup};
use super::verdict::Verdict;
use super::{Row, Shared, load, relate, report, run_scenario};
use crate::failure::Failure;

/// How often the progress line is redrawn.
const PROGRESS_EVERY: Duration = Duration::from_millis(500);

/// Runs `chosen`, at most `jobs` at a time, printing the table on `out` as rows settle, then
/// the summary: the rows.
pub(crate) async fn run(
    shared: &Arc<Shared>,
    chosen: &[Scenario],
    jobs: usize,
    out: &mut dyn Write,
) -> Result<Vec<Row>, Failure> {
    // Scenarios started at once compete for the CPU: on a small machine a client that retries
    // at once would be measured hundreds of ms late. At most `jobs` run at a time, in the
    // order of the table.
    let slots = Arc::new(tokio::sync::Semaphore::new(jobs));
    let mut runs: Vec<_> = chosen
        .iter()
        .map(|scenario| {
            let (shared, slots, scenario) = (Arc::clone(shared), Arc::clone(&slots), *scenario);
            tokio::spawn(async move {
                // Stopped (a signal) before its turn: it does not run.
                let _slot = tokio::select! {
                    slot = slots.acquire_owned() => slot,
                    () = shared.stop.cancelled() => return Ok(None),
                };
                if shared.stop.is_cancelled() {
                    return Ok(None);
                }
                run_scenario(&shared, scenario, 0).await.map(Some)
            })
        })
        .collect();
    let mut table = Table::new(out, chosen.len())?;
    let clock = TokioClock;
    let mut rows = Vec::new();
    for (scenario, run) in chosen.iter().zip(&mut runs) {
        let row = loop {
            tokio::select! {
                row = &mut *run => break row,
                () = clock.sleep_until(clock.now() + PROGRESS_EVERY) => {
                    table.progress(&format!("waiting for {}", scenario.name));
                }
            }
        };
        let row =
            row.map_err(|err| Failure::Runtime(format!("a scenario's task failed: {err}")))??;
        let Some(row) = row else {
            continue;
        };
        table
            .pending
            .push(load::close_call(&row.outcome, late_before(shared, &row)));
        rows.push(row);
        table.print_settled(&mut rows)?;
        // The first round of scenarios saw no request at all: the client sends nothing
        // through the proxy, and each scenario left would only wait its minute to say so.
        let first_round = jobs.min(chosen.len());
        if rows.len() == first_round
            && rows.len() < chosen.len()
            && rows.iter().all(|row| row.outcome.requests == 0)
        {
            shared
                .sent_nothing
                .store(true, std::sync::atomic::Ordering::Relaxed);
            shared.stop.cancel();
        }
    }
    // A pass within the machine's noise of its threshold: measured again, alone (unless the
    // check was stopped: then it stands as it was measured).
    for index in 0..rows.len() {
        if !table.pending[index] || shared.stop.is_cancelled() {
            continue;
        }
        let scenario = rows[index].scenario;
        table.progress(&format!("measuring {} again, alone", scenario.name));
        let again = run_scenario(shared, scenario, 1).await?;
        let first = &rows[index];
        let (noise, again_noise) = (late_before(shared, first), late_before(shared, &again));
        let outcome = load::remeasured(&first.outcome, noise, again.outcome, again_noise);
        rows[index].outcome = outcome;
        rows[index].elapsed += again.elapsed;
        table.pending[index] = false;
        table.print_settled(&mut rows)?;
    }
    relate::name_caps(&mut rows);
    table.print_rest(&mut rows)?;
    // Every wait exceeded its hint: one more scenario, with a hint longer than any of them,
    // tells a client that reads the hint from one that waits the same whatever.
    if let Some(seconds) = reads_hint(&rows, &shared.setup).filter(|_| !shared.stop.is_cancelled())
    {
        let scenario = Scenario::reads(seconds);
        table.progress(&format!("{}: a {seconds} s hint", scenario.name));
        let mut row = run_scenario(shared, scenario, 0).await?;
        row.sends = format!("{} (twice its longest wait)", row.sends);
        rows.push(row);
        table.pending.push(false);
        table.print_rest(&mut rows)?;
    }
    table.clear_progress();
    writeln!(table.out, "{}", report::summary(&rows))?;
    Ok(rows)
}

/// How late the machine could have made the retry that decided `row`'s margin (zero without
/// one): its scheduling lateness just before the retry, or, for a client runnable since its
/// throttle (the minimum backoff's scenarios), how long the CPUs were contended since.
fn late_before(shared: &Shared, row: &Row) -> Duration {
    let Some(at) = row.outcome.margin_at else {
        return Duration::ZERO;
    };
    let woke = shared.sampler.before(at);
    match row.outcome.margin_since {
        Some(since) => woke.max(shared.sampler.stalled(since, at)),
        None => woke,
    }
}

/// The table as it is printed: rows in order, each once settled, and a progress line on
/// stderr when it is a terminal.
struct Table<'a> {
    out: &'a mut dyn Write,
    /// Rows printed so far.
    printed: usize,
    /// Rows that will be measured again, by index.
    pending: Vec<bool>,
    total: usize,
    /// Whether a progress line is drawn (stderr is a terminal).
    progress: bool,
    /// Whether one is on the screen now.
    shown: bool,
}

impl<'a> Table<'a> {
    /// Prints the header.
    fn new(out: &'a mut dyn Write, total: usize) -> io::Result<Table<'a>> {
        report::write_header(out)?;
        out.flush()?;
        Ok(Table {
            out,
            printed: 0,
            pending: Vec::new(),
            total,
            progress: io::stderr().is_terminal(),
            shown: false,
        })
    }

    /// Prints every row from the last printed on that is settled: not to be measured again,
    /// and not a long one (their cap is named across them all, once they are all in).
    fn print_settled(&mut self, rows: &mut [Row]) -> io::Result<()> {
        while self.printed < rows.len()
            && !self.pending[self.printed]
            && !matches!(rows[self.printed].scenario.rule, Rule::Long | Rule::Hour)
        {
            self.print_next(rows)?;
        }
        Ok(())
    }

    /// Prints every row not printed yet.
    fn print_rest(&mut self, rows: &mut [Row]) -> io::Result<()> {
        while self.printed < rows.len() {
            self.print_next(rows)?;
        }
        Ok(())
    }

    /// Settles the next row against the ones before it, and prints it.
    fn print_next(&mut self, rows: &mut [Row]) -> io::Result<()> {
        let (earlier, rest) = rows.split_at_mut(self.printed);
        let row = &mut rest[0];
        relate::settle(earlier, row);
        self.clear_progress();
        report::write_row(row, self.out)?;
        self.out.flush()?;
        self.printed += 1;
        Ok(())
    }

    /// Draws the progress line: how many rows are done, and `doing`.
    fn progress(&mut self, doing: &str) {
        if !self.progress {
            return;
        }
        let mut stderr = io::stderr().lock();
        let _ = write!(
            stderr,
            "\r\x1b[Kholdoff check: {}/{} scenarios done; {doing}",
            self.printed, self.total
        );
        let _ = stderr.flush();
        self.shown = true;
    }

    /// Clears the progress line, if one is shown.
    fn clear_progress(&mut self) {
        if self.shown {
            let mut stderr = io::stderr().lock();
            let _ = write!(stderr, "\r\x1b[K");
            let _ = stderr.flush();
            self.shown = false;
        }
    }
}

/// The hint `reads-hint` sends, when every retry that waited out a hint waited more than it
/// asked (by more than half a second and a fifth): twice the longest such wait (rounded), at least 2 s
/// more than it, at most 60 s (or 5 s more than the wait, for a longer one). `None` when some
/// wait followed its hint, or none was made.
fn reads_hint(rows: &[Row], setup: &Setup) -> Option<u64> {
    let mut longest: Option<f64> = None;
    for row in rows.iter().filter(|row| {
        matches!(row.scenario.rule, Rule::Hint | Rule::Millis | Rule::Reset)
            && row.outcome.verdict == Verdict::Pass
    }) {
        let (Some(hint), Some(wait)) = (
            row.scenario.hint_secs(setup),
            row.outcome.first_retry_after_s,
        ) else {
            continue;
        };
        let hint = hint as f64;
        if wait <= hint + 0.5_f64.max(hint * 0.2) {
            return None;
        }
        longest = Some(longest.map_or(wait, |most| most.max(wait)));
    }
    let longest = longest?;
    let twice = (longest * 2.0).round();
    let bound = 60.0_f64.max(longest + 5.0).ceil();
    Some(twice.max(longest.ceil() + 2.0).min(bound) as u64)
}
