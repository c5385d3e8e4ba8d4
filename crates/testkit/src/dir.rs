//! [`TempDir`]: a fresh directory under the system's temporary directory, named after the test
//! that made it, removed when dropped.

use std::path::{Path, PathBuf};

/// A fresh directory `holdoff-LABEL-XXXXXX` under the system's temporary directory
/// ([`tempfile::TempDir`]), removed when dropped.
#[derive(Debug)]
pub struct TempDir(tempfile::TempDir);

impl TempDir {
    /// Creates one; `label` says which test it belongs to, for whoever finds it left over.
    ///
    /// # Panics
    ///
    /// If the directory cannot be created.
    pub fn new(label: &str) -> TempDir {
        let dir = tempfile::Builder::new()
            .prefix(&format!("holdoff-{label}-"))
            .tempdir()
            .expect("create a temporary directory");
        TempDir(dir)
    }

    /// Its path.
    pub fn path(&self) -> &Path {
        self.0.path()
    }

    /// `name` inside it (not created).
    pub fn join(&self, name: impl AsRef<Path>) -> PathBuf {
        self.0.path().join(name)
    }

    /// Writes `name` in it with `text`, returning its path as a string.
    ///
    /// # Panics
    ///
    /// If the file cannot be written.
    pub fn write(&self, name: &str, text: &str) -> String {
        let path = self.join(name);
        std::fs::write(&path, text).expect("write a file in the temporary directory");
        path.display().to_string()
    }
}
