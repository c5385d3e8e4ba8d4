//! Microsoft Dev Proxy configuration, imported: a `devproxyrc.json` (or `.yaml`) and the
//! errors, mocks and custom-response files it names, read into holdoff's [`RawConfig`].
//!
//! What maps:
//!
//! | Dev Proxy | holdoff |
//! |---|---|
//! | `urlsToWatch` (and each plugin's own list) | `urlsToWatch` |
//! | GenericRandomErrorPlugin and its errors file | `errors` (the rules inlined) |
//! | RateLimitingPlugin (and its custom response file) | one of `rateLimits` |
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

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::error::{ConfigProblems, FileError, index, join, key};
use super::file::{
    RawAlgorithm, RawConfig, RawErrorRule, RawErrors, RawHeader, RawHeaderStyle, RawHeaders,
    RawLatency, RawMock, RawMocks, RawRateLimit, RawRequestMatch, RawResetFormat, RawResponse,
    RawScope,
};
use super::jsonc;
use super::load::{Format, parse_as};

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
/// relative to it).
///
/// # Errors
///
/// Every problem found, each naming its file and key path (and the line and column of a
/// syntax error): a file that cannot be read or parsed, a value of the wrong type, a missing
/// errors or mocks file, a value holdoff cannot carry over (a rate above 100, a latency whose
/// minimum is above its maximum, …).
///
/// # Examples
///
/// ```no_run
/// use std::path::Path;
/// use holdoff_proxy::config::{compile::compile, devproxy};
///
/// let imported = devproxy::import(Path::new("devproxyrc.json"))?;
/// for note in &imported.notes {
///     eprintln!("note: {note}");
/// }
/// let compiled = compile(&imported.config, "devproxyrc.json", Path::new("."))?;
/// # Ok::<(), holdoff_proxy::config::compile::ConfigProblems>(())
/// ```
pub fn import(path: &Path) -> Result<Imported, ConfigProblems> {
    let shown = path.display().to_string();
    let dir = path.parent().unwrap_or(Path::new("")).to_owned();
    let mut importer = Importer::new(shown.clone(), dir);
    let mut doc = Doc::read(path, shown).map_err(ConfigProblems)?;
    importer.run(&mut doc);
    importer.finish()
}

// ---------------------------------------------------------------------------------------------
// Dev Proxy's files, as serde reads them: lenient (unknown keys are found and noted apart),
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

#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct DpErrorsPlugin {
    errors_file: Option<String>,
    rate: Option<f64>,
    retry_after_in_seconds: Option<u64>,
}

#[derive(Deserialize)]
struct DpErrorsFile {
    errors: Vec<DpErrorRule>,
}

#[derive(Deserialize)]
struct DpErrorRule {
    request: DpRequest,
    responses: Vec<DpResponse>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct DpRequest {
    url: String,
    method: Option<String>,
    body_fragment: Option<String>,
    nth: Option<u64>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct DpResponse {
    status_code: Option<u16>,
    headers: Option<Vec<DpHeader>>,
    body: Option<Value>,
}

#[derive(Deserialize)]
struct DpHeader {
    name: String,
    value: String,
}

#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct DpRateLimitPlugin {
    header_limit: Option<String>,
    header_remaining: Option<String>,
    header_reset: Option<String>,
    header_retry_after: Option<String>,
    cost_per_request: Option<u64>,
    reset_time_window_seconds: Option<u64>,
    warning_threshold_percent: Option<u64>,
    rate_limit: Option<u64>,
    when_limit_exceeded: Option<String>,
    reset_format: Option<String>,
    custom_response_file: Option<String>,
}

#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct DpLatencyPlugin {
    min_ms: Option<u64>,
    max_ms: Option<u64>,
}

#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct DpMocksPlugin {
    mocks_file: Option<String>,
    block_unmocked_requests: Option<bool>,
}

#[derive(Deserialize)]
struct DpMocksFile {
    mocks: Vec<DpMock>,
}

#[derive(Deserialize)]
struct DpMock {
    request: DpRequest,
    response: DpResponse,
}

// Dev Proxy's defaults, from its plugins' configuration classes.

/// GenericRandomErrorPlugin's `errorsFile`.
const DEFAULT_ERRORS_FILE: &str = "errors.json";
/// GenericRandomErrorPlugin's `rate`.
const DEFAULT_RATE: f64 = 50.0;
/// GenericRandomErrorPlugin's `retryAfterInSeconds`.
const DEFAULT_RETRY_AFTER: u64 = 5;
/// The status of an error response without one.
const DEFAULT_ERROR_STATUS: u16 = 400;
/// RateLimitingPlugin's `rateLimit`, `resetTimeWindowSeconds`, `costPerRequest`,
/// `warningThresholdPercent` and `customResponseFile`.
const DEFAULT_RATE_LIMIT: u64 = 120;
const DEFAULT_WINDOW: u64 = 60;
const DEFAULT_COST: u64 = 2;
const DEFAULT_WARNING_PERCENT: u64 = 80;
const DEFAULT_CUSTOM_RESPONSE_FILE: &str = "rate-limit-response.json";
/// RateLimitingPlugin's header names.
const DRAFT_HEADERS: [&str; 3] = ["RateLimit-Limit", "RateLimit-Remaining", "RateLimit-Reset"];
const X_HEADERS: [&str; 3] = [
    "X-RateLimit-Limit",
    "X-RateLimit-Remaining",
    "X-RateLimit-Reset",
];
/// The status of a mock or custom response without one.
const DEFAULT_OK_STATUS: u16 = 200;
/// LatencyPlugin's `maxMs` (its `minMs` is 0).
const DEFAULT_MAX_MS: u64 = 5000;
/// MockResponsePlugin's `mocksFile`.
const DEFAULT_MOCKS_FILE: &str = "mocks.json";

