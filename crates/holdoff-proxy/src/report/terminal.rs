//! The summary at the end of `holdoff run` and `holdoff proxy`: a few lines for a terminal.

use std::borrow::Cow;
use std::fmt::Write as _;
use std::path::PathBuf;

use super::format::Format;
use super::outcome::{
    Case, Headline, NO_TRAFFIC_CAUSES, command_failed, failed_before_any_request, unintercepted,
};
use super::parts::Violation;
use super::run::Report;
use super::text::{client_name, millis, truncate};

/// How many of the worst violations, and of the warnings, are listed.
const WORST: usize = 5;

pub(super) fn render(report: &Report, written: &[(Format, PathBuf)]) -> String {
    let mut out = String::new();
    // Writing to a String cannot fail.
    let _ = write(&mut out, report, written);
    out
}

fn write(out: &mut String, report: &Report, written: &[(Format, PathBuf)]) -> std::fmt::Result {
    writeln!(out, "holdoff: {}", Headline::of(report).line())?;
    if !report.complete {
        writeln!(
            out,
            "  the event log has no finish event: the run was cut short, counts may be partial"
        )?;
    }
    if report.interception_failures > 0 {
        writeln!(out, "  {}", unintercepted(report.interception_failures))?;
    }
    if report.evicted_windows > 0 {
        writeln!(out, "  {}", super::outcome::evicted(report.evicted_windows))?;
    }
    let not_tested = Case::of(report) == (Case::NotTested { allowed: false });
    if let Some(code) = command_failed(report).filter(|_| not_tested) {
        writeln!(out, "  {}", failed_before_any_request(code))?;
    } else if not_tested {
        writeln!(
            out,
            "  the command's HTTP clients bypassed the proxy, or sent nothing; the usual causes:"
        )?;
        for (cause, fix) in NO_TRAFFIC_CAUSES {
            writeln!(out, "  - {cause}: {fix}")?;
        }
    }
    let times = report.times();
    let worst = report.worst();
    if !worst.is_empty() {
        writeln!(out, "worst offenders ({}):", times.note())?;
        rows(out, report, &worst, report.omitted.violations)?;
    }
    if !report.warnings.is_empty() {
        writeln!(
            out,
            "warnings: {} ({}):",
            report.warnings_title().trim_start_matches("Warnings: "),
            times.note()
        )?;
        let warnings: Vec<&Violation> = report.warnings.iter().collect();
        rows(out, report, &warnings, report.omitted.warnings)?;
    }
    for herd in &report.herds {
        writeln!(
            out,
            "herd: {}. {}",
            herd.describe(&times.show(herd.permitted_at)),
            herd.advice()
        )?;
    }
    // The seed is said once, where it helps: in the command that repeats the run.
    if report.seed.is_some() {
        writeln!(out, "reproduce: {}", report.reproduce())?;
    }
    if !written.is_empty() {
        writeln!(out, "reports:")?;
        for (format, path) in written {
            writeln!(out, "  {:<9} {}", format.to_string(), path.display())?;
        }
    }
    Ok(())
}

/// The first few of `shown`, aligned: client, request, how early, when; then how many more
/// there are, `left_out` of them not listed in any report.
fn rows(
    out: &mut String,
    report: &Report,
    all: &[&Violation],
    left_out: usize,
) -> std::fmt::Result {
    let times = report.times();
    let shown = &all[..all.len().min(WORST)];
    let clients: Vec<Cow<'_, str>> = shown.iter().map(|v| client_name(&v.client)).collect();
    let requests: Vec<String> = shown
        .iter()
        .map(|v| truncate(&format!("{} {}", v.method, v.url), 60).into_owned())
        .collect();
    let width = clients.iter().map(|c| c.chars().count()).max().unwrap_or(0);
    let request_width = requests
        .iter()
        .map(|r| r.chars().count())
        .max()
        .unwrap_or(0);
    for ((v, client), request) in shown.iter().zip(&clients).zip(&requests) {
        let early = match v.early_by_ms {
            Some(ms) => format!("{} early", millis(ms)),
            None => "inside a window that never closes".to_owned(),
        };
        let permitted = v
            .permitted_at
            .map_or_else(|| "never".to_owned(), |at| times.show(at));
        // Last, so that the columns stay narrow.
        let agent = v
            .user_agent
            .as_deref()
            .map(|agent| format!(", User-Agent {}", truncate(agent, 60)))
            .unwrap_or_default();
        writeln!(
            out,
            "  {client:width$}  {request:request_width$}  {early} (retried {}, permitted \
             {permitted}{agent})",
            times.show(v.retried_at),
        )?;
        if v.kind != crate::judge::Verdict::Premature {
            writeln!(out, "    {}", v.why)?;
        }
    }
    if all.len() > WORST {
        writeln!(out, "  and {} more", all.len() - WORST)?;
    }
    if let Some(note) = Report::unlisted(left_out) {
        writeln!(out, "  {note}")?;
    }
    Ok(())
}
