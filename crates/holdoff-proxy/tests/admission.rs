//! Connection-level limits, over real TCP on loopback: a client that stops reading is cut
//! after the send timeout, one peer cannot take more than its share of connections, and a
//! connection that says nothing (or only part of the HTTP/2 preface) is closed at the idle
//! timeout — while a well-behaved client is served all along.

// The helpers outside the test functions fail the test by panicking, as the tests do.
#![allow(clippy::unwrap_used)]

mod support;

use std::net::{Ipv4Addr, SocketAddr};
use std::time::Duration;

use bytes::Bytes;
use holdoff::clock::{Clock, TokioClock};
use holdoff_proxy::{ClientIdMode, ProxyConfig};
use holdoff_testkit::{Reply, TestServer};
use http::header::HOST;
use http::{Request, StatusCode};
use http_body_util::{BodyExt, Empty};
use hyper::client::conn::http1;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};

/// Long enough for anything that should happen at once, on a loaded machine.
const PROMPTLY: Duration = Duration::from_secs(10);
/// The idle timeout of the tests of it.
const IDLE: Duration = Duration::from_millis(300);

use support::InProcess as Proxy;
use support::{EndlessUpstream, small_window_client};

/// A forward proxy on a free loopback port, telling clients apart by address (no lookup).
fn config() -> ProxyConfig {
    let mut config = ProxyConfig::default();
    config.listen = SocketAddr::from((Ipv4Addr::LOCALHOST, 0));
    config.client_id = ClientIdMode::Peer;
    config
}

/// Sends a GET for `url` through the proxy on `stream`, and reads the whole response.
async fn get(stream: TcpStream, url: &str) -> (StatusCode, Bytes) {
    let (mut sender, connection) = http1::handshake(TokioIo::new(stream)).await.unwrap();
    tokio::spawn(connection);
    let uri: http::Uri = url.parse().unwrap();
    let request = Request::get(url)
        .header(HOST, uri.authority().unwrap().as_str())
        .body(Empty::<Bytes>::new())
        .unwrap();
    let response = sender.send_request(request).await.unwrap();
    let status = response.status();
    let body = response.into_body().collect().await.unwrap().to_bytes();
    (status, body)
}

/// A well-behaved client, from `127.0.0.1`, is served.
async fn assert_served(proxy: &Proxy, server: &TestServer) {
    let stream = TcpStream::connect(proxy.addr).await.unwrap();
    assert_served_on(stream, server).await;
}

async fn assert_served_on(stream: TcpStream, server: &TestServer) {
    server.set_default("/alive", Reply::ok("alive"));
    let served = tokio::time::timeout(PROMPTLY, get(stream, &server.url("/alive"))).await;
    let (status, body) = served.expect("a well-behaved client is answered promptly");
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body, "alive");
}

/// Whether the other side closed `stream` (end of stream, or a reset) before sending
/// anything more.
async fn closed(stream: &mut TcpStream) -> bool {
    let mut byte = [0u8; 1];
    match tokio::time::timeout(PROMPTLY, stream.read(&mut byte)).await {
        Ok(Ok(0) | Err(_)) => true,
        Ok(Ok(_)) | Err(_) => false,
    }
}

/// A new connection asking for `path` is closed unanswered, and nothing reaches `server`.
async fn assert_refused(proxy: &Proxy, server: &TestServer, path: &str) {
    let mut stream = TcpStream::connect(proxy.addr).await.unwrap();
    let request = format!(
        "GET {} HTTP/1.1\r\nHost: {}\r\n\r\n",
        server.url(path),
        server.addr()
    );
    // The write may already find it closed.
    let _ = stream.write_all(request.as_bytes()).await;
    assert!(
        closed(&mut stream).await,
        "{path}: the connection was served"
    );
    assert!(
        server.requests_to(path).is_empty(),
        "{path} reached the server"
    );
}

