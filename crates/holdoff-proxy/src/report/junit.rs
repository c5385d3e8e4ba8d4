//! The JUnit XML report: one test case per client and endpoint (a window family), failing
//! when any of its retries broke its window (premature, or read a malformed hint as zero), so
//! that a CI's test tab names the client and the request that did not wait. A run in which no
//! request reached the proxy is one failing case, never zero tests.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::time::{Duration, SystemTime};

use quick_junit::{NonSuccessKind, Property, TestCase, TestCaseStatus, TestSuite};

use super::event::HintKind;
use super::outcome::{Case, NO_TRAFFIC_CAUSES, unintercepted};
use super::parts::{Endpoint, RetryRow};
use super::run::Report;
use super::text::{count, millis, shell_words};
use super::time;
use crate::judge::Verdict;

/// How many failing retries a failure's one-line message lists; its body lists them all.
const IN_MESSAGE: usize = 3;

pub(super) fn render(report: &Report) -> String {
    let seconds = test_time(report.duration_ms.unwrap_or(0.0));
    let mut suite = TestSuite::new("holdoff: retries wait for Retry-After");
    suite.set_time(seconds);
    if let Some(at) = report.started_at {
        // JUnit's schema has an `xs:dateTime` without a zone here; quick-junit's own field
        // writes one.
        suite
            .extra
            .insert("timestamp".into(), time::junit(at).into());
    }
    suite.add_properties(properties(report));
    let case = Case::of(report);
    // Never zero tests: a run that judged nothing says so in a case of its own.
    if matches!(case, Case::NotTested { .. } | Case::NothingThrottled)
        && report.endpoints.is_empty()
    {
        suite.add_test_case(nothing_judged(report, case, seconds));
    }
    if report.interception_failures > 0 {
        suite.add_test_case(interceptions(report));
    }
    // Each endpoint's rows, gathered once: a long run has thousands of endpoints.
    let mut rows: HashMap<(&str, &str, &str), Rows<'_>> = HashMap::new();
    for w in &report.windows {
        rows.entry((&w.client, &w.method, &w.url))
            .or_default()
            .times
            .push(w.from);
    }
    for r in &report.all_retries {
        let entry = rows.entry((&r.client, &r.method, &r.url)).or_default();
        entry.times.push(r.retried_at);
        entry.retries.push(r);
    }
    let none = Rows::default();
    for endpoint in &report.endpoints {
        let key = (
            endpoint.client.as_str(),
            endpoint.method.as_str(),
            endpoint.url.as_str(),
        );
        suite.add_test_case(testcase(report, endpoint, rows.get(&key).unwrap_or(&none)));
    }
    // quick-junit counts skipped cases as `disabled`; CI test tabs read `skipped`.
    let skipped = suite.disabled.to_string();
    suite.extra.insert("skipped".into(), skipped.into());
    let mut junit = quick_junit::Report::new("holdoff");
    junit.set_time(seconds).add_test_suite(suite);
    serialize(&junit)
}

/// The report as XML. quick-junit drops control characters but leaves U+FFFE and U+FFFF,
/// which XML 1.0 forbids: they become U+FFFD, as in the other reports.
fn serialize(junit: &quick_junit::Report) -> String {
    // Serializing into memory cannot fail.
    let xml = junit.to_string().unwrap_or_default();
    xml.replace(['\u{FFFE}', '\u{FFFF}'], "\u{FFFD}")
}

/// `ms` milliseconds as a test's time; a negative or unknown time as zero.
fn test_time(ms: f64) -> Duration {
    Duration::try_from_secs_f64(ms / 1000.0).unwrap_or_default()
}

/// A failing case for the tunnels whose interception failed: their requests were never judged.
fn interceptions(report: &Report) -> TestCase {
    let mut status = TestCaseStatus::non_success(NonSuccessKind::Failure);
    status
        .set_type("InterceptionFailed")
        .set_message(count(
            usize::try_from(report.interception_failures).unwrap_or(usize::MAX),
            "TLS interception failed",
            "TLS interceptions failed",
        ))
        .set_description(unintercepted(report.interception_failures));
    let mut case = TestCase::new("TLS interception", status);
    case.set_classname("holdoff").set_time(Duration::ZERO);
    case
}

/// The one case of a run in which nothing was judged: failing when no request reached the
/// proxy, skipped when that is allowed or when requests came but none was throttled.
fn nothing_judged(report: &Report, case: Case, seconds: Duration) -> TestCase {
    let name = match case {
        Case::NotTested { .. } => "no request reached the proxy",
        _ => "nothing was judged",
    };
    let status = match case {
        Case::NotTested { allowed: false } => {
            let mut causes = "the usual causes:".to_owned();
            for (cause, fix) in NO_TRAFFIC_CAUSES {
                let _ = write!(causes, "\n- {cause}: {fix}");
            }
            let mut status = TestCaseStatus::non_success(NonSuccessKind::Failure);
            status
                .set_type("NotTested")
                .set_message(
                    "no request reached the proxy: the command's HTTP clients bypassed it, or \
                     sent nothing; not a pass",
                )
                .set_description(causes);
            status
        }
        Case::NotTested { allowed: true } => {
            let mut status = TestCaseStatus::skipped();
            status.set_message("no request reached the proxy, as --allow-no-traffic allows");
            status
        }
        _ => {
            let mut status = TestCaseStatus::skipped();
            status.set_message(format!(
                "{} reached the proxy, none throttled: no retry was judged",
                count(
                    usize::try_from(report.requests).unwrap_or(usize::MAX),
                    "request",
                    "requests"
                )
            ));
            status
        }
    };
    let mut case = TestCase::new(name, status);
    case.set_classname("holdoff").set_time(seconds);
    case
}

