//! Error responses: a status, headers and a body, with `Retry-After: @dynamic` filled in per
//! response, and the exact failure rate Dev Proxy's GenericRandomErrorPlugin means to have.

use std::ops::RangeInclusive;
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use holdoff::HttpDate;
use http::{HeaderName, HeaderValue, StatusCode, header};
use rand::Rng;

/// A failure rate in percent: exactly 0 never fails, exactly 100 always does, and 50 fails
/// half the requests on average.
///
/// (Dev Proxy draws from 1–99 and compares the wrong way round, so its 99 fails everything
/// and 100 is not 100.)
#[derive(Clone, Copy, Debug, PartialEq, PartialOrd)]
pub struct Rate(f64);

impl Rate {
    /// Never.
    pub const NEVER: Rate = Rate(0.0);
    /// Always.
    pub const ALWAYS: Rate = Rate(100.0);

    /// A rate in percent; `None` outside 0–100 (or NaN).
    pub fn percent(percent: f64) -> Option<Rate> {
        (0.0..=100.0).contains(&percent).then_some(Rate(percent))
    }

    /// The rate in percent.
    pub fn as_percent(self) -> f64 {
        self.0
    }

    /// Whether a request fails, for a uniform draw `unit` in `[0, 1)`.
    pub fn fails(self, unit: f64) -> bool {
        // unit < 1 always, so 100 % fails every draw and 0 % none.
        unit * 100.0 < self.0
    }
}

/// How a `@dynamic` `Retry-After` is written.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum RetryAfterForm {
    /// delay-seconds: `Retry-After: 5`.
    #[default]
    Delay,
    /// An IMF-fixdate, with a `Date` header from the same clock reading.
    HttpDate,
    /// Either form, drawn per response.
    Mixed,
}

/// One header of an error response: a literal value, a `Retry-After` filled in per response
/// (`@dynamic` or `@dynamic=N`, on any status), or a reset time in Unix epoch seconds
/// (`@epoch=N`, as GitHub's `X-RateLimit-Reset`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HeaderTemplate {
    /// Sent as written.
    Literal(HeaderValue),
    /// A wait drawn from this range of whole seconds for every response.
    Dynamic(RangeInclusive<u64>),
    /// The Unix epoch second this many seconds after the response is sent, rounded up: a
    /// reset time that is always in the future when the client reads it.
    Epoch(u64),
}

impl HeaderTemplate {
    /// Reads a configured value: `@dynamic` (a wait from `default_range`), `@dynamic=N` (N
    /// seconds), `@epoch=N` (the epoch second N seconds after the answer), or a literal.
    /// `None` when `@dynamic=` or `@epoch=` is not followed by whole seconds.
    pub fn parse(value: &str, default_range: RangeInclusive<u64>) -> Option<HeaderTemplate> {
        let trimmed = value.trim();
        if let Some(prefix) = trimmed.get(..6)
            && prefix.eq_ignore_ascii_case("@epoch")
        {
            let seconds = trimmed[6..]
                .trim_start()
                .strip_prefix('=')?
                .trim()
                .parse::<u64>()
                .ok()?;
            return Some(HeaderTemplate::Epoch(seconds));
        }
        match trimmed.get(..8) {
            Some(prefix) if prefix.eq_ignore_ascii_case("@dynamic") => {
                let rest = &trimmed[8..];
                if rest.is_empty() {
                    return Some(HeaderTemplate::Dynamic(default_range));
                }
                let seconds = rest
                    .trim_start()
                    .strip_prefix('=')?
                    .trim()
                    .parse::<u64>()
                    .ok()?;
                Some(HeaderTemplate::Dynamic(seconds..=seconds))
            }
            _ => HeaderValue::from_str(value)
                .ok()
                .map(HeaderTemplate::Literal),
        }
    }
}

/// A response to send instead of the upstream's.
#[derive(Clone, Debug)]
pub struct ErrorResponse {
    /// The status.
    pub status: StatusCode,
    /// The headers, in order.
    pub headers: Vec<(HeaderName, HeaderTemplate)>,
    /// The body.
    pub body: Bytes,
}

