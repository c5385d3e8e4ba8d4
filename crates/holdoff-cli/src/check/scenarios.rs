//! The scenarios of `holdoff check`: what the first watched request is answered with, and the
//! rule the client's next move is judged by. One home for each: the `--list` text, the config
//! the proxy runs with, and the rule. Pure: the time a scenario's dates are written from is
//! given ([`Setup::now`]), never read here.

use std::time::{Duration, SystemTime};

use holdoff::HttpDate;
use serde_json::{Value, json};

/// How long the judge makes a client wait after a throttle whose `Retry-After` is malformed
/// or missing: a retry sooner than this read the hint as zero (or did not back off at all).
/// Passed to `holdoff run --judge-min-backoff`, so the judge and the verdicts say the same.
pub(crate) const MIN_BACKOFF: Duration = Duration::from_millis(100);

/// [`MIN_BACKOFF`] for people, e.g. `100 ms`.
pub(crate) fn min_backoff() -> String {
    format!("{} ms", MIN_BACKOFF.as_millis())
}

/// Where `redirect` sends the client: a path on the same origin, answered by the proxy.
const REDIRECTED: &str = "/holdoff-check/redirected";

/// The name of the scenario run when every wait exceeded its hint ([`Scenario::reads`]).
pub(crate) const READS: &str = "reads-hint";

/// `reads-hint`'s line in `--list`.
pub(crate) const READS_DESCRIPTION: &str = "run by the suite itself when every wait exceeded its \
hint: 429 with Retry-After twice the longest wait; a wait that does not follow the hint fails";

/// How long a client may wait on `long-hour`'s one-hour hint before it is stopped and judged
/// to be waiting it out: longer than any cap worth detecting (real SDKs cap at 60 s and
/// 120 s; `long-150` finds those), so a client still waiting then waits for the hour.
pub(crate) const HOUR_SHOWN_AFTER: Duration = Duration::from_secs(165);

/// What a scenario's verdict turns on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Rule {
    /// A usable hint: a retry before the permitted time fails (the judge's `premature`).
    Hint,
    /// A date hint from a server whose clock is behind: a retry early by the server's clock
    /// warns (the client measures the date by its own clock; RFC 9110 names no clock for it).
    Skew,
    /// `Retry-After` beside a shorter `retry-after-ms`: as [`Rule::Hint`], and the verdict
    /// says which of the two the client's wait falls after.
    Millis,
    /// A malformed hint: a retry sooner than the minimum backoff fails (`read_as_zero`).
    Malformed,
    /// A date whose weekday is not its day's: malformed to a strict parser, a past date to a
    /// robust one (RFC 9110 §5.6.7), so a retry at once passes — unless the client reads
    /// other malformed hints as zero, when it warns.
    Weekday,
    /// No hint on a 429: a retry sooner than the minimum backoff warns (`no_backoff`, as the
    /// judge says); with `--parallel`, copies that resume in lockstep warn (no jitter).
    NoHint,
    /// No hint on three throttles in a row: as [`Rule::NoHint`], and waits that do not grow
    /// warn.
    Backoff,
    /// A hint on a POST: a retry before it fails, one without an `Idempotency-Key` warns.
    Post,
    /// A date in the past: a retry is permitted at once, so still waiting at the time limit
    /// warns (the date was read as a long wait).
    PastDate,
    /// A 429 for a used-up quota (OpenAI's `insufficient_quota`): waiting won't help, so any
    /// retry warns, and giving up is right.
    Quota,
    /// A hint longer than some clients' caps: a retry before it fails (a cap, named across
    /// the long scenarios).
    Long,
    /// A hint of an hour: a retry before it fails, still waiting when the scenario ends
    /// ([`HOUR_SHOWN_AFTER`]) warns (it blocks the task), giving up passes.
    Hour,
    /// Every attempt throttled: a retry before a hint fails; still retrying at the time limit
    /// warns (no bound in sight); stopping after a bounded number of retries passes.
    Persistent,
    /// `X-RateLimit-Remaining: 0` with `X-RateLimit-Reset` and no `Retry-After`: a retry
    /// before the reset warns.
    Reset,
    /// A redirect with a hint (RFC 9110 §10.2.3: the minimum time before following it):
    /// following sooner warns.
    Redirect,
    /// A hint longer than any wait the client made in the other scenarios, run when all its
    /// waits exceeded their hints: a retry before it fails (its wait does not follow the hint).
    Reads,
}