/// A server, and a proxy in front of it that closes a connection silent for 300 ms.
async fn with_idle_timeout() -> (TestServer, Proxy) {
    let server = TestServer::start().await;
    let mut config = config();
    config.idle_timeout = IDLE;
    let proxy = Proxy::start(config, Vec::new()).await;
    (server, proxy)
}

#[tokio::test]
async fn a_client_that_stops_reading_is_cut_after_the_send_timeout() {
    let upstream = EndlessUpstream::start().await;
    let server = TestServer::start().await;
    let mut config = config();
    config.send_timeout = Duration::from_millis(300);
    let proxy = Proxy::start(config, Vec::new()).await;

    let mut stalled = small_window_client(proxy.addr).await;
    let request = format!(
        "GET http://{0}/endless HTTP/1.1\r\nHost: {0}\r\n\r\n",
        upstream.addr
    );
    stalled.write_all(request.as_bytes()).await.unwrap();
    tokio::time::timeout(PROMPTLY, upstream.sending.notified())
        .await
        .expect("the upstream starts sending");

    // Others are served while it reads nothing.
    assert_served(&proxy, &server).await;

    // The proxy gives up on it, and so drops the response it could not send.
    tokio::time::timeout(PROMPTLY, upstream.hung_up.notified())
        .await
        .expect("the proxy hangs up on the upstream once it cuts the client");
    let mut received = Vec::new();
    let read = tokio::time::timeout(PROMPTLY, stalled.read_to_end(&mut received)).await;
    assert!(
        matches!(read, Ok(Ok(_) | Err(_))),
        "the connection of a client that reads nothing is still open"
    );
    assert_served(&proxy, &server).await;
    proxy.stop().await;
}

/// `count` connections through the proxy, each served once and then kept open: the tasks
/// that hold them.
async fn hold(
    proxy: &Proxy,
    server: &TestServer,
    count: usize,
) -> Vec<tokio::task::JoinHandle<Result<(), hyper::Error>>> {
    let mut held = Vec::new();
    for _ in 0..count {
        let stream = TcpStream::connect(proxy.addr).await.unwrap();
        let (mut sender, connection) = http1::handshake(TokioIo::new(stream)).await.unwrap();
        held.push(tokio::spawn(connection));
        let request = Request::get(server.url("/held"))
            .header(HOST, server.addr().to_string())
            .body(Empty::<Bytes>::new())
            .unwrap();
        let response = sender.send_request(request).await.unwrap();
        assert_eq!(response.status(), StatusCode::OK);
        held.push(tokio::spawn(async move {
            let _keep = sender;
            std::future::pending::<Result<(), hyper::Error>>().await
        }));
    }
    held
}

/// Under `holdoff run` every client is the one loopback address: the limit counts processes,
/// so one process at its limit leaves the others their places.
#[cfg(target_os = "linux")]
#[tokio::test]
async fn by_process_one_at_its_limit_leaves_another_on_the_same_address_served() {
    let server = TestServer::start().await;
    let mut config = config();
    config.client_id = ClientIdMode::Auto;
    config.max_connections_per_peer = Some(2);
    let proxy = Proxy::start(config, Vec::new()).await;
    let _held = hold(&proxy, &server, 2).await;

    // This process's third is closed unanswered.
    assert_refused(&proxy, &server, "/third").await;

    // curl, another process on 127.0.0.1, is served.
    let (proxy_url, url) = (format!("http://{}", proxy.addr), server.url("/curl"));
    let curl = tokio::task::spawn_blocking(move || {
        std::process::Command::new("curl")
            .args([
                "-sS",
                "-o",
                "/dev/null",
                "-w",
                "%{http_code}",
                "-x",
                &proxy_url,
                &url,
            ])
            .output()
            .expect("curl is installed (scripts/test installs it)")
    })
    .await
    .unwrap();
    assert_eq!(String::from_utf8_lossy(&curl.stdout), "200", "{curl:?}");
    assert_eq!(server.requests_to("/curl").len(), 1);
    proxy.stop().await;
}

