//! `rateLimits`: requests counted per window, refused past the limit.

use std::time::Duration;

use super::matching::Exclusion;
use super::{Compiler, Shared, WrittenIn, optional};
use crate::error::key;
use crate::file::{RawAlgorithm, RawHeaderStyle, RawRateLimit, RawResetFormat, RawScope};
use holdoff_proxy::fault::{Algorithm, HeaderStyle, Limit, ResetFormat};
use holdoff_proxy::fault::{FaultOutcome, RateLimitRule, Scope};

impl Compiler {
    /// Every rate limit of `rateLimits`, added to `rules`.
    pub(super) fn rate_limits(
        &mut self,
        at: WrittenIn<'_>,
        limits: &[RawRateLimit],
        shared: &Shared,
        rules: &mut Vec<RateLimitRule>,
    ) {
        self.list(at, "rateLimits", limits, rules, |this, at, path, limit| {
            this.rate_limit(at, path, limit, shared)
        });
    }

    fn rate_limit(
        &mut self,
        at: WrittenIn<'_>,
        path: &str,
        raw: &RawRateLimit,
        shared: &Shared,
    ) -> Option<RateLimitRule> {
        let url = optional(raw.url.as_deref(), |url| {
            self.pattern(at, key(path, "url"), url, Exclusion::Refused)
        });
        let method = optional(raw.method.as_deref(), |method| {
            self.method(at, key(path, "method"), method)
        });
        let mut valid = true;
        if raw.limit == 0 {
            self.error(
                at,
                key(path, "limit"),
                "the limit is 0: it must be at least 1 (units per window)",
            );
            valid = false;
        }
        if raw.window_seconds == 0 {
            self.error(
                at,
                key(path, "windowSeconds"),
                "the window is 0 seconds: it must be at least 1",
            );
            valid = false;
        }
        let cost = raw.cost.unwrap_or(1);
        if cost == 0 {
            self.error(
                at,
                key(path, "cost"),
                "the cost is 0: a request must cost at least 1 unit",
            );
            valid = false;
        } else if raw.limit > 0 && cost > raw.limit {
            self.error(
                at,
                key(path, "cost"),
                format!(
                    "the cost ({cost}) is more than the limit ({}): no request could ever pass; \
                     the cost must be from 1 to the limit",
                    raw.limit
                ),
            );
            valid = false;
        }
        let warning = match raw.warning_threshold_percent {
            Some(percent) if percent > 100 => {
                self.error(
                    at,
                    key(path, "warningThresholdPercent"),
                    format!(
                        "{percent} is not a percentage: the share of the limit used before the \
                         headers are sent is from 0 (always) to 100 (only when none is left)"
                    ),
                );
                None
            }
            percent => Some(percent.unwrap_or(0)),
        };
        let when_exceeded = match &raw.when_exceeded {
            Some(response) => {
                let response_path = key(path, "whenExceeded");
                if response.network.is_some() && response.status_code.is_none() {
                    self.error(
                        at,
                        key(&response_path, "network"),
                        "a rate limit's refusal must be a response (`statusCode`), not a \
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
        Some(RateLimitRule {
            url: url?,
            method: method?,
            limit: Limit {
                algorithm: match raw.algorithm {
                    None | Some(RawAlgorithm::FixedWindow) => Algorithm::FixedWindow,
                    Some(RawAlgorithm::FixedWindowFromFirstRequest) => {
                        Algorithm::FixedFromFirstRequest
                    }
                    Some(RawAlgorithm::SlidingWindow) => Algorithm::SlidingWindow,
                    Some(RawAlgorithm::TokenBucket) => Algorithm::TokenBucket,
                },
                limit: raw.limit,
                window: Duration::from_secs(raw.window_seconds),
                cost,
            },
            scope: match raw.scope {
                None | Some(RawScope::Client) => Scope::Client,
                Some(RawScope::Shared) => Scope::Shared,
            },
            headers: match raw.headers {
                None | Some(RawHeaderStyle::Ietf) => HeaderStyle::Ietf,
                Some(RawHeaderStyle::Draft) => HeaderStyle::Draft,
                Some(RawHeaderStyle::XRatelimit) => HeaderStyle::XRateLimit,
                Some(RawHeaderStyle::None) => HeaderStyle::None,
            },
            reset_format: match raw.reset_format {
                None | Some(RawResetFormat::SecondsLeft) => ResetFormat::SecondsLeft,
                Some(RawResetFormat::EpochSeconds) => ResetFormat::EpochSeconds,
            },
            warning_threshold_percent: warning?,
            when_exceeded: when_exceeded?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::response::JSON;
    use super::super::tests::{compiled, header, literal};
    use super::*;
    use holdoff_proxy::fault::Scope;
    use http::{Method, StatusCode};

    mod compile {
        use super::*;

        #[test]
        fn compiles_a_rate_limit_and_its_refusal() {
            let compiled = compiled(
                r#"{"rateLimits": [{"url": "https://api.example.com/*", "method": "get",
                    "algorithm": "token-bucket", "limit": 10, "windowSeconds": 60, "cost": 2,
                    "scope": "shared", "headers": "x-ratelimit", "resetFormat": "epoch-seconds",
                    "whenExceeded": {"statusCode": 403, "headers": {"Retry-After": "@dynamic"},
                                     "body": {"message": "API rate limit exceeded"}}}]}"#,
            );
            let rule = &compiled.plan.rate_limits[0];
            assert_eq!(
                rule.limit,
                Limit {
                    algorithm: Algorithm::TokenBucket,
                    limit: 10,
                    window: Duration::from_secs(60),
                    cost: 2,
                }
            );
            assert_eq!(rule.method, Some(Method::GET));
            assert_eq!(rule.scope, Scope::Shared);
            assert_eq!(rule.headers, HeaderStyle::XRateLimit);
            assert_eq!(rule.reset_format, ResetFormat::EpochSeconds);
            let refusal = rule.when_exceeded.as_ref().expect("set");
            assert_eq!(refusal.status, StatusCode::FORBIDDEN);
            assert_eq!(header(refusal, "content-type"), Some(&literal(JSON)));
        }
    }
}
