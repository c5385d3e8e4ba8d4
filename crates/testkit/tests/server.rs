//! The test server against real clients on loopback: hyper-util's client and raw TCP.

use std::io::ErrorKind;
use std::net::SocketAddr;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use holdoff::clock::{Clock, ManualClock, TokioClock};
use holdoff_testkit::{Reply, TestServer};
use http::{HeaderMap, Method, Request, StatusCode, Version};
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::timeout;

type HttpClient = Client<HttpConnector, Full<Bytes>>;

/// Long enough for anything on loopback; only reached when a test is about to fail.
const PATIENCE: Duration = Duration::from_secs(10);

/// 1994-11-06 08:49:37 UTC, RFC 9110's example date.
fn rfc_example_date() -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(784_111_777)
}

fn client() -> HttpClient {
    Client::builder(TokioExecutor::new()).build_http()
}

struct Answer {
    status: StatusCode,
    headers: HeaderMap,
    body: Bytes,
}

async fn send(
    client: &HttpClient,
    method: Method,
    url: &str,
    body: &'static str,
) -> Result<Answer, hyper_util::client::legacy::Error> {
    let request = Request::builder()
        .method(method)
        .uri(url)
        .header("x-test", "yes")
        .body(Full::new(Bytes::from_static(body.as_bytes())))
        .expect("a valid request");
    let response = client.request(request).await?;
    let status = response.status();
    let headers = response.headers().clone();
    let body = response
        .into_body()
        .collect()
        .await
        .expect("the body arrives")
        .to_bytes();
    Ok(Answer {
        status,
        headers,
        body,
    })
}

async fn get(client: &HttpClient, url: &str) -> Answer {
    send(client, Method::GET, url, "")
        .await
        .expect("the request succeeds")
}

/// Sends raw bytes on a new connection and reads until the server closes it (or resets it).
async fn raw_exchange(addr: SocketAddr, request: &[u8]) -> std::io::Result<Vec<u8>> {
    let mut stream = TcpStream::connect(addr).await?;
    stream.write_all(request).await?;
    let mut response = Vec::new();
    timeout(PATIENCE, stream.read_to_end(&mut response))
        .await
        .expect("the server closes the connection")?;
    Ok(response)
}

mod script {
    use super::*;

    #[tokio::test]
    async fn serves_replies_in_order_then_the_default() {
        let server = TestServer::start().await;
        server.script(
            "/v1/chat",
            [Reply::too_many_requests("2"), Reply::unavailable("3")],
        );
        server.script("/v1/chat", [Reply::ok("done")]);
        assert_eq!(server.remaining("/v1/chat"), 3);
        let client = client();
        let url = server.url("/v1/chat");

        let answers = [
            get(&client, &url).await,
            get(&client, &url).await,
            get(&client, &url).await,
            get(&client, &url).await,
        ];

        let statuses = answers
            .iter()
            .map(|a| a.status.as_u16())
            .collect::<Vec<_>>();
        assert_eq!(statuses, [429, 503, 200, 200]);
        assert_eq!(answers[0].headers["retry-after"], "2");
        assert_eq!(answers[1].headers["retry-after"], "3");
        assert_eq!(answers[2].body, "done");
        assert_eq!(answers[3].body, "ok");
        assert_eq!(server.remaining("/v1/chat"), 0);
        server.shutdown().await;
    }

    #[tokio::test]
    async fn matches_the_path_without_the_query() {
        let server = TestServer::start().await;
        server.script("/search", [Reply::status(429)]);
        let client = client();

        let answer = get(&client, &server.url("/search?q=1")).await;

        assert_eq!(answer.status, 429);
        assert_eq!(server.remaining("/search"), 0);
    }

    #[tokio::test]
    async fn set_default_answers_once_the_script_is_used_up() {
        let server = TestServer::start().await;
        server.set_default("/tea", Reply::status(418).body("teapot"));
        server.script("/tea", [Reply::ok("first")]);
        let client = client();
        let url = server.url("/tea");

        assert_eq!(get(&client, &url).await.body, "first");
        for _ in 0..2 {
            let answer = get(&client, &url).await;
            assert_eq!(answer.status, 418);
            assert_eq!(answer.body, "teapot");
        }
    }

