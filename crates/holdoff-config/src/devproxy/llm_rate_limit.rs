//! LanguageModelRateLimitingPlugin and its custom response file: one of holdoff's
//! `llmRateLimits`.

use schemars::JsonSchema;
use serde::Deserialize;

use super::doc::Doc;
use super::importer::{Importer, Plugin};
use super::keys::Unread;
use crate::error::{index, join, key};
use crate::file::{RawLlmRateLimit, RawScope};

#[derive(Default, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
struct DpLlmRateLimitPlugin {
    #[serde(rename = "$schema")]
    _schema: Option<Unread>,
    #[serde(rename = "definitions")]
    _definitions: Option<Unread>,
    header_retry_after: Option<String>,
    reset_time_window_seconds: Option<u64>,
    prompt_token_limit: Option<u64>,
    completion_token_limit: Option<u64>,
    when_limit_exceeded: Option<String>,
    custom_response_file: Option<String>,
}

/// LanguageModelRateLimitingPlugin's `promptTokenLimit` and `completionTokenLimit`,
/// `resetTimeWindowSeconds` and `customResponseFile`.
const DEFAULT_TOKEN_LIMIT: u64 = 5000;
const DEFAULT_WINDOW: u64 = 60;
const DEFAULT_CUSTOM_RESPONSE_FILE: &str = "token-limit-response.json";

