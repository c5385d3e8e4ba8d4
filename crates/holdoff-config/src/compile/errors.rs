//! `errors`: error responses and network faults injected at a rate, inline and from an
//! errors file.

use std::ops::RangeInclusive;

use super::{Compiler, Shared, WrittenIn};
use crate::error::{index, key};
use crate::file::{RawErrorRule, RawErrors, RawErrorsFile};
use holdoff_proxy::fault::ErrorRule;
use holdoff_proxy::fault::Rate;

/// The seconds a bare `@dynamic` draws from when `errors.dynamicRange` is not set.
pub const DEFAULT_DYNAMIC_RANGE: RangeInclusive<u64> = 2..=5;

/// The failure rate of an error rule when neither it nor `errors.rate` sets one, in percent.
pub const DEFAULT_ERROR_RATE: f64 = 50.0;

impl Compiler {
    /// `errors.dynamicRange`, which every response's `@dynamic` draws from.
    pub(super) fn dynamic_range(
        &mut self,
        at: WrittenIn<'_>,
        errors: Option<&RawErrors>,
    ) -> RangeInclusive<u64> {
        match errors.and_then(|errors| errors.dynamic_range) {
            Some([min, max]) if min > max => {
                self.error(
                    at,
                    "errors.dynamicRange",
                    format!(
                        "the minimum ({min}) is more than the maximum ({max}): write [MIN, MAX] \
                         in seconds"
                    ),
                );
                DEFAULT_DYNAMIC_RANGE
            }
            Some([min, max]) => min..=max,
            None => DEFAULT_DYNAMIC_RANGE,
        }
    }

    /// The rules of `errors`, the inline ones then the errors file's, added to `rules`.
    pub(super) fn errors(
        &mut self,
        at: WrittenIn<'_>,
        errors: &RawErrors,
        shared: &Shared,
        rules: &mut Vec<ErrorRule>,
    ) {
        let default_rate = match errors.rate {
            Some(rate) => self.rate(at, "errors.rate", rate),
            None => Rate::percent(DEFAULT_ERROR_RATE),
        }
        .unwrap_or(Rate::NEVER);
        let check = |this: &mut Compiler, at: WrittenIn<'_>, path: &str, rule: &RawErrorRule| {
            this.error_rule(at, path, rule, default_rate, shared)
        };
        self.list(at, "errors.errors", &errors.errors, rules, check);
        if let Some(name) = &errors.file {
            self.data_file(
                at,
                "errors.file",
                name,
                "errors",
                |this, inner, data: RawErrorsFile| {
                    this.list(inner, "errors", &data.errors, rules, check);
                },
            );
        }
    }

    fn error_rule(
        &mut self,
        at: WrittenIn<'_>,
        path: &str,
        raw: &RawErrorRule,
        default_rate: Rate,
        shared: &Shared,
    ) -> Option<ErrorRule> {
        let request_path = key(path, "request");
        let request = self.request(at, &request_path, &raw.request);
        if raw.request.nth.is_some() {
            self.error(
                at,
                key(&request_path, "nth"),
                "`nth` is for mocks only: an error rule fails a share of requests set by `rate`",
            );
        }
        let rate = match raw.rate {
            Some(rate) => self.rate(at, &key(path, "rate"), rate),
            None => Some(default_rate),
        };
        if raw.responses.is_empty() {
            self.error(
                at,
                key(path, "responses"),
                "there are no responses: a rule needs at least one (`statusCode` or `network`) \
                 to draw from",
            );
        }
        let mut outcomes = Vec::with_capacity(raw.responses.len());
        let mut complete = true;
        for (i, response) in raw.responses.iter().enumerate() {
            let response_path = index(&key(path, "responses"), i);
            match self.response(at, &response_path, response, shared) {
                Some(outcome) => outcomes.push(outcome),
                None => complete = false,
            }
        }
        if !complete || outcomes.is_empty() {
            return None;
        }
        Some(ErrorRule {
            request: request?,
            rate: rate?,
            outcomes,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{compiled, header, respond};
    use super::*;
    use holdoff_proxy::fault::{HeaderTemplate, RetryAfterForm};
    use http::StatusCode;

    mod compile {
        use super::*;

        #[test]
        fn fills_in_the_defaults() {
            let compiled = compiled(
                r#"{"errors": {"errors": [{"request": {"url": "*"},
                    "responses": [{"statusCode": 429, "headers": {"Retry-After": "@dynamic"}}]}]}}"#,
            );
            assert_eq!(compiled.urls_to_watch, None);
            assert_eq!(compiled.judge_key, None);
            assert_eq!(compiled.plan.retry_after_form, RetryAfterForm::Delay);
            let rule = &compiled.plan.errors[0];
            assert_eq!(rule.rate.as_percent(), DEFAULT_ERROR_RATE);
            assert_eq!(rule.request.method, None);
            let response = respond(&rule.outcomes[0]);
            assert_eq!(response.status, StatusCode::TOO_MANY_REQUESTS);
            assert_eq!(
                header(response, "retry-after"),
                Some(&HeaderTemplate::Dynamic(DEFAULT_DYNAMIC_RANGE))
            );
            assert!(response.body.is_empty());
            assert_eq!(header(response, "content-type"), None);
        }

        #[test]
        fn puts_a_data_files_rules_after_the_inline_ones() {
            let compiled = compiled(
                r#"{"errors": {"file": "nested/errors.yaml", "errors": [
                    {"request": {"url": "https://first.example/*"}, "responses": [{"network": "reset"}]}]}}"#,
            );
            let urls: Vec<_> = compiled
                .plan
                .errors
                .iter()
                .map(|rule| rule.request.url.as_str())
                .collect();
            assert_eq!(
                urls,
                ["https://first.example/*", "https://second.example/*"]
            );
            // `@../body.json` is relative to nested/, where the errors file is.
            let response = respond(&compiled.plan.errors[1].outcomes[0]);
            assert_eq!(response.body, "{\"error\": \"from a file\"}\n");
            assert_eq!(compiled.data_files.len(), 2);
        }
    }
}
