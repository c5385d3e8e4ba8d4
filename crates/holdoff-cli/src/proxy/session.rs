//! One run of the proxy, from options to reports: what `holdoff proxy` and `holdoff run`
//! share.
//!
//! [`prepare`] does everything that can fail as a usage error before anything starts (the
//! config checked, the faults loaded, the event log and the logs opened);
//! [`Prepared::start`] binds and starts recording; [`Serving::stop_when`] serves until a
//! future completes, then drains; [`Stopped::report`] records the end, writes the reports and
//! prints the summaries.

use std::io;
use std::net::Ipv4Addr;
use std::sync::Arc;
use std::time::Duration;

use holdoff::clock::{Clock, TokioClock};
use holdoff_proxy::FaultStage;
use holdoff_proxy::JudgeStage;
use holdoff_proxy::fault::FaultRng;
use holdoff_proxy::judge::{Judge, KeyMode, Penalty};
use holdoff_proxy::report::{LogLimit, Recorder, RunInfo};
use holdoff_proxy::{Control, MetricsStage, WindowBook};
use holdoff_proxy::{ErrorKind, Pipeline, ProxyConfig, ProxyError, ProxyServer};
use tokio::net::TcpListener;

use super::logging::{self, Guard};
use super::process_tree::ProcessTree;
use super::reproduce::with_seed;
use super::serving::{Serving, Stages};
use super::shared_state::shared_store;
use super::{NoBackoffArg, Options, Output, PenaltyArg, faults, usage};
use crate::Failure;

pub(crate) use super::reproduce::reproducible_argv;

/// A proxy ready to start: its settings checked, its faults loaded, its event log open.
pub(crate) struct Prepared {
    config: ProxyConfig,
    /// `None` with `--pass-through`.
    faults: Option<(faults::Source, faults::Loaded)>,
    /// Which source was found, when none was asked for: logged at start.
    found: Option<String>,
    judge_key: Option<KeyMode>,
    judge_penalty: Option<PenaltyArg>,
    judge_min_backoff: Duration,
    /// Whether a retry without backoff after a hint-less throttle fails the run.
    fail_on_no_backoff: bool,
    seed: Option<u64>,
    overrides: faults::Overrides,
    recorder: Arc<Recorder>,
    output: Output,
    /// The log is off (`--log-level off`, Dev Proxy's `none`): no summaries on stderr either.
    quiet: bool,
    /// `--control-port` and `--metrics-port`.
    control_port: Option<u16>,
    metrics_port: Option<u16>,
    /// The command line that repeats the run ([`reproducible_argv`]), when known.
    argv: Option<Vec<String>>,
    /// `holdoff run --allow-no-traffic`.
    allow_no_traffic: bool,
    /// `holdoff proxy --timeout`: stop after this long without a request.
    idle_timeout: Option<Duration>,
    /// `--watch-pids`, `--watch-process-names`.
    processes: Option<ProcessTree>,
}

/// Checks `config` (the proxy's settings from `options` and the command's own), loads the
/// faults, opens the event log, and sets up the logs, whose guard must outlive the runtime.
///
/// URL patterns on the command line win; without any, the config file's.
///
/// # Errors
///
/// [`Failure::Usage`] for a setting that cannot work, a config that does not load, an event
/// log or log file that cannot be written, or a bad log level.
pub(crate) fn prepare(
    options: &Options,
    mut config: ProxyConfig,
) -> Result<(Prepared, Guard), Failure> {
    config
        .validate()
        .map_err(|err| Failure::Usage(usage(&err)))?;
    let processes = ProcessTree::new(&options.watch_pids, &options.watch_process_names);
    if processes.is_some() && !cfg!(target_os = "linux") {
        return Err(Failure::Usage(
            "--watch-pids and --watch-process-names need Linux, where /proc tells which \
             process a connection comes from; leave them out to handle every client"
                .to_owned(),
        ));
    }
    let mut found = None;
    let faults = match options.pass_through {
        true => None,
        false => {
            let cwd = std::env::current_dir().unwrap_or_default();
            let source = faults::Source::pick(
                options.config.as_deref(),
                options.preset.as_deref(),
                options.devproxy_config.as_deref(),
                &cwd,
            );
            let asked = options.config.is_some()
                || options.preset.is_some()
                || options.devproxy_config.is_some();
            if !asked {
                found = Some(source.found());
            }
            let loaded = source.load().map_err(Failure::Usage)?;
            Some((source, loaded))
        }
    };
    if config.urls_to_watch.is_empty()
        && let Some(urls) = faults
            .as_ref()
            .and_then(|(_, loaded)| loaded.compiled.urls_to_watch.as_ref())
    {
        config.urls_to_watch = urls.clone();
    }
    let limit = match options.events_max_size {
        Some(max) => LogLimit::rotate(max, options.events_keep),
        None => LogLimit::default(),
    };
    let recorder = Recorder::with_limit(options.events.as_deref(), limit).map_err(|err| {
        let path = options
            .events
            .as_deref()
            .unwrap_or(std::path::Path::new(""));
        Failure::Usage(format!(
            "cannot write the event log {}: {err}; check that its directory exists and is \
             writable",
            path.display()
        ))
    })?;
    // A Dev Proxy file's own logLevel, unless the command line says.
    let level = options
        .log_level
        .clone()
        .or_else(|| match &faults {
            Some((faults::Source::DevProxy(path), _)) => crate::devproxy::log_level(path),
            _ => None,
        })
        .unwrap_or_else(|| "info".to_owned());
    let level = logging::Level::parse(&level);
    let logs = logging::init(&level, options.output, options.log_file.as_deref())
        .map_err(Failure::Usage)?;
    if options.record {
        tracing::info!(
            target: logging::NOTES,
            "--record: holdoff records every request from the start, into its reports (and \
             --events); the control API's /recording/stop and /recording/start pause and resume it"
        );
    }
    let prepared = Prepared {
        config,
        faults,
        found,
        judge_key: options.judge_key.clone(),
        judge_penalty: options.judge_penalty,
        judge_min_backoff: options.judge_min_backoff,
        fail_on_no_backoff: options.judge_no_backoff == NoBackoffArg::Fail,
        seed: options.seed,
        overrides: faults::Overrides {
            failure_rate: options.failure_rate,
            retry_after_form: options.retry_after_form.map(Into::into),
            no_mocks: options.no_mocks,
        },
        recorder: Arc::new(recorder),
        output: options.output,
        quiet: level.is_off(),
        control_port: options.control_port,
        metrics_port: options.metrics_port,
        argv: None,
        allow_no_traffic: false,
        idle_timeout: None,
        processes,
    };
    Ok((prepared, logs))
}

