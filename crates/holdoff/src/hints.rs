//! Vendor hints besides `Retry-After`: each is a lower bound exactly like it.
//!
//! | header | form | read when |
//! | --- | --- | --- |
//! | `retry-after-ms`, `x-ms-retry-after-ms` | milliseconds | present |
//! | `RateLimit` (IETF structured field) | `t` parameter, seconds | that item's `r` is 0 or absent |
//! | `RateLimit-Reset` (older drafts) | seconds | `RateLimit-Remaining` is 0 or absent |
//! | `X-RateLimit-Reset` (GitHub and others) | Unix epoch seconds | `X-RateLimit-Remaining` is 0 |
//! | `x-ratelimit-reset-requests` / `-tokens` (OpenAI) | `1s`, `6m0s`, `20ms` | the matching `x-ratelimit-remaining-*` is 0 or absent |
//!
//! `Retry-After` and its millisecond spellings decide when any of them is usable; the
//! reset-style fields (`RateLimit`, `RateLimit-Reset`, `X-RateLimit-Reset`, OpenAI's) only
//! when none is, as the IETF RateLimit draft (draft-ietf-httpapi-ratelimit-headers) says.
//! Within the deciding group, a client takes the longest wait ([`Precedence::RetryAfter`]);
//! [`Precedence::Longest`] makes every header compete. A malformed vendor value is reported
//! and ignored, never read as zero.

use std::fmt;
use std::time::Duration;

use http::HeaderMap;

use crate::response::Stamp;

/// Every header a hint can come from (`Retry-After` and the vendor hints), lowercase. A
/// response with none of them carries no hint, whatever the policy: callers on a hot path
/// (the proxy's judge) check this before deciding anything.
pub const HINT_HEADERS: [&str; 8] = [
    "retry-after",
    "retry-after-ms",
    "x-ms-retry-after-ms",
    "ratelimit",
    "ratelimit-reset",
    "x-ratelimit-reset",
    "x-ratelimit-reset-requests",
    "x-ratelimit-reset-tokens",
];

/// Which vendor hints a policy reads. All are on by default.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct VendorHints {
    /// `retry-after-ms` (milliseconds).
    pub retry_after_ms: bool,
    /// `x-ms-retry-after-ms` (milliseconds, Microsoft / Azure).
    pub x_ms_retry_after_ms: bool,
    /// The IETF `RateLimit` structured field (`"default";r=0;t=10`).
    pub ratelimit: bool,
    /// The older draft's `RateLimit-Reset` (seconds).
    pub ratelimit_reset: bool,
    /// `X-RateLimit-Reset` (Unix epoch seconds) with `X-RateLimit-Remaining: 0`.
    pub x_ratelimit_reset: bool,
    /// OpenAI's `x-ratelimit-reset-requests` and `x-ratelimit-reset-tokens`.
    pub openai: bool,
}

impl VendorHints {
    /// Every vendor hint.
    pub const ALL: VendorHints = VendorHints {
        retry_after_ms: true,
        x_ms_retry_after_ms: true,
        ratelimit: true,
        ratelimit_reset: true,
        x_ratelimit_reset: true,
        openai: true,
    };
    /// `Retry-After` only.
    pub const NONE: VendorHints = VendorHints {
        retry_after_ms: false,
        x_ms_retry_after_ms: false,
        ratelimit: false,
        ratelimit_reset: false,
        x_ratelimit_reset: false,
        openai: false,
    };
}

impl Default for VendorHints {
    fn default() -> VendorHints {
        VendorHints::ALL
    }
}

/// Which hints decide when a response carries several.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Precedence {
    /// `Retry-After` (and `retry-after-ms`, `x-ms-retry-after-ms`) decide when any is usable;
    /// the reset-style fields only when none is, as the IETF RateLimit draft says
    /// (`Retry-After` MUST take precedence over the reset value). The default.
    #[default]
    RetryAfter,
    /// The longest wait of every header wins: for a client that would rather wait too long.
    Longest,
}

/// Which header a hint came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum HintSource {
    /// `Retry-After`.
    RetryAfter,
    /// `retry-after-ms`.
    RetryAfterMs,
    /// `x-ms-retry-after-ms`.
    XMsRetryAfterMs,
    /// `RateLimit`.
    RateLimit,
    /// `RateLimit-Reset`.
    RateLimitReset,
    /// `X-RateLimit-Reset`.
    XRateLimitReset,
    /// `x-ratelimit-reset-requests`.
    OpenAiResetRequests,
    /// `x-ratelimit-reset-tokens`.
    OpenAiResetTokens,
}

