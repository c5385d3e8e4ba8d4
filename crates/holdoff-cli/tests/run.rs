//! `holdoff run -- COMMAND` with real clients — curl, a shell, Python's urllib3, Node's fetch —
//! against upstreams on loopback, plain and HTTPS. The clients find the proxy and trust its
//! throwaway CA through the environment `run` sets, and nothing else.

mod support;

use std::io::{BufRead, BufReader};
use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::Arc;

use bytes::Bytes;
use holdoff_testkit::tls::TestCa;
use holdoff_testkit::{Reply, TestServer};
use http::{Request, Response};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use rustls::ServerConfig;
use support::{TempDir, first_request_throttled, json_report, runtime, show};
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;

/// Watches every plain-HTTP URL on loopback, whatever its port.
const WATCH: &str = "http://127.0.0.1:*/*";

/// `holdoff run ARGS…` in `dir`, with `--log-level warn`, waiting for it to exit.
fn holdoff_run(dir: &Path, args: &[&str]) -> Output {
    holdoff_run_with(dir, args, &[])
}

/// [`holdoff_run`] with `env` set for holdoff (and so for the command).
fn holdoff_run_with(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    Command::new(assert_cmd::cargo::cargo_bin("holdoff"))
        .args(["run", "--log-level", "warn"])
        .args(args)
        .envs(env.iter().copied())
        .current_dir(dir)
        .stdin(Stdio::null())
        .output()
        .expect("run holdoff")
}

#[test]
fn curl_retrying_after_a_429_passes_with_one_compliant_retry() {
    let rt = runtime();
    let upstream = rt.block_on(TestServer::start());
    upstream.set_default("/api", Reply::ok("hello"));
    let dir = TempDir::new("run-curl");
    let config = dir.write("holdoff.json", &first_request_throttled("http", 1));
    let report = dir.path().join("report.json");
    let body = dir.path().join("body");

    let output = holdoff_run(
        dir.path(),
        &[
            "-u",
            WATCH,
            "--seed",
            "7",
            "-c",
            &config,
            "--report-json",
            &report.display().to_string(),
            "--",
            "curl",
            "--retry",
            "3",
            "-sS",
            "-o",
            &body.display().to_string(),
            &upstream.url("/api"),
        ],
    );

    assert_eq!(output.status.code(), Some(0), "{}", show(&output));
    assert_eq!(std::fs::read_to_string(&body).unwrap_or_default(), "hello");
    assert_eq!(
        upstream.requests_to("/api").len(),
        1,
        "the 429 was the proxy's"
    );
    let report = json_report(&report);
    assert_eq!(report["verdict"], "pass", "{report:#}");
    assert_eq!(report["retries"]["compliant"], 1, "{report:#}");
    assert_eq!(report["retries"]["premature"], 0, "{report:#}");
}

