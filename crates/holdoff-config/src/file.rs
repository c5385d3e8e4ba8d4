//! The configuration file as written: `holdoff.json` (comments allowed) or `holdoff.yaml`.
//!
//! These are the *raw* types, the first of three stages: raw (what serde reads, every field as
//! the user spelled it) → validated (each value checked, errors naming the key path) →
//! compiled ([`FaultPlan`](holdoff_proxy::fault::FaultPlan), what the proxy runs). The JSON
//! Schema printed by `holdoff config schema` is generated from them.
//!
//! Keys are camelCase, as in Microsoft Dev Proxy's files. The error and mock lists have the
//! same shape as Dev Proxy's errors and mocks files, so those files can be used as they are.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A holdoff configuration file.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schemars(title = "holdoff configuration")]
pub struct RawConfig {
    /// The JSON Schema this file follows (ignored; editors use it).
    #[serde(rename = "$schema", default, skip_serializing_if = "Option::is_none")]
    pub schema: Option<String>,

    /// Which URLs the proxy watches (and, for HTTPS, intercepts): `*` wildcards, a leading
    /// `!` excludes, the first match wins. `--urls-to-watch` on the command line replaces
    /// this list.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub urls_to_watch: Option<Vec<String>>,

    /// The seed of every random choice the faults make; the same seed and the same request
    /// sequence give the same faults. Default: a fresh seed, logged at start. `--seed` wins.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,

    /// How a `@dynamic` `Retry-After` is written. Default `delay`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_after_form: Option<RawRetryAfterForm>,

    /// How the judge keys and penalises retries.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub judge: Option<RawJudge>,

    /// Error responses injected at a rate (Dev Proxy's GenericRandomErrorPlugin).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub errors: Option<RawErrors>,

    /// Rate limits (Dev Proxy's RateLimitingPlugin, with more algorithms and header styles).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rate_limits: Vec<RawRateLimit>,

    /// API keys the watched API wants (Dev Proxy's AuthPlugin, API-key mode): a request without
    /// an allowed one gets `401`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub auth: Vec<RawAuth>,

    /// Token budgets of language-model APIs (Dev Proxy's LanguageModelRateLimitingPlugin).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub llm_rate_limits: Vec<RawLlmRateLimit>,

    /// Added latency (Dev Proxy's LatencyPlugin).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency: Option<RawLatency>,

    /// Fixed responses for matching requests (Dev Proxy's MockResponsePlugin).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mocks: Option<RawMocks>,

    /// In-memory REST APIs over a JSON array (Dev Proxy's CrudApiPlugin): each answers the
    /// requests its actions match from its own copy of the data, which lives as long as the
    /// proxy (or until a data file changes) and is never written back.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub crud_apis: Vec<RawCrudApi>,

    /// The order in which a watched request meets the faults that can answer it; the first
    /// that answers wins, and the later ones never see the request (so a rate limit after the
    /// mocks does not count mocked requests). Steps left out follow in the default order,
    /// `["auth", "mocks", "crudApis", "rateLimits", "llmRateLimits", "errors"]`. Latency always
    /// comes first: it delays a request and never answers it. `import-devproxy` writes Dev Proxy's plugin
    /// order here.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub order: Option<Vec<RawFaultStep>>,

    /// Read `@file` bodies from any folder. By default a body file must be under the folder
    /// of this file once symbolic links are followed, so that a configuration cannot serve
    /// files from elsewhere on the machine (`@../../etc/passwd`). Either way a body file must
    /// be a regular file of at most 16 MiB. Default false.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body_files_anywhere: Option<bool>,

    /// Where the judge's windows and the rate limiters' counters live when several proxy
    /// replicas share them. Default: in this proxy's memory only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<RawState>,
}

