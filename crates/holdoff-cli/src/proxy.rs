//! `holdoff proxy`: run the proxy until Ctrl-C or SIGTERM, logging every request.
//!
//! The flow: [`Args`] (clap) → [`ProxyConfig`] → [`session::prepare`] (checks the config, so
//! that usage errors exit 2 before anything starts; loads the faults; opens the event log and
//! the logs) → a multi-thread tokio runtime → [`session::Prepared::start`] (decides what to
//! build, then binds) → one line on stdout, `listening on http://IP:PORT`, for people and
//! scripts → logs on stderr → on a signal, the reports and the summary on stderr.
//!
//! `holdoff run` shares most of it: the [`Options`] (everything but where to listen, the
//! reverse-proxy upstream, the CA and the credentials) and the [`session`].
//!
//! The files, in the order a run meets them:
//! - `args`: `holdoff proxy`'s command line, and the config it makes;
//! - `options`: the options `holdoff proxy` and `holdoff run` share;
//! - `session`: the steps `holdoff proxy`, `holdoff run` and `holdoff demo` call, from
//!   preparing to starting;
//! - `faults`: where the faults come from, and reloading them;
//! - `logging`: the log's level, format and destination;
//! - `wiring`: what a run builds, decided without binding, spawning or reading a clock;
//! - `start`: building it, binding, and logging what the proxy does;
//! - `shared_state`: the store of a config's `state` section, in Redis;
//! - `process_tree`: `--watch-pids` and `--watch-process-names`;
//! - `serving`: a proxy serving, then stopped, writing the reports;
//! - `summaries`: what a stopped run prints on stderr;
//! - `reproduce`: the command line that repeats a run;
//! - `system_proxy`: what `--as-system-proxy` says to set.

mod args;
mod dev_proxy_options;
mod faults;
pub(crate) mod logging;
mod mock_request;
mod options;
mod process_tree;
mod reproduce;
mod serving;
pub(crate) mod session;
mod shared_state;
mod start;
mod summaries;
mod system_proxy;
mod wiring;

use std::future::Future;
use std::io::{self, Write};
use std::time::Duration;

use holdoff_proxy::ConfigError;

use crate::failure::Failure;
pub(crate) use args::Args;
use args::usage;
pub(crate) use options::Options;

/// Runs `holdoff proxy`; `argv` is holdoff's own command line, for the reports' reproduce line.
pub(crate) fn run(
    args: Args,
    argv: Vec<std::ffi::OsString>,
    out: &mut impl Write,
) -> Result<(), Failure> {
    if args.install_cert == Some(true) {
        let dir = match &args.ca_dir {
            Some(dir) => dir.clone(),
            None => holdoff_proxy::tls::CertificateAuthority::default_dir()
                .ok_or_else(|| Failure::Usage(usage(&ConfigError::NoCaDir)))?,
        };
        // On stderr: stdout's first line is the address, for scripts.
        crate::ca::install(&dir, &mut io::stderr())?;
    }
    if args.detach == Some(true) && args.detached_child.is_none() {
        return crate::background::start(&argv, args.options.control_port.is_some(), out);
    }
    let (mut prepared, logs) =
        session::prepare(&args.options, args.config(), session::Verbosity::Info)?;
    prepared.reproducible_as(session::reproducible_argv(argv));
    if let Some(seconds) = args.timeout {
        prepared.stop_when_idle(Duration::from_secs(seconds));
    }
    prepared.stop_through_api();
    let runtime = session::runtime()?;
    let result = runtime.block_on(async {
        let signal = shutdown_signal()
            .map_err(|err| Failure::Runtime(format!("failed to listen for signals: {err}")))?;
        let serving = prepared.start(None).await?;
        writeln!(out, "listening on http://{}", serving.local_addr())?;
        for (what, addr) in serving.endpoints() {
            writeln!(out, "{what} on http://{addr}/")?;
        }
        out.flush()?;
        if let Some(log) = &args.detached_child {
            crate::background::register(
                log,
                serving.local_addr(),
                serving.endpoints(),
                &serving.source(),
            )?;
        }
        if !args.options.env.is_empty() {
            tracing::warn!(
                target: logging::NOTES,
                "--env: holdoff proxy has no plugins to read variables, so they change nothing \
                 here; set them for your app (holdoff run --env NAME=VALUE sets them for its \
                 command)"
            );
        }
        if args.as_system_proxy == Some(true) {
            for line in system_proxy::instructions(serving.local_addr()).lines() {
                tracing::warn!(target: logging::NOTES, "{line}");
            }
        }
        let idle = serving.when_idle();
        let asked = serving.stopped_through_api();
        let stop = async {
            tokio::select! {
                () = signal => {}
                () = idle => {}
                () = asked => {}
            }
        };
        let stopped = serving.stop_when(stop).await;
        let report = stopped.report(None, &args.options.reports, &logs);
        if args.detached_child.is_some() {
            crate::background::ended(&report);
        }
        if args.fail_on_premature {
            crate::report::judged(&report)?;
        }
        Ok(())
    });
    // Every log line is out before the process exits.
    drop(runtime);
    drop(logs);
    result
}

/// Registers for Ctrl-C (SIGINT) and SIGTERM now, so that a signal sent as soon as the
/// listening line is out is not lost; the future completes on either.
#[cfg(unix)]
fn shutdown_signal() -> io::Result<impl Future<Output = ()>> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut interrupt = signal(SignalKind::interrupt())?;
    let mut terminate = signal(SignalKind::terminate())?;
    Ok(async move {
        tokio::select! {
            _ = interrupt.recv() => {}
            _ = terminate.recv() => {}
        }
        tracing::info!("shutting down: no new connections; finishing requests in flight");
    })
}

#[cfg(not(unix))]
fn shutdown_signal() -> io::Result<impl Future<Output = ()>> {
    Ok(async {
        if tokio::signal::ctrl_c().await.is_err() {
            std::future::pending::<()>().await;
        }
        tracing::info!("shutting down: no new connections; finishing requests in flight");
    })
}
