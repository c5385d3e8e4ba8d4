//! Reading one of Dev Proxy's files: JSON with comments and trailing commas, or YAML; its keys
//! checked against the serde type that reads it (see `keys`).

use std::path::Path;

use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::keys::{Shape, scan};
use crate::error::{FileError, join};
use crate::jsonc;
use crate::load::{Format, parse_as};

/// A file read and parsed, before its values are typed.
pub(super) struct Doc {
    /// The path as shown in errors and notes.
    pub(super) file: String,
    /// What serde reads: for JSON, the text with comments and trailing commas blanked out
    /// (positions kept).
    pub(super) text: String,
    pub(super) format: Format,
    pub(super) value: Value,
    /// Whether `value` no longer reads as `text` (YAML merge keys applied, keys respelled):
    /// then errors are reported from `value`, with key paths but no lines.
    pub(super) changed: bool,
}

impl Doc {
    /// Reads `path`: YAML by its extension, as Dev Proxy decides, else JSON with comments and
    /// trailing commas.
    pub(super) fn read(path: &Path, file: String) -> Result<Doc, Vec<FileError>> {
        let text = crate::load::read_text(path)
            .map_err(|message| vec![FileError::new(&file, "", message)])?;
        if Format::from_path(path) == Some(Format::Yaml) {
            let mut yaml: serde_yaml_ng::Value =
                parse_as(&text, Format::Yaml, &file).map_err(|errors| errors.0)?;
            let before = yaml.clone();
            yaml.apply_merge().map_err(|err| {
                vec![FileError::new(
                    &file,
                    "",
                    format!("cannot apply a YAML merge key (`<<`): {err}"),
                )]
            })?;
            let changed = yaml != before;
            let value = serde_json::to_value(&yaml).map_err(|err| {
                vec![FileError::new(
                    &file,
                    "",
                    format!("cannot read the YAML as JSON data: {err}"),
                )]
            })?;
            return Ok(Doc {
                file,
                text,
                format: Format::Yaml,
                value,
                changed,
            });
        }
        let text = clean_json(&text);
        let value = parse_as(&text, Format::Json, &file).map_err(|errors| errors.0)?;
        Ok(Doc {
            file,
            text,
            format: Format::Json,
            value,
            changed: false,
        })
    }

    /// Respells and notes keys of the value at `path` (a top-level key, or the root when
    /// empty) as `T` reads it.
    pub(super) fn scan<T: JsonSchema>(&mut self, path: &str, unknown: &mut Vec<String>) {
        let value = if path.is_empty() {
            Some(&mut self.value)
        } else {
            self.value.get_mut(path)
        };
        if let Some(value) = value {
            self.changed |= scan(value, &Shape::of::<T>(), path, unknown);
        }
    }

    /// The value at the top-level key `at` (the root when empty) as a `T`. From the text when
    /// it can be (errors then have lines), else from the value.
    pub(super) fn typed<T: DeserializeOwned>(&self, at: &str) -> Result<T, Vec<FileError>> {
        if at.is_empty() && !self.changed {
            return parse_as(&self.text, self.format, &self.file).map_err(|errors| errors.0);
        }
        let value = if at.is_empty() {
            &self.value
        } else {
            self.value.get(at).unwrap_or(&Value::Null)
        };
        parse_as(&value.to_string(), Format::Json, &self.file).map_err(|errors| {
            errors
                .0
                .into_iter()
                .map(|error| FileError {
                    path: join(at, &error.path),
                    line: None,
                    ..error
                })
                .collect()
        })
    }
}

/// The JSON text with comments and trailing commas blanked out, lines and columns kept (Dev
/// Proxy allows both). When a comment is not closed the text is left for the parser to
/// report.
fn clean_json(text: &str) -> String {
    let Ok(mut bytes) = jsonc::strip_comments(text) else {
        return text.to_owned();
    };
    jsonc::blank_trailing_commas(&mut bytes);
    String::from_utf8(bytes).unwrap_or_else(|_| text.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    mod clean_json {
        use super::*;

        #[test]
        fn blanks_comments_and_trailing_commas_keeping_positions() {
            let text = "{\n  \"a\": 1, // one\n  /* two */\n}";
            let cleaned = clean_json(text);
            assert_eq!(cleaned.len(), text.len());
            assert_eq!(cleaned.lines().count(), text.lines().count());
            let value: Value = serde_json::from_str(&cleaned).expect("valid JSON");
            assert_eq!(value, serde_json::json!({"a": 1}));
        }
    }
}