/// Top-level settings that change nothing holdoff does.
const NO_EFFECT_SETTINGS: [&str; 12] = [
    "apiPort",
    "asSystemProxy",
    "installCert",
    "labelMode",
    "languageModel",
    "logLevel",
    "newVersionNotification",
    "noFirstRun",
    "record",
    "showSkipMessages",
    "showTimestamps",
    "validateSchemas",
];

// ---------------------------------------------------------------------------------------------
// The keys Dev Proxy's schemas allow, level by level: what is not here is noted as ignored,
// and a key spelled in another case is respelled (Dev Proxy reads keys in any case).

#[derive(Clone, Copy)]
enum Shape {
    Object(&'static [(&'static str, Shape)]),
    List(&'static Shape),
    /// Not looked into (a body, a string, a number).
    Leaf,
}

use Shape::{Leaf, List, Object};

const PLUGIN: Shape = Object(&[
    ("name", Leaf),
    ("enabled", Leaf),
    ("pluginPath", Leaf),
    ("configSection", Leaf),
    ("urlsToWatch", Leaf),
]);
const HEADER: Shape = Object(&[("name", Leaf), ("value", Leaf)]);
const RESPONSE: Shape = Object(&[
    ("statusCode", Leaf),
    ("headers", List(&HEADER)),
    ("body", Leaf),
]);
const ERROR_REQUEST: Shape = Object(&[("url", Leaf), ("method", Leaf), ("bodyFragment", Leaf)]);
const ERRORS_FILE: Shape = Object(&[
    ("$schema", Leaf),
    ("definitions", Leaf),
    (
        "errors",
        List(&Object(&[
            ("request", ERROR_REQUEST),
            ("responses", List(&RESPONSE)),
        ])),
    ),
]);
const MOCK_REQUEST: Shape = Object(&[
    ("url", Leaf),
    ("method", Leaf),
    ("nth", Leaf),
    ("bodyFragment", Leaf),
]);
const MOCKS_FILE: Shape = Object(&[
    ("$schema", Leaf),
    ("definitions", Leaf),
    (
        "mocks",
        List(&Object(&[
            ("request", MOCK_REQUEST),
            ("response", RESPONSE),
        ])),
    ),
]);
const CUSTOM_RESPONSE_FILE: Shape = Object(&[
    ("$schema", Leaf),
    ("definitions", Leaf),
    ("statusCode", Leaf),
    ("headers", List(&HEADER)),
    ("body", Leaf),
]);
const ERRORS_SECTION: Shape = Object(&[
    ("$schema", Leaf),
    ("definitions", Leaf),
    ("errorsFile", Leaf),
    ("rate", Leaf),
    ("retryAfterInSeconds", Leaf),
]);
const RATE_LIMIT_SECTION: Shape = Object(&[
    ("$schema", Leaf),
    ("definitions", Leaf),
    ("headerLimit", Leaf),
    ("headerRemaining", Leaf),
    ("headerReset", Leaf),
    ("headerRetryAfter", Leaf),
    ("costPerRequest", Leaf),
    ("resetTimeWindowSeconds", Leaf),
    ("warningThresholdPercent", Leaf),
    ("rateLimit", Leaf),
    ("whenLimitExceeded", Leaf),
    ("resetFormat", Leaf),
    ("customResponseFile", Leaf),
]);
const LATENCY_SECTION: Shape = Object(&[
    ("$schema", Leaf),
    ("definitions", Leaf),
    ("minMs", Leaf),
    ("maxMs", Leaf),
]);
const MOCKS_SECTION: Shape = Object(&[
    ("$schema", Leaf),
    ("definitions", Leaf),
    ("mocksFile", Leaf),
    ("blockUnmockedRequests", Leaf),
]);

/// Respells keys of `value` that `shape` knows in another case, and adds the path of every key
/// it does not know to `unknown`. Returns whether anything was respelled.
fn scan(value: &mut Value, shape: Shape, path: &str, unknown: &mut Vec<String>) -> bool {
    let mut respelled = false;
    match (shape, value) {
        (Object(fields), Value::Object(map)) => {
            let keys: Vec<String> = map.keys().cloned().collect();
            for key in keys {
                if fields.iter().any(|(known, _)| *known == key) {
                    continue;
                }
                let canonical = fields
                    .iter()
                    .map(|(known, _)| *known)
                    .find(|known| known.eq_ignore_ascii_case(&key))
                    .filter(|known| !map.contains_key(*known));
                match (canonical, map.remove(&key)) {
                    (Some(canonical), Some(moved)) => {
                        map.insert(canonical.to_owned(), moved);
                        respelled = true;
                    }
                    (_, moved) => {
                        if let Some(moved) = moved {
                            map.insert(key.clone(), moved);
                        }
                        unknown.push(join(path, &key));
                    }
                }
            }
            for (key, inner) in fields {
                if let Some(value) = map.get_mut(*key) {
                    respelled |= scan(value, *inner, &join(path, key), unknown);
                }
            }
        }
        (List(item), Value::Array(items)) => {
            for (i, value) in items.iter_mut().enumerate() {
                respelled |= scan(value, *item, &index(path, i), unknown);
            }
        }
        _ => {}
    }
    respelled
}

// ---------------------------------------------------------------------------------------------
// Reading a file.

/// A file read and parsed, before its values are typed.
struct Doc {
    /// The path as shown in errors and notes.
    file: String,
    /// What serde reads: for JSON, the text with comments and trailing commas blanked out
    /// (positions kept).
    text: String,
    format: Format,
    value: Value,
    /// Whether `value` no longer reads as `text` (YAML merge keys applied, keys respelled):
    /// then errors are reported from `value`, with key paths but no lines.
    changed: bool,
}

