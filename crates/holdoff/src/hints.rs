//! Vendor hints besides `Retry-After`: each is a lower bound exactly like it.
//!
//! | header | form | read when |
//! | --- | --- | --- |
//! | `retry-after-ms`, `x-ms-retry-after-ms`, `x-amz-retry-after` (AWS) | milliseconds | present |
//! | `RateLimit` (IETF structured field, draft-11) | `t` parameter, seconds | that item's `r` is 0 |
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
//!
//! The IETF fields follow draft-ietf-httpapi-ratelimit-headers-11: the `t` of an exhausted
//! (`r=0`) item of `RateLimit` is the hint (the longest, if several are); a field that is not
//! a valid Structured Fields List, or whose items break the draft's rules, is malformed;
//! parameters the draft does not define are ignored. `RateLimit-Policy` gives no wait: it is
//! informative, and its window `w` is no lower bound. `RateLimit` is read only with the
//! `ratelimit-fields` cargo feature (on by default), which brings in the Structured Field
//! parser.

use std::fmt;
use std::time::Duration;

use http::HeaderMap;

use crate::date::Stamp;

/// Every header a hint can come from (`Retry-After` and the vendor hints), lowercase. A
/// response with none of them carries no hint, whatever the policy: callers on a hot path
/// (the proxy's judge) check this before deciding anything.
pub const HINT_HEADERS: &[&str] = &[
    "retry-after",
    "retry-after-ms",
    "x-ms-retry-after-ms",
    "x-amz-retry-after",
    "ratelimit",
    "ratelimit-reset",
    "x-ratelimit-reset",
    "x-ratelimit-reset-requests",
    "x-ratelimit-reset-tokens",
];

