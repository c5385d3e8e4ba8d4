//! The control API and the metrics endpoint: [`Control`], whose docs list the endpoints.

mod answer;
mod dev_proxy;
mod server;
mod verdicts;

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use tokio::net::TcpListener;

use crate::stages::{FaultStage, JudgeStage, MetricsStage, OpenWindows};

pub use verdicts::{KEPT_VERDICTS, VerdictFeed};

/// Whether events are being recorded, and a way to flip it: what
/// `POST /recording/start` and `/recording/stop` act on.
///
/// An `AtomicBool` is one, so an `Arc<AtomicBool>` shared with the recorder will do.
pub trait RecordingSwitch: Send + Sync + 'static {
    /// Whether recording is on.
    fn is_on(&self) -> bool;
    /// Turns recording on or off.
    fn set(&self, on: bool);
}

/// Sends the request Dev Proxy's MockRequestPlugin would, when `POST /proxy/mockRequest`
/// asks: e.g. a webhook's call to the app under test. The proxy's caller sends it, with a
/// client of its choice.
pub trait MockRequestSender: Send + Sync + 'static {
    /// Sends it: the status its target answered, or why it could not be sent.
    fn send(&self) -> std::pin::Pin<Box<dyn Future<Output = Result<u16, String>> + Send + '_>>;
}

/// The event recorder is a switch: off, it records no throttles and no verdicts.
impl RecordingSwitch for crate::report::Recorder {
    fn is_on(&self) -> bool {
        self.is_recording()
    }
    fn set(&self, on: bool) {
        self.set_recording(on);
    }
}

impl RecordingSwitch for AtomicBool {
    fn is_on(&self) -> bool {
        self.load(Ordering::Relaxed)
    }

    fn set(&self, on: bool) {
        self.store(on, Ordering::Relaxed);
    }
}

