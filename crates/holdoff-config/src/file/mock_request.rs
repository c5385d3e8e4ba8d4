//! `mockRequest`: a request the proxy sends when asked, as Dev Proxy's MockRequestPlugin does.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::RawHeader;

/// A request the proxy sends when asked to (`POST /proxy/mockRequest` on the control API),
/// as Dev Proxy's MockRequestPlugin sends one: e.g. the call a webhook would make to the app
/// under test.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RawMockRequest {
    /// Where to send it: an absolute `http://` or `https://` URL.
    pub url: String,
    /// The method. Default POST, as in Dev Proxy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub method: Option<String>,
    /// Its headers, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub headers: Vec<RawHeader>,
    /// Its body: a string is sent as it is (with the `content-type` header given, if any),
    /// anything else as JSON (`application/json`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body: Option<Value>,
}