    #[tokio::test]
    async fn unscripted_paths_answer_ok_with_no_date() {
        let server = TestServer::start().await;

        let answer = get(&client(), &server.url("elsewhere")).await;

        assert_eq!(answer.status, 200);
        assert_eq!(answer.body, "ok");
        assert!(answer.headers.get("date").is_none(), "{:?}", answer.headers);
        assert_eq!(answer.headers["content-length"], "2");
    }

    #[tokio::test]
    async fn concurrent_requests_each_take_one_reply() {
        let server = TestServer::start().await;
        let count = 32;
        server.script("/c", (0..count).map(|i| Reply::ok(i.to_string())));
        let client = client();
        let url = server.url("/c");

        let tasks = (0..count)
            .map(|_| {
                let (client, url) = (client.clone(), url.clone());
                tokio::spawn(async move { get(&client, &url).await.body })
            })
            .collect::<Vec<_>>();
        let mut bodies = Vec::new();
        for task in tasks {
            bodies.push(task.await.expect("the request task finishes"));
        }

        let mut numbers = bodies
            .iter()
            .map(|body| std::str::from_utf8(body).expect("utf-8").parse::<u32>())
            .collect::<Result<Vec<_>, _>>()
            .expect("numbers");
        numbers.sort_unstable();
        assert_eq!(numbers, (0..count).collect::<Vec<_>>());
        assert_eq!(server.requests_to("/c").len(), count as usize);
        server.shutdown().await;
    }
}

mod reply {
    use super::*;

    #[tokio::test]
    async fn sends_scripted_headers_and_body() {
        let server = TestServer::start().await;
        server.script(
            "/h",
            [Reply::status(503)
                .header("x-ratelimit-reset", "60")
                .header("x-dup", "a")
                .header("X-Dup", "b")
                .retry_after("1")
                .retry_after(b"120, 120")
                .body("busy")],
        );

        let answer = get(&client(), &server.url("/h")).await;

        assert_eq!(answer.status, 503);
        assert_eq!(answer.body, "busy");
        assert_eq!(answer.headers["x-ratelimit-reset"], "60");
        let dups = answer.headers.get_all("x-dup").iter().collect::<Vec<_>>();
        assert_eq!(dups, ["a", "b"]);
        let hints = answer
            .headers
            .get_all("retry-after")
            .iter()
            .collect::<Vec<_>>();
        assert_eq!(hints, ["120, 120"]);
    }

    #[tokio::test]
    async fn sends_non_ascii_retry_after_bytes_unchanged() {
        let server = TestServer::start().await;
        server.script("/x", [Reply::too_many_requests(b"12\xff")]);

        let answer = get(&client(), &server.url("/x")).await;

        assert_eq!(answer.headers["retry-after"].as_bytes(), b"12\xff");
    }

    #[tokio::test]
    async fn insufficient_quota_is_an_openai_429() {
        let server = TestServer::start().await;
        server.script("/v1/chat", [Reply::insufficient_quota()]);

        let answer = get(&client(), &server.url("/v1/chat")).await;

        assert_eq!(answer.status, 429);
        assert!(answer.headers.get("retry-after").is_none());
        assert_eq!(answer.headers["content-type"], "application/json");
        let body: serde_json::Value = serde_json::from_slice(&answer.body).expect("json");
        assert_eq!(body["error"]["code"], "insufficient_quota");
        assert_eq!(body["error"]["type"], "insufficient_quota");
    }

    #[tokio::test]
    async fn dates_are_imf_fixdates() {
        let server = TestServer::start().await;
        let date = rfc_example_date();
        server.script(
            "/d",
            [Reply::status(503)
                .date(date)
                .retry_after_date(date + Duration::from_secs(30))],
        );

        let answer = get(&client(), &server.url("/d")).await;

        assert_eq!(answer.headers["date"], "Sun, 06 Nov 1994 08:49:37 GMT");
        assert_eq!(
            answer.headers["retry-after"],
            "Sun, 06 Nov 1994 08:50:07 GMT"
        );
    }

    #[tokio::test]
    async fn date_now_reads_the_server_clock_when_responding() {
        let clock = ManualClock::new(rfc_example_date());
        let server = TestServer::start_with_clock(clock.clone()).await;
        server.script("/d", [Reply::ok("dated").date_now()]);
        clock.advance(Duration::from_secs(60));

        let answer = get(&client(), &server.url("/d")).await;

        assert_eq!(answer.headers["date"], "Sun, 06 Nov 1994 08:50:37 GMT");
    }

