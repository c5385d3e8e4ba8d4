//! The CA on disk: two PEM files in one directory, `ca-cert.pem` (public, what users trust)
//! and `ca-key.pem` (mode 0600 from the moment it exists). Both are written to a temporary
//! file and then moved into place, so a reader never sees half a file, and the key is claimed
//! with a hard link that fails if one already exists, so two processes creating the CA at once
//! end up sharing one pair rather than mixing two.
//!
//! A throwaway CA ([`CertificateAuthority::throwaway`], for `holdoff run`) writes its
//! certificate only: its key lives in memory, so nothing secret outlives the process however
//! it ends.
//!
//! A CA loaded from disk is checked by issuing one leaf with it (`leaf`), as a client would
//! see it.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use holdoff::clock::SystemClock;
use rcgen::{Issuer, KeyPair};
use rustls::sign::CertifiedKey;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

use super::ca::{CertificateAuthority, Generated, since_epoch};
use super::error::{TlsError, TlsErrorKind};
use super::leaf::check_can_issue;

/// The certificate's file name inside the CA directory.
const CERT_FILE: &str = "ca-cert.pem";
/// The private key's file name inside the CA directory.
const KEY_FILE: &str = "ca-key.pem";

impl CertificateAuthority {
    /// The default CA directory: `$XDG_DATA_HOME/holdoff` on Linux (`~/.local/share/holdoff`
    /// when it is unset), the platform's data directory plus `holdoff` elsewhere; `None` if
    /// the platform has none (no home directory).
    pub fn default_dir() -> Option<PathBuf> {
        dirs::data_dir().map(|dir| dir.join("holdoff"))
    }

    /// Where the certificate lives in `dir`.
    pub fn cert_file(dir: &Path) -> PathBuf {
        dir.join(CERT_FILE)
    }

    /// Where the private key lives in `dir`.
    pub fn key_file(dir: &Path) -> PathBuf {
        dir.join(KEY_FILE)
    }

    /// Loads `ca-cert.pem` and `ca-key.pem` from `dir`, creating both if neither exists (the
    /// directory with mode 0700 and the key with mode 0600, on Unix).
    ///
    /// # Errors
    ///
    /// Those of [`CertificateAuthority::load`] except [`TlsErrorKind::NotFound`], and
    /// [`TlsErrorKind::Io`] if the directory or the files cannot be created.
    pub fn load_or_create(dir: &Path) -> Result<CertificateAuthority, TlsError> {
        match load_settled(dir) {
            Err(err) if err.kind() == TlsErrorKind::NotFound => {}
            loaded => return loaded,
        }
        create_private_dir(dir)?;
        let generated = Generated::new(SystemClock.wall_now())?;
        if write_pair(dir, &generated)? {
            return Ok(generated.into_ca(Some(CertificateAuthority::cert_file(dir))));
        }
        // Another process created the CA between our look and our write: use theirs.
        load_settled(dir)
    }

    /// Loads an existing CA from `dir`.
    ///
    /// # Errors
    ///
    /// - [`TlsErrorKind::NotFound`] if neither file exists;
    /// - [`TlsErrorKind::Incomplete`] if only one of them does;
    /// - [`TlsErrorKind::Io`] if a file cannot be read;
    /// - [`TlsErrorKind::Malformed`] if a file holds no usable PEM certificate or key, or the
    ///   certificate is not a CA's;
    /// - [`TlsErrorKind::KeyMismatch`] if the key is not the certificate's;
    /// - [`TlsErrorKind::Expired`] if the certificate has expired.
    pub fn load(dir: &Path) -> Result<CertificateAuthority, TlsError> {
        let cert_path = CertificateAuthority::cert_file(dir);
        let key_path = CertificateAuthority::key_file(dir);
        let cert_pem = read_if_exists(&cert_path, "read the CA certificate")?;
        let key_pem = read_if_exists(&key_path, "read the CA key")?;
        let (cert_pem, key_pem) = match (cert_pem, key_pem) {
            (Some(cert), Some(key)) => (cert, key),
            (None, None) => {
                return Err(TlsError::new(TlsErrorKind::NotFound, "find a CA in").with_path(dir));
            }
            (Some(_), None) => {
                return Err(TlsError::new(
                    TlsErrorKind::Incomplete,
                    "find the CA key that goes with the certificate beside it, at",
                )
                .with_path(&key_path));
            }
            (None, Some(_)) => {
                return Err(TlsError::new(
                    TlsErrorKind::Incomplete,
                    "find the CA certificate that goes with the key beside it, at",
                )
                .with_path(&cert_path));
            }
        };
        warn_if_key_is_exposed(&key_path);
        let now = SystemClock.wall_now();
        CertificateAuthority::from_pem(&cert_pem, &key_pem, &cert_path, &key_path, now)
    }