/// State shared by several proxy replicas, in Redis.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RawState {
    /// The Redis URL: `redis://[[USER]:PASSWORD@]HOST[:PORT][/DB]`, or `rediss://…` for TLS.
    /// The password never appears in logs.
    pub redis: String,
    /// Put before every key, so that proxies in front of different APIs can share one Redis
    /// without sharing windows. Default `holdoff:`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefix: Option<String>,
    /// How long one Redis operation may take before it counts as a failure. Default 500.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
    /// What the proxy does while Redis fails: `fail-open` (default: judge and rate-limit with
    /// this replica's own state) or `fail-closed` (answer every watched request `503`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_failure: Option<RawOnFailure>,
    /// With `fail-closed`: the `Retry-After` of each `503`, in seconds. Default 5.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hold_seconds: Option<u64>,
    /// For `rediss://`: the CA certificate (PEM file, relative to this file) to verify the
    /// Redis server against, instead of the system's roots.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca_file: Option<String>,
}

/// A fault that can answer a request, in `order`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum RawFaultStep {
    /// `auth`.
    Auth,
    /// `mocks` (and `blockUnmocked`).
    Mocks,
    /// `crudApis`.
    CrudApis,
    /// `rateLimits`.
    RateLimits,
    /// `llmRateLimits`.
    LlmRateLimits,
    /// `errors`.
    Errors,
}

/// What the proxy does while its shared state fails.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum RawOnFailure {
    /// Judge and rate-limit with this replica's own state, and say so in the log.
    FailOpen,
    /// Answer every watched request `503` with `Retry-After`, without forwarding it.
    FailClosed,
}

/// How a `@dynamic` `Retry-After` is written.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum RawRetryAfterForm {
    /// delay-seconds: `Retry-After: 5`.
    Delay,
    /// An IMF-fixdate, with a matching `Date` header.
    HttpDate,
    /// Either, drawn per response.
    Mixed,
}

/// The judge's settings.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RawJudge {
    /// What a window is keyed by: `client-method-url` (default), `method-url`, `url`, `host`
    /// (Dev Proxy's one wait per host), `workload` (Dev Proxy's one wait per Microsoft Graph
    /// workload: the path's second segment, `users` in `/v1.0/users/42`) or `header:NAME`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    /// What a premature retry does to its window: `none` (default) or `sliding` (the full
    /// wait starts over).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub penalty: Option<RawPenalty>,
}

/// What a premature retry does to its window.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum RawPenalty {
    /// The window keeps its permitted time.
    None,
    /// The full wait starts over from the premature request.
    Sliding,
}

/// Error responses injected at a rate.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RawErrors {
    /// Percent of matching requests that fail, 0–100 (0 never, 100 always). Default 50.
    /// A rule's own `rate` wins; `--failure-rate` overrides both.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0, max = 100))]
    pub rate: Option<f64>,
    /// The range of seconds a bare `@dynamic` draws from, `[min, max]`. Default `[2, 5]`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dynamic_range: Option<[u64; 2]>,
    /// The rules, tried in order; the first whose request matches decides.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub errors: Vec<RawErrorRule>,
    /// A file with more rules, `{"errors": [...]}` (JSON or YAML; Dev Proxy's errors files
    /// work as they are), relative to this file. Reloaded when it changes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
}

/// A data file of error rules: `{"errors": [...]}`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RawErrorsFile {
    /// The JSON Schema this file follows (ignored).
    #[serde(rename = "$schema", default, skip_serializing_if = "Option::is_none")]
    pub schema: Option<String>,
    /// The rules.
    #[serde(default)]
    pub errors: Vec<RawErrorRule>,
}

/// One error rule: which requests, how often, and what they get.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RawErrorRule {
    /// Which requests the rule applies to.
    pub request: RawRequestMatch,
    /// Percent of matching requests that fail; default the `errors.rate`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0, max = 100))]
    pub rate: Option<f64>,
    /// What a failed request gets, one drawn at random per failure.
    pub responses: Vec<RawResponse>,
}

