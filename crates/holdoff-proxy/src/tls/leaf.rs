//! [`LeafCache`]: a leaf certificate per intercepted host, issued on first use and kept.

use std::collections::HashMap;
use std::fmt;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};
use std::time::{Duration, SystemTime};

use holdoff::clock::SystemClock;
use rcgen::string::Ia5String;
use rcgen::{
    CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair,
    KeyUsagePurpose, PKCS_ECDSA_P256_SHA256, SanType,
};
use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::ServerCertVerifier;
use rustls::crypto::CryptoProvider;
use rustls::server::{ServerSessionMemoryCache, StoresServerSessions};
use rustls::{RootCertStore, ServerConfig};
use rustls_pki_types::{DnsName, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName, UnixTime};

use super::ca::{CertificateAuthority, random_serial, set_validity};
use super::error::{TlsError, TlsErrorKind};
use super::{alpn_protocols, provider};

/// How many hosts a cache keeps by default.
const DEFAULT_CAPACITY: usize = 1024;
/// TLS sessions kept for resumption, shared by every host's configuration.
const SESSION_CACHE_SIZE: usize = 4096;
/// A year: within what every client accepts for a certificate under a user-added root
/// (Apple's limit is 825 days).
const LEAF_LIFETIME: Duration = Duration::from_secs(365 * 24 * 60 * 60);
/// The X.509 upper bound on a common name; longer host names go in the SAN only.
const MAX_COMMON_NAME: usize = 64;

/// Issues leaf certificates signed by the CA on first use per host name (or IP address),
/// keeps the most recently used ones, and hands out a ready rustls server configuration with
/// ALPN `h2` and `http/1.1`.
///
/// Thread-safe through `&self`. A hit costs a lock around the map and an `Arc` clone; a miss
/// generates an ECDSA P-256 key and signs a certificate (well under a millisecond) outside
/// that lock, so a new host never holds up the others. Concurrent first requests for the same
/// host share one issuance.
///
/// Leaf certificates are valid from a day before issuance for a year; the cache lives as long
/// as the process.
pub struct LeafCache {
    ca: Arc<CertificateAuthority>,
    provider: Arc<CryptoProvider>,
    sessions: Arc<dyn StoresServerSessions>,
    capacity: usize,
    state: Mutex<State>,
    issued: AtomicU64,
}

#[derive(Default)]
struct State {
    entries: HashMap<String, Entry>,
    /// Bumped on every look-up: the entry with the smallest stamp is the least recently used.
    tick: u64,
}

struct Entry {
    slot: Arc<Slot>,
    last_used: u64,
}

#[derive(Default)]
struct Slot {
    config: OnceLock<Arc<ServerConfig>>,
    /// Held while this host's certificate is issued, so it is issued once.
    issuing: Mutex<()>,
}

impl fmt::Debug for LeafCache {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LeafCache")
            .field("ca", &self.ca)
            .field("capacity", &self.capacity)
            .field("hosts", &self.len())
            .field("issued", &self.issued())
            .finish_non_exhaustive()
    }
}

impl LeafCache {
    /// A cache of up to 1024 hosts.
    pub fn new(ca: Arc<CertificateAuthority>) -> LeafCache {
        LeafCache::with_capacity(ca, DEFAULT_CAPACITY)
    }

    /// A cache of up to `capacity` hosts (at least one).
    pub fn with_capacity(ca: Arc<CertificateAuthority>, capacity: usize) -> LeafCache {
        LeafCache {
            ca,
            provider: Arc::new(provider()),
            sessions: ServerSessionMemoryCache::new(SESSION_CACHE_SIZE),
            capacity: capacity.max(1),
            state: Mutex::new(State::default()),
            issued: AtomicU64::new(0),
        }
    }

    /// The CA that signs the leaves.
    pub fn ca(&self) -> &Arc<CertificateAuthority> {
        &self.ca
    }

    /// The server configuration for `host`: a DNS name (`example.com`, any case, a trailing
    /// dot ignored) or an IP address (`127.0.0.1`, `::1` or `[::1]`), without a port.
    ///
    /// # Errors
    ///
    /// [`TlsErrorKind::InvalidHost`] if `host` is neither; [`TlsErrorKind::Generate`] or
    /// [`TlsErrorKind::Config`] if issuing the certificate fails (nothing is cached then).
    pub fn server_config(&self, host: &str) -> Result<Arc<ServerConfig>, TlsError> {
        let subject = Subject::parse(host)?;
        let slot = {
            let mut state = self.lock_state();
            if let Some(config) = state.hit(subject.key()) {
                return Ok(config);
            }
            state.slot(subject.key(), self.capacity)
        };
        let _issuing = slot.issuing.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(config) = slot.config.get() {
            return Ok(Arc::clone(config));
        }
        let config = Arc::new(self.issue(&subject, SystemClock.wall_now())?);
        // Only this thread sets it (under `issuing`), so this cannot fail.
        let _ = slot.config.set(Arc::clone(&config));
        self.issued.fetch_add(1, Ordering::Relaxed);
        Ok(config)
    }