/// An error response made concrete for one request.
#[derive(Clone, Debug)]
pub(crate) struct Rendered {
    /// The response head and body.
    pub response: http::Response<Bytes>,
    /// The wait a `@dynamic` hint asked for, if the response carries one.
    pub hint: Option<Duration>,
}

impl ErrorResponse {
    /// Fills in every `@dynamic` header with a wait drawn from `rng`, written in `form`;
    /// `wall_now` dates an HTTP-date hint and its `Date` header.
    pub(crate) fn render(
        &self,
        form: RetryAfterForm,
        rng: &mut impl Rng,
        wall_now: SystemTime,
    ) -> Rendered {
        let mut builder = http::Response::builder().status(self.status);
        let mut hint = None;
        let mut dated = false;
        for (name, template) in &self.headers {
            let value = match template {
                HeaderTemplate::Literal(value) => value.clone(),
                HeaderTemplate::Dynamic(range) => {
                    let seconds = rng.random_range(range.clone());
                    let wait = Duration::from_secs(seconds);
                    hint = Some(hint.map_or(wait, |h: Duration| h.max(wait)));
                    let as_date = match form {
                        RetryAfterForm::Delay => false,
                        RetryAfterForm::HttpDate => true,
                        RetryAfterForm::Mixed => rng.random_bool(0.5),
                    };
                    match as_date.then(|| date_value(wall_now, wait)).flatten() {
                        Some((value, date)) => {
                            if !dated {
                                builder = builder.header(header::DATE, date);
                                dated = true;
                            }
                            value
                        }
                        None => HeaderValue::from(seconds),
                    }
                }
                HeaderTemplate::Epoch(after) => {
                    let since = wall_now
                        .duration_since(std::time::UNIX_EPOCH)
                        .unwrap_or_default();
                    let whole = since.as_secs() + u64::from(since.subsec_nanos() > 0);
                    HeaderValue::from(whole.saturating_add(*after))
                }
            };
            builder = builder.header(name, value);
        }
        let response = builder
            .body(self.body.clone())
            .unwrap_or_else(|_| http::Response::new(self.body.clone()));
        Rendered { response, hint }
    }
}

