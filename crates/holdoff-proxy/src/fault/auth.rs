//! An API that wants a key: requests without an allowed one are refused `401`, as Dev Proxy's
//! AuthPlugin does in its API-key mode.
//!
//! Pure: [`AuthRule::authorizes`] reads only the request's head.

use http::{HeaderMap, Uri, header};

use crate::config::WatchPattern;

/// Where a key is looked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum KeyIn {
    /// A request header (the name matched in any case).
    Header,
    /// A query parameter (the name matched exactly; the value percent-decoded).
    Query,
    /// A cookie of the `Cookie` header (the name matched exactly).
    Cookie,
}

/// One place a key may be: `x-api-key` in a header, `code` in the query, ….
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyParameter {
    /// Where.
    pub location: KeyIn,
    /// The header, parameter or cookie name.
    pub name: String,
}

/// Requests to `url` must carry one of `allowed_keys` in one of `parameters` (the first
/// parameter the request has decides, as in Dev Proxy).
#[derive(Clone, Debug)]
pub struct AuthRule {
    /// Which requests; `None` for every watched one.
    pub url: Option<WatchPattern>,
    /// Where the key is looked for, in order.
    pub parameters: Vec<KeyParameter>,
    /// The keys let through.
    pub allowed_keys: Vec<String>,
}

/// Why a request was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refused {
    /// It has none of the parameters.
    NoKey,
    /// The key it has is not allowed.
    KeyNotAllowed,
}

impl Refused {
    /// One line, for the log.
    pub fn as_str(self) -> &'static str {
        match self {
            Refused::NoKey => "no API key",
            Refused::KeyNotAllowed => "the API key is not allowed",
        }
    }
}

impl AuthRule {
    /// Whether the rule applies to a request to `url`.
    pub(crate) fn covers(&self, url: &str) -> bool {
        self.url
            .as_ref()
            .is_none_or(|pattern| pattern.matches_url(url))
    }

    /// `Ok` when a request with `headers` to `uri` carries an allowed key, else why not.
    pub fn authorizes(&self, headers: &HeaderMap, uri: &Uri) -> Result<(), Refused> {
        match self.key(headers, uri) {
            None => Err(Refused::NoKey),
            Some(key) if self.allowed_keys.contains(&key) => Ok(()),
            Some(_) => Err(Refused::KeyNotAllowed),
        }
    }

    /// The key of the first parameter the request has.
    fn key(&self, headers: &HeaderMap, uri: &Uri) -> Option<String> {
        self.parameters
            .iter()
            .find_map(|parameter| match parameter.location {
                KeyIn::Header => headers
                    .get(parameter.name.as_str())
                    .and_then(|value| value.to_str().ok())
                    .map(str::to_owned),
                KeyIn::Query => uri.query().and_then(|query| {
                    form_urlencoded::parse(query.as_bytes())
                        .find(|(name, _)| *name == parameter.name)
                        .map(|(_, value)| value.into_owned())
                }),
                KeyIn::Cookie => headers
                    .get_all(header::COOKIE)
                    .iter()
                    .filter_map(|value| value.to_str().ok())
                    .flat_map(|value| value.split(';'))
                    .filter_map(|pair| pair.split_once('='))
                    .find(|(name, _)| name.trim() == parameter.name)
                    .map(|(_, value)| value.trim().to_owned()),
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule() -> AuthRule {
        let parameter = |location, name: &str| KeyParameter {
            location,
            name: name.to_owned(),
        };
        AuthRule {
            url: None,
            parameters: vec![
                parameter(KeyIn::Header, "x-api-key"),
                parameter(KeyIn::Query, "code"),
                parameter(KeyIn::Cookie, "api_key"),
            ],
            allowed_keys: vec!["secret-key-123".to_owned(), "dev key".to_owned()],
        }
    }

    fn head(uri: &str, headers: &[(&str, &str)]) -> (HeaderMap, Uri) {
        let mut map = HeaderMap::new();
        for (name, value) in headers {
            map.append(
                http::HeaderName::from_bytes(name.as_bytes()).unwrap(),
                value.parse().unwrap(),
            );
        }
        (map, uri.parse().unwrap())
    }

    impl AuthRule {
        fn lets(&self, (headers, uri): (HeaderMap, Uri)) -> Result<(), Refused> {
            self.authorizes(&headers, &uri)
        }
    }

    #[test]
    fn lets_an_allowed_key_through_wherever_it_is() {
        let rule = rule();
        let api = "https://api.contoso.test/orders";
        assert_eq!(
            rule.lets(head(api, &[("X-API-Key", "secret-key-123")])),
            Ok(())
        );
        assert_eq!(
            rule.lets(head(&format!("{api}?a=1&code=dev%20key"), &[])),
            Ok(())
        );
        assert_eq!(
            rule.lets(head(api, &[("cookie", "theme=dark; api_key=dev key")])),
            Ok(())
        );
    }

    #[test]
    fn refuses_no_key_and_a_key_not_allowed() {
        let rule = rule();
        let api = "https://api.contoso.test/orders";
        assert_eq!(rule.lets(head(api, &[])), Err(Refused::NoKey));
        assert_eq!(
            rule.lets(head(api, &[("x-api-key", "guess")])),
            Err(Refused::KeyNotAllowed)
        );
        // The first parameter present decides, as in Dev Proxy: a wrong header key is not
        // rescued by a right query key.
        assert_eq!(
            rule.lets(head(
                &format!("{api}?code=secret-key-123"),
                &[("x-api-key", "guess")]
            )),
            Err(Refused::KeyNotAllowed)
        );
        assert_eq!(
            rule.lets(head(&format!("{api}?codes=secret-key-123"), &[])),
            Err(Refused::NoKey)
        );
    }
}
