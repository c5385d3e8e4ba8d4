//! Bodies the fault stage reads or reshapes: a request body buffered to look for a fragment
//! and replayed, and response bodies cut short or slowed down.

use std::fmt;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use bytes::Bytes;
use holdoff::clock::{Clock, Sleep};
use http::HeaderMap;
use http_body::{Frame, SizeHint};
use http_body_util::BodyExt;

use crate::body::{Body, BoxError};

/// A request body read for a fragment search: the bytes, when the whole body fit within the
/// limit, and a body that yields exactly what the client sent.
pub(crate) struct Buffered {
    /// The whole body, or `None` when it is larger than the limit.
    pub(crate) bytes: Option<Bytes>,
    /// The body to send on: the bytes read, then whatever was not read yet.
    pub(crate) body: Body,
}

/// Reads `body` until it ends or more than `limit` bytes have arrived.
///
/// # Errors
///
/// When the body breaks off (the client went away, or sent a malformed chunk).
pub(crate) async fn buffer(mut body: Body, limit: usize) -> Result<Buffered, BoxError> {
    let mut chunks: Vec<Bytes> = Vec::new();
    let mut read = 0;
    let mut trailers = None;
    let mut ended = false;
    while read <= limit {
        match body.frame().await {
            None => {
                ended = true;
                break;
            }
            Some(frame) => match frame?.into_data() {
                Ok(data) => {
                    read += data.len();
                    chunks.push(data);
                }
                Err(frame) => {
                    // Trailers come last: the body is over.
                    trailers = frame.into_trailers().ok();
                    ended = true;
                    break;
                }
            },
        }
    }
    let head = concat(chunks, read);
    if ended && trailers.is_none() {
        return Ok(Buffered {
            bytes: Some(head.clone()),
            body: Body::full(head),
        });
    }
    let bytes = (ended && read <= limit).then(|| head.clone());
    let rest = (!ended).then_some(body);
    Ok(Buffered {
        bytes,
        body: Body::wrap(Replay {
            head: Some(head).filter(|head| !head.is_empty()),
            rest,
            trailers,
        }),
    })
}

/// The chunks as one `Bytes`, copying only when there are several.
fn concat(mut chunks: Vec<Bytes>, len: usize) -> Bytes {
    if chunks.len() <= 1 {
        return chunks.pop().unwrap_or_default();
    }
    let mut joined = Vec::with_capacity(len);
    for chunk in &chunks {
        joined.extend_from_slice(chunk);
    }
    Bytes::from(joined)
}

/// What was read of a body, then the rest of it.
struct Replay {
    head: Option<Bytes>,
    rest: Option<Body>,
    trailers: Option<HeaderMap>,
}

impl http_body::Body for Replay {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = self.get_mut();
        if let Some(head) = this.head.take() {
            return Poll::Ready(Some(Ok(Frame::data(head))));
        }
        if let Some(rest) = &mut this.rest {
            match ready!(Pin::new(rest).poll_frame(cx)) {
                Some(frame) => return Poll::Ready(Some(frame)),
                None => this.rest = None,
            }
        }
        Poll::Ready(this.trailers.take().map(|t| Ok(Frame::trailers(t))))
    }

    fn is_end_stream(&self) -> bool {
        self.head.is_none()
            && self.trailers.is_none()
            && self.rest.as_ref().is_none_or(Body::is_end_stream)
    }

    fn size_hint(&self) -> SizeHint {
        let head = self.head.as_ref().map_or(0, |head| head.len() as u64);
        let mut hint = self
            .rest
            .as_ref()
            .map_or_else(|| SizeHint::with_exact(0), http_body::Body::size_hint);
        hint.set_lower(hint.lower().saturating_add(head));
        if let Some(upper) = hint.upper() {
            hint.set_upper(upper.saturating_add(head));
        }
        hint
    }
}

/// The error that cuts a truncated body: the proxy then drops the client's connection
/// (HTTP/1.1) or resets the stream (HTTP/2).
#[derive(Debug)]
pub(crate) struct Cut;

impl fmt::Display for Cut {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("the body was cut short by a truncate fault")
    }
}

impl std::error::Error for Cut {}

/// A body that yields at most `left` bytes and then fails, so the client sees the connection
/// cut rather than a body that ends cleanly. Its size hint stays the original's, so a
/// `Content-Length` still promises the whole body.
pub(crate) struct Truncated {
    inner: Body,
    left: u64,
    /// Whether the server has had a chance to flush what was sent before the cut.
    yielded: bool,
    cut: bool,
}