fn properties(report: &Report) -> Vec<Property> {
    let mut props: Vec<(&str, String)> = Vec::new();
    if let Some(seed) = report.seed {
        props.push(("seed", seed.to_string()));
    }
    if let Some(source) = &report.source {
        props.push(("source", source.clone()));
    }
    if let Some(command) = &report.command {
        props.push(("command", shell_words(command)));
    }
    if let Some(key) = &report.judge_key {
        props.push(("judge_key", key.clone()));
    }
    props.push(("verdict", report.verdict.as_str().to_owned()));
    props.push(("reproduce", report.reproduce().to_owned()));
    if let Some(code) = report.exit_code {
        props.push(("exit_code", code.to_string()));
    }
    props.push(("requests", report.requests.to_string()));
    props.push(("throttled", report.throttled.to_string()));
    props.push(("herds", report.herds.len().to_string()));
    props
        .into_iter()
        .map(|(name, value)| Property::new(name, value))
        .collect()
}

/// An endpoint's windows' and retries' times, and its retries, as the timeline keeps them.
#[derive(Default)]
struct Rows<'a> {
    times: Vec<SystemTime>,
    retries: Vec<&'a RetryRow>,
}

fn testcase(report: &Report, endpoint: &Endpoint, rows: &Rows<'_>) -> TestCase {
    let retries = &rows.retries;
    // From the first throttle to the last retry.
    let times = &rows.times;
    let seconds = match (times.iter().min(), times.iter().max()) {
        (Some(first), Some(last)) => test_time(time::millis_between(*first, *last)),
        _ => Duration::ZERO,
    };
    let failing: Vec<&RetryRow> = retries
        .iter()
        .copied()
        .filter(|r| report.fails(r.verdict))
        .collect();
    // Counted exactly; listed as far as the timeline keeps them.
    let broke = endpoint.premature
        + endpoint.read_as_zero
        + if report.fail_on_no_backoff {
            endpoint.no_backoff
        } else {
            0
        };
    let mut status = TestCaseStatus::success();
    if broke > 0 {
        let mut message = format!(
            "{} broke {}: ",
            count(broke, "retry", "retries"),
            if broke == 1 {
                "its window"
            } else {
                "their windows"
            }
        );
        let listed: Vec<String> = failing
            .iter()
            .take(IN_MESSAGE)
            .map(|r| {
                format!(
                    "{} at {} (permitted {})",
                    early(r),
                    time::format(r.retried_at),
                    permitted(r)
                )
            })
            .collect();
        message.push_str(&listed.join("; "));
        if broke > listed.len() {
            let _ = write!(message, "; and {} more", broke - listed.len());
        }
        let lines: Vec<String> = failing.iter().map(|r| explain(report, r)).collect();
        status = TestCaseStatus::non_success(NonSuccessKind::Failure);
        status
            .set_type(failure_type(endpoint))
            .set_message(message)
            .set_description(lines.join("\n"));
    }
    let mut story = format!(
        "{}, {} premature, {} read as zero, {} without backoff, {} compliant",
        count(endpoint.throttles, "throttle", "throttles"),
        endpoint.premature,
        endpoint.read_as_zero,
        endpoint.no_backoff,
        endpoint.compliant,
    );
    if !endpoint.user_agents.is_empty() {
        let _ = write!(story, "\nUser-Agent: {}", endpoint.user_agents.join(", "));
    }
    for judged_by in &endpoint.judged_by {
        let _ = write!(story, "\njudged by {}", judged_by.plain());
    }
    for r in retries {
        match r.verdict {
            Verdict::Compliant => {
                let _ = write!(
                    story,
                    "\ncompliant retry at {}: {} after the permitted time",
                    time::format(r.retried_at),
                    r.by_ms.map_or_else(|| "?".to_owned(), millis)
                );
            }
            v if !report.fails(v) && matches!(v, Verdict::NoBackoff | Verdict::Sibling) => {
                let _ = write!(story, "\nwarning: {}", explain(report, r));
            }
            _ => {}
        }
    }
    let mut case = TestCase::new(format!("{} {}", endpoint.method, endpoint.url), status);
    case.set_classname(&endpoint.client)
        .set_time(seconds)
        .set_system_out(story);
    case
}

/// `1.90 s early`, or that the window never closes.
fn early(r: &RetryRow) -> String {
    match r.by_ms {
        Some(ms) => format!("{} early", millis(ms)),
        None => "inside a window that never closes".to_owned(),
    }
}

/// The permitted time, or `never`.
fn permitted(r: &RetryRow) -> String {
    r.permitted_at
        .map_or_else(|| "never".to_owned(), time::format)
}

/// One line on a retry that broke its window (or a warning): its kind, when, why, and how
/// the hint was read.
fn explain(report: &Report, r: &RetryRow) -> String {
    let window = r.window.map(|i| &report.windows[i]);
    let mut line = format!(
        "{} retry at {}: {}; throttled at {}, permitted at {}",
        r.verdict.as_str(),
        time::format(r.retried_at),
        r.why(window),
        time::format(r.throttled_at),
        permitted(r),
    );
    let judged_by = window.and_then(|w| w.judged_by.as_ref());
    if let Some(judged_by) = judged_by.filter(|j| j.hint != HintKind::None) {
        let _ = write!(line, "; judged by {}", judged_by.plain());
    }
    line
}

/// The failure's type: `PrematureRetry`, `ReadAsZero` or `NoBackoff` (the first kind among
/// them that fails, in that order).
fn failure_type(endpoint: &Endpoint) -> &'static str {
    if endpoint.premature > 0 {
        "PrematureRetry"
    } else if endpoint.read_as_zero > 0 {
        "ReadAsZero"
    } else {
        "NoBackoff"
    }
}
