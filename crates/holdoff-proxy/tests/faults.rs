//! The fault stage inside the real proxy, in process, against a real upstream on loopback:
//! injected errors with `@dynamic` hints, body fragments, mocks, network faults, latency, and
//! the judge catching a retry that ignores an injected hint.
//!
//! Clients are reqwest through the proxy, or raw TCP where a fault leaves no response to
//! parse. Nothing here measures time.

mod support;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use bytes::Bytes;
use holdoff::HttpDate;
use holdoff::clock::{Clock, Sleep, TokioClock};
use holdoff_proxy::JudgeStage;
use holdoff_proxy::fault::FaultRng;
use holdoff_proxy::fault::{Algorithm, HeaderStyle, Limit, ResetFormat};
use holdoff_proxy::fault::{ErrorResponse, HeaderTemplate, Rate, RetryAfterForm};
use holdoff_proxy::fault::{
    ErrorRule, FaultOutcome, FaultPlan, LatencyRule, MockRule, NetworkFault, RateLimitRule,
    RequestMatch, Scope,
};
use holdoff_proxy::judge::{Judge, KeyMode, Verdict};
use holdoff_proxy::{FaultCounts, FaultStage};
use holdoff_proxy::{Pipeline, ShutdownHandle, Stage, Summary};
use holdoff_testkit::{Reply, TestServer};
use http::{StatusCode, header};
use support::{InProcess, PROMPTLY};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// The proxy, running in this process with the given stages.
struct Running {
    addr: SocketAddr,
    handle: ShutdownHandle,
    task: JoinHandle<Summary>,
}

impl Running {
    /// A proxy watching every path of `upstream`.
    async fn start(upstream: &TestServer, stages: Vec<Arc<dyn Stage>>) -> Running {
        let mut config = InProcess::config();
        config.urls_to_watch = vec![upstream.url("/*").parse().expect("a watch pattern")];
        let proxy = InProcess::start(config, stages).await;
        Running {
            addr: proxy.addr,
            handle: proxy.handle,
            task: proxy.task,
        }
    }

    /// A reqwest client sending everything through the proxy.
    fn client(&self) -> reqwest::Client {
        self.client_with(reqwest::Client::builder())
    }

    fn client_with(&self, builder: reqwest::ClientBuilder) -> reqwest::Client {
        // reqwest is built without a crypto provider of its own (rustls-no-provider): use
        // aws-lc-rs, as the proxy does. Another test may have installed it already.
        let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
        builder
            .proxy(reqwest::Proxy::all(format!("http://{}", self.addr)).expect("proxy URL"))
            .build()
            .expect("reqwest client")
    }

    async fn stop(self) -> Summary {
        self.handle.shutdown();
        self.task.await.expect("the proxy task")
    }
}

/// A fault stage over `plan` with a fixed seed, on the real clock.
fn faults(plan: FaultPlan) -> Arc<FaultStage> {
    Arc::new(FaultStage::new(
        plan,
        FaultRng::new(7),
        Arc::new(TokioClock),
    ))
}

fn response(status: u16, retry_after: &str) -> ErrorResponse {
    ErrorResponse {
        status: StatusCode::from_u16(status).expect("a status"),
        headers: vec![(
            header::RETRY_AFTER,
            HeaderTemplate::parse(retry_after, 2..=5).expect("a template"),
        )],
        body: Bytes::from_static(b"injected\n"),
    }
}

/// Every request to `path` of `upstream` gets `outcome`.
fn always(upstream: &TestServer, path: &str, outcome: FaultOutcome) -> ErrorRule {
    ErrorRule {
        request: RequestMatch::url(upstream.url(path).parse().expect("a pattern")),
        rate: Rate::ALWAYS,
        outcomes: vec![outcome],
    }
}

fn plan_of(errors: Vec<ErrorRule>) -> FaultPlan {
    let mut plan = FaultPlan::default();
    plan.errors = errors;
    plan
}

fn text(response: &reqwest::Response, name: &str) -> String {
    response
        .headers()
        .get(name)
        .and_then(|value| value.to_str().ok())
        .unwrap_or_default()
        .to_owned()
}

mod dynamic_hints {
    use super::*;

