//! The Markdown report: what a reviewer reads in a pull-request comment — the verdict, the
//! counts, the worst violations and the warnings (each with why, and how its hint was read),
//! the endpoints, the herds, and how to reproduce the run.

use std::fmt::{self, Write as _};

use super::outcome::{Case, Headline, NO_TRAFFIC_CAUSES, unintercepted};
use super::text::{client_label, md, md_code, md_with_code, millis};
use super::{HintKind, JudgedBy, Report, Violation};

/// How many rows a table shows before "and N more".
const ROWS: usize = 20;

pub(super) fn render(report: &Report) -> String {
    let mut out = String::new();
    // Writing to a String cannot fail.
    let _ = write(&mut out, report);
    out
}

fn write(out: &mut String, report: &Report) -> fmt::Result {
    let headline = Headline::of(report);
    writeln!(
        out,
        "## holdoff: {} {} {}\n",
        headline.symbol,
        headline.lead(),
        md(&headline.what)
    )?;
    if !report.complete {
        writeln!(
            out,
            "> The event log has no finish event: the run was cut short, and the counts may be \
             partial.\n"
        )?;
    }
    not_tested(out, report)?;
    counts(out, report)?;
    violations(out, report)?;
    warnings(out, report)?;
    endpoints(out, report)?;
    herds(out, report)?;
    reproduce(out, report)
}

fn not_tested(out: &mut String, report: &Report) -> fmt::Result {
    if report.interception_failures > 0 {
        writeln!(
            out,
            "> {}\n",
            md_with_code(&unintercepted(report.interception_failures))
        )?;
    }
    match Case::of(report) {
        Case::NotTested { allowed: false } => {
            writeln!(
                out,
                "No request reached the proxy, so no retry was judged: this is not a pass. The \
                 command's HTTP clients bypassed the proxy, or sent nothing. The usual causes:\n"
            )?;
            for (cause, fix) in NO_TRAFFIC_CAUSES {
                writeln!(out, "- **{}**: {}", md_with_code(cause), md_with_code(fix))?;
            }
            writeln!(out)
        }
        Case::NotTested { allowed: true } => writeln!(
            out,
            "No request reached the proxy, and the run allows it (`--allow-no-traffic`): \
             nothing was tested.\n"
        ),
        Case::NothingThrottled => writeln!(
            out,
            "Requests reached the proxy, but none was throttled: no retry was judged.\n"
        ),
        Case::NoRetry => writeln!(
            out,
            "Requests were throttled, but no client came back while a window was open: no \
             retry was judged.\n"
        ),
        _ => Ok(()),
    }
}

fn counts(out: &mut String, report: &Report) -> fmt::Result {
    writeln!(out, "| | |\n|:--|--:|")?;
    writeln!(out, "| Requests | {} |", report.requests)?;
    writeln!(out, "| Throttled responses | {} |", report.throttled)?;
    let by_hint = report.throttled_by_hint;
    for (n, what) in [
        (by_hint.malformed, "… with a malformed hint"),
        (by_hint.none, "… with no hint"),
        (by_hint.unbounded, "… with a hint beyond the clock's range"),
    ] {
        if n > 0 {
            writeln!(out, "| {what} | {n} |")?;
        }
    }
    let retries = &report.retries;
    writeln!(out, "| Compliant retries | {} |", retries.compliant)?;
    writeln!(out, "| Premature retries | {} |", retries.premature)?;
    if retries.read_as_zero > 0 || by_hint.malformed > 0 {
        writeln!(
            out,
            "| Read-as-zero retries (after a malformed hint) | {} |",
            retries.read_as_zero
        )?;
    }
    if retries.no_backoff > 0 || by_hint.none > 0 {
        let what = if report.fail_on_no_backoff {
            "failing"
        } else {
            "warnings"
        };
        writeln!(
            out,
            "| Retries without backoff (after no hint; {what}) | {} |",
            retries.no_backoff
        )?;
    }
    if let Some(l) = report.lateness {
        writeln!(
            out,
            "| Lateness of compliant retries (p50 / p90 / max) | {} / {} / {} |",
            millis(l.p50_ms),
            millis(l.p90_ms),
            millis(l.max_ms)
        )?;
    }
    writeln!(out, "| Herds | {} |", report.herds.len())?;
    if let Some(faults) = report.faults.as_ref().map(faults_line) {
        writeln!(out, "| Faults injected | {faults} |")?;
    }
    if let Some(code) = report.exit_code {
        writeln!(out, "| Command exit status | {code} |")?;
    }
    if let Some(ms) = report.duration_ms {
        writeln!(out, "| Duration | {} |", millis(ms))?;
    }
    writeln!(out)
}

/// The non-zero fault counts, e.g. `7 rate limited, 2 errors`, or `none`.
pub(super) fn faults_line(f: &crate::FaultCounts) -> String {
    let kinds = [
        (f.rate_limited, "rate limited"),
        (f.errors, "errors"),
        (f.mocked, "mocked"),
        (f.delayed, "delayed"),
        (f.resets, "resets"),
        (f.hangs, "hangs"),
        (f.truncated, "truncated"),
        (f.slowed, "slowed"),
    ];
    let parts: Vec<String> = kinds
        .iter()
        .filter(|(n, _)| *n > 0)
        .map(|(n, kind)| format!("{n} {kind}"))
        .collect();
    if parts.is_empty() {
        "none".to_owned()
    } else {
        parts.join(", ")
    }
}

