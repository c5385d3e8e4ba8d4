//! The `Retry-After` header (RFC 9110 §10.2.3): `delay-seconds` or an `HTTP-date`.

use std::fmt;
use std::str::FromStr;
use std::time::{Duration, SystemTime};

use crate::date::HttpDate;
use crate::error::{ParseError, ParseErrorKind};

/// A parsed `Retry-After` value.
///
/// # Examples
///
/// ```
/// use holdoff::RetryAfter;
/// use std::time::{Duration, SystemTime};
///
/// let now = SystemTime::UNIX_EPOCH;
/// assert_eq!(RetryAfter::parse(b"120", now)?, RetryAfter::Delay(Duration::from_secs(120)));
///
/// let date = RetryAfter::parse(b"Fri, 31 Dec 1999 23:59:59 GMT", now)?;
/// assert_eq!(date.to_string(), "Fri, 31 Dec 1999 23:59:59 GMT");
///
/// // Malformed values are errors that keep the raw bytes, never a zero delay.
/// let err = RetryAfter::parse(b"1.5", now).unwrap_err();
/// assert_eq!(err.raw(), b"1.5");
/// # Ok::<(), holdoff::ParseError>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RetryAfter {
    /// `delay-seconds`: wait this long after the response was received. Values beyond
    /// `u64::MAX` seconds saturate to it (a very long wait, never a short one).
    Delay(Duration),
    /// `HTTP-date`: do not retry before this instant.
    Date(HttpDate),
}

impl RetryAfter {
    /// Parses a `Retry-After` field value, e.g. the bytes of an `http::HeaderValue`.
    ///
    /// Only SP and HTAB around the value are trimmed. `now` (the local wall clock when the
    /// response arrived) is only used to resolve the two-digit year of an rfc850-date.
    /// Allocates nothing unless the value is malformed.
    ///
    /// # Errors
    ///
    /// A [`ParseError`] with the raw bytes for anything outside the grammar: an empty value,
    /// a list, a non-ASCII byte, a signed, fractional or suffixed number, or a date that is
    /// not an exact RFC 9110 HTTP-date.
    pub fn parse(bytes: &[u8], now: SystemTime) -> Result<RetryAfter, ParseError> {
        parse(bytes, now)
            .map(|parsed| parsed.value)
            .map_err(|kind| ParseError::new(kind, bytes))
    }

    /// Writes the value as it should be sent: delay-seconds or IMF-fixdate.
    ///
    /// # Examples
    ///
    /// ```
    /// use holdoff::RetryAfter;
    /// use std::time::Duration;
    ///
    /// let value = RetryAfter::Delay(Duration::from_millis(1500)).to_header_value();
    /// assert_eq!(value, "2"); // rounded up: a hint is a lower bound
    /// ```
    pub fn to_header_value(&self) -> http::HeaderValue {
        let mut buf = [0u8; 29];
        let len = self.write_to(&mut buf);
        // Both forms are ASCII digits, letters, commas, colons and spaces.
        http::HeaderValue::from_bytes(&buf[..len]).unwrap_or(http::HeaderValue::from_static("0"))
    }

    fn write_to(&self, buf: &mut [u8; 29]) -> usize {
        use std::io::Write;
        let mut cursor = std::io::Cursor::new(&mut buf[..]);
        // The buffer fits both the longest u64 (20 digits) and an IMF-fixdate (29 bytes).
        let _ = write!(cursor, "{self}");
        cursor.position() as usize
    }
}

impl fmt::Display for RetryAfter {
    /// Writes delay-seconds (rounded up to whole seconds, since a hint is a lower bound) or
    /// an IMF-fixdate.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RetryAfter::Delay(delay) => {
                let secs = delay
                    .as_secs()
                    .saturating_add(u64::from(delay.subsec_nanos() > 0));
                write!(f, "{secs}")
            }
            RetryAfter::Date(date) => date.fmt(f),
        }
    }
}

impl FromStr for RetryAfter {
    type Err = ParseError;

    /// Parses as [`RetryAfter::parse`] does with `now` = [`RetryAfter::from_str_now()`], which only matters
    /// for an rfc850-date's two-digit year.
    ///
    /// `FromStr` has no `now` to pass and parsing never reads the clock, so use
    /// [`RetryAfter::parse`] with the receipt time for values received from the network.
    fn from_str(s: &str) -> Result<RetryAfter, ParseError> {
        RetryAfter::parse(s.as_bytes(), RetryAfter::from_str_now())
    }
}

impl FromStr for HttpDate {
    type Err = ParseError;