    /// A new CA whose key lives only in memory, with its certificate written to `dir` as
    /// `ca-cert.pem` for clients to trust: a throwaway CA, of which nothing secret is left on
    /// disk however the process ends (even killed with `SIGKILL`). The directory must exist.
    ///
    /// # Errors
    ///
    /// [`TlsErrorKind::Generate`] if the key or certificate cannot be generated, and
    /// [`TlsErrorKind::Io`] if the certificate cannot be written.
    pub fn throwaway(dir: &Path) -> Result<CertificateAuthority, TlsError> {
        let generated = Generated::new(SystemClock.wall_now())?;
        let cert_path = CertificateAuthority::cert_file(dir);
        write_cert(dir, &generated)
            .map_err(|(path, err)| TlsError::io("write the CA certificate", &path, err))?;
        Ok(generated.into_ca(Some(cert_path)))
    }

    /// Removes the CA's certificate and key from `dir`, and returns the files it removed
    /// (none if there was no CA). The directory itself stays.
    ///
    /// # Errors
    ///
    /// [`TlsErrorKind::Io`] if a file exists but cannot be removed.
    pub fn remove(dir: &Path) -> Result<Vec<PathBuf>, TlsError> {
        let mut removed = Vec::new();
        // The key first: a certificate left behind by a failure is harmless, a key is not.
        for (path, what) in [
            (CertificateAuthority::key_file(dir), "remove the CA key"),
            (
                CertificateAuthority::cert_file(dir),
                "remove the CA certificate",
            ),
        ] {
            match fs::remove_file(&path) {
                Ok(()) => removed.push(path),
                Err(err) if err.kind() == io::ErrorKind::NotFound => {}
                Err(err) => return Err(TlsError::io(what, &path, err)),
            }
        }
        Ok(removed)
    }

    /// The CA in `cert_pem` and `key_pem`, read from `cert_path` and `key_path`, checked as
    /// [`CertificateAuthority::load`] says.
    fn from_pem(
        cert_pem: &str,
        key_pem: &str,
        cert_path: &Path,
        key_path: &Path,
        now: SystemTime,
    ) -> Result<CertificateAuthority, TlsError> {
        let malformed = |action: &str, path: &Path| {
            TlsError::new(TlsErrorKind::Malformed, action).with_path(path)
        };
        let cert_der = match CertificateDer::pem_slice_iter(cert_pem.as_bytes()).next() {
            Some(Ok(der)) => der,
            Some(Err(err)) => {
                return Err(malformed("read a PEM certificate from", cert_path).with_source(err));
            }
            None => {
                return Err(malformed("read a PEM certificate from", cert_path)
                    .with_source("no CERTIFICATE block in the file"));
            }
        };
        // rcgen's errors describe the failure, never the key's bytes.
        let key = KeyPair::from_pem(key_pem)
            .map_err(|err| malformed("read a PEM private key from", key_path).with_source(err))?;

        let provider = rustls::crypto::aws_lc_rs::default_provider();
        let key_der = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()));
        if let Err(err) = CertifiedKey::from_der(vec![cert_der.clone()], key_der, &provider) {
            let kind = match err {
                rustls::Error::InconsistentKeys(_) => TlsErrorKind::KeyMismatch,
                _ => TlsErrorKind::Malformed,
            };
            return Err(
                TlsError::new(kind, "pair the CA key with its certificate, using")
                    .with_path(key_path)
                    .with_source(err),
            );
        }

        let (_, parsed) = x509_parser::parse_x509_certificate(&cert_der)
            .map_err(|err| malformed("parse the CA certificate", cert_path).with_source(err))?;
        if !parsed.is_ca() {
            return Err(malformed("use as a CA the certificate", cert_path)
                .with_source("its basic constraints do not make it a CA"));
        }
        // webpki does not check a trust anchor's dates, but OpenSSL and others refuse an
        // expired root: say so here rather than leave clients to fail one by one.
        let now_secs = i64::try_from(since_epoch(now).as_secs()).unwrap_or(i64::MAX);
        let not_after = parsed.validity().not_after;
        if not_after.timestamp() < now_secs {
            return Err(
                TlsError::new(TlsErrorKind::Expired, "use the expired CA certificate")
                    .with_path(cert_path)
                    .with_source(format!("it was valid until {not_after}")),
            );
        }

        let issuer = Issuer::from_ca_cert_der(&cert_der, key)
            .map_err(|err| malformed("parse the CA certificate", cert_path).with_source(err))?;
        let ca = CertificateAuthority::new(
            cert_pem.to_owned(),
            cert_der,
            Some(cert_path.to_owned()),
            issuer,
        );
        // What matters in the end is that clients accept what it signs (key usages, names,
        // signature): check one leaf the way a client would.
        check_can_issue(&ca, now).map_err(|err| {
            malformed(
                "use as a CA (what it signs does not verify) the certificate",
                cert_path,
            )
            .with_source(err)
        })?;
        Ok(ca)
    }
}

