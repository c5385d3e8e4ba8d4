//! A client connection's own upstream connection, driven by the client connection's task.
//!
//! The shared pool ([`Upstreams`](super::upstream::Upstreams)) runs every upstream connection
//! as a task of its own, so each request crosses from the client's task to the upstream's and
//! back, and each response body frame too (across threads, when the pooled connection was
//! made on another one). For a keep-alive client sending request after request to one
//! upstream — what a load test, a crawler or an API client does — that hand-off costs more
//! than the proxying itself. So from the second request on, such a client connection, or an
//! intercepted HTTP/1.1 tunnel, gets an HTTP/1.1 upstream connection of its own (over TLS for
//! `https`), which its own task polls beside the client side: request and response never
//! leave the task.
//!
//! The first request of every connection, upgrades and HTTP/2 clients (whose requests run
//! concurrently) keep using the shared pool, as do connections beyond [`MAX_AFFINE`]: an
//! upstream sees at most that many extra connections. So does every request of a connection
//! whose TLS handshake with the upstream failed here: the pool tries again and reports why.
//! The affine connection closes with the client's.

use std::future::{Future, Ready, ready};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll, Waker, ready};
use std::time::{Duration, Instant};

use holdoff::clock::{Clock, Sleep};
use http::header::HOST;
use http::uri::{Authority, PathAndQuery, Scheme};
use http::{HeaderValue, Request, Response, Uri};
use hyper::body::Incoming;
use hyper::client::conn::http1;
use hyper::rt::{Read, Write};
use hyper_util::rt::TokioIo;
use pin_project_lite::pin_project;
use rustls_pki_types::ServerName;
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tokio_util::either::Either;

use super::upstream::{Failure, UPSTREAM_BUFFER};
use crate::body::Body;

/// How much a TLS connection to an upstream reads from its socket at once. rustls asks for 4 KiB
/// at a time until a record is complete, a system call each: reading ahead turns the four or
/// five reads of each 16 KiB record into one.
const READ_AHEAD: usize = 32 * 1024;

/// At most this many affine upstream connections at once, over all clients.
pub(crate) const MAX_AFFINE: usize = 512;

type Driver = Pin<Box<dyn Future<Output = ()> + Send>>;

/// A new connection's sender; `None` when the shared pool should take the request.
type Opened = Result<Option<http1::SendRequest<Body>>, Failure>;

/// One client connection's upstream connection, if it has one.
///
/// The lock is only ever taken by the client connection's own task (HTTP/1.1 serves one
/// request at a time), so it is never contended.
#[derive(Default)]
pub(crate) struct Affinity {
    /// Set once the connection's first request is done: only later ones get an affine
    /// connection, so one-request clients keep sharing the pool.
    warm: AtomicBool,
    /// Set when a TLS handshake with the upstream failed: the pool takes every request, and
    /// its error says why.
    declined: AtomicBool,
    slot: Mutex<Slot>,
}

#[derive(Default)]
struct Slot {
    /// The upstream it talks to.
    origin: Option<(Scheme, Authority)>,
    /// Idle between requests; taken while one is in flight.
    sender: Option<http1::SendRequest<Body>>,
    /// The upstream connection itself, polled by the client connection's task.
    driver: Option<Driver>,
    /// The client connection's task, to wake when a driver is installed.
    waker: Option<Waker>,
    /// Holds one of the [`MAX_AFFINE`] places while a driver exists.
    counted: bool,
    /// The timer behind the upstream timeout, armed once and reused (see `poll_expired`),
    /// with the deadline it is armed for.
    expiry: Option<(Instant, Sleep)>,
}

/// What an affine connection needs from the proxy.
pub(crate) struct Outbound<'a> {
    /// Affine connections over all clients, at most [`MAX_AFFINE`].
    pub(crate) count: &'a AtomicUsize,
    /// For the connection, the request and the response head together.
    pub(crate) timeout: Duration,
    /// Where the timeout starts.
    pub(crate) clock: &'a dyn Clock,
    /// Verifies `https` upstreams as the pool does, offering only HTTP/1.1 by ALPN.
    pub(crate) tls: &'a TlsConnector,
}

/// What happened to a request offered to the affine path.
pub(crate) enum Sent {
    /// The upstream answered, or failed after the request was sent.
    Done(Result<Response<Incoming>, Failure>),
    /// Not sent: use the shared pool.
    Declined(Request<Body>),
}

impl Affinity {
    fn slot(&self) -> MutexGuard<'_, Slot> {
        self.slot.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Polls the upstream connection, if there is one; called by the client connection's
    /// task on every wake-up.
    pub(crate) fn poll_upstream(&self, count: &AtomicUsize, cx: &mut Context<'_>) {
        let mut slot = self.slot();
        if let Some(driver) = slot.driver.as_mut()
            && driver.as_mut().poll(cx).is_ready()
        {
            // The upstream closed: forget it.
            slot.clear(count);
        }
        if slot
            .waker
            .as_ref()
            .is_none_or(|waker| !waker.will_wake(cx.waker()))
        {
            slot.waker = Some(cx.waker().clone());
        }
    }

