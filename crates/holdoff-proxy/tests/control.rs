//! The control API and the metrics, in process, over a real proxy in front of a real
//! upstream on loopback: counts match what was sent, an injected 429 shows as an open
//! window, the recording switch flips, the CA certificate is served, and anything else is
//! refused in one line.
//!
//! Nothing here sleeps or measures time.

mod support;

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use bytes::Bytes;
use holdoff::clock::{Clock, TokioClock};
use holdoff_proxy::FaultStage;
use holdoff_proxy::JudgeStage;
use holdoff_proxy::fault::FaultRng;
use holdoff_proxy::fault::{ErrorResponse, HeaderTemplate, Rate};
use holdoff_proxy::fault::{ErrorRule, FaultOutcome, FaultPlan, RequestMatch};
use holdoff_proxy::judge::{Judge, KeyMode};
use holdoff_proxy::tls::CertificateAuthority;
use holdoff_proxy::{Control, MetricsStage, WindowBook};
use holdoff_proxy::{Pipeline, ShutdownHandle, Summary};
use holdoff_testkit::TestServer;
use http::{StatusCode, header};
use serde_json::Value;
use support::InProcess;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// How long a server may take to stop once told to: a guard against a hang, not a
/// measurement.
const PROMPTLY: Duration = Duration::from_secs(10);

/// The seed of the fault stage, as `/status` should show it.
const SEED: u64 = 7;

/// A proxy with `[metrics, book, judge, faults]` in front of `upstream`, where every
/// request to `/limited` gets an injected `429` with `Retry-After: 120`, and a control API
/// over those stages.
struct Running {
    upstream: TestServer,
    proxy: SocketAddr,
    proxy_handle: ShutdownHandle,
    proxy_task: JoinHandle<Summary>,
    control: Served,
    recording: Arc<AtomicBool>,
}

/// A control listener being served.
struct Served {
    addr: SocketAddr,
    stop: oneshot::Sender<()>,
    task: JoinHandle<()>,
}

impl Served {
    async fn start(control: Control, metrics_only: bool) -> Served {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
            .await
            .expect("bind the control listener");
        let addr = listener.local_addr().expect("its address");
        let (stop, stopped) = oneshot::channel::<()>();
        let shutdown = async {
            let _ = stopped.await;
        };
        let task = if metrics_only {
            tokio::spawn(control.serve_metrics(listener, shutdown))
        } else {
            tokio::spawn(control.serve(listener, shutdown))
        };
        Served { addr, stop, task }
    }

    fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    async fn stop(self) {
        let _ = self.stop.send(());
        tokio::time::timeout(PROMPTLY, self.task)
            .await
            .expect("the control server stops")
            .expect("the control task");
    }
}

impl Running {
    async fn start(ca: Option<&CertificateAuthority>) -> Running {
        let upstream = TestServer::start().await;
        let mut plan = FaultPlan::default();
        plan.errors.push(ErrorRule {
            request: RequestMatch::url(upstream.url("/limited").parse().expect("a pattern")),
            rate: Rate::ALWAYS,
            outcomes: vec![FaultOutcome::Respond(ErrorResponse {
                status: StatusCode::TOO_MANY_REQUESTS,
                headers: vec![(
                    header::RETRY_AFTER,
                    HeaderTemplate::parse("120", 2..=2).expect("a template"),
                )],
                body: Bytes::from_static(b"injected\n"),
            })],
        });
        let judge = Arc::new(Judge::new(KeyMode::default(), TokioClock.now()));
        let metrics = Arc::new(MetricsStage::new(Arc::new(TokioClock)));
        let book = Arc::new(WindowBook::new(Arc::clone(&judge)));
        let judge = Arc::new(JudgeStage::new(judge, Arc::new(TokioClock)));
        let faults = Arc::new(FaultStage::new(
            plan,
            FaultRng::new(SEED),
            Arc::new(TokioClock),
        ));
        let stages = Pipeline::builder(Arc::new(TokioClock))
            .faults(faults.clone())
            .judge(judge.clone())
            .windows(book.clone())
            .metrics(metrics.clone())
            .build();

        let mut config = InProcess::config();
        config.urls_to_watch = vec![upstream.url("/*").parse().expect("a watch pattern")];
        let running = InProcess::serve(config, stages, &[]).await;
        let (proxy, proxy_handle, proxy_task) = (running.addr, running.handle, running.task);

        let recording = Arc::new(AtomicBool::new(true));
        let mut control = Control::new(metrics)
            .judge(judge)
            .faults(faults)
            .windows(book)
            .recording(recording.clone());
        if let Some(ca) = ca {
            control = control.ca_pem(ca.cert_pem());
        }
        Running {
            upstream,
            proxy,
            proxy_handle,
            proxy_task,
            control: Served::start(control, false).await,
            recording,
        }
    }

