//! The document every report for people is written from: built once from a [`Report`] by
//! [`Report::document`], then rendered as Markdown (`markdown.rs`), HTML (`html.rs`) and
//! terminal text (`terminal.rs`), each with its own escaping and layout. What a section
//! says, and which columns a table has, is decided here, once.
//!
//! The renderings differ on purpose only where a medium asks for it:
//!
//! - The terminal is narrow and read at the end of a run: it shows the lead (what went
//!   wrong, what to do), the tables of violations and warnings a row a line, and the herds;
//!   not the counts (its headline carries them), the endpoints, nor section prose.
//! - Each medium caps a table's rows at what it can show (terminal 5, Markdown 20, HTML 200)
//!   and says how many more there are.
//! - The page keeps every heading in place, saying "None" under an empty one; Markdown and
//!   the terminal leave empty sections out.
//! - Sections marked [`Section::reference`] (the run's details) are for the page only.
//! - The page draws the timelines and the lateness histogram, which are not text; they stay
//!   in `html.rs`, drawn after the counts.
//!
//! Where the renderers had drifted, the model settles it: the violation and warning tables
//! have one set of columns (Markdown gained "Throttled at", which the page had; the page's
//! "Kind" column went, since the section and the why say it, and stays as the row's
//! `data-kind`), the page gained the endpoints table and the reproduce line as Markdown has
//! them, and the lead's sentences (a run cut short, the usual causes of no traffic) are one
//! text for all three.

use super::event::HintKind;
use super::outcome::{
    Case, Headline, NO_TRAFFIC_CAUSES, command_failed, failed_before_any_request, unintercepted,
};
use super::parts::{JudgedBy, Violation};
use super::run::Report;
use super::text::{client_label, client_name, millis, shell_words};
use super::time;

/// A report for people: the headline, then its sections in order.
#[derive(Clone, Debug)]
pub(crate) struct Document {
    pub(crate) headline: Headline,
    pub(crate) sections: Vec<Section>,
}

/// Which section a [`Section`] is, for a renderer that places or leaves out some (and for
/// the page's `id`s).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Part {
    /// Under the headline, untitled: notices and what a run that judged nothing means.
    Lead,
    /// The counts, untitled.
    Counts,
    Violations,
    Warnings,
    Endpoints,
    Herds,
    Reproduce,
    /// The run's details.
    Run,
}

impl Part {
    /// The page's `id` for it.
    pub(crate) fn id(self) -> &'static str {
        match self {
            Part::Lead => "lead",
            Part::Counts => "counts",
            Part::Violations => "violations",
            Part::Warnings => "warnings",
            Part::Endpoints => "endpoints",
            Part::Herds => "herds",
            Part::Reproduce => "reproduce",
            Part::Run => "run",
        }
    }
}

/// A section: a title (none for the lead and the counts), the times note when it shows
/// times, and its blocks.
#[derive(Clone, Debug)]
pub(crate) struct Section {
    pub(crate) part: Part,
    pub(crate) title: Option<&'static str>,
    /// `times UTC, 2025-03-01`, when the section shows times.
    pub(crate) times: Option<String>,
    pub(crate) blocks: Vec<Block>,
    /// What the page says under the heading when there are no blocks.
    pub(crate) empty: Option<Text>,
    /// Details for reference: the page shows them, Markdown and the terminal do not.
    pub(crate) reference: bool,
}

impl Section {
    fn new(part: Part, title: Option<&'static str>) -> Section {
        Section {
            part,
            title,
            times: None,
            blocks: Vec::new(),
            empty: None,
            reference: false,
        }
    }
}

