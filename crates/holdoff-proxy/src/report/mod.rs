//! What a run found, for people and for CI: the events of a run ([`Recorder`], [`Event`],
//! the event log), and the [`Report`] built from them, written as JSON, JUnit XML, Markdown
//! or a self-contained HTML page, plus the summary printed at the end of a run.
//!
//! ```
//! use std::time::{Duration, SystemTime};
//! use holdoff_proxy::judge::Verdict;
//! use holdoff_proxy::report::{Event, Format, Report};
//!
//! let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1_740_830_400);
//! let at = |ms| t0 + Duration::from_millis(ms);
//! let events = [
//!     Event::Throttle {
//!         at: at(0),
//!         client: "alice".into(),
//!         method: "GET".into(),
//!         url: "http://api.example/items".into(),
//!         status: 429,
//!         permitted_at: at(2000),
//!     },
//!     Event::Retry {
//!         verdict: Verdict::Premature,
//!         client: "alice".into(),
//!         method: "GET".into(),
//!         url: "http://api.example/items".into(),
//!         throttled_at: at(0),
//!         permitted_at: at(2000),
//!         retried_at: at(100),
//!         early_by_ms: Some(1900.0),
//!         late_by_ms: None,
//!     },
//! ];
//! let report = Report::from_events(&events);
//! assert!(!report.passed());
//! assert!(report.render(Format::Markdown).contains("1.90 s"));
//! ```
//!
//! # Time
//!
//! Events carry wall times ([`SystemTime`]), written as RFC 3339 in UTC with milliseconds.
//! Nothing here reads a clock: the recorder is given the times of the start and the finish,
//! and the judge those of throttles and retries.

mod event;
mod herd;
mod html;
mod junit;
mod markdown;
mod recorder;
mod terminal;
mod text;
mod time;

use std::collections::{BTreeMap, HashMap};
use std::error::Error as StdError;
use std::fmt;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::{Duration, SystemTime};

use serde::Serialize;

pub use event::{Event, RunInfo};
pub use herd::{Herd, PERMITTED_TOLERANCE, RESUME_SPREAD};
pub use recorder::Recorder;

use crate::fault::FaultCounts;
use crate::judge::Verdict;
use time::{rfc3339, rfc3339_option};

/// How close a retry's `throttled_at` must be to a throttle event's time for both to be one
/// window.
const SAME_WINDOW: Duration = Duration::from_millis(5);

/// A report format.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Format {
    /// JSON, for tools: `{"verdict": "pass"|"fail", "requests": N, …}`.
    Json,
    /// JUnit XML, for CI test tabs: one test case per client and endpoint.
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

/// Whether the run passed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
enum Outcome {
    Pass,
    Fail,
}

/// Compliant and premature retries.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
struct Retries {
    compliant: usize,
    premature: usize,
}

/// A premature retry.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[non_exhaustive]
pub struct Violation {
    /// Who retried.
    pub client: String,
    /// The method.
    pub method: String,
    /// The URL.
    pub url: String,
    /// When the window opened.
    #[serde(with = "rfc3339")]
    pub throttled_at: SystemTime,
    /// When a retry was permitted.
    #[serde(with = "rfc3339")]
    pub permitted_at: SystemTime,
    /// When the retry came.
    #[serde(with = "rfc3339")]
    pub retried_at: SystemTime,
    /// How early, in milliseconds.
    pub early_by_ms: f64,
}

/// What happened under one client, method and URL: a *window family*, one JUnit test case.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[non_exhaustive]
pub struct Endpoint {
    /// The client.
    pub client: String,
    /// The method.
    pub method: String,
    /// The URL.
    pub url: String,
    /// How many throttled responses it got.
    pub throttles: usize,
    /// How many of its retries were compliant.
    pub compliant: usize,
    /// How many were premature.
    pub premature: usize,
    /// The earliest premature retry, in milliseconds before its permitted time.
    pub worst_early_by_ms: Option<f64>,
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
    method: String,
    url: String,
    from: SystemTime,
    to: SystemTime,
    /// The throttled response's status; `None` for a window known only from a retry.
    status: Option<u16>,
}

/// A retry, for the timeline and the test cases.
#[derive(Clone, Debug)]
struct RetryRow {
    verdict: Verdict,
    client: String,
    method: String,
    url: String,
    throttled_at: SystemTime,
    permitted_at: SystemTime,
    retried_at: SystemTime,
    /// How early (premature) or late (compliant), in milliseconds.
    by_ms: f64,
}

/// What a run found, built from its events with [`Report::from_events`] and written in any
/// [`Format`]. Serializes as the JSON report.
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    verdict: Outcome,
    requests: u64,
    throttled: usize,
    retries: Retries,
    violations: Vec<Violation>,
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
    proxy_url: Option<String>,
    judge_key: Option<String>,
    exit_code: Option<i32>,
    faults: Option<FaultCounts>,
    lateness: Option<Lateness>,
    herds: Vec<Herd>,
    endpoints: Vec<Endpoint>,
    #[serde(skip)]
    windows: Vec<WindowRow>,
    #[serde(skip)]
    all_retries: Vec<RetryRow>,
}

