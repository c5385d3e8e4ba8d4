//! The proxy engine in process, against real upstreams on loopback: forwarding, reverse mode,
//! tunnels, interception, the stage pipeline, client identity, safety answers and shutdown.
//!
//! Clients are hyper's low-level HTTP/1.1 connections (so the test decides the exact request
//! target, as a proxy client would) or raw TCP for traffic no client library would send.

// The helpers outside the test functions fail the test by panicking, as the tests do.
#![allow(clippy::unwrap_used)]

mod support;

use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use holdoff_proxy::tls::{CertificateAuthority, LeafCache};
use holdoff_proxy::{
    Action, Body, CaSource, ClientId, ClientIdMode, ErrorKind, Mode, ProxyConfig, ProxyServer,
    RequestMeta, Stage,
};
use holdoff_testkit::{Reply, TestServer};
use http::header::{HOST, PROXY_AUTHORIZATION};
use http::{Method, Request, Response, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Notify, oneshot};

use support::InProcess as Proxy;

/// A configuration listening on a free loopback port.
fn config() -> ProxyConfig {
    let mut config = ProxyConfig::default();
    config.listen = SocketAddr::from((Ipv4Addr::LOCALHOST, 0));
    config
}

/// An HTTP/1.1 request with an empty body and these headers.
fn request(method: Method, target: &str, headers: &[(&str, &str)]) -> Request<Full<Bytes>> {
    let mut builder = Request::builder().method(method).uri(target);
    for (name, value) in headers {
        builder = builder.header(*name, *value);
    }
    builder.body(Full::new(Bytes::new())).unwrap()
}

/// Sends one request on a new connection to `addr` and reads the whole response.
async fn send(addr: SocketAddr, request: Request<Full<Bytes>>) -> Response<Bytes> {
    let stream = TcpStream::connect(addr).await.unwrap();
    let (mut sender, connection) = http1::handshake(TokioIo::new(stream)).await.unwrap();
    tokio::spawn(connection);
    let response = sender.send_request(request).await.unwrap();
    let (parts, body) = response.into_parts();
    let body = body.collect().await.unwrap().to_bytes();
    Response::from_parts(parts, body)
}

/// A forward-proxy request for `url` (absolute-form), with its Host header.
fn proxied(url: &str, headers: &[(&str, &str)]) -> Request<Full<Bytes>> {
    let uri: http::Uri = url.parse().unwrap();
    let host = uri.authority().unwrap().to_string();
    let mut request = request(Method::GET, url, headers);
    request.headers_mut().insert(HOST, host.parse().unwrap());
    request
}

/// Writes raw bytes and reads until the proxy closes the connection.
/// A connection the proxy resets (a stage dropped the request) ends the reading too.
async fn raw(addr: SocketAddr, bytes: impl Into<Vec<u8>>) -> String {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    stream.write_all(&bytes.into()).await.unwrap();
    let mut received = Vec::new();
    if let Err(err) = stream.read_to_end(&mut received).await {
        assert_eq!(err.kind(), std::io::ErrorKind::ConnectionReset, "{err}");
    }
    String::from_utf8_lossy(&received).into_owned()
}

/// Sends `CONNECT authority` on a new connection; returns the response and, on 200, the
/// connection for what follows.
async fn connect(
    proxy: SocketAddr,
    authority: &str,
    headers: &[(&str, &str)],
) -> (StatusCode, Bytes, Option<hyper::upgrade::Upgraded>) {
    let stream = TcpStream::connect(proxy).await.unwrap();
    let (mut sender, connection) = http1::handshake(TokioIo::new(stream)).await.unwrap();
    tokio::spawn(connection.with_upgrades());
    let headers = [&[("host", authority)], headers].concat();
    let response = sender
        .send_request(request(Method::CONNECT, authority, &headers))
        .await
        .unwrap();
    let status = response.status();
    if status != StatusCode::OK {
        let body = response.into_body().collect().await.unwrap().to_bytes();
        return (status, body, None);
    }
    let upgraded = hyper::upgrade::on(response).await.unwrap();
    (status, Bytes::new(), Some(upgraded))
}

/// `Proxy-Authorization: Basic …` for `user:password`.
fn basic(user_password: &str) -> String {
    use headers::HeaderMapExt;
    let (user, password) = user_password.split_once(':').unwrap();
    let mut map = http::HeaderMap::new();
    map.typed_insert(headers::ProxyAuthorization(
        headers::Authorization::basic(user, password).0,
    ));
    map[PROXY_AUTHORIZATION].to_str().unwrap().to_owned()
}

/// A port nothing listens on.
async fn closed_port() -> u16 {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await.unwrap();
    listener.local_addr().unwrap().port()
}

/// Answers every request itself with 429, without the upstream.
struct Throttle;

impl Stage for Throttle {
    fn on_request(&self, _: Request<Body>, _: &RequestMeta) -> Action {
        let mut response = Response::new(Body::from("slow down\n"));
        *response.status_mut() = StatusCode::TOO_MANY_REQUESTS;
        response
            .headers_mut()
            .insert("retry-after", "2".parse().unwrap());
        Action::Respond(response)
    }
}

/// Adds `x-seen-by: holdoff` to every response.
struct Tag;

impl Stage for Tag {
    fn on_request(&self, request: Request<Body>, _: &RequestMeta) -> Action {
        Action::Continue(request)
    }

    fn on_response(&self, response: &mut Response<Body>, _: &RequestMeta) {
        response
            .headers_mut()
            .insert("x-seen-by", "holdoff".parse().unwrap());
    }
}

/// Keeps every request's metadata.
#[derive(Default)]
struct Record(Mutex<Vec<RequestMeta>>);

impl Record {
    fn seen(&self) -> Vec<RequestMeta> {
        self.0.lock().unwrap().clone()
    }
}

impl Stage for Record {
    fn on_request(&self, request: Request<Body>, meta: &RequestMeta) -> Action {
        self.0.lock().unwrap().push(meta.clone());
        Action::Continue(request)
    }
}

mod forward {
    use super::*;

    #[tokio::test]
    async fn forwards_absolute_form_requests_with_via_and_without_hop_by_hop_fields() {
        let upstream = TestServer::start().await;
        upstream.script("/x", [Reply::ok("hello").header("keep-alive", "timeout=9")]);
        let proxy = Proxy::start(config(), Vec::new()).await;

        let response = send(
            proxy.addr,
            proxied(
                &upstream.url("/x?q=1"),
                &[
                    ("connection", "x-hop"),
                    ("x-hop", "1"),
                    ("keep-alive", "timeout=5"),
                    ("proxy-connection", "keep-alive"),
                    ("te", "gzip"),
                    ("via", "1.0 earlier"),
                    ("x-end-to-end", "kept"),
                ],
            ),
        )
        .await;

        assert_eq!(response.status(), StatusCode::OK);
        assert_eq!(response.body(), "hello");
        let via: Vec<_> = response.headers().get_all("via").iter().collect();
        assert_eq!(via, ["1.1 holdoff"]);
        assert!(!response.headers().contains_key("keep-alive"));

        let seen = upstream.requests_to("/x");
        assert_eq!(seen.len(), 1);
        let request = &seen[0];
        assert_eq!(request.path_and_query(), "/x?q=1", "origin-form upstream");
        let via: Vec<_> = request.headers.get_all("via").iter().collect();
        assert_eq!(via.len(), 2, "{via:?}");
        assert_eq!(via[0], "1.0 earlier");
        assert!(is_holdoff_via(via[1].to_str().unwrap(), "1.1"), "{via:?}");
        for gone in [
            "connection",
            "x-hop",
            "keep-alive",
            "proxy-connection",
            "te",
        ] {
            assert!(!request.headers.contains_key(gone), "{gone} was forwarded");
        }
        assert_eq!(request.header("x-end-to-end"), Some("kept"));
        assert_eq!(request.header("host"), Some(&*upstream.addr().to_string()));

        let summary = proxy.stop().await;
        assert_eq!(summary.requests, 1);
        assert_eq!(summary.by_class[1], 1);
    }