    #[tokio::test]
    async fn a_429_gets_its_wait_in_seconds() {
        let upstream = TestServer::start().await;
        let plan = plan_of(vec![always(
            &upstream,
            "/limited",
            FaultOutcome::Respond(response(429, "@dynamic=7")),
        )]);
        let stage = faults(plan);
        let proxy = Running::start(&upstream, vec![stage.clone()]).await;

        let answer = proxy
            .client()
            .get(upstream.url("/limited"))
            .send()
            .await
            .expect("an answer");
        assert_eq!(answer.status(), 429);
        assert_eq!(text(&answer, "retry-after"), "7");
        assert_eq!(answer.text().await.expect("body"), "injected\n");
        assert!(upstream.requests_to("/limited").is_empty());
        assert_eq!(stage.counts().errors, 1);
        proxy.stop().await;
    }

    #[tokio::test]
    async fn a_503_gets_an_http_date_with_a_matching_date() {
        let upstream = TestServer::start().await;
        let mut plan = plan_of(vec![always(
            &upstream,
            "/busy",
            FaultOutcome::Respond(response(503, "@dynamic=30")),
        )]);
        plan.retry_after_form = RetryAfterForm::HttpDate;
        let proxy = Running::start(&upstream, vec![faults(plan)]).await;

        let answer = proxy
            .client()
            .get(upstream.url("/busy"))
            .send()
            .await
            .expect("an answer");
        assert_eq!(answer.status(), 503);
        let parse = |name: &str| {
            HttpDate::parse(text(&answer, name).as_bytes(), SystemTime::UNIX_EPOCH)
                .unwrap_or_else(|err| panic!("{name}: {err:?}"))
                .unix_seconds()
        };
        assert_eq!(parse("retry-after") - parse("date"), 30);
        proxy.stop().await;
    }
}

mod matching {
    use super::*;

    #[tokio::test]
    async fn a_body_fragment_faults_only_the_bodies_that_contain_it() {
        let upstream = TestServer::start().await;
        let mut rule = always(
            &upstream,
            "/chat",
            FaultOutcome::Respond(response(429, "@dynamic=3")),
        );
        rule.request.method = Some(http::Method::POST);
        rule.request.body_fragment = Some("\"model\":\"big\"".to_owned());
        let proxy = Running::start(&upstream, vec![faults(plan_of(vec![rule]))]).await;
        let client = proxy.client();

        let faulted = client
            .post(upstream.url("/chat"))
            .body("{\"model\":\"big\"}")
            .send()
            .await
            .expect("an answer");
        assert_eq!(faulted.status(), 429);
        assert_eq!(text(&faulted, "retry-after"), "3");

        let passed = client
            .post(upstream.url("/chat"))
            .body("{\"model\":\"small\"}")
            .send()
            .await
            .expect("an answer");
        assert_eq!(passed.status(), 200);
        let seen = upstream.requests_to("/chat");
        assert_eq!(seen.len(), 1, "only the unfaulted request went upstream");
        assert_eq!(seen[0].body, "{\"model\":\"small\"}");
        proxy.stop().await;
    }

    #[tokio::test]
    async fn a_mock_with_nth_answers_only_that_request() {
        let upstream = TestServer::start().await;
        upstream.set_default("/items", Reply::ok("from upstream"));
        let mut plan = FaultPlan::default();
        plan.mocks.push(MockRule {
            request: RequestMatch::url(upstream.url("/items").parse().expect("a pattern")),
            nth: Some(2),
            response: FaultOutcome::Respond(ErrorResponse {
                status: StatusCode::OK,
                headers: Vec::new(),
                body: Bytes::from_static(b"mocked"),
            }),
        });
        let proxy = Running::start(&upstream, vec![faults(plan)]).await;
        let client = proxy.client();

        let mut bodies = Vec::new();
        for _ in 0..3 {
            let answer = client
                .get(upstream.url("/items"))
                .send()
                .await
                .expect("an answer");
            bodies.push(answer.text().await.expect("body"));
        }
        assert_eq!(bodies, ["from upstream", "mocked", "from upstream"]);
        assert_eq!(upstream.requests_to("/items").len(), 2);
        proxy.stop().await;
    }

