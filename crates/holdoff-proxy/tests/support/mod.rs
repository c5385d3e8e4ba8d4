//! What the proxy's integration tests share: the built `holdoff` binary run as a child
//! process on a free loopback port, temporary directories, a TLS upstream whose certificate a
//! test CA signed, curl, and raw HTTP/1.1 over TCP.
//!
//! The tests run the real binary, so it must be built first: `cargo build -p holdoff-cli`
//! (scripts/test does it before running the tests).

// Each test file uses its own part of this module.
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::net::{Ipv4Addr, SocketAddr, TcpListener as StdListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex, PoisonError};
use std::thread;
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use std::{env, fs, io};

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use rustls::ServerConfig;
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio_rustls::TlsAcceptor;

/// How long a test waits for anything the proxy should do promptly (start, answer, close).
pub(crate) const PROMPTLY: Duration = Duration::from_secs(10);

/// The `holdoff` binary that `cargo build -p holdoff-cli` built for the profile these tests
/// were built with.
///
/// # Panics
///
/// If it is missing, or older than the sources of the proxy, the CLI or the library: a test
/// of a stale binary would test someone else's code.
pub(crate) fn holdoff_bin() -> PathBuf {
    // The test executable is target/<profile>/deps/<name>-<hash>; the binary sits in
    // target/<profile>, wherever CARGO_TARGET_DIR put target.
    let from_exe = env::current_exe()
        .ok()
        .and_then(|exe| Some(exe.parent()?.parent()?.join("holdoff")));
    let from_manifest = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/debug/holdoff");
    let bin = from_exe
        .into_iter()
        .chain([from_manifest])
        .find(|candidate| candidate.is_file())
        .unwrap_or_else(|| {
            panic!(
                "the holdoff binary is not built: run `cargo build -p holdoff-cli` first \
                 (scripts/test does)"
            )
        });
    let built = modified(&bin).unwrap_or(UNIX_EPOCH);
    let crates = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    for source in ["holdoff-proxy/src", "holdoff-cli/src", "holdoff/src"] {
        if let Some(newest) = newest_file(&crates.join(source)) {
            assert!(
                newest.1 <= built,
                "{} is older than {}: run `cargo build -p holdoff-cli` first (scripts/test does)",
                bin.display(),
                newest.0.display(),
            );
        }
    }
    bin
}

fn modified(path: &Path) -> Option<SystemTime> {
    fs::metadata(path).and_then(|meta| meta.modified()).ok()
}

/// The most recently modified file under `dir`.
fn newest_file(dir: &Path) -> Option<(PathBuf, SystemTime)> {
    let mut newest: Option<(PathBuf, SystemTime)> = None;
    for entry in fs::read_dir(dir).ok()?.flatten() {
        let path = entry.path();
        let candidate = if path.is_dir() {
            newest_file(&path)
        } else {
            modified(&path).map(|at| (path, at))
        };
        if let Some(candidate) = candidate
            && newest.as_ref().is_none_or(|(_, at)| candidate.1 > *at)
        {
            newest = Some(candidate);
        }
    }
    newest
}

pub(crate) use holdoff_testkit::TempDir;

/// A running `holdoff proxy`, on a port it picked, with a CA in a temporary directory.
///
/// Dropping it kills the process.
pub(crate) struct Proxy {
    child: Child,
    pub(crate) addr: SocketAddr,
    log: Arc<Mutex<String>>,
    ca_dir: TempDir,
}

impl Proxy {
    /// Starts `holdoff proxy --port 0 --log-level info --failure-rate 0 --ca-dir <temporary>
    /// ARGS` and waits for its `listening on http://IP:PORT` line. The failure rate of 0 keeps
    /// the default `throttle` preset from answering watched requests itself: these tests are
    /// about the engine.
    ///
    /// # Panics
    ///
    /// If it does not start, or prints anything else first.
    pub(crate) fn start(args: &[&str]) -> Proxy {
        let ca_dir = TempDir::new("ca");
        let mut child = Command::new(holdoff_bin())
            .arg("proxy")
            .args([
                "--port",
                "0",
                "--log-level",
                "info",
                "--failure-rate",
                "0",
                "--ca-dir",
            ])
            .arg(ca_dir.path())
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn holdoff proxy");

        // stderr is the log: collect it for the test to read, and so the proxy never blocks
        // on a full pipe.
        let log = Arc::new(Mutex::new(String::new()));
        let stderr = child.stderr.take().expect("stderr is piped");
        let sink = Arc::clone(&log);
        thread::spawn(move || {
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                let mut log = sink.lock().unwrap_or_else(PoisonError::into_inner);
                log.push_str(&line);
                log.push('\n');
            }
        });

