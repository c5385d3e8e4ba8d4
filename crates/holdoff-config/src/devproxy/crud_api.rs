//! CrudApiPlugin and its API file: holdoff's `crudApis`, the actions inlined and the data
//! file named relative to the configuration.

use std::path::Path;

use schemars::JsonSchema;
use serde::Deserialize;

use super::data::Data;
use super::importer::{Importer, Plugin, backquoted};
use super::keys::Unread;
use crate::error::{FileError, index, join};
use crate::file::{RawCrudAction, RawCrudActionKind, RawCrudApi};

#[derive(Default, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
struct DpCrudPlugin {
    #[serde(rename = "$schema")]
    _schema: Option<Unread>,
    api_file: Option<String>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
struct DpApiFile {
    #[serde(rename = "$schema")]
    _schema: Option<Unread>,
    #[serde(default)]
    base_url: String,
    data_file: Option<String>,
    auth: Option<String>,
    #[serde(rename = "entraAuthConfig")]
    _entra_auth_config: Option<Unread>,
    #[serde(rename = "apiKeyAuthConfig")]
    _api_key_auth_config: Option<Unread>,
    #[serde(rename = "enableCors")]
    _enable_cors: Option<Unread>,
    #[serde(default)]
    actions: Vec<DpAction>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
struct DpAction {
    action: Option<String>,
    url: Option<String>,
    method: Option<String>,
    query: Option<String>,
    auth: Option<String>,
    #[serde(rename = "entraAuthConfig")]
    _entra_auth_config: Option<Unread>,
}

/// CrudApiPlugin's `apiFile`.
const DEFAULT_API_FILE: &str = "api.json";

impl Importer {
    pub(super) fn crud_api_plugin(
        &mut self,
        doc: &mut super::doc::Doc,
        plugin: &Plugin<'_>,
        unknown: &mut Vec<String>,
    ) {
        let Some(settings) = self.settings::<DpCrudPlugin>(doc, plugin, unknown) else {
            return;
        };
        let then = format!("{} serves no API", plugin.label);
        let Some(Data {
            file,
            value: api,
            base,
        }) = self.data::<DpApiFile>(
            (
                &join(&plugin.at, "apiFile"),
                settings.api_file.as_deref(),
                DEFAULT_API_FILE,
            ),
            &then,
        )
        else {
            return;
        };

        let mut actions = Vec::with_capacity(api.actions.len());
        let mut regex = Vec::new();
        let mut entra = api.auth.as_deref().is_some_and(is_entra);
        let mut api_key = api.auth.as_deref().is_some_and(is_api_key);
        for (i, action) in api.actions.into_iter().enumerate() {
            entra |= action.auth.as_deref().is_some_and(is_entra);
            api_key |= action.auth.as_deref().is_some_and(is_api_key);
            let Some(kind) = action_kind(action.action.as_deref()) else {
                self.errors.push(FileError::new(
                    &file,
                    index("actions", i) + ".action",
                    format!(
                        "`{}` is not a CrudApiPlugin action: write one of getAll, getOne, \
                         getMany, create, merge, update, delete",
                        action.action.unwrap_or_default()
                    ),
                ));
                continue;
            };
            if action
                .query
                .as_deref()
                .is_some_and(|query| query.contains("=~"))
            {
                // Json.NET's `=~ /re/flags` has no RFC 9535 spelling with the same flags.
                regex.push(index("actions", i));
                continue;
            }
            actions.push(RawCrudAction {
                action: kind,
                url: action.url,
                method: action.method,
                query: action.query,
            });
        }
        if !regex.is_empty() {
            self.note(format!(
                "{file}: queries with `=~` (a Json.NET regular expression) have no RFC 9535 \
                 form with the same flags, so these actions were left out; write them with \
                 `search(@.name, 'regex')` in holdoff's crudApis: {}.",
                backquoted(&regex)
            ));
        }
        if entra {
            self.note(format!(
                "{file}: Entra authentication (`auth: entra`) is not supported by holdoff: the \
                 API answers without checking tokens."
            ));
        }
        if api_key {
            self.note(format!(
                "{file}: API-key authentication (`auth: apiKey`) was not carried: the API \
                 answers without checking keys; holdoff's `auth` section can ask for them."
            ));
        }
        // The data file is relative to the API file, as Dev Proxy reads it.
        let then = format!("{} starts with no data", plugin.label);
        let data_file = match api.data_file {
            Some(name) => {
                let named = relative_to(&base, &name);
                let key = format!("{file}: dataFile");
                self.data_file(&key, Some(&named), &named, &then)
                    .map(|_| named)
            }
            None => {
                self.note(format!("{file}: there is no dataFile: {then}."));
                None
            }
        };
        if !self.watched.iter().any(|url| covers(url, &api.base_url)) {
            self.note(format!(
                "{file}: no watched URL covers the baseUrl `{}`, so the API answers nothing; \
                 add it to urlsToWatch (watched: {}).",
                api.base_url,
                backquoted(&self.watched)
            ));
        }
        self.answers(plugin);
        self.config.crud_apis.push(RawCrudApi {
            base_url: api.base_url,
            data_file,
            actions,
        });
    }
}

fn action_kind(name: Option<&str>) -> Option<RawCrudActionKind> {
    // Dev Proxy's default action is getAll, and it reads the names in any case.
    let name = name.unwrap_or("getAll").to_ascii_lowercase();
    Some(match name.as_str() {
        "getall" => RawCrudActionKind::GetAll,
        "getone" => RawCrudActionKind::GetOne,
        "getmany" => RawCrudActionKind::GetMany,
        "create" => RawCrudActionKind::Create,
        "merge" => RawCrudActionKind::Merge,
        "update" => RawCrudActionKind::Update,
        "delete" => RawCrudActionKind::Delete,
        _ => return None,
    })
}

fn is_entra(auth: &str) -> bool {
    auth.eq_ignore_ascii_case("entra")
}

fn is_api_key(auth: &str) -> bool {
    auth.eq_ignore_ascii_case("apiKey")
}

/// `name` in the directory `base`, as a path relative to the configuration's directory.
fn relative_to(base: &Path, name: &str) -> String {
    if base.as_os_str().is_empty() || Path::new(name).is_absolute() {
        name.to_owned()
    } else {
        base.join(name).display().to_string()
    }
}

/// Whether the watched pattern `url` matches the API's base URL (or what is under it).
fn covers(url: &str, base_url: &str) -> bool {
    url.parse::<holdoff_proxy::WatchPattern>()
        .is_ok_and(|pattern| {
            !pattern.is_exclusion()
                && (pattern.matches_url(base_url)
                    || pattern.matches_url(&format!("{}/x", base_url.trim_end_matches('/'))))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    mod action_kind {
        use super::*;

        #[test]
        fn reads_the_names_in_any_case_and_defaults_to_get_all() {
            assert_eq!(action_kind(Some("GetOne")), Some(RawCrudActionKind::GetOne));
            assert_eq!(action_kind(Some("merge")), Some(RawCrudActionKind::Merge));
            assert_eq!(action_kind(None), Some(RawCrudActionKind::GetAll));
            assert_eq!(action_kind(Some("patch")), None);
        }
    }

    mod relative_to {
        use super::*;

        #[test]
        fn names_the_data_file_beside_the_api_file() {
            assert_eq!(
                relative_to(Path::new("apis"), "data.json"),
                "apis/data.json"
            );
            assert_eq!(relative_to(Path::new(""), "data.json"), "data.json");
            assert_eq!(
                relative_to(Path::new("apis"), "/srv/data.json"),
                "/srv/data.json"
            );
        }
    }

    mod covers {
        use super::*;

        #[test]
        fn sees_a_base_url_under_a_watched_pattern() {
            assert!(covers(
                "https://api.contoso.com/*",
                "https://api.contoso.com/v1/customers"
            ));
            assert!(!covers(
                "https://graph.microsoft.com/*",
                "https://api.contoso.com/v1"
            ));
            assert!(!covers(
                "!https://api.contoso.com/*",
                "https://api.contoso.com/v1"
            ));
        }
    }
}
