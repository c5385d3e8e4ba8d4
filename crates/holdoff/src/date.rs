//! HTTP-date (RFC 9110 §5.6.7): parse all three formats, format IMF-fixdate.
//!
//! Written by hand rather than with `httpdate` because RFC 9110 is stricter than that crate
//! (the weekday must match the date, names are case-sensitive, the rfc850 century follows the
//! fifty-year rule against a caller-supplied "now") and because this parser must not allocate.
//! Every format has a fixed shape, so parsing is positional: each byte is checked once.

use std::fmt;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::error::{ParseError, ParseErrorKind};

const DAY_NAMES: [&[u8; 3]; 7] = [b"Sun", b"Mon", b"Tue", b"Wed", b"Thu", b"Fri", b"Sat"];
const MONTH_NAMES: [&[u8; 3]; 12] = [
    b"Jan", b"Feb", b"Mar", b"Apr", b"May", b"Jun", b"Jul", b"Aug", b"Sep", b"Oct", b"Nov", b"Dec",
];

const SECS_PER_DAY: i64 = 86_400;

/// Which of the three RFC 9110 formats a date was written in.
///
/// Senders must generate [`DateFormat::ImfFixdate`]; recipients must accept all three.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum DateFormat {
    /// `Sun, 06 Nov 1994 08:49:37 GMT` — the preferred format.
    ImfFixdate,
    /// `Sunday, 06-Nov-94 08:49:37 GMT` — obsolete RFC 850 format with a two-digit year.
    Rfc850,
    /// `Sun Nov  6 08:49:37 1994` — ANSI C's `asctime()` format.
    Asctime,
}

impl DateFormat {
    /// The format's name as used in diagnostics and JSON: `imf-fixdate`, `rfc850`, `asctime`.
    pub fn as_str(self) -> &'static str {
        match self {
            DateFormat::ImfFixdate => "imf-fixdate",
            DateFormat::Rfc850 => "rfc850",
            DateFormat::Asctime => "asctime",
        }
    }
}

impl fmt::Display for DateFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A point in time as written in an HTTP-date: whole seconds, UTC, years 0000–9999.
///
/// Parse it with [`HttpDate::parse`] (any of the three formats); [`Display`](fmt::Display)
/// writes IMF-fixdate, whatever format it was read from.
///
/// # Examples
///
/// ```
/// use holdoff::{DateFormat, HttpDate};
/// use std::time::{Duration, UNIX_EPOCH};
///
/// let now = UNIX_EPOCH + Duration::from_secs(1_700_000_000);
/// let date = HttpDate::parse(b"Sunday, 06-Nov-94 08:49:37 GMT", now)?;
/// assert_eq!(date.format(), DateFormat::Rfc850);
/// assert_eq!(date.unix_seconds(), 784_111_777);
/// assert_eq!(date.to_string(), "Sun, 06 Nov 1994 08:49:37 GMT");
/// # Ok::<(), holdoff::ParseError>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct HttpDate {
    unix: i64,
    format: DateFormat,
}

/// The broken-down fields of a date, before they are checked against the calendar.
#[derive(Clone, Copy)]
struct Fields {
    weekday: usize,
    year: i64,
    month: u32,
    day: u32,
    hour: u32,
    minute: u32,
    second: u32,
}

impl HttpDate {
    /// The earliest instant an HTTP-date can name: `0000-01-01T00:00:00Z`.
    pub const MIN_UNIX: i64 = -62_167_219_200;
    /// The latest instant an HTTP-date can name: `9999-12-31T23:59:59Z`.
    pub const MAX_UNIX: i64 = 253_402_300_799;

    /// Parses an HTTP-date in any of the three RFC 9110 formats.
    ///
    /// `now` is only used to resolve the two-digit year of an rfc850-date (RFC 9110 §5.6.7:
    /// a year that appears to be more than 50 years in the future is the most recent past year
    /// with those two digits). Nothing around the date is trimmed: this is the bare grammar.
    ///
    /// # Errors
    ///
    /// A [`ParseError`] carrying the raw bytes when the value does not match a format exactly,
    /// names a day that does not exist, or names the wrong weekday.
    pub fn parse(bytes: &[u8], now: SystemTime) -> Result<HttpDate, ParseError> {
        parse_date(bytes, now).map_err(|kind| ParseError::new(kind, bytes))
    }