/// A block of a section.
#[derive(Clone, Debug)]
pub(crate) enum Block {
    /// Something the reader must not miss (Markdown's quote, the page's framed note).
    Notice(Text),
    Paragraph(Text),
    List(Vec<Text>),
    /// Named values: a label and its value a row.
    Facts(Vec<(&'static str, String)>),
    Table(Table),
    /// A command to copy, for a POSIX shell.
    Command(String),
}

/// A table: its columns, its rows (each medium shows the first few), and where the rest are.
#[derive(Clone, Debug)]
pub(crate) struct Table {
    pub(crate) columns: &'static [Column],
    pub(crate) rows: Vec<Row>,
    /// Where the rows a medium leaves out are, e.g. ` (the JSON report lists them all)`.
    pub(crate) rest: &'static str,
}

/// A table's row: a cell per column, and (for the page's `data-kind`) what kind of retry it
/// shows.
#[derive(Clone, Debug)]
pub(crate) struct Row {
    pub(crate) kind: Option<&'static str>,
    pub(crate) cells: Vec<Text>,
}

/// A column: its title and how its cells read.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Column {
    pub(crate) title: &'static str,
    pub(crate) style: Style,
}

/// How a column's cells read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Style {
    Text,
    /// A number or a duration: aligned right.
    Number,
    /// A request, `GET https://…`: as code.
    Request,
    /// A sentence, smaller on the page.
    Prose,
}

/// Text with code and strong parts.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Text(pub(crate) Vec<Span>);

/// A part of a [`Text`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Span {
    Plain(String),
    Code(String),
    Strong(Text),
}

impl Text {
    /// Plain text.
    pub(crate) fn plain(s: impl Into<String>) -> Text {
        Text(vec![Span::Plain(s.into())])
    }

    /// Text of ours with code in backticks (no backtick inside the code).
    pub(crate) fn marked(s: &str) -> Text {
        Text(
            s.split('`')
                .enumerate()
                .filter(|(_, part)| !part.is_empty())
                .map(|(i, part)| match i % 2 {
                    1 => Span::Code(part.to_owned()),
                    _ => Span::Plain(part.to_owned()),
                })
                .collect(),
        )
    }

    /// `self` followed by `more`.
    fn then(mut self, more: Text) -> Text {
        self.0.extend(more.0);
        self
    }

    /// The text without markup, code in backticks.
    pub(crate) fn to_plain(&self) -> String {
        self.0
            .iter()
            .map(|span| match span {
                Span::Plain(s) => s.clone(),
                Span::Code(s) => format!("`{s}`"),
                Span::Strong(t) => t.to_plain(),
            })
            .collect()
    }
}

const fn column(title: &'static str, style: Style) -> Column {
    Column { title, style }
}

/// The columns of the violation and warning tables.
const RETRY_COLUMNS: &[Column] = &[
    column("Client", Style::Text),
    column("Request", Style::Request),
    column("Early by", Style::Number),
    column("Throttled at", Style::Text),
    column("Retried at", Style::Text),
    column("Permitted at", Style::Text),
    column("Why", Style::Prose),
];

/// The columns of the endpoints table.
const ENDPOINT_COLUMNS: &[Column] = &[
    column("Client", Style::Text),
    column("Request", Style::Request),
    column("Throttled", Style::Number),
    column("Compliant", Style::Number),
    column("Premature", Style::Number),
    column("Read as zero", Style::Number),
    column("No backoff", Style::Number),
    column("Judged by", Style::Prose),
];

impl Report {
    /// The document the reports for people are written from.
    pub(crate) fn document(&self) -> Document {
        let sections = [
            Some(self.lead()),
            Some(self.counts()),
            self.retry_section(Part::Violations),
            self.retry_section(Part::Warnings),
            self.endpoint_section(),
            Some(self.herd_section()),
            Some(self.reproduce_section()),
            Some(self.run_section()),
        ];
        Document {
            headline: Headline::of(self),
            sections: sections.into_iter().flatten().collect(),
        }
    }

