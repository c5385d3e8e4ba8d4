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
//!         throttled_client: None,
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
//! Events carry wall times ([`SystemTime`](std::time::SystemTime)), written as RFC 3339 in UTC with milliseconds.
//! Nothing here reads a clock: the recorder is given the times of the start and the finish,
//! and the judge those of throttles and retries.

//!
//! # Layout
//!
//! A [`Report`] (`run.rs`, its parts and limits in `parts.rs`) is counted from events by
//! `tally/`; `outcome.rs` says whether it passed and why; `document.rs` turns it into the one
//! document that `markdown.rs`, `html/` and `terminal.rs` render; `junit.rs` and serde write
//! the JSON and JUnit forms from the report itself; `write.rs` picks the format and writes
//! the file. Each file takes what it needs from the file that defines it, so that the report
//! itself (`run.rs`, `parts.rs`) never depends on a format, and no two files depend on each
//! other.

mod document;
mod event;
mod format;
mod herd;
mod html;
mod junit;
mod log;
mod markdown;
mod outcome;
mod parts;
mod recorder;
mod run;
mod tally;
mod terminal;
mod text;
pub(crate) mod time;
mod write;

pub use event::{Event, HintKind, RunInfo};
pub use format::Format;
pub use herd::RESUME_SPREAD;
pub use log::{ReportError, ReportErrorKind};

pub use parts::{
    Endpoint, HintCounts, JudgedBy, LISTED_ENDPOINTS, LISTED_VIOLATIONS, Lateness, Omitted,
    RunOutcome, TIMELINE_ROWS, Violation,
};
pub use recorder::{LogLimit, Recorder};
pub use run::Report;

pub(crate) use text::client_name;

/// `s` escaped for XML and HTML text and attribute values: `& < > " '` as entities, and the
/// characters XML 1.0 forbids even as entities replaced by U+FFFD. For reports written beside
/// these ones, such as `holdoff check`'s.
pub fn escape_markup(s: &str) -> std::borrow::Cow<'_, str> {
    text::xml(s)
}

#[cfg(test)]
mod tests;
