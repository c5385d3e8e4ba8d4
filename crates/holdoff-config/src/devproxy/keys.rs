//! The keys Dev Proxy's schemas allow, level by level, read off the serde types the import
//! reads its files with: what is not there is noted as ignored, and a key spelled in another
//! case is respelled (Dev Proxy reads keys in any case).
//!
//! Each `Dp*` type is Dev Proxy's schema for its file or section: a field for every key the
//! schema allows, of type [`Unread`] where the import does not read it. The known keys are
//! that type's JSON Schema properties, as `schemars` derives them from the same `#[serde]`
//! attributes serde reads with, so they are serde's own names, renames and all, and nested
//! types are walked too. Serialising a `Default` value would miss the keys of a type that is
//! only reached through an `Option` or a list (none, empty), and collecting what serde
//! ignores comes too late: keys must be respelled before serde reads them.

use std::borrow::Cow;

use schemars::{JsonSchema, Schema, SchemaGenerator};
use serde::de::{Deserialize, Deserializer, IgnoredAny};
use serde_json::Value;

use crate::error::{index, join};

/// What a schema allows at one level.
#[derive(Clone, Debug, PartialEq)]
pub(super) enum Shape {
    /// An object of these keys, each with its own shape.
    Object(Vec<(String, Shape)>),
    /// A list of items of this shape.
    List(Box<Shape>),
    /// Not looked into (a body, a string, a number).
    Leaf,
}

impl Shape {
    /// The keys `T` reads, level by level.
    pub(super) fn of<T: JsonSchema>() -> Shape {
        let schema = schemars::schema_for!(T);
        let root = schema.as_value();
        shape(root, root.get("$defs"))
    }
}

/// The shape of `schema`, its `$ref`s looked up in `defs`.
fn shape(schema: &Value, defs: Option<&Value>) -> Shape {
    if let Some(name) = schema
        .get("$ref")
        .and_then(Value::as_str)
        .and_then(|pointer| pointer.strip_prefix("#/$defs/"))
    {
        return defs
            .and_then(|defs| defs.get(name))
            .map_or(Shape::Leaf, |def| shape(def, defs));
    }
    if let Some(Value::Object(properties)) = schema.get("properties") {
        return Shape::Object(
            properties
                .iter()
                .map(|(key, value)| (key.clone(), shape(value, defs)))
                .collect(),
        );
    }
    if let Some(items) = schema.get("items") {
        return Shape::List(Box::new(shape(items, defs)));
    }
    // An `Option` of an object is one of it and null.
    schema
        .get("anyOf")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|variant| shape(variant, defs))
        .find(|shape| *shape != Shape::Leaf)
        .unwrap_or(Shape::Leaf)
}

/// A key Dev Proxy's schema allows that the import does not read (`$schema`, `pluginPath`,
/// …): a field of this type makes the key known, so that it is not noted as ignored, and
/// takes any value.
#[derive(Debug)]
pub(super) struct Unread;

impl<'de> Deserialize<'de> for Unread {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Unread, D::Error> {
        IgnoredAny::deserialize(deserializer).map(|_| Unread)
    }
}

impl JsonSchema for Unread {
    fn schema_name() -> Cow<'static, str> {
        "Unread".into()
    }

    fn inline_schema() -> bool {
        true
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        Schema::from(true)
    }
}

/// Respells keys of `value` that `shape` knows in another case, and adds the path of every key
/// it does not know to `unknown`. Returns whether anything was respelled.
pub(super) fn scan(
    value: &mut Value,
    shape: &Shape,
    path: &str,
    unknown: &mut Vec<String>,
) -> bool {
    let mut respelled = false;
    match (shape, value) {
        (Shape::Object(fields), Value::Object(map)) => {
            let keys: Vec<String> = map.keys().cloned().collect();
            for key in keys {
                if fields.iter().any(|(known, _)| *known == key) {
                    continue;
                }
                let canonical = fields
                    .iter()
                    .map(|(known, _)| known)
                    .find(|known| known.eq_ignore_ascii_case(&key))
                    .filter(|known| !map.contains_key(*known));
                match (canonical, map.remove(&key)) {
                    (Some(canonical), Some(moved)) => {
                        map.insert(canonical.clone(), moved);
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
                if let Some(value) = map.get_mut(key) {
                    respelled |= scan(value, inner, &join(path, key), unknown);
                }
            }
        }
        (Shape::List(item), Value::Array(items)) => {
            for (i, value) in items.iter_mut().enumerate() {
                respelled |= scan(value, item, &index(path, i), unknown);
            }
        }
        _ => {}
    }
    respelled
}

#[cfg(test)]
mod tests {
    use serde::Deserialize;

    use super::super::errors::DpErrorsFile;
    use super::super::response::DpCustomResponse;
    use super::*;

    mod of {
        use super::*;

        #[derive(Deserialize, JsonSchema)]
        #[serde(rename_all = "camelCase")]
        #[allow(dead_code)]
        struct Outer {
            #[serde(rename = "$schema")]
            _schema: Option<Unread>,
            max_ms: Option<u64>,
            inner: Option<Inner>,
            items: Vec<Inner>,
            body: Option<Value>,
        }

        #[derive(Deserialize, JsonSchema)]
        #[allow(dead_code)]
        struct Inner {
            #[serde(rename = "in")]
            location: String,
        }

        #[test]
        fn reads_serdes_names_through_options_and_lists() {
            let inner = || Shape::Object(vec![("in".to_owned(), Shape::Leaf)]);
            assert_eq!(
                Shape::of::<Outer>(),
                Shape::Object(vec![
                    ("$schema".to_owned(), Shape::Leaf),
                    ("body".to_owned(), Shape::Leaf),
                    ("inner".to_owned(), inner()),
                    ("items".to_owned(), Shape::List(Box::new(inner()))),
                    ("maxMs".to_owned(), Shape::Leaf),
                ])
            );
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
            assert!(scan(
                &mut value,
                &Shape::of::<DpErrorsFile>(),
                "",
                &mut unknown
            ));
            assert_eq!(value["errors"][0]["request"]["url"], "*");
            assert_eq!(value["errors"][0]["responses"][0]["statusCode"], 429);
            assert_eq!(unknown, ["extra", "errors[0].request.nth"]);
        }

        #[test]
        fn leaves_bodies_alone() {
            let mut value = serde_json::json!({"statusCode": 200, "body": {"Whatever": 1}});
            let mut unknown = Vec::new();
            assert!(!scan(
                &mut value,
                &Shape::of::<DpCustomResponse>(),
                "",
                &mut unknown
            ));
            assert!(unknown.is_empty());
        }
    }
}
