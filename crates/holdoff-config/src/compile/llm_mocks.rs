//! `llmMocks`: language-model calls answered from a fixed text, as mocks.

use holdoff_proxy::fault::{FaultOutcome, LanguageModelReply, MockRule, RequestMatch};
use http::Method;

use super::matching::Exclusion;
use super::{Compiler, WrittenIn};
use crate::error::{index, key};
use crate::file::RawLlmMock;

/// What an `llmMocks` entry answers without a `text`.
pub const DEFAULT_LLM_TEXT: &str = "This is a mock response from holdoff.";

impl Compiler {
    /// Each of `mocks` as a mock of `POST`s to its URL, added to `rules` (after the other
    /// mocks, which answer first).
    pub(super) fn llm_mocks(
        &mut self,
        at: WrittenIn<'_>,
        mocks: &[RawLlmMock],
        rules: &mut Vec<MockRule>,
    ) {
        for (i, mock) in mocks.iter().enumerate() {
            let path = index("llmMocks", i);
            let Some(url) = self.pattern(at, key(&path, "url"), &mock.url, Exclusion::Refused)
            else {
                continue;
            };
            rules.push(MockRule {
                request: RequestMatch {
                    url,
                    method: Some(Method::POST),
                    body_fragment: None,
                },
                nth: None,
                response: FaultOutcome::LanguageModel(LanguageModelReply {
                    text: mock
                        .text
                        .clone()
                        .unwrap_or_else(|| DEFAULT_LLM_TEXT.to_owned()),
                }),
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compile::tests::compiled;

    #[test]
    fn each_entry_is_a_mock_of_posts_after_the_others() {
        let compiled = compiled(
            r#"{"mocks": {"mocks": [{"request": {"url": "https://api.openai.com/v1/models"},
                                     "response": {"statusCode": 200}}]},
                "llmMocks": [{"url": "https://api.openai.com/*"},
                             {"url": "https://llm.example/*", "text": "Echo: {prompt}"}]}"#,
        );
        let mocks = &compiled.plan.mocks;
        assert_eq!(mocks.len(), 3);
        assert!(matches!(mocks[0].response, FaultOutcome::Respond(_)));
        let FaultOutcome::LanguageModel(reply) = &mocks[1].response else {
            panic!("a language model")
        };
        assert_eq!(reply.text, DEFAULT_LLM_TEXT);
        assert_eq!(mocks[1].request.method, Some(Method::POST));
        let FaultOutcome::LanguageModel(reply) = &mocks[2].response else {
            panic!("a language model")
        };
        assert_eq!(reply.text, "Echo: {prompt}");
    }
}