    #[tokio::test]
    async fn latency_delays_and_then_forwards() {
        let upstream = TestServer::start().await;
        let mut plan = FaultPlan::default();
        plan.latency = Some(LatencyRule {
            url: None,
            rate: Rate::ALWAYS,
            delay: Duration::from_millis(5)..=Duration::from_millis(20),
        });
        let stage = faults(plan);
        let proxy = Running::start(&upstream, vec![stage.clone()]).await;

        let answer = proxy
            .client()
            .get(upstream.url("/slow"))
            .send()
            .await
            .expect("an answer");
        assert_eq!(answer.status(), 200);
        assert_eq!(upstream.requests_to("/slow").len(), 1);
        assert_eq!(stage.counts().delayed, 1);
        proxy.stop().await;
    }
}

mod network {
    use super::*;

    /// Sends a bodiless GET for `url` through the proxy on a raw connection, and returns
    /// what arrives before the proxy closes it, or the error that ended the reading.
    async fn raw_get(proxy: SocketAddr, url: &str) -> std::io::Result<Vec<u8>> {
        let uri: http::Uri = url.parse().expect("a URL");
        let host = uri.authority().expect("an authority");
        let mut stream = TcpStream::connect(proxy).await.expect("connect");
        let head = format!("GET {url} HTTP/1.1\r\nhost: {host}\r\n\r\n");
        stream.write_all(head.as_bytes()).await.expect("write");
        let mut received = Vec::new();
        let read = tokio::time::timeout(PROMPTLY, stream.read_to_end(&mut received)).await;
        read.expect("the connection stayed open").map(|_| received)
    }

    #[tokio::test]
    async fn a_reset_is_a_tcp_reset_without_a_response() {
        let upstream = TestServer::start().await;
        let stage = faults(plan_of(vec![always(
            &upstream,
            "/reset",
            FaultOutcome::Network(NetworkFault::Reset),
        )]));
        let proxy = Running::start(&upstream, vec![stage.clone()]).await;

        // ECONNRESET, as clients of toxiproxy and WireMock expect: not a clean close.
        let received = raw_get(proxy.addr, &upstream.url("/reset")).await;
        assert_eq!(
            received.as_ref().map_err(std::io::Error::kind).err(),
            Some(std::io::ErrorKind::ConnectionReset),
            "{received:?}"
        );
        assert!(upstream.requests_to("/reset").is_empty());
        assert_eq!(stage.counts().resets, 1);
        proxy.stop().await;
    }

    /// [`TokioClock`], counting its sleeps alive: a hang's sleep ends when its request
    /// future is dropped.
    struct CountingClock {
        alive: Arc<watch::Sender<usize>>,
    }

    struct Alive(Arc<watch::Sender<usize>>);

    impl Drop for Alive {
        fn drop(&mut self) {
            self.0.send_modify(|alive| *alive -= 1);
        }
    }

    impl Clock for CountingClock {
        fn now(&self) -> Instant {
            TokioClock.now()
        }
        fn wall_now(&self) -> SystemTime {
            TokioClock.wall_now()
        }
        fn sleep_until(&self, deadline: Instant) -> Sleep {
            self.alive.send_modify(|alive| *alive += 1);
            let alive = Alive(Arc::clone(&self.alive));
            let sleep = TokioClock.sleep_until(deadline);
            Box::pin(async move {
                let _alive = alive;
                sleep.await;
            })
        }
    }

    #[tokio::test]
    async fn a_hang_lasts_until_the_client_gives_up_and_others_are_served() {
        let upstream = TestServer::start().await;
        let hang = NetworkFault::Hang {
            r#for: Duration::from_secs(3600),
        };
        let (alive, mut sleeping) = watch::channel(0);
        let clock = CountingClock {
            alive: Arc::new(alive),
        };
        let plan = plan_of(vec![always(
            &upstream,
            "/hang",
            FaultOutcome::Network(hang),
        )]);
        let stage = Arc::new(FaultStage::new(plan, FaultRng::new(7), Arc::new(clock)));
        let proxy = Running::start(&upstream, vec![stage.clone()]).await;

        let impatient =
            proxy.client_with(reqwest::Client::builder().timeout(Duration::from_millis(300)));
        let url = upstream.url("/hang");
        let hung = tokio::spawn(async move { impatient.get(url).send().await });
        tokio::time::timeout(PROMPTLY, sleeping.wait_for(|alive| *alive == 1))
            .await
            .expect("the request is held")
            .expect("the clock");

        // Meanwhile, others are served.
        let other = proxy
            .client()
            .get(upstream.url("/fine"))
            .send()
            .await
            .expect("an answer");
        assert_eq!(other.status(), 200);

        let error = hung.await.expect("the client task").expect_err("no answer");
        assert!(error.is_timeout(), "{error}");
        // The client closed its connection: hyper dropped the held request with its sleep.
        tokio::time::timeout(PROMPTLY, sleeping.wait_for(|alive| *alive == 0))
            .await
            .expect("the held request is dropped when its client leaves")
            .expect("the clock");
        assert!(upstream.requests_to("/hang").is_empty());
        assert_eq!(stage.counts().hangs, 1);
        proxy.stop().await;
    }

