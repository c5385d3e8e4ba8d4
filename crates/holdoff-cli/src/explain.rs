//! `holdoff explain`: a pasted `Retry-After` value, what it means, and what a client should do.
//!
//! The flow is one way: [`Args`] (clap) → [`Inputs`] (validated, clocks read) → the library's
//! [`Verdict`] → [`Explanation`] (the verdict plus the facts the renderers need) → text
//! ([`human`]) or one JSON object ([`json`]).

mod human;
mod json;

use std::ffi::OsString;
use std::io::Write;
use std::time::{Duration, SystemTime};

use holdoff::clock::SystemClock;
use holdoff::{
    Attempt, Earliest, HttpDate, JitterDraw, OnMalformed, ParseError, Policy, Receipt,
    ResponseInfo, RetryAfter, Verdict,
};
use http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode};

use crate::duration;
use crate::failure::Failure;

const AFTER_HELP: &str = "\
The wait is max(hint, backoff) + jitter. The server's hint is a lower bound: it is never
shortened or capped; a wait that does not fit (--max-wait, --remaining) is deferred instead.

Durations: 8s, 500ms, 1m30s, 1h, 2d, or plain seconds such as 8 or 0.7.

A 3xx --status is assumed to carry a Location header, so its decision is to follow the
redirect once the hint has passed.

Exit status: 0 when VALUE is valid, 1 when it is malformed (the output still explains why),
2 for a usage error.

Examples:
  holdoff explain 120
  holdoff explain --now 2025-01-01T00:00:00Z --backoff 8s --remaining 12s 30
  holdoff explain --date 'Wed, 01 Jan 2025 00:00:10 GMT' 'Wed, 01 Jan 2025 00:01:00 GMT'
  holdoff explain --json -- -1";

/// Explain a Retry-After value.
#[derive(Debug, clap::Args)]
#[command(after_help = AFTER_HELP)]
pub(crate) struct Args {
    /// Print one JSON object instead of the explanation for people.
    #[arg(long)]
    json: bool,

    /// The local wall clock when the response arrived: RFC 3339 (2025-01-01T00:00:00Z) or
    /// Unix seconds (1735689600, 1735689600.5). Default: the real clock.
    #[arg(long, value_name = "TIME", value_parser = parse_now)]
    now: Option<SystemTime>,

    /// The response's Date header: the server's clock, used as the reference for a date hint.
    #[arg(long, value_name = "HTTP-DATE")]
    date: Option<String>,

    /// The response's Age header, in seconds (added to --date).
    #[arg(long, value_name = "SECONDS", value_parser = parse_age)]
    age: Option<u64>,

    /// The response status, 100-599. A 3xx is assumed to carry a Location.
    #[arg(
        long,
        value_name = "CODE",
        default_value_t = 503,
        value_parser = clap::value_parser!(u16).range(100..=599),
    )]
    status: u16,

    /// The request method. Standard names match in any case.
    #[arg(long, value_name = "METHOD", default_value = "GET", value_parser = parse_method)]
    method: Method,

    /// The request is safe to repeat even if its method is not idempotent (e.g. it carries an
    /// Idempotency-Key).
    #[arg(long)]
    idempotent: bool,

    /// Which attempt got this response, of at most how many: n/m (or n, of at most 5).
    #[arg(long, value_name = "N/M", default_value = "1/5", value_parser = parse_attempt)]
    attempt: AttemptArg,

    /// The local backoff for this attempt. Default: the policy's backoff for attempt n
    /// (1s, doubling, at most 30s).
    #[arg(long, value_name = "DURATION", value_parser = duration::parse)]
    backoff: Option<Duration>,

    /// The jitter to add to max(hint, backoff).
    #[arg(long, value_name = "DURATION", default_value = "0", value_parser = duration::parse)]
    jitter: Duration,

    /// Time left before the task's deadline, at receipt. Default: no deadline.
    #[arg(long, value_name = "DURATION", value_parser = duration::parse)]
    remaining: Option<Duration>,

    /// Defer instead of waiting when the server asks for more than this. Default: no limit.
    #[arg(long, value_name = "DURATION", value_parser = duration::parse)]
    max_wait: Option<Duration>,

    /// What to do with a malformed value: treat it as an error, or drop it and fall back to
    /// the local backoff.
    #[arg(long, value_name = "POLICY", value_enum, default_value_t = MalformedArg::Error)]
    on_malformed: MalformedArg,

    /// Another header of the response, 'NAME: VALUE', e.g. 'RateLimit-Reset: 100' or
    /// 'retry-after-ms: 1500'; repeat for more. Retry-After and its millisecond spellings
    /// decide over reset-style fields; the output says which header decided.
    #[arg(short = 'H', long = "header", value_name = "NAME: VALUE", value_parser = parse_header)]
    headers: Vec<(HeaderName, HeaderValue)>,

    /// The Retry-After value, e.g. 120 or 'Sun, 06 Nov 1994 08:49:37 GMT'. Use -- before a
    /// value that starts with '-'.
    #[arg(value_name = "VALUE")]
    value: OsString,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum MalformedArg {
    /// Stop with an error: a broken hint is a server bug to see.
    Error,
    /// Drop the hint and decide as if none was sent.
    Fallback,
}