/// OpenAI's answer when the account's quota is used up: a 429 no wait will end.
fn quota_body() -> Value {
    json!({ "error": {
        "message": "You exceeded your current quota, please check your plan and billing details.",
        "type": "insufficient_quota",
        "param": null,
        "code": "insufficient_quota",
    } })
}

/// The `Retry-After` a scenario sends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Hint {
    /// None at all.
    None,
    /// This value, as written.
    Literal(&'static str),
    /// An IMF-fixdate this many seconds after the proxy's clock when it answers, with a
    /// matching `Date` (the proxy's `@dynamic=N` in `http-date` form).
    Date(u64),
    /// A `Date` `behind` seconds behind [`Setup::now`] and a `Retry-After` date `ahead`
    /// seconds after that `Date`: a server whose clock is behind.
    Behind { behind: u64, ahead: u64 },
    /// Delay-seconds, divided by [`Setup::long_scale`] (rounded up).
    Long(u64),
    /// Delay-seconds, as given.
    Delay(u64),
}

/// How the throttles after the first go.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Repeat {
    /// Only the first request is throttled.
    Once,
    /// The first retry too, with this `Retry-After`.
    Then(&'static str),
    /// The first N requests, each the same way.
    Times(u8),
    /// Every request.
    Always,
}

/// What every scenario of one `holdoff check` shares.
#[derive(Clone, Debug)]
pub(crate) struct Setup {
    /// The wall clock when the configs are written: the `clock-behind` dates count from it.
    pub(crate) now: SystemTime,
    /// `--long-scale`: the long hints (and how long `long-hour` waits) are divided by it.
    pub(crate) long_scale: u32,
    /// The answer to every request a throttle does not answer, if not the upstream's.
    pub(crate) success: Option<Success>,
}

/// A configured success answer (`--success-status`, `--success-header`, `--success-body`).
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Success {
    pub(crate) status: u16,
    /// Header names and values, in order.
    pub(crate) headers: Vec<(String, String)>,
    /// The body: JSON when it parses as JSON (the mock sends it with a JSON content type),
    /// else text.
    pub(crate) body: String,
}

/// One scenario.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Scenario {
    /// Its name, for `--scenario`.
    pub(crate) name: &'static str,
    /// One line for `--list`.
    pub(crate) description: &'static str,
    /// What the first watched request is answered with, short, for the table (unscaled).
    sends: &'static str,
    /// What decides the verdict.
    pub(crate) rule: Rule,
    status: u16,
    /// The `Retry-After` sent.
    hint: Hint,
    /// The only method throttled, if not every one.
    method: Option<&'static str>,
    /// The throttles after the first.
    repeat: Repeat,
    /// Other headers sent beside the hint.
    also: &'static [(&'static str, &'static str)],
    /// Run only with `--long` (and only by name without it).
    pub(crate) long: bool,
}

