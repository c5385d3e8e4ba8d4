//! Request bodies that can be sent again.

use bytes::Bytes;
use http_body_util::combinators::{BoxBody, UnsyncBoxBody};
use http_body_util::{Either, Empty, Full, StreamBody};

/// A request body that may be copied so the request can be sent again.
///
/// tower's `Retry` keeps a copy of each request before sending it; a request whose body
/// returns `None` here is sent once and never retried (see the crate docs, "Bodies").
///
/// Bodies held in memory ([`Full`], [`Empty`], [`Bytes`], [`String`], `Vec<u8>`) clone
/// cheaply and always return `Some`. Streaming bodies ([`StreamBody`], [`BoxBody`],
/// [`UnsyncBoxBody`], hyper's [`Incoming`](hyper::body::Incoming)) return `None`: their
/// bytes are read as they are sent, so there is nothing left to send a second time.
///
/// # Examples
///
/// A body type of your own that keeps its bytes clones itself; one that streams returns
/// `None` (or buffer it into a [`Full`] before sending, if it must be retried).
///
/// ```
/// use bytes::Bytes;
/// use holdoff_tower::CloneBody;
///
/// #[derive(Clone)]
/// struct JsonBody(Bytes);
///
/// impl CloneBody for JsonBody {
///     fn try_clone_body(&self) -> Option<Self> {
///         Some(self.clone())
///     }
/// }
///
/// struct Upload(std::sync::mpsc::Receiver<Bytes>);
///
/// impl CloneBody for Upload {
///     fn try_clone_body(&self) -> Option<Self> {
///         None // each chunk is taken from the channel as it is sent
///     }
/// }
/// # let _ = JsonBody(Bytes::new()).try_clone_body();
/// ```
pub trait CloneBody: Sized {
    /// A body that will send the same bytes again, or `None` if that is not possible.
    fn try_clone_body(&self) -> Option<Self>;
}

impl<D: Clone> CloneBody for Full<D> {
    fn try_clone_body(&self) -> Option<Self> {
        Some(self.clone())
    }
}

impl<D> CloneBody for Empty<D> {
    fn try_clone_body(&self) -> Option<Self> {
        Some(*self)
    }
}

impl CloneBody for Bytes {
    fn try_clone_body(&self) -> Option<Self> {
        Some(self.clone())
    }
}

impl CloneBody for String {
    fn try_clone_body(&self) -> Option<Self> {
        Some(self.clone())
    }
}

impl CloneBody for Vec<u8> {
    fn try_clone_body(&self) -> Option<Self> {
        Some(self.clone())
    }
}

impl CloneBody for &'static str {
    fn try_clone_body(&self) -> Option<Self> {
        Some(self)
    }
}

impl CloneBody for &'static [u8] {
    fn try_clone_body(&self) -> Option<Self> {
        Some(self)
    }
}

impl CloneBody for () {
    fn try_clone_body(&self) -> Option<Self> {
        Some(())
    }
}

impl<L: CloneBody, R: CloneBody> CloneBody for Either<L, R> {
    fn try_clone_body(&self) -> Option<Self> {
        match self {
            Either::Left(left) => left.try_clone_body().map(Either::Left),
            Either::Right(right) => right.try_clone_body().map(Either::Right),
        }
    }
}

impl<S> CloneBody for StreamBody<S> {
    fn try_clone_body(&self) -> Option<Self> {
        None
    }
}

impl<D, E> CloneBody for BoxBody<D, E> {
    fn try_clone_body(&self) -> Option<Self> {
        None
    }
}

impl<D, E> CloneBody for UnsyncBoxBody<D, E> {
    fn try_clone_body(&self) -> Option<Self> {
        None
    }
}

/// A body received by a hyper server, e.g. one a proxy forwards: read once, as it arrives.
impl CloneBody for hyper::body::Incoming {
    fn try_clone_body(&self) -> Option<Self> {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    mod try_clone_body {
        use super::*;

        #[test]
        fn copies_bodies_held_in_memory() {
            let full = Full::new(Bytes::from_static(b"{}"));
            assert!(full.try_clone_body().is_some());
            assert!(Empty::<Bytes>::new().try_clone_body().is_some());
            assert_eq!(
                Bytes::from_static(b"a").try_clone_body().as_deref(),
                Some(&b"a"[..])
            );
            assert_eq!(String::from("a").try_clone_body().as_deref(), Some("a"));
            assert_eq!(vec![1u8].try_clone_body(), Some(vec![1u8]));
            assert_eq!("a".try_clone_body(), Some("a"));
            assert_eq!(().try_clone_body(), Some(()));
        }

        #[test]
        fn refuses_streaming_bodies() {
            assert!(StreamBody::new(()).try_clone_body().is_none());
            let boxed = BoxBody::<Bytes, std::convert::Infallible>::default();
            assert!(boxed.try_clone_body().is_none());
            let unsync = UnsyncBoxBody::<Bytes, std::convert::Infallible>::default();
            assert!(unsync.try_clone_body().is_none());
        }

        #[test]
        fn follows_the_side_an_either_holds() {
            let left: Either<Full<Bytes>, StreamBody<()>> = Either::Left(Full::default());
            assert!(left.try_clone_body().is_some());
            let right: Either<Full<Bytes>, StreamBody<()>> = Either::Right(StreamBody::new(()));
            assert!(right.try_clone_body().is_none());
        }
    }
}
