//! Faults and the judge in `holdoff proxy`, with real clients: curl, a shell loop of curls, and
//! Python's urllib3. The proxy forwards to a test upstream on loopback and watches it.

mod support;

use std::process::Command;

use holdoff_testkit::{Reply, TestServer};
use support::{Proxy, TempDir, curl, first_request_throttled, runtime};

/// Watches every plain-HTTP URL on loopback, whatever its port.
const WATCH: &str = "http://127.0.0.1:*/*";

#[test]
fn curl_retry_after_an_injected_429_is_compliant() {
    let rt = runtime();
    let upstream = rt.block_on(TestServer::start());
    upstream.set_default("/api", Reply::ok("hello"));
    let dir = TempDir::new("curl-retry");
    let config = dir.write("holdoff.json", &first_request_throttled("http", 1));
    let proxy = Proxy::start(&["-c", &config, "-u", WATCH]);

    assert_eq!(
        curl(proxy.addr, &["--retry", "3"], &upstream.url("/api")),
        "200"
    );
    assert_eq!(
        upstream.requests_to("/api").len(),
        1,
        "the 429 was the proxy's"
    );

    let stderr = proxy.stop();
    assert!(
        stderr.contains("holdoff judge: 0 premature and 1 compliant retry."),
        "{stderr}"
    );
    assert!(stderr.contains(" 1 mocked,"), "{stderr}");
}

#[test]
fn a_shell_loop_retrying_at_once_is_premature_every_time() {
    let rt = runtime();
    let upstream = rt.block_on(TestServer::start());
    upstream.set_default("/api", Reply::ok("hello"));
    // Each curl is a process of its own, and so a client of its own by default: a script that
    // retries by running curl again is one client by address.
    let proxy = Proxy::start(&[
        "--preset",
        "throttle",
        "-f",
        "100",
        "--seed",
        "7",
        "-u",
        WATCH,
        "--client-id",
        "peer",
    ]);

    let output = Command::new("sh")
        .arg("-c")
        .arg(r#"for i in 1 2 3 4; do curl -s -o /dev/null -w '%{http_code} ' -x "$1" "$2"; done"#)
        .args(["sh", &proxy.url(), &upstream.url("/api")])
        .output()
        .expect("run sh");
    assert_eq!(String::from_utf8_lossy(&output.stdout), "429 429 429 429 ");
    assert!(
        upstream.requests().is_empty(),
        "nothing reached the upstream"
    );

    let stderr = proxy.stop();
    assert!(
        stderr.contains("holdoff judge: 3 premature and 0 compliant retries."),
        "{stderr}"
    );
    assert!(
        stderr.contains("holdoff faults: 1 error response,"),
        "{stderr}"
    );
}

/// A urllib3 client through the proxy that retries 429s honouring `Retry-After`; prints the
/// final status.
const URLLIB3_CLIENT: &str = r#"
import sys, urllib3
from urllib3.util.retry import Retry
retry = Retry(total=3, status_forcelist=[429], respect_retry_after_header=True, backoff_factor=0)
http = urllib3.ProxyManager(sys.argv[1], retries=retry)
print(http.request("GET", sys.argv[2]).status)
"#;

fn urllib3_is_compliant(form: &str) {
    let rt = runtime();
    let upstream = rt.block_on(TestServer::start());
    upstream.set_default("/api", Reply::ok("hello"));
    let dir = TempDir::new("urllib3");
    let config = dir.write("holdoff.json", &first_request_throttled("http", 1));
    let proxy = Proxy::start(&["-c", &config, "-u", WATCH, "--retry-after-form", form]);

    let output = Command::new("python3")
        .args(["-c", URLLIB3_CLIENT, &proxy.url(), &upstream.url("/api")])
        .output()
        .expect("python3 with urllib3 is needed: run ./scripts/test, which installs it");
    assert_eq!(
        String::from_utf8_lossy(&output.stdout).trim(),
        "200",
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );

    let stderr = proxy.stop();
    assert!(
        stderr.contains("holdoff judge: 0 premature and 1 compliant retry."),
        "{stderr}"
    );
}

#[test]
fn urllib3_honouring_a_delay_hint_is_compliant() {
    urllib3_is_compliant("delay");
}

#[test]
fn urllib3_honouring_a_date_hint_is_compliant() {
    urllib3_is_compliant("http-date");
}

/// Client `a` is throttled for 30 s; client `b` then asks for the same URL at once.
fn second_client_status(extra: &[&str]) -> (String, String) {
    let rt = runtime();
    let upstream = rt.block_on(TestServer::start());
    upstream.set_default("/api", Reply::ok("hello"));
    let dir = TempDir::new("identities");
    let config = dir.write("holdoff.json", &first_request_throttled("http", 30));
    let mut args = vec!["-c", config.as_str(), "-u", WATCH];
    args.extend_from_slice(extra);
    let proxy = Proxy::start(&args);
    let url = upstream.url("/api");

    assert_eq!(
        curl(proxy.addr, &["-H", "X-Holdoff-Client: a"], &url),
        "429"
    );
    let status = curl(proxy.addr, &["-H", "X-Holdoff-Client: b"], &url);
    (status, proxy.stop())
}

#[test]
fn two_clients_do_not_share_windows_by_default() {
    let (status, stderr) = second_client_status(&[]);
    assert_eq!(status, "200");
    assert!(
        stderr.contains("holdoff judge: 0 premature and 0 compliant retries."),
        "{stderr}"
    );
}

#[test]
fn two_clients_share_a_window_when_keyed_by_host() {
    let (status, stderr) = second_client_status(&["--judge-key", "host"]);
    assert_eq!(status, "429");
    assert!(
        stderr.contains("holdoff judge: 1 premature and 0 compliant retry."),
        "{stderr}"
    );
    // Among the worst offenders of the summary, named as a person would (`b`, not the
    // `header:b` the JSON report keeps): `b  GET URL  … early`.
    assert!(stderr.contains("\n  b  GET "), "{stderr}");
}

#[test]
fn the_same_seed_repeats_the_same_faults() {
    let rt = runtime();
    let upstream = rt.block_on(TestServer::start());
    let statuses = |seed: &str| {
        let proxy = Proxy::start(&[
            "--preset", "throttle", "-f", "50", "--seed", seed, "-u", WATCH,
        ]);
        // A different URL each time, so the judge never sees a retry.
        let statuses: Vec<String> = (0..24)
            .map(|i| curl(proxy.addr, &[], &upstream.url(&format!("/item/{i}"))))
            .collect();
        let stderr = proxy.stop();
        // The seed is given once, in the command that repeats the run.
        assert!(
            stderr
                .lines()
                .any(|line| line.starts_with("reproduce: holdoff proxy ")
                    && line.contains(&format!(" --seed {seed} -u "))),
            "{stderr}"
        );
        statuses
    };
    let first = statuses("42");
    assert!(first.iter().any(|s| s == "429") && first.iter().any(|s| s == "200"));
    assert_eq!(first, statuses("42"));
    assert_ne!(first, statuses("43"));
}

/// A config whose error rules live in a data file, `errors.json`: every request to `/fail*`
/// gets STATUS with `Retry-After: @dynamic=30`.
fn errors_file(status: u16) -> String {
    format!(
        r#"{{ "errors": [{{
  "request": {{ "url": "http://127.0.0.1:*/fail*" }},
  "rate": 100,
  "responses": [{{ "statusCode": {status}, "headers": {{ "Retry-After": "@dynamic=30" }} }}]
}}] }}"#
    )
}

