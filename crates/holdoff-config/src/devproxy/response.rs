//! Requests and responses as Dev Proxy's errors, mocks and custom-response files write them,
//! and a response carried over to holdoff's.

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

use super::data::{BodyFiles, Data};
use super::importer::Importer;
use super::keys::Unread;
use crate::file::{RawHeader, RawHeaders, RawResponse};

/// The request of an errors file's rule.
#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(super) struct DpRequest {
    pub(super) url: String,
    pub(super) method: Option<String>,
    pub(super) body_fragment: Option<String>,
}

/// A response of an errors or mocks file.
#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(super) struct DpResponse {
    pub(super) status_code: Option<u16>,
    pub(super) headers: Option<Vec<DpHeader>>,
    pub(super) body: Option<Value>,
}

#[derive(Deserialize, JsonSchema)]
pub(super) struct DpHeader {
    pub(super) name: String,
    pub(super) value: String,
}

/// A custom-response file: the one response a rate-limiting plugin sends past its limit.
#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(super) struct DpCustomResponse {
    #[serde(rename = "$schema")]
    _schema: Option<Unread>,
    #[serde(rename = "definitions")]
    _definitions: Option<Unread>,
    status_code: Option<u16>,
    headers: Option<Vec<DpHeader>>,
    body: Option<Value>,
}

impl From<DpCustomResponse> for DpResponse {
    fn from(file: DpCustomResponse) -> DpResponse {
        DpResponse {
            status_code: file.status_code,
            headers: file.headers,
            body: file.body,
        }
    }
}

/// The status of a mock or custom response without one.
pub(super) const DEFAULT_OK_STATUS: u16 = 200;

/// A response carried over by [`raw_response`], and what it changed on the way.
pub(super) struct Carried {
    pub(super) response: RawResponse,
    /// How many framing headers (`Content-Length`, `Transfer-Encoding`) it left out.
    pub(super) framing: usize,
    /// The `@file` body it served as text because the file does not exist, as written.
    pub(super) missing_body: Option<String>,
}

