//! OpenAIMockResponsePlugin and LanguageModelFailurePlugin: holdoff's `llmMocks` and
//! `llmFailures`, one per URL the plugin watches.

use super::doc::Doc;
use super::importer::{Importer, Plugin};
use crate::compile::DEFAULT_LLM_TEXT;
use crate::file::RawLlmMock;

impl Importer {
    /// Dev Proxy answers with a local language model (Ollama, …); holdoff answers from a
    /// fixed text, and says so. The plugin has no settings of its own.
    pub(super) fn llm_mocks_plugin(
        &mut self,
        _: &mut Doc,
        plugin: &Plugin<'_>,
        _: &mut Vec<String>,
    ) {
        self.note(format!(
            "{}: holdoff answers OpenAI's chat completions, completions and responses calls \
             from a fixed text (\"{DEFAULT_LLM_TEXT}\"; set llmMocks[].text), not from a local \
             language model, with estimated token usage; the calls never reach the upstream.",
            plugin.label
        ));
        for url in plugin.urls {
            self.config.llm_mocks.push(RawLlmMock {
                url: url.clone(),
                text: None,
            });
        }
        self.answers(plugin);
    }
}

/// LanguageModelFailurePlugin's settings.
#[derive(Default, serde::Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
struct DpLlmFailurePlugin {
    #[serde(rename = "$schema")]
    _schema: Option<super::keys::Unread>,
    failures: Option<Vec<String>>,
}

impl Importer {
    /// LanguageModelFailurePlugin: `llmFailures`, one per URL the plugin watches, with its
    /// `failures` (every kind when it names none, as in Dev Proxy).
    pub(super) fn llm_failure_plugin(
        &mut self,
        doc: &mut Doc,
        plugin: &Plugin<'_>,
        unknown: &mut Vec<String>,
    ) {
        let Some(settings) = self.settings::<DpLlmFailurePlugin>(doc, plugin, unknown) else {
            return;
        };
        self.note(format!(
            "{}: holdoff adds its own instruction for each kind of failure to the call (Dev \
             Proxy reads its prompt files); the model's answer is the upstream's.",
            plugin.label
        ));
        for url in plugin.urls {
            self.config.llm_failures.push(crate::file::RawLlmFailure {
                url: url.clone(),
                failures: settings.failures.clone().unwrap_or_default(),
            });
        }
    }
}