    #[tokio::test]
    async fn a_truncated_body_is_an_error_for_the_client() {
        let upstream = TestServer::start().await;
        upstream.set_default("/big", Reply::ok(vec![b'x'; 4000]));
        let stage = faults(plan_of(vec![always(
            &upstream,
            "/big",
            FaultOutcome::Network(NetworkFault::Truncate { after: None }),
        )]));
        let proxy = Running::start(&upstream, vec![stage.clone()]).await;

        let answer = proxy
            .client()
            .get(upstream.url("/big"))
            .send()
            .await
            .expect("a response head");
        assert_eq!(answer.status(), 200);
        assert_eq!(answer.content_length(), Some(4000), "the length is kept");
        let body = answer.bytes().await;
        assert!(
            body.is_err(),
            "a clean body of {:?} bytes",
            body.map(|b| b.len())
        );
        assert_eq!(stage.counts().truncated, 1);
        proxy.stop().await;
    }

    #[tokio::test]
    async fn a_slowed_body_arrives_whole() {
        let upstream = TestServer::start().await;
        let content: Vec<u8> = (0..3000u32).map(|i| b'a' + (i % 26) as u8).collect();
        upstream.set_default("/slow", Reply::ok(content.clone()));
        let stage = faults(plan_of(vec![always(
            &upstream,
            "/slow",
            FaultOutcome::Network(NetworkFault::SlowBody {
                bytes_per_second: 20_000,
            }),
        )]));
        let proxy = Running::start(&upstream, vec![stage.clone()]).await;

        let answer = proxy
            .client()
            .get(upstream.url("/slow"))
            .send()
            .await
            .expect("an answer");
        assert_eq!(answer.status(), 200);
        assert_eq!(answer.bytes().await.expect("the whole body"), content);
        assert_eq!(stage.counts().slowed, 1);
        proxy.stop().await;
    }
}

mod with_the_judge {
    use super::*;

    #[tokio::test]
    async fn an_injected_hint_makes_an_immediate_retry_premature() {
        let upstream = TestServer::start().await;
        let mut plan = FaultPlan::default();
        plan.rate_limits.push(RateLimitRule {
            url: None,
            method: None,
            limit: Limit {
                algorithm: Algorithm::FixedWindow,
                limit: 1,
                window: Duration::from_secs(60),
                cost: 1,
            },
            scope: Scope::Client,
            // No rate-limit headers: the judge reads them as hints too, and here only the
            // 429's Retry-After should open a window.
            headers: HeaderStyle::None,
            reset_format: ResetFormat::SecondsLeft,
            warning_threshold_percent: 0,
            when_exceeded: None,
        });
        let fault = faults(plan);
        let judge = Arc::new(JudgeStage::new(
            Arc::new(Judge::new(KeyMode::default(), TokioClock.now())),
            Arc::new(TokioClock),
        ));
        let stages: Vec<Arc<dyn Stage>> = vec![judge.clone(), fault.clone()];
        let proxy = Running::start(&upstream, stages).await;
        let client = proxy.client();
        let url = upstream.url("/quota");

        let first = client.get(&url).send().await.expect("an answer");
        assert_eq!(first.status(), 200);

        let refused = client.get(&url).send().await.expect("an answer");
        assert_eq!(refused.status(), 429);
        let wait: u64 = text(&refused, "retry-after").parse().expect("seconds");
        assert!((1..=60).contains(&wait), "{wait}");

        let premature = client.get(&url).send().await.expect("an answer");
        assert_eq!(premature.status(), 429);
        assert!(
            premature
                .text()
                .await
                .expect("body")
                .starts_with("premature retry"),
            "the judge answered"
        );

        assert_eq!(
            upstream.requests_to("/quota").len(),
            1,
            "only the first went upstream"
        );
        let counts: FaultCounts = fault.counts();
        assert_eq!(counts.rate_limited, 1, "the judge stopped the third");
        let verdicts: Vec<Verdict> = judge.events().iter().map(|e| e.verdict).collect();
        assert_eq!(verdicts, [Verdict::Premature]);
        proxy.stop().await;
    }
}

