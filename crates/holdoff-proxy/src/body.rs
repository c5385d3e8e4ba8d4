//! [`Body`]: the one body type of the pipeline, for requests and responses alike.

use std::fmt;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Body as _, Frame, SizeHint};
use http_body_util::BodyExt;
use http_body_util::combinators::UnsyncBoxBody;
use hyper::body::Incoming;
use tokio::sync::oneshot;

/// The error a [`Body`] can yield: whatever broke the stream, boxed.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// A streamed HTTP body: what a client sent, what an upstream answered, or what a
/// [`Stage`](crate::Stage) made up.
///
/// Bodies are never buffered by the proxy: each frame is passed on as it arrives. A body
/// relayed from one side to the other is not boxed either, so passing a request through costs
/// no allocation of its own; only [`Body::wrap`] boxes.
///
/// # Examples
///
/// ```
/// use holdoff_proxy::Body;
/// use http_body::Body as _;
///
/// let body = Body::from("slow down\n");
/// assert_eq!(body.size_hint().exact(), Some(10));
/// assert!(Body::empty().is_end_stream());
/// ```
pub struct Body {
    kind: Kind,
}

enum Kind {
    Empty,
    Full(Option<Bytes>),
    Incoming(Incoming),
    /// A client's body with bytes still to come, lent to the stages.
    Lent(Lent),
    /// An upstream's response body, with its URL to say which one broke off.
    Upstream(Incoming, http::Uri),
    Boxed(UnsyncBoxBody<Bytes, BoxError>),
}

impl Body {
    /// A body with no bytes.
    pub fn empty() -> Body {
        Body { kind: Kind::Empty }
    }

    /// A body of exactly these bytes, sent in one frame.
    pub fn full(bytes: impl Into<Bytes>) -> Body {
        let bytes = bytes.into();
        if bytes.is_empty() {
            return Body::empty();
        }
        Body {
            kind: Kind::Full(Some(bytes)),
        }
    }

    /// Any other body: a stream, a body that stalls, one that breaks off half-way.
    ///
    /// It may end with an error: a response body that fails mid-way makes the proxy cut the
    /// client's connection (HTTP/1.1) or reset the stream (HTTP/2), as a real upstream
    /// failing would.
    pub fn wrap<B>(body: B) -> Body
    where
        B: http_body::Body<Data = Bytes> + Send + 'static,
        B::Error: Into<BoxError>,
    {
        Body {
            kind: Kind::Boxed(body.map_err(Into::into).boxed_unsync()),
        }
    }

    pub(crate) fn incoming(body: Incoming) -> Body {
        Body {
            kind: Kind::Incoming(body),
        }
    }

    /// A client's request body for the stages and, when bytes of it are still to come, the
    /// way back to it: if a stage drops the body before its end (to answer itself), the
    /// proxy gets it back to read the rest (see `proxy::unread`). A body already at its end
    /// (a `GET`, `Content-Length: 0`) costs nothing more than [`Body::incoming`].
    pub(crate) fn lend(body: Incoming) -> (Body, Option<Unread>) {
        if body.is_end_stream() {
            return (Body::incoming(body), None);
        }
        let (back, unread) = oneshot::channel();
        let lent = Lent(Some((body, back)));
        (
            Body {
                kind: Kind::Lent(lent),
            },
            Some(Unread(unread)),
        )
    }

    /// An upstream's response body from `url`: if it breaks off, a warning says so (the
    /// response's own log line was written with its head).
    pub(crate) fn upstream(body: Incoming, url: http::Uri) -> Body {
        Body {
            kind: Kind::Upstream(body, url),
        }
    }
}

/// A lent request body: the body, and where it goes when dropped before its end. `None` only
/// while it is being dropped.
struct Lent(Option<(Incoming, oneshot::Sender<Incoming>)>);

impl Drop for Lent {
    fn drop(&mut self) {
        if let Some((body, back)) = self.0.take() {
            if !body.is_end_stream() {
                // Nobody waiting (the request went upstream): the body is dropped here.
                let _ = back.send(body);
            }
        }
    }
}

/// Where a lent request body comes back when a stage dropped it before its end.
pub(crate) struct Unread(oneshot::Receiver<Incoming>);

impl Unread {
    /// The body, if it was dropped before its end and not kept by anyone.
    pub(crate) fn take(mut self) -> Option<Incoming> {
        self.0.try_recv().ok()
    }
}

impl Default for Body {
    fn default() -> Body {
        Body::empty()
    }
}

