//! A client connection's own upstream connection, driven by the client connection's task.
//!
//! The shared pool ([`Upstreams`](super::upstream::Upstreams)) runs every upstream connection
//! as a task of its own, so each request crosses from the client's task to the upstream's and
//! back, and each response body frame too. For a keep-alive client sending request after
//! request to one plain-HTTP upstream — what a load test, a crawler or an API client does —
//! that hand-off costs more than the proxying itself. So from the second request on, such a
//! client connection gets an HTTP/1.1 upstream connection of its own, which its own task
//! polls beside the client side: request and response never leave the task.
//!
//! The first request of every connection, HTTPS upstreams, upgrades and HTTP/2 clients (whose
//! requests run concurrently) keep using the shared pool, as do connections beyond
//! [`MAX_AFFINE`]: an upstream sees at most that many extra connections. The affine connection
//! closes with the client's.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::task::{Context, Waker};
use std::time::Duration;

use http::uri::{Authority, PathAndQuery};
use http::{Request, Response, Uri};
use hyper::body::Incoming;
use hyper::client::conn::http1;
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

use super::upstream::Failure;
use crate::Body;

/// At most this many affine upstream connections at once, over all clients.
pub(crate) const MAX_AFFINE: usize = 512;

type Driver = Pin<Box<dyn Future<Output = ()> + Send>>;

/// One client connection's upstream connection, if it has one.
///
/// The lock is only ever taken by the client connection's own task (HTTP/1.1 serves one
/// request at a time), so it is never contended.
#[derive(Default)]
pub(crate) struct Affinity {
    /// Set once the connection's first request is done: only later ones get an affine
    /// connection, so one-request clients keep sharing the pool.
    warm: AtomicBool,
    slot: Mutex<Slot>,
}

#[derive(Default)]
struct Slot {
    /// The upstream it talks to.
    authority: Option<Authority>,
    /// Idle between requests; taken while one is in flight.
    sender: Option<http1::SendRequest<Body>>,
    /// The upstream connection itself, polled by the client connection's task.
    driver: Option<Driver>,
    /// The client connection's task, to wake when a driver is installed.
    waker: Option<Waker>,
    /// Holds one of the [`MAX_AFFINE`] places while a driver exists.
    counted: bool,
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
        if let Some(driver) = slot.driver.as_mut() {
            if driver.as_mut().poll(cx).is_ready() {
                // The upstream closed: forget it.
                slot.clear(count);
            }
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

    /// Sends `request` (absolute `http://` URI, `Host` set) on this client's own upstream
    /// connection, making one if needed; declines when the shared pool should take it.
    pub(crate) async fn send(
        &self,
        mut request: Request<Body>,
        count: &AtomicUsize,
        timeout: Duration,
    ) -> Sent {
        if !self.warm.swap(true, Ordering::Relaxed) {
            return Sent::Declined(request);
        }
        let Some(authority) = request.uri().authority().cloned() else {
            return Sent::Declined(request);
        };
        let idle = {
            let mut slot = self.slot();
            match (&slot.authority, slot.sender.as_ref()) {
                (Some(current), Some(sender)) if *current == authority && sender.is_ready() => {
                    slot.sender.take()
                }
                _ => None,
            }
        };
        let work = async {
            let mut sender = match idle {
                Some(sender) => sender,
                None => match self.connect(&authority, count).await {
                    Ok(Some(sender)) => sender,
                    Ok(None) => return Sent::Declined(request),
                    Err(failure) => {
                        self.close(count);
                        return Sent::Done(Err(failure));
                    }
                },
            };
            // The connection is to the upstream itself: it wants origin-form.
            let target = request
                .uri()
                .path_and_query()
                .cloned()
                .unwrap_or_else(|| PathAndQuery::from_static("/"));
            let absolute = std::mem::replace(request.uri_mut(), Uri::from(target));
            match sender.try_send_request(request).await {
                Ok(response) => {
                    self.slot().sender = Some(sender);
                    Sent::Done(Ok(response))
                }
                Err(mut err) => match err.take_message() {
                    // Never written: the connection had closed. The pool takes it.
                    Some(mut request) => {
                        *request.uri_mut() = absolute;
                        Sent::Declined(request)
                    }
                    None => Sent::Done(Err(Failure::broken(
                        authority.to_string(),
                        &err.into_error(),
                    ))),
                },
            }
        };
        match tokio::time::timeout(timeout, work).await {
            Ok(sent) => sent,
            Err(_) => Sent::Done(Err(Failure::Timeout {
                target: authority.to_string(),
                after: timeout,
            })),
        }
    }

    /// Opens a connection to `authority` and installs it; `None` when the limit is reached.
    async fn connect(
        &self,
        authority: &Authority,
        count: &AtomicUsize,
    ) -> Result<Option<http1::SendRequest<Body>>, Failure> {
        if !self.slot().counted {
            if count.fetch_add(1, Ordering::Relaxed) >= MAX_AFFINE {
                count.fetch_sub(1, Ordering::Relaxed);
                return Ok(None);
            }
            self.slot().counted = true;
        }
        let target = || authority.to_string();
        let stream = TcpStream::connect(authority.as_str())
            .await
            .map_err(|err| Failure::Connect {
                target: target(),
                reason: err.to_string(),
            })?;
        let _ = stream.set_nodelay(true);
        let (sender, connection) = http1::handshake(TokioIo::new(stream))
            .await
            .map_err(|err| Failure::broken(target(), &err))?;
        let driver: Driver = Box::pin(async move {
            let _ = connection.await;
        });
        let mut slot = self.slot();
        slot.authority = Some(authority.clone());
        slot.driver = Some(driver);
        // The task must poll the new connection for the request to go out.
        if let Some(waker) = &slot.waker {
            waker.wake_by_ref();
        }
        Ok(Some(sender))
    }
}

impl Slot {
    fn clear(&mut self, count: &AtomicUsize) {
        self.driver = None;
        self.sender = None;
        self.authority = None;
        if std::mem::take(&mut self.counted) {
            count.fetch_sub(1, Ordering::Relaxed);
        }
    }
}
