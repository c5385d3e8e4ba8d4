//! The edges of a request, over real TCP on loopback with the proxy in this process: where a
//! request may go (never back to the proxy), how long each side may take and which side a
//! timeout blames, what makes a request invalid, what of it is secret, and how often a client
//! may guess the proxy's credentials.

mod support;

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use holdoff::clock::{Clock, TokioClock};
use holdoff_proxy::{
    Action, Body, ClientIdMode, ProxyConfig, RequestMeta, ShutdownHandle, Stage, Summary,
};
use holdoff_testkit::{Reply, TestServer};
use http::Request;
use support::{InProcess, PROMPTLY, RawResponse, closes_within, read_response};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpSocket, TcpStream};
use tokio::task::JoinHandle;

/// Short enough for a test, long enough for loopback.
const TIMEOUT: Duration = Duration::from_millis(300);

/// The proxy running in this process.
struct Running {
    addr: SocketAddr,
    stop: ShutdownHandle,
    done: JoinHandle<Summary>,
}

impl Running {
    async fn start(configure: impl FnOnce(&mut ProxyConfig)) -> Running {
        Running::with(configure, Vec::new(), &[]).await
    }

    /// With `stages`, and `own` registered as the proxy's other addresses.
    async fn with(
        configure: impl FnOnce(&mut ProxyConfig),
        stages: Vec<Arc<dyn Stage>>,
        own: &[SocketAddr],
    ) -> Running {
        let mut config = InProcess::config();
        // Peers are told apart by address: no process lookup per connection.
        config.client_id = ClientIdMode::Peer;
        configure(&mut config);
        let proxy = InProcess::serve(config, stages.into(), own).await;
        Running {
            addr: proxy.addr,
            stop: proxy.handle,
            done: proxy.task,
        }
    }

    async fn summary(self) -> Summary {
        self.stop.shutdown();
        self.done.await.expect("the proxy ran")
    }

    async fn connect(&self) -> TcpStream {
        TcpStream::connect(self.addr).await.expect("connect")
    }

    /// Sends `bytes` on a new connection and reads one response.
    async fn exchange(&self, bytes: &str) -> RawResponse {
        let mut stream = self.connect().await;
        stream.write_all(bytes.as_bytes()).await.expect("send");
        answer(&mut stream).await
    }
}

async fn answer(stream: &mut TcpStream) -> RawResponse {
    tokio::time::timeout(PROMPTLY, read_response(stream))
        .await
        .expect("the proxy answers promptly")
}

fn get(url: &str, host: &str) -> String {
    format!("GET {url} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n")
}

/// A stage that notes the URL of every request, as the judge, the faults and the recorder
/// see it, and the URL it is sent to.
#[derive(Default)]
struct Urls(Mutex<Vec<(String, String)>>);

impl Stage for Urls {
    fn on_request(&self, request: Request<Body>, meta: &RequestMeta) -> Action {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push((meta.target.uri().to_string(), request.uri().to_string()));
        Action::Continue(request)
    }
}

mod loops {
    use super::*;

    #[tokio::test]
    async fn a_connect_to_the_proxy_itself_is_refused_each_time_never_nested() {
        let proxy = Running::start(|_| {}).await;
        let port = proxy.addr.port();

        for target in [
            format!("127.0.0.1:{port}"),
            format!("localhost:{port}"),
            format!("[::ffff:127.0.0.1]:{port}"),
            format!("0.0.0.0:{port}"),
        ] {
            let connect = format!("CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n");
            let refused = proxy.exchange(&connect).await;
            refused.assert_plain_error(508);
            assert!(refused.body_text().contains("own address"), "{refused:?}");
        }
        // What built 2,000 nested tunnels: many in one write. Each is answered on the
        // connection it came on, and none opens a tunnel.
        let mut burst = String::new();
        for _ in 0..50 {
            burst.push_str(&format!(
                "CONNECT 127.0.0.1:{port} HTTP/1.1\r\nHost: x\r\n\r\n"
            ));
        }
        burst.push_str(&format!(
            "CONNECT 127.0.0.1:{port} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
        ));
        let mut stream = proxy.connect().await;
        stream.write_all(burst.as_bytes()).await.expect("send");
        let mut answers = Vec::new();
        tokio::time::timeout(PROMPTLY, stream.read_to_end(&mut answers))
            .await
            .expect("the proxy answers promptly and closes")
            .expect("read");
        let answers = String::from_utf8_lossy(&answers);
        assert_eq!(answers.matches("HTTP/1.1 508").count(), 51, "{answers}");

        let summary = proxy.summary().await;
        assert_eq!(summary.tunnels, 0, "{summary}");
    }

