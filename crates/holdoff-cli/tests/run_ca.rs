//! `holdoff run`'s throwaway CA keeps its key in memory: the temporary directory the command is
//! pointed at holds certificates only, while it runs and after holdoff is killed outright.

mod support;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use support::{TempDir, show};

/// The files the temporary directory holds: the CA's certificate, the bundle, the JVM's trust
/// store, and nothing else.
const FILES: [&str; 3] = ["ca-bundle.pem", "ca-cert.pem", "truststore.p12"];

/// The names in `dir`, sorted, each with whether the file holds a private key.
fn files_in(dir: &Path) -> Vec<(String, bool)> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).expect("list the CA's directory") {
        let entry = entry.expect("a directory entry");
        let bytes = std::fs::read(entry.path()).expect("read a file of the CA's directory");
        let key = bytes.windows(11).any(|w| w == b"PRIVATE KEY");
        files.push((entry.file_name().to_string_lossy().into_owned(), key));
    }
    files.sort();
    files
}

/// Lists the CA certificate's directory into `$1`, and fails if a file there holds a key.
const LIST: &str =
    r#"d=$(dirname "$HOLDOFF_CA_CERT"); ls -A "$d" > "$1"; ! grep -q "PRIVATE KEY" "$d"/*"#;

#[test]
fn the_command_sees_no_private_key_beside_the_ca_certificate() {
    let dir = TempDir::new("run-ca-listing");
    let listing = dir.path().join("listing");
    let output = Command::new(assert_cmd::cargo::cargo_bin("holdoff"))
        .args(["run", "--log-level", "warn", "--allow-no-traffic", "--"])
        // The listing, and a failure if any file there holds a private key.
        .args(["sh", "-c", LIST, "sh"])
        .arg(&listing)
        .current_dir(dir.path())
        .stdin(Stdio::null())
        .output()
        .expect("run holdoff");
    assert_eq!(output.status.code(), Some(0), "{}", show(&output));
    let listed = std::fs::read_to_string(&listing).expect("the command listed the directory");
    assert_eq!(listed.lines().collect::<Vec<_>>(), FILES);
}

#[cfg(unix)]
#[test]
fn holdoff_killed_with_sigkill_leaves_no_key_behind() {
    let dir = TempDir::new("run-ca-sigkill");
    let mut holdoff = Command::new(assert_cmd::cargo::cargo_bin("holdoff"))
        .args(["run", "--log-level", "warn", "--allow-no-traffic", "--"])
        // The directory, then the pid of the sleep (which outlives holdoff, to be stopped here).
        .args([
            "sh",
            "-c",
            r#"dirname "$HOLDOFF_CA_CERT"; echo $$; exec sleep 60"#,
        ])
        .current_dir(dir.path())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start holdoff run");
    let mut stdout = BufReader::new(holdoff.stdout.take().expect("piped"));
    let mut line = String::new();
    stdout.read_line(&mut line).expect("read the directory");
    let ca_dir = PathBuf::from(line.trim_end());
    line.clear();
    stdout.read_line(&mut line).expect("read the pid");
    let sleep = line.trim_end().to_owned();

    holdoff.kill().expect("SIGKILL holdoff");
    let status = holdoff.wait().expect("wait for holdoff");
    let _ = Command::new("kill").arg(&sleep).status();
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&status),
        Some(9),
        "{status:?}"
    );

    // Nothing cleaned up after a SIGKILL: what is left is what was ever written.
    assert!(ca_dir.is_dir(), "{} is gone", ca_dir.display());
    let left = files_in(&ca_dir);
    std::fs::remove_dir_all(&ca_dir).expect("remove what holdoff left");
    let expected: Vec<_> = FILES.iter().map(|name| (name.to_string(), false)).collect();
    assert_eq!(left, expected, "(file, holds a private key)");
}