impl HintSource {
    /// The header's name, lowercase.
    pub fn header_name(self) -> &'static str {
        match self {
            HintSource::RetryAfter => "retry-after",
            HintSource::RetryAfterMs => "retry-after-ms",
            HintSource::XMsRetryAfterMs => "x-ms-retry-after-ms",
            HintSource::RateLimit => "ratelimit",
            HintSource::RateLimitReset => "ratelimit-reset",
            HintSource::XRateLimitReset => "x-ratelimit-reset",
            HintSource::OpenAiResetRequests => "x-ratelimit-reset-requests",
            HintSource::OpenAiResetTokens => "x-ratelimit-reset-tokens",
        }
    }
}

impl fmt::Display for HintSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.header_name())
    }
}

/// The waits one group of headers asks for: the longest (a client's strict reading) and the
/// shortest earliest reading (a judge's lenient one), each with its header.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Span {
    /// The longest wait, strictly read.
    pub(crate) longest: Option<(Duration, HintSource)>,
    /// The shortest wait, read as leniently as the header allows.
    pub(crate) shortest: Option<(Duration, HintSource)>,
}

impl Span {
    /// Adds a wait, `strict` as a client reads it, `lenient` as a judge does.
    pub(crate) fn offer(&mut self, source: HintSource, strict: Duration, lenient: Duration) {
        if self.longest.is_none_or(|(best, _)| strict > best) {
            self.longest = Some((strict, source));
        }
        if self.shortest.is_none_or(|(best, _)| lenient < best) {
            self.shortest = Some((lenient, source));
        }
    }

    /// Both ends of `self` and `other`.
    pub(crate) fn union(self, other: Span) -> Span {
        let mut out = self;
        if let (Some(l), Some(s)) = (other.longest, other.shortest) {
            if out.longest.is_none_or(|(best, _)| l.0 > best) {
                out.longest = Some(l);
            }
            if out.shortest.is_none_or(|(best, _)| s.0 < best) {
                out.shortest = Some(s);
            }
        }
        out
    }
}

/// What the vendor headers of one response say, in the two groups the IETF RateLimit draft
/// tells apart: `Retry-After`'s own millisecond spellings, which decide with it, and the
/// reset-style fields, which decide only when no `Retry-After` is usable.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct VendorReading {
    /// `retry-after-ms` and `x-ms-retry-after-ms`.
    pub(crate) milliseconds: Span,
    /// `RateLimit`, `RateLimit-Reset`, `X-RateLimit-Reset`, OpenAI's resets.
    pub(crate) resets: Span,
    /// The first malformed vendor value met, ignored.
    pub(crate) malformed: Option<HintSource>,
}

/// One second: the resolution of an epoch-seconds reset measured against a `Date`.
const WHOLE_SECOND: Duration = Duration::from_secs(1);

impl VendorReading {
    /// Offers an exact wait (no clock of whole seconds involved) to `group`, or notes a
    /// malformed value.
    fn offer(
        &mut self,
        group: fn(&mut VendorReading) -> &mut Span,
        source: HintSource,
        value: Option<Duration>,
    ) {
        match value {
            None => {
                self.malformed.get_or_insert(source);
            }
            Some(wait) => group(self).offer(source, wait, wait),
        }
    }
}

fn milliseconds(reading: &mut VendorReading) -> &mut Span {
    &mut reading.milliseconds
}

fn resets(reading: &mut VendorReading) -> &mut Span {
    &mut reading.resets
}