impl Report {
    /// The report of a run's events (in the order recorded). Any events make a report: without
    /// a start or a finish, the run's details are missing and `requests` is 0.
    pub fn from_events(events: &[Event]) -> Report {
        let mut report = Report {
            verdict: Outcome::Pass,
            requests: 0,
            throttled: 0,
            retries: Retries::default(),
            violations: Vec::new(),
            started_at: None,
            finished_at: None,
            duration_ms: None,
            complete: false,
            seed: None,
            source: None,
            command: None,
            proxy_url: None,
            judge_key: None,
            exit_code: None,
            faults: None,
            lateness: None,
            herds: Vec::new(),
            endpoints: Vec::new(),
            windows: Vec::new(),
            all_retries: Vec::new(),
        };
        for event in events {
            report.add(event);
        }
        report.windows_from_retries();
        report.summarise();
        report
    }

    fn add(&mut self, event: &Event) {
        match event {
            Event::Start {
                at,
                seed,
                source,
                command,
                proxy_url,
                judge_key,
            } => {
                // Logs appended to one another: the first start counts.
                if self.started_at.is_none() {
                    self.started_at = Some(*at);
                    self.seed = *seed;
                    self.source = Some(source.clone());
                    self.command.clone_from(command);
                    self.proxy_url = Some(proxy_url.clone());
                    self.judge_key = Some(judge_key.clone());
                }
            }
            Event::Throttle {
                at,
                client,
                method,
                url,
                status,
                permitted_at,
            } => {
                self.throttled += 1;
                self.windows.push(WindowRow {
                    client: client.clone(),
                    method: method.clone(),
                    url: url.clone(),
                    from: *at,
                    to: *permitted_at,
                    status: Some(*status),
                });
            }
            Event::Retry {
                verdict,
                client,
                method,
                url,
                throttled_at,
                permitted_at,
                retried_at,
                early_by_ms,
                late_by_ms,
            } => {
                // A hand-made log may leave the duration out: the times say it.
                let by_ms = match verdict {
                    Verdict::Premature => early_by_ms
                        .unwrap_or_else(|| time::millis_between(*retried_at, *permitted_at)),
                    Verdict::Compliant => late_by_ms
                        .unwrap_or_else(|| time::millis_between(*permitted_at, *retried_at)),
                };
                self.all_retries.push(RetryRow {
                    verdict: *verdict,
                    client: client.clone(),
                    method: method.clone(),
                    url: url.clone(),
                    throttled_at: *throttled_at,
                    permitted_at: *permitted_at,
                    retried_at: *retried_at,
                    by_ms: by_ms.max(0.0),
                });
            }
            Event::Finish {
                at,
                requests,
                faults,
                exit_code,
            } => {
                self.finished_at = Some(*at);
                self.requests = *requests;
                self.faults = Some(*faults);
                self.exit_code = *exit_code;
                self.complete = true;
            }
        }
    }

    /// Windows the retries know of that no throttle event opened. A retry's window is the
    /// throttle's when they start within [`SAME_WINDOW`] of each other: the judge derives the
    /// wall times of the two from different clock readings.
    fn windows_from_retries(&mut self) {
        let mut known: HashMap<(&str, &str, &str), Vec<SystemTime>> = HashMap::new();
        for w in &self.windows {
            known
                .entry((&w.client, &w.method, &w.url))
                .or_default()
                .push(w.from);
        }
        let mut added = Vec::new();
        for retry in &self.all_retries {
            let starts = known
                .entry((&retry.client, &retry.method, &retry.url))
                .or_default();
            let near = |t: &SystemTime| {
                time::millis_between(*t, retry.throttled_at).abs()
                    <= SAME_WINDOW.as_secs_f64() * 1000.0
            };
            if !starts.iter().any(near) {
                starts.push(retry.throttled_at);
                added.push(WindowRow {
                    client: retry.client.clone(),
                    method: retry.method.clone(),
                    url: retry.url.clone(),
                    from: retry.throttled_at,
                    to: retry.permitted_at,
                    status: None,
                });
            }
        }
        self.windows.extend(added);
    }