#[tokio::test]
async fn a_peer_past_its_limit_is_refused_and_another_is_served() {
    let server = TestServer::start().await;
    let mut config = config();
    config.max_connections_per_peer = Some(2);
    let proxy = Proxy::start(config, Vec::new()).await;

    // Two connections from 127.0.0.1, served and kept open.
    let mut held = hold(&proxy, &server, 2).await;

    // A third is closed unanswered.
    assert_refused(&proxy, &server, "/third").await;

    // Another peer is served meanwhile (on Linux all of 127.0.0.0/8 is loopback).
    if cfg!(target_os = "linux") {
        let socket = TcpSocket::new_v4().unwrap();
        socket
            .bind(SocketAddr::from((Ipv4Addr::new(127, 0, 0, 2), 0)))
            .unwrap();
        let other = socket.connect(proxy.addr).await.unwrap();
        assert_served_on(other, &server).await;
    }

    // Once one of the two closes, its place is free again.
    for task in held.drain(..) {
        task.abort();
    }
    let clock = TokioClock;
    let deadline = clock.now() + PROMPTLY;
    loop {
        let stream = TcpStream::connect(proxy.addr).await.unwrap();
        let served = tokio::time::timeout(PROMPTLY, async {
            let (mut sender, connection) = http1::handshake(TokioIo::new(stream)).await.ok()?;
            tokio::spawn(connection);
            let request = Request::get(server.url("/again"))
                .header(HOST, server.addr().to_string())
                .body(Empty::<Bytes>::new())
                .unwrap();
            sender.send_request(request).await.ok()
        })
        .await;
        if let Ok(Some(response)) = served {
            assert_eq!(response.status(), StatusCode::OK);
            break;
        }
        assert!(
            clock.now() < deadline,
            "the closed connections' places stay taken"
        );
        clock
            .sleep_until(clock.now() + Duration::from_millis(20))
            .await;
    }
    proxy.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_silent_connection_is_closed_at_the_idle_timeout() {
    let (server, proxy) = with_idle_timeout().await;

    let clock = TokioClock;
    let mut silent = TcpStream::connect(proxy.addr).await.unwrap();
    let connected = clock.now();
    assert_served(&proxy, &server).await;
    assert!(closed(&mut silent).await, "a silent connection stays open");
    // Under paused time the clock moves only to the next timer: exactly one idle timeout.
    assert_eq!(clock.now() - connected, IDLE);
    proxy.stop().await;
}

#[tokio::test(start_paused = true)]
async fn connections_holding_part_of_the_http2_preface_are_closed_at_the_idle_timeout() {
    let (server, proxy) = with_idle_timeout().await;

    let clock = TokioClock;
    let mut partial = Vec::new();
    for _ in 0..50 {
        let mut stream = TcpStream::connect(proxy.addr).await.unwrap();
        stream.write_all(b"PRI * HTTP/2.0\r\n").await.unwrap();
        partial.push(stream);
    }
    let started = clock.now();
    assert_served(&proxy, &server).await;
    for stream in &mut partial {
        assert!(
            closed(stream).await,
            "a partial preface keeps its connection"
        );
    }
    assert_eq!(clock.now() - started, IDLE);
    proxy.stop().await;
}

#[tokio::test]
async fn a_preface_that_comes_in_pieces_is_served_as_http2() {
    let config = config();
    let proxy = Proxy::start(config, Vec::new()).await;
    let mut stream = TcpStream::connect(proxy.addr).await.unwrap();
    stream.write_all(b"PRI * HTTP/2.0\r\n").await.unwrap();
    let clock = TokioClock;
    clock
        .sleep_until(clock.now() + Duration::from_millis(50))
        .await;
    // The rest of the preface, and an empty SETTINGS frame.
    stream
        .write_all(b"\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00")
        .await
        .unwrap();
    let mut frame = [0u8; 9];
    tokio::time::timeout(PROMPTLY, stream.read_exact(&mut frame))
        .await
        .expect("the proxy answers")
        .unwrap();
    assert_eq!(
        frame[3], 0x04,
        "the proxy's first frame is SETTINGS: {frame:?}"
    );
    drop(stream);
    proxy.stop().await;
}