/// Which requests a rule applies to.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RawRequestMatch {
    /// A URL pattern with `*` wildcards, matched against the whole URL
    /// (`https://api.example.com/v1/*`).
    pub url: String,
    /// The method, any when omitted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub method: Option<String>,
    /// Text the request body must contain.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body_fragment: Option<String>,
    /// Mocks only: answer only the Nth matching request (counted from 1), and let the others
    /// through.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub nth: Option<u64>,
}

/// A response to send, or a network fault to cause.
///
/// Either `statusCode` (with optional `headers` and `body`), or `network` (which acts on the
/// connection or on the upstream's response).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RawResponse {
    /// The status, 100–599.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 100, max = 599))]
    pub status_code: Option<u16>,
    /// The headers, as a list of `{"name", "value"}` (Dev Proxy's form) or an object. A
    /// `Retry-After` of `@dynamic` or `@dynamic=N` is filled in per response.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub headers: Option<RawHeaders>,
    /// The body: a string is sent as text (`@file.json` sends that file, relative to the file
    /// this response is written in); anything else is sent as JSON. A `Content-Type` is added
    /// unless `headers` has one: `text/plain; charset=utf-8` for text, `application/json` for
    /// JSON, and for a file by its extension (`.json`, `.txt`, `.html`, `.xml`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body: Option<serde_json::Value>,
    /// A network fault instead of a response.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network: Option<RawNetworkFault>,
    /// `truncate`: bytes of the upstream's body to send before cutting it. Default: half the
    /// body, or 1024 bytes when its length is unknown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub truncate_after: Option<u64>,
    /// `slow-body`: bytes per second. Default 1024.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub bytes_per_second: Option<u64>,
    /// `hang`: seconds to hold the request before closing it, if the client has not given up
    /// by then. Default 300.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub hang_seconds: Option<u64>,
}

/// Headers as a list of name/value pairs (Dev Proxy's form, repeats allowed) or an object.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum RawHeaders {
    /// `[{"name": "Retry-After", "value": "@dynamic"}]`.
    List(Vec<RawHeader>),
    /// `{"Retry-After": "@dynamic"}`.
    Map(BTreeMap<String, String>),
}

/// One header.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawHeader {
    /// The name.
    pub name: String,
    /// The value.
    pub value: String,
}

/// A network fault.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum RawNetworkFault {
    /// Drop the connection without an answer.
    Reset,
    /// Hold the request without answering until the client gives up.
    Hang,
    /// Forward the request, then cut the upstream's body short.
    Truncate,
    /// Forward the request, then send the upstream's body slowly.
    SlowBody,
}

/// A rate limit.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RawRateLimit {
    /// A URL pattern for the requests counted; default every watched URL.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// The method counted, any when omitted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub method: Option<String>,
    /// `fixed-window` (default), `fixed-window-from-first-request` (Dev Proxy's),
    /// `sliding-window` or `token-bucket`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub algorithm: Option<RawAlgorithm>,
    /// Units per window (tokens in a full bucket).
    #[schemars(range(min = 1))]
    pub limit: u64,
    /// The window in seconds (the time an empty bucket takes to refill).
    #[schemars(range(min = 1))]
    pub window_seconds: u64,
    /// Units one request costs. Default 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub cost: Option<u64>,
    /// `client` (default: each client has its own counter) or `shared`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<RawScope>,
    /// The headers sent: `ietf` (default), `draft`, `x-ratelimit` or `none`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub headers: Option<RawHeaderStyle>,
    /// How `*-Reset` is written: `seconds-left` (default) or `epoch-seconds`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reset_format: Option<RawResetFormat>,
    /// Send the rate-limit headers only once this share of the limit (in percent) is used, as
    /// Dev Proxy's `warningThresholdPercent` does: a response carries them when what remains
    /// is at most `limit - limit * percent / 100` (rounded down). Default 0: on every counted
    /// response. A refusal always carries them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(max = 100))]
    pub warning_threshold_percent: Option<u8>,
    /// The response past the limit, instead of 429 + `Retry-After` (e.g. GitHub's 403). A
    /// `@dynamic` `Retry-After` in it is the time until capacity returns.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub when_exceeded: Option<RawResponse>,
}

