//! The [`Report`] of a run: what it holds and what it answers. It is built in `tally` (from
//! events or a log) and written in `write`.

use std::path::Path;
use std::time::SystemTime;

use serde::Serialize;

use super::event::Event;
use super::herd::Herd;
use super::log::{ReportError, each_event};
use super::parts::{
    BUCKET_COUNT, Endpoint, HintCounts, LISTED_VIOLATIONS, Lateness, Omitted, Retries, RetryRow,
    RunOutcome, Violation, WindowRow,
};
use super::text;
use super::time::rfc3339_option;
use crate::judge::Verdict;
use crate::stages::FaultCounts;

/// What a run found, built from its events with [`Report::from_events`] and written in any
/// [`Format`](super::Format). Serializes as the JSON report.
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    pub(super) verdict: RunOutcome,
    pub(super) requests: u64,
    pub(super) throttled: usize,
    pub(super) throttled_by_hint: HintCounts,
    pub(super) retries: Retries,
    pub(super) violations: Vec<Violation>,
    /// Retries without backoff after a throttle with no hint, when they do not fail the run.
    pub(super) warnings: Vec<Violation>,
    pub(super) user_agents: Vec<String>,
    #[serde(with = "rfc3339_option")]
    pub(super) started_at: Option<SystemTime>,
    #[serde(with = "rfc3339_option")]
    pub(super) finished_at: Option<SystemTime>,
    pub(super) duration_ms: Option<f64>,
    /// Whether the log ends with a finish event (a run cut short has none).
    pub(super) complete: bool,
    pub(super) seed: Option<u64>,
    pub(super) source: Option<String>,
    pub(super) command: Option<Vec<String>>,
    pub(super) argv: Option<Vec<String>>,
    /// The command line that repeats the run, quoted for a POSIX shell.
    pub(super) reproduce: Option<String>,
    pub(super) allow_no_traffic: bool,
    pub(super) fail_on_no_backoff: bool,
    pub(super) proxy_url: Option<String>,
    pub(super) judge_key: Option<String>,
    pub(super) exit_code: Option<i32>,
    /// Intercepted tunnels whose TLS handshake with the client failed. Left out when 0.
    #[serde(skip_serializing_if = "is_zero")]
    pub(super) interception_failures: u64,
    /// Judge windows dropped at the cap on open windows: retries under them went unjudged.
    /// Left out when 0.
    #[serde(skip_serializing_if = "is_zero")]
    pub(super) evicted_windows: u64,
    pub(super) faults: Option<FaultCounts>,
    pub(super) lateness: Option<Lateness>,
    pub(super) herds: Vec<Herd>,
    pub(super) endpoints: Vec<Endpoint>,
    /// What was counted but not listed; left out when nothing was.
    #[serde(skip_serializing_if = "Omitted::is_empty")]
    pub(super) omitted: Omitted,
    /// The first windows, for the timeline.
    #[serde(skip)]
    pub(super) windows: Vec<WindowRow>,
    /// The first retries, for the timeline.
    #[serde(skip)]
    pub(super) all_retries: Vec<RetryRow>,
    /// Compliant retries per lateness bucket of the HTML histogram.
    #[serde(skip)]
    pub(super) late_buckets: [usize; BUCKET_COUNT],
    /// The first and last times any event shows.
    #[serde(skip)]
    pub(super) first_at: Option<SystemTime>,
    #[serde(skip)]
    pub(super) last_at: Option<SystemTime>,
}

impl Report {
    /// A report of nothing yet.
    pub(super) fn empty() -> Report {
        Report {
            verdict: RunOutcome::Pass,
            requests: 0,
            throttled: 0,
            throttled_by_hint: HintCounts::default(),
            retries: Retries::default(),
            violations: Vec::new(),
            warnings: Vec::new(),
            user_agents: Vec::new(),
            started_at: None,
            finished_at: None,
            duration_ms: None,
            complete: false,
            seed: None,
            source: None,
            command: None,
            argv: None,
            reproduce: None,
            allow_no_traffic: false,
            fail_on_no_backoff: false,
            proxy_url: None,
            judge_key: None,
            exit_code: None,
            interception_failures: 0,
            evicted_windows: 0,
            faults: None,
            lateness: None,
            herds: Vec::new(),
            endpoints: Vec::new(),
            omitted: Omitted::default(),
            windows: Vec::new(),
            all_retries: Vec::new(),
            late_buckets: [0; BUCKET_COUNT],
            first_at: None,
            last_at: None,
        }
    }

