//! The configuration file as written: `holdoff.json` (comments allowed) or `holdoff.yaml`.
//!
//! These are the *raw* types, the first of three stages: raw (what serde reads, every field as
//! the user spelled it) → validated (each value checked, errors naming the key path) →
//! compiled ([`FaultPlan`](holdoff_proxy::fault::FaultPlan), what the proxy runs). The JSON
//! Schema printed by `holdoff config schema` is generated from them.
//!
//! Keys are camelCase, as in Microsoft Dev Proxy's files. The error and mock lists have the
//! same shape as Dev Proxy's errors and mocks files, so those files can be used as they are.
//!
//! One file a family of keys: `errors`, `rate_limits`, `llm_rate_limits`, `mocks`,
//! `crud_apis`, `auth`, `latency`, `judge`, `state` and `order`; `response` holds the request
//! match and the response that errors and mocks share. This file holds the file's root,
//! [`RawConfig`], and re-exports the rest.

mod auth;
mod crud_apis;
mod errors;
mod judge;
mod latency;
mod llm_failures;
mod llm_mocks;
mod llm_rate_limits;
mod mock_request;
mod mocks;
mod order;
mod rate_limits;
mod response;
mod state;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub use auth::{RawApiKey, RawAuth, RawBearer, RawKeyIn, RawKeyParameter};
pub use crud_apis::{RawCrudAction, RawCrudActionKind, RawCrudApi};
pub use errors::{RawErrorRule, RawErrors, RawErrorsFile};
pub use judge::{RawJudge, RawPenalty, RawRetryAfterForm};
pub use latency::RawLatency;
pub use llm_failures::RawLlmFailure;
pub use llm_mocks::RawLlmMock;
pub use llm_rate_limits::RawLlmRateLimit;
pub use mock_request::RawMockRequest;
pub use mocks::{RawMock, RawMocks, RawMocksFile};
pub use order::RawFaultStep;
pub use rate_limits::{RawAlgorithm, RawHeaderStyle, RawRateLimit, RawResetFormat, RawScope};
pub use response::{RawHeader, RawHeaders, RawNetworkFault, RawRequestMatch, RawResponse};
pub use state::{RawOnFailure, RawState};

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

    /// Language-model API calls answered from a fixed text, without a model (Dev Proxy's
    /// OpenAIMockResponsePlugin): chat completions, completions and responses, after the
    /// `mocks`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub llm_mocks: Vec<RawLlmMock>,

    /// Language-model calls forwarded with an instruction to fail in some way (Dev Proxy's
    /// LanguageModelFailurePlugin), once every other fault has let them through.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub llm_failures: Vec<RawLlmFailure>,

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

    /// A request the proxy sends when asked (`POST /proxy/mockRequest` on the control API),
    /// as Dev Proxy's MockRequestPlugin does: e.g. a webhook's call to the app under test.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mock_request: Option<RawMockRequest>,
}
