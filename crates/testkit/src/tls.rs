//! The one test PKI: [`TestCa`], a throwaway CA (its certificate also in a PEM file) that
//! issues server certificates ([`Leaf`]) for loopback, for test servers that speak TLS (an
//! HTTPS upstream, a `rediss://` Redis); and [`self_signed`], a certificate no CA issued.

use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose, SanType,
};
use rustls_pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

use crate::TempDir;

/// A throwaway certificate authority, its certificate written to [`TestCa::pem_path`] for a
/// client or `--upstream-ca` to trust.
#[derive(Debug)]
pub struct TestCa {
    params: CertificateParams,
    key: KeyPair,
    pem: String,
    dir: TempDir,
}

impl TestCa {
    /// Creates a CA whose common name is `name`.
    ///
    /// # Panics
    ///
    /// If key generation, signing or writing the PEM file fails.
    pub fn new(name: &str) -> TestCa {
        let key = KeyPair::generate().expect("generate the test CA key");
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, name);
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let pem = params
            .self_signed(&key)
            .expect("self-sign the test CA")
            .pem();
        let dir = TempDir::new("test-ca");
        std::fs::write(dir.join("ca.pem"), &pem).expect("write the test CA");
        TestCa {
            params,
            key,
            pem,
            dir,
        }
    }

    /// The CA's certificate, PEM: what clients trust.
    pub fn pem(&self) -> &str {
        &self.pem
    }

    /// The file that holds [`TestCa::pem`].
    pub fn pem_path(&self) -> PathBuf {
        self.dir.join("ca.pem")
    }

    /// [`TestCa::pem_path`] as a string, for a command line.
    pub fn pem_path_str(&self) -> String {
        self.pem_path().display().to_string()
    }

    /// A server certificate signed by this CA for `localhost`, `127.0.0.1` and `names`.
    ///
    /// # Panics
    ///
    /// If key generation or signing fails.
    pub fn leaf(&self, names: &[&str]) -> Leaf {
        self.issue(names, vec![ExtendedKeyUsagePurpose::ServerAuth])
    }

    /// As [`TestCa::leaf`], for a server that also connects to its peers with the same
    /// certificate, and so is a TLS client of theirs too: a Redis Cluster node, whose peers
    /// always ask for a client certificate on the cluster bus.
    ///
    /// # Panics
    ///
    /// As [`TestCa::leaf`].
    pub fn peer_leaf(&self, names: &[&str]) -> Leaf {
        self.issue(
            names,
            vec![
                ExtendedKeyUsagePurpose::ServerAuth,
                ExtendedKeyUsagePurpose::ClientAuth,
            ],
        )
    }

    fn issue(&self, names: &[&str], usages: Vec<ExtendedKeyUsagePurpose>) -> Leaf {
        let key = KeyPair::generate().expect("generate a leaf key");
        let mut dns = vec!["localhost".to_owned()];
        dns.extend(names.iter().map(|name| (*name).to_owned()));
        let mut params = CertificateParams::new(dns).expect("leaf params");
        params
            .subject_alt_names
            .push(SanType::IpAddress(Ipv4Addr::LOCALHOST.into()));
        params
            .distinguished_name
            .push(DnType::CommonName, "holdoff test server");
        params.extended_key_usages = usages;
        let issuer = Issuer::from_params(&self.params, &self.key);
        let cert = params.signed_by(&key, &issuer).expect("sign the leaf");
        Leaf {
            cert_pem: cert.pem(),
            cert_der: cert.der().to_vec(),
            key_pem: key.serialize_pem(),
            key_der: key.serialize_der(),
        }
    }

    /// The directory [`TestCa::pem_path`] is in, removed with the CA.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }
}

/// A server certificate and its key.
#[derive(Clone, Debug)]
pub struct Leaf {
    /// The certificate, PEM.
    pub cert_pem: String,
    /// The certificate, DER.
    pub cert_der: Vec<u8>,
    /// The private key, PEM (PKCS #8).
    pub key_pem: String,
    /// The private key, DER (PKCS #8).
    pub key_der: Vec<u8>,
}

impl Leaf {
    /// The certificate and key as rustls takes them (`with_single_cert`).
    pub fn rustls(&self) -> (CertificateDer<'static>, PrivateKeyDer<'static>) {
        let key = PrivatePkcs8KeyDer::from(self.key_der.clone());
        (CertificateDer::from(self.cert_der.clone()), key.into())
    }
}

/// A certificate for `localhost` that signs itself: no CA issued it.
///
/// # Panics
///
/// If key generation or signing fails.
pub fn self_signed() -> Leaf {
    let certified = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()])
        .expect("self-sign a certificate");
    Leaf {
        cert_pem: certified.cert.pem(),
        cert_der: certified.cert.der().to_vec(),
        key_pem: certified.signing_key.serialize_pem(),
        key_der: certified.signing_key.serialize_der(),
    }
}