    /// Widens the span of times shown to take in `at`.
    pub(super) fn seen(&mut self, at: SystemTime) {
        self.first_at = Some(self.first_at.map_or(at, |f| f.min(at)));
        self.last_at = Some(self.last_at.map_or(at, |l| l.max(at)));
    }

    /// The command line that repeats the run: the one recorded, else (an older log) what the
    /// seed and the command say.
    pub(super) fn reproduce_line(&self) -> String {
        if let Some(argv) = &self.argv {
            return text::shell_words(argv);
        }
        let seed = self
            .seed
            .map(|s| format!(" --seed {s}"))
            .unwrap_or_default();
        match &self.command {
            Some(command) => format!("holdoff run{seed} -- {}", text::shell_words(command)),
            None => format!("holdoff proxy{seed}"),
        }
    }

    /// Reads an event log: one JSON event per line, as [`Recorder`](super::Recorder) writes it. Blank lines
    /// are skipped. To build a report from a long log, [`Report::from_log`] reads it without
    /// holding every event.
    ///
    /// # Errors
    ///
    /// When the file cannot be read, or a line is not an event (the error names the line and
    /// what is wrong with it).
    pub fn read_log(path: &Path) -> Result<Vec<Event>, ReportError> {
        let mut events = Vec::new();
        each_event(path, |event| events.push(event))?;
        Ok(events)
    }

    /// The verdict: pass, fail, or not tested (no request reached the proxy, or some could
    /// not: an interception failed).
    pub fn outcome(&self) -> RunOutcome {
        self.verdict
    }

    /// Whether the run passed: requests reached the proxy and no retry broke its window.
    /// Neither a failed run nor one that was not tested passed.
    pub fn passed(&self) -> bool {
        self.verdict == RunOutcome::Pass
    }

    /// Whether the run allows that no request reaches the proxy (`--allow-no-traffic`): a run
    /// not tested then does not fail. A failed interception is never allowed: the client did
    /// send requests, which the proxy could not see.
    pub fn allows_no_traffic(&self) -> bool {
        self.allow_no_traffic && self.interception_failures == 0
    }

    /// How many intercepted tunnels failed their TLS handshake with the client.
    pub fn interception_failures(&self) -> u64 {
        self.interception_failures
    }

    /// Judge windows dropped at the cap on open windows before they were judged.
    pub fn evicted_windows(&self) -> u64 {
        self.evicted_windows
    }

    /// How many retries were premature.
    pub fn premature(&self) -> usize {
        self.retries.premature
    }

    /// How many retries came sooner than the minimum backoff after a malformed hint.
    pub fn read_as_zero(&self) -> usize {
        self.retries.read_as_zero
    }

    /// How many retries came sooner than the minimum backoff after a throttle with no hint.
    pub fn no_backoff(&self) -> usize {
        self.retries.no_backoff
    }

    /// How many retries were compliant.
    pub fn compliant(&self) -> usize {
        self.retries.compliant
    }

    /// How many requests the proxy answered (0 when the log has no finish event).
    pub fn requests(&self) -> u64 {
        self.requests
    }

    /// How many throttled responses (windows opened) were recorded, hint or not.
    pub fn throttled(&self) -> usize {
        self.throttled
    }

    /// The throttled responses by what their hint was.
    pub fn throttled_by_hint(&self) -> HintCounts {
        self.throttled_by_hint
    }

    /// The retries that failed the run, in the order they came.
    pub fn violations(&self) -> &[Violation] {
        &self.violations
    }

    /// What does not fail the run but is worth a look, in the order it came: retries without
    /// backoff after a throttle with no hint (unless they fail the run), and requests inside
    /// the wait another process was told ([`Verdict::Sibling`]).
    pub fn warnings(&self) -> &[Violation] {
        &self.warnings
    }

