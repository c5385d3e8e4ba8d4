//! Mock bodies that mirror the request's, as Dev Proxy's MockResponsePlugin fills them: a JSON
//! string value `"@request.body.a.b"` in a mock's body becomes the value at `a.b` in the
//! request's JSON body (any JSON value; `null` when there is none), so that a mock of `POST
//! /users` answers with the name it was sent.
//!
//! As in Dev Proxy, only a whole string value is replaced (`"@request.body.name"`, not text
//! around it), the prefix in any case and the path as written; and a request whose body is not
//! JSON (by its `Content-Type`, when it has one, or because it does not parse) leaves the
//! placeholders as they are.

use bytes::Bytes;
use serde_json::Value;

use crate::fault::FaultOutcome;

/// The prefix of a placeholder, compared in any case.
const PREFIX: &str = "@request.body.";

/// Whether a mock answering with `response` mirrors the request: its body is JSON with a
/// placeholder in it. Decided once per plan.
pub(super) fn mirrors(response: &FaultOutcome) -> bool {
    let FaultOutcome::Respond(response) = response else {
        return false;
    };
    // A cheap look first: most bodies have no placeholder, and need no parse.
    let lower = response.body.to_ascii_lowercase();
    if !lower.windows(PREFIX.len()).any(|w| w == PREFIX.as_bytes()) {
        return false;
    }
    serde_json::from_slice::<Value>(&response.body).is_ok_and(|body| has_placeholder(&body))
}

fn has_placeholder(value: &Value) -> bool {
    match value {
        Value::String(text) => is_placeholder(text).is_some(),
        Value::Array(items) => items.iter().any(has_placeholder),
        Value::Object(fields) => fields.values().any(has_placeholder),
        _ => false,
    }
}

/// The path of a placeholder (`name` of `@request.body.name`).
fn is_placeholder(text: &str) -> Option<&str> {
    let head = text.get(..PREFIX.len())?;
    head.eq_ignore_ascii_case(PREFIX)
        .then(|| &text[PREFIX.len()..])
}

/// `mock_body` with its placeholders filled from `request_body`; `None` when the request's
/// body is not JSON (`content_type`, if given, must name JSON).
pub(super) fn fill(
    mock_body: &[u8],
    request_body: &[u8],
    content_type: Option<&str>,
) -> Option<Bytes> {
    if content_type.is_some_and(|kind| !kind.to_ascii_lowercase().contains("json")) {
        return None;
    }
    let request: Value = serde_json::from_slice(request_body).ok()?;
    let mut body: Value = serde_json::from_slice(mock_body).ok()?;
    replace(&mut body, &request);
    serde_json::to_vec(&body).ok().map(Bytes::from)
}

fn replace(value: &mut Value, request: &Value) {
    match value {
        Value::String(text) => {
            if let Some(path) = is_placeholder(text) {
                *value = lookup(request, path).cloned().unwrap_or(Value::Null);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|item| replace(item, request)),
        Value::Object(fields) => fields
            .values_mut()
            .for_each(|field| replace(field, request)),
        _ => {}
    }
}

/// The value at the dotted `path` in `request`, through objects only.
fn lookup<'a>(request: &'a Value, path: &str) -> Option<&'a Value> {
    path.split('.')
        .try_fold(request, |current, name| current.as_object()?.get(name))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fault::{ErrorResponse, NetworkFault};
    use http::StatusCode;
    use serde_json::json;

    fn respond(body: &str) -> FaultOutcome {
        FaultOutcome::Respond(ErrorResponse {
            status: StatusCode::CREATED,
            headers: Vec::new(),
            body: Bytes::from(body.to_owned()),
        })
    }

    #[test]
    fn a_body_with_a_placeholder_mirrors_and_others_do_not() {
        assert!(mirrors(&respond(
            r#"{"id": 7, "name": "@request.body.name"}"#
        )));
        assert!(mirrors(&respond(r#"[{"n": "@REQUEST.BODY.user.name"}]"#)));
        assert!(!mirrors(&respond(r#"{"note": "see @request.body.name"}"#)));
        assert!(!mirrors(&respond("@request.body.name is not JSON")));
        assert!(!mirrors(&respond(r#"{"id": 7}"#)));
        assert!(!mirrors(&FaultOutcome::Network(NetworkFault::Reset)));
    }

    #[test]
    fn fills_each_placeholder_with_the_value_at_its_path() {
        let mock =
            br#"{"id": 7, "name": "@request.body.name", "city": "@request.body.address.city",
            "tags": ["@request.body.tags"], "missing": "@request.body.nope", "kept": "x"}"#;
        let request = br#"{"name": "Ada", "address": {"city": "London"}, "tags": [1, 2]}"#;
        let filled = fill(mock, request, Some("application/json; charset=utf-8")).unwrap();
        let filled: Value = serde_json::from_slice(&filled).unwrap();
        assert_eq!(
            filled,
            json!({ "id": 7, "name": "Ada", "city": "London", "tags": [[1, 2]],
                    "missing": null, "kept": "x" })
        );
    }

    #[test]
    fn a_request_body_that_is_not_json_leaves_the_mock_as_it_is() {
        let mock = br#"{"name": "@request.body.name"}"#;
        assert_eq!(
            fill(mock, b"name=Ada", Some("application/x-www-form-urlencoded")),
            None
        );
        assert_eq!(fill(mock, b"not json", None), None);
        assert!(fill(mock, br#"{"name": "Ada"}"#, None).is_some());
    }
}