#[test]
fn an_immediate_retry_exits_3_and_the_report_says_where_and_how_early() {
    let rt = runtime();
    let upstream = rt.block_on(TestServer::start());
    upstream.set_default("/api", Reply::ok("hello"));
    let dir = TempDir::new("run-premature");
    let config = dir.write("holdoff.json", &first_request_throttled("http", 30));
    let report = dir.path().join("report.json");
    let url = upstream.url("/api");

    // One curl, so one client, fetching the URL twice: it succeeds as far as the shell is
    // concerned, only holdoff sees the problem.
    let output = holdoff_run(
        dir.path(),
        &[
            "-u",
            WATCH,
            "-c",
            &config,
            "--report-json",
            &report.display().to_string(),
            "--",
            "curl",
            "-sS",
            "-o",
            "/dev/null",
            "-o",
            "/dev/null",
            &url,
            &url,
        ],
    );

    assert_eq!(output.status.code(), Some(3), "{}", show(&output));
    assert!(
        upstream.requests().is_empty(),
        "nothing reached the upstream"
    );
    let report = json_report(&report);
    assert_eq!(report["verdict"], "fail", "{report:#}");
    assert_eq!(report["retries"]["premature"], 1, "{report:#}");
    let violation = &report["violations"][0];
    assert_eq!(violation["url"], url.as_str(), "{report:#}");
    assert_eq!(violation["method"], "GET", "{report:#}");
    let early = violation["early_by_ms"].as_f64().unwrap_or(0.0);
    assert!(early > 0.0, "early_by_ms in {report:#}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains(&url), "the summary names the URL: {stderr}");
}

/// A shell loop of `curl`s: a process per request, each a client of its own.
fn curl_loop(dir: &TempDir, url: &str, extra: &[&str]) -> (Output, serde_json::Value) {
    let report = dir.path().join("report.json");
    let script = format!("for i in 1 2 3 4 5; do curl -s -o /dev/null '{url}'; done");
    let mut args = vec!["-u", WATCH, "-f", "100", "--seed", "3"];
    args.extend_from_slice(extra);
    let report_arg = report.display().to_string();
    args.extend(["--report-json", &report_arg, "--", "sh", "-c", &script]);
    let output = holdoff_run(dir.path(), &args);
    (output, json_report(&report))
}

#[test]
fn a_shell_loop_of_curls_is_reported_as_other_processes_inside_the_wait() {
    let rt = runtime();
    let upstream = rt.block_on(TestServer::start());
    upstream.set_default("/api", Reply::ok("hello"));
    let dir = TempDir::new("run-curl-loop");
    let url = upstream.url("/api");

    // Each process is judged apart, so none retried; but four came inside the wait the one
    // before was told. Reported everywhere, not failed (documented in docs/judge.md).
    let (output, report) = curl_loop(&dir, &url, &[]);
    assert_eq!(output.status.code(), Some(0), "{}", show(&output));
    assert_eq!(report["verdict"], "pass", "{report:#}");
    assert_eq!(report["retries"]["sibling"], 4, "{report:#}");
    let warning = &report["warnings"][0];
    assert_eq!(warning["kind"], "sibling", "{report:#}");
    assert_eq!(warning["url"], url.as_str(), "{report:#}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("4 requests came from another process inside the wait one was told")
            && stderr.contains("--judge-key method-url"),
        "{stderr}"
    );

    // Judged as one client, the same loop fails: every curl after the first is premature.
    let (output, report) = curl_loop(&dir, &url, &["--judge-key", "method-url"]);
    assert_eq!(output.status.code(), Some(3), "{}", show(&output));
    assert_eq!(report["retries"]["premature"], 4, "{report:#}");
}

#[test]
fn a_failing_command_without_violations_keeps_its_own_exit_status() {
    let dir = TempDir::new("run-exit");
    let output = holdoff_run(dir.path(), &["--", "sh", "-c", "exit 7"]);
    assert_eq!(output.status.code(), Some(7), "{}", show(&output));
}

#[test]
fn a_command_killed_by_a_signal_exits_128_plus_the_signal() {
    let dir = TempDir::new("run-killed");
    let output = holdoff_run(dir.path(), &["--", "sh", "-c", "kill -KILL $$"]);
    assert_eq!(output.status.code(), Some(128 + 9), "{}", show(&output));
}

#[test]
fn a_missing_command_exits_127_and_says_so() {
    let dir = TempDir::new("run-missing");
    let output = holdoff_run(dir.path(), &["--", "holdoff-no-such-command", "--flag"]);
    assert_eq!(output.status.code(), Some(127), "{}", show(&output));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("cannot run `holdoff-no-such-command`: command not found"),
        "{stderr}"
    );
}

#[test]
fn without_a_command_it_is_a_usage_error() {
    let dir = TempDir::new("run-usage");
    for args in [&[][..], &["-u", WATCH][..], &["--"][..]] {
        let output = holdoff_run(dir.path(), args);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {}", show(&output));
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains("<COMMAND>"), "{args:?}: {stderr}");
    }
}

#[test]
fn a_config_that_does_not_load_is_a_usage_error() {
    let dir = TempDir::new("run-bad-config");
    let config = dir.write("holdoff.json", "{ \"mocks\": 3 }");
    let output = holdoff_run(dir.path(), &["-c", &config, "--", "true"]);
    assert_eq!(output.status.code(), Some(2), "{}", show(&output));
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("holdoff.json"),
        "{}",
        show(&output)
    );
}

/// Prints the variables `run` sets, one `NAME=value` a line (`-` when unset).
const PRINT_ENV: &str = r#"for v in HTTP_PROXY HTTPS_PROXY ALL_PROXY http_proxy https_proxy all_proxy \
  HOLDOFF_PROXY_URL NO_PROXY no_proxy SSL_CERT_FILE CURL_CA_BUNDLE REQUESTS_CA_BUNDLE \
  AWS_CA_BUNDLE GIT_SSL_CAINFO CARGO_HTTP_CAINFO NODE_EXTRA_CA_CERTS HOLDOFF_CA_CERT \
  NODE_USE_ENV_PROXY; do eval "echo $v=\${$v:--}"; done
cat "$SSL_CERT_FILE" > "$1/bundle.pem"; cat "$HOLDOFF_CA_CERT" > "$1/ca.pem""#;

/// The variables as [`PRINT_ENV`] printed them.
fn printed_env(output: &Output) -> std::collections::HashMap<String, String> {
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter_map(|line| line.split_once('='))
        .map(|(name, value)| (name.to_owned(), value.to_owned()))
        .collect()
}

