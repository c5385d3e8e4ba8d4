//! `holdoff ca trust` and `untrust` (and `holdoff proxy --install-cert`): the CA's certificate
//! into the system's trust store and out of it.
//!
//! On Debian and Ubuntu it is copied to /usr/local/share/ca-certificates and
//! `update-ca-certificates` rebuilds the bundle; on Fedora and RHEL it goes to
//! /etc/pki/ca-trust/source/anchors and `update-ca-trust` does. Both need root. On macOS and
//! Windows the command that would do it is printed, not run: each asks for confirmation or an
//! administrator in its own way. HOLDOFF_TRUST_DIR and HOLDOFF_TRUST_UPDATE (a shell command)
//! stand in for the directory and the command, so that a test can install into a directory of
//! its own.

use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::process::Command;

use super::shell_quote;
use crate::failure::Failure;

/// Overrides the directory the certificate is copied to.
const DIR_VAR: &str = "HOLDOFF_TRUST_DIR";
/// Overrides the command that rebuilds the trust store (run with `sh -c`).
const UPDATE_VAR: &str = "HOLDOFF_TRUST_UPDATE";

/// The CA's common name, as the stores list it.
const CA_NAME: &str = "holdoff local CA";

/// Where the system keeps the CAs it trusts.
enum Store {
    /// Copy the certificate to `file`, then run the command.
    Anchors {
        file: PathBuf,
        trust: Update,
        untrust: Update,
    },
    /// Print the commands.
    Manual { trust: String, untrust: String },
}

/// The command that rebuilds a trust store.
#[derive(Clone)]
enum Update {
    Program(&'static str, &'static [&'static str]),
    Shell(String),
}

impl Update {
    fn shown(&self) -> String {
        match self {
            Update::Program(program, args) => std::iter::once(*program)
                .chain(args.iter().copied())
                .collect::<Vec<_>>()
                .join(" "),
            Update::Shell(command) => command.clone(),
        }
    }

    fn command(&self) -> Command {
        match self {
            Update::Program(program, args) => {
                let mut command = Command::new(program);
                command.args(*args);
                command
            }
            Update::Shell(line) => {
                let mut command = Command::new("sh");
                command.arg("-c").arg(line);
                command
            }
        }
    }
}

/// The store of this system; `cert` is the certificate's path, for the printed commands.
fn store(cert: &Path) -> Result<Store, String> {
    let debian = (
        "/usr/local/share/ca-certificates",
        "holdoff.crt",
        Update::Program("update-ca-certificates", &[]),
        Update::Program("update-ca-certificates", &["--fresh"]),
    );
    let fedora = (
        "/etc/pki/ca-trust/source/anchors",
        "holdoff.pem",
        Update::Program("update-ca-trust", &[]),
        Update::Program("update-ca-trust", &[]),
    );
    if let Some(dir) = std::env::var_os(DIR_VAR) {
        let (trust, untrust) = match std::env::var(UPDATE_VAR) {
            Ok(command) => (Update::Shell(command.clone()), Update::Shell(command)),
            Err(_) => (debian.2, debian.3),
        };
        return Ok(Store::Anchors {
            file: PathBuf::from(dir).join(debian.1),
            trust,
            untrust,
        });
    }
    let cert = shell_quote(&cert.to_string_lossy()).into_owned();
    match std::env::consts::OS {
        "macos" => Ok(Store::Manual {
            trust: format!(
                "sudo security add-trusted-cert -d -r trustRoot -k \
                 /Library/Keychains/System.keychain {cert}"
            ),
            untrust: format!(
                "sudo security delete-certificate -c '{CA_NAME}' /Library/Keychains/System.keychain"
            ),
        }),
        "windows" => Ok(Store::Manual {
            trust: format!("certutil -addstore -f Root {cert}   (as administrator)"),
            untrust: format!("certutil -delstore Root \"{CA_NAME}\"   (as administrator)"),
        }),
        _ => {
            for (dir, name, trust, untrust) in [debian, fedora] {
                if Path::new(dir).is_dir() {
                    return Ok(Store::Anchors {
                        file: Path::new(dir).join(name),
                        trust,
                        untrust,
                    });
                }
            }
            Err(format!(
                "found neither /usr/local/share/ca-certificates (Debian, Ubuntu) nor \
                 /etc/pki/ca-trust/source/anchors (Fedora, RHEL): add {cert} to this system's \
                 trust store as its documentation says"
            ))
        }
    }
}

/// Installs the certificate (`pem`, kept at `cert`) into the system's trust store; `again`
/// is the command line to repeat as root (with `--ca-dir`, as sudo changes HOME).
pub(crate) fn trust(
    pem: &str,
    cert: &Path,
    again: &str,
    out: &mut dyn Write,
) -> Result<(), Failure> {
    match store(cert).map_err(fail)? {
        Store::Manual { trust, .. } => {
            writeln!(out, "To trust holdoff's CA system-wide, run:\n  {trust}")?;
            Ok(())
        }
        Store::Anchors { file, trust, .. } => {
            if let Some(dir) = file.parent() {
                // Only a directory given by HOLDOFF_TRUST_DIR may be missing.
                let _ = fs::create_dir_all(dir);
            }
            fs::write(&file, pem).map_err(|err| cannot("write", &file, &err, again))?;
            run(&trust, &file)?;
            writeln!(
                out,
                "Installed the CA certificate as {} and ran `{}`: programs that use the \
                 system's trust store now trust holdoff's CA (Node, Java and Firefox keep their \
                 own). `holdoff ca untrust` undoes it.",
                file.display(),
                trust.shown()
            )?;
            Ok(())
        }
    }
}

/// Removes the certificate from the system's trust store, if it is there.
pub(crate) fn untrust(cert: &Path, again: &str, out: &mut dyn Write) -> Result<(), Failure> {
    match store(cert).map_err(fail)? {
        Store::Manual { untrust, .. } => {
            writeln!(
                out,
                "To stop trusting holdoff's CA system-wide, run:\n  {untrust}"
            )?;
            Ok(())
        }
        Store::Anchors { file, untrust, .. } => {
            match fs::remove_file(&file) {
                Ok(()) => {}
                Err(err) if err.kind() == io::ErrorKind::NotFound => {
                    writeln!(out, "{} is not there: nothing to untrust.", file.display())?;
                    return Ok(());
                }
                Err(err) => return Err(cannot("remove", &file, &err, again)),
            }
            run(&untrust, &file)?;
            writeln!(
                out,
                "Removed {} and ran `{}`: the system no longer trusts holdoff's CA.",
                file.display(),
                untrust.shown()
            )?;
            Ok(())
        }
    }
}

/// Runs the store's update command.
fn run(update: &Update, file: &Path) -> Result<(), Failure> {
    let shown = update.shown();
    match update.command().status() {
        Ok(status) if status.success() => Ok(()),
        Ok(status) => Err(fail(format!(
            "`{shown}` failed ({status}) after {} changed; run it again by hand",
            file.display()
        ))),
        Err(err) => Err(fail(format!(
            "cannot run `{shown}`: {err}; is the ca-certificates package installed?"
        ))),
    }
}

fn cannot(what: &str, file: &Path, err: &io::Error, again: &str) -> Failure {
    let hint = match err.kind() {
        io::ErrorKind::PermissionDenied => format!("; it needs root: sudo {again}"),
        _ => String::new(),
    };
    fail(format!("cannot {what} {}: {err}{hint}", file.display()))
}

fn fail(message: String) -> Failure {
    // If standard error is gone there is nobody to tell; the exit code still says it.
    let _ = writeln!(io::stderr(), "holdoff ca: {message}");
    Failure::Ca
}
