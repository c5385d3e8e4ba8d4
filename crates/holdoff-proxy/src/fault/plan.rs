//! The compiled fault plan: what [`FaultStage`](super::stage::FaultStage) runs, every value
//! already checked, every file already read.
//!
//! Built from a configuration file by [`compile`](crate::config::compile), from a preset, or
//! by hand in code and tests.

use std::fmt;
use std::ops::RangeInclusive;
use std::time::Duration;

use http::Method;

use super::auth::AuthRule;
use super::crud::CrudApi;
use super::error::{ErrorResponse, Rate, RetryAfterForm};
use super::ratelimit::{HeaderStyle, Limit, ResetFormat};
use super::tokens::TokenBudget;
use crate::config::WatchPattern;

/// Everything the faults do. A request meets latency first (it delays, and never answers),
/// then the steps that can answer in [`order`](FaultPlan::order) — auth, mocks, CRUD APIs,
/// rate limits and error rules unless the configuration says otherwise — and the first step that answers
/// wins: later ones never see the request.
#[derive(Clone, Debug, Default)]
#[non_exhaustive]
pub struct FaultPlan {
    /// How `@dynamic` hints are written.
    pub retry_after_form: RetryAfterForm,
    /// The order of the steps that can answer.
    pub order: FaultOrder,
    /// Added latency, if any.
    pub latency: Option<LatencyRule>,
    /// API keys wanted, first rule whose URL matches decides.
    pub auth: Vec<AuthRule>,
    /// Mocks, first match answers.
    pub mocks: Vec<MockRule>,
    /// Watched requests no mock matches get `502` instead of going upstream.
    pub block_unmocked: bool,
    /// Microsoft Graph JSON batches (`POST …/$batch`) are answered request by request from
    /// the mocks, each request's answer its mock's or `502` (Dev Proxy's
    /// GraphMockResponsePlugin).
    pub batch_mocks: bool,
    /// An error rule that fails a Microsoft Graph JSON batch fails each request in it, the
    /// batch answered `200` (Dev Proxy's GraphRandomErrorPlugin).
    pub batch_errors: bool,
    /// REST APIs over in-memory data, the first with an action matching answers. Their data
    /// is shared by the plan's clones.
    pub crud_apis: Vec<CrudApi>,
    /// Rate limits; a request is counted by every limit it matches, and refused by the first
    /// that is exceeded.
    pub rate_limits: Vec<RateLimitRule>,
    /// Token budgets of language-model APIs; a request is counted by every budget it
    /// matches, and refused by the first that is used up.
    pub llm_rate_limits: Vec<LlmRateLimitRule>,
    /// Error rules, first match decides.
    pub errors: Vec<ErrorRule>,
    /// Language-model calls forwarded with an instruction to fail in some way (Dev Proxy's
    /// LanguageModelFailurePlugin), after every step has let them through; the first rule
    /// whose request matches decides.
    pub llm_failures: Vec<super::LlmFailureRule>,
}

/// What the plan does, in one line, every kind of fault it holds named: `2 error rules (50%),
/// 1 rate limit, 1 token budget, 1 CRUD API, 1 auth rule, 3 mocks, latency 50–400 ms`, or
/// `no faults`. The one summary of a plan: `holdoff config validate` prints it, and the proxy
/// logs it at start and on every reload.
///
/// # Examples
///
/// ```
/// use holdoff_proxy::fault::FaultPlan;
///
/// assert_eq!(FaultPlan::default().to_string(), "no faults");
/// ```
impl FaultPlan {
    /// How many rules the plan holds for `step`.
    pub fn rules(&self, step: FaultStep) -> usize {
        match step {
            FaultStep::Auth => self.auth.len(),
            FaultStep::Mocks => self.mocks.len(),
            FaultStep::CrudApis => self.crud_apis.len(),
            FaultStep::RateLimits => self.rate_limits.len(),
            FaultStep::LanguageModelRateLimits => self.llm_rate_limits.len(),
            FaultStep::Errors => self.errors.len(),
        }
    }

    /// Whether `step` can do anything to a request: it has rules, or (mocks) unmocked
    /// requests are blocked.
    pub(crate) fn acts_at(&self, step: FaultStep) -> bool {
        self.rules(step) > 0 || (step == FaultStep::Mocks && self.block_unmocked)
    }

    /// Whether the plan does nothing to any request: no rule of any step, no latency, and
    /// the unmocked not blocked.
    pub fn is_empty(&self) -> bool {
        self.latency.is_none()
            && !self.block_unmocked
            && self.llm_failures.is_empty()
            && FaultStep::ALL.iter().all(|&step| !self.acts_at(step))
    }
}

