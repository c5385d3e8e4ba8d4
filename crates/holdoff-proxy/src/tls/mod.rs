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
//! Every configuration uses rustls's `aws-lc-rs` provider explicitly, so no process-wide provider
//! needs installing.

mod ca;
mod disk;
mod error;
mod leaf;
mod upstream;

use rustls::CipherSuite;

pub use ca::CertificateAuthority;
pub use error::{TlsError, TlsErrorKind};
pub use leaf::LeafCache;
pub use upstream::upstream_client_config;

/// rustls's `aws-lc-rs` provider with AES-128-GCM preferred over AES-256-GCM, as Go's TLS stack
/// and BoringSSL order them: both are secure, and AES-128 runs four fewer rounds per block, which
/// shows when every intercepted byte is decrypted from one side and encrypted for the other.
/// The set of suites is the provider's default, unchanged.
fn provider() -> rustls::crypto::CryptoProvider {
    let mut provider = rustls::crypto::aws_lc_rs::default_provider();
    // A stable sort: within each key size, rustls's order (TLS 1.3 first, ChaCha20 last).
    provider.cipher_suites.sort_by_key(|suite| {
        !matches!(
            suite.suite(),
            CipherSuite::TLS13_AES_128_GCM_SHA256
                | CipherSuite::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256
                | CipherSuite::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256
        )
    });
    provider
}

/// The protocols offered on both sides: HTTP/2 first, then HTTP/1.1.
fn alpn_protocols() -> Vec<Vec<u8>> {
    vec![b"h2".to_vec(), b"http/1.1".to_vec()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefers_aes_128_gcm_and_keeps_every_default_suite() {
        let suites = |provider: &rustls::crypto::CryptoProvider| {
            provider
                .cipher_suites
                .iter()
                .map(|suite| suite.suite())
                .collect::<Vec<_>>()
        };
        let ours = suites(&provider());
        let default = suites(&rustls::crypto::aws_lc_rs::default_provider());
        assert_eq!(ours[0], CipherSuite::TLS13_AES_128_GCM_SHA256);
        let position = |suite| ours.iter().position(|s| *s == suite).unwrap();
        assert!(
            position(CipherSuite::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256)
                < position(CipherSuite::TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384)
        );
        let (mut sorted, mut expected) = (ours.clone(), default);
        sorted.sort_by_key(|suite| u16::from(*suite));
        expected.sort_by_key(|suite| u16::from(*suite));
        assert_eq!(sorted, expected);
    }
}
