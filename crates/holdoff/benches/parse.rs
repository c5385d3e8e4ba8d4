//! Parsing `Retry-After` values and HTTP-dates: holdoff against `httpdate` and `headers`, on
//! the same inputs (RFC 9110's own examples).
//!
//! Each input kind is one criterion group, and each library one function in it, so
//! `target/criterion/<group>/<function>/` lines up as a table (`scripts/bench-parse`):
//!
//! - `holdoff`: `HttpDate::parse` for the dates, `RetryAfter::parse` for delay-seconds;
//! - `holdoff-retry-after`: `RetryAfter::parse` on the dates (what a client calls);
//! - `httpdate`: `httpdate::parse_http_date` (dates only: it has no delay-seconds). It takes
//!   a `&str`, which the bench hands it for free; from a `HeaderValue` a caller would first
//!   pay for `to_str()`;
//! - `headers`: `headers::RetryAfter` decoded with `headers::Header::decode` from an
//!   `http::HeaderValue` built outside the timed loop.

use std::fmt::Write as _;
use std::hint::black_box;
use std::iter;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use criterion::{Criterion, criterion_group, criterion_main};
use headers::Header as _;
use holdoff::{HttpDate, RetryAfter};
use http::HeaderValue;

/// One input kind: the criterion group name and the value, as RFC 9110 writes it.
struct Input {
    group: &'static str,
    value: &'static str,
    is_date: bool,
}

const INPUTS: [Input; 4] = [
    Input {
        group: "delay-seconds",
        value: "120",
        is_date: false,
    },
    Input {
        group: "imf-fixdate",
        value: "Sun, 06 Nov 1994 08:49:37 GMT",
        is_date: true,
    },
    Input {
        group: "rfc850",
        value: "Sunday, 06-Nov-94 08:49:37 GMT",
        is_date: true,
    },
    Input {
        group: "asctime",
        value: "Sun Nov  6 08:49:37 1994",
        is_date: true,
    },
];

/// 2026-11-30T00:00:00Z, for the rfc850 two-digit year.
fn now() -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(1_795_996_800)
}

fn parse(c: &mut Criterion) {
    let now = now();
    for input in &INPUTS {
        let bytes = input.value.as_bytes();
        let header = HeaderValue::from_static(input.value);
        // Every library must accept the input, or the comparison means nothing.
        assert!(RetryAfter::parse(bytes, now).is_ok(), "{}", input.value);
        assert!(
            headers::RetryAfter::decode(&mut iter::once(&header)).is_ok(),
            "{}",
            input.value
        );

        let mut group = c.benchmark_group(input.group);
        group
            .warm_up_time(Duration::from_secs(1))
            .measurement_time(Duration::from_secs(2));
        if input.is_date {
            assert!(HttpDate::parse(bytes, now).is_ok(), "{}", input.value);
            assert!(
                httpdate::parse_http_date(input.value).is_ok(),
                "{}",
                input.value
            );
            group.bench_function("holdoff", |b| {
                b.iter(|| HttpDate::parse(black_box(bytes), black_box(now)));
            });
            group.bench_function("holdoff-retry-after", |b| {
                b.iter(|| RetryAfter::parse(black_box(bytes), black_box(now)));
            });
            group.bench_function("httpdate", |b| {
                b.iter(|| httpdate::parse_http_date(black_box(input.value)));
            });
        } else {
            // httpdate parses dates only; there is no delay-seconds function to compare.
            group.bench_function("holdoff", |b| {
                b.iter(|| RetryAfter::parse(black_box(bytes), black_box(now)));
            });
        }
        group.bench_function("headers", |b| {
            b.iter(|| headers::RetryAfter::decode(&mut iter::once(black_box(&header))));
        });
        group.finish();
    }
}

fn format(c: &mut Criterion) {
    let date = HttpDate::parse(b"Sun, 06 Nov 1994 08:49:37 GMT", now()).expect("valid");
    let time = date.to_system_time().expect("representable");
    let mut group = c.benchmark_group("format-imf-fixdate");
    group
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(2));
    // Both libraries write into a reused `String`; `httpdate` also as its own API does,
    // returning a new `String` per call.
    let mut out = String::with_capacity(29);
    group.bench_function("holdoff", |b| {
        b.iter(|| {
            out.clear();
            write!(out, "{}", black_box(date)).expect("a String never fails");
            black_box(out.len())
        });
    });
    let mut out = String::with_capacity(29);
    group.bench_function("httpdate", |b| {
        b.iter(|| {
            out.clear();
            write!(out, "{}", httpdate::HttpDate::from(black_box(time)))
                .expect("a String never fails");
            black_box(out.len())
        });
    });
    group.bench_function("httpdate-fmt-http-date", |b| {
        b.iter(|| httpdate::fmt_http_date(black_box(time)));
    });
    group.finish();
}

criterion_group!(benches, parse, format);
criterion_main!(benches);