#[test]
fn the_command_gets_the_proxy_and_a_bundle_with_the_throwaway_ca() {
    let dir = TempDir::new("run-env");
    let out = dir.path().display().to_string();
    let output = holdoff_run_with(
        dir.path(),
        &[
            "--allow-no-traffic",
            "--",
            "sh",
            "-c",
            PRINT_ENV,
            "sh",
            &out,
        ],
        &[("NO_PROXY", "localhost"), ("no_proxy", "127.0.0.1")],
    );
    assert_eq!(output.status.code(), Some(0), "{}", show(&output));
    let env = printed_env(&output);

    let proxy = &env["HOLDOFF_PROXY_URL"];
    let addr: SocketAddr = proxy
        .strip_prefix("http://")
        .and_then(|addr| addr.parse().ok())
        .unwrap_or_else(|| panic!("HOLDOFF_PROXY_URL={proxy}"));
    assert_eq!(addr.ip(), Ipv4Addr::LOCALHOST);
    assert_ne!(addr.port(), 0);
    for var in [
        "HTTP_PROXY",
        "HTTPS_PROXY",
        "ALL_PROXY",
        "http_proxy",
        "https_proxy",
        "all_proxy",
    ] {
        assert_eq!(&env[var], proxy, "{var}");
    }
    assert_eq!(env["NO_PROXY"], "-");
    assert_eq!(env["no_proxy"], "-");
    assert_eq!(env["NODE_USE_ENV_PROXY"], "1");

    let bundle = &env["SSL_CERT_FILE"];
    for var in [
        "CURL_CA_BUNDLE",
        "REQUESTS_CA_BUNDLE",
        "AWS_CA_BUNDLE",
        "GIT_SSL_CAINFO",
        "CARGO_HTTP_CAINFO",
    ] {
        assert_eq!(&env[var], bundle, "{var}");
    }
    let ca = &env["HOLDOFF_CA_CERT"];
    assert_eq!(&env["NODE_EXTRA_CA_CERTS"], ca);
    let ca_pem = std::fs::read_to_string(dir.path().join("ca.pem")).expect("the CA was copied");
    let bundle_pem =
        std::fs::read_to_string(dir.path().join("bundle.pem")).expect("the bundle was copied");
    assert!(
        ca_pem.starts_with("-----BEGIN CERTIFICATE-----"),
        "{ca_pem}"
    );
    assert!(!ca_pem.contains("PRIVATE KEY"));
    assert!(bundle_pem.ends_with(&ca_pem), "the bundle ends with the CA");
    assert!(
        bundle_pem.matches("BEGIN CERTIFICATE").count() > 1,
        "the bundle has the system's roots too"
    );
    assert!(!bundle_pem.contains("PRIVATE KEY"));

    // The temporary directory, the CA's key with it, is gone.
    let ca_dir = Path::new(ca).parent().expect("the CA's directory");
    assert!(!ca_dir.exists(), "{} was left behind", ca_dir.display());
    assert!(!Path::new(bundle).exists());
}

#[test]
fn keep_no_proxy_leaves_no_proxy_alone() {
    let dir = TempDir::new("run-keep-no-proxy");
    let out = dir.path().display().to_string();
    let output = holdoff_run_with(
        dir.path(),
        &[
            "--keep-no-proxy",
            "--allow-no-traffic",
            "--",
            "sh",
            "-c",
            PRINT_ENV,
            "sh",
            &out,
        ],
        &[("NO_PROXY", "example.com"), ("no_proxy", "example.org")],
    );
    assert_eq!(output.status.code(), Some(0), "{}", show(&output));
    let env = printed_env(&output);
    assert_eq!(env["NO_PROXY"], "example.com");
    assert_eq!(env["no_proxy"], "example.org");
}

/// `holdoff run OPTIONS -- sh -c SCRIPT` in `dir`, started, and the first line the script
/// printed (it prints one once it is ready for what the test does next).
fn started(
    dir: &TempDir,
    options: &[&std::ffi::OsStr],
    script: &str,
) -> (std::process::Child, String) {
    let mut child = Command::new(assert_cmd::cargo::cargo_bin("holdoff"))
        .args(["run", "--log-level", "warn"])
        .args(options)
        .args(["--", "sh", "-c", script])
        .current_dir(dir.path())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start holdoff run");
    let mut line = String::new();
    BufReader::new(child.stdout.take().expect("piped"))
        .read_line(&mut line)
        .expect("read the command's stdout");
    (child, line)
}

#[test]
fn sigterm_is_passed_on_to_the_command() {
    let dir = TempDir::new("run-sigterm");
    // `wait` returns as soon as a trapped signal arrives; the trap then stops the sleep.
    let script = r#"trap 'kill $pid; exit 42' TERM; sleep 60 & pid=$!; echo ready; wait"#;
    let (child, line) = started(&dir, &[], script);
    assert_eq!(line, "ready\n");

    let status = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .expect("run kill");
    assert!(status.success());
    let output = child.wait_with_output().expect("wait for holdoff");
    assert_eq!(output.status.code(), Some(42), "{}", show(&output));
}

