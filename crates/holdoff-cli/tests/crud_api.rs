//! Dev Proxy's CrudApiPlugin run by the real `holdoff proxy --devproxy-config`, driven with
//! curl: the API answers from its data file at a loopback base URL, and the upstream behind
//! that URL is never reached.

mod support;

use holdoff_testkit::TestServer;
use serde_json::{Value, json};
use support::{Proxy, TempDir, runtime};

/// A Dev Proxy configuration with CrudApiPlugin serving `customers-api.json` at `base_url`,
/// its data in `data/customers.json` beside the API file.
fn crud_config(dir: &TempDir, base_url: &str) -> String {
    std::fs::create_dir_all(dir.join("apis/data")).expect("a data folder");
    dir.write(
        "apis/data/customers.json",
        r#"[
  { "id": 1, "name": "Contoso Pharmaceuticals", "city": "Seattle" },
  { "id": 2, "name": "Fabrikam Inc", "city": "Lisbon" }
]"#,
    );
    let by_id = r#""query": "$.[?(@.id == {customer-id})]""#;
    dir.write(
        "apis/customers-api.json",
        &format!(
            r#"{{
  "$schema": "https://raw.githubusercontent.com/dotnet/dev-proxy/main/schemas/v2.0.0/crudapiplugin.apifile.schema.json",
  "baseUrl": "{base_url}",
  "dataFile": "data/customers.json",
  "actions": [
    {{ "action": "getAll" }},
    {{ "action": "getOne", "url": "/{{customer-id}}", {by_id} }},
    {{ "action": "create" }},
    {{ "action": "merge", "url": "/{{customer-id}}", {by_id} }},
    {{ "action": "delete", "url": "/{{customer-id}}", {by_id} }}
  ]
}}"#
        ),
    );
    dir.write(
        "devproxyrc.json",
        r#"{
  "$schema": "https://raw.githubusercontent.com/dotnet/dev-proxy/main/schemas/v2.0.0/rc.schema.json",
  "plugins": [
    { "name": "CrudApiPlugin", "enabled": true, "pluginPath": "~appFolder/plugins/DevProxy.Plugins.dll", "configSection": "customersApi" }
  ],
  "urlsToWatch": ["http://127.0.0.1:*/*"],
  "customersApi": { "apiFile": "apis/customers-api.json" }
}"#,
    )
}

/// `curl -i -X METHOD` through the proxy, with `body` as JSON if given: the status, the
/// head lowercased, and the body as JSON (null when empty).
fn call(proxy: &Proxy, method: &str, url: &str, body: Option<&str>) -> (u16, String, Value) {
    let mut command = std::process::Command::new("curl");
    command.args(["-s", "-i", "-X", method, "-x", &proxy.url()]);
    if let Some(body) = body {
        command.args([
            "-H",
            "Content-Type: application/json",
            "--data-binary",
            body,
        ]);
    }
    let output = command.arg(url).output().expect("curl");
    let text = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(output.status.success(), "curl failed: {text}");
    let (head, rest) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or_else(|| panic!("no status in {head}"));
    let value = if rest.is_empty() {
        Value::Null
    } else {
        serde_json::from_str(rest).unwrap_or_else(|err| panic!("{err}: {rest}"))
    };
    (status, head.to_ascii_lowercase(), value)
}

