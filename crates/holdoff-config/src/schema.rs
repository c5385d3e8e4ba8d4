//! The JSON Schema of the configuration file, generated from the raw types of
//! [`file`](crate::file).
//!
//! A copy is checked in at `schema/holdoff.schema.json`, for editors to complete and check
//! `holdoff.json` files with (`"$schema": "…/holdoff.schema.json"`); a test keeps it current.

use crate::file::RawConfig;

/// Where the schema is published: the `$schema` of the presets and of imported files.
pub const SCHEMA_URL: &str = "https://example.invalid/holdoff/schema/holdoff.schema.json";

/// The JSON Schema (draft 2020-12) of a configuration file.
///
/// # Examples
///
/// ```
/// let schema = holdoff_config::schema::schema();
/// assert_eq!(schema["title"], "holdoff configuration");
/// assert!(schema["properties"]["urlsToWatch"].is_object());
/// ```
pub fn schema() -> serde_json::Value {
    schemars::schema_for!(RawConfig).to_value()
}