    #[tokio::test]
    async fn a_request_to_the_proxy_itself_is_refused() {
        let proxy = Running::start(|_| {}).await;
        let port = proxy.addr.port();
        for host in [format!("127.0.0.1:{port}"), format!("localhost:{port}")] {
            let refused = proxy
                .exchange(&get(&format!("http://{host}/x"), &host))
                .await;
            refused.assert_plain_error(508);
        }
        // Each answered once: none came back as another request.
        let summary = proxy.summary().await;
        assert_eq!(summary.requests, 2, "{summary}");
    }

    #[tokio::test]
    async fn another_spelling_of_its_address_is_caught_once_resolved() {
        // `127.1` is 127.0.0.1 to the resolver, and no IP literal: a name, as far as the
        // request goes.
        let proxy = Running::start(|_| {}).await;
        let other = format!("127.1:{}", proxy.addr.port());

        let connect = format!("CONNECT {other} HTTP/1.1\r\nHost: {other}\r\n\r\n");
        let refused = proxy.exchange(&connect).await;
        refused.assert_plain_error(508);
        assert!(refused.body_text().contains("own address"), "{refused:?}");

        // A request goes out once, and comes back carrying the proxy's own Via.
        let refused = proxy
            .exchange(&get(&format!("http://{other}/x"), &other))
            .await;
        refused.assert_plain_error(508);
        assert!(refused.body_text().contains("came back"), "{refused:?}");
        let summary = proxy.summary().await;
        assert_eq!(summary.requests, 2, "{summary}");
        assert_eq!(summary.tunnels, 0, "{summary}");
    }

    #[tokio::test]
    async fn a_reverse_proxy_in_front_of_itself_answers_once() {
        // A port the OS picked, free again: the proxy listens on it, in front of itself.
        let port = std::net::TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
            .and_then(|listener| listener.local_addr())
            .expect("a free port")
            .port();
        let proxy = Running::start(|config| {
            config.listen = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
            config.upstream = Some(format!("http://127.0.0.1:{port}").parse().expect("URL"));
        })
        .await;

        let refused = proxy
            .exchange(&get("/x", &format!("127.0.0.1:{port}")))
            .await;
        refused.assert_plain_error(508);
        let summary = proxy.summary().await;
        assert_eq!(
            summary.requests, 2,
            "the request and its one echo: {summary}"
        );
    }

    #[tokio::test]
    async fn the_proxys_other_addresses_are_refused_as_its_own() {
        // Stands for the control API: it must see nothing of what a client sends the proxy.
        let control = TestServer::start().await;
        let proxy = Running::with(|_| {}, Vec::new(), &[control.addr()]).await;
        let host = control.addr().to_string();

        let refused = proxy
            .exchange(&get(&control.url("/recording/pause"), &host))
            .await;
        refused.assert_plain_error(508);
        let connect = format!("CONNECT {host} HTTP/1.1\r\nHost: {host}\r\n\r\n");
        proxy.exchange(&connect).await.assert_plain_error(508);
        assert!(control.requests().is_empty(), "{:?}", control.requests());
    }

    #[tokio::test]
    async fn a_request_that_carries_the_proxys_own_via_is_refused_and_another_holdoffs_is_not() {
        let upstream = TestServer::start().await;
        let proxy = Running::start(|_| {}).await;
        let host = upstream.addr().to_string();

        let first = proxy.exchange(&get(&upstream.url("/a"), &host)).await;
        assert_eq!(first.status, 200, "{first:?}");
        // The upstream sees which proxy this is; the client, only that it is holdoff.
        let seen = upstream.requests_to("/a");
        let own = seen[0].header("via").unwrap_or_default().to_owned();
        assert!(own.starts_with("1.1 holdoff-"), "{own:?}");
        assert_eq!(first.header("via"), Some("1.1 holdoff"));

        // Back through the proxy, as a name that resolves to it, or another proxy, sends it.
        let looped = format!(
            "GET {} HTTP/1.1\r\nHost: {host}\r\nVia: 1.0 corporate, {own}\r\nConnection: \
             close\r\n\r\n",
            upstream.url("/b")
        );
        proxy.exchange(&looped).await.assert_plain_error(508);
        assert!(upstream.requests_to("/b").is_empty());

        // Another holdoff in the chain is no loop.
        let chained = format!(
            "GET {} HTTP/1.1\r\nHost: {host}\r\nVia: 1.1 holdoff-0123456789abcdef\r\n\
             Connection: close\r\n\r\n",
            upstream.url("/c")
        );
        assert_eq!(proxy.exchange(&chained).await.status, 200);
    }
}

