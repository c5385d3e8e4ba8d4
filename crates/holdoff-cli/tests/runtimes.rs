//! `holdoff run` reaches runtimes that each read the proxy and the CA their own way (issue 16,
//! part 4): Java's HttpClient through JAVA_TOOL_OPTIONS alone, Go's net/http (which never
//! proxies loopback: it calls the upstream by this machine's hostname), Ruby's Net::HTTP (which
//! never proxies a host that resolves to loopback: its upstream is a mock of the proxy's),
//! aiohttp with `trust_env=True`, httpx and anthropic-python. Each client is its real runtime,
//! unchanged but for being pointed at the upstream: it calls an HTTPS upstream on loopback
//! through `holdoff run -f 0` (no faults injected), which answers its first request `429` with
//! `Retry-After: 1`; the client retries after the hint, and the judge passes it.
//!
//! The runtimes come from scripts/test, which installs them (Debian's golang-go and ruby, and
//! aiohttp, httpx and anthropic into the venv target/py-clients).

mod support;

#[path = "runtimes/upstream.rs"]
mod upstream;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use serde_json::Value;
use support::TempDir;
use upstream::{MODEL, Upstream};

/// One `holdoff run` of a client: what it printed and how it exited, and the JSON report.
struct Run {
    output: Output,
    report: Value,
}

impl Run {
    /// Runs `client…` under `holdoff run -f 0`, everything watched, trusting the upstream's
    /// CA. The client gets nothing but what `holdoff run` sets.
    fn new(name: &str, upstream: &Upstream, client: &[&str]) -> Run {
        let ca = upstream.ca().display().to_string();
        Run::with(name, &["--upstream-ca", &ca], client)
    }

    /// Runs `client…` under `holdoff run -f 0 ARGS…`, everything watched.
    fn with(name: &str, args: &[&str], client: &[&str]) -> Run {
        let dir = TempDir::new(name);
        let report = dir.path().join("report.json");
        let output = Command::new(assert_cmd::cargo::cargo_bin("holdoff"))
            .args(["run", "--log-level", "warn", "-f", "0"])
            .args(args)
            .arg("--report-json")
            .arg(&report)
            .arg("--")
            .args(client)
            // Whatever the machine has set for Java must not be what makes it work.
            .env_remove("JAVA_TOOL_OPTIONS")
            .current_dir(dir.path())
            .stdin(Stdio::null())
            .output()
            .expect("run holdoff");
        let text = std::fs::read_to_string(&report).unwrap_or_else(|err| {
            panic!(
                "read the JSON report {}: {err}\n{}\nstdout:\n{}\nstderr:\n{}",
                report.display(),
                output.status,
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr)
            )
        });
        let report = serde_json::from_str(&text)
            .unwrap_or_else(|err| panic!("parse the JSON report: {err}\n{text}"));
        Run { output, report }
    }

    /// Everything about the run, for assertion messages.
    fn show(&self) -> String {
        format!(
            "{}\nstdout:\n{}\nstderr:\n{}\nreport:\n{:#}",
            self.output.status,
            String::from_utf8_lossy(&self.output.stdout),
            String::from_utf8_lossy(&self.output.stderr),
            self.report
        )
    }

    /// The client went through the proxy (the judge saw the throttle and a compliant retry),
    /// trusted the throwaway CA (its retry got the upstream's answer, which it printed), and
    /// the run passed.
    fn assert_compliant(&self, upstream: &Upstream) {
        self.assert_passed();
        assert_eq!(upstream.requests(), 2, "{}", self.show());
    }

    /// The run passed with a compliant retry, and the client printed the answer to it.
    fn assert_passed(&self) {
        assert_eq!(self.output.status.code(), Some(0), "{}", self.show());
        assert_eq!(self.report["verdict"], "pass", "{}", self.show());
        assert_eq!(self.report["retries"]["premature"], 0, "{}", self.show());
        assert!(
            self.report["retries"]["compliant"].as_u64() >= Some(1),
            "{}",
            self.show()
        );
        assert!(
            String::from_utf8_lossy(&self.output.stdout).contains(MODEL),
            "{}",
            self.show()
        );
    }
}

/// The workspace's `target/`, where scripts/test installs the clients and the tests build them.
fn target() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target")
}

