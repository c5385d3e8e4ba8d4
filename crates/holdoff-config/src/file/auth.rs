//! Requests that must carry an API key or a bearer token: `auth`.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

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