    fn lead(&self) -> Section {
        let mut lead = Section::new(Part::Lead, None);
        let blocks = &mut lead.blocks;
        if !self.complete {
            blocks.push(Block::Notice(Text::plain(
                "The event log has no finish event: the run was cut short, and the counts may \
                 be partial.",
            )));
        }
        if self.interception_failures > 0 {
            blocks.push(Block::Notice(Text::marked(&unintercepted(
                self.interception_failures,
            ))));
        }
        if self.evicted_windows > 0 {
            blocks.push(Block::Notice(Text::marked(&super::outcome::evicted(
                self.evicted_windows,
            ))));
        }
        let paragraph = |s: &str| Block::Paragraph(Text::plain(s));
        match Case::of(self) {
            Case::NotTested { allowed: false } if command_failed(self).is_some() => {
                let code = command_failed(self).unwrap_or_default();
                let text = failed_before_any_request(code);
                // A sentence of its own here: `The command failed …`.
                let sentence = match text.strip_prefix("the ") {
                    Some(rest) => format!("The {rest}"),
                    None => text,
                };
                blocks.push(Block::Paragraph(Text::marked(&sentence)));
            }
            Case::NotTested { allowed: false } => {
                blocks.push(paragraph(
                    "No request reached the proxy, so no retry was judged: this is not a pass. \
                     The command's HTTP clients bypassed the proxy, or sent nothing. The usual \
                     causes:",
                ));
                blocks.push(Block::List(
                    NO_TRAFFIC_CAUSES
                        .iter()
                        .map(|(cause, fix)| {
                            Text(vec![Span::Strong(Text::marked(cause))])
                                .then(Text::plain(": "))
                                .then(Text::marked(fix))
                        })
                        .collect(),
                ));
            }
            Case::NotTested { allowed: true } => blocks.push(Block::Paragraph(Text::marked(
                "No request reached the proxy, and the run allows it (`--allow-no-traffic`): \
                 nothing was tested.",
            ))),
            Case::NothingThrottled => blocks.push(paragraph(
                "Requests reached the proxy, but none was throttled: no retry was judged.",
            )),
            Case::NoRetry => blocks.push(paragraph(
                "Requests were throttled, but no client came back while a window was open: no \
                 retry was judged.",
            )),
            _ => {}
        }
        lead
    }

    fn counts(&self) -> Section {
        let mut facts = vec![
            ("Requests", self.requests.to_string()),
            ("Throttled responses", self.throttled.to_string()),
        ];
        let by_hint = self.throttled_by_hint;
        for (n, what) in [
            (by_hint.malformed, "… with a malformed hint"),
            (by_hint.none, "… with no hint"),
            (by_hint.unbounded, "… with a hint beyond the clock's range"),
        ] {
            if n > 0 {
                facts.push((what, n.to_string()));
            }
        }
        let retries = &self.retries;
        facts.push(("Compliant retries", retries.compliant.to_string()));
        facts.push(("Premature retries", retries.premature.to_string()));
        if retries.read_as_zero > 0 || by_hint.malformed > 0 {
            facts.push((
                "Read-as-zero retries (after a malformed hint)",
                retries.read_as_zero.to_string(),
            ));
        }
        if retries.no_backoff > 0 || by_hint.none > 0 {
            let what = if self.fail_on_no_backoff {
                "Retries without backoff (after no hint; failing)"
            } else {
                "Retries without backoff (after no hint; warnings)"
            };
            facts.push((what, retries.no_backoff.to_string()));
        }
        if let Some(l) = self.lateness {
            facts.push((
                "Lateness of compliant retries (p50 / p90 / max)",
                format!(
                    "{} / {} / {}",
                    millis(l.p50_ms),
                    millis(l.p90_ms),
                    millis(l.max_ms)
                ),
            ));
        }
        facts.push(("Herds", self.herds.len().to_string()));
        if let Some(faults) = &self.faults {
            facts.push(("Faults injected", faults_line(faults)));
        }
        if let Some(code) = self.exit_code {
            facts.push(("Command exit status", code.to_string()));
        }
        if let Some(ms) = self.duration_ms {
            facts.push(("Duration", millis(ms)));
        }
        let mut counts = Section::new(Part::Counts, None);
        counts.blocks.push(Block::Facts(facts));
        counts
    }

