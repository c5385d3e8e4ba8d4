//! The JUnit XML report: one test case per client and endpoint (a window family), failing
//! when any of its retries was premature, so that a CI's test tab names the client and the
//! request that did not wait.

use std::fmt::{self, Write as _};
use std::time::SystemTime;

use super::text::{count, millis, shell_words, xml};
use super::{Endpoint, Report, RetryRow, time};
use crate::judge::Verdict;

/// How many premature retries a failure's one-line message lists; its body lists them all.
const IN_MESSAGE: usize = 3;

pub(super) fn render(report: &Report) -> String {
    let mut out = String::new();
    // Writing to a String cannot fail.
    let _ = write(&mut out, report);
    out
}

fn write(out: &mut String, report: &Report) -> fmt::Result {
    let tests = report.endpoints.len();
    let failures = report.endpoints.iter().filter(|e| e.premature > 0).count();
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
        r#"  <testsuite name="holdoff: retries wait for Retry-After" tests="{tests}" failures="{failures}" errors="0" skipped="0" time="{seconds:.3}"{timestamp}>"#
    )?;
    properties(out, report)?;
    for endpoint in &report.endpoints {
        testcase(out, report, endpoint)?;
    }
    writeln!(out, "  </testsuite>")?;
    writeln!(out, "</testsuites>")
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

fn testcase(out: &mut String, report: &Report, endpoint: &Endpoint) -> fmt::Result {
    let same = |client: &str, method: &str, url: &str| {
        client == endpoint.client && method == endpoint.method && url == endpoint.url
    };
    let retries: Vec<&RetryRow> = report
        .all_retries
        .iter()
        .filter(|r| same(&r.client, &r.method, &r.url))
        .collect();
    // From the first throttle to the last retry.
    let times: Vec<SystemTime> = report
        .windows
        .iter()
        .filter(|w| same(&w.client, &w.method, &w.url))
        .map(|w| w.from)
        .chain(retries.iter().map(|r| r.retried_at))
        .collect();
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
    let premature: Vec<&RetryRow> = retries
        .iter()
        .copied()
        .filter(|r| r.verdict == Verdict::Premature)
        .collect();
    if !premature.is_empty() {
        let mut message = format!(
            "{} before the permitted time: ",
            count(premature.len(), "premature retry", "premature retries")
        );
        let listed: Vec<String> = premature
            .iter()
            .take(IN_MESSAGE)
            .map(|r| {
                format!(
                    "{} early at {} (permitted {})",
                    millis(r.by_ms),
                    time::format(r.retried_at),
                    time::format(r.permitted_at)
                )
            })
            .collect();
        message.push_str(&listed.join("; "));
        if premature.len() > IN_MESSAGE {
            let _ = write!(message, "; and {} more", premature.len() - IN_MESSAGE);
        }
        writeln!(
            out,
            r#"      <failure type="PrematureRetry" message="{}">"#,
            xml(&message)
        )?;
        for r in &premature {
            let line = format!(
                "premature retry at {}: {} early; throttled at {}, permitted at {}",
                time::format(r.retried_at),
                millis(r.by_ms),
                time::format(r.throttled_at),
                time::format(r.permitted_at),
            );
            writeln!(out, "{}", xml(&line))?;
        }
        writeln!(out, "      </failure>")?;
    }
    let mut story = format!(
        "{}, {} premature, {} compliant",
        count(endpoint.throttles, "throttle", "throttles"),
        endpoint.premature,
        endpoint.compliant,
    );
    for r in retries.iter().filter(|r| r.verdict == Verdict::Compliant) {
        let _ = write!(
            story,
            "\ncompliant retry at {}: {} after the permitted time",
            time::format(r.retried_at),
            millis(r.by_ms)
        );
    }
    writeln!(out, "      <system-out>{}</system-out>", xml(&story))?;
    writeln!(out, "    </testcase>")
}
