//! Property tests: format → parse round trips, parsing never panics, and the decision's wait
//! is a lower-bound-respecting `max(H, B) + j`.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use holdoff::clock::SystemClock;
use holdoff::{
    Attempt, DateFormat, Decision, DeferReason, HttpDate, Jitter, JitterDraw, Policy, Receipt,
    ResponseInfo, RetryAfter,
};
use http::{Method, StatusCode};
use proptest::prelude::*;

/// 2026-11-30T00:00:00Z.
const NOW: i64 = 1_795_996_800;

fn system_time(unix: i64) -> Option<SystemTime> {
    let magnitude = Duration::from_secs(unix.unsigned_abs());
    if unix >= 0 {
        UNIX_EPOCH.checked_add(magnitude)
    } else {
        UNIX_EPOCH.checked_sub(magnitude)
    }
}

fn at(unix: i64) -> SystemTime {
    system_time(unix).expect("representable")
}

/// A `now` anywhere within the years an HTTP-date can name, give or take a century.
fn any_now() -> impl Strategy<Value = SystemTime> {
    (HttpDate::MIN_UNIX - 3_155_760_000..=HttpDate::MAX_UNIX + 3_155_760_000).prop_map(at)
}

fn any_date() -> impl Strategy<Value = HttpDate> {
    (HttpDate::MIN_UNIX..=HttpDate::MAX_UNIX)
        .prop_map(|unix| HttpDate::from_unix_seconds(unix).expect("in range"))
}

const LONG_DAYS: [&str; 7] = [
    "Sunday",
    "Monday",
    "Tuesday",
    "Wednesday",
    "Thursday",
    "Friday",
    "Saturday",
];

/// Rewrites an IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`) as rfc850 and asctime.
fn obsolete_forms(imf: &str) -> (String, String) {
    let (day_name, day, month, year, time) = (
        &imf[0..3],
        &imf[5..7],
        &imf[8..11],
        &imf[12..16],
        &imf[17..25],
    );
    let long = LONG_DAYS
        .iter()
        .find(|long| long.starts_with(day_name))
        .expect("a day name");
    let rfc850 = format!("{long}, {day}-{month}-{} {time} GMT", &year[2..]);
    let asctime_day = day
        .strip_prefix('0')
        .map_or(day.to_owned(), |d| format!(" {d}"));
    let asctime = format!("{day_name} {month} {asctime_day} {time} {year}");
    (rfc850, asctime)
}

/// Bytes drawn from what HTTP-dates and delays are made of, so random values get past the
/// first checks and into the positional parsers.
fn date_ish() -> impl Strategy<Value = Vec<u8>> {
    let pieces = prop::sample::select(vec![
        "Sun",
        "Mon",
        "Tue",
        "Wed",
        "Thu",
        "Fri",
        "Sat",
        "Sunday",
        "Wednesday",
        "Jan",
        "Feb",
        "Nov",
        "Dec",
        "GMT",
        ", ",
        " ",
        "  ",
        "\t",
        "-",
        ":",
        ",",
        "0",
        "1",
        "2",
        "3",
        "5",
        "6",
        "9",
        "00",
        "06",
        "29",
        "31",
        "59",
        "60",
        "94",
        "99",
        "1994",
        "2000",
        "9999",
        "0000",
        "23:59:60",
        "08:49:37",
    ]);
    prop::collection::vec(pieces, 0..16).prop_map(|parts| parts.concat().into_bytes())
}

/// A valid date in one of the three formats with a few bytes overwritten, inserted or
/// removed: near misses that reach the calendar, weekday and year checks.
fn mutated_date() -> impl Strategy<Value = Vec<u8>> {
    let edit = (
        any::<prop::sample::Index>(),
        0u8..3,
        prop::sample::select(&b"0123569 ,-:ADFGJMNSTadelnoruy\t"[..]),
    );
    (any_date(), 0usize..3, prop::collection::vec(edit, 0..4)).prop_map(|(date, form, edits)| {
        let imf = date.to_string();
        let (rfc850, asctime) = obsolete_forms(&imf);
        let mut bytes = [imf, rfc850, asctime][form].clone().into_bytes();
        for (at, op, byte) in edits {
            let i = at.index(bytes.len() + 1);
            match op {
                0 if i < bytes.len() => bytes[i] = byte,
                1 => bytes.insert(i, byte),
                _ if i < bytes.len() => {
                    bytes.remove(i);
                }
                _ => {}
            }
        }
        bytes
    })
}

