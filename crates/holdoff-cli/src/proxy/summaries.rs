//! What a stopped run prints on stderr, as text for people or as JSON log events: what the
//! faults did, the judge's verdicts and the proxy's summary.

use std::io::{self, Write};

use holdoff_proxy::report::Report;
use holdoff_proxy::{FaultCounts, Summary};

use super::logging::Guard;
use super::options::Output;

/// What the faults did, one line (the JSON event has the seed too; the text leaves it to the
/// summary's reproduce line).
pub(super) fn report_faults(counts: &FaultCounts, seed: u64, output: Output, logs: &Guard) {
    let line = format!(
        "holdoff faults: {}, {} rate-limited, {} mocked, {} delayed, {}, {}, {} truncated, {} \
         slowed{}.",
        plural(counts.errors, "error response", "error responses"),
        counts.rate_limited,
        counts.mocked,
        counts.delayed,
        plural(counts.resets, "reset", "resets"),
        plural(counts.hangs, "hang", "hangs"),
        counts.truncated,
        counts.slowed,
        match counts.llm_failures {
            0 => String::new(),
            n => format!(", {n} language-model failures"),
        }
    );
    match output {
        Output::Text => {
            logs.flush();
            let _ = writeln!(io::stderr(), "{line}");
        }
        Output::Json => tracing::info!(
            target: "holdoff::faults",
            errors = counts.errors,
            rate_limited = counts.rate_limited,
            mocked = counts.mocked,
            delayed = counts.delayed,
            resets = counts.resets,
            hangs = counts.hangs,
            truncated = counts.truncated,
            slowed = counts.slowed,
            llm_failures = counts.llm_failures,
            seed,
            "{line}"
        ),
    }
}

/// What the judge found: the counts, as a text line (the report's summary lists the worst
/// violations), or as JSON events (target `holdoff::judge`) with each retry that broke its
/// window, the most early first.
pub(super) fn report_verdicts(report: &Report, output: Output, logs: &Guard) {
    let (premature, read_as_zero, no_backoff, compliant) = (
        report.premature(),
        report.read_as_zero(),
        report.no_backoff(),
        report.compliant(),
    );
    let mut counts = vec![format!("{premature} premature")];
    if read_as_zero > 0 {
        counts.push(format!("{read_as_zero} read as zero"));
    }
    if no_backoff > 0 {
        counts.push(format!("{no_backoff} without backoff"));
    }
    let all = premature + read_as_zero + no_backoff + compliant;
    let line = format!(
        "holdoff judge: {} and {compliant} compliant retr{}.",
        counts.join(", "),
        if all == 1 { "y" } else { "ies" }
    );
    match output {
        Output::Text => {
            logs.flush();
            let _ = writeln!(io::stderr(), "{line}");
        }
        Output::Json => {
            // The earliest first; inside a window that never closes is the most early of all.
            let mut broke: Vec<_> = report.worst();
            let early =
                |v: &&holdoff_proxy::report::Violation| v.early_by_ms.unwrap_or(f64::INFINITY);
            let mut warnings: Vec<_> = report.warnings().iter().collect();
            warnings.sort_by(|a, b| early(b).total_cmp(&early(a)));
            broke.extend(warnings);
            for violation in broke.iter().take(10) {
                tracing::warn!(
                    target: "holdoff::judge",
                    verdict = violation.kind.as_str(),
                    client = %violation.client,
                    user_agent = violation.user_agent.as_deref().unwrap_or_default(),
                    method = %violation.method,
                    url = %violation.url,
                    early_ms = violation.early_by_ms.map(|ms| ms as u64),
                    "{} retry",
                    violation.kind.as_str().replace('_', " ")
                );
            }
            tracing::info!(
                target: "holdoff::judge",
                premature,
                read_as_zero,
                no_backoff,
                compliant,
                "{line}"
            );
        }
    }
}

/// The proxy's summary: a paragraph for people, or one JSON log line.
pub(super) fn report_summary(summary: &Summary, output: Output, logs: &Guard) {
    match output {
        Output::Text => {
            // After the log lines before it.
            logs.flush();
            let _ = writeln!(io::stderr(), "{summary}");
        }
        Output::Json => tracing::info!(
            target: "holdoff::summary",
            requests = summary.requests,
            status_1xx = summary.by_class[0],
            status_2xx = summary.by_class[1],
            status_3xx = summary.by_class[2],
            status_4xx = summary.by_class[3],
            status_5xx = summary.by_class[4],
            tunnels = summary.tunnels,
            intercepted = summary.intercepted,
            errors = summary.errors,
            aborted = summary.aborted,
            cut = summary.cut,
            uptime_s = summary.uptime.as_secs_f64(),
            "{summary}"
        ),
    }
}

/// `1 reset`, `2 resets`.
fn plural(n: u64, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}
