//! A small HTTP/1.1 load generator for `scripts/bench-proxy`: N keep-alive connections send
//! GET requests back to back for a fixed time, straight to the URL or through an HTTP proxy,
//! and it prints the throughput and the latency percentiles.
//!
//! It exists because `wrk` cannot go through an intercepting proxy: for an `https://` URL
//! through `--proxy` it opens a tunnel with `CONNECT`, then speaks TLS inside it (trusting only
//! the `--cacert` roots, e.g. the CA that `holdoff ca export` wrote) and sends its requests on
//! that connection. For an `http://` URL through `--proxy` it sends absolute-form requests, as
//! any client of a forward proxy does.
//!
//! ```text
//! "$(scripts/build-bench-harness loadgen)" \
//!     --proxy http://127.0.0.1:8000 --cacert ca.pem --url https://127.0.0.1:8443/small \
//!     --connections 64 --duration 5s
//! ```
//!
//! It prints one line, `requests=N errors=N reconnects=N seconds=S rps=R p50_ms=A p99_ms=B`, and exits 1
//! when a request failed or a response was not a 2xx (after reconnecting and going on).

use std::error::Error;
use std::fs;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use holdoff::clock::SystemClock;
use http::{Request, Uri, header};
use http_body_util::{BodyExt, Empty};
use hyper::client::conn::http1::{self, SendRequest};
use hyper_util::rt::TokioIo;
use rustls::RootCertStore;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, ServerName};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

type BoxError = Box<dyn Error + Send + Sync>;

const USAGE: &str = "usage: loadgen --url URL [--proxy http://HOST:PORT] [--cacert PEM]... \
                     [--connections N] [--duration SECS[s]] [--threads N]";

/// What to run, from the command line.
struct Options {
    url: Uri,
    proxy: Option<SocketAddr>,
    cacerts: Vec<PathBuf>,
    connections: usize,
    duration: Duration,
    threads: usize,
}

