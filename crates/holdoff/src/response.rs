//! What the decision needs to know about a response, and how its hint becomes an interval.

use std::time::{Duration, Instant, SystemTime};

use http::{HeaderMap, StatusCode, header};

use crate::date::{HttpDate, Stamp};
use crate::error::ParseErrorKind;
use crate::header::{Parsed, RetryAfter};
use crate::hints::{self, HintSource, Precedence, Span, VendorHints};

/// When a response's header section arrived, on both clocks.
///
/// Read both clocks once, together, as the headers arrive: the wall reading turns a date-form
/// hint into an interval, the monotonic reading anchors every wait from then on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Receipt {
    /// The monotonic clock at receipt.
    pub instant: Instant,
    /// The wall clock at receipt.
    pub wall: SystemTime,
}

impl Receipt {
    /// Reads both clocks of `clock` now.
    pub fn now(clock: &impl crate::clock::Clock) -> Receipt {
        Receipt {
            instant: clock.now(),
            wall: clock.wall_now(),
        }
    }
}

/// The parts of a response that the decision reads: its status, the raw hint and the
/// server's clock (`Date`, `Age`), plus when it arrived. Borrowed, so building one copies no
/// header bytes.
#[derive(Clone, Copy, Debug)]
pub struct ResponseInfo<'a> {
    /// The response status.
    pub status: StatusCode,
    /// The raw `Retry-After` value, if the response had one.
    pub retry_after: Option<&'a [u8]>,
    /// Whether the response carried more than one `Retry-After` field: a list, so malformed.
    pub retry_after_repeated: bool,
    /// The raw `Date` value, if any.
    pub date: Option<&'a [u8]>,
    /// The raw `Age` value, if any.
    pub age: Option<&'a [u8]>,
    /// Whether a 3xx carried a `Location` to follow.
    pub has_location: bool,
    /// The body, or as much of it as was read, for the quota classifier. Empty if unknown.
    pub body: &'a [u8],
    /// When the header section arrived.
    pub receipt: Receipt,
    /// All headers, for vendor hints (`retry-after-ms`, `RateLimit`, …); `None` reads none.
    pub headers: Option<&'a HeaderMap>,
}

impl<'a> ResponseInfo<'a> {
    /// Reads the status and the relevant headers of a response. Several `Retry-After`
    /// fields make a list, which is malformed like `120, 120` in one field.
    pub fn from_headers(status: StatusCode, headers: &'a HeaderMap, receipt: Receipt) -> Self {
        let get = |name| headers.get(name).map(http::HeaderValue::as_bytes);
        let mut hints = headers.get_all(header::RETRY_AFTER).iter();
        ResponseInfo {
            status,
            retry_after: hints.next().map(http::HeaderValue::as_bytes),
            retry_after_repeated: hints.next().is_some(),
            date: get(header::DATE),
            age: get(header::AGE),
            has_location: headers.contains_key(header::LOCATION),
            body: &[],
            receipt,
            headers: Some(headers),
        }
    }

    /// A response with this status and no headers of interest.
    pub fn new(status: StatusCode, receipt: Receipt) -> Self {
        ResponseInfo {
            status,
            retry_after: None,
            retry_after_repeated: false,
            date: None,
            age: None,
            has_location: false,
            body: &[],
            receipt,
            headers: None,
        }
    }

    /// The same response with this raw `Retry-After` value.
    pub fn with_retry_after(self, raw: &'a [u8]) -> Self {
        ResponseInfo {
            retry_after: Some(raw),
            ..self
        }
    }

    /// The same response with this raw `Date` value.
    pub fn with_date(self, raw: &'a [u8]) -> Self {
        ResponseInfo {
            date: Some(raw),
            ..self
        }
    }

    /// The same response with this raw `Age` value.
    pub fn with_age(self, raw: &'a [u8]) -> Self {
        ResponseInfo {
            age: Some(raw),
            ..self
        }
    }

