//! The built-in presets: configuration files that ship with holdoff, for the APIs whose
//! throttling people most often need to test against.
//!
//! Each is a JSON file with comments, under `presets/` in this crate; `holdoff config preset
//! NAME` prints it, to be used as it is (`holdoff proxy --preset NAME`) or as the start of a
//! `holdoff.json`.

use std::path::Path;

use crate::compile::{self, Compiled, ConfigProblems};
use crate::load::{self, Format};

/// The presets, by name, with a one-line description.
pub const PRESETS: &[(&str, &str)] = &[
    (
        "throttle",
        "50% of watched requests get 429 with a Retry-After of 2-5 s (the default)",
    ),
    (
        "openai",
        "api.openai.com: 25% get 429 rate_limit_exceeded, Retry-After and x-ratelimit-*",
    ),
    (
        "openai-tokens",
        "api.openai.com: 30,000 prompt and 4,000 completion tokens a minute, then 429",
    ),
    (
        "azure-openai",
        "*.openai.azure.com: 25% get 429 with retry-after and retry-after-ms",
    ),
    (
        "anthropic",
        "api.anthropic.com: 25% get 429 rate_limit_error (retry-after) or 529 overloaded",
    ),
    (
        "github",
        "api.github.com: 60 requests a minute, x-ratelimit-*, then 403 with Retry-After",
    ),
    (
        "github-models",
        "models.github.ai: 15 requests a minute, then 429 RateLimitReached, Retry-After",
    ),
    (
        "graph",
        "graph.microsoft.com: 50% get 429 or 503 with Retry-After, or 504; Graph's body",
    ),
    (
        "graph-rate-limit",
        "graph.microsoft.com: 20 requests per 10 s, then 429 TooManyRequests, Retry-After",
    ),
    (
        "apim",
        "*.azure-api.net: API Management's rate-limit, 10 calls a minute, then 429",
    ),
    (
        "stripe",
        "api.stripe.com: 20% get 429 rate_limit, no Retry-After (clients back off)",
    ),
    (
        "twilio",
        "api.twilio.com: 25% get 429 error 20429, no Retry-After (clients back off)",
    ),
    (
        "postmark",
        "api.postmarkapp.com: 25% get 429, no Retry-After (clients back off)",
    ),
    (
        "resend",
        "api.resend.com: 2 requests a second, ratelimit-*, then 429 with retry-after",
    ),
    (
        "paypal",
        "api-m.paypal.com: 25% get 429 RATE_LIMIT_REACHED, no Retry-After (back off)",
    ),
    (
        "flaky",
        "25% of watched requests get 503 with Retry-After or a reset connection",
    ),
    (
        "degradation",
        "50-400 ms of latency, 10 requests per 10 s, and 10% get 503 with Retry-After",
    ),
];

/// The text of the preset `name` (JSON with comments); `None` if there is no such preset.
///
/// # Examples
///
/// ```
/// let text = holdoff_config::preset::text("github").unwrap();
/// assert!(text.contains("https://api.github.com/*"));
/// assert_eq!(holdoff_config::preset::text("gitlab"), None);
/// ```
pub fn text(name: &str) -> Option<&'static str> {
    Some(match name {
        "throttle" => include_str!("../presets/throttle.json"),
        "openai" => include_str!("../presets/openai.json"),
        "openai-tokens" => include_str!("../presets/openai-tokens.json"),
        "azure-openai" => include_str!("../presets/azure-openai.json"),
        "anthropic" => include_str!("../presets/anthropic.json"),
        "github" => include_str!("../presets/github.json"),
        "github-models" => include_str!("../presets/github-models.json"),
        "graph" => include_str!("../presets/graph.json"),
        "graph-rate-limit" => include_str!("../presets/graph-rate-limit.json"),
        "apim" => include_str!("../presets/apim.json"),
        "stripe" => include_str!("../presets/stripe.json"),
        "twilio" => include_str!("../presets/twilio.json"),
        "postmark" => include_str!("../presets/postmark.json"),
        "resend" => include_str!("../presets/resend.json"),
        "paypal" => include_str!("../presets/paypal.json"),
        "flaky" => include_str!("../presets/flaky.json"),
        "degradation" => include_str!("../presets/degradation.json"),
        _ => return None,
    })
}