/// The target, resolved once and shared by every connection.
struct Target {
    /// Where the TCP connections go: the proxy, or the origin itself.
    connect_to: SocketAddr,
    /// `host:port` of the origin, for `Host` and `CONNECT`.
    authority: String,
    /// `Some` for an `https://` URL.
    tls: Option<(TlsConnector, ServerName<'static>)>,
    /// Through a forward proxy without TLS: absolute-form; otherwise origin-form.
    request_target: Uri,
    /// Send `CONNECT authority` first.
    tunnel: bool,
}

/// What one connection's worker counted.
#[derive(Default)]
struct Tally {
    /// Latency of every completed 2xx request, in microseconds.
    latencies: Vec<u32>,
    errors: u64,
    /// Connections the server closed between requests, replaced.
    reconnects: u64,
    first_error: Option<String>,
}

fn main() -> ExitCode {
    let options = match parse_args(std::env::args().skip(1)) {
        Ok(options) => options,
        Err(message) => {
            eprintln!("loadgen: {message}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(options.threads)
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("loadgen: failed to start the runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(options)) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(error) => {
            eprintln!("loadgen: {error}");
            ExitCode::FAILURE
        }
    }
}

fn parse_args(mut args: impl Iterator<Item = String>) -> Result<Options, String> {
    let mut url = None;
    let mut proxy = None;
    let mut cacerts = Vec::new();
    let mut connections = 64;
    let mut duration = Duration::from_secs(5);
    let mut threads = 2;
    while let Some(flag) = args.next() {
        let mut value = || args.next().ok_or_else(|| format!("{flag} needs a value"));
        match flag.as_str() {
            "--url" => {
                let text = value()?;
                url = Some(
                    text.parse::<Uri>()
                        .map_err(|e| format!("bad --url {text}: {e}"))?,
                );
            }
            "--proxy" => {
                let text = value()?;
                let uri = text
                    .parse::<Uri>()
                    .map_err(|e| format!("bad --proxy {text}: {e}"))?;
                let authority = uri
                    .authority()
                    .ok_or_else(|| format!("--proxy {text} has no host:port"))?;
                let addr = authority
                    .as_str()
                    .parse::<SocketAddr>()
                    .map_err(|e| format!("--proxy must be http://IP:PORT ({e})"))?;
                proxy = Some(addr);
            }
            "--cacert" => cacerts.push(PathBuf::from(value()?)),
            "--connections" => {
                connections = value()?
                    .parse()
                    .map_err(|e| format!("bad --connections: {e}"))?;
            }
            "--threads" => {
                threads = value()?
                    .parse()
                    .map_err(|e| format!("bad --threads: {e}"))?
            }
            "--duration" => {
                let text = value()?;
                let seconds: f64 = text
                    .trim_end_matches('s')
                    .parse()
                    .map_err(|e| format!("bad --duration {text}: {e}"))?;
                duration = Duration::try_from_secs_f64(seconds)
                    .map_err(|e| format!("bad --duration {text}: {e}"))?;
            }
            "-h" | "--help" => return Err("help".to_owned()),
            other => return Err(format!("unknown argument {other}")),
        }
    }
    let url = url.ok_or("--url is required")?;
    if connections == 0 || threads == 0 {
        return Err("--connections and --threads must be at least 1".to_owned());
    }
    Ok(Options {
        url,
        proxy,
        cacerts,
        connections,
        duration,
        threads,
    })
}

async fn run(options: Options) -> Result<bool, BoxError> {
    let target = Arc::new(resolve(&options)?);
    let clock = SystemClock;
    let start = clock.now();
    let deadline = start + options.duration;
    let workers: Vec<_> = (0..options.connections)
        .map(|_| tokio::spawn(worker(Arc::clone(&target), deadline)))
        .collect();
    let mut latencies = Vec::new();
    let mut errors = 0;
    let mut reconnects = 0;
    let mut first_error = None;
    for worker in workers {
        let tally = worker.await?;
        latencies.extend(tally.latencies);
        errors += tally.errors;
        reconnects += tally.reconnects;
        first_error = first_error.or(tally.first_error);
    }
    let seconds = clock.now().duration_since(start).as_secs_f64();
    latencies.sort_unstable();
    let requests = latencies.len();
    println!(
        "requests={requests} errors={errors} reconnects={reconnects} seconds={seconds:.3} rps={:.1} p50_ms={:.3} p99_ms={:.3}",
        requests as f64 / seconds,
        percentile(&latencies, 0.50),
        percentile(&latencies, 0.99),
    );
    if let Some(error) = first_error {
        eprintln!("loadgen: {errors} request(s) failed; the first: {error}");
    }
    Ok(errors == 0 && requests > 0)
}

/// The `q` quantile of sorted microsecond latencies, in milliseconds (nearest rank).
fn percentile(sorted: &[u32], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    f64::from(sorted[rank - 1]) / 1000.0
}

fn resolve(options: &Options) -> Result<Target, BoxError> {
    let url = &options.url;
    let https = match url.scheme_str() {
        Some("https") => true,
        Some("http") => false,
        _ => return Err(format!("--url {url} must be http:// or https://").into()),
    };
    let host = url.host().ok_or("--url has no host")?;
    let port = url.port_u16().unwrap_or(if https { 443 } else { 80 });
    let authority = if host.contains(':') && !host.starts_with('[') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    };
    let origin: SocketAddr = authority
        .parse()
        .map_err(|_| format!("--url host must be an IP address, not {host}"))?;
    let path = url.path_and_query().map_or("/", |p| p.as_str());
    let request_target = match (options.proxy, https) {
        (Some(_), false) => format!("http://{authority}{path}").parse()?,
        _ => path.parse()?,
    };
    let tls = if https {
        let mut roots = RootCertStore::empty();
        for path in &options.cacerts {
            let pem = fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
            for cert in CertificateDer::pem_slice_iter(&pem) {
                roots.add(cert.map_err(|e| format!("bad PEM in {}: {e}", path.display()))?)?;
            }
        }
        if roots.is_empty() {
            return Err("an https:// --url needs --cacert".into());
        }
        let mut config = rustls::ClientConfig::builder()
            .with_root_certificates(roots)
            .with_no_client_auth();
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        let name = ServerName::try_from(host.trim_matches(['[', ']']).to_owned())?;
        Some((TlsConnector::from(Arc::new(config)), name))
    } else {
        None
    };
    Ok(Target {
        connect_to: options.proxy.unwrap_or(origin),
        authority,
        tls,
        request_target,
        tunnel: https && options.proxy.is_some(),
    })
}

/// One keep-alive connection sending requests back to back until `deadline`; a failed
/// connection is counted and replaced.
async fn worker(target: Arc<Target>, deadline: Instant) -> Tally {
    let clock = SystemClock;
    let mut tally = Tally::default();
    let mut sender = None;
    while clock.now() < deadline {
        let result = async {
            // A connection the server closed between requests (keep-alive limit, idle
            // timeout) is replaced without counting an error, as wrk does.
            if sender
                .as_mut()
                .is_some_and(|send: &mut SendRequest<_>| send.is_closed())
            {
                sender = None;
                tally.reconnects += 1;
            }
            let send = match &mut sender {
                Some(send) => send,
                None => sender.insert(connect(&target).await?),
            };
            if send.ready().await.is_err() {
                sender = None;
                tally.reconnects += 1;
                return Ok(None);
            }
            let request = Request::get(target.request_target.clone())
                .header(header::HOST, &target.authority)
                .body(Empty::<Bytes>::new())?;
            let started = clock.now();
            let response = send.send_request(request).await?;
            let status = response.status();
            let mut body = response.into_body();
            while let Some(frame) = body.frame().await {
                frame?;
            }
            if !status.is_success() {
                return Err(format!("status {status}").into());
            }
            Ok::<_, BoxError>(Some(clock.now().duration_since(started)))
        }
        .await;
        match result {
            Ok(None) => {}
            Ok(Some(latency)) => {
                let micros = u32::try_from(latency.as_micros()).unwrap_or(u32::MAX);
                tally.latencies.push(micros);
            }
            Err(error) => {
                tally.errors += 1;
                tally.first_error.get_or_insert_with(|| error.to_string());
                sender = None;
            }
        }
    }
    tally
}

async fn connect(target: &Target) -> Result<SendRequest<Empty<Bytes>>, BoxError> {
    let mut tcp = TcpStream::connect(target.connect_to).await?;
    tcp.set_nodelay(true)?;
    if target.tunnel {
        let connect = format!(
            "CONNECT {0} HTTP/1.1\r\nHost: {0}\r\n\r\n",
            target.authority
        );
        tcp.write_all(connect.as_bytes()).await?;
        read_connect_response(&mut tcp).await?;
    }
    match &target.tls {
        Some((connector, name)) => {
            let tls = connector.connect(name.clone(), tcp).await?;
            handshake(tls).await
        }
        None => handshake(tcp).await,
    }
}

async fn handshake<S>(io: S) -> Result<SendRequest<Empty<Bytes>>, BoxError>
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let (sender, connection) = http1::handshake(TokioIo::new(io)).await?;
    tokio::spawn(connection);
    Ok(sender)
}

/// Reads the proxy's answer to `CONNECT` byte by byte (so nothing of the tunnel is consumed)
/// and checks that it is a 2xx.
async fn read_connect_response(tcp: &mut TcpStream) -> Result<(), BoxError> {
    let mut head = Vec::with_capacity(128);
    while !head.ends_with(b"\r\n\r\n") {
        if head.len() > 8192 {
            return Err("the proxy's CONNECT response head is over 8 KiB".into());
        }
        let byte = tcp.read_u8().await?;
        head.push(byte);
    }
    let status_line = head.split(|&b| b == b'\n').next().unwrap_or_default();
    let status_line = String::from_utf8_lossy(status_line);
    let status = status_line.split_whitespace().nth(1).unwrap_or_default();
    if !status.starts_with('2') {
        return Err(format!("CONNECT refused: {}", status_line.trim_end()).into());
    }
    Ok(())
}
