//! What picks requests: `urlsToWatch`, and a rule's `url` and `method`.

use http::Method;

use super::{Compiler, WrittenIn, optional};
use crate::error::{index, key};
use crate::file::RawRequestMatch;
use holdoff_proxy::WatchPattern;
use holdoff_proxy::fault::RequestMatch;

impl Compiler {
    /// `urlsToWatch`: exclusions allowed.
    pub(super) fn urls_to_watch(
        &mut self,
        at: WrittenIn<'_>,
        urls: &[String],
    ) -> Vec<WatchPattern> {
        urls.iter()
            .enumerate()
            .filter_map(|(i, url)| {
                self.pattern(at, index("urlsToWatch", i), url, Exclusion::Allowed)
            })
            .collect()
    }

    pub(super) fn pattern(
        &mut self,
        at: WrittenIn<'_>,
        path: String,
        raw: &str,
        exclusion: Exclusion,
    ) -> Option<WatchPattern> {
        if exclusion == Exclusion::Refused && raw.starts_with('!') {
            self.error(
                at,
                path,
                format!(
                    "`{raw}` starts with `!`: a rule's URL pattern says which requests it \
                     applies to, and cannot exclude (exclusions go in urlsToWatch)"
                ),
            );
            return None;
        }
        match raw.parse::<WatchPattern>() {
            Ok(pattern) => Some(pattern),
            Err(_) if raw.is_empty() => {
                self.error(
                    at,
                    path,
                    "the URL pattern is empty: write a URL with `*` wildcards, such as \
                     https://api.example.com/* or *",
                );
                None
            }
            Err(err) => {
                self.error(
                    at,
                    path,
                    format!(
                        "{err}; a pattern is a URL with `*` wildcards, such as \
                         https://api.example.com/* or *"
                    ),
                );
                None
            }
        }
    }

    pub(super) fn method(&mut self, at: WrittenIn<'_>, path: String, raw: &str) -> Option<Method> {
        match Method::from_bytes(raw.trim().to_ascii_uppercase().as_bytes()) {
            Ok(method) if !raw.trim().is_empty() => Some(method),
            _ if raw.trim().is_empty() => {
                self.error(
                    at,
                    path,
                    "the method is empty: leave `method` out to match any, or write one such as \
                     GET or POST",
                );
                None
            }
            _ => {
                self.error(
                    at,
                    path,
                    format!(
                        "invalid method `{raw}`: expected a method name such as GET, POST or \
                         DELETE (letters, digits and !#$%&'*+-.^_`|~ only)"
                    ),
                );
                None
            }
        }
    }

    pub(super) fn request(
        &mut self,
        at: WrittenIn<'_>,
        path: &str,
        raw: &RawRequestMatch,
    ) -> Option<RequestMatch> {
        let url = self.pattern(at, key(path, "url"), &raw.url, Exclusion::Refused);
        let method = optional(raw.method.as_deref(), |method| {
            self.method(at, key(path, "method"), method)
        });
        Some(RequestMatch {
            url: url?,
            method: method?,
            body_fragment: raw.body_fragment.clone(),
        })
    }
}

/// Whether a rule's URL pattern may be an exclusion.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Exclusion {
    /// `urlsToWatch`.
    Allowed,
    /// A rule's own URL: it picks requests, it cannot exclude them.
    Refused,
}
