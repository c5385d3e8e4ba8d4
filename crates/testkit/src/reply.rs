//! What the test server answers: a scripted response, or a fault.

use std::fmt;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use http::header::{CONTENT_TYPE, DATE, RETRY_AFTER};
use http::{HeaderName, HeaderValue, StatusCode};

/// One scripted answer: a status, headers and a body, optionally after a delay, or a
/// connection reset instead of a response.
///
/// The server sends exactly the headers given here, plus the `content-length` that hyper
/// computes from the body. In particular it adds no `Date` of its own: use [`Reply::date`] or
/// [`Reply::date_now`] when a test needs one, so that a test without one really has none.
///
/// # Examples
///
/// ```
/// use holdoff_testkit::Reply;
/// use std::time::{Duration, UNIX_EPOCH};
///
/// // A 503 whose hint is an HTTP-date, from a server whose clock reads 1994-11-06 08:49:07.
/// let date = UNIX_EPOCH + Duration::from_secs(784_111_747);
/// let reply = Reply::status(503)
///     .retry_after_date(date + Duration::from_secs(30))
///     .date(date)
///     .body("try later");
/// # let _ = reply;
/// ```
#[derive(Clone, Debug)]
pub struct Reply {
    pub(crate) status: StatusCode,
    pub(crate) headers: Vec<(HeaderName, HeaderValue)>,
    pub(crate) body: Bytes,
    pub(crate) delay: Option<Duration>,
    pub(crate) action: Action,
    /// Stamp `Date` with the server clock's wall time when the response is sent.
    pub(crate) date_now: bool,
}

/// What the server does once the reply's delay has passed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Action {
    /// Send the response.
    Respond,
    /// Close the connection with a TCP reset, sending nothing.
    Reset,
}

impl Reply {
    /// `200 OK` with `body`.
    pub fn ok(body: impl Into<Bytes>) -> Reply {
        Reply::new(StatusCode::OK).body(body)
    }

    /// A response with this status, no headers and an empty body.
    ///
    /// # Panics
    ///
    /// If `status` is outside `100..=999`.
    pub fn status(status: u16) -> Reply {
        match StatusCode::from_u16(status) {
            Ok(status) => Reply::new(status),
            Err(_) => panic!("invalid HTTP status code: {status}"),
        }
    }

    /// `429 Too Many Requests` with `Retry-After: <retry_after>`.
    ///
    /// The value is sent as given, byte for byte, so malformed hints (`"1.5"`, `"120, 120"`,
    /// non-ASCII bytes) can be scripted too.
    ///
    /// # Panics
    ///
    /// If the value is not a valid header value (a control character, e.g. `\n`).
    pub fn too_many_requests(retry_after: impl AsRef<[u8]>) -> Reply {
        Reply::new(StatusCode::TOO_MANY_REQUESTS).retry_after(retry_after)
    }

    /// `503 Service Unavailable` with `Retry-After: <retry_after>`, sent byte for byte.
    ///
    /// # Panics
    ///
    /// If the value is not a valid header value (a control character, e.g. `\n`).
    pub fn unavailable(retry_after: impl AsRef<[u8]>) -> Reply {
        Reply::new(StatusCode::SERVICE_UNAVAILABLE).retry_after(retry_after)
    }

    /// The `429` OpenAI sends when an account's quota is spent: waiting will not help.
    ///
    /// The JSON body carries `"insufficient_quota"` in both `error.type` and `error.code`,
    /// and no `Retry-After`.
    pub fn insufficient_quota() -> Reply {
        Reply::new(StatusCode::TOO_MANY_REQUESTS).json(&serde_json::json!({
            "error": {
                "message": "You exceeded your current quota, please check your plan and billing details.",
                "type": "insufficient_quota",
                "param": null,
                "code": "insufficient_quota",
            }
        }))
    }

    /// Closes the connection with a TCP reset (`SO_LINGER` 0) instead of responding.
    ///
    /// The request is still recorded. The client sees a reset or an unexpected end of the
    /// connection, never a status line.
    pub fn reset() -> Reply {
        Reply {
            action: Action::Reset,
            ..Reply::new(StatusCode::OK)
        }
    }