/// Every scenario, in the order they are reported.
pub(crate) const ALL: &[Scenario] = &[
    Scenario {
        name: "delay-429",
        description: "429 with Retry-After: 2; a retry sooner than 2 s fails, a later one or \
                      none passes",
        sends: "429, Retry-After: 2",
        rule: Rule::Hint,
        status: 429,
        hint: Hint::Literal("2"),
        method: None,
        repeat: Repeat::Once,
        also: &[],
        long: false,
    },
    Scenario {
        name: "delay-503",
        description: "503 with Retry-After: 2; a retry sooner than 2 s fails, a later one or \
                      none passes",
        sends: "503, Retry-After: 2",
        rule: Rule::Hint,
        status: 503,
        hint: Hint::Literal("2"),
        method: None,
        repeat: Repeat::Once,
        also: &[],
        long: false,
    },
    Scenario {
        name: "too-large",
        description: "413 with Retry-After: 2 (RFC 9110 §15.5.14: a temporary condition); a \
                      retry sooner than 2 s fails, a later one passes",
        sends: "413, Retry-After: 2",
        rule: Rule::Hint,
        status: 413,
        hint: Hint::Literal("2"),
        method: None,
        repeat: Repeat::Once,
        also: &[],
        long: false,
    },
    Scenario {
        name: "redirect",
        description: "307 to another path with Retry-After: 2 (the minimum wait before following \
                      it, RFC 9110 §10.2.3); following sooner warns",
        sends: "307, Retry-After: 2",
        rule: Rule::Redirect,
        status: 307,
        hint: Hint::Literal("2"),
        method: None,
        repeat: Repeat::Once,
        also: &[("Location", REDIRECTED)],
        long: false,
    },
    Scenario {
        name: "http-date",
        description: "503 with Retry-After an HTTP-date 3 s ahead and a matching Date; a retry \
                      before that date (the judge's lenient reading) fails",
        sends: "503, Retry-After: <HTTP-date +3 s>",
        rule: Rule::Hint,
        status: 503,
        hint: Hint::Date(3),
        method: None,
        repeat: Repeat::Once,
        also: &[],
        long: false,
    },
    Scenario {
        name: "clock-behind",
        description: "503 from a server whose clock is an hour behind: Date and a Retry-After \
                      HTTP-date 3 s after it; a client that measures the date by its own \
                      clock, not Date, retries at once and warns",
        sends: "503, Date: <an hour ago>, Retry-After: <Date +3 s>",
        rule: Rule::Skew,
        status: 503,
        hint: Hint::Behind {
            behind: 3600,
            ahead: 3,
        },
        method: None,
        repeat: Repeat::Once,
        also: &[],
        long: false,
    },
    Scenario {
        name: "date-past",
        description: "503 with Retry-After: Sun, 06 Nov 1994 08:49:37 GMT, long past: a retry \
                      is permitted at once; still waiting at the time limit warns",
        sends: "503, Retry-After: <a date in 1994>",
        rule: Rule::PastDate,
        status: 503,
        hint: Hint::Literal("Sun, 06 Nov 1994 08:49:37 GMT"),
        method: None,
        repeat: Repeat::Once,
        also: &[],
        long: false,
    },
    Scenario {
        name: "second-throttle",
        description: "429 with Retry-After: 1, then the retry 429 with Retry-After: 3; a \
                      retry sooner than either fails",
        sends: "429, Retry-After: 1, then 3",
        rule: Rule::Hint,
        status: 429,
        hint: Hint::Literal("1"),
        method: None,
        repeat: Repeat::Then("3"),
        also: &[],
        long: false,
    },
    Scenario {
        name: "retry-after-ms",
        description: "429 with Retry-After: 3 and retry-after-ms: 1500; says which one the \
                      client used; a retry sooner than 1.5 s fails",
        sends: "429, Retry-After: 3, retry-after-ms: 1500",
        rule: Rule::Millis,
        status: 429,
        hint: Hint::Literal("3"),
        method: None,
        repeat: Repeat::Once,
        also: &[("retry-after-ms", "1500")],
        long: false,
    },
    Scenario {
        name: "malformed",
        description: "503 with Retry-After: soon; a retry within 100 ms (the hint read as \
                      zero) fails, backing off or giving up passes",
        sends: "503, Retry-After: soon",
        rule: Rule::Malformed,
        status: 503,
        hint: Hint::Literal("soon"),
        method: None,
        repeat: Repeat::Once,
        also: &[],
        long: false,
    },
    Scenario {
        name: "malformed-negative",
        description: "503 with Retry-After: -1; a retry within 100 ms (read as zero) fails",
        sends: "503, Retry-After: -1",
        rule: Rule::Malformed,
        status: 503,
        hint: Hint::Literal("-1"),
        method: None,
        repeat: Repeat::Once,
        also: &[],
        long: false,
    },
    Scenario {
        name: "malformed-decimal",
        description: "503 with Retry-After: 1.5 (delay-seconds are whole); a retry within \
                      100 ms fails",
        sends: "503, Retry-After: 1.5",
        rule: Rule::Malformed,
        status: 503,
        hint: Hint::Literal("1.5"),
        method: None,
        repeat: Repeat::Once,
        also: &[],
        long: false,
    },
    Scenario {
        name: "malformed-empty",
        description: "503 with an empty Retry-After; a retry within 100 ms fails",
        sends: "503, Retry-After: (empty)",
        rule: Rule::Malformed,
        status: 503,
        hint: Hint::Literal(""),
        method: None,
        repeat: Repeat::Once,
        also: &[],
        long: false,
    },
    Scenario {
        name: "wrong-weekday",
        description: "503 with Retry-After: Mon, 06 Nov 1994 08:49:37 GMT (a Sunday): a robust \
                      parser reads the past date and may retry at once; still waiting at the \
                      time limit warns",
        sends: "503, Retry-After: Mon, 06 Nov 1994 …",
        rule: Rule::Weekday,
        status: 503,
        hint: Hint::Literal("Mon, 06 Nov 1994 08:49:37 GMT"),
        method: None,
        repeat: Repeat::Once,
        also: &[],
        long: false,
    },
    Scenario {
        name: "no-hint",
        description: "429 without Retry-After; a retry within 100 ms warns (no backoff), a \
                      later one passes",
        sends: "429, no Retry-After",
        rule: Rule::NoHint,
        status: 429,
        hint: Hint::None,
        method: None,
        repeat: Repeat::Once,
        also: &[],
        long: false,
    },
    Scenario {
        name: "quota",
        description: "429 with OpenAI's insufficient_quota error and no Retry-After; giving up \
                      passes (waiting won't help), a retry warns",
        sends: "429 insufficient_quota, no hint",
        rule: Rule::Quota,
        status: 429,
        hint: Hint::None,
        method: None,
        repeat: Repeat::Once,
        also: &[],
        long: false,
    },
    Scenario {
        name: "ratelimit-reset",
        description: "429 with X-RateLimit-Remaining: 0 and X-RateLimit-Reset 3 s ahead (GitHub), \
                      no Retry-After; a retry before the reset warns",
        sends: "429, X-RateLimit-Reset: <+3 s>",
        rule: Rule::Reset,
        status: 429,
        hint: Hint::None,
        method: None,
        repeat: Repeat::Once,
        also: &[
            ("X-RateLimit-Limit", "60"),
            ("X-RateLimit-Remaining", "0"),
            ("X-RateLimit-Reset", "@epoch=3"),
        ],
        long: false,
    },
    Scenario {
        name: "backoff",
        description: "three 429s in a row without Retry-After; waits that do not grow warn, \
                      a retry within 100 ms warns",
        sends: "429, no Retry-After, 3 times",
        rule: Rule::Backoff,
        status: 429,
        hint: Hint::None,
        method: None,
        repeat: Repeat::Times(3),
        also: &[],
        long: false,
    },
    Scenario {
        name: "persistent",
        description: "every request 429 with Retry-After: 1; a retry sooner fails, still \
                      retrying at the time limit warns; says how many retries and what the \
                      command did after the last",
        sends: "429, Retry-After: 1, every time",
        rule: Rule::Persistent,
        status: 429,
        hint: Hint::Literal("1"),
        method: None,
        repeat: Repeat::Always,
        also: &[],
        long: false,
    },
    Scenario {
        name: "post",
        description: "a POST answered 503 with Retry-After: 1; a retry sooner fails, one \
                      without an Idempotency-Key warns (a hint does not make a POST safe)",
        sends: "POST: 503, Retry-After: 1",
        rule: Rule::Post,
        status: 503,
        hint: Hint::Literal("1"),
        method: Some("POST"),
        repeat: Repeat::Once,
        also: &[],
        long: false,
    },
    Scenario {
        name: "long-90",
        description: "with --long: 429 with Retry-After: 90, above the 60 s cap of some SDKs; a \
                      retry before 90 s fails, waiting or giving up passes",
        sends: "429, Retry-After: 90",
        rule: Rule::Long,
        status: 429,
        hint: Hint::Long(90),
        method: None,
        repeat: Repeat::Once,
        also: &[],
        long: true,
    },
    Scenario {
        name: "long-150",
        description: "with --long: 429 with Retry-After: 150, above the 120 s cap of others; a \
                      retry before 150 s fails, waiting or giving up passes",
        sends: "429, Retry-After: 150",
        rule: Rule::Long,
        status: 429,
        hint: Hint::Long(150),
        method: None,
        repeat: Repeat::Once,
        also: &[],
        long: true,
    },
    Scenario {
        name: "long-hour",
        description: "with --long: 429 with Retry-After: 3600; giving up (or deferring the task) \
                      passes, still waiting after 165 s warns (it blocks the task), an early \
                      retry fails",
        sends: "429, Retry-After: 3600",
        rule: Rule::Hour,
        status: 429,
        hint: Hint::Long(3600),
        method: None,
        repeat: Repeat::Once,
        also: &[],
        long: true,
    },
];

