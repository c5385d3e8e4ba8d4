//! Real clients through the real `holdoff proxy` binary, to real upstreams on loopback: curl
//! for plain HTTP, intercepted HTTPS (HTTP/1.1 and HTTP/2) and blind tunnels, reqwest
//! trusting the exported CA, and WebSocket echoes over a plain upgrade, through reverse mode
//! and inside an intercepted tunnel.
//!
//! The binary must be built first (`cargo build -p holdoff-cli`; scripts/test does), and
//! curl installed (scripts/test installs it).

mod support;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use holdoff_testkit::{Reply, TestServer};
use rustls::{
    ClientConfig, ClientConnection, RootCertStore, ServerConfig, ServerConnection, StreamOwned,
};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, ServerName};
use support::{Proxy, TestCa, TlsUpstream, curl_async, curl_ok, log_when};
use tokio_tungstenite::tungstenite::protocol::Role;
use tokio_tungstenite::tungstenite::{self, Message, WebSocket};

/// The watch pattern that intercepts every HTTPS test upstream.
const WATCH_LOOPBACK: &str = "https://127.0.0.1:*/*";

mod forward {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn curl_gets_plain_http_through_the_proxy() {
        let server = TestServer::start().await;
        server.script("/hello", [Reply::ok("hello through holdoff")]);
        let proxy = Proxy::start(&[]);

        let body = curl_ok(&["-x", &proxy.url(), &server.url("/hello?x=1")]).await;

