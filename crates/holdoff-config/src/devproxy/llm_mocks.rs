//! OpenAIMockResponsePlugin: holdoff's `llmMocks`, one per URL the plugin watches.

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
