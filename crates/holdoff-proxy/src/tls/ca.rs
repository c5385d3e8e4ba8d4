//! [`CertificateAuthority`]: the local CA that signs the leaf certificates of intercepted hosts,
//! and a freshly generated one. Its files on disk are `disk`'s.

use std::fmt;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use holdoff::clock::SystemClock;
use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, IsCa, Issuer, KeyPair,
    KeyUsagePurpose, PKCS_ECDSA_P256_SHA256, SerialNumber,
};
use rustls_pki_types::CertificateDer;

use super::error::{TlsError, TlsErrorKind};

const COMMON_NAME: &str = "holdoff local CA";
const ORGANIZATION: &str = "holdoff";
const ORGANIZATIONAL_UNIT: &str = "holdoff proxy, for local testing only";

const DAY: Duration = Duration::from_secs(24 * 60 * 60);
/// About ten years: long enough that a trusted CA does not need re-trusting often.
const CA_LIFETIME: Duration = Duration::from_secs(3650 * 24 * 60 * 60);

/// The local certificate authority: its certificate, and the key that signs leaf certificates.
///
/// `Debug` shows the certificate's path, never the key; nothing here prints or logs the key.
pub struct CertificateAuthority {
    cert_pem: String,
    cert_der: CertificateDer<'static>,
    cert_path: Option<PathBuf>,
    issuer: Issuer<'static, KeyPair>,
}

impl fmt::Debug for CertificateAuthority {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CertificateAuthority")
            .field("cert_path", &self.cert_path)
            .field("key", &"[never shown]")
            .finish_non_exhaustive()
    }
}

impl CertificateAuthority {
    /// A CA from its parts, checked already.
    pub(super) fn new(
        cert_pem: String,
        cert_der: CertificateDer<'static>,
        cert_path: Option<PathBuf>,
        issuer: Issuer<'static, KeyPair>,
    ) -> CertificateAuthority {
        CertificateAuthority {
            cert_pem,
            cert_der,
            cert_path,
            issuer,
        }
    }

    /// A CA that lives only in memory, for tests; one whose certificate clients must be able
    /// to read is a [throwaway](CertificateAuthority::throwaway) CA.
    ///
    /// # Errors
    ///
    /// [`TlsErrorKind::Generate`] if the key or certificate cannot be generated.
    pub fn ephemeral() -> Result<CertificateAuthority, TlsError> {
        Ok(Generated::new(SystemClock.wall_now())?.into_ca(None))
    }

    /// The certificate, PEM-encoded: what clients are told to trust.
    pub fn cert_pem(&self) -> &str {
        &self.cert_pem
    }

    /// The certificate's file, or `None` for an [ephemeral](CertificateAuthority::ephemeral) CA.
    pub fn cert_path(&self) -> Option<&Path> {
        self.cert_path.as_deref()
    }

    /// The certificate, DER-encoded, e.g. for a client's root store.
    pub fn cert_der(&self) -> &CertificateDer<'static> {
        &self.cert_der
    }

    /// What signs leaf certificates.
    pub(super) fn issuer(&self) -> &Issuer<'static, KeyPair> {
        &self.issuer
    }
}

/// A freshly generated CA, before it is written anywhere.
pub(super) struct Generated {
    pub(super) cert_pem: String,
    cert_der: CertificateDer<'static>,
    pub(super) key_pem: String,
    issuer: Issuer<'static, KeyPair>,
}

impl Generated {
    pub(super) fn new(now: SystemTime) -> Result<Generated, TlsError> {
        let generate = |err: rcgen::Error| {
            TlsError::new(TlsErrorKind::Generate, "generate the CA").with_source(err)
        };
        let key = KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256).map_err(generate)?;
        let mut params = CertificateParams::default();
        let mut name = DistinguishedName::new();
        name.push(DnType::CommonName, COMMON_NAME);
        name.push(DnType::OrganizationName, ORGANIZATION);
        name.push(DnType::OrganizationalUnitName, ORGANIZATIONAL_UNIT);
        params.distinguished_name = name;
        // Path length 0: it signs leaf certificates only, never another CA.
        params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        params.serial_number = Some(random_serial());
        set_validity(&mut params, now, CA_LIFETIME);
        let cert = params.self_signed(&key).map_err(generate)?;
        Ok(Generated {
            cert_pem: cert.pem(),
            cert_der: cert.der().clone(),
            key_pem: key.serialize_pem(),
            issuer: Issuer::new(params, key),
        })
    }

    pub(super) fn into_ca(self, cert_path: Option<PathBuf>) -> CertificateAuthority {
        CertificateAuthority {
            cert_pem: self.cert_pem,
            cert_der: self.cert_der,
            cert_path,
            issuer: self.issuer,
        }
    }
}

/// Valid from a day before `now` (a client whose clock is a little behind still accepts it)
/// until `lifetime` after `now`.
pub(super) fn set_validity(params: &mut CertificateParams, now: SystemTime, lifetime: Duration) {
    let since = since_epoch(now);
    let epoch = rcgen::date_time_ymd(1970, 1, 1);
    params.not_before = epoch + since.saturating_sub(DAY);
    params.not_after = epoch + since + lifetime;
}

pub(super) fn since_epoch(now: SystemTime) -> Duration {
    // A clock before 1970 is broken; the certificates are then simply dated from 1970.
    now.duration_since(UNIX_EPOCH).unwrap_or_default()
}

/// 128 random bits, positive: RFC 5280 wants serials unique per CA, browsers want them
/// unpredictable.
pub(super) fn random_serial() -> SerialNumber {
    let mut bytes: [u8; 16] = rand::random();
    bytes[0] = (bytes[0] & 0x7f) | 0x40;
    SerialNumber::from_slice(&bytes)
}

#[cfg(test)]
mod tests {
    use std::fs;

    use super::*;
    use holdoff_testkit::TempDir;

    mod debug {
        use super::*;

        #[test]
        fn never_shows_the_key() {
            let dir = TempDir::new("ca-debug");
            let ca = CertificateAuthority::load_or_create(dir.path()).unwrap();
            let key = fs::read_to_string(CertificateAuthority::key_file(dir.path())).unwrap();
            let body: String = key.lines().nth(1).unwrap().to_owned();
            let shown = format!("{ca:?} {:?}", ca.issuer());
            assert!(!shown.contains(&body), "{shown}");
            assert!(!shown.contains("PRIVATE"), "{shown}");
        }
    }
}
