//! Reading one of Dev Proxy's files: JSON with comments and trailing commas, or YAML; and the
//! keys Dev Proxy's schemas allow, level by level: what is not there is noted as ignored, and a
//! key spelled in another case is respelled (Dev Proxy reads keys in any case).

use std::fs;
use std::path::Path;

use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::error::{FileError, index, join};
use crate::jsonc;
use crate::load::{Format, parse_as};

/// What a schema allows at one level.
#[derive(Clone, Copy)]
pub(super) enum Shape {
    /// An object of these keys, each with its own shape.
    Object(&'static [(&'static str, Shape)]),
    /// A list of items of this shape.
    List(&'static Shape),
    /// Not looked into (a body, a string, a number).
    Leaf,
}

pub(super) use Shape::{Leaf, List, Object};

/// Respells keys of `value` that `shape` knows in another case, and adds the path of every key
/// it does not know to `unknown`. Returns whether anything was respelled.
pub(super) fn scan(value: &mut Value, shape: Shape, path: &str, unknown: &mut Vec<String>) -> bool {
    let mut respelled = false;
    match (shape, value) {
        (Object(fields), Value::Object(map)) => {
            let keys: Vec<String> = map.keys().cloned().collect();
            for key in keys {
                if fields.iter().any(|(known, _)| *known == key) {
                    continue;
                }
                let canonical = fields
                    .iter()
                    .map(|(known, _)| *known)
                    .find(|known| known.eq_ignore_ascii_case(&key))
                    .filter(|known| !map.contains_key(*known));
                match (canonical, map.remove(&key)) {
                    (Some(canonical), Some(moved)) => {
                        map.insert(canonical.to_owned(), moved);
                        respelled = true;
                    }
                    (_, moved) => {
                        if let Some(moved) = moved {
                            map.insert(key.clone(), moved);
                        }
                        unknown.push(join(path, &key));
                    }
                }
            }
            for (key, inner) in fields {
                if let Some(value) = map.get_mut(*key) {
                    respelled |= scan(value, *inner, &join(path, key), unknown);
                }
            }
        }
        (List(item), Value::Array(items)) => {
            for (i, value) in items.iter_mut().enumerate() {
                respelled |= scan(value, *item, &index(path, i), unknown);
            }
        }
        _ => {}
    }
    respelled
}

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
        let text = fs::read_to_string(path).map_err(|err| {
            vec![FileError::new(
                &file,
                "",
                format!("cannot read the file: {err}"),
            )]
        })?;
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
    /// empty).
    pub(super) fn scan(&mut self, path: &str, shape: Shape, unknown: &mut Vec<String>) {
        let value = if path.is_empty() {
            Some(&mut self.value)
        } else {
            self.value.get_mut(path)
        };
        if let Some(value) = value {
            self.changed |= scan(value, shape, path, unknown);
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
    use super::super::errors::ERRORS_FILE;
    use super::super::rate_limit::CUSTOM_RESPONSE_FILE;
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

    mod scan {
        use super::*;

        #[test]
        fn respells_keys_in_another_case_and_lists_unknown_ones() {
            let mut value = serde_json::json!({
                "errors": [{"Request": {"url": "*", "nth": 2}, "responses": [{"StatusCode": 429}]}],
                "extra": true
            });
            let mut unknown = Vec::new();
            assert!(scan(&mut value, ERRORS_FILE, "", &mut unknown));
            assert_eq!(value["errors"][0]["request"]["url"], "*");
            assert_eq!(value["errors"][0]["responses"][0]["statusCode"], 429);
            assert_eq!(unknown, ["extra", "errors[0].request.nth"]);
        }

        #[test]
        fn leaves_bodies_alone() {
            let mut value = serde_json::json!({"statusCode": 200, "body": {"Whatever": 1}});
            let mut unknown = Vec::new();
            assert!(!scan(&mut value, CUSTOM_RESPONSE_FILE, "", &mut unknown));
            assert!(unknown.is_empty());
        }
    }
}