/// The order the steps are summed up in, for people: the faults a client feels most first.
const SUMMARY_ORDER: [FaultStep; 6] = [
    FaultStep::Errors,
    FaultStep::RateLimits,
    FaultStep::LanguageModelRateLimits,
    FaultStep::CrudApis,
    FaultStep::Auth,
    FaultStep::Mocks,
];

impl fmt::Display for FaultPlan {
    /// `2 error rules (10%), 1 rate limit, latency 100–300 ms`, or `no faults`: every step
    /// with a rule, then latency.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut parts = Vec::new();
        for step in SUMMARY_ORDER {
            let n = self.rules(step);
            if n == 0 && !(step == FaultStep::Mocks && self.block_unmocked) {
                continue;
            }
            let (one, many) = step.noun();
            let mut part = match n {
                1 => format!("1 {one}"),
                n => format!("{n} {many}"),
            };
            match step {
                FaultStep::Errors => {
                    let mut rates = self.errors.iter().map(|r| r.rate.as_percent());
                    let first = rates.next();
                    if let Some(rate) = first.filter(|&first| rates.all(|rate| rate == first)) {
                        part.push_str(&format!(" ({rate}%)"));
                    }
                }
                FaultStep::Mocks if self.block_unmocked => {
                    part.push_str(" (the unmocked blocked: 502)");
                }
                _ => {}
            }
            parts.push(part);
        }
        match self.llm_failures.len() {
            0 => {}
            1 => parts.push("1 language-model failure rule".to_owned()),
            n => parts.push(format!("{n} language-model failure rules")),
        }
        if let Some(rule) = &self.latency {
            parts.push(format!(
                "latency {}–{} ms",
                rule.delay.start().as_millis(),
                rule.delay.end().as_millis()
            ));
        }
        match parts.is_empty() {
            true => f.write_str("no faults"),
            false => f.write_str(&parts.join(", ")),
        }
    }
}

/// A step of a [`FaultPlan`] that can answer a request instead of the upstream.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum FaultStep {
    /// [`FaultPlan::auth`]: refuses `401` a request without an allowed API key.
    Auth,
    /// [`FaultPlan::mocks`] (and blocking the unmocked).
    Mocks,
    /// [`FaultPlan::crud_apis`]: answers from the data when an action matches.
    CrudApis,
    /// [`FaultPlan::rate_limits`]: counts every request that reaches it, refuses past a limit.
    RateLimits,
    /// [`FaultPlan::llm_rate_limits`]: refuses a completion request once a token budget is
    /// used up, and counts the tokens of the others from their responses.
    LanguageModelRateLimits,
    /// [`FaultPlan::errors`]: the first rule whose request matches draws its rate.
    Errors,
}

impl FaultStep {
    /// Every step, in the default order.
    pub const ALL: [FaultStep; 6] = [
        FaultStep::Auth,
        FaultStep::Mocks,
        FaultStep::CrudApis,
        FaultStep::RateLimits,
        FaultStep::LanguageModelRateLimits,
        FaultStep::Errors,
    ];

    /// What the plan holds for the step, for people: one and many.
    fn noun(self) -> (&'static str, &'static str) {
        match self {
            FaultStep::Auth => ("auth rule", "auth rules"),
            FaultStep::Mocks => ("mock", "mocks"),
            FaultStep::CrudApis => ("CRUD API", "CRUD APIs"),
            FaultStep::RateLimits => ("rate limit", "rate limits"),
            FaultStep::LanguageModelRateLimits => ("token budget", "token budgets"),
            FaultStep::Errors => ("error rule", "error rules"),
        }
    }

    /// The step's name in a configuration file (`order`): its section's key.
    pub fn key(self) -> &'static str {
        match self {
            FaultStep::Auth => "auth",
            FaultStep::Mocks => "mocks",
            FaultStep::CrudApis => "crudApis",
            FaultStep::RateLimits => "rateLimits",
            FaultStep::LanguageModelRateLimits => "llmRateLimits",
            FaultStep::Errors => "errors",
        }
    }
}

/// The order in which a request meets the steps that can answer: every [`FaultStep`] once.
///
/// # Examples
///
/// ```
/// use holdoff_proxy::fault::{FaultOrder, FaultStep};
///
/// // Dev Proxy's `apim-rate-limiting` lists its rate limit before its mocks: every mocked
/// // request is counted, and the fourth in a window is refused instead of mocked.
/// let order = FaultOrder::new([FaultStep::RateLimits]).unwrap();
/// assert_eq!(
///     order.steps(),
///     [
///         FaultStep::RateLimits,
///         FaultStep::Auth,
///         FaultStep::Mocks,
///         FaultStep::CrudApis,
///         FaultStep::LanguageModelRateLimits,
///         FaultStep::Errors
///     ]
/// );
/// assert_eq!(FaultOrder::default().steps(), FaultStep::ALL);
/// assert!(FaultOrder::new([FaultStep::Errors, FaultStep::Errors]).is_err());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FaultOrder([FaultStep; FaultStep::ALL.len()]);

