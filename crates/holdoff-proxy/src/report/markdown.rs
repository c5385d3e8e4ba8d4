//! The Markdown report: what a reviewer reads in a pull-request comment — the [`Document`]
//! with Markdown's escaping, its tables cut at [`ROWS`] rows.

use std::fmt::{self, Write as _};

use super::document::{Block, Document, Section, Span, Style, Table, Text};
use super::run::Report;
use super::text::{md, md_code};

/// How many rows a table shows before "and N more".
const ROWS: usize = 20;

pub(super) fn render(report: &Report) -> String {
    let mut out = String::new();
    // Writing to a String cannot fail.
    let _ = write(&mut out, &report.document());
    out
}

fn write(out: &mut String, document: &Document) -> fmt::Result {
    let headline = &document.headline;
    writeln!(
        out,
        "## holdoff: {} {} {}\n",
        headline.symbol,
        headline.lead(),
        md(&headline.what)
    )?;
    // A comment keeps to what a reviewer acts on: no reference details, no empty sections.
    for section in document.sections.iter().filter(|s| !s.reference) {
        write_section(out, section)?;
    }
    Ok(())
}

fn write_section(out: &mut String, section: &Section) -> fmt::Result {
    if section.blocks.is_empty() {
        return Ok(());
    }
    if let Some(title) = section.title {
        match &section.times {
            Some(times) => writeln!(out, "### {title} ({times})\n")?,
            None => writeln!(out, "### {title}\n")?,
        }
    }
    for block in &section.blocks {
        match block {
            Block::Notice(text) => writeln!(out, "> {}\n", inline(text))?,
            Block::Paragraph(text) => writeln!(out, "{}\n", inline(text))?,
            Block::List(items) => {
                for item in items {
                    writeln!(out, "- {}", inline(item))?;
                }
                writeln!(out)?;
            }
            Block::Facts(facts) => {
                writeln!(out, "| | |\n|:--|--:|")?;
                for (what, value) in facts {
                    writeln!(out, "| {} | {} |", md(what), md(value))?;
                }
                writeln!(out)?;
            }
            Block::Table(table) => write_table(out, table)?,
            Block::Command(command) => {
                let fence = "`".repeat(3.max(longest_backticks(command) + 1));
                writeln!(out, "{fence}sh\n{command}\n{fence}")?;
            }
        }
    }
    Ok(())
}

fn write_table(out: &mut String, table: &Table) -> fmt::Result {
    let titles: Vec<&str> = table.columns.iter().map(|c| c.title).collect();
    let aligns: Vec<&str> = table
        .columns
        .iter()
        .map(|c| match c.style {
            Style::Number => "--:",
            _ => ":--",
        })
        .collect();
    writeln!(out, "| {} |\n|{}|", titles.join(" | "), aligns.join("|"))?;
    for row in table.rows.iter().take(ROWS) {
        let cells: Vec<String> = table
            .columns
            .iter()
            .zip(&row.cells)
            .map(|(column, cell)| match column.style {
                Style::Request => md_code(&cell.to_plain()),
                _ => inline(cell),
            })
            .collect();
        writeln!(out, "| {} |", cells.join(" | "))?;
    }
    if table.rows.len() > ROWS {
        writeln!(
            out,
            "\n…and {} more{}.",
            table.rows.len() - ROWS,
            table.rest
        )?;
    }
    writeln!(out)
}

/// Text as inline Markdown, safe in a table cell.
fn inline(text: &Text) -> String {
    text.0
        .iter()
        .map(|span| match span {
            Span::Plain(s) => md(s),
            Span::Code(s) => md_code(s),
            Span::Strong(t) => format!("**{}**", inline(t)),
        })
        .collect()
}

fn longest_backticks(s: &str) -> usize {
    s.split(|c| c != '`').map(str::len).max().unwrap_or(0)
}
