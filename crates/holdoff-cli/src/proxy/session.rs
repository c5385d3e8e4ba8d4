//! One run of the proxy, from options to reports: what `holdoff proxy` and `holdoff run`
//! share.
//!
//! [`prepare`] does everything that can fail as a usage error before anything starts (the
//! config checked, the faults loaded, the event log and the logs opened);
//! [`Prepared::start`] decides what to build ([`wiring`]), then builds it, binds and starts
//! recording ([`start`]); [`Serving::stop_when`] serves until a future completes, then
//! drains; [`Stopped::report`] records the end, writes the reports and prints the summaries.

use std::sync::Arc;
use std::time::Duration;

use holdoff_proxy::ProxyConfig;
use holdoff_proxy::fault::FaultRng;
use holdoff_proxy::report::{LogLimit, Recorder};

use super::args::usage;
use super::logging::{self, Guard};
use super::options::Options;
use super::process_tree::ProcessTree;
use super::serving::Serving;
#[cfg(doc)]
use super::serving::Stopped;
use super::wiring::{self, Settings};
use super::{faults, start};
use crate::failure::Failure;

pub(crate) use super::reproduce::reproducible_argv;

/// A proxy ready to start: its settings checked, its faults loaded, its event log open.
pub(crate) struct Prepared {
    settings: Settings,
    recorder: Arc<Recorder>,
}

/// How much a command logs when neither `--log-level`, a Dev Proxy file's `logLevel` nor
/// `RUST_LOG` says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Verbosity {
    /// Every request, and what the proxy does (`holdoff proxy`, `holdoff run -v`).
    Info,
    /// And the details (`holdoff run -vv`).
    Debug,
    /// Warnings only ([`logging::Level::quiet`]): `holdoff run`, as test runners are.
    Quiet,
}

/// Checks `config` (the proxy's settings from `options` and the command's own), loads the
/// faults, opens the event log, and sets up the logs, whose guard must outlive the runtime;
/// they log as `verbosity` says unless `--log-level`, a Dev Proxy file or `RUST_LOG` does.
///
/// URL patterns on the command line win; without any, the config file's.
///
/// # Errors
///
/// [`Failure::Usage`] for a setting that cannot work, a config that does not load, an event
/// log or log file that cannot be written, or a bad log level.
pub(crate) fn prepare(
    options: &Options,
    config: ProxyConfig,
    verbosity: Verbosity,
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
    let cwd = std::env::current_dir().unwrap_or_default();
    let faults = faults::from_options(options, &cwd).map_err(Failure::Usage)?;
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
    // A Dev Proxy file's own logLevel, unless the command line says; then RUST_LOG.
    let level = options
        .log_level
        .clone()
        .or_else(|| match &faults {
            Some((faults::Source::DevProxy(path), _)) => crate::devproxy::log_level(path),
            _ => None,
        })
        .or_else(|| {
            std::env::var("RUST_LOG")
                .ok()
                .filter(|v| !v.trim().is_empty())
        });
    let level = match (level, verbosity) {
        (Some(level), _) => logging::Level::parse(&level),
        (None, Verbosity::Info) => logging::Level::parse("info"),
        (None, Verbosity::Debug) => logging::Level::parse("debug"),
        (None, Verbosity::Quiet) => logging::Level::quiet(),
    };
    let logs = logging::init(
        &level,
        options.output,
        options.log_file.as_deref(),
        options.dev_proxy.colour_allowed(),
    )
    .map_err(Failure::Usage)?;
    // Warnings: each says that an option given does less than in Dev Proxy.
    for note in options.dev_proxy.notes() {
        tracing::warn!(target: logging::NOTES, "{note}");
    }
    let settings = Settings::new(options, &cwd, config, faults, level.is_off());
    let prepared = Prepared {
        settings,
        recorder: Arc::new(recorder),
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
        self.settings.argv = Some(argv);
    }

    /// Records that the run allows no request to reach the proxy (`--allow-no-traffic`).
    pub(crate) fn allow_no_traffic(&mut self, allow: bool) {
        self.settings.allow_no_traffic = allow;
    }

    /// Lets Dev Proxy's `POST /proxy/stopProxy` stop the proxy
    /// ([`Serving::stopped_through_api`]).
    pub(crate) fn stop_through_api(&mut self) {
        self.settings.api_stop = true;
    }

    /// Stops serving after `timeout` without a request ([`Serving::when_idle`]).
    pub(crate) fn stop_when_idle(&mut self, timeout: Duration) {
        self.settings.idle_timeout = Some(timeout);
    }

    /// Watches `patterns` when neither the command line nor the config named any.
    pub(crate) fn watch_by_default(&mut self, patterns: Vec<holdoff_proxy::WatchPattern>) {
        if self.settings.config.urls_to_watch.is_empty() {
            self.settings.config.urls_to_watch = patterns;
        }
    }

    /// Decides what to build, builds it, binds, logs what the proxy does, and records the
    /// start; `command` is what `holdoff run` runs.
    ///
    /// # Errors
    ///
    /// [`Failure::Runtime`] when the proxy cannot start (the address is in use, the CA cannot
    /// be read), or [`Failure::Usage`] for a setting the server refused.
    pub(crate) async fn start(self, command: Option<Vec<String>>) -> Result<Serving, Failure> {
        // Drawn here, so that the wiring stays pure; used only when neither --seed nor the
        // config gives one.
        let drawn = FaultRng::random().seed();
        let wiring = wiring::wire(self.settings, command, drawn);
        start::start(wiring, self.recorder).await
    }
}
