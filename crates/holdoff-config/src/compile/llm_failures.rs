//! `llmFailures`: language-model calls forwarded with an instruction to fail.

use holdoff_proxy::fault::{LlmFailureRule, RequestMatch, failure_names};
use http::Method;

use super::matching::Exclusion;
use super::{Compiler, WrittenIn};
use crate::error::{index, key};
use crate::file::RawLlmFailure;

impl Compiler {
    pub(super) fn llm_failures(
        &mut self,
        at: WrittenIn<'_>,
        raw: &[RawLlmFailure],
        rules: &mut Vec<LlmFailureRule>,
    ) {
        for (i, rule) in raw.iter().enumerate() {
            let path = index("llmFailures", i);
            let url = self.pattern(at, key(&path, "url"), &rule.url, Exclusion::Refused);
            let mut failures = Vec::new();
            let mut ok = true;
            for (j, name) in rule.failures.iter().enumerate() {
                match LlmFailureRule::kind(name) {
                    Some(kind) => failures.push(kind),
                    None => {
                        ok = false;
                        self.error(
                            at,
                            index(&key(&path, "failures"), j),
                            format!(
                                "`{name}` is not a kind of failure; the kinds are {}",
                                failure_names().collect::<Vec<_>>().join(", ")
                            ),
                        );
                    }
                }
            }
            if failures.is_empty() {
                failures = failure_names().collect();
            }
            if let (Some(url), true) = (url, ok) {
                rules.push(LlmFailureRule {
                    request: RequestMatch {
                        url,
                        method: Some(Method::POST),
                        body_fragment: None,
                    },
                    failures,
                });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::compile::tests::compiled;

    #[test]
    fn names_are_read_in_any_case_and_none_means_every_kind() {
        let compiled = compiled(
            r#"{"llmFailures": [{"url": "https://api.openai.com/*", "failures": ["hallucination"]},
                                {"url": "https://llm.example/*"}]}"#,
        );
        let rules = &compiled.plan.llm_failures;
        assert_eq!(rules[0].failures, ["Hallucination"]);
        assert_eq!(rules[1].failures.len(), 15);
        assert_eq!(compiled.plan.to_string(), "2 language-model failure rules");
    }

    #[test]
    fn an_unknown_kind_is_refused_with_the_list() {
        let raw = crate::load::parse(
            r#"{"llmFailures": [{"url": "*", "failures": ["Nonsense"]}]}"#,
            crate::load::Format::Json,
            "holdoff.json",
        )
        .unwrap();
        let err = crate::compile::compile(&raw, "holdoff.json", std::path::Path::new("."))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("llmFailures[0].failures[0]: `Nonsense` is not a kind"),
            "{err}"
        );
        assert!(err.contains("PlausibleIncorrect"), "{err}");
    }
}