/// The preset `name`, compiled.
///
/// # Errors
///
/// There is no such preset (the error lists the names). A preset that does not compile is a
/// bug, caught by this module's tests.
pub fn compile(name: &str) -> Result<Compiled, ConfigProblems> {
    let file = format!("preset {name}");
    let Some(text) = text(name) else {
        return Err(ConfigProblems::one(compile::FileError::new(
            "",
            "",
            unknown(name),
        )));
    };
    let raw = load::parse(text, Format::Json, &file)?;
    // Presets name no files, so the base directory is never used.
    compile::compile(&raw, &file, Path::new(""))
}

/// The preset that stands nearest to `name`, if one does: the longest preset whose words
/// appear in order in `name` (`openai-throttling` → `openai`, `microsoft-graph-rate-limiting`
/// → `graph-rate-limit`; a word of `name` may go on, as `limiting` does `limit`), else one a
/// slip of the keyboard away (`opneai` → `openai`).
///
/// # Examples
///
/// ```
/// use holdoff_config::preset::nearest;
///
/// assert_eq!(nearest("openai-throttling"), Some("openai"));
/// assert_eq!(nearest("anthropc"), Some("anthropic"));
/// assert_eq!(nearest("kafka"), None);
/// ```
pub fn nearest(name: &str) -> Option<&'static str> {
    let name = name.to_ascii_lowercase();
    let words: Vec<&str> = name
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|word| !word.is_empty())
        .collect();
    let contained = PRESETS
        .iter()
        .map(|(preset, _)| *preset)
        .filter(|preset| {
            let preset_words: Vec<&str> = preset.split('-').collect();
            words.windows(preset_words.len()).any(|run| {
                run.iter()
                    .zip(&preset_words)
                    .all(|(word, preset_word)| word.starts_with(preset_word))
            })
        })
        // The first of the longest, in the list's order.
        .fold(None, |best: Option<&str>, preset| match best {
            Some(best) if best.len() >= preset.len() => Some(best),
            _ => Some(preset),
        });
    contained.or_else(|| {
        PRESETS
            .iter()
            .map(|(preset, _)| (strsim::jaro_winkler(&name, preset), *preset))
            .filter(|(score, _)| *score >= 0.85)
            .max_by(|a, b| a.0.total_cmp(&b.0))
            .map(|(_, preset)| preset)
    })
}

/// What to say of a preset `name` there is none of: the nearest one, if any, and the list.
pub fn unknown(name: &str) -> String {
    let hint = nearest(name).map_or_else(String::new, |near| format!(" (did you mean `{near}`?)"));
    format!(
        "there is no preset `{name}`{hint}; the presets are {}",
        names().join(", ")
    )
}

