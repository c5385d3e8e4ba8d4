//! The summary at the end of `holdoff run` and `holdoff proxy`: a few lines for a terminal.

use std::fmt::Write as _;
use std::path::PathBuf;

use super::text::{count, millis, truncate};
use super::{Format, Report};

/// How many of the worst premature retries are listed.
const WORST: usize = 5;

pub(super) fn render(report: &Report, written: &[(Format, PathBuf)]) -> String {
    let mut out = String::new();
    // Writing to a String cannot fail.
    let _ = write(&mut out, report, written);
    out
}

fn write(out: &mut String, report: &Report, written: &[(Format, PathBuf)]) -> std::fmt::Result {
    writeln!(out, "holdoff: {}", headline(report))?;
    if !report.complete {
        writeln!(
            out,
            "  the event log has no finish event: the run was cut short, counts may be partial"
        )?;
    }
    let times = report.times();
    let worst = report.worst();
    if !worst.is_empty() {
        writeln!(out, "worst offenders ({}):", times.note())?;
        let shown = &worst[..worst.len().min(WORST)];
        let requests: Vec<String> = shown
            .iter()
            .map(|v| truncate(&format!("{} {}", v.method, v.url), 60).into_owned())
            .collect();
        let width = shown
            .iter()
            .map(|v| v.client.chars().count())
            .max()
            .unwrap_or(0);
        let request_width = requests
            .iter()
            .map(|r| r.chars().count())
            .max()
            .unwrap_or(0);
        for (v, request) in shown.iter().zip(&requests) {
            writeln!(
                out,
                "  {:width$}  {request:request_width$}  {} early (retried {}, permitted {})",
                v.client,
                millis(v.early_by_ms),
                times.show(v.retried_at),
                times.show(v.permitted_at),
            )?;
        }
        if worst.len() > WORST {
            writeln!(out, "  and {} more", worst.len() - WORST)?;
        }
    }
    for herd in &report.herds {
        writeln!(
            out,
            "herd: {}. {}",
            herd.describe(&times.show(herd.permitted_at)),
            herd.advice()
        )?;
    }
    if !written.is_empty() {
        writeln!(out, "reports:")?;
        for (format, path) in written {
            writeln!(out, "  {:<9} {}", format.to_string(), path.display())?;
        }
    }
    Ok(())
}

/// One line: the verdict and the counts.
fn headline(report: &Report) -> String {
    let requests = count(
        usize::try_from(report.requests).unwrap_or(usize::MAX),
        "request",
        "requests",
    );
    let throttled = count(
        report.throttled,
        "throttled response",
        "throttled responses",
    );
    if report.passed() {
        if report.retries.compliant == 0 {
            return format!("PASS: no retry was judged ({throttled}, {requests})");
        }
        return format!(
            "PASS: every retry waited ({}; {throttled}, {requests})",
            count(
                report.retries.compliant,
                "compliant retry",
                "compliant retries"
            )
        );
    }
    format!(
        "FAIL: {} and {} compliant ({throttled}, {requests})",
        count(
            report.retries.premature,
            "premature retry",
            "premature retries"
        ),
        report.retries.compliant,
    )
}
