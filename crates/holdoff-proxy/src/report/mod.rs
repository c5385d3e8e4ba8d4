//! What a run found, for people and for CI: the events of a run ([`Recorder`], [`Event`],
//! the event log), and the [`Report`] built from them, written as JSON, JUnit XML, Markdown
//! or a self-contained HTML page, plus the summary printed at the end of a run.
//!
//! ```
//! use std::time::{Duration, SystemTime};
//! use holdoff_proxy::judge::Verdict;
//! use holdoff_proxy::report::{Event, Format, HintKind, RunOutcome, Report};
//!
//! let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1_740_830_400);
//! let at = |ms| t0 + Duration::from_millis(ms);
//! let events = [
//!     Event::Throttle {
//!         at: at(0),
//!         client: "alice".into(),
//!         user_agent: Some("curl/8.5.0".into()),
//!         method: "GET".into(),
//!         url: "http://api.example/items".into(),
//!         status: 429,
//!         permitted_at: Some(at(2000)),
//!         hint: HintKind::Usable,
//!         header: Some("retry-after".into()),
//!         value: Some("2".into()),
//!         reading: Some("a delay, counted from the response".into()),
//!     },
//!     Event::Retry {
//!         verdict: Verdict::Premature,
//!         client: "alice".into(),
//!         user_agent: Some("curl/8.5.0".into()),
//!         idempotency_key: false,
//!         method: "GET".into(),
//!         url: "http://api.example/items".into(),
//!         throttled_at: at(0),
//!         permitted_at: Some(at(2000)),
//!         retried_at: at(100),
//!         early_by_ms: Some(1900.0),
//!         late_by_ms: None,
//!     },
//! ];
//! let report = Report::from_events(&events);
//! assert_eq!(report.outcome(), RunOutcome::Fail);
//! let markdown = report.render(Format::Markdown);
//! assert!(markdown.contains("1.90 s"));
//! assert!(markdown.contains("`Retry-After: 2` read as a delay, counted from the response"));
//! ```
//!
//! # Time
//!
//! Events carry wall times ([`SystemTime`]), written as RFC 3339 in UTC with milliseconds.
//! Nothing here reads a clock: the recorder is given the times of the start and the finish,
//! and the judge those of throttles and retries.

mod document;
mod event;
mod herd;
mod html;
mod junit;
mod markdown;
mod outcome;
mod recorder;
mod tally;
mod terminal;
mod text;
mod time;

use std::error::Error as StdError;
use std::fmt;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::{Duration, SystemTime};

use serde::Serialize;

pub use event::{Event, HintKind, RunInfo};
pub use herd::{Herd, PERMITTED_TOLERANCE, RESUME_SPREAD};
pub use outcome::RunOutcome;
pub use recorder::{LogLimit, Recorder};
pub use tally::{
    LATENESS_SAMPLE, LISTED_ENDPOINTS, LISTED_HERDS, LISTED_VIOLATIONS, Omitted, TIMELINE_ROWS,
};

use crate::FaultCounts;
use crate::judge::Verdict;

/// `s` escaped for XML and HTML text and attribute values: `& < > " '` as entities, and the
/// characters XML 1.0 forbids even as entities replaced by U+FFFD. For reports written beside
/// these ones, such as `holdoff check`'s.
pub fn escape_markup(s: &str) -> std::borrow::Cow<'_, str> {
    text::xml(s)
}
use time::{rfc3339, rfc3339_option};

/// How close a retry's `throttled_at` must be to a throttle event's time for both to be one
/// window.
const SAME_WINDOW: Duration = Duration::from_millis(5);

/// A report format.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Format {
    /// JSON, for tools: `{"verdict": "pass"|"fail"|"not_tested", "requests": N, …}`.
    Json,
    /// JUnit XML, for CI test tabs: one test case per client and endpoint (or one failing
    /// case when no request reached the proxy).
    Junit,
    /// Markdown, for a pull-request comment.
    Markdown,
    /// One self-contained HTML page with a timeline chart per client.
    Html,
}

impl Format {
    /// Every format, in the order reports are listed.
    pub const ALL: [Format; 4] = [Format::Json, Format::Junit, Format::Markdown, Format::Html];