    #[tokio::test]
    async fn replaces_a_host_that_disagrees_with_the_target() {
        let upstream = TestServer::start().await;
        let proxy = Proxy::start(config(), Vec::new()).await;
        let url = upstream.url("/host");
        send(
            proxy.addr,
            request(Method::GET, &url, &[("host", "elsewhere.example")]),
        )
        .await;
        let seen = upstream.requests_to("/host");
        assert_eq!(seen[0].header("host"), Some(&*upstream.addr().to_string()));
        proxy.stop().await;
    }

    #[tokio::test]
    async fn keeps_client_and_upstream_connections_alive() {
        let upstream = TestServer::start().await;
        let proxy = Proxy::start(config(), Vec::new()).await;
        // A keep-alive client: its first request goes through the shared pool, the next ones
        // on an upstream connection of its own.
        let stream = TcpStream::connect(proxy.addr).await.unwrap();
        let (mut sender, connection) = http1::handshake(TokioIo::new(stream)).await.unwrap();
        tokio::spawn(connection);
        for _ in 0..3 {
            let response = sender
                .send_request(proxied(&upstream.url("/again"), &[]))
                .await
                .unwrap();
            assert_eq!(response.status(), StatusCode::OK);
            response.into_body().collect().await.unwrap();
        }
        // Another client's first request reuses the pooled connection.
        send(proxy.addr, proxied(&upstream.url("/again"), &[])).await;

        let connections: Vec<u64> = upstream
            .requests_to("/again")
            .iter()
            .map(|request| request.connection)
            .collect();
        assert_eq!(connections.len(), 4);
        assert_eq!(
            connections[1], connections[2],
            "the client's own connection"
        );
        assert_ne!(connections[0], connections[1]);
        assert_eq!(connections[3], connections[0], "the pooled connection");
        proxy.stop().await;
    }

    #[tokio::test]
    async fn recovers_when_the_upstream_closes_a_kept_connection() {
        let upstream = TestServer::start().await;
        upstream.script(
            "/close",
            [
                Reply::ok("1"),
                Reply::ok("2").header("connection", "close"),
                Reply::ok("3").header("connection", "close"),
                Reply::ok("4"),
            ],
        );
        let proxy = Proxy::start(config(), Vec::new()).await;
        let stream = TcpStream::connect(proxy.addr).await.unwrap();
        let (mut sender, connection) = http1::handshake(TokioIo::new(stream)).await.unwrap();
        tokio::spawn(connection);
        for expected in ["1", "2", "3", "4"] {
            let response = sender
                .send_request(proxied(&upstream.url("/close"), &[]))
                .await
                .unwrap();
            assert_eq!(response.status(), StatusCode::OK);
            assert!(!response.headers().contains_key("connection"));
            let body = response.into_body().collect().await.unwrap().to_bytes();
            assert_eq!(body, expected);
        }
        proxy.stop().await;
    }

    #[tokio::test]
    async fn refuses_origin_form_requests_with_a_reason() {
        let proxy = Proxy::start(config(), Vec::new()).await;
        let response = send(proxy.addr, request(Method::GET, "/x", &[("host", "a")])).await;
        assert_eq!(response.status(), StatusCode::BAD_REQUEST);
        let body = String::from_utf8_lossy(response.body()).into_owned();
        assert!(body.contains("absolute-form"), "{body}");
        assert!(
            body.ends_with('\n') && body.lines().count() == 1,
            "{body:?}"
        );
        let summary = proxy.stop().await;
        assert_eq!(summary.errors, 1);
    }

    #[tokio::test]
    async fn answers_502_for_a_closed_port() {
        let proxy = Proxy::start(config(), Vec::new()).await;
        let port = closed_port().await;
        let response = send(
            proxy.addr,
            proxied(&format!("http://127.0.0.1:{port}/x"), &[]),
        )
        .await;
        assert_eq!(response.status(), StatusCode::BAD_GATEWAY);
        let body = String::from_utf8_lossy(response.body()).into_owned();
        assert!(body.contains("could not connect"), "{body}");
        assert_eq!(
            response.headers()["content-type"],
            "text/plain; charset=utf-8"
        );
        proxy.stop().await;
    }

    #[tokio::test]
    async fn answers_504_when_the_upstream_is_too_slow() {
        let upstream = TestServer::start().await;
        upstream.script("/slow", [Reply::ok("late").delay(Duration::MAX)]);
        let mut config = config();
        config.upstream_timeout = Duration::from_millis(50);
        let proxy = Proxy::start(config, Vec::new()).await;
        let response = send(proxy.addr, proxied(&upstream.url("/slow"), &[])).await;
        assert_eq!(response.status(), StatusCode::GATEWAY_TIMEOUT);
        proxy.stop().await;
    }

    #[tokio::test]
    async fn times_out_each_request_on_a_connection_of_its_own_from_its_own_start() {
        let upstream = TestServer::start().await;
        let pause = Duration::from_millis(250);
        upstream.script(
            "/slow",
            [
                Reply::ok("1").delay(pause),
                Reply::ok("2").delay(pause),
                Reply::ok("3").delay(pause),
                Reply::ok("never").delay(Duration::MAX),
                Reply::ok("5"),
            ],
        );
        let mut config = config();
        config.upstream_timeout = Duration::from_millis(400);
        let proxy = Proxy::start(config, Vec::new()).await;
        let stream = TcpStream::connect(proxy.addr).await.unwrap();
        let (mut sender, connection) = http1::handshake(TokioIo::new(stream)).await.unwrap();
        tokio::spawn(connection);
        // The first through the pool; then on the connection's own, each within the timeout
        // counted from its start, though the third ends after the second's deadline; the
        // fourth is over it; the fifth goes out on a new connection of its own.
        for expected in [Some("1"), Some("2"), Some("3"), None, Some("5")] {
            let response = sender
                .send_request(proxied(&upstream.url("/slow"), &[]))
                .await
                .unwrap();
            let status = response.status();
            let body = response.into_body().collect().await.unwrap().to_bytes();
            match expected {
                Some(expected) => {
                    assert_eq!(status, StatusCode::OK);
                    assert_eq!(body, expected);
                }
                None => {
                    assert_eq!(status, StatusCode::GATEWAY_TIMEOUT);
                    let body = String::from_utf8_lossy(&body);
                    assert!(body.contains("did not answer within 0.4s"), "{body}");
                }
            }
        }
        let connections: Vec<u64> = upstream
            .requests_to("/slow")
            .iter()
            .map(|request| request.connection)
            .collect();
        assert_eq!(connections[1], connections[3], "{connections:?}");
        assert_ne!(connections[4], connections[3], "{connections:?}");
        proxy.stop().await;
    }