fn violations(out: &mut String, report: &Report) -> fmt::Result {
    let worst = report.worst();
    if worst.is_empty() {
        return Ok(());
    }
    writeln!(
        out,
        "### Violations, the most premature first ({})\n",
        report.times().note()
    )?;
    table(out, report, &worst, report.omitted.violations)
}

fn warnings(out: &mut String, report: &Report) -> fmt::Result {
    if report.warnings.is_empty() {
        return Ok(());
    }
    writeln!(
        out,
        "### Warnings: retries without backoff after a throttle with no hint ({})\n",
        report.times().note()
    )?;
    writeln!(
        out,
        "RFC 9110 names no wait for a throttle without `Retry-After`, so these do not fail the \
         run; a client should still back off (with jitter).\n"
    )?;
    let warnings: Vec<&Violation> = report.warnings.iter().collect();
    table(out, report, &warnings, report.omitted.warnings)
}

/// A table of violations or warnings, with why each is one and how its hint was read; then
/// how many more there are, `left_out` of them not listed in any report.
fn table(out: &mut String, report: &Report, rows: &[&Violation], left_out: usize) -> fmt::Result {
    let times = report.times();
    writeln!(
        out,
        "| Client | Request | Early by | Retried at | Permitted at | Why |\n|:--|:--|--:|:--|:--|:--|"
    )?;
    for v in rows.iter().take(ROWS) {
        let early = v.early_by_ms.map_or_else(|| "∞".to_owned(), millis);
        let permitted = v
            .permitted_at
            .map_or_else(|| "never".to_owned(), |at| times.show(at));
        let mut why = md_with_code(&v.why);
        // After no hint, the sentence says all there is.
        if let Some(judged_by) = v.judged_by.as_ref().filter(|j| j.hint != HintKind::None) {
            why.push_str("; judged by ");
            why.push_str(&judged_by_md(judged_by));
        }
        writeln!(
            out,
            "| {} | {} | {early} | {} | {permitted} | {why} |",
            md(&client_label(&v.client, v.user_agent.as_deref())),
            md_code(&format!("{} {}", v.method, v.url)),
            times.show(v.retried_at),
        )?;
    }
    if rows.len() > ROWS {
        writeln!(
            out,
            "\n…and {} more (the JSON report lists them{}).",
            rows.len() - ROWS,
            if left_out > 0 {
                ", the earliest"
            } else {
                " all"
            }
        )?;
    }
    if let Some(note) = Report::unlisted(left_out) {
        writeln!(out, "\n{note}.")?;
    }
    writeln!(out)
}

/// How a hint was read, in Markdown: ``Retry-After: 2`` as code.
fn judged_by_md(judged_by: &JudgedBy) -> String {
    let how = md(&judged_by.how());
    match judged_by.code() {
        Some(code) => judged_by.join(&md_code(&code), &how),
        None => how,
    }
}

fn endpoints(out: &mut String, report: &Report) -> fmt::Result {
    if report.endpoints.is_empty() {
        return Ok(());
    }
    writeln!(out, "### By client and request\n")?;
    writeln!(
        out,
        "| Client | Request | Throttled | Compliant | Premature | Read as zero | No backoff | Judged by |\n|:--|:--|--:|--:|--:|--:|--:|:--|"
    )?;
    // Failing ones first, so that a cut table still shows them.
    let mut rows: Vec<_> = report.endpoints.iter().collect();
    rows.sort_by_key(|e| std::cmp::Reverse(e.failed(report.fail_on_no_backoff)));
    for e in rows.iter().take(ROWS) {
        let agents: Vec<&str> = e.user_agents.iter().map(String::as_str).collect();
        let client = match agents.as_slice() {
            [] => md(&e.client),
            agents => md(&format!("{} ({})", e.client, agents.join(", "))),
        };
        let judged_by: Vec<String> = e.judged_by.iter().map(judged_by_md).collect();
        writeln!(
            out,
            "| {client} | {} | {} | {} | {} | {} | {} | {} |",
            md_code(&format!("{} {}", e.method, e.url)),
            e.throttles,
            e.compliant,
            e.premature,
            e.read_as_zero,
            e.no_backoff,
            judged_by.join("; "),
        )?;
    }
    if rows.len() > ROWS {
        writeln!(out, "\n…and {} more.", rows.len() - ROWS)?;
    }
    writeln!(out)
}

fn herds(out: &mut String, report: &Report) -> fmt::Result {
    if report.herds.is_empty() {
        return Ok(());
    }
    let times = report.times();
    writeln!(out, "### Herds ({})\n", times.note())?;
    for herd in &report.herds {
        writeln!(
            out,
            "- {}. {}",
            md(&herd.describe(&times.show(herd.permitted_at))),
            herd.advice()
        )?;
    }
    writeln!(out)
}

fn reproduce(out: &mut String, report: &Report) -> fmt::Result {
    writeln!(out, "### Reproduce\n")?;
    let source = report.source.as_deref().unwrap_or("unknown");
    match report.seed {
        Some(seed) => writeln!(
            out,
            "Faults from {}, seed {seed}: the same options and the same sequence of requests \
             give the same faults.\n",
            md(source)
        )?,
        None => writeln!(out, "Faults from {}, with no seed.\n", md(source))?,
    }
    let command = report.reproduce();
    let fence = "`".repeat(3.max(longest_backticks(command) + 1));
    writeln!(out, "{fence}sh\n{command}\n{fence}")
}

fn longest_backticks(s: &str) -> usize {
    s.split(|c| c != '`').map(str::len).max().unwrap_or(0)
}
