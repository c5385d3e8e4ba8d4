//! What goes wrong in a configuration file, and where.
//!
//! [`FileError`] is one problem in a configuration or data file, located by its file, its key
//! path and, where the parser knows them, its line and column; [`ConfigProblems`] is every one
//! a file and the files it names have.
//!
//! Key paths (`errors.errors[0].responses[1].statusCode`) are built by [`key`], [`index`] and
//! [`join`] only, so that every error writes them the same way.

use std::fmt;

/// One problem in a configuration or data file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileError {
    /// The file, as given (or as resolved from the file that names it).
    pub file: String,
    /// The key path (`errors.errors[0].responses[1].statusCode`); empty for the whole file.
    pub path: String,
    /// What is wrong, and what is allowed.
    pub message: String,
    /// The line and column (from 1), where the parser knows them.
    pub line: Option<(usize, usize)>,
}

impl FileError {
    /// A problem at `path` in `file`, where no line is known.
    pub(crate) fn new(
        file: impl Into<String>,
        path: impl Into<String>,
        message: impl Into<String>,
    ) -> FileError {
        FileError {
            file: file.into(),
            path: path.into(),
            message: message.into(),
            line: None,
        }
    }
}

impl fmt::Display for FileError {
    /// `FILE:LINE:COL: KEY.PATH: message`, leaving out the parts that are absent.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut located = false;
        if !self.file.is_empty() {
            f.write_str(&self.file)?;
            located = true;
        }
        if let Some((line, column)) = self.line {
            if located {
                f.write_str(":")?;
            }
            write!(f, "{line}:{column}")?;
            located = true;
        }
        if located {
            f.write_str(": ")?;
        }
        if !self.path.is_empty() {
            write!(f, "{}: ", self.path)?;
        }
        f.write_str(&self.message)
    }
}

/// Every problem found in a configuration and the files it names; never empty.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigProblems(pub Vec<FileError>);

impl ConfigProblems {
    /// A file's only problem.
    pub(crate) fn one(error: FileError) -> ConfigProblems {
        ConfigProblems(vec![error])
    }
}

impl fmt::Display for ConfigProblems {
    /// One [`FileError`] per line.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, error) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str("\n")?;
            }
            write!(f, "{error}")?;
        }
        Ok(())
    }
}

impl std::error::Error for ConfigProblems {}

/// `parent.key`, or `key` at the root.
pub(crate) fn key(parent: &str, key: &str) -> String {
    let key = cut(key);
    if parent.is_empty() {
        key.into_owned()
    } else {
        format!("{parent}.{key}")
    }
}

/// The most characters of a file's text that a message quotes.
const QUOTED: usize = 60;

/// `text` as a message quotes it: whole when short, else its start, an ellipsis and its
/// length, so that a huge key or value in a file never makes a huge message.
pub(crate) fn cut(text: &str) -> std::borrow::Cow<'_, str> {
    match text.char_indices().nth(QUOTED) {
        None => std::borrow::Cow::Borrowed(text),
        Some((end, _)) => std::borrow::Cow::Owned(format!(
            "{}… ({} characters)",
            &text[..end],
            text.chars().count()
        )),
    }
}

/// `parent[index]`.
pub(crate) fn index(parent: &str, index: usize) -> String {
    format!("{parent}[{index}]")
}

/// The path `rest` (`key.path`, `[0].key`, or empty for `parent` itself) under `parent`.
pub(crate) fn join(parent: &str, rest: &str) -> String {
    if rest.is_empty() {
        parent.to_owned()
    } else if rest.starts_with('[') {
        format!("{parent}{rest}")
    } else {
        key(parent, rest)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    mod config_problems {
        use super::*;

        #[test]
        fn prints_one_located_error_per_line() {
            let errors = ConfigProblems(vec![
                FileError {
                    file: "holdoff.json".into(),
                    path: "seed".into(),
                    message: "bad".into(),
                    line: Some((3, 7)),
                },
                FileError {
                    file: "holdoff.json".into(),
                    path: String::new(),
                    message: "worse".into(),
                    line: None,
                },
                FileError {
                    file: String::new(),
                    path: "latency".into(),
                    message: "worst".into(),
                    line: None,
                },
            ]);
            assert_eq!(
                errors.to_string(),
                "holdoff.json:3:7: seed: bad\nholdoff.json: worse\nlatency: worst"
            );
        }
    }
}