    /// The violations (most premature first), or the warnings; `None` for warnings when
    /// there are none (the page has no place kept for them).
    fn retry_section(&self, part: Part) -> Option<Section> {
        let (title, rows, left_out) = match part {
            Part::Violations => (
                "Violations, the most premature first",
                self.worst(),
                self.omitted.violations,
            ),
            _ if self.warnings.is_empty() => return None,
            _ => (
                self.warnings_title(),
                self.warnings.iter().collect(),
                self.omitted.warnings,
            ),
        };
        let mut section = Section::new(part, Some(title));
        section.times = Some(self.times().note());
        section.empty = Some(Text::plain("None."));
        if rows.is_empty() {
            return Some(section);
        }
        if part == Part::Warnings && self.retries.no_backoff > 0 && !self.fail_on_no_backoff {
            section.blocks.push(Block::Paragraph(Text::marked(
                "RFC 9110 names no wait for a throttle without `Retry-After`, so these do not \
                 fail the run; a client should still back off (with jitter).",
            )));
        }
        if part == Part::Warnings && self.retries.sibling > 0 {
            section.blocks.push(Block::Paragraph(Text::marked(
                "Each process is judged apart: a request from one process inside the wait \
                 another was told does not fail the run, since independent processes (say \
                 pytest-xdist's workers) may well ask for one URL. If they are one client — a \
                 shell loop of `curl`s, a script that starts a process per request — run with \
                 `--judge-key method-url` to judge them as one.",
            )));
        }
        section.blocks.push(Block::Table(Table {
            columns: RETRY_COLUMNS,
            rows: rows.iter().map(|v| self.retry_row(v)).collect(),
            rest: if left_out > 0 {
                " (the JSON report lists them, the earliest)"
            } else {
                " (the JSON report lists them all)"
            },
        }));
        if let Some(note) = Report::unlisted(left_out) {
            section
                .blocks
                .push(Block::Paragraph(Text::plain(format!("{note}."))));
        }
        Some(section)
    }

    fn retry_row(&self, v: &Violation) -> Row {
        let times = self.times();
        let mut why = Text::marked(&v.why);
        // After no hint, the sentence says all there is.
        if let Some(judged_by) = v.judged_by.as_ref().filter(|j| j.hint != HintKind::None) {
            why = why.then(Text::plain("; judged by ")).then(judged_by.text());
        }
        Row {
            kind: Some(v.kind.as_str()),
            cells: vec![
                Text::plain(client_label(&v.client, v.user_agent.as_deref())),
                Text::plain(format!("{} {}", v.method, v.url)),
                Text::plain(v.early_by_ms.map_or_else(|| "∞".to_owned(), millis)),
                Text::plain(times.show(v.throttled_at)),
                Text::plain(times.show(v.retried_at)),
                Text::plain(
                    v.permitted_at
                        .map_or_else(|| "never".to_owned(), |at| times.show(at)),
                ),
                why,
            ],
        }
    }

    fn endpoint_section(&self) -> Option<Section> {
        if self.endpoints.is_empty() {
            return None;
        }
        // Failing ones first, so that a cut table still shows them.
        let mut endpoints: Vec<_> = self.endpoints.iter().collect();
        endpoints.sort_by_key(|e| std::cmp::Reverse(e.failed(self.fail_on_no_backoff)));
        let rows = endpoints
            .iter()
            .map(|e| {
                let client = match e.user_agents.as_slice() {
                    [] => client_name(&e.client).into_owned(),
                    agents => format!("{} ({})", client_name(&e.client), agents.join(", ")),
                };
                let mut judged_by = Text::default();
                for (i, j) in e.judged_by.iter().enumerate() {
                    if i > 0 {
                        judged_by = judged_by.then(Text::plain("; "));
                    }
                    judged_by = judged_by.then(j.text());
                }
                let counts = [
                    e.throttles,
                    e.compliant,
                    e.premature,
                    e.read_as_zero,
                    e.no_backoff,
                ];
                let mut cells = vec![
                    Text::plain(client),
                    Text::plain(format!("{} {}", e.method, e.url)),
                ];
                cells.extend(counts.iter().map(|n| Text::plain(n.to_string())));
                cells.push(judged_by);
                Row { kind: None, cells }
            })
            .collect();
        let mut section = Section::new(Part::Endpoints, Some("By client and request"));
        section.blocks.push(Block::Table(Table {
            columns: ENDPOINT_COLUMNS,
            rows,
            rest: "",
        }));
        Some(section)
    }

