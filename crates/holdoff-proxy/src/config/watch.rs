//! The watch list: which URLs the proxy looks into, as Dev Proxy's `urlsToWatch`.
//!
//! A pattern is a URL with `*` wildcards (`https://api.example.com/*`, `*.example.com`),
//! matched against the whole URL, `scheme://host[:port]/path?query`, with the port left out
//! when it is the scheme's default, ignoring ASCII case. A leading `!` makes it an exclusion.
//! Patterns are tried in order and the first that matches decides.
//!
//! Before TLS is terminated the proxy knows only the host of a `CONNECT`, so each pattern also
//! yields a host pattern (its host part, without scheme, port or path), as in Dev Proxy. A host
//! is intercepted when the first pattern whose host part matches it is an inclusion. Unlike
//! Dev Proxy, an exclusion of only some paths (`!https://api.example.com/health`) does not stop
//! the whole host from being intercepted; only an exclusion of every path of the host
//! (`!https://cdn.example.com/*`) does.

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

use crate::ascii::u32_text;

/// One entry of the watch list, as written: `https://api.example.com/*` or
/// `!https://api.example.com/health`.
///
/// # Examples
///
/// ```
/// use holdoff_proxy::WatchPattern;
///
/// let pattern: WatchPattern = "!https://*.example.com/health".parse()?;
/// assert!(pattern.is_exclusion());
/// assert_eq!(pattern.as_str(), "!https://*.example.com/health");
/// # Ok::<(), holdoff_proxy::ConfigError>(())
/// ```
#[derive(Clone)]
pub struct WatchPattern {
    /// As written, `!` included: what the pipeline reports as the matching rule.
    raw: Arc<str>,
    exclude: bool,
    /// The URL glob (without the `!`).
    url: Box<str>,
    /// The scheme glob, when the pattern names one (`https`, `http*`).
    scheme: Option<Box<str>>,
    /// The host glob, without the port.
    host: Box<str>,
    /// Whether the pattern covers every path of the hosts it matches.
    whole_host: bool,
}

impl WatchPattern {
    /// The pattern as written, with its `!` if it has one.
    pub fn as_str(&self) -> &str {
        &self.raw
    }

    /// Whether this is an exclusion (`!…`).
    pub fn is_exclusion(&self) -> bool {
        self.exclude
    }

    /// Whether the absolute URL `url` (`scheme://host[:port]/path?query`) matches the
    /// pattern's glob, ignoring ASCII case and whether the pattern is an exclusion.
    pub fn matches_url(&self, url: &str) -> bool {
        glob(
            self.url.as_bytes(),
            &Text {
                parts: [url, "", "", "", "", ""],
            },
        )
    }

    /// Whether the pattern can match an `https://` URL: it names no scheme, or a scheme glob
    /// that `https` matches (`https`, `http*`). Only such an inclusion gets a `CONNECT`
    /// intercepted, and so needs a CA.
    pub(crate) fn can_match_https(&self) -> bool {
        self.scheme.as_deref().is_none_or(|scheme| {
            glob(
                scheme.as_bytes(),
                &Text {
                    parts: ["https", "", "", "", "", ""],
                },
            )
        })
    }

    pub(crate) fn shared(&self) -> &Arc<str> {
        &self.raw
    }
}

impl FromStr for WatchPattern {
    type Err = super::error::ConfigError;

