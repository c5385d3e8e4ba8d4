//! `llmFailures`: language-model calls forwarded with an instruction to fail.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Calls to a language model's API (OpenAI's chat completions, completions, responses) that
/// are forwarded with one more instruction, asking the model to fail in a way drawn from
/// `failures`, as Dev Proxy's LanguageModelFailurePlugin does: the app meets a plausible but
/// wrong answer, a hedge, a contradiction. Other requests to the URL go on as they are.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RawLlmFailure {
    /// The URL pattern of the API's calls, e.g. `https://api.openai.com/*`.
    pub url: String,
    /// The kinds of failure drawn from, by Dev Proxy's names: AmbiguityVagueness,
    /// BiasStereotyping, CircularReasoning, ContradictoryInformation, FailureDisclaimHedge,
    /// FailureFollowInstructions, Hallucination, IncorrectFormatStyle, Misinterpretation,
    /// OutdatedInformation, OverSpecification, OverconfidenceUncertainty, Overgeneralization,
    /// OverreliancePriorConversation, PlausibleIncorrect. Default: all of them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub failures: Vec<String>,
}
