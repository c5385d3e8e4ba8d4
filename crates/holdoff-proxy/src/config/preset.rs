//! The built-in presets: configuration files that ship with holdoff, for the APIs whose
//! throttling people most often need to test against.
//!
//! Each is a JSON file with comments, under `presets/` in this crate; `holdoff config preset
//! NAME` prints it, to be used as it is (`holdoff proxy --preset NAME`) or as the start of a
//! `holdoff.json`.

use std::path::Path;

use super::compile::{self, Compiled, ConfigProblems};
use super::load::{self, Format};

/// The presets, by name, with a one-line description.
pub const PRESETS: &[(&str, &str)] = &[
    (
        "throttle",
        "50% of watched requests get 429 with a Retry-After of 2-5 s (the default)",
    ),
    (
        "openai",
        "api.openai.com: 429 rate_limit_exceeded with OpenAI's JSON body and x-ratelimit-* headers",
    ),
    (
        "github",
        "api.github.com: 60 requests a minute, x-ratelimit-* headers, then 403 with Retry-After",
    ),
    (
        "graph",
        "graph.microsoft.com: 429 and 503 with Retry-After and Graph's JSON error body",
    ),
    (
        "flaky",
        "25% of watched requests get 503 with Retry-After or a reset connection",
    ),
];

/// The text of the preset `name` (JSON with comments); `None` if there is no such preset.
///
/// # Examples
///
/// ```
/// let text = holdoff_proxy::config::preset::text("github").unwrap();
/// assert!(text.contains("https://api.github.com/*"));
/// assert_eq!(holdoff_proxy::config::preset::text("gitlab"), None);
/// ```
pub fn text(name: &str) -> Option<&'static str> {
    Some(match name {
        "throttle" => include_str!("../../presets/throttle.json"),
        "openai" => include_str!("../../presets/openai.json"),
        "github" => include_str!("../../presets/github.json"),
        "graph" => include_str!("../../presets/graph.json"),
        "flaky" => include_str!("../../presets/flaky.json"),
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
            format!(
                "there is no preset `{name}`; the presets are {}",
                names().join(", ")
            ),
        )));
    };
    let raw = load::parse(text, Format::Json, &file)?;
    // Presets name no files, so the base directory is never used.
    compile::compile(&raw, &file, Path::new(""))
}

fn names() -> Vec<&'static str> {
    PRESETS.iter().map(|(name, _)| *name).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fault::plan::FaultOutcome;

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
                    !plan.errors.is_empty() || !plan.rate_limits.is_empty(),
                    "{name} injects something"
                );
                assert!(compiled.data_files.is_empty(), "{name} reads no files");
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
                "there is no preset `gitlab`; the presets are throttle, openai, github, graph, \
                 flaky"
            );
        }
    }
}
