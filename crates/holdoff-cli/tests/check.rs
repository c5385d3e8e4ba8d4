//! `holdoff check -- CLIENT` against clients whose behaviour is known by construction: a
//! Python client that honours Retry-After (tests/check/honours.py), one that retries at
//! once whatever it is told (tests/check/naive.py), and curl with `--retry 2`. Each calls a
//! loopback upstream the test starts, through the proxy variables `holdoff check` sets.

mod support;

use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

use holdoff_testkit::{Reply, TestServer};
use serde_json::Value;
use support::{TempDir, runtime, show};

/// The scenarios, in the order they are reported.
const SCENARIOS: [&str; 13] = [
    "delay-429",
    "delay-503",
    "http-date",
    "date-past",
    "second-throttle",
    "malformed",
    "malformed-negative",
    "malformed-decimal",
    "malformed-empty",
    "wrong-weekday",
    "no-hint",
    "quota",
    "post",
];

/// The scenarios a GET client meets: all but `post`.
const GET_SCENARIOS: [&str; 12] = [
    "delay-429",
    "delay-503",
    "http-date",
    "date-past",
    "second-throttle",
    "malformed",
    "malformed-negative",
    "malformed-decimal",
    "malformed-empty",
    "wrong-weekday",
    "no-hint",
    "quota",
];

/// A test client's script.
fn script(name: &str) -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/check")
        .join(name)
        .display()
        .to_string()
}

/// `holdoff check ARGS…` with `--json`: its output and the JSON read back (`Null` if none).
fn check(dir: &TempDir, args: &[&str]) -> (Output, Value) {
    let json = dir.path().join("check.json");
    let output = Command::new(assert_cmd::cargo::cargo_bin("holdoff"))
        .arg("check")
        .arg("--json")
        .arg(&json)
        .args(args)
        .current_dir(dir.path())
        .stdin(Stdio::null())
        .output()
        .expect("run holdoff check");
    let value = std::fs::read_to_string(&json)
        .ok()
        .and_then(|text| serde_json::from_str(&text).ok())
        .unwrap_or(Value::Null);
    (output, value)
}

