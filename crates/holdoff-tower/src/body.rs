//! Request bodies that can be sent again.

use bytes::Bytes;
use http_body_util::{Either, Empty, Full};

/// A request body that may be copied so the request can be sent again.
///
/// tower's `Retry` keeps a copy of each request before sending it; a request whose body
/// returns `None` here is sent once and never retried, and tower does not even show the
/// policy its response (see the crate docs, "Bodies").
///
/// Bodies held in memory ([`Full`], [`Empty`], [`Bytes`], [`String`], `Vec<u8>`) clone
/// cheaply and always return `Some`. Streaming bodies (`StreamBody`, `BoxBody`,
/// `UnsyncBoxBody`, hyper's `Incoming`) do **not** implement it: their bytes are read as
/// they are sent, so nothing is left to send a second time, and a retry layer over them
/// would never retry anything. Using one is a compile error, not a silent single attempt:
///
/// ```compile_fail
/// use bytes::Bytes;
/// use http_body_util::combinators::BoxBody;
/// use holdoff_tower::CloneBody;
///
/// fn retryable<B: CloneBody>() {}
/// retryable::<BoxBody<Bytes, std::convert::Infallible>>();
/// ```
///
/// Buffer such a body into a [`Full`] before the retry layer
/// (`http_body_util::BodyExt::collect(body).await?.to_bytes()`), or box an `Either` of the
/// bodies you send.
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
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be sent twice, so a retry layer over it would never retry",
    label = "this request body streams",
    note = "buffer the body into `http_body_util::Full<Bytes>` before the retry layer \
            (see holdoff_tower's docs, \"Bodies\")"
)]
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
        fn follows_the_side_an_either_holds() {
            let left: Either<Full<Bytes>, Bytes> = Either::Left(Full::default());
            assert!(left.try_clone_body().is_some());
            let right: Either<Full<Bytes>, Bytes> = Either::Right(Bytes::from_static(b"a"));
            assert!(matches!(right.try_clone_body(), Some(Either::Right(_))));
        }
    }
}
