//! Dev Proxy's guidance followed word for word, with `holdoff` for `devproxy`:
//!
//! ```text
//! holdoff config get openai-throttling
//! holdoff --config-file "~dataFolder/configs/openai-throttling/.devproxy/devproxyrc.json"
//! ```
//!
//! The gallery is a loopback fake of GitHub's API (`HOLDOFF_GALLERY`), serving a sample shaped
//! as the gallery's own (a devproxyrc.json in `.devproxy/` with GenericRandomErrorPlugin and its
//! errors file, a README, an image) whose URLs point at loopback; `~dataFolder` is a temporary
//! `XDG_CONFIG_HOME`. Then openai-python goes through the proxy that second command starts.

mod support;

#[path = "real_clients/clients.rs"]
#[allow(dead_code)]
mod clients;

use std::process::{Command, Output, Stdio};

use holdoff_testkit::{Reply, TestServer};
use serde_json::{Value, json};
use support::{Proxy, TempDir, runtime, show};

const RC: &str = r#"{
  "$schema": "https://raw.githubusercontent.com/dotnet/dev-proxy/main/schemas/v3.0.1/rc.schema.json",
  "plugins": [
    { "name": "RetryAfterPlugin", "enabled": true, "pluginPath": "~appFolder/plugins/DevProxy.Plugins.dll" },
    { "name": "GenericRandomErrorPlugin", "enabled": true, "pluginPath": "~appFolder/plugins/DevProxy.Plugins.dll",
      "configSection": "openAIAPI" }
  ],
  "urlsToWatch": ["http://127.0.0.1:*/*"],
  "openAIAPI": { "errorsFile": "openai-errors.json", "rate": 100, "retryAfterInSeconds": 1 },
  "logLevel": "information"
}"#;

const ERRORS: &str = r#"{
  "errors": [{
    "request": { "url": "http://127.0.0.1:*/*" },
    "responses": [{
      "statusCode": 429,
      "headers": [
        { "name": "content-type", "value": "application/json" },
        { "name": "Retry-After", "value": "@dynamic" }
      ],
      "body": { "error": { "message": "Overloaded: try again later.", "type": "requests" } }
    }]
  }]
}"#;

/// The sample's files, by their path in the gallery's repository.
const SAMPLE: [(&str, &str); 4] = [
    ("samples/openai-throttling/.devproxy/devproxyrc.json", RC),
    (
        "samples/openai-throttling/.devproxy/openai-errors.json",
        ERRORS,
    ),
    (
        "samples/openai-throttling/README.md",
        "# OpenAI throttling\n",
    ),
    (
        "samples/openai-throttling/assets/overloaded.png",
        "\u{89}PNG not really",
    ),
];

const TREE_PATH: &str = "/repos/pnp/proxy-samples/git/trees/main";

/// A fake of GitHub's API for the gallery: the tree (with another sample beside this one) and
/// each file's raw contents.
async fn gallery() -> TestServer {
    let server = TestServer::start().await;
    let mut tree = vec![
        json!({ "path": "samples", "type": "tree" }),
        json!({ "path": "samples/openai-throttling", "type": "tree" }),
        json!({ "path": "samples/openai-throttling-tokens", "type": "tree" }),
        json!({ "path": "samples/openai-throttling-tokens/devproxyrc.json", "type": "blob" }),
    ];
    for (path, text) in SAMPLE {
        tree.push(json!({ "path": path, "type": "blob" }));
        server.set_default(
            &format!("/repos/pnp/proxy-samples/contents/{path}"),
            Reply::ok(text),
        );
    }
    server.set_default(
        TREE_PATH,
        Reply::ok("").json(&json!({ "sha": "0", "tree": tree, "truncated": false })),
    );
    server
}

