//! Dev Proxy configurations run by the real `holdoff proxy`, driven with curl against a test
//! upstream on loopback: the files are written here in Dev Proxy's format, with the plugins,
//! keys and orders of the presets in its sample gallery.

mod support;

use holdoff_testkit::{Reply, TestServer};
use support::{Proxy, TempDir, curl, runtime};

/// A Dev Proxy file with a rate limit of 3 requests a minute and a mock of `/orders`, its
/// plugins in `plugins` order.
fn rate_limit_and_mock(dir: &TempDir, plugins: [&str; 2]) -> String {
    dir.write(
        "mocks.json",
        r#"{
  "$schema": "https://raw.githubusercontent.com/dotnet/dev-proxy/main/schemas/v2.0.0/mockresponseplugin.mocksfile.schema.json",
  "mocks": [{
    "request": { "url": "http://127.0.0.1:*/orders", "method": "GET" },
    "response": {
      "statusCode": 200,
      "headers": [{ "name": "Content-Type", "value": "application/json" }],
      "body": { "orders": [] }
    }
  }]
}"#,
    );
    let entry = |name: &str| match name {
        "RateLimitingPlugin" => {
            r#"{ "name": "RateLimitingPlugin", "enabled": true, "pluginPath": "~appFolder/plugins/DevProxy.Plugins.dll", "configSection": "rateLimiting" }"#
        }
        _ => {
            r#"{ "name": "MockResponsePlugin", "enabled": true, "pluginPath": "~appFolder/plugins/DevProxy.Plugins.dll", "configSection": "mocksPlugin" }"#
        }
    };
    dir.write(
        "devproxyrc.json",
        &format!(
            r#"{{
  "$schema": "https://raw.githubusercontent.com/dotnet/dev-proxy/main/schemas/v2.0.0/rc.schema.json",
  "plugins": [
    {first},
    {second}
  ],
  "urlsToWatch": ["http://127.0.0.1:*/*"],
  "rateLimiting": {{ "rateLimit": 3, "costPerRequest": 1, "resetTimeWindowSeconds": 60 }},
  "mocksPlugin": {{ "mocksFile": "mocks.json" }}
}}"#,
            first = entry(plugins[0]),
            second = entry(plugins[1]),
        ),
    )
}

/// `curl -i` through the proxy: the head, lowercased, and the body as JSON (null if it is not).
fn fetch(proxy: &Proxy, method: &str, url: &str) -> (String, serde_json::Value) {
    let output = std::process::Command::new("curl")
        .args(["-s", "-i", "-X", method, "-x", &proxy.url(), url])
        .output()
        .expect("curl");
    let text = String::from_utf8_lossy(&output.stdout).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let body = serde_json::from_str(body).unwrap_or(serde_json::Value::Null);
    (head.to_ascii_lowercase(), body)
}

mod plugin_order {
    use super::*;

    #[test]
    fn a_rate_limit_listed_before_the_mocks_throttles_the_mocked_url() {
        let rt = runtime();
        let upstream = rt.block_on(TestServer::start());
        let dir = TempDir::new("order-limit-first");
        let rc = rate_limit_and_mock(&dir, ["RateLimitingPlugin", "MockResponsePlugin"]);
        let proxy = Proxy::start(&["--devproxy-config", &rc, "--client-id", "peer"]);
        let url = upstream.url("/orders");
        let statuses: Vec<String> = (0..4).map(|_| curl(proxy.addr, &[], &url)).collect();
        assert_eq!(statuses, ["200", "200", "200", "429"]);
        assert!(upstream.requests().is_empty(), "the mock answered");
        let stderr = proxy.stop();
        assert!(stderr.contains(" 3 mocked,"), "{stderr}");
        assert!(stderr.contains("1 rate-limited"), "{stderr}");
    }

    #[test]
    fn mocks_listed_before_the_rate_limit_are_never_counted() {
        let rt = runtime();
        let upstream = rt.block_on(TestServer::start());
        upstream.set_default("/other", Reply::ok("upstream"));
        let dir = TempDir::new("order-mocks-first");
        let rc = rate_limit_and_mock(&dir, ["MockResponsePlugin", "RateLimitingPlugin"]);
        let proxy = Proxy::start(&["--devproxy-config", &rc, "--client-id", "peer"]);
        let orders = upstream.url("/orders");
        let statuses: Vec<String> = (0..5).map(|_| curl(proxy.addr, &[], &orders)).collect();
        assert_eq!(statuses, ["200"; 5], "a mocked request is not counted");
        // The limit still counts what goes upstream: three, then a refusal.
        let other = upstream.url("/other");
        let statuses: Vec<String> = (0..4).map(|_| curl(proxy.addr, &[], &other)).collect();
        assert_eq!(statuses, ["200", "200", "200", "429"]);
        assert_eq!(upstream.requests_to("/other").len(), 3);
        drop(proxy);
    }