    #[tokio::test]
    async fn passes_an_upgrade_through_and_relays_both_ways() {
        let upstream = EchoUpgrade::start().await;
        let proxy = Proxy::start(config(), Vec::new()).await;
        let stream = TcpStream::connect(proxy.addr).await.unwrap();
        let (mut sender, connection) = http1::handshake(TokioIo::new(stream)).await.unwrap();
        tokio::spawn(connection.with_upgrades());
        let url = format!("http://{upstream}/ws");
        let mut request = proxied(&url, &[("connection", "upgrade"), ("upgrade", "echo")]);
        request.headers_mut().insert("x-kept", "1".parse().unwrap());
        let response = sender.send_request(request).await.unwrap();
        assert_eq!(response.status(), StatusCode::SWITCHING_PROTOCOLS);
        assert_eq!(response.headers()["upgrade"], "echo");
        let mut io = TokioIo::new(hyper::upgrade::on(response).await.unwrap());
        io.write_all(b"ping").await.unwrap();
        let mut echoed = [0u8; 4];
        io.read_exact(&mut echoed).await.unwrap();
        assert_eq!(&echoed, b"ping");
        drop(io);
        proxy.stop().await;
    }

    /// An upstream that switches to an echo protocol on `Upgrade: echo`.
    struct EchoUpgrade;

    impl EchoUpgrade {
        async fn start() -> SocketAddr {
            let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await.unwrap();
            let addr = listener.local_addr().unwrap();
            tokio::spawn(async move {
                while let Ok((stream, _)) = listener.accept().await {
                    let service = hyper::service::service_fn(
                        |mut request: Request<hyper::body::Incoming>| async move {
                            let wanted =
                                request.headers().get("upgrade") == Some(&"echo".parse().unwrap())
                                    && request.headers().get("connection").is_some_and(|v| {
                                        v.as_bytes().eq_ignore_ascii_case(b"upgrade")
                                    });
                            let mut response = Response::new(Full::new(Bytes::new()));
                            if !wanted {
                                *response.status_mut() = StatusCode::BAD_REQUEST;
                                return Ok::<_, std::convert::Infallible>(response);
                            }
                            let upgrade = hyper::upgrade::on(&mut request);
                            tokio::spawn(async move {
                                let mut io = TokioIo::new(upgrade.await.unwrap());
                                let mut buf = [0u8; 64];
                                while let Ok(n) = io.read(&mut buf).await {
                                    if n == 0 || io.write_all(&buf[..n]).await.is_err() {
                                        break;
                                    }
                                }
                            });
                            *response.status_mut() = StatusCode::SWITCHING_PROTOCOLS;
                            response
                                .headers_mut()
                                .insert("connection", "upgrade".parse().unwrap());
                            response
                                .headers_mut()
                                .insert("upgrade", "echo".parse().unwrap());
                            Ok(response)
                        },
                    );
                    tokio::spawn(
                        hyper::server::conn::http1::Builder::new()
                            .serve_connection(TokioIo::new(stream), service)
                            .with_upgrades(),
                    );
                }
            });
            addr
        }
    }

    #[tokio::test]
    async fn refuses_a_request_addressed_to_itself() {
        let proxy = Proxy::start(config(), Vec::new()).await;
        let url = format!("http://{}/loop", proxy.addr);
        let response = send(proxy.addr, proxied(&url, &[])).await;
        assert_eq!(response.status(), StatusCode::LOOP_DETECTED);
        proxy.stop().await;
    }
}

mod reverse {
    use super::*;

    #[tokio::test]
    async fn sends_every_request_to_the_upstream_with_its_host() {
        let upstream = TestServer::start().await;
        upstream.script("/api/items", [Reply::ok("items")]);
        let mut config = config();
        config.upstream = Some(upstream.url("").trim_end_matches('/').parse().unwrap());
        let record = Arc::new(Record::default());
        let proxy = Proxy::start(config, vec![record.clone()]).await;

        let response = send(
            proxy.addr,
            request(Method::GET, "/api/items?page=2", &[("host", "app.local")]),
        )
        .await;

        assert_eq!(response.status(), StatusCode::OK);
        assert_eq!(response.body(), "items");
        let seen = upstream.requests_to("/api/items");
        assert_eq!(seen[0].path_and_query(), "/api/items?page=2");
        assert_eq!(seen[0].header("host"), Some(&*upstream.addr().to_string()));
        assert!(
            seen[0]
                .header("via")
                .is_some_and(|via| is_holdoff_via(via, "1.1")),
            "{:?}",
            seen[0].header("via")
        );
        let meta = &record.seen()[0];
        assert_eq!(meta.mode, Mode::Reverse);
        assert_eq!(meta.target.to_string(), upstream.url("/api/items?page=2"));
        assert_eq!(
            meta.watched.as_deref(),
            Some("*"),
            "reverse mode watches everything"
        );
        proxy.stop().await;
    }
}

mod stages {
    use super::*;

