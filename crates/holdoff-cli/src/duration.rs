//! Durations on the command line: `8s`, `500ms`, `1m30s`, `1h`, `2d`, or plain seconds (`8`,
//! `0.7`), and the same notation for printing them back.
//!
//! The grammar is strict: one or more `<number><unit>` parts with units in decreasing order
//! (`d`, `h`, `m`, `s`, `ms`), each at most once, no spaces and no sign; or a bare number of
//! seconds. A number may have a fractional part. [`friendly`] writes what [`parse`] reads.

use std::time::Duration;

// Not jiff's "friendly" format (checked with jiff 0.2.46), which fits neither side:
// - its range: `SignedDuration` holds at most `i64::MAX` s and refuses `2d` (a calendar unit);
//   `Span` takes days, but at most 7,304,484 of them. A flag here is any `Duration`, up to
//   `u64::MAX` s, and the tests pin that end.
// - it reads what we refuse (`-1s`, `1 s`, `1s `, `8sec`, `1,5s`, `1µs`, `1s ago`), so a lexer
//   of our own would still run first, and its errors have no kind to tell "too large" from
//   "invalid" by.
// - its printer writes a day and an hour as `25h` (no days for a `SignedDuration`), and zero
//   as `0ms` once fractional milliseconds are asked for.
const NANOS_PER_SEC: u128 = 1_000_000_000;

/// Units in the order they must appear, with their length in nanoseconds.
const UNITS: [(&str, u128); 5] = [
    ("d", 86_400 * NANOS_PER_SEC),
    ("h", 3_600 * NANOS_PER_SEC),
    ("m", 60 * NANOS_PER_SEC),
    ("s", NANOS_PER_SEC),
    ("ms", 1_000_000),
];

/// Parses a duration; the error is a complete message for the user.
pub(crate) fn parse(input: &str) -> Result<Duration, String> {
    let invalid =
        || format!("invalid duration `{input}`: expected e.g. 8s, 500ms, 1m30s or 0.7 (seconds)");
    let too_large = || format!("invalid duration `{input}`: too large");
    let nanos = nanos(input).map_err(|e| match e {
        Error::Invalid => invalid(),
        Error::TooLarge => too_large(),
    })?;
    let secs = u64::try_from(nanos / NANOS_PER_SEC).map_err(|_| too_large())?;
    // The remainder is below one second, so it fits.
    let subsec = (nanos % NANOS_PER_SEC) as u32;
    Ok(Duration::new(secs, subsec))
}

enum Error {
    Invalid,
    TooLarge,
}

fn nanos(input: &str) -> Result<u128, Error> {
    let (number, mut rest) = split_number(input)?;
    if rest.is_empty() {
        // A bare number is seconds.
        return number.scale(NANOS_PER_SEC);
    }
    let mut total: u128 = 0;
    let mut number = number;
    // Index into UNITS of the next unit allowed: units only ever get smaller.
    let mut next = 0;
    loop {
        let letters = rest.len()
            - rest
                .trim_start_matches(|c: char| c.is_ascii_alphabetic())
                .len();
        let (unit, after) = rest.split_at(letters);
        let offset = UNITS[next..]
            .iter()
            .position(|(name, _)| *name == unit)
            .ok_or(Error::Invalid)?;
        let (_, unit_nanos) = UNITS[next + offset];
        next += offset + 1;
        total = total
            .checked_add(number.scale(unit_nanos)?)
            .ok_or(Error::TooLarge)?;
        if after.is_empty() {
            return Ok(total);
        }
        (number, rest) = split_number(after)?;
        if rest.is_empty() {
            // A trailing number without a unit (`1m30`) is ambiguous.
            return Err(Error::Invalid);
        }
    }
}

/// A decimal number: whole part and up to nine fractional digits.
struct Number {
    whole: u128,
    /// The fractional digits as nanoseconds of one unit, i.e. scaled to nine digits.
    frac_nanos: u128,
}

impl Number {
    /// This many units of `unit_nanos` nanoseconds, rounded down to whole nanoseconds.
    fn scale(&self, unit_nanos: u128) -> Result<u128, Error> {
        let whole = self.whole.checked_mul(unit_nanos).ok_or(Error::TooLarge)?;
        // frac_nanos < 1e9 and unit_nanos <= 86_400e9: the product fits easily.
        let frac = self.frac_nanos * unit_nanos / NANOS_PER_SEC;
        whole.checked_add(frac).ok_or(Error::TooLarge)
    }
}

