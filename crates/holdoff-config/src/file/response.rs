//! What a rule matches and what it answers, shared by `errors`, `mocks` and the refusals of
//! the rate limits.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

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
    /// Mocks only: answer only the Nth request to this URL pattern (counted from 1 across the
    /// mocks that share the pattern, as Dev Proxy counts), and let the others through.
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
