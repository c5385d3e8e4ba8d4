//! The scenarios of `holdoff check`: what the first watched request is answered with, and the
//! rule the client's next move is judged by. One home for each: the `--list` text, the config
//! the proxy runs with, and the rule. Pure: the time a scenario's dates are written from is
//! given ([`Setup::now`]), never read here.

//!
//! This file holds the types and what the suite asks of a scenario; `table.rs` lists them,
//! and `answer.rs` writes what each one sends as the proxy's config.

mod answer;
mod table;

use std::time::{Duration, SystemTime};

pub(crate) use self::table::ALL;

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
}

/// `seconds` divided by `scale`, rounded up, at least 1.
fn scaled(seconds: u64, scale: u32) -> u64 {
    seconds.div_ceil(u64::from(scale.max(1))).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A suite at a fixed time, unscaled, answering from the upstream.
    pub(super) fn setup() -> Setup {
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
}
