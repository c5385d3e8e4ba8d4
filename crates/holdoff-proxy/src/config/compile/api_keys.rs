//! `auth`: the API keys a watched API wants.

use super::matching::Exclusion;
use super::{Compiler, WrittenIn, optional};
use crate::config::error::key;
use crate::config::file::{RawAuth, RawKeyIn};
use crate::fault::auth::{AuthRule, KeyIn, KeyParameter};

impl Compiler {
    /// Every rule of `auth`, added to `rules`.
    pub(super) fn auth(&mut self, at: WrittenIn<'_>, raw: &[RawAuth], rules: &mut Vec<AuthRule>) {
        self.list(at, "auth", raw, rules, |this, at, path, raw| {
            this.auth_rule(at, path, raw)
        });
    }

    fn auth_rule(&mut self, at: WrittenIn<'_>, path: &str, raw: &RawAuth) -> Option<AuthRule> {
        let url = optional(raw.url.as_deref(), |url| {
            self.pattern(at, key(path, "url"), url, Exclusion::Refused)
        });
        let api_key = key(path, "apiKey");
        let mut valid = true;
        if raw.api_key.parameters.is_empty() {
            self.error(
                at,
                key(&api_key, "parameters"),
                "there are no parameters: name where a request carries its key, such as \
                 {\"in\": \"header\", \"name\": \"x-api-key\"}",
            );
            valid = false;
        }
        if raw.api_key.allowed_keys.is_empty() {
            self.error(
                at,
                key(&api_key, "allowedKeys"),
                "there are no allowed keys: every request would be refused; list the keys to \
                 let through",
            );
            valid = false;
        }
        let mut parameters = Vec::with_capacity(raw.api_key.parameters.len());
        for (i, parameter) in raw.api_key.parameters.iter().enumerate() {
            let location = match parameter.location {
                RawKeyIn::Header => KeyIn::Header,
                RawKeyIn::Query => KeyIn::Query,
                RawKeyIn::Cookie => KeyIn::Cookie,
            };
            if location == KeyIn::Header
                && http::HeaderName::from_bytes(parameter.name.as_bytes()).is_err()
            {
                self.error(
                    at,
                    key(
                        &crate::config::error::index(&key(&api_key, "parameters"), i),
                        "name",
                    ),
                    format!("`{}` is not a header name", parameter.name),
                );
                valid = false;
            }
            parameters.push(KeyParameter {
                location,
                name: parameter.name.clone(),
            });
        }
        if !valid {
            return None;
        }
        Some(AuthRule {
            url: url?,
            parameters,
            allowed_keys: raw.api_key.allowed_keys.clone(),
        })
    }
}
