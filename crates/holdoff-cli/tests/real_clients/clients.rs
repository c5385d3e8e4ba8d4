//! Where the real clients are: what scripts/test installs under `target/` (a Python venv with
//! requests, urllib3 and openai; axios and axios-retry for Node.js), and the Java client,
//! compiled once into `target/java-clients/`.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The workspace's `target/`, where scripts/test installs the clients.
fn target() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target")
}

/// The venv's python, with requests, urllib3 and openai.
///
/// # Panics
///
/// If the venv is missing.
pub(crate) fn python() -> String {
    let python = target().join("py-clients/bin/python");
    assert!(
        python.is_file(),
        "{} is missing: run ./scripts/test, which installs it (python3 -m venv target/py-clients, \
         then pip install requests urllib3 openai)",
        python.display()
    );
    python.display().to_string()
}

/// `node_modules` with axios and axios-retry, for `NODE_PATH`.
///
/// # Panics
///
/// If either is missing.
pub(crate) fn node_modules() -> String {
    let modules = target().join("node-clients/node_modules");
    for package in ["axios", "axios-retry"] {
        assert!(
            modules.join(package).is_dir(),
            "{package} is not installed in {}: run ./scripts/test, which installs it (npm install \
             --prefix target/node-clients axios axios-retry)",
            modules.display()
        );
    }
    modules.display().to_string()
}

/// The Java client's source.
const JAVA_SOURCE: &str = include_str!("RetryAfterClient.java");

/// The class path of the compiled Java client (`java -cp IT RetryAfterClient URL`), compiled
/// on first use into a directory named after the source's digest, so an edit recompiles and
/// concurrent tests (nextest runs each in its own process) never see a half-written one.
///
/// # Panics
///
/// If `javac` is missing or fails.
pub(crate) fn java_client() -> String {
    let root = target().join("java-clients");
    let classes = root.join(format!("{:016x}", fnv1a(JAVA_SOURCE.as_bytes())));
    if !classes.join("RetryAfterClient.class").is_file() {
        let staging = root.join(format!("staging-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&staging);
        std::fs::create_dir_all(&staging).expect("create the Java staging directory");
        let source = staging.join("RetryAfterClient.java");
        std::fs::write(&source, JAVA_SOURCE).expect("write the Java source");
        let output = Command::new("javac")
            .arg("-d")
            .arg(staging.join("classes"))
            .arg(&source)
            .output()
            .expect("javac is needed for this test: run ./scripts/test, which installs it");
        assert!(
            output.status.success(),
            "javac failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        // Another test may have won the race: its classes are the same.
        if std::fs::rename(staging.join("classes"), &classes).is_err() {
            assert!(classes.join("RetryAfterClient.class").is_file());
        }
        let _ = std::fs::remove_dir_all(&staging);
    }
    classes.display().to_string()
}

/// FNV-1a, 64 bits: a digest that is the same in every build.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, &byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}
