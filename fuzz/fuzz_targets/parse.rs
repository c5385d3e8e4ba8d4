//! `Retry-After` and HTTP-date parsing: never panics, and whatever parses formats to
//! something that parses back to the same value (for dates, the same Unix second).
#![no_main]

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use holdoff::{DateFormat, HttpDate, RetryAfter};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    check(data, holdoff::from_str_now());
    // The rfc850 year is resolved against `now`, which is caller input too: take one from
    // the first eight bytes and parse the rest against it.
    if let Some((head, rest)) = data.split_first_chunk::<8>()
        && let Some(now) = system_time(i64::from_le_bytes(*head))
    {
        check(rest, now);
    }
});

fn check(bytes: &[u8], now: SystemTime) {
    if let Ok(value) = RetryAfter::parse(bytes, now) {
        let text = value.to_string();
        let again = RetryAfter::parse(text.as_bytes(), now)
            .unwrap_or_else(|e| panic!("{value:?} formatted as {text:?} does not parse: {e}"));
        match (value, again) {
            (RetryAfter::Delay(a), RetryAfter::Delay(b)) => assert_eq!(a, b, "via {text:?}"),
            (RetryAfter::Date(a), RetryAfter::Date(b)) => same_date(a, b, &text),
            (a, b) => panic!("{a:?} became {b:?} via {text:?}"),
        }
    }
    if let Ok(date) = HttpDate::parse(bytes, now) {
        let text = date.to_string();
        let again = HttpDate::parse(text.as_bytes(), now)
            .unwrap_or_else(|e| panic!("{date:?} formatted as {text:?} does not parse: {e}"));
        same_date(date, again, &text);
    }
}

fn same_date(parsed: HttpDate, reparsed: HttpDate, text: &str) {
    assert_eq!(
        parsed.unix_seconds(),
        reparsed.unix_seconds(),
        "{parsed:?} formatted as {text:?}"
    );
    assert_eq!(reparsed.format(), DateFormat::ImfFixdate, "{text:?}");
}

fn system_time(unix: i64) -> Option<SystemTime> {
    let magnitude = Duration::from_secs(unix.unsigned_abs());
    if unix >= 0 {
        UNIX_EPOCH.checked_add(magnitude)
    } else {
        UNIX_EPOCH.checked_sub(magnitude)
    }
}