    /// The counts, violations, lateness, herds and endpoints, from the rows.
    fn summarise(&mut self) {
        let mut endpoints = BTreeMap::new();
        for w in self.windows.iter().filter(|w| w.status.is_some()) {
            endpoint(&mut endpoints, &w.client, &w.method, &w.url).throttles += 1;
        }
        let mut lateness = Vec::new();
        let mut resumes = Vec::new();
        for r in &self.all_retries {
            let e = endpoint(&mut endpoints, &r.client, &r.method, &r.url);
            match r.verdict {
                Verdict::Premature => {
                    self.retries.premature += 1;
                    e.premature += 1;
                    e.worst_early_by_ms =
                        Some(e.worst_early_by_ms.map_or(r.by_ms, |w| w.max(r.by_ms)));
                    self.violations.push(Violation {
                        client: r.client.clone(),
                        method: r.method.clone(),
                        url: r.url.clone(),
                        throttled_at: r.throttled_at,
                        permitted_at: r.permitted_at,
                        retried_at: r.retried_at,
                        early_by_ms: r.by_ms,
                    });
                }
                Verdict::Compliant => {
                    self.retries.compliant += 1;
                    e.compliant += 1;
                    lateness.push(r.by_ms);
                    resumes.push(herd::Resume {
                        client: &r.client,
                        permitted_at: r.permitted_at,
                        retried_at: r.retried_at,
                    });
                }
            }
        }
        self.endpoints = endpoints.into_values().collect();
        self.herds = herd::detect(&resumes);
        self.violations.sort_by_key(|v| v.retried_at);
        self.lateness = Lateness::of(&mut lateness);
        self.verdict = if self.retries.premature == 0 {
            Outcome::Pass
        } else {
            Outcome::Fail
        };
        self.duration_ms = match (self.started_at, self.finished_at) {
            (Some(start), Some(end)) => Some(time::millis_between(start, end).max(0.0)),
            _ => None,
        };
    }

    /// Reads an event log: one JSON event per line, as [`Recorder`] writes it. Blank lines
    /// are skipped.
    ///
    /// # Errors
    ///
    /// When the file cannot be read, or a line is not an event (the error names the line and
    /// what is wrong with it).
    pub fn read_log(path: &Path) -> Result<Vec<Event>, ReportError> {
        let bytes = fs::read(path).map_err(|err| ReportError {
            path: path.to_path_buf(),
            line: None,
            source: Box::new(err),
        })?;
        let mut events = Vec::new();
        for (i, line) in bytes.split(|&b| b == b'\n').enumerate() {
            let line = line.strip_suffix(b"\r").unwrap_or(line);
            if line.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            let event = serde_json::from_slice::<Event>(line).map_err(|err| ReportError {
                path: path.to_path_buf(),
                line: Some(i + 1),
                source: Box::new(InvalidLine(describe(&err))),
            })?;
            events.push(event);
        }
        Ok(events)
    }

    /// Whether the run passed: no client retried early.
    pub fn passed(&self) -> bool {
        self.verdict == Outcome::Pass
    }

    /// How many retries were premature.
    pub fn premature(&self) -> usize {
        self.retries.premature
    }

    /// How many retries were compliant.
    pub fn compliant(&self) -> usize {
        self.retries.compliant
    }

    /// How many requests the proxy answered (0 when the log has no finish event).
    pub fn requests(&self) -> u64 {
        self.requests
    }

    /// How many throttled responses (windows opened) were recorded.
    pub fn throttled(&self) -> usize {
        self.throttled
    }

    /// The premature retries, in the order they came.
    pub fn violations(&self) -> &[Violation] {
        &self.violations
    }

    /// The premature retries, the earliest (most early) first.
    pub fn worst(&self) -> Vec<&Violation> {
        let mut worst: Vec<&Violation> = self.violations.iter().collect();
        worst.sort_by(|a, b| b.early_by_ms.total_cmp(&a.early_by_ms));
        worst
    }

    /// The herds found.
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
    /// (the five earliest premature retries), the herds, and each report written.
    pub fn terminal_summary(&self, written: &[(Format, PathBuf)]) -> String {
        terminal::render(self, written)
    }

    /// The first and last times the report shows: the start (or first event) and the finish
    /// (or last event, or the last permitted time if later).
    fn span(&self) -> Option<(SystemTime, SystemTime)> {
        let times = self
            .windows
            .iter()
            .flat_map(|w| [w.from, w.to])
            .chain(self.all_retries.iter().map(|r| r.retried_at))
            .chain(self.started_at)
            .chain(self.finished_at);
        let (mut first, mut last) = (None::<SystemTime>, None::<SystemTime>);
        for t in times {
            first = Some(first.map_or(t, |f| f.min(t)));
            last = Some(last.map_or(t, |l| l.max(t)));
        }
        let first = self.started_at.or(first)?;
        Some((first, last.unwrap_or(first)))
    }

    /// How times are shown in tables.
    fn times(&self) -> text::Times {
        match self.span() {
            Some((first, last)) => text::Times::new(Some(first), Some(last)),
            None => text::Times::new(None, None),
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

/// The endpoint of a client, method and URL in `map` (keyed client, URL, method, for the
/// order endpoints are listed in), added if new.
fn endpoint<'m, 'k>(
    map: &'m mut BTreeMap<(&'k str, &'k str, &'k str), Endpoint>,
    client: &'k str,
    method: &'k str,
    url: &'k str,
) -> &'m mut Endpoint {
    map.entry((client, url, method))
        .or_insert_with(|| Endpoint {
            client: client.to_owned(),
            method: method.to_owned(),
            url: url.to_owned(),
            throttles: 0,
            compliant: 0,
            premature: 0,
            worst_early_by_ms: None,
        })
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
