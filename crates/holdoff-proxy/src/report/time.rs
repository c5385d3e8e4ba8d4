//! Wall times as RFC 3339 strings in UTC with milliseconds (`2025-03-01T12:00:02.250Z`), the
//! form every time takes in the event log and the reports.

use std::time::{SystemTime, UNIX_EPOCH};

use jiff::Timestamp;

/// `at` as jiff's timestamp; a time outside jiff's range (years -9999 to 9999) is clamped.
fn timestamp(at: SystemTime) -> Timestamp {
    Timestamp::try_from(at).unwrap_or(if at < UNIX_EPOCH {
        Timestamp::MIN
    } else {
        Timestamp::MAX
    })
}

/// `at` in RFC 3339, UTC, with exactly three fractional digits (truncated, not rounded).
pub(crate) fn format(at: SystemTime) -> String {
    format!("{:.3}", timestamp(at))
}

/// The UTC date of `at`, `YYYY-MM-DD`.
pub(crate) fn date(at: SystemTime) -> String {
    timestamp(at).strftime("%Y-%m-%d").to_string()
}

/// The UTC time of day of `at` with milliseconds, `HH:MM:SS.mmm`.
pub(crate) fn time_of_day(at: SystemTime) -> String {
    let ts = timestamp(at);
    format!("{}.{:03}", ts.strftime("%H:%M:%S"), ts.subsec_millisecond())
}

/// `at` without the fractional seconds or the offset, `YYYY-MM-DDTHH:MM:SS`: JUnit's
/// `timestamp` attribute (an `xs:dateTime` without a zone, in UTC by convention).
pub(crate) fn junit(at: SystemTime) -> String {
    timestamp(at).strftime("%Y-%m-%dT%H:%M:%S").to_string()
}

/// Parses an RFC 3339 time with an offset (any precision).
pub(crate) fn parse(s: &str) -> Result<SystemTime, String> {
    s.parse::<Timestamp>()
        .map(SystemTime::from)
        .map_err(|_| format!("`{s}` is not an RFC 3339 time such as 2025-03-01T12:00:02.250Z"))
}

/// Milliseconds from `from` to `to`, negative when `to` is earlier.
pub(crate) fn millis_between(from: SystemTime, to: SystemTime) -> f64 {
    match to.duration_since(from) {
        Ok(d) => d.as_secs_f64() * 1000.0,
        Err(err) => -err.duration().as_secs_f64() * 1000.0,
    }
}

/// `#[serde(with = "rfc3339")]` for a `SystemTime` field.
pub(crate) mod rfc3339 {
    use std::time::SystemTime;

    use serde::{Deserialize, Deserializer, Serializer};

    pub(crate) fn serialize<S: Serializer>(at: &SystemTime, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&super::format(*at))
    }

    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<SystemTime, D::Error> {
        let s = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        super::parse(&s).map_err(serde::de::Error::custom)
    }
}

/// `#[serde(with = "rfc3339_option")]` for an `Option<SystemTime>` field (`null` for `None`).
pub(crate) mod rfc3339_option {
    use std::time::SystemTime;

    use serde::{Deserialize, Deserializer, Serializer};

    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Option<SystemTime>, D::Error> {
        match <Option<std::borrow::Cow<'de, str>>>::deserialize(d)? {
            Some(s) => super::parse(&s).map(Some).map_err(serde::de::Error::custom),
            None => Ok(None),
        }
    }

    pub(crate) fn serialize<S: Serializer>(
        at: &Option<SystemTime>,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        match at {
            Some(at) => s.serialize_str(&super::format(*at)),
            None => s.serialize_none(),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    /// 2025-03-01T12:00:00Z.
    fn noon() -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(1_740_830_400)
    }

    mod format {
        use super::*;

        #[test]
        fn writes_utc_with_exactly_three_fractional_digits() {
            assert_eq!(format(noon()), "2025-03-01T12:00:00.000Z");
            assert_eq!(
                format(noon() + Duration::from_millis(2250)),
                "2025-03-01T12:00:02.250Z"
            );
        }

        #[test]
        fn truncates_below_a_millisecond() {
            assert_eq!(
                format(noon() + Duration::from_micros(1_999)),
                "2025-03-01T12:00:00.001Z"
            );
        }

        #[test]
        fn clamps_times_beyond_year_9999() {
            let far = UNIX_EPOCH + Duration::from_secs(400_000_000_000);
            assert_eq!(format(far), format!("{:.3}", Timestamp::MAX));
            assert!(format(far).starts_with("9999-12-"));
        }

        #[test]
        fn splits_into_date_and_time_of_day() {
            let at = noon() + Duration::from_millis(3_723_004);
            assert_eq!(date(at), "2025-03-01");
            assert_eq!(time_of_day(at), "13:02:03.004");
            assert_eq!(junit(at), "2025-03-01T13:02:03");
        }
    }

    mod parse {
        use super::*;

        #[test]
        fn reads_back_what_format_writes() {
            let at = noon() + Duration::from_millis(2250);
            assert_eq!(parse(&format(at)), Ok(at));
        }

        #[test]
        fn accepts_offsets_and_any_precision() {
            assert_eq!(parse("2025-03-01T13:00:00+01:00"), Ok(noon()));
            assert_eq!(
                parse("2025-03-01T12:00:00.000000001Z"),
                Ok(noon() + Duration::from_nanos(1))
            );
        }

        #[test]
        fn rejects_a_time_without_an_offset_or_an_http_date() {
            for s in ["2025-03-01T12:00:00", "Sat, 01 Mar 2025 12:00:00 GMT", ""] {
                let err = parse(s).unwrap_err();
                assert!(err.contains("RFC 3339"), "{err}");
            }
        }
    }

    mod millis_between {
        use super::*;

        #[test]
        fn is_signed() {
            let later = noon() + Duration::from_millis(1500);
            assert_eq!(millis_between(noon(), later), 1500.0);
            assert_eq!(millis_between(later, noon()), -1500.0);
        }
    }
}
