//! [`ClientIo`]: a client's TCP stream, with two fixes to what hyper does when it refuses a
//! request before the pipeline sees it; and [`Rewind`], a stream whose first bytes were read
//! to see what the client speaks, and are given back.
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

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::TcpStream;

use super::server::Conn;

/// How long a lingering close reads before giving up.
const LINGER_FOR: Duration = Duration::from_secs(2);
/// How much a lingering close reads before giving up.
const LINGER_BYTES: usize = 1 << 20;

/// A client's TCP stream on the proxy's own port.
pub(crate) struct ClientIo {
    /// Always `Some` until dropped.
    stream: Option<TcpStream>,
    conn: Arc<Conn>,
    /// How many requests had reached the proxy at the last write.
    calls_at_last_write: u64,
    /// A replacement answer still to be written.
    pending: Option<Pending>,
}

/// Bytes to write before anything else, and how many are written.
struct Pending {
    bytes: Vec<u8>,
    written: usize,
}

impl ClientIo {
    pub(crate) fn new(stream: TcpStream, conn: Arc<Conn>) -> ClientIo {
        ClientIo {
            stream: Some(stream),
            conn,
            calls_at_last_write: 0,
            pending: None,
        }
    }

    /// The stream, and the pending replacement.
    fn parts(self: Pin<&mut Self>) -> io::Result<(Pin<&mut TcpStream>, &mut Option<Pending>)> {
        let this = self.get_mut();
        match &mut this.stream {
            Some(stream) => Ok((Pin::new(stream), &mut this.pending)),
            None => Err(io::ErrorKind::NotConnected.into()),
        }
    }

    /// Writes what is left of a replacement answer.
    fn poll_pending(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let (mut stream, pending) = self.parts()?;
        while let Some(Pending { bytes, written }) = pending {
            if *written == bytes.len() {
                *pending = None;
                break;
            }
            let n = ready!(stream.as_mut().poll_write(cx, &bytes[*written..]))?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            *written += n;
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

/// hyper's automatic answer with a body saying why, or `None` if `bytes` is not one.
fn with_reason(bytes: &[u8], limit: usize) -> Option<Vec<u8>> {
    const EMPTY: &[u8] = b"\r\ncontent-length: 0\r\n";
    let reason = if bytes.starts_with(b"HTTP/1.1 400 Bad Request\r\n") {
        "holdoff: malformed request: the request line or a header could not be parsed\n".to_owned()
    } else if bytes.starts_with(b"HTTP/1.1 431 Request Header Fields Too Large\r\n") {
        format!("holdoff: the request head is larger than {limit} bytes\n")
    } else if bytes.starts_with(b"HTTP/1.1 414 URI Too Long\r\n") {
        "holdoff: the request URI is too long\n".to_owned()
    } else {
        return None;
    };
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
        match self.parts() {
            Ok((stream, _)) => stream.poll_read(cx, buf),
            Err(err) => Poll::Ready(Err(err)),
        }
    }
}

impl AsyncWrite for ClientIo {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        ready!(self.as_mut().poll_pending(cx))?;
        if self.replace_automatic(buf) {
            ready!(self.as_mut().poll_pending(cx))?;
            return Poll::Ready(Ok(buf.len()));
        }
        let (stream, _) = self.parts()?;
        stream.poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        ready!(self.as_mut().poll_pending(cx))?;
        // hyper writes its automatic answers as one slice.
        if let [only] = bufs {
            if self.replace_automatic(only) {
                ready!(self.as_mut().poll_pending(cx))?;
                return Poll::Ready(Ok(only.len()));
            }
        } else {
            let calls = self.conn.calls.load(Ordering::Relaxed);
            self.calls_at_last_write = calls;
        }
        let (stream, _) = self.parts()?;
        stream.poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        true
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        ready!(self.as_mut().poll_pending(cx))?;
        let (stream, _) = self.parts()?;
        stream.poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        ready!(self.as_mut().poll_pending(cx))?;
        let (stream, _) = self.parts()?;
        stream.poll_shutdown(cx)
    }
}

impl Drop for ClientIo {
    fn drop(&mut self) {
        let Some(stream) = self.stream.take() else {
            return;
        };
        let unsent = self
            .pending
            .take()
            .map(|Pending { bytes, written }| bytes[written..].to_vec())
            .filter(|rest| !rest.is_empty());
        let mut probe = [0u8; 1];
        let unread = matches!(stream.try_read(&mut probe), Ok(n) if n > 0);
        // Unread input or an answer still to send: linger. Otherwise (end of stream, nothing
        // pending, an error) close at once.
        if unread || unsent.is_some() {
            if let Ok(runtime) = tokio::runtime::Handle::try_current() {
                runtime.spawn(linger(stream, unsent));
            }
        }
    }
}

/// Sends what is left of the answer and FIN, then reads and discards input until the client
/// closes, or for a while.
async fn linger(mut stream: TcpStream, unsent: Option<Vec<u8>>) {
    let drain = async {
        if let Some(rest) = unsent {
            if stream.write_all(&rest).await.is_err() {
                return;
            }
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

/// A stream with bytes already read from it put back in front: a tunnel's first bytes, read
/// to tell TLS from plain HTTP, go to whichever side serves it.
pub(crate) struct Rewind<T> {
    prefix: Vec<u8>,
    /// How much of `prefix` was read again.
    at: usize,
    inner: T,
}

impl<T> Rewind<T> {
    pub(crate) fn new(prefix: Vec<u8>, inner: T) -> Rewind<T> {
        Rewind {
            prefix,
            at: 0,
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
        let rest = &this.prefix[this.at..];
        if rest.is_empty() {
            return Pin::new(&mut this.inner).poll_read(cx, buf);
        }
        let n = rest.len().min(buf.remaining());
        buf.put_slice(&rest[..n]);
        this.at += n;
        if this.at == this.prefix.len() {
            this.prefix = Vec::new();
            this.at = 0;
        }
        Poll::Ready(Ok(()))
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