/// A fault's answer before the request body is read: the proxy reads the body first (up to
/// 1 MiB), so the client's upload ends cleanly, and never reuses a connection it left
/// half-read.
mod early_answers {
    use std::fs;
    use std::path::PathBuf;

    use holdoff_proxy::CaSource;
    use http::Method;
    use support::{TempDir, TestCa, TlsUpstream, closes_within, curl_async, read_response};

    use super::*;

    /// A body 1 MiB long: as large as the proxy reads before answering.
    const MIB: usize = 1024 * 1024;

    /// Every POST to a URL `pattern` matches gets 429.
    fn throttle_posts(pattern: &str) -> Arc<FaultStage> {
        let mut rule = ErrorRule {
            request: RequestMatch::url(pattern.parse().expect("a pattern")),
            rate: Rate::ALWAYS,
            outcomes: vec![FaultOutcome::Respond(response(429, "@dynamic=1"))],
        };
        rule.request.method = Some(Method::POST);
        faults(plan_of(vec![rule]))
    }

    /// The proxy intercepting `upstream` with a throwaway CA, whose certificate it writes
    /// into `dir` for curl's `--cacert`.
    async fn intercepting(
        upstream: &TlsUpstream,
        ca: &TestCa,
        dir: &TempDir,
    ) -> (Running, PathBuf) {
        let pattern = upstream.url("/*");
        let mut config = InProcess::config();
        config.urls_to_watch = vec![pattern.parse().expect("a watch pattern")];
        config.upstream_ca = vec![ca.pem_path()];
        config.ca = CaSource::Ephemeral;
        let pipeline = Pipeline::builder(Arc::new(TokioClock))
            .stage(throttle_posts(&pattern))
            .build();
        let proxy = InProcess::serve(config, pipeline, &[]).await;
        let cacert = dir.path().join("proxy-ca.pem");
        let pem = proxy.ca.as_ref().expect("an interception CA").cert_pem();
        fs::write(&cacert, pem).expect("write the proxy's CA");
        let running = Running {
            addr: proxy.addr,
            handle: proxy.handle,
            task: proxy.task,
        };
        (running, cacert)
    }

