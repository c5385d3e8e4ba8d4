//! Dev Proxy's API paths on holdoff's control API (`--api-port` is Dev Proxy's name for
//! `--control-port`), driven with curl as Dev Proxy's scripts drive them; and `holdoff jwt
//! create` and `holdoff config new`, Dev Proxy's commands of the same names.

mod support;

use std::process::{Command, Stdio};

use serde_json::Value;
use support::{Proxy, TempDir, show};

/// `curl -s -X METHOD [-d BODY] URL`: the status and the body.
fn call(method: &str, url: &str, body: Option<&str>) -> (u16, String) {
    let mut command = Command::new("curl");
    command.args(["-s", "-X", method, "-w", "\n%{http_code}", "--noproxy", "*"]);
    if let Some(body) = body {
        command.args(["-H", "content-type: application/json", "-d", body]);
    }
    let output = command
        .arg(url)
        .stdin(Stdio::null())
        .output()
        .expect("curl is needed for these tests: run ./scripts/test, which installs it");
    let text = String::from_utf8_lossy(&output.stdout).into_owned();
    let (body, status) = text.rsplit_once('\n').unwrap_or(("", "0"));
    (status.trim().parse().unwrap_or(0), body.to_owned())
}

fn json(body: &str) -> Value {
    serde_json::from_str(body).unwrap_or_else(|err| panic!("{err}: {body}"))
}

