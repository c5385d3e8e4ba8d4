//! The TLS pieces in real handshakes over loopback: a leaf from [`LeafCache`] on the server
//! side, a client that trusts only the CA (or the upstream configuration) on the other.

mod support;

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;

use holdoff_proxy::tls::{CertificateAuthority, LeafCache, TlsErrorKind, upstream_client_config};
use holdoff_testkit::TempDir;
use rustls::{ClientConfig, RootCertStore, ServerConfig};
use rustls_pki_types::ServerName;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::{LazyConfigAcceptor, TlsConnector};

/// What the server saw of one connection.
#[derive(Debug)]
struct Served {
    sni: Option<String>,
    alpn: Option<Vec<u8>>,
}

/// A TLS echo server on `127.0.0.1:0` that picks its certificate the way the proxy does: by
/// the client's SNI, or `fallback_host` (the CONNECT target) when there is none.
async fn leaf_server(
    cache: Arc<LeafCache>,
    fallback_host: &'static str,
) -> (SocketAddr, tokio::task::JoinHandle<io::Result<Served>>) {
    let listener = TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind loopback");
    let addr = listener.local_addr().expect("a bound address");
    let task = tokio::spawn(async move {
        let (tcp, _) = listener.accept().await?;
        let start = LazyConfigAcceptor::new(rustls::server::Acceptor::default(), tcp).await?;
        let sni = start.client_hello().server_name().map(str::to_owned);
        let config = cache
            .server_config(sni.as_deref().unwrap_or(fallback_host))
            .map_err(io::Error::other)?;
        let mut tls = start.into_stream(config).await?;
        let alpn = tls.get_ref().1.alpn_protocol().map(<[u8]>::to_vec);
        echo_once(&mut tls).await?;
        Ok(Served { sni, alpn })
    });
    (addr, task)
}

/// A TLS echo server on `127.0.0.1:0` with a fixed configuration.
async fn fixed_server(
    config: Arc<ServerConfig>,
) -> (SocketAddr, tokio::task::JoinHandle<io::Result<()>>) {
    let listener = TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind loopback");
    let addr = listener.local_addr().expect("a bound address");
    let task = tokio::spawn(async move {
        let (tcp, _) = listener.accept().await?;
        let mut tls = tokio_rustls::TlsAcceptor::from(config).accept(tcp).await?;
        echo_once(&mut tls).await
    });
    (addr, task)
}

async fn echo_once<S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin>(
    stream: &mut S,
) -> io::Result<()> {
    let mut buf = [0; 5];
    stream.read_exact(&mut buf).await?;
    stream.write_all(&buf).await?;
    stream.shutdown().await
}

/// A client that trusts `ca` and nothing else, offering `alpn`.
fn client_trusting(ca: &CertificateAuthority, alpn: &[&[u8]]) -> ClientConfig {
    let mut roots = RootCertStore::empty();
    roots
        .add(ca.cert_der().clone())
        .expect("the CA is a valid root");
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let mut config = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("aws-lc-rs supports the default versions")
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    config
}

/// Connects, says hello, reads the echo; returns the negotiated ALPN protocol.
async fn hello(config: ClientConfig, addr: SocketAddr, name: &str) -> io::Result<Option<Vec<u8>>> {
    let tcp = TcpStream::connect(addr).await?;
    let name = ServerName::try_from(name.to_owned()).expect("a valid server name");
    let mut tls = TlsConnector::from(Arc::new(config))
        .connect(name, tcp)
        .await?;
    let alpn = tls.get_ref().1.alpn_protocol().map(<[u8]>::to_vec);
    tls.write_all(b"hello").await?;
    let mut echoed = Vec::new();
    tls.read_to_end(&mut echoed).await?;
    assert_eq!(echoed, b"hello");
    Ok(alpn)
}

fn cache() -> (Arc<CertificateAuthority>, Arc<LeafCache>) {
    let ca = Arc::new(CertificateAuthority::ephemeral().expect("an ephemeral CA"));
    (Arc::clone(&ca), Arc::new(LeafCache::new(ca)))
}

mod leaf_cache {
    use super::*;

    #[tokio::test]
    async fn serves_a_dns_name_that_a_client_trusting_only_the_ca_accepts() {
        let (ca, cache) = cache();
        let (addr, server) = leaf_server(cache, "unused.invalid").await;
        let alpn = hello(
            client_trusting(&ca, &[b"h2", b"http/1.1"]),
            addr,
            "localhost",
        )
        .await
        .unwrap();
        let served = server.await.unwrap().unwrap();
        assert_eq!(served.sni.as_deref(), Some("localhost"));
        assert_eq!(alpn.as_deref(), Some(&b"h2"[..]));
    }

