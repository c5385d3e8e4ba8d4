//! The JSON Schema checked in at `schema/holdoff.schema.json` is the one the raw config types
//! generate, and every built-in preset is a configuration it describes.

use holdoff_config::file::RawConfig;
use holdoff_config::load::{Format, parse};
use holdoff_config::preset;
use holdoff_config::schema::{SCHEMA_URL, schema};

const CHECKED_IN: &str = include_str!("../../../schema/holdoff.schema.json");

#[test]
fn the_checked_in_schema_is_current() {
    let generated = format!(
        "{}\n",
        serde_json::to_string_pretty(&schema()).expect("a JSON value serializes")
    );
    assert!(
        generated == CHECKED_IN,
        "schema/holdoff.schema.json is out of date with the config types; regenerate it from \
         the repository root with:\n\n    cargo run -p holdoff-cli -- config schema > \
         schema/holdoff.schema.json\n"
    );
}

#[test]
fn every_preset_names_the_schema_and_round_trips() {
    for (name, _) in preset::PRESETS {
        let text = preset::text(name).expect("listed presets exist");
        let raw: RawConfig = parse(text, Format::Json, name).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(raw.schema.as_deref(), Some(SCHEMA_URL), "{name}");
        // What `holdoff config import-devproxy` writes reads back as the same configuration.
        let json = serde_json::to_string(&raw).expect("serializes");
        assert_eq!(parse(&json, Format::Json, name), Ok(raw), "{name}");
    }
}