    /// [`HttpDate::parse`] without copying the raw value into an error: the decision path
    /// allocates nothing, even for bad input.
    pub(crate) fn parse_kind(bytes: &[u8], now: SystemTime) -> Result<HttpDate, ParseErrorKind> {
        parse_date(bytes, now)
    }

    /// Builds a date from Unix seconds, if the year is within 0000–9999.
    pub fn from_unix_seconds(unix: i64) -> Option<HttpDate> {
        (Self::MIN_UNIX..=Self::MAX_UNIX)
            .contains(&unix)
            .then_some(HttpDate {
                unix,
                format: DateFormat::ImfFixdate,
            })
    }

    /// Builds a date from a wall-clock time, dropping sub-second precision (rounding toward
    /// the past), if the year is within 0000–9999.
    pub fn from_system_time(time: SystemTime) -> Option<HttpDate> {
        HttpDate::from_unix_seconds(unix_seconds_floor(time)?)
    }

    /// Seconds since the Unix epoch (negative before 1970).
    pub fn unix_seconds(&self) -> i64 {
        self.unix
    }

    /// The format the date was parsed from ([`DateFormat::ImfFixdate`] for constructed dates).
    pub fn format(&self) -> DateFormat {
        self.format
    }

    /// The date as a wall-clock time.
    ///
    /// `None` only on a platform whose `SystemTime` cannot represent the year (e.g. before
    /// 1601 on Windows).
    pub fn to_system_time(&self) -> Option<SystemTime> {
        let magnitude = Duration::from_secs(self.unix.unsigned_abs());
        if self.unix >= 0 {
            UNIX_EPOCH.checked_add(magnitude)
        } else {
            UNIX_EPOCH.checked_sub(magnitude)
        }
    }

    /// Writes the IMF-fixdate form into a fixed buffer.
    fn imf_fixdate(&self) -> [u8; 29] {
        let days = self.unix.div_euclid(SECS_PER_DAY);
        let secs = self.unix.rem_euclid(SECS_PER_DAY);
        let (year, month, day) = civil_from_days(days);
        let weekday = weekday_from_days(days);
        let mut out = *b"Sun, 00 Jan 0000 00:00:00 GMT";
        out[0..3].copy_from_slice(DAY_NAMES[weekday]);
        put2(&mut out[5..7], day);
        out[8..11].copy_from_slice(MONTH_NAMES[(month - 1) as usize]);
        // The constructors keep the year within 0000..=9999.
        let year = year as u32;
        put2(&mut out[12..14], year / 100);
        put2(&mut out[14..16], year % 100);
        put2(&mut out[17..19], (secs / 3600) as u32);
        put2(&mut out[20..22], (secs / 60 % 60) as u32);
        put2(&mut out[23..25], (secs % 60) as u32);
        out
    }
}

impl fmt::Display for HttpDate {
    /// Writes the date as IMF-fixdate, the only format senders may generate.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let buf = self.imf_fixdate();
        // The buffer only ever holds ASCII.
        f.write_str(std::str::from_utf8(&buf).map_err(|_| fmt::Error)?)
    }
}

fn put2(out: &mut [u8], value: u32) {
    out[0] = b'0' + (value / 10 % 10) as u8;
    out[1] = b'0' + (value % 10) as u8;
}

/// Seconds since the epoch, rounded toward the past; `None` beyond `i64`.
#[inline]
pub(crate) fn unix_seconds_floor(time: SystemTime) -> Option<i64> {
    match time.duration_since(UNIX_EPOCH) {
        Ok(after) => i64::try_from(after.as_secs()).ok(),
        Err(before) => {
            let before = before.duration();
            let whole = i64::try_from(before.as_secs()).ok()?;
            let extra = i64::from(before.subsec_nanos() > 0);
            whole.checked_neg()?.checked_sub(extra)
        }
    }
}

fn parse_date(b: &[u8], now: SystemTime) -> Result<HttpDate, ParseErrorKind> {
    let (fields, format) = match b.get(3) {
        Some(b',') => (imf_fixdate(b)?, DateFormat::ImfFixdate),
        Some(b' ') => (asctime(b)?, DateFormat::Asctime),
        _ => (rfc850(b, now)?, DateFormat::Rfc850),
    };
    let unix = fields.to_unix()?;
    Ok(HttpDate { unix, format })
}

