//! A proxy that serves, and once stopped, what it saw: [`Serving`] until a future completes,
//! then [`Stopped`] records the end and writes the reports.

use std::future::Future;
use std::io::{self, Write};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use holdoff::clock::{Clock, TokioClock};
use holdoff_proxy::report::{Recorder, Report};
use holdoff_proxy::{FaultCounts, FaultStage, JudgeStage, MetricsStage, ProxyServer, Summary};
use tokio::task::JoinHandle;

use super::logging::Guard;
use super::options::Output;
use super::summaries::{report_faults, report_summary, report_verdicts};
use crate::report::ReportArgs;

/// The stages every request passes: the judge, then the faults.
pub(super) struct Stages {
    pub(super) judge: Arc<JudgeStage>,
    pub(super) faults: Arc<FaultStage>,
}

/// A proxy accepting connections.
pub(crate) struct Serving {
    pub(super) server: ProxyServer,
    /// `("control API" | "metrics", address)` for each side server asked for.
    pub(super) endpoints: Vec<(&'static str, String)>,
    pub(super) stages: Option<Stages>,
    /// Reloading the faults and evicting old windows, for as long as it serves.
    pub(super) tasks: Vec<JoinHandle<()>>,
    pub(super) recorder: Arc<Recorder>,
    pub(super) output: Output,
    pub(super) quiet: bool,
    /// Cancelled by Dev Proxy's `POST /proxy/stopProxy` on the control API, when it may stop
    /// this proxy.
    pub(super) api_stop: Option<tokio_util::sync::CancellationToken>,
    /// `--timeout` and the stage that counts the requests.
    pub(super) idle: Option<(Duration, Arc<MetricsStage>)>,
    pub(super) clock: Arc<dyn Clock>,
}

/// How often an idle proxy looks at its request count: the precision of `--timeout`.
const IDLE_POLL: Duration = Duration::from_millis(100);

impl Serving {
    /// Where it listens.
    pub(crate) fn local_addr(&self) -> SocketAddr {
        self.server.local_addr()
    }

    /// Completes when the control API is asked to stop the proxy (`POST /proxy/stopProxy`);
    /// never when it may not be.
    pub(crate) fn stopped_through_api(&self) -> impl Future<Output = ()> + use<> {
        let stop = self.api_stop.clone();
        async move {
            match stop {
                Some(stop) => stop.cancelled().await,
                None => std::future::pending().await,
            }
        }
    }

    /// Where its faults come from, as the event log's start records it.
    pub(crate) fn source(&self) -> String {
        self.recorder
            .report()
            .source()
            .unwrap_or("pass-through")
            .to_owned()
    }

    /// The control API's and the metrics' addresses, when asked for: `("control API",
    /// "127.0.0.1:PORT")`, `("metrics", …)`.
    pub(crate) fn endpoints(&self) -> &[(&'static str, String)] {
        &self.endpoints
    }

    /// The control API's address, `127.0.0.1:PORT`, when asked for (`--control-port`).
    pub(crate) fn control_addr(&self) -> Option<&str> {
        let control = super::wiring::SideServer::Control(0).what();
        self.endpoints
            .iter()
            .find(|(what, _)| *what == control)
            .map(|(_, addr)| addr.as_str())
    }

    /// Completes once no request has come for the `--timeout` given
    /// ([`super::session::Prepared::stop_when_idle`]), counted from the start or the last
    /// request; never without one.
    pub(crate) fn when_idle(&self) -> impl Future<Output = ()> + use<> {
        let idle = self.idle.clone();
        let clock = Arc::clone(&self.clock);
        async move {
            let Some((timeout, metrics)) = idle else {
                return std::future::pending().await;
            };
            let (mut seen, mut since) = (metrics.requests(), clock.now());
            loop {
                let now = clock.now();
                let count = metrics.requests();
                if count != seen {
                    (seen, since) = (count, now);
                } else if now.saturating_duration_since(since) >= timeout {
                    tracing::info!(
                        "no request for {} s (--timeout): shutting down",
                        timeout.as_secs()
                    );
                    return;
                }
                let next = (since + timeout).min(now + IDLE_POLL);
                clock.sleep_until(next.max(now)).await;
            }
        }
    }

    /// Serves until `signal` completes, then stops accepting and lets the requests in flight
    /// finish within the grace period.
    pub(crate) async fn stop_when(self, signal: impl Future<Output = ()>) -> Stopped {
        let summary = self.server.run_until(signal).await;
        for task in self.tasks {
            task.abort();
        }
        Stopped {
            summary,
            stages: self.stages,
            recorder: self.recorder,
            output: self.output,
            quiet: self.quiet,
        }
    }
}

/// A proxy that has stopped, with what it saw.
pub(crate) struct Stopped {
    summary: Summary,
    stages: Option<Stages>,
    recorder: Arc<Recorder>,
    output: Output,
    quiet: bool,
}

impl Stopped {
    /// Records the end (with the command's exit code, for `holdoff run`), writes every report
    /// `reports` asks for, and prints what the faults did, the judge's verdicts, the proxy's
    /// summary and the reports' summary on stderr (as log events with `--output json`).
    ///
    /// Returns the report, whose verdict decides the exit status (see `exit_codes.rs`).
    pub(crate) fn report(
        self,
        exit_code: Option<i32>,
        reports: &ReportArgs,
        logs: &Guard,
    ) -> Report {
        let counts = self.record_end(exit_code);
        // Built by the recorder from its bounded tally, the finish included.
        let report = self.recorder.report();
        if self.quiet {
            reports.write_all(&report);
            return report;
        }
        if let Some(stages) = &self.stages {
            report_faults(&counts, stages.faults.seed(), self.output, logs);
            report_verdicts(&report, self.output, logs);
        }
        report_summary(&self.summary, self.output, logs);

        let written = reports.write_all(&report);
        let summary = report.terminal_summary(&written);
        match self.output {
            Output::Text => {
                logs.flush();
                let _ = write!(io::stderr(), "{summary}");
            }
            Output::Json => {
                for (format, path) in &written {
                    tracing::info!(
                        target: "holdoff::report",
                        format = format.name(),
                        path = %path.display(),
                        "wrote the {format} report {}",
                        path.display()
                    );
                }
                tracing::info!(
                    target: "holdoff::report",
                    verdict = report.outcome().as_str(),
                    requests = report.requests(),
                    throttled = report.throttled(),
                    compliant = report.compliant(),
                    premature = report.premature(),
                    read_as_zero = report.read_as_zero(),
                    no_backoff = report.no_backoff(),
                    "{}",
                    summary.lines().next().unwrap_or_default()
                );
            }
        }
        report
    }
}

impl Stopped {
    /// Records the end in the event log: the requests, what the faults did (returned), the
    /// exit code, and the interceptions that failed (which keep the run from passing).
    fn record_end(&self, exit_code: Option<i32>) -> FaultCounts {
        let counts = self
            .stages
            .as_ref()
            .map(|stages| stages.faults.counts())
            .unwrap_or_default();
        self.recorder.record(holdoff_proxy::report::Event::Finish {
            at: TokioClock.wall_now(),
            requests: self.summary.requests,
            faults: counts,
            exit_code,
            interception_failures: self.summary.interception_failures,
            evicted_windows: self
                .stages
                .as_ref()
                .map_or(0, |stages| stages.judge.judge().evicted()),
        });
        counts
    }

    /// Records the end without reports or summaries: `holdoff run`'s command never ran, or
    /// could not be waited for.
    pub(crate) fn abandon(self, exit_code: i32) {
        self.record_end(Some(exit_code));
    }
}
