//! Proxy credentials: the `user:password` a client must present in `Proxy-Authorization`.

use std::fmt;
use std::str::FromStr;

use headers::authorization::Basic;
use headers::{HeaderMapExt, ProxyAuthorization};
use http::HeaderMap;

/// The user name and password clients must send as `Proxy-Authorization: Basic …`.
///
/// The password is never shown by `Debug` or `Display`.
///
/// # Examples
///
/// ```
/// use holdoff_proxy::Credentials;
///
/// let credentials: Credentials = "alice:s3cret".parse()?;
/// assert_eq!(credentials.user(), "alice");
/// assert_eq!(format!("{credentials:?}"), "Credentials { user: \"alice\", .. }");
/// # Ok::<(), holdoff_proxy::ConfigError>(())
/// ```
#[derive(Clone, PartialEq, Eq)]
pub struct Credentials {
    user: String,
    password: String,
}

impl Credentials {
    /// Credentials from a user name and a password.
    ///
    /// # Errors
    ///
    /// When the user name is empty or contains a `:` (Basic authentication cannot carry it).
    pub fn new(
        user: impl Into<String>,
        password: impl Into<String>,
    ) -> Result<Credentials, super::error::ConfigError> {
        let user = user.into();
        if user.is_empty() || user.contains(':') {
            return Err(super::error::ConfigError::Credentials);
        }
        Ok(Credentials {
            user,
            password: password.into(),
        })
    }

    /// The user name.
    pub fn user(&self) -> &str {
        &self.user
    }

    /// Whether `headers` carry these credentials in `Proxy-Authorization`.
    pub(crate) fn accepts(&self, headers: &HeaderMap) -> bool {
        let Some(ProxyAuthorization(basic)) = headers.typed_get::<ProxyAuthorization<Basic>>()
        else {
            return false;
        };
        // Compare without an early exit, so the time taken does not tell how much matched.
        constant_time_eq(basic.username().as_bytes(), self.user.as_bytes())
            & constant_time_eq(basic.password().as_bytes(), self.password.as_bytes())
    }
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// The user name in a `Proxy-Authorization: Basic` header, whatever the password, if any.
pub(crate) fn proxy_user(headers: &HeaderMap) -> Option<String> {
    let ProxyAuthorization(basic) = headers.typed_get::<ProxyAuthorization<Basic>>()?;
    let user = basic.username();
    (!user.is_empty()).then(|| user.to_owned())
}

impl FromStr for Credentials {
    type Err = super::error::ConfigError;

    /// `user:password`; the password may contain `:` and may be empty.
    fn from_str(s: &str) -> Result<Credentials, super::error::ConfigError> {
        let (user, password) = s
            .split_once(':')
            .ok_or(super::error::ConfigError::Credentials)?;
        Credentials::new(user, password)
    }
}

impl fmt::Debug for Credentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Credentials")
            .field("user", &self.user)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;
    use http::header::PROXY_AUTHORIZATION;

    fn basic(user_password: &str) -> HeaderMap {
        // The test encodes with the headers crate, independently of the parser under test.
        let (user, password) = user_password.split_once(':').unwrap();
        let mut headers = HeaderMap::new();
        headers.typed_insert(ProxyAuthorization(
            headers::Authorization::basic(user, password).0,
        ));
        headers
    }

    mod from_str {
        use super::*;

        #[test]
        fn splits_at_the_first_colon() {
            let credentials: Credentials = "alice:pa:ss".parse().unwrap();
            assert_eq!(credentials.user(), "alice");
            assert_eq!(credentials.password, "pa:ss");
            assert!("bob:".parse::<Credentials>().is_ok());
        }

        #[test]
        fn needs_a_colon_and_a_user() {
            for bad in ["alice", ":secret", ""] {
                assert!(bad.parse::<Credentials>().is_err(), "{bad:?}");
            }
        }
    }

    mod accepts {
        use super::*;

        #[test]
        fn only_the_exact_user_and_password() {
            let credentials: Credentials = "alice:secret".parse().unwrap();
            assert!(credentials.accepts(&basic("alice:secret")));
            assert!(!credentials.accepts(&basic("alice:secreT")));
            assert!(!credentials.accepts(&basic("alic:secret")));
            assert!(!credentials.accepts(&HeaderMap::new()));
            let mut bearer = HeaderMap::new();
            bearer.insert(PROXY_AUTHORIZATION, HeaderValue::from_static("Bearer abc"));
            assert!(!credentials.accepts(&bearer));
        }
    }

    mod proxy_user {
        use super::*;

        #[test]
        fn reads_the_user_with_or_without_a_password() {
            assert_eq!(proxy_user(&basic("alice:")).as_deref(), Some("alice"));
            assert_eq!(proxy_user(&basic("bob:pw")).as_deref(), Some("bob"));
            assert_eq!(proxy_user(&basic(":pw")), None);
            assert_eq!(proxy_user(&HeaderMap::new()), None);
        }
    }
}