#[test]
fn dev_proxys_api_paths_answer_as_dev_proxys_do() {
    let home = TempDir::new("dev-proxy-api");
    let mut command = Command::new(assert_cmd::cargo::cargo_bin("holdoff"));
    command
        .args([
            "proxy",
            "--port",
            "0",
            "--api-port",
            "0",
            "--log-level",
            "warn",
        ])
        .args(["-u", "https://127.0.0.1:*/*", "--preset", "throttle"])
        .env("HOME", home.path())
        .stdin(Stdio::null());
    let mut proxy = Proxy::spawn(&mut command);
    let api = proxy.url_after("control API on ");

    let (status, body) = call("GET", &format!("{api}proxy"), None);
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        json(&body),
        serde_json::json!({ "recording": true, "configFile": null })
    );

    // Keys in any case, as ASP.NET reads them.
    let (status, body) = call(
        "POST",
        &format!("{api}proxy"),
        Some(r#"{"Recording": false}"#),
    );
    assert_eq!(status, 200, "{body}");
    assert_eq!(json(&body)["recording"], false);
    let (status, body) = call(
        "POST",
        &format!("{api}proxy"),
        Some(r#"{"configFile": "x"}"#),
    );
    assert_eq!(status, 400, "{body}");
    assert_eq!(json(&body)["detail"], "configFile cannot be set");

    let (status, body) = call(
        "GET",
        &format!("{api}proxy/rootCertificate?format=crt"),
        None,
    );
    assert_eq!(status, 200, "{body}");
    assert!(body.starts_with("-----BEGIN CERTIFICATE-----"), "{body}");
    let (status, _) = call(
        "GET",
        &format!("{api}proxy/rootCertificate?format=der"),
        None,
    );
    assert_eq!(status, 400);

    let (status, body) = call(
        "POST",
        &format!("{api}proxy/jwtToken"),
        Some(r#"{"name": "Alice", "roles": ["admin"], "signingKey": "short"}"#),
    );
    assert_eq!(status, 400, "{body}");
    assert_eq!(json(&body)["title"], "Key too short");
    let (status, body) = call(
        "POST",
        &format!("{api}proxy/jwtToken"),
        Some(r#"{"name": "Alice", "roles": ["admin"], "validFor": 5}"#),
    );
    assert_eq!(status, 200, "{body}");
    let token = json(&body)["token"].as_str().unwrap_or_default().to_owned();
    assert_eq!(token.split('.').count(), 3, "{token}");

    let (status, body) = call("POST", &format!("{api}proxy/mockRequest"), None);
    assert_eq!(status, 404, "{body}");
    assert!(
        json(&body)["detail"]
            .as_str()
            .unwrap_or_default()
            .contains("MockRequestPlugin")
    );
    let (status, _) = call("GET", &format!("{api}proxy/stopProxy"), None);
    assert_eq!(status, 405);

    let (status, _) = call("POST", &format!("{api}proxy/stopProxy"), None);
    assert_eq!(status, 202);
    let (code, stderr) = proxy.wait();
    assert_eq!(code, Some(0), "{stderr}");
    assert!(
        stderr.contains("holdoff: "),
        "the summary is printed: {stderr}"
    );
}

#[test]
fn jwt_create_takes_dev_proxys_options() {
    let output = Command::new(assert_cmd::cargo::cargo_bin("holdoff"))
        .args([
            "jwt",
            "create",
            "-n",
            "Alice",
            "-a",
            "api://one",
            "-a",
            "api://two",
        ])
        .args(["-r", "admin", "-s", "read", "--claims", "tid:42", "-v", "5"])
        .args(["-k", "0123456789abcdef0123456789abcdef"])
        .output()
        .expect("run holdoff");
    assert!(output.status.success(), "{}", show(&output));
    let token = String::from_utf8_lossy(&output.stdout).trim().to_owned();
    let payload = token.split('.').nth(1).expect("three parts");
    let decoded = Command::new("python3")
        .args([
            "-c",
            "import base64,sys; p=sys.argv[1]; print(base64.urlsafe_b64decode(p + '=' * (-len(p) % 4)).decode())",
            payload,
        ])
        .output()
        .expect("python3");
    let claims = json(&String::from_utf8_lossy(&decoded.stdout));
    assert_eq!(claims["sub"], "Alice");
    assert_eq!(claims["aud"], serde_json::json!(["api://one", "api://two"]));
    assert_eq!(claims["roles"], "admin");
    assert_eq!(claims["scp"], "read");
    assert_eq!(claims["tid"], "42");
    assert_eq!(
        claims["exp"].as_u64().unwrap_or_default() - claims["iat"].as_u64().unwrap_or_default(),
        300
    );

    let short = Command::new(assert_cmd::cargo::cargo_bin("holdoff"))
        .args(["jwt", "create", "-k", "short"])
        .output()
        .expect("run holdoff");
    assert_eq!(short.status.code(), Some(2), "{}", show(&short));
    assert!(String::from_utf8_lossy(&short.stderr).contains("at least 32 characters"));
}

#[test]
fn config_new_writes_a_starter_that_validates_and_never_overwrites() {
    let dir = TempDir::new("config-new");
    let holdoff = |args: &[&str]| {
        Command::new(assert_cmd::cargo::cargo_bin("holdoff"))
            .args(args)
            .current_dir(dir.path())
            .output()
            .expect("run holdoff")
    };
    let first = holdoff(&["config", "new"]);
    assert!(first.status.success(), "{}", show(&first));
    assert_eq!(
        String::from_utf8_lossy(&first.stdout),
        "Config file created at holdoff.json\n"
    );
    let second = holdoff(&["config", "new"]);
    assert_eq!(
        String::from_utf8_lossy(&second.stdout),
        "Config file created at holdoff-1.json\n"
    );
    let yaml = holdoff(&["config", "new", "--format", "yaml"]);
    assert!(yaml.status.success(), "{}", show(&yaml));
    for file in ["holdoff.json", "holdoff-1.json", "holdoff.yaml"] {
        let valid = holdoff(&["config", "validate", file]);
        assert!(valid.status.success(), "{file}: {}", show(&valid));
    }
}

#[test]
fn mock_request_plugin_sends_its_request_when_the_api_asks() {
    let rt = support::runtime();
    let app = rt.block_on(holdoff_testkit::TestServer::start());
    let dir = TempDir::new("mock-request");
    std::fs::write(
        dir.join("devproxyrc.json"),
        r#"{
  "plugins": [
    { "name": "MockRequestPlugin", "enabled": true, "pluginPath": "~appFolder/plugins/DevProxy.Plugins.dll", "configSection": "mockRequestPlugin" }
  ],
  "urlsToWatch": ["http://127.0.0.1:*/*"],
  "mockRequestPlugin": { "mockFile": "mock-request.json" }
}"#,
    )
    .expect("write the Dev Proxy file");
    std::fs::write(
        dir.join("mock-request.json"),
        format!(
            r#"{{ "request": {{
  "url": "{}",
  "headers": [{{ "name": "x-signature", "value": "sha256=abc" }}],
  "body": {{ "event": "order.created", "id": 7 }}
}} }}"#,
            app.url("/webhook")
        ),
    )
    .expect("write the mock request");
    let mut command = Command::new(assert_cmd::cargo::cargo_bin("holdoff"));
    command
        .args(["proxy", "--port", "0", "--api-port", "0"])
        .current_dir(dir.path())
        .env("HOME", dir.path())
        .stdin(Stdio::null());
    let mut proxy = Proxy::spawn(&mut command);
    let api = proxy.url_after("control API on ");
    let (status, body) = call("POST", &format!("{api}proxy/mockRequest"), None);
    assert_eq!(status, 202, "{body}");
    assert_eq!(
        json(&body),
        serde_json::json!({ "sent": true, "status": 200 })
    );
    let sent = app.requests_to("/webhook");
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].method, http::Method::POST);
    assert_eq!(sent[0].header("x-signature"), Some("sha256=abc"));
    assert_eq!(sent[0].header("content-type"), Some("application/json"));
    assert_eq!(
        json(&String::from_utf8_lossy(&sent[0].body)),
        serde_json::json!({ "event": "order.created", "id": 7 })
    );
    let stderr = proxy.stop();
    assert!(
        stderr.contains("MockRequestPlugin: its request (POST "),
        "{stderr}"
    );
}
