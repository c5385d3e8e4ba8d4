//! The local certificate authority, leaf certificates issued per host, and upstream TLS.
//!
//! ```
//! use std::sync::Arc;
//! use holdoff_proxy::tls::{CertificateAuthority, LeafCache, upstream_client_config};
//!
//! # fn main() -> Result<(), holdoff_proxy::tls::TlsError> {
//! // `load_or_create(&dir)` for a CA that clients have been told to trust.
//! let ca = Arc::new(CertificateAuthority::ephemeral()?);
//! let leaves = LeafCache::new(Arc::clone(&ca));
//! // Terminate TLS for an intercepted CONNECT to api.example.com:443 ...
//! let server = leaves.server_config("api.example.com")?;
//! assert_eq!(server.alpn_protocols, [b"h2".to_vec(), b"http/1.1".to_vec()]);
//! // ... and verify the real api.example.com on the way out.
//! let client = upstream_client_config(&[])?;
//! # let _ = client;
//! # Ok(())
//! # }
//! ```
//!
//! # Safety
//!
//! The CA's private key is written with mode 0600 from the moment its file exists, inside a
//! directory created with mode 0700; it is never printed, logged or shown by `Debug`, and
//! nothing here installs the CA anywhere. Upstream connections are verified against the
//! system's roots plus any roots given explicitly, never less.
//!
//! Every configuration uses rustls's `ring` provider explicitly, so no process-wide provider
//! needs installing.

mod ca;
mod error;
mod leaf;
mod upstream;

pub use ca::CertificateAuthority;
pub use error::{TlsError, TlsErrorKind};
pub use leaf::LeafCache;
pub use upstream::upstream_client_config;

/// The protocols offered on both sides: HTTP/2 first, then HTTP/1.1.
fn alpn_protocols() -> Vec<Vec<u8>> {
    vec![b"h2".to_vec(), b"http/1.1".to_vec()]
}

/// A directory under the system's temporary directory, removed when dropped.
#[cfg(test)]
mod test_dir {
    use std::path::{Path, PathBuf};
    use std::sync::atomic::{AtomicU32, Ordering};

    pub(crate) struct TestDir(PathBuf);

    impl TestDir {
        pub(crate) fn new(name: &str) -> TestDir {
            static NEXT: AtomicU32 = AtomicU32::new(0);
            let unique = format!(
                "holdoff-tls-{name}-{}-{}",
                std::process::id(),
                NEXT.fetch_add(1, Ordering::Relaxed)
            );
            let path = std::env::temp_dir().join(unique);
            let _ = std::fs::remove_dir_all(&path);
            std::fs::create_dir_all(&path).expect("create a test directory");
            TestDir(path)
        }

        pub(crate) fn path(&self) -> &Path {
            &self.0
        }
    }

    impl Drop for TestDir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}
