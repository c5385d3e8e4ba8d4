//! CRUD APIs: a REST API over an in-memory JSON array (Dev Proxy's CrudApiPlugin).
//!
//! A [`CrudApi`] owns its data; each of its [`CrudAction`]s matches a method and a URL
//! template, and works on the whole array or on the items its JSONPath query selects. The
//! answers are Dev Proxy's: `200` with the data, `201` with a created item, `204` after a
//! change, `404` with `{"error": {"message": "Not found"}}` when the query selects nothing.
//!
//! Nothing here reads a socket or a clock: [`CrudApi::answer`] takes the request's method,
//! URL, headers and body, and returns the response.

use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};

use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Method, Response, StatusCode, header};
use serde_json::{Map, Value};
use serde_json_path::JsonPath;

mod data;
mod template;

use data::{error_body, item_at, merge, remove_at};
use template::{Part, fill, join_url, literal, origin_len, percent_decode, same_name, template};

/// A REST API over a JSON array.
#[derive(Clone)]
pub struct CrudApi {
    /// The URL the actions' URLs are relative to, without a trailing `/`.
    base_url: String,
    actions: Vec<CrudAction>,
    /// The data, shared by every clone of the plan it is in: changes last until the plan is
    /// replaced.
    data: Arc<Mutex<Value>>,
}

/// What a [`CrudAction`] does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum CrudActionKind {
    /// `200` with the whole array.
    GetAll,
    /// `200` with the first item selected, `404` when none.
    GetOne,
    /// `200` with every item selected, as an array.
    GetMany,
    /// Appends the body (a JSON object); `201` with it.
    Create,
    /// Merges the body into the first item selected; `204`, or `404`.
    Merge,
    /// Replaces the first item selected with the body; `204`, or `404`.
    Update,
    /// Removes the first item selected; `204`, or `404`.
    Delete,
}

/// One request a [`CrudApi`] answers.
#[derive(Clone, Debug)]
pub struct CrudAction {
    kind: CrudActionKind,
    method: Method,
    /// The whole URL, the API's base and the action's path, split at its placeholders.
    url: Vec<Part>,
    /// Whether `url` has a query string: otherwise a request's query string is ignored.
    with_query: bool,
    query: Option<Vec<Part>>,
}

impl CrudActionKind {
    /// The method the action answers when its configuration names none (Dev Proxy's).
    pub fn default_method(self) -> Method {
        match self {
            CrudActionKind::Create => Method::POST,
            CrudActionKind::Merge => Method::PATCH,
            CrudActionKind::Update => Method::PUT,
            CrudActionKind::Delete => Method::DELETE,
            CrudActionKind::GetAll | CrudActionKind::GetOne | CrudActionKind::GetMany => {
                Method::GET
            }
        }
    }

    /// Whether the action selects items with a query.
    pub fn needs_query(self) -> bool {
        !matches!(self, CrudActionKind::GetAll | CrudActionKind::Create)
    }

    /// Whether the action reads the request body.
    pub fn reads_body(self) -> bool {
        matches!(
            self,
            CrudActionKind::Create | CrudActionKind::Merge | CrudActionKind::Update
        )
    }
}

