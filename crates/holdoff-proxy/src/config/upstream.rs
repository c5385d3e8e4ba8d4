//! The one upstream of reverse-proxy mode: `http://127.0.0.1:3000` or `https://api.test`.

use std::fmt;
use std::str::FromStr;

use http::uri::{Authority, Scheme};
use http::{HeaderValue, Uri};

/// Where reverse-proxy mode sends every request: a scheme (`http` or `https`) and an
/// authority, with no path.
///
/// # Examples
///
/// ```
/// use holdoff_proxy::Upstream;
///
/// let upstream: Upstream = "http://127.0.0.1:3000".parse()?;
/// assert_eq!(upstream.to_string(), "http://127.0.0.1:3000");
/// assert!("ftp://example.com".parse::<Upstream>().is_err());
/// # Ok::<(), holdoff_proxy::ConfigError>(())
/// ```
#[derive(Clone, PartialEq, Eq)]
pub struct Upstream {
    scheme: Scheme,
    authority: Authority,
    /// The `Host` header sent upstream (the authority), made once.
    host: HeaderValue,
}

impl Upstream {
    pub(crate) fn scheme(&self) -> &Scheme {
        &self.scheme
    }

    pub(crate) fn authority(&self) -> &Authority {
        &self.authority
    }

    pub(crate) fn host_header(&self) -> &HeaderValue {
        &self.host
    }
}

impl FromStr for Upstream {
    type Err = super::error::ConfigError;

    fn from_str(s: &str) -> Result<Upstream, super::error::ConfigError> {
        let invalid = |reason: &'static str| super::error::ConfigError::Upstream {
            value: s.to_owned(),
            reason,
        };
        let uri: Uri = s
            .parse()
            .map_err(|_| invalid("expected a URL such as http://127.0.0.1:3000"))?;
        let scheme = match uri.scheme() {
            Some(scheme) if *scheme == Scheme::HTTP || *scheme == Scheme::HTTPS => scheme.clone(),
            Some(_) => return Err(invalid("the scheme must be http or https")),
            None => return Err(invalid("expected a URL such as http://127.0.0.1:3000")),
        };
        let authority = uri
            .authority()
            .cloned()
            .ok_or_else(|| invalid("the URL has no host"))?;
        if authority.host().is_empty() {
            return Err(invalid("the URL has no host"));
        }
        if authority.as_str().contains('@') {
            return Err(invalid("credentials in the URL are not supported"));
        }
        if !matches!(uri.path(), "" | "/") || uri.query().is_some() {
            return Err(invalid(
                "a path or query is not supported: give only scheme, host and port",
            ));
        }
        let host = HeaderValue::from_str(authority.as_str())
            .map_err(|_| invalid("the host cannot be sent in a Host header"))?;
        Ok(Upstream {
            scheme,
            authority,
            host,
        })
    }
}

impl fmt::Display for Upstream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}://{}", self.scheme, self.authority)
    }
}

impl fmt::Debug for Upstream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Upstream")
            .field(&format_args!("{self}"))
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    mod from_str {
        use super::*;

        #[test]
        fn accepts_http_and_https_with_an_optional_slash() {
            for (input, shown) in [
                ("http://127.0.0.1:3000", "http://127.0.0.1:3000"),
                ("https://api.example.com/", "https://api.example.com"),
                ("http://[::1]:8080", "http://[::1]:8080"),
            ] {
                let upstream: Upstream = input.parse().unwrap();
                assert_eq!(upstream.to_string(), shown);
            }
        }

        #[test]
        fn rejects_anything_else_with_a_reason() {
            for (input, reason) in [
                (
                    "127.0.0.1:3000",
                    "expected a URL such as http://127.0.0.1:3000",
                ),
                ("ws://a", "the scheme must be http or https"),
                (
                    "http://a/api",
                    "a path or query is not supported: give only scheme, host and port",
                ),
                ("http://u:p@a", "credentials in the URL are not supported"),
                ("not a url", "expected a URL such as http://127.0.0.1:3000"),
            ] {
                match input.parse::<Upstream>() {
                    Err(crate::config::ConfigError::Upstream { reason: got, .. }) => {
                        assert_eq!(got, reason, "{input}")
                    }
                    other => panic!("{input}: {other:?}"),
                }
            }
        }
    }
}