impl FaultOrder {
    /// `first`, in its order, then every step it leaves out, in the default order.
    ///
    /// # Errors
    ///
    /// The step `first` names twice.
    pub fn new(first: impl IntoIterator<Item = FaultStep>) -> Result<FaultOrder, FaultStep> {
        let mut steps = Vec::with_capacity(FaultStep::ALL.len());
        for step in first {
            if steps.contains(&step) {
                return Err(step);
            }
            steps.push(step);
        }
        for step in FaultStep::ALL {
            if !steps.contains(&step) {
                steps.push(step);
            }
        }
        let mut order = FaultStep::ALL;
        order.copy_from_slice(&steps);
        Ok(FaultOrder(order))
    }

    /// Every step, in this order.
    pub fn steps(&self) -> &[FaultStep] {
        &self.0
    }

    /// Whether `before` comes before `after`.
    pub fn runs_before(&self, before: FaultStep, after: FaultStep) -> bool {
        let position = |step| self.0.iter().position(|known| *known == step);
        position(before) < position(after)
    }
}

impl Default for FaultOrder {
    fn default() -> FaultOrder {
        FaultOrder(FaultStep::ALL)
    }
}

/// Which requests a rule applies to. Only watched requests reach any rule.
#[derive(Clone, Debug)]
pub struct RequestMatch {
    /// The URL pattern (never an exclusion), matched against the whole absolute URL.
    pub url: WatchPattern,
    /// The method; any when `None`.
    pub method: Option<Method>,
    /// Text the body must contain; the body is read (up to a limit) only when URL and
    /// method already match.
    pub body_fragment: Option<String>,
}

/// Added latency.
#[derive(Clone, Debug)]
pub struct LatencyRule {
    /// Which requests; `None` for every watched one.
    pub url: Option<WatchPattern>,
    /// How often.
    pub rate: Rate,
    /// The delay, drawn uniformly from this range.
    pub delay: RangeInclusive<Duration>,
}

/// A mock: a fixed answer to matching requests.
#[derive(Clone, Debug)]
pub struct MockRule {
    /// Which requests.
    pub request: RequestMatch,
    /// Answer only the Nth request (from 1) that reaches the mocks of this URL pattern,
    /// numbered across the mocks that share it, as Dev Proxy numbers them; the others pass on.
    pub nth: Option<u64>,
    /// The answer.
    pub response: FaultOutcome,
}

/// A rate limit and what its refusals look like.
#[derive(Clone, Debug)]
pub struct RateLimitRule {
    /// Which requests are counted; `None` for every watched one.
    pub url: Option<WatchPattern>,
    /// The method counted; any when `None`.
    pub method: Option<Method>,
    /// The limit.
    pub limit: Limit,
    /// Per client, or one counter for everyone.
    pub scope: Scope,
    /// The headers sent on counted responses.
    pub headers: HeaderStyle,
    /// The headers are sent only once this share of the limit (percent, 0 to 100) is used:
    /// while what remains is at most `limit - limit * percent / 100`. 0 sends them on every
    /// counted response; a refusal always carries them.
    pub warning_threshold_percent: u8,
    /// How `*-Reset` is written.
    pub reset_format: ResetFormat,
    /// The answer past the limit; `None` for `429` with `Retry-After`. A `@dynamic` header in
    /// it is the time until capacity returns, rounded up.
    pub when_exceeded: Option<ErrorResponse>,
}

/// A token budget of a language-model API (Dev Proxy's LanguageModelRateLimitingPlugin):
/// it counts `POST`s whose body is a completion-like request (`messages`, `prompt`, or the
/// Responses API's `input`), the tokens each response says it used.
#[derive(Clone, Debug)]
pub struct LlmRateLimitRule {
    /// Which requests are counted; `None` for every watched one.
    pub url: Option<WatchPattern>,
    /// The budget.
    pub budget: TokenBudget,
    /// Per client, or one budget for everyone.
    pub scope: Scope,
    /// The header the refusal's wait goes in, in seconds (Dev Proxy's `headerRetryAfter`).
    pub retry_after_header: http::HeaderName,
    /// The answer once a budget is used up; `None` for `429`, the wait in
    /// `retry_after_header`, and OpenAI's error body. A `@dynamic` header in it is the time
    /// until the window ends, rounded up.
    pub when_exceeded: Option<ErrorResponse>,
}

