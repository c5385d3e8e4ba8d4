//! Microsoft Dev Proxy's configuration where a Dev Proxy user keeps it: finding
//! `devproxyrc.*` the way Dev Proxy does, telling a Dev Proxy file from a holdoff one, and the
//! one setting of it that holdoff's command line reads (`logLevel`).
//!
//! The import itself (plugins, errors and mocks files) is `holdoff_config::devproxy`'s;
//! this is only what the CLI needs before it chooses to import.

use std::io::Read as _;
use std::path::{Path, PathBuf};

use holdoff_config::compile::{self, Compiled, ConfigProblems};
use holdoff_config::devproxy;
use holdoff_config::load::Format;
use serde_json::{Map, Value};

/// The names Dev Proxy looks for its configuration under, in its order: in the current
/// directory, then in [`DIR`].
pub(crate) const FILE_NAMES: [&str; 4] = [
    "devproxyrc.jsonc",
    "devproxyrc.json",
    "devproxyrc.yaml",
    "devproxyrc.yml",
];

/// The folder Dev Proxy looks in after the current directory.
pub(crate) const DIR: &str = ".devproxy";

/// The first Dev Proxy configuration in `dir`, then in `dir/.devproxy`, as Dev Proxy finds it
/// when it is not given `--config-file`. (Dev Proxy then falls back to the one installed with
/// it, which holdoff has no counterpart of.)
pub(crate) fn find_in(dir: &Path) -> Option<PathBuf> {
    [dir.to_owned(), dir.join(DIR)]
        .iter()
        .flat_map(|dir| FILE_NAMES.iter().map(move |name| dir.join(name)))
        .find(|path| path.is_file())
}

/// Whether the file at `path` is Dev Proxy's rather than holdoff's: it is named like Dev
/// Proxy's (`devproxyrc.*`), or its top level has Dev Proxy's `plugins` list, or its
/// `$schema` is one of Dev Proxy's. A file that cannot be read or parsed is not: holdoff's
/// loader then says what is wrong with it.
pub(crate) fn is_devproxy(path: &Path) -> bool {
    is_devproxy_name(path)
        || top_level(path).is_some_and(|doc| {
            doc.contains_key("plugins")
                || doc
                    .get("$schema")
                    .and_then(Value::as_str)
                    .is_some_and(|schema| schema.contains("dev-proxy"))
        })
}

/// Whether the file at `path` is named as Dev Proxy names its config (`devproxyrc.*`).
pub(crate) fn is_devproxy_name(path: &Path) -> bool {
    path.file_name()
        .and_then(|name| name.to_str())
        .is_some_and(|name| name.to_ascii_lowercase().starts_with("devproxyrc"))
}

/// The file's `logLevel`, if it sets one (as written: `information`, `Debug`, …).
pub(crate) fn log_level(path: &Path) -> Option<String> {
    let doc = top_level(path)?;
    doc.iter()
        .find(|(key, _)| key.eq_ignore_ascii_case("logLevel"))
        .and_then(|(_, value)| value.as_str())
        .map(str::to_owned)
}

/// A Dev Proxy file imported and compiled, with the notes on what holdoff does differently.
pub(crate) struct Imported {
    pub(crate) compiled: Compiled,
    pub(crate) notes: Vec<String>,
}

/// Imports the Dev Proxy file at `path`, with Dev Proxy's command-line `options`, and compiles
/// the result, relative paths taken from the file's directory.
///
/// # Errors
///
/// Every problem of the import, or else of the compiled configuration.
pub(crate) fn import_and_compile(
    path: &Path,
    options: &devproxy::ImportOptions,
) -> Result<Imported, ConfigProblems> {
    let imported = devproxy::import_with(path, options)?;
    let base = path.parent().unwrap_or(Path::new("."));
    let compiled = compile::compile(&imported.config, &path.display().to_string(), base)?;
    Ok(Imported {
        compiled,
        notes: imported.notes,
    })
}

/// The top-level object of the file (JSON with comments, or YAML), if it reads as one.
fn top_level(path: &Path) -> Option<Map<String, Value>> {
    // Guarded: a FIFO or /dev/zero given as a config must not hang or fill the memory.
    let text = holdoff_config::load::read_text(path).ok()?;
    let format = Format::from_path(path).unwrap_or_else(|| Format::sniff(&text));
    let value: Value = match format {
        Format::Yaml if holdoff_config::load::yaml_too_deep(&text) => return None,
        Format::Yaml => serde_yaml_ng::from_str(&text).ok()?,
        _ => {
            let mut json = String::with_capacity(text.len());
            json_comments::StripComments::new(text.trim_start_matches('\u{feff}').as_bytes())
                .read_to_string(&mut json)
                .ok()?;
            serde_json::from_str(&json).ok()?
        }
    };
    match value {
        Value::Object(map) => Some(map),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use holdoff_testkit::TempDir;

    mod find_in {
        use super::*;

        #[test]
        fn looks_here_then_in_dot_devproxy_jsonc_first() {
            let dir = TempDir::new("find-devproxy");
            assert_eq!(find_in(dir.path()), None);
            std::fs::create_dir(dir.join(DIR)).unwrap();
            dir.write(".devproxy/devproxyrc.yaml", "plugins: []\n");
            assert_eq!(
                find_in(dir.path()),
                Some(dir.path().join(".devproxy/devproxyrc.yaml"))
            );
            dir.write("devproxyrc.json", "{}");
            assert_eq!(
                find_in(dir.path()),
                Some(dir.path().join("devproxyrc.json"))
            );
            dir.write("devproxyrc.jsonc", "{}");
            assert_eq!(
                find_in(dir.path()),
                Some(dir.path().join("devproxyrc.jsonc"))
            );
        }
    }

    mod is_devproxy {
        use super::*;

        #[test]
        fn by_its_name_its_plugins_or_its_schema() {
            let dir = TempDir::new("is-devproxy");
            let named = dir.write("devproxyrc.json", "not even JSON");
            let plugins = dir.write("proxy.json", "// mine\n{ \"plugins\": [] }");
            let yaml = dir.write("proxy.yaml", "plugins: []\n");
            let schema = dir.write(
                "schema.json",
                r#"{ "$schema": "https://example.test/dev-proxy/schemas/v1/rc.schema.json" }"#,
            );
            let holdoff = dir.write("holdoff.json", r#"{ "urlsToWatch": ["*"] }"#);
            let broken = dir.write("broken.json", "{");
            for yes in [&named, &plugins, &yaml, &schema] {
                assert!(is_devproxy(Path::new(yes)), "{yes}");
            }
            for no in [&holdoff, &broken] {
                assert!(!is_devproxy(Path::new(no)), "{no}");
            }
        }
    }

    mod log_level {
        use super::*;

        #[test]
        fn is_read_in_any_case_of_the_key() {
            let dir = TempDir::new("devproxy-log-level");
            let rc = dir.write(
                "devproxyrc.json",
                r#"{ "LogLevel": "Warning", "plugins": [] }"#,
            );
            assert_eq!(log_level(Path::new(&rc)).as_deref(), Some("Warning"));
            let rc = dir.write("devproxyrc.yaml", "plugins: []\n");
            assert_eq!(log_level(Path::new(&rc)), None);
        }
    }
}