impl Importer {
    pub(super) fn llm_rate_limiting_plugin(
        &mut self,
        doc: &mut Doc,
        plugin: &Plugin<'_>,
        unknown: &mut Vec<String>,
    ) {
        let Some(settings) = self.settings::<DpLlmRateLimitPlugin>(doc, plugin, unknown) else {
            return;
        };
        let at = &plugin.at;
        let prompt = settings.prompt_token_limit.unwrap_or(DEFAULT_TOKEN_LIMIT);
        let completion = settings
            .completion_token_limit
            .unwrap_or(DEFAULT_TOKEN_LIMIT);
        let window = settings.reset_time_window_seconds.unwrap_or(DEFAULT_WINDOW);
        let mut valid = true;
        for (key, value) in [
            ("promptTokenLimit", prompt),
            ("completionTokenLimit", completion),
            ("resetTimeWindowSeconds", window),
        ] {
            if value == 0 {
                self.error(&join(at, key), "must be at least 1");
                valid = false;
            }
        }
        let custom = match settings.when_limit_exceeded.as_deref() {
            None => false,
            Some(s) if s.eq_ignore_ascii_case("Throttle") => false,
            Some(s) if s.eq_ignore_ascii_case("Custom") => true,
            Some(s) => {
                self.error(
                    &join(at, "whenLimitExceeded"),
                    format!("unknown value `{s}`: expected Throttle or Custom"),
                );
                return;
            }
        };
        let when_exceeded = if custom {
            let then = format!(
                "{} has no response to send past its budget, and so lets every request \
                 through; the import leaves the budget out",
                plugin.label
            );
            let setting = (
                join(at, "customResponseFile"),
                settings.custom_response_file.as_deref(),
                DEFAULT_CUSTOM_RESPONSE_FILE,
            );
            let Some(carried) = self.custom_response(setting, &then) else {
                return;
            };
            Some(carried)
        } else {
            None
        };
        if !valid {
            return;
        }

        let limit_path = index("llmRateLimits", self.config.llm_rate_limits.len());
        let name = plugin.label.as_str();
        let url = self.single_url(plugin, "its token limits");
        let mut summary = format!(
            "{name}: {prompt} prompt and {completion} completion tokens per {window} s became \
             {limit_path}, with scope shared (Dev Proxy counts every client's tokens together)"
        );
        let defaulted: Vec<&str> = [
            ("promptTokenLimit", settings.prompt_token_limit),
            ("completionTokenLimit", settings.completion_token_limit),
            ("resetTimeWindowSeconds", settings.reset_time_window_seconds),
        ]
        .iter()
        .filter(|(_, value)| value.is_none())
        .map(|(key, _)| *key)
        .collect();
        if !defaulted.is_empty() {
            summary.push_str(&format!(
                "; Dev Proxy's defaults were written out for {}",
                defaulted.join(", ")
            ));
        }
        summary.push_str(
            ". holdoff also counts streamed responses: the usage chunk a stream ends with, or \
             an estimate of four characters a token when it has none; Dev Proxy counted only \
             JSON responses.",
        );
        self.note(summary);
        if !custom {
            self.note(format!(
                "{name}: past a limit holdoff answers 429 with OpenAI's rate_limit_exceeded \
                 error; Dev Proxy's said insufficient_quota, which tells a client that waiting \
                 will not help, when the Retry-After says it will."
            ));
        }
        let when_exceeded = when_exceeded.map(|(file, response)| {
            self.note(format!(
                "{name}: past a limit, the response in {file} is sent ({}).",
                key(&limit_path, "whenExceeded")
            ));
            response
        });
        self.answers(plugin);
        self.config.llm_rate_limits.push(RawLlmRateLimit {
            url,
            prompt_token_limit: Some(prompt),
            completion_token_limit: Some(completion),
            reset_time_window_seconds: Some(window),
            scope: Some(RawScope::Shared),
            header_retry_after: settings
                .header_retry_after
                .filter(|header| !header.eq_ignore_ascii_case("Retry-After")),
            when_exceeded,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::super::import;
    use crate::compile::{Compiled, compile};
    use crate::file::{RawFaultStep, RawHeaders};
    use holdoff_proxy::fault::Scope;
    use holdoff_proxy::fault::TokenBudget;
    use std::time::Duration;

    /// Imports `rc` written as `devproxyrc.json` beside the other `files`, and compiles it.
    fn imported(rc: &str, files: &[(&str, &str)]) -> (super::super::importer::Imported, Compiled) {
        let dir = tempfile::tempdir().unwrap();
        for (name, text) in files {
            std::fs::write(dir.path().join(name), text).unwrap();
        }
        let path = dir.path().join("devproxyrc.json");
        std::fs::write(&path, rc).unwrap();
        let imported = import(&path).unwrap_or_else(|e| panic!("{e}"));
        let compiled = compile(&imported.config, "devproxyrc.json", dir.path())
            .unwrap_or_else(|e| panic!("{e}"));
        (imported, compiled)
    }

    const PLUGINS: &str = r#""plugins": [
        { "name": "RetryAfterPlugin", "enabled": true, "pluginPath": "~appFolder/plugins/DevProxy.Plugins.dll" },
        { "name": "LanguageModelRateLimitingPlugin", "enabled": true,
          "pluginPath": "~appFolder/plugins/DevProxy.Plugins.dll", "configSection": "tokens",
          "urlsToWatch": ["https://models.example/*"] },
        { "name": "MockResponsePlugin", "enabled": true,
          "pluginPath": "~appFolder/plugins/DevProxy.Plugins.dll", "configSection": "mocked" }
      ]"#;

    mod llm_rate_limiting_plugin {
        use super::*;

        #[test]
        fn becomes_a_shared_budget_for_the_plugins_urls_in_its_order() {
            let rc = format!(
                r#"{{ {PLUGINS}, "urlsToWatch": ["https://models.example/*", "https://api.example/*"],
                     "tokens": {{ "promptTokenLimit": 100, "completionTokenLimit": 50,
                                 "resetTimeWindowSeconds": 30, "whenLimitExceeded": "Throttle" }},
                     "mocked": {{ "mocksFile": "mocks.json" }} }}"#
            );
            let (imported, compiled) = imported(&rc, &[("mocks.json", r#"{"mocks": []}"#)]);
            let raw = &imported.config.llm_rate_limits[0];
            assert_eq!(raw.url.as_deref(), Some("https://models.example/*"));
            assert_eq!(
                imported.config.order,
                Some(vec![RawFaultStep::LlmRateLimits, RawFaultStep::Mocks])
            );
            let rule = &compiled.plan.llm_rate_limits[0];
            assert_eq!(
                rule.budget,
                TokenBudget {
                    prompt: 100,
                    completion: 50,
                    window: Duration::from_secs(30),
                }
            );
            assert_eq!(rule.scope, Scope::Shared);
            assert!(rule.when_exceeded.is_none());
            let notes = imported.notes.join("\n");
            assert!(
                notes.contains(
                    "LanguageModelRateLimitingPlugin: 100 prompt and 50 completion tokens per 30 \
                     s became llmRateLimits[0], with scope shared"
                ),
                "{notes}"
            );
            assert!(notes.contains("insufficient_quota"), "{notes}");
            assert!(!notes.contains("not supported"), "{notes}");
        }

        #[test]
        fn writes_out_dev_proxys_defaults_and_carries_the_custom_response() {
            let rc = format!(
                r#"{{ {PLUGINS}, "urlsToWatch": ["https://models.example/*"],
                     "tokens": {{ "whenLimitExceeded": "Custom", "headerRetryAfter": "x-wait" }},
                     "mocked": {{ "mocksFile": "mocks.json" }} }}"#
            );
            let custom = r#"{ "statusCode": 429,
                "headers": [{ "name": "x-wait", "value": "@dynamic" }],
                "body": { "error": { "message": "Token budget used up", "code": "tokens" } } }"#;
            let (imported, compiled) = imported(
                &rc,
                &[
                    ("mocks.json", r#"{"mocks": []}"#),
                    ("token-limit-response.json", custom),
                ],
            );
            let raw = &imported.config.llm_rate_limits[0];
            assert_eq!(raw.url, None, "the plugin watches every watched URL");
            assert_eq!(raw.prompt_token_limit, Some(5000));
            assert_eq!(raw.completion_token_limit, Some(5000));
            assert_eq!(raw.reset_time_window_seconds, Some(60));
            assert_eq!(raw.header_retry_after.as_deref(), Some("x-wait"));
            let response = raw.when_exceeded.as_ref().expect("the custom response");
            assert_eq!(response.status_code, Some(429));
            assert!(
                matches!(&response.headers, Some(RawHeaders::List(list)) if list[0].value == "@dynamic")
            );
            let rule = &compiled.plan.llm_rate_limits[0];
            assert_eq!(rule.retry_after_header, "x-wait");
            let notes = imported.notes.join("\n");
            assert!(
                notes.contains(
                    "Dev Proxy's defaults were written out for promptTokenLimit, \
                     completionTokenLimit, resetTimeWindowSeconds"
                ),
                "{notes}"
            );
            assert!(
                notes.contains("token-limit-response.json is sent"),
                "{notes}"
            );
        }

        #[test]
        fn refuses_a_zero_limit_and_an_unknown_behaviour() {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("devproxyrc.json");
            let rc = format!(
                r#"{{ {PLUGINS}, "urlsToWatch": ["https://models.example/*"],
                     "tokens": {{ "promptTokenLimit": 0, "whenLimitExceeded": "Block" }} }}"#
            );
            std::fs::write(&path, rc).unwrap();
            let errors = import(&path).expect_err("invalid").to_string();
            assert!(
                errors.contains("tokens.promptTokenLimit: must be at least 1"),
                "{errors}"
            );
            assert!(
                errors.contains(
                    "tokens.whenLimitExceeded: unknown value `Block`: expected Throttle or Custom"
                ),
                "{errors}"
            );
        }
    }
}