    /// Its name on the command line: `json`, `junit`, `md`, `html`.
    pub fn name(self) -> &'static str {
        match self {
            Format::Json => "json",
            Format::Junit => "junit",
            Format::Markdown => "md",
            Format::Html => "html",
        }
    }

    /// The format a file name's extension suggests: `.json`, `.xml`, `.md`, `.html`/`.htm`.
    pub fn from_extension(path: &Path) -> Option<Format> {
        let ext = path.extension()?.to_str()?.to_ascii_lowercase();
        match ext.as_str() {
            "json" => Some(Format::Json),
            "xml" => Some(Format::Junit),
            "md" | "markdown" => Some(Format::Markdown),
            "html" | "htm" => Some(Format::Html),
            _ => None,
        }
    }
}

impl fmt::Display for Format {
    /// Its name for people: `JSON`, `JUnit`, `Markdown`, `HTML`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Format::Json => "JSON",
            Format::Junit => "JUnit",
            Format::Markdown => "Markdown",
            Format::Html => "HTML",
        })
    }
}

impl FromStr for Format {
    type Err = String;

    /// `json`, `junit`, `md` (or `markdown`), `html`, in any case.
    fn from_str(s: &str) -> Result<Format, String> {
        match s.to_ascii_lowercase().as_str() {
            "json" => Ok(Format::Json),
            "junit" | "xml" => Ok(Format::Junit),
            "md" | "markdown" => Ok(Format::Markdown),
            "html" => Ok(Format::Html),
            _ => Err(format!(
                "unknown report format `{s}` (use json, junit, md or html)"
            )),
        }
    }
}

/// The broad reason an event log could not be read.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ReportErrorKind {
    /// The file could not be read.
    Io,
    /// A line is not an event; see [`ReportError::line`].
    Invalid,
}

/// Why [`Report::read_log`] failed. `Display` names the file (and the line); the cause is
/// in [`source`](StdError::source).
#[derive(Debug)]
pub struct ReportError {
    path: PathBuf,
    line: Option<usize>,
    source: Box<dyn StdError + Send + Sync>,
}

/// What is wrong with a line of an event log.
#[derive(Debug)]
struct InvalidLine(String);

impl fmt::Display for InvalidLine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl StdError for InvalidLine {}

impl ReportError {
    /// The broad reason.
    pub fn kind(&self) -> ReportErrorKind {
        match self.line {
            Some(_) => ReportErrorKind::Invalid,
            None => ReportErrorKind::Io,
        }
    }

    /// The event log.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The line that is not an event (from 1), for [`ReportErrorKind::Invalid`].
    pub fn line(&self) -> Option<usize> {
        self.line
    }
}

impl fmt::Display for ReportError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "read the event log {}", self.path.display())?;
        if let Some(line) = self.line {
            write!(f, ":{line}")?;
        }
        Ok(())
    }
}

impl StdError for ReportError {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        Some(&*self.source)
    }
}

/// Retries by verdict.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
struct Retries {
    compliant: usize,
    premature: usize,
    read_as_zero: usize,
    no_backoff: usize,
}

/// Throttles by what their hint was.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct HintCounts {
    /// With a hint the judge could read.
    pub usable: usize,
    /// With a hint that could not be read.
    pub malformed: usize,
    /// With no hint at all.
    pub none: usize,
    /// With a hint too long for the clock: a window that never closes.
    pub unbounded: usize,
}

impl HintCounts {
    fn add(&mut self, hint: HintKind) {
        match hint {
            HintKind::Usable => self.usable += 1,
            HintKind::Malformed => self.malformed += 1,
            HintKind::None => self.none += 1,
            HintKind::Unbounded => self.unbounded += 1,
        }
    }
}

/// A retry that broke its window (or, in [`Report::warnings`], came without backoff after a
/// throttle with no hint).
#[derive(Clone, Debug, PartialEq, Serialize)]
#[non_exhaustive]
pub struct Violation {
    /// What kind: `premature`, `read_as_zero` or `no_backoff`.
    pub kind: Verdict,
    /// Who retried.
    pub client: String,
    /// The retry's `User-Agent`, if it had one.
    pub user_agent: Option<String>,
    /// The method.
    pub method: String,
    /// The URL.
    pub url: String,
    /// When the window opened.
    #[serde(with = "rfc3339")]
    pub throttled_at: SystemTime,
    /// When a retry was permitted; `None` for a window that never closes.
    #[serde(with = "rfc3339_option")]
    pub permitted_at: Option<SystemTime>,
    /// When the retry came.
    #[serde(with = "rfc3339")]
    pub retried_at: SystemTime,
    /// How early, in milliseconds; `None` inside a window that never closes.
    pub early_by_ms: Option<f64>,
    /// The throttled response's status, when its throttle was recorded.
    pub status: Option<u16>,
    /// How the judge read the throttle's hint, when its throttle was recorded.
    pub judged_by: Option<JudgedBy>,
    /// Why it is a violation, one sentence.
    pub why: String,
}

