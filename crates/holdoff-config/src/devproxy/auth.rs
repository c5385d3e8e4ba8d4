//! AuthPlugin: in its API-key and OAuth2 modes, one of holdoff's `auth` rules.

use schemars::JsonSchema;
use serde::Deserialize;

use super::doc::Doc;
use super::importer::{Importer, Plugin, backquoted, same_set};
use super::keys::Unread;
use crate::error::join;
use crate::file::{RawApiKey, RawAuth, RawBearer, RawKeyIn, RawKeyParameter};

#[derive(Default, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
struct DpAuthPlugin {
    #[serde(rename = "$schema")]
    _schema: Option<Unread>,
    #[serde(rename = "type")]
    kind: Option<String>,
    api_key: Option<DpApiKey>,
    o_auth2: Option<DpOAuth2>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
struct DpOAuth2 {
    #[serde(default)]
    allowed_applications: Vec<String>,
    #[serde(default)]
    allowed_audiences: Vec<String>,
    #[serde(default)]
    allowed_principals: Vec<String>,
    #[serde(default)]
    allowed_tenants: Vec<String>,
    issuer: Option<String>,
    metadata_url: Option<String>,
    #[serde(default)]
    roles: Vec<String>,
    #[serde(default)]
    scopes: Vec<String>,
    validate_lifetime: Option<bool>,
    validate_signing_key: Option<bool>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
struct DpApiKey {
    #[serde(default)]
    allowed_keys: Vec<String>,
    #[serde(default)]
    parameters: Vec<DpParameter>,
}

#[derive(Deserialize, JsonSchema)]
struct DpParameter {
    #[serde(rename = "in")]
    location: Option<String>,
    name: Option<String>,
}

impl Importer {
    pub(super) fn auth_plugin(
        &mut self,
        doc: &mut Doc,
        plugin: &Plugin<'_>,
        unknown: &mut Vec<String>,
    ) {
        let Some(settings) = self.settings::<DpAuthPlugin>(doc, plugin, unknown) else {
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
            let Some(oauth) = settings.o_auth2 else {
                self.note(disabled("it has no `oAuth2` settings"));
                return;
            };
            if oauth
                .metadata_url
                .as_deref()
                .is_none_or(|url| url.trim().is_empty())
            {
                self.note(disabled("oAuth2.metadataUrl is not set"));
                return;
            }
            let mut note = format!(
                "{label}: bearer tokens are checked for their claims (issuer, audience, \
                 lifetime, and the tenants, applications, principals, roles and scopes listed), \
                 not for their signature: that needs the keys at metadataUrl, which holdoff \
                 does not fetch."
            );
            if oauth.validate_signing_key == Some(false) {
                note.push_str(" (Dev Proxy skips the signature too: validateSigningKey is false.)");
            }
            self.note(note);
            let url = self.auth_url(plugin);
            self.answers(plugin);
            self.config.auth.push(RawAuth {
                url,
                api_key: None,
                bearer: Some(RawBearer {
                    issuer: oauth.issuer.filter(|issuer| !issuer.is_empty()),
                    allowed_audiences: oauth.allowed_audiences,
                    allowed_tenants: oauth.allowed_tenants,
                    allowed_applications: oauth.allowed_applications,
                    allowed_principals: oauth.allowed_principals,
                    roles: oauth.roles,
                    scopes: oauth.scopes,
                    validate_lifetime: oauth.validate_lifetime,
                }),
            });
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
        let url = self.auth_url(plugin);
        self.answers(plugin);
        self.config.auth.push(RawAuth {
            url,
            api_key: Some(RawApiKey {
                parameters,
                allowed_keys: api_key.allowed_keys,
            }),
            bearer: None,
        });
    }

    /// The `url` of the plugin's auth rule: `None` when it sees every watched URL.
    fn auth_url(&mut self, plugin: &Plugin<'_>) -> Option<String> {
        if same_set(plugin.urls, &self.watched) {
            None
        } else if let [url] = plugin.urls {
            Some(url.clone())
        } else {
            self.note(format!(
                "{}: Dev Proxy checked only {}; holdoff checks every watched URL.",
                plugin.label,
                backquoted(plugin.urls)
            ));
            None
        }
    }
}
