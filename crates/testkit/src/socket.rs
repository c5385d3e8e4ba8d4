//! An accepted TCP stream that can be closed with a reset instead of a clean close.

use std::io::{self, IoSlice};
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

/// A [`TcpStream`] that is reset (`SO_LINGER` 0) when dropped, if its flag was raised.
///
/// hyper owns the stream while it serves the connection, so the service cannot touch the
/// socket itself: it raises the flag and fails, hyper drops the connection, and the drop
/// sends the reset. Only then: a reset on every close could discard a response the client
/// had not read yet.
pub(crate) struct ResettableStream {
    stream: TcpStream,
    reset: Arc<AtomicBool>,
}

impl ResettableStream {
    /// Wraps `stream`; raising `reset` makes the eventual close a reset.
    pub(crate) fn new(stream: TcpStream, reset: Arc<AtomicBool>) -> ResettableStream {
        ResettableStream { stream, reset }
    }
}

impl Drop for ResettableStream {
    fn drop(&mut self) {
        if self.reset.load(Ordering::Acquire) {
            // Best effort: if the option cannot be set, the close is a clean one, which a
            // client still sees as a connection closed without a response.
            let _ = self.stream.set_zero_linger();
        }
    }
}

impl AsyncRead for ResettableStream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_read(cx, buf)
    }
}

impl AsyncWrite for ResettableStream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().stream).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().stream).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_shutdown(cx)
    }
}
