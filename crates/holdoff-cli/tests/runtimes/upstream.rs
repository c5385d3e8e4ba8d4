//! The upstream the runtimes' clients call: a loopback HTTPS server, certified for `localhost`,
//! `127.0.0.1` and the names given (the machine's hostname, for Go), that answers its first
//! request `429` with `Retry-After: 1` and every later one `200` with an Anthropic-style model
//! list.

use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use bytes::Bytes;
use holdoff_testkit::tls::TestCa;
use http::{Request, Response, StatusCode, header};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use rustls::ServerConfig;
use tokio::net::TcpListener;
use tokio::runtime::Runtime;
use tokio_rustls::TlsAcceptor;

use crate::support::{TempDir, runtime};

/// The model every `200` lists; each client prints it.
pub(crate) const MODEL: &str = "holdoff-test";

/// The body of every `200`: what Anthropic's `GET /v1/models` returns.
const MODELS: &str = r#"{"data":[{"type":"model","id":"holdoff-test","display_name":"holdoff","created_at":"2025-01-01T00:00:00Z"}],"has_more":false,"first_id":"holdoff-test","last_id":"holdoff-test"}"#;

/// A running upstream; it stops when dropped (with its runtime).
pub(crate) struct Upstream {
    addr: SocketAddr,
    ca: PathBuf,
    served: Arc<AtomicUsize>,
    _dir: TempDir,
    _runtime: Runtime,
}

impl Upstream {
    /// Starts one on `127.0.0.1:0`, certified for loopback and `names`.
    pub(crate) fn start(names: &[&str]) -> Upstream {
        let runtime = runtime();
        let dir = TempDir::new("runtimes-upstream");
        let (acceptor, ca_pem) = acceptor(names);
        let ca = dir.path().join("upstream-ca.pem");
        std::fs::write(&ca, ca_pem).expect("write the upstream's CA");
        let listener = runtime
            .block_on(TcpListener::bind((Ipv4Addr::LOCALHOST, 0)))
            .expect("bind the upstream");
        let addr = listener.local_addr().expect("the upstream's address");
        let served = Arc::new(AtomicUsize::new(0));
        let counter = Arc::clone(&served);
        runtime.spawn(async move {
            while let Ok((tcp, _)) = listener.accept().await {
                let (acceptor, served) = (acceptor.clone(), Arc::clone(&counter));
                tokio::spawn(async move {
                    if let Ok(tls) = acceptor.accept(tcp).await {
                        serve(tls, served).await;
                    }
                });
            }
        });
        Upstream {
            addr,
            ca,
            served,
            _dir: dir,
            _runtime: runtime,
        }
    }

    /// `https://HOST:PORT/v1/models`.
    pub(crate) fn url(&self, host: &str) -> String {
        format!("https://{host}:{}/v1/models", self.addr.port())
    }

    /// `https://HOST:PORT`, the base URL of an SDK.
    pub(crate) fn base_url(&self, host: &str) -> String {
        format!("https://{host}:{}", self.addr.port())
    }

    /// The CA file its certificate chains to, for `holdoff run --upstream-ca`.
    pub(crate) fn ca(&self) -> &Path {
        &self.ca
    }

    /// How many requests reached it.
    pub(crate) fn requests(&self) -> usize {
        self.served.load(Ordering::SeqCst)
    }
}

/// A TLS acceptor (HTTP/1.1) with a certificate for loopback and `names`, and its CA's PEM.
fn acceptor(names: &[&str]) -> (TlsAcceptor, String) {
    let ca = TestCa::new("holdoff runtimes upstream CA");
    let (cert, key) = ca.leaf(names).rustls();
    let mut config = ServerConfig::builder()
        .with_no_client_auth()
        .with_single_cert(vec![cert], key)
        .expect("TLS server config");
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    (TlsAcceptor::from(Arc::new(config)), ca.pem().to_owned())
}

/// Serves one connection: the first request overall is throttled, the rest get [`MODELS`].
async fn serve<S>(io: S, served: Arc<AtomicUsize>)
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let service = service_fn(move |_: Request<Incoming>| {
        let first = served.fetch_add(1, Ordering::SeqCst) == 0;
        let mut response = if first {
            let mut response = Response::new(Full::new(Bytes::from(
                r#"{"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}"#,
            )));
            *response.status_mut() = StatusCode::TOO_MANY_REQUESTS;
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, header::HeaderValue::from_static("1"));
            response
        } else {
            Response::new(Full::new(Bytes::from(MODELS)))
        };
        response.headers_mut().insert(
            header::CONTENT_TYPE,
            header::HeaderValue::from_static("application/json"),
        );
        async move { Ok::<_, hyper::Error>(response) }
    });
    let _ = http1::Builder::new()
        .serve_connection(TokioIo::new(io), service)
        .await;
}
