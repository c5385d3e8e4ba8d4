//! Added latency: `latency`.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

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