/// What happened under one client, method and URL: a *window family*, one JUnit test case.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[non_exhaustive]
pub struct Endpoint {
    /// The client.
    pub client: String,
    /// The `User-Agent`s its requests carried, sorted, each once.
    pub user_agents: Vec<String>,
    /// The method.
    pub method: String,
    /// The URL.
    pub url: String,
    /// How many throttled responses it got.
    pub throttles: usize,
    /// Those throttles by what their hint was.
    pub throttles_by_hint: HintCounts,
    /// How many of its retries were compliant.
    pub compliant: usize,
    /// How many were premature.
    pub premature: usize,
    /// How many came sooner than the minimum backoff after a malformed hint.
    pub read_as_zero: usize,
    /// How many came sooner than the minimum backoff after a throttle with no hint.
    pub no_backoff: usize,
    /// The earliest premature retry, in milliseconds before its permitted time.
    pub worst_early_by_ms: Option<f64>,
    /// How the judge read its throttles' hints, each way once (the first value as the
    /// example; at most three).
    pub judged_by: Vec<JudgedBy>,
}

/// How the judge read a throttle's hint: which header decided, its value, and the reading.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct JudgedBy {
    /// What the hint was.
    pub hint: HintKind,
    /// The header that decided (or could not be read), lowercase.
    pub header: Option<String>,
    /// Its value, as sent.
    pub value: Option<String>,
    /// The judge's reading, for people, e.g. `a delay, counted from the response`.
    pub reading: Option<String>,
}

impl JudgedBy {
    /// The header and its value as code, `Retry-After: 2`, if a header decided.
    pub(crate) fn code(&self) -> Option<String> {
        let header = text::header_name(self.header.as_deref()?);
        Some(format!("{header}: {}", self.value.as_deref().unwrap_or("")))
    }

    /// What follows the code: `read as a delay, …`, or the reading of a hint the judge could
    /// not use.
    pub(crate) fn how(&self) -> String {
        let reading = self.reading.as_deref();
        match self.hint {
            HintKind::Usable => format!("read as {}", reading.unwrap_or("a usable hint")),
            HintKind::Malformed => reading.unwrap_or("malformed, so never zero").to_owned(),
            HintKind::None => reading.unwrap_or("no hint").to_owned(),
            HintKind::Unbounded => reading
                .unwrap_or("beyond the clock's range: a window that never closes")
                .to_owned(),
        }
    }

    /// In plain text, with the code in backticks.
    pub(crate) fn plain(&self) -> String {
        self.text().to_plain()
    }

    /// Whether `other` is the same reading of the same header, whatever its value.
    fn same_way(&self, other: &JudgedBy) -> bool {
        (self.hint, &self.header, &self.reading) == (other.hint, &other.header, &other.reading)
    }
}

/// How many different readings an endpoint lists.
const JUDGED_BY: usize = 3;

impl Endpoint {
    /// Whether any of its retries failed the run.
    fn failed(&self, fail_on_no_backoff: bool) -> bool {
        self.premature + self.read_as_zero > 0 || (fail_on_no_backoff && self.no_backoff > 0)
    }
}

/// How late compliant retries came, in milliseconds after their permitted time.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
#[non_exhaustive]
pub struct Lateness {
    /// How many compliant retries.
    pub count: usize,
    /// The median (nearest rank).
    pub p50_ms: f64,
    /// The 90th percentile (nearest rank).
    pub p90_ms: f64,
    /// The latest.
    pub max_ms: f64,
}

/// A window, for the timeline: from a throttle, or (when its throttle was not recorded, or a
/// sliding penalty restarted it) from a retry's times.
#[derive(Clone, Debug)]
struct WindowRow {
    client: String,
    user_agent: Option<String>,
    method: String,
    url: String,
    from: SystemTime,
    /// `None`: a window that never closes.
    to: Option<SystemTime>,
    /// The throttled response's status; `None` for a window known only from a retry.
    status: Option<u16>,
    /// What the hint was; `None` for a window known only from a retry.
    hint: Option<HintKind>,
    /// How the judge read the hint; `None` for a window known only from a retry.
    judged_by: Option<JudgedBy>,
}