    /// A client sending everything through the proxy.
    fn through_proxy(&self) -> reqwest::Client {
        install_provider();
        reqwest::Client::builder()
            .proxy(reqwest::Proxy::all(format!("http://{}", self.proxy)).expect("proxy URL"))
            .build()
            .expect("reqwest client")
    }

    async fn send(&self, client: &reqwest::Client, path: &str) -> StatusCode {
        client
            .get(self.upstream.url(path))
            .send()
            .await
            .expect("an answer through the proxy")
            .status()
    }

    async fn stop(self) {
        self.control.stop().await;
        self.proxy_handle.shutdown();
        self.proxy_task.await.expect("the proxy task");
    }
}

/// reqwest is built without a crypto provider of its own (rustls-no-provider): use aws-lc-rs, as
/// the proxy does. Another test may have installed it already.
fn install_provider() {
    let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
}

/// A client that talks to the control API directly.
fn direct() -> reqwest::Client {
    install_provider();
    reqwest::Client::builder()
        .no_proxy()
        .build()
        .expect("reqwest client")
}

/// `(status, content type, body)` of a request to the control API.
async fn call(method: reqwest::Method, url: &str) -> (StatusCode, String, String) {
    let answer = direct()
        .request(method, url)
        .send()
        .await
        .expect("an answer from the control API");
    let status = answer.status();
    let content_type = answer
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    (status, content_type, answer.text().await.expect("a body"))
}

async fn get(url: &str) -> (StatusCode, String, String) {
    call(reqwest::Method::GET, url).await
}

async fn get_json(url: &str) -> Value {
    let (status, content_type, body) = get(url).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(content_type, "application/json");
    serde_json::from_str(&body).expect("JSON")
}

/// The value of the sample named exactly `series` (name and labels) in an exposition.
fn sample(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .filter(|line| !line.starts_with('#'))
        .find_map(|line| {
            let (name, value) = line.rsplit_once(' ')?;
            (name == series).then(|| value.parse().ok())?
        })
}

/// A request written by hand, for what reqwest would not send; the answer as text.
async fn raw(addr: SocketAddr, request: &str) -> String {
    let mut stream = TcpStream::connect(addr).await.expect("connect");
    stream
        .write_all(request.as_bytes())
        .await
        .expect("send the request");
    let mut answer = String::new();
    stream
        .read_to_string(&mut answer)
        .await
        .expect("read the answer");
    answer
}

fn one_line(body: &str) {
    assert_eq!(body.trim_end().lines().count(), 1, "{body}");
    assert!(body.ends_with('\n'), "{body:?}");
}

mod status_and_metrics {
    use super::*;

    /// Three requests answered by the upstream, one throttled by a fault, and an immediate
    /// retry of that one, which the judge answers.
    async fn traffic(running: &Running) {
        let client = running.through_proxy();
        for _ in 0..3 {
            assert_eq!(running.send(&client, "/ok").await, StatusCode::OK);
        }
        for _ in 0..2 {
            assert_eq!(
                running.send(&client, "/limited").await,
                StatusCode::TOO_MANY_REQUESTS
            );
        }
    }

    #[tokio::test]
    async fn status_counts_what_went_through_the_proxy() {
        let running = Running::start(None).await;
        traffic(&running).await;

        let status = get_json(&running.control.url("/status")).await;
        assert_eq!(status["requests"], 5, "{status:#}");
        assert_eq!(status["responses"]["2xx"], 3, "{status:#}");
        assert_eq!(status["responses"]["4xx"], 2, "{status:#}");
        assert_eq!(status["faults"]["error"], 1, "{status:#}");
        assert_eq!(status["faults"]["reset"], 0, "{status:#}");
        assert_eq!(status["retries"]["premature"], 1, "{status:#}");
        assert_eq!(status["retries"]["compliant"], 0, "{status:#}");
        assert_eq!(status["open_windows"], 1, "{status:#}");
        assert_eq!(status["seed"], SEED, "{status:#}");
        assert_eq!(status["recording"], true, "{status:#}");
        assert!(status["uptime_s"].as_f64().is_some(), "{status:#}");
        running.stop().await;
    }