    #[tokio::test]
    async fn date_now_before_1970_closes_the_connection_without_panicking() {
        let clock = ManualClock::new(UNIX_EPOCH - Duration::from_secs(1));
        let server = TestServer::start_with_clock(clock).await;
        server.script("/d", [Reply::ok("dated").date_now()]);
        let client = client();

        let failed = send(&client, Method::GET, &server.url("/d"), "").await;
        let next = get(&client, &server.url("/d")).await;

        assert!(failed.is_err());
        assert_eq!(next.body, "ok");
    }

    #[tokio::test]
    async fn reset_closes_the_connection_with_no_response() {
        let server = TestServer::start().await;
        server.script("/r", [Reply::reset()]);

        let result = raw_exchange(server.addr(), b"GET /r HTTP/1.1\r\nHost: t\r\n\r\n").await;

        let error = result.expect_err("a TCP reset, not a clean close");
        assert_eq!(error.kind(), ErrorKind::ConnectionReset);
        assert_eq!(server.requests_to("/r").len(), 1);
    }

    #[tokio::test]
    async fn reset_fails_a_client_request_and_the_server_serves_on() {
        let server = TestServer::start().await;
        server.script("/r", [Reply::reset()]);
        let client = client();

        let failed = send(&client, Method::GET, &server.url("/r"), "").await;
        let next = get(&client, &server.url("/r")).await;

        assert!(failed.is_err());
        assert_eq!(next.body, "ok");
        assert_eq!(server.requests().len(), 2);
    }

    #[tokio::test(start_paused = true)]
    async fn delay_waits_on_tokio_paused_time() {
        let server = TestServer::start().await;
        server.script("/slow", [Reply::ok("late").delay(Duration::from_secs(30))]);
        let start = TokioClock.now();

        let answer = get(&client(), &server.url("/slow")).await;

        assert_eq!(answer.body, "late");
        assert_eq!(TokioClock.now() - start, Duration::from_secs(30));
        let seen = server.requests();
        assert_eq!(seen[0].at, start, "arrival is read before the delay");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn delay_waits_until_a_manual_clock_is_advanced() {
        let clock = ManualClock::new(rfc_example_date());
        let server = TestServer::start_with_clock(clock.clone()).await;
        server.script("/slow", [Reply::ok("late").delay(Duration::from_secs(10))]);
        let url = server.url("/slow");
        let pending = tokio::spawn(async move { get(&client(), &url).await });

        timeout(PATIENCE, async {
            while clock.sleepers() == 0 {
                tokio::task::yield_now().await;
            }
        })
        .await
        .expect("the reply waits on the clock");
        assert!(!pending.is_finished());
        let arrival = server.requests()[0].at;
        assert_eq!(
            clock.next_deadline(),
            Some(arrival + Duration::from_secs(10))
        );
        clock.advance(Duration::from_secs(10));

        let answer = timeout(PATIENCE, pending)
            .await
            .expect("answered once the clock moved")
            .expect("the request task finishes");
        assert_eq!(answer.body, "late");
    }
}

mod requests {
    use super::*;

    #[tokio::test]
    async fn records_method_target_headers_and_body() {
        let server = TestServer::start().await;
        let client = client();

        send(
            &client,
            Method::POST,
            &server.url("/v1/items?page=2"),
            "{\"a\":1}",
        )
        .await
        .expect("the request succeeds");
        get(&client, &server.url("/other")).await;

        let seen = server.requests();
        assert_eq!(seen.len(), 2);
        let post = &seen[0];
        assert_eq!(post.method, Method::POST);
        assert_eq!(post.path(), "/v1/items");
        assert_eq!(post.path_and_query(), "/v1/items?page=2");
        assert_eq!(post.version, Version::HTTP_11);
        assert_eq!(post.header("x-test"), Some("yes"));
        assert_eq!(post.body, "{\"a\":1}");
        assert!(post.body_complete);
        assert_eq!(seen[1].path(), "/other");
        let to_items = server.requests_to("/v1/items");
        assert_eq!(to_items.len(), 1);
        assert_eq!(to_items[0].method, Method::POST);
    }

