//! The Markdown report: what a reviewer reads in a pull-request comment — the verdict, the
//! counts, the worst premature retries, the herds, and how to reproduce the run.

use std::fmt::{self, Write as _};

use super::Report;
use super::text::{count, md, md_code, millis, shell_words};

/// How many rows a table shows before "and N more".
const ROWS: usize = 20;

pub(super) fn render(report: &Report) -> String {
    let mut out = String::new();
    // Writing to a String cannot fail.
    let _ = write(&mut out, report);
    out
}

fn write(out: &mut String, report: &Report) -> fmt::Result {
    let mark = if report.passed() {
        "✓ PASS"
    } else {
        "✗ FAIL"
    };
    let what = if report.passed() {
        "every retry waited for its permitted time".to_owned()
    } else {
        format!(
            "{} before the permitted time",
            count(
                report.retries.premature,
                "premature retry",
                "premature retries"
            )
        )
    };
    writeln!(out, "## holdoff: {mark}: {what}\n")?;
    if !report.complete {
        writeln!(
            out,
            "> The event log has no finish event: the run was cut short, and the counts may be \
             partial.\n"
        )?;
    }
    counts(out, report)?;
    violations(out, report)?;
    endpoints(out, report)?;
    herds(out, report)?;
    reproduce(out, report)
}

fn counts(out: &mut String, report: &Report) -> fmt::Result {
    writeln!(out, "| | |\n|:--|--:|")?;
    writeln!(out, "| Requests | {} |", report.requests)?;
    writeln!(out, "| Throttled responses | {} |", report.throttled)?;
    writeln!(out, "| Compliant retries | {} |", report.retries.compliant)?;
    writeln!(out, "| Premature retries | {} |", report.retries.premature)?;
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
pub(super) fn faults_line(f: &crate::fault::FaultCounts) -> String {
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
    let times = report.times();
    writeln!(
        out,
        "### Premature retries, the most premature first ({})\n",
        times.note()
    )?;
    writeln!(
        out,
        "| Client | Request | Early by | Retried at | Permitted at |\n|:--|:--|--:|:--|:--|"
    )?;
    for v in worst.iter().take(ROWS) {
        writeln!(
            out,
            "| {} | {} | {} | {} | {} |",
            md(&v.client),
            md_code(&format!("{} {}", v.method, v.url)),
            millis(v.early_by_ms),
            times.show(v.retried_at),
            times.show(v.permitted_at),
        )?;
    }
    if worst.len() > ROWS {
        writeln!(
            out,
            "\n…and {} more (the JSON report lists them all).",
            worst.len() - ROWS
        )?;
    }
    writeln!(out)
}

fn endpoints(out: &mut String, report: &Report) -> fmt::Result {
    if report.endpoints.is_empty() {
        return Ok(());
    }
    writeln!(out, "### By client and request\n")?;
    writeln!(
        out,
        "| Client | Request | Throttled | Compliant | Premature |\n|:--|:--|--:|--:|--:|"
    )?;
    // Failing ones first, so that a cut table still shows them.
    let mut rows: Vec<_> = report.endpoints.iter().collect();
    rows.sort_by_key(|e| std::cmp::Reverse(e.premature > 0));
    for e in rows.iter().take(ROWS) {
        writeln!(
            out,
            "| {} | {} | {} | {} | {} |",
            md(&e.client),
            md_code(&format!("{} {}", e.method, e.url)),
            e.throttles,
            e.compliant,
            e.premature,
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
            "Faults from {}, seed {seed}: the same seed and the same sequence of requests give the \
             same faults.\n",
            md(source)
        )?,
        None => writeln!(out, "Faults from {}, with no seed.\n", md(source))?,
    }
    let seed = report
        .seed
        .map(|s| format!(" --seed {s}"))
        .unwrap_or_default();
    let command = match &report.command {
        Some(command) => format!("holdoff run{seed} -- {}", shell_words(command)),
        None => format!("holdoff proxy{seed}"),
    };
    let fence = "`".repeat(3.max(longest_backticks(&command) + 1));
    writeln!(out, "{fence}sh\n{command}\n{fence}")
}

fn longest_backticks(s: &str) -> usize {
    s.split(|c| c != '`').map(str::len).max().unwrap_or(0)
}
