//! The control API's HTTP/1.1 server: accepting, routing, and the JSON it answers.

use std::convert::Infallible;
use std::future::Future;
use std::net::IpAddr;
use std::pin::pin;
use std::sync::Arc;
use std::time::Duration;

use holdoff::Receipt;
use holdoff::clock::{Clock, TokioClock};
use http::header::{ALLOW, HOST, ORIGIN};
use http::{HeaderValue, Method, Request, StatusCode};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use serde::Serialize;
use tokio::net::TcpListener;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use super::Control;
use super::answer::{Answer, json, text, with_type};
use crate::report::time;
use crate::shared::OnFailure;
use crate::stages::WindowInfo;
use crate::stages::fault_kinds;

/// How long a request head may take to arrive.
const HEADER_TIMEOUT: Duration = Duration::from_secs(10);

/// How long requests in flight may take to finish once shutdown begins.
const GRACE: Duration = Duration::from_secs(1);

/// How long to wait after a failed accept (out of file descriptors) before the next.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(50);

const INDEX: &str = "holdoff control API
GET  /status           counts, verdicts, open windows, seed, recording (JSON)
GET  /windows          the open windows: client, method, URL, times (JSON)
GET  /verdicts?since=N the judge's verdicts against retries from number N on: kind, client,
                       process id, method, URL, the judge's sentence (JSON)
POST /recording/start  start recording events
POST /recording/stop   stop recording events
GET  /ca.pem           the interception CA certificate
GET  /metrics          Prometheus metrics