/// `Sun, 06 Nov 1994 08:49:37 GMT`
fn imf_fixdate(b: &[u8]) -> Result<Fields, ParseErrorKind> {
    if b.len() != 29 {
        return Err(if b.len() > 29 && b[29] == b',' {
            ParseErrorKind::List
        } else {
            ParseErrorKind::BadDate
        });
    }
    let weekday = short_day(&b[0..3])?;
    expect(&b[3..5], b", ")?;
    let day = digits2(&b[5..7])?;
    expect(&b[7..8], b" ")?;
    let month = month(&b[8..11])?;
    expect(&b[11..12], b" ")?;
    let year = i64::from(digits2(&b[12..14])? * 100 + digits2(&b[14..16])?);
    expect(&b[16..17], b" ")?;
    let (hour, minute, second) = time_of_day(&b[17..25])?;
    expect(&b[25..29], b" GMT")?;
    Ok(Fields {
        weekday,
        year,
        month,
        day,
        hour,
        minute,
        second,
    })
}

/// `Sun Nov  6 08:49:37 1994`
fn asctime(b: &[u8]) -> Result<Fields, ParseErrorKind> {
    if b.len() != 24 {
        return Err(ParseErrorKind::BadDate);
    }
    let weekday = short_day(&b[0..3])?;
    expect(&b[3..4], b" ")?;
    let month = month(&b[4..7])?;
    expect(&b[7..8], b" ")?;
    // date3 = month SP ( 2DIGIT / ( SP DIGIT ) )
    let day = match b[8] {
        b' ' => digit(b[9])?,
        _ => digits2(&b[8..10])?,
    };
    expect(&b[10..11], b" ")?;
    let (hour, minute, second) = time_of_day(&b[11..19])?;
    expect(&b[19..20], b" ")?;
    let year = i64::from(digits2(&b[20..22])? * 100 + digits2(&b[22..24])?);
    Ok(Fields {
        weekday,
        year,
        month,
        day,
        hour,
        minute,
        second,
    })
}

/// `Sunday, 06-Nov-94 08:49:37 GMT`
fn rfc850(b: &[u8], now: SystemTime) -> Result<Fields, ParseErrorKind> {
    // Everything after the day name is 24 bytes long, so the comma's place follows from the
    // length; only a malformed value needs the search.
    let comma = match b.len().checked_sub(24) {
        Some(at @ 6..=9) if b[at] == b',' => at,
        _ => b
            .iter()
            .take(10)
            .position(|&c| c == b',')
            .ok_or(ParseErrorKind::BadDate)?,
    };
    let weekday = long_day(&b[..comma])?;
    let rest = &b[comma..];
    if rest.len() != 24 {
        return Err(if rest.len() > 24 && rest[24] == b',' {
            ParseErrorKind::List
        } else {
            ParseErrorKind::BadDate
        });
    }
    expect(&rest[0..2], b", ")?;
    let day = digits2(&rest[2..4])?;
    expect(&rest[4..5], b"-")?;
    let month = month(&rest[5..8])?;
    expect(&rest[8..9], b"-")?;
    let yy = i64::from(digits2(&rest[9..11])?);
    expect(&rest[11..12], b" ")?;
    let (hour, minute, second) = time_of_day(&rest[12..20])?;
    expect(&rest[20..24], b" GMT")?;
    let time = i64::from(hour * 3600 + minute * 60 + second);
    Ok(Fields {
        weekday,
        year: resolve_two_digit_year(yy, month, day, time, now),
        month,
        day,
        hour,
        minute,
        second,
    })
}