impl Doc {
    /// Reads `path`: YAML by its extension, as Dev Proxy decides, else JSON with comments and
    /// trailing commas.
    fn read(path: &Path, file: String) -> Result<Doc, Vec<FileError>> {
        let text = fs::read_to_string(path).map_err(|err| {
            vec![FileError::new(
                &file,
                "",
                format!("cannot read the file: {err}"),
            )]
        })?;
        if Format::from_path(path) == Some(Format::Yaml) {
            let mut yaml: serde_yaml_ng::Value =
                parse_as(&text, Format::Yaml, &file).map_err(|errors| errors.0)?;
            let before = yaml.clone();
            yaml.apply_merge().map_err(|err| {
                vec![FileError::new(
                    &file,
                    "",
                    format!("cannot apply a YAML merge key (`<<`): {err}"),
                )]
            })?;
            let changed = yaml != before;
            let value = serde_json::to_value(&yaml).map_err(|err| {
                vec![FileError::new(
                    &file,
                    "",
                    format!("cannot read the YAML as JSON data: {err}"),
                )]
            })?;
            return Ok(Doc {
                file,
                text,
                format: Format::Yaml,
                value,
                changed,
            });
        }
        let text = clean_json(&text);
        let value = parse_as(&text, Format::Json, &file).map_err(|errors| errors.0)?;
        Ok(Doc {
            file,
            text,
            format: Format::Json,
            value,
            changed: false,
        })
    }

    /// Respells and notes keys of the value at `path` (a top-level key, or the root when
    /// empty).
    fn scan(&mut self, path: &str, shape: Shape, unknown: &mut Vec<String>) {
        let value = if path.is_empty() {
            Some(&mut self.value)
        } else {
            self.value.get_mut(path)
        };
        if let Some(value) = value {
            self.changed |= scan(value, shape, path, unknown);
        }
    }

    /// The value at the top-level key `at` (the root when empty) as a `T`. From the text when
    /// it can be (errors then have lines), else from the value.
    fn typed<T: DeserializeOwned>(&self, at: &str) -> Result<T, Vec<FileError>> {
        if at.is_empty() && !self.changed {
            return parse_as(&self.text, self.format, &self.file).map_err(|errors| errors.0);
        }
        let value = if at.is_empty() {
            &self.value
        } else {
            self.value.get(at).unwrap_or(&Value::Null)
        };
        parse_as(&value.to_string(), Format::Json, &self.file).map_err(|errors| {
            errors
                .0
                .into_iter()
                .map(|error| FileError {
                    path: join(at, &error.path),
                    line: None,
                    ..error
                })
                .collect()
        })
    }
}

/// The JSON text with comments and trailing commas blanked out, lines and columns kept (Dev
/// Proxy allows both). When a comment is not closed the text is left for the parser to
/// report.
fn clean_json(text: &str) -> String {
    let Ok(mut bytes) = jsonc::strip_comments(text) else {
        return text.to_owned();
    };
    jsonc::blank_trailing_commas(&mut bytes);
    String::from_utf8(bytes).unwrap_or_else(|_| text.to_owned())
}

// ---------------------------------------------------------------------------------------------
// The import.

/// The order in which holdoff meets a request's faults, for the plugins whose order in Dev
/// Proxy decides which one answers.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Stage {
    Mocks,
    RateLimits,
    Errors,
}

/// One GenericRandomErrorPlugin's rules.
struct ErrorSet {
    rate: f64,
    retry_after: u64,
    /// Whether a response has a bare `@dynamic` (which waits `retry_after`).
    bare_dynamic: bool,
    rules: Vec<RawErrorRule>,
}

