//! `holdoff check`'s reports: the table and its summary line, JSON, JUnit XML and HTML. Pure:
//! each renders the rows to a string (or the table to a writer), nothing more.

use std::ffi::OsString;
use std::fmt::Write as _;
use std::io::{self, Write};

use holdoff_proxy::report::{escape_markup as esc, shell_words};
use serde_json::json;

use super::Row;
use super::verdict::Verdict;

/// The command as one line, for the reports.
pub(crate) fn command_line(command: &[OsString]) -> String {
    let words: Vec<String> = command
        .iter()
        .map(|word| word.to_string_lossy().into_owned())
        .collect();
    shell_words(&words)
}

/// The table: one row per scenario, then the summary line.
pub(crate) fn write_table(rows: &[Row], out: &mut dyn Write) -> io::Result<()> {
    let header = ["SCENARIO", "SENT", "CLIENT", "VERDICT", "WHY"];
    let cells: Vec<[String; 5]> = rows
        .iter()
        .map(|row| {
            [
                row.scenario.name.to_owned(),
                row.sends.clone(),
                row.outcome.did.clone(),
                row.outcome.verdict.as_str().to_owned(),
                row.outcome.why.clone(),
            ]
        })
        .collect();
    let mut widths = header.map(str::len);
    for row in &cells {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let line = |cells: [&str; 5], out: &mut dyn Write| {
        let mut text = String::new();
        for (n, cell) in cells.iter().enumerate().take(4) {
            let pad = widths[n].saturating_sub(cell.chars().count());
            text.push_str(&format!("{cell}{:pad$}  ", ""));
        }
        text.push_str(cells[4]);
        writeln!(out, "{}", text.trim_end())
    };
    line(header, out)?;
    for row in &cells {
        line(row.each_ref().map(String::as_str), out)?;
    }
    writeln!(out, "{}", summary(rows))
}

/// How many rows have `verdict`.
fn count(rows: &[Row], verdict: Verdict) -> usize {
    rows.iter()
        .filter(|row| row.outcome.verdict == verdict)
        .count()
}

/// `honours Retry-After: 9/11 (1 fail, 1 warn); caps long hints at about 60 s (long-90); …`:
/// passes out of the scenarios tested, then what the failures and warnings say about the
/// client, each with the scenarios that showed it — failures first.
pub(crate) fn summary(rows: &[Row]) -> String {
    let tested = rows.len() - count(rows, Verdict::NotApplicable);
    let mut line = format!(
        "honours Retry-After: {}/{tested}",
        count(rows, Verdict::Pass)
    );
    let rest: Vec<String> = [Verdict::Fail, Verdict::Warn, Verdict::NotApplicable]
        .into_iter()
        .filter(|&verdict| count(rows, verdict) > 0)
        .map(|verdict| format!("{} {}", count(rows, verdict), verdict.as_str()))
        .collect();
    if !rest.is_empty() {
        line.push_str(&format!(" ({})", rest.join(", ")));
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
        line.push_str(&format!("; {finding} ({})", names.join(", ")));
    }
    line
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
                "exit_code": row.outcome.exit_code,
                "timed_out": row.outcome.timed_out,
                "duration_s": row.elapsed.as_secs_f64(),
            })
        })
        .collect();
    let value = json!({ "command": command, "scenarios": scenarios, "summary": summary(rows) });
    serde_json::to_string_pretty(&value).unwrap_or_default() + "\n"
}

/// The results as JUnit XML: one test case per scenario, failing when it failed, skipped when
/// nothing was tested; a warning passes, with its reason in the case's output.
pub(crate) fn junit(rows: &[Row], command: &str) -> String {
    let (tests, failures) = (rows.len(), count(rows, Verdict::Fail));
    let skipped = count(rows, Verdict::NotApplicable);
    let seconds: f64 = rows
        .iter()
        .map(|row| row.elapsed.as_secs_f64())
        .fold(0.0, f64::max);
    let mut out = String::new();
    // Writing to a String cannot fail.
    let _ = writeln!(out, r#"<?xml version="1.0" encoding="UTF-8"?>"#);
    let _ = writeln!(
        out,
        r#"<testsuites name="holdoff check" tests="{tests}" failures="{failures}" errors="0" time="{seconds:.3}">"#
    );
    let _ = writeln!(
        out,
        r#"  <testsuite name="holdoff check: {}" tests="{tests}" failures="{failures}" errors="0" skipped="{skipped}" time="{seconds:.3}">"#,
        esc(command)
    );
    for row in rows {
        let outcome = &row.outcome;
        let _ = writeln!(
            out,
            r#"    <testcase classname="holdoff.check" name="{}" time="{:.3}">"#,
            esc(row.scenario.name),
            row.elapsed.as_secs_f64()
        );
        let detail = format!(
            "sent: {}\nclient: {}\nverdict: {}: {}",
            row.sends,
            outcome.did,
            outcome.verdict.as_str(),
            outcome.why
        );
        match outcome.verdict {
            Verdict::Fail => {
                let _ = writeln!(
                    out,
                    r#"      <failure message="{}" type="retry-after">{}</failure>"#,
                    esc(&outcome.why),
                    esc(&detail)
                );
            }
            Verdict::NotApplicable => {
                let _ = writeln!(out, r#"      <skipped message="{}"/>"#, esc(&outcome.why));
            }
            Verdict::Pass | Verdict::Warn => {}
        }
        let _ = writeln!(out, "      <system-out>{}</system-out>", esc(&detail));
        let _ = writeln!(out, "    </testcase>");
    }
    let _ = writeln!(out, "  </testsuite>");
    let _ = writeln!(out, "</testsuites>");
    out
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
            _ => verdict,
        };
        let _ = writeln!(
            body,
            "<tr><td><code>{}</code></td><td>{}</td><td>{}</td><td class=\"{class}\">{verdict}</td><td>{}</td></tr>",
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
.warn {{ background: #fff1c9; }} .na {{ color: #777; }}
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
