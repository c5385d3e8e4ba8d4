//! This crate's layers point one way: no module cycle among its top-level modules, nor among
//! its files (`holdoff_testkit::layers` reads the imports). `cargo nextest run -p holdoff-config
//! --test layers` runs it.

use std::path::Path;

use holdoff_testkit::layers::{file_cycles, top_level_cycles};

fn src() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

#[test]
fn top_level_modules_import_one_way() {
    let found = top_level_cycles(&src());
    assert!(
        found.is_empty(),
        "modules that import each other:\n{}",
        found.join("\n")
    );
}

#[test]
fn files_import_one_way() {
    let found = file_cycles(&src());
    assert!(
        found.is_empty(),
        "files that import each other:\n{}",
        found.join("\n")
    );
}
