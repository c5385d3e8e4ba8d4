//! Proves the hot paths allocate nothing: parsing valid `Retry-After` values and HTTP-dates,
//! formatting a date into a buffer that is already big enough, and the retry decision.
//!
//! The counting global allocator (`holdoff_testkit::heap`) keeps one counter per thread, so
//! the test harness's other threads (and parallel tests) never show up in a measurement.

use std::fmt::Write as _;
use std::hint::black_box;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use holdoff::clock::SystemClock;
use holdoff::{
    Attempt, DeferReason, HttpDate, JitterDraw, ParseErrorKind, Policy, Receipt, ResponseInfo,
    RetryAfter,
};
use holdoff_testkit::heap::{Counting, count};
use http::{Method, StatusCode};

#[global_allocator]
static GLOBAL: Counting = Counting;

/// 2026-11-30T00:00:00Z: resolves the rfc850 example's `94` to 1994.
fn now() -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(1_795_996_800)
}

const IMF: &[u8] = b"Sun, 06 Nov 1994 08:49:37 GMT";
const RFC850: &[u8] = b"Sunday, 06-Nov-94 08:49:37 GMT";
const ASCTIME: &[u8] = b"Sun Nov  6 08:49:37 1994";

mod counter {
    use super::*;

    #[test]
    fn sees_an_allocation_on_this_thread() {
        // Guards the tests below against a counter that silently counts nothing.
        let (v, n) = count(|| black_box(vec![1u8; 16]));
        assert_eq!(v.len(), 16);
        assert_eq!(n, 1);
    }
}

mod parse {
    use super::*;

    #[test]
    fn retry_after_allocates_nothing_for_any_valid_form() {
        for input in [
            &b"120"[..],
            b"0",
            b" \t120\t ",
            b"18446744073709551615",
            b"99999999999999999999999999", // saturates upward
            IMF,
            RFC850,
            ASCTIME,
            b"  Sun Nov  6 08:49:37 1994\t",
            b"Fri, 31 Dec 9999 23:59:59 GMT",
        ] {
            let (parsed, n) = count(|| RetryAfter::parse(black_box(input), now()));
            assert!(parsed.is_ok(), "{}: {parsed:?}", input.escape_ascii());
            assert_eq!(n, 0, "{} allocated", input.escape_ascii());
        }
    }

    #[test]
    fn http_date_allocates_nothing_for_any_format() {
        for (input, unix) in [
            (IMF, 784_111_777),
            (RFC850, 784_111_777),
            (ASCTIME, 784_111_777),
            (b"Thu Jan 15 10:00:00 2026", 1_768_471_200),
        ] {
            let (parsed, n) = count(|| HttpDate::parse(black_box(input), now()));
            assert_eq!(parsed.map(|d| d.unix_seconds()).ok(), Some(unix));
            assert_eq!(n, 0, "{} allocated", input.escape_ascii());
        }
    }

    #[test]
    fn from_str_allocates_nothing_for_valid_input() {
        let (parsed, n) =
            count(|| black_box("Sun, 06 Nov 1994 08:49:37 GMT").parse::<RetryAfter>());
        assert!(parsed.is_ok());
        assert_eq!(n, 0);
    }

    #[test]
    fn a_malformed_value_allocates_only_the_copy_of_its_raw_bytes() {
        // Errors carry the raw bytes (a `Box<[u8]>`): a malformed value costs that copy.
        for (input, kind, copies) in [
            (&b"1.5"[..], ParseErrorKind::BadDelay, 1..=1),
            (b"120, 120", ParseErrorKind::List, 1..=1),
            (b" ", ParseErrorKind::Empty, 1..=1),
            // A date error is built twice: once by `HttpDate::parse` (dropped at once), then
            // again with the untrimmed value by `RetryAfter::parse`.
            (
                b"Mon, 06 Nov 1994 08:49:37 GMT",
                ParseErrorKind::WrongWeekday,
                1..=2,
            ),
            (b"soon", ParseErrorKind::NeitherDelayNorDate, 1..=2),
        ] {
            let (err, n) = count(|| RetryAfter::parse(black_box(input), now()).err());
            let err = err.expect("malformed");
            assert_eq!(err.kind(), kind);
            assert_eq!(err.raw(), input);
            assert!(
                n >= 1,
                "{} did not copy its raw bytes",
                input.escape_ascii()
            );
            assert!(
                copies.contains(&n),
                "{}: {n} allocations",
                input.escape_ascii()
            );
        }
        let (err, n) =
            count(|| HttpDate::parse(black_box(b"Sun, 06 Nov 1994 25:00:00 GMT"), now()).err());
        assert_eq!(err.map(|e| e.kind()), Some(ParseErrorKind::NoSuchDate));
        assert_eq!(n, 1);
    }
}

