//! The main file's top-level settings besides `plugins` and `urlsToWatch`: what holdoff makes
//! of each (a command-line option, nothing, or a note that it is not Dev Proxy's).

use std::collections::BTreeSet;

use serde_json::Value;

use super::doc::Doc;
use super::importer::{Importer, backquoted};
use super::rc::DpConfig;

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

impl Importer {
    /// Notes on the main file's top-level keys other than `plugins`, `urlsToWatch` and the
    /// plugins' sections: the option each stands for, or that it was ignored.
    pub(super) fn top_level_settings(&mut self, doc: &Doc, rc: &DpConfig) {
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
}

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
