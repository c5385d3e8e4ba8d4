//! The least a reverse proxy built on hyper can do, for `scripts/bench-proxy`: a reference
//! floor to read holdoff's figures against, on the same machine and in the same run.
//!
//! Each client connection gets one HTTP/1.1 connection to the upstream, polled by the same
//! task; every request is passed on as it came (origin-form, headers untouched) and every
//! response back. Connections are handed in turn to one single-threaded runtime per thread,
//! as `holdoff proxy` does. Nothing else: no `Via`, no hop-by-hop handling, no timeouts, no
//! logging, no pipeline. It is not a proxy to use, only a measure of what hyper itself costs.
//!
//! ```text
//! "$(scripts/build-bench-harness hyper_floor)" \
//!     --listen 127.0.0.1:8001 --upstream 127.0.0.1:3000 --threads 2
//! ```

use std::error::Error;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::pin;
use std::process::ExitCode;
use std::sync::{Arc, Mutex, PoisonError};

use http::uri::PathAndQuery;
use http::{Request, Uri};
use hyper::body::Incoming;
use hyper::client::conn::http1 as client;
use hyper::server::conn::http1 as server;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

type BoxError = Box<dyn Error + Send + Sync>;

const USAGE: &str = "usage: hyper_floor --listen ADDR --upstream ADDR [--threads N]";

fn main() -> ExitCode {
    let (listen, upstream, threads) = match parse_args(std::env::args().skip(1)) {
        Ok(options) => options,
        Err(message) => {
            eprintln!("hyper_floor: {message}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    match run(listen, upstream, threads) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("hyper_floor: {error}");
            ExitCode::FAILURE
        }
    }
}

fn parse_args(
    mut args: impl Iterator<Item = String>,
) -> Result<(SocketAddr, SocketAddr, usize), String> {
    let (mut listen, mut upstream, mut threads) = (None, None, 2);
    while let Some(flag) = args.next() {
        let value = args.next().ok_or_else(|| format!("{flag} needs a value"))?;
        let address = |value: &str| {
            value
                .parse::<SocketAddr>()
                .map_err(|err| format!("{flag}: `{value}` is not an IP:PORT address: {err}"))
        };
        match flag.as_str() {
            "--listen" => listen = Some(address(&value)?),
            "--upstream" => upstream = Some(address(&value)?),
            "--threads" => {
                threads = value
                    .parse()
                    .ok()
                    .filter(|threads| *threads > 0)
                    .ok_or_else(|| format!("--threads: `{value}` is not a positive number"))?;
            }
            _ => return Err(format!("unknown argument `{flag}`")),
        }
    }
    match (listen, upstream) {
        (Some(listen), Some(upstream)) => Ok((listen, upstream, threads)),
        _ => Err("--listen and --upstream are required".to_owned()),
    }
}

/// Accepts on this thread, until killed, and hands the connections in turn to `threads`
/// threads, each with its own runtime: holdoff's own spread. (Letting each thread accept from
/// the shared socket instead leaves the spread to chance: in some runs one thread took every
/// connection, and the floor's figures moved with it.)
fn run(listen: SocketAddr, upstream: SocketAddr, threads: usize) -> Result<(), BoxError> {
    let listener = std::net::TcpListener::bind(listen)?;
    println!("listening on http://{}", listener.local_addr()?);
    let mut runtimes = Vec::new();
    for _ in 0..threads {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        runtimes.push(runtime.handle().clone());
        std::thread::spawn(move || runtime.block_on(std::future::pending::<()>()));
    }
    for (stream, runtime) in listener.incoming().zip(runtimes.iter().cycle()) {
        let stream = stream.map_err(|err| format!("accepting failed: {err}"))?;
        stream.set_nonblocking(true)?;
        runtime.spawn(async move {
            let served = match TcpStream::from_std(stream) {
                Ok(stream) => serve(stream, upstream).await,
                Err(err) => Err(err.into()),
            };
            if let Err(err) = served {
                eprintln!("hyper_floor: a connection failed: {err}");
            }
        });
    }
    Ok(())
}

/// Serves one client connection over one upstream connection, both polled by this task.
async fn serve(stream: TcpStream, upstream: SocketAddr) -> Result<(), BoxError> {
    stream.set_nodelay(true)?;
    let outbound = TcpStream::connect(upstream).await?;
    outbound.set_nodelay(true)?;
    let (sender, connection) = client::handshake::<_, Incoming>(TokioIo::new(outbound)).await?;
    // Idle between requests; taken while one is in flight (HTTP/1.1 has one at a time).
    let sender = Arc::new(Mutex::new(Some(sender)));
    let service = service_fn(move |request: Request<Incoming>| {
        let sender = Arc::clone(&sender);
        async move {
            let (mut parts, body) = request.into_parts();
            let target = parts.uri.path_and_query().cloned();
            parts.uri = Uri::from(target.unwrap_or_else(|| PathAndQuery::from_static("/")));
            let taken = sender.lock().unwrap_or_else(PoisonError::into_inner).take();
            let Some(mut taken) = taken else {
                return Err(std::io::Error::other(
                    "a request came while another was in flight",
                ));
            };
            let response = taken
                .send_request(Request::from_parts(parts, body))
                .await
                .map_err(std::io::Error::other)?;
            *sender.lock().unwrap_or_else(PoisonError::into_inner) = Some(taken);
            Ok::<_, std::io::Error>(response)
        }
    });
    let mut served = pin!(server::Builder::new().serve_connection(TokioIo::new(stream), service));
    let mut connection = pin!(connection);
    let mut upstream_open = true;
    std::future::poll_fn(|cx| {
        let result = served.as_mut().poll(cx);
        // The upstream side; its end shows up on the client side as a failed request.
        if result.is_pending() && upstream_open && connection.as_mut().poll(cx).is_ready() {
            upstream_open = false;
        }
        result
    })
    .await?;
    Ok(())
}
