//! The progress line: the time, the requests the clients sent, and the judge's counts so far,
//! which it reads from the event log as the proxy appends to it.
//!
//! On a terminal it is one line rewritten in place; otherwise a plain line every few seconds
//! (or nothing, with `--no-progress`).

use std::fs::File;
use std::io::{self, IsTerminal, Read, Write};
use std::path::Path;
use std::time::{Duration, Instant};

use holdoff_proxy::judge::Verdict;
use holdoff_proxy::report::Event;

use crate::duration::friendly;

/// How often the line on a terminal is redrawn.
pub(crate) const TICK: Duration = Duration::from_millis(250);
/// How often a plain line is printed when stderr is not a terminal.
const EVERY: Duration = Duration::from_secs(5);

/// How progress is shown.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Mode {
    /// One line on a terminal, redrawn in place.
    Live,
    /// A plain line now and then.
    Lines,
    /// Nothing.
    Off,
}

impl Mode {
    /// Live on a terminal, plain lines otherwise, unless progress is turned off.
    pub(crate) fn pick(no_progress: bool) -> Mode {
        match (no_progress, io::stderr().is_terminal()) {
            (true, _) => Mode::Off,
            (false, true) => Mode::Live,
            (false, false) => Mode::Lines,
        }
    }
}

/// The judge's counts so far.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Counts {
    pub(crate) throttled: u64,
    pub(crate) premature: u64,
    pub(crate) compliant: u64,
}

impl Counts {
    /// Counts what `event` adds.
    fn add(&mut self, event: &Event) {
        match event {
            Event::Throttle { .. } => self.throttled += 1,
            Event::Retry {
                verdict: Verdict::Premature,
                ..
            } => self.premature += 1,
            Event::Retry {
                verdict: Verdict::Compliant,
                ..
            } => self.compliant += 1,
            _ => {}
        }
    }
}

/// Follows the event log, and shows the progress line.
pub(crate) struct Progress {
    mode: Mode,
    total: Duration,
    started: Instant,
    /// The event log, read up to here; `None` when progress is off, or the log cannot be read
    /// (the line then shows requests only).
    log: Option<File>,
    /// The start of a line the proxy has not finished writing.
    partial: Vec<u8>,
    counts: Counts,
    /// When the next plain line is due.
    next_line: Instant,
}

impl Progress {
    /// Progress for a run of `total` from `started`, following the event log at `events`.
    pub(crate) fn new(mode: Mode, total: Duration, started: Instant, events: &Path) -> Progress {
        let log = match mode {
            Mode::Off => None,
            Mode::Live | Mode::Lines => File::open(events).ok(),
        };
        Progress {
            mode,
            total,
            started,
            log,
            partial: Vec::new(),
            counts: Counts::default(),
            next_line: started + EVERY,
        }
    }

    /// Reads what the log gained, and shows the line if it is due.
    pub(crate) fn tick(&mut self, now: Instant, sent: u64) {
        if self.mode == Mode::Off {
            return;
        }
        self.follow();
        let line = self.line(now, sent);
        // With stderr gone there is nobody to show it to.
        let mut err = io::stderr().lock();
        match self.mode {
            // `\x1b[K` clears what a longer line left behind.
            Mode::Live => {
                let _ = write!(err, "\r{line}\x1b[K");
                let _ = err.flush();
            }
            Mode::Lines if now >= self.next_line => {
                self.next_line += EVERY;
                let _ = writeln!(err, "{line}");
            }
            Mode::Lines | Mode::Off => {}
        }
    }

    /// Shows the last state and ends the line, so that what follows starts on its own.
    pub(crate) fn finish(&mut self, now: Instant, sent: u64) {
        if self.mode == Mode::Live {
            self.tick(now, sent);
            let _ = writeln!(io::stderr());
        }
    }

    /// Reads the lines appended to the event log since the last call. The proxy writes each
    /// event as one line with one system call, so only the last line can be incomplete.
    fn follow(&mut self) {
        let Some(log) = &mut self.log else {
            return;
        };
        let mut fresh = Vec::new();
        if log.read_to_end(&mut fresh).is_err() {
            return;
        }
        self.partial.extend_from_slice(&fresh);
        let Some(last) = self.partial.iter().rposition(|&b| b == b'\n') else {
            return;
        };
        let rest = self.partial.split_off(last + 1);
        for line in self.partial.split(|&b| b == b'\n') {
            if let Ok(event) = serde_json::from_slice::<Event>(line) {
                self.counts.add(&event);
            }
        }
        self.partial = rest;
    }

    fn line(&self, now: Instant, sent: u64) -> String {
        let elapsed = now.saturating_duration_since(self.started).min(self.total);
        let Counts {
            throttled,
            premature,
            compliant,
        } = self.counts;
        format!(
            "{:>5} / {}  requests {sent}  throttled {throttled}  premature {premature}  \
             compliant {compliant}",
            format!("{:.1}s", elapsed.as_secs_f64()),
            friendly(self.total),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    mod follow {
        use super::*;

        #[test]
        fn counts_whole_lines_only_and_picks_up_the_rest_later() {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("events.jsonl");
            let throttle = r#"{"event":"throttle","at":"2025-03-01T12:00:00Z","client":"header:a","method":"GET","url":"http://x/","status":429,"permitted_at":"2025-03-01T12:00:03Z"}"#;
            let premature = r#"{"event":"retry","verdict":"premature","client":"header:a","method":"GET","url":"http://x/","throttled_at":"2025-03-01T12:00:00Z","permitted_at":"2025-03-01T12:00:03Z","retried_at":"2025-03-01T12:00:01Z","early_by_ms":2000.0}"#;
            let (head, tail) = premature.split_at(40);
            std::fs::write(&path, format!("{throttle}\n{head}")).unwrap();

            let start = holdoff::clock::SystemClock.now();
            let mut progress = Progress::new(Mode::Lines, Duration::from_secs(20), start, &path);
            progress.follow();
            assert_eq!(
                progress.counts,
                Counts {
                    throttled: 1,
                    ..Counts::default()
                }
            );

            let mut file = std::fs::OpenOptions::new()
                .append(true)
                .open(&path)
                .unwrap();
            writeln!(file, "{tail}").unwrap();
            progress.follow();
            assert_eq!(
                progress.counts,
                Counts {
                    throttled: 1,
                    premature: 1,
                    compliant: 0
                }
            );
            assert_eq!(
                progress.line(start + Duration::from_millis(4200), 17),
                " 4.2s / 20s  requests 17  throttled 1  premature 1  compliant 0"
            );
        }
    }
}