    #[tokio::test]
    async fn arrival_times_come_from_the_server_clock() {
        let clock = ManualClock::new(rfc_example_date());
        let server = TestServer::start_with_clock(clock.clone()).await;
        let client = client();
        let start = clock.now();

        get(&client, &server.url("/a")).await;
        clock.advance(Duration::from_secs(5));
        get(&client, &server.url("/a")).await;

        let seen = server.requests_to("/a");
        assert_eq!(seen[0].at, start);
        assert_eq!(seen[0].wall, rfc_example_date());
        assert_eq!(seen[1].at, start + Duration::from_secs(5));
        assert_eq!(seen[1].wall, rfc_example_date() + Duration::from_secs(5));
    }

    #[tokio::test]
    async fn keep_alive_requests_share_a_connection() {
        let server = TestServer::start().await;
        let client = client();

        get(&client, &server.url("/k")).await;
        get(&client, &server.url("/k")).await;
        get(&self::client(), &server.url("/k")).await;

        let connections = server
            .requests()
            .iter()
            .map(|r| r.connection)
            .collect::<Vec<_>>();
        assert_eq!(connections, [0, 0, 1]);
    }

    #[tokio::test]
    async fn a_body_broken_off_is_recorded_as_incomplete() {
        let server = TestServer::start().await;
        let mut stream = TcpStream::connect(server.addr()).await.expect("connect");
        stream
            .write_all(b"POST /t HTTP/1.1\r\nHost: t\r\nContent-Length: 10\r\n\r\nabc")
            .await
            .expect("write");
        stream.shutdown().await.expect("half-close");

        let seen = timeout(PATIENCE, server.wait_for_requests(1))
            .await
            .expect("the request is recorded");

        assert_eq!(seen[0].body, "abc");
        assert!(!seen[0].body_complete);
    }

    #[tokio::test]
    async fn a_malformed_request_gets_400_and_the_server_serves_on() {
        let server = TestServer::start().await;

        let response = raw_exchange(server.addr(), b"garbage\r\n\r\n")
            .await
            .expect("a response");
        let next = get(&client(), &server.url("/fine")).await;

        assert!(response.starts_with(b"HTTP/1.1 400"), "{response:?}");
        assert_eq!(next.body, "ok");
        assert_eq!(server.requests().len(), 1);
    }
}

mod shutdown {
    use super::*;

    #[tokio::test]
    async fn closes_idle_connections_and_stops_listening() {
        let server = TestServer::start().await;
        let addr = server.addr();
        let mut idle = TcpStream::connect(addr).await.expect("connect");
        idle.write_all(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n")
            .await
            .expect("write");
        let mut buf = [0; 1024];
        let n = idle.read(&mut buf).await.expect("a response");
        assert!(buf[..n].starts_with(b"HTTP/1.1 200"));

        timeout(PATIENCE, server.shutdown())
            .await
            .expect("shutdown does not wait for the idle connection");

        let rest = idle.read(&mut buf).await.expect("a clean close");
        assert_eq!(rest, 0);
        let refused = TcpStream::connect(addr).await.expect_err("nothing listens");
        assert_eq!(refused.kind(), ErrorKind::ConnectionRefused);
    }

    #[tokio::test]
    async fn cuts_a_request_that_hangs() {
        let server = TestServer::start().await;
        server.script("/hang", [Reply::ok("never").delay(Duration::MAX)]);
        let url = server.url("/hang");
        let pending = tokio::spawn(async move { send(&client(), Method::GET, &url, "").await });
        timeout(PATIENCE, server.wait_for_requests(1))
            .await
            .expect("the request arrives");

        timeout(PATIENCE, server.shutdown())
            .await
            .expect("shutdown does not wait for the hung request");

        let result = timeout(PATIENCE, pending)
            .await
            .expect("the client sees the close")
            .expect("the request task finishes");
        assert!(result.is_err());
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn dropping_the_server_stops_it() {
        let server = TestServer::start().await;
        let addr = server.addr();
        drop(server);

        timeout(PATIENCE, async {
            while TcpStream::connect(addr).await.is_ok() {
                tokio::task::yield_now().await;
            }
        })
        .await
        .expect("the listener closes");
    }
}

mod url {
    use super::*;

    #[tokio::test]
    async fn joins_the_path_to_the_loopback_address() {
        let server = TestServer::start().await;
        let port = server.addr().port();

        assert!(server.addr().ip().is_loopback());
        assert_eq!(
            server.url("/a?b=1"),
            format!("http://127.0.0.1:{port}/a?b=1")
        );
        assert_eq!(server.url("a"), format!("http://127.0.0.1:{port}/a"));
        assert_eq!(server.url(""), format!("http://127.0.0.1:{port}/"));
    }
}
