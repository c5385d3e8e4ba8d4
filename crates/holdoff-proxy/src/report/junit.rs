//! The JUnit XML report: one test case per client and endpoint (a window family), failing
//! when any of its retries broke its window (premature, or read a malformed hint as zero), so
//! that a CI's test tab names the client and the request that did not wait. A run in which no
//! request reached the proxy is one failing case, never zero tests.

use std::collections::HashMap;
use std::fmt::{self, Write as _};
use std::time::SystemTime;

use super::outcome::{Case, NO_TRAFFIC_CAUSES, unintercepted};
use super::text::{count, millis, shell_words, xml};
use super::{Endpoint, HintKind, Report, RetryRow, time};
use crate::judge::Verdict;

/// How many failing retries a failure's one-line message lists; its body lists them all.
const IN_MESSAGE: usize = 3;

pub(super) fn render(report: &Report) -> String {
    let mut out = String::new();
    // Writing to a String cannot fail.
    let _ = write(&mut out, report);
    out
}

fn write(out: &mut String, report: &Report) -> fmt::Result {
    let case = Case::of(report);
    // Never zero tests: a run that judged nothing says so in a case of its own.
    let lone = match case {
        Case::NotTested { .. } | Case::NothingThrottled if report.endpoints.is_empty() => {
            Some(case)
        }
        _ => None,
    };
    let unintercepted = report.interception_failures > 0;
    let tests = report.endpoints.len() + usize::from(lone.is_some()) + usize::from(unintercepted);
    let failures = report
        .endpoints
        .iter()
        .filter(|e| e.failed(report.fail_on_no_backoff))
        .count()
        + usize::from(lone == Some(Case::NotTested { allowed: false }))
        + usize::from(unintercepted);
    let skipped = usize::from(matches!(
        lone,
        Some(Case::NotTested { allowed: true } | Case::NothingThrottled)
    ));
    let seconds = report.duration_ms.unwrap_or(0.0) / 1000.0;
    let timestamp = report
        .started_at
        .map(|at| format!(r#" timestamp="{}""#, time::junit(at)))
        .unwrap_or_default();
    writeln!(out, r#"<?xml version="1.0" encoding="UTF-8"?>"#)?;
    writeln!(
        out,
        r#"<testsuites name="holdoff" tests="{tests}" failures="{failures}" errors="0" time="{seconds:.3}">"#
    )?;
    writeln!(
        out,
        r#"  <testsuite name="holdoff: retries wait for Retry-After" tests="{tests}" failures="{failures}" errors="0" skipped="{skipped}" time="{seconds:.3}"{timestamp}>"#
    )?;
    properties(out, report)?;
    if let Some(case) = lone {
        nothing_judged(out, report, case, seconds)?;
    }
    if unintercepted {
        interceptions(out, report)?;
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
        testcase(out, report, endpoint, rows.get(&key).unwrap_or(&none))?;
    }
    writeln!(out, "  </testsuite>")?;
    writeln!(out, "</testsuites>")
}

/// A failing case for the tunnels whose interception failed: their requests were never judged.
fn interceptions(out: &mut String, report: &Report) -> fmt::Result {
    let why = unintercepted(report.interception_failures);
    writeln!(
        out,
        r#"    <testcase classname="holdoff" name="TLS interception" time="0.000">"#
    )?;
    writeln!(
        out,
        r#"      <failure type="InterceptionFailed" message="{}">{}</failure>"#,
        xml(&count(
            usize::try_from(report.interception_failures).unwrap_or(usize::MAX),
            "TLS interception failed",
            "TLS interceptions failed"
        )),
        xml(&why)
    )?;
    writeln!(out, "    </testcase>")
}

/// The one case of a run in which nothing was judged: failing when no request reached the
/// proxy, skipped when that is allowed or when requests came but none was throttled.
fn nothing_judged(out: &mut String, report: &Report, case: Case, seconds: f64) -> fmt::Result {
    let name = match case {
        Case::NotTested { .. } => "no request reached the proxy",
        _ => "nothing was judged",
    };
    writeln!(
        out,
        r#"    <testcase classname="holdoff" name="{name}" time="{seconds:.3}">"#
    )?;
    match case {
        Case::NotTested { allowed: false } => {
            writeln!(
                out,
                r#"      <failure type="NotTested" message="no request reached the proxy: the command's HTTP clients bypassed it, or sent nothing; not a pass">"#
            )?;
            writeln!(out, "the usual causes:")?;
            for (cause, fix) in NO_TRAFFIC_CAUSES {
                writeln!(out, "{}", xml(&format!("- {cause}: {fix}")))?;
            }
            writeln!(out, "      </failure>")?;
        }
        Case::NotTested { allowed: true } => writeln!(
            out,
            r#"      <skipped message="no request reached the proxy, as --allow-no-traffic allows"/>"#
        )?,
        _ => writeln!(
            out,
            r#"      <skipped message="{}"/>"#,
            xml(&format!(
                "{} reached the proxy, none throttled: no retry was judged",
                count(
                    usize::try_from(report.requests).unwrap_or(usize::MAX),
                    "request",
                    "requests"
                )
            ))
        )?,
    }
    writeln!(out, "    </testcase>")
}

fn properties(out: &mut String, report: &Report) -> fmt::Result {
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
    writeln!(out, "    <properties>")?;
    for (name, value) in props {
        writeln!(
            out,
            r#"      <property name="{name}" value="{}"/>"#,
            xml(&value)
        )?;
    }
    writeln!(out, "    </properties>")
}

/// An endpoint's windows' and retries' times, and its retries, as the timeline keeps them.
#[derive(Default)]
struct Rows<'a> {
    times: Vec<SystemTime>,
    retries: Vec<&'a RetryRow>,
}

fn testcase(
    out: &mut String,
    report: &Report,
    endpoint: &Endpoint,
    rows: &Rows<'_>,
) -> fmt::Result {
    let retries = &rows.retries;
    // From the first throttle to the last retry.
    let times = &rows.times;
    let seconds = match (times.iter().min(), times.iter().max()) {
        (Some(first), Some(last)) => time::millis_between(*first, *last) / 1000.0,
        _ => 0.0,
    };
    writeln!(
        out,
        r#"    <testcase classname="{}" name="{}" time="{seconds:.3}">"#,
        xml(&endpoint.client),
        xml(&format!("{} {}", endpoint.method, endpoint.url)),
    )?;
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
        writeln!(
            out,
            r#"      <failure type="{}" message="{}">"#,
            failure_type(endpoint),
            xml(&message)
        )?;
        for r in &failing {
            writeln!(out, "{}", xml(&explain(report, r)))?;
        }
        writeln!(out, "      </failure>")?;
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
            v if !report.fails(v) && v == Verdict::NoBackoff => {
                let _ = write!(story, "\nwarning: {}", explain(report, r));
            }
            _ => {}
        }
    }
    writeln!(out, "      <system-out>{}</system-out>", xml(&story))?;
    writeln!(out, "    </testcase>")
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
        super::text::why(r, window),
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
