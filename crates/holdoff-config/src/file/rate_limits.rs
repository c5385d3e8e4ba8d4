//! Rate limits: `rateLimits`.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::response::RawResponse;

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