        let stdout = child.stdout.take().expect("stdout is piped");
        let (first_line, received) = mpsc::channel();
        thread::spawn(move || {
            let mut lines = BufReader::new(stdout).lines();
            let _ = first_line.send(lines.next());
            // Keep reading, so a later line would not block the proxy either.
            for _ in lines {}
        });
        let line = match received.recv_timeout(PROMPTLY) {
            Ok(Some(Ok(line))) => line,
            outcome => {
                let _ = child.kill();
                let _ = child.wait();
                holdoff::clock::SystemClock.block_for(Duration::from_millis(100));
                panic!(
                    "holdoff proxy {args:?} did not print its `listening on` line ({outcome:?}); \
                     its log:\n{}",
                    log.lock().unwrap_or_else(PoisonError::into_inner)
                );
            }
        };
        let addr = line
            .strip_prefix("listening on http://")
            .and_then(|addr| addr.parse::<SocketAddr>().ok())
            .unwrap_or_else(|| panic!("expected `listening on http://IP:PORT`, got {line:?}"));
        assert!(addr.ip().is_loopback(), "the proxy listens on {addr}");
        assert_ne!(addr.port(), 0);
        Proxy {
            child,
            addr,
            log,
            ca_dir,
        }
    }

    /// `http://127.0.0.1:PORT`, for curl's `-x` and reqwest's proxy.
    pub(crate) fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Writes the proxy's CA certificate with `holdoff ca export --ca-dir DIR --out FILE` and
    /// returns the file.
    pub(crate) fn export_ca(&self) -> PathBuf {
        let out = self.ca_dir.path().join("exported-ca.pem");
        let output = Command::new(holdoff_bin())
            .args(["ca", "export", "--ca-dir"])
            .arg(self.ca_dir.path())
            .arg("--out")
            .arg(&out)
            .output()
            .expect("run holdoff ca export");
        assert!(
            output.status.success(),
            "holdoff ca export failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        let pem = fs::read_to_string(&out).expect("holdoff ca export wrote the file");
        assert!(pem.contains("-----BEGIN CERTIFICATE-----"), "{pem}");
        assert!(
            !pem.contains("PRIVATE KEY"),
            "the export holds a private key"
        );
        out
    }

    /// The log as it grows, to read after the proxy is gone.
    pub(crate) fn log_handle(&self) -> Arc<Mutex<String>> {
        Arc::clone(&self.log)
    }

    /// Everything the proxy has logged so far.
    pub(crate) fn log(&self) -> String {
        self.log
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Waits until a log line contains every one of `needles`, and returns that line.
    ///
    /// # Panics
    ///
    /// If none does within [`PROMPTLY`].
    pub(crate) fn wait_for_log_line(&self, needles: &[&str]) -> String {
        let deadline = tokio_free_deadline();
        loop {
            let log = self.log();
            if let Some(line) = log
                .lines()
                .find(|line| needles.iter().all(|needle| line.contains(needle)))
            {
                return line.to_owned();
            }
            assert!(
                !deadline.passed(),
                "no log line contains all of {needles:?}; the log:\n{log}"
            );
            holdoff::clock::SystemClock.block_for(Duration::from_millis(20));
        }
    }

    /// Sends SIGTERM and waits for the process to exit.
    ///
    /// # Panics
    ///
    /// If it has not exited within [`PROMPTLY`].
    pub(crate) fn terminate(mut self) -> ExitStatus {
        let status = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .expect("run kill");
        assert!(status.success(), "kill -TERM failed");
        let deadline = tokio_free_deadline();
        loop {
            if let Some(status) = self.child.try_wait().expect("wait for the proxy") {
                return status;
            }
            assert!(!deadline.passed(), "the proxy did not exit after SIGTERM");
            holdoff::clock::SystemClock.block_for(Duration::from_millis(20));
        }
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The log once it holds `text`, or after [`PROMPTLY`] (the log is read by a thread of its
/// own, which may not have the last lines yet when the proxy exits).
pub(crate) fn log_when(log: &Mutex<String>, text: &str) -> String {
    let deadline = tokio_free_deadline();
    loop {
        let now = log.lock().unwrap_or_else(PoisonError::into_inner).clone();
        if now.contains(text) || deadline.passed() {
            return now;
        }
        holdoff::clock::SystemClock.block_for(Duration::from_millis(20));
    }
}

/// A deadline [`PROMPTLY`] from now, on the process's monotonic clock (these helpers run
/// outside tokio's time, in plain threads).
struct Deadline(std::time::Instant);

#[allow(clippy::disallowed_methods)] // Tests of a real process wait on real time.
fn tokio_free_deadline() -> Deadline {
    Deadline(std::time::Instant::now() + PROMPTLY)
}

impl Deadline {
    #[allow(clippy::disallowed_methods)]
    fn passed(&self) -> bool {
        std::time::Instant::now() >= self.0
    }
}

/// Runs curl with `args` (after `--silent --show-error --max-time 20`).
///
/// # Panics
///
/// If curl is not installed: the tests need it, and scripts/test installs it.
pub(crate) fn curl(args: &[&str]) -> Output {
    match Command::new("curl")
        .args(["--silent", "--show-error", "--max-time", "20"])
        .args(args)
        .output()
    {
        Ok(output) => output,
        Err(error) if error.kind() == io::ErrorKind::NotFound => panic!(
            "curl is not installed: run scripts/test, which installs it \
             (or `apt-get install curl`)"
        ),
        Err(error) => panic!("failed to run curl: {error}"),
    }
}

/// Runs [`curl`] off the async runtime's threads and returns its stdout, asserting it exited 0.
pub(crate) async fn curl_ok(args: &[&str]) -> String {
    let output = curl_async(args).await;
    assert!(
        output.status.success(),
        "curl {args:?} failed ({}): {}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).expect("curl printed UTF-8")
}

/// Runs [`curl`] off the async runtime's threads.
pub(crate) async fn curl_async(args: &[&str]) -> Output {
    let args: Vec<String> = args.iter().map(|arg| (*arg).to_owned()).collect();
    tokio::task::spawn_blocking(move || {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        curl(&args)
    })
    .await
    .expect("curl thread")
}

pub(crate) use holdoff_testkit::tls::TestCa;

/// What the TLS upstream saw of one request.
#[derive(Clone, Debug)]
pub(crate) struct Seen {
    pub(crate) method: String,
    pub(crate) path: String,
    pub(crate) version: http::Version,
    pub(crate) headers: http::HeaderMap,
}

/// An HTTPS server on `127.0.0.1:0` with a certificate from a [`TestCa`], speaking HTTP/2 and
/// HTTP/1.1 (by ALPN). Every path answers `200` with
/// `tls upstream: METHOD PATH VERSION\n` and the request is recorded.
pub(crate) struct TlsUpstream {
    pub(crate) addr: SocketAddr,
    seen: Arc<Mutex<Vec<Seen>>>,
    task: JoinHandle<()>,
}

impl TlsUpstream {
    pub(crate) async fn start(ca: &TestCa) -> TlsUpstream {
        let (cert, key) = ca.leaf(&[]).rustls();
        let mut config = ServerConfig::builder()
            .with_no_client_auth()
            .with_single_cert(vec![cert], key)
            .expect("TLS server config");
        config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        let acceptor = TlsAcceptor::from(Arc::new(config));
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
            .await
            .expect("bind the TLS upstream");
        let addr = listener.local_addr().expect("TLS upstream address");
        let seen = Arc::new(Mutex::new(Vec::new()));
        let log = Arc::clone(&seen);
        let task = tokio::spawn(async move {
            loop {
                let Ok((tcp, _)) = listener.accept().await else {
                    continue;
                };
                let acceptor = acceptor.clone();
                let log = Arc::clone(&log);
                tokio::spawn(async move {
                    // A client that fails the handshake (e.g. because it does not trust the
                    // test CA) is a test outcome, not an upstream error.
                    let Ok(tls) = acceptor.accept(tcp).await else {
                        return;
                    };
                    let service = service_fn(move |request: Request<Incoming>| {
                        let log = Arc::clone(&log);
                        async move {
                            let line = format!(
                                "tls upstream: {} {} {:?}\n",
                                request.method(),
                                request.uri().path(),
                                request.version()
                            );
                            log.lock()
                                .unwrap_or_else(PoisonError::into_inner)
                                .push(Seen {
                                    method: request.method().to_string(),
                                    path: request.uri().path().to_owned(),
                                    version: request.version(),
                                    headers: request.headers().clone(),
                                });
                            // Read the body, so a request with one is answered after it.
                            let _ = request.into_body().collect().await;
                            Ok::<_, hyper::Error>(Response::new(Full::new(Bytes::from(line))))
                        }
                    });
                    let _ = auto::Builder::new(TokioExecutor::new())
                        .serve_connection(TokioIo::new(tls), service)
                        .await;
                });
            }
        });
        TlsUpstream { addr, seen, task }
    }

    /// `https://127.0.0.1:PORT` followed by `path`.
    pub(crate) fn url(&self, path: &str) -> String {
        format!("https://{}{path}", self.addr)
    }

    /// Every request seen so far.
    pub(crate) fn seen(&self) -> Vec<Seen> {
        self.seen
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

impl Drop for TlsUpstream {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A loopback port that nothing listens on (bound, then released).
pub(crate) fn closed_port() -> u16 {
    let listener = StdListener::bind((Ipv4Addr::LOCALHOST, 0)).expect("bind a port");
    listener.local_addr().expect("address").port()
}

/// A response read off a raw connection.
#[derive(Debug)]
pub(crate) struct RawResponse {
    pub(crate) status: u16,
    /// The header section, as received, lowercased.
    pub(crate) head: String,
    pub(crate) body: Vec<u8>,
}

impl RawResponse {
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.head.lines().skip(1).find_map(|line| {
            let (key, value) = line.split_once(':')?;
            (key.trim() == name).then(|| value.trim())
        })
    }

    pub(crate) fn body_text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// Asserts the response is `status` with a short plain-text reason, as the proxy's own
    /// errors are.
    pub(crate) fn assert_plain_error(&self, status: u16) {
        assert_eq!(self.status, status, "{self:?}");
        let content_type = self.header("content-type").unwrap_or_default();
        assert!(
            content_type.starts_with("text/plain"),
            "content-type {content_type:?} in {self:?}"
        );
        let body = self.body_text();
        assert!(!body.trim().is_empty(), "an empty reason in {self:?}");
        assert!(
            !body.trim_end().contains('\n'),
            "a reason over one line: {body:?}"
        );
    }
}

/// Reads one HTTP/1.1 response: its head, then a body delimited by `content-length`, by
/// chunked encoding, or by the end of the connection.
///
/// # Panics
///
/// If the connection ends before a full head, or the head is not HTTP.
pub(crate) async fn read_response<S: AsyncRead + Unpin>(stream: &mut S) -> RawResponse {
    let mut buffer = Vec::new();
    let head_end = loop {
        if let Some(at) = find(&buffer, b"\r\n\r\n") {
            break at + 4;
        }
        let mut chunk = [0; 4096];
        let read = stream.read(&mut chunk).await.unwrap_or(0);
        assert!(
            read > 0,
            "the connection ended before a response head; got {:?}",
            String::from_utf8_lossy(&buffer)
        );
        buffer.extend_from_slice(&chunk[..read]);
    };
    let head = String::from_utf8_lossy(&buffer[..head_end]).to_lowercase();
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|status| status.parse().ok())
        .unwrap_or_else(|| panic!("not an HTTP response: {head:?}"));
    let mut response = RawResponse {
        status,
        head,
        body: buffer[head_end..].to_vec(),
    };
    if let Some(length) = response.header("content-length") {
        let length: usize = length.parse().expect("a numeric content-length");
        while response.body.len() < length {
            let mut chunk = [0; 4096];
            let read = stream.read(&mut chunk).await.unwrap_or(0);
            assert!(read > 0, "the body ended early: {response:?}");
            response.body.extend_from_slice(&chunk[..read]);
        }
        response.body.truncate(length);
    } else if response.header("transfer-encoding") == Some("chunked") {
        while find(&response.body, b"0\r\n\r\n").is_none() {
            let mut chunk = [0; 4096];
            let read = stream.read(&mut chunk).await.unwrap_or(0);
            assert!(read > 0, "the chunked body ended early: {response:?}");
            response.body.extend_from_slice(&chunk[..read]);
        }
        response.body = dechunk(&response.body);
    } else if !(100..200).contains(&status) && status != 204 && status != 304 {
        let _ = stream.read_to_end(&mut response.body).await;
    }
    response
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack
        .windows(needle.len())
        .position(|window| window == needle)
}

fn dechunk(mut chunked: &[u8]) -> Vec<u8> {
    let mut body = Vec::new();
    while let Some(line_end) = find(chunked, b"\r\n") {
        let size_text = String::from_utf8_lossy(&chunked[..line_end]);
        let size_text = size_text.split(';').next().unwrap_or_default().trim();
        let size = usize::from_str_radix(size_text, 16).expect("a chunk size");
        if size == 0 {
            break;
        }
        let start = line_end + 2;
        body.extend_from_slice(&chunked[start..start + size]);
        chunked = &chunked[start + size + 2..];
    }
    body
}

/// Reads until the peer closes the connection, discarding what arrives; true if it closed
/// (cleanly or with a reset) within `within`.
pub(crate) async fn closes_within<S: AsyncRead + Unpin>(stream: &mut S, within: Duration) -> bool {
    let drained = async {
        let mut sink = [0; 4096];
        loop {
            match stream.read(&mut sink).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
        }
    };
    tokio::time::timeout(within, drained).await.is_ok()
}

/// The proxy in this process, on a free loopback port, with `stages`: its address and the
/// handle that stops it.
pub(crate) async fn in_process(
    stages: Vec<Arc<dyn holdoff_proxy::Stage>>,
) -> (SocketAddr, holdoff_proxy::ShutdownHandle) {
    let proxy = InProcess::start(InProcess::config(), stages).await;
    (proxy.addr, proxy.handle)
}

/// One absolute-form GET through the proxy on a new connection, as `client`
/// (`X-Holdoff-Client`), with its body read.
pub(crate) async fn get_as(proxy: SocketAddr, url: &str, client: &str) -> Response<Bytes> {
    let uri: http::Uri = url.parse().expect("url");
    let request = Request::get(url)
        .header(
            http::header::HOST,
            uri.authority().expect("authority").as_str(),
        )
        .header("x-holdoff-client", client)
        .body(Full::new(Bytes::new()))
        .expect("request");
    send(proxy, request).await
}

/// One absolute-form request through the proxy on a new connection, with its body read.
pub(crate) async fn send(proxy: SocketAddr, request: Request<Full<Bytes>>) -> Response<Bytes> {
    let stream = tokio::net::TcpStream::connect(proxy)
        .await
        .expect("connect");
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .expect("handshake");
    tokio::spawn(connection);
    let response = sender.send_request(request).await.expect("response");
    let (parts, body) = response.into_parts();
    Response::from_parts(parts, body.collect().await.expect("body").to_bytes())
}

/// A proxy running in this process, on its own task: the harness every test file binds the
/// proxy through.
pub(crate) struct InProcess {
    pub(crate) addr: std::net::SocketAddr,
    pub(crate) handle: holdoff_proxy::ShutdownHandle,
    pub(crate) task: tokio::task::JoinHandle<holdoff_proxy::Summary>,
    /// Its interception CA, when it intercepts.
    pub(crate) ca: Option<Arc<holdoff_proxy::tls::CertificateAuthority>>,
}

impl InProcess {
    /// What every test's configuration starts from: loopback, on a port the OS picks.
    pub(crate) fn config() -> holdoff_proxy::ProxyConfig {
        let mut config = holdoff_proxy::ProxyConfig::default();
        config.listen = SocketAddr::from((Ipv4Addr::LOCALHOST, 0));
        config
    }

    /// Binds `config` with `stages` and serves until [`InProcess::stop`].
    pub(crate) async fn start(
        config: holdoff_proxy::ProxyConfig,
        stages: Vec<Arc<dyn holdoff_proxy::Stage>>,
    ) -> InProcess {
        InProcess::serve(config, stages.into(), &[]).await
    }

    /// Binds `config` with `pipeline`, `own` registered as the proxy's other addresses (see
    /// `ProxyServer::add_own_address`), and serves until [`InProcess::stop`].
    pub(crate) async fn serve(
        config: holdoff_proxy::ProxyConfig,
        pipeline: holdoff_proxy::Pipeline,
        own: &[SocketAddr],
    ) -> InProcess {
        let mut server = holdoff_proxy::ProxyServer::bind(config, pipeline)
            .await
            .expect("bind the proxy");
        for addr in own {
            server.add_own_address(*addr);
        }
        InProcess {
            addr: server.local_addr(),
            handle: server.shutdown_handle(),
            ca: server.ca().cloned(),
            task: tokio::spawn(server.run()),
        }
    }

    /// Shuts it down: its summary.
    pub(crate) async fn stop(self) -> holdoff_proxy::Summary {
        self.handle.shutdown();
        self.task.await.expect("the proxy task")
    }
}

/// An upstream that answers every request but `/small` with a body that never ends, and says when it
/// started sending one, how many bytes of bodies it has written, and when the proxy hung up
/// on it.
pub(crate) struct EndlessUpstream {
    pub(crate) addr: SocketAddr,
    pub(crate) sending: Arc<tokio::sync::Notify>,
    pub(crate) hung_up: Arc<tokio::sync::Notify>,
    pub(crate) written: Arc<AtomicU64>,
}

impl EndlessUpstream {
    pub(crate) async fn start() -> EndlessUpstream {
        use tokio::io::AsyncWriteExt;

        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
            .await
            .expect("bind the upstream");
        let addr = listener.local_addr().expect("its address");
        let sending = Arc::new(tokio::sync::Notify::new());
        let hung_up = Arc::new(tokio::sync::Notify::new());
        let written = Arc::new(AtomicU64::new(0));
        let (started, ended, count) = (
            Arc::clone(&sending),
            Arc::clone(&hung_up),
            Arc::clone(&written),
        );
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                let (started, ended, count) =
                    (Arc::clone(&started), Arc::clone(&ended), Arc::clone(&count));
                tokio::spawn(async move {
                    // `/small` gets a short answer and the connection stays open for the
                    // next request; anything else, the endless body.
                    let mut head = [0u8; 1024];
                    loop {
                        let Ok(read) = stream.read(&mut head).await else {
                            return;
                        };
                        if !head[..read].starts_with(b"GET /small ") {
                            break;
                        }
                        let small = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok";
                        if stream.write_all(small).await.is_err() {
                            return;
                        }
                    }
                    let head = b"HTTP/1.1 200 OK\r\ncontent-length: 1099511627776\r\n\r\n";
                    if stream.write_all(head).await.is_err() {
                        return;
                    }
                    let chunk = vec![b'x'; 64 * 1024];
                    started.notify_one();
                    while stream.write_all(&chunk).await.is_ok() {
                        count.fetch_add(chunk.len() as u64, Ordering::Relaxed);
                    }
                    ended.notify_one();
                });
            }
        });
        EndlessUpstream {
            addr,
            sending,
            hung_up,
            written,
        }
    }
}

/// A client socket that takes little into its receive buffer, so that a proxy writing to it
/// blocks soon once it stops reading.
pub(crate) async fn small_window_client(proxy: SocketAddr) -> tokio::net::TcpStream {
    let socket = tokio::net::TcpSocket::new_v4().expect("a socket");
    socket
        .set_recv_buffer_size(4096)
        .expect("a small receive buffer");
    socket.connect(proxy).await.expect("connect to the proxy")
}
