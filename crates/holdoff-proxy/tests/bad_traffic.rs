//! Bad traffic over raw TCP to the real `holdoff proxy` binary: each gets the right status
//! (with a one-line plain-text reason) or a clean close, and the proxy goes on serving.
//!
//! The binary must be built first (`cargo build -p holdoff-cli`; scripts/test does), and
//! curl installed (scripts/test installs it).

mod support;

use std::time::Duration;

use holdoff::clock::{Clock, TokioClock};
use holdoff_testkit::{Reply, TestServer};
use support::{
    PROMPTLY, Proxy, TestCa, TlsUpstream, closed_port, closes_within, curl_async, read_response,
};
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;

/// A fresh client gets a normal answer through the proxy: whatever came before did not stop
/// it serving.
async fn assert_still_serves(proxy: &Proxy, server: &TestServer) {
    server.set_default("/alive", Reply::ok("alive"));
    let before = server.requests_to("/alive").len();
    let mut stream = connect(proxy).await;
    let request = format!(
        "GET {} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n\r\n",
        server.url("/alive"),
        server.addr()
    );
    stream.write_all(request.as_bytes()).await.expect("send");
    let response = tokio::time::timeout(PROMPTLY, read_response(&mut stream))
        .await
        .expect("the proxy answers a normal request promptly");
    assert_eq!(response.status, 200, "{response:?}");
    assert_eq!(response.body_text(), "alive");
    assert_eq!(server.requests_to("/alive").len(), before + 1);
}

async fn connect(proxy: &Proxy) -> TcpStream {
    TcpStream::connect(proxy.addr)
        .await
        .expect("connect to the proxy")
}

/// An upstream on a free loopback port that reads each request's first segment (its head,
/// for a small GET) and leaves the answer to `answer`: for replies a test server cannot give.
async fn raw_upstream<F, A>(answer: F) -> std::net::SocketAddr
where
    F: Fn(TcpStream) -> A + Send + Sync + 'static,
    A: std::future::Future<Output = ()> + Send + 'static,
{
    let upstream = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = upstream.local_addr().expect("address");
    let answer = std::sync::Arc::new(answer);
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = upstream.accept().await {
            let answer = std::sync::Arc::clone(&answer);
            tokio::spawn(async move {
                let mut head = [0u8; 1024];
                let _ = tokio::io::AsyncReadExt::read(&mut stream, &mut head).await;
                answer(stream).await;
            });
        }
    });
    addr
}

