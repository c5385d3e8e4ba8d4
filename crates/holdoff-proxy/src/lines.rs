//! How many lines of one kind reach the log: a few a second of each judge verdict (and of
//! the proxy's lines a flood makes by the thousand), and a count of the rest.
//!
//! A client that ignores `Retry-After` in a loop gets thousands of premature verdicts a
//! second. A line for each would bury everything else in the log, and formatting and writing
//! them costs a flooded proxy more than judging does (at 16,000 premature retries a second,
//! `scripts/soak` measured 34 ms of CPU per 1,000 requests with a line each, 21 ms without).
//! So each verdict may log [`LINES_PER_SECOND`] lines a second; past that, the verdicts are
//! only counted, and the next line of that verdict that is logged is preceded by one saying
//! how many were left out. The reports and the event log still hold every verdict.
//!
//! Budgets take no lock: a second's count is an atomic, and the second is the request's own
//! arrival time (no clock is read here).

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

/// How many lines a verdict of one kind may write to the log in one second.
pub const LINES_PER_SECOND: u32 = 20;

/// One verdict's budget of log lines.
#[derive(Debug, Default)]
pub(crate) struct Budget {
    /// The second (since the Unix epoch) the count is for.
    second: AtomicU64,
    /// Lines logged in that second.
    used: AtomicU32,
    /// Verdicts not logged since the last line that said how many.
    left_out: AtomicU64,
}

/// What to log for one verdict.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Take {
    /// Whether to log this verdict's own line.
    pub(crate) log: bool,
    /// How many earlier verdicts were left out of the log, to say first; 0: nothing to say.
    pub(crate) left_out: u64,
}

impl Budget {
    /// Spends one line of `second`'s budget, if any is left.
    pub(crate) fn take(&self, second: u64) -> Take {
        let current = self.second.load(Ordering::Relaxed);
        if second > current
            && self
                .second
                .compare_exchange(current, second, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
        {
            // This thread starts the new second. Threads racing with it may count a line or
            // two against the old one: the budget is a rate, not an exact count.
            self.used.store(0, Ordering::Relaxed);
        }
        if self.used.fetch_add(1, Ordering::Relaxed) < LINES_PER_SECOND {
            Take {
                log: true,
                left_out: self.left_out.swap(0, Ordering::Relaxed),
            }
        } else {
            self.left_out.fetch_add(1, Ordering::Relaxed);
            Take {
                log: false,
                left_out: 0,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::thread;

    use super::*;

    fn logged(budget: &Budget, second: u64, n: u32) -> Vec<Take> {
        (0..n).map(|_| budget.take(second)).collect()
    }

    #[test]
    fn logs_the_first_lines_of_a_second_and_counts_the_rest() {
        let budget = Budget::default();
        let takes = logged(&budget, 100, LINES_PER_SECOND + 5);
        assert!(takes[..LINES_PER_SECOND as usize].iter().all(|t| t.log));
        assert!(takes[LINES_PER_SECOND as usize..].iter().all(|t| !t.log));
        assert!(takes.iter().all(|t| t.left_out == 0));
        // The next second's first line says how many the last one left out.
        assert_eq!(
            budget.take(101),
            Take {
                log: true,
                left_out: 5
            }
        );
        assert_eq!(
            budget.take(101),
            Take {
                log: true,
                left_out: 0
            }
        );
    }

    #[test]
    fn a_quiet_run_logs_every_line() {
        let budget = Budget::default();
        for second in 0..100 {
            for take in logged(&budget, second, LINES_PER_SECOND) {
                assert_eq!(
                    take,
                    Take {
                        log: true,
                        left_out: 0
                    }
                );
            }
        }
    }

    #[test]
    fn a_late_arrival_counts_against_the_current_second() {
        let budget = Budget::default();
        logged(&budget, 200, LINES_PER_SECOND);
        // A request that arrived in the second before, judged after: no line is gained.
        assert!(!budget.take(199).log);
        assert_eq!(budget.take(201).left_out, 1);
    }

    #[test]
    fn counts_every_verdict_across_threads() {
        let budget = Arc::new(Budget::default());
        // The second starts before the threads do.
        assert!(budget.take(7).log);
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let budget = Arc::clone(&budget);
                thread::spawn(move || logged(&budget, 7, 1000))
            })
            .collect();
        let takes: Vec<Take> = threads
            .into_iter()
            .flat_map(|t| t.join().unwrap())
            .collect();
        let logged = takes.iter().filter(|t| t.log).count() as u64;
        assert_eq!(logged + 1, u64::from(LINES_PER_SECOND));
        // A thread that won a line can say how many were left out by threads that came
        // after it in the count but before it in the swap: those verdicts are reported on
        // its line, and the rest on the next second's first.
        let said: u64 = takes.iter().map(|t| t.left_out).sum();
        let next = budget.take(8);
        assert_eq!(
            logged + said + next.left_out,
            4000,
            "every verdict is logged or counted"
        );
    }
}
