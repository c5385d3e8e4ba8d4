//! `auth`: the API keys or bearer tokens a watched API wants.

use super::matching::Exclusion;
use super::{Compiler, WrittenIn, optional};
use crate::error::key;
use crate::file::{RawApiKey, RawAuth, RawKeyIn};
use holdoff_proxy::fault::{AuthCheck, AuthRule, BearerCheck, KeyIn, KeyParameter};

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
        let check = match (&raw.api_key, &raw.bearer) {
            (Some(api_key), None) => self.api_key(at, &key(path, "apiKey"), api_key)?,
            (None, Some(bearer)) => AuthCheck::Bearer(BearerCheck {
                issuer: bearer.issuer.clone(),
                audiences: bearer.allowed_audiences.clone(),
                tenants: bearer.allowed_tenants.clone(),
                applications: bearer.allowed_applications.clone(),
                principals: bearer.allowed_principals.clone(),
                roles: bearer.roles.clone(),
                scopes: bearer.scopes.clone(),
                validate_lifetime: bearer.validate_lifetime.unwrap_or(true),
            }),
            _ => {
                self.error(
                    at,
                    path,
                    "give one of `apiKey` (a key in a header, query parameter or cookie) or \
                     `bearer` (a token's claims)",
                );
                return None;
            }
        };
        Some(AuthRule { url: url?, check })
    }

    fn api_key(&mut self, at: WrittenIn<'_>, api_key: &str, raw: &RawApiKey) -> Option<AuthCheck> {
        let mut valid = true;
        if raw.parameters.is_empty() {
            self.error(
                at,
                key(api_key, "parameters"),
                "there are no parameters: name where a request carries its key, such as \
                 {\"in\": \"header\", \"name\": \"x-api-key\"}",
            );
            valid = false;
        }
        if raw.allowed_keys.is_empty() {
            self.error(
                at,
                key(api_key, "allowedKeys"),
                "there are no allowed keys: every request would be refused; list the keys to \
                 let through",
            );
            valid = false;
        }
        let mut parameters = Vec::with_capacity(raw.parameters.len());
        for (i, parameter) in raw.parameters.iter().enumerate() {
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
                    key(&crate::error::index(&key(api_key, "parameters"), i), "name"),
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
        Some(AuthCheck::ApiKey {
            parameters,
            allowed_keys: raw.allowed_keys.clone(),
        })
    }
}
