//! The importer's state while it reads a Dev Proxy configuration, the notes and errors it
//! gathers, and the wording its notes share.

use std::path::PathBuf;

use super::folders::Folders;
use crate::error::{ConfigProblems, FileError};
use crate::file::{RawConfig, RawErrorRule, RawFaultStep, RawMocks};

/// A Dev Proxy configuration, read as a holdoff one.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct Imported {
    /// The configuration, with the rules of the errors and mocks files inlined.
    pub config: RawConfig,
    /// What holdoff does differently from Dev Proxy with this configuration, and what it
    /// ignored and why: one sentence or two each, for the user to read at start.
    pub notes: Vec<String>,
}

/// What the import has read and found so far: the holdoff configuration it builds, and the
/// notes and errors for the user.
pub(super) struct Importer {
    /// The Dev Proxy file, as shown.
    pub(super) rc: String,
    /// Its directory, the base of the paths in it.
    pub(super) dir: PathBuf,
    /// What `~appFolder` and `~dataFolder` stand for here.
    pub(super) folders: Folders,
    pub(super) notes: Vec<String>,
    pub(super) errors: Vec<FileError>,
    pub(super) config: RawConfig,
    /// holdoff's one watch list: the global list, then every plugin's own.
    pub(super) watched: Vec<String>,
    pub(super) error_sets: Vec<ErrorSet>,
    /// How many error plugins (GenericRandomErrorPlugin, GraphRandomErrorPlugin) are enabled:
    /// with more than one, each rule carries its plugin's rate.
    pub(super) error_plugins: usize,
    pub(super) mocks: Option<RawMocks>,
    /// The enabled plugins that can answer a request, in Dev Proxy's order (which decides
    /// which one answers), as (step, name).
    pub(super) order: Vec<(RawFaultStep, String)>,
    pub(super) retry_after_plugin: bool,
    /// What the command line changes.
    pub(super) options: super::ImportOptions,
    /// Whether a MockResponsePlugin read `options.mocks_file`.
    pub(super) mocks_file_read: bool,
    /// Whether a GraphRandomErrorPlugin is enabled: its errors fail Graph's JSON batches
    /// request by request.
    pub(super) graph_errors: bool,
}

/// An enabled plugin and its settings.
pub(super) struct Plugin<'a> {
    pub(super) name: &'a str,
    /// How notes name it: its name, and its section when the name is not unique.
    pub(super) label: String,
    /// The key path of its settings: its section, or its entry when it has none.
    pub(super) at: String,
    /// Its section's key, if it has one that exists.
    pub(super) section: Option<String>,
    /// The URLs it watches: its own list, else the global one.
    pub(super) urls: &'a [String],
    /// The step of `order` it answers in, as the plugin table says.
    pub(super) step: Option<RawFaultStep>,
}

impl Importer {
    pub(super) fn new(rc: String, dir: PathBuf) -> Importer {
        Importer {
            rc,
            dir,
            folders: Folders::from_env(),
            notes: Vec::new(),
            errors: Vec::new(),
            config: RawConfig::default(),
            watched: Vec::new(),
            error_sets: Vec::new(),
            error_plugins: 0,
            mocks: None,
            order: Vec::new(),
            retry_after_plugin: false,
            options: super::ImportOptions::default(),
            mocks_file_read: false,
            graph_errors: false,
        }
    }

    pub(super) fn note(&mut self, note: impl Into<String>) {
        self.notes.push(note.into());
    }

    /// Records that `plugin` answers requests, in its step, in Dev Proxy's order.
    pub(super) fn answers(&mut self, plugin: &Plugin<'_>) {
        if let Some(step) = plugin.step {
            self.order.push((step, plugin.name.to_owned()));
        }
    }

    pub(super) fn error(&mut self, path: &str, message: impl Into<String>) {
        let rc = self.rc.clone();
        self.errors.push(FileError::new(&rc, path, message));
    }

    pub(super) fn unknown_keys(&mut self, file: &str, unknown: &[String]) {
        if !unknown.is_empty() {
            self.note(format!(
                "{file}: not in Dev Proxy's schema, so ignored: {}.",
                backquoted(unknown)
            ));
        }
    }

    /// The `url` of a fault that takes one pattern: `None` when the plugin sees every watched
    /// URL, its one pattern when it has one, and otherwise `None` with a note.
    pub(super) fn single_url(&mut self, plugin: &Plugin<'_>, what: &str) -> Option<String> {
        if same_set(plugin.urls, &self.watched) {
            return None;
        }
        if let [url] = plugin.urls
            && !url.starts_with('!')
        {
            return Some(url.clone());
        }
        self.note(format!(
            "{}: Dev Proxy applied {what} only to {}; holdoff applies it to every watched URL.",
            plugin.label,
            backquoted(plugin.urls)
        ));
        None
    }

    /// A note when the plugin saw fewer URLs than holdoff watches (its rules' own URLs then
    /// decide alone).
    pub(super) fn scope_note(&mut self, plugin: &Plugin<'_>, what: &str) {
        if !same_set(plugin.urls, &self.watched) {
            self.note(format!(
                "{}: Dev Proxy applied {what} only to {}; holdoff applies them to every watched \
                 URL their own `url` matches.",
                plugin.label,
                backquoted(plugin.urls)
            ));
        }
    }

    pub(super) fn finish(self) -> Result<Imported, ConfigProblems> {
        if self.errors.is_empty() {
            Ok(Imported {
                config: self.config,
                notes: self.notes,
            })
        } else {
            Err(ConfigProblems(self.errors))
        }
    }
}

pub(super) fn same_set(a: &[String], b: &[String]) -> bool {
    a.iter().all(|x| b.contains(x)) && b.iter().all(|x| a.contains(x))
}

/// "1 response has" / "3 responses have".
pub(super) fn has_or_have(count: usize, noun: &str) -> String {
    if count == 1 {
        format!("1 {noun} has")
    } else {
        format!("{count} {noun}s have")
    }
}

/// `a`, `b`, `c`.
pub(super) fn backquoted<S: AsRef<str>>(items: &[S]) -> String {
    items
        .iter()
        .map(|item| format!("`{}`", item.as_ref()))
        .collect::<Vec<_>>()
        .join(", ")
}

/// One error plugin's rules (GenericRandomErrorPlugin's, or GraphRandomErrorPlugin's).
pub(super) struct ErrorSet {
    pub(super) rate: f64,
    pub(super) retry_after: u64,
    /// Whether a response has a bare `@dynamic` (which waits `retry_after`).
    pub(super) bare_dynamic: bool,
    pub(super) rules: Vec<RawErrorRule>,
}
