//! Writing a [`Report`]: in each [`Format`] to a file, and the summary a run prints.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use super::format::Format;
use super::run::Report;
use super::{html, junit, markdown, terminal};

impl Report {
    /// The report in `format`.
    pub fn render(&self, format: Format) -> String {
        match format {
            Format::Json => {
                // Serializing plain structs with string keys cannot fail.
                let mut json = serde_json::to_string_pretty(self).unwrap_or_default();
                json.push('\n');
                json
            }
            Format::Junit => junit::render(self),
            Format::Markdown => markdown::render(self),
            Format::Html => html::render(self),
        }
    }

    /// Writes the report in `format` to `path` (created or truncated).
    ///
    /// # Errors
    ///
    /// When the file cannot be written.
    pub fn write(&self, format: Format, path: &Path) -> io::Result<()> {
        fs::write(path, self.render(format))
    }

    /// The summary printed at the end of a run: the verdict and counts, the worst offenders
    /// (the five earliest violations), the warnings, the herds, and each report written; when
    /// no request reached the proxy, the usual causes and their fixes.
    pub fn terminal_summary(&self, written: &[(Format, PathBuf)]) -> String {
        terminal::render(self, written)
    }
}
