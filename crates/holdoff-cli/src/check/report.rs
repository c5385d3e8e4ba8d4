//! `holdoff check`'s reports: the table and its summary line, JSON, JUnit XML and HTML. Pure:
//! each renders the rows to a string (or the table to a writer), nothing more.

use std::ffi::OsString;
use std::fmt::Write as _;
use std::io::{self, Write};

use holdoff_proxy::report::escape_markup as esc;
use quick_junit::{NonSuccessKind, TestCase, TestCaseStatus, TestSuite};
use serde_json::json;

use super::Row;
use super::verdict::Verdict;

/// The command as one line quoted for a POSIX shell, for the reports.
pub(crate) fn command_line(command: &[OsString]) -> String {
    let words: Vec<String> = command
        .iter()
        .map(|word| word.to_string_lossy().into_owned())
        .collect();
    // Only a NUL fails the join, and no argument on a command line holds one.
    shlex::try_join(words.iter().map(String::as_str)).unwrap_or_default()
}

/// The table's columns and their widths: it fits 100 columns, the cells wrapped at their
/// widths, and each row's why below it, indented and wrapped at 100.
const COLUMNS: [(&str, usize); 4] = [
    ("SCENARIO", 18),
    ("SENT", 28),
    ("CLIENT", 36),
    ("VERDICT", 10),
];

/// How wide the table is.
const WIDTH: usize = 100;

/// How far a row's why is indented.
const WHY_INDENT: usize = 4;

/// The table's header (each row's why, below it, has none).
pub(crate) fn write_header(out: &mut dyn Write) -> io::Result<()> {
    write_cells(&COLUMNS.map(|(name, _)| name.to_owned()), out)
}

/// One row of the table: its cells, each wrapped to its column, then its why.
pub(crate) fn write_row(row: &Row, out: &mut dyn Write) -> io::Result<()> {
    let cells = [
        row.scenario.name.to_owned(),
        row.sends.clone(),
        row.outcome.did.clone(),
        verdict_cell(row),
    ];
    write_cells(&cells, out)?;
    for line in wrap(&row.outcome.why, WIDTH - WHY_INDENT) {
        writeln!(out, "{:indent$}{line}", "", indent = WHY_INDENT)?;
    }
    Ok(())
}

/// The verdict as the table shows it: an unreliable pass says why.
fn verdict_cell(row: &Row) -> String {
    match row.outcome.verdict {
        Verdict::Unreliable => "unreliable under load".to_owned(),
        verdict => verdict.as_str().to_owned(),
    }
}

/// Cells side by side, each wrapped to its column's width.
fn write_cells(cells: &[String; 4], out: &mut dyn Write) -> io::Result<()> {
    let wrapped: Vec<Vec<String>> = cells
        .iter()
        .zip(COLUMNS)
        .map(|(cell, (_, width))| wrap(cell, width))
        .collect();
    let height = wrapped.iter().map(Vec::len).max().unwrap_or(1);
    for n in 0..height {
        let mut line = String::new();
        for (lines, (_, width)) in wrapped.iter().zip(COLUMNS) {
            let cell = lines.get(n).map_or("", String::as_str);
            let pad = width.saturating_sub(cell.chars().count());
            line.push_str(&format!("{cell}{:pad$}  ", ""));
        }
        writeln!(out, "{}", line.trim_end())?;
    }
    Ok(())
}

