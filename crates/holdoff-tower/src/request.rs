//! What a request can carry, in its extensions or headers, to steer the policy: holdoff's
//! own markers, so one request type steers the tower and reqwest integrations alike.

use holdoff::request::Markers;
use http::Request;

/// The markers `request` carries.
pub(crate) fn markers<B>(request: &Request<B>) -> Markers {
    Markers::of(request.headers(), request.extensions())
}

/// The gate key of `request`: its [`GateKey`](holdoff::request::GateKey) if it has one,
/// else its URI's.
pub(crate) fn gate_key<B>(request: &Request<B>) -> Option<String> {
    markers(request)
        .gate_key
        .or_else(|| holdoff::gate::key_of(request.uri()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use holdoff::request::GateKey;

    mod gate_key {
        use super::*;

        #[test]
        fn defaults_to_scheme_host_and_port() {
            let request = Request::get("https://a.test/v1?q=1")
                .body(())
                .expect("request");
            assert_eq!(gate_key(&request).as_deref(), Some("https://a.test:443"));
        }

        #[test]
        fn an_extension_overrides_it() {
            let request = Request::get("https://a.test/v1")
                .extension(GateKey("shared".to_owned()))
                .body(())
                .expect("request");
            assert_eq!(gate_key(&request).as_deref(), Some("shared"));
        }
    }
}
