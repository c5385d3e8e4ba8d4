//! [`TestPki`]: a throwaway CA and a server certificate it issued for loopback, for test
//! servers that speak TLS (an HTTPS upstream, a `rediss://` Redis).

use std::net::Ipv4Addr;

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose, SanType,
};

/// A fresh CA and a server certificate it signed for `localhost` and `127.0.0.1`.
#[derive(Clone, Debug)]
pub struct TestPki {
    /// The CA's certificate, PEM: what clients trust.
    pub ca_pem: String,
    /// The server's certificate, PEM.
    pub cert_pem: String,
    /// The server's certificate, DER.
    pub cert_der: Vec<u8>,
    /// The server's private key, PEM (PKCS #8).
    pub key_pem: String,
    /// The server's private key, DER (PKCS #8).
    pub key_der: Vec<u8>,
}

impl TestPki {
    /// Issues a new CA called `name` and a server certificate signed by it.
    ///
    /// # Panics
    ///
    /// If key generation or signing fails (it does not with aws-lc-rs).
    pub fn issue(name: &str) -> TestPki {
        let ca_key = KeyPair::generate().expect("CA key");
        let mut ca = CertificateParams::new(Vec::<String>::new()).expect("CA params");
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca.distinguished_name.push(DnType::CommonName, name);
        ca.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let ca_cert = ca.self_signed(&ca_key).expect("self-sign the CA");

        let key = KeyPair::generate().expect("server key");
        let mut leaf = CertificateParams::new(vec!["localhost".to_owned()]).expect("leaf");
        leaf.subject_alt_names
            .push(SanType::IpAddress(Ipv4Addr::LOCALHOST.into()));
        leaf.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        let issuer = Issuer::from_params(&ca, &ca_key);
        let cert = leaf
            .signed_by(&key, &issuer)
            .expect("sign the server certificate");
        TestPki {
            ca_pem: ca_cert.pem(),
            cert_pem: cert.pem(),
            cert_der: cert.der().to_vec(),
            key_pem: key.serialize_pem(),
            key_der: key.serialize_der(),
        }
    }
}