    /// How many requests came inside the wait another process was told.
    pub fn siblings(&self) -> usize {
        self.retries.sibling
    }

    /// What the warnings are, for their heading: `Warnings: …`.
    pub(super) fn warnings_title(&self) -> &'static str {
        let no_backoff = self.retries.no_backoff > 0 && !self.fail_on_no_backoff;
        match (no_backoff, self.retries.sibling > 0) {
            (true, true) => {
                "Warnings: retries without backoff after a throttle with no hint, and requests \
                 inside the wait another process was told"
            }
            (false, true) => "Warnings: requests inside the wait another process was told",
            _ => "Warnings: retries without backoff after a throttle with no hint",
        }
    }

    /// The violations, the earliest (most early) first; inside a window that never closes
    /// counts as earliest of all.
    pub fn worst(&self) -> Vec<&Violation> {
        let mut worst: Vec<&Violation> = self.violations.iter().collect();
        let early = |v: &Violation| v.early_by_ms.unwrap_or(f64::INFINITY);
        worst.sort_by(|a, b| early(b).total_cmp(&early(a)));
        worst
    }

    /// What was counted but not listed: violations beyond the earliest
    /// [`LISTED_VIOLATIONS`], endpoints beyond [`LISTED_ENDPOINTS`](super::LISTED_ENDPOINTS), timeline rows beyond
    /// [`TIMELINE_ROWS`](super::TIMELINE_ROWS), herds beyond the first 1000.
    pub fn omitted(&self) -> Omitted {
        self.omitted
    }

    /// What happened per client, method and URL, sorted by client, then URL, then method.
    pub fn endpoints(&self) -> &[Endpoint] {
        &self.endpoints
    }

    /// How late compliant retries came, if any came.
    pub fn lateness(&self) -> Option<Lateness> {
        self.lateness
    }

    /// The seed the faults drew from, if the run had one.
    pub fn seed(&self) -> Option<u64> {
        self.seed
    }

    /// Where the run's faults came from (`preset throttle`, a config file, `pass-through`),
    /// if its start was recorded.
    pub fn source(&self) -> Option<&str> {
        self.source.as_deref()
    }

    /// The exit status of the command the run ran, if any.
    pub fn exit_code(&self) -> Option<i32> {
        self.exit_code
    }

    /// The command line that repeats the run, quoted for a POSIX shell.
    pub fn reproduce(&self) -> &str {
        self.reproduce.as_deref().unwrap_or_default()
    }

    /// Whether the log ends with a finish event; a run cut short has none.
    pub fn is_complete(&self) -> bool {
        self.complete
    }

    /// The first and last times the report shows: the start (or first event) and the finish
    /// (or last event, or the last permitted time if later).
    pub(super) fn span(&self) -> Option<(SystemTime, SystemTime)> {
        let first = self.started_at.or(self.first_at)?;
        Some((first, self.last_at.unwrap_or(first).max(first)))
    }

    /// How times are shown in tables.
    pub(super) fn times(&self) -> text::Times {
        match self.span() {
            Some((first, last)) => text::Times::new(Some(first), Some(last)),
            None => text::Times::new(None, None),
        }
    }

    /// A sentence on the `left_out` violations (or warnings) beyond those the reports list,
    /// if there are any.
    pub(super) fn unlisted(left_out: usize) -> Option<String> {
        (left_out > 0).then(|| {
            format!(
                "{} more {} not listed: the reports keep the {} earliest, the event log \
                 (--events) has every one",
                left_out,
                if left_out == 1 { "is" } else { "are" },
                LISTED_VIOLATIONS
            )
        })
    }

    /// Whether a verdict counts against the run.
    pub(super) fn fails(&self, verdict: Verdict) -> bool {
        match verdict {
            Verdict::Premature | Verdict::ReadAsZero => true,
            Verdict::NoBackoff => self.fail_on_no_backoff,
            Verdict::Sibling | Verdict::Compliant => false,
        }
    }
}

fn is_zero(count: &u64) -> bool {
    *count == 0
}