    #[tokio::test]
    async fn metrics_count_requests_responses_faults_verdicts_and_times() {
        let running = Running::start(None).await;
        traffic(&running).await;

        let (status, content_type, text) = get(&running.control.url("/metrics")).await;
        assert_eq!(status, StatusCode::OK);
        assert!(
            content_type.starts_with("text/plain; version=0.0.4"),
            "{content_type}"
        );
        let expected = [
            ("holdoff_requests_total{mode=\"forward\"}", 5.0),
            ("holdoff_requests_total{mode=\"intercepted\"}", 0.0),
            ("holdoff_responses_total{class=\"2xx\"}", 3.0),
            ("holdoff_responses_total{class=\"4xx\"}", 2.0),
            ("holdoff_faults_total{kind=\"error\"}", 1.0),
            ("holdoff_faults_total{kind=\"latency\"}", 0.0),
            ("holdoff_retries_total{verdict=\"premature\"}", 1.0),
            ("holdoff_retries_total{verdict=\"compliant\"}", 0.0),
            ("holdoff_open_windows", 1.0),
            // The upstream answered the three /ok; the fault and the judge the others.
            ("holdoff_response_seconds_count{source=\"upstream\"}", 3.0),
            ("holdoff_response_seconds_count{source=\"holdoff\"}", 2.0),
            (
                "holdoff_response_seconds_bucket{source=\"upstream\",le=\"+Inf\"}",
                3.0,
            ),
        ];
        for (series, value) in expected {
            assert_eq!(sample(&text, series), Some(value), "{series} in\n{text}");
        }
        for family in [
            "holdoff_requests_total counter",
            "holdoff_responses_total counter",
            "holdoff_faults_total counter",
            "holdoff_retries_total counter",
            "holdoff_open_windows gauge",
            "holdoff_response_seconds histogram",
        ] {
            assert!(
                text.contains(&format!("# TYPE {family}\n")),
                "{family} in\n{text}"
            );
        }
        running.stop().await;
    }

    #[tokio::test]
    async fn a_metrics_listener_answers_metrics_only() {
        let metrics = Control::new(Arc::new(MetricsStage::new(Arc::new(TokioClock))));
        let served = Served::start(metrics, true).await;

        let (status, _, text) = get(&served.url("/metrics")).await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(
            sample(&text, "holdoff_requests_total{mode=\"forward\"}"),
            Some(0.0)
        );
        assert!(!text.contains("holdoff_retries_total"), "no judge: {text}");
        let (status, _, body) = get(&served.url("/status")).await;
        assert_eq!(status, StatusCode::NOT_FOUND);
        one_line(&body);
        let (status, _, index) = get(&served.url("/")).await;
        assert_eq!(status, StatusCode::OK);
        assert!(
            index.contains("/metrics") && !index.contains("/status"),
            "{index}"
        );

        served.stop().await;
    }
}

mod windows {
    use super::*;

    #[tokio::test]
    async fn an_injected_429_is_listed_until_it_is_retried() {
        let running = Running::start(None).await;
        let listing = get_json(&running.control.url("/windows")).await;
        assert_eq!(listing["open"], 0, "{listing:#}");
        assert_eq!(listing["windows"], Value::Array(Vec::new()), "{listing:#}");

        let client = running.through_proxy();
        assert_eq!(
            running.send(&client, "/limited").await,
            StatusCode::TOO_MANY_REQUESTS
        );
        let listing = get_json(&running.control.url("/windows")).await;
        assert_eq!(listing["open"], 1, "{listing:#}");
        let window = &listing["windows"][0];
        // The test itself is the client: its process, found from the socket.
        let expected = format!("[{}]", std::process::id());
        let who = window["client"].as_str().unwrap_or_default();
        assert!(
            who.starts_with("process:") && who.ends_with(&expected),
            "{listing:#}"
        );
        assert_eq!(window["method"], "GET", "{listing:#}");
        assert_eq!(
            window["url"],
            running.upstream.url("/limited"),
            "{listing:#}"
        );
        let remaining = window["remaining_ms"].as_u64().expect("remaining_ms");
        assert!((1..=120_000).contains(&remaining), "{listing:#}");
        let time = |field: &str| -> jiff::Timestamp {
            window[field]
                .as_str()
                .and_then(|text| text.parse().ok())
                .unwrap_or_else(|| panic!("{field} in RFC 3339: {listing:#}"))
        };
        let wait = time("permitted_at").duration_since(time("throttled_at"));
        assert_eq!(wait, jiff::SignedDuration::from_secs(120), "{listing:#}");

        // A premature retry leaves the window open.
        assert_eq!(
            running.send(&client, "/limited").await,
            StatusCode::TOO_MANY_REQUESTS
        );
        let listing = get_json(&running.control.url("/windows")).await;
        assert_eq!(listing["open"], 1, "{listing:#}");
        running.stop().await;
    }
}

