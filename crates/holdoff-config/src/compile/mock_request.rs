//! `mockRequest`, checked: the request the proxy sends when asked.

use bytes::Bytes;
use http::{HeaderName, HeaderValue, Method, Uri};

use super::{Compiler, WrittenIn};
use crate::file::RawMockRequest;

/// A request to send when asked (`POST /proxy/mockRequest`), as Dev Proxy's
/// MockRequestPlugin sends one.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct MockRequest {
    /// The method.
    pub method: Method,
    /// The absolute URL.
    pub url: Uri,
    /// The headers, in order, a `content-type` included.
    pub headers: Vec<(HeaderName, HeaderValue)>,
    /// The body.
    pub body: Bytes,
}

impl Compiler {
    pub(super) fn mock_request(
        &mut self,
        at: WrittenIn<'_>,
        raw: &RawMockRequest,
    ) -> Option<MockRequest> {
        let mut ok = true;
        let url = match raw.url.parse::<Uri>() {
            Ok(url)
                if matches!(url.scheme_str(), Some("http" | "https")) && url.host().is_some() =>
            {
                Some(url)
            }
            _ => {
                ok = false;
                self.error(
                    at,
                    "mockRequest.url",
                    format!(
                        "{:?} is not an absolute http:// or https:// URL (e.g. \
                         http://localhost:3000/webhook)",
                        raw.url
                    ),
                );
                None
            }
        };
        let method = match raw.method.as_deref().unwrap_or("POST").parse::<Method>() {
            Ok(method) => Some(method),
            Err(_) => {
                ok = false;
                self.error(at, "mockRequest.method", "not a valid HTTP method");
                None
            }
        };
        let mut headers = Vec::with_capacity(raw.headers.len() + 1);
        for (i, header) in raw.headers.iter().enumerate() {
            let name = HeaderName::from_bytes(header.name.as_bytes());
            let value = HeaderValue::from_str(&header.value);
            match (name, value) {
                (Ok(name), Ok(value)) => headers.push((name, value)),
                _ => {
                    ok = false;
                    self.error(
                        at,
                        format!("mockRequest.headers[{i}]"),
                        "not a valid header name and value",
                    );
                }
            }
        }
        let body = match &raw.body {
            None => Bytes::new(),
            Some(serde_json::Value::String(text)) => Bytes::from(text.clone()),
            Some(value) => {
                if !headers
                    .iter()
                    .any(|(name, _)| name == http::header::CONTENT_TYPE)
                {
                    headers.push((
                        http::header::CONTENT_TYPE,
                        HeaderValue::from_static("application/json"),
                    ));
                }
                Bytes::from(value.to_string())
            }
        };
        Some(MockRequest {
            method: method?,
            url: url?,
            headers,
            body,
        })
        .filter(|_| ok)
    }
}

#[cfg(test)]
mod tests {
    use crate::compile::tests::compiled;

    #[test]
    fn a_json_body_is_sent_as_json_and_post_is_the_default() {
        let compiled = compiled(
            r#"{"mockRequest": {"url": "http://localhost:3000/webhook",
                "headers": [{"name": "x-signature", "value": "abc"}],
                "body": {"event": "created", "id": 7}}}"#,
        );
        let request = compiled.mock_request.expect("compiled");
        assert_eq!(request.method, http::Method::POST);
        assert_eq!(request.url, "http://localhost:3000/webhook");
        assert_eq!(request.headers.len(), 2);
        assert_eq!(request.headers[1].1, "application/json");
        assert_eq!(request.body, r#"{"event":"created","id":7}"#);
    }

    #[test]
    fn a_relative_url_is_refused_saying_what_to_write() {
        let raw = crate::load::parse(
            r#"{"mockRequest": {"url": "/webhook", "method": "P OST"}}"#,
            crate::load::Format::Json,
            "holdoff.json",
        )
        .unwrap();
        let err = crate::compile::compile(&raw, "holdoff.json", std::path::Path::new("."))
            .unwrap_err()
            .to_string();
        assert!(err.contains("mockRequest.url"), "{err}");
        assert!(err.contains("mockRequest.method"), "{err}");
    }
}
