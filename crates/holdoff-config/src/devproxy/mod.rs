//! Microsoft Dev Proxy configuration, imported: a `devproxyrc.json` (or `.yaml`) and the
//! errors, mocks and custom-response files it names, read into holdoff's [`RawConfig`].
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
//! This file reads the main file and hands each enabled plugin to its own file: `errors`
//! (GenericRandomErrorPlugin), `graph` (GraphRandomErrorPlugin), `rate_limit`,
//! `llm_rate_limit`, `retry_after`, `latency` and `mocks`. `doc` reads any of Dev Proxy's files
//! and knows the keys its schemas allow; `response` carries a response of an errors, mocks or
//! custom-response file over to holdoff's; `folders` expands Dev Proxy's path tokens.

mod auth;
mod crud_api;
mod doc;
mod errors;
mod folders;
mod graph;
mod latency;
mod llm_rate_limit;
mod mocks;
mod rate_limit;
mod response;
mod retry_after;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use doc::{Doc, Leaf, Object, Shape, scan};
use errors::ErrorSet;
use folders::Folders;
use response::BodyFiles;

use crate::error::{ConfigProblems, FileError, index};
use crate::file::{RawConfig, RawFaultStep, RawMocks};

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
    let shown = path.display().to_string();
    let dir = path.parent().unwrap_or(Path::new("")).to_owned();
    let mut importer = Importer::new(shown.clone(), dir);
    let mut doc = Doc::read(path, shown).map_err(ConfigProblems)?;
    importer.run(&mut doc);
    importer.finish()
}

// Dev Proxy's main file, as serde reads it: lenient (unknown keys are found and noted apart),
// with Dev Proxy's required keys required.

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct DpConfig {
    #[serde(default)]
    urls_to_watch: Vec<String>,
    plugins: Vec<DpPlugin>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct DpPlugin {
    name: String,
    enabled: bool,
    config_section: Option<String>,
    #[serde(default)]
    urls_to_watch: Vec<String>,
}

/// Top-level settings that change nothing holdoff does (`record`, `asSystemProxy` and
/// `installCert` when false: holdoff does not do those unasked).
const NO_EFFECT_SETTINGS: [&str; 11] = [
    "apiPort",
    "asSystemProxy",
    "installCert",
    "labelMode",
    "languageModel",
    "newVersionNotification",
    "noFirstRun",
    "record",
    "showSkipMessages",
    "showTimestamps",
    "validateSchemas",
];

/// The keys of an entry of `plugins`.
const PLUGIN: Shape = Object(&[
    ("name", Leaf),
    ("enabled", Leaf),
    ("pluginPath", Leaf),
    ("configSection", Leaf),
    ("urlsToWatch", Leaf),
]);

struct Importer {
    /// The Dev Proxy file, as shown.
    rc: String,
    /// Its directory, the base of the paths in it.
    dir: PathBuf,
    /// What `~appFolder` and `~dataFolder` stand for here.
    folders: Folders,
    notes: Vec<String>,
    errors: Vec<FileError>,
    config: RawConfig,
    /// holdoff's one watch list: the global list, then every plugin's own.
    watched: Vec<String>,
    error_sets: Vec<ErrorSet>,
    /// How many error plugins (GenericRandomErrorPlugin, GraphRandomErrorPlugin) are enabled:
    /// with more than one, each rule carries its plugin's rate.
    error_plugins: usize,
    mocks: Option<RawMocks>,
    /// The enabled plugins that can answer a request, in Dev Proxy's order (which decides
    /// which one answers), as (step, name).
    order: Vec<(RawFaultStep, String)>,
    retry_after_plugin: bool,
}

/// A data file, read.
struct Data<T> {
    /// The file, as shown.
    file: String,
    value: T,
    /// The directory its `@file` bodies are relative to: relative to the configuration's
    /// directory, unless absolute.
    base: PathBuf,
}

/// An enabled plugin and its settings.
struct Plugin<'a> {
    name: &'a str,
    /// How notes name it: its name, and its section when the name is not unique.
    label: String,
    /// The key path of its settings: its section, or its entry when it has none.
    at: String,
    /// Its section's key, if it has one that exists.
    section: Option<String>,
    /// The URLs it watches: its own list, else the global one.
    urls: &'a [String],
}