/// A retry, for the timeline and the test cases.
#[derive(Clone, Debug)]
struct RetryRow {
    verdict: Verdict,
    client: String,
    user_agent: Option<String>,
    method: String,
    url: String,
    throttled_at: SystemTime,
    permitted_at: Option<SystemTime>,
    retried_at: SystemTime,
    /// How early (a violation) or late (compliant), in milliseconds; `None` when early inside
    /// a window that never closes.
    by_ms: Option<f64>,
    /// Its window in [`Report::windows`], once linked.
    window: Option<usize>,
}

/// What a run found, built from its events with [`Report::from_events`] and written in any
/// [`Format`]. Serializes as the JSON report.
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    verdict: RunOutcome,
    requests: u64,
    throttled: usize,
    throttled_by_hint: HintCounts,
    retries: Retries,
    violations: Vec<Violation>,
    /// Retries without backoff after a throttle with no hint, when they do not fail the run.
    warnings: Vec<Violation>,
    user_agents: Vec<String>,
    #[serde(with = "rfc3339_option")]
    started_at: Option<SystemTime>,
    #[serde(with = "rfc3339_option")]
    finished_at: Option<SystemTime>,
    duration_ms: Option<f64>,
    /// Whether the log ends with a finish event (a run cut short has none).
    complete: bool,
    seed: Option<u64>,
    source: Option<String>,
    command: Option<Vec<String>>,
    argv: Option<Vec<String>>,
    /// The command line that repeats the run, quoted for a POSIX shell.
    reproduce: Option<String>,
    allow_no_traffic: bool,
    fail_on_no_backoff: bool,
    proxy_url: Option<String>,
    judge_key: Option<String>,
    exit_code: Option<i32>,
    /// Intercepted tunnels whose TLS handshake with the client failed. Left out when 0.
    #[serde(skip_serializing_if = "is_zero")]
    interception_failures: u64,
    faults: Option<FaultCounts>,
    lateness: Option<Lateness>,
    herds: Vec<Herd>,
    endpoints: Vec<Endpoint>,
    /// What was counted but not listed; left out when nothing was.
    #[serde(skip_serializing_if = "Omitted::is_empty")]
    omitted: Omitted,
    /// The first windows, for the timeline.
    #[serde(skip)]
    windows: Vec<WindowRow>,
    /// The first retries, for the timeline.
    #[serde(skip)]
    all_retries: Vec<RetryRow>,
    /// Compliant retries per lateness bucket of the HTML histogram.
    #[serde(skip)]
    late_buckets: [usize; html::BUCKET_COUNT],
    /// The first and last times any event shows.
    #[serde(skip)]
    first_at: Option<SystemTime>,
    #[serde(skip)]
    last_at: Option<SystemTime>,
}

impl Report {
    /// The report of a run's events (in the order recorded). Any events make a report: without
    /// a start or a finish, the run's details are missing, and `requests` counts the requests
    /// the events show.
    pub fn from_events(events: &[Event]) -> Report {
        let mut tally = tally::Tally::default();
        for event in events {
            tally.add(event);
        }
        tally.into_report()
    }