fn names(list: &Value) -> Vec<&str> {
    list.as_array()
        .map(|items| {
            items
                .iter()
                .filter_map(|item| item["name"].as_str())
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn a_crud_api_lists_gets_creates_merges_and_deletes_without_the_upstream() {
    let rt = runtime();
    let upstream = rt.block_on(TestServer::start());
    let base = upstream.url("/api/customers");
    let dir = TempDir::new("crud-api");
    let rc = crud_config(&dir, &base);
    let proxy = Proxy::start(&["--devproxy-config", &rc]);

    let (status, head, list) = call(&proxy, "GET", &base, None);
    assert_eq!(status, 200, "{head}");
    assert!(head.contains("content-type: application/json"), "{head}");
    assert_eq!(names(&list), ["Contoso Pharmaceuticals", "Fabrikam Inc"]);

    let (status, _, one) = call(&proxy, "GET", &format!("{base}/2"), None);
    assert_eq!((status, &one["city"]), (200, &json!("Lisbon")));

    let (status, _, missing) = call(&proxy, "GET", &format!("{base}/9"), None);
    assert_eq!(status, 404);
    assert_eq!(missing, json!({"error": {"message": "Not found"}}));

    let created = r#"{"id": 3, "name": "Northwind Traders", "city": "London"}"#;
    let (status, _, echoed) = call(&proxy, "POST", &base, Some(created));
    assert_eq!((status, &echoed["id"]), (201, &json!(3)));
    let (_, _, list) = call(&proxy, "GET", &base, None);
    assert_eq!(names(&list).len(), 3, "{list}");

    let (status, _, empty) = call(
        &proxy,
        "PATCH",
        &format!("{base}/3"),
        Some(r#"{"city": "Oslo"}"#),
    );
    assert_eq!((status, empty), (204, Value::Null));
    let (_, _, merged) = call(&proxy, "GET", &format!("{base}/3"), None);
    assert_eq!(
        merged,
        json!({"id": 3, "name": "Northwind Traders", "city": "Oslo"})
    );

    let (status, _, _) = call(&proxy, "DELETE", &format!("{base}/1"), None);
    assert_eq!(status, 204);
    assert_eq!(call(&proxy, "GET", &format!("{base}/1"), None).0, 404);
    let (_, _, list) = call(&proxy, "GET", &base, None);
    assert_eq!(names(&list), ["Fabrikam Inc", "Northwind Traders"]);

    let (status, _, refused) = call(&proxy, "POST", &base, Some("not json"));
    assert_eq!(status, 400, "{refused}");

    assert!(
        upstream.requests().is_empty(),
        "the CRUD API answered every request"
    );
    let stderr = proxy.stop();
    assert!(stderr.contains(" 11 mocked,"), "{stderr}");
}

#[test]
fn a_missing_data_file_is_a_note_and_the_api_starts_empty() {
    let rt = runtime();
    let upstream = rt.block_on(TestServer::start());
    let base = upstream.url("/api/customers");
    let dir = TempDir::new("crud-api-no-data");
    let rc = crud_config(&dir, &base);
    std::fs::remove_file(dir.join("apis/data/customers.json")).expect("removed");
    let proxy = Proxy::start(&["--devproxy-config", &rc]);
    let (status, _, list) = call(&proxy, "GET", &base, None);
    assert_eq!((status, list), (200, json!([])));
    let stderr = proxy.stop();
    assert!(stderr.contains("starts with no data"), "{stderr}");
}

#[test]
fn the_import_leaves_out_a_regular_expression_query_and_says_why() {
    let dir = TempDir::new("crud-api-regex");
    let rc = crud_config(&dir, "https://api.contoso.com/v1/customers");
    dir.write(
        "apis/customers-api.json",
        r#"{
  "baseUrl": "https://api.contoso.com/v1/customers",
  "dataFile": "data/customers.json",
  "auth": "entra",
  "actions": [
    { "action": "getAll" },
    { "action": "getMany", "url": "?name={name}", "query": "$[?(@.name =~ /^{name}.*/i)]" }
  ]
}"#,
    );
    let output = std::process::Command::new(assert_cmd::cargo::cargo_bin("holdoff"))
        .args(["config", "import-devproxy", &rc])
        .output()
        .expect("run holdoff");
    assert!(output.status.success(), "{}", support::show(&output));
    let notes = String::from_utf8_lossy(&output.stderr);
    assert!(
        notes.contains("were left out") && notes.contains("`actions[1]`"),
        "{notes}"
    );
    assert!(notes.contains("Entra authentication"), "{notes}");
    let imported: Value = serde_json::from_slice(&output.stdout).expect("JSON");
    let api = &imported["crudApis"][0];
    assert_eq!(api["actions"], json!([{"action": "getAll"}]));
    assert_eq!(api["dataFile"], json!("apis/data/customers.json"));
}
