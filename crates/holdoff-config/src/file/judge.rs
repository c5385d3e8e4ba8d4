//! The judge of retries (`judge`), and how a `@dynamic` `Retry-After` is written
//! (`retryAfterForm`).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

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