    /// Closes the upstream connection (the client's is over).
    pub(crate) fn close(&self, count: &AtomicUsize) {
        self.slot().clear(count);
    }

    /// Sends `request` (absolute URI) on this client's own upstream connection, making one if
    /// needed; declines when the shared pool should take it.
    ///
    /// What needs no wait is decided before the future starts, and the future holds the
    /// request once: it is part of every request's future, which hyper moves into place.
    pub(crate) fn send<'a>(
        &'a self,
        mut request: Request<Body>,
        out: &'a Outbound<'a>,
    ) -> Either<Ready<Sent>, Expiring<'a, impl Future<Output = Sent> + Send + 'a>> {
        if !self.warm.swap(true, Ordering::Relaxed) || self.declined.load(Ordering::Relaxed) {
            return Either::Left(ready(Sent::Declined(request)));
        }
        let origin = match (request.uri().scheme(), request.uri().authority()) {
            (Some(scheme), Some(authority)) => (scheme.clone(), authority.clone()),
            _ => return Either::Left(ready(Sent::Declined(request))),
        };
        let idle = {
            let mut slot = self.slot();
            match (&slot.origin, slot.sender.as_ref()) {
                // Compared as written (a case-insensitive comparison of the authority costs
                // more than the rest of the check): another spelling opens a new connection.
                (Some((scheme, authority)), Some(sender))
                    if authority.as_str() == origin.1.as_str()
                        && *scheme == origin.0
                        && sender.is_ready() =>
                {
                    slot.sender.take()
                }
                _ => None,
            }
        };
        // The connection is to the upstream itself: it wants origin-form, and HTTP/1.1
        // wants `Host` (which the pool would add alike).
        let target = request
            .uri()
            .path_and_query()
            .cloned()
            .unwrap_or_else(|| PathAndQuery::from_static("/"));
        let absolute = std::mem::replace(request.uri_mut(), Uri::from(target));
        if !request.headers().contains_key(HOST)
            && let Ok(host) = HeaderValue::from_str(origin.1.as_str())
        {
            request.headers_mut().insert(HOST, host);
        }
        let due = out.clock.now() + out.timeout;
        Either::Right(Expiring {
            authority: origin.1.clone(),
            work: self.work(request, absolute, origin, idle, out),
            affinity: self,
            due,
            out,
        })
    }

    /// Sends `request` on `idle`, or on a new connection to `origin`.
    ///
    /// `request` is in origin-form already; `absolute` is its URI as the pool wants it, should
    /// the pool take it after all.
    async fn work(
        &self,
        request: Request<Body>,
        absolute: Uri,
        origin: (Scheme, Authority),
        idle: Option<http1::SendRequest<Body>>,
        out: &Outbound<'_>,
    ) -> Sent {
        let (scheme, authority) = &origin;
        let mut sender = match idle {
            Some(sender) => sender,
            None => match self.connect(scheme, authority, out).await {
                Ok(Some(sender)) => sender,
                Ok(None) => return Sent::Declined(with_uri(request, absolute)),
                Err(failure) => {
                    self.close(out.count);
                    return Sent::Done(Err(failure));
                }
            },
        };
        match sender.try_send_request(request).await {
            Ok(response) => {
                self.slot().sender = Some(sender);
                Sent::Done(Ok(response))
            }
            Err(mut err) => match err.take_message() {
                // Never written: the connection had closed. The pool takes it.
                Some(request) => Sent::Declined(with_uri(request, absolute)),
                None => Sent::Done(Err(Failure::broken(
                    authority.to_string(),
                    &err.into_error(),
                ))),
            },
        }
    }

    /// Ready once `due` has passed.
    ///
    /// Registering a timer and removing it again for every request costs more than the rest
    /// of the request's bookkeeping, so one timer serves them all, as nginx does it. It is
    /// armed for the first request's deadline; when it fires before the deadline of the
    /// request then in flight (a later one's), it is armed again for that one. With
    /// deadlines a timeout apart, that happens at most once per timeout.
    fn poll_expired(&self, due: Instant, clock: &dyn Clock, cx: &mut Context<'_>) -> Poll<()> {
        let mut slot = self.slot();
        let expiry = slot
            .expiry
            .get_or_insert_with(|| (due, clock.sleep_until(due)));
        if expiry.0 > due {
            *expiry = (due, clock.sleep_until(due));
        }
        loop {
            ready!(expiry.1.as_mut().poll(cx));
            if expiry.0 >= due {
                return Poll::Ready(());
            }
            *expiry = (due, clock.sleep_until(due));
        }
    }

    /// Opens a connection to `scheme://authority` and installs it; `None` when the limit is
    /// reached or the upstream's TLS is left to the pool.
    ///
    /// Boxed: rare, and large (TCP, TLS and HTTP handshakes), it would make every request's
    /// future as large, which hyper moves into place for each request.
    fn connect<'a>(
        &'a self,
        scheme: &'a Scheme,
        authority: &'a Authority,
        out: &'a Outbound<'_>,
    ) -> Pin<Box<dyn Future<Output = Opened> + Send + 'a>> {
        Box::pin(self.open(scheme, authority, out))
    }

    async fn open(&self, scheme: &Scheme, authority: &Authority, out: &Outbound<'_>) -> Opened {
        let https = *scheme == Scheme::HTTPS;
        if !self.slot().counted {
            if out.count.fetch_add(1, Ordering::Relaxed) >= MAX_AFFINE {
                out.count.fetch_sub(1, Ordering::Relaxed);
                return Ok(None);
            }
            self.slot().counted = true;
        }
        let target = || authority.to_string();
        let (host, port) = endpoint(https, authority);
        let stream = TcpStream::connect((host, port))
            .await
            .map_err(|err| Failure::Connect {
                target: target(),
                reason: err.to_string(),
            })?;
        let _ = stream.set_nodelay(true);
        if !https {
            return self
                .handshake(TokioIo::new(stream), scheme, authority)
                .await;
        }
        let tls = match ServerName::try_from(host.to_owned()) {
            Ok(name) => out
                .tls
                .connect(
                    name,
                    tokio::io::BufReader::with_capacity(READ_AHEAD, stream),
                )
                .await
                .ok(),
            Err(_) => None,
        };
        match tls {
            Some(tls) => self.handshake(TokioIo::new(tls), scheme, authority).await,
            None => {
                // The pool's handshake fails the same way and says why; or it speaks HTTP/2
                // with an upstream that offers nothing else.
                self.declined.store(true, Ordering::Relaxed);
                self.close(out.count);
                Ok(None)
            }
        }
    }

    /// Starts HTTP/1.1 on `io` and installs the connection.
    async fn handshake<I>(&self, io: I, scheme: &Scheme, authority: &Authority) -> Opened
    where
        I: Read + Write + Unpin + Send + 'static,
    {
        let (sender, connection) = http1::Builder::new()
            .max_buf_size(UPSTREAM_BUFFER)
            .handshake(io)
            .await
            .map_err(|err| Failure::broken(authority.to_string(), &err))?;
        let driver: Driver = Box::pin(async move {
            let _ = connection.await;
        });
        let mut slot = self.slot();
        slot.origin = Some((scheme.clone(), authority.clone()));
        slot.driver = Some(driver);
        // The task must poll the new connection for the request to go out.
        if let Some(waker) = &slot.waker {
            waker.wake_by_ref();
        }
        Ok(Some(sender))
    }
}

