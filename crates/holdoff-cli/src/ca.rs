//! `holdoff ca`: the local certificate authority that `holdoff proxy` signs the certificates of
//! intercepted hosts with — where it is, creating it, exporting it, removing it, and how to
//! trust it. Only `trust` and `untrust` ([`trust`]) change the system's trust store; the
//! others print the commands that would.

mod trust;

use std::borrow::Cow;
use std::error::Error as _;
use std::fmt::Write as _;
use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use holdoff_proxy::tls::{CertificateAuthority, TlsError, TlsErrorKind};

use crate::failure::Failure;

const AFTER_HELP: &str = "\
The CA lives in --ca-dir: ca-cert.pem (the certificate, what clients trust) and ca-key.pem
(the private key, mode 0600, never printed). The default directory is $XDG_DATA_HOME/holdoff
(~/.local/share/holdoff), or the platform's data directory.

Exit status: 0 on success, 1 when there is no CA yet (path, export) or it cannot be read or
written, 2 for a usage error.

Examples:
  holdoff ca ensure
  curl --cacert \"$(holdoff ca path)\" -x http://127.0.0.1:8000 https://api.example.com/
  holdoff ca export --out holdoff-ca.pem
  sudo holdoff ca trust --ca-dir ~/.local/share/holdoff
  holdoff ca remove";

const PATH_AFTER_HELP: &str = "\
To trust the CA (nothing is installed unless you run one of these):

System-wide:
  Debian/Ubuntu: sudo cp \"$(holdoff ca path)\" /usr/local/share/ca-certificates/holdoff.crt && sudo update-ca-certificates
  Fedora:        sudo cp \"$(holdoff ca path)\" /etc/pki/ca-trust/source/anchors/holdoff.pem && sudo update-ca-trust
  macOS:         sudo security add-trusted-cert -d -r trustRoot -k /Library/Keychains/System.keychain \"$(holdoff ca path)\"

One process, through environment variables:
  Python:        SSL_CERT_FILE=\"$(holdoff ca path)\" REQUESTS_CA_BUNDLE=\"$(holdoff ca path)\" python3 app.py
  Node:          NODE_EXTRA_CA_CERTS=\"$(holdoff ca path)\" node app.js
  curl:          CURL_CA_BUNDLE=\"$(holdoff ca path)\" curl ...   or   curl --cacert \"$(holdoff ca path)\" ...

With --ca-dir DIR, run `holdoff ca path --ca-dir DIR` inside \"$(...)\" instead.
`holdoff ca ensure` creates the CA if needed and prints these with the path filled in.";

/// Manage the local CA used to intercept HTTPS.
#[derive(Debug, clap::Args)]
#[command(after_help = AFTER_HELP)]
pub(crate) struct Args {
    /// The directory of the CA. Default: $XDG_DATA_HOME/holdoff (~/.local/share/holdoff).
    #[arg(long, value_name = "DIR", global = true)]
    ca_dir: Option<PathBuf>,

    #[command(subcommand)]
    action: Action,
}

#[derive(Debug, clap::Subcommand)]
enum Action {
    /// Print the path of the CA certificate (exit 1 if there is no CA yet).
    // Unwrapped, so that each command stays on one line to copy.
    #[command(after_help = PATH_AFTER_HELP, term_width = 0)]
    Path,
    /// Create the CA if there is none, then print where it is and how to trust it.
    Ensure,
    /// Write the CA certificate, PEM-encoded, to standard output or a file. Never the key.
    Export {
        /// Write to FILE instead of standard output.
        #[arg(long, value_name = "FILE")]
        out: Option<PathBuf>,
    },
    /// Delete the CA's certificate and key.
    Remove,
    /// Install the CA certificate (created if there is none) into the system's trust store:
    /// Debian/Ubuntu (update-ca-certificates) and Fedora/RHEL (update-ca-trust), as root; on
    /// macOS and Windows, print the command that does it.
    Trust,
    /// Remove the CA certificate from the system's trust store (undoes `trust`).
    Untrust,
}