/// Splits `digits[.digits]` off the front of `s`.
fn split_number(s: &str) -> Result<(Number, &str), Error> {
    let whole_len = s.len() - s.trim_start_matches(|c: char| c.is_ascii_digit()).len();
    if whole_len == 0 {
        return Err(Error::Invalid);
    }
    let (whole_digits, rest) = s.split_at(whole_len);
    let whole = digits_value(whole_digits)?;
    let Some(rest) = rest.strip_prefix('.') else {
        return Ok((
            Number {
                whole,
                frac_nanos: 0,
            },
            rest,
        ));
    };
    let frac_len = rest.len() - rest.trim_start_matches(|c: char| c.is_ascii_digit()).len();
    if frac_len == 0 || frac_len > 9 {
        return Err(Error::Invalid);
    }
    let (frac_digits, rest) = rest.split_at(frac_len);
    let frac_nanos = digits_value(frac_digits)? * 10u128.pow(9 - frac_len as u32);
    Ok((Number { whole, frac_nanos }, rest))
}

fn digits_value(digits: &str) -> Result<u128, Error> {
    digits.bytes().try_fold(0u128, |acc, b| {
        acc.checked_mul(10)
            .and_then(|acc| acc.checked_add(u128::from(b - b'0')))
            .ok_or(Error::TooLarge)
    })
}

/// Writes a duration the way [`parse`] reads it: `30s`, `1m30s`, `2h`, `700ms`, `1.5ms`, `0s`.
pub(crate) fn friendly(duration: Duration) -> String {
    use std::fmt::Write;

    if duration.is_zero() {
        return "0s".to_owned();
    }
    let mut out = String::new();
    let mut secs = duration.as_secs();
    for (unit, size) in [("d", 86_400), ("h", 3_600), ("m", 60), ("s", 1)] {
        let count = secs / size;
        secs %= size;
        if count > 0 {
            // Writing to a String cannot fail.
            let _ = write!(out, "{count}{unit}");
        }
    }
    let nanos = duration.subsec_nanos();
    if nanos > 0 {
        let (millis, rest) = (nanos / 1_000_000, nanos % 1_000_000);
        if rest == 0 {
            let _ = write!(out, "{millis}ms");
        } else {
            let frac = format!("{rest:06}");
            let _ = write!(out, "{millis}.{}ms", frac.trim_end_matches('0'));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    mod parse {
        use super::*;

        #[test]
        fn reads_every_documented_form() {
            let cases = [
                ("8s", Duration::from_secs(8)),
                ("500ms", Duration::from_millis(500)),
                ("1m30s", Duration::from_secs(90)),
                ("1h", Duration::from_secs(3_600)),
                ("2d", Duration::from_secs(172_800)),
                ("1h2m3s4ms", Duration::new(3_723, 4_000_000)),
                ("8", Duration::from_secs(8)),
                ("0.7", Duration::from_millis(700)),
                ("0", Duration::ZERO),
                ("1.5s", Duration::from_millis(1_500)),
                ("0.5ms", Duration::from_micros(500)),
                ("0.000000001", Duration::from_nanos(1)),
                ("18446744073709551615", Duration::from_secs(u64::MAX)),
            ];
            for (input, want) in cases {
                assert_eq!(parse(input), Ok(want), "{input}");
            }
        }

        #[test]
        fn rejects_anything_else_with_a_hint() {
            for input in [
                "",
                "8x",
                "s",
                "-1s",
                "+1",
                "1.",
                ".5",
                "1 s",
                " 1s",
                "1s ",
                "1s1m",
                "1m1m",
                "1m30",
                "1S",
                "8sec",
                "1e3",
                "0.0000000001",
                "1,5",
            ] {
                assert_eq!(
                    parse(input),
                    Err(format!(
                        "invalid duration `{input}`: expected e.g. 8s, 500ms, 1m30s or 0.7 (seconds)"
                    )),
                    "{input:?}"
                );
            }
        }

        #[test]
        fn rejects_values_beyond_a_duration() {
            for input in [
                "18446744073709551616",
                "99999999999999999999d",
                "1".repeat(60).as_str(),
            ] {
                assert_eq!(
                    parse(input),
                    Err(format!("invalid duration `{input}`: too large")),
                );
            }
        }
    }

    mod friendly {
        use super::*;

        #[test]
        fn writes_compact_units() {
            let cases = [
                (Duration::ZERO, "0s"),
                (Duration::from_secs(30), "30s"),
                (Duration::from_secs(90), "1m30s"),
                (Duration::from_secs(3_600), "1h"),
                (Duration::from_secs(90_061), "1d1h1m1s"),
                (Duration::from_millis(700), "700ms"),
                (Duration::from_micros(1_500), "1.5ms"),
                (Duration::from_nanos(1), "0.000001ms"),
            ];
            for (duration, want) in cases {
                assert_eq!(friendly(duration), want);
            }
        }

        #[test]
        fn round_trips_through_parse() {
            for duration in [
                Duration::new(0, 1),
                Duration::new(59, 999_999_999),
                Duration::from_secs(86_399),
                Duration::new(u64::MAX, 999_999_999),
            ] {
                assert_eq!(parse(&friendly(duration)), Ok(duration));
            }
        }
    }
}
