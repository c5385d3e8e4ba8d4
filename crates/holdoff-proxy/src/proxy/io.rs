//! [`ClientIo`]: a client's TCP stream, with two fixes to what hyper does when it refuses a
//! request before the pipeline sees it, and a send timeout; and [`Rewind`], a stream whose
//! first bytes were read to see what the client speaks, and are given back.
//!
//! - **A reason in the body.** hyper answers a malformed request head with `400`, one too
//!   large with `431` (or `414` for the URI), by itself and with an empty body. Every other
//!   answer the proxy makes carries a one-line plain-text reason, so these should too: a
//!   write that is exactly such an automatic answer, made while no request has reached the
//!   proxy since the last write, is replaced by the same head with a `text/plain` reason.
//! - **No reset instead of the answer.** After such an answer hyper drops the connection,
//!   possibly with input unread (the rest of a huge header). Closing a socket with unread
//!   bytes makes the kernel send a TCP reset, which can destroy the answer before the client
//!   reads it. So, like nginx's lingering close, a stream dropped with unread input first
//!   shuts down its sending side (the answer is followed by FIN), then reads and discards
//!   what keeps arriving, for a short while, before closing.
//! - **A send timeout.** A client that stops reading would hold its connection, and what is
//!   buffered for it, forever: nothing times out a request in flight. So, like nginx's
//!   `send_timeout`, a write that makes no progress for the send timeout fails, which ends
//!   the connection (or the tunnel made of it) whatever runs on it; the socket is then reset,
//!   which frees what the kernel still holds for the client at once.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use holdoff::clock::{Clock, Sleep};
use http::StatusCode;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::TcpStream;

use super::conn::Conn;
use super::reply::Refusal;

/// What an HTTP/2 client with prior knowledge (h2c, RFC 9113 §3.3) sends first.
pub(crate) const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// How long a lingering close reads before giving up.
const LINGER_FOR: Duration = Duration::from_secs(2);
/// How much a lingering close reads before giving up.
const LINGER_BYTES: usize = 1 << 20;

/// A client's TCP stream on the proxy's own port.
pub(crate) struct ClientIo {
    /// Always `Some` until dropped.
    stream: Option<TcpStream>,
    /// What was read to see what the client speaks, read again first.
    first: Replay,
    conn: Arc<Conn>,
    /// How many requests had reached the proxy at the last write.
    calls_at_last_write: u64,
    /// A replacement answer still to be written.
    pending: Option<Pending>,
    send_timeout: SendTimeout,
}

/// Bytes to write before anything else, and how many are written.
struct Pending {
    bytes: Vec<u8>,
    written: usize,
}

impl ClientIo {
    /// `stream`, whose first bytes, already read, are `first`.
    pub(crate) fn new(stream: TcpStream, first: Vec<u8>, conn: Arc<Conn>) -> ClientIo {
        ClientIo {
            stream: Some(stream),
            first: Replay::new(first),
            conn,
            calls_at_last_write: 0,
            pending: None,
            send_timeout: SendTimeout::default(),
        }
    }

