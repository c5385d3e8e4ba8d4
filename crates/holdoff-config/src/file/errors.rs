//! Error responses injected at a rate: `errors`, and its data files.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::response::{RawRequestMatch, RawResponse};

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
    /// A rule that fails a Microsoft Graph JSON batch (`POST …/$batch`) fails each request in
    /// it with an error of the rule that matches that request, the batch answered `200`, as
    /// Dev Proxy's GraphRandomErrorPlugin does. Default false: the batch fails as a whole.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer_batches: Option<bool>,
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