impl CrudAction {
    /// An action at `path` (relative to `base_url`, `{name}` placeholders each matching one
    /// path segment or query value) with the JSONPath `query` (its `{name}`s filled from the
    /// URL's). Dev Proxy's `$.[...]` is read as `$[...]`.
    ///
    /// # Errors
    ///
    /// What is wrong, fit after a key path: an unclosed placeholder, a query placeholder the
    /// URL does not have, a query that is not JSONPath, a missing query where the action needs
    /// one.
    pub fn new(
        kind: CrudActionKind,
        method: Method,
        base_url: &str,
        path: &str,
        query: Option<&str>,
    ) -> Result<CrudAction, (&'static str, String)> {
        let whole = join_url(base_url, path);
        let url = template(&whole, false).map_err(|message| ("url", message))?;
        let names: Vec<&str> = url
            .iter()
            .filter_map(|part| match part {
                Part::Param { name, .. } => Some(name.as_str()),
                Part::Text(_) => None,
            })
            .collect();
        let query = match (query, kind.needs_query()) {
            (None, true) => {
                return Err((
                    "query",
                    format!(
                        "a {kind} action needs a `query` selecting its item, such as \
                     `$[?@.id == {{id}}]`"
                    ),
                ));
            }
            (None, false) => None,
            (Some(query), _) => {
                let bad = |message| ("query", message);
                let parts = template(query, true).map_err(bad)?;
                for part in &parts {
                    if let Part::Param { name, .. } = part
                        && !names.iter().any(|known| same_name(known, name))
                    {
                        return Err(bad(format!(
                            "the query's `{{{name}}}` is not a placeholder of the url \
                                 `{whole}`: use one of the url's placeholders"
                        )));
                    }
                }
                if query.contains("=~") {
                    return Err(bad(
                        "`=~` (a regular expression) is not JSONPath as RFC 9535 writes it: \
                         use `match(@.name, 'regex')` or `search(@.name, 'regex')`"
                            .to_owned(),
                    ));
                }
                // A stand-in for every placeholder shows whether the query parses.
                let sample = fill(&parts, |_| "0");
                if let Err(err) = JsonPath::parse(&sample) {
                    return Err(bad(format!(
                        "`{query}` is not a JSONPath query (RFC 9535): {err}"
                    )));
                }
                Some(parts)
            }
        };
        Ok(CrudAction {
            kind,
            method,
            with_query: whole.contains('?'),
            url,
            query,
        })
    }

    /// What the action does.
    pub fn kind(&self) -> CrudActionKind {
        self.kind
    }

    /// The placeholders' values when the request's method and `url` match.
    fn matches(&self, method: &Method, url: &str) -> Option<Vec<(String, String)>> {
        if *method != self.method {
            return None;
        }
        let url = if self.with_query {
            url
        } else {
            url.split_once('?').map_or(url, |(path, _)| path)
        };
        let mut rest = url;
        let mut params = Vec::new();
        for (i, part) in self.url.iter().enumerate() {
            match part {
                // The scheme and host are compared without regard to case, the rest exactly.
                Part::Text(text) if i == 0 => {
                    let head = rest.get(..text.len())?;
                    let origin = origin_len(text);
                    if !head[..origin].eq_ignore_ascii_case(&text[..origin])
                        || head[origin..] != text[origin..]
                    {
                        return None;
                    }
                    rest = &rest[text.len()..];
                }
                Part::Text(text) => rest = rest.strip_prefix(text.as_str())?,
                Part::Param { name, .. } => {
                    let end = rest.find(['/', '?', '&', '#']).unwrap_or(rest.len());
                    if end == 0 {
                        return None;
                    }
                    params.push((name.clone(), percent_decode(&rest[..end])));
                    rest = &rest[end..];
                }
            }
        }
        rest.is_empty().then_some(params)
    }

    /// The query with `params` filled in, parsed.
    fn path(&self, params: &[(String, String)]) -> Result<Option<JsonPath>, String> {
        let Some(parts) = &self.query else {
            return Ok(None);
        };
        let mut text = String::new();
        for part in parts {
            match part {
                Part::Text(piece) => text.push_str(piece),
                Part::Param { name, quote } => {
                    let value = params
                        .iter()
                        .find(|(known, _)| same_name(known, name))
                        .map_or("", |(_, value)| value.as_str());
                    literal(&mut text, value, *quote);
                }
            }
        }
        JsonPath::parse(&text)
            .map(Some)
            .map_err(|err| format!("the query `{text}` is not JSONPath: {err}"))
    }
}