/// The venv's python, once `modules` import in it.
///
/// # Panics
///
/// If the venv or a module is missing.
fn python(modules: &str) -> String {
    let python = target().join("py-clients/bin/python");
    let imports = Command::new(&python)
        .args(["-c", &format!("import {modules}")])
        .output()
        .is_ok_and(|output| output.status.success());
    assert!(
        imports,
        "{} cannot import {modules}: run ./scripts/test, which installs them (python3 -m venv \
         target/py-clients, then pip install aiohttp httpx anthropic …)",
        python.display()
    );
    python.display().to_string()
}

/// `source` written to a file called `file` in a temporary directory, for `python FILE` or
/// `ruby FILE`.
fn script(dir: &TempDir, file: &str, source: &str) -> String {
    dir.write(file, source)
}

/// What `build` makes of `source` (saved as `file`) in a staging directory: built once into
/// `target/KIND/DIGEST/` (the source's digest, so an edit rebuilds and concurrent tests, each
/// in its own nextest process, never see a half-written one). Returns that directory.
///
/// # Panics
///
/// If the build fails or its tool is missing.
fn built(kind: &str, file: &str, source: &str, build: impl Fn(&Path, &Path) -> Command) -> PathBuf {
    let root = target().join(kind);
    let out = root.join(format!("{:016x}", fnv1a(source.as_bytes())));
    if !out.is_dir() {
        let staging = root.join(format!("staging-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&staging);
        std::fs::create_dir_all(staging.join("out")).expect("create the staging directory");
        let path = staging.join(file);
        std::fs::write(&path, source).expect("write the source");
        let output = build(&path, &staging.join("out"))
            .output()
            .unwrap_or_else(|err| {
                panic!("building {file}: {err}: run ./scripts/test, which installs the tool")
            });
        assert!(
            output.status.success(),
            "building {file} failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        // Another test may have won the race: what it built is the same.
        if std::fs::rename(staging.join("out"), &out).is_err() {
            assert!(out.is_dir());
        }
        let _ = std::fs::remove_dir_all(&staging);
    }
    out
}

/// FNV-1a, 64 bits: a digest that is the same in every build.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, &byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// A name for this machine that its hosts file maps to loopback, other than `localhost`: Go
/// proxies a request to it (and never one to `localhost` or `127.0.0.1`). None if there is
/// none.
fn loopback_hostname() -> Option<String> {
    let hostname = std::fs::read_to_string("/proc/sys/kernel/hostname").ok()?;
    let hostname = hostname.trim();
    let hosts = std::fs::read_to_string("/etc/hosts").ok()?;
    let mapped = hosts.lines().any(|line| {
        let mut fields = line.split('#').next().unwrap_or("").split_whitespace();
        fields.next().is_some_and(|addr| addr.starts_with("127."))
            && fields.any(|name| name == hostname)
    });
    (mapped && !hostname.is_empty() && hostname != "localhost").then(|| hostname.to_owned())
}

/// java.net.http.HttpClient.newHttpClient(), with no proxy, SSLContext or flag of its own:
/// JAVA_TOOL_OPTIONS gives it the proxy (through ProxySelector.getDefault(), with loopback not
/// exempt) and the trust store with the throwaway CA.
#[test]
fn java_http_client_reaches_an_https_upstream_with_no_flags_of_its_own() {
    let classes = built(
        "java-clients",
        "HoldoffJavaClient.java",
        include_str!("runtimes/HoldoffJavaClient.java"),
        |source, out| {
            let mut javac = Command::new("javac");
            javac.arg("-d").arg(out).arg(source);
            javac
        },
    );
    let upstream = Upstream::start(&[]);
    let classes = classes.display().to_string();
    let url = upstream.url("127.0.0.1");
    let run = Run::new(
        "runtimes-java",
        &upstream,
        &["java", "-cp", &classes, "HoldoffJavaClient", &url],
    );
    run.assert_compliant(&upstream);
}

/// Go's http.Get: HTTPS_PROXY and SSL_CERT_FILE suffice, for a host that is not loopback by
/// name or address.
#[test]
fn go_net_http_reaches_an_https_upstream_by_a_hostname_that_resolves_to_loopback() {
    let Some(host) = loopback_hostname() else {
        eprintln!(
            "skipped: /etc/hosts maps this machine's hostname to no loopback address, and Go \
             never proxies localhost or 127.0.0.1"
        );
        return;
    };
    let bin = built(
        "go-clients",
        "client.go",
        include_str!("runtimes/client.go"),
        |source, out| {
            let mut go = Command::new("go");
            go.arg("build")
                .arg("-o")
                .arg(out.join("client"))
                .arg(source)
                // No module, no network: the standard library is all it uses.
                .env("GO111MODULE", "off")
                .env("GOFLAGS", "");
            go
        },
    );
    let upstream = Upstream::start(&[&host]);
    let client = bin.join("client").display().to_string();
    let url = upstream.url(&host);
    let run = Run::new("runtimes-go", &upstream, &[&client, &url]);
    run.assert_compliant(&upstream);
}

/// Where the Ruby test's mocked upstream is: a name under `.invalid`, which never resolves
/// (RFC 6761), so the proxy never connects out.
const RUBY_HOST: &str = "ruby.holdoff.invalid";

/// The Ruby test's upstream, mocked by the proxy: `429` with `Retry-After: 1`, then the
/// model's name.
fn ruby_mocks() -> String {
    format!(
        r#"{{"mocks": {{"mocks": [
  {{"request": {{"url": "https://{RUBY_HOST}/*", "nth": 1}},
   "response": {{"statusCode": 429, "headers": [{{"name": "Retry-After", "value": "1"}}],
                "body": "slow down"}}}},
  {{"request": {{"url": "https://{RUBY_HOST}/*"}},
   "response": {{"statusCode": 200, "body": "{MODEL}"}}}}
]}}}}"#
    )
}