/// Reads the enabled vendor hints. `reference` is the clock an epoch-seconds reset is
/// measured against: the server's `Date + Age`, else the local wall clock.
pub(crate) fn read(headers: &HeaderMap, enabled: VendorHints, reference: Stamp) -> VendorReading {
    let mut reading = VendorReading::default();
    let get = |name: &str| headers.get(name).map(|v| v.as_bytes().trim_ascii());
    if enabled.retry_after_ms {
        if let Some(raw) = get("retry-after-ms") {
            reading.offer(
                milliseconds,
                HintSource::RetryAfterMs,
                digits(raw).map(Duration::from_millis),
            );
        }
    }
    if enabled.x_ms_retry_after_ms {
        if let Some(raw) = get("x-ms-retry-after-ms") {
            reading.offer(
                milliseconds,
                HintSource::XMsRetryAfterMs,
                digits(raw).map(Duration::from_millis),
            );
        }
    }
    if enabled.ratelimit {
        if let Some(raw) = get("ratelimit") {
            match ietf_ratelimit(raw) {
                Ok(Some(wait)) => reading.offer(resets, HintSource::RateLimit, Some(wait)),
                Ok(None) => {}
                Err(()) => reading.offer(resets, HintSource::RateLimit, None),
            }
        }
    }
    if enabled.ratelimit_reset {
        if let Some(raw) = get("ratelimit-reset") {
            if exhausted(get("ratelimit-remaining"), true) {
                reading.offer(
                    resets,
                    HintSource::RateLimitReset,
                    digits(raw).map(Duration::from_secs),
                );
            }
        }
    }
    if enabled.x_ratelimit_reset {
        if let Some(raw) = get("x-ratelimit-reset") {
            if exhausted(get("x-ratelimit-remaining"), false) {
                match digits(raw) {
                    None => reading.offer(resets, HintSource::XRateLimitReset, None),
                    Some(epoch) => {
                        let epoch = i64::try_from(epoch).unwrap_or(i64::MAX);
                        let wait = Stamp::whole(epoch).after(reference).0;
                        // The reference is a clock of whole seconds (`Date`) or the reset
                        // is: the earliest reading is a second sooner.
                        reading.resets.offer(
                            HintSource::XRateLimitReset,
                            wait,
                            wait.saturating_sub(WHOLE_SECOND),
                        );
                    }
                }
            }
        }
    }
    if enabled.openai {
        for (reset, remaining, source) in [
            (
                "x-ratelimit-reset-requests",
                "x-ratelimit-remaining-requests",
                HintSource::OpenAiResetRequests,
            ),
            (
                "x-ratelimit-reset-tokens",
                "x-ratelimit-remaining-tokens",
                HintSource::OpenAiResetTokens,
            ),
        ] {
            if let Some(raw) = get(reset) {
                if exhausted(get(remaining), true) {
                    reading.offer(resets, source, go_duration(raw));
                }
            }
        }
    }
    reading
}

/// Whether a 403 is GitHub's (and others') rate-limit answer: `X-RateLimit-Remaining: 0`.
pub(crate) fn rate_limited(headers: &HeaderMap) -> bool {
    let remaining = headers
        .get("x-ratelimit-remaining")
        .map(|v| v.as_bytes().trim_ascii());
    exhausted(remaining, false)
}

/// A "remaining" counter is exhausted when it reads 0 (or, where the reset alone is meant as
/// a hint, when it is absent).
fn exhausted(remaining: Option<&[u8]>, absent_means_exhausted: bool) -> bool {
    match remaining {
        None => absent_means_exhausted,
        Some(raw) => digits(raw) == Some(0),
    }
}

/// `1*DIGIT`, saturating.
fn digits(raw: &[u8]) -> Option<u64> {
    if raw.is_empty() || !raw.iter().all(u8::is_ascii_digit) {
        return None;
    }
    Some(raw.iter().fold(0u64, |acc, &c| {
        acc.saturating_mul(10).saturating_add(u64::from(c - b'0'))
    }))
}

/// The IETF `RateLimit` field: a list of items, each with `r` (remaining) and `t` (seconds
/// until reset) parameters. The longest `t` among exhausted items; `Err` when malformed.
fn ietf_ratelimit(raw: &[u8]) -> Result<Option<Duration>, ()> {
    let list: sfv::List = sfv::Parser::new(raw).parse().map_err(|_| ())?;
    let mut longest = None;
    for entry in &list {
        let sfv::ListEntry::Item(item) = entry else {
            return Err(());
        };
        let param = |key: &str| {
            item.params
                .iter()
                .find(|(k, _)| k.as_str() == key)
                .map(|(_, v)| v.as_integer().map(i64::from))
        };
        let remaining = match param("r") {
            None => None,
            Some(Some(r)) if r >= 0 => Some(r),
            Some(_) => return Err(()),
        };
        let reset = match param("t") {
            None => continue,
            Some(Some(t)) if t >= 0 => Duration::from_secs(t.unsigned_abs()),
            Some(_) => return Err(()),
        };
        if remaining.unwrap_or(0) == 0 && longest.is_none_or(|l| reset > l) {
            longest = Some(reset);
        }
    }
    Ok(longest)
}