/// `Retry-After` as an IMF-fixdate `wait` after `now`, with the matching `Date`.
///
/// Both are written in whole seconds, so `Date` is `now` rounded *up*: then a client that
/// measures the date against `Date` waits exactly `wait` (what the judge expects), and one that
/// measures it against its own clock waits up to a second longer, never shorter.
fn date_value(now: SystemTime, wait: Duration) -> Option<(HeaderValue, HeaderValue)> {
    let floor = HttpDate::from_system_time(now)?.unix_seconds();
    let whole = now
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(true, |d| d.subsec_nanos() == 0);
    let date = HttpDate::from_unix_seconds(if whole { floor } else { floor + 1 })?;
    let wait = i64::try_from(wait.as_secs()).ok()?;
    let until = HttpDate::from_unix_seconds(date.unix_seconds().checked_add(wait)?)?;
    let value = HeaderValue::from_str(&until.to_string()).ok()?;
    let date = HeaderValue::from_str(&date.to_string()).ok()?;
    Some((value, date))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fault::FaultRng;
    use rand::SeedableRng;
    use rand::rngs::SmallRng;
    use std::time::UNIX_EPOCH;

    fn throttled(template: &str) -> ErrorResponse {
        ErrorResponse {
            status: StatusCode::TOO_MANY_REQUESTS,
            headers: vec![(
                header::RETRY_AFTER,
                HeaderTemplate::parse(template, 2..=5).expect("valid template"),
            )],
            body: Bytes::from_static(b"slow down"),
        }
    }

    mod rate {
        use super::*;

        #[test]
        fn is_exact_at_the_ends() {
            let rng = FaultRng::new(1);
            let draws: Vec<f64> = rng.with(|r| (0..10_000).map(|_| r.random()).collect());
            assert!(draws.iter().all(|u| Rate::ALWAYS.fails(*u)));
            assert!(draws.iter().all(|u| !Rate::NEVER.fails(*u)));
            assert!(Rate::ALWAYS.fails(0.999_999_999));
        }

        #[test]
        fn fails_about_half_at_fifty() {
            let rng = FaultRng::new(7);
            let half = Rate::percent(50.0).expect("valid");
            let failed = rng.with(|r| (0..10_000).filter(|_| half.fails(r.random())).count());
            assert!((4_800..=5_200).contains(&failed), "{failed}");
        }

        #[test]
        fn ninety_nine_is_not_a_hundred() {
            let rate = Rate::percent(99.0).expect("valid");
            assert!(!rate.fails(0.995));
            assert!(rate.fails(0.985));
        }

        #[test]
        fn refuses_what_is_not_a_percentage() {
            assert_eq!(Rate::percent(101.0), None);
            assert_eq!(Rate::percent(-1.0), None);
            assert_eq!(Rate::percent(f64::NAN), None);
        }
    }

    mod render {
        use super::*;

        #[test]
        fn writes_an_epoch_reset_from_the_clock_rounded_up() {
            let template = HeaderTemplate::parse(" @epoch = 3 ", 2..=5);
            assert_eq!(template, Some(HeaderTemplate::Epoch(3)));
            assert_eq!(HeaderTemplate::parse("@epoch=soon", 2..=5), None);
            let reset = ErrorResponse {
                status: StatusCode::TOO_MANY_REQUESTS,
                headers: vec![(
                    HeaderName::from_static("x-ratelimit-reset"),
                    HeaderTemplate::Epoch(3),
                )],
                body: Bytes::new(),
            };
            let mut rng = SmallRng::seed_from_u64(3);
            let now = UNIX_EPOCH + Duration::from_millis(1_700_000_000_250);
            let rendered = reset.render(RetryAfterForm::Delay, &mut rng, now);
            assert_eq!(
                rendered.response.headers()["x-ratelimit-reset"],
                "1700000004"
            );
            assert_eq!(rendered.hint, None);
        }

        #[test]
        fn fills_dynamic_with_a_wait_in_range() {
            let mut rng = SmallRng::seed_from_u64(3);
            for _ in 0..100 {
                let rendered =
                    throttled("@dynamic").render(RetryAfterForm::Delay, &mut rng, UNIX_EPOCH);
                let secs: u64 = rendered.response.headers()[header::RETRY_AFTER]
                    .to_str()
                    .expect("ascii")
                    .parse()
                    .expect("delay-seconds");
                assert!((2..=5).contains(&secs));
                assert_eq!(rendered.hint, Some(Duration::from_secs(secs)));
            }
        }

        #[test]
        fn a_fixed_dynamic_is_that_many_seconds_and_never_leaks() {
            let mut rng = SmallRng::seed_from_u64(3);
            for template in ["@dynamic=7", "@DYNAMIC=7", " @dynamic = 7 "] {
                let rendered =
                    throttled(template).render(RetryAfterForm::Delay, &mut rng, UNIX_EPOCH);
                assert_eq!(rendered.response.headers()[header::RETRY_AFTER], "7");
            }
            let on_503 = ErrorResponse {
                status: StatusCode::SERVICE_UNAVAILABLE,
                ..throttled("@dynamic=3")
            };
            let rendered = on_503.render(RetryAfterForm::Delay, &mut rng, UNIX_EPOCH);
            assert_eq!(rendered.response.status(), 503);
            assert_eq!(rendered.response.headers()[header::RETRY_AFTER], "3");
        }

        #[test]
        fn writes_an_http_date_with_a_matching_date_header() {
            let mut rng = SmallRng::seed_from_u64(3);
            let now = UNIX_EPOCH + Duration::from_millis(1_700_000_000_500);
            let rendered = throttled("@dynamic=10").render(RetryAfterForm::HttpDate, &mut rng, now);
            let headers = rendered.response.headers();
            // 22:13:20.5 rounds up to :21, so neither reading of the date comes out short.
            assert_eq!(headers[header::DATE], "Tue, 14 Nov 2023 22:13:21 GMT");
            assert_eq!(
                headers[header::RETRY_AFTER],
                "Tue, 14 Nov 2023 22:13:31 GMT"
            );
        }

        #[test]
        fn a_literal_stays_as_written() {
            assert_eq!(
                HeaderTemplate::parse("120", 2..=5),
                Some(HeaderTemplate::Literal(HeaderValue::from_static("120")))
            );
            assert_eq!(HeaderTemplate::parse("@dynamic=soon", 2..=5), None);
        }
    }
}