    /// The same response with (or without) a `Location` to follow.
    pub fn with_location(self, has_location: bool) -> Self {
        ResponseInfo {
            has_location,
            ..self
        }
    }

    /// The same response with a body (or a prefix of it) for the quota classifier.
    pub fn with_body(self, body: &'a [u8]) -> Self {
        ResponseInfo { body, ..self }
    }
}

/// Whose clock a date-form hint was measured against.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reference {
    /// The server's own clock: `Date + Age` from the same response.
    ServerDate,
    /// The local wall clock at receipt (the response had no valid `Date`).
    LocalClock,
}

impl Reference {
    /// `server-date` or `local-clock`.
    pub fn as_str(self) -> &'static str {
        match self {
            Reference::ServerDate => "server-date",
            Reference::LocalClock => "local-clock",
        }
    }
}

/// How far the server's clock (`Date + Age`) was from the local wall clock at receipt.
///
/// `Date` has whole seconds ([`Skew::RESOLUTION`]): a server whose clock agrees with ours
/// sends a `Date` up to a second behind our clock. So a `Date` less than a second behind is
/// no skew, and is reported as `Ahead(Duration::ZERO)`; beyond that the distance is reported
/// as measured.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Skew {
    /// The server's clock was ahead of ours by this much (or equal).
    Ahead(Duration),
    /// The server's clock was behind ours by this much: at least [`Skew::RESOLUTION`].
    Behind(Duration),
}

impl Skew {
    /// The resolution of `Date` (and `Age`): one second. Skew is reported beyond it only.
    pub const RESOLUTION: Duration = Duration::from_secs(1);

    /// The skew of a server clock `by` ahead of ours (or behind, when not `server_ahead`):
    /// a server clock less than [`Skew::RESOLUTION`] behind is in step.
    pub(crate) fn between(server_ahead: bool, by: Duration) -> Skew {
        match (server_ahead, by) {
            (true, by) => Skew::Ahead(by),
            (false, by) if by < Skew::RESOLUTION => Skew::Ahead(Duration::ZERO),
            (false, by) => Skew::Behind(by),
        }
    }

    /// Server minus local, in whole seconds rounded toward zero, saturating.
    pub fn as_secs_i64(self) -> i64 {
        match self {
            Skew::Ahead(d) => i64::try_from(d.as_secs()).unwrap_or(i64::MAX),
            Skew::Behind(d) => i64::try_from(d.as_secs()).map_or(i64::MIN, |s| -s),
        }
    }
}

/// The hint as understood, for diagnostics.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum HintForm {
    /// The response carried no hint.
    Absent,
    /// delay-seconds; `saturated` when the digits exceeded `u64::MAX` seconds.
    Delay {
        /// The delay.
        delay: Duration,
        /// Whether the value was larger than `u64::MAX` seconds.
        saturated: bool,
    },
    /// An HTTP-date.
    Date(HttpDate),
    /// The value was malformed.
    Malformed(ParseErrorKind),
}

/// How the earliest reading of a hint was made ([`Earliest::At`]): the lenient end of what
/// its headers allow, for judging a client rather than for being one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Reading {
    /// delay-seconds or milliseconds, counted from receipt: exact.
    Delay,
    /// An HTTP-date against the server's `Date` (plus `Age`). Each of those has whole seconds
    /// (the server's clock at `Date` was anywhere in `[Date, Date + 1 s)`), so the earliest
    /// reading is a second sooner for each.
    DateAgainstServer {
        /// Whether an `Age` counted too (a second more).
        age: bool,
    },
    /// An HTTP-date against the local wall clock (the response had no valid `Date`): a
    /// second sooner, the date's own resolution.
    DateAgainstLocal,
    /// A reset-style field in seconds or as a duration, counted from receipt.
    Reset,
    /// An epoch-seconds reset (`X-RateLimit-Reset`): a second sooner, its resolution.
    ResetEpoch,
}