    #[test]
    fn the_import_writes_the_order_into_the_holdoff_file() {
        let dir = TempDir::new("order-import");
        let rc = rate_limit_and_mock(&dir, ["RateLimitingPlugin", "MockResponsePlugin"]);
        let output = std::process::Command::new(assert_cmd::cargo::cargo_bin("holdoff"))
            .args(["config", "import-devproxy", &rc])
            .output()
            .expect("run holdoff");
        assert!(output.status.success(), "{}", support::show(&output));
        let text = String::from_utf8_lossy(&output.stdout);
        let imported: serde_json::Value =
            serde_json::from_str(&text).unwrap_or_else(|err| panic!("{err}: {text}"));
        assert_eq!(
            imported["order"],
            serde_json::json!(["rateLimits", "mocks"]),
            "{text}"
        );
    }
}

mod framing_headers {
    use super::*;

    #[test]
    fn a_mock_with_a_content_length_header_starts_and_serves_its_body() {
        let rt = runtime();
        let upstream = rt.block_on(TestServer::start());
        let dir = TempDir::new("framing");
        dir.write(
            "mocks.json",
            r#"{
  "mocks": [{
    "request": { "url": "http://127.0.0.1:*/models" },
    "response": {
      "statusCode": 200,
      "headers": [
        { "name": "Content-Type", "value": "application/json" },
        { "name": "Content-Length", "value": "2" }
      ],
      "body": { "data": [{ "id": "gpt-4o-mini" }] }
    }
  }]
}"#,
        );
        let rc = dir.write(
            "devproxyrc.json",
            r#"{
  "plugins": [
    { "name": "MockResponsePlugin", "enabled": true, "pluginPath": "~appFolder/plugins/DevProxy.Plugins.dll", "configSection": "mocksPlugin" }
  ],
  "urlsToWatch": ["http://127.0.0.1:*/*"],
  "mocksPlugin": { "mocksFile": "mocks.json" }
}"#,
        );
        let proxy = Proxy::start(&["--devproxy-config", &rc]);
        let output = std::process::Command::new("curl")
            .args(["-s", "-i", "-x", &proxy.url(), &upstream.url("/models")])
            .output()
            .expect("curl");
        let text = String::from_utf8_lossy(&output.stdout).into_owned();
        assert!(output.status.success(), "{text}");
        let body = r#"{"data":[{"id":"gpt-4o-mini"}]}"#;
        assert!(text.ends_with(body), "{text}");
        assert!(
            text.to_ascii_lowercase()
                .contains(&format!("content-length: {}\r\n", body.len())),
            "{text}"
        );
        drop(proxy);
    }
}

/// Files Dev Proxy's configs name that are not there, and files in Dev Proxy's own folders.
mod data_files {
    use super::*;