/// [`CertificateAuthority::load`], but a key without its certificate is given up to a second
/// to be joined by it: that is what another process creating the CA looks like midway, as
/// [`write_pair`] writes the key first. It blocks its thread while it waits: the proxy loads
/// its CA on a blocking thread.
fn load_settled(dir: &Path) -> Result<CertificateAuthority, TlsError> {
    let cert_path = CertificateAuthority::cert_file(dir);
    let mut tries = 0;
    loop {
        match CertificateAuthority::load(dir) {
            Err(err)
                if err.kind() == TlsErrorKind::Incomplete
                    && err.path() == Some(cert_path.as_path())
                    && tries < 50 =>
            {
                tries += 1;
                SystemClock.block_for(Duration::from_millis(20));
            }
            loaded => return loaded,
        }
    }
}

fn read_if_exists(path: &Path, action: &str) -> Result<Option<String>, TlsError> {
    match fs::read_to_string(path) {
        Ok(text) => Ok(Some(text)),
        Err(err) if err.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(err) if err.kind() == io::ErrorKind::InvalidData => Err(TlsError::new(
            TlsErrorKind::Malformed,
            format!("{action} (not UTF-8 text, so not PEM)"),
        )
        .with_path(path)
        .with_source(err)),
        Err(err) => Err(TlsError::io(action, path, err)),
    }
}

#[cfg(unix)]
fn warn_if_key_is_exposed(key_path: &Path) {
    use std::os::unix::fs::PermissionsExt;
    if let Ok(meta) = fs::metadata(key_path) {
        let mode = meta.permissions().mode() & 0o777;
        if mode & 0o077 != 0 {
            tracing::warn!(
                path = %key_path.display(),
                mode = format_args!("{mode:o}"),
                "the CA key is readable by other users; `chmod 600` it",
            );
        }
    }
}

#[cfg(not(unix))]
fn warn_if_key_is_exposed(_key_path: &Path) {}

fn create_private_dir(dir: &Path) -> Result<(), TlsError> {
    let mut builder = fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt;
        builder.mode(0o700);
    }
    builder
        .create(dir)
        .map_err(|err| TlsError::io("create the CA directory", dir, err))
}

/// Writes the pair into `dir`; `false` if another process's key got there first (and then
/// nothing of ours is left behind).
fn write_pair(dir: &Path, generated: &Generated) -> Result<bool, TlsError> {
    let key_path = CertificateAuthority::key_file(dir);
    let key_tmp = write_temp(dir, KEY_FILE, generated.key_pem.as_bytes(), 0o600)
        .map_err(|(path, err)| TlsError::io("write the CA key", &path, err))?;
    let claimed = claim(&key_tmp, &key_path);
    let _ = fs::remove_file(&key_tmp);
    if !claimed.map_err(|err| TlsError::io("write the CA key", &key_path, err))? {
        return Ok(false);
    }
    if let Err((path, err)) = write_cert(dir, generated) {
        // A key without its certificate is of no use to anyone: do not leave it behind.
        let _ = fs::remove_file(&key_path);
        return Err(TlsError::io("write the CA certificate", &path, err));
    }
    // Make the new names durable; a failure here loses nothing that is not re-creatable.
    if let Ok(dir) = File::open(dir) {
        let _ = dir.sync_all();
    }
    Ok(true)
}

/// Writes the certificate into `dir`, replacing any there; on failure nothing is left behind
/// and the error names the file.
fn write_cert(dir: &Path, generated: &Generated) -> Result<(), (PathBuf, io::Error)> {
    let cert_path = CertificateAuthority::cert_file(dir);
    let tmp = write_temp(dir, CERT_FILE, generated.cert_pem.as_bytes(), 0o644)?;
    fs::rename(&tmp, &cert_path).map_err(|err| {
        let _ = fs::remove_file(&tmp);
        (cert_path, err)
    })
}

