//! A response, wherever one is written (an error rule's `responses`, a mock's `response`, a
//! rate limit's `whenExceeded`): a status with headers and a body, or a network fault.

use std::path::Path;
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderName, HeaderValue, StatusCode, header};

use super::data_files::read_body_file;
use super::{Compiler, Shared, WrittenIn};
use crate::error::{index, key};
use crate::file::{RawHeaders, RawNetworkFault, RawResponse, RawRetryAfterForm};
use holdoff_proxy::fault::{ErrorResponse, HeaderTemplate, RetryAfterForm};
use holdoff_proxy::fault::{FaultOutcome, NetworkFault};

/// How long a `hang` holds a request when `hangSeconds` is not set.
pub(super) const DEFAULT_HANG: Duration = Duration::from_secs(300);

/// The rate of a `slow-body` when `bytesPerSecond` is not set.
const DEFAULT_BYTES_PER_SECOND: u64 = 1024;

/// `retryAfterForm`: how a `@dynamic` `Retry-After` is written.
pub(super) fn retry_after_form(raw: Option<RawRetryAfterForm>) -> RetryAfterForm {
    match raw {
        None | Some(RawRetryAfterForm::Delay) => RetryAfterForm::Delay,
        Some(RawRetryAfterForm::HttpDate) => RetryAfterForm::HttpDate,
        Some(RawRetryAfterForm::Mixed) => RetryAfterForm::Mixed,
    }
}