    #[tokio::test]
    async fn a_stage_answers_without_the_upstream() {
        let upstream = TestServer::start().await;
        let proxy = Proxy::start(config(), vec![Arc::new(Throttle)]).await;
        let response = send(proxy.addr, proxied(&upstream.url("/limited"), &[])).await;
        assert_eq!(response.status(), StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(response.headers()["retry-after"], "2");
        assert_eq!(response.body(), "slow down\n");
        assert!(
            upstream.requests().is_empty(),
            "the upstream saw the request"
        );
        let summary = proxy.stop().await;
        assert_eq!(summary.by_class[3], 1);
    }

    #[tokio::test]
    async fn a_stage_modifies_responses_including_those_answered_by_a_later_stage() {
        let upstream = TestServer::start().await;
        let proxy = Proxy::start(config(), vec![Arc::new(Tag)]).await;
        let response = send(proxy.addr, proxied(&upstream.url("/tagged"), &[])).await;
        assert_eq!(response.headers()["x-seen-by"], "holdoff");
        proxy.stop().await;

        let proxy = Proxy::start(config(), vec![Arc::new(Tag), Arc::new(Throttle)]).await;
        let response = send(proxy.addr, proxied(&upstream.url("/tagged"), &[])).await;
        assert_eq!(response.status(), StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(response.headers()["x-seen-by"], "holdoff");
        proxy.stop().await;

        // A stage after the one that answered never saw the request, nor its answer.
        let proxy = Proxy::start(config(), vec![Arc::new(Throttle), Arc::new(Tag)]).await;
        let response = send(proxy.addr, proxied(&upstream.url("/tagged"), &[])).await;
        assert!(!response.headers().contains_key("x-seen-by"));
        proxy.stop().await;
    }

    #[tokio::test]
    async fn proxy_made_answers_pass_through_stages() {
        let proxy = Proxy::start(config(), vec![Arc::new(Tag)]).await;
        let port = closed_port().await;
        let response = send(
            proxy.addr,
            proxied(&format!("http://127.0.0.1:{port}/"), &[]),
        )
        .await;
        assert_eq!(response.status(), StatusCode::BAD_GATEWAY);
        assert_eq!(response.headers()["x-seen-by"], "holdoff");
        proxy.stop().await;
    }

    #[tokio::test]
    async fn a_stage_can_decide_later_and_abort() {
        struct Later;
        impl Stage for Later {
            fn on_request(&self, request: Request<Body>, _: &RequestMeta) -> Action {
                Action::later(async move { Action::Continue(request) })
            }
        }
        struct Dropper;
        impl Stage for Dropper {
            fn on_request(&self, _: Request<Body>, _: &RequestMeta) -> Action {
                Action::Abort
            }
        }
        let upstream = TestServer::start().await;
        let proxy = Proxy::start(config(), vec![Arc::new(Later)]).await;
        let response = send(proxy.addr, proxied(&upstream.url("/later"), &[])).await;
        assert_eq!(response.status(), StatusCode::OK);
        proxy.stop().await;

        let proxy = Proxy::start(config(), vec![Arc::new(Dropper)]).await;
        let url = upstream.url("/dropped");
        let text = raw(
            proxy.addr,
            format!("GET {url} HTTP/1.1\r\nhost: {}\r\n\r\n", upstream.addr()),
        )
        .await;
        assert_eq!(text, "", "closed without an answer");
        let summary = proxy.stop().await;
        assert_eq!(summary.aborted, 1);
    }
}

mod identity {
    use super::*;

    #[tokio::test]
    async fn comes_from_proxy_credentials_then_the_header_then_the_peer() {
        let upstream = TestServer::start().await;
        let record = Arc::new(Record::default());
        let mut config = config();
        config.client_id = ClientIdMode::Peer;
        let proxy = Proxy::start(config, vec![record.clone()]).await;
        let url = upstream.url("/who");
        let alice = basic("alice:");

        send(
            proxy.addr,
            proxied(&url, &[("proxy-authorization", &alice)]),
        )
        .await;
        send(
            proxy.addr,
            proxied(
                &url,
                &[("proxy-authorization", &alice), ("x-holdoff-client", "bob")],
            ),
        )
        .await;
        send(proxy.addr, proxied(&url, &[("x-holdoff-client", " bob ")])).await;
        send(proxy.addr, proxied(&url, &[])).await;

        let clients: Vec<ClientId> = record.seen().into_iter().map(|meta| meta.client).collect();
        assert_eq!(
            clients,
            [
                ClientId::ProxyUser("alice".into()),
                ClientId::ProxyUser("alice".into()),
                ClientId::Header("bob".into()),
                ClientId::Peer(Ipv4Addr::LOCALHOST.into()),
            ]
        );
        for request in upstream.requests_to("/who") {
            assert!(!request.headers.contains_key("x-holdoff-client"));
            assert!(!request.headers.contains_key("proxy-authorization"));
        }
        proxy.stop().await;
    }

    #[cfg(target_os = "linux")]
    #[tokio::test]
    async fn a_loopback_client_that_names_no_one_is_its_process() {
        let upstream = TestServer::start().await;
        let record = Arc::new(Record::default());
        let proxy = Proxy::start(config(), vec![record.clone()]).await;
        let url = upstream.url("/who");
        send(proxy.addr, proxied(&url, &[])).await;
        send(proxy.addr, proxied(&url, &[("x-holdoff-client", "bob")])).await;
        let clients: Vec<ClientId> = record.seen().into_iter().map(|meta| meta.client).collect();
        assert!(
            matches!(&clients[0], ClientId::Process { pid, .. } if *pid == std::process::id()),
            "this test's own process: {clients:?}"
        );
        assert_eq!(
            clients[1],
            ClientId::Header("bob".into()),
            "a name still wins"
        );
        proxy.stop().await;
    }

    #[tokio::test]
    async fn numbers_requests_and_records_receipt() {
        let upstream = TestServer::start().await;
        let record = Arc::new(Record::default());
        let proxy = Proxy::start(config(), vec![record.clone()]).await;
        send(proxy.addr, proxied(&upstream.url("/a"), &[])).await;
        send(proxy.addr, proxied(&upstream.url("/b"), &[])).await;
        let seen = record.seen();
        assert_eq!(seen[0].id + 1, seen[1].id);
        assert!(seen[0].received.instant <= seen[1].received.instant);
        assert_eq!(seen[0].mode, Mode::Forward);
        assert_eq!(seen[0].method, Method::GET);
        assert_eq!(seen[0].watched, None, "no watch list, nothing watched");
        proxy.stop().await;
    }
}

mod safety {
    use super::*;

    #[tokio::test]
    async fn refuses_a_non_loopback_address_without_credentials() {
        let mut config = config();
        config.listen = SocketAddr::from((Ipv4Addr::UNSPECIFIED, 0));
        let err = ProxyServer::bind(config, Vec::new()).await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Config);
        let reason = err.config().unwrap().to_string();
        assert!(reason.contains("anyone on the network"), "{reason}");
    }

    #[tokio::test]
    async fn asks_for_credentials_when_they_are_configured() {
        let upstream = TestServer::start().await;
        let mut config = config();
        config.proxy_auth = Some("alice:secret".parse().unwrap());
        let proxy = Proxy::start(config, Vec::new()).await;

        let response = send(proxy.addr, proxied(&upstream.url("/private"), &[])).await;
        assert_eq!(response.status(), StatusCode::PROXY_AUTHENTICATION_REQUIRED);
        assert_eq!(
            response.headers()["proxy-authenticate"],
            "Basic realm=\"holdoff\""
        );
        let wrong = basic("alice:guess");
        let response = send(
            proxy.addr,
            proxied(
                &upstream.url("/private"),
                &[("proxy-authorization", &wrong)],
            ),
        )
        .await;
        assert_eq!(response.status(), StatusCode::PROXY_AUTHENTICATION_REQUIRED);
        assert!(upstream.requests().is_empty());

        let right = basic("alice:secret");
        let response = send(
            proxy.addr,
            proxied(
                &upstream.url("/private"),
                &[("proxy-authorization", &right)],
            ),
        )
        .await;
        assert_eq!(response.status(), StatusCode::OK);

        let (status, _, _) = connect(proxy.addr, &upstream.addr().to_string(), &[]).await;
        assert_eq!(status, StatusCode::PROXY_AUTHENTICATION_REQUIRED);
        proxy.stop().await;
    }

    #[tokio::test]
    async fn answers_431_to_a_huge_header_instead_of_resetting() {
        let mut config = config();
        config.max_header_bytes = 8 * 1024;
        let proxy = Proxy::start(config, Vec::new()).await;
        let huge = "a".repeat(256 * 1024);
        let text = raw(
            proxy.addr,
            format!("GET http://127.0.0.1:1/ HTTP/1.1\r\nhost: x\r\nx-huge: {huge}\r\n\r\n"),
        )
        .await;
        assert!(
            text.starts_with("HTTP/1.1 431"),
            "{}",
            &text[..text.len().min(200)]
        );
        assert!(
            text.contains("\r\ncontent-type: text/plain; charset=utf-8\r\n"),
            "{text}"
        );
        assert!(
            text.ends_with("\r\n\r\nholdoff: the request head is larger than 8192 bytes\n"),
            "{text}"
        );
        let summary = proxy.stop().await;
        assert_eq!(summary.by_class[3], 1);
        assert_eq!(summary.errors, 1);
    }

    #[tokio::test]
    async fn answers_502_saying_so_to_an_upstream_head_over_64_kib() {
        let upstream = TestServer::start().await;
        upstream.set_default("/small", Reply::ok("small"));
        upstream.set_default(
            "/32k",
            Reply::ok("fits").header("x-big", &"a".repeat(32 * 1024)),
        );
        upstream.set_default(
            "/100k",
            Reply::ok("too big").header("x-big", &"a".repeat(100 * 1024)),
        );
        // A little over the limit, in 70 fields: hyper alone let it through or not by how the
        // bytes arrived.
        let mut seventy = Reply::ok("too big");
        for i in 0..70 {
            seventy = seventy.header(&format!("x-pad-{i}"), &"a".repeat(1000));
        }
        upstream.set_default("/70k", seventy);
        let proxy = Proxy::start(config(), Vec::new()).await;
        let refused = |response: &Response<Bytes>| {
            assert_eq!(response.status(), StatusCode::BAD_GATEWAY);
            let body = String::from_utf8_lossy(response.body()).into_owned();
            assert!(
                body.contains("sent a response head larger than 64 KiB"),
                "{body}"
            );
        };

        // A connection's first request goes through the shared pool.
        let response = send(proxy.addr, proxied(&upstream.url("/32k"), &[])).await;
        assert_eq!(response.status(), StatusCode::OK);
        refused(&send(proxy.addr, proxied(&upstream.url("/100k"), &[])).await);

        // Later ones through the client's own upstream connection: the same limit.
        let stream = TcpStream::connect(proxy.addr).await.unwrap();
        let (mut sender, connection) = http1::handshake(TokioIo::new(stream)).await.unwrap();
        tokio::spawn(connection);
        for (path, status) in [
            ("/small", StatusCode::OK),
            ("/32k", StatusCode::OK),
            ("/100k", StatusCode::BAD_GATEWAY),
        ]
        .into_iter()
        .chain([("/70k", StatusCode::BAD_GATEWAY); 6])
        {
            let response = sender
                .send_request(proxied(&upstream.url(path), &[]))
                .await
                .unwrap();
            let (parts, body) = response.into_parts();
            let response = Response::from_parts(parts, body.collect().await.unwrap().to_bytes());
            if status == StatusCode::OK {
                assert_eq!(response.status(), status, "{path}");
            } else {
                refused(&response);
            }
        }
        proxy.stop().await;
    }

    #[tokio::test]
    async fn answers_400_to_garbage_and_keeps_serving() {
        let upstream = TestServer::start().await;
        let proxy = Proxy::start(config(), Vec::new()).await;
        let text = raw(proxy.addr, b"\x16\x03\x01 this is not http\r\n\r\n").await;
        assert!(text.starts_with("HTTP/1.1 400"), "{text}");
        assert!(text.ends_with("could not be parsed\n"), "{text}");
        // Also after a request that was served on the same connection.
        let served = format!(
            "GET {} HTTP/1.1\r\nhost: {}\r\n\r\nNOT HTTP\r\n\r\n",
            upstream.url("/first"),
            upstream.addr()
        );
        let text = raw(proxy.addr, served).await;
        assert!(text.starts_with("HTTP/1.1 200"), "{text}");
        assert!(text.contains("HTTP/1.1 400 Bad Request\r\n"), "{text}");
        assert!(text.ends_with("could not be parsed\n"), "{text}");
        let response = send(proxy.addr, proxied(&upstream.url("/after"), &[])).await;
        assert_eq!(response.status(), StatusCode::OK);
        proxy.stop().await;
    }

    #[tokio::test]
    async fn closes_a_connection_that_says_nothing() {
        let mut config = config();
        config.idle_timeout = Duration::from_millis(50);
        let proxy = Proxy::start(config, Vec::new()).await;
        let text = raw(proxy.addr, b"").await;
        assert_eq!(text, "");
        proxy.stop().await;
    }
}

mod connect {
    use super::*;

