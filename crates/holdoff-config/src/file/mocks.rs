//! Mocked responses: `mocks`, and its data files.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::response::{RawRequestMatch, RawResponse};

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
    /// Answer Microsoft Graph JSON batches (`POST …/$batch`) request by request from these
    /// mocks, each request's answer its mock's (chosen as if it were sent alone) or `502`
    /// when none matches, as Dev Proxy's GraphMockResponsePlugin does. Default false.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer_batches: Option<bool>,
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