/// A Dev Proxy response as holdoff's, with Dev Proxy's default status, and an `@file` body
/// rewritten from the data file's directory to the configuration's (its tokens expanded).
///
/// Dev Proxy's files often carry a `Content-Length` copied from a real response. Dev Proxy
/// sets the framing of what it sends itself, and so does holdoff, which refuses such a header
/// in its own files: the import leaves it out, and says so ([`framing_note`]).
///
/// When an `@file` body's file does not exist, Dev Proxy logs an error and sends the body as
/// written, quoted as the JSON string it is (`"@images/404.jpg"`); so does the import, whose
/// caller says so ([`missing_bodies_note`]).
pub(super) fn raw_response(
    mut response: DpResponse,
    default_status: u16,
    files: &BodyFiles<'_>,
) -> Carried {
    let mut framing = 0;
    if let Some(headers) = &mut response.headers {
        let before = headers.len();
        headers.retain(|header| !is_framing(&header.name));
        framing = before - headers.len();
    }
    let mut missing_body = None;
    let body = response.body.filter(|body| !body.is_null()).map(|body| {
        let Some(written) = body.as_str() else {
            return body;
        };
        let Some(name) = written.strip_prefix('@') else {
            return body;
        };
        let found = files
            .folders
            .expand(name)
            .ok()
            .map(|name| files.base.join(name))
            .filter(|path| files.root.join(path).is_file());
        match found {
            Some(path) if path.as_os_str() == name => body,
            Some(path) => Value::String(format!("@{}", path.display())),
            None => {
                missing_body = Some(written.to_owned());
                Value::String(Value::String(written.to_owned()).to_string())
            }
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
    Carried {
        response: raw,
        framing,
        missing_body,
    }
}

impl Importer {
    /// A plugin's custom-response file (`setting`: its key, value and Dev Proxy's default;
    /// `then` says what the plugin does without it), read, and its response as holdoff's, with a
    /// note for what Dev Proxy fills in or leaves out of it; with the file as shown.
    pub(super) fn custom_response(
        &mut self,
        (key, value, default): (String, Option<&str>, &str),
        then: &str,
    ) -> Option<(String, RawResponse)> {
        let Data {
            file,
            value: response,
            base,
        } = self.data::<DpCustomResponse>((&key, value, default), then)?;
        let response = DpResponse::from(response);
        if response.status_code.is_none() {
            self.note(format!(
                "{file}: the response has no statusCode; Dev Proxy sends {DEFAULT_OK_STATUS} \
                 then, and so does the import."
            ));
        }
        let carried = raw_response(response, DEFAULT_OK_STATUS, &self.body_files(&base));
        if let Some(note) = framing_note(&file, carried.framing) {
            self.note(note);
        }
        let missing: Vec<_> = carried
            .missing_body
            .map(|body| ("its response".to_owned(), body))
            .into_iter()
            .collect();
        if let Some(note) = missing_bodies_note(&file, &missing) {
            self.note(note);
        }
        Some((file, carried.response))
    }
}

/// The note for the `@file` bodies of `file` whose files do not exist (`missing`: where each
/// is, and the body as written), if any.
pub(super) fn missing_bodies_note(file: &str, missing: &[(String, String)]) -> Option<String> {
    let [(first_at, first), rest @ ..] = missing else {
        return None;
    };
    let which = match rest {
        [] => format!("the body of {first_at} names a file that does not exist (`{first}`)"),
        _ => format!(
            "{} bodies name files that do not exist (`{first}` at {first_at}, and {} more)",
            missing.len(),
            rest.len()
        ),
    };
    Some(format!(
        "{file}: {which}; Dev Proxy then sends the path itself as the body, in quotes, and so \
         does holdoff. Create the file (relative to {file}'s folder) to send it instead."
    ))
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

#[cfg(test)]
mod tests {
    use super::super::folders::Folders;
    use super::*;
    use std::path::Path;

    mod raw_response {
        use super::*;

        /// Body files looked for from `root`, with the data file in `base`.
        fn carry(response: DpResponse, root: &Path, base: &str) -> Carried {
            let files = BodyFiles {
                root,
                base: Path::new(base),
                folders: &Folders::default(),
            };
            raw_response(response, 400, &files)
        }

        fn with_body(body: &str) -> DpResponse {
            DpResponse {
                status_code: None,
                headers: None,
                body: Some(Value::String(body.to_owned())),
            }
        }

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
            let carried = carry(response, Path::new(""), "");
            assert_eq!(carried.framing, 2);
            let Some(RawHeaders::List(headers)) = carried.response.headers else {
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
            let root = tempfile::tempdir().unwrap();
            std::fs::create_dir(root.path().join("data")).unwrap();
            std::fs::write(root.path().join("data/body.json"), "{}").unwrap();
            let carried = carry(with_body("@body.json"), root.path(), "data");
            assert_eq!(carried.framing, 0);
            assert_eq!(carried.missing_body, None);
            assert_eq!(carried.response.status_code, Some(400));
            assert_eq!(
                carried.response.body,
                Some(Value::String("@data/body.json".to_owned()))
            );
        }

        #[test]
        fn sends_the_path_of_a_missing_body_file_quoted_as_dev_proxy_does() {
            let root = tempfile::tempdir().unwrap();
            let carried = carry(with_body("@images/404.jpg"), root.path(), "data");
            assert_eq!(carried.missing_body.as_deref(), Some("@images/404.jpg"));
            // Not a file reference any more: the text Dev Proxy sends, quotes and all.
            assert_eq!(
                carried.response.body,
                Some(Value::String("\"@images/404.jpg\"".to_owned()))
            );
            let one = [("errors[0].responses[0]".to_owned(), "@a.jpg".to_owned())];
            assert_eq!(
                missing_bodies_note("errors.json", &one).unwrap(),
                "errors.json: the body of errors[0].responses[0] names a file that does not \
                 exist (`@a.jpg`); Dev Proxy then sends the path itself as the body, in quotes, \
                 and so does holdoff. Create the file (relative to errors.json's folder) to send \
                 it instead."
            );
            assert_eq!(missing_bodies_note("errors.json", &[]), None);
        }

        #[test]
        fn drops_a_null_body() {
            let response = DpResponse {
                status_code: Some(503),
                headers: Some(Vec::new()),
                body: Some(Value::Null),
            };
            let carried = carry(response, Path::new(""), "");
            assert_eq!(carried.response.body, None);
            assert_eq!(carried.response.headers, Some(RawHeaders::List(Vec::new())));
        }
    }
}