    /// How many certificates this cache has issued so far.
    pub fn issued(&self) -> u64 {
        self.issued.load(Ordering::Relaxed)
    }

    /// How many hosts are cached (including any whose certificate is being issued).
    pub fn len(&self) -> usize {
        self.lock_state().entries.len()
    }

    /// Whether no host is cached.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn lock_state(&self) -> MutexGuard<'_, State> {
        // Nothing that can panic runs while the map is half-updated, so a poisoned lock still
        // guards a consistent map.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn issue(&self, subject: &Subject, now: SystemTime) -> Result<ServerConfig, TlsError> {
        let (cert, key) = issue_leaf(&self.ca, subject, now)?;
        let mut config = ServerConfig::builder_with_provider(Arc::clone(&self.provider))
            .with_safe_default_protocol_versions()
            .and_then(|builder| {
                builder
                    .with_no_client_auth()
                    .with_single_cert(vec![cert], key)
            })
            .map_err(|err| {
                TlsError::new(
                    TlsErrorKind::Config,
                    format!("build the TLS server configuration for {}", subject.key()),
                )
                .with_source(err)
            })?;
        config.alpn_protocols = alpn_protocols();
        // The suite this side prefers (see `provider`), among those the client offers.
        config.ignore_client_order = true;
        config.session_storage = Arc::clone(&self.sessions);
        Ok(config)
    }
}

impl State {
    fn hit(&mut self, key: &str) -> Option<Arc<ServerConfig>> {
        self.tick += 1;
        let entry = self.entries.get_mut(key)?;
        entry.last_used = self.tick;
        entry.slot.config.get().map(Arc::clone)
    }

    /// The slot for `key`, made (evicting the least recently used entry if full) if absent.
    fn slot(&mut self, key: &str, capacity: usize) -> Arc<Slot> {
        if let Some(entry) = self.entries.get(key) {
            return Arc::clone(&entry.slot);
        }
        if self.entries.len() >= capacity {
            // A linear scan, on misses only: they cost a key generation anyway.
            let oldest = self
                .entries
                .iter()
                .min_by_key(|(_, entry)| entry.last_used)
                .map(|(key, _)| key.clone());
            if let Some(oldest) = oldest {
                self.entries.remove(&oldest);
            }
        }
        let slot = Arc::new(Slot::default());
        self.entries.insert(
            key.to_owned(),
            Entry {
                slot: Arc::clone(&slot),
                last_used: self.tick,
            },
        );
        slot
    }
}

/// What a leaf certificate is for: one DNS name or one IP address.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Subject {
    /// Lower case, no trailing dot; also the cache key.
    Dns(String),
    /// With its canonical text as the cache key.
    Ip(IpAddr, String),
}

impl Subject {
    fn parse(host: &str) -> Result<Subject, TlsError> {
        let unbracketed = host
            .strip_prefix('[')
            .and_then(|inner| inner.strip_suffix(']'))
            .unwrap_or(host);
        if let Ok(ip) = unbracketed.parse::<IpAddr>() {
            return Ok(Subject::Ip(ip, ip.to_string()));
        }
        let name = host.strip_suffix('.').unwrap_or(host).to_ascii_lowercase();
        match DnsName::try_from(name.as_str()) {
            Ok(_) => Ok(Subject::Dns(name)),
            Err(err) => Err(TlsError::new(
                TlsErrorKind::InvalidHost,
                format!(
                    "issue a certificate for {host:?}: it is neither a DNS name nor an IP address"
                ),
            )
            .with_source(err)),
        }
    }

    fn key(&self) -> &str {
        match self {
            Subject::Dns(name) => name,
            Subject::Ip(_, text) => text,
        }
    }
}

/// A leaf certificate for `subject` signed by `ca`, valid from a day before `now` for a year,
/// with its private key.
fn issue_leaf(
    ca: &CertificateAuthority,
    subject: &Subject,
    now: SystemTime,
) -> Result<
    (
        rustls_pki_types::CertificateDer<'static>,
        PrivateKeyDer<'static>,
    ),
    TlsError,