/// Who shares a rate-limit counter.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum Scope {
    /// Each client identity has its own.
    #[default]
    Client,
    /// Everyone shares one.
    Shared,
}

/// An error rule.
#[derive(Clone, Debug)]
pub struct ErrorRule {
    /// Which requests.
    pub request: RequestMatch,
    /// How often a matching request fails (`--failure-rate` replaces it).
    pub rate: Rate,
    /// What a failure gets, one drawn uniformly per failure. Never empty.
    pub outcomes: Vec<FaultOutcome>,
}

/// What a faulted request gets.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub enum FaultOutcome {
    /// This response, `@dynamic` headers filled in.
    Respond(ErrorResponse),
    /// A network fault.
    Network(NetworkFault),
    /// Mocks only: a language model's answer to an OpenAI-style call (chat completions,
    /// completions, responses), from a fixed text; a request that is no such call is not
    /// answered (Dev Proxy's OpenAIMockResponsePlugin, without the local model).
    LanguageModel(super::LanguageModelReply),
}

/// A network fault.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum NetworkFault {
    /// Drop the request without an answer: the connection is reset, with a TCP RST
    /// (HTTP/1.1), or the stream (HTTP/2).
    Reset,
    /// Hold the request without an answer until the client gives up, or `for` has passed
    /// (then as `Reset`).
    Hang {
        /// The most it is held.
        r#for: Duration,
    },
    /// Forward the request, then cut the upstream's body after this many bytes (`None`: half
    /// its `Content-Length`, or 1024 when unknown) and close the connection.
    Truncate {
        /// Bytes sent before the cut.
        after: Option<u64>,
    },
    /// Forward the request, then send the upstream's body at this many bytes per second.
    SlowBody {
        /// The rate.
        bytes_per_second: u64,
    },
}

impl RequestMatch {
    /// Every request to URLs matching `url`, any method, any body.
    pub fn url(url: WatchPattern) -> RequestMatch {
        RequestMatch {
            url,
            method: None,
            body_fragment: None,
        }
    }

    /// Whether a request's method and URL match (the body aside).
    pub(crate) fn head_matches(&self, method: &Method, url: &str) -> bool {
        self.method.as_ref().is_none_or(|want| want == method) && self.url.matches_url(url)
    }

    /// Whether deciding this match needs the body of a request whose head matches.
    pub(crate) fn needs_body(&self, method: &Method, url: &str) -> bool {
        self.body_fragment.is_some() && self.head_matches(method, url)
    }

    /// Whether `body` has the fragment, if there is one; `None` is a body not read (or too
    /// large to read), which no fragment matches.
    pub(crate) fn body_matches(&self, body: Option<&[u8]>) -> bool {
        match (&self.body_fragment, body) {
            (None, _) => true,
            (Some(fragment), Some(body)) => contains(body, fragment.as_bytes()),
            (Some(_), None) => false,
        }
    }
}

impl RateLimitRule {
    /// Whether a response that leaves `remaining` carries the rate-limit headers
    /// ([`warning_threshold_percent`](Self::warning_threshold_percent)).
    pub fn warns(&self, remaining: u64) -> bool {
        let limit = self.limit.limit;
        let quiet = limit.saturating_mul(u64::from(self.warning_threshold_percent)) / 100;
        remaining <= limit.saturating_sub(quiet)
    }

    /// Whether this limit counts a request with `method` to `url`.
    pub(crate) fn counts(&self, method: &Method, url: &str) -> bool {
        self.method.as_ref().is_none_or(|want| want == method)
            && self
                .url
                .as_ref()
                .is_none_or(|pattern| pattern.matches_url(url))
    }
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    needle.is_empty()
        || haystack
            .windows(needle.len())
            .any(|window| window == needle)
}

impl FaultPlan {
    /// Every error rule's rate replaced by `rate` (`--failure-rate`).
    pub fn with_failure_rate(mut self, rate: Rate) -> FaultPlan {
        for rule in &mut self.errors {
            rule.rate = rate;
        }
        self
    }

    /// Only the error responses whose status is in `allowed` (Dev Proxy's `--allowed-errors`):
    /// each error rule keeps those of its outcomes, network faults are dropped, and a rule
    /// left with none is removed. An empty `allowed` changes nothing.
    pub fn with_allowed_statuses(mut self, allowed: &[u16]) -> FaultPlan {
        if allowed.is_empty() {
            return self;
        }
        for rule in &mut self.errors {
            rule.outcomes.retain(|outcome| match outcome {
                FaultOutcome::Respond(response) => allowed.contains(&response.status.as_u16()),
                FaultOutcome::Network(_) | FaultOutcome::LanguageModel(_) => false,
            });
        }
        self.errors.retain(|rule| !rule.outcomes.is_empty());
        self
    }
}