impl Importer {
    fn new(rc: String, dir: PathBuf) -> Importer {
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
        }
    }

    fn note(&mut self, note: impl Into<String>) {
        self.notes.push(note.into());
    }

    fn error(&mut self, path: &str, message: impl Into<String>) {
        let rc = self.rc.clone();
        self.errors.push(FileError::new(&rc, path, message));
    }

    fn unknown_keys(&mut self, file: &str, unknown: &[String]) {
        if !unknown.is_empty() {
            self.note(format!(
                "{file}: not in Dev Proxy's schema, so ignored: {}.",
                backquoted(unknown)
            ));
        }
    }

    fn run(&mut self, doc: &mut Doc) {
        let Value::Object(map) = &mut doc.value else {
            self.error(
                "",
                "expected an object with `plugins` and `urlsToWatch`: this is not a Dev Proxy \
                 configuration file",
            );
            return;
        };
        for known in ["plugins", "urlsToWatch"] {
            let other = map
                .keys()
                .find(|key| *key != known && key.eq_ignore_ascii_case(known))
                .cloned();
            if let Some(other) = other.filter(|_| !map.contains_key(known))
                && let Some(value) = map.remove(&other)
            {
                map.insert(known.to_owned(), value);
                doc.changed = true;
            }
        }
        if doc.value.get("plugins").is_none() {
            // Dev Proxy's data files are sometimes named like its configuration (the gallery's
            // `microsoft-graph-connector` keeps its mocks in a devproxyrc.json).
            let message = match ["mocks", "errors"]
                .iter()
                .find(|key| doc.value.get(**key).is_some())
            {
                Some(&"mocks") => {
                    "there is no `plugins` list: this is a MockResponsePlugin mocks file, not a \
                     configuration; name it in a MockResponsePlugin's `mocksFile`"
                }
                Some(_) => {
                    "there is no `plugins` list: this is a GenericRandomErrorPlugin errors file, \
                     not a configuration; name it in a GenericRandomErrorPlugin's `errorsFile`"
                }
                None => {
                    "there is no `plugins` list: a Dev Proxy configuration file names the \
                     plugins it runs there"
                }
            };
            self.error("", message);
            return;
        }
        let mut unknown = Vec::new();
        if let Some(Value::Array(plugins)) = doc.value.get_mut("plugins") {
            for (i, plugin) in plugins.iter_mut().enumerate() {
                doc.changed |= scan(plugin, PLUGIN, &index("plugins", i), &mut unknown);
            }
        }
        let rc: DpConfig = match doc.typed("") {
            Ok(rc) => rc,
            Err(errors) => {
                self.errors.extend(errors);
                return;
            }
        };

        self.watch_list(&rc);
        self.error_plugins = rc
            .plugins
            .iter()
            .filter(|plugin| {
                plugin.enabled
                    && matches!(
                        plugin.name.as_str(),
                        "GenericRandomErrorPlugin" | "GraphRandomErrorPlugin"
                    )
            })
            .count();

        for (i, plugin) in rc.plugins.iter().enumerate() {
            if !plugin.enabled {
                continue;
            }
            let label = label(&rc.plugins, i);
            let Some(settings) = self.plugin(doc, i, plugin, &rc.urls_to_watch, label) else {
                continue;
            };
            match plugin.name.as_str() {
                "AuthPlugin" => self.auth_plugin(doc, &settings, &mut unknown),
                "GenericRandomErrorPlugin" => self.errors_plugin(doc, &settings, &mut unknown),
                "GraphRandomErrorPlugin" => {
                    self.graph_errors_plugin(doc, &settings, &mut unknown);
                }
                "RateLimitingPlugin" => self.rate_limiting_plugin(doc, &settings, &mut unknown),
                "RetryAfterPlugin" => self.retry_after_plugin(),
                "LatencyPlugin" => self.latency_plugin(doc, &settings, &mut unknown),
                "LanguageModelRateLimitingPlugin" => {
                    self.llm_rate_limiting_plugin(doc, &settings, &mut unknown)
                }
                "MockResponsePlugin" => self.mocks_plugin(doc, &settings, &mut unknown),
                "CrudApiPlugin" => self.crud_api_plugin(doc, &settings, &mut unknown),
                name => {
                    let reason = unsupported(name);
                    let note = match &settings.section {
                        Some(section) => format!(
                            "{name} is not supported by holdoff; its section `{section}` was \
                             ignored: {reason}."
                        ),
                        None => format!("{name} is not supported by holdoff: {reason}."),
                    };
                    self.note(note);
                }
            }
        }
        self.finish_errors();
        if let Some(mocks) = self.mocks.take() {
            self.config.mocks = Some(mocks);
        }
        let rc_file = self.rc.clone();
        self.unknown_keys(&rc_file, &unknown);
        self.top_level_settings(doc, &rc);
        self.judge_notes();
        self.carry_order();
    }

    /// holdoff's one watch list: Dev Proxy's, then each enabled plugin's own (Dev Proxy
    /// intercepts those too).
    fn watch_list(&mut self, rc: &DpConfig) {
        let mut watched: Vec<String> = Vec::new();
        let own_lists = rc
            .plugins
            .iter()
            .filter(|plugin| plugin.enabled && !plugin.urls_to_watch.is_empty());
        for url in rc
            .urls_to_watch
            .iter()
            .chain(own_lists.flat_map(|plugin| &plugin.urls_to_watch))
        {
            if !watched.contains(url) {
                watched.push(url.clone());
            }
        }
        for (i, plugin) in rc.plugins.iter().enumerate() {
            if plugin.enabled
                && !plugin.urls_to_watch.is_empty()
                && plugin.urls_to_watch != rc.urls_to_watch
            {
                self.note(format!(
                    "{} watches its own URLs ({}); holdoff has one watch list, so they were \
                     added to urlsToWatch.",
                    label(&rc.plugins, i),
                    backquoted(&plugin.urls_to_watch)
                ));
            }
        }
        if watched.is_empty() {
            self.note(
                "There is no urlsToWatch: holdoff watches nothing until you pass \
                 --urls-to-watch (or add urlsToWatch to the file).",
            );
        } else {
            self.config.urls_to_watch = Some(watched.clone());
        }
        self.watched = watched;
    }

    /// The settings of the enabled plugin `plugins[plugin_index]`, or `None` (with an error)
    /// when its section is not an object.
    fn plugin<'a>(
        &mut self,
        doc: &Doc,
        plugin_index: usize,
        plugin: &'a DpPlugin,
        global: &'a [String],
        label: String,
    ) -> Option<Plugin<'a>> {
        let urls = if plugin.urls_to_watch.is_empty() {
            global
        } else {
            &plugin.urls_to_watch
        };
        let entry = index("plugins", plugin_index);
        let Some(section) = plugin.config_section.as_deref() else {
            return Some(Plugin {
                name: &plugin.name,
                label,
                at: entry,
                section: None,
                urls,
            });
        };
        // Dev Proxy finds a section whatever the case of its name.
        let key = doc.value.as_object().and_then(|map| {
            map.keys()
                .find(|key| *key == section)
                .or_else(|| map.keys().find(|key| key.eq_ignore_ascii_case(section)))
                .cloned()
        });
        match key.as_deref().and_then(|key| doc.value.get(key)) {
            Some(Value::Object(_)) => Some(Plugin {
                name: &plugin.name,
                label,
                at: key.clone().unwrap_or_default(),
                section: key,
                urls,
            }),
            Some(_) => {
                self.error(
                    key.as_deref().unwrap_or(section),
                    format!(
                        "expected an object: this is the section of {} (its configSection)",
                        plugin.name
                    ),
                );
                None
            }
            None => {
                if is_mapped(&plugin.name) {
                    self.note(format!(
                        "{label}: its configSection `{section}` is not in the file, so Dev \
                         Proxy's defaults were used."
                    ));
                }
                Some(Plugin {
                    name: &plugin.name,
                    label,
                    at: entry,
                    section: None,
                    urls,
                })
            }
        }
    }

    /// The plugin's settings as a `T` (Dev Proxy's defaults when it has no section).
    fn settings<T: DeserializeOwned + Default>(
        &mut self,
        doc: &mut Doc,
        plugin: &Plugin<'_>,
        shape: Shape,
        unknown: &mut Vec<String>,
    ) -> Option<T> {
        let Some(section) = plugin.section.as_deref() else {
            return Some(T::default());
        };
        doc.scan(section, shape, unknown);
        match doc.typed(section) {
            Ok(settings) => Some(settings),
            Err(errors) => {
                self.errors.extend(errors);
                None
            }
        }
    }

    /// The data file a plugin names at `key` (`value`, or Dev Proxy's `default` when unset),
    /// its `~appFolder` and `~dataFolder` expanded, resolved against the configuration's
    /// directory. `None` when there is no such file, with a note saying what the plugin then
    /// does (`then`): Dev Proxy warns that the file is not found and loads no data, and so
    /// does the import. With the file's path, the directory its `@file` bodies are relative to
    /// (relative to the configuration's directory, unless absolute).
    fn data_file(
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
    fn body_files<'a>(&'a self, base: &'a Path) -> BodyFiles<'a> {
        BodyFiles {
            root: &self.dir,
            base,
            folders: &self.folders,
        }
    }

    /// The data file a plugin names (`setting`: its key, value and Dev Proxy's default; found
    /// as [`data_file`](Self::data_file) finds it, `then` saying what the plugin does without
    /// it), read, and its root as a `T`, its unknown keys noted; with the file as shown.
    fn data<T: DeserializeOwned>(
        &mut self,
        setting: (&str, Option<&str>, &str),
        shape: Shape,
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
        doc.scan("", shape, &mut unknown);
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

    /// The `url` of a fault that takes one pattern: `None` when the plugin sees every watched
    /// URL, its one pattern when it has one, and otherwise `None` with a note.
    fn single_url(&mut self, plugin: &Plugin<'_>, what: &str) -> Option<String> {
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
    fn scope_note(&mut self, plugin: &Plugin<'_>, what: &str) {
        if !same_set(plugin.urls, &self.watched) {
            self.note(format!(
                "{}: Dev Proxy applied {what} only to {}; holdoff applies them to every watched \
                 URL their own `url` matches.",
                plugin.label,
                backquoted(plugin.urls)
            ));
        }
    }

    fn top_level_settings(&mut self, doc: &Doc, rc: &DpConfig) {
        let Value::Object(map) = &doc.value else {
            return;
        };
        let sections: BTreeSet<String> = rc
            .plugins
            .iter()
            .filter_map(|plugin| plugin.config_section.as_deref())
            .map(str::to_ascii_lowercase)
            .collect();
        let (mut no_effect, mut unknown) = (Vec::new(), Vec::new());
        for (key, value) in map {
            let key = key.as_str();
            let shown = value
                .as_str()
                .map_or_else(|| value.to_string(), str::to_owned);
            if matches!(key, "$schema" | "definitions" | "plugins" | "urlsToWatch")
                || sections.contains(&key.to_ascii_lowercase())
            {
                continue;
            }
            match key {
                "port" if value.as_u64() == Some(u64::from(holdoff_proxy::DEFAULT_PORT)) => {}
                "port" => self.note(format!(
                    "port {shown}: holdoff's configuration has no port; pass --port {shown}."
                )),
                "ipAddress" => self.note(format!(
                    "ipAddress {shown}: holdoff's configuration has no address; pass \
                     --ip-address {shown} (anything but loopback needs --proxy-auth)."
                )),
                "timeout" => self.note(format!(
                    "timeout {shown}: holdoff's configuration has no timeout; pass \
                     --upstream-timeout {shown}s."
                )),
                "rate" => self.note(format!(
                    "The top-level rate ({shown}) is not read by current Dev Proxy versions \
                     (GenericRandomErrorPlugin's section has the rate), and was ignored; pass \
                     --failure-rate {shown} if you meant it."
                )),
                "watchPids" | "watchProcessNames" => self.note(format!(
                    "{key} {shown}: Dev Proxy handled only these processes' traffic; a holdoff \
                     file has no such setting: pass --{} {} (Linux).",
                    if key == "watchPids" {
                        "watch-pids"
                    } else {
                        "watch-process-names"
                    },
                    words(value)
                )),
                "logLevel" => self.note(format!(
                    "logLevel {shown}: holdoff proxy and run log at it when they read this file; \
                     a holdoff file has no log level: pass --log-level {shown}."
                )),
                "record" | "asSystemProxy" | "installCert" if value.as_bool() == Some(true) => self
                    .note(match key {
                        "record" => {
                            "record: holdoff records every request from the start; \
                                     --record is taken and changes nothing."
                        }
                        "asSystemProxy" => {
                            "asSystemProxy: holdoff does not change system \
                                            settings; pass --as-system-proxy for what to set."
                        }
                        _ => {
                            "installCert: pass --install-cert (or run `holdoff ca trust`) to \
                              trust holdoff's CA system-wide."
                        }
                    }),
                "filterByHeaders" => self.note(
                    "filterByHeaders: Dev Proxy handled only requests with these headers; \
                     holdoff handles every watched request.",
                ),
                key if NO_EFFECT_SETTINGS.contains(&key) => no_effect.push(key.to_owned()),
                key => unknown.push(key.to_owned()),
            }
        }
        if !no_effect.is_empty() {
            self.note(format!(
                "Settings without a counterpart in holdoff were ignored: {}.",
                backquoted(&no_effect)
            ));
        }
        if !unknown.is_empty() {
            self.note(format!(
                "{}: neither a Dev Proxy setting holdoff knows nor a plugin's configSection, so \
                 ignored: {}.",
                self.rc,
                backquoted(&unknown)
            ));
        }
    }

    /// Dev Proxy's plugin order as holdoff's `order`: each step where its first plugin is
    /// listed. Written whenever more than one kind of plugin can answer, so that the file
    /// says it; a note when a step's plugins are not listed together, which one list cannot
    /// say.
    fn carry_order(&mut self) {
        let mut steps: Vec<RawFaultStep> = Vec::new();
        for (step, _) in &self.order {
            if !steps.contains(step) {
                steps.push(*step);
            }
        }
        if steps.len() < 2 {
            return;
        }
        self.config.order = Some(steps.clone());
        let runs = self
            .order
            .windows(2)
            .filter(|pair| pair[0].0 != pair[1].0)
            .count()
            + 1;
        if runs > steps.len() {
            let listed: Vec<&str> = self.order.iter().map(|(_, name)| name.as_str()).collect();
            let keys: Vec<&str> = steps.iter().map(|step| step.key()).collect();
            self.note(format!(
                "Dev Proxy runs its plugins in the order listed ({}); holdoff runs each kind of \
                 fault in one place, so the order became {}: a plugin listed apart from the \
                 first of its kind now runs with it.",
                listed.join(", "),
                backquoted(&keys)
            ));
        }
    }

    fn finish(self) -> Result<Imported, ConfigProblems> {
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

/// How notes name `plugins[position]`: its name, with its section (or entry) when another
/// enabled plugin has the same name.
fn label(plugins: &[DpPlugin], position: usize) -> String {
    let entry = index("plugins", position);
    let Some(plugin) = plugins.get(position) else {
        return entry;
    };
    let twins = plugins
        .iter()
        .filter(|other| other.enabled && other.name == plugin.name)
        .count();
    match &plugin.config_section {
        _ if twins <= 1 => plugin.name.clone(),
        Some(section) => format!("{} `{section}`", plugin.name),
        None => format!("{} ({entry})", plugin.name),
    }
}

/// Whether the import maps the plugin (and so reads its section).
fn is_mapped(name: &str) -> bool {
    matches!(
        name,
        "AuthPlugin"
            | "GenericRandomErrorPlugin"
            | "GraphRandomErrorPlugin"
            | "RateLimitingPlugin"
            | "LanguageModelRateLimitingPlugin"
            | "LatencyPlugin"
            | "MockResponsePlugin"
            | "CrudApiPlugin"
            | "RetryAfterPlugin"
    )
}

/// Why holdoff has no counterpart to the plugin.
fn unsupported(name: &str) -> &'static str {
    match name {
        "LanguageModelFailurePlugin" => {
            "holdoff does not make language-model answers go wrong, it fails requests"
        }
        "GraphMockResponsePlugin" | "EntraMockResponsePlugin" | "OpenAIMockResponsePlugin" => {
            "it builds its responses in code; MockResponsePlugin's mocks can stand in"
        }
        name if name.ends_with("GuidancePlugin") => {
            "it only logs advice about the requests it sees, and changes no traffic"
        }
        name if [
            "Generator",
            "Reporter",
            "Summary",
            "Telemetry",
            "DevTools",
            "Discovery",
            "Permissions",
            "ApiCenter",
            "Debugging",
        ]
        .iter()
        .any(|part| name.contains(part)) =>
        {
            "it observes or reports traffic, and injects no faults"
        }
        _ => "holdoff has no equivalent",
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

fn same_set(a: &[String], b: &[String]) -> bool {
    a.iter().all(|x| b.contains(x)) && b.iter().all(|x| a.contains(x))
}

/// "1 response has" / "3 responses have".
fn has_or_have(count: usize, noun: &str) -> String {
    if count == 1 {
        format!("1 {noun} has")
    } else {
        format!("{count} {noun}s have")
    }
}

/// `a`, `b`, `c`.
/// A list's items (or a single value) as command-line words: `msedge 1234`.
fn words(value: &Value) -> String {
    let word = |item: &Value| {
        item.as_str()
            .map_or_else(|| item.to_string(), str::to_owned)
    };
    match value {
        Value::Array(items) => items.iter().map(word).collect::<Vec<_>>().join(" "),
        other => word(other),
    }
}

fn backquoted<S: AsRef<str>>(items: &[S]) -> String {
    items
        .iter()
        .map(|item| format!("`{}`", item.as_ref()))
        .collect::<Vec<_>>()
        .join(", ")
}
