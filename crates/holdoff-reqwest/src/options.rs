//! Per-request overrides: holdoff's own markers ([`holdoff::request`]), attached with
//! reqwest-middleware's `RequestBuilder::with_extension` and read before the first attempt.

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
