//! A running `holdoff proxy` and curl through it, for the tests that drive the binary with
//! real clients.
#![allow(dead_code, unreachable_pub)]

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Command, Stdio};

pub use holdoff_testkit::TempDir;

/// `holdoff proxy --port 0 ARGS…`, stopped with SIGTERM by [`Proxy::stop`].
pub struct Proxy {
    child: Child,
    pub addr: SocketAddr,
    /// The rest of its stdout.
    stdout: Option<BufReader<std::process::ChildStdout>>,
}

impl Proxy {
    /// Starts it with `--log-level warn` and `args`, in the test's current directory.
    pub fn start(args: &[&str]) -> Proxy {
        Proxy::start_in(None, args)
    }

    /// Starts it in `dir` (where it looks for holdoff.json), with `args`.
    pub fn start_in(dir: Option<&Path>, args: &[&str]) -> Proxy {
        Proxy::start_with(dir, &[], args)
    }

    /// Starts it in `dir`, with `env` added to its environment, and `args`.
    pub fn start_with(dir: Option<&Path>, env: &[(&str, &Path)], args: &[&str]) -> Proxy {
        let mut command = Command::new(assert_cmd::cargo::cargo_bin("holdoff"));
        command
            .args(["proxy", "--port", "0", "--log-level", "warn"])
            .args(args)
            .envs(env.iter().copied())
            .stdin(Stdio::null());
        if let Some(dir) = dir {
            command.current_dir(dir);
        }
        Proxy::spawn(&mut command)
    }

    /// Starts `command`, a `holdoff` command line that runs the proxy as it is (whatever it
    /// spells the port with: the first line it prints names it), stdout and stderr piped.
    pub fn spawn(command: &mut Command) -> Proxy {
        let mut child = command
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start holdoff proxy");
        let mut line = String::new();
        let mut reader = BufReader::new(child.stdout.take().expect("piped"));
        reader.read_line(&mut line).expect("read stdout");
        let Some(addr) = line
            .strip_prefix("listening on http://")
            .and_then(|rest| rest.trim_end().parse().ok())
        else {
            let output = child.wait_with_output().expect("wait for holdoff");
            panic!(
                "unexpected first line {line:?}; stderr:\n{}",
                String::from_utf8_lossy(&output.stderr)
            );
        };
        Proxy {
            child,
            addr,
            stdout: Some(reader),
        }
    }

    /// The URL on the next line of stdout that starts with `prefix` (`control API on `).
    ///
    /// # Panics
    ///
    /// If stdout ends first.
    pub fn url_after(&mut self, prefix: &str) -> String {
        let reader = self.stdout.as_mut().expect("stdout is read");
        loop {
            let mut line = String::new();
            let read = reader.read_line(&mut line).expect("read stdout");
            assert!(read > 0, "stdout ended before a line starting {prefix:?}");
            if let Some(url) = line.trim_end().strip_prefix(prefix) {
                return url.to_owned();
            }
        }
    }

    /// Waits for it to exit on its own: its exit code and stderr.
    pub fn wait(&mut self) -> (Option<i32>, String) {
        let mut stderr = String::new();
        if let Some(mut pipe) = self.child.stderr.take() {
            let _ = std::io::Read::read_to_string(&mut pipe, &mut stderr);
        }
        let code = self.child.wait().ok().and_then(|status| status.code());
        (code, stderr)
    }

    /// The proxy's URL, `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// SIGTERM, then everything it wrote to stderr.
    pub fn stop(self) -> String {
        self.stop_with_status().1
    }

    /// SIGTERM, then its exit code and everything it wrote to stderr.
    pub fn stop_with_status(mut self) -> (Option<i32>, String) {
        let status = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .expect("run kill");
        assert!(status.success());
        let mut stderr = String::new();
        if let Some(mut pipe) = self.child.stderr.take() {
            let _ = std::io::Read::read_to_string(&mut pipe, &mut stderr);
        }
        let code = self.child.wait().ok().and_then(|status| status.code());
        (code, stderr)
    }
}