/// Sends `bytes` on a new connection and reads the one response.
async fn exchange(proxy: &Proxy, bytes: &[u8]) -> support::RawResponse {
    let mut stream = connect(proxy).await;
    stream.write_all(bytes).await.expect("send");
    tokio::time::timeout(PROMPTLY, read_response(&mut stream))
        .await
        .expect("the proxy answers promptly")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_garbage_request_line_gets_400() {
    let server = TestServer::start().await;
    let proxy = Proxy::start(&[]);

    let response = exchange(&proxy, b"THIS IS NOT HTTP AT ALL\r\n\r\n").await;

    response.assert_plain_error(400);
    assert!(server.requests().is_empty());
    assert_still_serves(&proxy, &server).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn binary_noise_gets_400_or_a_close() {
    let server = TestServer::start().await;
    let proxy = Proxy::start(&[]);
    let mut stream = connect(&proxy).await;

    let noise: Vec<u8> = (0..4096u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    let _ = stream.write_all(&noise).await;

    assert!(
        closes_within(&mut stream, PROMPTLY).await,
        "the connection stayed open"
    );
    assert!(server.requests().is_empty());
    assert_still_serves(&proxy, &server).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_100_kib_header_gets_431() {
    let server = TestServer::start().await;
    let proxy = Proxy::start(&[]);
    let request = format!(
        "GET {} HTTP/1.1\r\nHost: {}\r\nX-Huge: {}\r\n\r\n",
        server.url("/huge"),
        server.addr(),
        "a".repeat(100 * 1024)
    );
    let (mut reader, mut writer) = connect(&proxy).await.into_split();
    // The proxy may answer (and close) before it has read everything: write on the side.
    let writing = tokio::spawn(async move {
        let _ = writer.write_all(request.as_bytes()).await;
        writer
    });

    let response = tokio::time::timeout(PROMPTLY, read_response(&mut reader))
        .await
        .expect("the proxy answers promptly");

    response.assert_plain_error(431);
    let _ = writing.await;
    assert!(server.requests_to("/huge").is_empty());
    assert_still_serves(&proxy, &server).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_truncated_body_closes_both_sides() {
    // A raw upstream that reports each connection it accepts, then whether the proxy closed
    // it (or left it hanging) once the client's body broke off.
    let upstream = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let upstream_addr = upstream.local_addr().expect("address");
    let (accepted, mut accepted_rx) = mpsc::unbounded_channel();
    let (closed, mut closed_rx) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = upstream.accept().await {
            let _ = accepted.send(());
            let closed = closed.clone();
            tokio::spawn(async move {
                let _ = closed.send(closes_within(&mut stream, PROMPTLY).await);
            });
        }
    });
    // A long upstream timeout, so that only the broken body can end the exchange.
    let proxy = Proxy::start(&["--upstream-timeout", "60s"]);
    let server = TestServer::start().await;

    let mut stream = connect(&proxy).await;
    let head = format!(
        "POST http://{upstream_addr}/upload HTTP/1.1\r\nHost: {upstream_addr}\r\n\
         Content-Type: text/plain\r\nContent-Length: 1000\r\n\r\nonly ten b"
    );
    stream.write_all(head.as_bytes()).await.expect("send");
    stream.shutdown().await.expect("half-close");

    // The client side ends (an error response, or just a close).
    assert!(
        closes_within(&mut stream, PROMPTLY).await,
        "the proxy kept the client connection open"
    );
    // The proxy may have buffered the body and never called the upstream; if it did call
    // it (it had the head long before the client gave up), it must not leave that
    // connection hanging on a body that will never come.
    if accepted_rx.try_recv().is_ok() {
        let closed = tokio::time::timeout(PROMPTLY + Duration::from_secs(1), closed_rx.recv())
            .await
            .expect("the upstream task reports");
        assert_eq!(
            closed,
            Some(true),
            "the proxy left the upstream waiting for the rest of the body"
        );
    }
    assert_still_serves(&proxy, &server).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_client_is_closed_after_the_idle_timeout() {
    let server = TestServer::start().await;
    let proxy = Proxy::start(&["--idle-timeout", "1s"]);
    let clock = TokioClock;
    let started = clock.now();
    let mut silent = connect(&proxy).await;

    // Others are served while it says nothing.
    assert_still_serves(&proxy, &server).await;
    assert!(
        closes_within(&mut silent, Duration::from_secs(5)).await,
        "a silent connection is still open 5 s after connecting, with --idle-timeout 1s"
    );

    let lasted = clock.now().duration_since(started);
    assert!(
        lasted >= Duration::from_millis(900),
        "closed after only {lasted:?}"
    );
    assert_still_serves(&proxy, &server).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_keep_alive_connection_is_closed_after_the_idle_timeout() {
    let server = TestServer::start().await;
    let proxy = Proxy::start(&["--idle-timeout", "1s"]);
    let mut stream = connect(&proxy).await;
    let request = format!(
        "GET {} HTTP/1.1\r\nHost: {}\r\n\r\n",
        server.url("/once"),
        server.addr()
    );
    stream.write_all(request.as_bytes()).await.expect("send");
    let response = tokio::time::timeout(PROMPTLY, read_response(&mut stream))
        .await
        .expect("an answer");
    assert_eq!(response.status, 200);

    assert!(
        closes_within(&mut stream, Duration::from_secs(5)).await,
        "an idle keep-alive connection is still open 5 s later, with --idle-timeout 1s"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_head_that_never_ends_is_cut_after_the_idle_timeout() {
    let server = TestServer::start().await;
    let proxy = Proxy::start(&["--idle-timeout", "1s"]);
    let clock = TokioClock;
    let started = clock.now();
    let stream = connect(&proxy).await;
    let (mut reader, mut writer) = stream.into_split();
    let head = format!(
        "GET {} HTTP/1.1\r\nHost: {}\r\nX-Slow: ",
        server.url("/never"),
        server.addr()
    );
    writer.write_all(head.as_bytes()).await.expect("send");

    // One more byte every 200 ms keeps the connection busy, but never finishes the head.
    let mut closed = false;
    while clock.now().duration_since(started) < Duration::from_secs(5) {
        if writer.write_all(b"x").await.is_err()
            || closes_within(&mut reader, Duration::from_millis(200)).await
        {
            closed = true;
            break;
        }
    }
    assert!(
        closed,
        "a head trickling in a byte at a time is still open 5 s later, with --idle-timeout 1s"
    );
    let lasted = clock.now().duration_since(started);
    assert!(
        lasted >= Duration::from_millis(900),
        "cut after only {lasted:?}"
    );
    assert!(server.requests_to("/never").is_empty());
    assert_still_serves(&proxy, &server).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_response_body_longer_than_the_idle_timeout_is_not_cut() {
    // A raw upstream sending a five-byte body a byte every 400 ms: two seconds in all.
    let upstream_addr = raw_upstream(|mut stream| async move {
        let clock = TokioClock;
        let _ = stream
            .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n")
            .await;
        for byte in b"hello" {
            clock
                .sleep_until(clock.now() + Duration::from_millis(400))
                .await;
            if stream.write_all(&[*byte]).await.is_err() {
                return;
            }
        }
    })
    .await;
    let proxy = Proxy::start(&["--idle-timeout", "1s"]);

    let mut stream = connect(&proxy).await;
    let request =
        format!("GET http://{upstream_addr}/slow HTTP/1.1\r\nHost: {upstream_addr}\r\n\r\n");
    stream.write_all(request.as_bytes()).await.expect("send");
    let response = tokio::time::timeout(Duration::from_secs(10), read_response(&mut stream))
        .await
        .expect("the whole response within 10 s");
    assert_eq!(response.status, 200);
    assert_eq!(
        response.body_text(),
        "hello",
        "the connection was cut while the body was still coming"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connect_to_a_closed_port_gets_502() {
    let server = TestServer::start().await;
    let proxy = Proxy::start(&[]);
    let port = closed_port();

    let response = exchange(
        &proxy,
        format!("CONNECT 127.0.0.1:{port} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n").as_bytes(),
    )
    .await;

    response.assert_plain_error(502);
    assert_still_serves(&proxy, &server).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_to_a_closed_port_gets_502() {
    let server = TestServer::start().await;
    let proxy = Proxy::start(&[]);
    let port = closed_port();

    let response = exchange(
        &proxy,
        format!("GET http://127.0.0.1:{port}/ HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n")
            .as_bytes(),
    )
    .await;

    response.assert_plain_error(502);
    assert_still_serves(&proxy, &server).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reverse_mode_with_its_upstream_down_gets_502() {
    let server = TestServer::start().await;
    let upstream = format!("http://127.0.0.1:{}", closed_port());
    let proxy = Proxy::start(&["--upstream", &upstream]);

    let response = exchange(
        &proxy,
        format!("GET /down HTTP/1.1\r\nHost: {}\r\n\r\n", proxy.addr).as_bytes(),
    )
    .await;

    response.assert_plain_error(502);
    drop(server);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_upstream_gets_504() {
    let server = TestServer::start().await;
    server.script(
        "/slow",
        [Reply::ok("too late").delay(Duration::from_secs(30))],
    );
    let proxy = Proxy::start(&["--upstream-timeout", "1s"]);

    let response = exchange(
        &proxy,
        format!(
            "GET {} HTTP/1.1\r\nHost: {}\r\n\r\n",
            server.url("/slow"),
            server.addr()
        )
        .as_bytes(),
    )
    .await;

    response.assert_plain_error(504);
    assert_still_serves(&proxy, &server).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_untrusted_upstream_certificate_gets_502_saying_why() {
    let ca = TestCa::new("holdoff test upstream CA");
    let upstream = TlsUpstream::start(&ca).await;
    // Intercepting, but without --upstream-ca: the upstream's certificate is not trusted.
    let proxy = Proxy::start(&["--urls-to-watch", "https://127.0.0.1:*/*"]);
    let exported = proxy.export_ca();

    let output = curl_async(&[
        "-x",
        &proxy.url(),
        "--cacert",
        &exported.display().to_string(),
        "--write-out",
        "\n%{http_code}",
        &upstream.url("/untrusted"),
    ])
    .await;

    let stdout = String::from_utf8_lossy(&output.stdout);
    let (body, status) = stdout.rsplit_once('\n').unwrap_or_default();
    assert_eq!(status, "502", "{stdout}");
    let reason = body.to_lowercase();
    assert!(
        ["certificate", "trust", "tls"]
            .iter()
            .any(|why| reason.contains(why)),
        "the 502 does not say why: {body:?}"
    );
    assert!(upstream.seen().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_bad_clients_at_once_do_not_stop_it() {
    let server = TestServer::start().await;
    let proxy = Proxy::start(&["--idle-timeout", "1s"]);
    let bad: [&[u8]; 4] = [
        b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03",
        b"GET / HTTP/9.9\r\n\r\n",
        b"GET http://[::1 HTTP/1.1\r\n\r\n",
        b"CONNECT nowhere HTTP/1.1\r\n\r\n",
    ];
    let mut clients = Vec::new();
    for round in 0..50 {
        let bytes = bad[round % bad.len()];
        let addr = proxy.addr;
        clients.push(tokio::spawn(async move {
            let Ok(mut stream) = TcpStream::connect(addr).await else {
                return false;
            };
            let _ = stream.write_all(bytes).await;
            closes_within(&mut stream, PROMPTLY).await
        }));
    }
    for client in clients {
        assert!(
            client.await.expect("client task"),
            "a bad client's connection stayed open"
        );
    }
    assert_still_serves(&proxy, &server).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upstream_body_that_breaks_off_is_logged_and_cuts_the_client() {
    // A raw upstream promising 1000 bytes, sending ten, and closing.
    let upstream_addr = raw_upstream(|mut stream| async move {
        let _ = stream
            .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\nonly ten b")
            .await;
    })
    .await;
    let proxy = Proxy::start(&[]);
    let server = TestServer::start().await;

    let mut stream = connect(&proxy).await;
    let request =
        format!("GET http://{upstream_addr}/file HTTP/1.1\r\nHost: {upstream_addr}\r\n\r\n");
    stream.write_all(request.as_bytes()).await.expect("send");
    assert!(
        closes_within(&mut stream, PROMPTLY).await,
        "the proxy kept the client waiting for the rest of the body"
    );
    let log = support::log_when(&proxy.log_handle(), "broke off");
    let line = log
        .lines()
        .find(|line| line.contains("the upstream's response body broke off"))
        .unwrap_or_else(|| panic!("no line says the body broke off:\n{log}"));
    assert!(
        line.contains(&format!("http://{upstream_addr}/file")),
        "{line}"
    );
    assert_still_serves(&proxy, &server).await;
}