mod timeouts {
    use super::*;

    /// Sends a `POST` head announcing `length` bytes to `url` on `host`.
    async fn post_head(stream: &mut TcpStream, url: &str, host: &str, length: usize) {
        let head = format!(
            "POST {url} HTTP/1.1\r\nHost: {host}\r\nContent-Length: {length}\r\nConnection: \
             close\r\n\r\n"
        );
        stream.write_all(head.as_bytes()).await.expect("send");
    }

    #[tokio::test]
    async fn an_upload_that_streams_for_longer_than_the_upstream_timeout_goes_through() {
        let upstream = TestServer::start().await;
        upstream.set_default("/upload", Reply::ok("stored"));
        // Twice the usual timeout, for room between chunks on a busy machine.
        let timeout = TIMEOUT * 2;
        let proxy = Running::start(|config| config.upstream_timeout = timeout).await;

        // A chunk every tenth of the timeout, for two and a half timeouts: never one
        // without a byte.
        let chunk = vec![b'x'; 16 * 1024];
        let chunks = 25;
        let mut stream = proxy.connect().await;
        let url = upstream.url("/upload");
        post_head(
            &mut stream,
            &url,
            &upstream.addr().to_string(),
            chunk.len() * chunks,
        )
        .await;
        let clock = TokioClock;
        for _ in 0..chunks {
            clock.sleep_until(clock.now() + timeout / 10).await;
            stream.write_all(&chunk).await.expect("send a chunk");
        }
        let response = answer(&mut stream).await;
        assert_eq!(response.status, 200, "{response:?}");
        assert_eq!(response.body_text(), "stored");
        let seen = upstream.requests_to("/upload");
        assert_eq!(seen[0].body.len(), chunk.len() * chunks);
        assert!(seen[0].body_complete);
    }

    #[tokio::test]
    async fn the_response_head_is_timed_from_the_end_of_the_request() {
        let upstream = TestServer::start().await;
        upstream.set_default("/slow", Reply::ok("late").delay(TIMEOUT * 20));
        let proxy = Running::start(|config| config.upstream_timeout = TIMEOUT).await;

        let mut stream = proxy.connect().await;
        post_head(
            &mut stream,
            &upstream.url("/slow"),
            &upstream.addr().to_string(),
            5,
        )
        .await;
        stream.write_all(b"hello").await.expect("send");
        let response = answer(&mut stream).await;
        response.assert_plain_error(504);
        assert!(
            response.body_text().contains("did not answer"),
            "{response:?}"
        );
    }

    #[tokio::test]
    async fn a_client_that_stops_sending_its_body_gets_408_naming_it() {
        let upstream = TestServer::start().await;
        let proxy = Running::start(|config| config.upstream_timeout = TIMEOUT).await;

        let mut stream = proxy.connect().await;
        post_head(
            &mut stream,
            &upstream.url("/half"),
            &upstream.addr().to_string(),
            10,
        )
        .await;
        stream.write_all(b"half").await.expect("send");
        let response = answer(&mut stream).await;
        response.assert_plain_error(408);
        assert!(
            response.body_text().contains("the client sent none"),
            "{response:?}"
        );
    }

    #[tokio::test]
    async fn an_upstream_that_takes_none_of_the_body_gets_the_504() {
        // Reads the request head, then nothing: the body fills the sockets and stops.
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
            .await
            .expect("bind");
        let upstream = listener.local_addr().expect("address");
        let deaf = tokio::spawn(async move {
            let (mut stream, _) = listener.accept().await.expect("accept");
            let mut head = [0; 1024];
            let _ = stream.read(&mut head).await;
            std::future::pending::<()>().await;
            drop(stream);
        });
        let proxy = Running::start(|config| config.upstream_timeout = TIMEOUT).await;

        let length = 64 * 1024 * 1024;
        let mut stream = proxy.connect().await;
        post_head(
            &mut stream,
            &format!("http://{upstream}/deaf"),
            &upstream.to_string(),
            length,
        )
        .await;
        let (mut reader, mut writer) = stream.into_split();
        let sending = tokio::spawn(async move {
            let chunk = vec![b'x'; 64 * 1024];
            for _ in 0..length / chunk.len() {
                if writer.write_all(&chunk).await.is_err() {
                    return;
                }
            }
        });
        let response = tokio::time::timeout(PROMPTLY, read_response(&mut reader))
            .await
            .expect("the proxy answers promptly");
        response.assert_plain_error(504);
        assert!(
            response
                .body_text()
                .contains("took none of the request body"),
            "{response:?}"
        );
        sending.abort();
        deaf.abort();
    }