/// `--attempt n/m`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct AttemptArg {
    number: u32,
    max: u32,
}

fn parse_now(s: &str) -> Result<SystemTime, String> {
    let invalid = || {
        format!(
            "invalid time `{s}`: expected RFC 3339 (e.g. 2025-01-01T00:00:00Z) \
             or Unix seconds (e.g. 1735689600 or 1735689600.5)"
        )
    };
    let timestamp = if s.starts_with(|c: char| c.is_ascii_digit() || c == '-') && !s.contains(':') {
        unix_seconds(s).ok_or_else(invalid)?
    } else {
        s.parse::<jiff::Timestamp>().map_err(|_| invalid())?
    };
    Ok(SystemTime::from(timestamp))
}

/// `[-]digits[.digits]` seconds since the Unix epoch, at most nanosecond precision.
fn unix_seconds(s: &str) -> Option<jiff::Timestamp> {
    let (negative, digits) = match s.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, s),
    };
    let (whole, frac) = match digits.split_once('.') {
        Some((whole, frac)) => (whole, Some(frac)),
        None => (digits, None),
    };
    let all_digits = |d: &str| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit());
    if !all_digits(whole) || frac.is_some_and(|f| !all_digits(f) || f.len() > 9) {
        return None;
    }
    let secs: i64 = whole.parse().ok()?;
    let nanos: i32 = match frac {
        Some(f) => format!("{f:0<9}").parse().ok()?,
        None => 0,
    };
    if negative {
        jiff::Timestamp::new(-secs, -nanos).ok()
    } else {
        jiff::Timestamp::new(secs, nanos).ok()
    }
}

fn parse_header(s: &str) -> Result<(HeaderName, HeaderValue), String> {
    let invalid = |what: &str| format!("invalid header `{s}`: {what}; expected 'NAME: VALUE'");
    let (name, value) = s.split_once(':').ok_or_else(|| invalid("no colon"))?;
    let name = HeaderName::from_bytes(name.trim().as_bytes()).map_err(|_| invalid("bad name"))?;
    if name == http::header::RETRY_AFTER {
        return Err(invalid("give Retry-After as VALUE, not as a header"));
    }
    let value = HeaderValue::from_str(value.trim()).map_err(|_| invalid("bad value"))?;
    Ok((name, value))
}

fn parse_age(s: &str) -> Result<u64, String> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!(
            "invalid age `{s}`: expected whole seconds, e.g. 30"
        ));
    }
    s.parse()
        .map_err(|_| format!("invalid age `{s}`: too large"))
}

fn parse_method(s: &str) -> Result<Method, String> {
    let standard = [
        Method::GET,
        Method::HEAD,
        Method::POST,
        Method::PUT,
        Method::DELETE,
        Method::CONNECT,
        Method::OPTIONS,
        Method::TRACE,
        Method::PATCH,
    ];
    if let Some(method) = standard.iter().find(|m| m.as_str().eq_ignore_ascii_case(s)) {
        return Ok(method.clone());
    }
    Method::from_bytes(s.as_bytes())
        .map_err(|_| format!("invalid method `{s}`: expected a method name such as GET or POST"))
}

fn parse_attempt(s: &str) -> Result<AttemptArg, String> {
    let invalid = || {
        format!(
            "invalid attempt `{s}`: expected n/m with 1 <= n <= m, e.g. 1/5 \
             (attempt 1 of at most 5), or just n"
        )
    };
    let number = |part: &str| {
        if part.bytes().all(|b| b.is_ascii_digit()) {
            part.parse::<u32>().ok().filter(|&n| n >= 1)
        } else {
            None
        }
    };
    let (n, m) = match s.split_once('/') {
        Some((n, m)) => (number(n), number(m)),
        None => (number(s), Some(5)),
    };
    match (n, m) {
        (Some(number), Some(max)) if number <= max => Ok(AttemptArg { number, max }),
        _ => Err(invalid()),
    }
}

/// The validated inputs, with the clocks read.
#[derive(Debug)]
struct Inputs {
    raw: Vec<u8>,
    status: StatusCode,
    method: Method,
    repeat_safe: bool,
    attempt: AttemptArg,
    /// `B`, and whether it came from the policy rather than `--backoff`.
    backoff: Duration,
    backoff_is_default: bool,
    jitter: Duration,
    remaining: Option<Duration>,
    max_wait: Option<Duration>,
    on_malformed: OnMalformed,
    receipt: Receipt,
    /// Whether the wall clock at receipt came from `--now`.
    now_given: bool,
    /// `--date`, raw and parsed.
    date: Option<(String, HttpDate)>,
    /// `--age`, and its digits for the response.
    age: Option<(u64, String)>,
    /// `--header`s.
    headers: HeaderMap,
    policy: Policy,
}

