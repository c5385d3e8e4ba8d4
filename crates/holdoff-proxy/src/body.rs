//! [`Body`]: the one body type of the pipeline, for requests and responses alike.

use std::fmt;
use std::pin::Pin;
use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll, ready};
use std::time::{Duration, Instant};

use bytes::Bytes;
use holdoff::clock::{Clock, Sleep, TokioClock};
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
    /// An upstream's response body, timed by inactivity.
    Upstream(Relay),
    /// A request body on its way upstream, telling how far it got.
    Outgoing(Box<Body>, Arc<Progress>),
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

    /// An upstream's response body from `url`: if it breaks off, or sends nothing for
    /// `idle` while the client waits for more, it ends with an error (the client's connection
    /// is cut, or its stream reset) and a warning says so (the response's own log line was
    /// written with its head).
    pub(crate) fn upstream(body: Incoming, url: http::Uri, idle: Duration) -> Body {
        let parts = url.into_parts();
        Body {
            kind: Kind::Upstream(Relay {
                body,
                https: parts
                    .scheme
                    .is_some_and(|scheme| scheme == http::uri::Scheme::HTTPS),
                authority: parts
                    .authority
                    .unwrap_or_else(|| http::uri::Authority::from_static("upstream")),
                path: parts
                    .path_and_query
                    .unwrap_or_else(|| http::uri::PathAndQuery::from_static("/")),
                idle_ms: u32::try_from(idle.as_millis()).unwrap_or(u32::MAX),
                idle: None,
            }),
        }
    }

    /// This body on its way upstream, with what tells how far it got; `None` and the body
    /// itself when there is nothing to send.
    pub(crate) fn outgoing(self) -> (Body, Option<Arc<Progress>>) {
        if self.is_end_stream() {
            return (self, None);
        }
        let progress = Arc::new(Progress::new(TokioClock.now()));
        let body = Body {
            kind: Kind::Outgoing(Box::new(self), Arc::clone(&progress)),
        };
        (body, Some(progress))
    }
}

/// An upstream's response body, the URL it comes from, and its inactivity timer.
///
/// The timer is armed the first time the body has nothing to give (a response that arrives
/// whole never arms one), and moved only when it has nothing to give again after some
/// frames: the clock is not read once per frame. The URL is kept in parts and the timeout in
/// milliseconds so that a [`Body`] is no larger for it: the body of every request and response
/// is moved about whole.
struct Relay {
    body: Incoming,
    https: bool,
    authority: http::uri::Authority,
    path: http::uri::PathAndQuery,
    idle_ms: u32,
    /// Once the body has had nothing to give.
    idle: Option<Box<IdleTimer>>,
}

/// A response body's inactivity timer.
struct IdleTimer {
    sleep: Option<Sleep>,
    /// When the body will have been silent for the timeout; the timer may be armed earlier.
    deadline: Instant,
    /// Whether frames came since `deadline` was set.
    moved: bool,
}

/// The URL of a [`Relay`], as logs show it.
struct Url<'a>(&'a Relay);

impl fmt::Display for Url<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let scheme = if self.0.https { "https" } else { "http" };
        write!(f, "{scheme}://{}{}", self.0.authority, self.0.path)
    }
}

impl Relay {
    fn poll_frame(&mut self, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        match Pin::new(&mut self.body).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(idle) = &mut self.idle {
                    idle.moved = true;
                }
                return Poll::Ready(Some(Ok(frame)));
            }
            Poll::Ready(Some(Err(err))) => {
                tracing::warn!(
                    target: "holdoff::request",
                    url = %Url(self),
                    error = %err,
                    "the upstream's response body broke off; the client's connection is cut"
                );
                return Poll::Ready(Some(Err(Box::new(err))));
            }
            Poll::Ready(None) => return Poll::Ready(None),
            Poll::Pending => {}
        }
        // Waiting for the upstream.
        let clock = TokioClock;
        let idle = Duration::from_millis(u64::from(self.idle_ms));
        let timer = match &mut self.idle {
            Some(timer) => {
                if std::mem::take(&mut timer.moved) {
                    timer.deadline = clock.now() + idle;
                }
                timer
            }
            None => self.idle.insert(Box::new(IdleTimer {
                sleep: None,
                deadline: clock.now() + idle,
                moved: false,
            })),
        };
        loop {
            let deadline = timer.deadline;
            let sleep = timer
                .sleep
                .get_or_insert_with(|| clock.sleep_until(deadline));
            ready!(sleep.as_mut().poll(cx));
            timer.sleep = None;
            if deadline <= clock.now() {
                break;
            }
        }
        let seconds = idle.as_secs_f64();
        tracing::warn!(
            target: "holdoff::request",
            url = %Url(self),
            "the upstream {} sent nothing of its response body for {seconds}s; the client's \
             connection is cut",
            self.authority
        );
        Poll::Ready(Some(Err(Box::new(std::io::Error::new(
            std::io::ErrorKind::TimedOut,
            format!(
                "the upstream {} sent nothing of its response body for {seconds}s",
                self.authority
            ),
        )))))
    }
}