/// Runs `holdoff ca`: results on `out`, problems on standard error.
pub(crate) fn run(args: Args, out: &mut impl Write) -> Result<(), Failure> {
    let target = match args.ca_dir {
        Some(dir) => Target {
            flag: format!(" --ca-dir {}", shell_quote(&dir.to_string_lossy())),
            dir,
        },
        None => Target {
            dir: CertificateAuthority::default_dir().ok_or_else(|| {
                Failure::Usage(
                    "cannot find a data directory for the CA (is HOME set?); pass --ca-dir DIR"
                        .to_owned(),
                )
            })?,
            flag: String::new(),
        },
    };
    match args.action {
        Action::Path => path(&target, out),
        Action::Ensure => ensure(&target, out),
        Action::Export { out: file } => export(&target, file.as_deref(), out),
        Action::Remove => remove(&target, out),
        Action::Trust => install(&target.dir, out),
        Action::Untrust => trust::untrust(
            &CertificateAuthority::cert_file(&target.dir),
            &again("untrust", &target.dir),
            out,
        ),
    }
}

/// Creates the CA in `dir` if there is none, and installs it into the system's trust store
/// (`holdoff ca trust`, `holdoff proxy --install-cert`).
pub(crate) fn install(dir: &Path, out: &mut dyn Write) -> Result<(), Failure> {
    let target = Target {
        flag: format!(" --ca-dir {}", shell_quote(&dir.to_string_lossy())),
        dir: dir.to_owned(),
    };
    let ca = CertificateAuthority::load_or_create(dir).map_err(|err| report(&err, &target))?;
    let cert = CertificateAuthority::cert_file(dir);
    trust::trust(ca.cert_pem(), &cert, &again("trust", dir), out)
}

/// `holdoff ca ACTION --ca-dir DIR`: the command to repeat as root, where HOME (and so the
/// default directory) is root's.
fn again(action: &str, dir: &Path) -> String {
    format!(
        "holdoff ca {action} --ca-dir {}",
        shell_quote(&dir.to_string_lossy())
    )
}

/// The CA directory a command works on.
struct Target {
    dir: PathBuf,
    /// ` --ca-dir DIR` if the directory was given, to repeat in the commands we suggest.
    flag: String,
}

fn path(target: &Target, out: &mut impl Write) -> Result<(), Failure> {
    // Loaded rather than looked for, so that a path is printed only for a usable CA.
    load(target)?;
    let cert = CertificateAuthority::cert_file(&target.dir);
    writeln!(out, "{}", cert.display())?;
    Ok(())
}

fn ensure(target: &Target, out: &mut impl Write) -> Result<(), Failure> {
    let dir = &target.dir;
    let existed = match CertificateAuthority::load(dir) {
        Ok(_) => true,
        Err(err) if err.kind() == TlsErrorKind::NotFound => false,
        Err(err) => return Err(report(&err, target)),
    };
    if !existed && let Err(err) = CertificateAuthority::load_or_create(dir) {
        return Err(report(&err, target));
    }
    let cert = CertificateAuthority::cert_file(dir);
    let key = CertificateAuthority::key_file(dir);
    if existed {
        writeln!(out, "The CA in {} already exists.", dir.display())?;
    } else {
        writeln!(out, "Created a new CA in {}.", dir.display())?;
    }
    writeln!(out, "Certificate: {}", cert.display())?;
    writeln!(
        out,
        "Key:         {} (readable by you only; never printed)",
        key.display()
    )?;
    writeln!(out)?;
    out.write_all(trust_instructions(&cert).as_bytes())?;
    Ok(())
}

fn export(target: &Target, file: Option<&Path>, out: &mut impl Write) -> Result<(), Failure> {
    let ca = load(target)?;
    let Some(file) = file else {
        out.write_all(ca.cert_pem().as_bytes())?;
        return Ok(());
    };
    if let Err(err) = fs::write(file, ca.cert_pem()) {
        let _ = writeln!(
            io::stderr(),
            "holdoff ca: failed to write the CA certificate to {}: {err}",
            file.display()
        );
        return Err(Failure::Ca);
    }
    writeln!(out, "Wrote the CA certificate to {}.", file.display())?;
    Ok(())
}

fn remove(target: &Target, out: &mut impl Write) -> Result<(), Failure> {
    let removed = match CertificateAuthority::remove(&target.dir) {
        Ok(removed) => removed,
        Err(err) => return Err(report(&err, target)),
    };
    if removed.is_empty() {
        writeln!(out, "No CA in {}: nothing to remove.", target.dir.display())?;
        return Ok(());
    }
    for path in &removed {
        writeln!(out, "Removed {}", path.display())?;
    }
    writeln!(out)?;
    out.write_all(UNTRUST_INSTRUCTIONS.as_bytes())?;
    Ok(())
}

