//! `holdoff run -f 100 --preset throttle -- curl …`: curl POSTs through intercepted HTTPS,
//! every one answered with 429 before its body was read. curl 7.88 (Debian 12's) used to fail
//! most of them over HTTP/2 with `(92) Stream error in the HTTP/2 framing layer`; the proxy
//! now reads the body (up to 1 MiB) before it answers, so each upload ends cleanly.

mod support;

use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use bytes::Bytes;
use holdoff_testkit::tls::TestCa;
use http::{Request, Response};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use rustls::ServerConfig;
use support::{TempDir, runtime, show};
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;

/// A body 1 MiB long: as large as the proxy reads before answering.
const MIB: usize = 1024 * 1024;

/// An HTTPS upstream on loopback, whose certificate a test CA signed; it counts the requests
/// that reach it (a throttled one never should).
struct TlsUpstream {
    addr: SocketAddr,
    ca: PathBuf,
    reached: Arc<AtomicUsize>,
}

impl TlsUpstream {
    async fn start(dir: &Path) -> TlsUpstream {
        let test_ca = TestCa::new("holdoff early-answers test upstream CA");
        let ca = dir.join("upstream-ca.pem");
        std::fs::write(&ca, test_ca.pem()).expect("write the CA");
        let (cert, key) = test_ca.leaf(&[]).rustls();
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
        let reached = Arc::new(AtomicUsize::new(0));
        let count = Arc::clone(&reached);
        tokio::spawn(async move {
            while let Ok((tcp, _)) = listener.accept().await {
                let acceptor = acceptor.clone();
                let count = Arc::clone(&count);
                tokio::spawn(async move {
                    let Ok(tls) = acceptor.accept(tcp).await else {
                        return;
                    };
                    let service = service_fn(move |_: Request<Incoming>| {
                        count.fetch_add(1, Ordering::Relaxed);
                        async { Ok::<_, hyper::Error>(Response::new(Full::new(Bytes::new()))) }
                    });
                    let _ = http1::Builder::new()
                        .serve_connection(TokioIo::new(tls), service)
                        .await;
                });
            }
        });
        TlsUpstream { addr, ca, reached }
    }
}

/// 50 POSTs of `body` under `holdoff run -f 100 --preset throttle`, by 5 fresh curls of 10
/// URLs each with `protocol` (`--http2` or `--http1.1`), each URL its own (so none is a
/// retry): every curl must exit 0, every answer be a `429` over `version`.
fn fifty_throttled_posts(name: &str, protocol: &str, version: &str, body: &[u8]) {
    let rt = runtime();
    let dir = TempDir::new(name);
    let upstream = rt.block_on(TlsUpstream::start(dir.path()));
    let data = dir.path().join("body");
    std::fs::write(&data, body).expect("write the body");
    // curl finds the proxy and the throwaway CA in the environment `holdoff run` sets.
    let mut script = String::from("set -e\n");
    for round in 0..5 {
        script.push_str(&format!(
            "curl --silent --show-error --max-time 20 --fail-early {protocol} \
             --data-binary @{} --write-out '%{{http_code}} %{{http_version}}\\n'",
            data.display()
        ));
        for n in 0..10 {
            let url = format!("https://{}/upload/{round}/{n}", upstream.addr);
            script.push_str(&format!(" --output /dev/null {url}"));
        }
        script.push('\n');
    }

    let output = Command::new(assert_cmd::cargo::cargo_bin("holdoff"))
        .args([
            "run",
            "--log-level",
            "warn",
            "-f",
            "100",
            "--preset",
            "throttle",
        ])
        .args(["-u", "https://127.0.0.1:*/*", "--upstream-ca"])
        .arg(&upstream.ca)
        .args(["--", "sh", "-c", &script])
        .current_dir(dir.path())
        .stdin(Stdio::null())
        .output()
        .expect("run holdoff");

    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        !stderr.contains("curl: ("),
        "a curl failed: {}",
        show(&output)
    );
    assert_eq!(
        String::from_utf8_lossy(&output.stdout),
        format!("429 {version}\n").repeat(50),
        "{}",
        show(&output)
    );
    assert_eq!(output.status.code(), Some(0), "{}", show(&output));
    assert_eq!(upstream.reached.load(Ordering::Relaxed), 0);
}

#[test]
fn small_posts_over_http2_get_their_429_without_a_curl_error() {
    fifty_throttled_posts("early-h2-small", "--http2", "2", b"{\"prompt\":\"hello\"}");
}

#[test]
fn one_mib_posts_over_http2_get_their_429_without_a_curl_error() {
    fifty_throttled_posts("early-h2-mib", "--http2", "2", &vec![b'a'; MIB]);
}

#[test]
fn small_posts_over_http1_get_their_429_without_a_curl_error() {
    fifty_throttled_posts(
        "early-h1-small",
        "--http1.1",
        "1.1",
        b"{\"prompt\":\"hello\"}",
    );
}

#[test]
fn one_mib_posts_over_http1_get_their_429_without_a_curl_error() {
    fifty_throttled_posts("early-h1-mib", "--http1.1", "1.1", &vec![b'a'; MIB]);
}

/// Issue 37: a client hammering the proxy with wrong credentials, once locked out, gets 429s
/// by the thousand; the log keeps a few lines a second of them and counts the rest.
#[test]
fn refusals_of_a_locked_out_client_are_budgeted_in_the_log() {
    let dir = support::TempDir::new("locked-out-log");
    let mut proxy = std::process::Command::new(assert_cmd::cargo::cargo_bin("holdoff"));
    proxy
        .args([
            "proxy",
            "--port",
            "0",
            "--pass-through",
            "--proxy-auth",
            "me:s3cret",
        ])
        .env("HOME", dir.path())
        .stdin(std::process::Stdio::null());
    let proxy = support::Proxy::spawn(&mut proxy);
    let client = r#"
import base64, http.client, sys, time
conn = http.client.HTTPConnection("127.0.0.1", int(sys.argv[1]))
bad = "Basic " + base64.b64encode(b"me:wrong").decode()
codes = {}
for _ in range(500):
    conn.request("GET", "http://127.0.0.1:9/x", headers={"Proxy-Authorization": bad})
    response = conn.getresponse()
    response.read()
    codes[response.status] = codes.get(response.status, 0) + 1
print(sorted(codes.items()))
# A second later, the next refusal's line says how many were left out.
time.sleep(1.1)
conn.request("GET", "http://127.0.0.1:9/x", headers={"Proxy-Authorization": bad})
conn.getresponse().read()
"#;
    let port = proxy.addr.port().to_string();
    let output = std::process::Command::new("python3")
        .args(["-c", client, &port])
        .output()
        .expect("python3");
    let printed = String::from_utf8_lossy(&output.stdout);
    assert!(printed.contains("(429, 49"), "{printed} {output:?}");
    let stderr = proxy.stop();
    let refusals = stderr
        .lines()
        .filter(|line| line.contains("status=429"))
        .count();
    assert!(refusals <= 2 * 20 + 1, "{refusals} lines:\n{stderr}");
    assert!(
        stderr.contains("more refusals of locked-out clients (429) were left out of the log"),
        "{stderr}"
    );
}
