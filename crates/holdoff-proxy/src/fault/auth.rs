//! An API that wants a key or a bearer token: requests without an allowed one are refused
//! `401`, as Dev Proxy's AuthPlugin does in its API-key and OAuth2 modes.
//!
//! Pure: [`AuthRule::authorizes`] reads only the request's head and the time it is given.

use std::time::{SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use http::{HeaderMap, Uri, header};
use serde_json::Value;

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

/// Requests to `url` must pass `check`.
#[derive(Clone, Debug)]
pub struct AuthRule {
    /// Which requests; `None` for every watched one.
    pub url: Option<WatchPattern>,
    /// What they must carry.
    pub check: AuthCheck,
}

/// What a request must carry.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub enum AuthCheck {
    /// One of `allowed_keys` in one of `parameters` (the first parameter the request has
    /// decides, as in Dev Proxy).
    ApiKey {
        /// Where the key is looked for, in order.
        parameters: Vec<KeyParameter>,
        /// The keys let through.
        allowed_keys: Vec<String>,
    },
    /// `Authorization: Bearer <JWT>` whose claims pass.
    Bearer(BearerCheck),
}

/// The claims a bearer token (a JWT) must have. Its signature is not checked: that needs the
/// identity provider's keys, which the proxy does not fetch. An empty list allows any value.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BearerCheck {
    /// `iss`, when set.
    pub issuer: Option<String>,
    /// `aud` (one of them, when it is a list).
    pub audiences: Vec<String>,
    /// `tid`.
    pub tenants: Vec<String>,
    /// `appid` (v1 tokens) or `azp` (v2).
    pub applications: Vec<String>,
    /// `oid`.
    pub principals: Vec<String>,
    /// One of them in `roles`.
    pub roles: Vec<String>,
    /// One of them in `scp` (space-separated).
    pub scopes: Vec<String>,
    /// Whether `exp` and `nbf` are checked against the time.
    pub validate_lifetime: bool,
}

/// Why a request was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub(crate) enum Refused {
    /// It has none of the parameters.
    NoKey,
    /// The key it has is not allowed.
    KeyNotAllowed,
    /// It has no `Authorization: Bearer` token.
    NoToken,
    /// Its token is not a JWT with a JSON payload.
    NotAToken,
    /// Its token has expired, or is not valid yet.
    Lifetime,
    /// A claim of its token is not allowed (its name).
    Claim(&'static str),
}

impl Refused {
    /// One line, for the log.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Refused::NoKey => "no API key",
            Refused::KeyNotAllowed => "the API key is not allowed",
            Refused::NoToken => "no bearer token",
            Refused::NotAToken => "the bearer token is not a JWT",
            Refused::Lifetime => "the bearer token has expired or is not valid yet",
            Refused::Claim(claim) => claim,
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

    /// `Ok` when a request with `headers` to `uri`, at `now`, carries what the rule wants,
    /// else why not.
    pub(crate) fn authorizes(
        &self,
        headers: &HeaderMap,
        uri: &Uri,
        now: SystemTime,
    ) -> Result<(), Refused> {
        match &self.check {
            AuthCheck::ApiKey {
                parameters,
                allowed_keys,
            } => match key(parameters, headers, uri) {
                None => Err(Refused::NoKey),
                Some(key) if allowed_keys.contains(&key) => Ok(()),
                Some(_) => Err(Refused::KeyNotAllowed),
            },
            AuthCheck::Bearer(check) => check.authorizes(headers, now),
        }
    }
}