mod recording {
    use super::*;

    #[tokio::test]
    async fn stop_and_start_flip_the_switch_and_status_shows_it() {
        let running = Running::start(None).await;
        let (status, _, body) = call(
            reqwest::Method::POST,
            &running.control.url("/recording/stop"),
        )
        .await;
        assert_eq!(status, StatusCode::OK);
        let answer: Value = serde_json::from_str(&body).expect("JSON");
        assert_eq!(answer["recording"], false);
        assert!(!running.recording.load(Ordering::Relaxed));
        let status = get_json(&running.control.url("/status")).await;
        assert_eq!(status["recording"], false, "{status:#}");

        let (status, _, body) = call(
            reqwest::Method::POST,
            &running.control.url("/recording/start"),
        )
        .await;
        assert_eq!(status, StatusCode::OK);
        assert!(body.contains("\"recording\": true"), "{body}");
        assert!(running.recording.load(Ordering::Relaxed));
        running.stop().await;
    }

    #[tokio::test]
    async fn a_get_is_not_allowed_and_a_web_page_is_refused() {
        let running = Running::start(None).await;
        let answer = direct()
            .get(running.control.url("/recording/stop"))
            .send()
            .await
            .expect("an answer");
        assert_eq!(answer.status(), StatusCode::METHOD_NOT_ALLOWED);
        assert_eq!(
            answer.headers().get(header::ALLOW).map(|v| v.as_bytes()),
            Some(&b"POST"[..])
        );
        one_line(&answer.text().await.expect("a body"));

        let answer = direct()
            .post(running.control.url("/recording/stop"))
            .header(header::ORIGIN, "https://attacker.example")
            .send()
            .await
            .expect("an answer");
        assert_eq!(answer.status(), StatusCode::FORBIDDEN);
        one_line(&answer.text().await.expect("a body"));
        assert!(running.recording.load(Ordering::Relaxed), "unchanged");
        running.stop().await;
    }
}

mod ca {
    use super::*;

    #[tokio::test]
    async fn serves_the_ca_certificate_when_there_is_one() {
        let ca = CertificateAuthority::ephemeral().expect("an ephemeral CA");
        let running = Running::start(Some(&ca)).await;
        let (status, content_type, pem) = get(&running.control.url("/ca.pem")).await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(content_type, "application/x-pem-file");
        assert_eq!(pem, ca.cert_pem());
        assert!(pem.starts_with("-----BEGIN CERTIFICATE-----"), "{pem}");
        running.stop().await;
    }

    #[tokio::test]
    async fn says_why_there_is_none() {
        let running = Running::start(None).await;
        let (status, _, body) = get(&running.control.url("/ca.pem")).await;
        assert_eq!(status, StatusCode::NOT_FOUND);
        one_line(&body);
        assert!(body.contains("no CA certificate"), "{body}");
        running.stop().await;
    }
}

mod refusals {
    use super::*;

    #[tokio::test]
    async fn an_unknown_path_gets_a_one_line_404_and_the_index_lists_the_endpoints() {
        let running = Running::start(None).await;
        let (status, _, body) = get(&running.control.url("/nope")).await;
        assert_eq!(status, StatusCode::NOT_FOUND);
        one_line(&body);
        let (status, _, index) = get(&running.control.url("/")).await;
        assert_eq!(status, StatusCode::OK);
        for endpoint in [
            "/status",
            "/windows",
            "/recording/start",
            "/recording/stop",
            "/ca.pem",
            "/metrics",
        ] {
            assert!(index.contains(endpoint), "{endpoint} in {index}");
        }
        running.stop().await;
    }

    #[tokio::test]
    async fn a_foreign_host_is_refused() {
        let running = Running::start(None).await;
        let answer = raw(
            running.control.addr,
            "GET /status HTTP/1.1\r\nHost: attacker.example\r\nConnection: close\r\n\r\n",
        )
        .await;
        assert!(answer.starts_with("HTTP/1.1 403 "), "{answer}");
        let answer = raw(
            running.control.addr,
            "GET /status HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n",
        )
        .await;
        assert!(answer.starts_with("HTTP/1.1 200 "), "{answer}");
        running.stop().await;
    }
}
