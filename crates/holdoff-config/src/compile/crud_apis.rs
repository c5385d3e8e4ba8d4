//! `crudApis`: REST APIs over the JSON array of a data file.

use serde_json::Value;

use super::{Compiler, WrittenIn};
use crate::error::{index, key};
use crate::file::{RawCrudAction, RawCrudActionKind, RawCrudApi};
use holdoff_proxy::fault::{CrudAction, CrudActionKind, CrudApi};

impl Compiler {
    /// Every API of `crudApis`, its data file read, added to `apis`.
    pub(super) fn crud_apis(
        &mut self,
        at: WrittenIn<'_>,
        raw: &[RawCrudApi],
        apis: &mut Vec<CrudApi>,
    ) {
        self.list(at, "crudApis", raw, apis, |this, at, path, raw| {
            this.crud_api(at, path, raw)
        });
    }

    fn crud_api(&mut self, at: WrittenIn<'_>, path: &str, raw: &RawCrudApi) -> Option<CrudApi> {
        let base = raw.base_url.trim();
        let scheme = base.split_once("://").map(|(scheme, _)| scheme);
        let base_ok = matches!(scheme, Some(s) if s.eq_ignore_ascii_case("http") || s.eq_ignore_ascii_case("https"))
            && base.parse::<http::Uri>().is_ok()
            && !base.contains(['{', '*', '?']);
        if !base_ok {
            self.error(
                at,
                key(path, "baseUrl"),
                format!(
                    "`{}` is not an http or https URL without placeholders, wildcards or a \
                     query: write one such as `https://api.example.com/v1/customers`",
                    raw.base_url
                ),
            );
        }
        if raw.actions.is_empty() {
            self.error(
                at,
                key(path, "actions"),
                "there are no actions, so the API answers nothing: list at least one, such as \
                 {\"action\": \"getAll\"}",
            );
        }
        let mut actions = Vec::with_capacity(raw.actions.len());
        let mut valid = base_ok && !raw.actions.is_empty();
        for (i, action) in raw.actions.iter().enumerate() {
            match self.crud_action(at, &index(&key(path, "actions"), i), base, action) {
                Some(action) => actions.push(action),
                None => valid = false,
            }
        }
        let data =
            match &raw.data_file {
                None => Some(Vec::new()),
                Some(name) => {
                    let mut items = None;
                    let file_key = key(path, "dataFile");
                    self.data_file(at, &file_key, name, "data", |this, inner, value: Value| {
                        match value {
                        Value::Array(list) => items = Some(list),
                        other => this.error(
                            inner,
                            "",
                            format!(
                                "the data of a CRUD API is a JSON array of items, and this file \
                                 holds {}: put the items in `[...]`",
                                kind_of(&other)
                            ),
                        ),
                    }
                    });
                    items
                }
            };
        let data = data?;
        valid.then(|| CrudApi::new(base, actions, data))
    }

    fn crud_action(
        &mut self,
        at: WrittenIn<'_>,
        path: &str,
        base: &str,
        raw: &RawCrudAction,
    ) -> Option<CrudAction> {
        let kind = match raw.action {
            RawCrudActionKind::GetAll => CrudActionKind::GetAll,
            RawCrudActionKind::GetOne => CrudActionKind::GetOne,
            RawCrudActionKind::GetMany => CrudActionKind::GetMany,
            RawCrudActionKind::Create => CrudActionKind::Create,
            RawCrudActionKind::Merge => CrudActionKind::Merge,
            RawCrudActionKind::Update => CrudActionKind::Update,
            RawCrudActionKind::Delete => CrudActionKind::Delete,
        };
        let method = match &raw.method {
            Some(method) => self.method(at, key(path, "method"), method)?,
            None => kind.default_method(),
        };
        let url = raw.url.as_deref().unwrap_or("");
        CrudAction::new(kind, method, base, url, raw.query.as_deref())
            .map_err(|(which, message)| self.error(at, key(path, which), message))
            .ok()
    }
}

/// What a JSON value is, for a message.
fn kind_of(value: &Value) -> &'static str {
    match value {
        Value::Object(_) => "an object",
        Value::String(_) => "a string",
        Value::Number(_) => "a number",
        Value::Bool(_) => "a boolean",
        Value::Null => "null",
        Value::Array(_) => "an array",
    }
}

#[cfg(test)]
mod tests {
    use crate::compile::compile;
    use crate::load::{Format, parse};
    use std::path::Path;

    fn problems(text: &str) -> String {
        let raw = parse(text, Format::Json, "holdoff.json").expect("parses");
        match compile(&raw, "holdoff.json", Path::new(".")) {
            Ok(_) => panic!("compiles, but should not: {text}"),
            Err(errors) => errors.to_string(),
        }
    }

    mod crud_apis {
        use super::*;

        #[test]
        fn compiles_an_api_without_a_data_file() {
            let raw = parse(
                r#"{"crudApis": [{"baseUrl": "https://api.example.com/customers",
                    "actions": [{"action": "getAll"},
                                {"action": "getOne", "url": "/{id}", "query": "$.[?(@.id == {id})]"}]}]}"#,
                Format::Json,
                "holdoff.json",
            )
            .expect("parses");
            let compiled = compile(&raw, "holdoff.json", Path::new(".")).expect("compiles");
            let api = &compiled.plan.crud_apis[0];
            assert_eq!(api.base_url(), "https://api.example.com/customers");
            assert!(api.snapshot().is_empty());
        }

        #[test]
        fn names_each_wrong_key() {
            insta::assert_snapshot!(problems(
                r#"{"crudApis": [
                    {"baseUrl": "api.example.com", "actions": []},
                    {"baseUrl": "https://api.example.com/c", "actions": [
                        {"action": "getOne", "url": "/{id}"},
                        {"action": "delete", "url": "/{id}", "query": "$[?@.id == {other}]"},
                        {"action": "merge", "url": "/{id}", "query": "$[?@.id == {id}"},
                        {"action": "getMany", "url": "/{id", "query": "$"},
                        {"action": "getMany", "query": "$[?(@.name =~ /^a.*/i)]"},
                        {"action": "getAll", "method": "G T"}]}]}"#
            ));
        }

        #[test]
        fn refuses_a_data_file_that_is_not_an_array() {
            let dir = tempfile::tempdir().expect("a temporary directory");
            std::fs::write(dir.path().join("data.json"), r#"{"id": 1}"#).expect("written");
            let raw = parse(
                r#"{"crudApis": [{"baseUrl": "https://api.example.com/c", "dataFile": "data.json",
                    "actions": [{"action": "getAll"}]}]}"#,
                Format::Json,
                "holdoff.json",
            )
            .expect("parses");
            let errors = compile(&raw, "holdoff.json", dir.path())
                .unwrap_err()
                .to_string();
            assert!(
                errors.contains("is a JSON array of items, and this file holds an object"),
                "{errors}"
            );
        }

        #[test]
        fn reports_a_missing_data_file() {
            let errors = problems(
                r#"{"crudApis": [{"baseUrl": "https://api.example.com/c", "dataFile": "nowhere.json",
                    "actions": [{"action": "getAll"}]}]}"#,
            );
            assert!(errors.contains("crudApis[0].dataFile"), "{errors}");
        }
    }
}
