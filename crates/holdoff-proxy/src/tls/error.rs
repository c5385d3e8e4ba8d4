//! [`TlsError`]: what went wrong with the CA, a leaf certificate or the upstream roots.

use std::error::Error as StdError;
use std::fmt;
use std::io;
use std::path::{Path, PathBuf};

/// The broad reason a TLS operation failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum TlsErrorKind {
    /// There is no CA in the directory (neither the certificate nor the key exists).
    NotFound,
    /// One of the CA's two files exists without the other.
    Incomplete,
    /// Reading, writing or removing a file failed.
    Io,
    /// A file is not what it should be: not PEM, no certificate or key in it, or not one
    /// that can be used.
    Malformed,
    /// The CA's private key does not belong to its certificate.
    KeyMismatch,
    /// The CA's certificate is no longer valid.
    Expired,
    /// The host name or address cannot be put in a certificate.
    InvalidHost,
    /// Generating a key or signing a certificate failed.
    Generate,
    /// rustls refused the configuration.
    Config,
}

/// Why a TLS operation failed.
///
/// `Display` says what was being done, in lowercase and fitting after "failed to …", and names
/// the file involved; the underlying cause is in [`source`](StdError::source). Nothing in it
/// ever contains key material.
#[derive(Debug)]
pub struct TlsError {
    kind: TlsErrorKind,
    action: String,
    path: Option<PathBuf>,
    source: Option<Box<dyn StdError + Send + Sync>>,
}

impl TlsError {
    pub(crate) fn new(kind: TlsErrorKind, action: impl Into<String>) -> TlsError {
        TlsError {
            kind,
            action: action.into(),
            path: None,
            source: None,
        }
    }

    /// An I/O failure on `path`; a missing file gives [`TlsErrorKind::NotFound`].
    pub(crate) fn io(action: impl Into<String>, path: &Path, err: io::Error) -> TlsError {
        let kind = match err.kind() {
            io::ErrorKind::NotFound => TlsErrorKind::NotFound,
            _ => TlsErrorKind::Io,
        };
        TlsError::new(kind, action).with_path(path).with_source(err)
    }

    pub(crate) fn with_path(mut self, path: &Path) -> TlsError {
        self.path = Some(path.to_path_buf());
        self
    }

    pub(crate) fn with_source(
        mut self,
        source: impl Into<Box<dyn StdError + Send + Sync>>,
    ) -> TlsError {
        self.source = Some(source.into());
        self
    }

    /// The broad reason.
    pub fn kind(&self) -> TlsErrorKind {
        self.kind
    }

    /// The file involved, if any.
    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }
}

impl fmt::Display for TlsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.action)?;
        if let Some(path) = &self.path {
            write!(f, " {}", path.display())?;
        }
        Ok(())
    }
}

impl StdError for TlsError {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        self.source
            .as_deref()
            .map(|source| source as &(dyn StdError + 'static))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    mod display {
        use super::*;

        #[test]
        fn names_the_path_after_the_action() {
            let err = TlsError::io(
                "read the CA certificate",
                Path::new("/x/ca-cert.pem"),
                io::Error::from(io::ErrorKind::PermissionDenied),
            );
            assert_eq!(err.to_string(), "read the CA certificate /x/ca-cert.pem");
            assert_eq!(err.kind(), TlsErrorKind::Io);
            assert!(err.source().is_some());
        }

        #[test]
        fn maps_a_missing_file_to_not_found() {
            let err = TlsError::io(
                "read",
                Path::new("/nope"),
                io::Error::from(io::ErrorKind::NotFound),
            );
            assert_eq!(err.kind(), TlsErrorKind::NotFound);
        }
    }
}