/// The control API and the metrics endpoint of a running proxy, over its stages: each on a
/// loopback listener of its own, both off unless asked for.
///
/// Cheap to clone (it holds `Arc`s): serve the API and the metrics on two listeners from
/// clones of one `Control`.
///
///
/// ```no_run
/// use std::sync::Arc;
/// use std::sync::atomic::AtomicBool;
/// use holdoff::clock::{Clock, TokioClock};
/// use holdoff_proxy::{Control, MetricsStage, WindowBook};
/// use holdoff_proxy::judge::{Judge, KeyMode};
/// use holdoff_proxy::JudgeStage;
/// use holdoff_proxy::{Pipeline, ProxyConfig, ProxyServer};
/// use tokio::net::TcpListener;
///
/// # #[tokio::main] async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let clock: Arc<dyn Clock> = Arc::new(TokioClock);
/// let judge = Arc::new(Judge::new(KeyMode::default(), clock.now()));
/// let metrics = Arc::new(MetricsStage::new(Arc::clone(&clock)));
/// let book = Arc::new(WindowBook::new(Arc::clone(&judge)));
/// let judge = Arc::new(JudgeStage::new(judge, Arc::clone(&clock)));
/// let pipeline = Pipeline::builder(clock)
///     .metrics(metrics.clone())
///     .windows(book.clone())
///     .judge(judge.clone())
///     .build();
/// let server = ProxyServer::bind(ProxyConfig::default(), pipeline).await?;
///
/// let recording = Arc::new(AtomicBool::new(true));
/// let control = Control::new(metrics)
///     .judge(judge)
///     .windows(book)
///     .recording(recording);
/// let listener = TcpListener::bind("127.0.0.1:0").await?;
/// println!("control API on http://{}", listener.local_addr()?);
/// tokio::spawn(control.serve(listener, std::future::pending()));
/// server.run().await;
/// # Ok(()) }
/// ```
///
/// # Endpoints
///
/// [`Control::serve`] answers:
///
/// | request | answer |
/// | --- | --- |
/// | `GET /` | this list, as text |
/// | `GET /status` | JSON: `uptime_s`, `requests`, `responses` (by class), `faults` (by kind), `retries` (`premature`, `compliant`), `open_windows`, `seed`, `recording`; `null` for what the proxy does not run |
/// | `GET /windows` | JSON: `open` (how many the judge has) and `windows`, each with `client`, `method`, `url`, `throttled_at`, `permitted_at` (RFC 3339) and `remaining_ms`, soonest first |
/// | `GET /verdicts?since=N` | JSON: `next` (the `since` to ask with next time), `missed` (verdicts from `N` on no longer kept) and `verdicts` from number `N` on (without `since`, every one kept), each with `seq`, `kind` (`premature`, `read_as_zero`, `no_backoff`), `fails` (else a warning), `client`, `pid` (of a `process:NAME[PID]` client, else `null`), `method`, `url`, `retried_at`, `why`, the judge's sentence, and `judged_by`, how it read the hint (`null` when its throttle is not known); every verdict but a compliant retry, listed before the judge's answer reaches the client. With a [`VerdictFeed`] only ([`Control::verdicts`]) |
/// | `POST /recording/start`, `POST /recording/stop` | flip the recording switch; JSON `{"recording": true\|false}` |
/// | `GET /ca.pem` | the interception CA's certificate (`application/x-pem-file`); `404` when there is none (reverse mode) |
/// | `GET /metrics` | the Prometheus text exposition (`text/plain; version=0.0.4`) |
/// | `GET /proxy`, `POST /proxy` | Dev Proxy's: JSON `{"recording", "configFile"}`; a `POST` with `{"recording": true\|false}` flips recording |
/// | `POST /proxy/stopProxy` | Dev Proxy's: `202`, then the token given to [`Control::stop_with`] is cancelled |
/// | `GET /proxy/rootCertificate?format=crt` | Dev Proxy's: the CA certificate (`application/x-x509-ca-cert`) |
/// | `POST /proxy/jwtToken` | Dev Proxy's: `{"token": …}`, a JWT for [`crate::jwt::JwtOptions`] in the body |
/// | `POST /proxy/mockRequest` | Dev Proxy's: sends the [`MockRequestSender`]'s request; `202` with `{"sent": true, "status": …}` or `{"sent": false, "error": …}` |
///
/// [`Control::serve_metrics`] answers `GET /metrics` (and `GET /`) only, for a listener of
/// its own. `HEAD` is answered wherever `GET` is. Anything else gets `404` or `405` (with
/// `Allow`) and a one-line plain-text reason.
///
/// # Metrics
///
/// - `holdoff_requests_total{mode}`: requests that entered the pipeline, by `forward`,
///   `intercepted`, `reverse`.
/// - `holdoff_responses_total{class}`: responses by `1xx` … `5xx`.
/// - `holdoff_faults_total{kind}`: injected faults by `error`, `rate_limited`, `mock`,
///   `latency`, `reset`, `hang`, `truncate`, `slow_body`, `llm_failure` (with a fault stage).
/// - `holdoff_retries_total{verdict}`: `premature` and `compliant` retries (with a judge).
/// - `holdoff_open_windows`: windows open now (with a judge).
/// - `holdoff_response_seconds{source}`: a histogram of response times, from the request
///   head to the response head, by `upstream` or `holdoff` (a stage, or the proxy itself,
///   answered). See [`MetricsStage`].
///
/// The request and response counts and times are kept by [`MetricsStage`] in atomics; the
/// rest is read from the stages when scraped.
///
/// # Safety
///
/// The API has no authentication: bind it on loopback. It refuses requests whose `Host` is
/// not a loopback name or address (`403`), which defeats DNS rebinding, and `POST`s that
/// carry an `Origin` (`403`), which browsers add to cross-site form posts; `curl` sends
/// neither.
///
/// # Cancellation
///
/// [`Control::serve`] stops accepting when its shutdown future completes, lets requests in
/// flight finish (for at most a second), then returns.
#[derive(Clone)]
pub struct Control {
    metrics: Arc<MetricsStage>,
    judge: Option<Arc<JudgeStage>>,
    faults: Option<Arc<FaultStage>>,
    windows: Option<Arc<dyn OpenWindows>>,
    verdicts: Option<Arc<VerdictFeed>>,
    recording: Option<Arc<dyn RecordingSwitch>>,
    ca_pem: Option<Arc<str>>,
    /// Cancelled by `POST /proxy/stopProxy`.
    stop: Option<tokio_util::sync::CancellationToken>,
    /// What `GET /proxy` says the config file is.
    config_file: Option<Arc<str>>,
    /// What `POST /proxy/mockRequest` sends.
    mock_request: Option<Arc<dyn MockRequestSender>>,
}