    #[tokio::test]
    async fn an_upstream_body_that_stalls_ends_the_clients_with_an_error() {
        // A head promising 100 bytes, ten of them, then silence with the connection open.
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
            .await
            .expect("bind");
        let upstream = listener.local_addr().expect("address");
        let stalling = tokio::spawn(async move {
            let (mut stream, _) = listener.accept().await.expect("accept");
            let mut head = [0; 1024];
            let _ = stream.read(&mut head).await;
            let _ = stream
                .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nten bytes.")
                .await;
            std::future::pending::<()>().await;
            drop(stream);
        });
        let proxy = Running::start(|config| config.upstream_timeout = TIMEOUT).await;

        let mut stream = proxy.connect().await;
        let url = format!("http://{upstream}/stalls");
        stream
            .write_all(get(&url, &upstream.to_string()).as_bytes())
            .await
            .expect("send");
        let mut head = Vec::new();
        while !head.ends_with(b"\r\n\r\n") {
            head.push(stream.read_u8().await.expect("a response head"));
        }
        assert!(head.starts_with(b"HTTP/1.1 200 "), "{head:?}");
        assert!(
            closes_within(&mut stream, PROMPTLY).await,
            "the client was left waiting for the rest of the body"
        );
        stalling.abort();
    }

    #[tokio::test]
    async fn a_malformed_chunked_body_is_the_clients_fault_400() {
        let upstream = TestServer::start().await;
        let proxy = Running::start(|_| {}).await;
        let request = format!(
            "POST {} HTTP/1.1\r\nHost: {}\r\nTransfer-Encoding: chunked\r\n\r\n\
             5\r\nhello\r\nzz\r\nnot a chunk\r\n0\r\n\r\n",
            upstream.url("/chunked"),
            upstream.addr()
        );
        let response = proxy.exchange(&request).await;
        response.assert_plain_error(400);
        // Not the upstream's fault: "the client's request body could not be read: … Invalid
        // chunk size line …".
        let reason = response.body_text();
        assert!(reason.contains("the client's request body"), "{reason}");
        assert!(reason.contains("chunk"), "{reason}");
        assert!(
            upstream
                .requests_to("/chunked")
                .iter()
                .all(|seen| !seen.body_complete)
        );
    }
}

mod invalid {
    use super::*;

    #[tokio::test]
    async fn two_hosts_get_400_in_forward_and_reverse_mode() {
        let upstream = TestServer::start().await;
        let forward = Running::start(|_| {}).await;
        let reverse = Running::start(|config| {
            config.upstream = Some(
                format!("http://{}", upstream.addr())
                    .parse()
                    .expect("an upstream"),
            );
        })
        .await;
        let host = upstream.addr();

        let twice = format!(
            "GET {} HTTP/1.1\r\nHost: {host}\r\nHost: evil.example\r\nConnection: close\r\n\r\n",
            upstream.url("/twice")
        );
        let refused = forward.exchange(&twice).await;
        refused.assert_plain_error(400);
        assert!(
            refused.body_text().contains("more than one Host"),
            "{refused:?}"
        );
        let twice = format!(
            "GET /twice HTTP/1.1\r\nHost: {host}\r\nHost: {host}\r\nConnection: close\r\n\r\n"
        );
        reverse.exchange(&twice).await.assert_plain_error(400);
        assert!(upstream.requests_to("/twice").is_empty());
    }
}

mod secrets {
    use super::*;

