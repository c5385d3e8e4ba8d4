//! `holdoff report`: the reports of a saved event log, and the `--report-*` options that
//! `holdoff run` and `holdoff proxy` share ([`ReportArgs`]).

use std::error::Error as _;
use std::io::{self, Write};
use std::path::PathBuf;

use holdoff_proxy::report::{Format, Report, RunOutcome};

use crate::failure::Failure;

/// What the judge's verdict has against the run, if anything: [`Failure::Premature`] for a
/// retry that broke its window, [`Failure::NotTested`] when no request reached the proxy and
/// the run does not allow it (`--allow-no-traffic`).
pub(crate) fn judged(report: &Report) -> Result<(), Failure> {
    match report.outcome() {
        RunOutcome::Fail => Err(Failure::Premature),
        RunOutcome::NotTested if !report.allows_no_traffic() => Err(Failure::NotTested),
        _ => Ok(()),
    }
}

const AFTER_HELP: &str = "\
EVENTS is the event log `holdoff proxy --events FILE` or `holdoff run --events FILE` keeps: one
JSON event per line. Without options the Markdown report goes to standard output; --format picks
another format, -o writes to a file instead (in the format its extension suggests: .json, .xml,
.md, .html, unless --format says), and the --report-* options write any of the four formats to
files at once.

Exit status: 0 when no client retried early, 3 when the log holds a retry that broke its window
(premature, or a malformed hint read as zero), 4 when no request reached the proxy (not tested;
0 if the run was allowed that with --allow-no-traffic) or a client's TLS handshake with the proxy
failed (whatever --allow-no-traffic says), 2 for a usage error, an event log that
cannot be read (the message names FILE:LINE and what is wrong), or a report that cannot be
written.

Examples:
  holdoff report events.jsonl
  holdoff report events.jsonl --format html -o report.html
  holdoff report events.jsonl --report-junit junit.xml --report-html report.html";

/// Write the reports of a saved event log.
#[derive(Debug, clap::Args)]
#[command(after_help = AFTER_HELP)]
pub(crate) struct Args {
    /// The event log (JSON lines).
    #[arg(value_name = "EVENTS")]
    events: PathBuf,

    /// The format for standard output or -o: json, junit, md (the default) or html.
    #[arg(long, value_name = "FORMAT", value_enum)]
    format: Option<FormatArg>,

    /// Write the report to FILE instead of standard output.
    #[arg(short, long = "output", value_name = "FILE")]
    output: Option<PathBuf>,

    #[command(flatten)]
    reports: ReportArgs,
}

/// A report format on the command line.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum FormatArg {
    /// JSON, for tools.
    Json,
    /// JUnit XML, for a CI's test tab.
    Junit,
    /// Markdown, for a pull-request comment.
    #[value(alias = "markdown")]
    Md,
    /// One self-contained HTML page with a timeline per client.
    Html,
}

impl From<FormatArg> for Format {
    fn from(arg: FormatArg) -> Format {
        match arg {
            FormatArg::Json => Format::Json,
            FormatArg::Junit => Format::Junit,
            FormatArg::Md => Format::Markdown,
            FormatArg::Html => Format::Html,
        }
    }
}

/// The reports to write at the end of a run, in any combination: flattened into `holdoff run`,
/// `holdoff proxy` and `holdoff report`.
#[derive(Debug, Default, clap::Args)]
#[command(next_help_heading = "Reports")]
pub(crate) struct ReportArgs {
    /// Write the JSON report to FILE: the verdict, the counts and every violation.
    #[arg(long, value_name = "FILE")]
    pub(crate) report_json: Option<PathBuf>,

    /// Write the JUnit XML report to FILE: a test case per client and request.
    ///
    /// A case fails on a retry that broke its window; when no request reached the proxy, one
    /// failing case says so.
    #[arg(long, value_name = "FILE")]
    pub(crate) report_junit: Option<PathBuf>,

    /// Write the Markdown report to FILE, for a pull-request comment.
    #[arg(long, value_name = "FILE")]
    pub(crate) report_md: Option<PathBuf>,

    /// Write the HTML report to FILE: one self-contained page with a timeline per client.
    #[arg(long, value_name = "FILE")]
    pub(crate) report_html: Option<PathBuf>,
}

