//! The parse error shared by `Retry-After` and HTTP-date parsing.

use std::fmt;

/// What was wrong with a malformed value.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ParseErrorKind {
    /// The value was empty (or only spaces and tabs).
    Empty,
    /// The value contained a byte outside ASCII.
    NonAscii,
    /// The value was a comma-separated list; `Retry-After` takes exactly one value.
    List,
    /// The value started like delay-seconds but was not `1*DIGIT` (a sign, a decimal point,
    /// an exponent, a unit…).
    BadDelay,
    /// The value was neither delay-seconds nor an HTTP-date: it starts with neither a digit
    /// nor a weekday name (`soon`, `now`, `5s`-style words, a leading newline).
    NeitherDelayNorDate,
    /// The value starts like an HTTP-date (a weekday name) but is not one in any of the
    /// three formats.
    BadDate,
    /// The date named a weekday that the day does not fall on.
    WrongWeekday,
    /// The date was well-formed but does not exist (February 30, 25 o'clock…).
    NoSuchDate,
}

impl ParseErrorKind {
    /// A short, stable, kebab-case name for scripts and metrics.
    pub fn as_str(self) -> &'static str {
        match self {
            ParseErrorKind::Empty => "empty",
            ParseErrorKind::NonAscii => "non-ascii",
            ParseErrorKind::List => "list",
            ParseErrorKind::BadDelay => "bad-delay",
            ParseErrorKind::NeitherDelayNorDate => "neither-delay-nor-date",
            ParseErrorKind::BadDate => "bad-date",
            ParseErrorKind::WrongWeekday => "wrong-weekday",
            ParseErrorKind::NoSuchDate => "no-such-date",
        }
    }

    /// What was wrong, as a sentence fragment: "the weekday does not match the date".
    pub fn describe(self) -> &'static str {
        match self {
            ParseErrorKind::Empty => "the value is empty",
            ParseErrorKind::NonAscii => "the value contains a non-ASCII byte",
            ParseErrorKind::List => "the value is a list, but exactly one value is allowed",
            ParseErrorKind::BadDelay => {
                "delay-seconds must be digits only (no sign, decimal point, exponent or unit)"
            }
            ParseErrorKind::NeitherDelayNorDate => {
                "the value is neither delay-seconds nor an HTTP-date \
                 (e.g. `120` or `Sun, 06 Nov 1994 08:49:37 GMT`)"
            }
            ParseErrorKind::BadDate => {
                "the value starts like an HTTP-date but is not one in any of the three formats \
                 (e.g. `Sun, 06 Nov 1994 08:49:37 GMT`)"
            }
            ParseErrorKind::WrongWeekday => "the weekday does not match the date",
            ParseErrorKind::NoSuchDate => "the date or time does not exist in the calendar",
        }
    }
}

/// A malformed `Retry-After` value or HTTP-date. It carries the raw bytes; a malformed value
/// is never read as a zero delay.
///
/// The raw bytes are copied only when parsing fails, so valid input allocates nothing.
#[derive(Clone, PartialEq, Eq)]
pub struct ParseError {
    kind: ParseErrorKind,
    raw: Box<[u8]>,
}

impl ParseError {
    pub(crate) fn new(kind: ParseErrorKind, raw: &[u8]) -> ParseError {
        ParseError {
            kind,
            raw: raw.into(),
        }
    }

    /// What was wrong.
    pub fn kind(&self) -> ParseErrorKind {
        self.kind
    }

    /// The value exactly as received.
    pub fn raw(&self) -> &[u8] {
        &self.raw
    }
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "invalid value \"{}\": {}",
            self.raw.escape_ascii(),
            self.kind.describe()
        )
    }
}

impl fmt::Debug for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ParseError")
            .field("kind", &self.kind)
            .field("raw", &format_args!("\"{}\"", self.raw.escape_ascii()))
            .finish()
    }
}

impl std::error::Error for ParseError {}
