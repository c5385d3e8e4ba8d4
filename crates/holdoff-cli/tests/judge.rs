//! The judge in `holdoff proxy`, with curl as the client: an immediate retry is caught and
//! answered without reaching the upstream; `curl --retry`, which honours `Retry-After`, is
//! judged compliant. The summary on exit says which.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Child, Command, Output, Stdio};

use holdoff_testkit::{Reply, TestServer};

struct Proxy {
    child: Child,
    addr: SocketAddr,
}

impl Proxy {
    fn start() -> Proxy {
        let mut child = Command::new(assert_cmd::cargo::cargo_bin("holdoff"))
            .args(["proxy", "--port", "0", "--log-level", "warn"])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start holdoff proxy");
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("piped"))
            .read_line(&mut line)
            .expect("read stdout");
        let addr = line
            .strip_prefix("listening on http://")
            .and_then(|rest| rest.trim_end().parse().ok())
            .unwrap_or_else(|| panic!("unexpected first line {line:?}"));
        Proxy { child, addr }
    }

    fn stop(self) -> Output {
        let status = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .expect("run kill");
        assert!(status.success());
        self.child.wait_with_output().expect("wait for holdoff")
    }
}

/// `curl -x PROXY ARGS… URL`, returning the status code it printed.
fn curl(proxy: SocketAddr, args: &[&str], url: &str) -> String {
    let output = Command::new("curl")
        .args(["-s", "-o", "/dev/null", "-w", "%{http_code}", "-x"])
        .arg(format!("http://{proxy}"))
        .args(args)
        .arg(url)
        .output()
        .expect("curl is needed for these tests: run ./scripts/test, which installs it");
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("runtime")
}

#[test]
fn an_immediate_curl_retry_is_premature_and_not_forwarded() {
    let rt = runtime();
    let upstream = rt.block_on(TestServer::start());
    upstream.script("/api", [Reply::unavailable("30")]);
    let url = upstream.url("/api");
    let proxy = Proxy::start();

    assert_eq!(curl(proxy.addr, &[], &url), "503");
    assert_eq!(curl(proxy.addr, &[], &url), "429");
    assert_eq!(curl(proxy.addr, &[], &url), "429");
    assert_eq!(
        upstream.requests_to("/api").len(),
        1,
        "premature retries never reach it"
    );

    let output = proxy.stop();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("holdoff judge: 2 premature and 0 compliant retries."),
        "{stderr}"
    );
    assert!(stderr.contains(&format!("GET {url} came")), "{stderr}");
}

#[test]
fn curl_retry_honours_retry_after_and_is_compliant() {
    let rt = runtime();
    let upstream = rt.block_on(TestServer::start());
    // curl --retry waits as long as Retry-After says (1 s here), then retries.
    upstream.script("/api", [Reply::unavailable("1")]);
    let url = upstream.url("/api");
    let proxy = Proxy::start();

    assert_eq!(curl(proxy.addr, &["--retry", "3"], &url), "200");
    let requests = upstream.requests_to("/api");
    assert_eq!(requests.len(), 2);

    let output = proxy.stop();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("holdoff judge: 0 premature and 1 compliant retry."),
        "{stderr}"
    );
}
