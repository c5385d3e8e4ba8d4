//! Microsoft Dev Proxy configuration, imported: a `devproxyrc.json` (or `.yaml`) and the
//! errors, mocks and custom-response files it names, read into holdoff's
//! [`RawConfig`](crate::file::RawConfig).
//!
//! What maps:
//!
//! | Dev Proxy | holdoff |
//! |---|---|
//! | `urlsToWatch` (and each plugin's own list) | `urlsToWatch` |
//! | AuthPlugin (API-key and OAuth2 modes) | one of `auth` |
//! | GenericRandomErrorPlugin and its errors file | `errors` (the rules inlined) |
//! | GraphRandomErrorPlugin | `errors`: a rule per method, with Graph's error bodies |
//! | RateLimitingPlugin (and its custom response file) | one of `rateLimits` |
//! | LanguageModelRateLimitingPlugin (and its custom response file) | one of `llmRateLimits` |
//! | RetryAfterPlugin | nothing: holdoff's judge is always on |
//! | LatencyPlugin | `latency` |
//! | MockResponsePlugin and its mocks file | `mocks` (the mocks inlined) |
//!
//! Dev Proxy's defaults are written out where they differ from holdoff's (a mock without a
//! method matches only GET, a rate limit costs 2 a request, …). Whatever holdoff does
//! differently, and every enabled plugin or setting it does not support, is explained in a
//! note; disabled plugins are skipped. The files are read leniently: a key that is not in Dev
//! Proxy's schemas is ignored with a note, and keys are matched in any case, as Dev Proxy
//! does.
//!
//! The files, by concern: `rc` reads the main file, its `urlsToWatch` and each plugin's
//! section, and hands each enabled plugin to its importer through the table in `plugins`
//! (name, importer, the step of `order` it answers in); `top_level` says what becomes of the
//! other top-level settings; `order` carries Dev Proxy's plugin order over. Each plugin has its
//! own file: `auth`, `errors` (GenericRandomErrorPlugin), `graph` (GraphRandomErrorPlugin),
//! `rate_limit`, `llm_rate_limit`, `retry_after`, `latency`, `mocks` and `crud_api`.
//! `importer` holds the importer's state and notes; `data` finds and reads the data files a
//! plugin names; `doc` reads any of Dev Proxy's files; `keys` knows the keys their schemas
//! allow, from the serde types that read them; `response` carries a response of an errors,
//! mocks or custom-response file over to holdoff's; `folders` expands Dev Proxy's path tokens.

mod auth;
mod crud_api;
mod data;
mod doc;
mod errors;
mod folders;
mod graph;
mod importer;
mod keys;
mod latency;
mod llm_mocks;
mod llm_rate_limit;
mod mock_request;
mod mocks;
mod order;
mod plugins;
mod rate_limit;
mod rc;
mod response;
mod retry_after;
mod top_level;

use std::path::Path;

use doc::Doc;
use importer::Importer;

use crate::error::ConfigProblems;

pub use importer::Imported;

/// Dev Proxy's data folder on this machine (`dev-proxy` under `$XDG_CONFIG_HOME` or
/// `~/.config` on Linux, `~/Library/Application Support` on macOS, `%LOCALAPPDATA%` on
/// Windows): where `~dataFolder` points and `config get` saves samples. `None` when the
/// environment names no home folder.
pub fn data_folder() -> Option<std::path::PathBuf> {
    folders::Folders::from_env().data
}

/// A path as Dev Proxy reads one given on its command line: `~dataFolder` and `~appFolder` (in
/// any case) replaced by Dev Proxy's folders, and a leading `~` by the home folder, so that a
/// path quoted in a shell (where the shell expands nothing) still works.
///
/// # Errors
///
/// A sentence saying which token this machine has no folder for, and why.
///
/// # Examples
///
/// ```
/// let path = holdoff_config::devproxy::expand_path("configs/devproxyrc.json")?;
/// assert_eq!(path, std::path::Path::new("configs/devproxyrc.json"));
/// # Ok::<(), String>(())
/// ```
pub fn expand_path(path: &str) -> Result<std::path::PathBuf, String> {
    folders::Folders::from_env().expand_command_line(path)
}

/// Reads the Dev Proxy configuration file at `path` (JSON with comments, or YAML when its
/// extension is `.yaml` or `.yml`) and the files it names, relative to its directory.
///
/// The result is compiled like a holdoff file, with the Dev Proxy file's directory as the base
/// of relative paths (`@file` bodies in the errors and mocks files are rewritten to be
/// relative to it). `~appFolder` and `~dataFolder` in a path stand for Dev Proxy's install
/// folder (where `devproxy` on `PATH` is) and its data folder, as in Dev Proxy. A data file
/// that does not exist is what Dev Proxy makes of it, with a note: a plugin without its errors
/// or mocks file answers nothing, an `@file` body whose file is missing is sent as its path.
///
/// # Errors
///
/// Every problem found, each naming its file and key path (and the line and column of a
/// syntax error): a file that cannot be read or parsed, a value of the wrong type, a value
/// holdoff cannot carry over (a rate above 100, a latency whose minimum is above its maximum,
/// …).
///
/// # Examples
///
/// ```no_run
/// use std::path::Path;
/// use holdoff_config::{compile::compile, devproxy};
///
/// let imported = devproxy::import(Path::new("devproxyrc.json"))?;
/// for note in &imported.notes {
///     eprintln!("note: {note}");
/// }
/// let compiled = compile(&imported.config, "devproxyrc.json", Path::new("."))?;
/// # Ok::<(), holdoff_config::compile::ConfigProblems>(())
/// ```
pub fn import(path: &Path) -> Result<Imported, ConfigProblems> {
    import_with(path, &ImportOptions::default())
}

/// What Dev Proxy's command line changes in the plugins it loads, for [`import_with`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ImportOptions {
    /// `--mocks-file`: MockResponsePlugin's mocks file, instead of the one its settings name.
    pub mocks_file: Option<std::path::PathBuf>,
}

impl ImportOptions {
    /// MockResponsePlugin reads `file` (Dev Proxy's `--mocks-file`). A relative path is taken
    /// from the configuration's directory, as Dev Proxy takes it; give an absolute one to
    /// name a file elsewhere.
    #[must_use]
    pub fn mocks_file(mut self, file: impl Into<std::path::PathBuf>) -> ImportOptions {
        self.mocks_file = Some(file.into());
        self
    }
}

/// [`import`], with Dev Proxy's command-line options applied to the plugins they change. An
/// option whose plugin the configuration does not enable changes nothing, and a note says so.
///
/// # Errors
///
/// As [`import`].
pub fn import_with(path: &Path, options: &ImportOptions) -> Result<Imported, ConfigProblems> {
    let shown = path.display().to_string();
    let dir = path.parent().unwrap_or(Path::new("")).to_owned();
    let mut importer = Importer::new(shown.clone(), dir);
    importer.options = options.clone();
    let mut doc = Doc::read(path, shown).map_err(ConfigProblems)?;
    importer.run(&mut doc);
    if let Some(file) = &options.mocks_file
        && !importer.mocks_file_read
    {
        importer.note(format!(
            "--mocks-file {}: the config enables no MockResponsePlugin, so the file is not \
             read (Dev Proxy would not take the option either)",
            file.display()
        ));
    }
    importer.finish()
}