impl Reading {
    /// The reading, for people.
    pub fn describe(self) -> &'static str {
        match self {
            Reading::Delay => "a delay, counted from the response",
            Reading::DateAgainstServer { age: false } => {
                "HTTP-date − Date − 1 s: the server's clock has whole seconds"
            }
            Reading::DateAgainstServer { age: true } => {
                "HTTP-date − (Date + Age) − 2 s: both have whole seconds"
            }
            Reading::DateAgainstLocal => {
                "HTTP-date − the local clock − 1 s: no Date, and the date has whole seconds"
            }
            Reading::Reset => "the reset, counted from the response",
            Reading::ResetEpoch => "epoch-seconds reset − the clock − 1 s: whole seconds",
        }
    }
}

/// The earliest time a response's hints allow a retry, under the most lenient reading its
/// headers allow ([`Policy::earliest`](crate::Policy::earliest)): a retry sooner is early
/// under every reading.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Earliest {
    /// A usable hint.
    At {
        /// How long after receipt a retry may come.
        after: Duration,
        /// The header that decided.
        source: HintSource,
        /// How it was read.
        reading: Reading,
    },
    /// A hint was sent, but none could be read: never read as zero.
    Malformed {
        /// The header that could not be read.
        source: HintSource,
    },
    /// The response carried no hint.
    Absent,
}

/// A hint turned into an interval `H` counted from receipt.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Interval {
    pub(crate) form: HintForm,
    /// `H`; `None` when there was no usable hint.
    pub(crate) interval: Option<Duration>,
    /// The earliest reading of the hint that decides under [`Precedence::RetryAfter`], for a
    /// judge, and how it was made.
    pub(crate) lenient: Option<(Duration, HintSource, Reading)>,
    pub(crate) clamped_past: bool,
    pub(crate) reference: Reference,
    pub(crate) skew: Option<Skew>,
    /// Which header gave `H` (the longest of `Retry-After` and the vendor hints).
    pub(crate) source: Option<HintSource>,
    /// A malformed vendor value that was ignored.
    pub(crate) malformed_vendor: Option<HintSource>,
}

/// The server's clock at receipt, `Date + Age`.
fn server_clock(response: &ResponseInfo<'_>) -> Option<Stamp> {
    let date = HttpDate::parse_kind(response.date?, response.receipt.wall).ok()?;
    let age = response.age.and_then(delta_seconds).unwrap_or(0);
    let age = i64::try_from(age).unwrap_or(i64::MAX);
    Some(Stamp::whole(date.unix_seconds().saturating_add(age)))
}

/// `delta-seconds = 1*DIGIT`, saturating; `None` if malformed.
fn delta_seconds(raw: &[u8]) -> Option<u64> {
    let raw = raw.trim_ascii();
    if raw.is_empty() || !raw.iter().all(u8::is_ascii_digit) {
        return None;
    }
    Some(raw.iter().fold(0u64, |acc, &c| {
        acc.saturating_mul(10).saturating_add(u64::from(c - b'0'))
    }))
}

/// One second: the resolution of `Date`, `Age` and an HTTP-date.
const WHOLE_SECOND: Duration = Duration::from_secs(1);