/// Checks that a parsed value formats to something that parses back to the same thing, and
/// that formatting is then a fixed point.
fn assert_stable(value: RetryAfter, now: SystemTime) -> Result<(), TestCaseError> {
    let text = value.to_string();
    let again = RetryAfter::parse(text.as_bytes(), now)
        .map_err(|e| TestCaseError::fail(format!("{value:?} formatted as {text:?}: {e}")))?;
    match (value, again) {
        (RetryAfter::Delay(a), RetryAfter::Delay(b)) => prop_assert_eq!(a, b),
        (RetryAfter::Date(a), RetryAfter::Date(b)) => {
            prop_assert_eq!(a.unix_seconds(), b.unix_seconds(), "{:?}", text);
            prop_assert_eq!(b.format(), DateFormat::ImfFixdate);
        }
        (a, b) => prop_assert!(false, "{:?} became {:?} via {:?}", a, b, text),
    }
    prop_assert_eq!(again.to_string(), text);
    Ok(())
}

mod http_date {
    use super::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2048))]

        #[test]
        fn formats_and_parses_back_every_representable_second(date in any_date(), now in any_now()) {
            let text = date.to_string();
            let parsed = HttpDate::parse(text.as_bytes(), now).expect("own output parses");
            prop_assert_eq!(parsed.unix_seconds(), date.unix_seconds());
            prop_assert_eq!(parsed.format(), DateFormat::ImfFixdate);
            prop_assert_eq!(parsed.to_string(), text);
        }

        #[test]
        fn the_obsolete_forms_name_the_same_second(date in any_date()) {
            let (rfc850, asctime) = obsolete_forms(&date.to_string());
            let parsed = HttpDate::parse(asctime.as_bytes(), at(NOW)).expect("asctime parses");
            prop_assert_eq!((parsed.unix_seconds(), parsed.format()), (date.unix_seconds(), DateFormat::Asctime));
            // The rfc850 year is resolved against `now`: seen at that very instant, a two-digit
            // year is never "more than 50 years in the future".
            let now = date.to_system_time().expect("representable");
            let parsed = HttpDate::parse(rfc850.as_bytes(), now).expect("rfc850 parses");
            prop_assert_eq!((parsed.unix_seconds(), parsed.format()), (date.unix_seconds(), DateFormat::Rfc850));
        }
    }
}

mod delay {
    use super::*;

    proptest! {
        #[test]
        fn formats_and_parses_back_every_u64(secs: u64) {
            let value = RetryAfter::Delay(Duration::from_secs(secs));
            let text = value.to_string();
            prop_assert_eq!(&text, &secs.to_string());
            prop_assert_eq!(RetryAfter::parse(text.as_bytes(), at(NOW)).expect("digits"), value);
        }
    }
}

