//! [`upstream_client_config`]: how the proxy verifies the upstreams it connects to.

use std::fs;
use std::path::PathBuf;
use std::sync::Arc;

use rustls::{ClientConfig, RootCertStore};
use rustls_pki_types::CertificateDer;
use rustls_pki_types::pem::PemObject;

use super::error::{TlsError, TlsErrorKind};
use super::{alpn_protocols, provider};

/// The TLS client configuration for connections to upstreams: the system's trusted roots
/// (as `rustls-native-certs` finds them, which honours `SSL_CERT_FILE` and `SSL_CERT_DIR`)
/// plus every certificate in each PEM file of `extra_roots` (e.g. `--upstream-ca`), with full
/// verification of the chain and the host name, and ALPN `h2` and `http/1.1`.
///
/// Nothing here ever verifies less: an upstream that does not chain to one of these roots
/// fails the handshake with an error that says why.
///
/// hyper-rustls's connector builder sets ALPN itself and refuses a configuration that already
/// has some: clear `alpn_protocols` before handing it the configuration.
///
/// # Errors
///
/// - [`TlsErrorKind::NotFound`] or [`TlsErrorKind::Io`] if an extra root file cannot be read;
/// - [`TlsErrorKind::Malformed`] if one holds no PEM certificate, or one that is not usable as
///   a root.
///
/// System roots that cannot be read or parsed are skipped with a warning in the log, as are
/// missing ones: the configuration then trusts only the extra roots.
pub fn upstream_client_config(extra_roots: &[PathBuf]) -> Result<ClientConfig, TlsError> {
    let mut roots = RootCertStore::empty();
    let native = rustls_native_certs::load_native_certs();
    for err in &native.errors {
        tracing::warn!(error = %err, "skipped a system root certificate store");
    }
    let (added, ignored) = roots.add_parsable_certificates(native.certs);
    if ignored > 0 {
        tracing::debug!(
            ignored,
            "skipped system root certificates that do not parse"
        );
    }
    for path in extra_roots {
        add_pem_roots(&mut roots, path)?;
    }
    if roots.is_empty() {
        tracing::warn!("no trusted root certificates: every TLS upstream will be refused");
    } else {
        tracing::debug!(
            system = added,
            total = roots.len(),
            "loaded upstream root certificates"
        );
    }
    let mut config = ClientConfig::builder_with_provider(Arc::new(provider()))
        .with_safe_default_protocol_versions()
        .map_err(|err| {
            TlsError::new(TlsErrorKind::Config, "build the upstream TLS configuration")
                .with_source(err)
        })?
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = alpn_protocols();
    Ok(config)
}

/// Adds every certificate in the PEM file at `path` to `roots`.
fn add_pem_roots(roots: &mut RootCertStore, path: &std::path::Path) -> Result<(), TlsError> {
    let action = "read root certificates from";
    let pem = fs::read(path).map_err(|err| TlsError::io(action, path, err))?;
    let malformed = || TlsError::new(TlsErrorKind::Malformed, action).with_path(path);
    let mut found = 0;
    for cert in CertificateDer::pem_slice_iter(&pem) {
        let cert = cert.map_err(|err| malformed().with_source(err))?;
        roots
            .add(cert)
            .map_err(|err| malformed().with_source(err))?;
        found += 1;
    }
    if found == 0 {
        return Err(malformed().with_source("no CERTIFICATE block in the file"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tls::CertificateAuthority;
    use holdoff_testkit::TempDir;

    mod upstream_client_config {
        use super::*;

        #[test]
        fn offers_aes_128_gcm_first() {
            let config = upstream_client_config(&[]).unwrap();
            let first = config.crypto_provider().cipher_suites[0].suite();
            assert_eq!(first, rustls::CipherSuite::TLS13_AES_128_GCM_SHA256);
        }

        #[test]
        fn offers_h2_and_http1() {
            let config = upstream_client_config(&[]).unwrap();
            assert_eq!(
                config.alpn_protocols,
                vec![b"h2".to_vec(), b"http/1.1".to_vec()]
            );
        }

        #[test]
        fn accepts_a_pem_root() {
            let dir = TempDir::new("upstream-root");
            let ca = CertificateAuthority::load_or_create(dir.path()).unwrap();
            upstream_client_config(&[ca.cert_path().unwrap().to_path_buf()]).unwrap();
        }

        #[test]
        fn names_a_file_that_is_not_pem() {
            let dir = TempDir::new("upstream-bad");
            let path = dir.path().join("bad.pem");
            fs::write(&path, "hello\n").unwrap();
            let err = upstream_client_config(std::slice::from_ref(&path)).unwrap_err();
            assert_eq!(err.kind(), TlsErrorKind::Malformed);
            assert_eq!(
                err.to_string(),
                format!("read root certificates from {}", path.display())
            );
        }

        #[test]
        fn names_a_missing_file() {
            let dir = TempDir::new("upstream-missing");
            let path = dir.path().join("absent.pem");
            let err = upstream_client_config(std::slice::from_ref(&path)).unwrap_err();
            assert_eq!(err.kind(), TlsErrorKind::NotFound);
            assert!(err.to_string().ends_with("absent.pem"), "{err}");
        }

        #[test]
        fn refuses_a_block_that_is_not_a_certificate() {
            let dir = TempDir::new("upstream-garbage");
            let path = dir.path().join("garbage.pem");
            fs::write(
                &path,
                "-----BEGIN CERTIFICATE-----\naGVsbG8=\n-----END CERTIFICATE-----\n",
            )
            .unwrap();
            let err = upstream_client_config(std::slice::from_ref(&path)).unwrap_err();
            assert_eq!(err.kind(), TlsErrorKind::Malformed);
        }
    }
}