/// The multi-thread runtime the proxy runs on, or why there is none.
pub(crate) fn runtime() -> Result<tokio::runtime::Runtime, Failure> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|err| Failure::Runtime(format!("failed to start the runtime: {err}")))
}

impl Prepared {
    /// Records `argv` ([`reproducible_argv`]) as the command line that repeats the run; the
    /// seed is added at start if the run draws one.
    pub(crate) fn reproducible_as(&mut self, argv: Vec<String>) {
        self.argv = Some(argv);
    }

    /// Records that the run allows no request to reach the proxy (`--allow-no-traffic`).
    pub(crate) fn allow_no_traffic(&mut self, allow: bool) {
        self.allow_no_traffic = allow;
    }

    /// Stops serving after `timeout` without a request ([`Serving::when_idle`]).
    pub(crate) fn stop_when_idle(&mut self, timeout: Duration) {
        self.idle_timeout = Some(timeout);
    }

    /// Watches `patterns` when neither the command line nor the config named any.
    pub(crate) fn watch_by_default(&mut self, patterns: Vec<holdoff_proxy::WatchPattern>) {
        if self.config.urls_to_watch.is_empty() {
            self.config.urls_to_watch = patterns;
        }
    }

    /// Binds, logs what the proxy does, and records the start; `command` is what `holdoff run`
    /// runs.
    ///
    /// # Errors
    ///
    /// [`Failure::Runtime`] when the proxy cannot start (the address is in use, the CA cannot
    /// be read), or [`Failure::Usage`] for a setting the server refused.
    pub(crate) async fn start(self, command: Option<Vec<String>>) -> Result<Serving, Failure> {
        let Prepared {
            config,
            faults,
            found,
            judge_key,
            judge_penalty,
            judge_min_backoff,
            fail_on_no_backoff,
            seed,
            overrides,
            recorder,
            output,
            quiet,
            control_port,
            metrics_port,
            mut argv,
            allow_no_traffic,
            idle_timeout,
            processes,
        } = self;
        let port = config.listen.port();
        let upstream = config.upstream.clone();
        let watching = config.urls_to_watch.len();

        // The one clock the proxy and its stages read.
        let clock: Arc<dyn Clock> = Arc::new(TokioClock);
        let mut tasks = Vec::new();
        // What a Dev Proxy config asked for that holdoff does differently, and what the faults
        // are: logged once the proxy listens.
        let mut notes = Vec::new();
        let mut describe = String::new();
        let (stages, source) = match faults {
            None => (None, "pass-through".to_owned()),
            Some((source, loaded)) => {
                let compiled = &loaded.compiled;
                let penalty = match judge_penalty {
                    Some(PenaltyArg::None) => Penalty::None,
                    Some(PenaltyArg::Sliding) => Penalty::Sliding,
                    None => compiled.judge_penalty.unwrap_or_default(),
                };
                let key = judge_key
                    .or_else(|| compiled.judge_key.clone())
                    .unwrap_or_default();
                let judge = Judge::new(key, clock.now()).penalty(penalty);
                let rng = seed
                    .or(compiled.seed)
                    .map_or_else(FaultRng::random, FaultRng::new);
                if seed.or(compiled.seed).is_none()
                    && let Some(argv) = &mut argv
                {
                    with_seed(argv, rng.seed());
                }
                let plan = overrides.apply(compiled.plan.clone());
                describe = format!("faults from {source}: {plan}");
                // The recorder counts the verdicts; the stage keeps none of its own.
                let mut judge = JudgeStage::new(Arc::new(judge), Arc::clone(&clock))
                    .keep_events(0)
                    .min_backoff(judge_min_backoff)
                    .with_recorder(recorder.clone());
                let mut fault_stage = FaultStage::new(plan, rng, Arc::clone(&clock));
                if let Some(state) = &compiled.state {
                    let store = shared_store(state).map_err(|message| {
                        Failure::Usage(format!("{source}: state.redis: {message}"))
                    })?;
                    judge = judge.with_shared(Arc::clone(&store));
                    fault_stage = fault_stage.with_shared(store);
                }
                let stages = Stages {
                    judge: Arc::new(judge),
                    faults: Arc::new(fault_stage),
                };
                notes = loaded
                    .notes
                    .iter()
                    .map(|note| format!("{source}: {note}"))
                    .collect();
                tasks.push(tokio::spawn(faults::reload(
                    source.clone(),
                    loaded.files.clone(),
                    Arc::clone(&stages.faults),
                    overrides,
                    compiled.state.clone(),
                    Arc::clone(&clock),
                )));
                (Some(stages), source.to_string())
            }
        };

        // The pipeline puts each stage in its place (see `Pipeline`), and runs their upkeep.
        let mut pipeline = Pipeline::builder(Arc::clone(&clock));
        if let Some(stages) = &stages {
            pipeline = pipeline
                .judge(Arc::clone(&stages.judge))
                .faults(Arc::clone(&stages.faults));
        }
        // The metrics stage sees every request first, so it also tells when the proxy is idle.
        let counted = control_port.is_some() || metrics_port.is_some() || idle_timeout.is_some();
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
                for task in tasks {
                    task.abort();
                }
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
        match (&upstream, server.ca()) {
            (Some(upstream), _) => {
                tracing::info!("reverse proxy: every request goes to {upstream}")
            }
            (None, Some(ca)) => {
                let path = ca.cert_path().map_or_else(
                    || "(in memory)".to_owned(),
                    |path| path.display().to_string(),
                );
                tracing::info!(
                    "forward proxy intercepting HTTPS for {watching} watched URL \
                     pattern(s); clients must trust the CA certificate {path}"
                );
            }
            (None, None) => tracing::info!(
                "forward proxy: no URLs watched, so HTTPS is tunnelled without interception"
            ),
        }
        let idle = idle_timeout.zip(observed.as_ref().map(|(metrics, _)| Arc::clone(metrics)));
        let mut endpoints = Vec::new();
        if let Some((metrics, book)) = observed {
            let mut control = Control::new(metrics).recording(recorder.clone());
            if let Some(stages) = &stages {
                control = control
                    .judge(Arc::clone(&stages.judge))
                    .faults(Arc::clone(&stages.faults));
            }
            if let Some(book) = book {
                control = control.windows(book);
            }
            if let Some(ca) = server.ca() {
                control = control.ca_pem(ca.cert_pem());
            }
            for (port, what) in [(control_port, "control API"), (metrics_port, "metrics")] {
                let Some(port) = port else { continue };
                let listener = match TcpListener::bind((Ipv4Addr::LOCALHOST, port)).await {
                    Ok(listener) => listener,
                    Err(err) => {
                        for task in tasks {
                            task.abort();
                        }
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
                tasks.push(match what {
                    "metrics" => {
                        tracing::info!("metrics on http://{addr}/metrics");
                        tokio::spawn(control.serve_metrics(listener, pending))
                    }
                    _ => {
                        tracing::info!("control API on http://{addr}/ (status, windows, recording, ca.pem, metrics)");
                        tokio::spawn(control.serve(listener, pending))
                    }
                });
            }
        }
        match &stages {
            None => tracing::info!("passing everything through: no faults, no judge"),
            Some(stages) => {
                if let Some(found) = found {
                    tracing::info!(target: logging::NOTES, "{found}");
                }
                for note in notes {
                    tracing::warn!(target: logging::NOTES, "{note}");
                }
                let seed = stages.faults.seed();
                tracing::info!(
                    seed,
                    "{describe}; seed {seed} (repeat this run with --seed {seed})"
                );
            }
        }

        let judge_key = stages
            .as_ref()
            .map(|stages| stages.judge.judge().mode().name())
            .unwrap_or_default();
        recorder.start(
            clock.wall_now(),
            RunInfo {
                seed: stages.as_ref().map(|stages| stages.faults.seed()),
                source,
                command,
                proxy_url: format!("http://{}", server.local_addr()),
                judge_key,
                argv,
                allow_no_traffic,
                fail_on_no_backoff,
            },
        );
        Ok(Serving {
            server,
            endpoints,
            stages,
            tasks,
            recorder,
            output,
            quiet,
            idle,
            clock,
        })
    }
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
