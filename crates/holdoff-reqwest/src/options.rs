//! Per-request overrides, carried as request extensions.
//!
//! Attach them with reqwest-middleware's `RequestBuilder::with_extension`; the middleware
//! reads them before the first attempt.

use std::time::{Duration, Instant};

/// Marks a request safe to repeat even though its method is not idempotent (a `POST` that the
/// server de-duplicates, say).
///
/// A request that carries an `Idempotency-Key` header is treated as safe to repeat without
/// this marker. A `Retry-After` hint never makes a request safe on its own.
///
/// # Examples
///
/// ```
/// use holdoff_reqwest::RepeatSafe;
///
/// # fn demo(client: &reqwest_middleware::ClientWithMiddleware) {
/// let request = client
///     .post("http://127.0.0.1:8080/v1/jobs")
///     .body("{}")
///     .with_extension(RepeatSafe);
/// # let _ = request;
/// # }
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct RepeatSafe;

/// The task must be done by this instant (on the monotonic clock the middleware waits on,
/// tokio's): no wait that cannot fit before it is started, and the response is handed back
/// as deferred instead.
///
/// When both a [`Deadline`] and a [`Timeout`] (or the middleware's default timeout) apply,
/// the earlier end wins.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Deadline(pub Instant);

/// The task must be done within this long of the request entering the middleware; replaces
/// the middleware's default timeout for this request.
///
/// This bounds the whole task (every attempt and every wait), not one attempt: for a limit
/// on each attempt, use reqwest's own `timeout`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Timeout(pub Duration);

/// Shares hints through the gate under this key instead of the default
/// `scheme://host:port` (e.g. one key per API token, or one for a whole API family).
///
/// Has no effect when the middleware has no gate.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct GateKey(pub String);

/// The default gate key of a URL: `scheme://host:port`, with the scheme's known default port
/// filled in, as [`holdoff::gate::key_of`] builds it for an `http::Uri`.
pub(crate) fn gate_key(url: &reqwest::Url) -> Option<String> {
    let host = url.host_str()?;
    let scheme = url.scheme();
    Some(match url.port_or_known_default() {
        Some(port) => format!("{scheme}://{host}:{port}"),
        None => format!("{scheme}://{host}"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    mod gate_key {
        use super::*;

        fn key(url: &str) -> Option<String> {
            gate_key(&reqwest::Url::parse(url).expect("valid url"))
        }

        #[test]
        fn fills_in_the_default_port() {
            assert_eq!(
                key("https://api.example.com/v1/chat?x=1").as_deref(),
                Some("https://api.example.com:443")
            );
            assert_eq!(
                key("http://api.example.com/").as_deref(),
                Some("http://api.example.com:80")
            );
        }

        #[test]
        fn keeps_an_explicit_port_and_ignores_credentials() {
            assert_eq!(
                key("http://user:secret@127.0.0.1:8080/x").as_deref(),
                Some("http://127.0.0.1:8080")
            );
        }

        #[test]
        fn agrees_with_the_library_for_uris() {
            for url in [
                "https://api.example.com/v1",
                "http://127.0.0.1:8080/x",
                "http://[::1]:9000/",
                "wss://stream.example.com/socket",
            ] {
                let uri: http::Uri = url.parse().expect("valid uri");
                assert_eq!(key(url), holdoff::gate::key_of(&uri), "{url}");
            }
        }

        #[test]
        fn is_none_without_a_host() {
            assert_eq!(key("data:text/plain,hello"), None);
        }
    }
}