    /// 50 POSTs of `body` (5 curls of 10 URLs each) through the intercepting proxy with
    /// `protocol` (`--http2` or `--http1.1`): every one must end without a curl error, as
    /// `429` over `version` (`2` or `1.1`).
    async fn fifty_posts(protocol: &str, version: &str, body: &[u8]) {
        let ca = TestCa::new("holdoff test upstream CA");
        let upstream = TlsUpstream::start(&ca).await;
        let dir = TempDir::new("early-answers");
        let (proxy, cacert) = intercepting(&upstream, &ca, &dir).await;
        let data = dir.path().join("body");
        fs::write(&data, body).expect("write the body");
        let data = format!("@{}", data.display());
        let proxy_url = format!("http://{}", proxy.addr);
        let cacert = cacert.display().to_string();

        for round in 0..5 {
            let urls: Vec<String> = (0..10)
                .map(|n| upstream.url(&format!("/upload/{round}/{n}")))
                .collect();
            let mut args = vec![
                "-x",
                &proxy_url,
                "--cacert",
                &cacert,
                protocol,
                "--fail-early",
                "--data-binary",
                &data,
                "--write-out",
                "%{http_code} %{http_version}\n",
            ];
            for url in &urls {
                // One `--output` for each URL: the bodies are not what is tested.
                args.extend(["--output", "/dev/null", url]);
            }
            let output = curl_async(&args).await;
            let stderr = String::from_utf8_lossy(&output.stderr);
            assert!(
                output.status.success() && stderr.is_empty(),
                "curl {protocol} round {round} failed ({}): {stderr}",
                output.status
            );
            let statuses = String::from_utf8(output.stdout).expect("curl printed UTF-8");
            let expected = format!("429 {version}\n").repeat(10);
            assert_eq!(statuses, expected, "curl {protocol} round {round}");
        }
        assert!(upstream.seen().is_empty(), "a throttled POST went upstream");
        proxy.stop().await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn small_posts_over_http2_end_without_a_curl_error() {
        fifty_posts("--http2", "2", b"{\"prompt\":\"hello\"}").await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn one_mib_posts_over_http2_end_without_a_curl_error() {
        fifty_posts("--http2", "2", &vec![b'a'; MIB]).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn small_posts_over_http1_end_without_a_curl_error() {
        fifty_posts("--http1.1", "1.1", b"{\"prompt\":\"hello\"}").await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn one_mib_posts_over_http1_end_without_a_curl_error() {
        fifty_posts("--http1.1", "1.1", &vec![b'a'; MIB]).await;
    }

    /// The head of an absolute-form POST to `url` of `length` bytes.
    fn post_head(upstream: &TestServer, path: &str, length: usize) -> String {
        let url = upstream.url(path);
        let host = proxy_host(&url);
        format!("POST {url} HTTP/1.1\r\nHost: {host}\r\nContent-Length: {length}\r\n\r\n")
    }

    #[tokio::test]
    async fn a_body_within_the_bound_is_read_and_the_connection_serves_the_next_request() {
        let upstream = TestServer::start().await;
        let proxy = Running::start(&upstream, vec![throttle_posts(&upstream.url("/*"))]).await;
        let stream = TcpStream::connect(proxy.addr).await.expect("connect");
        let (mut read, mut write) = stream.into_split();

        // Half a MiB: more than the proxy has read along with the head.
        let length = MIB / 2;
        let head = post_head(&upstream, "/upload", length);
        let writer = tokio::spawn(async move {
            write
                .write_all(head.as_bytes())
                .await
                .expect("write the head");
            write
                .write_all(&vec![b'a'; length])
                .await
                .expect("write the body");
            write
        });
        let answer = tokio::time::timeout(PROMPTLY, read_response(&mut read))
            .await
            .expect("an answer");
        assert_eq!(answer.status, 429, "{answer:?}");
        assert_eq!(answer.header("connection"), None, "{answer:?}");

        let mut write = writer.await.expect("the writer");
        let url = upstream.url("/after");
        let get = format!("GET {url} HTTP/1.1\r\nHost: {}\r\n\r\n", proxy_host(&url));
        write
            .write_all(get.as_bytes())
            .await
            .expect("write the GET");
        let next = tokio::time::timeout(PROMPTLY, read_response(&mut read))
            .await
            .expect("a second answer");
        assert_eq!(next.status, 200, "{next:?}");
        assert_eq!(upstream.requests_to("/after").len(), 1);
        assert!(upstream.requests_to("/upload").is_empty());
        proxy.stop().await;
    }

    /// The `host:port` of an `http://` URL.
    fn proxy_host(url: &str) -> &str {
        url.trim_start_matches("http://")
            .split('/')
            .next()
            .unwrap_or_default()
    }

    #[tokio::test]
    async fn a_body_past_the_bound_gets_connection_close_and_the_connection_ends() {
        let upstream = TestServer::start().await;
        let proxy = Running::start(&upstream, vec![throttle_posts(&upstream.url("/*"))]).await;
        let mut stream = TcpStream::connect(proxy.addr).await.expect("connect");

        // Announced larger than the bound: the proxy answers without waiting for it.
        let head = post_head(&upstream, "/upload", 2 * MIB);
        stream
            .write_all(head.as_bytes())
            .await
            .expect("write the head");
        let answer = tokio::time::timeout(PROMPTLY, read_response(&mut stream))
            .await
            .expect("an answer");
        assert_eq!(answer.status, 429, "{answer:?}");
        assert_eq!(answer.header("connection"), Some("close"), "{answer:?}");
        assert!(
            closes_within(&mut stream, PROMPTLY).await,
            "the proxy kept a half-read connection open"
        );
        assert!(upstream.requests_to("/upload").is_empty());
        proxy.stop().await;
    }
}