/// Links `tmp` to `dest` unless `dest` exists; `Ok(false)` if it does.
fn claim(tmp: &Path, dest: &Path) -> io::Result<bool> {
    match fs::hard_link(tmp, dest) {
        Ok(()) => Ok(true),
        Err(err) if err.kind() == io::ErrorKind::AlreadyExists => Ok(false),
        // A file system without hard links: check, then rename (a narrower race, not none).
        Err(_) if dest.exists() => Ok(false),
        Err(_) => fs::rename(tmp, dest).map(|()| true),
    }
}

/// Writes `contents` to a new hidden file in `dir` created with `mode` (on Unix), flushed to
/// disk. On failure the partial file is removed and the error names the file.
fn write_temp(
    dir: &Path,
    name: &str,
    contents: &[u8],
    mode: u32,
) -> Result<PathBuf, (PathBuf, io::Error)> {
    let suffix: u64 = rand::random();
    let path = dir.join(format!(".{name}.{}.{suffix:016x}.tmp", std::process::id()));
    let mut options = OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(mode);
    }
    #[cfg(not(unix))]
    let _ = mode;
    let result = options.open(&path).and_then(|mut file| {
        file.write_all(contents)?;
        file.sync_all()
    });
    match result {
        Ok(()) => Ok(path),
        Err(err) => {
            let _ = fs::remove_file(&path);
            Err((path, err))
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::UNIX_EPOCH;

    use super::*;
    use holdoff_testkit::TempDir;

    mod load_or_create {
        use super::*;

        #[test]
        fn creates_once_and_reloads_the_same_ca() {
            let dir = TempDir::new("ca-reload");
            let created = CertificateAuthority::load_or_create(dir.path()).unwrap();
            let again = CertificateAuthority::load_or_create(dir.path()).unwrap();
            let loaded = CertificateAuthority::load(dir.path()).unwrap();
            assert_eq!(created.cert_pem(), again.cert_pem());
            assert_eq!(created.cert_der(), loaded.cert_der());
            assert_eq!(
                loaded.cert_path(),
                Some(CertificateAuthority::cert_file(dir.path()).as_path())
            );
        }

        #[cfg(unix)]
        #[test]
        fn keeps_the_key_0600_in_a_0700_directory() {
            use std::os::unix::fs::PermissionsExt;
            let dir = TempDir::new("ca-modes");
            let ca_dir = dir.path().join("nested").join("holdoff");
            CertificateAuthority::load_or_create(&ca_dir).unwrap();
            let mode = |path: &Path| fs::metadata(path).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode(&CertificateAuthority::key_file(&ca_dir)), 0o600);
            assert_eq!(mode(&ca_dir), 0o700);
            let leftovers: Vec<_> = fs::read_dir(&ca_dir)
                .unwrap()
                .map(|entry| entry.unwrap().file_name())
                .filter(|name| name.to_string_lossy().ends_with(".tmp"))
                .collect();
            assert!(leftovers.is_empty(), "{leftovers:?}");
        }

        #[test]
        fn writes_a_certificate_and_a_key_in_pem() {
            let dir = TempDir::new("ca-pem");
            let ca = CertificateAuthority::load_or_create(dir.path()).unwrap();
            let cert = fs::read_to_string(CertificateAuthority::cert_file(dir.path())).unwrap();
            let key = fs::read_to_string(CertificateAuthority::key_file(dir.path())).unwrap();
            assert_eq!(cert, ca.cert_pem());
            assert!(cert.starts_with("-----BEGIN CERTIFICATE-----"), "{cert}");
            assert!(!cert.contains("PRIVATE KEY"));
            assert!(key.starts_with("-----BEGIN PRIVATE KEY-----"));
        }

        #[test]
        fn shares_one_pair_when_created_concurrently() {
            let dir = TempDir::new("ca-race");
            let ca_dir = dir.path().to_path_buf();
            let threads: Vec<_> = (0..4)
                .map(|_| {
                    let ca_dir = ca_dir.clone();
                    std::thread::spawn(move || CertificateAuthority::load_or_create(&ca_dir))
                })
                .collect();
            let pems: Vec<String> = threads
                .into_iter()
                .map(|t| t.join().unwrap().unwrap().cert_pem().to_owned())
                .collect();
            assert!(pems.windows(2).all(|w| w[0] == w[1]));
            CertificateAuthority::load(&ca_dir).unwrap();
        }

        #[test]
        fn refuses_a_certificate_without_its_key() {
            let dir = TempDir::new("ca-incomplete");
            CertificateAuthority::load_or_create(dir.path()).unwrap();
            fs::remove_file(CertificateAuthority::key_file(dir.path())).unwrap();
            let err = CertificateAuthority::load_or_create(dir.path()).unwrap_err();
            assert_eq!(err.kind(), TlsErrorKind::Incomplete);
            assert!(err.to_string().contains("ca-key.pem"), "{err}");
        }
    }

    mod throwaway {
        use super::*;

        #[test]
        fn writes_the_certificate_alone_and_signs_with_the_key_in_memory() {
            let dir = TempDir::new("ca-throwaway");
            let ca = CertificateAuthority::throwaway(dir.path()).unwrap();
            let names: Vec<_> = fs::read_dir(dir.path())
                .unwrap()
                .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
                .collect();
            assert_eq!(names, [CERT_FILE]);
            let cert = CertificateAuthority::cert_file(dir.path());
            assert_eq!(ca.cert_path(), Some(cert.as_path()));
            assert_eq!(fs::read_to_string(&cert).unwrap(), ca.cert_pem());
            check_can_issue(&ca, SystemClock.wall_now()).unwrap();
        }
    }

    mod load {
        use super::*;

        #[test]
        fn reports_a_missing_directory_as_not_found() {
            let dir = TempDir::new("ca-missing");
            let err = CertificateAuthority::load(&dir.path().join("absent")).unwrap_err();
            assert_eq!(err.kind(), TlsErrorKind::NotFound);
            assert!(err.to_string().starts_with("find a CA in "), "{err}");
        }

        #[test]
        fn names_the_file_that_is_not_pem() {
            let dir = TempDir::new("ca-bad-pem");
            CertificateAuthority::load_or_create(dir.path()).unwrap();
            let cert = CertificateAuthority::cert_file(dir.path());
            fs::write(&cert, "not a certificate\n").unwrap();
            let err = CertificateAuthority::load(dir.path()).unwrap_err();
            assert_eq!(err.kind(), TlsErrorKind::Malformed);
            assert_eq!(
                err.to_string(),
                format!("read a PEM certificate from {}", cert.display())
            );
        }

        #[test]
        fn refuses_a_key_that_is_not_the_certificates() {
            let dir = TempDir::new("ca-mismatch");
            let other = TempDir::new("ca-mismatch-other");
            CertificateAuthority::load_or_create(dir.path()).unwrap();
            CertificateAuthority::load_or_create(other.path()).unwrap();
            fs::copy(
                CertificateAuthority::key_file(other.path()),
                CertificateAuthority::key_file(dir.path()),
            )
            .unwrap();
            let err = CertificateAuthority::load(dir.path()).unwrap_err();
            assert_eq!(err.kind(), TlsErrorKind::KeyMismatch);
        }
    }

    mod from_pem {
        use super::*;

        #[test]
        fn refuses_a_certificate_that_is_not_a_ca() {
            let leaf = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).unwrap();
            let err = CertificateAuthority::from_pem(
                &leaf.cert.pem(),
                &leaf.signing_key.serialize_pem(),
                Path::new("ca-cert.pem"),
                Path::new("ca-key.pem"),
                SystemClock.wall_now(),
            )
            .unwrap_err();
            assert_eq!(err.kind(), TlsErrorKind::Malformed);
            assert_eq!(err.to_string(), "use as a CA the certificate ca-cert.pem");
        }

        #[test]
        fn says_until_when_an_expired_certificate_was_valid() {
            let long_ago = UNIX_EPOCH + Duration::from_secs(86_400 * 365);
            let generated = Generated::new(long_ago).unwrap();
            let err = CertificateAuthority::from_pem(
                &generated.cert_pem,
                &generated.key_pem,
                Path::new("ca-cert.pem"),
                Path::new("ca-key.pem"),
                SystemClock.wall_now(),
            )
            .unwrap_err();
            assert_eq!(err.kind(), TlsErrorKind::Expired);
            let cause = std::error::Error::source(&err).unwrap().to_string();
            assert!(cause.starts_with("it was valid until "), "{cause}");
            assert!(cause.contains("1980"), "{cause}");
        }
    }

    mod remove {
        use super::*;

        #[test]
        fn deletes_both_files_and_then_finds_nothing() {
            let dir = TempDir::new("ca-remove");
            CertificateAuthority::load_or_create(dir.path()).unwrap();
            let removed = CertificateAuthority::remove(dir.path()).unwrap();
            assert_eq!(removed.len(), 2);
            assert!(CertificateAuthority::remove(dir.path()).unwrap().is_empty());
            let err = CertificateAuthority::load(dir.path()).unwrap_err();
            assert_eq!(err.kind(), TlsErrorKind::NotFound);
        }
    }
}