    #[tokio::test]
    async fn tunnels_an_unwatched_host_blind() {
        let upstream = TestServer::start().await;
        let record = Arc::new(Record::default());
        let proxy = Proxy::start(config(), vec![record.clone()]).await;
        let (status, _, tunnel) = connect(proxy.addr, &upstream.addr().to_string(), &[]).await;
        assert_eq!(status, StatusCode::OK);

        let (mut sender, connection) = http1::handshake(tunnel.unwrap()).await.unwrap();
        let connection = tokio::spawn(connection);
        let response = sender
            .send_request(request(
                Method::GET,
                "/inside",
                &[("host", &upstream.addr().to_string())],
            ))
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::OK);
        response.into_body().collect().await.unwrap();
        // The client closes the tunnel, so shutdown has nothing to wait for.
        drop(sender);
        connection.await.unwrap().unwrap();

        let seen = upstream.requests_to("/inside");
        assert!(
            !seen[0].headers.contains_key("via"),
            "a blind tunnel changed bytes"
        );
        assert!(record.seen().is_empty(), "stages saw a tunnelled request");
        let summary = proxy.stop().await;
        assert_eq!(summary.tunnels, 1);
        assert_eq!(summary.cut, 0);
    }

    #[tokio::test]
    async fn answers_502_for_a_closed_port() {
        let proxy = Proxy::start(config(), Vec::new()).await;
        let port = closed_port().await;
        let (status, body, _) = connect(proxy.addr, &format!("127.0.0.1:{port}"), &[]).await;
        assert_eq!(status, StatusCode::BAD_GATEWAY);
        assert!(String::from_utf8_lossy(&body).contains("could not connect"));
        proxy.stop().await;
    }

    #[tokio::test]
    async fn intercepts_a_watched_host_over_http1_and_http2() {
        let (ca, upstream_tls, ca_file) = trusted_upstream().await;
        let config = intercepting(&ca, Some(&ca_file));
        let record = Arc::new(Record::default());
        let proxy = Proxy::start(config, vec![record.clone(), Arc::new(Tag)]).await;

        // The second tunnel names its client in the CONNECT: every request inside is hers.
        let carol = basic("carol:");
        let tunnels = [
            (b"http/1.1".as_slice(), Vec::new()),
            (
                b"h2".as_slice(),
                vec![("proxy-authorization", carol.as_str())],
            ),
        ];
        for (alpn, headers) in tunnels {
            let authority = upstream_tls.addr.to_string();
            let (status, _, tunnel) = connect(proxy.addr, &authority, &headers).await;
            assert_eq!(status, StatusCode::OK);
            let tls = tls_client(TokioIo::new(tunnel.unwrap()), &ca, alpn).await;
            let negotiated = tls.get_ref().1.alpn_protocol().map(<[u8]>::to_vec);
            assert_eq!(negotiated.as_deref(), Some(alpn));
            let response = if alpn == b"h2" {
                let (mut sender, connection) = hyper::client::conn::http2::handshake(
                    hyper_util::rt::TokioExecutor::new(),
                    TokioIo::new(tls),
                )
                .await
                .unwrap();
                tokio::spawn(connection);
                let uri = format!("https://{authority}/secure");
                sender
                    .send_request(request(Method::GET, &uri, &[]))
                    .await
                    .unwrap()
            } else {
                let (mut sender, connection) = http1::handshake(TokioIo::new(tls)).await.unwrap();
                tokio::spawn(connection);
                sender
                    .send_request(request(Method::GET, "/secure", &[("host", &authority)]))
                    .await
                    .unwrap()
            };
            assert_eq!(response.status(), StatusCode::OK);
            assert_eq!(response.headers()["x-seen-by"], "holdoff");
            let body = response.into_body().collect().await.unwrap().to_bytes();
            assert_eq!(body, "secret");
        }

        let seen = upstream_tls.seen();
        assert_eq!(seen.len(), 2);
        assert!(
            seen.iter()
                .all(|seen| seen
                    .via
                    .as_deref()
                    .is_some_and(|via| is_holdoff_via(via, "1.1") || is_holdoff_via(via, "2"))),
            "{seen:?}"
        );
        let metas = record.seen();
        assert!(metas.iter().all(|meta| meta.mode == Mode::Intercepted));
        assert_eq!(
            metas[0].target.to_string(),
            format!("https://{}/secure", upstream_tls.addr)
        );
        assert_eq!(metas[0].watched.as_deref(), Some("https://127.0.0.1:*/*"));
        assert!(
            matches!(&metas[0].client, ClientId::Process { pid, .. } if *pid == std::process::id()),
            "the tunnel's client is this test's process: {:?}",
            metas[0].client
        );
        assert_eq!(metas[1].client, ClientId::ProxyUser("carol".into()));
        let summary = proxy.stop().await;
        assert_eq!(summary.intercepted, 2);
    }