    fn from_str(raw: &str) -> Result<WatchPattern, super::error::ConfigError> {
        let invalid = |reason: &'static str| super::error::ConfigError::WatchPattern {
            pattern: raw.to_owned(),
            reason,
        };
        let (exclude, url) = match raw.strip_prefix('!') {
            Some(rest) => (true, rest),
            None => (false, raw),
        };
        if url.is_empty() {
            return Err(invalid("the pattern is empty"));
        }
        if url
            .bytes()
            .any(|b| b.is_ascii_whitespace() || b.is_ascii_control())
        {
            return Err(invalid(
                "the pattern contains a space or a control character",
            ));
        }
        let (scheme, rest) = match url.split_once("://") {
            Some((scheme, rest)) => (Some(scheme), rest),
            None => (None, url),
        };
        let (authority, path) = match rest.find('/') {
            Some(slash) => rest.split_at(slash),
            None => (rest, ""),
        };
        if authority.is_empty() {
            return Err(invalid("the pattern has no host"));
        }
        let host = strip_port(authority);
        // A host glob that ends in `*` may have swallowed the path (`https://api.*`): it
        // covers the whole host too.
        let whole_host = matches!(path, "" | "/" | "/*" | "*") || path.bytes().all(|b| b == b'*');
        Ok(WatchPattern {
            raw: Arc::from(raw),
            exclude,
            url: url.into(),
            scheme: scheme.map(Into::into),
            host: host.into(),
            whole_host,
        })
    }
}

/// `host:port` → `host`, keeping an IPv6 literal's brackets and colons.
fn strip_port(authority: &str) -> &str {
    if authority.starts_with('[') {
        return match authority.find(']') {
            Some(end) => &authority[..=end],
            None => authority,
        };
    }
    match authority.rfind(':') {
        Some(colon)
            if authority[colon + 1..]
                .bytes()
                .all(|b| b.is_ascii_digit() || b == b'*') =>
        {
            &authority[..colon]
        }
        _ => authority,
    }
}

impl fmt::Debug for WatchPattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("WatchPattern").field(&&*self.raw).finish()
    }
}

impl fmt::Display for WatchPattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.raw)
    }
}

impl PartialEq for WatchPattern {
    fn eq(&self, other: &WatchPattern) -> bool {
        self.raw == other.raw
    }
}

impl Eq for WatchPattern {}

/// The compiled watch list: ordered patterns, first match wins.
#[derive(Clone, Debug, Default)]
pub(crate) struct WatchList {
    patterns: Box<[WatchPattern]>,
}

/// The pieces of a URL, matched as one string without building it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct UrlParts<'a> {
    pub(crate) scheme: &'a str,
    pub(crate) host: &'a str,
    /// The port, when not the scheme's default.
    pub(crate) port: Option<u16>,
    /// Path and query, starting with `/`.
    pub(crate) path_and_query: &'a str,
}

impl WatchList {
    pub(crate) fn new(patterns: impl IntoIterator<Item = WatchPattern>) -> WatchList {
        WatchList {
            patterns: patterns.into_iter().collect(),
        }
    }

    /// The inclusion that watches this URL, or `None` when no pattern matches or the first
    /// match is an exclusion.
    #[cfg(test)]
    pub(crate) fn watching(&self, url: UrlParts<'_>) -> Option<&WatchPattern> {
        self.watching_with(|| url)
    }

    /// The inclusion that watches the URL `url` makes, made only when a pattern needs it: a
    /// list that starts with `*` (a reverse proxy's, by default) decides every request
    /// without looking at it.
    pub(crate) fn watching_with<'u>(
        &self,
        url: impl FnOnce() -> UrlParts<'u>,
    ) -> Option<&WatchPattern> {
        if let Some(first) = self.patterns.first().filter(|first| &*first.url == "*") {
            return (!first.exclude).then_some(first);
        }
        let url = url();
        let mut port_buf = [0; 10];
        let port = url
            .port
            .map(|port| u32_text(u32::from(port), &mut port_buf));
        let text = Text {
            parts: [
                url.scheme,
                "://",
                url.host,
                if port.is_some() { ":" } else { "" },
                port.unwrap_or(""),
                url.path_and_query,
            ],
        };
        self.patterns
            .iter()
            .find(|pattern| glob(pattern.url.as_bytes(), &text))
            .filter(|pattern| !pattern.exclude)
    }

    /// The inclusion that makes a `CONNECT` to `host` intercepted, or `None` to tunnel it.
    pub(crate) fn intercepting(&self, host: &str) -> Option<&WatchPattern> {
        let host_text = Text {
            parts: [host, "", "", "", "", ""],
        };
        for pattern in &self.patterns {
            if !pattern.can_match_https() {
                continue;
            }
            if !glob(pattern.host.as_bytes(), &host_text) {
                continue;
            }
            if !pattern.exclude {
                return Some(pattern);
            }
            if pattern.whole_host {
                return None;
            }
            // An exclusion of some paths only: other paths of this host may still be watched.
        }
        None
    }
}

