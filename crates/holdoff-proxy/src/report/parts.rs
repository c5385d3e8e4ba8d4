//! The parts of a [`Report`](super::Report): violations, endpoints, how hints were read,
//! lateness, and the rows the timeline draws.

use std::time::{Duration, SystemTime};

use serde::Serialize;

use super::event::HintKind;
use super::text::{self, client_name, header_name, millis};
use super::time::{self, rfc3339, rfc3339_option};
use crate::judge::Verdict;

/// How close a retry's `throttled_at` must be to a throttle event's time for both to be one
/// window.
pub(super) const SAME_WINDOW: Duration = Duration::from_millis(5);

/// How many client, method and URL families the report lists.
pub const LISTED_ENDPOINTS: usize = 10_000;
/// How many violations the report lists (the earliest); as many warnings.
pub const LISTED_VIOLATIONS: usize = 1_000;
/// How many windows, and how many retries, the timeline draws (the first).
pub const TIMELINE_ROWS: usize = 10_000;
/// How many lateness buckets the histogram has.
pub(crate) const BUCKET_COUNT: usize = 10;

/// The judge's verdict on a run, as the JSON report's `"verdict"` has it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum RunOutcome {
    /// No client broke a window (warnings aside). Some requests reached the proxy, though
    /// possibly none was throttled: see [`Report::throttled`](super::Report::throttled).
    Pass,
    /// A retry broke its window: premature, read a malformed hint as zero, or (when the run
    /// says so) came without backoff after a throttle with no hint.
    Fail,
    /// No request reached the proxy: nothing was tested. Never a pass — the command's clients
    /// bypassed the proxy, or sent nothing (`--allow-no-traffic` accepts that). Also when an
    /// interception failed (see [`Report::interception_failures`](super::Report::interception_failures)): requests the client sent
    /// in that tunnel never reached the judge, and `--allow-no-traffic` does not accept that.
    NotTested,
}

impl RunOutcome {
    /// `pass`, `fail` or `not_tested`, as in the JSON report.
    pub fn as_str(self) -> &'static str {
        match self {
            RunOutcome::Pass => "pass",
            RunOutcome::Fail => "fail",
            RunOutcome::NotTested => "not_tested",
        }
    }
}

/// What the report counted but does not list. Serialized only when something was left out.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct Omitted {
    /// Violations not listed (only the earliest are).
    pub violations: usize,
    /// Warnings not listed.
    pub warnings: usize,
    /// Throttles and retries on endpoints not listed; the totals count them.
    pub endpoint_events: usize,
    /// Windows the timeline does not draw.
    pub timeline_windows: usize,
    /// Retries the timeline does not draw.
    pub timeline_retries: usize,
    /// Herds not listed.
    pub herds: usize,
    /// Compliant retries whose lateness is estimated from a sample.
    pub lateness_unsampled: usize,
}

impl Omitted {
    /// Whether nothing was left out.
    pub fn is_empty(&self) -> bool {
        *self == Omitted::default()
    }
}

/// Retries by verdict.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub(super) struct Retries {
    pub(super) compliant: usize,
    pub(super) premature: usize,
    pub(super) read_as_zero: usize,
    pub(super) no_backoff: usize,
    /// Requests inside the wait another process was told (left out of the JSON when none).
    #[serde(skip_serializing_if = "is_zero")]
    pub(super) sibling: usize,
}

fn is_zero(count: &usize) -> bool {
    *count == 0
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
    pub(super) fn add(&mut self, hint: HintKind) {
        match hint {
            HintKind::Usable => self.usable += 1,
            HintKind::Malformed => self.malformed += 1,
            HintKind::None => self.none += 1,
            HintKind::Unbounded => self.unbounded += 1,
        }
    }
}

/// A retry that broke its window (or, in [`Report::warnings`](super::Report::warnings), came without backoff after a
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
    pub(super) fn same_way(&self, other: &JudgedBy) -> bool {
        (self.hint, &self.header, &self.reading) == (other.hint, &other.header, &other.reading)
    }
}

/// How many different readings an endpoint lists.
pub(super) const JUDGED_BY: usize = 3;

