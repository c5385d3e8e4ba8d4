//! Builds what a [`Wiring`] describes: the stages on the one clock, the shared-state store,
//! the pipeline, the server bound to its address, the side servers and the tasks that keep
//! them; then logs what the proxy does and records the start.

use std::io;
use std::net::Ipv4Addr;
use std::sync::Arc;

use holdoff::clock::{Clock, TokioClock};
use holdoff_proxy::fault::FaultRng;
use holdoff_proxy::judge::{Judge, Record};
use holdoff_proxy::report::Recorder;
use holdoff_proxy::{Control, ErrorKind, MetricsStage, Pipeline, ProxyError, ProxyServer};
use holdoff_proxy::{FaultStage, JudgeStage, Upstream, VerdictFeed, WindowBook};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::args::usage;
use super::serving::{Serving, Stages};
use super::shared_state::shared_store;
use super::wiring::{FaultsLog, SideServer, StagesWiring, Wiring};
use super::{faults, logging};
use crate::failure::Failure;

/// Builds `wiring`, binds, logs what the proxy does, and records the start in `recorder`.
///
/// # Errors
///
/// [`Failure::Runtime`] when the proxy cannot start (the address is in use, the CA cannot be
/// read), or [`Failure::Usage`] for a setting the server refused or a `state` section whose
/// store cannot be made.
pub(super) async fn start(wiring: Wiring, recorder: Arc<Recorder>) -> Result<Serving, Failure> {
    let Wiring {
        config,
        stages: wired,
        counted,
        side_servers,
        idle_timeout,
        processes,
        mut run,
        output,
        quiet,
        api_stop,
        config_file,
        mock_request,
    } = wiring;
    let api_stop = api_stop.then(CancellationToken::new);
    let port = config.listen.port();
    let upstream = config.upstream.clone();
    let watching = config.urls_to_watch.len();

    // The one clock the proxy and its stages read.
    let clock: Arc<dyn Clock> = Arc::new(TokioClock);
    let mut tasks = Vec::new();
    // With a control API, the judge's verdicts pass through a feed for `GET /verdicts` on
    // their way to the recorder.
    let feed = side_servers
        .iter()
        .any(|side| matches!(side, SideServer::Control(_)))
        .then(|| {
            let feed = VerdictFeed::new()
                .forward_to(recorder.clone())
                .fail_on_no_backoff(run.fail_on_no_backoff);
            Arc::new(feed)
        });
    let record: Arc<dyn Record> = match &feed {
        Some(feed) => feed.clone(),
        None => recorder.clone(),
    };
    let (stages, faults_log) = match wired {
        Some(wired) => Some(build_stages(wired, record, &clock, &mut tasks)?),
        None => None,
    }
    .unzip();

    // The pipeline puts each stage in its place (see `Pipeline`), and runs their upkeep.
    let mut pipeline = Pipeline::builder(Arc::clone(&clock));
    if let Some(stages) = &stages {
        pipeline = pipeline
            .judge(Arc::clone(&stages.judge))
            .faults(Arc::clone(&stages.faults));
    }
    let observed = counted.then(|| {
        let metrics = Arc::new(MetricsStage::new(Arc::clone(&clock)));
        let book = stages
            .as_ref()
            .map(|stages| Arc::new(WindowBook::new(Arc::clone(stages.judge.judge()))));
        (metrics, book)
    });
    if let Some((metrics, book)) = &observed {
        pipeline = pipeline.metrics(Arc::clone(metrics));
        if let Some(book) = book {
            pipeline = pipeline.windows(Arc::clone(book));
        }
    }
    let pipeline = pipeline.build();
    let mut server = match ProxyServer::bind(config, pipeline).await {
        Ok(server) => server,
        Err(err) => {
            abort(tasks);
            return Err(start_failed(&err, port));
        }
    };

    if let Some(processes) = processes {
        tracing::info!(
            "handling only the traffic of {}; other clients pass through untouched",
            processes.describe()
        );
        server.filter_connections(Arc::new(processes));
    }
    log_mode(upstream.as_ref(), &server, watching);
    let idle = idle_timeout.zip(observed.as_ref().map(|(metrics, _)| Arc::clone(metrics)));
    let mut endpoints = Vec::new();
    if let Some((metrics, book)) = observed {
        let mut control = Control::new(metrics).recording(recorder.clone());
        if let Some(stages) = &stages {
            control = control
                .judge(Arc::clone(&stages.judge))
                .faults(Arc::clone(&stages.faults));
            if let Some(feed) = &feed {
                control = control.verdicts(Arc::clone(feed));
            }
        }
        if let Some(book) = book {
            control = control.windows(book);
        }
        if let Some(ca) = server.ca() {
            control = control.ca_pem(ca.cert_pem());
        }
        if let Some(stop) = &api_stop {
            control = control.stop_with(stop.clone());
        }
        if let Some(file) = &config_file {
            control = control.config_file(file.display().to_string());
        }
        if let Some(request) = mock_request {
            control = control.mock_request(Arc::new(super::mock_request::Sender::new(request)));
        }
        for side in side_servers {
            let (what, port) = (side.what(), side.port());
            let listener = match TcpListener::bind((Ipv4Addr::LOCALHOST, port)).await {
                Ok(listener) => listener,
                Err(err) => {
                    abort(tasks);
                    return Err(Failure::Runtime(format!(
                        "failed to listen for the {what} on 127.0.0.1:{port}: {err}; pick \
                         another port, or 0 for a free one"
                    )));
                }
            };
            if let Ok(addr) = listener.local_addr() {
                // Not to be reached through the proxy: see `add_own_address`.
                server.add_own_address(addr);
            }
            let addr = listener
                .local_addr()
                .map_or_else(|_| format!("127.0.0.1:{port}"), |addr| addr.to_string());
            endpoints.push((what, addr.clone()));
            let control = control.clone();
            let pending = std::future::pending::<()>();
            tasks.push(match side {
                SideServer::Metrics(_) => {
                    tracing::info!("metrics on http://{addr}/metrics");
                    tokio::spawn(control.serve_metrics(listener, pending))
                }
                SideServer::Control(_) => {
                    tracing::info!(
                        "control API on http://{addr}/ (status, windows, verdicts, recording, \
                         ca.pem, metrics)"
                    );
                    tokio::spawn(control.serve(listener, pending))
                }
            });
        }
    }
    match (&stages, faults_log) {
        (Some(stages), Some(log)) => log_faults(log, stages.faults.seed()),
        _ => tracing::info!("passing everything through: no faults, no judge"),
    }

    run.proxy_url = format!("http://{}", server.local_addr());
    recorder.start(clock.wall_now(), run);
    Ok(Serving {
        server,
        endpoints,
        stages,
        tasks,
        recorder,
        output,
        quiet,
        api_stop,
        idle,
        clock,
    })
}