        assert_eq!(body, "hello through holdoff");
        let seen = server.requests_to("/hello");
        assert_eq!(seen.len(), 1);
        // A proxy forwarding to the origin sends origin-form, and says it is there.
        assert_eq!(seen[0].uri.to_string(), "/hello?x=1");
        assert!(
            seen[0].header("via").is_some(),
            "no Via: {:?}",
            seen[0].headers
        );
        proxy.wait_for_log_line(&["GET", "/hello", "200"]);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn hop_by_hop_headers_stop_at_the_proxy() {
        let server = TestServer::start().await;
        let proxy = Proxy::start(&[]);

        curl_ok(&[
            "-x",
            &proxy.url(),
            "-H",
            "Connection: X-Private",
            "-H",
            "X-Private: for the proxy only",
            "-H",
            "X-End-To-End: for the upstream",
            &server.url("/headers"),
        ])
        .await;

        let seen = &server.requests_to("/headers")[0];
        assert_eq!(seen.header("x-end-to-end"), Some("for the upstream"));
        assert_eq!(seen.header("x-private"), None, "{:?}", seen.headers);
        assert_eq!(seen.header("proxy-authorization"), None);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn requests_on_one_client_connection_all_arrive() {
        let server = TestServer::start().await;
        server.set_default("/again", Reply::ok("again"));
        let proxy = Proxy::start(&[]);

        // curl keeps the connection to the proxy alive between URLs of one command line.
        let url = server.url("/again");
        let body = curl_ok(&["-x", &proxy.url(), &url, &url, &url]).await;

        assert_eq!(body, "againagainagain");
        assert_eq!(server.requests_to("/again").len(), 3);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn proxy_credentials_are_required_and_not_forwarded() {
        let server = TestServer::start().await;
        server.set_default("/private", Reply::ok("private"));
        let proxy = Proxy::start(&["--proxy-auth", "alice:s3cret"]);
        let url = server.url("/private");

        let refused = curl_ok(&[
            "-x",
            &proxy.url(),
            "--write-out",
            "%{http_code}",
            "-o",
            "/dev/null",
            &url,
        ])
        .await;
        let wrong = curl_ok(&[
            "-x",
            &proxy.url(),
            "--proxy-user",
            "alice:wrong",
            "--write-out",
            "%{http_code}",
            "-o",
            "/dev/null",
            &url,
        ])
        .await;
        let body = curl_ok(&["-x", &proxy.url(), "--proxy-user", "alice:s3cret", &url]).await;

        assert_eq!(refused, "407");
        assert_eq!(wrong, "407");
        assert_eq!(body, "private");
        let seen = server.requests_to("/private");
        assert_eq!(seen.len(), 1, "a refused request reached the upstream");
        assert_eq!(seen[0].header("proxy-authorization"), None);
    }
}

mod reverse {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn every_request_goes_to_the_one_upstream() {
        let server = TestServer::start().await;
        server.script("/api/items", [Reply::ok("items")]);
        let upstream = format!("http://{}", server.addr());
        let proxy = Proxy::start(&["--upstream", &upstream]);

        let body = curl_ok(&[&format!("{}/api/items", proxy.url())]).await;

        assert_eq!(body, "items");
        assert_eq!(server.requests_to("/api/items").len(), 1);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn plain_http2_with_prior_knowledge_is_served_as_http2() {
        let server = TestServer::start().await;
        server.set_default("/api/items", Reply::ok("items"));
        let upstream = format!("http://{}", server.addr());
        let proxy = Proxy::start(&["--upstream", &upstream]);
        let url = format!("{}/api/items", proxy.url());

        let output =
            curl_async(&["--http2-prior-knowledge", "-w", "\n%{http_version}", &url]).await;
        let text = String::from_utf8_lossy(&output.stdout);
        assert_eq!(
            text,
            "items\n2",
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        // HTTP/1.1 on the same port still works, a POST whose first letter is the preface's too.
        let body = curl_ok(&["-d", "x", &url]).await;
        assert_eq!(body, "items");
        assert_eq!(server.requests_to("/api/items").len(), 2);
    }

    /// Several requests on one h2c connection — hyper's client, one after another and at once
    /// (concurrent streams), after one from `curl` — each reach the upstream: an HTTP/2 connection's requests go to the shared
    /// pool, never to an upstream connection of its own that nothing drives for it.
    async fn h2c_carries_many_requests(proxy: &Proxy, url: &str, curl: bool) {
        use http_body_util::{BodyExt, Empty};
        use hyper::client::conn::http2;
        use hyper_util::rt::{TokioExecutor, TokioIo};

        if curl {
            // One URL: curl 7.88 (Debian 12's) cannot reuse an h2c connection, whatever the
            // server ("Error in the HTTP2 framing layer" against nghttpd too).
            let args = [
                "--http2-prior-knowledge",
                "-s",
                "-w",
                " %{http_version}",
                url,
            ];
            let output = curl_async(&args).await;
            assert_eq!(
                String::from_utf8_lossy(&output.stdout),
                "items 2",
                "{}",
                String::from_utf8_lossy(&output.stderr)
            );
        }

        let stream = tokio::net::TcpStream::connect(proxy.addr)
            .await
            .expect("connect");
        let (sender, connection) = http2::handshake(TokioExecutor::new(), TokioIo::new(stream))
            .await
            .expect("HTTP/2 handshake");
        tokio::spawn(connection);
        let get = |sender: &http2::SendRequest<Empty<bytes::Bytes>>| {
            let mut sender = sender.clone();
            let request = http::Request::get(url)
                .body(Empty::<bytes::Bytes>::new())
                .expect("request");
            async move {
                let response = sender.send_request(request).await.expect("response");
                let status = response.status().as_u16();
                let body = response.into_body().collect().await.expect("body");
                (status, body.to_bytes())
            }
        };
        for _ in 0..3 {
            assert_eq!(get(&sender).await, (200, bytes::Bytes::from("items")));
        }
        let mut streams = tokio::task::JoinSet::new();
        for _ in 0..8 {
            streams.spawn(get(&sender));
        }
        while let Some(answer) = streams.join_next().await {
            assert_eq!(answer.expect("stream"), (200, bytes::Bytes::from("items")));
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn one_h2c_connection_carries_many_requests_in_reverse_mode() {
        let server = TestServer::start().await;
        server.set_default("/api/items", Reply::ok("items"));
        let upstream = format!("http://{}", server.addr());
        let proxy = Proxy::start(&["--upstream", &upstream]);
        let url = format!("{}/api/items", proxy.url());
        h2c_carries_many_requests(&proxy, &url, true).await;
        assert_eq!(server.requests_to("/api/items").len(), 12);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn one_h2c_connection_carries_many_requests_in_forward_mode() {
        let server = TestServer::start().await;
        server.set_default("/api/items", Reply::ok("items"));
        let proxy = Proxy::start(&[]);
        // hyper's client sends the upstream's URL as :scheme and :authority: a forward
        // request over h2c (curl speaks HTTP/1.1 to a proxy).
        h2c_carries_many_requests(&proxy, &server.url("/api/items"), false).await;
        assert_eq!(server.requests_to("/api/items").len(), 11);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_idle_http2_connection_is_closed_after_the_idle_timeout() {
        use http_body_util::{BodyExt, Empty};
        use hyper::client::conn::http2;
        use hyper_util::rt::{TokioExecutor, TokioIo};

        let server = TestServer::start().await;
        server.set_default("/api/items", Reply::ok("items"));
        let upstream = format!("http://{}", server.addr());
        let proxy = Proxy::start(&["--upstream", &upstream, "--idle-timeout", "1s"]);

        let stream = tokio::net::TcpStream::connect(proxy.addr)
            .await
            .expect("connect");
        let (mut sender, connection) = http2::handshake(TokioExecutor::new(), TokioIo::new(stream))
            .await
            .expect("HTTP/2 handshake");
        let connection = tokio::spawn(connection);
        let request = http::Request::get(format!("{}/api/items", proxy.url()))
            .body(Empty::<bytes::Bytes>::new())
            .expect("request");
        let response = sender.send_request(request).await.expect("response");
        assert_eq!(response.version(), http::Version::HTTP_2);
        let body = response.into_body().collect().await.expect("body");
        assert_eq!(body.to_bytes(), "items");

        // hyper's client answers the proxy's pings, so only an idle timeout ends it.
        let ended = tokio::time::timeout(support::PROMPTLY, connection).await;
        assert!(
            ended.is_ok(),
            "the proxy kept an idle HTTP/2 connection open"
        );
    }
}

mod intercepted {
    use super::*;

    async fn setup() -> (TestCa, TlsUpstream, Proxy) {
        let ca = TestCa::new("holdoff test upstream CA");
        let upstream = TlsUpstream::start(&ca).await;
        let proxy = Proxy::start(&[
            "--urls-to-watch",
            WATCH_LOOPBACK,
            "--upstream-ca",
            &ca.pem_path_str(),
        ]);
        (ca, upstream, proxy)
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn curl_trusting_the_exported_ca_reaches_the_upstream() {
        let (_ca, upstream, proxy) = setup().await;
        let exported = proxy.export_ca();

        let body = curl_ok(&[
            "-x",
            &proxy.url(),
            "--cacert",
            &exported.display().to_string(),
            "--http1.1",
            &upstream.url("/secure"),
        ])
        .await;

        assert!(body.starts_with("tls upstream: GET /secure"), "{body}");
        let seen = upstream.seen();
        assert_eq!(seen.len(), 1, "{seen:?}");
        assert_eq!(seen[0].path, "/secure");
        let line = proxy.wait_for_log_line(&["/secure"]);
        assert!(line.to_lowercase().contains("intercept"), "{line}");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_client_sees_the_proxy_certificate_not_the_upstream_one() {
        let (ca, upstream, proxy) = setup().await;

        // Trusting only the upstream's own CA fails: the proxy terminated TLS.
        let output = curl_async(&[
            "-x",
            &proxy.url(),
            "--cacert",
            &ca.pem_path_str(),
            &upstream.url("/not-trusted"),
        ])
        .await;

        assert!(!output.status.success(), "curl trusted the proxy's leaf");
        assert!(upstream.seen().is_empty());
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn curl_negotiates_http2_with_the_proxy() {
        let (_ca, upstream, proxy) = setup().await;
        let exported = proxy.export_ca();

        let version = curl_ok(&[
            "-x",
            &proxy.url(),
            "--cacert",
            &exported.display().to_string(),
            "--http2",
            "--output",
            "/dev/null",
            "--write-out",
            "%{http_version}",
            &upstream.url("/h2"),
        ])
        .await;

        assert_eq!(version, "2");
        assert_eq!(upstream.seen().len(), 1);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn reqwest_trusting_the_exported_ca_reaches_both_upstreams() {
        let (_ca, upstream, proxy) = setup().await;
        let plain = TestServer::start().await;
        plain.script("/plain", [Reply::ok("plain")]);
        let exported = std::fs::read(proxy.export_ca()).expect("read the exported CA");
        // reqwest is built without a crypto provider of its own (rustls-no-provider): use
        // aws-lc-rs, as the proxy does. Another test may have installed it already.
        let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
        let client = reqwest::Client::builder()
            .proxy(reqwest::Proxy::all(proxy.url()).expect("proxy URL"))
            .tls_certs_only([reqwest::Certificate::from_pem(&exported).expect("the CA")])
            .build()
            .expect("reqwest client");

        let secure = client
            .get(upstream.url("/reqwest"))
            .send()
            .await
            .expect("HTTPS through the proxy");
        assert_eq!(secure.status(), 200);
        let text = secure.text().await.expect("body");
        assert!(text.starts_with("tls upstream: GET /reqwest"), "{text}");

        let plain_response = client
            .get(plain.url("/plain"))
            .send()
            .await
            .expect("HTTP through the proxy");
        assert_eq!(plain_response.text().await.expect("body"), "plain");
    }
}

mod tunnelled {
    use super::*;

    /// curl verifies the upstream's own certificate against the test CA: had the proxy
    /// touched TLS, it would have failed.
    async fn assert_blind(proxy: &Proxy, ca: &TestCa, upstream: &TlsUpstream) {
        let body = curl_ok(&[
            "-x",
            &proxy.url(),
            "--cacert",
            &ca.pem_path_str(),
            &upstream.url("/blind"),
        ])
        .await;
        assert!(body.starts_with("tls upstream: GET /blind"), "{body}");
        assert_eq!(upstream.seen().len(), 1);
        let line = proxy.wait_for_log_line(&["CONNECT"]);
        assert!(line.to_lowercase().contains("tunnel"), "{line}");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn without_a_watch_list_nothing_is_intercepted() {
        let ca = TestCa::new("holdoff test upstream CA");
        let upstream = TlsUpstream::start(&ca).await;
        let proxy = Proxy::start(&[]);
        assert_blind(&proxy, &ca, &upstream).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_host_the_watch_list_does_not_match_is_untouched() {
        let ca = TestCa::new("holdoff test upstream CA");
        let upstream = TlsUpstream::start(&ca).await;
        let proxy = Proxy::start(&["--urls-to-watch", "https://localhost:*/*"]);
        assert_blind(&proxy, &ca, &upstream).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_exclusion_listed_first_wins() {
        let ca = TestCa::new("holdoff test upstream CA");
        let upstream = TlsUpstream::start(&ca).await;
        let excluded = format!("!https://127.0.0.1:{}/*", upstream.addr.port());
        let proxy = Proxy::start(&[
            "--urls-to-watch",
            &excluded,
            "--urls-to-watch",
            WATCH_LOOPBACK,
        ]);
        assert_blind(&proxy, &ca, &upstream).await;
    }
}

mod websocket {
    use super::*;

    /// A blocking WebSocket server on `127.0.0.1:0` that echoes every message on one
    /// connection, optionally over TLS with a certificate from `ca`.
    fn echo_server(tls: Option<&TestCa>) -> SocketAddr {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).expect("bind the echo server");
        let addr = listener.local_addr().expect("echo server address");
        let tls = tls.map(|ca| {
            let (cert, key) = ca.leaf(&[]).rustls();
            let mut config = ServerConfig::builder()
                .with_no_client_auth()
                .with_single_cert(vec![cert], key)
                .expect("echo server TLS config");
            config.alpn_protocols = vec![b"http/1.1".to_vec()];
            Arc::new(config)
        });
        thread::spawn(move || {
            let Ok((tcp, _)) = listener.accept() else {
                return;
            };
            match tls {
                Some(config) => {
                    let Ok(connection) = ServerConnection::new(config) else {
                        return;
                    };
                    echo(StreamOwned::new(connection, tcp));
                }
                None => echo(tcp),
            }
        });
        addr
    }

    fn echo<S: Read + Write>(stream: S) {
        let Ok(mut socket) = tungstenite::accept(stream) else {
            return;
        };
        while let Ok(message) = socket.read() {
            if message.is_close() || socket.send(message).is_err() {
                break;
            }
        }
    }

    /// Sends two messages and checks they come back.
    fn assert_echoes<S: Read + Write>(socket: &mut WebSocket<S>) {
        for text in ["hello", "through holdoff"] {
            socket.send(Message::text(text)).expect("send");
            let reply = socket.read().expect("read the echo");
            assert_eq!(reply.into_text().expect("text"), text);
        }
        let _ = socket.close(None);
    }

    /// Sends a WebSocket upgrade request with `target` as the request target and returns the
    /// stream once the `101` head has been read (byte by byte, so no frame is consumed).
    fn upgrade(mut stream: TcpStream, target: &str, host: &str) -> TcpStream {
        write!(
            stream,
            "GET {target} HTTP/1.1\r\nHost: {host}\r\nUpgrade: websocket\r\n\
             Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\
             Sec-WebSocket-Version: 13\r\n\r\n"
        )
        .expect("send the upgrade");
        let mut head = String::new();
        let mut reader = BufReader::new(&stream);
        loop {
            let mut line = String::new();
            // BufReader could read ahead past the head; the server sends nothing before
            // the client's first frame, so there is nothing to read ahead.
            reader
                .read_line(&mut line)
                .expect("read the upgrade response");
            if line == "\r\n" || line.is_empty() {
                break;
            }
            head.push_str(&line);
        }
        assert!(head.starts_with("HTTP/1.1 101"), "{head}");
        // RFC 6455's own example key and accept value.
        assert!(
            head.to_lowercase()
                .contains("sec-websocket-accept: s3pplmbitxaq9kygzzhzrbk+xoo="),
            "{head}"
        );
        stream
    }

    #[test]
    fn an_upgrade_passes_through_the_forward_proxy() {
        let echo = echo_server(None);
        let proxy = Proxy::start(&[]);
        let stream = TcpStream::connect(proxy.addr).expect("connect to the proxy");

        let stream = upgrade(stream, &format!("http://{echo}/echo"), &echo.to_string());

        assert_echoes(&mut WebSocket::from_raw_socket(stream, Role::Client, None));
    }

    #[test]
    fn an_upgrade_passes_through_reverse_mode() {
        let echo = echo_server(None);
        let proxy = Proxy::start(&["--upstream", &format!("http://{echo}")]);
        let stream = TcpStream::connect(proxy.addr).expect("connect to the proxy");

        let stream = upgrade(stream, "/echo", &proxy.addr.to_string());

        assert_echoes(&mut WebSocket::from_raw_socket(stream, Role::Client, None));
    }

    #[test]
    fn wss_passes_through_an_intercepted_tunnel() {
        let ca = TestCa::new("holdoff test upstream CA");
        let echo = echo_server(Some(&ca));
        let proxy = Proxy::start(&[
            "--urls-to-watch",
            WATCH_LOOPBACK,
            "--upstream-ca",
            &ca.pem_path_str(),
        ]);
        let exported = std::fs::read(proxy.export_ca()).expect("read the exported CA");
        let mut tcp = TcpStream::connect(proxy.addr).expect("connect to the proxy");
        write!(tcp, "CONNECT {echo} HTTP/1.1\r\nHost: {echo}\r\n\r\n").expect("CONNECT");
        let mut head = Vec::new();
        while !head.ends_with(b"\r\n\r\n") {
            let mut byte = [0];
            tcp.read_exact(&mut byte)
                .expect("read the CONNECT response");
            head.push(byte[0]);
        }
        let head = String::from_utf8_lossy(&head);
        assert!(head.starts_with("HTTP/1.1 200"), "{head}");

        let mut roots = RootCertStore::empty();
        for cert in CertificateDer::pem_slice_iter(&exported) {
            roots.add(cert.expect("a certificate")).expect("a root");
        }
        let mut config = ClientConfig::builder()
            .with_root_certificates(roots)
            .with_no_client_auth();
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        let name = ServerName::IpAddress(Ipv4Addr::LOCALHOST.into());
        let connection = ClientConnection::new(Arc::new(config), name).expect("TLS client");
        let tls = StreamOwned::new(connection, tcp);
        let (mut socket, response) =
            tungstenite::client(format!("wss://{echo}/echo"), tls).expect("WebSocket handshake");

        assert_eq!(response.status(), 101);
        assert_echoes(&mut socket);
    }
}

mod shutdown {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn sigterm_stops_the_proxy_with_exit_status_0() {
        let server = TestServer::start().await;
        let proxy = Proxy::start(&[]);
        curl_ok(&["-x", &proxy.url(), &server.url("/before-stop")]).await;

        let status = tokio::task::spawn_blocking(move || proxy.terminate())
            .await
            .expect("terminate");

        assert!(status.success(), "{status}");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_request_cut_when_the_grace_period_ends_is_logged() {
        let server = TestServer::start().await;
        server.script(
            "/slow",
            [Reply::ok("too late").delay(Duration::from_secs(60))],
        );
        let proxy = Proxy::start(&["--grace", "200ms"]);
        let (proxy_url, url) = (proxy.url(), server.url("/slow"));
        let client = tokio::spawn(async move {
            curl_async(&[
                "-o",
                "/dev/null",
                "-w",
                "%{http_code}",
                "-x",
                &proxy_url,
                &url,
            ])
            .await
        });
        server.wait_for_requests(1).await;

        let log = proxy.log_handle();
        let status = tokio::task::spawn_blocking(move || proxy.terminate())
            .await
            .expect("terminate");
        assert!(status.success(), "{status}");
        let output = client.await.expect("curl");
        assert_eq!(
            String::from_utf8_lossy(&output.stdout),
            "000",
            "no response"
        );
        let cut = "cut: the proxy shut down and the grace period ended before the response";
        let log = log_when(&log, cut);
        let line = log
            .lines()
            .find(|line| line.contains(cut))
            .unwrap_or_else(|| panic!("no line says the request was cut:\n{log}"));
        assert!(line.contains("/slow"), "{line}");
    }
}