impl Compiler {
    pub(super) fn response(
        &mut self,
        at: WrittenIn<'_>,
        path: &str,
        raw: &RawResponse,
        shared: &Shared,
    ) -> Option<FaultOutcome> {
        let errors_before = self.errors.len();
        // Options that belong to one network fault only.
        let options = [
            (
                "truncateAfter",
                raw.truncate_after.is_some(),
                RawNetworkFault::Truncate,
            ),
            (
                "bytesPerSecond",
                raw.bytes_per_second.is_some(),
                RawNetworkFault::SlowBody,
            ),
            (
                "hangSeconds",
                raw.hang_seconds.is_some(),
                RawNetworkFault::Hang,
            ),
        ];
        for (name, present, fault) in options {
            if present && raw.network != Some(fault) {
                self.error(
                    at,
                    key(path, name),
                    format!("`{name}` goes only with `network: {}`", network_name(fault)),
                );
            }
        }
        match (raw.status_code, raw.network) {
            (Some(_), Some(_)) => {
                self.error(
                    at,
                    path,
                    "a response has `statusCode` or `network`, not both: either a response is \
                     sent or the network fails",
                );
                None
            }
            (None, None) => {
                self.error(
                    at,
                    path,
                    "a response needs `statusCode` (a status from 100 to 599, with optional \
                     `headers` and `body`) or `network` (reset, hang, truncate or slow-body)",
                );
                None
            }
            (None, Some(fault)) => {
                for (name, present) in [
                    ("headers", raw.headers.is_some()),
                    ("body", raw.body.is_some()),
                ] {
                    if present {
                        self.error(
                            at,
                            key(path, name),
                            format!(
                                "`{name}` goes only with `statusCode`: a network fault sends no \
                                 response"
                            ),
                        );
                    }
                }
                let fault = match fault {
                    RawNetworkFault::Reset => NetworkFault::Reset,
                    RawNetworkFault::Hang => NetworkFault::Hang {
                        r#for: match raw.hang_seconds {
                            Some(0) => {
                                self.error(
                                    at,
                                    key(path, "hangSeconds"),
                                    "`hangSeconds` is 0: it must be at least 1 (default 300)",
                                );
                                DEFAULT_HANG
                            }
                            Some(seconds) => Duration::from_secs(seconds),
                            None => DEFAULT_HANG,
                        },
                    },
                    RawNetworkFault::Truncate => NetworkFault::Truncate {
                        after: raw.truncate_after,
                    },
                    RawNetworkFault::SlowBody => NetworkFault::SlowBody {
                        bytes_per_second: match raw.bytes_per_second {
                            Some(0) => {
                                self.error(
                                    at,
                                    key(path, "bytesPerSecond"),
                                    "`bytesPerSecond` is 0: it must be at least 1 (default \
                                     1024)",
                                );
                                DEFAULT_BYTES_PER_SECOND
                            }
                            Some(rate) => rate,
                            None => DEFAULT_BYTES_PER_SECOND,
                        },
                    },
                };
                (self.errors.len() == errors_before).then_some(FaultOutcome::Network(fault))
            }
            (Some(status), None) => {
                let status = match StatusCode::from_u16(status) {
                    Ok(code) if (100..=599).contains(&status) => Some(code),
                    _ => {
                        self.error(
                            at,
                            key(path, "statusCode"),
                            format!("{status} is not an HTTP status: expected 100 to 599"),
                        );
                        None
                    }
                };
                let mut headers = self.headers(at, path, raw.headers.as_ref(), shared);
                let body = self.body(at, &key(path, "body"), raw.body.as_ref(), &mut headers);
                if self.errors.len() != errors_before {
                    return None;
                }
                Some(FaultOutcome::Respond(ErrorResponse {
                    status: status?,
                    headers,
                    body: body?,
                }))
            }
        }
    }

    fn headers(
        &mut self,
        at: WrittenIn<'_>,
        path: &str,
        raw: Option<&RawHeaders>,
        shared: &Shared,
    ) -> Vec<(HeaderName, HeaderTemplate)> {
        let path = key(path, "headers");
        let pairs: Vec<(String, String, &str, &str)> = match raw {
            None => Vec::new(),
            Some(RawHeaders::List(list)) => list
                .iter()
                .enumerate()
                .map(|(i, h)| {
                    let at = index(&path, i);
                    (
                        key(&at, "name"),
                        key(&at, "value"),
                        h.name.as_str(),
                        h.value.as_str(),
                    )
                })
                .collect(),
            Some(RawHeaders::Map(map)) => map
                .iter()
                .map(|(name, value)| {
                    let at = key(&path, name);
                    (at.clone(), at, name.as_str(), value.as_str())
                })
                .collect(),
        };
        let mut headers = Vec::with_capacity(pairs.len());
        for (name_path, value_path, name, value) in pairs {
            let name = match HeaderName::from_bytes(name.as_bytes()) {
                Ok(name) if name == header::CONTENT_LENGTH || name == header::TRANSFER_ENCODING => {
                    self.error(
                        at,
                        name_path,
                        format!("`{name}` is set by the proxy from the body: leave it out"),
                    );
                    None
                }
                Ok(name) => Some(name),
                Err(_) => {
                    self.error(
                        at,
                        name_path,
                        format!(
                            "invalid header name `{name}`: a name is one or more letters, \
                             digits and !#$%&'*+-.^_`|~, with no spaces or colons"
                        ),
                    );
                    None
                }
            };
            let template = match HeaderTemplate::parse(value, shared.dynamic_range.clone()) {
                Some(template) => Some(template),
                None if is_dynamic(value) => {
                    self.error(
                        at,
                        &value_path,
                        format!(
                            "invalid `{}`: expected @dynamic (a wait drawn from \
                             errors.dynamicRange), @dynamic=SECONDS or @epoch=SECONDS (a whole \
                             number)",
                            value.trim()
                        ),
                    );
                    None
                }
                None => {
                    self.error(
                        at,
                        &value_path,
                        format!(
                            "invalid header value {value:?}: a value may not contain control \
                             characters such as a line break (tab is allowed)"
                        ),
                    );
                    None
                }
            };
            if let (Some(name), Some(template)) = (name, template) {
                if name == header::RETRY_AFTER {
                    self.check_retry_after(&value_path, &template);
                }
                headers.push((name, template));
            }
        }
        headers
    }

    /// Warns about a static `Retry-After` clients cannot read: it may be meant (to test how
    /// clients treat a malformed hint), so it is sent as is.
    fn check_retry_after(&mut self, path: &str, template: &HeaderTemplate) {
        let HeaderTemplate::Literal(value) = template else {
            return;
        };
        if let Err(err) =
            holdoff::RetryAfter::parse(value.as_bytes(), holdoff::RetryAfter::from_str_now())
        {
            self.warnings.push(format!(
                "{path}: `Retry-After: {}` is malformed ({}): it is sent as is, and \
                 the judge fails a client that retries within the minimum backoff after it; \
                 use whole seconds, an HTTP-date or @dynamic if a valid hint was meant",
                value.as_bytes().escape_ascii(),
                err.kind().describe(),
            ));
        }
    }

    /// The body's bytes; adds a `Content-Type` for it unless `headers` has one.
    fn body(
        &mut self,
        at: WrittenIn<'_>,
        path: &str,
        raw: Option<&serde_json::Value>,
        headers: &mut Vec<(HeaderName, HeaderTemplate)>,
    ) -> Option<Bytes> {
        let (body, content_type) = match raw {
            None => (Bytes::new(), None),
            Some(serde_json::Value::String(text)) => match text.strip_prefix('@') {
                Some(name) if name.trim().is_empty() => {
                    self.error(
                        at,
                        path,
                        "`@` must be followed by a file path (relative to this file), such as \
                         @body.json",
                    );
                    return None;
                }
                Some(name) => {
                    let file = at.dir.join(name);
                    let root = (!self.bodies_anywhere).then_some(at.root);
                    match read_body_file(&file, root) {
                        Ok(bytes) => {
                            self.read(&file);
                            (Bytes::from(bytes), content_type_of(&file))
                        }
                        Err(message) => {
                            self.error(at, path, message);
                            return None;
                        }
                    }
                }
                None if text.is_empty() => (Bytes::new(), None),
                None => (Bytes::from(text.clone()), Some(TEXT)),
            },
            Some(value) => match serde_json::to_vec(value) {
                Ok(json) => (Bytes::from(json), Some(JSON)),
                Err(err) => {
                    self.error(at, path, format!("cannot write the body as JSON: {err}"));
                    return None;
                }
            },
        };
        if let Some(content_type) = content_type
            && !headers.iter().any(|(name, _)| name == header::CONTENT_TYPE)
        {
            headers.push((
                header::CONTENT_TYPE,
                HeaderTemplate::Literal(HeaderValue::from_static(content_type)),
            ));
        }
        Some(body)
    }
}