impl CrudApi {
    /// An API at `base_url` with `actions`, serving `data`.
    pub fn new(base_url: &str, actions: Vec<CrudAction>, data: Vec<Value>) -> CrudApi {
        CrudApi {
            base_url: base_url.trim_end_matches('/').to_owned(),
            actions,
            data: Arc::new(Mutex::new(Value::Array(data))),
        }
    }

    /// The URL the actions are relative to.
    pub fn base_url(&self) -> &str {
        &self.base_url
    }

    /// The action that answers a request with `method` to `url`, if one does.
    pub fn action(&self, method: &Method, url: &str) -> Option<&CrudAction> {
        self.actions
            .iter()
            .find(|action| action.matches(method, url).is_some())
    }

    /// Whether the API answers a request with `method` to `url` (an action matches, or it is
    /// a CORS preflight under the base URL).
    pub fn answers(&self, method: &Method, url: &str, headers: &HeaderMap) -> bool {
        self.is_preflight(method, url, headers) || self.action(method, url).is_some()
    }

    /// The items, as they are now.
    pub fn snapshot(&self) -> Vec<Value> {
        match &*self.lock() {
            Value::Array(items) => items.clone(),
            _ => Vec::new(),
        }
    }

    /// The answer to a request with `method` to `url`, `headers` and `body` (read when the
    /// action reads one); `None` when no action matches. A body that is not a JSON object gets
    /// `400`.
    pub fn answer(
        &self,
        method: &Method,
        url: &str,
        headers: &HeaderMap,
        body: Option<&[u8]>,
    ) -> Option<Response<Bytes>> {
        let origin = headers.get(header::ORIGIN);
        if self.is_preflight(method, url, headers) {
            return Some(self.reply(StatusCode::NO_CONTENT, None, origin));
        }
        let (action, params) = self
            .actions
            .iter()
            .find_map(|action| Some((action, action.matches(method, url)?)))?;
        let (status, value) = match self.run(action, &params, body) {
            Ok(done) => done,
            Err(message) => (StatusCode::BAD_REQUEST, Some(error_body(&message))),
        };
        Some(self.reply(status, value, origin))
    }

    fn is_preflight(&self, method: &Method, url: &str, headers: &HeaderMap) -> bool {
        *method == Method::OPTIONS
            && headers.contains_key(header::ORIGIN)
            && url.len() >= self.base_url.len()
            && url[..self.base_url.len()].eq_ignore_ascii_case(&self.base_url)
            && matches!(
                url.as_bytes().get(self.base_url.len()),
                None | Some(b'/' | b'?')
            )
    }

    /// The data: always an array.
    fn lock(&self) -> std::sync::MutexGuard<'_, Value> {
        self.data.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Runs `action`: the status and body, or why the request is bad.
    fn run(
        &self,
        action: &CrudAction,
        params: &[(String, String)],
        body: Option<&[u8]>,
    ) -> Result<(StatusCode, Option<Value>), String> {
        let path = action.path(params)?;
        let object = || -> Result<Map<String, Value>, String> {
            let text = body.unwrap_or_default();
            match serde_json::from_slice::<Value>(text) {
                Ok(Value::Object(map)) => Ok(map),
                Ok(_) => Err(format!(
                    "a {} request's body must be a JSON object",
                    action.kind
                )),
                Err(err) => Err(format!(
                    "a {} request's body must be a JSON object, and this one is not JSON: {err}",
                    action.kind
                )),
            }
        };
        let mut guard = self.lock();
        let located = path.as_ref().map(|path| {
            let nodes = path.query_located(&guard);
            let first = nodes.first().map(|node| node.location().to_json_pointer());
            let all: Vec<Value> = nodes.iter().map(|node| node.node().clone()).collect();
            (first, all)
        });
        let not_found = Ok((StatusCode::NOT_FOUND, Some(error_body("Not found"))));
        // Always an array: `new` makes it one and nothing here replaces it.
        let Value::Array(data) = &mut *guard else {
            return not_found;
        };
        let (first, all) = located.unwrap_or_default();
        Ok(match action.kind {
            CrudActionKind::GetAll => (StatusCode::OK, Some(Value::Array(data.clone()))),
            CrudActionKind::GetMany => (StatusCode::OK, Some(Value::Array(all))),
            CrudActionKind::GetOne => match all.into_iter().next() {
                Some(item) => (StatusCode::OK, Some(item)),
                None => return not_found,
            },
            CrudActionKind::Create => {
                let item = Value::Object(object()?);
                data.push(item.clone());
                (StatusCode::CREATED, Some(item))
            }
            CrudActionKind::Merge | CrudActionKind::Update | CrudActionKind::Delete => {
                let Some(pointer) = first else {
                    return not_found;
                };
                let changed = match action.kind {
                    CrudActionKind::Merge => {
                        let update = object()?;
                        item_at(data, &pointer).map(|item| merge(item, update))
                    }
                    CrudActionKind::Update => {
                        let update = object()?;
                        item_at(data, &pointer).map(|item| *item = Value::Object(update))
                    }
                    _ => remove_at(data, &pointer),
                };
                if changed.is_none() {
                    return not_found;
                }
                (StatusCode::NO_CONTENT, None)
            }
        })
    }