/// RFC 9110 §5.6.7: a two-digit year that appears to be more than 50 years in the future is
/// the most recent past year with the same last two digits.
///
/// So the year is the latest one with those digits that is not more than 50 years ahead of
/// `now`: the latest `Y` whose date, moved back 50 calendar years, is not after `now`. Only
/// two years can qualify (a century apart), found from an estimate of `now`'s year that may be
/// off by one; this costs one calendar conversion instead of converting `now` to a date.
///
/// The date's other fields come as scalars, not as a `Fields` struct: copying a struct that
/// was just written field by field stalls on store forwarding, which cost more than the rest.
#[inline]
fn resolve_two_digit_year(yy: i64, month: u32, day: u32, time: i64, now: SystemTime) -> i64 {
    // Outside the years an HTTP-date can name, the nearest one serves as well (and keeps the
    // calendar arithmetic far from overflow).
    let now = unix_seconds_floor(now)
        .unwrap_or(i64::MAX)
        .clamp(HttpDate::MIN_UNIX, HttpDate::MAX_UNIX);
    // 31,556,952 s is the mean Gregorian year: the estimate is within a year of the truth.
    // (Unsigned arithmetic where it can be: it is the shorter instruction chain.)
    let estimate = match u64::try_from(now) {
        Ok(after_epoch) => 1970 + (after_epoch / 31_556_952) as i64,
        Err(_) => 1970 + now.div_euclid(31_556_952),
    };
    let ceiling = estimate + 51;
    // `ceiling` is at least 1970 + 51 − 2,000 > 0 for any year 0000 on, and yy < 100.
    let year = ceiling - (ceiling - yy).rem_euclid(100);
    if year <= estimate + 48 {
        // At most 49 years after the true current year: not more than 50 years ahead.
        return year;
    }
    let fifty_years_earlier = days_from_civil(year - 50, month, day) * SECS_PER_DAY + time;
    if fifty_years_earlier <= now {
        year
    } else {
        year - 100
    }
}

impl Fields {
    /// Checks the fields against the calendar and the weekday, then converts them.
    fn to_unix(self) -> Result<i64, ParseErrorKind> {
        if !(0..=9999).contains(&self.year)
            || !(1..=12).contains(&self.month)
            || self.day == 0
            || self.day > days_in_month(self.year, self.month)
            || self.hour > 23
            || self.minute > 59
            // A leap second is only ever inserted at the end of a UTC day (RFC 9110 allows
            // `23:59:60`); it reads as the first second of the next day.
            || (self.second > 59 && !(self.second == 60 && self.hour == 23 && self.minute == 59))
        {
            return Err(ParseErrorKind::NoSuchDate);
        }
        let days = days_from_civil(self.year, self.month, self.day);
        if weekday_from_days(days) != self.weekday {
            return Err(ParseErrorKind::WrongWeekday);
        }
        let unix = self.to_unix_unchecked();
        // A leap second at the very end of 9999 would read as year 10000.
        if unix > HttpDate::MAX_UNIX {
            return Err(ParseErrorKind::NoSuchDate);
        }
        Ok(unix)
    }

    fn to_unix_unchecked(self) -> i64 {
        days_from_civil(self.year, self.month, self.day) * SECS_PER_DAY
            + i64::from(self.hour) * 3600
            + i64::from(self.minute) * 60
            + i64::from(self.second)
    }
}

/// `got` must be exactly `want`. A fixed-size comparison inlines to an integer compare where a
/// slice comparison would call `memcmp`.
#[inline]
fn expect<const N: usize>(got: &[u8], want: &[u8; N]) -> Result<(), ParseErrorKind> {
    match <&[u8; N]>::try_from(got) {
        Ok(got) if got == want => Ok(()),
        _ => Err(ParseErrorKind::BadDate),
    }
}

fn digit(c: u8) -> Result<u32, ParseErrorKind> {
    if c.is_ascii_digit() {
        Ok(u32::from(c - b'0'))
    } else {
        Err(ParseErrorKind::BadDate)
    }
}

fn digits2(b: &[u8]) -> Result<u32, ParseErrorKind> {
    Ok(digit(b[0])? * 10 + digit(b[1])?)
}

/// `HH:MM:SS`
fn time_of_day(b: &[u8]) -> Result<(u32, u32, u32), ParseErrorKind> {
    let hour = digits2(&b[0..2])?;
    expect(&b[2..3], b":")?;
    let minute = digits2(&b[3..5])?;
    expect(&b[5..6], b":")?;
    let second = digits2(&b[6..8])?;
    Ok((hour, minute, second))
}

// The name matchers compare fixed-size arrays, which compile to a few integer comparisons;
// matching byte-string patterns on a slice would call `memcmp` per arm.

fn short_day(b: &[u8]) -> Result<usize, ParseErrorKind> {
    let name: [u8; 3] = b.try_into().map_err(|_| ParseErrorKind::BadDate)?;
    Ok(match &name {
        b"Sun" => 0,
        b"Mon" => 1,
        b"Tue" => 2,
        b"Wed" => 3,
        b"Thu" => 4,
        b"Fri" => 5,
        b"Sat" => 6,
        _ => return Err(ParseErrorKind::BadDate),
    })
}