/// Which vendor hints a policy reads. All are on by default.
///
/// Without the `ratelimit-fields` cargo feature, the IETF `RateLimit` structured field is
/// never read, whatever [`ratelimit`](VendorHints::ratelimit) says (the older
/// `RateLimit-Reset` still is).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct VendorHints {
    /// `retry-after-ms` (milliseconds).
    pub retry_after_ms: bool,
    /// `x-ms-retry-after-ms` (milliseconds, Microsoft / Azure).
    pub x_ms_retry_after_ms: bool,
    /// `x-amz-retry-after` (milliseconds, AWS), which AWS SDKs' retry behaviour honours.
    pub x_amz_retry_after: bool,
    /// The IETF `RateLimit` structured field (`"default";r=0;t=10`), as of
    /// draft-ietf-httpapi-ratelimit-headers-11. Needs the `ratelimit-fields` feature.
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
        x_amz_retry_after: true,
        ratelimit: true,
        ratelimit_reset: true,
        x_ratelimit_reset: true,
        openai: true,
    };
    /// `Retry-After` only.
    pub const NONE: VendorHints = VendorHints {
        retry_after_ms: false,
        x_ms_retry_after_ms: false,
        x_amz_retry_after: false,
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
    /// `x-amz-retry-after` (milliseconds).
    XAmzRetryAfter,
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
            HintSource::XAmzRetryAfter => "x-amz-retry-after",
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
    /// `retry-after-ms`, `x-ms-retry-after-ms` and `x-amz-retry-after`.
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
    if enabled.retry_after_ms
        && let Some(raw) = get("retry-after-ms")
    {
        reading.offer(
            milliseconds,
            HintSource::RetryAfterMs,
            digits(raw).map(Duration::from_millis),
        );
    }
    if enabled.x_ms_retry_after_ms
        && let Some(raw) = get("x-ms-retry-after-ms")
    {
        reading.offer(
            milliseconds,
            HintSource::XMsRetryAfterMs,
            digits(raw).map(Duration::from_millis),
        );
    }
    if enabled.x_amz_retry_after
        && let Some(raw) = get("x-amz-retry-after")
    {
        reading.offer(
            milliseconds,
            HintSource::XAmzRetryAfter,
            digits(raw).map(Duration::from_millis),
        );
    }
    #[cfg(feature = "ratelimit-fields")]
    if enabled.ratelimit {
        let mut lines = headers.get_all("ratelimit").iter();
        if let Some(first) = lines.next() {
            let parsed = match lines.next() {
                None => ietf_ratelimit(first.as_bytes()),
                // Split over several field lines: one list, joined as RFC 9651 §4.2 says.
                Some(second) => {
                    let mut joined = first.as_bytes().to_vec();
                    for line in std::iter::once(second).chain(lines) {
                        joined.extend_from_slice(b", ");
                        joined.extend_from_slice(line.as_bytes());
                    }
                    ietf_ratelimit(&joined)
                }
            };
            match parsed {
                Ok(Some(wait)) => reading.offer(resets, HintSource::RateLimit, Some(wait)),
                Ok(None) => {}
                Err(Malformed) => reading.offer(resets, HintSource::RateLimit, None),
            }
        }
    }
    if enabled.ratelimit_reset
        && let Some(raw) = get("ratelimit-reset")
        && exhausted(get("ratelimit-remaining"), true)
    {
        reading.offer(
            resets,
            HintSource::RateLimitReset,
            digits(raw).map(Duration::from_secs),
        );
    }
    if enabled.x_ratelimit_reset
        && let Some(raw) = get("x-ratelimit-reset")
        && exhausted(get("x-ratelimit-remaining"), false)
    {
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
            if let Some(raw) = get(reset)
                && exhausted(get(remaining), true)
            {
                reading.offer(resets, source, go_duration(raw));
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

/// A field that breaks its own grammar: ignored, and reported.
#[cfg(feature = "ratelimit-fields")]
#[derive(Debug, PartialEq, Eq)]
struct Malformed;

/// The wait the IETF `RateLimit` field asks for, as draft-ietf-httpapi-ratelimit-headers-11
/// defines it (section numbers are that draft's).
///
/// The field (§4) is a Structured Fields List (RFC 9651) of service limit Items. Each Item
/// names a quota policy (a String, §3; a Token is accepted too) and carries parameters:
///
/// - `r`, REQUIRED: the quota units remaining, a non-negative Integer (§4.1.1);
/// - `t`, optional: the seconds until more quota is made available, a non-negative Integer
///   (§4.1.2);
/// - `pk`, optional: the partition key, a Byte Sequence (§4.1.3).
///
/// Parameters the draft does not define are ignored (§4.1: they "can be regarded as
/// comments"; Structured Fields are extensible that way).
///
/// The hint is the `t` of an exhausted item (`r=0`); with several exhausted items, the
/// longest `t`, since no request fits before every exhausted policy has quota again. An item
/// with quota left is no hint. An exhausted item without `t` gives no wait: nothing in the
/// draft says when its quota returns.
///
/// `Err` when the value is not a valid List, or an Item breaks the draft's own rules (an
/// Inner List, a name that is not a String or Token, no `r`, an `r` or `t` that is not a
/// non-negative Integer, a `pk` that is not a Byte Sequence): §7 says a malformed field MUST be
/// ignored, and it is, as a whole, never read as zero.
///
/// `RateLimit-Policy` (§3, a List of quota policies with `q` quota, `qu` quota unit, `w`
/// window in seconds and `pk`) is not read. §7 calls its details informative, and none of its
/// parameters says when quota returns: `w` is the length of the policy's window, at most an
/// upper bound on the wait for an exhausted policy, never a lower one. A wait taken from it
/// would be invented; and a broken informative field must not turn a response into one with
/// a malformed hint.
///
/// `Retry-After` takes precedence over this field (§7) through the grouping in
/// [`VendorReading`]: this is a reset-style field.
#[cfg(feature = "ratelimit-fields")]
fn ietf_ratelimit(raw: &[u8]) -> Result<Option<Duration>, Malformed> {
    let list: sfv::List = sfv::Parser::new(raw).parse().map_err(|_| Malformed)?;
    let mut longest = None;
    for entry in &list {
        let sfv::ListEntry::Item(item) = entry else {
            return Err(Malformed);
        };
        if !matches!(
            item.bare_item,
            sfv::BareItem::String(_) | sfv::BareItem::Token(_)
        ) {
            return Err(Malformed);
        }
        let param = |key: &str| {
            item.params
                .iter()
                .find(|(k, _)| k.as_str() == key)
                .map(|(_, v)| v)
        };
        let count = |key: &str| match param(key) {
            None => Ok(None),
            Some(value) => match value.as_integer().map(i64::from) {
                Some(n) if n >= 0 => Ok(Some(n.unsigned_abs())),
                _ => Err(Malformed),
            },
        };
        let remaining = count("r")?.ok_or(Malformed)?;
        let reset = count("t")?;
        if param("pk").is_some_and(|pk| pk.as_byte_sequence().is_none()) {
            return Err(Malformed);
        }
        if let (0, Some(t)) = (remaining, reset) {
            let t = Duration::from_secs(t);
            if longest.is_none_or(|l| t > l) {
                longest = Some(t);
            }
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

    #[cfg(feature = "ratelimit-fields")]
    mod ietf_ratelimit {
        use super::*;

        fn wait(raw: &str) -> Result<Option<Duration>, Malformed> {
            ietf_ratelimit(raw.as_bytes())
        }

        fn secs(n: u64) -> Result<Option<Duration>, Malformed> {
            Ok(Some(Duration::from_secs(n)))
        }

        #[test]
        fn reads_the_drafts_own_examples() {
            // draft-11 §4.2: quota left is no hint, with or without a reset or a partition.
            assert_eq!(wait("\"default\";r=50;t=30"), Ok(None));
            assert_eq!(wait("\"default\";r=999;pk=:dHJpYWwxMjEzMjM=:"), Ok(None));
            // §6: a throttled redirect.
            assert_eq!(wait("\"problemPolicy\";r=0;t=10"), secs(10));
        }

        #[test]
        fn takes_the_longest_reset_among_exhausted_policies() {
            assert_eq!(
                wait("\"burst\";r=0;t=5, \"daily\";r=0;t=3600, \"hourly\";r=7;t=9000"),
                secs(3600)
            );
            assert_eq!(wait("\"burst\";r=3;t=5, \"daily\";r=0;t=20"), secs(20));
        }

        #[test]
        fn an_exhausted_policy_without_a_reset_gives_no_wait() {
            assert_eq!(wait("\"concurrency\";r=0"), Ok(None));
            assert_eq!(wait("\"concurrency\";r=0, \"minute\";r=0;t=12"), secs(12));
        }

        #[test]
        fn ignores_parameters_it_does_not_know() {
            assert_eq!(
                wait("\"default\";acme-burst=5;r=0;t=7;x=?1;note=\"hi\""),
                secs(7)
            );
            assert_eq!(wait("\"default\";r=0;t=7;pk=:QXBwLTk5OQ==:"), secs(7));
        }

        #[test]
        fn accepts_a_token_for_a_policy_name() {
            assert_eq!(wait("default;r=0;t=4"), secs(4));
        }

        #[test]
        fn a_field_that_breaks_its_grammar_is_malformed() {
            for bad in [
                "\"default\";r=0;t=",            // not a valid List
                "\"default\";r=0;t=10,",         // trailing comma
                "\"default\" r=0",               // junk after the item
                "(\"a\" \"b\");r=0;t=1",         // an Inner List
                "1;r=0;t=5",                     // a name that is neither String nor Token
                "\"default\";t=5",               // no `r`, which is REQUIRED
                "\"default\";r=-1;t=5",          // negative remaining
                "\"default\";r=0;t=-5",          // negative reset
                "\"default\";r=0;t=1.5",         // a Decimal reset
                "\"default\";r=0;t=\"5\"",       // a String reset
                "\"default\";r=0;t=5;pk=\"u1\"", // a partition key that is no Byte Sequence
            ] {
                assert_eq!(wait(bad), Err(Malformed), "{bad}");
            }
        }

        #[test]
        fn one_bad_item_spoils_the_whole_field() {
            assert_eq!(wait("\"a\";r=0;t=10, \"b\";r=0;t=-1"), Err(Malformed));
        }

        #[test]
        fn reads_a_list_split_over_field_lines() {
            let reading = read(
                &headers(&[
                    ("ratelimit", "\"minute\";r=0;t=40"),
                    ("ratelimit", "\"day\";r=0;t=900"),
                ]),
                VendorHints::ALL,
                Stamp::whole(0),
            );
            assert_eq!(
                reading.resets.longest,
                Some((Duration::from_secs(900), HintSource::RateLimit))
            );
            assert_eq!(
                reading.resets.shortest,
                Some((Duration::from_secs(900), HintSource::RateLimit))
            );
        }

        #[test]
        fn a_malformed_field_is_reported_and_ignored() {
            let reading = read(
                &headers(&[("ratelimit", "r=0;t=")]),
                VendorHints::ALL,
                Stamp::whole(0),
            );
            assert_eq!(reading.malformed, Some(HintSource::RateLimit));
            assert_eq!(reading.resets, Span::default());
        }

        #[test]
        fn the_policy_field_gives_no_wait_and_cannot_spoil_ratelimit() {
            let only_policy = read(
                &headers(&[("ratelimit-policy", "\"default\";q=100;w=60")]),
                VendorHints::ALL,
                Stamp::whole(0),
            );
            assert_eq!(only_policy, VendorReading::default());
            let broken_policy = read(
                &headers(&[
                    ("ratelimit-policy", "\"default\";q=;w=60"),
                    ("ratelimit", "\"default\";r=0;t=9"),
                ]),
                VendorHints::ALL,
                Stamp::whole(0),
            );
            assert_eq!(broken_policy.malformed, None);
            assert_eq!(
                broken_policy.resets.longest,
                Some((Duration::from_secs(9), HintSource::RateLimit))
            );
            // An exhausted policy with no reset: its window is no wait.
            let no_reset = read(
                &headers(&[
                    ("ratelimit-policy", "\"default\";q=100;w=60"),
                    ("ratelimit", "\"default\";r=0"),
                ]),
                VendorHints::ALL,
                Stamp::whole(0),
            );
            assert_eq!(no_reset, VendorReading::default());
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
                HintSource::XAmzRetryAfter,
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
            assert_eq!(
                longest(&[("x-amz-retry-after", "2500")]),
                Some((Duration::from_millis(2500), HintSource::XAmzRetryAfter))
            );
        }

        #[test]
        fn reads_the_aws_header_with_the_retry_after_family() {
            let reading = read(
                &headers(&[
                    ("x-amz-retry-after", "2500"),
                    ("retry-after-ms", "1500"),
                    ("ratelimit-reset", "100"),
                ]),
                VendorHints::ALL,
                Stamp::whole(0),
            );
            assert_eq!(
                reading.milliseconds.longest,
                Some((Duration::from_millis(2500), HintSource::XAmzRetryAfter))
            );
            assert_eq!(
                reading.milliseconds.shortest,
                Some((Duration::from_millis(1500), HintSource::RetryAfterMs))
            );
            assert_eq!(
                reading.resets.longest,
                Some((Duration::from_secs(100), HintSource::RateLimitReset))
            );
        }

        #[test]
        fn a_malformed_aws_value_is_reported_not_read_as_zero() {
            for bad in ["1.5", "-1", "", "2s"] {
                let mut map = HeaderMap::new();
                map.insert("x-amz-retry-after", HeaderValue::from_str(bad).unwrap());
                let reading = read(&map, VendorHints::ALL, Stamp::whole(0));
                assert_eq!(reading.malformed, Some(HintSource::XAmzRetryAfter), "{bad}");
                assert_eq!(reading.milliseconds, Span::default(), "{bad}");
            }
        }

        #[test]
        fn the_aws_flag_turns_the_aws_header_off() {
            let only_aws_off = VendorHints {
                x_amz_retry_after: false,
                ..VendorHints::ALL
            };
            let reading = read(
                &headers(&[("x-amz-retry-after", "2500")]),
                only_aws_off,
                Stamp::whole(0),
            );
            assert_eq!(reading, VendorReading::default());
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
        #[cfg(feature = "ratelimit-fields")]
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
        }

        #[test]
        #[cfg(not(feature = "ratelimit-fields"))]
        fn the_ietf_field_is_not_read_without_its_feature() {
            let reading = read(
                &headers(&[
                    ("ratelimit", "\"default\";r=0;t=10"),
                    ("retry-after-ms", "5"),
                ]),
                VendorHints::ALL,
                Stamp::whole(0),
            );
            assert_eq!(reading.resets, Span::default());
            assert_eq!(reading.malformed, None);
            assert_eq!(
                reading.milliseconds.longest,
                Some((Duration::from_millis(5), HintSource::RetryAfterMs))
            );
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