impl Scenario {
    /// The scenario called `name`.
    ///
    /// # Errors
    ///
    /// A message naming every known scenario.
    pub(crate) fn find(name: &str) -> Result<Scenario, String> {
        ALL.iter()
            .find(|scenario| scenario.name == name)
            .copied()
            .ok_or_else(|| {
                if name == READS {
                    return format!(
                        "`{READS}` cannot be chosen: the suite runs it itself when every wait \
                         the client made exceeded its hint (its hint is twice the longest); run \
                         the hinted scenarios, e.g. -s delay-429 -s http-date"
                    );
                }
                let known: Vec<&str> = ALL.iter().map(|scenario| scenario.name).collect();
                format!(
                    "unknown scenario `{name}`; the scenarios are: {}",
                    known.join(", ")
                )
            })
    }

    /// What the first watched request is answered with, for the table: a long hint as
    /// scaled, with the unscaled value beside it.
    pub(crate) fn sends(&self, setup: &Setup) -> String {
        match self.hint {
            Hint::Long(seconds) if setup.long_scale > 1 => format!(
                "{}, Retry-After: {} ({seconds} s / {})",
                self.status,
                scaled(seconds, setup.long_scale),
                setup.long_scale
            ),
            Hint::Delay(seconds) => format!("{}, Retry-After: {seconds}", self.status),
            _ => self.sends.to_owned(),
        }
    }

