//! The order in which a watched request meets the faults that can answer it: `order`.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

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