    /// Makes one write to the stream with `write`, under the send timeout: once writes have
    /// stayed blocked for it, this one fails, and every one after it.
    fn write_with(
        &mut self,
        cx: &mut Context<'_>,
        write: impl FnOnce(Pin<&mut TcpStream>, &mut Context<'_>) -> Poll<io::Result<usize>>,
    ) -> Poll<io::Result<usize>> {
        if self.send_timeout.expired {
            return Poll::Ready(Err(stalled()));
        }
        let Some(stream) = &mut self.stream else {
            return Poll::Ready(Err(io::ErrorKind::NotConnected.into()));
        };
        if let Poll::Ready(written) = write(Pin::new(stream), cx) {
            self.send_timeout.progressed();
            return Poll::Ready(written);
        }
        let shared = &self.conn.shared;
        ready!(
            self.send_timeout
                .poll_blocked(cx, &shared.clock, shared.send_timeout)
        );
        let take = shared
            .quiet
            .send_timeout
            .take(super::shared::second_of(shared.clock.wall_now()));
        if take.left_out > 0 {
            tracing::warn!(
                "{} more connections were closed for reading nothing (send_timeout), left \
                 out of the log",
                take.left_out
            );
        }
        if take.log {
            tracing::warn!(
                client = %self.conn.peer.ip(),
                "closed a connection: the client read nothing of what it was sent for {}s \
                 (send_timeout)",
                shared.send_timeout.as_secs_f64()
            );
        }
        Poll::Ready(Err(stalled()))
    }

    /// The stream.
    fn stream(&mut self) -> io::Result<Pin<&mut TcpStream>> {
        match &mut self.stream {
            Some(stream) => Ok(Pin::new(stream)),
            None => Err(io::ErrorKind::NotConnected.into()),
        }
    }

    /// Writes what is left of a replacement answer.
    fn poll_pending(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while let Some(Pending { bytes, written }) = self.pending.take() {
            if written == bytes.len() {
                break;
            }
            let attempt =
                self.write_with(cx, |stream, cx| stream.poll_write(cx, &bytes[written..]));
            let n = match attempt {
                Poll::Ready(Ok(n)) => n,
                Poll::Ready(Err(err)) => return Poll::Ready(Err(err)),
                Poll::Pending => {
                    self.pending = Some(Pending { bytes, written });
                    return Poll::Pending;
                }
            };
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            self.pending = Some(Pending {
                bytes,
                written: written + n,
            });
        }
        Poll::Ready(Ok(()))
    }

    /// If `bytes` is hyper's automatic answer to a request that never reached the proxy,
    /// queues the answer with a reason instead and returns true.
    fn replace_automatic(&mut self, bytes: &[u8]) -> bool {
        let calls = self.conn.calls.load(Ordering::Relaxed);
        let fresh = calls != self.calls_at_last_write;
        self.calls_at_last_write = calls;
        if fresh {
            return false;
        }
        let limit = self.conn.shared.max_header_bytes;
        match with_reason(bytes, limit) {
            Some(answer) => {
                self.pending = Some(Pending {
                    bytes: answer,
                    written: 0,
                });
                true
            }
            None => false,
        }
    }
}

/// One connection's send timeout: a timer set when a write blocks (none is, while the client
/// keeps up), cleared by any write that goes through, and expired once it fires.
///
/// No progress is the kernel's: a full socket takes more only once the client has read a
/// good part of what it holds (a third, on Linux), so a client that reads must read that
/// much within the timeout.
#[derive(Default)]
struct SendTimeout {
    timer: Option<Sleep>,
    /// Set once it fired: the connection is given up.
    expired: bool,
}

impl SendTimeout {
    /// A write went through.
    fn progressed(&mut self) {
        self.timer = None;
    }

    /// A write blocked: ready once writes have stayed blocked for `timeout` (the task is
    /// woken then), counted from the first of them.
    fn poll_blocked(
        &mut self,
        cx: &mut Context<'_>,
        clock: &impl Clock,
        timeout: Duration,
    ) -> Poll<()> {
        let timer = self
            .timer
            .get_or_insert_with(|| clock.sleep_until(clock.now() + timeout));
        ready!(timer.as_mut().poll(cx));
        self.timer = None;
        self.expired = true;
        Poll::Ready(())
    }
}

/// The error of every write after the send timeout closed the connection.
fn stalled() -> io::Error {
    io::Error::new(
        io::ErrorKind::TimedOut,
        "the client read nothing for the send timeout",
    )
}

/// hyper's automatic answer with a body saying why, or `None` if `bytes` is not one.
fn with_reason(bytes: &[u8], limit: usize) -> Option<Vec<u8>> {
    const EMPTY: &[u8] = b"\r\ncontent-length: 0\r\n";
    let refusal = if bytes.starts_with(b"HTTP/1.1 400 Bad Request\r\n") {
        Refusal::new(
            StatusCode::BAD_REQUEST,
            "malformed request: the request line or a header could not be parsed",
        )
    } else if bytes.starts_with(b"HTTP/1.1 431 Request Header Fields Too Large\r\n") {
        Refusal::new(
            StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
            format!("the request head is larger than {limit} bytes"),
        )
    } else if bytes.starts_with(b"HTTP/1.1 414 URI Too Long\r\n") {
        Refusal::new(StatusCode::URI_TOO_LONG, "the request URI is too long")
    } else {
        return None;
    };
    // hyper wrote the status line and headers: only the body is the refusal's.
    let reason = refusal.body_text();
    if !bytes.ends_with(b"\r\n\r\n") {
        return None;
    }
    let at = bytes
        .windows(EMPTY.len())
        .position(|window| window == EMPTY)?;
    let mut answer = Vec::with_capacity(bytes.len() + 64 + reason.len());
    answer.extend_from_slice(&bytes[..at]);
    answer.extend_from_slice(
        format!(
            "\r\ncontent-type: text/plain; charset=utf-8\r\ncontent-length: {}\r\n",
            reason.len()
        )
        .as_bytes(),
    );
    answer.extend_from_slice(&bytes[at + EMPTY.len()..]);
    answer.extend_from_slice(reason.as_bytes());
    Some(answer)
}

impl AsyncRead for ClientIo {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.first.read(buf) {
            return Poll::Ready(Ok(()));
        }
        this.stream()?.poll_read(cx, buf)
    }
}