/// The judge, recording in `recorder`, and the faults `wired` describes, with the task that
/// reloads the faults pushed on `tasks`; and what to log of them once the proxy listens.
fn build_stages(
    wired: StagesWiring,
    recorder: Arc<dyn Record>,
    clock: &Arc<dyn Clock>,
    tasks: &mut Vec<JoinHandle<()>>,
) -> Result<(Stages, FaultsLog), Failure> {
    let StagesWiring {
        key,
        penalty,
        min_backoff,
        max_windows,
        plan,
        seed,
        state,
        reload,
        log,
    } = wired;
    let judge = Judge::new(key, clock.now())
        .penalty(penalty)
        .max_windows(max_windows);
    // The recorder counts the verdicts; the stage keeps none of its own.
    let mut judge = JudgeStage::new(Arc::new(judge), Arc::clone(clock))
        .keep_events(0)
        .min_backoff(min_backoff)
        .with_recorder(recorder);
    let mut fault_stage = FaultStage::new(plan, FaultRng::new(seed), Arc::clone(clock));
    if let Some(state) = &state {
        let store = shared_store(state)
            .map_err(|message| Failure::Usage(format!("{}: {message}", reload.source)))?;
        judge = judge.with_shared(Arc::clone(&store));
        fault_stage = fault_stage.with_shared(store);
    }
    let stages = Stages {
        judge: Arc::new(judge),
        faults: Arc::new(fault_stage),
    };
    tasks.push(tokio::spawn(faults::reload(
        reload.source,
        reload.files,
        Arc::clone(&stages.faults),
        reload.overrides,
        state,
        Arc::clone(clock),
    )));
    Ok((stages, log))
}

/// Stops the tasks started before the proxy failed to start.
fn abort(tasks: Vec<JoinHandle<()>>) {
    for task in tasks {
        task.abort();
    }
}

/// Which proxy this is: reverse, forward intercepting HTTPS (and the CA clients must trust),
/// or forward tunnelling it.
fn log_mode(upstream: Option<&Upstream>, server: &ProxyServer, watching: usize) {
    match (upstream, server.ca()) {
        (Some(upstream), _) => {
            tracing::info!("reverse proxy: every request goes to {upstream}")
        }
        (None, Some(ca)) => {
            let path = ca.cert_path().map_or_else(
                || "(in memory)".to_owned(),
                |path| path.display().to_string(),
            );
            tracing::info!(
                "forward proxy intercepting HTTPS for {watching} watched URL pattern(s); \
                 clients must trust the CA certificate {path}"
            );
        }
        (None, None) if watching > 0 => tracing::info!(
            "forward proxy watching {watching} URL pattern(s), none of them HTTPS: HTTPS is \
             tunnelled without interception, and no CA is needed"
        ),
        (None, None) => tracing::info!(
            "forward proxy: no URLs watched, so HTTPS is tunnelled without interception"
        ),
    }
}

/// Where the faults come from, the notes on their config, and what they are with their seed.
fn log_faults(log: FaultsLog, seed: u64) {
    let FaultsLog {
        found,
        notes,
        describe,
    } = log;
    if let Some(found) = found {
        tracing::info!(target: logging::NOTES, "{found}");
    }
    for note in notes {
        tracing::warn!(target: logging::NOTES, "{note}");
    }
    // The seed once, as a field (JSON lines keep it apart); the reports' reproduce line
    // repeats the run with it.
    tracing::info!(seed, "{describe}");
}

/// Why the proxy could not start: a usage error, or a runtime failure.
fn start_failed(err: &ProxyError, port: u16) -> Failure {
    if let Some(config) = err.config() {
        return Failure::Usage(usage(config));
    }
    let mut message = format!("failed to {err}");
    let mut source = std::error::Error::source(err);
    while let Some(cause) = source {
        message.push_str(&format!(": {cause}"));
        source = cause.source();
    }
    if err.kind() == ErrorKind::Bind {
        let hint = match err.io_kind() {
            Some(io::ErrorKind::AddrInUse) => Some(format!(
                "port {port} is in use (another proxy?): pick another with --port, or --port 0 \
                 for a free one"
            )),
            Some(io::ErrorKind::AddrNotAvailable) => {
                Some("that address is not one of this machine's: check --ip-address".to_owned())
            }
            Some(io::ErrorKind::PermissionDenied) => {
                Some("ports below 1024 need privileges: pick a higher --port".to_owned())
            }
            _ => None,
        };
        if let Some(hint) = hint {
            message.push_str("\n  hint: ");
            message.push_str(&hint);
        }
    }
    Failure::Runtime(message)
}