    #[test]
    fn an_errors_file_in_the_data_folder_is_read_and_a_missing_body_is_sent_as_its_path() {
        let rt = runtime();
        let upstream = rt.block_on(TestServer::start());
        let dir = TempDir::new("data-folder");
        // ~dataFolder is `dev-proxy` in XDG_CONFIG_HOME on Linux, as Dev Proxy has it.
        let xdg = dir.path().join("xdg");
        std::fs::create_dir_all(xdg.join("dev-proxy/cats")).expect("create the data folder");
        dir.write(
            "xdg/dev-proxy/errors.json",
            r#"{
  "errors": [{
    "request": { "url": "http://127.0.0.1:*/cats/*" },
    "responses": [{
      "statusCode": 404,
      "headers": [{ "name": "Content-Type", "value": "image/jpeg" }],
      "body": "@cats/404.jpg"
    }]
  }]
}"#,
        );
        let rc = dir.write(
            "devproxyrc.json",
            r#"{
  "plugins": [
    { "name": "MockResponsePlugin", "enabled": true, "pluginPath": "~appFolder/plugins/DevProxy.Plugins.dll", "configSection": "mocks" },
    { "name": "GenericRandomErrorPlugin", "enabled": true, "pluginPath": "~appFolder/plugins/DevProxy.Plugins.dll", "configSection": "cats" }
  ],
  "urlsToWatch": ["http://127.0.0.1:*/*"],
  "mocks": { "mocksFile": "not-written-yet.json" },
  "cats": { "errorsFile": "~dataFolder/errors.json", "rate": 100 }
}"#,
        );
        let proxy = Proxy::start_with(
            None,
            &[("XDG_CONFIG_HOME", &xdg)],
            &["--devproxy-config", &rc],
        );
        let output = std::process::Command::new("curl")
            .args(["-s", "-i", "-x", &proxy.url(), &upstream.url("/cats/tabby")])
            .output()
            .expect("curl");
        let text = String::from_utf8_lossy(&output.stdout).into_owned();
        assert!(text.starts_with("HTTP/1.1 404"), "{text}");
        assert!(text.ends_with("\"@cats/404.jpg\""), "{text}");
        assert!(upstream.requests().is_empty(), "the error rule answered");
        let stderr = proxy.stop();
        assert!(
            stderr
                .contains("not-written-yet.json does not exist: MockResponsePlugin mocks nothing"),
            "{stderr}"
        );
        assert!(
            stderr.contains("names a file that does not exist (`@cats/404.jpg`)"),
            "{stderr}"
        );
    }
}

/// GraphRandomErrorPlugin: Graph's errors, per method, with Graph's JSON error body.
mod graph_random_errors {
    use super::*;

    fn rc(dir: &TempDir, allowed: &str) -> String {
        dir.write(
            "devproxyrc.json",
            &format!(
                r#"{{
  "$schema": "https://raw.githubusercontent.com/dotnet/dev-proxy/main/schemas/v2.0.0/rc.schema.json",
  "plugins": [
    {{ "name": "GraphRandomErrorPlugin", "enabled": true, "pluginPath": "~appFolder/plugins/DevProxy.Plugins.dll", "configSection": "graphRandomErrorsPlugin" }}
  ],
  "urlsToWatch": ["http://127.0.0.1:*/v1.0/*"],
  "graphRandomErrorsPlugin": {{ "allowedErrors": {allowed}, "rate": 100, "retryAfterInSeconds": 7 }}
}}"#
            ),
        )
    }

    #[test]
    fn a_429_has_graphs_body_and_the_plugins_retry_after() {
        let rt = runtime();
        let upstream = rt.block_on(TestServer::start());
        let dir = TempDir::new("graph-429");
        let proxy = Proxy::start(&["--devproxy-config", &rc(&dir, "[429]")]);
        let (head, body) = fetch(&proxy, "GET", &upstream.url("/v1.0/me/messages"));
        assert!(head.starts_with("http/1.1 429"), "{head}");
        assert!(head.contains("\r\nretry-after: 7\r\n"), "{head}");
        assert!(
            head.contains("\r\ncontent-type: application/json"),
            "{head}"
        );
        assert_eq!(body["error"]["code"], "Too Many Requests", "{body}");
        assert_eq!(
            body["error"]["message"],
            "Some error was generated by the proxy."
        );
        assert!(upstream.requests().is_empty());
        drop(proxy);
    }

    #[test]
    fn each_method_draws_only_from_its_own_errors() {
        let rt = runtime();
        let upstream = rt.block_on(TestServer::start());
        upstream.set_default("/v1.0/me/drive", Reply::ok("{}"));
        let dir = TempDir::new("graph-507");
        // 507 is an error Dev Proxy gives only to POST, PUT and DELETE.
        let proxy = Proxy::start(&["--devproxy-config", &rc(&dir, "[507]")]);
        let url = upstream.url("/v1.0/me/drive");
        let (head, body) = fetch(&proxy, "POST", &url);
        assert!(head.starts_with("http/1.1 507"), "{head}");
        assert!(!head.contains("retry-after"), "{head}");
        assert_eq!(body["error"]["code"], "Insufficient Storage", "{body}");
        let (head, _) = fetch(&proxy, "GET", &url);
        assert!(
            head.starts_with("http/1.1 200"),
            "a GET is never failed: {head}"
        );
        assert_eq!(upstream.requests_to("/v1.0/me/drive").len(), 1);
        drop(proxy);
    }
}

/// RateLimitingPlugin's warningThresholdPercent: the headers only once that share is used.
mod rate_limit_warning_threshold {
    use super::*;