struct Importer {
    /// The Dev Proxy file, as shown.
    rc: String,
    /// Its directory, the base of the paths in it.
    dir: PathBuf,
    notes: Vec<String>,
    errors: Vec<FileError>,
    config: RawConfig,
    /// holdoff's one watch list: the global list, then every plugin's own.
    watched: Vec<String>,
    error_sets: Vec<ErrorSet>,
    /// How many GenericRandomErrorPlugins are enabled: with more than one, each rule carries
    /// its plugin's rate.
    error_plugins: usize,
    mocks: Option<RawMocks>,
    /// The enabled plugins whose order decides which answers, as (stage, name).
    order: Vec<(Stage, String)>,
    retry_after_plugin: bool,
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
            if let Some(other) = other.filter(|_| !map.contains_key(known)) {
                if let Some(value) = map.remove(&other) {
                    map.insert(known.to_owned(), value);
                    doc.changed = true;
                }
            }
        }
        if doc.value.get("plugins").is_none() {
            self.error(
                "",
                "there is no `plugins` list: a Dev Proxy configuration file names the plugins \
                 it runs there",
            );
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
            .filter(|plugin| plugin.enabled && plugin.name == "GenericRandomErrorPlugin")
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
                "GenericRandomErrorPlugin" => self.errors_plugin(doc, &settings, &mut unknown),
                "RateLimitingPlugin" => self.rate_limiting_plugin(doc, &settings, &mut unknown),
                "RetryAfterPlugin" => self.retry_after_plugin(),
                "LatencyPlugin" => self.latency_plugin(doc, &settings, &mut unknown),
                "MockResponsePlugin" => self.mocks_plugin(doc, &settings, &mut unknown),
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
        self.order_note();
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

    /// The data file a plugin names (`value`, or Dev Proxy's `default` when unset), resolved
    /// against the configuration's directory; `None` (with an error) when it does not exist.
    fn data_file(&mut self, key: &str, value: Option<&str>, default: &str) -> Option<PathBuf> {
        let name = value.unwrap_or(default);
        let rc = self.rc.clone();
        if name.to_ascii_lowercase().contains("~appfolder") {
            self.error(
                key,
                format!(
                    "`{name}` is in Dev Proxy's install folder (~appFolder), which holdoff \
                     does not know: copy the file next to {rc} and name it here"
                ),
            );
            return None;
        }
        let path = self.dir.join(name);
        if path.is_file() {
            return Some(path);
        }
        let message = match value {
            Some(_) => format!(
                "the file {} does not exist: create it, or correct the path (it is relative to \
                 the directory of {rc})",
                path.display()
            ),
            None => format!(
                "not set, and Dev Proxy's default {} does not exist: set it to the file's path \
                 (relative to the directory of {rc})",
                path.display()
            ),
        };
        self.error(key, message);
        None
    }

    fn read(&mut self, path: &Path) -> Option<Doc> {
        match Doc::read(path, path.display().to_string()) {
            Ok(doc) => Some(doc),
            Err(errors) => {
                self.errors.extend(errors);
                None
            }
        }
    }

    /// A data file's root as a `T`, its unknown keys noted.
    fn data<T: DeserializeOwned>(&mut self, doc: &mut Doc, shape: Shape) -> Option<T> {
        let mut unknown = Vec::new();
        doc.scan("", shape, &mut unknown);
        let file = doc.file.clone();
        self.unknown_keys(&file, &unknown);
        match doc.typed("") {
            Ok(data) => Some(data),
            Err(errors) => {
                self.errors.extend(errors);
                None
            }
        }
    }

    fn errors_plugin(&mut self, doc: &mut Doc, plugin: &Plugin<'_>, unknown: &mut Vec<String>) {
        let Some(settings) = self.settings::<DpErrorsPlugin>(doc, plugin, ERRORS_SECTION, unknown)
        else {
            return;
        };
        let rate = settings.rate.unwrap_or(DEFAULT_RATE);
        if !(0.0..=100.0).contains(&rate) {
            self.error(
                &join(&plugin.at, "rate"),
                format!("{rate} is not a percentage: the rate is from 0 (never) to 100 (always)"),
            );
            return;
        }
        let retry_after = settings
            .retry_after_in_seconds
            .unwrap_or(DEFAULT_RETRY_AFTER);
        let setting = join(&plugin.at, "errorsFile");
        let Some(path) = self.data_file(
            &setting,
            settings.errors_file.as_deref(),
            DEFAULT_ERRORS_FILE,
        ) else {
            return;
        };
        let Some(mut data_doc) = self.read(&path) else {
            return;
        };
        let Some(data) = self.data::<DpErrorsFile>(&mut data_doc, ERRORS_FILE) else {
            return;
        };
        let file = data_doc.file;
        let base = relative_dir(
            settings
                .errors_file
                .as_deref()
                .unwrap_or(DEFAULT_ERRORS_FILE),
        );

        let mut rules = Vec::with_capacity(data.errors.len());
        let mut defaulted = Vec::new();
        let mut dynamic_not_429 = Vec::new();
        let mut bare_dynamic = false;
        for (i, rule) in data.errors.into_iter().enumerate() {
            let responses_path = key(&index("errors", i), "responses");
            if rule.responses.is_empty() {
                self.errors.push(FileError::new(
                    &file,
                    &responses_path,
                    "there are no responses: a rule needs at least one to draw from (Dev Proxy \
                     fails on such a rule too); add one, or remove the rule",
                ));
                continue;
            }
            let mut responses = Vec::with_capacity(rule.responses.len());
            for (j, response) in rule.responses.into_iter().enumerate() {
                let at = index(&responses_path, j);
                if response.status_code.is_none() {
                    defaulted.push(at.clone());
                }
                let status = response.status_code.unwrap_or(DEFAULT_ERROR_STATUS);
                for header in response.headers.iter().flatten() {
                    if header.name.eq_ignore_ascii_case("retry-after") {
                        let value = header.value.trim();
                        bare_dynamic |= value.eq_ignore_ascii_case("@dynamic");
                        if status != 429 && starts_with_dynamic(value) {
                            dynamic_not_429.push(at.clone());
                        }
                    }
                }
                responses.push(raw_response(response, DEFAULT_ERROR_STATUS, &base));
            }
            rules.push(RawErrorRule {
                request: RawRequestMatch {
                    url: rule.request.url,
                    method: rule.request.method,
                    body_fragment: rule.request.body_fragment,
                    nth: None,
                },
                rate: None,
                responses,
            });
        }

        let label = &plugin.label;
        let target = if self.error_plugins > 1 {
            "the rate of its rules"
        } else {
            "errors.rate"
        };
        self.note(rate_note(label, rate, settings.rate.is_none(), target));
        if rules.is_empty() {
            self.note(format!(
                "{label}: {file} has no rules, so it fails no request."
            ));
        }
        if !defaulted.is_empty() {
            self.note(format!(
                "{file}: {} no statusCode; Dev Proxy sends {DEFAULT_ERROR_STATUS} then, and so \
                 does the import: {}.",
                has_or_have(defaulted.len(), "response"),
                backquoted(&defaulted)
            ));
        }
        if !dynamic_not_429.is_empty() {
            self.note(format!(
                "{file}: Dev Proxy fills in a `@dynamic` Retry-After only on a 429 and sends it \
                 as written otherwise; holdoff fills it in on any status: {}.",
                backquoted(&dynamic_not_429)
            ));
        }
        self.scope_note(plugin, "its error rules");
        self.order.push((Stage::Errors, plugin.name.to_owned()));
        self.error_sets.push(ErrorSet {
            rate,
            retry_after,
            bare_dynamic,
            rules,
        });
    }

    /// Puts the error rules of every GenericRandomErrorPlugin into `errors`.
    fn finish_errors(&mut self) {
        if self.error_sets.is_empty() {
            return;
        }
        let sets = std::mem::take(&mut self.error_sets);
        let single = sets.len() == 1;
        let mut errors = RawErrors::default();
        let dynamic = sets
            .iter()
            .find(|set| set.bare_dynamic)
            .map(|set| set.retry_after);
        if let Some(seconds) = dynamic {
            errors.dynamic_range = Some([seconds, seconds]);
            self.note(format!(
                "A bare `@dynamic` Retry-After waits {seconds} s, as Dev Proxy's \
                 retryAfterInSeconds says (errors.dynamicRange is [{seconds}, {seconds}])."
            ));
        }
        if !single {
            self.note(
                "Several GenericRandomErrorPlugins: each rule keeps its plugin's rate. In Dev \
                 Proxy a request that one plugin let through could still fail in the next; in \
                 holdoff the first rule that matches it decides.",
            );
        }
        for mut set in sets {
            if set.bare_dynamic && Some(set.retry_after) != dynamic {
                // Another plugin set errors.dynamicRange: this one's wait is written out.
                let exact = format!("@dynamic={}", set.retry_after);
                for response in set.rules.iter_mut().flat_map(|rule| &mut rule.responses) {
                    if let Some(RawHeaders::List(headers)) = &mut response.headers {
                        for header in headers {
                            if header.name.eq_ignore_ascii_case("retry-after")
                                && header.value.trim().eq_ignore_ascii_case("@dynamic")
                            {
                                header.value.clone_from(&exact);
                            }
                        }
                    }
                }
            }
            if single {
                errors.rate = Some(set.rate);
            } else {
                for rule in &mut set.rules {
                    rule.rate = Some(set.rate);
                }
            }
            errors.errors.extend(set.rules);
        }
        self.config.errors = Some(errors);
    }

    fn rate_limiting_plugin(
        &mut self,
        doc: &mut Doc,
        plugin: &Plugin<'_>,
        unknown: &mut Vec<String>,
    ) {
        let Some(settings) =
            self.settings::<DpRateLimitPlugin>(doc, plugin, RATE_LIMIT_SECTION, unknown)
        else {
            return;
        };
        let at = &plugin.at;
        let limit = settings.rate_limit.unwrap_or(DEFAULT_RATE_LIMIT);
        let window = settings.reset_time_window_seconds.unwrap_or(DEFAULT_WINDOW);
        let cost = settings.cost_per_request.unwrap_or(DEFAULT_COST);
        let mut valid = true;
        for (key, value) in [
            ("rateLimit", limit),
            ("resetTimeWindowSeconds", window),
            ("costPerRequest", cost),
        ] {
            if value == 0 {
                self.error(&join(at, key), "must be at least 1");
                valid = false;
            }
        }
        if limit > 0 && cost > limit {
            self.error(
                &join(at, "costPerRequest"),
                format!(
                    "the cost ({cost}) is more than the rateLimit ({limit}), so every request \
                     would be refused: make it from 1 to the rateLimit"
                ),
            );
            valid = false;
        }
        let reset_format = match settings.reset_format.as_deref() {
            None => RawResetFormat::SecondsLeft,
            Some(s) if s.eq_ignore_ascii_case("SecondsLeft") => RawResetFormat::SecondsLeft,
            Some(s) if s.eq_ignore_ascii_case("UtcEpochSeconds") => RawResetFormat::EpochSeconds,
            Some(s) => {
                self.error(
                    &join(at, "resetFormat"),
                    format!("unknown value `{s}`: expected SecondsLeft or UtcEpochSeconds"),
                );
                return;
            }
        };
        let custom = match settings.when_limit_exceeded.as_deref() {
            None => false,
            Some(s) if s.eq_ignore_ascii_case("Throttle") => false,
            Some(s) if s.eq_ignore_ascii_case("Custom") => true,
            Some(s) => {
                self.error(
                    &join(at, "whenLimitExceeded"),
                    format!("unknown value `{s}`: expected Throttle or Custom"),
                );
                return;
            }
        };
        let names = [
            settings.header_limit.as_deref().unwrap_or(DRAFT_HEADERS[0]),
            settings
                .header_remaining
                .as_deref()
                .unwrap_or(DRAFT_HEADERS[1]),
            settings.header_reset.as_deref().unwrap_or(DRAFT_HEADERS[2]),
        ];
        let (style, exact) = header_style(names);

        let when_exceeded = if custom {
            let setting = join(at, "customResponseFile");
            let Some(path) = self.data_file(
                &setting,
                settings.custom_response_file.as_deref(),
                DEFAULT_CUSTOM_RESPONSE_FILE,
            ) else {
                return;
            };
            let Some(mut data_doc) = self.read(&path) else {
                return;
            };
            let Some(response) = self.data::<DpResponse>(&mut data_doc, CUSTOM_RESPONSE_FILE)
            else {
                return;
            };
            if response.status_code.is_none() {
                self.note(format!(
                    "{}: the response has no statusCode; Dev Proxy sends {DEFAULT_OK_STATUS} \
                     then, and so does the import.",
                    data_doc.file
                ));
            }
            Some((
                data_doc.file,
                raw_response(response, DEFAULT_OK_STATUS, Path::new("")),
            ))
        } else {
            None
        };
        if !valid {
            return;
        }

        let limit_path = index("rateLimits", self.config.rate_limits.len());
        let name = plugin.label.as_str();
        let url = self.single_url(plugin, "its limit");
        let mut summary = format!(
            "{name}: {limit} per {window} s at {cost} a request became {limit_path}, a \
             fixed window with scope shared (Dev Proxy counts every client's requests \
             together)"
        );
        if settings.cost_per_request.is_none() {
            summary.push_str(&format!(
                "; costPerRequest is not set, and Dev Proxy's default is {DEFAULT_COST}"
            ));
        }
        summary.push_str(
            ". holdoff's windows follow one another from the proxy's start; Dev Proxy's began \
             at the first request, and again at the first request after each reset.",
        );
        self.note(summary);
        let percent = settings
            .warning_threshold_percent
            .unwrap_or(DEFAULT_WARNING_PERCENT);
        // At 0 % Dev Proxy sends them on every response too.
        if percent > 0 {
            let by_default = if settings.warning_threshold_percent.is_none() {
                ", by default"
            } else {
                ""
            };
            self.note(format!(
                "{name}: Dev Proxy sent the rate-limit headers only once {percent} % of the \
                 limit was used (warningThresholdPercent{by_default}); holdoff sends them on \
                 every counted response."
            ));
        }
        if !exact {
            self.note(format!(
                "{name}: holdoff sends one of a few fixed sets of rate-limit headers, and the \
                 names configured ({}) are none of them; the nearest, {}, is sent instead.",
                backquoted(&names),
                match style {
                    RawHeaderStyle::XRatelimit => backquoted(&X_HEADERS),
                    _ => backquoted(&DRAFT_HEADERS),
                }
            ));
        }
        if let Some(header) = settings
            .header_retry_after
            .as_deref()
            .filter(|header| !header.eq_ignore_ascii_case("Retry-After"))
        {
            self.note(format!(
                "{name}: holdoff's refusals carry `Retry-After`, not `{header}` \
                 (headerRetryAfter){}.",
                if custom {
                    "; in the custom response only a `Retry-After: @dynamic` is filled in"
                } else {
                    ""
                }
            ));
        }
        let when_exceeded = when_exceeded.map(|(file, response)| {
            self.note(format!(
                "{name}: past the limit, the response in {file} is sent ({}).",
                key(&limit_path, "whenExceeded")
            ));
            response
        });
        self.order.push((Stage::RateLimits, plugin.name.to_owned()));
        self.config.rate_limits.push(RawRateLimit {
            url,
            method: None,
            algorithm: Some(RawAlgorithm::FixedWindow),
            limit,
            window_seconds: window,
            cost: Some(cost),
            scope: Some(RawScope::Shared),
            headers: Some(style),
            reset_format: Some(reset_format),
            when_exceeded,
        });
    }

    fn retry_after_plugin(&mut self) {
        self.retry_after_plugin = true;
        self.note(
            "RetryAfterPlugin needs no setting: holdoff's judge is always on. It keys its \
             windows by client, method and URL, and judges every Retry-After a client \
             receives, the upstream's too, not only the ones holdoff sends; Dev Proxy kept one \
             wait per host. For Dev Proxy's behaviour set judge.key to `host` (or pass \
             --judge-key host).",
        );
    }

    fn latency_plugin(&mut self, doc: &mut Doc, plugin: &Plugin<'_>, unknown: &mut Vec<String>) {
        let Some(settings) =
            self.settings::<DpLatencyPlugin>(doc, plugin, LATENCY_SECTION, unknown)
        else {
            return;
        };
        let name = plugin.name;
        if self.config.latency.is_some() {
            self.note(format!(
                "{name} appears more than once: holdoff adds one latency, so only the first \
                 was imported (Dev Proxy added both delays)."
            ));
            return;
        }
        let min_ms = settings.min_ms.unwrap_or(0);
        let max_ms = settings.max_ms.unwrap_or(DEFAULT_MAX_MS);
        if min_ms > max_ms {
            let key = if settings.min_ms.is_some() {
                "minMs"
            } else {
                "maxMs"
            };
            self.error(
                &join(&plugin.at, key),
                format!(
                    "the least delay ({min_ms} ms, minMs) is more than the most ({max_ms} ms, \
                     maxMs; Dev Proxy's default is {DEFAULT_MAX_MS})"
                ),
            );
            return;
        }
        let url = self.single_url(plugin, "its delay");
        self.config.latency = Some(RawLatency {
            min_ms,
            max_ms,
            url,
            rate: None,
        });
    }

    fn mocks_plugin(&mut self, doc: &mut Doc, plugin: &Plugin<'_>, unknown: &mut Vec<String>) {
        let Some(settings) = self.settings::<DpMocksPlugin>(doc, plugin, MOCKS_SECTION, unknown)
        else {
            return;
        };
        let setting = join(&plugin.at, "mocksFile");
        let Some(path) =
            self.data_file(&setting, settings.mocks_file.as_deref(), DEFAULT_MOCKS_FILE)
        else {
            return;
        };
        let Some(mut data_doc) = self.read(&path) else {
            return;
        };
        let Some(data) = self.data::<DpMocksFile>(&mut data_doc, MOCKS_FILE) else {
            return;
        };
        let file = data_doc.file;
        let base = relative_dir(settings.mocks_file.as_deref().unwrap_or(DEFAULT_MOCKS_FILE));

        let mut mocks = Vec::with_capacity(data.mocks.len());
        let (mut get, mut defaulted, mut nth, mut placeholders) =
            (Vec::new(), Vec::new(), false, Vec::new());
        for (i, mock) in data.mocks.into_iter().enumerate() {
            let at = index("mocks", i);
            if mock.request.method.is_none() {
                get.push(at.clone());
            }
            if mock.response.status_code.is_none() {
                defaulted.push(at.clone());
            }
            nth |= mock.request.nth.is_some();
            if mock.response.body.as_ref().is_some_and(has_placeholder) {
                placeholders.push(at);
            }
            mocks.push(RawMock {
                request: RawRequestMatch {
                    url: mock.request.url,
                    method: Some(mock.request.method.unwrap_or_else(|| "GET".to_owned())),
                    body_fragment: mock.request.body_fragment,
                    nth: mock.request.nth,
                },
                response: raw_response(mock.response, DEFAULT_OK_STATUS, &base),
            });
        }

        let name = plugin.name;
        if !get.is_empty() {
            self.note(format!(
                "{file}: {} no method, which Dev Proxy matches to GET only; the import says \
                 `method: GET`: {}.",
                has_or_have(get.len(), "mock"),
                backquoted(&get)
            ));
        }
        if !defaulted.is_empty() {
            self.note(format!(
                "{file}: {} no statusCode; Dev Proxy answers {DEFAULT_OK_STATUS} then, and so \
                 does the import: {}.",
                has_or_have(defaulted.len(), "response"),
                backquoted(&defaulted)
            ));
        }
        if nth {
            self.note(format!(
                "{file}: Dev Proxy counts `nth` per URL across the mocks that share it, and \
                 only the requests a mock answered; holdoff counts the requests each mock \
                 matches. A mock with nth followed by one without, for the same URL, behaves \
                 the same in both."
            ));
        }
        if !placeholders.is_empty() {
            self.note(format!(
                "{file}: holdoff does not fill in `@request.body.…` placeholders; they are sent \
                 as written: {}.",
                backquoted(&placeholders)
            ));
        }
        self.scope_note(plugin, "its mocks");
        self.order.push((Stage::Mocks, name.to_owned()));
        let block = settings.block_unmocked_requests;
        match &mut self.mocks {
            Some(existing) => {
                existing.mocks.extend(mocks);
                if block == Some(true) {
                    existing.block_unmocked = Some(true);
                }
                self.note(format!(
                    "{name} appears more than once: the mocks of all were put together, in \
                     order."
                ));
            }
            None => {
                self.mocks = Some(RawMocks {
                    mocks,
                    file: None,
                    block_unmocked: block,
                });
            }
        }
    }

    /// The `url` of a fault that takes one pattern: `None` when the plugin sees every watched
    /// URL, its one pattern when it has one, and otherwise `None` with a note.
    fn single_url(&mut self, plugin: &Plugin<'_>, what: &str) -> Option<String> {
        if same_set(plugin.urls, &self.watched) {
            return None;
        }
        if let [url] = plugin.urls {
            if !url.starts_with('!') {
                return Some(url.clone());
            }
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
                "port" if value.as_u64() == Some(u64::from(super::DEFAULT_PORT)) => {}
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
                    "{key} {shown}: Dev Proxy handled only these processes' traffic; holdoff \
                     cannot tell processes apart, and handles every client that uses it as its \
                     proxy."
                )),
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

    fn judge_notes(&mut self) {
        let throttles = self.config.errors.is_some() || !self.config.rate_limits.is_empty();
        if throttles && !self.retry_after_plugin {
            self.note(
                "RetryAfterPlugin is not enabled, so Dev Proxy let early retries through; \
                 holdoff's judge is always on, and answers a retry that comes before its \
                 Retry-After again without forwarding it.",
            );
        }
    }

    /// A note when the plugins' order in Dev Proxy differs from holdoff's fixed one.
    fn order_note(&mut self) {
        let mut sorted = self.order.clone();
        sorted.sort_by_key(|(stage, _)| *stage);
        if sorted == self.order {
            return;
        }
        let listed: Vec<&str> = self.order.iter().map(|(_, name)| name.as_str()).collect();
        self.note(format!(
            "Dev Proxy runs its plugins in the order listed ({}); holdoff always tries mocks, \
             then rate limits, then error rules, so a request more than one of them would \
             answer may get another response.",
            listed.join(", ")
        ));
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
        "GenericRandomErrorPlugin"
            | "RateLimitingPlugin"
            | "LatencyPlugin"
            | "MockResponsePlugin"
            | "RetryAfterPlugin"
    )
}

