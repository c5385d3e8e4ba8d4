//! The files a configuration names: errors and mocks files, read and parsed with their own
//! origin, and `@file` bodies, which must stay under the configuration's folder. Each is read
//! whole, within a size limit, and listed so the caller can watch it.

use std::fs;
use std::path::Path;

use serde::de::DeserializeOwned;

use super::{Compiler, WrittenIn};
use crate::load;

pub use crate::files::MAX_DATA_FILE_BYTES;
use crate::files::read_regular;

impl Compiler {
    /// Lists `path` among the data files read, once, as an absolute path.
    pub(super) fn read(&mut self, path: &Path) {
        let absolute = std::path::absolute(path).unwrap_or_else(|_| path.to_owned());
        if !self.data_files.contains(&absolute) {
            self.data_files.push(absolute);
        }
    }

    /// Reads and parses the data file `name` (given at `path`, relative to the naming file's
    /// directory) and hands it to `each` with its own origin; reports why not otherwise.
    pub(super) fn data_file<D: DeserializeOwned>(
        &mut self,
        at: WrittenIn<'_>,
        path: &str,
        name: &str,
        what: &str,
        each: impl FnOnce(&mut Compiler, WrittenIn<'_>, D),
    ) {
        if name.trim().is_empty() {
            self.error(
                at,
                path,
                format!("the {what} file name is empty: give a path relative to this file"),
            );
            return;
        }
        let file = at.dir.join(name);
        let text = match read_data_file(&file, what).and_then(|bytes| {
            String::from_utf8(bytes).map_err(|_| {
                format!(
                    "cannot read the {what} file {}: it is not UTF-8 text",
                    file.display()
                )
            })
        }) {
            Ok(text) => text,
            Err(message) => {
                self.error(at, path, message);
                return;
            }
        };
        self.read(&file);
        let display = file.display().to_string();
        match load::parse_for_path::<D>(&text, &file, &display) {
            Ok(data) => {
                let inner = WrittenIn {
                    file: &display,
                    dir: file.parent().unwrap_or(Path::new("")),
                    root: at.root,
                };
                each(self, inner, data);
            }
            Err(errors) => self.errors.extend(errors.0),
        }
    }
}

/// Reads the body file `file`, which must resolve (symbolic links followed) to a place under
/// `root` when one is given; the error is a message fit after the key path.
pub(super) fn read_body_file(file: &Path, root: Option<&Path>) -> Result<Vec<u8>, String> {
    let cannot =
        |err: std::io::Error| format!("cannot read the body file {}: {err}", file.display());
    let resolved = fs::canonicalize(file).map_err(cannot)?;
    if let Some(root) = root {
        // `compile(…, Path::new(""))`: relative to the current directory.
        let root = if root.as_os_str().is_empty() {
            Path::new(".")
        } else {
            root
        };
        let root = fs::canonicalize(root).map_err(|err| {
            format!(
                "cannot find the configuration's folder {} that body files are read from: {err}",
                root.display()
            )
        })?;
        if !resolved.starts_with(&root) {
            let resolves = if resolved == file {
                String::new()
            } else {
                format!(" resolves to {}, which", resolved.display())
            };
            return Err(format!(
                "the body file {}{resolves} is outside the configuration's folder {}: body \
                 files are read only from under it (after symbolic links are followed); copy \
                 the file there, or set \"bodyFilesAnywhere\": true at the top of the \
                 configuration to allow any folder",
                file.display(),
                root.display()
            ));
        }
    }
    // The resolved path: what was checked is what is opened.
    read_regular(&resolved, &format!("the body file {}", file.display()))
}

/// Reads the data file `file` whole; `what` (`errors`, `mocks`) names it in the error.
fn read_data_file(file: &Path, what: &str) -> Result<Vec<u8>, String> {
    read_regular(file, &format!("the {what} file {}", file.display()))
}

#[cfg(test)]
mod tests {
    use super::super::response::JSON;
    use super::super::tests::{FIXTURES, compiled, header, literal, respond};
    use super::*;
    use crate::compile::compile;
    use crate::load::{Format, parse};
    use http::Method;

    mod compile {
        use super::*;

        #[test]
        fn reads_body_files_and_data_files_and_lists_them() {
            let compiled = compiled(
                r#"{"errors": {"errors": [{"request": {"url": "*"},
                        "responses": [{"statusCode": 500, "body": "@body.json"}]}]},
                    "mocks": {"file": "mocks.yaml", "blockUnmocked": true}}"#,
            );
            let response = respond(&compiled.plan.errors[0].outcomes[0]);
            assert_eq!(response.body, "{\"error\": \"from a file\"}\n");
            assert_eq!(header(response, "content-type"), Some(&literal(JSON)));
            let plan = &compiled.plan;
            assert!(plan.block_unmocked);
            let [mock] = plan.mocks.as_slice() else {
                panic!("one mock from the file")
            };
            assert_eq!(mock.request.method, Some(Method::GET));
            assert_eq!(mock.nth, None);
            assert_eq!(respond(&mock.response).body, response.body);
            let names: Vec<_> = compiled
                .data_files
                .iter()
                .map(|path| {
                    assert!(path.is_absolute(), "{}", path.display());
                    path.file_name().and_then(|n| n.to_str()).expect("a name")
                })
                .collect();
            assert_eq!(names, ["body.json", "mocks.yaml"]);
        }

        #[test]
        fn reports_only_the_bad_rules_of_a_data_file() {
            let raw = parse(
                r#"{"errors": {"file": "errors-invalid.json"}}"#,
                Format::Json,
                "holdoff.json",
            )
            .expect("parses");
            let errors = compile(&raw, "holdoff.json", Path::new(FIXTURES)).expect_err("invalid");
            assert_eq!(errors.0.len(), 3, "{errors}");
            for error in &errors.0 {
                assert_eq!(error.file, "tests/fixtures/config/errors-invalid.json");
                assert!(error.path.starts_with("errors[1]."), "{errors}");
            }
        }
    }
}
