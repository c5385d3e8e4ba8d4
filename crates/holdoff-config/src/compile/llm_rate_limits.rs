//! `llmRateLimits`: prompt and completion tokens per window, refused once used up.

use std::time::Duration;

use http::HeaderName;

use super::matching::Exclusion;
use super::{Compiler, Shared, WrittenIn, optional};
use crate::error::key;
use crate::file::{RawLlmRateLimit, RawScope};
use holdoff_proxy::fault::TokenBudget;
use holdoff_proxy::fault::{FaultOutcome, LlmRateLimitRule, Scope};

/// Dev Proxy's window, when `resetTimeWindowSeconds` is not set.
pub(super) const DEFAULT_TOKEN_WINDOW: Duration = Duration::from_secs(60);

impl Compiler {
    /// Every token budget of `llmRateLimits`, added to `rules`.
    pub(super) fn llm_rate_limits(
        &mut self,
        at: WrittenIn<'_>,
        limits: &[RawLlmRateLimit],
        shared: &Shared,
        rules: &mut Vec<LlmRateLimitRule>,
    ) {
        self.list(
            at,
            "llmRateLimits",
            limits,
            rules,
            |this, at, path, limit| this.llm_rate_limit(at, path, limit, shared),
        );
    }

    fn llm_rate_limit(
        &mut self,
        at: WrittenIn<'_>,
        path: &str,
        raw: &RawLlmRateLimit,
        shared: &Shared,
    ) -> Option<LlmRateLimitRule> {
        let url = optional(raw.url.as_deref(), |url| {
            self.pattern(at, key(path, "url"), url, Exclusion::Refused)
        });
        let mut valid = true;
        if raw.prompt_token_limit.is_none() && raw.completion_token_limit.is_none() {
            self.error(
                at,
                path,
                "neither `promptTokenLimit` nor `completionTokenLimit` is set: set one or both \
                 (tokens per window)",
            );
            valid = false;
        }
        for (name, limit) in [
            ("promptTokenLimit", raw.prompt_token_limit),
            ("completionTokenLimit", raw.completion_token_limit),
            ("resetTimeWindowSeconds", raw.reset_time_window_seconds),
        ] {
            if limit == Some(0) {
                self.error(at, key(path, name), "it is 0: it must be at least 1");
                valid = false;
            }
        }
        let header = match raw.header_retry_after.as_deref() {
            None => Some(http::header::RETRY_AFTER),
            Some(name) => match HeaderName::from_bytes(name.as_bytes()) {
                Ok(header) => Some(header),
                Err(_) => {
                    self.error(
                        at,
                        key(path, "headerRetryAfter"),
                        format!(
                            "invalid header name `{name}`: a name is one or more letters, \
                             digits and !#$%&'*+-.^_`|~, with no spaces or colons"
                        ),
                    );
                    None
                }
            },
        };
        let when_exceeded = match &raw.when_exceeded {
            Some(response) => {
                let response_path = key(path, "whenExceeded");
                if response.network.is_some() && response.status_code.is_none() {
                    self.error(
                        at,
                        key(&response_path, "network"),
                        "a token budget's refusal must be a response (`statusCode`), not a \
                         network fault",
                    );
                    None
                } else {
                    match self.response(at, &response_path, response, shared) {
                        Some(FaultOutcome::Respond(response)) => Some(Some(response)),
                        _ => None,
                    }
                }
            }
            None => Some(None),
        };
        if !valid {
            return None;
        }
        Some(LlmRateLimitRule {
            url: url?,
            budget: TokenBudget {
                prompt: raw.prompt_token_limit.unwrap_or(u64::MAX),
                completion: raw.completion_token_limit.unwrap_or(u64::MAX),
                window: raw
                    .reset_time_window_seconds
                    .map_or(DEFAULT_TOKEN_WINDOW, Duration::from_secs),
            },
            scope: match raw.scope {
                None | Some(RawScope::Client) => Scope::Client,
                Some(RawScope::Shared) => Scope::Shared,
            },
            retry_after_header: header?,
            when_exceeded: when_exceeded?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{compiled, header};
    use super::*;
    use crate::load::{Format, parse};
    use holdoff_proxy::fault::HeaderTemplate;
    use http::StatusCode;
    use std::path::Path;

    fn problems(text: &str) -> String {
        let raw = parse(text, Format::Json, "holdoff.json").expect("parses");
        super::super::compile(&raw, "holdoff.json", Path::new("."))
            .expect_err("invalid")
            .to_string()
    }

    mod compile {
        use super::*;

        #[test]
        fn compiles_a_budget_and_its_refusal() {
            let compiled = compiled(
                r#"{"llmRateLimits": [{"url": "https://api.openai.com/v1/*",
                    "promptTokenLimit": 1000, "completionTokenLimit": 500,
                    "resetTimeWindowSeconds": 30, "scope": "shared",
                    "headerRetryAfter": "x-retry-after",
                    "whenExceeded": {"statusCode": 429, "headers": {"x-retry-after": "@dynamic"},
                                     "body": {"error": "slow down"}}}]}"#,
            );
            let rule = &compiled.plan.llm_rate_limits[0];
            assert_eq!(
                rule.budget,
                TokenBudget {
                    prompt: 1000,
                    completion: 500,
                    window: Duration::from_secs(30),
                }
            );
            assert_eq!(rule.scope, Scope::Shared);
            assert_eq!(rule.retry_after_header, "x-retry-after");
            let refusal = rule.when_exceeded.as_ref().expect("set");
            assert_eq!(refusal.status, StatusCode::TOO_MANY_REQUESTS);
            assert!(matches!(
                header(refusal, "x-retry-after"),
                Some(HeaderTemplate::Dynamic(_))
            ));
        }

        #[test]
        fn leaves_an_unset_limit_unlimited_with_dev_proxys_window() {
            let compiled = compiled(r#"{"llmRateLimits": [{"completionTokenLimit": 50}]}"#);
            let rule = &compiled.plan.llm_rate_limits[0];
            assert_eq!(rule.budget.prompt, u64::MAX);
            assert_eq!(rule.budget.window, DEFAULT_TOKEN_WINDOW);
            assert_eq!(rule.scope, Scope::Client);
            assert_eq!(rule.retry_after_header, http::header::RETRY_AFTER);
            assert!(rule.url.is_none() && rule.when_exceeded.is_none());
        }

        #[test]
        fn names_every_bad_value() {
            assert_eq!(
                problems(
                    r#"{"llmRateLimits": [{"resetTimeWindowSeconds": 0},
                        {"promptTokenLimit": 0, "headerRetryAfter": "retry after"}]}"#
                ),
                "holdoff.json: llmRateLimits[0]: neither `promptTokenLimit` nor \
                 `completionTokenLimit` is set: set one or both (tokens per window)\n\
                 holdoff.json: llmRateLimits[0].resetTimeWindowSeconds: it is 0: it must be at \
                 least 1\n\
                 holdoff.json: llmRateLimits[1].promptTokenLimit: it is 0: it must be at least 1\n\
                 holdoff.json: llmRateLimits[1].headerRetryAfter: invalid header name `retry \
                 after`: a name is one or more letters, digits and !#$%&'*+-.^_`|~, with no \
                 spaces or colons"
            );
        }
    }
}