    fn herd_section(&self) -> Section {
        let times = self.times();
        let mut section = Section::new(Part::Herds, Some("Herds"));
        section.times = Some(times.note());
        section.empty = Some(Text::plain(format!(
            "None: no two clients resumed within {} of each other at the same permitted time.",
            millis(super::RESUME_SPREAD.as_secs_f64() * 1000.0)
        )));
        if !self.herds.is_empty() {
            section.blocks.push(Block::List(
                self.herds
                    .iter()
                    .map(|herd| {
                        Text::plain(format!(
                            "{}. {}",
                            herd.describe(&times.show(herd.permitted_at)),
                            herd.advice()
                        ))
                    })
                    .collect(),
            ));
        }
        section
    }

    fn reproduce_section(&self) -> Section {
        let source = self.source.as_deref().unwrap_or("unknown");
        let faults = match self.seed {
            Some(seed) => format!(
                "Faults from {source}, seed {seed}: the same options and the same sequence of \
                 requests give the same faults."
            ),
            None => format!("Faults from {source}, with no seed."),
        };
        let mut section = Section::new(Part::Reproduce, Some("Reproduce"));
        section.blocks.push(Block::Paragraph(Text::plain(faults)));
        section
            .blocks
            .push(Block::Command(self.reproduce().to_owned()));
        section
    }

    fn run_section(&self) -> Section {
        let mut facts = Vec::new();
        if let Some(at) = self.started_at {
            facts.push(("Started", time::format(at)));
        }
        if let Some(at) = self.finished_at {
            facts.push(("Finished", time::format(at)));
        }
        if let Some(command) = &self.command {
            facts.push(("Command", shell_words(command)));
        }
        if !self.user_agents.is_empty() {
            facts.push(("User-Agents", self.user_agents.join(", ")));
        }
        if let Some(url) = &self.proxy_url {
            facts.push(("Proxy", url.clone()));
        }
        if let Some(key) = &self.judge_key {
            facts.push(("Windows keyed by", key.clone()));
        }
        let mut section = Section::new(Part::Run, Some("The run"));
        section.blocks.push(Block::Facts(facts));
        section.reference = true;
        section
    }
}

impl JudgedBy {
    /// How the hint was read: ``Retry-After: 2` read as a delay, …`, the header and value
    /// as code.
    pub(crate) fn text(&self) -> Text {
        let how = Text::plain(self.how());
        let Some(code) = self.code() else {
            return how;
        };
        let joint = match self.hint {
            HintKind::Usable => " ",
            _ => ", ",
        };
        Text(vec![Span::Code(code)])
            .then(Text::plain(joint))
            .then(how)
    }
}

/// The non-zero fault counts, e.g. `7 rate limited, 2 errors`, or `none`.
fn faults_line(f: &crate::stages::FaultCounts) -> String {
    let kinds = [
        (f.rate_limited, "rate limited"),
        (f.errors, "errors"),
        (f.mocked, "mocked"),
        (f.delayed, "delayed"),
        (f.resets, "resets"),
        (f.hangs, "hangs"),
        (f.truncated, "truncated"),
        (f.slowed, "slowed"),
        (f.llm_failures, "language-model failures"),
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

#[cfg(test)]
mod tests {
    use super::*;

    mod marked {
        use super::*;

        #[test]
        fn splits_code_from_text() {
            assert_eq!(
                Text::marked("set `NO_PROXY` now"),
                Text(vec![
                    Span::Plain("set ".into()),
                    Span::Code("NO_PROXY".into()),
                    Span::Plain(" now".into()),
                ])
            );
            assert_eq!(Text::marked("`a<b`").to_plain(), "`a<b`");
        }
    }

    mod document {
        use super::*;

        #[test]
        fn keeps_the_violation_places_and_leaves_out_absent_warnings() {
            let parts: Vec<Part> = Report::empty()
                .document()
                .sections
                .iter()
                .map(|s| s.part)
                .collect();
            assert_eq!(
                parts,
                [
                    Part::Lead,
                    Part::Counts,
                    Part::Violations,
                    Part::Herds,
                    Part::Reproduce,
                    Part::Run
                ]
            );
        }
    }
}