    #[tokio::test]
    async fn answers_502_saying_why_when_the_upstream_certificate_is_untrusted() {
        let ca = Arc::new(CertificateAuthority::ephemeral().unwrap());
        let upstream_tls = TlsUpstream::start(&ca).await;
        let mut config = config();
        config.upstream = Some(format!("https://{}", upstream_tls.addr).parse().unwrap());
        let proxy = Proxy::start(config, Vec::new()).await;
        let response = send(
            proxy.addr,
            request(Method::GET, "/secure", &[("host", "x")]),
        )
        .await;
        assert_eq!(response.status(), StatusCode::BAD_GATEWAY);
        let body = String::from_utf8_lossy(response.body()).into_owned();
        assert!(
            body.contains("not trusted") && body.contains("--upstream-ca"),
            "{body}"
        );
        proxy.stop().await;
    }

    #[tokio::test]
    async fn an_http1_tunnel_gets_an_upstream_connection_of_its_own() {
        let (ca, upstream_tls, ca_file) = trusted_upstream().await;
        let proxy = Proxy::start(intercepting(&ca, Some(&ca_file)), Vec::new()).await;
        let authority = upstream_tls.addr.to_string();

        // Three requests in one tunnel, the last without `Host` (as HTTP/1.0 allows): the
        // first goes through the shared pool, the next ones on the tunnel's own connection.
        let (status, _, tunnel) = connect(proxy.addr, &authority, &[]).await;
        assert_eq!(status, StatusCode::OK);
        let tls = tls_client(TokioIo::new(tunnel.unwrap()), &ca, b"http/1.1").await;
        // The client offers rustls's default order, AES-256-GCM first; the proxy picks.
        let suite = tls.get_ref().1.negotiated_cipher_suite().unwrap().suite();
        assert_eq!(suite, rustls::CipherSuite::TLS13_AES_128_GCM_SHA256);
        let (mut sender, connection) = http1::handshake(TokioIo::new(tls)).await.unwrap();
        tokio::spawn(connection);
        for host in [Some(authority.as_str()), Some(authority.as_str()), None] {
            let headers: Vec<(&str, &str)> = host.map(|host| ("host", host)).into_iter().collect();
            let mut request = request(Method::GET, "/secure", &headers);
            if host.is_none() {
                *request.version_mut() = http::Version::HTTP_10;
            }
            let response = sender.send_request(request).await.unwrap();
            assert_eq!(response.status(), StatusCode::OK);
            let body = response.into_body().collect().await.unwrap().to_bytes();
            assert_eq!(body, "secret");
        }
        // Another tunnel's first request reuses the pooled connection.
        let mut sender = tunnel_http1(proxy.addr, &authority, &ca).await;
        let response = sender
            .send_request(request(Method::GET, "/secure", &[("host", &authority)]))
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::OK);

