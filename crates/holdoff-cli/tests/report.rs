//! `holdoff report`, run as a built binary on a saved event log: exit codes, what it prints,
//! and the files it writes.

use std::path::Path;

use assert_cmd::Command;

mod support;

use support::TempDir;

/// A run with three premature retries (crates/holdoff-proxy/tests/fixtures/report).
const FIXTURE: &str = "../holdoff-proxy/tests/fixtures/report/events.jsonl";

fn report(dir: &Path, args: &[&str]) -> assert_cmd::assert::Assert {
    let fixture = Path::new(FIXTURE)
        .canonicalize()
        .expect("the fixture exists");
    let mut cmd = Command::cargo_bin("holdoff").expect("the holdoff binary is built");
    cmd.current_dir(dir)
        .arg("report")
        .arg(fixture)
        .args(args)
        .assert()
}

fn stdout(assert: &assert_cmd::assert::Assert) -> String {
    String::from_utf8(assert.get_output().stdout.clone()).expect("utf-8")
}

fn stderr(assert: &assert_cmd::assert::Assert) -> String {
    String::from_utf8(assert.get_output().stderr.clone()).expect("utf-8")
}

#[test]
fn prints_markdown_and_exits_3_for_premature_retries() {
    let dir = TempDir::new("report-md");
    let assert = report(dir.path(), &[]).code(3).stderr("");
    let out = stdout(&assert);
    assert!(
        out.starts_with("## holdoff: ✗ FAIL: 3 premature retries"),
        "{out}"
    );
    assert!(out.contains("| naive | `POST https://api.example.com/v1/orders` | 2.90 s |"));
}

#[test]
fn exits_0_for_a_clean_log() {
    let dir = TempDir::new("report-clean");
    let text = std::fs::read_to_string(FIXTURE).expect("read the fixture");
    let clean: String = text
        .lines()
        .filter(|line| !line.contains(r#""verdict":"premature""#))
        .map(|line| format!("{line}\n"))
        .collect();
    let log = dir.write("events.jsonl", &clean);
    let mut cmd = Command::cargo_bin("holdoff").expect("the holdoff binary is built");
    let assert = cmd
        .current_dir(dir.path())
        .args(["report", &log, "--format", "json"])
        .assert()
        .code(0);
    let json: serde_json::Value = serde_json::from_str(&stdout(&assert)).expect("JSON");
    assert_eq!(json["verdict"], "pass");
    assert_eq!(json["retries"]["compliant"], 8);
}

#[test]
fn writes_every_report_asked_for_and_sums_them_up_on_stderr() {
    let dir = TempDir::new("report-files");
    let assert = report(
        dir.path(),
        &[
            "--report-json",
            "r.json",
            "--report-junit",
            "junit.xml",
            "--report-md",
            "r.md",
            "--report-html",
            "r.html",
        ],
    )
    .code(3)
    .stdout("");
    let err = stderr(&assert);
    assert!(
        err.starts_with("holdoff: FAIL: 3 premature retries"),
        "{err}"
    );
    assert!(err.ends_with(
        "reports:\n  JSON      r.json\n  JUnit     junit.xml\n  Markdown  r.md\n  HTML      r.html\n"
    ));
    let read = |name: &str| std::fs::read_to_string(dir.path().join(name)).expect(name);
    let json: serde_json::Value = serde_json::from_str(&read("r.json")).expect("JSON");
    assert_eq!(json["violations"][0]["early_by_ms"], 1900.0);
    assert!(read("junit.xml").contains(r#"<testsuites name="holdoff" tests="8" failures="2""#));
    assert!(read("r.md").starts_with("## holdoff: ✗ FAIL"));
    assert!(read("r.html").contains(r#"<svg class="timeline""#));
}

#[test]
fn guesses_the_format_from_the_output_file() {
    let dir = TempDir::new("report-guess");
    report(dir.path(), &["-o", "junit.xml"]).code(3).stdout("");
    let xml = std::fs::read_to_string(dir.path().join("junit.xml")).expect("junit.xml");
    assert!(xml.starts_with(r#"<?xml version="1.0" encoding="UTF-8"?>"#));
}

#[test]
fn names_the_file_and_line_of_a_bad_event_and_exits_2() {
    let dir = TempDir::new("report-bad");
    let log = dir.write(
        "events.jsonl",
        "{\"event\":\"start\",\"at\":\"2025-03-01T12:00:00Z\",\"source\":\"x\",\"proxy_url\":\"u\",\"judge_key\":\"k\"}\n{\"event\":\"retry\"}\n",
    );
    let mut cmd = Command::cargo_bin("holdoff").expect("the holdoff binary is built");
    let assert = cmd
        .current_dir(dir.path())
        .args(["report", &log])
        .assert()
        .code(2)
        .stdout("");
    assert_eq!(
        stderr(&assert),
        format!("holdoff: failed to read the event log {log}:2: missing field `verdict`\n")
    );
}

#[test]
fn exits_2_when_the_log_is_missing_or_a_report_cannot_be_written() {
    let dir = TempDir::new("report-missing");
    let mut cmd = Command::cargo_bin("holdoff").expect("the holdoff binary is built");
    let assert = cmd
        .current_dir(dir.path())
        .args(["report", "nope.jsonl"])
        .assert()
        .code(2);
    assert!(stderr(&assert).starts_with("holdoff: failed to read the event log nope.jsonl: "));

    // The other reports are still written.
    let assert = report(
        dir.path(),
        &[
            "--report-junit",
            "no/such/dir/j.xml",
            "--report-json",
            "r.json",
        ],
    )
    .code(2);
    assert!(
        stderr(&assert)
            .starts_with("holdoff: failed to write the JUnit report no/such/dir/j.xml: ")
    );
    assert!(dir.path().join("r.json").exists());
}

#[test]
fn exits_4_for_a_log_in_which_no_request_reached_the_proxy_unless_allowed() {
    let dir = TempDir::new("report-not-tested");
    let start = r#"{"event":"start","at":"2025-03-01T12:00:00.000Z","source":"preset throttle","proxy_url":"http://127.0.0.1:1","judge_key":"client-method-url""#;
    let finish = r#"{"event":"finish","at":"2025-03-01T12:00:01.000Z","requests":0,"exit_code":0}"#;
    for (name, extra, code) in [
        ("strict.jsonl", "", 4),
        ("allowed.jsonl", r#","allow_no_traffic":true"#, 0),
    ] {
        let log = dir.write(name, &format!("{start}{extra}}}\n{finish}\n"));
        let mut cmd = Command::cargo_bin("holdoff").expect("the holdoff binary is built");
        let assert = cmd
            .current_dir(dir.path())
            .args(["report", &log, "--format", "json"])
            .assert()
            .code(code);
        let json: serde_json::Value = serde_json::from_str(&stdout(&assert)).expect("JSON");
        assert_eq!(json["verdict"], "not_tested", "{name}");
    }
}