impl Truncated {
    pub(crate) fn new(inner: Body, after: u64) -> Truncated {
        Truncated {
            inner,
            left: after,
            yielded: false,
            cut: false,
        }
    }
}

impl http_body::Body for Truncated {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = self.get_mut();
        if this.cut {
            return Poll::Ready(None);
        }
        if this.left == 0 {
            // hyper drops what it has buffered when a body fails: let it write the head and
            // the bytes before the cut first (it flushes whenever the body is pending).
            if !this.yielded {
                this.yielded = true;
                cx.waker().wake_by_ref();
                return Poll::Pending;
            }
            this.cut = true;
            return Poll::Ready(Some(Err(Box::new(Cut))));
        }
        match ready!(Pin::new(&mut this.inner).poll_frame(cx)) {
            Some(Ok(frame)) => match frame.into_data() {
                Ok(mut data) => {
                    let len = data.len() as u64;
                    if len > this.left {
                        // `left` < `len`, a `usize`: it fits.
                        data.truncate(usize::try_from(this.left).unwrap_or(data.len()));
                        this.left = 0;
                    } else {
                        this.left -= len;
                    }
                    Poll::Ready(Some(Ok(Frame::data(data))))
                }
                // Trailers: the cut is their place.
                Err(_) => {
                    this.left = 0;
                    Pin::new(this).poll_frame(cx)
                }
            },
            Some(Err(err)) => Poll::Ready(Some(Err(err))),
            // Shorter than the cut: end it with the cut anyway, so the end is never clean.
            None => {
                this.left = 0;
                Pin::new(this).poll_frame(cx)
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.cut
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// How often a slowed body releases a chunk.
const TICK: Duration = Duration::from_millis(100);

/// A body released at about `bytes_per_second`: a chunk of a tenth of that every 100 ms, the
/// first at once.
pub(crate) struct Slowed {
    inner: Body,
    clock: Arc<dyn Clock>,
    chunk: usize,
    /// Received and not yet released.
    pending: Bytes,
    /// A trailers frame that waits for `pending` to be released.
    trailers: Option<HeaderMap>,
    /// Until the next chunk may go.
    sleep: Option<Sleep>,
}

impl Slowed {
    pub(crate) fn new(inner: Body, bytes_per_second: u64, clock: Arc<dyn Clock>) -> Slowed {
        let chunk = usize::try_from(bytes_per_second / 10)
            .unwrap_or(usize::MAX)
            .max(1);
        Slowed {
            inner,
            clock,
            chunk,
            pending: Bytes::new(),
            trailers: None,
            sleep: None,
        }
    }
}

impl http_body::Body for Slowed {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = self.get_mut();
        loop {
            if !this.pending.is_empty() {
                if let Some(sleep) = &mut this.sleep {
                    ready!(sleep.as_mut().poll(cx));
                }
                let release = this.pending.len().min(this.chunk);
                let data = this.pending.split_to(release);
                let next = this.clock.now() + TICK;
                this.sleep = Some(this.clock.sleep_until(next));
                return Poll::Ready(Some(Ok(Frame::data(data))));
            }
            if let Some(trailers) = this.trailers.take() {
                return Poll::Ready(Some(Ok(Frame::trailers(trailers))));
            }
            match ready!(Pin::new(&mut this.inner).poll_frame(cx)) {
                Some(Ok(frame)) => match frame.into_data() {
                    Ok(data) => this.pending = data,
                    Err(frame) => this.trailers = frame.into_trailers().ok(),
                },
                other => return Poll::Ready(other),
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.pending.is_empty() && self.trailers.is_none() && self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        let mut hint = self.inner.size_hint();
        let pending = self.pending.len() as u64;
        hint.set_lower(hint.lower().saturating_add(pending));
        if let Some(upper) = hint.upper() {
            hint.set_upper(upper.saturating_add(pending));
        }
        hint
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use holdoff::clock::ManualClock;
    use http_body::Body as _;
    use std::time::UNIX_EPOCH;

    /// Yields these frames in order.
    struct Frames(std::collections::VecDeque<Frame<Bytes>>);

    impl http_body::Body for Frames {
        type Data = Bytes;
        type Error = BoxError;

        fn poll_frame(
            self: Pin<&mut Self>,
            _: &mut Context<'_>,
        ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
            Poll::Ready(self.get_mut().0.pop_front().map(Ok))
        }
    }

    fn chunks(parts: &[&'static str]) -> Body {
        Body::wrap(Frames(
            parts
                .iter()
                .map(|part| Frame::data(Bytes::from_static(part.as_bytes())))
                .collect(),
        ))
    }

    mod buffer {
        use super::*;

        #[tokio::test]
        async fn a_body_within_the_limit_is_read_whole_and_replayed() {
            let read = buffer(chunks(&["hello ", "world"]), 64).await.unwrap();
            assert_eq!(read.bytes.as_deref(), Some(&b"hello world"[..]));
            assert_eq!(read.body.size_hint().exact(), Some(11));
            let replayed = read.body.collect().await.unwrap().to_bytes();
            assert_eq!(replayed, "hello world");
        }

        #[tokio::test]
        async fn a_body_over_the_limit_is_not_searched_but_passes_whole() {
            let read = buffer(chunks(&["aaaa", "bbbb", "cccc", "dddd"]), 6)
                .await
                .unwrap();
            assert_eq!(read.bytes, None);
            let replayed = read.body.collect().await.unwrap().to_bytes();
            assert_eq!(replayed, "aaaabbbbccccdddd");
        }

        #[tokio::test]
        async fn trailers_are_kept() {
            let mut trailers = HeaderMap::new();
            trailers.insert("x-checksum", "1".parse().unwrap());
            let body = Body::wrap(Frames(
                [
                    Frame::data(Bytes::from_static(b"data")),
                    Frame::trailers(trailers),
                ]
                .into(),
            ));
            let read = buffer(body, 64).await.unwrap();
            assert_eq!(read.bytes.as_deref(), Some(&b"data"[..]));
            let collected = read.body.collect().await.unwrap();
            assert_eq!(
                collected.trailers().map(|t| t["x-checksum"].clone()),
                Some("1".parse().unwrap())
            );
            assert_eq!(collected.to_bytes(), "data");
        }
    }

    mod truncated {
        use super::*;

        #[tokio::test]
        async fn yields_the_first_bytes_then_fails() {
            let mut body = Truncated::new(chunks(&["0123", "4567"]), 6);
            assert_eq!(body.size_hint().exact(), None);
            let first = body.frame().await.unwrap().unwrap().into_data().unwrap();
            let second = body.frame().await.unwrap().unwrap().into_data().unwrap();
            assert_eq!([first, second].concat(), b"012345");
            let err = body.frame().await.unwrap().unwrap_err();
            assert!(err.is::<Cut>(), "{err}");
            assert!(body.frame().await.is_none());
        }

        #[tokio::test]
        async fn never_ends_cleanly_even_when_the_body_is_shorter() {
            let mut body = Truncated::new(Body::from("short"), 1024);
            assert_eq!(body.size_hint().exact(), Some(5));
            let data = body.frame().await.unwrap().unwrap().into_data().unwrap();
            assert_eq!(data, "short");
            assert!(body.frame().await.unwrap().is_err());
        }
    }

    mod slowed {
        use super::*;

        #[tokio::test]
        async fn releases_a_tenth_of_the_rate_every_tick() {
            let clock = ManualClock::new(UNIX_EPOCH);
            let mut body = Slowed::new(Body::from("abcdefghij"), 40, Arc::new(clock.clone()));
            let first = body.frame().await.unwrap().unwrap().into_data().unwrap();
            assert_eq!(first, "abcd");
            let mut next = std::pin::pin!(body.frame());
            assert!(futures_poll_once(next.as_mut()).is_none(), "released early");
            clock.advance(TICK);
            let second = next.await.unwrap().unwrap().into_data().unwrap();
            assert_eq!(second, "efgh");
            clock.advance(TICK);
            let third = body.frame().await.unwrap().unwrap().into_data().unwrap();
            assert_eq!(third, "ij");
            assert!(body.frame().await.is_none());
        }

        /// Polls a future once with a no-op waker.
        fn futures_poll_once<F: std::future::Future>(future: Pin<&mut F>) -> Option<F::Output> {
            let mut cx = Context::from_waker(std::task::Waker::noop());
            match future.poll(&mut cx) {
                Poll::Ready(output) => Some(output),
                Poll::Pending => None,
            }
        }
    }
}