impl ReportArgs {
    /// The reports asked for, in the order they are written.
    pub(crate) fn asked(&self) -> Vec<(Format, &PathBuf)> {
        [
            (Format::Json, &self.report_json),
            (Format::Junit, &self.report_junit),
            (Format::Markdown, &self.report_md),
            (Format::Html, &self.report_html),
        ]
        .into_iter()
        .filter_map(|(format, path)| Some((format, path.as_ref()?)))
        .collect()
    }

    /// Whether any report is asked for.
    pub(crate) fn any(&self) -> bool {
        !self.asked().is_empty()
    }

    /// Writes every report asked for and returns those written. One that cannot be written
    /// is reported on stderr (`holdoff: failed to write the HTML report FILE: reason`), and the
    /// others are still written.
    pub(crate) fn write_all(&self, report: &Report) -> Vec<(Format, PathBuf)> {
        let mut written = Vec::new();
        for (format, path) in self.asked() {
            match report.write(format, path) {
                Ok(()) => written.push((format, path.clone())),
                Err(err) => {
                    // If stderr is gone too there is nobody to tell.
                    let _ = writeln!(
                        io::stderr(),
                        "holdoff: failed to write the {format} report {}: {err}",
                        path.display()
                    );
                }
            }
        }
        written
    }
}

/// Runs `holdoff report`: the report on `out` (unless it goes to files), the summary of the
/// files written and any problem on stderr.
pub(crate) fn run(args: Args, out: &mut impl Write) -> Result<(), Failure> {
    // Read a line at a time: a day's log need not fit in memory.
    let report = Report::from_log(&args.events).map_err(|err| {
        let cause = err.source().map(|c| format!(": {c}")).unwrap_or_default();
        Failure::EventLog(format!("failed to {err}{cause}"))
    })?;
    let mut failed = false;

    let format = args
        .format
        .map(Format::from)
        .or_else(|| args.output.as_deref().and_then(Format::from_extension))
        .unwrap_or(Format::Markdown);
    match &args.output {
        Some(path) => {
            if let Err(err) = report.write(format, path) {
                let _ = writeln!(
                    io::stderr(),
                    "holdoff: failed to write the {format} report {}: {err}",
                    path.display()
                );
                failed = true;
            }
        }
        // With only --report-* files asked for, standard output stays quiet.
        None if args.format.is_some() || !args.reports.any() => {
            out.write_all(report.render(format).as_bytes())?;
        }
        None => {}
    }

    let written = args.reports.write_all(&report);
    failed |= written.len() < args.reports.asked().len();
    if !written.is_empty() {
        let _ = write!(io::stderr(), "{}", report.terminal_summary(&written));
    }

    match failed {
        true => Err(Failure::Reports),
        false => judged(&report),
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(flatten)]
        args: Args,
    }

    fn parse(args: &[&str]) -> Result<Args, clap::Error> {
        Cli::try_parse_from(std::iter::once("report").chain(args.iter().copied())).map(|c| c.args)
    }

    mod args {
        use super::*;

        #[test]
        fn default_to_markdown_on_stdout() {
            let args = parse(&["events.jsonl"]).unwrap();
            assert_eq!(args.events, PathBuf::from("events.jsonl"));
            assert_eq!((args.format, args.output), (None, None));
            assert!(!args.reports.any());
        }

        #[test]
        fn take_every_report_file_at_once() {
            let args = parse(&[
                "e.jsonl",
                "--format",
                "markdown",
                "-o",
                "r.md",
                "--report-json",
                "r.json",
                "--report-junit",
                "j.xml",
                "--report-md",
                "r2.md",
                "--report-html",
                "r.html",
            ])
            .unwrap();
            assert_eq!(args.format, Some(FormatArg::Md));
            let asked: Vec<_> = args
                .reports
                .asked()
                .into_iter()
                .map(|(f, p)| format!("{} {}", f.name(), p.display()))
                .collect();
            assert_eq!(
                asked,
                ["json r.json", "junit j.xml", "md r2.md", "html r.html"]
            );
        }

        #[test]
        fn reject_an_unknown_format() {
            let err = parse(&["e.jsonl", "--format", "pdf"]).unwrap_err();
            assert_eq!(err.kind(), clap::error::ErrorKind::InvalidValue);
        }
    }
}
