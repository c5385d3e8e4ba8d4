//! GenericRandomErrorPlugin and its errors file: holdoff's `errors`, the rules inlined.

use schemars::JsonSchema;
use serde::Deserialize;

use super::data::Data;
use super::doc::Doc;
use super::importer::{ErrorSet, Importer, Plugin, backquoted, has_or_have};
use super::keys::Unread;
use super::response::{DpRequest, DpResponse, framing_note, missing_bodies_note, raw_response};
use crate::error::{FileError, index, join, key};
use crate::file::{RawErrorRule, RawErrors, RawHeaders, RawRequestMatch};

#[derive(Default, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
struct DpErrorsPlugin {
    #[serde(rename = "$schema")]
    _schema: Option<Unread>,
    #[serde(rename = "definitions")]
    _definitions: Option<Unread>,
    errors_file: Option<String>,
    rate: Option<f64>,
    retry_after_in_seconds: Option<u64>,
}

#[derive(Deserialize, JsonSchema)]
pub(super) struct DpErrorsFile {
    #[serde(rename = "$schema")]
    _schema: Option<Unread>,
    #[serde(rename = "definitions")]
    _definitions: Option<Unread>,
    errors: Vec<DpErrorRule>,
}

#[derive(Deserialize, JsonSchema)]
struct DpErrorRule {
    request: DpRequest,
    responses: Vec<DpResponse>,
}

// Dev Proxy's defaults, from the plugin's configuration class.

/// GenericRandomErrorPlugin's `errorsFile`.
const DEFAULT_ERRORS_FILE: &str = "errors.json";
/// GenericRandomErrorPlugin's `rate`.
const DEFAULT_RATE: f64 = 50.0;
/// GenericRandomErrorPlugin's `retryAfterInSeconds`.
const DEFAULT_RETRY_AFTER: u64 = 5;
/// The status of an error response without one.
const DEFAULT_ERROR_STATUS: u16 = 400;

impl Importer {
    pub(super) fn errors_plugin(
        &mut self,
        doc: &mut Doc,
        plugin: &Plugin<'_>,
        unknown: &mut Vec<String>,
    ) {
        let Some(settings) = self.settings::<DpErrorsPlugin>(doc, plugin, unknown) else {
            return;
        };
        let Some(rate) = self.error_rate(plugin, settings.rate) else {
            return;
        };
        let retry_after = settings
            .retry_after_in_seconds
            .unwrap_or(DEFAULT_RETRY_AFTER);
        let then = format!("{} fails no request", plugin.label);
        let Some(Data {
            file,
            value: data,
            base,
        }) = self.data::<DpErrorsFile>(
            (
                &join(&plugin.at, "errorsFile"),
                settings.errors_file.as_deref(),
                DEFAULT_ERRORS_FILE,
            ),
            &then,
        )
        else {
            return;
        };

        let mut rules = Vec::with_capacity(data.errors.len());
        let mut defaulted = Vec::new();
        let mut dynamic_not_429 = Vec::new();
        let mut bare_dynamic = false;
        let (mut framing, mut missing) = (0, Vec::new());
        for (i, rule) in data.errors.into_iter().enumerate() {
            let responses_path = key(&index("errors", i), "responses");
            if rule.responses.is_empty() {
                self.errors.push(FileError::new(
                    &file,
                    &responses_path,
                    "there are no responses: a rule needs at least one to draw from (Dev Proxy \
                     fails on such a rule too); add one, or remove the rule",
                ));
                continue;
            }
            let mut responses = Vec::with_capacity(rule.responses.len());
            for (j, response) in rule.responses.into_iter().enumerate() {
                let at = index(&responses_path, j);
                if response.status_code.is_none() {
                    defaulted.push(at.clone());
                }
                let status = response.status_code.unwrap_or(DEFAULT_ERROR_STATUS);
                for header in response.headers.iter().flatten() {
                    if header.name.eq_ignore_ascii_case("retry-after") {
                        let value = header.value.trim();
                        bare_dynamic |= value.eq_ignore_ascii_case("@dynamic");
                        if status != 429 && starts_with_dynamic(value) {
                            dynamic_not_429.push(at.clone());
                        }
                    }
                }
                let carried = raw_response(response, DEFAULT_ERROR_STATUS, &self.body_files(&base));
                framing += carried.framing;
                missing.extend(carried.missing_body.map(|body| (at, body)));
                responses.push(carried.response);
            }
            rules.push(RawErrorRule {
                request: RawRequestMatch {
                    url: rule.request.url,
                    method: rule.request.method,
                    body_fragment: rule.request.body_fragment,
                    nth: None,
                },
                rate: None,
                responses,
            });
        }

        let label = &plugin.label;
        self.rate_note(label, rate, settings.rate.is_none());
        if let Some(note) = framing_note(&file, framing) {
            self.note(note);
        }
        if let Some(note) = missing_bodies_note(&file, &missing) {
            self.note(note);
        }
        if rules.is_empty() {
            self.note(format!(
                "{label}: {file} has no rules, so it fails no request."
            ));
        }
        if !defaulted.is_empty() {
            self.note(format!(
                "{file}: {} no statusCode; Dev Proxy sends {DEFAULT_ERROR_STATUS} then, and so \
                 does the import: {}.",
                has_or_have(defaulted.len(), "response"),
                backquoted(&defaulted)
            ));
        }
        if !dynamic_not_429.is_empty() {
            self.note(format!(
                "{file}: Dev Proxy fills in a `@dynamic` Retry-After only on a 429 and sends it \
                 as written otherwise; holdoff fills it in on any status: {}.",
                backquoted(&dynamic_not_429)
            ));
        }
        self.scope_note(plugin, "its error rules");
        self.answers(plugin);
        self.error_sets.push(ErrorSet {
            rate,
            retry_after,
            bare_dynamic,
            rules,
        });
    }