impl Inputs {
    fn new(args: Args) -> Result<Inputs, Failure> {
        let clock = SystemClock;
        let receipt = Receipt {
            instant: clock.now(),
            wall: args.now.unwrap_or_else(|| clock.wall_now()),
        };
        let date = match args.date {
            None => None,
            Some(raw) => match HttpDate::parse(raw.as_bytes(), receipt.wall) {
                Ok(date) => Some((raw, date)),
                Err(err) => {
                    return Err(Failure::Usage(format!(
                        "invalid --date `{raw}`: {}; expected the response's Date header, \
                         e.g. 'Sun, 06 Nov 1994 08:49:37 GMT'",
                        date_problem(&err)
                    )));
                }
            },
        };
        let on_malformed = match args.on_malformed {
            MalformedArg::Error => OnMalformed::Error,
            MalformedArg::Fallback => OnMalformed::Fallback,
        };
        let policy = Policy::default()
            .with_max_attempts(args.attempt.max)
            .with_max_wait(args.max_wait)
            .with_on_malformed(on_malformed);
        let backoff = args
            .backoff
            .unwrap_or_else(|| policy.backoff_for(args.attempt.number));
        Ok(Inputs {
            raw: args.value.into_encoded_bytes(),
            // The parser keeps the code within 100..=599, which `http` accepts.
            status: StatusCode::from_u16(args.status)
                .map_err(|_| Failure::Usage(format!("invalid status `{}`", args.status)))?,
            method: args.method,
            repeat_safe: args.idempotent,
            attempt: args.attempt,
            backoff,
            backoff_is_default: args.backoff.is_none(),
            jitter: args.jitter,
            remaining: args.remaining,
            max_wait: args.max_wait,
            on_malformed,
            receipt,
            now_given: args.now.is_some(),
            date,
            age: args.age.map(|age| (age, age.to_string())),
            headers: args.headers.into_iter().collect(),
            policy,
        })
    }
}

/// What was wrong with `--date`, in a few words.
fn date_problem(err: &ParseError) -> &'static str {
    match err.kind() {
        kind @ (holdoff::ParseErrorKind::WrongWeekday | holdoff::ParseErrorKind::NoSuchDate) => {
            kind.describe()
        }
        _ => "not an HTTP-date",
    }
}

/// The verdict and everything the renderers say about it.
struct Explanation<'a> {
    inputs: &'a Inputs,
    verdict: Verdict<'a>,
    /// The earliest retry a judge allows: the lenient end of what the headers say.
    earliest: Earliest,
    /// Why the value is malformed, if it is.
    error: Option<ParseError>,
    /// `H` as the decision used it; `None` when there was no usable hint.
    hint: Option<Duration>,
    /// `max(H, B) + j`, whether or not the decision got as far as computing it.
    wait: Duration,
}