fn long_day(b: &[u8]) -> Result<usize, ParseErrorKind> {
    let day = match b.len() {
        6 => match <[u8; 6]>::try_from(b).ok().as_ref() {
            Some(b"Sunday") => Some(0),
            Some(b"Monday") => Some(1),
            Some(b"Friday") => Some(5),
            _ => None,
        },
        7 => (<[u8; 7]>::try_from(b).ok().as_ref() == Some(b"Tuesday")).then_some(2),
        8 => match <[u8; 8]>::try_from(b).ok().as_ref() {
            Some(b"Thursday") => Some(4),
            Some(b"Saturday") => Some(6),
            _ => None,
        },
        9 => (<[u8; 9]>::try_from(b).ok().as_ref() == Some(b"Wednesday")).then_some(3),
        _ => None,
    };
    day.ok_or(ParseErrorKind::BadDate)
}

fn month(b: &[u8]) -> Result<u32, ParseErrorKind> {
    let name: [u8; 3] = b.try_into().map_err(|_| ParseErrorKind::BadDate)?;
    Ok(match &name {
        b"Jan" => 1,
        b"Feb" => 2,
        b"Mar" => 3,
        b"Apr" => 4,
        b"May" => 5,
        b"Jun" => 6,
        b"Jul" => 7,
        b"Aug" => 8,
        b"Sep" => 9,
        b"Oct" => 10,
        b"Nov" => 11,
        b"Dec" => 12,
        _ => return Err(ParseErrorKind::BadDate),
    })
}

fn is_leap(year: i64) -> bool {
    year % 4 == 0 && (year % 100 != 0 || year % 400 == 0)
}