mod parse {
    use super::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(4096))]

        #[test]
        fn never_panics_on_arbitrary_bytes(bytes: Vec<u8>, now in any_now()) {
            let _ = RetryAfter::parse(&bytes, now);
            let _ = HttpDate::parse(&bytes, now);
        }

        #[test]
        fn never_panics_on_date_ish_bytes_and_is_stable_when_it_parses(
            bytes in prop_oneof![date_ish(), mutated_date()],
            now in any_now(),
        ) {
            if let Ok(value) = RetryAfter::parse(&bytes, now) {
                assert_stable(value, now)?;
            }
            if let Ok(date) = HttpDate::parse(&bytes, now) {
                assert_stable(RetryAfter::Date(date), now)?;
            }
        }

        #[test]
        fn every_valid_value_is_stable(date in any_date(), secs: u64, now in any_now()) {
            let (rfc850, asctime) = obsolete_forms(&date.to_string());
            for input in [date.to_string(), rfc850, asctime, secs.to_string(), format!("{secs}0")] {
                let value = RetryAfter::parse(input.as_bytes(), now);
                // rfc850 can name a weekday that is wrong in the century `now` picks.
                if let Ok(value) = value {
                    assert_stable(value, now)?;
                }
            }
        }
    }

    #[test]
    fn a_leap_second_is_stable() {
        let value = RetryAfter::parse(b"Wed, 31 Dec 2025 23:59:60 GMT", at(NOW)).expect("valid");
        assert_eq!(value.to_string(), "Thu, 01 Jan 2026 00:00:00 GMT");
        assert_stable(value, at(NOW)).expect("stable");
    }

    /// A leap second on the last day of 9999 would read as year 10000, which no HTTP-date can
    /// name: it is rejected rather than written back as year 0000.
    #[test]
    fn a_leap_second_at_the_end_of_9999_is_stable() {
        let err =
            RetryAfter::parse(b"Fri, 31 Dec 9999 23:59:60 GMT", at(NOW)).expect_err("beyond 9999");
        assert_eq!(err.kind(), holdoff::ParseErrorKind::NoSuchDate);
    }

    /// A `now` past the years an HTTP-date can name reads as the last of them (9999), so the
    /// century rule still applies and nothing overflows.
    #[test]
    fn rfc850_never_panics_whatever_now_is() {
        let now = UNIX_EPOCH + Duration::from_secs(i64::MAX.unsigned_abs());
        let parsed = RetryAfter::parse(b"Sunday, 06-Nov-94 08:49:37 GMT", now).expect("valid");
        let RetryAfter::Date(date) = parsed else {
            panic!("expected a date, got {parsed:?}");
        };
        // 9994-11-06T08:49:37Z, a Sunday.
        assert_eq!(date.unix_seconds(), 253_239_727_777);
    }
}

mod decide {
    use super::*;

    fn any_jitter() -> impl Strategy<Value = Jitter> {
        prop_oneof![
            Just(Jitter::None),
            (0u64..=3_600_000).prop_map(|ms| Jitter::Uniform(Duration::from_millis(ms))),
            (-1.0f64..=2.0).prop_map(Jitter::Proportional),
        ]
    }

    fn any_draw() -> impl Strategy<Value = JitterDraw> {
        prop_oneof![
            (0u64..=3_600_000_000).prop_map(|us| JitterDraw::Exact(Duration::from_micros(us))),
            (0.0f64..=1.0).prop_map(JitterDraw::Unit),
            // Out-of-range and NaN draws must still never subtract.
            prop::num::f64::ANY.prop_map(JitterDraw::Unit),
        ]
    }

    /// A hint up to ten years, or any `u64` at all.
    fn any_hint() -> impl Strategy<Value = u64> {
        prop_oneof![4 => 0u64..=315_360_000, 1 => any::<u64>()]
    }