impl Control {
    /// A control over `metrics`, which must be in the proxy's pipeline (first) for the
    /// request counts and times to move.
    pub fn new(metrics: Arc<MetricsStage>) -> Control {
        Control {
            metrics,
            judge: None,
            faults: None,
            windows: None,
            verdicts: None,
            recording: None,
            ca_pem: None,
            stop: None,
            config_file: None,
            mock_request: None,
        }
    }

    /// Reports the judge's verdicts and open windows (`/status`, `/metrics`).
    pub fn judge(mut self, judge: Arc<JudgeStage>) -> Control {
        self.judge = Some(judge);
        self
    }

    /// Reports the faults injected and the seed (`/status`, `/metrics`).
    pub fn faults(mut self, faults: Arc<FaultStage>) -> Control {
        self.faults = Some(faults);
        self
    }

    /// Lists the open windows on `/windows` (without it, `/windows` answers `404`).
    pub fn windows(mut self, windows: Arc<dyn OpenWindows>) -> Control {
        self.windows = Some(windows);
        self
    }

    /// Lists the verdicts `feed` collects on `/verdicts` (without it, `/verdicts` answers
    /// `404`). The feed must be the judge's recorder: see [`VerdictFeed`].
    pub fn verdicts(mut self, feed: Arc<VerdictFeed>) -> Control {
        self.verdicts = Some(feed);
        self
    }

    /// The switch `POST /recording/start` and `/recording/stop` flip (without it, they
    /// answer `404` and `/status` says `"recording": null`).
    pub fn recording(mut self, switch: Arc<dyn RecordingSwitch>) -> Control {
        self.recording = Some(switch);
        self
    }

    /// The CA certificate `GET /ca.pem` serves, in PEM (without it, `404`).
    pub fn ca_pem(mut self, pem: impl Into<Arc<str>>) -> Control {
        self.ca_pem = Some(pem.into());
        self
    }

    /// The token `POST /proxy/stopProxy` cancels, to stop the proxy as Ctrl-C would (without
    /// it, that path answers `404`).
    pub fn stop_with(mut self, stop: tokio_util::sync::CancellationToken) -> Control {
        self.stop = Some(stop);
        self
    }

    /// The config file `GET /proxy` names (Dev Proxy's `configFile`).
    pub fn config_file(mut self, file: impl Into<Arc<str>>) -> Control {
        self.config_file = Some(file.into());
        self
    }

    /// What `POST /proxy/mockRequest` sends (without it, that path answers `404`).
    pub fn mock_request(mut self, sender: Arc<dyn MockRequestSender>) -> Control {
        self.mock_request = Some(sender);
        self
    }

    /// The Prometheus text exposition (version 0.0.4), as `GET /metrics` answers it.
    pub fn metrics_text(&self) -> String {
        crate::stages::Scrape {
            metrics: Arc::clone(&self.metrics),
            judge: self.judge.clone(),
            faults: self.faults.clone(),
        }
        .text()
    }

    /// Serves the control API on `listener` until `shutdown` completes.
    ///
    /// Bind the listener on loopback: the API has no authentication.
    pub async fn serve(self, listener: TcpListener, shutdown: impl Future<Output = ()>) {
        server::serve(self, server::Routes::All, listener, shutdown).await;
    }

    /// Serves `GET /metrics` alone on `listener` until `shutdown` completes.
    pub async fn serve_metrics(self, listener: TcpListener, shutdown: impl Future<Output = ()>) {
        server::serve(self, server::Routes::Metrics, listener, shutdown).await;
    }
}

impl std::fmt::Debug for Control {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Control")
            .field("metrics", &self.metrics)
            .field("judge", &self.judge.is_some())
            .field("faults", &self.faults.is_some())
            .field("windows", &self.windows.is_some())
            .field("verdicts", &self.verdicts.is_some())
            .field("recording", &self.recording.as_ref().map(|r| r.is_on()))
            .field("ca", &self.ca_pem.is_some())
            .finish()
    }
}