    #[tokio::test]
    async fn serves_an_ip_address_without_sni() {
        let (ca, cache) = cache();
        let (addr, server) = leaf_server(cache, "127.0.0.1").await;
        hello(client_trusting(&ca, &[]), addr, "127.0.0.1")
            .await
            .unwrap();
        let served = server.await.unwrap().unwrap();
        assert_eq!(served.sni, None, "clients send no SNI for an IP address");
        assert_eq!(served.alpn, None);
    }

    #[tokio::test]
    async fn serves_an_ipv6_address_given_in_brackets() {
        let Ok(listener) = std::net::TcpListener::bind("[::1]:0") else {
            return; // no IPv6 loopback on this machine
        };
        drop(listener);
        let (ca, cache) = cache();
        let config = cache.server_config("[::1]").unwrap();
        let listener = TcpListener::bind("[::1]:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let server = tokio::spawn(async move {
            let (tcp, _) = listener.accept().await?;
            let mut tls = tokio_rustls::TlsAcceptor::from(config).accept(tcp).await?;
            echo_once(&mut tls).await
        });
        hello(client_trusting(&ca, &[]), addr, "::1").await.unwrap();
        server.await.unwrap().unwrap();
    }

    #[tokio::test]
    async fn negotiates_http1_when_the_client_offers_only_http1() {
        let (ca, cache) = cache();
        let (addr, server) = leaf_server(cache, "unused.invalid").await;
        let alpn = hello(client_trusting(&ca, &[b"http/1.1"]), addr, "localhost")
            .await
            .unwrap();
        server.await.unwrap().unwrap();
        assert_eq!(alpn.as_deref(), Some(&b"http/1.1"[..]));
    }

    #[tokio::test]
    async fn is_refused_by_a_client_that_does_not_trust_the_ca() {
        let (_, cache) = cache();
        let (stranger, _) = super::cache();
        let (addr, server) = leaf_server(cache, "unused.invalid").await;
        let err = hello(client_trusting(&stranger, &[]), addr, "localhost")
            .await
            .unwrap_err();
        assert!(
            err.to_string().contains("invalid peer certificate"),
            "{err}"
        );
        assert!(server.await.unwrap().is_err());
    }

    #[tokio::test]
    async fn serves_with_a_ca_reloaded_from_disk() {
        let dir = TempDir::new("reloaded");
        let created = CertificateAuthority::load_or_create(dir.path()).unwrap();
        let loaded = Arc::new(CertificateAuthority::load(dir.path()).unwrap());
        let (addr, server) = leaf_server(Arc::new(LeafCache::new(loaded)), "unused").await;
        hello(client_trusting(&created, &[]), addr, "localhost")
            .await
            .unwrap();
        server.await.unwrap().unwrap();
    }
}

mod upstream_client_config {
    use super::*;

    #[tokio::test]
    async fn trusts_a_server_that_chains_to_an_extra_root() {
        let dir = TempDir::new("upstream-ok");
        let ca = Arc::new(CertificateAuthority::load_or_create(dir.path()).unwrap());
        let cert_path = ca.cert_path().unwrap().to_path_buf();
        let cache = LeafCache::new(ca);
        let (addr, server) = fixed_server(cache.server_config("localhost").unwrap()).await;
        let config = upstream_client_config(&[cert_path]).unwrap();
        let alpn = hello(config, addr, "localhost").await.unwrap();
        server.await.unwrap().unwrap();
        assert_eq!(alpn.as_deref(), Some(&b"h2"[..]));
    }

    #[tokio::test]
    async fn refuses_a_self_signed_server_and_says_why() {
        let dir = TempDir::new("upstream-self-signed");
        let ca = CertificateAuthority::load_or_create(dir.path()).unwrap();
        let (cert, key) = holdoff_testkit::tls::self_signed().rustls();
        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let server_config = ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(vec![cert], key)
            .unwrap();
        let (addr, server) = fixed_server(Arc::new(server_config)).await;
        let config = upstream_client_config(&[ca.cert_path().unwrap().to_path_buf()]).unwrap();
        let err = hello(config, addr, "localhost").await.unwrap_err();
        let message = err.to_string();
        assert!(message.contains("invalid peer certificate"), "{message}");
        assert!(message.contains("UnknownIssuer"), "{message}");
        assert!(server.await.unwrap().is_err());
    }

    #[test]
    fn names_a_file_that_is_not_pem() {
        let dir = TempDir::new("upstream-bad-pem");
        let path = dir.path().join("upstream-ca.pem");
        std::fs::write(&path, "-----BEGIN CERTIFICATE-----\nnot base64!\n").unwrap();
        let err = upstream_client_config(std::slice::from_ref(&path)).unwrap_err();
        assert_eq!(err.kind(), TlsErrorKind::Malformed);
        assert_eq!(
            err.to_string(),
            format!("read root certificates from {}", path.display())
        );
        assert!(std::error::Error::source(&err).is_some());
    }
}