    /// `reads-hint`: a hint of `seconds`, longer than any wait the client made in the other
    /// scenarios, to tell a wait that follows the hint from one that is the same whatever
    /// the hint.
    pub(crate) fn reads(seconds: u64) -> Scenario {
        Scenario {
            name: READS,
            description: "",
            sends: "",
            rule: Rule::Reads,
            status: 429,
            hint: Hint::Delay(seconds),
            method: None,
            repeat: Repeat::Once,
            also: &[],
            long: false,
        }
    }

    /// The hint the client was given, in seconds from the throttle, when the scenario's rule
    /// needs it to explain a verdict: a long hint as scaled.
    pub(crate) fn hint_secs(&self, setup: &Setup) -> Option<u64> {
        match self.hint {
            Hint::Long(seconds) => Some(scaled(seconds, setup.long_scale)),
            Hint::Literal(value) => value.parse().ok(),
            Hint::Date(ahead) | Hint::Behind { ahead, .. } => Some(ahead),
            Hint::Delay(seconds) => Some(seconds),
            // A reset time (`@epoch=N`) is a hint too, N seconds ahead.
            Hint::None => self
                .also
                .iter()
                .find_map(|(_, value)| value.strip_prefix("@epoch=").and_then(|n| n.parse().ok())),
        }
    }

    /// How long the command may run in this scenario before it is stopped: `timeout`, or for
    /// a long hint the hint and `timeout` after it (the client must be given time to honour
    /// it), or for `long-hour` until it has shown its hand ([`HOUR_SHOWN_AFTER`], scaled).
    pub(crate) fn time_limit(&self, timeout: Duration, setup: &Setup) -> Duration {
        match (self.rule, self.hint) {
            (Rule::Hour, _) => HOUR_SHOWN_AFTER / setup.long_scale.max(1),
            (_, Hint::Long(seconds)) => {
                Duration::from_secs(scaled(seconds, setup.long_scale)) + timeout
            }
            (_, Hint::Delay(seconds)) => Duration::from_secs(seconds) + timeout,
            _ => timeout,
        }
    }

