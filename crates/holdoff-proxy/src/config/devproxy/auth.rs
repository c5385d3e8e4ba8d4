//! AuthPlugin: in its API-key mode, one of holdoff's `auth` rules.

use serde::Deserialize;

use super::doc::{Doc, Leaf, List, Object, Shape};
use super::{FaultStep, Importer, Plugin, backquoted, same_set};
use crate::config::error::join;
use crate::config::file::{RawApiKey, RawAuth, RawKeyIn, RawKeyParameter};

#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct DpAuthPlugin {
    #[serde(rename = "type")]
    kind: Option<String>,
    api_key: Option<DpApiKey>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct DpApiKey {
    #[serde(default)]
    allowed_keys: Vec<String>,
    #[serde(default)]
    parameters: Vec<DpParameter>,
}

#[derive(Deserialize)]
struct DpParameter {
    #[serde(rename = "in")]
    location: Option<String>,
    name: Option<String>,
}

const PARAMETER: Shape = Object(&[("in", Leaf), ("name", Leaf)]);
const SECTION: Shape = Object(&[
    ("$schema", Leaf),
    ("type", Leaf),
    (
        "apiKey",
        Object(&[("allowedKeys", Leaf), ("parameters", List(&PARAMETER))]),
    ),
    // OAuth2 mode: read only to say it is not carried over.
    ("oAuth2", Leaf),
]);

impl Importer {
    pub(super) fn auth_plugin(
        &mut self,
        doc: &mut Doc,
        plugin: &Plugin<'_>,
        unknown: &mut Vec<String>,
    ) {
        let Some(settings) = self.settings::<DpAuthPlugin>(doc, plugin, SECTION, unknown) else {
            return;
        };
        let label = plugin.label.clone();
        // Dev Proxy disables the plugin, and lets everything through, when its settings are
        // incomplete.
        let disabled = |why: &str| {
            format!(
                "{label}: {why}, so Dev Proxy disables the plugin and checks nothing; nor does holdoff."
            )
        };
        let kind = settings.kind.as_deref().unwrap_or("");
        if kind.eq_ignore_ascii_case("oAuth2") {
            self.note(format!(
                "{label}: its oAuth2 mode validates bearer tokens against an identity provider's \
                 metadata, which holdoff does not fetch; no request is checked. Its apiKey mode \
                 is supported."
            ));
            return;
        }
        if !kind.eq_ignore_ascii_case("apiKey") {
            let why = if kind.is_empty() {
                "`type` is not set".to_owned()
            } else {
                format!("`type` is `{kind}`, neither apiKey nor oAuth2")
            };
            self.note(disabled(&why));
            return;
        }
        let Some(api_key) = settings.api_key else {
            self.note(disabled("it has no `apiKey` settings"));
            return;
        };
        let mut parameters = Vec::with_capacity(api_key.parameters.len());
        for parameter in &api_key.parameters {
            let location = match parameter.location.as_deref() {
                Some(at) if at.eq_ignore_ascii_case("header") => RawKeyIn::Header,
                Some(at) if at.eq_ignore_ascii_case("query") => RawKeyIn::Query,
                Some(at) if at.eq_ignore_ascii_case("cookie") => RawKeyIn::Cookie,
                Some(at) => {
                    self.error(
                        &join(&join(&plugin.at, "apiKey"), "parameters"),
                        format!("unknown value `{at}` of `in`: expected header, query or cookie"),
                    );
                    return;
                }
                None => {
                    self.note(disabled("a parameter has no `in`"));
                    return;
                }
            };
            let Some(name) = parameter.name.clone() else {
                self.note(disabled("a parameter has no `name`"));
                return;
            };
            parameters.push(RawKeyParameter { location, name });
        }
        if parameters.is_empty() {
            self.note(disabled("apiKey.parameters is empty"));
            return;
        }
        if api_key.allowed_keys.is_empty() {
            self.note(disabled("apiKey.allowedKeys is empty"));
            return;
        }
        let url = if same_set(plugin.urls, &self.watched) {
            None
        } else if let [url] = plugin.urls {
            Some(url.clone())
        } else {
            self.note(format!(
                "{label}: Dev Proxy checked the keys only of {}; holdoff checks every watched URL.",
                backquoted(plugin.urls)
            ));
            None
        };
        self.order.push((FaultStep::Auth, plugin.name.to_owned()));
        self.config.auth.push(RawAuth {
            url,
            api_key: RawApiKey {
                parameters,
                allowed_keys: api_key.allowed_keys,
            },
        });
    }
}