/// A string given in pieces, indexed as if concatenated.
struct Text<'a> {
    parts: [&'a str; 6],
}

impl Text<'_> {
    fn len(&self) -> usize {
        self.parts.iter().map(|part| part.len()).sum()
    }

    fn at(&self, mut index: usize) -> u8 {
        for part in &self.parts {
            if index < part.len() {
                return part.as_bytes()[index];
            }
            index -= part.len();
        }
        0
    }
}

/// Whether `pattern` (where `*` matches any run of bytes, and nothing else is special)
/// matches all of `text`, ignoring ASCII case. Linear backtracking over the last star: at
/// most `pattern.len() × text.len()` steps.
fn glob(pattern: &[u8], text: &Text<'_>) -> bool {
    let len = text.len();
    let (mut p, mut t) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while t < len {
        match pattern.get(p) {
            Some(b'*') => {
                star = Some((p, t));
                p += 1;
            }
            Some(&c) if c.eq_ignore_ascii_case(&text.at(t)) => {
                p += 1;
                t += 1;
            }
            _ => match star {
                Some((star_p, star_t)) => {
                    p = star_p + 1;
                    t = star_t + 1;
                    star = Some((star_p, star_t + 1));
                }
                None => return false,
            },
        }
    }
    pattern[p.min(pattern.len())..].iter().all(|&c| c == b'*')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(patterns: &[&str]) -> WatchList {
        WatchList::new(patterns.iter().map(|p| p.parse().unwrap()))
    }

    fn url<'a>(scheme: &'a str, host: &'a str, port: Option<u16>, path: &'a str) -> UrlParts<'a> {
        UrlParts {
            scheme,
            host,
            port,
            path_and_query: path,
        }
    }

    mod glob {
        use super::*;

        fn matches(pattern: &str, text: &str) -> bool {
            glob(
                pattern.as_bytes(),
                &Text {
                    parts: [text, "", "", "", "", ""],
                },
            )
        }

        #[test]
        fn matches_literals_exactly_and_ignores_ascii_case() {
            assert!(matches("api.example.com", "API.Example.com"));
            assert!(!matches("api.example.com", "api.example.co"));
            assert!(!matches("api.example.co", "api.example.com"));
        }

        #[test]
        fn lets_a_star_match_any_run_including_none() {
            assert!(matches("*", ""));
            assert!(matches("*", "anything/at all"));
            assert!(matches("*.example.com", "a.b.example.com"));
            assert!(!matches("*.example.com", "example.com"));
            assert!(matches("a*b*c", "abc"));
            assert!(matches("a*b*c", "a-b-b-c"));
            assert!(!matches("a*b*c", "a-b-b-"));
            assert!(matches("**", "x"));
        }

        #[test]
        fn treats_regex_characters_as_literals() {
            assert!(matches("/v1/items?id=1", "/v1/items?id=1"));
            assert!(!matches("a.c", "abc"));
        }
    }

    mod watching {
        use super::*;

        #[test]
        fn decides_at_a_leading_star_without_making_the_url() {
            let unused = || -> UrlParts<'static> { panic!("the URL was not needed") };
            let everything = list(&["*", "!https://a.com/*"]);
            let found = everything.watching_with(unused);
            assert_eq!(found.map(WatchPattern::as_str), Some("*"));
            assert!(list(&["!*", "*"]).watching_with(unused).is_none());
            // Anything else looks at the URL.
            let dot_com = list(&["*.com*", "*"]);
            let found = dot_com.watching(url("https", "a.com", None, "/"));
            assert_eq!(found.map(WatchPattern::as_str), Some("*.com*"));
        }

        #[test]
        fn watches_nothing_without_patterns() {
            assert!(
                list(&[])
                    .watching(url("https", "a.com", None, "/"))
                    .is_none()
            );
        }

        #[test]
        fn matches_the_whole_url_and_names_the_pattern() {
            let watch = list(&["https://api.example.com/v1/*"]);
            let found = watch.watching(url("https", "api.example.com", None, "/v1/chat?x=1"));
            assert_eq!(
                found.map(WatchPattern::as_str),
                Some("https://api.example.com/v1/*")
            );
            assert!(
                watch
                    .watching(url("https", "api.example.com", None, "/v2/chat"))
                    .is_none()
            );
            assert!(
                watch
                    .watching(url("http", "api.example.com", None, "/v1/chat"))
                    .is_none()
            );
        }

        #[test]
        fn writes_a_port_only_when_it_is_not_the_default() {
            let watch = list(&["http://127.0.0.1:3000/*"]);
            assert!(
                watch
                    .watching(url("http", "127.0.0.1", Some(3000), "/x"))
                    .is_some()
            );
            assert!(
                watch
                    .watching(url("http", "127.0.0.1", None, "/x"))
                    .is_none()
            );
            let any_port = list(&["http://127.0.0.1:*/*"]);
            assert!(
                any_port
                    .watching(url("http", "127.0.0.1", Some(65535), "/"))
                    .is_some()
            );
        }

        #[test]
        fn lets_the_first_match_decide() {
            let watch = list(&[
                "!https://api.example.com/health",
                "https://api.example.com/*",
            ]);
            assert!(
                watch
                    .watching(url("https", "api.example.com", None, "/health"))
                    .is_none()
            );
            assert!(
                watch
                    .watching(url("https", "api.example.com", None, "/v1"))
                    .is_some()
            );

            let reversed = list(&[
                "https://api.example.com/*",
                "!https://api.example.com/health",
            ]);
            assert!(
                reversed
                    .watching(url("https", "api.example.com", None, "/health"))
                    .is_some()
            );
        }
    }

    mod intercepting {
        use super::*;

        #[test]
        fn intercepts_hosts_named_by_an_inclusion() {
            let watch = list(&["https://*.example.com/*"]);
            assert!(watch.intercepting("api.example.com").is_some());
            assert!(watch.intercepting("example.org").is_none());
        }

        #[test]
        fn ignores_the_port_and_path_of_a_pattern() {
            let watch = list(&["https://127.0.0.1:8443/api/*"]);
            assert!(watch.intercepting("127.0.0.1").is_some());
        }

        #[test]
        fn skips_patterns_for_another_scheme() {
            let watch = list(&["http://api.example.com/*"]);
            assert!(watch.intercepting("api.example.com").is_none());
            let any = list(&["*://api.example.com/*", "api.example.org"]);
            assert!(any.intercepting("api.example.com").is_some());
            assert!(any.intercepting("api.example.org").is_some());
        }

        #[test]
        fn tunnels_a_host_excluded_as_a_whole() {
            let watch = list(&["!https://cdn.example.com/*", "https://*.example.com/*"]);
            assert!(watch.intercepting("cdn.example.com").is_none());
            assert!(watch.intercepting("api.example.com").is_some());
        }

        #[test]
        fn still_intercepts_a_host_with_only_some_paths_excluded() {
            let watch = list(&[
                "!https://api.example.com/health",
                "https://api.example.com/*",
            ]);
            assert!(watch.intercepting("api.example.com").is_some());
        }

        #[test]
        fn keeps_the_brackets_of_an_ipv6_host() {
            let watch = list(&["https://[::1]:8443/*"]);
            assert!(watch.intercepting("[::1]").is_some());
        }
    }

    mod from_str {
        use super::*;

        #[test]
        fn rejects_empty_and_spaced_patterns() {
            for bad in ["", "!", "https://a b/", "https:///x"] {
                assert!(bad.parse::<WatchPattern>().is_err(), "{bad:?}");
            }
        }

        #[test]
        fn accepts_a_bare_host_or_star() {
            for good in ["*", "api.example.com", "*.example.com:443", "!*"] {
                assert!(good.parse::<WatchPattern>().is_ok(), "{good:?}");
            }
        }
    }
}