impl<'a> Explanation<'a> {
    fn new(inputs: &'a Inputs) -> Explanation<'a> {
        let mut response = ResponseInfo::new(inputs.status, inputs.receipt)
            .with_retry_after(&inputs.raw)
            .with_location(inputs.status.is_redirection());
        if let Some((raw, _)) = &inputs.date {
            response = response.with_date(raw.as_bytes());
        }
        if let Some((_, digits)) = &inputs.age {
            response = response.with_age(digits.as_bytes());
        }
        let response = ResponseInfo {
            headers: Some(&inputs.headers),
            ..response
        };
        let earliest = inputs.policy.earliest(&response);
        let attempt = Attempt::new(&inputs.method, inputs.attempt.number)
            .with_repeat_safe(inputs.repeat_safe)
            .with_backoff(inputs.backoff)
            .with_jitter(JitterDraw::Exact(inputs.jitter))
            .with_remaining(inputs.remaining);
        let verdict = inputs.policy.decide(&response, &attempt);
        // The same parse the decision made, for the full error message.
        let error = RetryAfter::parse(&inputs.raw, inputs.receipt.wall).err();
        let hint = verdict.diagnostics.interval;
        // The decision stops before computing the wait when it gives up early; show what
        // the wait would have been all the same.
        let wait = verdict.diagnostics.wait.unwrap_or_else(|| {
            hint.unwrap_or(Duration::ZERO)
                .max(inputs.backoff)
                .saturating_add(inputs.jitter)
        });
        Explanation {
            inputs,
            verdict,
            earliest,
            error,
            hint,
            wait,
        }
    }

    /// The server's clock at receipt (`Date + Age`), in Unix seconds, when `--date` was given.
    fn server_clock(&self) -> Option<i128> {
        let (_, date) = self.inputs.date.as_ref()?;
        let age = self.inputs.age.as_ref().map_or(0, |(age, _)| *age);
        Some(i128::from(date.unix_seconds()) + i128::from(age))
    }

    /// A wall-clock time this long after receipt, in RFC 3339, if it can be written.
    fn wall_after(&self, after: Duration) -> Option<String> {
        rfc3339(self.inputs.receipt.wall.checked_add(after)?)
    }
}

/// A wall-clock time in RFC 3339 (UTC), if jiff can represent it (years -9999 to 9999).
fn rfc3339(time: SystemTime) -> Option<String> {
    jiff::Timestamp::try_from(time).ok().map(|t| t.to_string())
}

/// Unix seconds as RFC 3339, if representable.
fn rfc3339_unix(secs: i128) -> Option<String> {
    let secs = i64::try_from(secs).ok()?;
    jiff::Timestamp::from_second(secs)
        .ok()
        .map(|t| t.to_string())
}

/// Whole milliseconds, if they fit in a `u64`.
fn millis(duration: Duration) -> Option<u64> {
    u64::try_from(duration.as_millis()).ok()
}

/// Runs `holdoff explain`: [`Failure::Malformed`] when the value is, after explaining why.
pub(crate) fn run(args: Args, out: &mut impl Write) -> Result<(), Failure> {
    let as_json = args.json;
    let inputs = Inputs::new(args)?;
    let explanation = Explanation::new(&inputs);
    if as_json {
        json::write(&explanation, out)?;
    } else {
        human::write(&explanation, out)?;
    }
    match explanation.error {
        Some(_) => Err(Failure::Malformed),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    mod parse_now {
        use super::*;

        fn unix(secs: u64, nanos: u32) -> SystemTime {
            SystemTime::UNIX_EPOCH + Duration::new(secs, nanos)
        }

        #[test]
        fn reads_rfc3339() {
            assert_eq!(
                parse_now("2025-01-01T00:00:00Z"),
                Ok(unix(1_735_689_600, 0))
            );
            assert_eq!(
                parse_now("2025-01-01T01:00:00.5+01:00"),
                Ok(unix(1_735_689_600, 500_000_000))
            );
        }

        #[test]
        fn reads_unix_seconds() {
            assert_eq!(parse_now("1735689600"), Ok(unix(1_735_689_600, 0)));
            assert_eq!(
                parse_now("1735689600.25"),
                Ok(unix(1_735_689_600, 250_000_000))
            );
            assert_eq!(
                parse_now("-1.5"),
                Ok(SystemTime::UNIX_EPOCH - Duration::from_millis(1_500))
            );
        }

        #[test]
        fn rejects_anything_else() {
            for input in [
                "",
                "now",
                "1.",
                ".5",
                "1e9",
                "2025-01-01",
                "1.0000000001",
                "--1",
            ] {
                let err = parse_now(input).expect_err(input);
                assert!(err.starts_with(&format!("invalid time `{input}`")), "{err}");
            }
        }
    }

    mod parse_attempt {
        use super::*;

        #[test]
        fn reads_n_of_m() {
            assert_eq!(parse_attempt("2/3"), Ok(AttemptArg { number: 2, max: 3 }));
            assert_eq!(parse_attempt("5/5"), Ok(AttemptArg { number: 5, max: 5 }));
            assert_eq!(parse_attempt("3"), Ok(AttemptArg { number: 3, max: 5 }));
        }

        #[test]
        fn rejects_impossible_attempts() {
            for input in [
                "0/5", "6/5", "1/0", "", "/", "1/", "a/b", "+1/5", "1/5/7", "1 /5",
            ] {
                assert!(parse_attempt(input).is_err(), "{input:?}");
            }
        }
    }

    mod parse_method {
        use super::*;

        #[test]
        fn matches_standard_names_in_any_case() {
            assert_eq!(parse_method("post"), Ok(Method::POST));
            assert_eq!(parse_method("Get"), Ok(Method::GET));
        }

        #[test]
        fn keeps_extension_methods_as_written() {
            assert_eq!(
                parse_method("PROPFIND").map(|m| m.to_string()),
                Ok("PROPFIND".into())
            );
        }

        #[test]
        fn rejects_what_is_not_a_token() {
            assert!(parse_method("GET POST").is_err());
            assert!(parse_method("").is_err());
        }
    }

    mod parse_age {
        use super::*;

        #[test]
        fn reads_whole_seconds_only() {
            assert_eq!(parse_age("30"), Ok(30));
            for input in ["", "-1", "+1", "1.5", "1s"] {
                assert!(parse_age(input).is_err(), "{input:?}");
            }
        }
    }
}
