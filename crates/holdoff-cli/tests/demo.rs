//! `holdoff demo` as a user runs it: the built binary, for a few real seconds (the demo is a
//! real-time thing; nothing here asserts on timing).

mod support;

use std::path::Path;
use std::process::{Command, Output, Stdio};

use serde_json::Value;
use support::{TempDir, show};

/// `holdoff demo ARGS…` in `cwd`, with `HOME` (and so any default CA directory) and `TMPDIR`
/// inside `home`, waiting for it to exit.
fn holdoff_demo(cwd: &Path, home: &Path, args: &[&str]) -> Output {
    Command::new(assert_cmd::cargo::cargo_bin("holdoff"))
        .arg("demo")
        .args(args)
        .current_dir(cwd)
        .env("HOME", home)
        .env("XDG_DATA_HOME", home.join("data"))
        .env("TMPDIR", home.join("tmp"))
        .env_remove("HTTP_PROXY")
        .env_remove("http_proxy")
        .stdin(Stdio::null())
        .output()
        .expect("run holdoff demo")
}

/// The names of the entries in `dir`, sorted.
fn entries(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .expect("read directory")
        .map(|entry| {
            entry
                .expect("entry")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    names.sort();
    names
}

const FILES: [&str; 6] = [
    "events.jsonl",
    "junit.xml",
    "proxy.log",
    "report.html",
    "report.json",
    "report.md",
];

#[test]
fn catches_the_naive_client_and_clears_the_holdoff_client() {
    let cwd = TempDir::new("demo-cwd");
    // Were the demo to read config files from the current directory, this one would stop it.
    cwd.write("holdoff.json", "this is not a config");
    let home = TempDir::new("demo-home");
    let out = cwd.path().join("report");

    let output = holdoff_demo(
        cwd.path(),
        home.path(),
        &["--duration", "6s", "--no-progress", "--out", "report"],
    );
    assert!(output.status.success(), "{}", show(&output));

    let stdout = String::from_utf8_lossy(&output.stdout);
    let verdict = stdout
        .lines()
        .find(|line| line.starts_with("verdict of the demo, as expected: "))
        .unwrap_or_else(|| panic!("no verdict line\n{}", show(&output)));
    assert!(
        verdict.contains("naive-client retried early") && verdict.contains("(caught)"),
        "{verdict}"
    );
    assert!(
        verdict.contains("holdoff-client") && verdict.contains("(clean)"),
        "{verdict}"
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("reports:"), "{}", show(&output));
    // The proxy's FAIL is said to be the expected one before it is printed.
    let expected = stderr
        .find("Its FAIL is the expected result")
        .unwrap_or_else(|| panic!("no word that FAIL is expected\n{}", show(&output)));
    let fail = stderr
        .find("holdoff: FAIL: ")
        .expect("the proxy's headline");
    assert!(expected < fail, "{}", show(&output));
    // Clients as a person names them, in the summary and on the page.
    assert!(stderr.contains("  naive-client  GET "), "{}", show(&output));
    assert!(!stderr.contains("header:"), "{}", show(&output));
    // The reports repeat the demo, not a bare proxy.
    assert!(
        stderr.contains("\nreproduce: holdoff demo --duration 6s --seed 7\n"),
        "{}",
        show(&output)
    );
    let md = std::fs::read_to_string(out.join("report.md")).expect("the Markdown report");
    assert!(
        md.contains("```sh\nholdoff demo --duration 6s --seed 7\n```"),
        "{md}"
    );
    let html = std::fs::read_to_string(out.join("report.html")).expect("the HTML report");
    assert!(
        html.contains("<pre><code>holdoff demo --duration 6s --seed 7</code></pre>"),
        "{html}"
    );
    assert!(!html.contains(">header:"), "{html}");
    assert!(html.contains("<figcaption>naive-client "), "{html}");
    assert!(
        !stderr.contains(" / 6s "),
        "a progress line: {}",
        show(&output)
    );

    assert_eq!(entries(&out), FILES, "{}", show(&output));
    let report: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("report.json")).expect("read"))
            .expect("the JSON report");
    assert_eq!(report["verdict"], "fail");
    let violations = report["violations"].as_array().expect("violations");
    assert!(!violations.is_empty(), "{report:#}");
    for violation in violations {
        assert_eq!(violation["client"], "header:naive-client", "{violation:#}");
    }
    let endpoints = report["endpoints"].as_array().expect("endpoints");
    let holdoff: Vec<&Value> = endpoints
        .iter()
        .filter(|e| e["client"] == "header:holdoff-client")
        .collect();
    assert!(
        !holdoff.is_empty(),
        "the holdoff client made no request: {report:#}"
    );
    for endpoint in holdoff {
        assert_eq!(endpoint["premature"], 0, "{endpoint:#}");
    }

    // No CA, nor anything else, was made in the user's directories.
    assert!(
        entries(home.path()).is_empty(),
        "{:?}",
        entries(home.path())
    );
}

#[test]
fn writes_into_a_new_temporary_directory_by_default() {
    let cwd = TempDir::new("demo-default-cwd");
    let home = TempDir::new("demo-default-home");
    std::fs::create_dir(home.path().join("tmp")).expect("create TMPDIR");

    // Too short to promise a verdict: only where the files go is checked.
    let output = holdoff_demo(cwd.path(), home.path(), &["--duration", "1s"]);
    assert!(
        matches!(output.status.code(), Some(0 | 1)),
        "{}",
        show(&output)
    );

    let made = entries(&home.path().join("tmp"));
    assert_eq!(made.len(), 1, "{made:?}");
    assert!(made[0].starts_with("holdoff-demo-"), "{made:?}");
    let dir = home.path().join("tmp").join(&made[0]);
    assert_eq!(entries(&dir), FILES);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        stdout.contains(&dir.join("events.jsonl").display().to_string()),
        "{}",
        show(&output)
    );
    assert!(entries(cwd.path()).is_empty(), "{:?}", entries(cwd.path()));
}

#[test]
fn refuses_a_zero_duration() {
    let cwd = TempDir::new("demo-zero");
    let output = holdoff_demo(cwd.path(), cwd.path(), &["--duration", "0s"]);
    assert_eq!(output.status.code(), Some(2), "{}", show(&output));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("--duration must be greater than zero"),
        "{stderr}"
    );
}
