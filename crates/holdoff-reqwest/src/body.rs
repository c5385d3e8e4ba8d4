//! A response as the retry loop sees it, with the start of a 429's body read for the quota
//! classifier and handed back to the caller intact.

use std::mem;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::{Bytes, BytesMut};
use holdoff::Receipt;
use holdoff::clock::TokioClock;
use http::{HeaderMap, StatusCode};
use http_body::{Frame, SizeHint};
use reqwest::ResponseBuilderExt as _;

/// How much of a 429's body is read for the quota classifier. Quota errors are small JSON
/// documents; a longer body is still handed back whole, only its start is classified.
pub(crate) const QUOTA_BODY_LIMIT: usize = 64 * 1024;

/// One attempt's response, for [`holdoff::retry::Response`].
#[derive(Debug)]
pub(crate) struct Attempted {
    pub(crate) response: reqwest::Response,
    /// The start of the body of a 429 (up to [`QUOTA_BODY_LIMIT`]); empty otherwise.
    head: Bytes,
    /// When the head arrived, for a response whose body was then read; `None` otherwise.
    received: Option<Receipt>,
}

impl holdoff::retry::Response for Attempted {
    fn status(&self) -> StatusCode {
        self.response.status()
    }
    fn headers(&self) -> &HeaderMap {
        self.response.headers()
    }
    fn body_bytes(&self) -> &[u8] {
        &self.head
    }
    fn received(&self) -> Option<Receipt> {
        self.received
    }
}

impl Attempted {
    /// Wraps `response`; when the policy's quota classifier reads bodies for its status (a
    /// 429, unless the classifier reads none: [`holdoff::Policy::reads_body`]), first reads
    /// the start of its body so the classifier can see it, and rebuilds the response around
    /// the same bytes. Either way the receipt is the head's arrival: a server that writes the
    /// head and the body apart delays the decision by the time the start of the body takes
    /// (bounded by the task's deadline), never the retry, which is due that long after the
    /// head. Otherwise the body is not touched.
    ///
    /// # Errors
    ///
    /// The transport error that broke off the body being read.
    pub(crate) async fn read(
        response: reqwest::Response,
        policy: &holdoff::Policy,
    ) -> Result<Attempted, reqwest::Error> {
        if !policy.reads_body(response.status()) {
            return Ok(Attempted {
                response,
                head: Bytes::new(),
                received: None,
            });
        }
        // The head is here now; every wait counts from it, however late the body comes.
        let received = Some(Receipt::now(&TokioClock));
        let (response, head) = read_head(response, QUOTA_BODY_LIMIT).await?;
        Ok(Attempted {
            response,
            head,
            received,
        })
    }
}

/// Reads `response`'s body until it ends or `limit` bytes have arrived, and returns a response
/// with the same status, version, headers, extensions and URL whose body yields those bytes
/// and then whatever had not been read yet.
async fn read_head(
    mut response: reqwest::Response,
    limit: usize,
) -> Result<(reqwest::Response, Bytes), reqwest::Error> {
    let mut head = BytesMut::new();
    let complete = loop {
        if head.len() >= limit {
            break false;
        }
        match response.chunk().await? {
            Some(chunk) => head.extend_from_slice(&chunk),
            None => break true,
        }
    };
    let head = head.freeze();
    let status = response.status();
    let version = response.version();
    let headers = mem::take(response.headers_mut());
    let mut extensions = mem::take(response.extensions_mut());
    // reqwest keeps a response's URL in an extension only its builder can set. Building an
    // empty response with a URL cannot fail; if it ever did, reqwest would show a
    // placeholder URL, which is no reason to fail the request.
    if let Ok(mut carrier) = http::Response::builder()
        .url(response.url().clone())
        .body(())
    {
        extensions.extend(mem::take(carrier.extensions_mut()));
    }
    let body = if complete {
        reqwest::Body::from(head.clone())
    } else {
        reqwest::Body::wrap(Prefixed {
            head: Some(head.clone()),
            rest: reqwest::Body::from(response),
        })
    };
    let mut rebuilt = http::Response::new(body);
    *rebuilt.status_mut() = status;
    *rebuilt.version_mut() = version;
    *rebuilt.headers_mut() = headers;
    *rebuilt.extensions_mut() = extensions;
    Ok((reqwest::Response::from(rebuilt), head))
}

/// A body that yields bytes already read, then the rest of the original body.
struct Prefixed {
    head: Option<Bytes>,
    rest: reqwest::Body,
}

impl http_body::Body for Prefixed {
    type Data = Bytes;
    type Error = reqwest::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, reqwest::Error>>> {
        if let Some(head) = self.head.take() {
            return Poll::Ready(Some(Ok(Frame::data(head))));
        }
        Pin::new(&mut self.rest).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.head.is_none() && self.rest.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        let rest = self.rest.size_hint();
        let head = self.head.as_ref().map_or(0, |head| head.len() as u64);
        let mut hint = SizeHint::new();
        hint.set_lower(rest.lower().saturating_add(head));
        if let Some(upper) = rest.upper() {
            hint.set_upper(upper.saturating_add(head));
        }
        hint
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::VecDeque;
    use std::convert::Infallible;

    /// A streamed body that arrives in the given chunks.
    struct Chunks(VecDeque<&'static str>);

    impl http_body::Body for Chunks {
        type Data = Bytes;
        type Error = Infallible;

        fn poll_frame(
            mut self: Pin<&mut Self>,
            _: &mut Context<'_>,
        ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
            Poll::Ready(
                self.0
                    .pop_front()
                    .map(|chunk| Ok(Frame::data(chunk.into()))),
            )
        }
    }

    fn response(chunks: &[&'static str]) -> reqwest::Response {
        let body = reqwest::Body::wrap(Chunks(chunks.iter().copied().collect()));
        let url = reqwest::Url::parse("http://api.test/v1/chat").expect("url");
        let response = http::Response::builder()
            .status(429)
            .header("retry-after", "2")
            .url(url)
            .extension(7u8)
            .body(body)
            .expect("response");
        reqwest::Response::from(response)
    }

    mod read_head {
        use super::*;

        #[tokio::test]
        async fn reads_a_short_body_whole_and_hands_it_back() {
            let (response, head) = read_head(response(&["{\"a\":", "1}"]), 64)
                .await
                .expect("read");
            assert_eq!(head, "{\"a\":1}");
            assert_eq!(response.status(), 429);
            assert_eq!(response.headers()["retry-after"], "2");
            assert_eq!(response.url().as_str(), "http://api.test/v1/chat");
            assert_eq!(response.extensions().get::<u8>(), Some(&7));
            assert_eq!(response.content_length(), Some(7));
            assert_eq!(response.text().await.expect("body"), "{\"a\":1}");
        }

        #[tokio::test]
        async fn stops_at_the_limit_and_streams_the_rest_after_it() {
            let (response, head) = read_head(response(&["abc", "def", "ghi", "jkl"]), 4)
                .await
                .expect("read");
            assert_eq!(head, "abcdef");
            assert_eq!(response.url().as_str(), "http://api.test/v1/chat");
            assert_eq!(response.text().await.expect("body"), "abcdefghijkl");
        }
    }
}
