//! Token budgets of language-model APIs: `llmRateLimits`.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::rate_limits::RawScope;
use super::response::RawResponse;

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