fn days_in_month(year: i64, month: u32) -> u32 {
    match month {
        2 if is_leap(year) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// 0 = Sunday. 1970-01-01 was a Thursday.
fn weekday_from_days(days: i64) -> usize {
    (days + 4).rem_euclid(7) as usize
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
fn days_from_civil(year: i64, month: u32, day: u32) -> i64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let yoe = year.rem_euclid(400);
    let month = i64::from(month);
    let doy = (153 * (if month > 2 { month - 3 } else { month + 9 }) + 2) / 5 + i64::from(day) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The inverse of [`days_from_civil`].
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// A point on the wall clock as whole seconds since the epoch plus nanoseconds. Date
/// arithmetic is done on this rather than on `i128` nanoseconds: 128-bit division is slow, and
/// it sat on the decision's hot path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Stamp {
    secs: i64,
    nanos: u32,
}

impl Stamp {
    pub(crate) fn whole(secs: i64) -> Stamp {
        Stamp { secs, nanos: 0 }
    }

    /// Saturates outside `i64` seconds.
    pub(crate) fn of(time: SystemTime) -> Stamp {
        match time.duration_since(SystemTime::UNIX_EPOCH) {
            Ok(after) => Stamp {
                secs: i64::try_from(after.as_secs()).unwrap_or(i64::MAX),
                nanos: after.subsec_nanos(),
            },
            Err(before) => {
                let before = before.duration();
                let secs = i64::try_from(before.as_secs()).unwrap_or(i64::MAX);
                match before.subsec_nanos() {
                    0 => Stamp::whole(-secs),
                    n => Stamp {
                        secs: (-secs).saturating_sub(1),
                        nanos: 1_000_000_000 - n,
                    },
                }
            }
        }
    }

    /// `self − earlier`: whether it is `≥ 0`, and its magnitude.
    pub(crate) fn since(self, earlier: Stamp) -> (bool, Duration) {
        let mut secs = i128::from(self.secs) - i128::from(earlier.secs);
        let mut nanos = i64::from(self.nanos) - i64::from(earlier.nanos);
        if nanos < 0 {
            secs -= 1;
            nanos += 1_000_000_000;
        }
        let magnitude =
            |s: i128, n: i64| Duration::new(u64::try_from(s).unwrap_or(u64::MAX), n as u32);
        if secs >= 0 {
            (true, magnitude(secs, nanos))
        } else if nanos == 0 {
            (false, magnitude(-secs, 0))
        } else {
            (false, magnitude(-secs - 1, 1_000_000_000 - nanos))
        }
    }

    /// `max(0, self − earlier)`, and whether it was clamped.
    pub(crate) fn after(self, earlier: Stamp) -> (Duration, bool) {
        match self.since(earlier) {
            (true, d) => (d, false),
            (false, _) => (Duration::ZERO, true),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(unix: i64) -> SystemTime {
        HttpDate::from_unix_seconds(unix)
            .and_then(|d| d.to_system_time())
            .expect("in range")
    }

    /// 2026-11-30T00:00:00Z
    const NOW: i64 = 1_795_996_800;

    mod parse {
        use super::*;
        use test_case::test_case;

        #[test_case(b"Sun, 06 Nov 1994 08:49:37 GMT", DateFormat::ImfFixdate ; "imf fixdate from the rfc")]
        #[test_case(b"Sunday, 06-Nov-94 08:49:37 GMT", DateFormat::Rfc850 ; "rfc850 from the rfc")]
        #[test_case(b"Sun Nov  6 08:49:37 1994", DateFormat::Asctime ; "asctime from the rfc")]
        fn accepts_the_rfc_examples(input: &[u8], format: DateFormat) {
            let date = HttpDate::parse(input, at(NOW)).expect("valid");
            assert_eq!(date.unix_seconds(), 784_111_777);
            assert_eq!(date.format(), format);
        }

        #[test_case(b"Wed, 31 Dec 1969 23:59:59 GMT", -1 ; "just before the epoch")]
        #[test_case(b"Thu, 01 Jan 1970 00:00:00 GMT", 0 ; "the epoch")]
        #[test_case(b"Tue, 29 Feb 2000 12:00:00 GMT", 951_825_600 ; "leap day of a 400 year")]
        #[test_case(b"Sat, 01 Jan 0000 00:00:00 GMT", HttpDate::MIN_UNIX ; "earliest")]
        #[test_case(b"Fri, 31 Dec 9999 23:59:59 GMT", HttpDate::MAX_UNIX ; "latest")]
        #[test_case(b"Wed, 31 Dec 2025 23:59:60 GMT", 1_767_225_600 ; "leap second is the next day")]
        #[test_case(b"Thu Jan 15 10:00:00 2026", 1_768_471_200 ; "asctime two digit day")]
        #[test_case(b"Wednesday, 31-Dec-25 23:59:59 GMT", 1_767_225_599 ; "longest rfc850 day name")]
        fn reads_the_instant(input: &[u8], unix: i64) {
            assert_eq!(
                HttpDate::parse(input, at(NOW))
                    .expect("valid")
                    .unix_seconds(),
                unix
            );
        }

        #[test_case(b"sun, 06 Nov 1994 08:49:37 GMT" ; "lowercase day")]
        #[test_case(b"Sun, 06 nov 1994 08:49:37 GMT" ; "lowercase month")]
        #[test_case(b"Sun, 06 Nov 1994 08:49:37 gmt" ; "lowercase zone")]
        #[test_case(b"Sun, 06 Nov 1994 08:49:37 UTC" ; "utc zone")]
        #[test_case(b"Sun, 06 Nov 1994 08:49:37 +0000" ; "numeric zone")]
        #[test_case(b"Sun, 6 Nov 1994 08:49:37 GMT" ; "one digit day in imf")]
        #[test_case(b"Sun,  06 Nov 1994 08:49:37 GMT" ; "double space")]
        #[test_case(b"Sun, 06 Nov 94 08:49:37 GMT" ; "two digit year in imf")]
        #[test_case(b"Sun, 06 Nov 1994 8:49:37 GMT" ; "one digit hour")]
        #[test_case(b"Sun, 06 Nov 1994 08:49 GMT" ; "no seconds")]
        #[test_case(b"Sun, 06 Nov 1994 08:49:37" ; "no zone")]
        #[test_case(b"Sun 06 Nov 1994 08:49:37 GMT" ; "no comma")]
        #[test_case(b"Sun, 06-Nov-1994 08:49:37 GMT" ; "dashes in imf")]
        #[test_case(b"Sun, 06 November 1994 08:49:37 GMT" ; "long month")]
        #[test_case(b"Sunday, 06 Nov 1994 08:49:37 GMT" ; "long day in imf")]
        #[test_case(b"Sun, 06-Nov-94 08:49:37 GMT" ; "short day in rfc850")]
        #[test_case(b"Sunday, 06-Nov-1994 08:49:37 GMT" ; "four digit year in rfc850")]
        #[test_case(b"Sun Nov 06 08:49:37 1994 GMT" ; "asctime with zone")]
        #[test_case(b"Sun Nov 6 08:49:37 1994" ; "asctime single space day")]
        #[test_case(b"Sun Nov  6 08:49:37 94" ; "asctime two digit year")]
        #[test_case(b"1994-11-06T08:49:37Z" ; "rfc3339")]
        #[test_case(b"" ; "empty")]
        #[test_case(b"Sun" ; "truncated")]
        fn rejects_anything_off_the_grammar(input: &[u8]) {
            let err = HttpDate::parse(input, at(NOW)).expect_err("malformed");
            assert_eq!(err.kind(), ParseErrorKind::BadDate, "{err}");
            assert_eq!(err.raw(), input);
        }

        #[test_case(b"Mon, 06 Nov 1994 08:49:37 GMT" ; "imf")]
        #[test_case(b"Monday, 06-Nov-94 08:49:37 GMT" ; "rfc850")]
        #[test_case(b"Mon Nov  6 08:49:37 1994" ; "asctime")]
        fn rejects_the_wrong_weekday(input: &[u8]) {
            let err = HttpDate::parse(input, at(NOW)).expect_err("malformed");
            assert_eq!(err.kind(), ParseErrorKind::WrongWeekday);
        }

        #[test_case(b"Thu, 29 Feb 2001 00:00:00 GMT" ; "feb 29 in a common year")]
        #[test_case(b"Mon, 29 Feb 1900 00:00:00 GMT" ; "feb 29 in a century year")]
        #[test_case(b"Thu, 31 Apr 2026 00:00:00 GMT" ; "april 31")]
        #[test_case(b"Sun, 00 Nov 1994 08:49:37 GMT" ; "day zero")]
        #[test_case(b"Sun, 06 Nov 1994 24:00:00 GMT" ; "hour 24")]
        #[test_case(b"Sun, 06 Nov 1994 08:60:00 GMT" ; "minute 60")]
        #[test_case(b"Sun, 06 Nov 1994 08:49:60 GMT" ; "leap second mid day")]
        #[test_case(b"Sun, 06 Nov 1994 08:49:99 GMT" ; "second 99")]
        fn rejects_dates_not_in_the_calendar(input: &[u8]) {
            let err = HttpDate::parse(input, at(NOW)).expect_err("malformed");
            assert_eq!(err.kind(), ParseErrorKind::NoSuchDate);
        }

        #[test]
        fn reports_a_list_of_dates_as_a_list() {
            let err = HttpDate::parse(
                b"Sun, 06 Nov 1994 08:49:37 GMT, Sun, 06 Nov 1994 08:49:37 GMT",
                at(NOW),
            )
            .expect_err("list");
            assert_eq!(err.kind(), ParseErrorKind::List);
        }
    }

    mod rfc850_year {
        use super::*;

        fn year_of(input: &[u8], now: i64) -> i64 {
            let days = HttpDate::parse(input, at(now))
                .expect("valid")
                .unix_seconds()
                .div_euclid(SECS_PER_DAY);
            civil_from_days(days).0
        }

        #[test]
        fn a_year_far_ahead_is_the_previous_century() {
            // From 2026, "94" as 2094 would be 68 years ahead: it is 1994.
            assert_eq!(year_of(b"Sunday, 06-Nov-94 08:49:37 GMT", NOW), 1994);
        }

        #[test]
        fn a_past_year_of_this_century_stays() {
            assert_eq!(year_of(b"Sunday, 01-Jan-23 00:00:00 GMT", NOW), 2023);
        }

        #[test]
        fn a_near_future_year_stays_in_the_future() {
            // 2070 is 44 years after 2026: not "more than 50 years in the future".
            assert_eq!(year_of(b"Wednesday, 01-Jan-70 00:00:00 GMT", NOW), 2070);
        }

        #[test]
        fn exactly_fifty_years_ahead_is_not_more_than_fifty() {
            // now = 2026-11-30T00:00:00Z; 2076-11-30T00:00:00Z is exactly 50 years ahead.
            assert_eq!(year_of(b"Monday, 30-Nov-76 00:00:00 GMT", NOW), 2076);
            // One second later is more than 50 years ahead: 1976 (a Tuesday).
            assert_eq!(year_of(b"Tuesday, 30-Nov-76 00:00:01 GMT", NOW), 1976);
        }

        #[test]
        fn near_the_end_of_a_century_wraps_forward() {
            // From 2095, "01" is 2101 (6 years ahead), not 2001.
            let now = days_from_civil(2095, 6, 1) * SECS_PER_DAY;
            assert_eq!(year_of(b"Saturday, 01-Jan-01 00:00:00 GMT", now), 2101);
        }

        #[test]
        fn the_weekday_is_checked_against_the_resolved_year() {
            // 06-Nov-94 was a Sunday in 1994 but is a Saturday in 2094.
            let err = HttpDate::parse(b"Saturday, 06-Nov-94 08:49:37 GMT", at(NOW))
                .expect_err("wrong weekday for 1994");
            assert_eq!(err.kind(), ParseErrorKind::WrongWeekday);
        }
    }

    mod display {
        use super::*;

        #[test]
        fn writes_imf_fixdate_whatever_was_parsed() {
            for input in [
                &b"Sun, 06 Nov 1994 08:49:37 GMT"[..],
                b"Sunday, 06-Nov-94 08:49:37 GMT",
                b"Sun Nov  6 08:49:37 1994",
            ] {
                let date = HttpDate::parse(input, at(NOW)).expect("valid");
                assert_eq!(date.to_string(), "Sun, 06 Nov 1994 08:49:37 GMT");
            }
        }

        #[test]
        fn writes_the_extremes() {
            let min = HttpDate::from_unix_seconds(HttpDate::MIN_UNIX).expect("in range");
            let max = HttpDate::from_unix_seconds(HttpDate::MAX_UNIX).expect("in range");
            assert_eq!(min.to_string(), "Sat, 01 Jan 0000 00:00:00 GMT");
            assert_eq!(max.to_string(), "Fri, 31 Dec 9999 23:59:59 GMT");
        }

        #[test]
        fn refuses_years_it_cannot_write() {
            assert_eq!(HttpDate::from_unix_seconds(HttpDate::MAX_UNIX + 1), None);
            assert_eq!(HttpDate::from_unix_seconds(HttpDate::MIN_UNIX - 1), None);
        }

        #[test]
        fn rounds_sub_seconds_toward_the_past() {
            let t = UNIX_EPOCH - Duration::from_millis(1);
            assert_eq!(
                HttpDate::from_system_time(t).map(|d| d.unix_seconds()),
                Some(-1)
            );
        }
    }

    mod calendar {
        use super::*;

        #[test]
        fn civil_and_days_agree_over_every_day_of_many_centuries() {
            for days in days_from_civil(1600, 1, 1)..days_from_civil(2400, 1, 1) {
                let (y, m, d) = civil_from_days(days);
                assert_eq!(days_from_civil(y, m, d), days);
                assert!(d >= 1 && d <= days_in_month(y, m));
            }
        }
    }

    mod stamp {
        use super::*;

        fn at(secs: i64, nanos: u32) -> Stamp {
            Stamp { secs, nanos }
        }

        #[test]
        fn subtracts_with_a_borrow() {
            assert_eq!(
                at(10, 0).since(at(8, 250_000_000)),
                (true, Duration::from_millis(1750))
            );
            assert_eq!(
                at(8, 250_000_000).since(at(10, 0)),
                (false, Duration::from_millis(1750))
            );
            assert_eq!(at(5, 0).since(at(5, 0)), (true, Duration::ZERO));
            assert_eq!(at(-1, 0).since(at(1, 0)), (false, Duration::from_secs(2)));
        }

        #[test]
        fn reads_times_before_the_epoch() {
            let t = SystemTime::UNIX_EPOCH - Duration::from_millis(1500);
            assert_eq!(Stamp::of(t), at(-2, 500_000_000));
            assert_eq!(
                Stamp::of(SystemTime::UNIX_EPOCH - Duration::from_secs(3)),
                at(-3, 0)
            );
        }

        #[test]
        fn never_overflows_at_the_extremes() {
            let (ahead, by) = at(i64::MAX, 0).since(at(i64::MIN, 999_999_999));
            assert!(ahead);
            assert_eq!(by.as_secs(), u64::MAX - 1); // 2⁶⁴ − 1 s, less the borrowed second
            assert_eq!(
                at(i64::MIN, 0).after(at(i64::MAX, 0)),
                (Duration::ZERO, true)
            );
        }
    }
}
