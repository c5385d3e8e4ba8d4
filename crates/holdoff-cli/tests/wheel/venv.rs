//! The wheel under test and the fresh venv it is installed in, both under `target/py-wheel/`:
//!
//! - `tools/`: a venv with maturin, and `wheelhouse/`: the wheels of requests, pytest and
//!   pytest-xdist, both from scripts/test;
//! - `dist/`: the wheel, built once per test run by `maturin build --profile dev`, which reuses
//!   the debug build of `cargo build -p holdoff-cli` (no release build: CI's two cores have no
//!   time for its fat LTO);
//! - `venv-HASH/`: a fresh venv with nothing but the wheel and the wheelhouse's packages,
//!   installed offline, one per wheel and Python (named after their digest).
//!
//! nextest runs each test in a process of its own: a lock file lets the first build and
//! install, and the others wait for it and take what it made.

use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::support::show;

/// Written in a venv once everything is installed in it.
const INSTALLED: &str = "installed";

/// The workspace's `target/py-wheel`.
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/py-wheel")
}

/// The venv the wheel of this checkout is installed in, with requests, pytest and
/// pytest-xdist: its `bin/` has `holdoff` and `python`.
///
/// # Panics
///
/// If scripts/test has not installed maturin and the wheelhouse, or the wheel cannot be built
/// or installed.
pub(crate) fn venv() -> PathBuf {
    let root = root();
    let maturin = root.join("tools/bin/maturin");
    let wheelhouse = root.join("wheelhouse");
    assert!(
        maturin.is_file() && wheelhouse.join("complete").is_file(),
        "{} or {} is missing: run ./scripts/test, which installs maturin into \
         target/py-wheel/tools and downloads requests, pytest and pytest-xdist into \
         target/py-wheel/wheelhouse",
        maturin.display(),
        wheelhouse.display()
    );
    let lock = File::create(root.join("lock")).expect("create target/py-wheel/lock");
    lock.lock().expect("lock target/py-wheel/lock");
    let wheel = wheel(&root, &maturin);
    // The wheel, and the Python the wheelhouse is for (`complete` names it).
    let mut bytes = fs::read(&wheel).expect("read the wheel");
    bytes.extend(fs::read(wheelhouse.join("complete")).expect("read the wheelhouse's marker"));
    let digest = fnv1a(&bytes);
    let venv = root.join(format!("venv-{digest:016x}"));
    if !venv.join(INSTALLED).is_file() {
        install(&root, &wheel, &venv);
    }
    venv
}

/// The wheel in `root/dist`, built by this test run (nextest's run id, or this process) or
/// now.
fn wheel(root: &Path, maturin: &Path) -> PathBuf {
    let dist = root.join("dist");
    let run = std::env::var("NEXTEST_RUN_ID").unwrap_or_else(|_| std::process::id().to_string());
    let built_for = dist.join("built-for");
    if fs::read_to_string(&built_for).ok().as_deref() != Some(run.as_str()) {
        let _ = fs::remove_dir_all(&dist);
        let manifest = Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml");
        let output = Command::new(maturin)
            .args(["build", "--profile", "dev", "--locked", "--manifest-path"])
            .arg(&manifest)
            .arg("--out")
            .arg(&dist)
            .output()
            .expect("run maturin");
        assert!(
            output.status.success(),
            "maturin build failed: {}",
            show(&output)
        );
        fs::write(&built_for, &run).expect("write target/py-wheel/dist/built-for");
    }
    fs::read_dir(&dist)
        .expect("read target/py-wheel/dist")
        .filter_map(Result::ok)
        .map(|entry| entry.path())
        .find(|path| path.extension().is_some_and(|ext| ext == "whl"))
        .expect("maturin built a wheel into target/py-wheel/dist")
}

/// A fresh venv at `venv` with `wheel` and the wheelhouse's packages, installed offline; the
/// venvs of earlier wheels are removed.
fn install(root: &Path, wheel: &Path, venv: &Path) {
    for entry in fs::read_dir(root).expect("read target/py-wheel").flatten() {
        if entry.file_name().to_string_lossy().starts_with("venv-") {
            let _ = fs::remove_dir_all(entry.path());
        }
    }
    // The tools' python: the one the wheelhouse was downloaded for.
    run(Command::new(root.join("tools/bin/python"))
        .args(["-m", "venv"])
        .arg(venv));
    run(Command::new(venv.join("bin/python"))
        .args([
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
        ])
        .args(["--no-index", "--find-links"])
        .arg(root.join("wheelhouse"))
        .arg(wheel)
        .args(["requests", "pytest", "pytest-xdist"]));
    fs::write(venv.join(INSTALLED), "").expect("mark the venv installed");
}

/// Runs `command`, which must succeed.
fn run(command: &mut Command) {
    let output = command.output().expect("run a setup command");
    assert!(
        output.status.success(),
        "{command:?} failed: {}",
        show(&output)
    );
}

/// FNV-1a, 64 bits: a digest that is the same in every build.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, &byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}
