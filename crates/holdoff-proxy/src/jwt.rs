//! Bearer tokens for testing APIs that want one, made as Dev Proxy's `devproxy jwt create`
//! and its API's `POST /proxy/jwtToken` make them: a JWT signed with HMAC-SHA256, claims
//! `sub`, `jti`, `scp`, `roles`, `aud`, `iss`, `nbf`, `exp` and `iat`, and any others given.
//!
//! The encoding is written here, over the `hmac` and `sha2` crates: a signed JWT is three
//! base64url parts and one MAC, and the JWT crates' weight is in validation and the other
//! algorithms, which this never needs.

use std::collections::BTreeMap;
use std::fmt;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use hmac::{Hmac, KeyInit, Mac};
use rand::Rng as _;
use serde::Deserialize;
use serde_json::{Map, Value, json};
use sha2::Sha256;

/// What a token says, as Dev Proxy takes it (JSON keys in camelCase); what is left out gets
/// Dev Proxy's default.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct JwtOptions {
    /// `sub`, and the name; default `Dev Proxy`.
    pub name: Option<String>,
    /// `aud`, one claim each; default `https://myserver.com`.
    pub audiences: Option<Vec<String>>,
    /// `iss`; default `dev-proxy`.
    pub issuer: Option<String>,
    /// `roles`, one claim each.
    pub roles: Option<Vec<String>>,
    /// `scp`, one claim each.
    pub scopes: Option<Vec<String>>,
    /// Other claims; the registered ones (`iss`, `sub`, `aud`, `exp`, `nbf`, `iat`, `jti`) and
    /// `scp` and `roles` are left out, as Dev Proxy leaves them.
    pub claims: Option<BTreeMap<String, String>>,
    /// Minutes the token is valid for; default 60.
    pub valid_for: Option<f64>,
    /// The HMAC key, at least 32 characters; default: 32 random hex digits.
    pub signing_key: Option<String>,
}

/// Why no token was made.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum JwtError {
    /// The signing key is shorter than 32 characters.
    KeyTooShort,
    /// `valid_for` is not a positive number of minutes.
    BadValidity,
}

impl fmt::Display for JwtError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            JwtError::KeyTooShort => f.write_str(
                "the signing key is too short: it must be at least 32 characters (leave it out \
                 for a random one)",
            ),
            JwtError::BadValidity => {
                f.write_str("the validity must be a positive number of minutes")
            }
        }
    }
}

impl std::error::Error for JwtError {}

/// Claims Dev Proxy does not let `claims` set.
const RESERVED: [&str; 9] = [
    "iss", "sub", "aud", "exp", "nbf", "iat", "jti", "scp", "roles",
];