const UNTRUST_INSTRUCTIONS: &str = "\
If you had trusted it system-wide, remove that copy too:
  Debian/Ubuntu: sudo rm /usr/local/share/ca-certificates/holdoff.crt && sudo update-ca-certificates --fresh
  Fedora:        sudo rm /etc/pki/ca-trust/source/anchors/holdoff.pem && sudo update-ca-trust
  macOS:         sudo security delete-certificate -c 'holdoff local CA' /Library/Keychains/System.keychain
";

/// Loads the CA, or reports why not (with what to run when there is none).
fn load(target: &Target) -> Result<CertificateAuthority, Failure> {
    CertificateAuthority::load(&target.dir).map_err(|err| report(&err, target))
}

/// Writes `err` with its causes and what to do about it to standard error.
fn report(err: &TlsError, target: &Target) -> Failure {
    let Target { dir, flag } = target;
    let mut message = String::from("holdoff ca: ");
    if err.kind() == TlsErrorKind::NotFound {
        let _ = write!(
            message,
            "there is no CA in {} yet; create one with `holdoff ca ensure{flag}`",
            dir.display()
        );
    } else {
        let _ = write!(message, "failed to {err}");
        let mut source = err.source();
        while let Some(cause) = source {
            let _ = write!(message, ": {cause}");
            source = cause.source();
        }
        if matches!(
            err.kind(),
            TlsErrorKind::Incomplete
                | TlsErrorKind::Malformed
                | TlsErrorKind::KeyMismatch
                | TlsErrorKind::Expired
        ) {
            let _ = write!(
                message,
                "\nTo start over with a new CA (clients must then trust the new one): \
                 `holdoff ca remove{flag}`, then `holdoff ca ensure{flag}`",
            );
        }
    }
    // If standard error is gone there is nobody to tell; the exit code still says it.
    let _ = writeln!(io::stderr(), "{message}");
    Failure::Ca
}

/// The commands that trust the certificate at `cert`, for people to copy.
fn trust_instructions(cert: &Path) -> String {
    let cert = shell_quote(&cert.to_string_lossy()).into_owned();
    format!(
        "\
Nothing has been installed or trusted. To trust this CA:

System-wide:
  Debian/Ubuntu: sudo cp {cert} /usr/local/share/ca-certificates/holdoff.crt && sudo update-ca-certificates
  Fedora:        sudo cp {cert} /etc/pki/ca-trust/source/anchors/holdoff.pem && sudo update-ca-trust
  macOS:         sudo security add-trusted-cert -d -r trustRoot -k /Library/Keychains/System.keychain {cert}

One process, through environment variables:
  Python:        SSL_CERT_FILE={cert} REQUESTS_CA_BUNDLE={cert} python3 app.py
  Node:          NODE_EXTRA_CA_CERTS={cert} node app.js
  curl:          CURL_CA_BUNDLE={cert} curl ...   or   curl --cacert {cert} ...

SSL_CERT_FILE, REQUESTS_CA_BUNDLE, CURL_CA_BUNDLE and --cacert replace the default roots: those
clients then trust holdoff alone, which breaks hosts that the proxy tunnels rather than
intercepts. For those, give them a bundle of both, e.g.
  cat /etc/ssl/certs/ca-certificates.crt {cert} > holdoff-bundle.pem
NODE_EXTRA_CA_CERTS adds to Node's roots instead.
"
    )
}

/// `s` as one POSIX shell word: unchanged if nothing in it is special, else single-quoted.
fn shell_quote(s: &str) -> Cow<'_, str> {
    let plain = |c: char| c.is_ascii_alphanumeric() || "/._-+:,@%=".contains(c);
    if !s.is_empty() && s.chars().all(plain) {
        Cow::Borrowed(s)
    } else {
        Cow::Owned(format!("'{}'", s.replace('\'', r"'\''")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    mod shell_quote {
        use super::*;

        #[test]
        fn leaves_plain_paths_alone() {
            assert_eq!(
                shell_quote("/home/me/.local/share/holdoff/ca-cert.pem"),
                "/home/me/.local/share/holdoff/ca-cert.pem"
            );
        }

        #[test]
        fn quotes_spaces_and_quotes() {
            assert_eq!(shell_quote("/a b/c"), "'/a b/c'");
            assert_eq!(shell_quote("/it's"), r"'/it'\''s'");
            assert_eq!(shell_quote(""), "''");
        }
    }

    mod trust_instructions {
        use super::*;

        #[test]
        fn fills_in_the_quoted_path_everywhere() {
            let text = trust_instructions(Path::new("/x y/ca-cert.pem"));
            assert_eq!(text.matches("'/x y/ca-cert.pem'").count(), 9, "{text}");
            assert!(!text.contains("{cert}"));
        }
    }
}