    /// Parses an HTTP-date as [`HttpDate::parse`] would with `now` = [`RetryAfter::from_str_now()`].
    fn from_str(s: &str) -> Result<HttpDate, ParseError> {
        HttpDate::parse(s.as_bytes(), RetryAfter::from_str_now())
    }
}

impl RetryAfter {
    /// The `now` the `FromStr` implementations use to resolve rfc850 two-digit years:
    /// 2000-01-01T00:00:00Z, so `00`–`50` read as 2000–2050 and `51`–`99` as 1951–1999.
    ///
    /// Parsing never reads the clock (the pure core has no clock reads); code that handles
    /// responses passes the receipt time to [`RetryAfter::parse`] instead, and code that
    /// checks a configured value (no receipt) can pass this.
    pub fn from_str_now() -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(946_684_800)
    }
}

/// A parsed value and whether its delay saturated at `u64::MAX` seconds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Parsed {
    pub(crate) value: RetryAfter,
    pub(crate) saturated: bool,
}

/// Parses without allocating, even on error: the caller decides whether to copy the raw
/// value into a [`ParseError`].
pub(crate) fn parse(bytes: &[u8], now: SystemTime) -> Result<Parsed, ParseErrorKind> {
    let value = trim(bytes);
    if value.is_empty() {
        return Err(ParseErrorKind::Empty);
    }
    let parsed = match value[0] {
        b'0'..=b'9' => parse_delay(value),
        b'+' | b'-' | b'.' => Err(ParseErrorKind::BadDelay),
        // Every HTTP-date starts with a weekday name, short or long: anything else is not
        // trying to be one.
        _ if !starts_with_weekday(value) => Err(ParseErrorKind::NeitherDelayNorDate),
        _ => HttpDate::parse_kind(value, now).map(|date| Parsed {
            value: RetryAfter::Date(date),
            saturated: false,
        }),
    };
    // The grammar admits only ASCII, so a non-ASCII value always fails above; only then is
    // it worth a scan to say why.
    parsed.map_err(|kind| {
        if value.is_ascii() {
            kind
        } else {
            ParseErrorKind::NonAscii
        }
    })
}

fn starts_with_weekday(value: &[u8]) -> bool {
    matches!(
        value.get(..3),
        Some(b"Mon" | b"Tue" | b"Wed" | b"Thu" | b"Fri" | b"Sat" | b"Sun")
    )
}

fn parse_delay(digits: &[u8]) -> Result<Parsed, ParseErrorKind> {
    let mut secs: u64 = 0;
    let mut saturated = false;
    for &c in digits {
        if !c.is_ascii_digit() {
            return Err(if digits.contains(&b',') {
                ParseErrorKind::List
            } else {
                ParseErrorKind::BadDelay
            });
        }
        match secs
            .checked_mul(10)
            .and_then(|s| s.checked_add(u64::from(c - b'0')))
        {
            Some(next) => secs = next,
            None => {
                secs = u64::MAX;
                saturated = true;
            }
        }
    }
    Ok(Parsed {
        value: RetryAfter::Delay(Duration::from_secs(secs)),
        saturated,
    })
}

/// RFC 9110 §5.5: leading and trailing SP / HTAB are not part of the field value.
fn trim(mut b: &[u8]) -> &[u8] {
    while let [b' ' | b'\t', rest @ ..] = b {
        b = rest;
    }
    while let [rest @ .., b' ' | b'\t'] = b {
        b = rest;
    }
    b
}

#[cfg(test)]
mod tests {
    use super::*;

    fn now() -> SystemTime {
        RetryAfter::from_str_now()
    }

    mod parse {
        use super::*;
        use test_case::test_case;

        #[test_case(b"0", 0 ; "zero")]
        #[test_case(b"120", 120 ; "the rfc example")]
        #[test_case(b"007", 7 ; "leading zeros")]
        #[test_case(b" 5\t", 5 ; "sp and htab trimmed")]
        #[test_case(b"18446744073709551615", u64::MAX ; "u64 max exactly")]
        fn reads_delay_seconds(input: &[u8], secs: u64) {
            let parsed = super::super::parse(input, now()).expect("valid");
            assert_eq!(parsed.value, RetryAfter::Delay(Duration::from_secs(secs)));
            assert!(!parsed.saturated);
        }

        #[test_case(b"18446744073709551616" ; "u64 max plus one")]
        #[test_case(b"99999999999999999999999999999999999999" ; "far beyond")]
        fn saturates_huge_delays_upward(input: &[u8]) {
            let parsed = super::super::parse(input, now()).expect("valid syntax");
            assert_eq!(
                parsed.value,
                RetryAfter::Delay(Duration::from_secs(u64::MAX))
            );
            assert!(parsed.saturated);
        }