    /// The proxy's config: a mock answering the first watched request (`nth` 1) with the
    /// scenario's throttle (and, for each throttle after it, another answering the first
    /// request the ones before let through: a mock counts only the requests that reach it;
    /// or, for a throttle every time, one mock without `nth`); every later request goes to
    /// the upstream, or gets the configured success answer.
    pub(crate) fn config(&self, setup: &Setup) -> Value {
        let first = match self.hint {
            Hint::None => vec![],
            Hint::Literal(value) => vec![("Retry-After".to_owned(), value.to_owned())],
            Hint::Date(ahead) => vec![("Retry-After".to_owned(), format!("@dynamic={ahead}"))],
            Hint::Behind { behind, ahead } => behind_by(setup.now, behind, ahead),
            Hint::Long(seconds) => vec![(
                "Retry-After".to_owned(),
                scaled(seconds, setup.long_scale).to_string(),
            )],
            Hint::Delay(seconds) => vec![("Retry-After".to_owned(), seconds.to_string())],
        };
        let mut mocks = match self.repeat {
            Repeat::Once => vec![self.mock(first, true)],
            Repeat::Then(value) => vec![
                self.mock(first, true),
                self.mock(vec![("Retry-After".to_owned(), value.to_owned())], true),
            ],
            Repeat::Times(times) => (0..times).map(|_| self.mock(first.clone(), true)).collect(),
            Repeat::Always => vec![self.mock(first, false)],
        };
        if self.rule == Rule::Redirect {
            // The redirect's target is answered by the proxy, before the throttle's mock can
            // count it: a client following it gets an answer whatever the upstream has.
            let answer = match &setup.success {
                Some(success) => success.mock()["response"].clone(),
                None => json!({ "statusCode": 200, "body": "holdoff check: redirected\n" }),
            };
            mocks.insert(
                0,
                json!({ "request": { "url": format!("*{REDIRECTED}") }, "response": answer }),
            );
        }
        if let Some(success) = &setup.success {
            mocks.push(success.mock());
        }
        let form = match self.hint {
            Hint::Date(_) => "http-date",
            _ => "delay",
        };
        json!({ "retryAfterForm": form, "mocks": { "mocks": mocks } })
    }

    /// A mock answering the first request that reaches it (every one, unless `first`) with
    /// the scenario's status and `headers` (and [`Scenario::also`]).
    fn mock(&self, mut headers: Vec<(String, String)>, first: bool) -> Value {
        for (name, value) in self.also {
            headers.push(((*name).to_owned(), (*value).to_owned()));
        }
        let mut request = match first {
            true => json!({ "url": "*", "nth": 1 }),
            false => json!({ "url": "*" }),
        };
        if let Some(method) = self.method {
            request["method"] = json!(method);
        }
        let body = match self.rule {
            Rule::Quota => quota_body(),
            _ => json!(format!("holdoff check: scenario {}\n", self.name)),
        };
        json!({
            "request": request,
            "response": { "statusCode": self.status, "headers": pairs(&headers), "body": body },
        })
    }
}

impl Success {
    /// A mock answering every request that reaches it (after the throttles) with this.
    fn mock(&self) -> Value {
        let body = serde_json::from_str::<Value>(&self.body).unwrap_or_else(|_| json!(self.body));
        json!({
            "request": { "url": "*" },
            "response": { "statusCode": self.status, "headers": pairs(&self.headers), "body": body },
        })
    }
}

/// Headers as a mock's list of `name`/`value` objects.
fn pairs(headers: &[(String, String)]) -> Vec<Value> {
    headers
        .iter()
        .map(|(name, value)| json!({ "name": name, "value": value }))
        .collect()
}