    /// Appends a header; earlier values of the same name are kept, so a test can send a
    /// header twice.
    ///
    /// # Panics
    ///
    /// If the name or the value is invalid.
    pub fn header<N, V>(mut self, name: N, value: V) -> Reply
    where
        N: TryInto<HeaderName>,
        N::Error: fmt::Display,
        V: TryInto<HeaderValue>,
        V::Error: fmt::Display,
    {
        let name = match name.try_into() {
            Ok(name) => name,
            Err(error) => panic!("invalid header name: {error}"),
        };
        let value = match value.try_into() {
            Ok(value) => value,
            Err(error) => panic!("invalid value for header {name}: {error}"),
        };
        self.headers.push((name, value));
        self
    }

    /// Sets the body.
    pub fn body(mut self, body: impl Into<Bytes>) -> Reply {
        self.body = body.into();
        self
    }

    /// Sets the body to `value` serialised as JSON, and `Content-Type: application/json`.
    pub fn json(self, value: &serde_json::Value) -> Reply {
        self.set(CONTENT_TYPE, HeaderValue::from_static("application/json"))
            .body(value.to_string())
    }

    /// Sets `Retry-After` (replacing any earlier one) to `value`, sent byte for byte.
    ///
    /// # Panics
    ///
    /// If the value is not a valid header value (a control character, e.g. `\n`).
    pub fn retry_after(self, value: impl AsRef<[u8]>) -> Reply {
        let value = value.as_ref();
        match HeaderValue::from_bytes(value) {
            Ok(value) => self.set(RETRY_AFTER, value),
            Err(_) => panic!(
                "invalid Retry-After value: {:?}",
                value.escape_ascii().to_string()
            ),
        }
    }

    /// Sets `Retry-After` (replacing any earlier one) to `at` as an IMF-fixdate.
    ///
    /// # Panics
    ///
    /// If `at` is before 1970 or after 9999 (the range of the `httpdate` formatter).
    pub fn retry_after_date(self, at: SystemTime) -> Reply {
        self.set(RETRY_AFTER, scripted_date(at))
    }

    /// Sets `Date` (replacing any earlier one) to `at` as an IMF-fixdate, e.g. to play a
    /// server whose clock is skewed.
    ///
    /// # Panics
    ///
    /// If `at` is before 1970 or after 9999 (the range of the `httpdate` formatter).
    pub fn date(self, at: SystemTime) -> Reply {
        self.set(DATE, scripted_date(at))
    }

    /// Sets `Date` (replacing any earlier one) to the server clock's wall time when the
    /// response is sent, as a real server would.
    ///
    /// The wall time must lie within 1970–9999; outside it (a [`ManualClock`] set there) the
    /// connection is closed without a response.
    ///
    /// [`ManualClock`]: holdoff::clock::ManualClock
    pub fn date_now(mut self) -> Reply {
        self.headers.retain(|(name, _)| name != DATE);
        self.date_now = true;
        self
    }

    /// Waits `by` on the server's clock, counted from the request's arrival, before answering
    /// (or resetting).
    ///
    /// Under tokio's paused time the wait is virtual; with a
    /// [`ManualClock`](holdoff::clock::ManualClock) it ends when the test advances the clock.
    /// A delay too long for the clock (e.g. [`Duration::MAX`]) never ends: the request hangs
    /// until the server shuts down, which then closes its connection.
    pub fn delay(mut self, by: Duration) -> Reply {
        self.delay = Some(by);
        self
    }

    fn new(status: StatusCode) -> Reply {
        Reply {
            status,
            headers: Vec::new(),
            body: Bytes::new(),
            delay: None,
            action: Action::Respond,
            date_now: false,
        }
    }

    /// Replaces every header named `name` with one `value`.
    fn set(mut self, name: HeaderName, value: HeaderValue) -> Reply {
        self.headers.retain(|(existing, _)| *existing != name);
        if name == DATE {
            self.date_now = false;
        }
        self.headers.push((name, value));
        self
    }
}

impl Default for Reply {
    /// `200 OK` with the body `ok`: what a path answers when nothing else is scripted.
    fn default() -> Reply {
        Reply::ok("ok")
    }
}

