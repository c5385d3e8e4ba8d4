//! The upstream the real clients are throttled by: a loopback HTTP/1.1 server, plain or HTTPS,
//! that answers its first request `429` with headers made when that response is sent (so a
//! `Date` is the second the server sent it in, as a real server's is), and every later request
//! `200` with an OpenAI-style model list.

use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use holdoff::clock::{Clock, TokioClock};
use holdoff_testkit::tls::{Leaf, TestCa};
use http::{Request, Response, StatusCode, header};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use rustls::ServerConfig;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpListener;
use tokio::runtime::Runtime;
use tokio_rustls::TlsAcceptor;

use crate::support::{TempDir, runtime};

/// The body of every answer after the throttle: what `GET /v1/models` returns, which the other
/// clients print as it is.
pub(crate) const MODELS: &str = r#"{"object":"list","data":[{"id":"holdoff-test","object":"model","created":0,"owned_by":"holdoff"}]}"#;

/// The headers of the throttled response.
pub(crate) type Headers = Vec<(&'static str, String)>;

/// What makes [`Headers`] from the server's wall clock when the throttled response is sent.
type Hint = dyn Fn(SystemTime) -> Headers + Send + Sync;

/// Plain HTTP or HTTPS.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Scheme {
    Http,
    Https,
}

/// A running upstream; it stops when dropped (with its runtime).
pub(crate) struct Upstream {
    addr: SocketAddr,
    scheme: Scheme,
    /// The CA that signed the HTTPS upstream's certificate, for `holdoff run --upstream-ca`.
    ca: Option<PathBuf>,
    served: Arc<AtomicUsize>,
    _dir: TempDir,
    _runtime: Runtime,
}

impl Upstream {
    /// Starts one on `127.0.0.1:0` whose first request gets `429` with the headers `hint` makes.
    pub(crate) fn start(
        scheme: Scheme,
        hint: impl Fn(SystemTime) -> Headers + Send + Sync + 'static,
    ) -> Upstream {
        let runtime = runtime();
        let dir = TempDir::new("real-clients-upstream");
        let (acceptor, ca) = match scheme {
            Scheme::Http => (None, None),
            Scheme::Https => {
                let test_ca = TestCa::new("holdoff real-clients upstream CA");
                let ca = dir.path().join("upstream-ca.pem");
                std::fs::write(&ca, test_ca.pem()).expect("write the upstream's CA");
                (Some(acceptor(&test_ca.leaf(&[]))), Some(ca))
            }
        };
        let listener = runtime
            .block_on(TcpListener::bind((Ipv4Addr::LOCALHOST, 0)))
            .expect("bind the upstream");
        let addr = listener.local_addr().expect("the upstream's address");
        let served = Arc::new(AtomicUsize::new(0));
        let hint: Arc<Hint> = Arc::new(hint);
        let counter = Arc::clone(&served);
        runtime.spawn(async move {
            while let Ok((tcp, _)) = listener.accept().await {
                let (acceptor, hint, served) =
                    (acceptor.clone(), Arc::clone(&hint), Arc::clone(&counter));
                tokio::spawn(async move {
                    let _ = tcp.set_nodelay(true);
                    match acceptor {
                        None => serve(tcp, hint, served).await,
                        Some(acceptor) => {
                            if let Ok(tls) = acceptor.accept(tcp).await {
                                serve(tls, hint, served).await;
                            }
                        }
                    }
                });
            }
        });
        Upstream {
            addr,
            scheme,
            ca,
            served,
            _dir: dir,
            _runtime: runtime,
        }
    }

    /// `http[s]://127.0.0.1:PORT` followed by `path`.
    pub(crate) fn url(&self, path: &str) -> String {
        let scheme = match self.scheme {
            Scheme::Http => "http",
            Scheme::Https => "https",
        };
        format!("{scheme}://{}{path}", self.addr)
    }

    /// The CA file an HTTPS upstream's certificate chains to.
    pub(crate) fn ca(&self) -> Option<&Path> {
        self.ca.as_deref()
    }

    /// How many requests reached it.
    pub(crate) fn requests(&self) -> usize {
        self.served.load(Ordering::SeqCst)
    }
}

/// A TLS acceptor serving `leaf`, HTTP/1.1 only.
fn acceptor(leaf: &Leaf) -> TlsAcceptor {
    let (cert, key) = leaf.rustls();
    let mut config = ServerConfig::builder()
        .with_no_client_auth()
        .with_single_cert(vec![cert], key)
        .expect("TLS server config");
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    TlsAcceptor::from(Arc::new(config))
}

/// Serves one connection: the first request overall is throttled, the rest get [`MODELS`].
async fn serve<S>(io: S, hint: Arc<Hint>, served: Arc<AtomicUsize>)
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let service = service_fn(move |_: Request<Incoming>| {
        let first = served.fetch_add(1, Ordering::SeqCst) == 0;
        let response = if first {
            let mut response = Response::new(Full::new(Bytes::from("slow down\n")));
            *response.status_mut() = StatusCode::TOO_MANY_REQUESTS;
            for (name, value) in hint(TokioClock.wall_now()) {
                let value = header::HeaderValue::try_from(value).expect("a header value");
                response.headers_mut().append(name, value);
            }
            response
        } else {
            let mut response = Response::new(Full::new(Bytes::from(MODELS)));
            response.headers_mut().insert(
                header::CONTENT_TYPE,
                header::HeaderValue::from_static("application/json"),
            );
            response
        };
        async move { Ok::<_, hyper::Error>(response) }
    });
    // hyper adds a `Date` (the current whole second) to any response that has none, as a real
    // server does.
    let _ = http1::Builder::new()
        .serve_connection(TokioIo::new(io), service)
        .await;
}

/// `at` as an IMF-fixdate: whole seconds, the fraction dropped.
fn imf_fixdate(at: SystemTime) -> String {
    let at = jiff::Timestamp::try_from(at).expect("a time an HTTP-date can name");
    jiff::fmt::rfc2822::DateTimePrinter::new()
        .timestamp_to_rfc9110_string(&at)
        .expect("a year an HTTP-date can carry")
}

/// `at` rounded down to the whole second.
fn whole_second(at: SystemTime) -> SystemTime {
    let since = at
        .duration_since(SystemTime::UNIX_EPOCH)
        .expect("a time after 1970");
    SystemTime::UNIX_EPOCH + Duration::from_secs(since.as_secs())
}

/// The throttle of case 1: `Date` is the whole second the response is sent in, and
/// `Retry-After` is that `Date` + `ahead`, both IMF-fixdates.
pub(crate) fn date_hint(ahead: Duration) -> impl Fn(SystemTime) -> Headers + Send + Sync + 'static {
    move |now| {
        let date = whole_second(now);
        vec![
            ("date", imf_fixdate(date)),
            ("retry-after", imf_fixdate(date + ahead)),
        ]
    }
}