/// A Go-style duration as OpenAI sends it: `1s`, `6m0s`, `20ms`, `1h2m3.5s`. Each number may
/// have a fraction; units are `h`, `m`, `s`, `ms`, `us`/`µs`, `ns`. `None` when malformed.
fn go_duration(raw: &[u8]) -> Option<Duration> {
    let mut rest = raw;
    let mut total = Duration::ZERO;
    if rest.is_empty() {
        return None;
    }
    while !rest.is_empty() {
        let int_len = rest.iter().take_while(|c| c.is_ascii_digit()).count();
        let (int, after) = rest.split_at(int_len);
        let (frac, after) = match after.split_first() {
            Some((b'.', tail)) => {
                let len = tail.iter().take_while(|c| c.is_ascii_digit()).count();
                tail.split_at(len)
            }
            _ => (&[][..], after),
        };
        if int.is_empty() && frac.is_empty() {
            return None;
        }
        let unit_len = after
            .iter()
            .take_while(|c| !c.is_ascii_digit() && **c != b'.')
            .count();
        let (unit, after) = after.split_at(unit_len);
        let nanos_per_unit: u64 = match unit {
            b"h" => 3_600_000_000_000,
            b"m" => 60_000_000_000,
            b"s" => 1_000_000_000,
            b"ms" => 1_000_000,
            b"us" | b"\xc2\xb5s" => 1_000, // "µs"
            b"ns" => 1,
            _ => return None,
        };
        let whole = digits(int).unwrap_or(0);
        let mut nanos = u128::from(whole) * u128::from(nanos_per_unit);
        let mut scale = u128::from(nanos_per_unit);
        for &d in frac.iter().take(18) {
            scale /= 10;
            nanos += u128::from(d - b'0') * scale;
        }
        total = total.saturating_add(duration_from_u128_nanos(nanos));
        rest = after;
    }
    Some(total)
}