/// `Date` `behind` seconds before `now` (whole seconds) and `Retry-After` `ahead` seconds
/// after that `Date`, both IMF-fixdates: what a server whose clock is behind sends. Written
/// once, with the config: the judge reads the date against the `Date` beside it, so the
/// moment the proxy sends them does not change the wait they ask for.
fn behind_by(now: SystemTime, behind: u64, ahead: u64) -> Vec<(String, String)> {
    let date = HttpDate::from_system_time(now)
        .and_then(|now| HttpDate::from_unix_seconds(now.unix_seconds() - behind as i64));
    let until =
        date.and_then(|date| HttpDate::from_unix_seconds(date.unix_seconds() + ahead as i64));
    match (date, until) {
        (Some(date), Some(until)) => vec![
            ("Date".to_owned(), date.to_string()),
            ("Retry-After".to_owned(), until.to_string()),
        ],
        // A clock before 1970 plus an hour: nothing sensible to send but the delay.
        _ => vec![("Retry-After".to_owned(), ahead.to_string())],
    }
}

/// `seconds` divided by `scale`, rounded up, at least 1.
fn scaled(seconds: u64, scale: u32) -> u64 {
    seconds.div_ceil(u64::from(scale.max(1))).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn setup() -> Setup {
        Setup {
            now: SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000),
            long_scale: 1,
            success: None,
        }
    }

    mod find {
        use super::*;

        #[test]
        fn names_the_known_scenarios_for_an_unknown_one() {
            let err = Scenario::find("delay").unwrap_err();
            assert!(err.starts_with("unknown scenario `delay`"), "{err}");
            for scenario in ALL {
                assert!(err.contains(scenario.name), "{err}");
            }
            assert_eq!(Scenario::find("no-hint").map(|s| s.rule), Ok(Rule::NoHint));
        }
    }

    mod config {
        use super::*;

        fn headers(config: &Value, mock: usize) -> Vec<(String, String)> {
            config["mocks"]["mocks"][mock]["response"]["headers"]
                .as_array()
                .unwrap()
                .iter()
                .map(|h| {
                    let text = |key: &str| h[key].as_str().unwrap().to_owned();
                    (text("name"), text("value"))
                })
                .collect()
        }

        #[test]
        fn answers_only_the_first_request_with_the_throttle() {
            let config = Scenario::find("http-date").unwrap().config(&setup());
            let mock = &config["mocks"]["mocks"][0];
            assert_eq!(mock["request"]["nth"], 1);
            assert_eq!(mock["response"]["statusCode"], 503);
            assert_eq!(mock["response"]["headers"][0]["value"], "@dynamic=3");
            assert_eq!(config["retryAfterForm"], "http-date");
            let none = Scenario::find("no-hint").unwrap().config(&setup());
            assert_eq!(none["mocks"]["mocks"][0]["response"]["headers"], json!([]));
            assert_eq!(none["mocks"]["mocks"].as_array().map(Vec::len), Some(1));
        }

        #[test]
        fn answers_the_retry_too_for_a_second_throttle() {
            let config = Scenario::find("second-throttle").unwrap().config(&setup());
            let mocks = &config["mocks"]["mocks"];
            assert_eq!(mocks[0]["response"]["headers"][0]["value"], "1");
            assert_eq!(mocks[1]["request"]["nth"], 1);
            assert_eq!(mocks[1]["response"]["headers"][0]["value"], "3");
        }

        #[test]
        fn throttles_three_times_or_every_time() {
            let config = Scenario::find("backoff").unwrap().config(&setup());
            let mocks = config["mocks"]["mocks"].as_array().unwrap();
            assert_eq!(mocks.len(), 3);
            assert!(mocks.iter().all(|mock| mock["request"]["nth"] == 1));
            let config = Scenario::find("persistent").unwrap().config(&setup());
            let mocks = config["mocks"]["mocks"].as_array().unwrap();
            assert_eq!(mocks.len(), 1);
            assert_eq!(mocks[0]["request"], json!({ "url": "*" }));
        }

        #[test]
        fn sends_a_reset_time_that_is_never_past_and_no_retry_after() {
            let scenario = Scenario::find("ratelimit-reset").unwrap();
            let headers = headers(&scenario.config(&setup()), 0);
            assert!(headers.iter().all(|(name, _)| name != "Retry-After"));
            assert!(headers.contains(&("X-RateLimit-Reset".to_owned(), "@epoch=3".to_owned())));
            assert!(headers.contains(&("X-RateLimit-Remaining".to_owned(), "0".to_owned())));
            assert_eq!(scenario.hint_secs(&setup()), Some(3));
        }

        #[test]
        fn sends_the_reading_scenarios_hint_as_given() {
            let reads = Scenario::reads(11);
            assert_eq!(headers(&reads.config(&setup()), 0)[0].1, "11");
            assert_eq!(reads.sends(&setup()), "429, Retry-After: 11");
            assert_eq!(
                reads.time_limit(Duration::from_secs(30), &setup()),
                Duration::from_secs(41)
            );
        }

        #[test]
        fn dates_a_server_an_hour_behind_from_the_given_clock() {
            let config = Scenario::find("clock-behind").unwrap().config(&setup());
            // 1_700_000_000 is Tue, 14 Nov 2023 22:13:20 GMT.
            assert_eq!(
                headers(&config, 0),
                [
                    (
                        "Date".to_owned(),
                        "Tue, 14 Nov 2023 21:13:20 GMT".to_owned()
                    ),
                    (
                        "Retry-After".to_owned(),
                        "Tue, 14 Nov 2023 21:13:23 GMT".to_owned()
                    ),
                ]
            );
        }

        #[test]
        fn sends_retry_after_ms_beside_retry_after() {
            let config = Scenario::find("retry-after-ms").unwrap().config(&setup());
            assert_eq!(
                headers(&config, 0),
                [
                    ("Retry-After".to_owned(), "3".to_owned()),
                    ("retry-after-ms".to_owned(), "1500".to_owned()),
                ]
            );
        }

        #[test]
        fn scales_long_hints_and_their_time_limits() {
            let long = Scenario::find("long-90").unwrap();
            let hour = Scenario::find("long-hour").unwrap();
            let timeout = Duration::from_secs(30);
            assert_eq!(headers(&long.config(&setup()), 0)[0].1, "90");
            assert_eq!(long.time_limit(timeout, &setup()), Duration::from_secs(120));
            assert_eq!(hour.time_limit(timeout, &setup()), HOUR_SHOWN_AFTER);
            let fast = Setup {
                long_scale: 30,
                ..setup()
            };
            assert_eq!(headers(&long.config(&fast), 0)[0].1, "3");
            assert_eq!(long.sends(&fast), "429, Retry-After: 3 (90 s / 30)");
            assert_eq!(headers(&hour.config(&fast), 0)[0].1, "120");
            assert_eq!(hour.time_limit(timeout, &fast), Duration::from_millis(5500));
            assert_eq!(
                Scenario::find("long-150").unwrap().hint_secs(&fast),
                Some(5)
            );
        }

        #[test]
        fn answers_everything_else_with_a_configured_success() {
            let with = Setup {
                success: Some(Success {
                    status: 201,
                    headers: vec![("x-from".to_owned(), "check".to_owned())],
                    body: r#"{"id": 1}"#.to_owned(),
                }),
                ..setup()
            };
            let config = Scenario::find("delay-429").unwrap().config(&with);
            let last = &config["mocks"]["mocks"][1];
            assert_eq!(last["request"], json!({ "url": "*" }));
            assert_eq!(last["response"]["statusCode"], 201);
            assert_eq!(last["response"]["body"], json!({ "id": 1 }));
            assert_eq!(
                headers(&config, 1),
                [("x-from".to_owned(), "check".to_owned())]
            );
        }

        #[test]
        fn every_scenario_has_a_config_the_proxy_accepts() {
            for scenario in ALL {
                use holdoff_config::{compile, load};
                let text = serde_json::to_string(&scenario.config(&setup())).unwrap();
                let raw = load::parse(&text, load::Format::Json, "scenario.json").unwrap();
                compile::compile(&raw, "scenario.json", std::path::Path::new("."))
                    .unwrap_or_else(|err| panic!("{}: {err}", scenario.name));
            }
        }
    }
}