    /// A response with `status` and, if any, the JSON `value`, with CORS headers when the
    /// request had an `Origin`.
    fn reply(
        &self,
        status: StatusCode,
        value: Option<Value>,
        origin: Option<&HeaderValue>,
    ) -> Response<Bytes> {
        let body = value
            .and_then(|value| serde_json::to_vec_pretty(&value).ok())
            .map_or_else(Bytes::new, Bytes::from);
        let json = !body.is_empty();
        let mut response = Response::new(body);
        *response.status_mut() = status;
        let headers = response.headers_mut();
        if json {
            headers.insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json; charset=utf-8"),
            );
        }
        if let Some(origin) = origin {
            headers.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, origin.clone());
            headers.insert(
                header::ACCESS_CONTROL_ALLOW_HEADERS,
                HeaderValue::from_static("content-type"),
            );
            let mut methods: Vec<&str> = Vec::new();
            for action in &self.actions {
                if !methods.contains(&action.method.as_str()) {
                    methods.push(action.method.as_str());
                }
            }
            if let Ok(value) = HeaderValue::from_str(&methods.join(", ")) {
                headers.insert(header::ACCESS_CONTROL_ALLOW_METHODS, value);
            }
        }
        response
    }
}

impl fmt::Debug for CrudApi {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CrudApi")
            .field("base_url", &self.base_url)
            .field("actions", &self.actions)
            .field("items", &self.snapshot().len())
            .finish()
    }
}