/// A token budget of a language-model API: prompt and completion tokens per window, counted
/// from each response's `usage` (or estimated, for a stream without one).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RawLlmRateLimit {
    /// A URL pattern for the requests counted; default every watched URL. Only `POST`s whose
    /// body is a completion request (`messages`, `prompt`, or the Responses API's `input`)
    /// are counted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// Prompt (input) tokens per window; no prompt limit when omitted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub prompt_token_limit: Option<u64>,
    /// Completion (output) tokens per window; no completion limit when omitted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub completion_token_limit: Option<u64>,
    /// How long a window lasts, in seconds, from the first request it counts; the first
    /// request after it ends starts the next. Default 60.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub reset_time_window_seconds: Option<u64>,
    /// `client` (default: each client has its own budget) or `shared`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<RawScope>,
    /// The header the refusal's wait is sent in, in seconds. Default `Retry-After`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub header_retry_after: Option<String>,
    /// The response once a budget is used up, instead of 429 with the wait and OpenAI's
    /// `rate_limit_exceeded` error. A `@dynamic` header in it is the time until the window
    /// ends.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub when_exceeded: Option<RawResponse>,
}

/// Requests that must carry an API key.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RawAuth {
    /// A URL pattern for the requests checked; default every watched URL.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// An API key, and where it is looked for (give this or `bearer`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_key: Option<RawApiKey>,
    /// A bearer token (a JWT) and the claims it must have (give this or `apiKey`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bearer: Option<RawBearer>,
}

/// The claims a bearer token must have; a list left out or empty allows any value. The
/// token's signature is not checked (that needs the identity provider's keys).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RawBearer {
    /// `iss`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub issuer: Option<String>,
    /// `aud`: one of these.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allowed_audiences: Vec<String>,
    /// `tid`: one of these.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allowed_tenants: Vec<String>,
    /// `appid` or `azp`: one of these.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allowed_applications: Vec<String>,
    /// `oid`: one of these.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allowed_principals: Vec<String>,
    /// `roles`: one of these in it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub roles: Vec<String>,
    /// `scp`: one of these in it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub scopes: Vec<String>,
    /// Whether `exp` and `nbf` are checked. Default true.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub validate_lifetime: Option<bool>,
}

/// An API key: where a request carries it, and the keys let through.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RawApiKey {
    /// Where the key is looked for, in order; the first one the request has decides.
    pub parameters: Vec<RawKeyParameter>,
    /// The keys let through.
    pub allowed_keys: Vec<String>,
}

/// One place a request may carry its key.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawKeyParameter {
    /// `header`, `query` or `cookie`.
    #[serde(rename = "in")]
    pub location: RawKeyIn,
    /// The header, query parameter or cookie name.
    pub name: String,
}

/// Where a key is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum RawKeyIn {
    /// A request header.
    Header,
    /// A query parameter.
    Query,
    /// A cookie.
    Cookie,
}

/// A rate-limiting algorithm.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum RawAlgorithm {
    /// `limit` per window; the count resets when the window ends. Windows follow one another
    /// from the proxy's start.
    FixedWindow,
    /// `limit` per window, a window starting at the first request after the last one ended
    /// (per counter): Microsoft Dev Proxy's RateLimitingPlugin.
    FixedWindowFromFirstRequest,
    /// The previous window's count, weighted by its overlap, plus the current one's.
    SlidingWindow,
    /// A bucket of `limit` tokens refilled continuously.
    TokenBucket,
}

/// Who shares a counter.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum RawScope {
    /// Each client identity has its own counter.
    Client,
    /// One counter for everyone.
    Shared,
}

