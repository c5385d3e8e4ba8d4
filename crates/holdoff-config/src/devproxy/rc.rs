//! The main file, `devproxyrc.json`: its plugins, each handed to its importer, its
//! `urlsToWatch` and each plugin's own, and the section each plugin reads its settings from.

use schemars::JsonSchema;
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::doc::Doc;
use super::importer::{Importer, Plugin, backquoted};
use super::keys::{Shape, Unread, scan};
use super::plugins::{mapped, unsupported};
use crate::error::index;
use crate::file::RawFaultStep;

// Dev Proxy's main file, as serde reads it: lenient (unknown keys are found and noted apart),
// with Dev Proxy's required keys required.

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct DpConfig {
    #[serde(default)]
    pub(super) urls_to_watch: Vec<String>,
    pub(super) plugins: Vec<DpPlugin>,
}

/// An entry of `plugins`.
#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(super) struct DpPlugin {
    pub(super) name: String,
    pub(super) enabled: bool,
    #[serde(rename = "pluginPath")]
    _plugin_path: Option<Unread>,
    pub(super) config_section: Option<String>,
    #[serde(default)]
    pub(super) urls_to_watch: Vec<String>,
}

impl Importer {
    pub(super) fn run(&mut self, doc: &mut Doc) {
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
            let known = Shape::of::<DpPlugin>();
            for (i, plugin) in plugins.iter_mut().enumerate() {
                doc.changed |= scan(plugin, &known, &index("plugins", i), &mut unknown);
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
                    && mapped(&plugin.name)
                        .is_some_and(|mapped| mapped.step == Some(RawFaultStep::Errors))
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
            match mapped(&plugin.name) {
                Some(mapped) => (mapped.import)(self, doc, &settings, &mut unknown),
                None => {
                    let name = &plugin.name;
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
        let step = mapped(&plugin.name).and_then(|mapped| mapped.step);
        let Some(section) = plugin.config_section.as_deref() else {
            return Some(Plugin {
                name: &plugin.name,
                label,
                at: entry,
                section: None,
                urls,
                step,
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
                step,
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
                if mapped(&plugin.name).is_some() {
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
                    step,
                })
            }
        }
    }

    /// The plugin's settings as a `T` (Dev Proxy's defaults when it has no section).
    pub(super) fn settings<T: DeserializeOwned + JsonSchema + Default>(
        &mut self,
        doc: &mut Doc,
        plugin: &Plugin<'_>,
        unknown: &mut Vec<String>,
    ) -> Option<T> {
        let Some(section) = plugin.section.as_deref() else {
            return Some(T::default());
        };
        doc.scan::<T>(section, unknown);
        match doc.typed(section) {
            Ok(settings) => Some(settings),
            Err(errors) => {
                self.errors.extend(errors);
                None
            }
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
