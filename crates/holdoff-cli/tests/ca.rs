//! `holdoff ca`, run as a built binary against a CA directory of its own: exit codes, what it
//! prints, the files it leaves.

use std::fs;
use std::path::Path;

use assert_cmd::Command;

mod support;

use support::TempDir as TestDir;

/// Runs `holdoff ca <args> --ca-dir <dir>`.
fn ca(dir: &Path, args: &[&str]) -> assert_cmd::assert::Assert {
    let mut cmd = Command::cargo_bin("holdoff").expect("the holdoff binary is built");
    cmd.arg("ca").args(args).arg("--ca-dir").arg(dir).assert()
}

fn stdout(assert: &assert_cmd::assert::Assert) -> String {
    String::from_utf8(assert.get_output().stdout.clone()).expect("utf-8")
}

fn stderr(assert: &assert_cmd::assert::Assert) -> String {
    String::from_utf8(assert.get_output().stderr.clone()).expect("utf-8")
}

mod path {
    use super::*;

    #[test]
    fn exits_1_with_a_hint_before_ensure() {
        let tmp = TestDir::new("path-missing");
        let dir = tmp.join("ca");
        let assert = ca(&dir, &["path"]).code(1).stdout("");
        let stderr = stderr(&assert);
        assert!(
            stderr.contains(&format!("there is no CA in {} yet", dir.display())),
            "{stderr}"
        );
        assert!(stderr.contains("holdoff ca ensure --ca-dir "), "{stderr}");
        assert!(!dir.exists(), "path must not create anything");
    }

    #[test]
    fn prints_only_the_certificate_path_after_ensure() {
        let tmp = TestDir::new("path-ok");
        let dir = tmp.join("ca");
        ca(&dir, &["ensure"]).code(0);
        let assert = ca(&dir, &["path"]).code(0).stderr("");
        assert_eq!(
            stdout(&assert),
            format!("{}\n", dir.join("ca-cert.pem").display())
        );
    }

    #[test]
    fn help_shows_how_to_trust_the_ca() {
        let tmp = TestDir::new("path-help");
        let help = stdout(&ca(tmp.path(), &["path", "--help"]).code(0));
        for expected in [
            "/usr/local/share/ca-certificates/holdoff.crt && sudo update-ca-certificates",
            "/etc/pki/ca-trust/source/anchors/holdoff.pem && sudo update-ca-trust",
            "sudo security add-trusted-cert -d -r trustRoot -k /Library/Keychains/System.keychain",
            "SSL_CERT_FILE=",
            "REQUESTS_CA_BUNDLE=",
            "NODE_EXTRA_CA_CERTS=",
            "CURL_CA_BUNDLE=",
            "curl --cacert",
        ] {
            assert!(help.contains(expected), "missing {expected:?} in:\n{help}");
        }
    }
}

mod ensure {
    use super::*;

    #[test]
    fn creates_the_ca_and_prints_its_path_and_the_trust_commands() {
        let tmp = TestDir::new("ensure");
        let dir = tmp.join("ca");
        let assert = ca(&dir, &["ensure"]).code(0).stderr("");
        let out = stdout(&assert);
        let cert = dir.join("ca-cert.pem");
        assert!(cert.is_file());
        assert!(dir.join("ca-key.pem").is_file());
        assert!(
            out.starts_with(&format!("Created a new CA in {}.\n", dir.display())),
            "{out}"
        );
        assert!(
            out.contains(&format!("Certificate: {}\n", cert.display())),
            "{out}"
        );
        let cert = cert.display().to_string();
        for expected in [
            format!(
                "sudo cp {cert} /usr/local/share/ca-certificates/holdoff.crt && sudo update-ca-certificates"
            ),
            format!(
                "sudo cp {cert} /etc/pki/ca-trust/source/anchors/holdoff.pem && sudo update-ca-trust"
            ),
            format!(
                "sudo security add-trusted-cert -d -r trustRoot -k /Library/Keychains/System.keychain {cert}"
            ),
            format!("SSL_CERT_FILE={cert} REQUESTS_CA_BUNDLE={cert}"),
            format!("NODE_EXTRA_CA_CERTS={cert}"),
            format!("CURL_CA_BUNDLE={cert}"),
            format!("curl --cacert {cert}"),
        ] {
            assert!(out.contains(&expected), "missing {expected:?} in:\n{out}");
        }
        assert!(!out.contains("PRIVATE KEY"));
    }

    #[test]
    fn keeps_an_existing_ca() {
        let tmp = TestDir::new("ensure-twice");
        let dir = tmp.join("ca");
        ca(&dir, &["ensure"]).code(0);
        let before = fs::read(dir.join("ca-cert.pem")).unwrap();
        let out = stdout(&ca(&dir, &["ensure"]).code(0));
        assert!(out.starts_with("The CA in "), "{out}");
        assert_eq!(fs::read(dir.join("ca-cert.pem")).unwrap(), before);
    }