> {
    let generate = |err: rcgen::Error| {
        TlsError::new(
            TlsErrorKind::Generate,
            format!("issue a certificate for {}", subject.key()),
        )
        .with_source(err)
    };
    let key = KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256).map_err(generate)?;
    let mut params = CertificateParams::default();
    params.subject_alt_names = vec![match subject {
        Subject::Dns(name) => {
            SanType::DnsName(Ia5String::try_from(name.as_str()).map_err(generate)?)
        }
        Subject::Ip(ip, _) => SanType::IpAddress(*ip),
    }];
    let mut name = DistinguishedName::new();
    if subject.key().len() <= MAX_COMMON_NAME {
        name.push(DnType::CommonName, subject.key());
    }
    name.push(DnType::OrganizationName, "holdoff");
    params.distinguished_name = name;
    params.is_ca = IsCa::ExplicitNoCa;
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    params.use_authority_key_identifier_extension = true;
    params.serial_number = Some(random_serial());
    set_validity(&mut params, now, LEAF_LIFETIME);
    let cert = params.signed_by(&key, ca.issuer()).map_err(generate)?;
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()));
    Ok((cert.der().clone(), key))
}

/// Issues a throwaway leaf at `now` and verifies it against `ca` alone, as a client would.
pub(super) fn check_can_issue(
    ca: &CertificateAuthority,
    now: SystemTime,
) -> Result<(), rustls::Error> {
    const NAME: &str = "holdoff.invalid";
    let (cert, _) = issue_leaf(ca, &Subject::Dns(NAME.to_owned()), now)
        .map_err(|err| rustls::Error::General(err.to_string()))?;
    let mut roots = RootCertStore::empty();
    roots.add(ca.cert_der().clone())?;
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let verifier = WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider)
        .build()
        .map_err(|err| rustls::Error::General(err.to_string()))?;
    let since_epoch = now
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap_or_default();
    let name = ServerName::try_from(NAME).map_err(|err| rustls::Error::General(err.to_string()))?;
    let now = UnixTime::since_unix_epoch(since_epoch);
    verifier.verify_server_cert(&cert, &[], &name, &[], now)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use rustls_pki_types::CertificateDer;

    fn ca() -> Arc<CertificateAuthority> {
        Arc::new(CertificateAuthority::ephemeral().unwrap())
    }

    /// Verifies `cert` for `name` against a root store holding only `ca`.
    fn verify(
        ca: &CertificateAuthority,
        cert: &CertificateDer<'static>,
        name: &str,
        now: SystemTime,
    ) -> Result<(), rustls::Error> {
        let mut roots = RootCertStore::empty();
        roots.add(ca.cert_der().clone()).unwrap();
        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let verifier = WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider)
            .build()
            .unwrap();
        let name = ServerName::try_from(name.to_owned()).unwrap();
        let now = UnixTime::since_unix_epoch(now.duration_since(SystemTime::UNIX_EPOCH).unwrap());
        verifier
            .verify_server_cert(cert, &[], &name, &[], now)
            .map(|_| ())
    }

    mod issue_leaf {
        use super::*;

        fn issue(ca: &CertificateAuthority, host: &str) -> CertificateDer<'static> {
            issue_leaf(ca, &Subject::parse(host).unwrap(), SystemClock.wall_now())
                .unwrap()
                .0
        }

        #[test]
        fn verifies_for_a_dns_name_against_the_ca() {
            let ca = ca();
            let cert = issue(&ca, "localhost");
            verify(&ca, &cert, "localhost", SystemClock.wall_now()).unwrap();
        }

        #[test]
        fn verifies_for_an_ip_address_against_the_ca() {
            let ca = ca();
            verify(
                &ca,
                &issue(&ca, "127.0.0.1"),
                "127.0.0.1",
                SystemClock.wall_now(),
            )
            .unwrap();
            verify(&ca, &issue(&ca, "[::1]"), "::1", SystemClock.wall_now()).unwrap();
        }

        #[test]
        fn does_not_verify_for_another_name() {
            let ca = ca();
            let err = verify(
                &ca,
                &issue(&ca, "a.example"),
                "b.example",
                SystemClock.wall_now(),
            )
            .unwrap_err();
            assert!(
                matches!(err, rustls::Error::InvalidCertificate(_)),
                "{err:?}"
            );
        }

        #[test]
        fn does_not_verify_against_another_ca() {
            let cert = issue(&ca(), "localhost");
            assert!(verify(&ca(), &cert, "localhost", SystemClock.wall_now()).is_err());
        }

        #[test]
        fn tolerates_a_client_clock_a_few_hours_behind() {
            let ca = ca();
            let now = SystemClock.wall_now();
            let cert = issue_leaf(&ca, &Subject::parse("localhost").unwrap(), now)
                .unwrap()
                .0;
            verify(&ca, &cert, "localhost", now - Duration::from_secs(6 * 3600)).unwrap();
            assert!(verify(&ca, &cert, "localhost", now + 2 * LEAF_LIFETIME).is_err());
        }

        #[test]
        fn verifies_from_a_ca_reloaded_from_disk() {
            let dir = holdoff_testkit::TempDir::new("leaf-reloaded");
            CertificateAuthority::load_or_create(dir.path()).unwrap();
            let ca = CertificateAuthority::load(dir.path()).unwrap();
            verify(
                &ca,
                &issue(&ca, "localhost"),
                "localhost",
                SystemClock.wall_now(),
            )
            .unwrap();
        }
    }

    mod subject_parse {
        use super::*;

        #[test]
        fn reads_dns_names_in_any_case() {
            assert_eq!(
                Subject::parse("API.Example.com.").unwrap(),
                Subject::Dns("api.example.com".into())
            );
        }

        #[test]
        fn reads_ip_literals_with_or_without_brackets() {
            let v6 = Subject::parse("[0:0::1]").unwrap();
            assert_eq!(v6, Subject::parse("::1").unwrap());
            assert_eq!(v6.key(), "::1");
            assert_eq!(Subject::parse("10.0.0.1").unwrap().key(), "10.0.0.1");
        }

        #[test]
        fn refuses_what_is_neither() {
            for host in ["", "exa mple.com", "host:443", "[::1", "a..b"] {
                let err = Subject::parse(host).unwrap_err();
                assert_eq!(err.kind(), TlsErrorKind::InvalidHost, "{host:?}");
            }
        }
    }

    mod server_config {
        use super::*;

        #[test]
        fn offers_h2_and_http1() {
            let cache = LeafCache::new(ca());
            let config = cache.server_config("localhost").unwrap();
            assert_eq!(
                config.alpn_protocols,
                vec![b"h2".to_vec(), b"http/1.1".to_vec()]
            );
        }

        #[test]
        fn returns_the_same_arc_for_a_repeated_host() {
            let cache = LeafCache::new(ca());
            let first = cache.server_config("localhost").unwrap();
            let second = cache.server_config("LOCALHOST").unwrap();
            assert!(Arc::ptr_eq(&first, &second));
            assert_eq!(cache.issued(), 1);
        }

        #[test]
        fn issues_once_under_concurrency() {
            let cache = Arc::new(LeafCache::new(ca()));
            let barrier = Arc::new(std::sync::Barrier::new(8));
            let threads: Vec<_> = (0..8)
                .map(|_| {
                    let (cache, barrier) = (Arc::clone(&cache), Arc::clone(&barrier));
                    std::thread::spawn(move || {
                        barrier.wait();
                        cache.server_config("same.example").unwrap()
                    })
                })
                .collect();
            let configs: Vec<_> = threads.into_iter().map(|t| t.join().unwrap()).collect();
            assert!(configs.windows(2).all(|w| Arc::ptr_eq(&w[0], &w[1])));
            assert_eq!(cache.issued(), 1);
        }

        #[test]
        fn evicts_the_least_recently_used_host() {
            let cache = LeafCache::with_capacity(ca(), 2);
            let a = cache.server_config("a.example").unwrap();
            cache.server_config("b.example").unwrap();
            assert!(Arc::ptr_eq(&a, &cache.server_config("a.example").unwrap()));
            cache.server_config("c.example").unwrap(); // evicts b, the least recently used
            assert_eq!(cache.len(), 2);
            assert!(Arc::ptr_eq(&a, &cache.server_config("a.example").unwrap()));
            assert_eq!(cache.issued(), 3);
            cache.server_config("b.example").unwrap();
            assert_eq!(cache.issued(), 4);
        }

        #[test]
        fn refuses_an_invalid_host_without_caching_it() {
            let cache = LeafCache::new(ca());
            let err = cache.server_config("not a host").unwrap_err();
            assert_eq!(err.kind(), TlsErrorKind::InvalidHost);
            assert!(err.to_string().contains("\"not a host\""), "{err}");
            assert!(cache.is_empty());
        }
    }
}