    #[test]
    fn the_headers_come_once_half_the_limit_is_used() {
        let rt = runtime();
        let upstream = rt.block_on(TestServer::start());
        upstream.set_default("/items", Reply::ok("[]"));
        let dir = TempDir::new("warning-threshold");
        let rc = dir.write(
            "devproxyrc.json",
            r#"{
  "plugins": [
    { "name": "RateLimitingPlugin", "enabled": true, "pluginPath": "~appFolder/plugins/DevProxy.Plugins.dll", "configSection": "rateLimiting" }
  ],
  "urlsToWatch": ["http://127.0.0.1:*/*"],
  "rateLimiting": { "rateLimit": 4, "costPerRequest": 1, "resetTimeWindowSeconds": 60, "warningThresholdPercent": 50 }
}"#,
        );
        let proxy = Proxy::start(&["--devproxy-config", &rc]);
        let url = upstream.url("/items");
        let remaining: Vec<Option<String>> = (0..5)
            .map(|_| {
                let (head, _) = fetch(&proxy, "GET", &url);
                head.lines()
                    .find_map(|line| line.strip_prefix("ratelimit-remaining: "))
                    .map(str::to_owned)
            })
            .collect();
        // 3 left is more than half the limit: no headers; from 2 left on, and on the refusal.
        assert_eq!(
            remaining,
            [
                None,
                Some("2".into()),
                Some("1".into()),
                Some("0".into()),
                Some("0".into())
            ]
        );
        let (head, _) = fetch(&proxy, "GET", &url);
        assert!(head.starts_with("http/1.1 429"), "{head}");
        assert_eq!(upstream.requests_to("/items").len(), 4);
        drop(proxy);
    }
}

/// AuthPlugin in its API-key mode, before the mocks as the gallery's `api-key-protected-mock`
/// lists it: no allowed key, no mock.
mod api_key_auth {
    use super::*;

