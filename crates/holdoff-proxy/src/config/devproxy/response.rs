//! Requests and responses as Dev Proxy's errors, mocks and custom-response files write them,
//! and a response carried over to holdoff's.

use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::Value;

use super::doc::{Leaf, List, Object, Shape};
use crate::config::file::{RawHeader, RawHeaders, RawResponse};

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct DpRequest {
    pub(super) url: String,
    pub(super) method: Option<String>,
    pub(super) body_fragment: Option<String>,
    pub(super) nth: Option<u64>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct DpResponse {
    pub(super) status_code: Option<u16>,
    pub(super) headers: Option<Vec<DpHeader>>,
    pub(super) body: Option<Value>,
}

#[derive(Deserialize)]
pub(super) struct DpHeader {
    pub(super) name: String,
    pub(super) value: String,
}

pub(super) const HEADER: Shape = Object(&[("name", Leaf), ("value", Leaf)]);
pub(super) const RESPONSE: Shape = Object(&[
    ("statusCode", Leaf),
    ("headers", List(&HEADER)),
    ("body", Leaf),
]);

/// The status of a mock or custom response without one.
pub(super) const DEFAULT_OK_STATUS: u16 = 200;

/// A Dev Proxy response as holdoff's, with Dev Proxy's default status, and an `@file` body
/// rewritten from the data file's directory (`base`, relative to the configuration's) to the
/// configuration's; and how many framing headers (`Content-Length`, `Transfer-Encoding`) it
/// left out.
///
/// Dev Proxy's files often carry a `Content-Length` copied from a real response. Dev Proxy
/// sets the framing of what it sends itself, and so does holdoff, which refuses such a header
/// in its own files: the import leaves it out, and says so ([`framing_note`]).
pub(super) fn raw_response(
    mut response: DpResponse,
    default_status: u16,
    base: &Path,
) -> (RawResponse, usize) {
    let mut dropped = 0;
    if let Some(headers) = &mut response.headers {
        let before = headers.len();
        headers.retain(|header| !is_framing(&header.name));
        dropped = before - headers.len();
    }
    let body = response.body.filter(|body| !body.is_null()).map(|body| {
        match body.as_str().and_then(|text| text.strip_prefix('@')) {
            Some(name) if !base.as_os_str().is_empty() => {
                Value::String(format!("@{}", base.join(name).display()))
            }
            _ => body,
        }
    });
    let raw = RawResponse {
        status_code: Some(response.status_code.unwrap_or(default_status)),
        headers: response.headers.map(|headers| {
            RawHeaders::List(
                headers
                    .into_iter()
                    .map(|header| RawHeader {
                        name: header.name,
                        value: header.value,
                    })
                    .collect(),
            )
        }),
        body,
        ..RawResponse::default()
    };
    (raw, dropped)
}

/// Whether a header is one the proxy sets from the body it sends.
fn is_framing(name: &str) -> bool {
    let name = name.trim();
    name.eq_ignore_ascii_case("content-length") || name.eq_ignore_ascii_case("transfer-encoding")
}

/// The note for `dropped` framing headers left out of `file`'s responses, if any.
pub(super) fn framing_note(file: &str, dropped: usize) -> Option<String> {
    let headers = match dropped {
        0 => return None,
        1 => "1 Content-Length or Transfer-Encoding header".to_owned(),
        n => format!("{n} Content-Length and Transfer-Encoding headers"),
    };
    Some(format!(
        "{file}: left out {headers} of its responses: the proxy sets them from each body it \
         sends, as Dev Proxy does."
    ))
}

/// The directory of a data file named `name` in the configuration, relative to the
/// configuration's directory (empty when it is the same).
pub(super) fn relative_dir(name: &str) -> PathBuf {
    Path::new(name)
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    mod raw_response {
        use super::*;

        #[test]
        fn leaves_out_the_framing_headers_and_counts_them() {
            let header = |name: &str, value: &str| DpHeader {
                name: name.to_owned(),
                value: value.to_owned(),
            };
            let response = DpResponse {
                status_code: Some(429),
                headers: Some(vec![
                    header("Content-Length", "291"),
                    header("Retry-After", "@dynamic"),
                    header(" transfer-encoding", "chunked"),
                ]),
                body: None,
            };
            let (raw, dropped) = raw_response(response, 400, Path::new(""));
            assert_eq!(dropped, 2);
            let Some(RawHeaders::List(headers)) = raw.headers else {
                panic!("a header list");
            };
            let names: Vec<_> = headers.iter().map(|h| h.name.as_str()).collect();
            assert_eq!(names, ["Retry-After"]);
            assert_eq!(framing_note("errors.json", 0), None);
            assert!(
                framing_note("e.json", 2)
                    .unwrap()
                    .starts_with("e.json: left out 2 ")
            );
        }

        #[test]
        fn fills_in_the_status_and_rebases_a_file_body() {
            let response = DpResponse {
                status_code: None,
                headers: None,
                body: Some(Value::String("@body.json".to_owned())),
            };
            let (raw, dropped) = raw_response(response, 400, Path::new("data"));
            assert_eq!(dropped, 0);
            assert_eq!(raw.status_code, Some(400));
            assert_eq!(raw.body, Some(Value::String("@data/body.json".to_owned())));
        }

        #[test]
        fn drops_a_null_body() {
            let response = DpResponse {
                status_code: Some(503),
                headers: Some(Vec::new()),
                body: Some(Value::Null),
            };
            let (raw, _) = raw_response(response, 400, Path::new(""));
            assert_eq!(raw.body, None);
            assert_eq!(raw.headers, Some(RawHeaders::List(Vec::new())));
        }
    }
}