/// Each scenario's verdict, by name, from the JSON.
fn verdicts(json: &Value) -> Vec<(String, String)> {
    json["scenarios"]
        .as_array()
        .map(|rows| {
            rows.iter()
                .map(|row| {
                    (
                        row["scenario"].as_str().unwrap_or_default().to_owned(),
                        row["verdict"].as_str().unwrap_or_default().to_owned(),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Every scenario a GET client meets with `verdict`, then `post` not tested (it sends no
/// POST).
fn all(verdict: &str) -> Vec<(String, String)> {
    let mut want: Vec<(String, String)> = GET_SCENARIOS
        .iter()
        .map(|name| ((*name).to_owned(), verdict.to_owned()))
        .collect();
    want.push(("post".to_owned(), "n/a".to_owned()));
    want
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

#[test]
fn list_describes_every_scenario() {
    let output = Command::new(assert_cmd::cargo::cargo_bin("holdoff"))
        .args(["check", "--list"])
        .output()
        .expect("run holdoff check --list");
    assert_eq!(output.status.code(), Some(0), "{}", show(&output));
    let text = stdout(&output);
    assert_eq!(text.lines().count(), SCENARIOS.len(), "{text}");
    for (line, name) in text.lines().zip(SCENARIOS) {
        assert!(line.starts_with(name), "{text}");
    }
    assert!(text.contains("Retry-After: soon"), "{text}");
}

#[test]
fn an_unknown_scenario_is_a_usage_error_naming_the_known_ones() {
    let dir = TempDir::new("check-unknown");
    let (output, _) = check(&dir, &["--scenario", "delay", "--", "true"]);
    assert_eq!(output.status.code(), Some(2), "{}", show(&output));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("unknown scenario `delay`"), "{stderr}");
    for name in SCENARIOS {
        assert!(stderr.contains(name), "{stderr}");
    }
}

/// The row of scenario `name`.
fn row<'a>(json: &'a Value, name: &str) -> &'a Value {
    json["scenarios"]
        .as_array()
        .and_then(|rows| rows.iter().find(|row| row["scenario"] == name))
        .unwrap_or(&Value::Null)
}

/// Seconds from the throttle to the first retry in scenario `name` (-1 for none).
fn first_retry(json: &Value, name: &str) -> f64 {
    row(json, name)["first_retry_after_s"]
        .as_f64()
        .unwrap_or(-1.0)
}

#[test]
fn a_client_that_honours_retry_after_passes_every_scenario() {
    let rt = runtime();
    let upstream = rt.block_on(TestServer::start());
    upstream.set_default("/v1/items", Reply::ok("items"));
    let dir = TempDir::new("check-honours");
    let url = upstream.url("/v1/items");
    let (output, json) = check(&dir, &["--", "python3", &script("honours.py"), &url]);

    assert_eq!(output.status.code(), Some(0), "{}\n{json:#}", show(&output));
    assert_eq!(verdicts(&json), all("pass"), "{json:#}");
    for name in ["delay-429", "delay-503", "http-date"] {
        assert!(first_retry(&json, name) >= 2.0, "{json:#}");
        assert_eq!(row(&json, name)["retries"], 1, "{json:#}");
    }
    // A date in the past permits a retry at once, and it came at once.
    assert!(
        (0.0..1.0).contains(&first_retry(&json, "date-past")),
        "{json:#}"
    );
    // The second throttle's hint was waited out too: two retries.
    assert_eq!(row(&json, "second-throttle")["retries"], 2, "{json:#}");
    assert!(first_retry(&json, "second-throttle") >= 1.0, "{json:#}");
    for name in [
        "malformed",
        "malformed-negative",
        "malformed-decimal",
        "malformed-empty",
        "wrong-weekday",
        "quota",
    ] {
        assert_eq!(row(&json, name)["did"], "gave up (exited 1)", "{json:#}");
        assert_eq!(row(&json, name)["retries"], 0, "{json:#}");
    }
    // The throttles were the proxy's; every retry that came reached the upstream (but the one
    // the second throttle answered), and so did the GET of the post scenario, which throttles
    // only a POST.
    assert_eq!(upstream.requests_to("/v1/items").len(), 7, "{json:#}");
    let table = stdout(&output);
    assert!(table.starts_with("SCENARIO "), "{table}");
    assert!(
        table.contains("honours Retry-After: 12/12 (1 n/a)\n"),
        "{table}"
    );
    assert_eq!(json["summary"], "honours Retry-After: 12/12 (1 n/a)");
    assert_eq!(
        row(&json, "post")["why"],
        "the client sent no POST: nothing was tested"
    );
}

#[test]
fn a_client_that_retries_at_once_fails_every_scenario_but_a_past_date() {
    let rt = runtime();
    let upstream = rt.block_on(TestServer::start());
    upstream.set_default("/v1/items", Reply::ok("items"));
    let dir = TempDir::new("check-naive");
    let url = upstream.url("/v1/items");
    let (output, json) = check(&dir, &["--", "python3", &script("naive.py"), &url]);

    assert_eq!(output.status.code(), Some(3), "{}\n{json:#}", show(&output));
    let mut want = all("fail");
    // A date in the past permits a retry at once: at once is right.
    want[3].1 = "pass".to_owned();
    assert_eq!(verdicts(&json), want, "{json:#}");
    for name in GET_SCENARIOS {
        assert!((0.0..0.1).contains(&first_retry(&json, name)), "{json:#}");
    }
    let why = row(&json, "malformed")["why"].as_str().unwrap_or_default();
    assert!(why.contains("read the hint as zero"), "{why}");
    let table = stdout(&output);
    assert!(
        table.contains("honours Retry-After: 1/12 (11 fail, 1 n/a); fails delay-429, delay-503"),
        "{table}"
    );
}

#[test]
fn curl_with_retry_honours_delay_seconds_and_dates_but_waits_on_past_ones() {
    let rt = runtime();
    let upstream = rt.block_on(TestServer::start());
    upstream.set_default("/v1/items", Reply::ok("items"));
    let dir = TempDir::new("check-curl");
    let url = upstream.url("/v1/items");
    let client = ["--timeout", "8s", "--", "curl", "-s", "--retry", "2", &url];
    let (output, json) = check(&dir, &client);

    assert_eq!(output.status.code(), Some(0), "{}\n{json:#}", show(&output));
    // curl waits as long as Retry-After says (seconds or a date) and backs off 1 s after a
    // malformed hint or none; it retries a used-up quota all the same, and a date in the past
    // it waits for past the time limit.
    let mut want = all("pass");
    want[3].1 = "warn".to_owned();
    want[11].1 = "warn".to_owned();
    assert_eq!(verdicts(&json), want, "{json:#}");
    for name in [
        "delay-429",
        "delay-503",
        "http-date",
        "malformed",
        "malformed-negative",
        "malformed-decimal",
        "malformed-empty",
        "no-hint",
        "quota",
    ] {
        assert_eq!(row(&json, name)["retries"], 1, "{json:#}");
        assert!(first_retry(&json, name) >= 1.0, "{json:#}");
    }
    assert_eq!(row(&json, "second-throttle")["retries"], 2, "{json:#}");
    // A date in the past, or one with the wrong weekday (read leniently, it is in the past
    // too): curl does not retry before the time limit.
    for name in ["date-past", "wrong-weekday"] {
        assert_eq!(row(&json, name)["timed_out"], true, "{json:#}");
        assert_eq!(
            row(&json, name)["did"],
            "no retry before the time limit (stopped)"
        );
    }
    let why = row(&json, "wrong-weekday")["why"]
        .as_str()
        .unwrap_or_default();
    assert!(
        why.starts_with("did not retry before the time limit"),
        "{why}"
    );
}

/// `holdoff check -s post -- CLIENT… URL`: the post scenario's row.
fn post(name: &str, client: &[&str]) -> (Output, Value) {
    let rt = runtime();
    let upstream = rt.block_on(TestServer::start());
    upstream.set_default("/v1/jobs", Reply::ok("queued"));
    let dir = TempDir::new(name);
    let url = upstream.url("/v1/jobs");
    let mut args = vec!["-s", "post", "--"];
    args.extend(client);
    args.push(&url);
    let (output, json) = check(&dir, &args);
    (output, json["scenarios"][0].clone())
}

#[test]
fn a_post_repeated_after_the_hint_with_an_idempotency_key_passes() {
    let (output, row) = post(
        "check-post-keyed",
        &["python3", &script("honours.py"), "POST"],
    );
    assert_eq!(output.status.code(), Some(0), "{}\n{row:#}", show(&output));
    assert_eq!(row["verdict"], "pass", "{row:#}");
    assert!(
        row["first_retry_after_s"].as_f64().unwrap_or(0.0) >= 1.0,
        "{row:#}"
    );
}

#[test]
fn a_post_repeated_without_an_idempotency_key_warns() {
    let client = ["python3", &script("honours.py"), "--no-key", "POST"];
    let (output, row) = post("check-post-blind", &client);
    assert_eq!(
        output.status.code(),
        Some(0),
        "a warning: {}\n{row:#}",
        show(&output)
    );
    assert_eq!(row["verdict"], "warn", "{row:#}");
    let why = row["why"].as_str().unwrap_or_default();
    assert!(why.contains("a hint does not make a POST safe"), "{why}");
}

#[test]
fn curl_repeats_a_post_without_a_key() {
    let (output, row) = post(
        "check-post-curl",
        &["curl", "-s", "--retry", "2", "-d", "{}"],
    );
    assert_eq!(output.status.code(), Some(0), "{}\n{row:#}", show(&output));
    assert_eq!(row["verdict"], "warn", "{row:#}");
}

#[test]
fn a_post_repeated_before_the_hint_fails() {
    let (output, row) = post(
        "check-post-naive",
        &["python3", &script("naive.py"), "POST"],
    );
    assert_eq!(output.status.code(), Some(3), "{}\n{row:#}", show(&output));
    assert_eq!(row["verdict"], "fail", "{row:#}");
}

#[test]
fn a_command_that_sends_nothing_is_not_tested() {
    let dir = TempDir::new("check-nothing");
    let (output, json) = check(&dir, &["-s", "delay-429", "-s", "no-hint", "--", "true"]);
    assert_eq!(output.status.code(), Some(4), "{}\n{json:#}", show(&output));
    let want = vec![
        ("delay-429".to_owned(), "n/a".to_owned()),
        ("no-hint".to_owned(), "n/a".to_owned()),
    ];
    assert_eq!(verdicts(&json), want, "{json:#}");
    assert!(stdout(&output).contains("honours Retry-After: 0/0 (2 n/a)"));
}

#[test]
fn a_command_not_found_exits_127() {
    let dir = TempDir::new("check-missing");
    let (output, _) = check(&dir, &["-s", "delay-429", "--", "holdoff-no-such-client"]);
    assert_eq!(output.status.code(), Some(127), "{}", show(&output));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("command not found"), "{stderr}");
}

#[test]
fn a_client_still_running_at_the_timeout_is_stopped_and_judged() {
    let dir = TempDir::new("check-timeout");
    let rt = runtime();
    let upstream = rt.block_on(TestServer::start());
    upstream.set_default("/v1/items", Reply::ok("items"));
    let url = upstream.url("/v1/items");
    // One request, throttled, then a sleep far past the time limit.
    let client = format!("curl -s {url}; sleep 30");
    let (output, json) = check(
        &dir,
        &[
            "-s",
            "delay-429",
            "--timeout",
            "5s",
            "--",
            "sh",
            "-c",
            &client,
        ],
    );
    assert_eq!(output.status.code(), Some(0), "{}\n{json:#}", show(&output));
    let row = &json["scenarios"][0];
    assert_eq!(row["timed_out"], true, "{row:#}");
    assert_eq!(row["verdict"], "pass", "{row:#}");
    assert_eq!(
        row["did"], "no retry before the time limit (stopped)",
        "{row:#}"
    );
}