impl BearerCheck {
    fn authorizes(&self, headers: &HeaderMap, now: SystemTime) -> Result<(), Refused> {
        let token = headers
            .get(header::AUTHORIZATION)
            .and_then(|value| value.to_str().ok())
            .and_then(|value| value.strip_prefix("Bearer "))
            .map(str::trim)
            .ok_or(Refused::NoToken)?;
        let claims = payload(token).ok_or(Refused::NotAToken)?;
        let text = |name: &str| claims.get(name).and_then(Value::as_str);
        if self.validate_lifetime {
            let now = now
                .duration_since(UNIX_EPOCH)
                .map_or(0, |since| since.as_secs());
            let at = |name: &str| claims.get(name).and_then(Value::as_u64);
            if at("exp").is_some_and(|exp| exp <= now) || at("nbf").is_some_and(|nbf| nbf > now) {
                return Err(Refused::Lifetime);
            }
        }
        if self
            .issuer
            .as_deref()
            .is_some_and(|issuer| text("iss") != Some(issuer))
        {
            return Err(Refused::Claim("the token's issuer (iss) is not allowed"));
        }
        let audiences: Vec<&str> = match claims.get("aud") {
            Some(Value::String(one)) => vec![one.as_str()],
            Some(Value::Array(many)) => many.iter().filter_map(Value::as_str).collect(),
            _ => Vec::new(),
        };
        let allows = |allowed: &[String], found: &[&str]| {
            allowed.is_empty() || found.iter().any(|value| allowed.iter().any(|a| a == value))
        };
        if !allows(&self.audiences, &audiences) {
            return Err(Refused::Claim("the token's audience (aud) is not allowed"));
        }
        let one = |name: &str| text(name).into_iter().collect::<Vec<_>>();
        if !allows(&self.tenants, &one("tid")) {
            return Err(Refused::Claim("the token's tenant (tid) is not allowed"));
        }
        let mut application = one("appid");
        application.extend(one("azp"));
        if !allows(&self.applications, &application) {
            return Err(Refused::Claim(
                "the token's application (appid, azp) is not allowed",
            ));
        }
        if !allows(&self.principals, &one("oid")) {
            return Err(Refused::Claim("the token's principal (oid) is not allowed"));
        }
        let roles: Vec<&str> = claims
            .get("roles")
            .and_then(Value::as_array)
            .map(|roles| roles.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        if !allows(&self.roles, &roles) {
            return Err(Refused::Claim("the token has none of the roles wanted"));
        }
        let scopes: Vec<&str> = text("scp")
            .map(|scp| scp.split(' ').collect())
            .unwrap_or_default();
        if !allows(&self.scopes, &scopes) {
            return Err(Refused::Claim("the token has none of the scopes wanted"));
        }
        Ok(())
    }
}

/// The claims of a JWT: its second part, base64url-decoded, as a JSON object.
fn payload(token: &str) -> Option<serde_json::Map<String, Value>> {
    let mut parts = token.split('.');
    let (_header, body, _signature) = (parts.next()?, parts.next()?, parts.next()?);
    if parts.next().is_some() {
        return None;
    }
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(body.trim_end_matches('='))
        .ok()?;
    match serde_json::from_slice(&bytes).ok()? {
        Value::Object(claims) => Some(claims),
        _ => None,
    }
}

/// The key of the first of `parameters` the request has.
fn key(parameters: &[KeyParameter], headers: &HeaderMap, uri: &Uri) -> Option<String> {
    {
        parameters
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
            check: AuthCheck::ApiKey {
                parameters: vec![
                    parameter(KeyIn::Header, "x-api-key"),
                    parameter(KeyIn::Query, "code"),
                    parameter(KeyIn::Cookie, "api_key"),
                ],
                allowed_keys: vec!["secret-key-123".to_owned(), "dev key".to_owned()],
            },
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
            self.authorizes(&headers, &uri, UNIX_EPOCH)
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

    mod bearer {
        use std::time::Duration;

        use super::*;

        /// A JWT with `claims` (unsigned: the signature is not checked).
        fn jwt(claims: &Value) -> String {
            let part = |value: &Value| {
                base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(value.to_string())
            };
            format!(
                "{}.{}.sig",
                part(&serde_json::json!({"alg": "RS256"})),
                part(claims)
            )
        }

        fn check(token: Option<&str>, rule: &BearerCheck, now: u64) -> Result<(), Refused> {
            let mut headers = HeaderMap::new();
            if let Some(token) = token {
                headers.insert(
                    header::AUTHORIZATION,
                    format!("Bearer {token}").parse().unwrap(),
                );
            }
            let rule = AuthRule {
                url: None,
                check: AuthCheck::Bearer(rule.clone()),
            };
            let now = UNIX_EPOCH + Duration::from_secs(now);
            rule.authorizes(&headers, &"https://api.contoso.test/".parse().unwrap(), now)
        }

        fn rule() -> BearerCheck {
            BearerCheck {
                issuer: Some("https://login.example/tenant/v2.0".to_owned()),
                audiences: vec!["api://contoso".to_owned()],
                scopes: vec!["Orders.Read".to_owned()],
                validate_lifetime: true,
                ..BearerCheck::default()
            }
        }

        #[test]
        fn lets_a_token_with_the_claims_through() {
            let token = jwt(&serde_json::json!({
                "iss": "https://login.example/tenant/v2.0",
                "aud": ["other", "api://contoso"],
                "scp": "Orders.Write Orders.Read",
                "exp": 2_000, "nbf": 1_000
            }));
            assert_eq!(check(Some(&token), &rule(), 1_500), Ok(()));
        }

        #[test]
        fn refuses_no_token_a_malformed_one_and_each_claim_that_is_off() {
            let claims = serde_json::json!({
                "iss": "https://login.example/tenant/v2.0",
                "aud": "api://contoso",
                "scp": "Orders.Read",
                "exp": 2_000
            });
            assert_eq!(check(None, &rule(), 1_500), Err(Refused::NoToken));
            assert_eq!(check(Some("abc"), &rule(), 1_500), Err(Refused::NotAToken));
            assert_eq!(
                check(Some("a.!!.c"), &rule(), 1_500),
                Err(Refused::NotAToken)
            );
            let token = jwt(&claims);
            assert_eq!(check(Some(&token), &rule(), 2_000), Err(Refused::Lifetime));
            let lenient = BearerCheck {
                validate_lifetime: false,
                ..rule()
            };
            assert_eq!(check(Some(&token), &lenient, 2_000), Ok(()));
            for (claim, value) in [
                ("iss", "https://evil.example"),
                ("aud", "api://other"),
                ("scp", "Orders.Write"),
            ] {
                let mut changed = claims.clone();
                changed[claim] = serde_json::json!(value);
                let refused = check(Some(&jwt(&changed)), &rule(), 1_500);
                assert!(
                    matches!(refused, Err(Refused::Claim(_))),
                    "{claim}: {refused:?}"
                );
            }
        }
    }
}