    /// A report of nothing yet.
    fn empty() -> Report {
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
            faults: None,
            lateness: None,
            herds: Vec::new(),
            endpoints: Vec::new(),
            omitted: Omitted::default(),
            windows: Vec::new(),
            all_retries: Vec::new(),
            late_buckets: [0; html::BUCKET_COUNT],
            first_at: None,
            last_at: None,
        }
    }

    /// Widens the span of times shown to take in `at`.
    fn seen(&mut self, at: SystemTime) {
        self.first_at = Some(self.first_at.map_or(at, |f| f.min(at)));
        self.last_at = Some(self.last_at.map_or(at, |l| l.max(at)));
    }

    /// The command line that repeats the run: the one recorded, else (an older log) what the
    /// seed and the command say.
    fn reproduce_line(&self) -> String {
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

    /// Reads an event log: one JSON event per line, as [`Recorder`] writes it. Blank lines
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

    /// The report of an event log, read a line at a time: memory does not grow with the log.
    ///
    /// # Errors
    ///
    /// As [`Report::read_log`].
    pub fn from_log(path: &Path) -> Result<Report, ReportError> {
        let mut tally = tally::Tally::default();
        each_event(path, |event| tally.add(&event))?;
        Ok(tally.into_report())
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

    /// The retries without backoff after a throttle with no hint that do not fail the run, in
    /// the order they came.
    pub fn warnings(&self) -> &[Violation] {
        &self.warnings
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
    /// [`LISTED_VIOLATIONS`], endpoints beyond [`LISTED_ENDPOINTS`], timeline rows beyond
    /// [`TIMELINE_ROWS`], herds beyond [`LISTED_HERDS`].
    pub fn omitted(&self) -> Omitted {
        self.omitted
    }

    /// The herds found (the first [`LISTED_HERDS`]).
    pub fn herds(&self) -> &[Herd] {
        &self.herds
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

    /// The report in `format`.
    pub fn render(&self, format: Format) -> String {
        match format {
            Format::Json => {
                // Serializing plain structs with string keys cannot fail.
                let mut json = serde_json::to_string_pretty(self).unwrap_or_default();
                json.push('\n');
                json
            }
            Format::Junit => junit::render(self),
            Format::Markdown => markdown::render(self),
            Format::Html => html::render(self),
        }
    }

    /// Writes the report in `format` to `path` (created or truncated).
    ///
    /// # Errors
    ///
    /// When the file cannot be written.
    pub fn write(&self, format: Format, path: &Path) -> io::Result<()> {
        fs::write(path, self.render(format))
    }

    /// The summary printed at the end of a run: the verdict and counts, the worst offenders
    /// (the five earliest violations), the warnings, the herds, and each report written; when
    /// no request reached the proxy, the usual causes and their fixes.
    pub fn terminal_summary(&self, written: &[(Format, PathBuf)]) -> String {
        terminal::render(self, written)
    }

    /// The first and last times the report shows: the start (or first event) and the finish
    /// (or last event, or the last permitted time if later).
    fn span(&self) -> Option<(SystemTime, SystemTime)> {
        let first = self.started_at.or(self.first_at)?;
        Some((first, self.last_at.unwrap_or(first).max(first)))
    }

    /// How times are shown in tables.
    fn times(&self) -> text::Times {
        match self.span() {
            Some((first, last)) => text::Times::new(Some(first), Some(last)),
            None => text::Times::new(None, None),
        }
    }

    /// A sentence on the `left_out` violations (or warnings) beyond those the reports list,
    /// if there are any.
    fn unlisted(left_out: usize) -> Option<String> {
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
    fn fails(&self, verdict: Verdict) -> bool {
        match verdict {
            Verdict::Premature | Verdict::ReadAsZero => true,
            Verdict::NoBackoff => self.fail_on_no_backoff,
            _ => false,
        }
    }
}

impl Lateness {
    /// The percentiles of `ms` (sorted in place); `None` when empty.
    fn of(ms: &mut [f64]) -> Option<Lateness> {
        ms.sort_by(f64::total_cmp);
        let rank = |p: f64| {
            let n = ms.len() as f64;
            let i = ((p / 100.0) * n).ceil() as usize;
            ms[i.clamp(1, ms.len()) - 1]
        };
        let max = *ms.last()?;
        Some(Lateness {
            count: ms.len(),
            p50_ms: rank(50.0),
            p90_ms: rank(90.0),
            max_ms: max,
        })
    }
}

fn is_zero(count: &u64) -> bool {
    *count == 0
}

/// Calls `each` with every event of the log at `path`, a line at a time.
fn each_event(path: &Path, mut each: impl FnMut(Event)) -> Result<(), ReportError> {
    use std::io::BufRead;

    let io_error = |err: io::Error| ReportError {
        path: path.to_path_buf(),
        line: None,
        source: Box::new(err),
    };
    let mut reader = io::BufReader::new(fs::File::open(path).map_err(io_error)?);
    let mut line = Vec::new();
    let mut number = 0;
    loop {
        line.clear();
        if reader.read_until(b'\n', &mut line).map_err(io_error)? == 0 {
            return Ok(());
        }
        number += 1;
        let text = line.strip_suffix(b"\n").unwrap_or(&line);
        let text = text.strip_suffix(b"\r").unwrap_or(text);
        if text.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let event = serde_json::from_slice::<Event>(text).map_err(|err| ReportError {
            path: path.to_path_buf(),
            line: Some(number),
            source: Box::new(InvalidLine(describe(&err))),
        })?;
        each(event);
    }
}

/// serde_json's message for a line, with the column but without "line 1".
fn describe(err: &serde_json::Error) -> String {
    let message = err.to_string();
    let message = message
        .rsplit_once(" at line ")
        .map_or(message.as_str(), |(m, _)| m);
    if err.column() > 0 {
        format!("{message} (column {})", err.column())
    } else {
        message.to_owned()
    }
}

#[cfg(test)]
mod tests;