impl Endpoint {
    /// Whether any of its retries failed the run.
    pub(super) fn failed(&self, fail_on_no_backoff: bool) -> bool {
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
pub(super) struct WindowRow {
    pub(super) client: String,
    pub(super) user_agent: Option<String>,
    pub(super) method: String,
    pub(super) url: String,
    pub(super) from: SystemTime,
    /// `None`: a window that never closes.
    pub(super) to: Option<SystemTime>,
    /// The throttled response's status; `None` for a window known only from a retry.
    pub(super) status: Option<u16>,
    /// What the hint was; `None` for a window known only from a retry.
    pub(super) hint: Option<HintKind>,
    /// How the judge read the hint; `None` for a window known only from a retry.
    pub(super) judged_by: Option<JudgedBy>,
}

/// A retry, for the timeline and the test cases.
#[derive(Clone, Debug)]
pub(super) struct RetryRow {
    pub(super) verdict: Verdict,
    pub(super) client: String,
    pub(super) user_agent: Option<String>,
    pub(super) method: String,
    pub(super) url: String,
    pub(super) throttled_at: SystemTime,
    pub(super) permitted_at: Option<SystemTime>,
    pub(super) retried_at: SystemTime,
    /// How early (a violation) or late (compliant), in milliseconds; `None` when early inside
    /// a window that never closes.
    pub(super) by_ms: Option<f64>,
    /// Its window in [`Report::windows`], once linked.
    pub(super) window: Option<usize>,
    /// For a [`Verdict::Sibling`]: the process that was told to wait.
    pub(super) throttled_client: Option<String>,
}

impl RetryRow {
    /// Why a retry that broke its window (or came without backoff) is one, in one sentence
    /// without a final stop, the hint's value in backticks: `retried 4 ms after a malformed
    /// Retry-After (`soon`) on a 429, sooner than the minimum backoff of 100 ms: read as zero?`.
    pub(crate) fn why(&self, window: Option<&WindowRow>) -> String {
        let retry = self;
        let gap = millis(time::millis_between(retry.throttled_at, retry.retried_at));
        let throttle = match window.and_then(|w| w.status) {
            Some(status) => format!("a {status}"),
            None => "the throttle".to_owned(),
        };
        let backoff = retry
            .permitted_at
            .map(|at| millis(time::millis_between(retry.throttled_at, at)))
            .map(|min| format!(", sooner than the minimum backoff of {min}"))
            .unwrap_or_default();
        let judged = window.and_then(|w| w.judged_by.as_ref());
        match retry.verdict {
            Verdict::ReadAsZero => {
                let hint =
                    match judged.and_then(|j| Some((j.header.as_deref()?, j.value.as_deref()?))) {
                        Some((header, value)) => format!("{} (`{value}`)", header_name(header)),
                        None => "hint".to_owned(),
                    };
                format!(
                    "retried {gap} after a malformed {hint} on {throttle}{backoff}: read as zero?"
                )
            }
            Verdict::NoBackoff => format!("retried {gap} after {throttle} with no hint{backoff}"),
            Verdict::Sibling => {
                let other = match retry.throttled_client.as_deref() {
                    Some(told) => client_name(told),
                    None => "another process".into(),
                };
                let early = match retry.by_ms {
                    Some(early) => format!("{} before", millis(early)),
                    None => "inside the wait, which never ends, that".to_owned(),
                };
                format!(
                    "came {gap} after {other} got {throttle}, {early} it was permitted to retry: \
                     another process of the same client machine, judged apart (--judge-key \
                     method-url judges all processes as one client)"
                )
            }
            _ if retry.permitted_at.is_none()
                || judged.is_some_and(|j| j.hint == HintKind::Unbounded) =>
            {
                format!("retried {gap} after {throttle} whose hint never expires")
            }
            _ => match retry.by_ms {
                Some(early) => format!(
                    "retried {} before the permitted time, {gap} after {throttle}",
                    millis(early)
                ),
                None => format!("retried {gap} after {throttle}, before the permitted time"),
            },
        }
    }
}

impl Lateness {
    /// The percentiles of `ms` (sorted in place); `None` when empty.
    pub(super) fn of(ms: &mut [f64]) -> Option<Lateness> {
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
