//! RateLimitingPlugin and its custom response file: one of holdoff's `rateLimits`.

use schemars::JsonSchema;
use serde::Deserialize;

use super::doc::Doc;
use super::importer::{Importer, Plugin, backquoted};
use super::keys::Unread;
use crate::error::{index, join, key};
use crate::file::{RawAlgorithm, RawHeaderStyle, RawRateLimit, RawResetFormat, RawScope};

#[derive(Default, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
struct DpRateLimitPlugin {
    #[serde(rename = "$schema")]
    _schema: Option<Unread>,
    #[serde(rename = "definitions")]
    _definitions: Option<Unread>,
    header_limit: Option<String>,
    header_remaining: Option<String>,
    header_reset: Option<String>,
    header_retry_after: Option<String>,
    cost_per_request: Option<u64>,
    reset_time_window_seconds: Option<u64>,
    warning_threshold_percent: Option<u64>,
    rate_limit: Option<u64>,
    when_limit_exceeded: Option<String>,
    reset_format: Option<String>,
    custom_response_file: Option<String>,
}

/// RateLimitingPlugin's `rateLimit`, `resetTimeWindowSeconds`, `costPerRequest`,
/// `warningThresholdPercent` and `customResponseFile`.
const DEFAULT_RATE_LIMIT: u64 = 120;
const DEFAULT_WINDOW: u64 = 60;
const DEFAULT_COST: u64 = 2;
const DEFAULT_WARNING_PERCENT: u64 = 80;
const DEFAULT_CUSTOM_RESPONSE_FILE: &str = "rate-limit-response.json";
/// RateLimitingPlugin's header names.
const DRAFT_HEADERS: [&str; 3] = ["RateLimit-Limit", "RateLimit-Remaining", "RateLimit-Reset"];
const X_HEADERS: [&str; 3] = [
    "X-RateLimit-Limit",
    "X-RateLimit-Remaining",
    "X-RateLimit-Reset",
];

