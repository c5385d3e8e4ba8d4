//! Serving HTTP on a connection: hyper's HTTP/1.1 (with upgrades) or HTTP/2, every request
//! handed to the handler, until the client leaves, the connection idles out, or shutdown ends
//! it.

use std::future::Future;
use std::net::SocketAddr;
use std::pin::{Pin, pin};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Frame, SizeHint};
use hyper::body::Incoming;
use hyper::rt::{Read, Write};
use hyper::server::conn::{http1, http2};
use hyper::service::{HttpService, service_fn};
use hyper_util::rt::TokioExecutor;

use super::affinity::Affinity;
use super::conn::Inbound;
use super::connect::{PlainTunnel, ServeTunnel};
use super::handler;
use super::idle::{Activity, Busy, Idle};
use super::shared::Shared;
use crate::body::{Body, BoxError};

/// Serves HTTP on `io`, HTTP/2 if `h2`, until the client leaves or shutdown ends it; polls
/// the connection's own upstream connection (`affinity`) beside it. In a tunnel that carries
/// plain HTTP (`plain`), each request is first addressed to the tunnel's target. A `CONNECT`
/// it answers opens a tunnel that `T` serves.
pub(crate) async fn serve_http<I, T>(
    shared: &Shared,
    io: I,
    inbound: Inbound,
    h2: bool,
    peer: SocketAddr,
    affinity: Option<&Affinity>,
    plain: Option<Arc<PlainTunnel>>,
) where
    I: Read + Write + Unpin + Send + 'static,
    T: ServeTunnel,
{
    // Neither protocol is left to time idle connections out: HTTP/2 has no idle timeout (its
    // pings keep a quiet client alive), and hyper's HTTP/1.1 header timeout registers and
    // drops a timer for every request. Each request counts as in flight until its response
    // body is done, and one timer per connection closes it once none was for a while.
    let activity = Arc::new(Activity::new(Arc::clone(&shared.clock)));
    let tracked = Arc::clone(&activity);
    let service = service_fn(move |mut request| {
        if let Some(plain) = &plain {
            plain.address(&mut request);
        }
        let busy = Busy::start(Arc::clone(&tracked));
        // The answer is mapped inside the handler's future: a future wrapping it here would
        // hold it twice (see `handler::handle`).
        handler::handle::<T, _>(inbound.clone(), request, move |response| {
            response.map(|body| Tracked { body, _busy: busy })
        })
    });
    let outcome = if h2 {
        let connection = shared.http2.serve_connection(io, service);
        drive(shared, connection, None, &activity).await
    } else {
        let connection = shared.http1.serve_connection(io, service).with_upgrades();
        drive(shared, connection, affinity, &activity).await
    };
    match outcome {
        Some(Ok(())) => {}
        Some(Err(err)) => connection_error(shared, &err, peer),
        None => {
            shared.cut_count.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// A hyper connection that can be asked to finish gracefully.
trait Graceful: Future<Output = Result<(), hyper::Error>> {
    /// Whether an idle connection is asked to finish (HTTP/2: `GOAWAY`, then the streams
    /// still open end) rather than closed at once (HTTP/1.1, where an idle connection has
    /// nothing in flight, but may have half a request head that never completes).
    const FINISHES_WHEN_IDLE: bool;

    fn graceful_shutdown(self: Pin<&mut Self>);
}

impl<I, S> Graceful for http1::UpgradeableConnection<I, S>
where
    I: Read + Write + Unpin + Send + 'static,
    S: HttpService<Incoming>,
    S::ResBody: 'static,
    <S::ResBody as http_body::Body>::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    const FINISHES_WHEN_IDLE: bool = false;

    fn graceful_shutdown(self: Pin<&mut Self>) {
        http1::UpgradeableConnection::graceful_shutdown(self);
    }
}

impl<I, S> Graceful for http2::Connection<I, S, TokioExecutor>
where
    I: Read + Write + Unpin + 'static,
    S: HttpService<Incoming>,
    S::ResBody: 'static,
    <S::ResBody as http_body::Body>::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    TokioExecutor: hyper::rt::bounds::Http2ServerConnExec<S::Future, S::ResBody>,
{
    const FINISHES_WHEN_IDLE: bool = true;

    fn graceful_shutdown(self: Pin<&mut Self>) {
        http2::Connection::graceful_shutdown(self);
    }
}

/// Runs `connection` to its end, or, once shutdown begins or it has been idle too long, asks
/// it to finish and runs it until then or until the grace period is over (`None`: it was
/// cut). An idle HTTP/1.1 connection is closed at once.
async fn drive<C: Graceful>(
    shared: &Shared,
    connection: C,
    affinity: Option<&Affinity>,
    activity: &Activity,
) -> Option<Result<(), hyper::Error>> {
    let mut connection = pin!(connection);
    let count = &shared.affine_count;
    let idle = Idle::new(activity, &shared.clock, shared.idle_timeout);
    tokio::select! {
        biased;
        result = with_upstream(connection.as_mut(), affinity, count) => return Some(result),
        () = draining(shared) => {}
        () = idle => {
            tracing::debug!("closing an idle connection");
            if !C::FINISHES_WHEN_IDLE {
                return Some(Ok(()));
            }
        }
    }
    connection.as_mut().graceful_shutdown();
    tokio::select! {
        result = with_upstream(connection.as_mut(), affinity, count) => Some(result),
        () = shared.cut.cancelled() => None,
    }
}

/// Completes once shutdown begins. A connection's task is polled several times per request,
/// and the token's own future takes a lock and registers again on each poll: this one
/// registers once, then looks at one flag.
pub(crate) async fn draining(shared: &Shared) {
    let mut cancelled = pin!(shared.drain.cancelled());
    let mut registered = false;
    std::future::poll_fn(|cx| {
        if registered && !shared.draining.load(Ordering::Acquire) {
            return std::task::Poll::Pending;
        }
        registered = true;
        cancelled.as_mut().poll(cx)
    })
    .await;
}

/// A response body that keeps its request in flight until it is done.
struct Tracked {
    body: Body,
    _busy: Busy,
}

impl http_body::Body for Tracked {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

/// Polls `connection`, and after it the client's own upstream connection, in one task.
fn with_upstream<'a, C: Future>(
    mut connection: Pin<&'a mut C>,
    affinity: Option<&'a Affinity>,
    count: &'a AtomicUsize,
) -> impl Future<Output = C::Output> + 'a {
    std::future::poll_fn(move |cx| {
        let served = connection.as_mut().poll(cx);
        if let Some(affinity) = affinity {
            affinity.poll_upstream(count, cx);
        }
        served
    })
}

/// Logs why a connection ended badly; hyper has already answered what can be answered.
fn connection_error(shared: &Shared, err: &hyper::Error, peer: SocketAddr) {
    if err.is_parse_too_large() {
        shared.stats.rejected();
        tracing::warn!(
            client = %peer.ip(),
            limit = shared.max_header_bytes,
            "refused a request whose head is too large (431)"
        );
    } else if err.is_parse() {
        shared.stats.rejected();
        tracing::warn!(client = %peer.ip(), error = %err, "refused a malformed request (400)");
    } else if err.is_timeout() {
        tracing::debug!(client = %peer.ip(), "closed an idle connection");
    } else {
        tracing::debug!(client = %peer.ip(), error = %err, "a client connection ended");
    }
}