/// Ruby's Net::HTTP.get_response: https_proxy and SSL_CERT_FILE suffice. Ruby proxies no
/// host that resolves to a loopback address, by name or address (not even `[::ffff:127.0.0.1]`,
/// whose CONNECT line Ruby 3.1 writes unbracketed), so no loopback upstream can be reached
/// through a proxy: the upstream is the proxy's mock for a name that does not resolve (Ruby
/// then proxies it), over TLS intercepted with the throwaway CA.
#[test]
fn ruby_net_http_reaches_an_https_host_through_the_proxy() {
    let dir = TempDir::new("runtimes-ruby-client");
    let client = script(&dir, "client.rb", include_str!("runtimes/client.rb"));
    let config = dir.write("holdoff.json", &ruby_mocks());
    let url = format!("https://{RUBY_HOST}/v1/models");
    let run = Run::with("runtimes-ruby", &["-c", &config], &["ruby", &client, &url]);
    run.assert_passed();
    assert_eq!(run.report["retries"]["compliant"], 1, "{}", run.show());
}

/// aiohttp's ClientSession(trust_env=True): HTTPS_PROXY and SSL_CERT_FILE suffice.
#[test]
fn aiohttp_with_trust_env_reaches_an_https_upstream() {
    let python = python("aiohttp");
    let dir = TempDir::new("runtimes-aiohttp-client");
    let client = script(
        &dir,
        "client.py",
        include_str!("runtimes/aiohttp_client.py"),
    );
    let upstream = Upstream::start(&[]);
    let url = upstream.url("127.0.0.1");
    let run = Run::new("runtimes-aiohttp", &upstream, &[&python, &client, &url]);
    run.assert_compliant(&upstream);
}

/// httpx.get: HTTPS_PROXY and SSL_CERT_FILE suffice (trust_env is its default).
#[test]
fn httpx_reaches_an_https_upstream() {
    let python = python("httpx");
    let dir = TempDir::new("runtimes-httpx-client");
    let client = script(&dir, "client.py", include_str!("runtimes/httpx_client.py"));
    let upstream = Upstream::start(&[]);
    let url = upstream.url("127.0.0.1");
    let run = Run::new("runtimes-httpx", &upstream, &[&python, &client, &url]);
    run.assert_compliant(&upstream);
}

/// anthropic-python's models.list(), its own retries honouring the upstream's Retry-After.
#[test]
fn anthropic_python_retries_through_the_proxy_after_the_hint() {
    let python = python("anthropic");
    let dir = TempDir::new("runtimes-anthropic-client");
    let client = script(
        &dir,
        "client.py",
        include_str!("runtimes/anthropic_client.py"),
    );
    let upstream = Upstream::start(&[]);
    let url = upstream.base_url("127.0.0.1");
    let run = Run::new("runtimes-anthropic", &upstream, &[&python, &client, &url]);
    run.assert_compliant(&upstream);
}

/// curl's `--retry`, which waits as long as the upstream's Retry-After says: HTTPS_PROXY and
/// CURL_CA_BUNDLE suffice.
#[test]
fn curl_retry_honours_the_hint_over_https() {
    let upstream = Upstream::start(&[]);
    let url = upstream.url("127.0.0.1");
    let run = Run::new(
        "runtimes-curl",
        &upstream,
        &["curl", "-sS", "--retry", "2", &url],
    );
    run.assert_compliant(&upstream);
}