mod format {
    use super::*;

    #[test]
    fn a_date_writes_into_a_reserved_string_without_allocating() {
        let date = HttpDate::parse(RFC850, now()).expect("valid");
        let mut out = String::new();
        out.reserve(29);
        let (result, n) = count(|| write!(out, "{}", black_box(date)));
        assert!(result.is_ok());
        assert_eq!(out, "Sun, 06 Nov 1994 08:49:37 GMT");
        assert_eq!(n, 0);
    }

    #[test]
    fn a_retry_after_writes_into_a_reserved_string_without_allocating() {
        let mut out = String::with_capacity(29);
        for value in [
            RetryAfter::Delay(Duration::MAX),
            RetryAfter::Date(HttpDate::from_unix_seconds(HttpDate::MAX_UNIX).expect("in range")),
        ] {
            out.clear();
            let (result, n) = count(|| write!(out, "{}", black_box(value)));
            assert!(result.is_ok());
            assert_eq!(n, 0, "{out}");
        }
    }
}

mod decide {
    use super::*;

    fn receipt() -> Receipt {
        Receipt {
            instant: SystemClock.now(),
            wall: now(),
        }
    }

    fn attempt(remaining: Option<Duration>) -> Attempt<'static> {
        Attempt::new(&Method::GET, 1)
            .with_backoff(Duration::from_secs(8))
            .with_jitter(JitterDraw::Unit(0.5))
            .with_remaining(remaining)
    }

    fn assert_no_allocation(policy: &Policy, response: &ResponseInfo<'_>, attempt: &Attempt<'_>) {
        let (verdict, n) = count(|| policy.decide(black_box(response), black_box(attempt)));
        assert_eq!(n, 0, "{verdict:?}");
    }

    #[test]
    fn a_delay_hint_retry_allocates_nothing() {
        // `Policy::default()` holds an `Arc`: build it before counting.
        let policy = Policy::default();
        let response =
            ResponseInfo::new(StatusCode::SERVICE_UNAVAILABLE, receipt()).with_retry_after(b"30");
        let attempt = attempt(None);
        let (verdict, n) = count(|| policy.decide(black_box(&response), black_box(&attempt)));
        assert_eq!(verdict.decision.action(), "retry");
        assert_eq!(n, 0);
    }

    #[test]
    fn the_canonical_defer_allocates_nothing() {
        let policy = Policy::default();
        let response =
            ResponseInfo::new(StatusCode::SERVICE_UNAVAILABLE, receipt()).with_retry_after(b"30");
        let attempt = attempt(Some(Duration::from_secs(12)));
        let (verdict, n) = count(|| policy.decide(black_box(&response), black_box(&attempt)));
        assert_eq!(
            verdict.decision,
            holdoff::Decision::Defer(DeferReason::DeadlineExceeded)
        );
        assert_eq!(n, 0);
    }

    #[test]
    fn a_date_hint_against_the_date_header_allocates_nothing() {
        let policy = Policy::default();
        let response = ResponseInfo::new(StatusCode::TOO_MANY_REQUESTS, receipt())
            .with_retry_after(b"Sun, 06 Nov 1994 08:50:37 GMT")
            .with_date(RFC850)
            .with_age(b"10");
        let attempt = attempt(None);
        let (verdict, n) = count(|| policy.decide(black_box(&response), black_box(&attempt)));
        assert_eq!(
            verdict.permitted.expect("a hint").after,
            Duration::from_secs(50)
        );
        assert_eq!(verdict.decision.action(), "retry");
        assert_eq!(n, 0);
    }

    #[test]
    fn the_other_outcomes_allocate_nothing() {
        let policy = Policy::default();
        let r = receipt();
        let get = attempt(None);
        let post = Attempt::new(&Method::POST, 1)
            .with_backoff(get.backoff)
            .with_jitter(get.jitter);
        let last = Attempt::new(&Method::GET, 5)
            .with_backoff(get.backoff)
            .with_jitter(get.jitter);
        let far = ResponseInfo::new(StatusCode::SERVICE_UNAVAILABLE, r)
            .with_retry_after(b"18446744073709551615");
        assert_no_allocation(&policy, &ResponseInfo::new(StatusCode::OK, r), &get);
        assert_no_allocation(
            &policy,
            &ResponseInfo::new(StatusCode::SERVICE_UNAVAILABLE, r),
            &get,
        );
        assert_no_allocation(&policy, &ResponseInfo::new(StatusCode::FORBIDDEN, r), &get);
        assert_no_allocation(
            &policy,
            &ResponseInfo::new(StatusCode::SERVICE_UNAVAILABLE, r),
            &post,
        );
        assert_no_allocation(
            &policy,
            &ResponseInfo::new(StatusCode::SERVICE_UNAVAILABLE, r),
            &last,
        );
        assert_no_allocation(&policy, &far, &get);
        assert_no_allocation(
            &policy,
            &ResponseInfo::new(StatusCode::MOVED_PERMANENTLY, r)
                .with_location(true)
                .with_retry_after(b"5"),
            &get,
        );
        // A 429 whose body is not a quota error: the classifier's cheap scan finds nothing.
        assert_no_allocation(
            &policy,
            &ResponseInfo::new(StatusCode::TOO_MANY_REQUESTS, r)
                .with_body(br#"{"error":{"code":"rate_limit_exceeded"}}"#),
            &get,
        );
    }

    /// The decision learns why a hint or a `Date` is malformed without building a
    /// `ParseError` (whose raw-bytes copy would allocate).
    #[test]
    fn a_malformed_hint_or_date_allocates_nothing() {
        let policy = Policy::default();
        let r = receipt();
        let get = attempt(None);
        assert_no_allocation(
            &policy,
            &ResponseInfo::new(StatusCode::SERVICE_UNAVAILABLE, r).with_retry_after(b"1.5"),
            &get,
        );
        assert_no_allocation(
            &policy,
            &ResponseInfo::new(StatusCode::SERVICE_UNAVAILABLE, r)
                .with_retry_after(b"5")
                .with_date(b"yesterday"),
            &get,
        );
    }
}

#[cfg(feature = "retry")]
mod gate {
    use super::*;
    use holdoff::clock::{Clock, ManualClock};
    use holdoff::gate::Gate;
    use std::future::Future;
    use std::pin::pin;
    use std::task::{Context, Poll, Waker};

    fn ready<F: Future>(future: F) -> F::Output {
        let mut future = pin!(future);
        match future
            .as_mut()
            .poll(&mut Context::from_waker(Waker::noop()))
        {
            Poll::Ready(output) => output,
            Poll::Pending => panic!("the in-memory gate answers at once"),
        }
    }

    #[test]
    fn a_check_allocates_nothing_open_or_closed() {
        let clock = ManualClock::new(UNIX_EPOCH);
        let gate = Gate::in_memory();
        ready(gate.raise(
            "https://closed.example:443",
            clock.now() + Duration::from_secs(5),
            clock.wall_now(),
        ))
        .expect("in memory");
        for key in ["https://open.example:443", "https://closed.example:443"] {
            let (admit, allocations) = count(|| ready(gate.admit_at(black_box(key), &clock)));
            assert!(admit.is_ok());
            assert_eq!(allocations, 0, "{key}");
        }
    }
}