pin_project! {
    /// A send on an affine connection, cut at the upstream timeout.
    pub(crate) struct Expiring<'a, F> {
        #[pin]
        work: F,
        affinity: &'a Affinity,
        // Named by a timeout.
        authority: Authority,
        due: Instant,
        out: &'a Outbound<'a>,
    }
}

impl<F: Future<Output = Sent>> Future for Expiring<'_, F> {
    type Output = Sent;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Sent> {
        let this = self.project();
        if let Poll::Ready(sent) = this.work.poll(cx) {
            return Poll::Ready(sent);
        }
        let out = *this.out;
        ready!(this.affinity.poll_expired(*this.due, out.clock, cx));
        Poll::Ready(Sent::Done(Err(Failure::Timeout {
            target: this.authority.to_string(),
            after: out.timeout,
        })))
    }
}

/// `request` with `uri` as its URI again.
fn with_uri(mut request: Request<Body>, uri: Uri) -> Request<Body> {
    *request.uri_mut() = uri;
    request
}

/// The host and port to connect to for `authority`: the scheme's default port when it names
/// none (a URL may leave it out, a socket address may not), an IPv6 literal without brackets
/// (`::1`, as a socket address and a certificate name have it).
fn endpoint(https: bool, authority: &Authority) -> (&str, u16) {
    let scheme = if https { "https" } else { "http" };
    let port = authority
        .port_u16()
        .unwrap_or_else(|| super::target::default_port(scheme));
    let host = authority.host();
    let host = host
        .strip_prefix('[')
        .and_then(|inner| inner.strip_suffix(']'))
        .unwrap_or(host);
    (host, port)
}

impl Slot {
    fn clear(&mut self, count: &AtomicUsize) {
        self.driver = None;
        self.sender = None;
        self.origin = None;
        if std::mem::take(&mut self.counted) {
            count.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connects_to_the_default_port_of_the_scheme_when_the_url_names_none() {
        let plain: Authority = "example.com".parse().unwrap();
        assert_eq!(endpoint(false, &plain), ("example.com", 80));
        assert_eq!(endpoint(true, &plain), ("example.com", 443));
        let explicit: Authority = "127.0.0.1:3000".parse().unwrap();
        assert_eq!(endpoint(true, &explicit), ("127.0.0.1", 3000));
    }

    #[test]
    fn connects_to_an_ipv6_literal_without_its_brackets() {
        let v6: Authority = "[::1]:8443".parse().unwrap();
        assert_eq!(endpoint(true, &v6), ("::1", 8443));
        let bare: Authority = "[::1]".parse().unwrap();
        assert_eq!(endpoint(false, &bare), ("::1", 80));
    }
}
