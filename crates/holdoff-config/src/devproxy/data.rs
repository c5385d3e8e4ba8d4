//! The data files a plugin names (errors, mocks, custom responses, API files): found as Dev
//! Proxy finds them, read leniently, and the directory their `@file` bodies are relative to.

use std::path::{Path, PathBuf};

use schemars::JsonSchema;
use serde::de::DeserializeOwned;

use super::doc::Doc;
use super::folders::Folders;
use super::importer::Importer;

/// A data file, read.
pub(super) struct Data<T> {
    /// The file, as shown.
    pub(super) file: String,
    pub(super) value: T,
    /// The directory its `@file` bodies are relative to: relative to the configuration's
    /// directory, unless absolute.
    pub(super) base: PathBuf,
}

impl Importer {
    /// The data file a plugin names at `key` (`value`, or Dev Proxy's `default` when unset),
    /// its `~appFolder` and `~dataFolder` expanded, resolved against the configuration's
    /// directory. `None` when there is no such file, with a note saying what the plugin then
    /// does (`then`): Dev Proxy warns that the file is not found and loads no data, and so
    /// does the import. With the file's path, the directory its `@file` bodies are relative to
    /// (relative to the configuration's directory, unless absolute).
    pub(super) fn data_file(
        &mut self,
        key: &str,
        value: Option<&str>,
        default: &str,
        then: &str,
    ) -> Option<(PathBuf, PathBuf)> {
        let name = value.unwrap_or(default);
        let rc = self.rc.clone();
        let expanded = match self.folders.expand(name) {
            Ok(expanded) => expanded,
            Err(unresolved) => {
                self.note(format!(
                    "{key} is `{name}`, but {}: {then}, as Dev Proxy does when a file is not \
                     found. Copy the file next to {rc} and name it in {key}.",
                    unresolved.why()
                ));
                return None;
            }
        };
        let path = self.dir.join(&expanded);
        if path.is_file() {
            if expanded != name && self.config.body_files_anywhere.is_none() {
                // The user named Dev Proxy's own folder: its `@file` bodies are there too.
                self.config.body_files_anywhere = Some(true);
                self.note(format!(
                    "{key} is in one of Dev Proxy's folders ({}), so the `@file` bodies of its \
                     files may be outside the folder of {rc}: the import sets \
                     bodyFilesAnywhere.",
                    path.display()
                ));
            }
            return Some((path, relative_dir(&expanded)));
        }
        let which = match value {
            Some(_) => format!("the file {} does not exist", path.display()),
            None => format!(
                "{key} is not set, and Dev Proxy's default {} does not exist",
                path.display()
            ),
        };
        self.note(format!(
            "{which}: {then}, as Dev Proxy does (it warns that the file is not found and loads \
             no data). Create the file, or set {key} to its path (relative to the directory of \
             {rc})."
        ));
        None
    }

    /// Where the `@file` bodies of a data file in `base` (as [`Data::base`]) are looked for.
    pub(super) fn body_files<'a>(&'a self, base: &'a Path) -> BodyFiles<'a> {
        BodyFiles {
            root: &self.dir,
            base,
            folders: &self.folders,
        }
    }

    /// The data file a plugin names (`setting`: its key, value and Dev Proxy's default; found
    /// as [`data_file`](Self::data_file) finds it, `then` saying what the plugin does without
    /// it), read, and its root as a `T`, its unknown keys noted; with the file as shown.
    pub(super) fn data<T: DeserializeOwned + JsonSchema>(
        &mut self,
        setting: (&str, Option<&str>, &str),
        then: &str,
    ) -> Option<Data<T>> {
        let (key, value, default) = setting;
        let (path, base) = self.data_file(key, value, default, then)?;
        let mut doc = match Doc::read(&path, path.display().to_string()) {
            Ok(doc) => doc,
            Err(errors) => {
                self.errors.extend(errors);
                return None;
            }
        };
        let mut unknown = Vec::new();
        doc.scan::<T>("", &mut unknown);
        self.unknown_keys(&doc.file, &unknown);
        match doc.typed("") {
            Ok(value) => Some(Data {
                file: doc.file,
                value,
                base,
            }),
            Err(errors) => {
                self.errors.extend(errors);
                None
            }
        }
    }
}

/// The directory of a data file named `name`, relative to the configuration's directory
/// (empty when it is the same).
fn relative_dir(name: &str) -> PathBuf {
    Path::new(name)
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default()
}

/// Where a response's `@file` body is looked for: the data file's directory (`base`,
/// relative to the configuration's directory `root`), with Dev Proxy's path tokens.
pub(super) struct BodyFiles<'a> {
    pub(super) root: &'a Path,
    pub(super) base: &'a Path,
    pub(super) folders: &'a Folders,
}