/// When holdoff itself is killed, it can pass nothing on: the kernel kills the command
/// (`setpriv --pdeathsig`, see `src/orphans.rs`), which would otherwise run on, orphaned.
#[cfg(target_os = "linux")]
#[test]
fn the_command_dies_with_a_killed_holdoff() {
    if Command::new("setpriv").arg("--version").output().is_err() {
        eprintln!("skipped: no setpriv (util-linux) on this machine");
        return;
    }
    let dir = TempDir::new("run-sigkill");
    let (mut child, line) = started(&dir, &[], "echo $$; exec sleep 600");
    let pid: u32 = line.trim().parse().expect("the command's pid");

    child.kill().expect("SIGKILL holdoff");
    child.wait().expect("wait for holdoff");
    // Gone, or a zombie nobody has reaped yet: either way, not running.
    let running = || {
        std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
            !stat
                .rsplit(')')
                .next()
                .unwrap_or("")
                .trim_start()
                .starts_with('Z')
        })
    };
    let clock = holdoff::clock::SystemClock;
    let deadline = clock.now() + std::time::Duration::from_secs(10);
    while running() && clock.now() < deadline {
        clock.block_for(std::time::Duration::from_millis(20));
    }
    assert!(
        !running(),
        "the command (pid {pid}) outlived a killed holdoff"
    );
}

#[test]
fn a_command_that_ignores_sigterm_is_killed_after_the_grace_and_the_run_still_ends() {
    let dir = TempDir::new("run-sigterm-ignored");
    let report = dir.path().join("report.json");
    let options = [
        "--allow-no-traffic".as_ref(),
        "--report-json".as_ref(),
        report.as_os_str(),
    ];
    let script = r#"trap '' TERM; echo ready; while :; do sleep 1; done"#;
    let (child, line) = started(&dir, &options, script);
    assert_eq!(line, "ready\n");
    let status = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .expect("run kill");
    assert!(status.success());
    // The command ignores SIGTERM: 5 s later it is killed, and holdoff ends with its reports.
    let output = child.wait_with_output().expect("wait for holdoff");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("killing it (SIGKILL)"), "{}", show(&output));
    assert!(report.is_file(), "{}", show(&output));
    assert_ne!(output.status.code(), Some(0), "{}", show(&output));
}

/// A test CA's certificate file and an HTTPS upstream on loopback whose certificate it
/// signed, answering every request `200 hello`.
struct TlsUpstream {
    addr: SocketAddr,
    ca: PathBuf,
    _dir: TempDir,
}

impl TlsUpstream {
    async fn start() -> TlsUpstream {
        let ca = TestCa::new("holdoff run test upstream CA");
        let dir = TempDir::new("run-upstream-ca");
        let ca_path = dir.path().join("upstream-ca.pem");
        std::fs::write(&ca_path, ca.pem()).expect("write the CA");
        let (cert, key) = ca.leaf(&[]).rustls();
        let mut config = ServerConfig::builder()
            .with_no_client_auth()
            .with_single_cert(vec![cert], key)
            .expect("TLS server config");
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        let acceptor = TlsAcceptor::from(Arc::new(config));

        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
            .await
            .expect("bind the upstream");
        let addr = listener.local_addr().expect("its address");
        tokio::spawn(async move {
            while let Ok((tcp, _)) = listener.accept().await {
                let acceptor = acceptor.clone();
                tokio::spawn(async move {
                    let Ok(tls) = acceptor.accept(tcp).await else {
                        return;
                    };
                    let service = service_fn(|_: Request<Incoming>| async {
                        Ok::<_, hyper::Error>(Response::new(Full::new(Bytes::from("hello"))))
                    });
                    let _ = http1::Builder::new()
                        .serve_connection(TokioIo::new(tls), service)
                        .await;
                });
            }
        });
        TlsUpstream {
            addr,
            ca: ca_path,
            _dir: dir,
        }
    }

    fn url(&self, path: &str) -> String {
        format!("https://{}{path}", self.addr)
    }
}

/// Runs `client…` under `holdoff run` against an HTTPS upstream whose first request to `/api`
/// is throttled for 1 s, and checks it passes with one compliant retry.
fn https_client_is_compliant(name: &str, client: &[&str], env: &[(&str, &str)]) {
    let rt = runtime();
    let upstream = rt.block_on(async { TlsUpstream::start().await });
    let dir = TempDir::new(name);
    let config = dir.write("holdoff.json", &first_request_throttled("https", 1));
    let report = dir.path().join("report.json");
    let url = upstream.url("/api");
    let mut args = vec![
        "-u".to_owned(),
        "https://127.0.0.1:*/*".to_owned(),
        "-c".to_owned(),
        config,
        "--upstream-ca".to_owned(),
        upstream.ca.display().to_string(),
        "--report-json".to_owned(),
        report.display().to_string(),
        "--".to_owned(),
    ];
    args.extend(client.iter().map(|arg| (*arg).to_owned()));
    args.push(url);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();

    let output = holdoff_run_with(dir.path(), &args, env);

    assert_eq!(output.status.code(), Some(0), "{}", show(&output));
    assert_eq!(
        String::from_utf8_lossy(&output.stdout).trim(),
        "200 hello",
        "{}",
        show(&output)
    );
    let report = json_report(&report);
    assert_eq!(report["verdict"], "pass", "{report:#}");
    assert_eq!(report["retries"]["compliant"], 1, "{report:#}");
    assert_eq!(report["retries"]["premature"], 0, "{report:#}");
}