pub(super) const TEXT: &str = "text/plain; charset=utf-8";
pub(super) const JSON: &str = "application/json";

/// The `Content-Type` of a body file, by its extension; `None` when unknown.
fn content_type_of(file: &Path) -> Option<&'static str> {
    let extension = file.extension()?.to_str()?.to_ascii_lowercase();
    Some(match extension.as_str() {
        "json" => JSON,
        "txt" => TEXT,
        "html" | "htm" => "text/html; charset=utf-8",
        "xml" => "application/xml",
        _ => return None,
    })
}

/// Whether a header value was meant as `@dynamic…`.
fn is_dynamic(value: &str) -> bool {
    let trimmed = value.trim();
    ["@dynamic", "@epoch"].iter().any(|template| {
        trimmed
            .get(..template.len())
            .is_some_and(|prefix| prefix.eq_ignore_ascii_case(template))
    })
}

fn network_name(fault: RawNetworkFault) -> &'static str {
    match fault {
        RawNetworkFault::Reset => "reset",
        RawNetworkFault::Hang => "hang",
        RawNetworkFault::Truncate => "truncate",
        RawNetworkFault::SlowBody => "slow-body",
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{compiled, header, literal, respond};
    use super::*;

    mod check_retry_after {
        use super::*;

        fn warnings(retry_after: &str) -> Vec<String> {
            compiled(&format!(
                r#"{{"errors": {{"rate": 100, "errors": [{{"request": {{"url": "*"}},
                    "responses": [{{"statusCode": 429, "headers": {{"Retry-After": "{retry_after}"}}}}]}}]}}}}"#
            ))
            .warnings
        }

        #[test]
        fn warns_of_a_static_value_clients_cannot_read_and_keeps_it() {
            let found = warnings("soon");
            assert_eq!(found.len(), 1, "{found:?}");
            assert!(found[0].starts_with("errors.errors[0]"), "{}", found[0]);
            assert!(
                found[0].contains("`Retry-After: soon` is malformed"),
                "{}",
                found[0]
            );
            assert!(found[0].contains("sent as is"), "{}", found[0]);
            assert_eq!(warnings("-1").len(), 1);
        }

        #[test]
        fn is_quiet_for_seconds_dates_and_dynamic_values() {
            for value in [
                "2",
                "Sun, 06 Nov 1994 08:49:37 GMT",
                "@dynamic",
                "@dynamic=3",
            ] {
                assert_eq!(warnings(value), Vec::<String>::new(), "{value}");
            }
        }
    }

    mod compile {
        use super::*;

        #[test]
        fn types_text_and_json_bodies_unless_told() {
            let compiled = compiled(
                r#"{"errors": {"errors": [{"request": {"url": "*"}, "responses": [
                    {"statusCode": 503, "body": "down"},
                    {"statusCode": 429, "body": {"error": {"code": 429}}},
                    {"statusCode": 429, "body": [1], "headers": {"Content-Type": "application/problem+json"}}
                ]}]}}"#,
            );
            let outcomes = &compiled.plan.errors[0].outcomes;
            let text = respond(&outcomes[0]);
            assert_eq!(text.body, "down");
            assert_eq!(header(text, "content-type"), Some(&literal(TEXT)));
            let json = respond(&outcomes[1]);
            assert_eq!(json.body, r#"{"error":{"code":429}}"#);
            assert_eq!(header(json, "content-type"), Some(&literal(JSON)));
            let problem = respond(&outcomes[2]);
            assert_eq!(problem.headers.len(), 1);
            assert_eq!(
                header(problem, "content-type"),
                Some(&literal("application/problem+json"))
            );
        }
    }
}
