//! Who retried: under `holdoff run` every client connects from `127.0.0.1`, and on Linux the
//! proxy tells them apart by the process that owns each connection. Real, separate processes
//! (curl) against an upstream on loopback.
#![cfg(target_os = "linux")]

mod support;

use std::path::Path;
use std::process::{Command, Output, Stdio};

use holdoff_testkit::{Reply, TestServer};
use serde_json::Value;
use support::{TempDir, json_report, runtime, show};

/// Watches every plain-HTTP URL on loopback, whatever its port.
const WATCH: &str = "http://127.0.0.1:*/*";

/// A config whose only fault is one mock: every request to `http://127.0.0.1:*/api` gets 429
/// with `Retry-After: 2`, so that each client that asks opens a window of its own.
const THROTTLE_API: &str = r#"{
  "mocks": {
    "mocks": [{
      "request": { "url": "http://127.0.0.1:*/api" },
      "response": {
        "statusCode": 429,
        "headers": [{ "name": "Retry-After", "value": "@dynamic=2" }],
        "body": "slow down"
      }
    }]
  }
}"#;

/// `holdoff run -u WATCH -c CONFIG --report-json REPORT ARGS…` in `dir`, waiting for it to
/// exit.
fn holdoff_run(dir: &Path, config: &str, report: &Path, args: &[&str]) -> Output {
    Command::new(assert_cmd::cargo::cargo_bin("holdoff"))
        .args(["run", "--log-level", "warn", "-u", WATCH, "-c", config])
        .arg("--report-json")
        .arg(report)
        .args(args)
        .current_dir(dir)
        .stdin(Stdio::null())
        .output()
        .expect("run holdoff")
}

/// The clients the report's endpoints name, in its order.
fn clients(report: &Value) -> Vec<String> {
    report["endpoints"]
        .as_array()
        .map(|endpoints| {
            endpoints
                .iter()
                .filter_map(|endpoint| endpoint["client"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// Whether `client` is `process:curl[PID]`.
fn is_a_curl_process(client: &str) -> bool {
    client
        .strip_prefix("process:curl[")
        .and_then(|rest| rest.strip_suffix(']'))
        .is_some_and(|pid| pid.parse::<u32>().is_ok())
}

#[test]
fn a_second_process_asking_at_once_is_not_the_first_ones_retry() {
    let rt = runtime();
    let upstream = rt.block_on(TestServer::start());
    upstream.set_default("/api", Reply::ok("hello"));
    let dir = TempDir::new("identity-two");
    let config = dir.write("holdoff.json", THROTTLE_API);
    let report = dir.path().join("report.json");
    let url = upstream.url("/api");

    // Two curls, one after the other: each takes its 429 and does not retry.
    let output = holdoff_run(
        dir.path(),
        &config,
        &report,
        &[
            "--",
            "sh",
            "-c",
            r#"curl -sS -o /dev/null "$1" && curl -sS -o /dev/null "$1""#,
            "sh",
            &url,
        ],
    );

    assert_eq!(output.status.code(), Some(0), "{}", show(&output));
    let report = json_report(&report);
    assert_eq!(report["verdict"], "pass", "{report:#}");
    assert_eq!(report["throttled"], 2, "{report:#}");
    assert_eq!(report["retries"]["premature"], 0, "{report:#}");
    let clients = clients(&report);
    assert_eq!(clients.len(), 2, "{report:#}");
    assert!(clients.iter().all(|c| is_a_curl_process(c)), "{clients:?}");
    assert_ne!(clients[0], clients[1], "two processes, two clients");
}

#[test]
fn one_process_asking_again_at_once_is_premature() {
    let rt = runtime();
    let upstream = rt.block_on(TestServer::start());
    upstream.set_default("/api", Reply::ok("hello"));
    let dir = TempDir::new("identity-one");
    let config = dir.write("holdoff.json", THROTTLE_API);
    let report = dir.path().join("report.json");
    let url = upstream.url("/api");

    // One curl, the same URL twice: the second transfer is this process's retry.
    let output = holdoff_run(
        dir.path(),
        &config,
        &report,
        &[
            "--",
            "curl",
            "-sS",
            "-o",
            "/dev/null",
            "-o",
            "/dev/null",
            &url,
            &url,
        ],
    );

    assert_eq!(output.status.code(), Some(3), "{}", show(&output));
    let report = json_report(&report);
    assert_eq!(report["verdict"], "fail", "{report:#}");
    assert_eq!(report["retries"]["premature"], 1, "{report:#}");
    let client = report["violations"][0]["client"]
        .as_str()
        .unwrap_or_default();
    assert!(is_a_curl_process(client), "{report:#}");
}