impl AsyncWrite for ClientIo {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        ready!(this.poll_pending(cx))?;
        if this.replace_automatic(buf) {
            ready!(this.poll_pending(cx))?;
            return Poll::Ready(Ok(buf.len()));
        }
        this.write_with(cx, |stream, cx| stream.poll_write(cx, buf))
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        ready!(this.poll_pending(cx))?;
        // hyper writes its automatic answers as one slice.
        if let [only] = bufs {
            if this.replace_automatic(only) {
                ready!(this.poll_pending(cx))?;
                return Poll::Ready(Ok(only.len()));
            }
        } else {
            let calls = this.conn.calls.load(Ordering::Relaxed);
            this.calls_at_last_write = calls;
        }
        this.write_with(cx, |stream, cx| stream.poll_write_vectored(cx, bufs))
    }

    fn is_write_vectored(&self) -> bool {
        true
    }

    // A TCP stream's flush and shutdown never wait: only writes are timed.
    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        ready!(this.poll_pending(cx))?;
        this.stream()?.poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        ready!(this.poll_pending(cx))?;
        this.stream()?.poll_shutdown(cx)
    }
}

impl Drop for ClientIo {
    fn drop(&mut self) {
        let Some(stream) = self.stream.take() else {
            return;
        };
        if self.send_timeout.expired || self.conn.reset.load(Ordering::Relaxed) {
            // Reset: what the kernel holds for a client that reads nothing is freed now, not
            // after its retransmission timers give up; and a `reset` fault is the RST that
            // clients and toxiproxy users expect, not a clean close.
            let _ = stream.set_zero_linger();
            return;
        }
        let unsent = self
            .pending
            .take()
            .map(|Pending { bytes, written }| bytes[written..].to_vec())
            .filter(|rest| !rest.is_empty());
        let mut probe = [0u8; 1];
        let unread = matches!(stream.try_read(&mut probe), Ok(n) if n > 0);
        // Unread input or an answer still to send: linger. Otherwise (end of stream, nothing
        // pending, an error) close at once.
        if (unread || unsent.is_some())
            && let Ok(runtime) = tokio::runtime::Handle::try_current()
        {
            runtime.spawn(linger(stream, unsent));
        }
    }
}

/// Sends what is left of the answer and FIN, then reads and discards input until the client
/// closes, or for a while.
async fn linger(mut stream: TcpStream, unsent: Option<Vec<u8>>) {
    let drain = async {
        if let Some(rest) = unsent
            && stream.write_all(&rest).await.is_err()
        {
            return;
        }
        let _ = stream.shutdown().await;
        let mut buf = [0u8; 4096];
        let mut total = 0;
        while total < LINGER_BYTES {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => total += n,
            }
        }
    };
    let _ = tokio::time::timeout(LINGER_FOR, drain).await;
}

/// Bytes already read from a stream, to be read again before what follows them.
struct Replay {
    bytes: Vec<u8>,
    /// How much of `bytes` was read again.
    at: usize,
}