        #[test_case(b"" , ParseErrorKind::Empty ; "empty")]
        #[test_case(b" \t " , ParseErrorKind::Empty ; "blank")]
        #[test_case(b"-1" , ParseErrorKind::BadDelay ; "negative")]
        #[test_case(b"+1" , ParseErrorKind::BadDelay ; "plus sign")]
        #[test_case(b"1.5" , ParseErrorKind::BadDelay ; "decimal")]
        #[test_case(b".5" , ParseErrorKind::BadDelay ; "leading point")]
        #[test_case(b"1e3" , ParseErrorKind::BadDelay ; "exponent")]
        #[test_case(b"10s" , ParseErrorKind::BadDelay ; "unit")]
        #[test_case(b"1 0" , ParseErrorKind::BadDelay ; "inner space")]
        #[test_case(b"0x10" , ParseErrorKind::BadDelay ; "hex")]
        #[test_case(b"\n5" , ParseErrorKind::NeitherDelayNorDate ; "leading newline is not trimmed")]
        #[test_case(b"5\r\n" , ParseErrorKind::BadDelay ; "trailing crlf is not trimmed")]
        #[test_case(b"120, 120" , ParseErrorKind::List ; "list of delays")]
        #[test_case(b"120,120" , ParseErrorKind::List ; "list without space")]
        #[test_case("１２０".as_bytes() , ParseErrorKind::NonAscii ; "fullwidth digits")]
        #[test_case(b"12\xff" , ParseErrorKind::NonAscii ; "obs text")]
        #[test_case(b"soon" , ParseErrorKind::NeitherDelayNorDate ; "a word")]
        #[test_case(b"now" , ParseErrorKind::NeitherDelayNorDate ; "another word")]
        #[test_case(b"Sunday soon" , ParseErrorKind::BadDate ; "a weekday, then not a date")]
        #[test_case(b"sun, 06 Nov 1994 08:49:37 GMT" , ParseErrorKind::NeitherDelayNorDate ; "names are case-sensitive")]
        #[test_case(b"Sun, 06 Nov 1994 08:49:37 GMT, 120" , ParseErrorKind::List ; "date then delay")]
        fn rejects_malformed_values_with_the_raw_bytes(input: &[u8], kind: ParseErrorKind) {
            let err = RetryAfter::parse(input, now()).expect_err("malformed");
            assert_eq!(err.kind(), kind, "{err}");
            assert_eq!(err.raw(), input);
        }

        #[test]
        fn reads_dates_in_every_format() {
            for input in [
                &b"Sun, 06 Nov 1994 08:49:37 GMT"[..],
                b"Sunday, 06-Nov-94 08:49:37 GMT",
                b"Sun Nov  6 08:49:37 1994",
                b"  Sun Nov  6 08:49:37 1994\t",
            ] {
                let value = RetryAfter::parse(input, now()).expect("valid");
                let RetryAfter::Date(date) = value else {
                    panic!("expected a date, got {value:?}");
                };
                assert_eq!(date.unix_seconds(), 784_111_777);
            }
        }
    }

    mod display {
        use super::*;
        use test_case::test_case;

        #[test_case(RetryAfter::Delay(Duration::from_secs(120)), "120" ; "whole seconds")]
        #[test_case(RetryAfter::Delay(Duration::from_millis(1001)), "2" ; "rounds up")]
        #[test_case(RetryAfter::Delay(Duration::MAX), "18446744073709551615" ; "never wraps")]
        #[test_case(RetryAfter::Date(HttpDate::from_unix_seconds(0).expect("epoch")), "Thu, 01 Jan 1970 00:00:00 GMT" ; "a date")]
        fn writes_what_a_sender_should_send(value: RetryAfter, want: &str) {
            assert_eq!(value.to_string(), want);
            assert_eq!(value.to_header_value(), want);
        }
    }

    mod from_str {
        use super::*;

        #[test]
        fn matches_parse_with_the_documented_now() {
            let parsed: RetryAfter = "Sunday, 06-Nov-94 08:49:37 GMT".parse().expect("valid");
            assert_eq!(
                parsed,
                RetryAfter::parse(
                    b"Sunday, 06-Nov-94 08:49:37 GMT",
                    RetryAfter::from_str_now()
                )
                .expect("valid")
            );
            let date: HttpDate = "Sun, 06 Nov 1994 08:49:37 GMT".parse().expect("valid");
            assert_eq!(date.unix_seconds(), 784_111_777);
        }
    }
}
