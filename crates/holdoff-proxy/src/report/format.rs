//! The report formats: their names on the command line and in file names.

use std::fmt;
use std::path::Path;
use std::str::FromStr;

/// A report format.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Format {
    /// JSON, for tools: `{"verdict": "pass"|"fail"|"not_tested", "requests": N, …}`.
    Json,
    /// JUnit XML, for CI test tabs: one test case per client and endpoint (or one failing
    /// case when no request reached the proxy).
    Junit,
    /// Markdown, for a pull-request comment.
    Markdown,
    /// One self-contained HTML page with a timeline chart per client.
    Html,
}

impl Format {
    /// Every format, in the order reports are listed.
    pub const ALL: [Format; 4] = [Format::Json, Format::Junit, Format::Markdown, Format::Html];

    /// Its name on the command line: `json`, `junit`, `md`, `html`.
    pub fn name(self) -> &'static str {
        match self {
            Format::Json => "json",
            Format::Junit => "junit",
            Format::Markdown => "md",
            Format::Html => "html",
        }
    }

    /// The format a file name's extension suggests: `.json`, `.xml`, `.md`, `.html`/`.htm`.
    pub fn from_extension(path: &Path) -> Option<Format> {
        let ext = path.extension()?.to_str()?.to_ascii_lowercase();
        match ext.as_str() {
            "json" => Some(Format::Json),
            "xml" => Some(Format::Junit),
            "md" | "markdown" => Some(Format::Markdown),
            "html" | "htm" => Some(Format::Html),
            _ => None,
        }
    }
}

impl fmt::Display for Format {
    /// Its name for people: `JSON`, `JUnit`, `Markdown`, `HTML`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Format::Json => "JSON",
            Format::Junit => "JUnit",
            Format::Markdown => "Markdown",
            Format::Html => "HTML",
        })
    }
}

impl FromStr for Format {
    type Err = String;

    /// `json`, `junit`, `md` (or `markdown`), `html`, in any case.
    fn from_str(s: &str) -> Result<Format, String> {
        match s.to_ascii_lowercase().as_str() {
            "json" => Ok(Format::Json),
            "junit" | "xml" => Ok(Format::Junit),
            "md" | "markdown" => Ok(Format::Markdown),
            "html" => Ok(Format::Html),
            _ => Err(format!(
                "unknown report format `{s}` (use json, junit, md or html)"
            )),
        }
    }
}
