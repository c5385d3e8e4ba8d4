//! The HTML report: one self-contained page — no script, no network, no external asset —
//! with the verdict, a timeline chart per client drawn as inline SVG, a histogram of how late
//! compliant retries came, the violations, the herds and the run's details.
//!
//! The charts' elements have stable classes for tests and user styles: each chart is an
//! `svg.timeline` (with `data-client`, `data-premature`, `data-read-as-zero`,
//! `data-no-backoff` and `data-compliant`), drawn on a `rect.paper`; every throttle is a
//! `path.throttle`, and its window a `rect.window` (with `data-hint`) to its permitted time:
//! the hint's, the minimum backoff's for a malformed hint (`rect.window.malformed`) or none
//! (`rect.window.no-hint`, a short one), or to the end of the chart for a hint beyond the
//! clock's range (`rect.window.unbounded`). A retry is a `circle.retry.premature` or
//! `circle.retry.read-as-zero` (red), `circle.retry.no-backoff` (amber) or
//! `circle.retry.compliant` (green). The histogram is an `svg.histogram` of `rect.bar`s.

mod charts;

use std::fmt::{self, Write as _};

#[cfg(test)]
pub(crate) use charts::PLOT_END;
pub(crate) use charts::bucket;

use super::document::{Block, Document, Part, Row, Section, Span, Style, Table, Text};
use super::run::Report;
use super::text::xml;

/// The most rows a table shows.
const MAX_ROWS: usize = 200;

/// The rows of violations (and of warnings) shown open, the worst first; the rest, up to
/// [`MAX_ROWS`], are one click away in a `<details>` that needs no script.
const SHOWN_RETRIES: usize = 10;

pub(super) fn render(report: &Report) -> String {
    let mut out = String::with_capacity(32 * 1024);
    // Writing to a String cannot fail.
    let _ = write(&mut out, report, &report.document());
    out
}

