//! What a request can carry, in its headers or extensions, to steer the retries: one set of
//! markers that the retry loop and the tower and reqwest integrations all read.

use std::time::{Duration, Instant};

use http::{Extensions, HeaderMap, HeaderName};

/// The header that marks a request safe to repeat (the IETF draft "The Idempotency-Key HTTP
/// Header Field"): a server that honours it performs the operation once, however many times
/// the request is sent.
pub const IDEMPOTENCY_KEY: HeaderName = HeaderName::from_static("idempotency-key");

/// Marks a request safe to repeat although its method is not idempotent (a `POST` that the
/// server de-duplicates by other means). Insert it into the request's extensions.
///
/// A request with an `Idempotency-Key` header needs no marker. A `Retry-After` hint never
/// makes a request safe on its own.
///
/// # Examples
///
/// ```
/// use holdoff::request::RepeatSafe;
///
/// let mut request = http::Request::post("http://127.0.0.1:8080/v1/jobs").body(()).unwrap();
/// request.extensions_mut().insert(RepeatSafe);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct RepeatSafe;

/// The gate key for one request, instead of the default `scheme://host:port` of its URL
/// (e.g. one key per API token, or one for a whole API family). No effect without a gate.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct GateKey(pub String);

/// The task must be done by this instant, on the monotonic clock the retries wait on: no
/// wait that cannot fit before it is started, nor a retry that would still be running then
/// (the task is deferred instead), and an attempt still running then is cut.
///
/// When both a [`Deadline`] and a [`Timeout`] apply, the earlier end wins.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Deadline(pub Instant);

/// The task must be done within this long of its first attempt, waits and attempts
/// included, as a [`Deadline`] that far away. This bounds the whole task, not one attempt.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Timeout(pub Duration);

/// The markers one request carries, read from its headers and extensions.
///
/// # Examples
///
/// ```
/// use holdoff::request::{Markers, Timeout};
/// use std::time::Duration;
///
/// let request = http::Request::post("http://127.0.0.1:8080/v1/jobs")
///     .header("Idempotency-Key", "8e03978e")
///     .extension(Timeout(Duration::from_secs(30)))
///     .body(())
///     .unwrap();
/// let markers = Markers::of(request.headers(), request.extensions());
/// assert!(markers.repeat_safe);
/// assert_eq!(markers.timeout, Some(Duration::from_secs(30)));
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Markers {
    /// An `Idempotency-Key` header or the [`RepeatSafe`] marker.
    pub repeat_safe: bool,
    /// The [`Deadline`], if any.
    pub deadline: Option<Instant>,
    /// The [`Timeout`], if any.
    pub timeout: Option<Duration>,
    /// The [`GateKey`], if any.
    pub gate_key: Option<String>,
}

impl Markers {
    /// Reads the markers of a request with these headers and extensions.
    pub fn of(headers: &HeaderMap, extensions: &Extensions) -> Markers {
        Markers {
            repeat_safe: headers.contains_key(IDEMPOTENCY_KEY)
                || extensions.get::<RepeatSafe>().is_some(),
            deadline: extensions.get::<Deadline>().map(|d| d.0),
            timeout: extensions.get::<Timeout>().map(|t| t.0),
            gate_key: extensions.get::<GateKey>().map(|k| k.0.clone()),
        }
    }

    /// When the task must be done, given when it started: the earlier of the [`Deadline`]
    /// and `start` + the [`Timeout`] (or `default_timeout` when the request has none).
    pub fn deadline_from(
        &self,
        start: Instant,
        default_timeout: Option<Duration>,
    ) -> Option<Instant> {
        let from_timeout = self
            .timeout
            .or(default_timeout)
            .and_then(|timeout| start.checked_add(timeout));
        match (self.deadline, from_timeout) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    mod markers {
        use super::*;

        #[test]
        fn a_plain_post_is_not_safe_to_repeat() {
            let request = http::Request::post("http://a.test/")
                .body(())
                .expect("request");
            let markers = Markers::of(request.headers(), request.extensions());
            assert_eq!(markers, Markers::default());
        }

        #[test]
        fn an_idempotency_key_or_the_marker_makes_it_safe() {
            let keyed = http::Request::post("http://a.test/")
                .header("Idempotency-Key", "8e03978e")
                .body(())
                .expect("request");
            assert!(Markers::of(keyed.headers(), keyed.extensions()).repeat_safe);
            let marked = http::Request::post("http://a.test/")
                .extension(RepeatSafe)
                .body(())
                .expect("request");
            assert!(Markers::of(marked.headers(), marked.extensions()).repeat_safe);
        }

        #[test]
        fn the_earlier_of_deadline_and_timeout_wins() {
            let start = crate::clock::SystemClock.now();
            let late = Markers {
                deadline: Some(start + Duration::from_secs(60)),
                timeout: Some(Duration::from_secs(10)),
                ..Markers::default()
            };
            assert_eq!(
                late.deadline_from(start, None),
                Some(start + Duration::from_secs(10))
            );
            let early = Markers {
                deadline: Some(start + Duration::from_secs(5)),
                ..Markers::default()
            };
            assert_eq!(
                early.deadline_from(start, Some(Duration::from_secs(10))),
                Some(start + Duration::from_secs(5))
            );
            assert_eq!(Markers::default().deadline_from(start, None), None);
        }
    }
}