/// How far a request body has gone upstream: the upstream timeout counts from its last
/// frame, and once it is all sent, from its end (see `proxy::upstream::stalled`). Shared by
/// the body, polled by the upstream connection, and the request's task, which times it.
#[derive(Debug)]
pub(crate) struct Progress {
    /// When the body set out.
    since: Instant,
    /// Nanoseconds from `since` to the last frame the upstream took (or to `since`).
    last: AtomicU64,
    phase: AtomicU8,
    /// Why the client's body broke off (a malformed chunk, a reset), if it did.
    broke: OnceLock<String>,
}

/// Whose turn it is in sending a request body.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Phase {
    /// The upstream has not asked for any of it yet (it is connecting, or reading the head).
    Unread,
    /// The upstream took the last frame and has not asked for the next.
    Taken,
    /// The upstream asked for more, and the client has not sent it.
    Waiting,
    /// All of it went upstream.
    Sent,
}

impl Progress {
    fn new(now: Instant) -> Progress {
        Progress {
            since: now,
            last: AtomicU64::new(0),
            phase: AtomicU8::new(Phase::Unread as u8),
            broke: OnceLock::new(),
        }
    }

    /// When the last frame went upstream (when the body set out, before any did).
    pub(crate) fn last(&self) -> Instant {
        self.since + Duration::from_nanos(self.last.load(Ordering::Acquire))
    }

    pub(crate) fn phase(&self) -> Phase {
        match self.phase.load(Ordering::Acquire) {
            0 => Phase::Unread,
            1 => Phase::Taken,
            2 => Phase::Waiting,
            _ => Phase::Sent,
        }
    }

    /// Why the client's body broke off, if it did: the request is the client's fault.
    pub(crate) fn broke(&self) -> Option<&str> {
        self.broke.get().map(String::as_str)
    }

    fn moved(&self, phase: Phase) {
        let since = TokioClock.now().saturating_duration_since(self.since);
        let nanos = u64::try_from(since.as_nanos()).unwrap_or(u64::MAX);
        self.last.store(nanos, Ordering::Release);
        self.phase.store(phase as u8, Ordering::Release);
    }
}

/// An error and its causes, `: `-separated, on one line.
fn chain(err: &(dyn std::error::Error + 'static)) -> String {
    let mut text = err.to_string();
    let mut next = err.source();
    while let Some(cause) = next {
        let line = cause.to_string();
        // Some errors say their cause in their own message already.
        if !text.contains(&line) {
            text.push_str(": ");
            text.push_str(&line);
        }
        next = cause.source();
    }
    text.replace(['\r', '\n'], " ")
}

/// A lent request body: the body, and where it goes when dropped before its end. `None` only
/// while it is being dropped.
struct Lent(Option<(Incoming, oneshot::Sender<Incoming>)>);

impl Drop for Lent {
    fn drop(&mut self) {
        if let Some((body, back)) = self.0.take()
            && !body.is_end_stream()
        {
            // Nobody waiting (the request went upstream): the body is dropped here.
            let _ = back.send(body);
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
            Kind::Incoming(_) | Kind::Lent(_) | Kind::Upstream(_) | Kind::Outgoing(..) => {
                "streamed"
            }
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
            Kind::Upstream(relay) => relay.poll_frame(cx),
            Kind::Outgoing(body, progress) => {
                let polled = Pin::new(&mut **body).poll_frame(cx);
                match &polled {
                    Poll::Pending => progress
                        .phase
                        .store(Phase::Waiting as u8, Ordering::Release),
                    Poll::Ready(Some(Ok(_))) if !body.is_end_stream() => {
                        progress.moved(Phase::Taken)
                    }
                    Poll::Ready(Some(Ok(_)) | None) => progress.moved(Phase::Sent),
                    Poll::Ready(Some(Err(err))) => {
                        let _ = progress.broke.set(chain(&**err));
                    }
                }
                polled
            }
            Kind::Boxed(body) => Pin::new(body).poll_frame(cx),
        }
    }

    fn is_end_stream(&self) -> bool {
        match &self.kind {
            Kind::Empty => true,
            Kind::Full(bytes) => bytes.is_none(),
            Kind::Incoming(body) | Kind::Upstream(Relay { body, .. }) => body.is_end_stream(),
            Kind::Outgoing(body, _) => body.is_end_stream(),
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
            Kind::Incoming(body) | Kind::Upstream(Relay { body, .. }) => body.size_hint(),
            Kind::Outgoing(body, _) => body.size_hint(),
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

    #[test]
    fn is_no_larger_than_an_incoming_body_and_a_url() {
        // Every request and response moves its body about whole: the timers cost it nothing.
        assert!(
            std::mem::size_of::<Body>()
                <= std::mem::size_of::<Incoming>() + std::mem::size_of::<http::Uri>()
        );
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