/// `text` in lines of at most `width` characters, broken at spaces (a longer word alone on
/// its line).
fn wrap(text: &str, width: usize) -> Vec<String> {
    let mut lines = Vec::new();
    let mut line = String::new();
    for word in text.split(' ').filter(|word| !word.is_empty()) {
        let needed = line.chars().count() + usize::from(!line.is_empty()) + word.chars().count();
        if !line.is_empty() && needed > width {
            lines.push(std::mem::take(&mut line));
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(word);
    }
    if !line.is_empty() || lines.is_empty() {
        lines.push(line);
    }
    lines
}

/// How many rows have `verdict`.
fn count(rows: &[Row], verdict: Verdict) -> usize {
    rows.iter()
        .filter(|row| row.outcome.verdict == verdict)
        .count()
}

/// What the rows show, counted by what was measured, then what the failures and warnings say
/// about the client, each with the scenarios that showed it — failures first:
///
/// `honours Retry-After in 9 of 10 scenarios where it retried (1 fail); gave up in 5 (rightly
/// in quota); 1 n/a; caps long hints at about 60 s (long-90, long-150)`
///
/// A scenario in which the client made no retry counts only as such: it shows nothing about
/// how the client honours a hint. A client that retried in none gets its own headline.
pub(crate) fn summary(rows: &[Row]) -> String {
    let retried: Vec<&Row> = rows.iter().filter(|row| row.outcome.retried()).collect();
    let tested = rows.len() - count(rows, Verdict::NotApplicable);
    let mut parts = Vec::new();
    if tested == 0 {
        parts.push("not tested: no request reached the proxy in any scenario".to_owned());
    } else if retried.is_empty() {
        parts.push("never retried: is retrying on?".to_owned());
    } else {
        let with = |verdict| {
            retried
                .iter()
                .filter(|row| row.outcome.verdict == verdict)
                .count()
        };
        let mut line = format!(
            "honours Retry-After in {} of {} scenario{} where it retried",
            with(Verdict::Pass),
            retried.len(),
            if retried.len() == 1 { "" } else { "s" }
        );
        let others: Vec<String> = [
            (Verdict::Fail, "fail"),
            (Verdict::Warn, "warn"),
            (Verdict::Unreliable, "unreliable under load"),
        ]
        .into_iter()
        .filter(|(verdict, _)| with(*verdict) > 0)
        .map(|(verdict, name)| format!("{} {name}", with(verdict)))
        .collect();
        if !others.is_empty() {
            line.push_str(&format!(" ({})", others.join(", ")));
        }
        parts.push(line);
    }
    let quiet =
        |row: &&Row| !row.outcome.retried() && row.outcome.verdict != Verdict::NotApplicable;
    let gave_up: Vec<&Row> = rows
        .iter()
        .filter(quiet)
        .filter(|row| !row.outcome.timed_out)
        .collect();
    if !gave_up.is_empty() {
        let rightly: Vec<&str> = gave_up
            .iter()
            .filter(|row| row.outcome.verdict == Verdict::Pass)
            .map(|row| row.scenario.name)
            .collect();
        let mut line = format!("gave up in {}", gave_up.len());
        if !rightly.is_empty() {
            line.push_str(&format!(" (rightly in {})", rightly.join(", ")));
        }
        parts.push(line);
    }
    let waiting = rows
        .iter()
        .filter(quiet)
        .filter(|row| row.outcome.timed_out)
        .count();
    if waiting > 0 {
        parts.push(format!("no retry before the time limit in {waiting}"));
    }
    let not_tested = count(rows, Verdict::NotApplicable);
    if not_tested > 0 {
        parts.push(format!("{not_tested} n/a"));
    }
    let mut findings: Vec<(&str, Vec<&str>)> = Vec::new();
    for verdict in [Verdict::Fail, Verdict::Warn] {
        for row in rows.iter().filter(|row| row.outcome.verdict == verdict) {
            let Some(finding) = row.outcome.finding.as_deref() else {
                continue;
            };
            match findings.iter_mut().find(|(seen, _)| *seen == finding) {
                Some((_, names)) => names.push(row.scenario.name),
                None => findings.push((finding, vec![row.scenario.name])),
            }
        }
    }
    for (finding, names) in findings {
        parts.push(format!("{finding} ({})", names.join(", ")));
    }
    parts.join("; ")
}

/// The results as JSON: the same rows and summary as the table, and the command.
pub(crate) fn json(rows: &[Row], command: &str) -> String {
    let scenarios: Vec<serde_json::Value> = rows
        .iter()
        .map(|row| {
            json!({
                "scenario": row.scenario.name,
                "sent": row.sends,
                "did": row.outcome.did,
                "verdict": row.outcome.verdict.as_str(),
                "why": row.outcome.why,
                "finding": row.outcome.finding,
                "requests": row.outcome.requests,
                "retries": row.outcome.retries,
                "first_retry_after_s": row.outcome.first_retry_after_s,
                "waits_s": row.outcome.waits,
                "copy_waits_s": row.outcome.copy_waits,
                "margin_s": row.outcome.margin_s,
                "exit_code": row.outcome.exit_code,
                "timed_out": row.outcome.timed_out,
                "duration_s": row.elapsed.as_secs_f64(),
                "noise_ms": {
                    "max": row.noise.max.as_secs_f64() * 1000.0,
                    "p99": row.noise.p99.as_secs_f64() * 1000.0,
                },
                "stdout_tail": row.outcome.output.stdout,
                "stderr_tail": row.outcome.output.stderr,
            })
        })
        .collect();
    let value = json!({ "command": command, "scenarios": scenarios, "summary": summary(rows) });
    serde_json::to_string_pretty(&value).unwrap_or_default() + "\n"
}

/// The results as JUnit XML: one test case per scenario, failing when it failed, skipped when
/// nothing was tested; a warning passes, with its reason in the case's output.
pub(crate) fn junit(rows: &[Row], command: &str) -> String {
    let mut suite = TestSuite::new(format!("holdoff check: {command}"));
    for row in rows {
        let outcome = &row.outcome;
        let detail = format!(
            "sent: {}\nclient: {}\nverdict: {}: {}",
            row.sends,
            outcome.did,
            outcome.verdict.as_str(),
            outcome.why
        );
        let status = match outcome.verdict {
            Verdict::Fail => {
                let mut status = TestCaseStatus::non_success(NonSuccessKind::Failure);
                status
                    .set_message(&outcome.why)
                    .set_type("retry-after")
                    .set_description(&detail);
                status
            }
            verdict if skipped(verdict) => {
                let mut status = TestCaseStatus::skipped();
                status.set_message(format!("{}: {}", verdict.as_str(), outcome.why));
                status
            }
            _ => TestCaseStatus::success(),
        };
        let mut case = TestCase::new(row.scenario.name, status);
        case.set_classname("holdoff.check")
            .set_time(row.elapsed)
            .set_system_out(detail);
        suite.add_test_case(case);
    }
    let time = rows.iter().map(|row| row.elapsed).max().unwrap_or_default();
    suite.set_time(time);
    // quick-junit counts skipped cases as `disabled`; CI test tabs read `skipped`.
    let skips = suite.disabled.to_string();
    suite.extra.insert("skipped".into(), skips.into());
    let mut report = quick_junit::Report::new("holdoff check");
    report.set_time(time).add_test_suite(suite);
    // Serializing into memory cannot fail. quick-junit drops control characters but leaves
    // U+FFFE and U+FFFF, which XML 1.0 forbids: U+FFFD, as in the proxy's reports.
    let xml = report.to_string().unwrap_or_default();
    xml.replace(['\u{FFFE}', '\u{FFFF}'], "\u{FFFD}")
}

/// Whether a verdict is a skipped test case in JUnit: nothing was tested (n/a), the client
/// made no retry to judge, or a pass could not be told from a fail.
fn skipped(verdict: Verdict) -> bool {
    matches!(
        verdict,
        Verdict::NotApplicable | Verdict::GaveUp | Verdict::Unreliable
    )
}

/// The results as one self-contained HTML page: the command, the summary, and the table with
/// each verdict coloured.
pub(crate) fn html(rows: &[Row], command: &str) -> String {
    let mut body = String::new();
    for row in rows {
        let outcome = &row.outcome;
        let verdict = outcome.verdict.as_str();
        let class = match outcome.verdict {
            Verdict::NotApplicable => "na",
            Verdict::GaveUp => "gaveup",
            _ => verdict,
        };
        let mut said = String::new();
        for (stream, lines) in [
            ("stdout", &outcome.output.stdout),
            ("stderr", &outcome.output.stderr),
        ] {
            if !lines.is_empty() {
                let _ = write!(
                    said,
                    "<details><summary>last lines of {stream}</summary><pre>{}</pre></details>",
                    esc(&lines.join("\n"))
                );
            }
        }
        let _ = writeln!(
            body,
            "<tr><td><code>{}</code></td><td>{}</td><td>{}{said}</td><td class=\"{class}\">{verdict}</td><td>{}</td></tr>",
            esc(row.scenario.name),
            esc(&row.sends),
            esc(&outcome.did),
            esc(&outcome.why)
        );
    }
    format!(
        r#"<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>holdoff check: {command}</title>
<style>
body {{ font: 15px/1.45 system-ui, sans-serif; margin: 2rem; color: #1b1b1b; }}
table {{ border-collapse: collapse; }}
th, td {{ border-bottom: 1px solid #ddd; padding: .35rem .6rem; text-align: left; vertical-align: top; }}
.pass {{ background: #dff5e1; }} .fail {{ background: #fbdcdc; font-weight: 600; }}
.warn {{ background: #fff1c9; }} .na, .gaveup, .unreliable {{ color: #555; background: #eee; }}
details {{ margin-top: .3rem; }} pre {{ margin: .2rem 0; font-size: 13px; white-space: pre-wrap; }}
</style>
</head>
<body>
<h1>holdoff check</h1>
<p><code>{command}</code></p>
<p><strong>{summary}</strong></p>
<table>
<thead><tr><th>scenario</th><th>sent</th><th>client</th><th>verdict</th><th>why</th></tr></thead>
<tbody>
{body}</tbody>
</table>
</body>
</html>
"#,
        command = esc(command),
        summary = esc(&summary(rows)),
    )
}