impl Interval {
    /// DESIGN "From hint to wait": delay-form counts from receipt; date-form is
    /// `max(0, date − reference)`, the reference being the server's `Date + Age` when valid.
    /// `Retry-After` and its millisecond spellings decide when usable; the reset-style fields
    /// only when they are not, unless `precedence` lets the longest of all win.
    pub(crate) fn of(
        response: &ResponseInfo<'_>,
        vendor: VendorHints,
        precedence: Precedence,
    ) -> Interval {
        let local = Stamp::of(response.receipt.wall);
        let server = server_clock(response);
        let mut out = Interval::of_retry_after(response, local, server);
        let mut family = Span::default();
        let mut resets = Span::default();
        if let (Some(strict), Some((lenient, _, _))) = (out.interval, out.lenient) {
            family.offer(HintSource::RetryAfter, strict, lenient);
        }
        if let Some(headers) = response.headers {
            let reading = hints::read(headers, vendor, server.unwrap_or(local));
            out.malformed_vendor = reading.malformed;
            family = family.union(reading.milliseconds);
            resets = reading.resets;
        }
        let deciding = if family.longest.is_some() {
            family
        } else {
            resets
        };
        let longest = match precedence {
            Precedence::RetryAfter => deciding.longest,
            Precedence::Longest => family.union(resets).longest,
        };
        if let Some((wait, source)) = longest {
            out.interval = Some(wait);
            out.source = Some(source);
        }
        let retry_after_reading = out.lenient.map(|(_, _, reading)| reading);
        out.lenient = deciding.shortest.map(|(wait, source)| {
            let reading = match source {
                HintSource::RetryAfter => retry_after_reading.unwrap_or(Reading::Delay),
                HintSource::RetryAfterMs
                | HintSource::XMsRetryAfterMs
                | HintSource::XAmzRetryAfter => Reading::Delay,
                HintSource::XRateLimitReset => Reading::ResetEpoch,
                _ => Reading::Reset,
            };
            (wait, source, reading)
        });
        out
    }

    /// The earliest retry under the most lenient reading, for a judge.
    pub(crate) fn earliest(&self) -> Earliest {
        match (self.lenient, self.form, self.malformed_vendor) {
            (Some((after, source, reading)), _, _) => Earliest::At {
                after,
                source,
                reading,
            },
            (None, HintForm::Malformed(_), _) => Earliest::Malformed {
                source: HintSource::RetryAfter,
            },
            (None, _, Some(source)) => Earliest::Malformed { source },
            (None, _, None) => Earliest::Absent,
        }
    }

    fn of_retry_after(
        response: &ResponseInfo<'_>,
        local: Stamp,
        server: Option<Stamp>,
    ) -> Interval {
        let skew = server.map(|server| {
            let (ahead, by) = server.since(local);
            Skew::between(ahead, by)
        });
        let reference = if server.is_some() {
            Reference::ServerDate
        } else {
            Reference::LocalClock
        };
        let mut out = Interval {
            form: HintForm::Absent,
            interval: None,
            lenient: None,
            clamped_past: false,
            reference,
            skew,
            source: None,
            malformed_vendor: None,
        };
        let Some(raw) = response.retry_after else {
            return out;
        };
        if response.retry_after_repeated {
            out.form = HintForm::Malformed(ParseErrorKind::List);
            return out;
        }
        match crate::header::parse(raw, response.receipt.wall) {
            Err(kind) => out.form = HintForm::Malformed(kind),
            Ok(Parsed {
                value: RetryAfter::Delay(delay),
                saturated,
            }) => {
                out.form = HintForm::Delay { delay, saturated };
                out.interval = Some(delay);
                out.lenient = Some((delay, HintSource::RetryAfter, Reading::Delay));
                out.source = Some(HintSource::RetryAfter);
            }
            Ok(Parsed {
                value: RetryAfter::Date(date),
                ..
            }) => {
                let (interval, clamped) =
                    Stamp::whole(date.unix_seconds()).after(server.unwrap_or(local));
                // The date and the clock it is measured against have whole seconds: the
                // earliest reading is a second sooner for each clock field of whole seconds.
                let reading = match server {
                    Some(_) => Reading::DateAgainstServer {
                        age: response
                            .age
                            .and_then(delta_seconds)
                            .is_some_and(|age| age > 0),
                    },
                    None => Reading::DateAgainstLocal,
                };
                let slack = match reading {
                    Reading::DateAgainstServer { age: true } => 2 * WHOLE_SECOND,
                    _ => WHOLE_SECOND,
                };
                out.form = HintForm::Date(date);
                out.clamped_past = clamped;
                out.interval = Some(interval);
                out.lenient = Some((
                    interval.saturating_sub(slack),
                    HintSource::RetryAfter,
                    reading,
                ));
                out.source = Some(HintSource::RetryAfter);
            }
        }
        out
    }
}