/// urllib3 honouring Retry-After. It reads no proxy variables itself: a ProxyManager is
/// what its users write; the CA bundle comes from the environment too.
const URLLIB3_CLIENT: &str = r#"
import os, sys, urllib3
from urllib3.util.retry import Retry
retry = Retry(total=3, status_forcelist=[429], respect_retry_after_header=True, backoff_factor=0)
http = urllib3.ProxyManager(os.environ["HTTPS_PROXY"], ca_certs=os.environ["REQUESTS_CA_BUNDLE"], retries=retry)
response = http.request("GET", sys.argv[1])
print(response.status, response.data.decode())
"#;

#[test]
fn urllib3_over_https_trusts_the_throwaway_ca_through_the_environment() {
    https_client_is_compliant("run-urllib3", &["python3", "-c", URLLIB3_CLIENT], &[]);
}

/// Node's fetch, retrying a 429 after its Retry-After (seconds). With `HOLDOFF_TEST_UNDICI`
/// set, undici's EnvHttpProxyAgent becomes fetch's dispatcher first: Node before 22.21 has no
/// NODE_USE_ENV_PROXY.
const NODE_CLIENT: &str = r#"
if (process.env.HOLDOFF_TEST_UNDICI) {
  const { setGlobalDispatcher, EnvHttpProxyAgent } = require(process.env.HOLDOFF_TEST_UNDICI);
  setGlobalDispatcher(new EnvHttpProxyAgent());
}
(async () => {
  const url = process.argv[1];
  for (let attempt = 0; attempt < 4; attempt++) {
    const response = await fetch(url);
    const body = await response.text();
    if (response.status !== 429) {
      console.log(response.status, body);
      return;
    }
    const seconds = Number(response.headers.get("retry-after"));
    await new Promise((resolve) => setTimeout(resolve, seconds * 1000));
  }
  process.exitCode = 1;
})().catch((err) => {
  console.error(err);
  process.exitCode = 1;
});
"#;

/// Node's version, `(major, minor)`.
///
/// # Panics
///
/// If `node` is not installed: scripts/test installs it.
fn node_version() -> (u32, u32) {
    let output = Command::new("node")
        .arg("--version")
        .output()
        .expect("Node.js is needed for this test: run ./scripts/test, which installs it");
    let version = String::from_utf8_lossy(&output.stdout);
    let mut parts = version.trim().trim_start_matches('v').split('.');
    let mut next = || parts.next().and_then(|n| n.parse().ok()).unwrap_or(0);
    (next(), next())
}

/// undici, for Node without NODE_USE_ENV_PROXY: where scripts/test installs it, or
/// `HOLDOFF_TEST_UNDICI`.
fn undici() -> String {
    if let Ok(path) = std::env::var("HOLDOFF_TEST_UNDICI") {
        return path;
    }
    let path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/node-clients/node_modules/undici");
    assert!(
        path.is_dir(),
        "this Node.js has no NODE_USE_ENV_PROXY, and undici is not installed at {}: run \
         ./scripts/test, which installs it (npm install --prefix target/node-clients undici@6)",
        path.display()
    );
    path.display().to_string()
}

#[test]
fn node_fetch_over_https_trusts_the_throwaway_ca_through_the_environment() {
    let (major, minor) = node_version();
    let env_proxy = major >= 24 || (major == 22 && minor >= 21);
    let undici = if env_proxy { None } else { Some(undici()) };
    let env: Vec<(&str, &str)> = undici
        .iter()
        .map(|path| ("HOLDOFF_TEST_UNDICI", path.as_str()))
        .collect();
    https_client_is_compliant("run-node", &["node", "-e", NODE_CLIENT], &env);
}

/// The watched patterns are the -u ones; without any, everything is — HTTPS to any host
/// included, so curl trusting only the environment's bundle still verifies.
#[test]
fn without_patterns_everything_is_watched() {
    let rt = runtime();
    let upstream = rt.block_on(async { TlsUpstream::start().await });
    let dir = TempDir::new("run-watch-all");
    let config = dir.write("holdoff.json", &first_request_throttled("https", 30));
    let report = dir.path().join("report.json");
    let url = upstream.url("/api");
    let upstream_ca = upstream.ca.display().to_string();
    let report_arg = report.display().to_string();

    let output = holdoff_run(
        dir.path(),
        &[
            "-c",
            &config,
            "--upstream-ca",
            &upstream_ca,
            "--report-json",
            &report_arg,
            "--",
            // One client, twice.
            "curl",
            "-sS",
            "-w",
            "%{http_code} ",
            "-o",
            "/dev/null",
            "-o",
            "/dev/null",
            &url,
            &url,
        ],
    );

    assert_eq!(output.status.code(), Some(3), "{}", show(&output));
    assert_eq!(String::from_utf8_lossy(&output.stdout), "429 429 ");
    assert_eq!(json_report(&report)["retries"]["premature"], 1);
}

