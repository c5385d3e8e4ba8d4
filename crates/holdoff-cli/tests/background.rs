//! A proxy in the background, in the shape of Dev Proxy's CI scripts: `holdoff proxy
//! --detach`, then `holdoff status`, `holdoff logs` and `holdoff stop`, which writes the
//! reports and exits with the verdict. The real binary, curl as the client, a loopback upstream.

mod support;

use std::path::Path;
use std::process::{Command, Output, Stdio};

use holdoff_testkit::TestServer;
use support::{TempDir, runtime, show};

/// `holdoff ARGS…` with its state folder (and home) in `dir`.
fn holdoff(dir: &Path, args: &[&str]) -> Output {
    assert_cmd::Command::cargo_bin("holdoff")
        .expect("the holdoff binary")
        .args(args)
        .env("HOLDOFF_STATE_DIR", dir.join("state"))
        .env("HOME", dir)
        .current_dir(dir)
        .timeout(std::time::Duration::from_secs(60))
        .output()
        .expect("run holdoff")
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// Stops whatever a failed test left running in `dir`'s state folder.
struct Cleanup<'a>(&'a Path);

impl Drop for Cleanup<'_> {
    fn drop(&mut self) {
        let _ = holdoff(self.0, &["stop", "--force"]);
    }
}

/// curl through the proxy at `proxy` as the client `me` (the user name names it), printing the
/// status.
fn curl_as_me(proxy: &str, url: &str) -> String {
    let proxy = proxy.replacen("http://", "http://me@", 1);
    let output = Command::new("curl")
        .args([
            "-s",
            "-o",
            "/dev/null",
            "-w",
            "%{http_code}",
            "-x",
            &proxy,
            url,
        ])
        .stdin(Stdio::null())
        .output()
        .expect("curl is needed for these tests: run ./scripts/test, which installs it");
    String::from_utf8_lossy(&output.stdout).into_owned()
}

#[test]
fn detach_status_logs_and_stop_with_the_verdict() {
    let rt = runtime();
    let upstream = rt.block_on(TestServer::start());
    let dir = TempDir::new("background");
    let _cleanup = Cleanup(dir.path());

    let started = holdoff(
        dir.path(),
        &[
            "--detach",
            "--port",
            "0",
            "-u",
            "http://127.0.0.1:*/*",
            "--preset",
            "throttle",
            "-f",
            "100",
            "--report-json",
            "report.json",
        ],
    );
    assert_eq!(started.status.code(), Some(0), "{}", show(&started));
    let printed = stdout(&started);
    let proxy = printed
        .lines()
        .next()
        .and_then(|line| line.strip_prefix("listening on "))
        .unwrap_or_else(|| panic!("{printed}"))
        .to_owned();
    assert!(
        printed.contains("runs in the background (pid "),
        "{printed}"
    );

    let status = holdoff(dir.path(), &["status"]);
    assert_eq!(status.status.code(), Some(0), "{}", show(&status));
    let shown = stdout(&status);
    assert!(shown.contains(&format!("Proxy:        {proxy}")), "{shown}");
    assert!(shown.contains("Faults from:  preset throttle"), "{shown}");

    // The second request is a retry inside the first's window: premature.
    let url = upstream.url("/items");
    assert_eq!(curl_as_me(&proxy, &url), "429");
    assert_eq!(curl_as_me(&proxy, &url), "429");

    let logs = holdoff(dir.path(), &["logs", "-n", "50"]);
    assert_eq!(logs.status.code(), Some(0), "{}", show(&logs));
    assert!(stdout(&logs).contains("premature retry"), "{}", show(&logs));

    let stopped = holdoff(dir.path(), &["stop"]);
    assert_eq!(stopped.status.code(), Some(3), "{}", show(&stopped));
    let said = stdout(&stopped);
    assert!(said.starts_with("Stopped holdoff proxy (pid "), "{said}");
    assert!(said.contains("holdoff: FAIL"), "{said}");
    let report = support::json_report(&dir.join("report.json"));
    assert_eq!(report["retries"]["premature"], 1, "{report}");

    let after = holdoff(dir.path(), &["status"]);
    assert_eq!(after.status.code(), Some(1), "{}", show(&after));
    assert!(
        String::from_utf8_lossy(&after.stderr).contains("no holdoff proxy runs in the background"),
        "{}",
        show(&after)
    );
}

#[test]
fn a_proxy_that_cannot_start_says_why_and_leaves_nothing_running() {
    let dir = TempDir::new("background-broken");
    std::fs::write(dir.join("holdoff.json"), "{ not json").expect("write a broken config");
    let started = holdoff(dir.path(), &["-d", "--port", "0"]);
    assert_eq!(started.status.code(), Some(1), "{}", show(&started));
    let err = String::from_utf8_lossy(&started.stderr);
    assert!(err.contains("the proxy did not start"), "{err}");
    assert!(
        err.contains("holdoff.json"),
        "its log's error is shown: {err}"
    );
    let status = holdoff(dir.path(), &["status"]);
    assert_eq!(status.status.code(), Some(1), "{}", show(&status));
}

#[test]
fn stop_without_a_proxy_says_so() {
    let dir = TempDir::new("background-none");
    let stopped = holdoff(dir.path(), &["stop"]);
    assert_eq!(stopped.status.code(), Some(1), "{}", show(&stopped));
    assert!(
        String::from_utf8_lossy(&stopped.stderr)
            .contains("start one with `holdoff proxy --detach`")
    );
}

#[test]
fn fail_on_premature_makes_a_foreground_proxys_exit_status_the_verdict() {
    let rt = runtime();
    let upstream = rt.block_on(TestServer::start());
    let dir = TempDir::new("fail-on-premature");
    let proxy = support::Proxy::spawn(
        Command::new(assert_cmd::cargo::cargo_bin("holdoff"))
            .args(["proxy", "--port", "0", "--fail-on-premature", "-f", "100"])
            .args(["-u", "http://127.0.0.1:*/*", "--preset", "throttle"])
            .env("HOME", dir.path())
            .stdin(Stdio::null()),
    );
    let url = upstream.url("/items");
    assert_eq!(curl_as_me(&proxy.url(), &url), "429");
    assert_eq!(curl_as_me(&proxy.url(), &url), "429");
    let (code, stderr) = proxy.stop_with_status();
    assert_eq!(code, Some(3), "{stderr}");
}