impl Drop for Proxy {
    /// A test that fails before [`Proxy::stop`] leaves no proxy running.
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// `curl -x PROXY ARGS… URL`, returning the status code it printed.
///
/// The body goes to a temporary file, not `/dev/null`: before a `--retry` curl truncates its
/// output, which fails on `/dev/null` (exit 23).
pub fn curl(proxy: SocketAddr, args: &[&str], url: &str) -> String {
    let body = TempDir::new("curl");
    let output = Command::new("curl")
        .args(["-s", "-o"])
        .arg(body.path().join("body"))
        .args(["-w", "%{http_code}", "-x"])
        .arg(format!("http://{proxy}"))
        .args(args)
        .arg(url)
        .output()
        .expect("curl is needed for these tests: run ./scripts/test, which installs it");
    let status = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        !status.is_empty(),
        "curl printed no status ({}): {}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    status
}

/// [`curl`] through `proxy` as client `who` (the `X-Holdoff-Client` identity the judge keys
/// by), returning the status code.
pub fn curl_as(proxy: &Proxy, who: &str, url: &str) -> String {
    curl(
        proxy.addr,
        &["-H", &format!("X-Holdoff-Client: {who}")],
        url,
    )
}

/// Whether `attempt` succeeds within `limit`, tried every 50 ms: for what a real process
/// (Redis, a cluster's failover, a proxy's circuit breaker probing it) does in real time,
/// where a fixed number of quick tries can all come too early.
#[allow(clippy::disallowed_methods)]
pub fn within(limit: std::time::Duration, mut attempt: impl FnMut() -> bool) -> bool {
    let deadline = std::time::Instant::now() + limit;
    loop {
        if attempt() {
            return true;
        }
        if std::time::Instant::now() >= deadline {
            return false;
        }
        holdoff::clock::SystemClock.block_for(std::time::Duration::from_millis(50));
    }
}

/// A multi-thread runtime with one worker, for the test upstream.
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("runtime")
}

/// A config whose only fault is one mock: the first request to `SCHEME://127.0.0.1:*/api` gets
/// 429 with `Retry-After: @dynamic=SECONDS`.
pub fn first_request_throttled(scheme: &str, seconds: u64) -> String {
    format!(
        r#"{{
  "mocks": {{
    "mocks": [{{
      "request": {{ "url": "{scheme}://127.0.0.1:*/api", "nth": 1 }},
      "response": {{
        "statusCode": 429,
        "headers": [{{ "name": "Retry-After", "value": "@dynamic={seconds}" }}],
        "body": "slow down"
      }}
    }}]
  }}
}}"#
    )
}

/// Everything about an output, for assertion messages.
pub fn show(output: &std::process::Output) -> String {
    format!(
        "{}\nstdout:\n{}\nstderr:\n{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

/// The JSON report at `path`.
pub fn json_report(path: &Path) -> serde_json::Value {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|err| panic!("read the JSON report {}: {err}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|err| panic!("parse the JSON report: {err}\n{text}"))
}

/// `holdoff proxy --port 0 --control-port 0 --metrics-port 0 ARGS…` with the three URLs it
/// prints, killed when dropped (the test passed or not).
pub struct Serving {
    child: Child,
    /// `http://127.0.0.1:PORT`, the proxy.
    pub proxy: String,
    /// The control API's URL.
    pub control: String,
    /// The metrics' URL.
    pub metrics: String,
}

impl Serving {
    /// Starts it with `--log-level warn` and `args`.
    pub fn start(args: &[&str]) -> Serving {
        let mut child = Command::new(assert_cmd::cargo::cargo_bin("holdoff"))
            .args(["proxy", "--port", "0", "--log-level", "warn"])
            .args(["--control-port", "0", "--metrics-port", "0"])
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start holdoff proxy");
        let mut lines = BufReader::new(child.stdout.take().expect("piped")).lines();
        let mut next = |prefix: &str| {
            let line = lines.next().and_then(Result::ok).unwrap_or_default();
            line.strip_prefix(prefix)
                .unwrap_or_else(|| panic!("expected {prefix:?}, got {line:?}"))
                .trim_end_matches('/')
                .to_owned()
        };
        let proxy = next("listening on ");
        let control = next("control API on ");
        let metrics = next("metrics on ");
        Serving {
            child,
            proxy,
            control,
            metrics,
        }
    }
}

impl Drop for Serving {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
