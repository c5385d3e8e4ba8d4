//! `llmMocks`: language-model API calls answered without a model.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Calls to a language model's API answered from a fixed text, without a model (Dev Proxy's
/// OpenAIMockResponsePlugin answers them with a local one): OpenAI's chat completions,
/// completions and responses APIs, streamed or not, with estimated token usage. A `POST` to
/// the URL whose body is no such call goes on as if this were not there.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RawLlmMock {
    /// The URL pattern of the API's calls, e.g. `https://api.openai.com/*`.
    pub url: String,
    /// What the model answers; `{prompt}` stands for the last user message. Default: `This
    /// is a mock response from holdoff.`
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
}