    fn protected_mock(dir: &TempDir) -> String {
        dir.write(
            "mocks.json",
            r#"{
  "mocks": [{
    "request": { "url": "http://127.0.0.1:*/api/orders*" },
    "response": { "statusCode": 200, "body": { "orders": [{ "id": 1 }] } }
  }]
}"#,
        );
        dir.write(
            "devproxyrc.json",
            r#"{
  "$schema": "https://raw.githubusercontent.com/dotnet/dev-proxy/main/schemas/v2.0.0/rc.schema.json",
  "plugins": [
    { "name": "AuthPlugin", "enabled": true, "pluginPath": "~appFolder/plugins/DevProxy.Plugins.dll", "configSection": "auth" },
    { "name": "MockResponsePlugin", "enabled": true, "pluginPath": "~appFolder/plugins/DevProxy.Plugins.dll", "configSection": "mocks" }
  ],
  "urlsToWatch": ["http://127.0.0.1:*/api/*"],
  "auth": {
    "type": "apiKey",
    "apiKey": {
      "parameters": [
        { "in": "header", "name": "x-api-key" },
        { "in": "query", "name": "code" },
        { "in": "cookie", "name": "api_key" }
      ],
      "allowedKeys": ["key-one", "key-two"]
    }
  },
  "mocks": { "mocksFile": "mocks.json" }
}"#,
        )
    }

    fn curl_status(proxy: &Proxy, extra: &[&str], url: &str) -> (String, String) {
        let output = std::process::Command::new("curl")
            .args(["-s", "-w", "\n%{http_code}", "-x", &proxy.url()])
            .args(extra)
            .arg(url)
            .output()
            .expect("curl");
        let text = String::from_utf8_lossy(&output.stdout).into_owned();
        let (body, status) = text.rsplit_once('\n').unwrap_or(("", &text));
        (status.to_owned(), body.to_owned())
    }

    #[test]
    fn refuses_without_an_allowed_key_and_mocks_with_one() {
        let rt = runtime();
        let upstream = rt.block_on(TestServer::start());
        let dir = TempDir::new("api-key");
        let proxy = Proxy::start(&["--devproxy-config", &protected_mock(&dir)]);
        let url = upstream.url("/api/orders");

        let (status, body) = curl_status(&proxy, &[], &url);
        assert_eq!(status, "401");
        assert_eq!(body, r#"{"error":{"message":"Unauthorized"}}"#);
        let (status, _) = curl_status(&proxy, &["-H", "x-api-key: guess"], &url);
        assert_eq!(status, "401", "a key that is not allowed");

        let (status, body) = curl_status(&proxy, &["-H", "X-Api-Key: key-one"], &url);
        assert_eq!(status, "200");
        assert!(body.contains(r#""orders""#), "{body}");
        let (status, _) = curl_status(&proxy, &[], &format!("{url}?code=key-two"));
        assert_eq!(status, "200", "the key in the query");
        let (status, _) = curl_status(&proxy, &["-b", "theme=dark; api_key=key-one"], &url);
        assert_eq!(status, "200", "the key in a cookie");
        assert!(
            upstream.requests().is_empty(),
            "the mock or the 401 answered"
        );
        drop(proxy);
    }

    #[test]
    fn the_import_writes_the_rule_before_the_mocks() {
        let dir = TempDir::new("api-key-import");
        let rc = protected_mock(&dir);
        let output = std::process::Command::new(assert_cmd::cargo::cargo_bin("holdoff"))
            .args(["config", "import-devproxy", &rc])
            .output()
            .expect("run holdoff");
        assert!(output.status.success(), "{}", support::show(&output));
        let imported: serde_json::Value =
            serde_json::from_slice(&output.stdout).expect("JSON on stdout");
        assert_eq!(imported["order"], serde_json::json!(["auth", "mocks"]));
        assert_eq!(
            imported["auth"][0]["apiKey"]["parameters"][1],
            serde_json::json!({ "in": "query", "name": "code" })
        );
    }
}

/// AuthPlugin in its OAuth2 mode: a bearer token's claims, checked (its signature is not).
mod bearer_auth {
    use super::*;

    /// An unsigned JWT with `claims`, as base64url parts.
    fn jwt(claims: &str) -> String {
        let part = |text: &str| {
            let output = std::process::Command::new("python3")
                .args([
                    "-c",
                    "import base64,sys; print(base64.urlsafe_b64encode(sys.argv[1].encode()).decode().rstrip('='))",
                    text,
                ])
                .output()
                .expect("python3");
            String::from_utf8_lossy(&output.stdout).trim().to_owned()
        };
        format!("{}.{}.unsigned", part(r#"{"alg":"none"}"#), part(claims))
    }

    #[test]
    fn a_token_with_the_audience_and_scope_passes_and_others_get_401() {
        let rt = runtime();
        let upstream = rt.block_on(TestServer::start());
        upstream.set_default("/api/orders", Reply::ok("[]"));
        let dir = TempDir::new("bearer");
        let rc = dir.write(
            "devproxyrc.json",
            r#"{
  "plugins": [
    { "name": "AuthPlugin", "enabled": true, "pluginPath": "~appFolder/plugins/DevProxy.Plugins.dll", "configSection": "auth" }
  ],
  "urlsToWatch": ["http://127.0.0.1:*/api/*"],
  "auth": {
    "type": "oAuth2",
    "oAuth2": {
      "metadataUrl": "https://login.example.invalid/common/v2.0/.well-known/openid-configuration",
      "allowedAudiences": ["api://contoso"],
      "scopes": ["Orders.Read"],
      "validateLifetime": true
    }
  }
}"#,
        );
        let proxy = Proxy::start(&["--devproxy-config", &rc]);
        let url = upstream.url("/api/orders");
        let good = jwt(r#"{"aud":"api://contoso","scp":"Orders.Read","exp":4102444800}"#);
        let expired = jwt(r#"{"aud":"api://contoso","scp":"Orders.Read","exp":1000}"#);
        let wrong_scope = jwt(r#"{"aud":"api://contoso","scp":"Orders.Write","exp":4102444800}"#);
        let status = |token: Option<&str>| {
            let header = token.map(|token| format!("Authorization: Bearer {token}"));
            let args: Vec<&str> = header.iter().flat_map(|h| ["-H", h.as_str()]).collect();
            curl(proxy.addr, &args, &url)
        };
        assert_eq!(status(Some(&good)), "200");
        assert_eq!(status(None), "401");
        assert_eq!(status(Some(&expired)), "401");
        assert_eq!(status(Some(&wrong_scope)), "401");
        assert_eq!(status(Some("not-a-jwt")), "401");
        assert_eq!(upstream.requests_to("/api/orders").len(), 1);
        let stderr = proxy.stop();
        assert!(stderr.contains("not for their signature"), "{stderr}");
    }
}
