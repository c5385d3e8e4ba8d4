//! Reading an event log, a line at a time, and why it can fail.

use std::error::Error as StdError;
use std::fmt;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use super::event::Event;

/// The broad reason an event log could not be read.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ReportErrorKind {
    /// The file could not be read.
    Io,
    /// A line is not an event; see [`ReportError::line`].
    Invalid,
}

/// Why [`Report::read_log`](super::Report::read_log) failed. `Display` names the file (and the line); the cause is
/// in [`source`](StdError::source).
#[derive(Debug)]
pub struct ReportError {
    path: PathBuf,
    line: Option<usize>,
    source: Box<dyn StdError + Send + Sync>,
}

/// What is wrong with a line of an event log.
#[derive(Debug)]
struct InvalidLine(String);

impl fmt::Display for InvalidLine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl StdError for InvalidLine {}

impl ReportError {
    /// The broad reason.
    pub fn kind(&self) -> ReportErrorKind {
        match self.line {
            Some(_) => ReportErrorKind::Invalid,
            None => ReportErrorKind::Io,
        }
    }

    /// The event log.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The line that is not an event (from 1), for [`ReportErrorKind::Invalid`].
    pub fn line(&self) -> Option<usize> {
        self.line
    }
}

impl fmt::Display for ReportError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "read the event log {}", self.path.display())?;
        if let Some(line) = self.line {
            write!(f, ":{line}")?;
        }
        Ok(())
    }
}

impl StdError for ReportError {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        Some(&*self.source)
    }
}

/// Calls `each` with every event of the log at `path`, a line at a time.
pub(super) fn each_event(path: &Path, mut each: impl FnMut(Event)) -> Result<(), ReportError> {
    use std::io::BufRead;

    let io_error = |err: io::Error| ReportError {
        path: path.to_path_buf(),
        line: None,
        source: Box::new(err),
    };
    let mut reader = io::BufReader::new(fs::File::open(path).map_err(io_error)?);
    let mut line = Vec::new();
    let mut number = 0;
    loop {
        line.clear();
        if reader.read_until(b'\n', &mut line).map_err(io_error)? == 0 {
            return Ok(());
        }
        number += 1;
        let text = line.strip_suffix(b"\n").unwrap_or(&line);
        let text = text.strip_suffix(b"\r").unwrap_or(text);
        if text.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let event = serde_json::from_slice::<Event>(text).map_err(|err| ReportError {
            path: path.to_path_buf(),
            line: Some(number),
            source: Box::new(InvalidLine(describe(&err))),
        })?;
        each(event);
    }
}

/// serde_json's message for a line, with the column but without "line 1".
fn describe(err: &serde_json::Error) -> String {
    let message = err.to_string();
    let message = message
        .rsplit_once(" at line ")
        .map_or(message.as_str(), |(m, _)| m);
    if err.column() > 0 {
        format!("{message} (column {})", err.column())
    } else {
        message.to_owned()
    }
}