fn holdoff(data: &TempDir, gallery: &str) -> Command {
    let mut command = Command::new(assert_cmd::cargo::cargo_bin("holdoff"));
    command
        .env("XDG_CONFIG_HOME", data.path())
        // The proxy's CA goes here too, not into the user's home.
        .env("HOME", data.path())
        .env("HOLDOFF_GALLERY", gallery)
        .env_remove("GITHUB_TOKEN")
        .stdin(Stdio::null());
    command
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// The first command, as Dev Proxy's guidance writes it.
fn config_get(data: &TempDir, gallery: &str, name: &str) -> Output {
    holdoff(data, gallery)
        .args(["config", "get", name])
        .output()
        .expect("run holdoff config get")
}

#[test]
fn the_sample_is_saved_where_dev_proxy_saves_it_and_the_printed_command_runs_it() {
    let rt = runtime();
    let fake = rt.block_on(gallery());
    let base = fake.url("/repos/pnp/proxy-samples");
    let data = TempDir::new("config-get-data");

    let got = config_get(&data, &base, "openai-throttling");
    assert_eq!(got.status.code(), Some(0), "{}", show(&got));
    let folder = data.path().join("dev-proxy/configs/openai-throttling");
    for (path, text) in SAMPLE {
        let saved = folder.join(path.trim_start_matches("samples/openai-throttling/"));
        assert_eq!(
            std::fs::read_to_string(&saved).ok().as_deref(),
            Some(text),
            "{}",
            saved.display()
        );
    }
    let command = "holdoff --config-file \
                   \"~dataFolder/configs/openai-throttling/.devproxy/devproxyrc.json\"";
    assert!(
        stdout(&got).contains(&format!("\n  {command}\n")),
        "{}",
        show(&got)
    );
    // The other sample, whose name starts with this one's, was not mixed in.
    assert!(!folder.join("devproxyrc.json").exists());
    let tree_requests = fake.requests_to(TREE_PATH);
    assert_eq!(tree_requests.len(), 1);
    assert_eq!(
        tree_requests[0].path_and_query(),
        format!("{TREE_PATH}?recursive=1")
    );
    assert!(
        tree_requests[0]
            .header("user-agent")
            .is_some_and(|agent| agent.starts_with("holdoff/")),
        "GitHub's API refuses requests without a User-Agent"
    );

    // The second command, exactly as printed; the port comes from the environment.
    let upstream = rt.block_on(TestServer::start());
    upstream.set_default(
        "/v1/models",
        Reply::ok("").json(&json!({ "object": "list", "data": [] })),
    );
    let proxy = Proxy::spawn(
        holdoff(&data, &base)
            .args([
                "--config-file",
                "~dataFolder/configs/openai-throttling/.devproxy/devproxyrc.json",
            ])
            .env("HOLDOFF_PORT", "0"),
    );
    let client = Command::new(clients::python())
        .args(["-c", OPENAI_CLIENT, upstream.url("").trim_end_matches('/')])
        .env("HTTP_PROXY", format!("http://{}", proxy.addr))
        .env("NO_PROXY", "")
        .stdin(Stdio::null())
        .output()
        .expect("run openai-python");
    let summary = proxy.stop();
    // Every request got the sample's 429 (rate 100) with `Retry-After: 1`; openai-python
    // waited it out twice, then gave up, as max_retries=2 says.
    assert_eq!(
        stdout(&client).trim(),
        "gave up: 429 after 3 requests",
        "{}\nproxy:\n{summary}",
        show(&client)
    );
    assert!(
        summary.contains("faults from Dev Proxy config")
            && summary.contains("/.devproxy/devproxyrc.json"),
        "{summary}"
    );
    assert!(summary.contains("2 compliant"), "{summary}");
    assert!(summary.contains("0 premature"), "{summary}");
    assert!(upstream.requests_to("/v1/models").is_empty());
}

/// openai-python with two retries: prints the status it ended with and how many requests it
/// made (counted with httpx's event hook).
const OPENAI_CLIENT: &str = r#"
import sys
import httpx
import openai

sent = []
http = httpx.Client(event_hooks={"request": [sent.append]})
client = openai.OpenAI(base_url=sys.argv[1] + "/v1", api_key="test", max_retries=2, http_client=http)
try:
    client.models.list()
    print("200 after", len(sent), "requests")
except openai.RateLimitError as err:
    print("gave up:", err.status_code, "after", len(sent), "requests")
"#;

#[test]
fn a_second_get_keeps_the_first_copy_and_saves_beside_it() {
    let rt = runtime();
    let fake = rt.block_on(gallery());
    let base = fake.url("/repos/pnp/proxy-samples");
    let data = TempDir::new("config-get-again");
    let first = config_get(&data, &base, "openai-throttling");
    assert_eq!(first.status.code(), Some(0), "{}", show(&first));
    let edited = data
        .path()
        .join("dev-proxy/configs/openai-throttling/.devproxy/devproxyrc.json");
    std::fs::write(&edited, "{ \"plugins\": [] }").unwrap();
    let second = holdoff(&data, &base)
        .args(["config", "get", "openai-throttling", "--output", "json"])
        .output()
        .expect("run holdoff config get");
    assert_eq!(second.status.code(), Some(0), "{}", show(&second));
    assert_eq!(
        std::fs::read_to_string(&edited).unwrap(),
        "{ \"plugins\": [] }"
    );
    let printed: Value = serde_json::from_str(stdout(&second).trim()).expect("one JSON object");
    let folder = data.path().join("dev-proxy/configs/openai-throttling1");
    assert_eq!(printed["configId"], "openai-throttling");
    assert_eq!(printed["path"], folder.display().to_string());
    assert_eq!(
        printed["configFiles"],
        json!([folder
            .join(".devproxy/devproxyrc.json")
            .display()
            .to_string()])
    );
    assert_eq!(printed["mockFiles"], json!([]));
}

#[test]
fn an_unknown_sample_names_the_near_ones_and_the_nearest_preset() {
    let rt = runtime();
    let fake = rt.block_on(gallery());
    let data = TempDir::new("config-get-unknown");
    let got = config_get(
        &data,
        &fake.url("/repos/pnp/proxy-samples"),
        "openai-throttlin",
    );
    assert_eq!(got.status.code(), Some(1), "{}", show(&got));
    let err = stderr(&got);
    assert!(
        err.contains("the sample gallery has no sample `openai-throttlin`"),
        "{err}"
    );
    assert!(err.contains("`openai-throttling`"), "{err}");
    assert!(
        err.contains("`holdoff run --preset openai -- COMMAND`"),
        "{err}"
    );
    assert!(
        !data
            .path()
            .join("dev-proxy/configs/openai-throttlin")
            .exists()
    );
}

#[test]
fn offline_it_says_the_gallery_is_out_of_reach_and_names_the_built_in_preset() {
    let data = TempDir::new("config-get-offline");
    // A loopback port nobody listens on: bound, then closed.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .expect("a free port")
        .port();
    let got = config_get(
        &data,
        &format!("http://127.0.0.1:{port}/repos/pnp/proxy-samples"),
        "openai-throttling",
    );
    assert_eq!(got.status.code(), Some(1), "{}", show(&got));
    let err = stderr(&got);
    assert!(
        err.starts_with("holdoff: could not reach the sample gallery ("),
        "{err}"
    );
    assert!(
        err.contains("Connection refused") || err.contains("connect"),
        "{err}"
    );
    assert!(
        err.contains("The built-in preset `openai` stands nearest to `openai-throttling`"),
        "{err}"
    );
    // Nothing half-saved.
    let configs = data.path().join("dev-proxy/configs");
    assert!(
        !configs.exists() || std::fs::read_dir(&configs).unwrap().next().is_none(),
        "{}",
        configs.display()
    );
}

#[test]
fn a_failed_download_leaves_nothing_behind() {
    let rt = runtime();
    let fake = rt.block_on(gallery());
    fake.set_default(
        "/repos/pnp/proxy-samples/contents/samples/openai-throttling/README.md",
        Reply::status(500),
    );
    let data = TempDir::new("config-get-broken");
    let got = config_get(
        &data,
        &fake.url("/repos/pnp/proxy-samples"),
        "openai-throttling",
    );
    assert_eq!(got.status.code(), Some(1), "{}", show(&got));
    assert!(
        stderr(&got).contains("answered status 500"),
        "{}",
        show(&got)
    );
    let configs = data.path().join("dev-proxy/configs");
    let left: Vec<_> = std::fs::read_dir(&configs)
        .map(|entries| entries.flatten().map(|e| e.file_name()).collect())
        .unwrap_or_default();
    assert!(left.is_empty(), "{left:?}");
}

#[test]
fn a_missing_path_token_folder_is_explained() {
    let got = Command::new(assert_cmd::cargo::cargo_bin("holdoff"))
        .args(["--config-file", "~dataFolder/configs/x/devproxyrc.json"])
        .env_remove("HOME")
        .env_remove("XDG_CONFIG_HOME")
        .stdin(Stdio::null())
        .output()
        .expect("run holdoff");
    assert_eq!(got.status.code(), Some(2), "{}", show(&got));
    assert!(
        stderr(&got).contains("~dataFolder is Dev Proxy's folder in the user's application data"),
        "{}",
        show(&got)
    );
}

#[test]
fn the_second_command_before_the_first_says_how_to_get_the_sample() {
    let data = TempDir::new("config-get-not-yet");
    let got = holdoff(&data, "http://127.0.0.1:9/unused")
        .args([
            "--config-file",
            "~dataFolder/configs/openai-throttling/.devproxy/devproxyrc.json",
        ])
        .output()
        .expect("run holdoff");
    assert_eq!(got.status.code(), Some(2), "{}", show(&got));
    assert!(
        stderr(&got).contains(
            "does not exist: `holdoff config get openai-throttling` downloads the sample"
        ),
        "{}",
        show(&got)
    );
}