fn write(out: &mut String, report: &Report, document: &Document) -> fmt::Result {
    let headline = &document.headline;
    writeln!(out, "<!DOCTYPE html>")?;
    writeln!(out, r#"<html lang="en">"#)?;
    writeln!(out, "<head>")?;
    writeln!(out, r#"<meta charset="utf-8">"#)?;
    writeln!(
        out,
        r#"<meta name="viewport" content="width=device-width, initial-scale=1">"#
    )?;
    writeln!(out, r#"<meta name="generator" content="holdoff">"#)?;
    writeln!(out, "<title>holdoff report: {}</title>", headline.mark)?;
    writeln!(out, "<style>{CSS}</style>")?;
    writeln!(out, "</head>")?;
    writeln!(out, "<body>")?;
    writeln!(out, "<main>")?;
    writeln!(
        out,
        r#"<header class="verdict {}" id="verdict"><span class="mark">{} {}</span><div><h1>{}.</h1><div class="note">{}.</div></div></header>"#,
        headline.class,
        headline.symbol,
        xml(headline.mark),
        xml(&capitalise(&headline.what)),
        xml(&headline.counts),
    )?;
    for section in &document.sections {
        write_section(out, section)?;
        // The drawings follow the counts.
        if section.part == Part::Counts {
            charts::timelines(out, report)?;
            charts::histogram(out, report)?;
        }
    }
    writeln!(out, "</main>")?;
    writeln!(out, "</body>")?;
    writeln!(out, "</html>")
}

const CSS: &str = r#"
:root { color-scheme: light; }
body { margin: 0; background: #fff; color: #1f2328;
  font: 15px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif; }
main { max-width: 1140px; margin: 0 auto; padding: 16px 20px 48px; }
h1 { font-size: 1.5rem; margin: 0; }
h2 { font-size: 1.15rem; margin: 2rem 0 .6rem; border-bottom: 1px solid #e4e7ec; padding-bottom: .3rem; }
.verdict { border-radius: 8px; padding: 14px 18px; display: flex; gap: 16px; align-items: center; }
.verdict .mark { font-size: 1.6rem; font-weight: 700; letter-spacing: .04em; }
.verdict.pass { background: #e6f4ea; color: #14532d; border: 1px solid #a7d7b5; }
.verdict.fail { background: #fbeaea; color: #7a1111; border: 1px solid #e8b4b4; }
.verdict.untested, .verdict.unsure { background: #fff4e0; color: #6b4200; border: 1px solid #f0c987; }
td.why { font-size: .85rem; }
.note { color: #57606a; font-size: .9rem; }
.stats { display: grid; grid-template-columns: repeat(auto-fill, minmax(160px, 1fr)); gap: 10px; margin-top: 14px; }
.stat { border: 1px solid #e4e7ec; border-radius: 8px; padding: 8px 12px; }
.stat .n { font-size: 1.35rem; font-weight: 600; display: block; }
.stat .what { color: #57606a; font-size: .85rem; }
figure { margin: 0 0 18px; }
figcaption { font-weight: 600; margin-bottom: 4px; }
figcaption .counts { font-weight: 400; color: #57606a; font-size: .9rem; }
svg { max-width: 100%; height: auto; display: block; font-family: inherit; }
svg text { font-size: 12px; fill: #3d444d; }
.legend { display: flex; gap: 18px; flex-wrap: wrap; align-items: center; font-size: .9rem; color: #3d444d; margin-bottom: 10px; }
.legend svg { display: inline-block; vertical-align: middle; margin-right: 4px; }
table { border-collapse: collapse; width: 100%; font-size: .9rem; }
th, td { text-align: left; padding: 5px 8px; border-bottom: 1px solid #eaecef; vertical-align: top; }
th { background: #f6f8fa; }
td.num, th.num { text-align: right; white-space: nowrap; }
td.url { word-break: normal; overflow-wrap: normal; font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; font-size: .85rem; }
details.more { margin-top: 6px; }
details.more > summary { cursor: pointer; color: #0b57d0; padding: 4px 0; }
dl { display: grid; grid-template-columns: max-content minmax(0, 1fr); gap: 4px 16px; }
dt { color: #57606a; }
dd { margin: 0; word-break: normal; overflow-wrap: break-word; }
.notice { border-left: 4px solid #f0c987; background: #fff8ec; padding: 8px 12px; }
pre { background: #f6f8fa; padding: 8px 12px; overflow-x: auto; }
code { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; font-size: .85rem; }
"#;

/// `s` with its first letter in upper case.
fn capitalise(s: &str) -> String {
    let mut chars = s.chars();
    match chars.next() {
        Some(first) => first.to_uppercase().chain(chars).collect(),
        None => String::new(),
    }
}

/// A section; one with a title keeps its place, saying what its emptiness means.
fn write_section(out: &mut String, section: &Section) -> fmt::Result {
    if section.title.is_none() && section.blocks.is_empty() {
        return Ok(());
    }
    writeln!(out, r#"<section id="{}">"#, section.part.id())?;
    if let Some(title) = section.title {
        writeln!(out, "<h2>{}</h2>", xml(title))?;
    }
    if section.blocks.is_empty() {
        if let Some(empty) = &section.empty {
            writeln!(out, r#"<p class="note">{}</p>"#, inline(empty))?;
        }
        return writeln!(out, "</section>");
    }
    if let Some(times) = &section.times {
        writeln!(out, r#"<p class="note">{}.</p>"#, xml(times))?;
    }
    for block in &section.blocks {
        match block {
            Block::Notice(text) => writeln!(out, r#"<p class="notice">{}</p>"#, inline(text))?,
            Block::Paragraph(text) => writeln!(out, "<p>{}</p>", inline(text))?,
            Block::List(items) => {
                writeln!(out, "<ul>")?;
                for item in items {
                    writeln!(out, "<li>{}</li>", inline(item))?;
                }
                writeln!(out, "</ul>")?;
            }
            // The counts as cards, any other facts as a list of terms.
            Block::Facts(facts) if section.part == Part::Counts => {
                writeln!(out, r#"<div class="stats">"#)?;
                for (what, value) in facts {
                    writeln!(
                        out,
                        r#"<div class="stat"><span class="n">{}</span><span class="what">{}</span></div>"#,
                        xml(value),
                        xml(what)
                    )?;
                }
                writeln!(out, "</div>")?;
            }
            Block::Facts(facts) => {
                writeln!(out, "<dl>")?;
                for (what, value) in facts {
                    writeln!(out, "<dt>{}</dt><dd>{}</dd>", xml(what), xml(value))?;
                }
                writeln!(out, "</dl>")?;
            }
            Block::Table(table) => {
                let shown = match section.part {
                    Part::Violations | Part::Warnings => SHOWN_RETRIES,
                    _ => MAX_ROWS,
                };
                write_table(out, table, shown)?;
            }
            Block::Command(command) => {
                writeln!(out, "<pre><code>{}</code></pre>", xml(command))?;
            }
        }
    }
    writeln!(out, "</section>")
}

/// A table: its first `shown` rows, then the rest up to [`MAX_ROWS`] folded in a
/// `<details class="more">` whose summary says how many, then how many are left out.
fn write_table(out: &mut String, table: &Table, shown: usize) -> fmt::Result {
    let rows = &table.rows[..table.rows.len().min(MAX_ROWS)];
    let (open, folded) = rows.split_at(rows.len().min(shown));
    write_rows(out, table, open)?;
    if !folded.is_empty() {
        writeln!(
            out,
            r#"<details class="more"><summary>And {} more</summary>"#,
            folded.len()
        )?;
        write_rows(out, table, folded)?;
        writeln!(out, "</details>")?;
    }
    if table.rows.len() > MAX_ROWS {
        writeln!(
            out,
            r#"<p class="note">And {} more{}.</p>"#,
            table.rows.len() - MAX_ROWS,
            xml(table.rest)
        )?;
    }
    Ok(())
}

/// `rows` of `table`, under its header.
fn write_rows(out: &mut String, table: &Table, rows: &[Row]) -> fmt::Result {
    let class = |style: Style| match style {
        Style::Text => "",
        Style::Number => r#" class="num""#,
        Style::Request => r#" class="url""#,
        Style::Prose => r#" class="why""#,
    };
    write!(out, "<table><thead><tr>")?;
    for column in table.columns {
        let th_class = if column.style == Style::Number {
            class(Style::Number)
        } else {
            ""
        };
        write!(out, "<th{th_class}>{}</th>", xml(column.title))?;
    }
    writeln!(out, "</tr></thead><tbody>")?;
    for row in rows {
        match row.kind {
            Some(kind) => write!(out, r#"<tr data-kind="{kind}">"#)?,
            None => write!(out, "<tr>")?,
        }
        for (column, cell) in table.columns.iter().zip(&row.cells) {
            let text = match column.style {
                Style::Request => breakable(&cell.to_plain()),
                _ => inline(cell),
            };
            write!(out, "<td{}>{text}</td>", class(column.style))?;
        }
        writeln!(out, "</tr>")?;
    }
    writeln!(out, "</tbody></table>")
}

/// A request or URL as HTML that may wrap after a `/` (but not inside `://`), `?` or `&` (a
/// `<wbr>` there), and nowhere inside a host or a path segment.
fn breakable(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 32);
    let mut chars = s.chars().peekable();
    let mut previous = None;
    while let Some(c) = chars.next() {
        let mut buf = [0; 4];
        out.push_str(&xml(c.encode_utf8(&mut buf)));
        let after = match c {
            '/' => previous != Some('/') && chars.peek() != Some(&'/'),
            '?' | '&' => true,
            _ => false,
        };
        if after {
            out.push_str("<wbr>");
        }
        previous = Some(c);
    }
    out
}

/// Text as HTML: code in `<code>`, strong in `<strong>`.
fn inline(text: &Text) -> String {
    text.0
        .iter()
        .map(|span| match span {
            Span::Plain(s) => xml(s).into_owned(),
            Span::Code(s) => format!("<code>{}</code>", xml(s)),
            Span::Strong(t) => format!("<strong>{}</strong>", inline(t)),
        })
        .collect()
}