/// Formats a wall time as an IMF-fixdate header value, if it lies within 1970–9999 (the
/// range of `httpdate`'s formatter, which panics outside it).
pub(crate) fn imf_fixdate(at: SystemTime) -> Option<HeaderValue> {
    /// 10000-01-01T00:00:00Z.
    const END: Duration = Duration::from_secs(253_402_300_800);
    let since_epoch = at.duration_since(UNIX_EPOCH).ok()?;
    if since_epoch >= END {
        return None;
    }
    HeaderValue::try_from(httpdate::fmt_http_date(at)).ok()
}

/// [`imf_fixdate`] for a time a test chose.
fn scripted_date(at: SystemTime) -> HeaderValue {
    match imf_fixdate(at) {
        Some(value) => value,
        None => panic!("{at:?} is outside the years an HTTP-date can carry here (1970–9999)"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn values(reply: &Reply, name: HeaderName) -> Vec<&HeaderValue> {
        reply
            .headers
            .iter()
            .filter(|(existing, _)| *existing == name)
            .map(|(_, value)| value)
            .collect()
    }

    mod status {
        use super::*;

        #[test]
        fn makes_an_empty_response() {
            let reply = Reply::status(429);
            assert_eq!(reply.status, StatusCode::TOO_MANY_REQUESTS);
            assert!(reply.headers.is_empty());
            assert!(reply.body.is_empty());
        }

        #[test]
        #[should_panic(expected = "invalid HTTP status code: 1000")]
        fn rejects_codes_outside_100_to_999() {
            let _ = Reply::status(1000);
        }
    }

    mod header {
        use super::*;

        #[test]
        fn appends_and_lowercases_the_name() {
            let reply = Reply::ok("").header("X-Dup", "a").header("x-dup", "b");
            let name = HeaderName::from_static("x-dup");
            assert_eq!(values(&reply, name), ["a", "b"]);
        }

        #[test]
        #[should_panic(expected = "invalid value for header x-bad")]
        fn rejects_a_control_character() {
            let _ = Reply::ok("").header("x-bad", "a\nb");
        }
    }

    mod retry_after {
        use super::*;

        #[test]
        fn replaces_an_earlier_value() {
            let reply = Reply::too_many_requests("1")
                .header("retry-after", "2")
                .retry_after("3");
            assert_eq!(values(&reply, RETRY_AFTER), ["3"]);
        }

        #[test]
        #[should_panic(expected = "invalid Retry-After value")]
        fn rejects_a_control_character() {
            let _ = Reply::unavailable(b"1\r\n");
        }
    }

    mod date_now {
        use super::*;

        #[test]
        fn drops_an_earlier_date() {
            let reply = Reply::ok("").date(UNIX_EPOCH).date_now();
            assert!(values(&reply, DATE).is_empty());
            assert!(reply.date_now);
        }

        #[test]
        fn is_undone_by_a_later_date() {
            let reply = Reply::ok("").date_now().date(UNIX_EPOCH);
            assert_eq!(values(&reply, DATE), ["Thu, 01 Jan 1970 00:00:00 GMT"]);
            assert!(!reply.date_now);
        }
    }

    mod date {
        use super::*;

        #[test]
        fn formats_the_last_second_of_9999() {
            let last = UNIX_EPOCH + Duration::from_secs(253_402_300_799);
            let reply = Reply::ok("").date(last);
            assert_eq!(values(&reply, DATE), ["Fri, 31 Dec 9999 23:59:59 GMT"]);
        }

        #[test]
        #[should_panic(expected = "outside the years an HTTP-date can carry")]
        fn rejects_times_before_1970() {
            let _ = Reply::ok("").date(UNIX_EPOCH - Duration::from_secs(1));
        }
    }

    mod json {
        use super::*;

        #[test]
        fn sets_the_content_type_once() {
            let reply = Reply::ok("")
                .header("content-type", "text/plain")
                .json(&serde_json::json!({"a": 1}));
            assert_eq!(values(&reply, CONTENT_TYPE), ["application/json"]);
            assert_eq!(reply.body, r#"{"a":1}"#);
        }
    }
}