    /// An error plugin's `rate` (Dev Proxy's default, 50, when unset); `None`, with an error,
    /// when it is not a percentage.
    pub(super) fn error_rate(&mut self, plugin: &Plugin<'_>, rate: Option<f64>) -> Option<f64> {
        let rate = rate.unwrap_or(DEFAULT_RATE);
        if (0.0..=100.0).contains(&rate) {
            return Some(rate);
        }
        self.error(
            &join(&plugin.at, "rate"),
            format!("{rate} is not a percentage: the rate is from 0 (never) to 100 (always)"),
        );
        None
    }

    /// The note on an error plugin's rate, which becomes `errors.rate`, or each rule's with
    /// several error plugins.
    pub(super) fn rate_note(&mut self, label: &str, rate: f64, defaulted: bool) {
        let target = if self.error_plugins > 1 {
            "the rate of its rules"
        } else {
            "errors.rate"
        };
        self.note(rate_note(label, rate, defaulted, target));
    }

    /// Puts the error rules of every GenericRandomErrorPlugin into `errors`.
    pub(super) fn finish_errors(&mut self) {
        if self.error_sets.is_empty() {
            return;
        }
        let sets = std::mem::take(&mut self.error_sets);
        let single = sets.len() == 1;
        let mut errors = RawErrors::default();
        let dynamic = sets
            .iter()
            .find(|set| set.bare_dynamic)
            .map(|set| set.retry_after);
        if let Some(seconds) = dynamic {
            errors.dynamic_range = Some([seconds, seconds]);
            self.note(format!(
                "A bare `@dynamic` Retry-After waits {seconds} s, as Dev Proxy's \
                 retryAfterInSeconds says (errors.dynamicRange is [{seconds}, {seconds}])."
            ));
        }
        if !single {
            self.note(
                "Several error plugins: each rule keeps its plugin's rate. In Dev \
                 Proxy a request that one plugin let through could still fail in the next; in \
                 holdoff the first rule that matches it decides.",
            );
        }
        for mut set in sets {
            if set.bare_dynamic && Some(set.retry_after) != dynamic {
                // Another plugin set errors.dynamicRange: this one's wait is written out.
                let exact = format!("@dynamic={}", set.retry_after);
                for response in set.rules.iter_mut().flat_map(|rule| &mut rule.responses) {
                    if let Some(RawHeaders::List(headers)) = &mut response.headers {
                        for header in headers {
                            if header.name.eq_ignore_ascii_case("retry-after")
                                && header.value.trim().eq_ignore_ascii_case("@dynamic")
                            {
                                header.value.clone_from(&exact);
                            }
                        }
                    }
                }
            }
            if single {
                errors.rate = Some(set.rate);
            } else {
                for rule in &mut set.rules {
                    rule.rate = Some(set.rate);
                }
            }
            errors.errors.extend(set.rules);
        }
        if self.graph_errors {
            errors.answer_batches = Some(true);
        }
        self.config.errors = Some(errors);
    }
}

/// The note on GenericRandomErrorPlugin's rate: holdoff's is exact, Dev Proxy's was not.
fn rate_note(label: &str, rate: f64, defaulted: bool, target: &str) -> String {
    let how = if defaulted {
        "rate is not set, and Dev Proxy's default"
    } else {
        "rate"
    };
    format!(
        "{label}: {how} {rate} became {target}. It is a probability per request: holdoff \
         fails each request a rule matches with a chance of {rate} %, so a run shows about that \
         share, not exactly it; Dev Proxy failed {} (it draws from 1 to 99, so its 99 fails \
         every request).",
        dev_proxy_share(rate)
    )
}

/// The share of requests Dev Proxy fails at `rate`: `floor(rate)` of its 99 draws.
fn dev_proxy_share(rate: f64) -> String {
    let draws = rate.floor().clamp(0.0, 99.0);
    if draws >= 99.0 {
        "every one".to_owned()
    } else {
        format!("{:.1} %", draws / 99.0 * 100.0)
    }
}

fn starts_with_dynamic(value: &str) -> bool {
    value
        .get(..8)
        .is_some_and(|prefix| prefix.eq_ignore_ascii_case("@dynamic"))
}

#[cfg(test)]
mod tests {
    use super::*;

    mod dev_proxy_share {
        use super::*;

        #[test]
        fn is_floor_of_the_rate_out_of_99() {
            assert_eq!(dev_proxy_share(50.0), "50.5 %");
            assert_eq!(dev_proxy_share(90.0), "90.9 %");
            assert_eq!(dev_proxy_share(0.0), "0.0 %");
            assert_eq!(dev_proxy_share(99.0), "every one");
            assert_eq!(dev_proxy_share(100.0), "every one");
        }
    }
}