/// Which rate-limit headers are sent.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum RawHeaderStyle {
    /// `RateLimit-Policy` and `RateLimit`, the IETF structured fields as
    /// draft-ietf-httpapi-ratelimit-headers-11 writes them: `RateLimit-Policy:
    /// "default";q=100;w=60` (the limit and the window in seconds) and `RateLimit:
    /// "default";r=0;t=12` (units remaining, seconds until more quota; on a refusal, the
    /// `Retry-After` sent with it).
    Ietf,
    /// `RateLimit-Limit`, `RateLimit-Remaining`, `RateLimit-Reset`.
    Draft,
    /// `X-RateLimit-Limit`, `X-RateLimit-Remaining`, `X-RateLimit-Reset`.
    XRatelimit,
    /// None.
    None,
}

/// How a reset time is written.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum RawResetFormat {
    /// Seconds until the reset.
    SecondsLeft,
    /// Unix epoch seconds.
    EpochSeconds,
}

/// Added latency.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RawLatency {
    /// The least delay, in milliseconds.
    pub min_ms: u64,
    /// The most delay, in milliseconds (drawn uniformly between the two).
    pub max_ms: u64,
    /// A URL pattern for the requests delayed; default every watched URL.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// Percent of matching requests delayed. Default 100.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0, max = 100))]
    pub rate: Option<f64>,
}

/// Mocked responses.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RawMocks {
    /// The mocks, tried in order; the first that matches answers.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mocks: Vec<RawMock>,
    /// A file with more mocks, `{"mocks": [...]}` (JSON or YAML; Dev Proxy's mocks files work
    /// as they are), relative to this file. Reloaded when it changes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    /// Answer watched requests no mock matches with `502` instead of forwarding them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub block_unmocked: Option<bool>,
}

/// A data file of mocks: `{"mocks": [...]}`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RawMocksFile {
    /// The JSON Schema this file follows (ignored).
    #[serde(rename = "$schema", default, skip_serializing_if = "Option::is_none")]
    pub schema: Option<String>,
    /// The mocks.
    #[serde(default)]
    pub mocks: Vec<RawMock>,
}

/// One mock.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RawMock {
    /// Which requests it answers.
    pub request: RawRequestMatch,
    /// The answer.
    pub response: RawResponse,
}

/// An in-memory REST API over a JSON array.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RawCrudApi {
    /// The URL the actions' `url`s are relative to, such as
    /// `https://api.example.com/v1/customers`. It must be watched for the API to answer.
    pub base_url: String,
    /// The data: a file holding a JSON array of items, relative to this file. Reloaded (and
    /// the API's changes forgotten) when it changes. Default: the API starts empty.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data_file: Option<String>,
    /// The requests the API answers, tried in order; the first whose method and URL match
    /// answers. A watched request none matches passes on.
    pub actions: Vec<RawCrudAction>,
}

/// One action of a CRUD API.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RawCrudAction {
    /// What it does.
    pub action: RawCrudActionKind,
    /// The path after `baseUrl`, with `{name}` placeholders that each match one path segment
    /// (or a query value): `/{customer-id}`. Default: `baseUrl` itself.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// The method. Default: `POST` for create, `PATCH` for merge, `PUT` for update, `DELETE`
    /// for delete, `GET` otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub method: Option<String>,
    /// A JSONPath (RFC 9535) over the data array that selects the item(s) the action works on,
    /// with the URL's placeholders filled in: `$[?@.id == {customer-id}]`. Dev Proxy's
    /// `$.[?(...)]` form is read too. A placeholder outside quotes that is not a number becomes
    /// a string. Required by every action but getAll and create.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub query: Option<String>,
}

/// What a CRUD action does.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum RawCrudActionKind {
    /// `200` with the whole array.
    #[default]
    GetAll,
    /// `200` with the first item the query selects, `404` when none.
    GetOne,
    /// `200` with an array of every item the query selects (maybe empty).
    GetMany,
    /// Appends the request body (a JSON object) to the array; `201` with it.
    Create,
    /// Merges the request body (a JSON object) into the first item selected; `204`, or `404`.
    Merge,
    /// Replaces the first item selected with the request body; `204`, or `404`.
    Update,
    /// Removes the first item selected; `204`, or `404`.
    Delete,
}