/// A client that reaches the upstream without the proxy: Node's fetch before 22.21 ignores
/// HTTP_PROXY (the usual way this happens); on a Node that honours NODE_USE_ENV_PROXY, curl
/// told to use no proxy.
fn bypassing_client(url: &str) -> Vec<String> {
    let (major, minor) = node_version();
    let node_honours_the_proxy = major >= 24 || (major == 22 && minor >= 21);
    let client: Vec<&str> = if node_honours_the_proxy {
        vec!["curl", "-sS", "-o", "/dev/null", "--noproxy", "*", url]
    } else {
        vec![
            "node",
            "-e",
            "fetch(process.argv[1]).then((r) => r.text()).catch((e) => { console.error(e); process.exitCode = 1; })",
            url,
        ]
    };
    client.into_iter().map(str::to_owned).collect()
}

#[test]
fn no_request_through_the_proxy_is_not_tested_and_exits_4() {
    let rt = runtime();
    let upstream = rt.block_on(TestServer::start());
    upstream.set_default("/x", Reply::ok("hello"));
    let dir = TempDir::new("run-no-traffic");
    let json = dir.path().join("report.json");
    let junit = dir.path().join("junit.xml");
    let md = dir.path().join("report.md");
    let mut args = vec![
        "--report-json".to_owned(),
        json.display().to_string(),
        "--report-junit".to_owned(),
        junit.display().to_string(),
        "--report-md".to_owned(),
        md.display().to_string(),
        "--".to_owned(),
    ];
    args.extend(bypassing_client(&upstream.url("/x")));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();

    let output = holdoff_run(dir.path(), &args);

    assert_eq!(output.status.code(), Some(4), "{}", show(&output));
    assert_eq!(
        upstream.requests_to("/x").len(),
        1,
        "the client bypassed the proxy"
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("holdoff: NOT TESTED: no request reached the proxy (0 requests)"),
        "{stderr}"
    );
    assert!(stderr.contains("Node.js before 22.21"), "{stderr}");
    assert!(!stderr.contains("PASS"), "{stderr}");
    let report = json_report(&json);
    assert_eq!(report["verdict"], "not_tested", "{report:#}");
    assert_eq!(report["requests"], 0, "{report:#}");
    let xml = std::fs::read_to_string(&junit).expect("the JUnit report");
    assert!(
        xml.contains(r#"<testsuites name="holdoff" tests="1" failures="1""#),
        "{xml}"
    );
    assert!(xml.contains(r#"<testcase name="no request reached the proxy" classname="holdoff""#));
    let md = std::fs::read_to_string(&md).expect("the Markdown report");
    assert!(md.starts_with("## holdoff: ⚠ NOT TESTED:"), "{md}");
    assert!(!md.contains("every retry waited"), "{md}");
}

#[test]
fn allow_no_traffic_exits_0_and_still_says_not_tested() {
    let dir = TempDir::new("run-allow-no-traffic");
    let json = dir.path().join("report.json");
    let output = holdoff_run(
        dir.path(),
        &[
            "--allow-no-traffic",
            "--report-json",
            &json.display().to_string(),
            "--",
            "true",
        ],
    );
    assert_eq!(output.status.code(), Some(0), "{}", show(&output));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("holdoff: NOT TESTED (allowed): no request reached the proxy"),
        "{stderr}"
    );
    assert_eq!(json_report(&json)["verdict"], "not_tested");

    // A failing command keeps its own status, and the headline says so.
    let output = holdoff_run(dir.path(), &["--", "sh", "-c", "exit 5"]);
    assert_eq!(output.status.code(), Some(5), "{}", show(&output));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("holdoff: FAIL: the command exited 5; no request reached the proxy"),
        "{stderr}"
    );
}

#[test]
fn requests_but_no_throttle_say_nothing_was_judged() {
    let rt = runtime();
    let upstream = rt.block_on(TestServer::start());
    upstream.set_default("/x", Reply::ok("hello"));
    let dir = TempDir::new("run-nothing-judged");
    let output = holdoff_run(
        dir.path(),
        &[
            "-f",
            "0",
            "--",
            "curl",
            "-sS",
            "-o",
            "/dev/null",
            &upstream.url("/x"),
        ],
    );
    assert_eq!(output.status.code(), Some(0), "{}", show(&output));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("holdoff: PASS? nothing was judged (1 request, 0 throttled)"),
        "{stderr}"
    );
    assert!(!stderr.contains("every retry waited"), "{stderr}");
}

/// An error rule on `/api` that never fires by itself (rate 0): `-f 100` makes every request
/// to it a 429 with `Retry-After: 30`.
const NEVER_FAILING: &str = r#"{
  "errors": {
    "rate": 0,
    "errors": [{
      "request": { "url": "http://127.0.0.1:*/api" },
      "responses": [{
        "statusCode": 429,
        "headers": [{ "name": "Retry-After", "value": "@dynamic=30" }]
      }]
    }]
  }
}"#;

