//! Redis URLs: a client for one, and showing one with its password hidden, for `Debug`,
//! logs and errors.

use std::time::Duration;

#[cfg(feature = "tls")]
use redis::IntoConnectionInfo;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};

use crate::error::{Error, ErrorKind};

/// The client for `url`, verifying a `rediss://` server against `root_ca` (PEM) if given.
pub(crate) fn client(url: &str, root_ca: Option<&[u8]>) -> Result<redis::Client, Error> {
    // The client's own error may quote the URL, password included: drop it.
    let client = match root_ca {
        #[cfg(feature = "tls")]
        Some(pem) => {
            url.into_connection_info()
                .map_err(|_| Error::new(ErrorKind::InvalidUrl))?;
            check_ca(pem)?;
            let roots = redis::TlsCertificates {
                client_tls: None,
                root_cert: Some(pem.to_vec()),
            };
            redis::Client::build_with_tls(url, roots)
                .map_err(|_| Error::new(ErrorKind::InvalidCa))?
        }
        _ => redis::Client::open(url).map_err(|_| Error::new(ErrorKind::InvalidUrl))?,
    };
    Ok(client)
}

/// Refuses a CA that is not one or more PEM certificates: the client would take a PEM with
/// none in it as an empty set of roots, and fail every connection later.
#[cfg(feature = "tls")]
pub(crate) fn check_ca(pem: &[u8]) -> Result<(), Error> {
    use rustls::pki_types::CertificateDer;
    use rustls::pki_types::pem::PemObject;
    let mut certificates = CertificateDer::pem_slice_iter(pem);
    if !certificates.all(|c| c.is_ok()) || CertificateDer::pem_slice_iter(pem).next().is_none() {
        return Err(Error::new(ErrorKind::InvalidCa));
    }
    Ok(())
}

/// A connection made by `client` on first use, reconnecting by itself; connecting and each
/// answer bounded by `timeout`. Its driver runs on the current tokio runtime.
pub(crate) fn manager(
    client: redis::Client,
    timeout: Duration,
) -> Result<ConnectionManager, Error> {
    let config = ConnectionManagerConfig::new()
        .set_connection_timeout(Some(timeout))
        .set_response_timeout(Some(timeout))
        // Few, short retries: the caller's timeout bounds each operation anyway, and the next
        // operation starts a fresh reconnection.
        .set_number_of_retries(2)
        .set_max_delay(Duration::from_millis(200));
    ConnectionManager::new_lazy_with_config(client, config).map_err(Error::from_redis)
}

/// `url` with the password (if any) replaced by `***`, for logs and messages.
///
/// Handles `redis://[user][:password@]host…` and the `rediss://` and `redis+unix://` forms
/// alike: whatever sits between the scheme and the last `@` of the authority is user
/// information, and everything after its first `:` is the password.
pub fn redact(url: &str) -> String {
    let Some(scheme_end) = url.find("://").map(|i| i + 3) else {
        // Not a URL we understand: show nothing of it rather than risk a password.
        return "<unparsed url>".to_owned();
    };
    let rest = &url[scheme_end..];
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let Some(at) = rest[..authority_end].rfind('@') else {
        return url.to_owned();
    };
    let userinfo = &rest[..at];
    let user = match userinfo.find(':') {
        Some(colon) => &userinfo[..colon],
        // `redis://secret@host` is read by some clients as a bare password: hide it too.
        None => "",
    };
    format!("{}{user}:***{}", &url[..scheme_end], &rest[at..])
}

#[cfg(test)]
mod tests {
    mod redact {
        use super::super::redact;

        #[test]
        fn hides_the_password_and_keeps_the_rest() {
            assert_eq!(
                redact("redis://alice:s3cr:et@10.0.0.1:6380/2"),
                "redis://alice:***@10.0.0.1:6380/2"
            );
            assert_eq!(
                redact("rediss://:hunter2@cache.example/0"),
                "rediss://:***@cache.example/0"
            );
            assert_eq!(redact("redis://hunter2@h/0"), "redis://:***@h/0");
        }

        #[test]
        fn leaves_a_url_without_credentials_alone() {
            assert_eq!(
                redact("redis://127.0.0.1:6379/0"),
                "redis://127.0.0.1:6379/0"
            );
            assert_eq!(redact("redis://h/0?x=a@b"), "redis://h/0?x=a@b");
        }

        #[test]
        fn shows_nothing_of_what_it_cannot_parse() {
            assert_eq!(redact("hunter2"), "<unparsed url>");
        }
    }
}