Dev Proxy's API paths:
GET  /proxy                          {\"recording\", \"configFile\"}
POST /proxy                          {\"recording\": true|false}
POST /proxy/stopProxy                stop, as Ctrl-C (the reports are written)
GET  /proxy/rootCertificate?format=crt  the CA certificate
POST /proxy/jwtToken                 a bearer token: {\"name\", \"audiences\", \"roles\", ...}
POST /proxy/mockRequest              send the configured mock request (a webhook's call)
";

const METRICS_INDEX: &str = "holdoff metrics
GET  /metrics          Prometheus metrics
";

/// The content type of the Prometheus text format, version 0.0.4.
const METRICS_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Which endpoints a listener answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Routes {
    /// The whole API, `/metrics` included.
    All,
    /// `/metrics` (and the index) only.
    Metrics,
}

/// Accepts and serves connections until `shutdown`, then lets requests in flight finish for
/// at most [`GRACE`] and drops what is left.
pub(super) async fn serve(
    control: Control,
    routes: Routes,
    listener: TcpListener,
    shutdown: impl Future<Output = ()>,
) {
    let control = Arc::new(control);
    let stop = CancellationToken::new();
    let mut connections = JoinSet::new();
    let mut shutdown = pin!(shutdown);
    loop {
        tokio::select! {
            () = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    connections.spawn(connection(
                        stream,
                        Arc::clone(&control),
                        routes,
                        stop.clone(),
                    ));
                }
                Err(err) => {
                    tracing::warn!(error = %err, "control API: failed to accept a connection");
                    TokioClock.sleep_until(TokioClock.now() + ACCEPT_BACKOFF).await;
                }
            },
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
    stop.cancel();
    {
        let drained = async { while connections.join_next().await.is_some() {} };
        tokio::select! {
            () = drained => {}
            () = TokioClock.sleep_until(TokioClock.now() + GRACE) => {}
        }
    }
    connections.shutdown().await;
}

/// Serves one connection, closing it gracefully once `stop` is raised.
async fn connection(
    stream: tokio::net::TcpStream,
    control: Arc<Control>,
    routes: Routes,
    stop: CancellationToken,
) {
    let service = service_fn(move |request: Request<hyper::body::Incoming>| {
        let control = Arc::clone(&control);
        async move {
            let dev_proxy =
                routes == Routes::All && super::dev_proxy::is_dev_proxy_path(request.uri().path());
            let answer = match refusal(&request) {
                Some(refused) => refused,
                None if dev_proxy => super::dev_proxy::answer(&control, request).await,
                None => route(&control, routes, &request),
            };
            Ok::<_, Infallible>(answer)
        }
    });
    let mut builder = http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(HEADER_TIMEOUT);
    let mut conn = pin!(builder.serve_connection(TokioIo::new(stream), service));
    let result = tokio::select! {
        result = conn.as_mut() => result,
        () = stop.cancelled() => {
            conn.as_mut().graceful_shutdown();
            conn.await
        }
    };
    if let Err(err) = result {
        tracing::debug!(error = %err, "control API: a connection ended with an error");
    }
}

/// Why a request is refused before it is read: a `Host` that is not loopback (DNS
/// rebinding), or a `POST` with an `Origin` (a web page's form).
fn refusal<B>(request: &Request<B>) -> Option<Answer> {
    if !loopback_host(request) {
        return Some(text(
            StatusCode::FORBIDDEN,
            "refused: the Host is not a loopback address; use http://127.0.0.1:<port>/\n",
        ));
    }
    if request.method() == Method::POST && request.headers().contains_key(ORIGIN) {
        return Some(text(
            StatusCode::FORBIDDEN,
            "refused: a request with an Origin comes from a web page; use curl or a script\n",
        ));
    }
    None
}

/// The answer to one request (once [`refusal`] has none).
fn route<B>(control: &Control, routes: Routes, request: &Request<B>) -> Answer {
    let path = request.uri().path();
    let (allowed, get) = match (routes, path) {
        (_, "/" | "/metrics") | (Routes::All, "/status" | "/windows" | "/verdicts" | "/ca.pem") => {
            ("GET, HEAD", true)
        }
        (Routes::All, "/recording/start" | "/recording/stop") => ("POST", false),
        _ => {
            return text(
                StatusCode::NOT_FOUND,
                format!("no such endpoint: {path} (GET / lists them)\n"),
            );
        }
    };
    let method = request.method();
    let fits = if get {
        method == Method::GET || method == Method::HEAD
    } else {
        method == Method::POST
    };
    if !fits {
        let mut answer = text(
            StatusCode::METHOD_NOT_ALLOWED,
            format!("{path} answers {allowed} only, not {method}\n"),
        );
        answer
            .headers_mut()
            .insert(ALLOW, HeaderValue::from_static(allowed));
        return answer;
    }
    match (routes, path) {
        (Routes::All, "/") => text(StatusCode::OK, INDEX),
        (Routes::Metrics, "/") => text(StatusCode::OK, METRICS_INDEX),
        (_, "/metrics") => with_type(StatusCode::OK, METRICS_TYPE, control.metrics_text()),
        (_, "/status") => json(&status(control)),
        (_, "/windows") => windows(control),
        (_, "/verdicts") => {
            super::verdicts::answer(control.verdicts.as_deref(), request.uri().query())
        }
        (_, "/ca.pem") => match &control.ca_pem {
            Some(pem) => with_type(StatusCode::OK, "application/x-pem-file", pem.to_string()),
            None => text(
                StatusCode::NOT_FOUND,
                "no CA certificate: this proxy intercepts nothing (reverse mode, or no URLs \
                 watched)\n",
            ),
        },
        (_, "/recording/start") => recording(control, true),
        _ => recording(control, false),
    }
}

/// Whether the request's `Host` names this machine: `localhost`, a loopback address, or
/// none at all (HTTP/1.0).
fn loopback_host<B>(request: &Request<B>) -> bool {
    let Some(host) = request.headers().get(HOST) else {
        return true;
    };
    let Ok(host) = host.to_str() else {
        return false;
    };
    let Ok(authority) = host.parse::<http::uri::Authority>() else {
        return false;
    };
    let name = authority.host();
    let name = name
        .strip_prefix('[')
        .and_then(|name| name.strip_suffix(']'))
        .unwrap_or(name);
    name.eq_ignore_ascii_case("localhost")
        || name.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// `GET /status`.
#[derive(Debug, Serialize)]
struct Status {
    uptime_s: f64,
    requests: u64,
    responses: Classes,
    faults: Option<serde_json::Map<String, serde_json::Value>>,
    retries: Option<Retries>,
    open_windows: Option<usize>,
    seed: Option<u64>,
    recording: Option<bool>,
    /// Only when windows and counters are shared with other replicas.
    #[serde(skip_serializing_if = "Option::is_none")]
    shared_state: Option<SharedStatus>,
}

#[derive(Debug, Serialize)]
struct SharedStatus {
    /// Where, the password hidden.
    location: String,
    /// Whether the last operation succeeded.
    up: bool,
    /// Operations that failed or timed out so far.
    failures: u64,
    /// `fail-open` or `fail-closed`.
    on_failure: &'static str,
    /// The store's circuit breaker, if it has one (Redis does).
    #[serde(skip_serializing_if = "Option::is_none")]
    circuit: Option<CircuitStatus>,
}

#[derive(Debug, Serialize)]
struct CircuitStatus {
    /// Whether it is open: the store is not asked (the proxy answers by its failure mode)
    /// until a probe in the background gets an answer.
    open: bool,
    /// How many times it has opened.
    openings: u64,
}

#[derive(Debug, Serialize)]
struct Classes {
    #[serde(rename = "1xx")]
    informational: u64,
    #[serde(rename = "2xx")]
    success: u64,
    #[serde(rename = "3xx")]
    redirection: u64,
    #[serde(rename = "4xx")]
    client_error: u64,
    #[serde(rename = "5xx")]
    server_error: u64,
}

#[derive(Debug, Serialize)]
struct Retries {
    premature: u64,
    compliant: u64,
}

fn status(control: &Control) -> Status {
    let metrics = &control.metrics;
    let [
        informational,
        success,
        redirection,
        client_error,
        server_error,
    ] = metrics.responses();
    let uptime = metrics.uptime();
    Status {
        uptime_s: uptime.as_millis() as f64 / 1000.0,
        requests: metrics.requests(),
        responses: Classes {
            informational,
            success,
            redirection,
            client_error,
            server_error,
        },
        faults: control.faults.as_ref().map(|faults| {
            fault_kinds(faults.counts())
                .into_iter()
                .map(|(kind, count)| (kind.to_owned(), count.into()))
                .collect()
        }),
        retries: control.judge.as_ref().map(|judge| {
            let verdicts = judge.judge().verdicts();
            Retries {
                premature: verdicts.premature,
                compliant: verdicts.compliant,
            }
        }),
        open_windows: control
            .judge
            .as_ref()
            .map(|judge| judge.judge().open_windows()),
        seed: control.faults.as_ref().map(|faults| faults.seed()),
        recording: control.recording.as_ref().map(|switch| switch.is_on()),
        shared_state: control
            .judge
            .as_ref()
            .and_then(|judge| judge.shared())
            .map(|store| SharedStatus {
                location: store.state().location(),
                up: store.is_up(),
                failures: store.failures(),
                on_failure: match store.on_failure() {
                    OnFailure::FailClosed { .. } => "fail-closed",
                    _ => "fail-open",
                },
                circuit: store.circuit().map(|circuit| CircuitStatus {
                    open: circuit.open,
                    openings: circuit.openings,
                }),
            }),
    }
}

/// `GET /windows`.
#[derive(Debug, Serialize)]
struct Windows {
    /// How many windows the judge has open: more than are listed when some went unlabelled.
    open: usize,
    windows: Vec<Window>,
}

#[derive(Debug, Serialize)]
struct Window {
    client: String,
    method: String,
    url: String,
    throttled_at: String,
    permitted_at: String,
    remaining_ms: u64,
}

impl From<WindowInfo> for Window {
    fn from(info: WindowInfo) -> Window {
        Window {
            client: info.client,
            method: info.method,
            url: info.url,
            throttled_at: time::format(info.throttled_at),
            permitted_at: time::format(info.permitted_at),
            remaining_ms: u64::try_from(info.remaining.as_millis()).unwrap_or(u64::MAX),
        }
    }
}

fn windows(control: &Control) -> Answer {
    let Some(source) = &control.windows else {
        return text(
            StatusCode::NOT_FOUND,
            "open windows are not tracked by this proxy (no judge)\n",
        );
    };
    let now = Receipt::now(control.metrics.clock());
    let windows: Vec<Window> = source
        .open_windows(now)
        .into_iter()
        .map(Window::from)
        .collect();
    let open = control
        .judge
        .as_ref()
        .map_or(windows.len(), |judge| judge.judge().open_windows());
    json(&Windows { open, windows })
}

/// `POST /recording/start` and `/recording/stop`.
fn recording(control: &Control, on: bool) -> Answer {
    let Some(switch) = &control.recording else {
        return text(
            StatusCode::NOT_FOUND,
            "recording cannot be switched: this proxy records no events\n",
        );
    };
    switch.set(on);
    json(&serde_json::json!({ "recording": switch.is_on() }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(method: Method, path: &str, host: Option<&str>) -> Request<()> {
        let mut builder = Request::builder().method(method).uri(path);
        if let Some(host) = host {
            builder = builder.header(HOST, host);
        }
        builder.body(()).unwrap()
    }

    mod status {
        use super::*;
        use crate::judge::{Judge, KeyMode};
        use crate::stages::{JudgeStage, MetricsStage};

        use crate::shared::{Breakered, Circuit, SharedStore, Unreachable};

        #[test]
        fn shows_the_shared_state_only_when_there_is_one() {
            let judge = || Arc::new(Judge::new(KeyMode::default(), TokioClock.now()));
            let metrics = Arc::new(MetricsStage::new(Arc::new(TokioClock)));
            let alone = Control::new(Arc::clone(&metrics))
                .judge(Arc::new(JudgeStage::new(judge(), Arc::new(TokioClock))));
            let text = serde_json::to_string(&status(&alone)).unwrap();
            assert!(!text.contains("shared_state"), "{text}");

            let store = Arc::new(SharedStore::new(
                Arc::new(Unreachable),
                OnFailure::FailClosed {
                    hold: Duration::from_secs(5),
                },
            ));
            store.settle::<()>(Err("refused".into()));
            let shared = Control::new(metrics).judge(Arc::new(
                JudgeStage::new(judge(), Arc::new(TokioClock)).with_shared(store),
            ));
            let value = serde_json::to_value(status(&shared)).unwrap();
            assert_eq!(
                value["shared_state"],
                serde_json::json!({
                    "location": "redis://127.0.0.1:1/0",
                    "up": false,
                    "failures": 1,
                    "on_failure": "fail-closed",
                })
            );
        }

        #[test]
        fn shows_the_shared_states_circuit_breaker() {
            let metrics = Arc::new(MetricsStage::new(Arc::new(TokioClock)));
            let state = Arc::new(Breakered(std::sync::Mutex::new(Circuit {
                open: true,
                openings: 2,
            })));
            let store = Arc::new(SharedStore::new(state.clone(), OnFailure::FailOpen));
            let judge = Arc::new(Judge::new(KeyMode::default(), TokioClock.now()));
            let control = Control::new(metrics).judge(Arc::new(
                JudgeStage::new(judge, Arc::new(TokioClock)).with_shared(store),
            ));
            let value = serde_json::to_value(status(&control)).unwrap();
            assert_eq!(
                value["shared_state"]["circuit"],
                serde_json::json!({"open": true, "openings": 2})
            );
            assert_eq!(value["shared_state"]["on_failure"], "fail-open");

            state.0.lock().unwrap().open = false;
            let value = serde_json::to_value(status(&control)).unwrap();
            assert_eq!(
                value["shared_state"]["circuit"],
                serde_json::json!({"open": false, "openings": 2})
            );
        }
    }

    mod loopback_host {
        use super::*;

        #[test]
        fn accepts_loopback_names_and_addresses_with_or_without_a_port() {
            for host in [
                "127.0.0.1:9000",
                "127.0.0.1",
                "127.1.2.3:80",
                "localhost:9000",
                "LOCALHOST",
                "[::1]:9000",
                "[::1]",
            ] {
                let request = request(Method::GET, "/", Some(host));
                assert!(loopback_host(&request), "{host}");
            }
            assert!(loopback_host(&request(Method::GET, "/", None)));
        }

        #[test]
        fn refuses_any_other_name() {
            for host in [
                "attacker.example",
                "attacker.example:9000",
                "localhost.attacker.example",
                "10.0.0.1:9000",
                "[::2]:9000",
                "not a host",
            ] {
                let request = request(Method::GET, "/", Some(host));
                assert!(!loopback_host(&request), "{host}");
            }
        }
    }
}