/// The proxy intercepting a tunnel: what a client that does not trust the CA, or that sends
/// plain HTTP into the tunnel, gets.
mod interception {
    use std::sync::Mutex;

    use holdoff_proxy::{Action, Body, CaSource, ClientId, Mode, RequestMeta, Stage};
    use holdoff_testkit::{Reply, TestServer};
    use http::{Request, Uri};

    use super::support::InProcess;
    use super::*;

    /// Notes what the pipeline saw of every request.
    #[derive(Default)]
    struct Seen(Mutex<Vec<(Mode, Uri, ClientId)>>);

    impl Stage for Seen {
        fn on_request(&self, request: Request<Body>, meta: &RequestMeta) -> Action {
            self.0.lock().expect("no test thread panicked").push((
                meta.mode,
                meta.target.uri().clone(),
                meta.client.clone(),
            ));
            Action::Continue(request)
        }
    }

    /// A proxy that watches everything, intercepting with `ca`.
    async fn intercepting(
        ca: &Arc<CertificateAuthority>,
        stages: Vec<Arc<dyn Stage>>,
    ) -> InProcess {
        let mut config = InProcess::config();
        config.urls_to_watch = vec!["*".parse().expect("a valid pattern")];
        config.ca = CaSource::Provided(Arc::clone(ca));
        InProcess::start(config, stages).await
    }

    /// Sends a `CONNECT` to `target` with `extra` header lines, and reads the answer's head.
    async fn connect(proxy: SocketAddr, target: &str, extra: &str) -> TcpStream {
        let mut stream = TcpStream::connect(proxy).await.expect("connect");
        let head = format!("CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n{extra}\r\n");
        stream.write_all(head.as_bytes()).await.expect("send");
        let mut answer = Vec::new();
        let mut byte = [0u8; 1];
        while !answer.ends_with(b"\r\n\r\n") && stream.read(&mut byte).await.expect("read") == 1 {
            answer.push(byte[0]);
        }
        let answer = String::from_utf8_lossy(&answer);
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
        stream
    }

    #[tokio::test]
    async fn a_client_that_does_not_trust_the_ca_is_a_counted_failure() {
        let (ca, _) = cache();
        let (other, _) = cache();
        let proxy = intercepting(&ca, Vec::new()).await;
        let (addr, stop, running) = (proxy.addr, proxy.handle, proxy.task);

        let tunnel = connect(addr, "127.0.0.1:443", "").await;
        let name = ServerName::try_from("127.0.0.1").unwrap();
        let refused = TlsConnector::from(Arc::new(client_trusting(&other, &[b"http/1.1"])))
            .connect(name, tunnel)
            .await;
        assert!(refused.is_err(), "the client trusts another CA");

        stop.shutdown();
        let summary = running.await.unwrap();
        assert_eq!(summary.interception_failures, 1, "{summary}");
        assert_eq!(summary.errors, 1, "{summary}");
        assert!(
            summary
                .to_string()
                .contains("1 error (1 failed TLS interception)"),
            "{summary}"
        );
    }

    #[tokio::test]
    async fn plain_http_in_a_tunnel_is_a_plain_request_to_its_target_by_the_connect_user() {
        let (ca, _) = cache();
        let upstream = TestServer::start().await;
        upstream.set_default("/t", Reply::ok("hello"));
        let target = upstream.addr().to_string();
        let seen = Arc::new(Seen::default());
        let proxy = intercepting(&ca, vec![Arc::clone(&seen) as Arc<dyn Stage>]).await;
        let (addr, stop, running) = (proxy.addr, proxy.handle, proxy.task);

        // alice:x
        let user = "Proxy-Authorization: Basic YWxpY2U6eA==\r\n";
        let mut tunnel = connect(addr, &target, user).await;
        let get = "GET /t?q=1 HTTP/1.1\r\nHost: elsewhere\r\nConnection: close\r\n\r\n";
        tunnel.write_all(get.as_bytes()).await.unwrap();
        let mut answer = Vec::new();
        tunnel.read_to_end(&mut answer).await.unwrap();
        let answer = String::from_utf8_lossy(&answer);
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
        assert!(answer.ends_with("hello"), "{answer}");

        stop.shutdown();
        let summary = running.await.unwrap();
        assert_eq!((summary.requests, summary.errors), (1, 0), "{summary}");
        let seen = seen.0.lock().unwrap().clone();
        let url = format!("http://{target}/t?q=1");
        assert_eq!(
            seen,
            [(
                Mode::Forward,
                url.parse().unwrap(),
                ClientId::ProxyUser("alice".into())
            )]
        );
        let reached = upstream.requests_to("/t");
        assert_eq!(reached.len(), 1);
    }
}
