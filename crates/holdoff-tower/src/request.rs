//! What a request can carry, in its extensions or headers, to steer the policy.

use http::{HeaderName, Request};

/// The header that marks a request safe to repeat (RFC draft "The Idempotency-Key HTTP
/// Header Field"): a server that honours it performs the operation once, however many times
/// it is sent.
const IDEMPOTENCY_KEY: HeaderName = HeaderName::from_static("idempotency-key");

/// Marks a request safe to repeat although its method is not idempotent (e.g. a POST the
/// server de-duplicates by some other means). Insert it into the request's extensions.
///
/// A request with an `Idempotency-Key` header needs no marker.
///
/// # Examples
///
/// ```
/// use holdoff_tower::RepeatSafe;
///
/// let mut request = http::Request::post("http://api.example/v1/jobs").body(()).unwrap();
/// request.extensions_mut().insert(RepeatSafe);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct RepeatSafe;

/// The gate key for one request, instead of the default `scheme://host:port` of its URI
/// (see [`holdoff::gate::key_of`]). Insert it into the request's extensions, e.g. to share
/// one hint between the hosts of one API.
///
/// # Examples
///
/// ```
/// use holdoff_tower::GateKey;
///
/// let mut request = http::Request::get("https://eu.api.example/v1/items").body(()).unwrap();
/// request.extensions_mut().insert(GateKey("api.example".to_owned()));
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct GateKey(pub String);

/// Whether the caller said `request` may be sent again even if its method is not idempotent.
pub(crate) fn is_repeat_safe<B>(request: &Request<B>) -> bool {
    request.headers().contains_key(IDEMPOTENCY_KEY)
        || request.extensions().get::<RepeatSafe>().is_some()
}

/// The gate key of `request`: its [`GateKey`] if it has one, else its URI's.
pub(crate) fn gate_key<B>(request: &Request<B>) -> Option<String> {
    match request.extensions().get::<GateKey>() {
        Some(GateKey(key)) => Some(key.clone()),
        None => holdoff::gate::key_of(request.uri()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    mod is_repeat_safe {
        use super::*;

        #[test]
        fn is_true_with_an_idempotency_key_or_the_marker() {
            let plain = Request::post("http://a.test/").body(()).expect("request");
            assert!(!is_repeat_safe(&plain));
            let keyed = Request::post("http://a.test/")
                .header("Idempotency-Key", "8e03978e")
                .body(())
                .expect("request");
            assert!(is_repeat_safe(&keyed));
            let marked = Request::post("http://a.test/")
                .extension(RepeatSafe)
                .body(())
                .expect("request");
            assert!(is_repeat_safe(&marked));
        }
    }

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