    fn receipt() -> Receipt {
        Receipt {
            instant: SystemClock.now(),
            wall: at(NOW),
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2048))]

        #[test]
        fn a_retry_waits_max_of_hint_and_backoff_plus_a_jitter_that_only_adds(
            hint in any_hint(),
            backoff_ms in 0u64..=86_400_000,
            jitter in any_jitter(),
            draw in any_draw(),
            number in 1u32..5,
        ) {
            let policy = Policy::default().with_max_wait(None).with_jitter(jitter);
            let digits = hint.to_string();
            let receipt = receipt();
            let response = ResponseInfo::new(StatusCode::SERVICE_UNAVAILABLE, receipt)
                .with_retry_after(digits.as_bytes());
            let backoff = Duration::from_millis(backoff_ms);
            let attempt = Attempt::new(&Method::GET, number).with_backoff(backoff).with_jitter(draw);
            let verdict = policy.decide(&response, &attempt);
            let h = Duration::from_secs(hint);
            let base = h.max(backoff);
            let j = verdict.diagnostics.jitter;
            prop_assert_eq!(verdict.permitted.expect("a hint").after, h);
            match draw {
                JitterDraw::Exact(exact) => prop_assert_eq!(j, exact),
                JitterDraw::Unit(_) => prop_assert!(j <= jitter.max_for(base), "{:?} > max {:?}", j, jitter.max_for(base)),
            }
            match verdict.decision {
                Decision::Retry { wait, at } => {
                    prop_assert!(wait >= h, "wait {:?} < hint {:?}", wait, h);
                    prop_assert!(wait >= backoff, "wait {:?} < backoff {:?}", wait, backoff);
                    prop_assert_eq!(Some(wait), base.checked_add(j));
                    prop_assert_eq!(at, receipt.instant + wait);
                }
                // Without a deadline the only other outcome is a wait the clock can't hold.
                Decision::Defer(DeferReason::BeyondClockRange) => {
                    prop_assert!(base.checked_add(j).and_then(|w| receipt.instant.checked_add(w)).is_none());
                }
                other => prop_assert!(false, "unexpected {:?}", other),
            }
        }

        #[test]
        fn a_retry_never_waits_past_the_deadline(
            hint in any_hint(),
            backoff_ms in 0u64..=86_400_000,
            jitter in any_jitter(),
            draw in any_draw(),
            remaining_ms in 0u64..=864_000_000,
        ) {
            let policy = Policy::default().with_max_wait(None).with_jitter(jitter);
            let digits = hint.to_string();
            let response = ResponseInfo::new(StatusCode::SERVICE_UNAVAILABLE, receipt())
                .with_retry_after(digits.as_bytes());
            let remaining = Duration::from_millis(remaining_ms);
            let attempt = Attempt::new(&Method::GET, 1).with_backoff(Duration::from_millis(backoff_ms)).with_jitter(draw).with_remaining(Some(remaining));
            let verdict = policy.decide(&response, &attempt);
            match verdict.decision {
                Decision::Retry { wait, .. } => prop_assert!(wait < remaining, "wait {:?} ≥ L {:?}", wait, remaining),
                Decision::Defer(DeferReason::DeadlineExceeded | DeferReason::BeyondClockRange) => {
                    // Deferred, never shortened: the permitted time is still the full hint.
                    prop_assert_eq!(verdict.permitted.expect("a hint").after, Duration::from_secs(hint));
                }
                other => prop_assert!(false, "unexpected {:?}", other),
            }
        }

        #[test]
        fn a_date_hint_counts_from_the_servers_date(
            server in HttpDate::MIN_UNIX..=HttpDate::MAX_UNIX,
            offset in -1_000_000_000i64..=1_000_000_000,
            age in 0u32..=100_000,
        ) {
            let date = HttpDate::from_unix_seconds(server).expect("in range");
            let Some(hint) = HttpDate::from_unix_seconds(server.saturating_add(offset)) else {
                return Ok(());
            };
            let (date, hint, age_text) = (date.to_string(), hint.to_string(), age.to_string());
            let response = ResponseInfo::new(StatusCode::SERVICE_UNAVAILABLE, receipt())
                .with_retry_after(hint.as_bytes())
                .with_date(date.as_bytes())
                .with_age(age_text.as_bytes());
            let attempt = Attempt::new(&Method::GET, 1);
            let verdict = Policy::default().with_max_wait(None).decide(&response, &attempt);
            // H = max(0, hint − (Date + Age)), whatever the local clock says.
            let diff = offset - i64::from(age);
            let expected = Duration::from_secs(u64::try_from(diff).unwrap_or(0));
            prop_assert_eq!(verdict.permitted.expect("a hint").after, expected);
            prop_assert_eq!(verdict.diagnostics.clamped_past, diff < 0);
            prop_assert_eq!(verdict.decision.wait(), Some(expected));
        }
    }
}