    #[cfg(unix)]
    #[test]
    fn writes_the_key_readable_by_its_owner_only() {
        use std::os::unix::fs::PermissionsExt;
        let tmp = TestDir::new("ensure-mode");
        let dir = tmp.join("ca");
        ca(&dir, &["ensure"]).code(0);
        let mode = |p: &Path| fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&dir.join("ca-key.pem")), 0o600);
        assert_eq!(mode(&dir), 0o700);
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn uses_xdg_data_home_by_default() {
        let tmp = TestDir::new("ensure-xdg");
        Command::cargo_bin("holdoff")
            .unwrap()
            .args(["ca", "ensure"])
            .env("XDG_DATA_HOME", tmp.path())
            .assert()
            .code(0);
        assert!(tmp.path().join("holdoff").join("ca-cert.pem").is_file());
    }

    #[test]
    fn reports_a_broken_ca_and_how_to_start_over() {
        let tmp = TestDir::new("ensure-broken");
        let dir = tmp.join("ca");
        ca(&dir, &["ensure"]).code(0);
        fs::remove_file(dir.join("ca-key.pem")).unwrap();
        let assert = ca(&dir, &["ensure"]).code(1).stdout("");
        let stderr = stderr(&assert);
        assert!(
            stderr.starts_with("holdoff ca: failed to find the CA key"),
            "{stderr}"
        );
        assert!(stderr.contains("`holdoff ca remove --ca-dir "), "{stderr}");
        assert!(
            stderr.contains("`, then `holdoff ca ensure --ca-dir "),
            "{stderr}"
        );
    }
}

mod export {
    use super::*;

    #[test]
    fn prints_the_certificate_and_never_the_key() {
        let tmp = TestDir::new("export");
        let dir = tmp.join("ca");
        ca(&dir, &["ensure"]).code(0);
        let out = stdout(&ca(&dir, &["export"]).code(0).stderr(""));
        assert!(out.starts_with("-----BEGIN CERTIFICATE-----\n"), "{out}");
        assert!(
            out.trim_end().ends_with("-----END CERTIFICATE-----"),
            "{out}"
        );
        assert!(!out.contains("PRIVATE KEY"), "{out}");
        assert_eq!(out, fs::read_to_string(dir.join("ca-cert.pem")).unwrap());
    }

    #[test]
    fn writes_the_certificate_to_a_file() {
        let tmp = TestDir::new("export-out");
        let dir = tmp.join("ca");
        ca(&dir, &["ensure"]).code(0);
        let file = tmp.path().join("exported.pem");
        let out = stdout(&ca(&dir, &["export", "--out", file.to_str().unwrap()]).code(0));
        assert!(out.contains("Wrote the CA certificate to "), "{out}");
        let written = fs::read_to_string(&file).unwrap();
        assert!(written.starts_with("-----BEGIN CERTIFICATE-----"));
        assert!(!written.contains("PRIVATE KEY"));
    }

    #[test]
    fn exits_1_with_a_hint_when_there_is_no_ca() {
        let tmp = TestDir::new("export-missing");
        let assert = ca(&tmp.join("ca"), &["export"]).code(1).stdout("");
        assert!(stderr(&assert).contains("holdoff ca ensure"));
    }
}

mod remove {
    use super::*;

    #[test]
    fn deletes_the_certificate_and_the_key() {
        let tmp = TestDir::new("remove");
        let dir = tmp.join("ca");
        ca(&dir, &["ensure"]).code(0);
        let out = stdout(&ca(&dir, &["remove"]).code(0).stderr(""));
        assert!(
            out.contains(&format!("Removed {}", dir.join("ca-key.pem").display())),
            "{out}"
        );
        assert!(
            out.contains(&format!("Removed {}", dir.join("ca-cert.pem").display())),
            "{out}"
        );
        assert!(!dir.join("ca-key.pem").exists());
        assert!(!dir.join("ca-cert.pem").exists());
        ca(&dir, &["path"]).code(1);
    }

    #[test]
    fn says_so_when_there_is_nothing_to_remove() {
        let tmp = TestDir::new("remove-nothing");
        let out = stdout(&ca(&tmp.join("ca"), &["remove"]).code(0));
        assert!(out.contains("nothing to remove"), "{out}");
    }
}

mod ca_dir {
    use super::*;

    #[test]
    fn is_accepted_before_the_action_too() {
        let tmp = TestDir::new("ca-dir-first");
        let dir = tmp.join("ca");
        Command::cargo_bin("holdoff")
            .unwrap()
            .args(["ca", "--ca-dir"])
            .arg(&dir)
            .arg("ensure")
            .assert()
            .code(0);
        assert!(dir.join("ca-cert.pem").is_file());
    }
}