/// A signed token for `options`, issued at `now`.
///
/// # Errors
///
/// A signing key shorter than 32 characters, or a validity that is not positive.
///
/// # Examples
///
/// ```
/// use std::time::{Duration, UNIX_EPOCH};
/// use holdoff_proxy::jwt::{JwtOptions, create};
///
/// let now = UNIX_EPOCH + Duration::from_secs(1_800_000_000);
/// let token = create(&JwtOptions::default(), now)?;
/// assert_eq!(token.split('.').count(), 3);
/// # Ok::<(), holdoff_proxy::jwt::JwtError>(())
/// ```
pub fn create(options: &JwtOptions, now: SystemTime) -> Result<String, JwtError> {
    let key = match &options.signing_key {
        Some(key) if key.chars().count() < 32 => return Err(JwtError::KeyTooShort),
        Some(key) => key.clone(),
        None => {
            let bytes: [u8; 16] = rand::rng().random();
            bytes.iter().map(|b| format!("{b:02x}")).collect()
        }
    };
    let minutes = options.valid_for.unwrap_or(60.0);
    if !(minutes.is_finite() && minutes > 0.0) {
        return Err(JwtError::BadValidity);
    }
    let issued = now.duration_since(UNIX_EPOCH).unwrap_or_default().as_secs();
    let expires = issued + Duration::from_secs_f64(minutes * 60.0).as_secs();
    let name = options.name.as_deref().unwrap_or("Dev Proxy");
    let jti: u32 = rand::rng().random();
    let mut claims = Map::new();
    claims.insert("unique_name".into(), json!(name));
    claims.insert("sub".into(), json!(name));
    claims.insert("jti".into(), json!(format!("{jti:x}")));
    let many = |values: &[String]| match values {
        [one] => json!(one),
        many => json!(many),
    };
    if let Some(scopes) = options.scopes.as_deref().filter(|s| !s.is_empty()) {
        claims.insert("scp".into(), many(scopes));
    }
    if let Some(roles) = options.roles.as_deref().filter(|r| !r.is_empty()) {
        claims.insert("roles".into(), many(roles));
    }
    for (claim, value) in options.claims.iter().flatten() {
        if !RESERVED
            .iter()
            .any(|reserved| reserved.eq_ignore_ascii_case(claim))
        {
            claims.insert(claim.clone(), json!(value));
        }
    }
    let default_audience = ["https://myserver.com".to_owned()];
    let audiences = options.audiences.as_deref().unwrap_or(&default_audience);
    if !audiences.is_empty() {
        claims.insert("aud".into(), many(audiences));
    }
    claims.insert("nbf".into(), json!(issued));
    claims.insert("exp".into(), json!(expires));
    claims.insert("iat".into(), json!(issued));
    claims.insert(
        "iss".into(),
        json!(options.issuer.as_deref().unwrap_or("dev-proxy")),
    );
    let header = json!({ "alg": "HS256", "typ": "JWT" });
    let signed = format!(
        "{}.{}",
        URL_SAFE_NO_PAD.encode(header.to_string()),
        URL_SAFE_NO_PAD.encode(Value::Object(claims).to_string())
    );
    let mut mac =
        <Hmac<Sha256> as KeyInit>::new_from_slice(key.as_bytes()).expect("HMAC takes any key");
    mac.update(signed.as_bytes());
    let signature = mac.finalize().into_bytes();
    Ok(format!("{signed}.{}", URL_SAFE_NO_PAD.encode(signature)))
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &str = "0123456789abcdef0123456789abcdef";

    fn part(token: &str, index: usize) -> Value {
        let text = token.split('.').nth(index).expect("a part");
        serde_json::from_slice(&URL_SAFE_NO_PAD.decode(text).expect("base64url")).expect("JSON")
    }

    #[test]
    fn is_signed_with_the_key_and_says_what_was_asked() {
        let now = UNIX_EPOCH + Duration::from_secs(1_800_000_000);
        let options = JwtOptions {
            name: Some("Alice".into()),
            audiences: Some(vec!["api://a".into(), "api://b".into()]),
            roles: Some(vec!["admin".into()]),
            scopes: Some(vec!["read".into(), "write".into()]),
            claims: Some(BTreeMap::from([
                ("tid".into(), "t1".into()),
                ("sub".into(), "ignored".into()),
            ])),
            valid_for: Some(10.0),
            signing_key: Some(KEY.into()),
            ..JwtOptions::default()
        };
        let token = create(&options, now).unwrap();
        assert_eq!(part(&token, 0), json!({ "alg": "HS256", "typ": "JWT" }));
        let claims = part(&token, 1);
        assert_eq!(claims["sub"], "Alice");
        assert_eq!(claims["aud"], json!(["api://a", "api://b"]));
        assert_eq!(claims["roles"], "admin");
        assert_eq!(claims["scp"], json!(["read", "write"]));
        assert_eq!(claims["tid"], "t1");
        assert_eq!(claims["iss"], "dev-proxy");
        assert_eq!(claims["iat"], 1_800_000_000);
        assert_eq!(claims["exp"], 1_800_000_600);

        let (signed, signature) = token.rsplit_once('.').unwrap();
        let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(KEY.as_bytes()).unwrap();
        mac.update(signed.as_bytes());
        mac.verify_slice(&URL_SAFE_NO_PAD.decode(signature).unwrap())
            .expect("the signature checks with the key");
    }

    #[test]
    fn defaults_are_dev_proxys_and_bad_input_is_refused() {
        let token = create(&JwtOptions::default(), UNIX_EPOCH).unwrap();
        let claims = part(&token, 1);
        assert_eq!(claims["sub"], "Dev Proxy");
        assert_eq!(claims["aud"], "https://myserver.com");
        assert_eq!(claims["exp"], 3600);
        let short = JwtOptions {
            signing_key: Some("short".into()),
            ..JwtOptions::default()
        };
        assert_eq!(create(&short, UNIX_EPOCH), Err(JwtError::KeyTooShort));
        let never = JwtOptions {
            valid_for: Some(0.0),
            ..JwtOptions::default()
        };
        assert_eq!(create(&never, UNIX_EPOCH), Err(JwtError::BadValidity));
    }
}