impl Importer {
    pub(super) fn rate_limiting_plugin(
        &mut self,
        doc: &mut Doc,
        plugin: &Plugin<'_>,
        unknown: &mut Vec<String>,
    ) {
        let Some(settings) = self.settings::<DpRateLimitPlugin>(doc, plugin, unknown) else {
            return;
        };
        let at = &plugin.at;
        let limit = settings.rate_limit.unwrap_or(DEFAULT_RATE_LIMIT);
        let window = settings.reset_time_window_seconds.unwrap_or(DEFAULT_WINDOW);
        let cost = settings.cost_per_request.unwrap_or(DEFAULT_COST);
        let mut valid = true;
        for (key, value) in [
            ("rateLimit", limit),
            ("resetTimeWindowSeconds", window),
            ("costPerRequest", cost),
        ] {
            if value == 0 {
                self.error(&join(at, key), "must be at least 1");
                valid = false;
            }
        }
        if limit > 0 && cost > limit {
            self.error(
                &join(at, "costPerRequest"),
                format!(
                    "the cost ({cost}) is more than the rateLimit ({limit}), so every request \
                     would be refused: make it from 1 to the rateLimit"
                ),
            );
            valid = false;
        }
        let reset_format = match settings.reset_format.as_deref() {
            None => RawResetFormat::SecondsLeft,
            Some(s) if s.eq_ignore_ascii_case("SecondsLeft") => RawResetFormat::SecondsLeft,
            Some(s) if s.eq_ignore_ascii_case("UtcEpochSeconds") => RawResetFormat::EpochSeconds,
            Some(s) => {
                self.error(
                    &join(at, "resetFormat"),
                    format!("unknown value `{s}`: expected SecondsLeft or UtcEpochSeconds"),
                );
                return;
            }
        };
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
        let names = [
            settings.header_limit.as_deref().unwrap_or(DRAFT_HEADERS[0]),
            settings
                .header_remaining
                .as_deref()
                .unwrap_or(DRAFT_HEADERS[1]),
            settings.header_reset.as_deref().unwrap_or(DRAFT_HEADERS[2]),
        ];
        let (style, exact) = header_style(names);

        let when_exceeded = if custom {
            let then = format!(
                "{} has no response to send past its limit, and so lets every request through \
                 (it still counts them); the import leaves the limit out",
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

        let limit_path = index("rateLimits", self.config.rate_limits.len());
        let name = plugin.label.as_str();
        let url = self.single_url(plugin, "its limit");
        let mut summary = format!(
            "{name}: {limit} per {window} s at {cost} a request became {limit_path}, a \
             fixed window from the first request (as Dev Proxy's: it starts at the first \
             request, and again at the first request after it ends) with scope shared (Dev \
             Proxy counts every client's requests together)"
        );
        if settings.cost_per_request.is_none() {
            summary.push_str(&format!(
                "; costPerRequest is not set, and Dev Proxy's default is {DEFAULT_COST}"
            ));
        }
        summary.push('.');
        self.note(summary);
        let percent = settings
            .warning_threshold_percent
            .unwrap_or(DEFAULT_WARNING_PERCENT);
        let warning_threshold_percent = match u8::try_from(percent) {
            Ok(percent) if percent <= 100 => percent,
            _ => {
                self.note(format!(
                    "{name}: warningThresholdPercent {percent} is more than 100, so Dev Proxy \
                     never sends the rate-limit headers before a refusal; the import says 100."
                ));
                100
            }
        };
        if !exact {
            self.note(format!(
                "{name}: holdoff sends one of a few fixed sets of rate-limit headers, and the \
                 names configured ({}) are none of them; the nearest, {}, is sent instead.",
                backquoted(&names),
                match style {
                    RawHeaderStyle::XRatelimit => backquoted(&X_HEADERS),
                    _ => backquoted(&DRAFT_HEADERS),
                }
            ));
        }
        if let Some(header) = settings
            .header_retry_after
            .as_deref()
            .filter(|header| !header.eq_ignore_ascii_case("Retry-After"))
        {
            self.note(format!(
                "{name}: holdoff's refusals carry `Retry-After`, not `{header}` \
                 (headerRetryAfter){}.",
                if custom {
                    "; in the custom response only a `Retry-After: @dynamic` is filled in"
                } else {
                    ""
                }
            ));
        }
        let when_exceeded = when_exceeded.map(|(file, response)| {
            self.note(format!(
                "{name}: past the limit, the response in {file} is sent ({}).",
                key(&limit_path, "whenExceeded")
            ));
            response
        });
        self.answers(plugin);
        self.config.rate_limits.push(RawRateLimit {
            url,
            method: None,
            algorithm: Some(RawAlgorithm::FixedWindowFromFirstRequest),
            limit,
            window_seconds: window,
            cost: Some(cost),
            scope: Some(RawScope::Shared),
            headers: Some(style),
            reset_format: Some(reset_format),
            warning_threshold_percent: Some(warning_threshold_percent),
            when_exceeded,
        });
    }
}

/// The header style nearest to the three names, and whether it is exactly them.
fn header_style(names: [&str; 3]) -> (RawHeaderStyle, bool) {
    let is = |set: [&str; 3]| {
        names
            .iter()
            .zip(set)
            .all(|(a, b)| a.eq_ignore_ascii_case(b))
    };
    if is(DRAFT_HEADERS) {
        (RawHeaderStyle::Draft, true)
    } else if is(X_HEADERS) {
        (RawHeaderStyle::XRatelimit, true)
    } else if names
        .iter()
        .filter(|name| {
            name.get(..2)
                .is_some_and(|prefix| prefix.eq_ignore_ascii_case("x-"))
        })
        .count()
        >= 2
    {
        (RawHeaderStyle::XRatelimit, false)
    } else {
        (RawHeaderStyle::Draft, false)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    mod header_style {
        use super::*;

        #[test]
        fn knows_the_draft_and_x_sets_in_any_case() {
            assert_eq!(header_style(DRAFT_HEADERS), (RawHeaderStyle::Draft, true));
            assert_eq!(
                header_style([
                    "x-ratelimit-limit",
                    "X-RATELIMIT-REMAINING",
                    "X-RateLimit-Reset"
                ]),
                (RawHeaderStyle::XRatelimit, true)
            );
        }

        #[test]
        fn picks_the_nearest_for_other_names() {
            assert_eq!(
                header_style(["X-Rate-Limit", "X-Rate-Remaining", "X-Rate-Reset"]),
                (RawHeaderStyle::XRatelimit, false)
            );
            assert_eq!(
                header_style(["Limit", "Remaining", "Reset"]),
                (RawHeaderStyle::Draft, false)
            );
        }
    }
}
