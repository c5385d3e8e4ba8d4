//! `holdoff ca trust` / `untrust` and `holdoff proxy --install-cert`, installing into a
//! directory of the test's own (HOLDOFF_TRUST_DIR) with a fake update command
//! (HOLDOFF_TRUST_UPDATE) that records each call.

mod support;

use std::fs;
use std::path::Path;
use std::time::Duration;

use assert_cmd::Command;
use support::{TempDir, show};

/// `holdoff ARGS…` with the trust store in `tmp/anchors` and its update command appending a
/// line to `tmp/calls`.
fn holdoff(tmp: &TempDir, update: &str, args: &[&str]) -> std::process::Output {
    Command::cargo_bin("holdoff")
        .expect("the holdoff binary")
        .args(args)
        .env("HOLDOFF_TRUST_DIR", tmp.join("anchors"))
        .env("HOLDOFF_TRUST_UPDATE", update)
        .timeout(Duration::from_secs(60))
        .output()
        .expect("run holdoff")
}

/// The fake update command: records that it ran.
fn recorder(tmp: &TempDir) -> String {
    format!("echo called >> '{}'", tmp.join("calls").display())
}

fn calls(tmp: &TempDir) -> usize {
    fs::read_to_string(tmp.join("calls"))
        .map(|text| text.lines().count())
        .unwrap_or(0)
}

fn ca_dir(tmp: &TempDir) -> String {
    tmp.join("ca").display().to_string()
}

#[test]
fn trust_installs_the_certificate_and_runs_the_update_and_untrust_undoes_it() {
    let tmp = TempDir::new("ca-trust");
    let update = recorder(&tmp);
    let output = holdoff(&tmp, &update, &["ca", "trust", "--ca-dir", &ca_dir(&tmp)]);
    assert!(output.status.success(), "{}", show(&output));
    let installed = tmp.join("anchors/holdoff.crt");
    let cert = fs::read_to_string(Path::new(&ca_dir(&tmp)).join("ca-cert.pem"))
        .expect("the CA was created");
    assert_eq!(fs::read_to_string(&installed).expect("installed"), cert);
    assert_eq!(calls(&tmp), 1, "{}", show(&output));
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        stdout.contains("Installed the CA certificate as"),
        "{stdout}"
    );

    let output = holdoff(&tmp, &update, &["ca", "untrust", "--ca-dir", &ca_dir(&tmp)]);
    assert!(output.status.success(), "{}", show(&output));
    assert!(!installed.exists());
    assert_eq!(calls(&tmp), 2);

    // Nothing left to remove: no update either.
    let output = holdoff(&tmp, &update, &["ca", "untrust", "--ca-dir", &ca_dir(&tmp)]);
    assert!(output.status.success(), "{}", show(&output));
    assert!(String::from_utf8_lossy(&output.stdout).contains("nothing to untrust"));
    assert_eq!(calls(&tmp), 2);
}

#[test]
fn a_failing_update_exits_1_and_says_so() {
    let tmp = TempDir::new("ca-trust-fails");
    let output = holdoff(&tmp, "exit 3", &["ca", "trust", "--ca-dir", &ca_dir(&tmp)]);
    assert_eq!(output.status.code(), Some(1), "{}", show(&output));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("`exit 3` failed"), "{stderr}");
    assert!(stderr.contains("run it again by hand"), "{stderr}");
}

#[test]
fn install_cert_trusts_the_proxys_ca_before_it_starts() {
    let tmp = TempDir::new("install-cert");
    let update = recorder(&tmp);
    let output = holdoff(
        &tmp,
        &update,
        &[
            "proxy",
            "--port",
            "0",
            "--timeout",
            "1",
            "--install-cert",
            "--ca-dir",
            &ca_dir(&tmp),
        ],
    );
    assert!(output.status.success(), "{}", show(&output));
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(stdout.starts_with("listening on http://"), "{stdout}");
    assert!(tmp.join("anchors/holdoff.crt").is_file());
    assert_eq!(calls(&tmp), 1);
}