impl Replay {
    fn new(bytes: Vec<u8>) -> Replay {
        Replay { bytes, at: 0 }
    }

    /// Moves what it can of the rest into `buf`; false when nothing is left (the memory is
    /// freed once it is all read).
    fn read(&mut self, buf: &mut ReadBuf<'_>) -> bool {
        let rest = &self.bytes[self.at..];
        if rest.is_empty() {
            return false;
        }
        let n = rest.len().min(buf.remaining());
        buf.put_slice(&rest[..n]);
        self.at += n;
        if self.at == self.bytes.len() {
            self.bytes = Vec::new();
            self.at = 0;
        }
        true
    }
}

/// A stream with bytes already read from it put back in front: a tunnel's first bytes, read
/// to tell TLS from plain HTTP, go to whichever side serves it.
pub(crate) struct Rewind<T> {
    prefix: Replay,
    inner: T,
}

impl<T> Rewind<T> {
    pub(crate) fn new(prefix: Vec<u8>, inner: T) -> Rewind<T> {
        Rewind {
            prefix: Replay::new(prefix),
            inner,
        }
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for Rewind<T> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.prefix.read(buf) {
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut this.inner).poll_read(cx, buf)
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for Rewind<T> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    mod send_timeout {
        use super::*;
        use holdoff::clock::TokioClock;

        const TIMEOUT: Duration = Duration::from_secs(60);

        /// Polls `send` once for a blocked write.
        async fn blocked(send: &mut SendTimeout) -> Poll<()> {
            std::future::poll_fn(|cx| Poll::Ready(send.poll_blocked(cx, &TokioClock, TIMEOUT)))
                .await
        }

        #[tokio::test(start_paused = true)]
        async fn expires_once_writes_stay_blocked_for_the_timeout() {
            let clock = TokioClock;
            let started = clock.now();
            let mut send = SendTimeout::default();
            std::future::poll_fn(|cx| send.poll_blocked(cx, &clock, TIMEOUT)).await;
            assert_eq!(clock.now() - started, TIMEOUT);
            assert!(send.expired);
        }

        #[tokio::test(start_paused = true)]
        async fn starts_again_after_a_write_that_goes_through() {
            let mut send = SendTimeout::default();
            assert!(blocked(&mut send).await.is_pending());
            tokio::time::advance(TIMEOUT / 2).await;
            send.progressed();
            assert!(blocked(&mut send).await.is_pending());
            // A timeout after the first block, but only half of one after the last progress.
            tokio::time::advance(TIMEOUT / 2 + Duration::from_millis(1)).await;
            assert!(blocked(&mut send).await.is_pending());
            assert!(!send.expired);
            tokio::time::advance(TIMEOUT / 2).await;
            assert!(blocked(&mut send).await.is_ready());
            assert!(send.expired);
        }
    }

    mod with_reason {
        use super::*;

        #[test]
        fn adds_a_plain_text_reason_to_an_automatic_answer() {
            let hyper = b"HTTP/1.1 431 Request Header Fields Too Large\r\nconnection: close\r\n\
                          content-length: 0\r\ndate: Mon, 30 Nov 2026 03:50:35 GMT\r\n\r\n";
            let answer = String::from_utf8(with_reason(hyper, 8192).unwrap()).unwrap();
            let reason = "holdoff: the request head is larger than 8192 bytes\n";
            assert_eq!(
                answer,
                format!(
                    "HTTP/1.1 431 Request Header Fields Too Large\r\nconnection: close\r\n\
                     content-type: text/plain; charset=utf-8\r\ncontent-length: {}\r\n\
                     date: Mon, 30 Nov 2026 03:50:35 GMT\r\n\r\n{reason}",
                    reason.len()
                )
            );
        }

        #[test]
        fn leaves_anything_else_alone() {
            for bytes in [
                b"HTTP/1.1 400 Bad Request\r\ncontent-length: 5\r\n\r\n".as_slice(),
                b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n\r\nbody".as_slice(),
                b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n".as_slice(),
                b"HTTP/1.1 400 Bad Request\r\n".as_slice(),
            ] {
                assert_eq!(with_reason(bytes, 1024), None, "{}", bytes.escape_ascii());
            }
        }
    }
}