impl fmt::Display for CrudActionKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            CrudActionKind::GetAll => "getAll",
            CrudActionKind::GetOne => "getOne",
            CrudActionKind::GetMany => "getMany",
            CrudActionKind::Create => "create",
            CrudActionKind::Merge => "merge",
            CrudActionKind::Update => "update",
            CrudActionKind::Delete => "delete",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const BASE: &str = "https://api.example.com/v1/customers";

    fn action(kind: CrudActionKind, path: &str, query: Option<&str>) -> CrudAction {
        CrudAction::new(kind, kind.default_method(), BASE, path, query)
            .unwrap_or_else(|(key, message)| panic!("{key}: {message}"))
    }

    /// Dev Proxy's usual set of actions, its queries as its sample files write them. The
    /// first action that matches answers, and one without a query string in its URL ignores
    /// the request's: getMany by query string comes before getAll.
    fn customers() -> CrudApi {
        let by_id = Some("$.[?(@.id == {customer-id})]");
        CrudApi::new(
            BASE,
            vec![
                action(
                    CrudActionKind::GetMany,
                    "?city={city}",
                    Some("$[?@.city == '{city}']"),
                ),
                action(CrudActionKind::GetAll, "", None),
                action(CrudActionKind::GetOne, "/{customer-id}", by_id),
                action(CrudActionKind::Create, "", None),
                action(CrudActionKind::Merge, "/{customer-id}", by_id),
                action(CrudActionKind::Update, "/{customer-id}", by_id),
                action(CrudActionKind::Delete, "/{customer-id}", by_id),
            ],
            vec![
                json!({"id": 1, "name": "Ada", "city": "London", "tags": ["a"]}),
                json!({"id": 2, "name": "Grace", "city": "New York"}),
            ],
        )
    }

    fn call(api: &CrudApi, method: Method, path: &str, body: Option<&str>) -> (u16, Value) {
        let url = format!("{BASE}{path}");
        let response = api
            .answer(&method, &url, &HeaderMap::new(), body.map(str::as_bytes))
            .unwrap_or_else(|| panic!("{method} {url} is answered"));
        let value = if response.body().is_empty() {
            Value::Null
        } else {
            serde_json::from_slice(response.body()).expect("a JSON body")
        };
        (response.status().as_u16(), value)
    }

    mod answer {
        use super::*;

        #[test]
        fn lists_every_item() {
            let (status, body) = call(&customers(), Method::GET, "", None);
            assert_eq!(status, 200);
            assert_eq!(body.as_array().map(Vec::len), Some(2));
        }

        #[test]
        fn gets_one_item_by_a_numeric_placeholder() {
            let (status, body) = call(&customers(), Method::GET, "/2", None);
            assert_eq!((status, &body["name"]), (200, &json!("Grace")));
        }

        #[test]
        fn answers_404_when_the_query_selects_nothing() {
            let api = customers();
            let (status, body) = call(&api, Method::GET, "/9", None);
            assert_eq!(
                (status, body),
                (404, json!({"error": {"message": "Not found"}}))
            );
            assert_eq!(call(&api, Method::DELETE, "/9", None).0, 404);
            assert_eq!(call(&api, Method::PATCH, "/9", Some("{}")).0, 404);
        }

        #[test]
        fn reads_a_non_numeric_placeholder_as_a_string_not_as_query_text() {
            // Unquoted in the query, `1 || true` would select everything.
            let (status, _) = call(&customers(), Method::GET, "/1%20%7C%7C%20true", None);
            assert_eq!(status, 404);
        }

        #[test]
        fn fills_a_quoted_placeholder_from_the_query_string_decoded() {
            let (status, body) = call(&customers(), Method::GET, "?city=New%20York", None);
            assert_eq!(status, 200);
            assert_eq!(
                body,
                json!([{"id": 2, "name": "Grace", "city": "New York"}])
            );
            let (_, none) = call(&customers(), Method::GET, "?city=x'%5D", None);
            assert_eq!(none, json!([]));
        }

        #[test]
        fn creates_an_item_that_the_list_then_shows() {
            let api = customers();
            let (status, body) = call(&api, Method::POST, "", Some(r#"{"id": 3, "name": "Lin"}"#));
            assert_eq!((status, body), (201, json!({"id": 3, "name": "Lin"})));
            assert_eq!(api.snapshot().len(), 3);
            assert_eq!(call(&api, Method::GET, "/3", None).0, 200);
        }

        #[test]
        fn merges_as_json_net_does() {
            let api = customers();
            let update = r#"{"name": "Ada L.", "city": null, "tags": ["b"], "vip": true}"#;
            assert_eq!(
                call(&api, Method::PATCH, "/1", Some(update)),
                (204, Value::Null)
            );
            assert_eq!(
                api.snapshot()[0],
                json!({"id": 1, "name": "Ada L.", "city": "London", "tags": ["a", "b"], "vip": true})
            );
        }

        #[test]
        fn updates_by_replacing_the_item() {
            let api = customers();
            assert_eq!(call(&api, Method::PUT, "/1", Some(r#"{"id": 1}"#)).0, 204);
            assert_eq!(api.snapshot()[0], json!({"id": 1}));
        }

        #[test]
        fn deletes_the_item() {
            let api = customers();
            assert_eq!(call(&api, Method::DELETE, "/1", None).0, 204);
            assert_eq!(
                api.snapshot(),
                vec![json!({"id": 2, "name": "Grace", "city": "New York"})]
            );
            assert_eq!(call(&api, Method::GET, "/1", None).0, 404);
        }

        #[test]
        fn refuses_a_body_that_is_not_a_json_object_with_400() {
            let api = customers();
            let (status, body) = call(&api, Method::POST, "", Some("not json"));
            assert_eq!(status, 400);
            let message = body["error"]["message"].as_str().unwrap_or_default();
            assert!(message.contains("must be a JSON object"), "{message}");
            assert_eq!(call(&api, Method::PUT, "/1", Some("[1]")).0, 400);
            assert_eq!(call(&api, Method::PATCH, "/1", None).0, 400);
            assert_eq!(api.snapshot().len(), 2);
        }

        #[test]
        fn passes_on_what_no_action_matches() {
            let api = customers();
            let headers = HeaderMap::new();
            for (method, url) in [
                (Method::GET, format!("{BASE}/1/orders")),
                (Method::POST, format!("{BASE}/1")),
                (Method::GET, "https://api.example.com/v1/other".to_owned()),
                (Method::GET, format!("{BASE}x")),
            ] {
                assert!(
                    api.answer(&method, &url, &headers, None).is_none(),
                    "{method} {url}"
                );
            }
        }

        #[test]
        fn matches_the_host_without_regard_to_case_and_ignores_a_query_string() {
            let url = "HTTPS://API.example.com/v1/customers/1?expand=all";
            let answer = customers().answer(&Method::GET, url, &HeaderMap::new(), None);
            assert_eq!(answer.map(|r| r.status()), Some(StatusCode::OK));
        }

        #[test]
        fn adds_cors_headers_and_answers_a_preflight_when_there_is_an_origin() {
            let api = customers();
            let mut headers = HeaderMap::new();
            headers.insert(
                header::ORIGIN,
                HeaderValue::from_static("http://localhost:3000"),
            );
            let preflight = api
                .answer(&Method::OPTIONS, &format!("{BASE}/1"), &headers, None)
                .expect("a preflight is answered");
            assert_eq!(preflight.status(), StatusCode::NO_CONTENT);
            let allowed = &preflight.headers()[header::ACCESS_CONTROL_ALLOW_METHODS];
            assert_eq!(allowed, "GET, POST, PATCH, PUT, DELETE");
            let get = api
                .answer(&Method::GET, BASE, &headers, None)
                .expect("answered");
            assert_eq!(
                get.headers()[header::ACCESS_CONTROL_ALLOW_ORIGIN],
                "http://localhost:3000"
            );
            let plain = api
                .answer(&Method::GET, BASE, &HeaderMap::new(), None)
                .expect("answered");
            assert!(
                !plain
                    .headers()
                    .contains_key(header::ACCESS_CONTROL_ALLOW_ORIGIN)
            );
        }
    }

    mod new {
        use super::*;

        #[test]
        fn reads_the_gallery_query_shapes() {
            for query in [
                "$.[?(@.id == {id})]",
                "$.[?(@.CustomerID == '{id}')]",
                "$.[?(@.OrderID == {id} && @.ProductID == '{id}')]",
                "$[?(@.category == '{id}')]",
            ] {
                let made = CrudAction::new(
                    CrudActionKind::GetOne,
                    Method::GET,
                    BASE,
                    "/{id}",
                    Some(query),
                );
                assert!(made.is_ok(), "{query}: {made:?}");
            }
        }

        #[test]
        fn matches_placeholder_names_as_dev_proxy_does() {
            assert!(same_name("customer-id", "Customer_ID"));
            assert!(!same_name("customer-id", "customer"));
        }
    }
}