        let seen = upstream_tls.seen();
        let connections: Vec<usize> = seen.iter().map(|seen| seen.connection).collect();
        assert_eq!(connections.len(), 4, "{seen:?}");
        assert_eq!(connections[1], connections[2], "the tunnel's own: {seen:?}");
        assert_ne!(connections[0], connections[1], "{seen:?}");
        assert_eq!(connections[3], connections[0], "the pooled one: {seen:?}");
        // Whatever the way out, the upstream gets `Host` and `Via`.
        assert!(
            seen.iter()
                .all(|seen| seen.host.as_deref() == Some(authority.as_str()) && seen.via.is_some()),
            "{seen:?}"
        );
        proxy.stop().await;
    }

    #[tokio::test]
    async fn a_reverse_proxy_to_https_keeps_a_tls_connection_per_client() {
        let (_, upstream_tls, ca_file) = trusted_upstream().await;
        let mut config = config();
        config.upstream = Some(format!("https://{}", upstream_tls.addr).parse().unwrap());
        config.upstream_ca = vec![ca_file.path.clone()];
        let proxy = Proxy::start(config, Vec::new()).await;
        let stream = TcpStream::connect(proxy.addr).await.unwrap();
        let (mut sender, connection) = http1::handshake(TokioIo::new(stream)).await.unwrap();
        tokio::spawn(connection);
        for _ in 0..3 {
            let response = sender
                .send_request(request(Method::GET, "/secure", &[("host", "x")]))
                .await
                .unwrap();
            assert_eq!(response.status(), StatusCode::OK);
            let body = response.into_body().collect().await.unwrap().to_bytes();
            assert_eq!(body, "secret");
        }
        let seen = upstream_tls.seen();
        let connections: Vec<usize> = seen.iter().map(|seen| seen.connection).collect();
        assert_eq!(connections.len(), 3, "{seen:?}");
        assert_ne!(
            connections[0], connections[1],
            "the pool, then its own: {seen:?}"
        );
        assert_eq!(connections[1], connections[2], "{seen:?}");
        let authority = upstream_tls.addr.to_string();
        assert!(
            seen.iter()
                .all(|seen| seen.host.as_deref() == Some(authority.as_str())),
            "{seen:?}"
        );
        proxy.stop().await;
    }

    #[tokio::test]
    async fn every_request_of_a_tunnel_to_an_untrusted_upstream_is_502_saying_why() {
        let ca = Arc::new(CertificateAuthority::ephemeral().unwrap());
        let upstream_tls = TlsUpstream::start(&ca).await;
        // No --upstream-ca: the upstream is not trusted.
        let proxy = Proxy::start(intercepting(&ca, None), Vec::new()).await;
        let authority = upstream_tls.addr.to_string();
        let mut sender = tunnel_http1(proxy.addr, &authority, &ca).await;
        for _ in 0..3 {
            let response = sender
                .send_request(request(Method::GET, "/secure", &[("host", &authority)]))
                .await
                .unwrap();
            assert_eq!(response.status(), StatusCode::BAD_GATEWAY);
            let body = response.into_body().collect().await.unwrap().to_bytes();
            let body = String::from_utf8_lossy(&body);
            assert!(body.contains("not trusted"), "{body}");
        }
        assert!(upstream_tls.seen().is_empty());
        proxy.stop().await;
    }

    /// A CA, an HTTPS upstream with a certificate from it, and the CA's certificate in a file
    /// for `--upstream-ca`.
    async fn trusted_upstream() -> (Arc<CertificateAuthority>, TlsUpstream, TempFile) {
        let ca = Arc::new(CertificateAuthority::ephemeral().unwrap());
        let upstream_tls = TlsUpstream::start(&ca).await;
        let ca_file = TempFile::new("upstream-ca.pem", ca.cert_pem());
        (ca, upstream_tls, ca_file)
    }

    /// A configuration intercepting `https://127.0.0.1:*/*` with `ca`, trusting the upstream
    /// roots in `upstream_ca` if any.
    fn intercepting(ca: &Arc<CertificateAuthority>, upstream_ca: Option<&TempFile>) -> ProxyConfig {
        let mut config = config();
        config.urls_to_watch = vec!["https://127.0.0.1:*/*".parse().unwrap()];
        config.upstream_ca = upstream_ca
            .map(|file| file.path.clone())
            .into_iter()
            .collect();
        config.ca = CaSource::Provided(Arc::clone(ca));
        config
    }

    /// An HTTP/1.1 client inside an intercepted tunnel to `authority`, trusting `ca`.
    async fn tunnel_http1(
        proxy: SocketAddr,
        authority: &str,
        ca: &CertificateAuthority,
    ) -> http1::SendRequest<Full<Bytes>> {
        let (status, _, tunnel) = connect(proxy, authority, &[]).await;
        assert_eq!(status, StatusCode::OK);
        let tls = tls_client(TokioIo::new(tunnel.unwrap()), ca, b"http/1.1").await;
        let (sender, connection) = http1::handshake(TokioIo::new(tls)).await.unwrap();
        tokio::spawn(connection);
        sender
    }

    /// A TLS client trusting only `ca`, offering `alpn`.
    async fn tls_client(
        io: TokioIo<hyper::upgrade::Upgraded>,
        ca: &CertificateAuthority,
        alpn: &[u8],
    ) -> tokio_rustls::client::TlsStream<TokioIo<hyper::upgrade::Upgraded>> {
        let mut roots = rustls::RootCertStore::empty();
        roots.add(ca.cert_der().clone()).unwrap();
        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let mut config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth();
        config.alpn_protocols = vec![alpn.to_vec()];
        let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
        let name = rustls_pki_types::ServerName::try_from("127.0.0.1").unwrap();
        connector.connect(name, io).await.unwrap()
    }

    /// An HTTPS upstream on loopback with a certificate from `ca`: answers `secret` and keeps
    /// what it saw of each request.
    struct TlsUpstream {
        addr: SocketAddr,
        seen: Arc<Mutex<Vec<Seen>>>,
    }

    /// A request as [`TlsUpstream`] saw it.
    #[derive(Clone, Debug)]
    struct Seen {
        /// Which of its connections it came on, counting from 0.
        connection: usize,
        via: Option<String>,
        host: Option<String>,
    }

    impl TlsUpstream {
        async fn start(ca: &Arc<CertificateAuthority>) -> TlsUpstream {
            let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await.unwrap();
            let addr = listener.local_addr().unwrap();
            let config = LeafCache::new(Arc::clone(ca))
                .server_config("127.0.0.1")
                .unwrap();
            let acceptor = tokio_rustls::TlsAcceptor::from(config);
            let seen = Arc::new(Mutex::new(Vec::new()));
            let log = Arc::clone(&seen);
            tokio::spawn(async move {
                for connection in 0.. {
                    let Ok((stream, _)) = listener.accept().await else {
                        return;
                    };
                    let acceptor = acceptor.clone();
                    let log = Arc::clone(&log);
                    tokio::spawn(async move {
                        let Ok(tls) = acceptor.accept(stream).await else {
                            return;
                        };
                        let service = hyper::service::service_fn(
                            move |request: Request<hyper::body::Incoming>| {
                                let header = |name: &str| {
                                    request
                                        .headers()
                                        .get(name)
                                        .and_then(|v| v.to_str().ok())
                                        .map(str::to_owned)
                                };
                                log.lock().unwrap().push(Seen {
                                    connection,
                                    via: header("via"),
                                    host: header("host"),
                                });
                                async {
                                    Ok::<_, std::convert::Infallible>(Response::new(Full::new(
                                        Bytes::from_static(b"secret"),
                                    )))
                                }
                            },
                        );
                        let _ = hyper_util::server::conn::auto::Builder::new(
                            hyper_util::rt::TokioExecutor::new(),
                        )
                        .serve_connection(TokioIo::new(tls), service)
                        .await;
                    });
                }
            });
            TlsUpstream { addr, seen }
        }

        fn seen(&self) -> Vec<Seen> {
            self.seen.lock().unwrap().clone()
        }
    }

    /// A file in the temporary directory, removed when dropped.
    struct TempFile {
        path: PathBuf,
    }

    impl TempFile {
        fn new(name: &str, contents: &str) -> TempFile {
            let path = std::env::temp_dir().join(format!(
                "holdoff-engine-{}-{:?}-{name}",
                std::process::id(),
                std::thread::current().id()
            ));
            std::fs::write(&path, contents).unwrap();
            TempFile { path }
        }
    }

    impl Drop for TempFile {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

mod shutdown {
    use super::*;

    /// Holds each request until released.
    struct Gate {
        entered: Arc<Notify>,
        release: Mutex<Option<oneshot::Receiver<()>>>,
    }

    impl Stage for Gate {
        fn on_request(&self, request: Request<Body>, _: &RequestMeta) -> Action {
            self.entered.notify_one();
            let release = self.release.lock().unwrap().take();
            Action::later(async move {
                if let Some(release) = release {
                    let _ = release.await;
                }
                Action::Continue(request)
            })
        }
    }

    #[tokio::test]
    async fn finishes_a_request_in_flight_then_stops() {
        let upstream = TestServer::start().await;
        let entered = Arc::new(Notify::new());
        let (release, released) = oneshot::channel();
        let gate = Gate {
            entered: Arc::clone(&entered),
            release: Mutex::new(Some(released)),
        };
        let proxy = Proxy::start(config(), vec![Arc::new(gate)]).await;
        let addr = proxy.addr;
        let in_flight = tokio::spawn(send(addr, proxied(&upstream.url("/slow"), &[])));
        entered.notified().await;

        proxy.handle.shutdown();
        // The listener closes; the request in flight goes on.
        tokio::task::yield_now().await;
        release.send(()).unwrap();
        let response = in_flight.await.unwrap();
        assert_eq!(response.status(), StatusCode::OK);
        let summary = proxy.task.await.unwrap();
        assert_eq!(summary.requests, 1);
        assert_eq!(summary.cut, 0);
        assert!(TcpStream::connect(addr).await.is_err(), "still accepting");
    }

    #[tokio::test]
    async fn cuts_what_is_left_after_the_grace_period() {
        let upstream = TestServer::start().await;
        let entered = Arc::new(Notify::new());
        let (_never, released) = oneshot::channel();
        let gate = Gate {
            entered: Arc::clone(&entered),
            release: Mutex::new(Some(released)),
        };
        let mut config = config();
        config.grace = Duration::ZERO;
        let proxy = Proxy::start(config, vec![Arc::new(gate)]).await;
        let url = upstream.url("/hang");
        let request = format!("GET {url} HTTP/1.1\r\nhost: {}\r\n\r\n", upstream.addr());
        let hung = tokio::spawn(raw(proxy.addr, request));
        entered.notified().await;
        let summary = proxy.stop().await;
        assert_eq!(summary.cut, 1);
        assert_eq!(hung.await.unwrap(), "", "the connection was closed");
    }
}

mod connection_threads {
    use super::*;

    /// Notes the thread each request is handled on.
    #[derive(Default)]
    struct Threads(Mutex<Vec<String>>);

    impl Stage for Threads {
        fn on_request(&self, request: Request<Body>, _: &RequestMeta) -> Action {
            let name = std::thread::current()
                .name()
                .unwrap_or("unnamed")
                .to_owned();
            self.0.lock().unwrap().push(name);
            Action::Continue(request)
        }
    }

    #[tokio::test]
    async fn serve_each_connection_on_one_of_their_own_threads_and_drain_on_shutdown() {
        let upstream = TestServer::start().await;
        upstream.set_default("/t", Reply::ok("hello"));
        let threads = Arc::new(Threads::default());
        let mut config = config();
        config.connection_threads = 2;
        let proxy = Proxy::start(config, vec![threads.clone()]).await;

        // Four keep-alive clients, three requests each.
        for _ in 0..4 {
            let stream = TcpStream::connect(proxy.addr).await.unwrap();
            let (mut sender, connection) = http1::handshake(TokioIo::new(stream)).await.unwrap();
            tokio::spawn(connection);
            for _ in 0..3 {
                let response = sender
                    .send_request(proxied(&upstream.url("/t"), &[]))
                    .await
                    .unwrap();
                assert_eq!(response.status(), StatusCode::OK);
                assert_eq!(
                    response.into_body().collect().await.unwrap().to_bytes(),
                    "hello"
                );
            }
        }

        let seen = threads.0.lock().unwrap().clone();
        assert_eq!(seen.len(), 12);
        assert!(
            seen.iter().all(|name| name.starts_with("holdoff-conn-")),
            "{seen:?}"
        );
        // A connection stays on its thread; connections take turns.
        for client in seen.chunks(3) {
            assert!(client.iter().all(|name| *name == client[0]), "{seen:?}");
        }
        assert_ne!(seen[0], seen[3], "{seen:?}");

        let summary = proxy.stop().await;
        assert_eq!(summary.requests, 12, "{summary}");
    }
}

/// Whether `via` is what this proxy adds to a request it forwards: `1.1 holdoff-` and its
/// instance's token, 16 hex digits (which detects a request that looped back to it).
mod notes {
    use holdoff_proxy::Notes;

    use super::*;

    /// Long enough for anything that should happen at once, on a loaded machine.
    const PROMPTLY: Duration = Duration::from_secs(10);

    /// A note that counts itself: each one holds a clone of the stage's token.
    #[derive(Clone)]
    struct Token(#[allow(dead_code)] Arc<()>);

    /// Leaves a token on every request and, on the response, takes it and says so.
    struct Noting {
        token: Arc<()>,
    }

    impl Noting {
        /// How many notes are alive: requests that have not been answered or dropped.
        fn alive(&self) -> usize {
            Arc::strong_count(&self.token) - 1
        }

        /// Returns once every note is gone.
        async fn settled(&self) {
            let gone = until(|| self.alive() == 0).await;
            assert!(gone, "{} notes outlive their requests", self.alive());
        }
    }

    /// Whether `done` came true within [`PROMPTLY`], looking every few milliseconds.
    // Requests end over real sockets, in real time: a paused clock cannot stand in.
    #[allow(clippy::disallowed_methods)]
    async fn until(done: impl Fn() -> bool) -> bool {
        tokio::time::timeout(PROMPTLY, async {
            while !done() {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
        .await
        .is_ok()
    }

    impl Stage for Noting {
        fn on_request(&self, mut request: Request<Body>, _: &RequestMeta) -> Action {
            Notes::leave(&mut request, Token(Arc::clone(&self.token)));
            Action::Continue(request)
        }

        fn on_response(&self, response: &mut Response<Body>, _: &RequestMeta) {
            if Notes::take::<Token>(response).is_some() {
                response
                    .headers_mut()
                    .insert("x-note", "taken".parse().unwrap());
            }
        }
    }

    /// After [`Noting`], by path: resets the request (`/reset`), holds it forever (`/hang`),
    /// answers it itself (`/answer`), or lets it go on.
    struct Fate;

    impl Stage for Fate {
        fn on_request(&self, request: Request<Body>, _: &RequestMeta) -> Action {
            match request.uri().path() {
                "/reset" => Action::Abort,
                "/hang" => Action::later(std::future::pending()),
                "/answer" => Action::Respond(Response::new(Body::from("answered"))),
                _ => Action::Continue(request),
            }
        }
    }

    #[tokio::test]
    async fn reach_every_kind_of_response_and_never_outlive_their_request() {
        let upstream = TestServer::start().await;
        upstream.set_default("/ok", Reply::ok("upstream"));
        let noting = Arc::new(Noting {
            token: Arc::new(()),
        });
        let stages: Vec<Arc<dyn Stage>> = vec![noting.clone(), Arc::new(Fate)];
        let proxy = Proxy::start(config(), stages).await;

        // The upstream's response, a later stage's answer and the proxy's own 502 each bring
        // the note back to the stage that left it.
        let gone = format!("http://127.0.0.1:{}/gone", closed_port().await);
        for (url, status) in [
            (upstream.url("/ok"), StatusCode::OK),
            (upstream.url("/answer"), StatusCode::OK),
            (gone, StatusCode::BAD_GATEWAY),
        ] {
            let response = send(proxy.addr, proxied(&url, &[])).await;
            assert_eq!(response.status(), status, "{url}");
            assert_eq!(response.headers()["x-note"], "taken", "{url}");
        }
        noting.settled().await;

        // A reset request has no response: its note goes with it.
        let host = upstream.addr().to_string();
        let reset = raw(
            proxy.addr,
            format!("GET http://{host}/reset HTTP/1.1\r\nHost: {host}\r\n\r\n"),
        )
        .await;
        assert_eq!(reset, "", "a reset request is not answered");
        noting.settled().await;

        // A held request keeps its note while it waits, and drops it when its client goes.
        let mut client = TcpStream::connect(proxy.addr).await.unwrap();
        client
            .write_all(
                format!("GET http://{host}/hang HTTP/1.1\r\nHost: {host}\r\n\r\n").as_bytes(),
            )
            .await
            .unwrap();
        let waiting = until(|| noting.alive() > 0).await;
        assert!(waiting, "the held request never reached the stages");
        assert_eq!(noting.alive(), 1);
        drop(client);
        noting.settled().await;

        proxy.stop().await;
    }
}

fn is_holdoff_via(via: &str, version: &str) -> bool {
    via.strip_prefix(version)
        .and_then(|rest| rest.strip_prefix(" holdoff-"))
        .is_some_and(|token| token.len() == 16 && token.bytes().all(|b| b.is_ascii_hexdigit()))
}