fn duration_from_u128_nanos(nanos: u128) -> Duration {
    let secs = u64::try_from(nanos / 1_000_000_000).unwrap_or(u64::MAX);
    Duration::new(secs, (nanos % 1_000_000_000) as u32)
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(*name, HeaderValue::from_static(value));
        }
        map
    }

    fn longest(pairs: &[(&'static str, &'static str)]) -> Option<(Duration, HintSource)> {
        let reading = read(&headers(pairs), VendorHints::ALL, Stamp::whole(1_000));
        reading.milliseconds.union(reading.resets).longest
    }

    mod go_duration {
        use super::*;

        #[test]
        fn reads_what_openai_sends() {
            assert_eq!(go_duration(b"1s"), Some(Duration::from_secs(1)));
            assert_eq!(go_duration(b"6m0s"), Some(Duration::from_secs(360)));
            assert_eq!(go_duration(b"20ms"), Some(Duration::from_millis(20)));
            assert_eq!(
                go_duration(b"1h2m3.5s"),
                Some(Duration::from_millis(3_723_500))
            );
            assert_eq!(go_duration(b"0.25s"), Some(Duration::from_millis(250)));
            assert_eq!(
                go_duration("3µs".as_bytes()),
                Some(Duration::from_micros(3))
            );
        }

        #[test]
        fn rejects_what_it_cannot_read() {
            for bad in [&b""[..], b"5", b"s", b"1x", b"-1s", b"1.s.", b".s", b"1 s"] {
                assert_eq!(go_duration(bad), None, "{}", bad.escape_ascii());
            }
        }
    }

    mod hint_headers {
        use super::*;

        #[test]
        fn names_every_source() {
            for source in [
                HintSource::RetryAfter,
                HintSource::RetryAfterMs,
                HintSource::XMsRetryAfterMs,
                HintSource::RateLimit,
                HintSource::RateLimitReset,
                HintSource::XRateLimitReset,
                HintSource::OpenAiResetRequests,
                HintSource::OpenAiResetTokens,
            ] {
                assert!(HINT_HEADERS.contains(&source.header_name()), "{source}");
            }
        }
    }

    mod read {
        use super::*;

        #[test]
        fn reads_milliseconds() {
            assert_eq!(
                longest(&[("retry-after-ms", "1500")]),
                Some((Duration::from_millis(1500), HintSource::RetryAfterMs))
            );
            assert_eq!(
                longest(&[("x-ms-retry-after-ms", "20")]),
                Some((Duration::from_millis(20), HintSource::XMsRetryAfterMs))
            );
        }

        #[test]
        fn the_longest_of_all_groups_is_the_union_of_their_longest() {
            assert_eq!(
                longest(&[
                    ("retry-after-ms", "1500"),
                    ("x-ratelimit-reset-requests", "6m0s"),
                    ("x-ratelimit-reset-tokens", "20ms"),
                ]),
                Some((Duration::from_secs(360), HintSource::OpenAiResetRequests))
            );
        }

        #[test]
        fn reads_the_ietf_field_only_when_exhausted() {
            assert_eq!(
                longest(&[("ratelimit", "\"default\";r=0;t=10")]),
                Some((Duration::from_secs(10), HintSource::RateLimit))
            );
            assert_eq!(longest(&[("ratelimit", "\"default\";r=5;t=10")]), None);
            assert_eq!(
                longest(&[("ratelimit", "\"a\";r=0;t=10, \"b\";r=0;t=30")]),
                Some((Duration::from_secs(30), HintSource::RateLimit))
            );
        }

        #[test]
        fn reads_the_older_reset_unless_requests_remain() {
            assert_eq!(
                longest(&[("ratelimit-reset", "7")]),
                Some((Duration::from_secs(7), HintSource::RateLimitReset))
            );
            assert_eq!(
                longest(&[("ratelimit-reset", "7"), ("ratelimit-remaining", "3")]),
                None
            );
        }

        #[test]
        fn reads_github_epoch_resets_against_the_reference() {
            // Reference is epoch second 1000.
            assert_eq!(
                longest(&[
                    ("x-ratelimit-reset", "1060"),
                    ("x-ratelimit-remaining", "0")
                ]),
                Some((Duration::from_secs(60), HintSource::XRateLimitReset))
            );
            // GitHub sends the reset on every response: only an exhausted one is a hint.
            assert_eq!(
                longest(&[
                    ("x-ratelimit-reset", "1060"),
                    ("x-ratelimit-remaining", "10")
                ]),
                None
            );
            assert_eq!(longest(&[("x-ratelimit-reset", "1060")]), None);
            // A reset in the past clamps to zero.
            assert_eq!(
                longest(&[("x-ratelimit-reset", "900"), ("x-ratelimit-remaining", "0")]),
                Some((Duration::ZERO, HintSource::XRateLimitReset))
            );
        }

        #[test]
        fn malformed_values_are_reported_and_ignored() {
            let reading = read(
                &headers(&[("retry-after-ms", "1.5e3"), ("x-ms-retry-after-ms", "200")]),
                VendorHints::ALL,
                Stamp::whole(0),
            );
            assert_eq!(reading.malformed, Some(HintSource::RetryAfterMs));
            assert_eq!(
                reading.milliseconds.longest,
                Some((Duration::from_millis(200), HintSource::XMsRetryAfterMs))
            );
            let reading = read(
                &headers(&[("ratelimit", "r=0;t=")]),
                VendorHints::ALL,
                Stamp::whole(0),
            );
            assert_eq!(reading.malformed, Some(HintSource::RateLimit));
            assert_eq!(reading.resets, Span::default());
        }

        #[test]
        fn groups_retry_after_spellings_apart_from_resets() {
            let reading = read(
                &headers(&[("retry-after-ms", "1500"), ("ratelimit-reset", "100")]),
                VendorHints::ALL,
                Stamp::whole(0),
            );
            let ms = Some((Duration::from_millis(1500), HintSource::RetryAfterMs));
            assert_eq!(
                (reading.milliseconds.longest, reading.milliseconds.shortest),
                (ms, ms)
            );
            let reset = Some((Duration::from_secs(100), HintSource::RateLimitReset));
            assert_eq!(reading.resets.longest, reset);
        }

        #[test]
        fn an_epoch_reset_against_whole_seconds_is_read_a_second_sooner_when_lenient() {
            let reading = read(
                &headers(&[
                    ("x-ratelimit-reset", "1060"),
                    ("x-ratelimit-remaining", "0"),
                ]),
                VendorHints::ALL,
                Stamp::whole(1_000),
            );
            assert_eq!(
                reading.resets.shortest,
                Some((Duration::from_secs(59), HintSource::XRateLimitReset))
            );
            assert_eq!(
                reading.resets.longest,
                Some((Duration::from_secs(60), HintSource::XRateLimitReset))
            );
        }

        #[test]
        fn the_shortest_and_longest_of_a_group_are_kept_apart() {
            let reading = read(
                &headers(&[
                    ("x-ratelimit-reset-requests", "6m0s"),
                    ("x-ratelimit-reset-tokens", "20ms"),
                ]),
                VendorHints::ALL,
                Stamp::whole(0),
            );
            assert_eq!(
                reading.resets.longest,
                Some((Duration::from_secs(360), HintSource::OpenAiResetRequests))
            );
            assert_eq!(
                reading.resets.shortest,
                Some((Duration::from_millis(20), HintSource::OpenAiResetTokens))
            );
        }

        #[test]
        fn disabled_hints_are_not_read() {
            let reading = read(
                &headers(&[("retry-after-ms", "1500")]),
                VendorHints::NONE,
                Stamp::whole(0),
            );
            assert_eq!(reading, VendorReading::default());
        }
    }
}