#[test]
fn a_changed_data_file_is_reloaded_and_the_judge_keeps_its_windows() {
    let rt = runtime();
    let upstream = rt.block_on(TestServer::start());
    let dir = TempDir::new("reload");
    dir.write("errors.json", &errors_file(429));
    let config = dir.write("holdoff.json", r#"{ "errors": { "file": "errors.json" } }"#);
    // One client in many curl processes: by address.
    let proxy = Proxy::start(&["-c", &config, "-u", WATCH, "--client-id", "peer"]);
    let throttled = upstream.url("/fail/first");
    assert_eq!(curl(proxy.addr, &[], &throttled), "429");

    dir.write("errors.json", &errors_file(503));
    // The proxy looks at its files once a second: ask new URLs until a 503 shows the change
    // (giving up after 300 tries, 100 ms apart).
    let reloaded = (0..300).any(|i| {
        let changed = curl(proxy.addr, &[], &upstream.url(&format!("/fail/{i}"))) == "503";
        if !changed {
            holdoff::clock::SystemClock.block_for(std::time::Duration::from_millis(100));
        }
        changed
    });
    assert!(reloaded, "errors.json was not reloaded within 30 s");
    // The window the first 429 opened is still there: an immediate retry is premature.
    assert_eq!(curl(proxy.addr, &[], &throttled), "429");

    let stderr = proxy.stop();
    assert!(
        stderr.contains("holdoff judge: 1 premature and 0 compliant retry."),
        "{stderr}"
    );
}

#[test]
fn a_dev_proxy_config_throttles_and_says_what_it_maps_differently() {
    let rt = runtime();
    let upstream = rt.block_on(TestServer::start());
    let dir = TempDir::new("devproxy");
    dir.write(
        "devproxy-errors.json",
        r#"{
  "$schema": "https://raw.githubusercontent.com/dotnet/dev-proxy/main/schemas/v2.2.0/genericrandomerrorplugin.errorsfile.schema.json",
  "errors": [{
    "request": { "url": "http://127.0.0.1:*/*" },
    "responses": [{
      "statusCode": 429,
      "headers": [{ "name": "Retry-After", "value": "@dynamic" }],
      "body": { "error": { "message": "Rate limit reached", "code": "rate_limit_exceeded" } }
    }]
  }]
}"#,
    );
    let rc = dir.write(
        "devproxyrc.json",
        r#"{
  "$schema": "https://raw.githubusercontent.com/dotnet/dev-proxy/main/schemas/v2.2.0/rc.schema.json",
  "plugins": [
    { "name": "RetryAfterPlugin", "enabled": true, "pluginPath": "~appFolder/plugins/DevProxy.Plugins.dll" },
    { "name": "GenericRandomErrorPlugin", "enabled": true, "pluginPath": "~appFolder/plugins/DevProxy.Plugins.dll", "configSection": "errors" }
  ],
  // Comments are allowed, as in Dev Proxy.
  "urlsToWatch": ["http://127.0.0.1:*/*"],
  "errors": { "errorsFile": "devproxy-errors.json", "rate": 100 }
}"#,
    );
    // One client in two curl processes: by address.
    let proxy = Proxy::start(&["--devproxy-config", &rc, "--client-id", "peer"]);
    let url = upstream.url("/v1/chat");
    assert_eq!(curl(proxy.addr, &[], &url), "429");
    assert_eq!(curl(proxy.addr, &[], &url), "429");
    assert!(
        upstream.requests().is_empty(),
        "nothing reached the upstream"
    );

    let stderr = proxy.stop();
    assert!(
        stderr.contains("RetryAfterPlugin needs no setting"),
        "{stderr}"
    );
    assert!(
        stderr.contains("holdoff judge: 1 premature and 0 compliant retry."),
        "{stderr}"
    );
}