/// `line` split into words by a POSIX shell, as a user pasting it would have it.
fn shell_split(line: &str) -> Vec<String> {
    let output = Command::new("sh")
        .args(["-c", r#"eval "set -- $1"; printf '%s\0' "$@""#, "sh", line])
        .output()
        .expect("run sh");
    assert!(output.status.success(), "{}", show(&output));
    String::from_utf8_lossy(&output.stdout)
        .split_terminator('\0')
        .map(str::to_owned)
        .collect()
}

/// The first line of the summary holdoff printed: the verdict and the counts.
fn headline(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr)
        .lines()
        .find(|line| line.starts_with("holdoff: "))
        .unwrap_or_else(|| panic!("no summary: {}", show(output)))
        .to_owned()
}

#[test]
fn the_reproduce_line_repeats_the_verdict() {
    let rt = runtime();
    let upstream = rt.block_on(TestServer::start());
    upstream.set_default("/api", Reply::ok("hello"));
    let dir = TempDir::new("run-reproduce");
    dir.write("never.json", NEVER_FAILING);
    let md = dir.path().join("report.md");
    let events = dir.path().join("events.jsonl");
    let url = upstream.url("/api");

    // Every option here shapes the verdict but the reports'; without `-f 100` nothing would
    // be throttled, without `-u` the other URL would be judged too.
    let output = holdoff_run(
        dir.path(),
        &[
            "-c",
            "never.json",
            "-f",
            "100",
            "--seed",
            "11",
            "-u",
            "http://127.0.0.1:*/api",
            "--retry-after-form",
            "http-date",
            "--judge-key",
            "url",
            "--report-md",
            &md.display().to_string(),
            "--events",
            &events.display().to_string(),
            "--",
            "sh",
            "-c",
            // One client: the first request throttled, the second premature, the third
            // (`/other`) not watched.
            r#"curl -sS -o /dev/null -o /dev/null -o /dev/null "$1" "$1" "$1/../other""#,
            "sh",
            &url,
        ],
    );
    assert_eq!(output.status.code(), Some(3), "{}", show(&output));
    let first = headline(&output);

    let md = std::fs::read_to_string(&md).expect("the Markdown report");
    let line = md
        .split("```sh\n")
        .nth(1)
        .and_then(|rest| rest.lines().next())
        .unwrap_or_else(|| panic!("no reproduce line in {md}"));
    let argv = shell_split(line);
    assert_eq!(argv[..2], ["holdoff", "run"], "{line}");
    for option in [
        "-c",
        "-f",
        "--seed",
        "-u",
        "--retry-after-form",
        "--judge-key",
    ] {
        assert!(argv.iter().any(|a| a == option), "{option} in {line}");
    }
    assert!(
        !line.contains("--report-md") && !line.contains("--events"),
        "{line}"
    );

    // `holdoff run --log-level warn …` as the test harness runs it: the same, with the built
    // binary for `holdoff`.
    let again = Command::new(assert_cmd::cargo::cargo_bin("holdoff"))
        .args(&argv[1..])
        .current_dir(dir.path())
        .stdin(Stdio::null())
        .output()
        .expect("run the reproduce line");
    assert_eq!(again.status.code(), Some(3), "{}", show(&again));
    assert_eq!(headline(&again), first);
}

#[test]
fn a_drawn_seed_is_in_the_reproduce_line() {
    let dir = TempDir::new("run-drawn-seed");
    let json = dir.path().join("report.json");
    let output = holdoff_run(
        dir.path(),
        &[
            "--allow-no-traffic",
            "--report-json",
            &json.display().to_string(),
            "--",
            "true",
        ],
    );
    assert_eq!(output.status.code(), Some(0), "{}", show(&output));
    let report = json_report(&json);
    let seed = report["seed"].as_u64().expect("a drawn seed");
    assert_eq!(
        report["reproduce"],
        format!("holdoff run --log-level warn --allow-no-traffic --seed {seed} -- true"),
        "{report:#}"
    );
}

#[test]
fn a_command_without_the_dashes_gets_a_hint() {
    let dir = TempDir::new("run-no-dashes");
    let output = Command::new(assert_cmd::cargo::cargo_bin("holdoff"))
        .args(["run", "curl", "http://127.0.0.1:9/"])
        .current_dir(dir.path())
        .stdin(Stdio::null())
        .output()
        .expect("run holdoff");
    assert_eq!(output.status.code(), Some(2), "{}", show(&output));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("unexpected argument 'curl'"), "{stderr}");
    assert!(
        stderr
            .contains("hint: put `--` before the command to run: holdoff run [OPTIONS] -- curl …"),
        "{stderr}"
    );
}