fn names() -> Vec<&'static str> {
    PRESETS.iter().map(|(name, _)| *name).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use holdoff_proxy::fault::FaultOutcome;

    mod compile {
        use super::*;

        #[test]
        fn compiles_every_preset() {
            for (name, _) in PRESETS {
                let text = text(name).expect("every listed preset has a text");
                assert!(text.contains("\"$schema\""), "{name} names the schema");
                let compiled = compile(name).unwrap_or_else(|err| panic!("{name}: {err}"));
                let plan = &compiled.plan;
                assert!(
                    !plan.errors.is_empty()
                        || !plan.rate_limits.is_empty()
                        || !plan.llm_rate_limits.is_empty(),
                    "{name} injects something"
                );
                assert!(compiled.data_files.is_empty(), "{name} reads no files");
            }
        }

        #[test]
        fn lists_every_file_once_and_opens_each_with_its_name() {
            let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("presets");
            let mut files: Vec<String> = std::fs::read_dir(&dir)
                .expect("the presets folder")
                .map(|entry| {
                    entry
                        .expect("an entry")
                        .file_name()
                        .to_string_lossy()
                        .into_owned()
                })
                .collect();
            files.sort();
            let mut listed: Vec<String> = names().iter().map(|n| format!("{n}.json")).collect();
            listed.sort();
            assert_eq!(files, listed, "every file in presets/ is listed, once");
            for (name, description) in PRESETS {
                let text = text(name).expect("a text");
                assert!(
                    text.starts_with(&format!("// holdoff preset `{name}`: ")),
                    "{name} opens with its name"
                );
                assert!(description.len() <= 80, "{name}: a long description");
            }
        }

        #[test]
        fn makes_the_default_throttle_half_of_everything() {
            let compiled = compile("throttle").expect("compiles");
            assert_eq!(compiled.urls_to_watch, None);
            let [rule] = compiled.plan.errors.as_slice() else {
                panic!("one rule")
            };
            assert_eq!(rule.rate.as_percent(), 50.0);
            assert_eq!(rule.request.url.as_str(), "*");
            let [FaultOutcome::Respond(response)] = rule.outcomes.as_slice() else {
                panic!("one response")
            };
            assert_eq!(response.status, 429);
        }

        #[test]
        fn names_the_presets_for_an_unknown_one() {
            let err = compile("gitlab").expect_err("no such preset");
            assert_eq!(
                err.to_string(),
                format!(
                    "there is no preset `gitlab`; the presets are {}",
                    names().join(", ")
                )
            );
            assert!(
                err.to_string()
                    .contains("throttle, openai, openai-tokens, azure-openai,")
            );
        }

        #[test]
        fn suggests_the_nearest_preset_for_a_dev_proxy_sample_or_a_slip() {
            for (asked, near) in [
                ("openai-throttling", Some("openai")),
                ("azure-openai-throttling", Some("azure-openai")),
                ("microsoft-graph-rate-limiting", Some("graph-rate-limit")),
                ("graph-throttling", Some("graph")),
                ("GitHub", Some("github")),
                ("opneai", Some("openai")),
                ("degradaton", Some("degradation")),
                ("kafka", None),
                ("", None),
            ] {
                assert_eq!(nearest(asked), near, "{asked}");
            }
            assert_eq!(
                unknown("openai-throttling"),
                format!(
                    "there is no preset `openai-throttling` (did you mean `openai`?); the \
                     presets are {}",
                    names().join(", ")
                )
            );
        }

        #[test]
        fn applies_every_rule_to_every_watched_url() {
            // So that `-u` re-points a preset without editing its rules.
            for (name, _) in PRESETS {
                let plan = compile(name).expect("compiles").plan;
                for rule in &plan.errors {
                    assert_eq!(rule.request.url.as_str(), "*", "{name}: an error rule");
                    assert_eq!(rule.request.method, None, "{name}");
                }
                for limit in &plan.rate_limits {
                    assert!(limit.url.is_none(), "{name}: a rate limit names a URL");
                }
                if let Some(latency) = &plan.latency {
                    assert!(latency.url.is_none(), "{name}: latency names a URL");
                }
            }
        }

        #[test]
        fn watches_the_host_of_its_api() {
            for (name, description) in PRESETS {
                let compiled = compile(name).expect("compiles");
                match compiled.urls_to_watch {
                    // The generic ones leave the list to -u.
                    None => assert!(
                        ["throttle", "flaky", "degradation"].contains(name),
                        "{name} watches nothing"
                    ),
                    Some(patterns) => {
                        let host = description.split(':').next().expect("a host first");
                        assert!(
                            patterns
                                .iter()
                                .any(|p| p.as_str() == format!("https://{host}/*")),
                            "{name}: {description}"
                        );
                    }
                }
            }
        }

        #[test]
        fn sends_no_retry_after_where_the_vendor_sends_none() {
            for name in ["stripe", "twilio", "postmark", "paypal"] {
                let plan = compile(name).expect("compiles").plan;
                let responses: Vec<_> =
                    plan.errors.iter().flat_map(|rule| &rule.outcomes).collect();
                assert!(!responses.is_empty(), "{name}");
                for outcome in responses {
                    let FaultOutcome::Respond(response) = outcome else {
                        panic!("{name}: a network fault")
                    };
                    assert_eq!(response.status, 429, "{name}");
                    assert!(
                        response
                            .headers
                            .iter()
                            .all(|(header, _)| !header.as_str().starts_with("retry-after")),
                        "{name} sends a Retry-After"
                    );
                }
            }
        }
    }
}