    #[tokio::test]
    async fn user_information_in_the_url_goes_nowhere() {
        let upstream = TestServer::start().await;
        let urls = Arc::new(Urls::default());
        let proxy = Running::with(|_| {}, vec![urls.clone()], &[]).await;
        let host = upstream.addr();

        let request = format!(
            "GET http://user:hunter2@{host}/private?q=1 HTTP/1.1\r\nHost: user:hunter2@{host}\r\n\
             Connection: close\r\n\r\n"
        );
        let response = proxy.exchange(&request).await;
        assert_eq!(response.status, 200, "{response:?}");

        let seen = upstream.requests_to("/private");
        assert_eq!(seen[0].header("host"), Some(host.to_string().as_str()));
        assert!(
            !format!("{:?}", seen[0]).contains("hunter2"),
            "{:?}",
            seen[0]
        );
        let urls = urls
            .0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        let stripped = format!("http://{host}/private?q=1");
        assert_eq!(urls, [(stripped.clone(), stripped)]);
    }
}

mod guessing {
    use super::*;

    /// Sends a request to `upstream` from `from`, with `credentials` as proxy credentials.
    async fn attempt(
        proxy: &Running,
        from: Ipv4Addr,
        credentials: Option<&str>,
        upstream: &TestServer,
    ) -> RawResponse {
        let socket = TcpSocket::new_v4().expect("socket");
        socket
            .bind(SocketAddr::from((from, 0)))
            .expect("bind the client's address");
        let mut stream = socket.connect(proxy.addr).await.expect("connect");
        let authorization = credentials.map_or_else(String::new, |credentials| {
            format!("Proxy-Authorization: Basic {}\r\n", base64(credentials))
        });
        let request = format!(
            "GET {} HTTP/1.1\r\nHost: {}\r\n{authorization}Connection: close\r\n\r\n",
            upstream.url("/guarded"),
            upstream.addr()
        );
        stream.write_all(request.as_bytes()).await.expect("send");
        answer(&mut stream).await
    }

    fn base64(text: &str) -> String {
        const ALPHABET: &[u8; 64] =
            b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        let mut out = String::new();
        for group in text.as_bytes().chunks(3) {
            let bytes = [
                group[0],
                *group.get(1).unwrap_or(&0),
                *group.get(2).unwrap_or(&0),
            ];
            let n = u32::from_be_bytes([0, bytes[0], bytes[1], bytes[2]]);
            for (index, shift) in [18, 12, 6, 0].into_iter().enumerate() {
                if index <= group.len() {
                    out.push(char::from(ALPHABET[(n >> shift) as usize & 63]));
                } else {
                    out.push('=');
                }
            }
        }
        out
    }

    #[test]
    fn base64_encodes_as_rfc_4648_says() {
        assert_eq!(base64("alice:secret"), "YWxpY2U6c2VjcmV0");
        assert_eq!(base64("a:b"), "YTpi");
        assert_eq!(base64("ab:"), "YWI6");
        assert_eq!(base64("abcd:"), "YWJjZDo=");
    }

    #[tokio::test]
    async fn a_peer_that_guesses_too_often_gets_429_and_others_are_still_served() {
        let upstream = TestServer::start().await;
        let proxy = Running::start(|config| {
            config.proxy_auth = Some("alice:secret".parse().expect("credentials"));
        })
        .await;
        let guesser = Ipv4Addr::LOCALHOST;
        let other = Ipv4Addr::new(127, 0, 0, 2);

        // Asking without credentials is the start of a challenge, not a guess.
        for _ in 0..15 {
            assert_eq!(attempt(&proxy, guesser, None, &upstream).await.status, 407);
        }
        let good = Some("alice:secret");
        assert_eq!(attempt(&proxy, guesser, good, &upstream).await.status, 200);
        for n in 0..10 {
            let guess = format!("alice:guess{n}");
            let refused = attempt(&proxy, guesser, Some(&guess), &upstream).await;
            assert_eq!(refused.status, 407, "guess {n}: {refused:?}");
        }
        for credentials in [Some("alice:guess10"), good] {
            let locked = attempt(&proxy, guesser, credentials, &upstream).await;
            locked.assert_plain_error(429);
            let retry_after: u64 = locked
                .header("retry-after")
                .and_then(|value| value.parse().ok())
                .unwrap_or_else(|| panic!("no Retry-After in seconds: {locked:?}"));
            assert!((1..=60).contains(&retry_after), "{locked:?}");
        }
        assert_eq!(attempt(&proxy, other, good, &upstream).await.status, 200);
        assert_eq!(upstream.requests_to("/guarded").len(), 2);
    }
}