/// `holdoff run ARGS…` in `dir` as a newcomer types it: no `--log-level`, `env` added.
fn holdoff_run_plain(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    Command::new(assert_cmd::cargo::cargo_bin("holdoff"))
        .arg("run")
        .args(args)
        .env_remove("RUST_LOG")
        .envs(env.iter().copied())
        .current_dir(dir)
        .stdin(Stdio::null())
        .output()
        .expect("run holdoff")
}

#[test]
fn is_quiet_by_default_and_gives_the_seed_once_in_the_reproduce_line() {
    let dir = TempDir::new("run-quiet");
    let json = dir.path().join("report.json");
    let json_arg = json.display().to_string();
    let args = [
        "--allow-no-traffic",
        "--report-json",
        &json_arg,
        "--",
        "true",
    ];
    let output = holdoff_run_plain(dir.path(), &args, &[]);
    assert_eq!(output.status.code(), Some(0), "{}", show(&output));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!stderr.contains(" INFO "), "{stderr}");
    assert!(
        stderr.starts_with("holdoff faults: "),
        "the summary comes first: {stderr}"
    );
    let seed = json_report(&json)["seed"].as_u64().expect("a drawn seed");
    assert_eq!(
        stderr.matches(&seed.to_string()).count(),
        1,
        "the seed once: {stderr}"
    );
    assert!(
        stderr.contains(&format!(
            "\nreproduce: holdoff run --allow-no-traffic --seed {seed} -- true\n"
        )),
        "{stderr}"
    );

    // -v, or RUST_LOG, asks for what the proxy does.
    for (args, env) in [
        (&["-v", "--allow-no-traffic", "--", "true"][..], &[][..]),
        (
            &["--allow-no-traffic", "--", "true"][..],
            &[("RUST_LOG", "info")][..],
        ),
    ] {
        let output = holdoff_run_plain(dir.path(), args, env);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains(" INFO "), "{args:?} {env:?}: {stderr}");
        assert!(
            stderr.contains("running `true` through the proxy"),
            "{stderr}"
        );
    }
}

#[test]
fn a_failing_command_is_said_first_without_the_causes_of_no_traffic() {
    let dir = TempDir::new("run-command-failed");
    let output = holdoff_run_plain(dir.path(), &["--", "sh", "-c", "exit 3"], &[]);
    assert_eq!(output.status.code(), Some(3), "{}", show(&output));
    let stderr = String::from_utf8_lossy(&output.stderr);
    let headline = stderr
        .lines()
        .position(|line| line.starts_with("holdoff: FAIL: the command exited 3"))
        .unwrap_or_else(|| panic!("{stderr}"));
    let next = stderr.lines().nth(headline + 1).unwrap_or_default();
    assert!(
        next.starts_with("  the command failed (exit status 3) and sent no request"),
        "{stderr}"
    );
    assert!(!stderr.contains("Node.js"), "{stderr}");
    assert!(!stderr.contains("aiohttp"), "{stderr}");
}

mod help {
    use super::*;

    fn help(flag: &str) -> String {
        let output = Command::new(assert_cmd::cargo::cargo_bin("holdoff"))
            .args(["run", flag])
            .env("COLUMNS", "100")
            .stdin(Stdio::null())
            .output()
            .expect("run holdoff");
        assert_eq!(output.status.code(), Some(0), "{}", show(&output));
        String::from_utf8_lossy(&output.stdout).into_owned()
    }

    /// The headings of `text`, in order.
    fn headings(text: &str) -> Vec<&str> {
        text.lines()
            .filter(|line| !line.starts_with(' ') && line.ends_with(':'))
            .collect()
    }

    #[test]
    fn short_help_groups_the_options_in_the_order_of_use() {
        let short = help("-h");
        assert!(short.lines().count() <= 80, "{short}");
        assert_eq!(
            headings(&short),
            [
                "Arguments:",
                "Options:",
                "What to watch:",
                "Faults:",
                "Judging:",
                "Reports:",
                "Logs:",
                "Network and TLS:",
                "Examples:",
            ],
            "{short}"
        );
        let watch = short.find("What to watch:\n").expect("the heading");
        assert!(
            short[watch..]
                .lines()
                .nth(1)
                .is_some_and(|line| line.trim_start().starts_with("-u, --urls-to-watch")),
            "{short}"
        );
        for rare in [
            "--control-port",
            "--threads",
            "--judge-max-windows",
            "--no-mocks",
        ] {
            assert!(!short.contains(rare), "{rare} in -h:\n{short}");
        }
        insta::assert_snapshot!(short);
    }

    #[test]
    fn long_help_keeps_every_option_and_the_details() {
        let long = help("--help");
        for heading in [
            "Control API:",
            "Dev Proxy compatibility:",
            "Network and TLS:",
        ] {
            assert!(long.contains(heading), "{heading}:\n{long}");
        }
        for option in [
            "--control-port",
            "--metrics-port",
            "--threads",
            "--judge-max-windows",
            "--no-mocks",
            "--keep-no-proxy",
            "NODE_EXTRA_CA_CERTS",
        ] {
            assert!(long.contains(option), "{option}:\n{long}");
        }
    }
}