/// Why holdoff has no counterpart to the plugin.
fn unsupported(name: &str) -> &'static str {
    match name {
        "GraphRandomErrorPlugin" => {
            "it fails Microsoft Graph requests with Graph's own errors; list the errors you want \
             in a GenericRandomErrorPlugin errors file, or start from `--preset graph`"
        }
        "LanguageModelRateLimitingPlugin" => {
            "holdoff counts requests, not language-model tokens; a RateLimitingPlugin can stand \
             in"
        }
        "LanguageModelFailurePlugin" => {
            "holdoff does not make language-model answers go wrong, it fails requests"
        }
        "GraphMockResponsePlugin"
        | "EntraMockResponsePlugin"
        | "OpenAIMockResponsePlugin"
        | "CrudApiPlugin"
        | "AuthPlugin" => {
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

/// The note on GenericRandomErrorPlugin's rate: holdoff's is exact, Dev Proxy's was not.
fn rate_note(label: &str, rate: f64, defaulted: bool, target: &str) -> String {
    let how = if defaulted {
        "rate is not set, and Dev Proxy's default"
    } else {
        "rate"
    };
    format!(
        "{label}: {how} {rate} became {target}. holdoff fails exactly {rate} % of the requests \
         a rule matches; Dev Proxy failed {} (it draws from 1 to 99, so its 99 fails every \
         request).",
        dev_proxy_share(rate)
    )
}

/// The share of requests Dev Proxy fails at `rate`: `floor(rate)` of its 99 draws.
fn dev_proxy_share(rate: f64) -> String {
    let draws = rate.floor().clamp(0.0, 99.0);
    if draws >= 99.0 {
        "every one".to_owned()
    } else {
        format!("{:.1} %", draws / 99.0 * 100.0)
    }
}

/// The header style nearest to the three names, and whether it is exactly them.
fn header_style(names: [&str; 3]) -> (RawHeaderStyle, bool) {
    let is = |set: [&str; 3]| {
        names
            .iter()
            .zip(set)
            .all(|(a, b)| a.eq_ignore_ascii_case(b))
    };
    if is(DRAFT_HEADERS) {
        (RawHeaderStyle::Draft, true)
    } else if is(X_HEADERS) {
        (RawHeaderStyle::XRatelimit, true)
    } else if names
        .iter()
        .filter(|name| {
            name.get(..2)
                .is_some_and(|prefix| prefix.eq_ignore_ascii_case("x-"))
        })
        .count()
        >= 2
    {
        (RawHeaderStyle::XRatelimit, false)
    } else {
        (RawHeaderStyle::Draft, false)
    }
}

/// A Dev Proxy response as holdoff's, with Dev Proxy's default status, and an `@file` body
/// rewritten from the data file's directory (`base`, relative to the configuration's) to the
/// configuration's.
fn raw_response(response: DpResponse, default_status: u16, base: &Path) -> RawResponse {
    let body = response.body.filter(|body| !body.is_null()).map(|body| {
        match body.as_str().and_then(|text| text.strip_prefix('@')) {
            Some(name) if !base.as_os_str().is_empty() => {
                Value::String(format!("@{}", base.join(name).display()))
            }
            _ => body,
        }
    });
    RawResponse {
        status_code: Some(response.status_code.unwrap_or(default_status)),
        headers: response.headers.map(|headers| {
            RawHeaders::List(
                headers
                    .into_iter()
                    .map(|header| RawHeader {
                        name: header.name,
                        value: header.value,
                    })
                    .collect(),
            )
        }),
        body,
        ..RawResponse::default()
    }
}

/// The directory of a data file named `name` in the configuration, relative to the
/// configuration's directory (empty when it is the same).
fn relative_dir(name: &str) -> PathBuf {
    Path::new(name)
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default()
}

fn starts_with_dynamic(value: &str) -> bool {
    value
        .get(..8)
        .is_some_and(|prefix| prefix.eq_ignore_ascii_case("@dynamic"))
}

/// Whether a mock body has a string Dev Proxy replaces with a value of the request's body.
fn has_placeholder(body: &Value) -> bool {
    match body {
        Value::String(text) => text
            .get(..14)
            .is_some_and(|prefix| prefix.eq_ignore_ascii_case("@request.body.")),
        Value::Array(items) => items.iter().any(has_placeholder),
        Value::Object(map) => map.values().any(has_placeholder),
        _ => false,
    }
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
fn backquoted<S: AsRef<str>>(items: &[S]) -> String {
    items
        .iter()
        .map(|item| format!("`{}`", item.as_ref()))
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    mod clean_json {
        use super::*;

        #[test]
        fn blanks_comments_and_trailing_commas_keeping_positions() {
            let text = "{\n  \"a\": 1, // one\n  /* two */\n}";
            let cleaned = clean_json(text);
            assert_eq!(cleaned.len(), text.len());
            assert_eq!(cleaned.lines().count(), text.lines().count());
            let value: Value = serde_json::from_str(&cleaned).expect("valid JSON");
            assert_eq!(value, serde_json::json!({"a": 1}));
        }
    }

    mod scan {
        use super::*;

        #[test]
        fn respells_keys_in_another_case_and_lists_unknown_ones() {
            let mut value = serde_json::json!({
                "errors": [{"Request": {"url": "*", "nth": 2}, "responses": [{"StatusCode": 429}]}],
                "extra": true
            });
            let mut unknown = Vec::new();
            assert!(scan(&mut value, ERRORS_FILE, "", &mut unknown));
            assert_eq!(value["errors"][0]["request"]["url"], "*");
            assert_eq!(value["errors"][0]["responses"][0]["statusCode"], 429);
            assert_eq!(unknown, ["extra", "errors[0].request.nth"]);
        }

        #[test]
        fn leaves_bodies_alone() {
            let mut value = serde_json::json!({"statusCode": 200, "body": {"Whatever": 1}});
            let mut unknown = Vec::new();
            assert!(!scan(&mut value, CUSTOM_RESPONSE_FILE, "", &mut unknown));
            assert!(unknown.is_empty());
        }
    }

    mod dev_proxy_share {
        use super::*;

        #[test]
        fn is_floor_of_the_rate_out_of_99() {
            assert_eq!(dev_proxy_share(50.0), "50.5 %");
            assert_eq!(dev_proxy_share(90.0), "90.9 %");
            assert_eq!(dev_proxy_share(0.0), "0.0 %");
            assert_eq!(dev_proxy_share(99.0), "every one");
            assert_eq!(dev_proxy_share(100.0), "every one");
        }
    }

    mod header_style {
        use super::*;

        #[test]
        fn knows_the_draft_and_x_sets_in_any_case() {
            assert_eq!(header_style(DRAFT_HEADERS), (RawHeaderStyle::Draft, true));
            assert_eq!(
                header_style([
                    "x-ratelimit-limit",
                    "X-RATELIMIT-REMAINING",
                    "X-RateLimit-Reset"
                ]),
                (RawHeaderStyle::XRatelimit, true)
            );
        }

        #[test]
        fn picks_the_nearest_for_other_names() {
            assert_eq!(
                header_style(["X-Rate-Limit", "X-Rate-Remaining", "X-Rate-Reset"]),
                (RawHeaderStyle::XRatelimit, false)
            );
            assert_eq!(
                header_style(["Limit", "Remaining", "Reset"]),
                (RawHeaderStyle::Draft, false)
            );
        }
    }

    mod raw_response {
        use super::*;

        #[test]
        fn fills_in_the_status_and_rebases_a_file_body() {
            let response = DpResponse {
                status_code: None,
                headers: None,
                body: Some(Value::String("@body.json".to_owned())),
            };
            let raw = raw_response(response, 400, Path::new("data"));
            assert_eq!(raw.status_code, Some(400));
            assert_eq!(raw.body, Some(Value::String("@data/body.json".to_owned())));
        }

        #[test]
        fn drops_a_null_body() {
            let response = DpResponse {
                status_code: Some(503),
                headers: Some(Vec::new()),
                body: Some(Value::Null),
            };
            let raw = raw_response(response, 400, Path::new(""));
            assert_eq!(raw.body, None);
            assert_eq!(raw.headers, Some(RawHeaders::List(Vec::new())));
        }
    }

    mod has_placeholder {
        use super::*;

        #[test]
        fn finds_request_body_placeholders_anywhere() {
            assert!(has_placeholder(
                &serde_json::json!({"user": {"name": "@request.body.name"}})
            ));
            assert!(!has_placeholder(&serde_json::json!({"name": "@body.json"})));
        }
    }
}