impl From<Bytes> for Body {
    fn from(bytes: Bytes) -> Body {
        Body::full(bytes)
    }
}

impl From<String> for Body {
    fn from(text: String) -> Body {
        Body::full(text)
    }
}

impl From<&'static str> for Body {
    fn from(text: &'static str) -> Body {
        Body::full(text)
    }
}

impl From<Vec<u8>> for Body {
    fn from(bytes: Vec<u8>) -> Body {
        Body::full(bytes)
    }
}

impl fmt::Debug for Body {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = match &self.kind {
            Kind::Empty => "empty",
            Kind::Full(_) => "full",
            Kind::Incoming(_) | Kind::Lent(_) | Kind::Upstream(..) => "streamed",
            Kind::Boxed(_) => "wrapped",
        };
        f.debug_tuple("Body").field(&kind).finish()
    }
}

impl http_body::Body for Body {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        match &mut self.get_mut().kind {
            Kind::Empty => Poll::Ready(None),
            Kind::Full(bytes) => Poll::Ready(bytes.take().map(|bytes| Ok(Frame::data(bytes)))),
            Kind::Incoming(body) => Pin::new(body)
                .poll_frame(cx)
                .map_err(|err| Box::new(err) as BoxError),
            Kind::Lent(Lent(lent)) => match lent {
                Some((body, _)) => Pin::new(body)
                    .poll_frame(cx)
                    .map_err(|err| Box::new(err) as BoxError),
                None => Poll::Ready(None),
            },
            Kind::Upstream(body, url) => Pin::new(body).poll_frame(cx).map_err(|err| {
                tracing::warn!(
                    target: "holdoff::request",
                    url = %url,
                    error = %err,
                    "the upstream's response body broke off; the client's connection is cut"
                );
                Box::new(err) as BoxError
            }),
            Kind::Boxed(body) => Pin::new(body).poll_frame(cx),
        }
    }

    fn is_end_stream(&self) -> bool {
        match &self.kind {
            Kind::Empty => true,
            Kind::Full(bytes) => bytes.is_none(),
            Kind::Incoming(body) | Kind::Upstream(body, _) => body.is_end_stream(),
            Kind::Lent(Lent(lent)) => lent.as_ref().is_none_or(|(body, _)| body.is_end_stream()),
            Kind::Boxed(body) => body.is_end_stream(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match &self.kind {
            Kind::Empty => SizeHint::with_exact(0),
            Kind::Full(bytes) => {
                SizeHint::with_exact(bytes.as_ref().map_or(0, |bytes| bytes.len() as u64))
            }
            Kind::Incoming(body) | Kind::Upstream(body, _) => body.size_hint(),
            Kind::Lent(Lent(lent)) => lent
                .as_ref()
                .map_or_else(|| SizeHint::with_exact(0), |(body, _)| body.size_hint()),
            Kind::Boxed(body) => body.size_hint(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    mod full {
        use super::*;

        #[tokio::test]
        async fn yields_its_bytes_once_with_an_exact_size() {
            let body = Body::from("hello");
            assert_eq!(body.size_hint().exact(), Some(5));
            assert!(!body.is_end_stream());
            let bytes = body.collect().await.unwrap().to_bytes();
            assert_eq!(bytes, "hello");
        }

        #[test]
        fn of_nothing_is_empty() {
            let body = Body::full(Bytes::new());
            assert!(body.is_end_stream());
            assert_eq!(body.size_hint().exact(), Some(0));
        }
    }

    mod wrap {
        use super::*;

        /// Yields one frame, then fails.
        struct BreaksOff(bool);

        impl http_body::Body for BreaksOff {
            type Data = Bytes;
            type Error = std::io::Error;

            fn poll_frame(
                mut self: Pin<&mut Self>,
                _: &mut Context<'_>,
            ) -> Poll<Option<Result<Frame<Bytes>, std::io::Error>>> {
                if std::mem::replace(&mut self.0, true) {
                    Poll::Ready(Some(Err(std::io::Error::other("cut"))))
                } else {
                    Poll::Ready(Some(Ok(Frame::data(Bytes::from_static(b"half")))))
                }
            }
        }

        #[tokio::test]
        async fn passes_frames_and_errors_through() {
            let mut body = Body::wrap(BreaksOff(false));
            let first = body.frame().await.unwrap().unwrap();
            assert_eq!(first.into_data().unwrap(), "half");
            let err = body.frame().await.unwrap().unwrap_err();
            assert_eq!(err.to_string(), "cut");
        }
    }
}
