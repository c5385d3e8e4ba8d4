//! `holdoff demo`: the judge at work in one command, with no network and no setup.
//!
//! The flow: an upstream on a free loopback port ([`upstream`]) → the proxy in front of it, in
//! reverse mode with the `throttle` preset, as `holdoff proxy` runs it ([`session`], with
//! options made here) → two clients through it for `--duration` ([`clients`]), with a progress
//! line ([`progress`]) → the proxy stopped, the reports written → the outcome, from the event
//! log: exit 0 when the naive client was caught and the holdoff client was clean.

mod clients;
mod progress;
mod upstream;

use std::ffi::OsString;
use std::fs;
use std::io::{self, Write};
use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use clap::Parser;
use holdoff::clock::{Clock, TokioClock};
use holdoff_proxy::CaSource;
use holdoff_proxy::report::Report;

use crate::duration;
use crate::failure::Failure;
use crate::proxy::{Options, session};
use crate::report::ReportArgs;
use clients::{HOLDOFF_CLIENT, NAIVE_CLIENT, Tally};
use progress::{Mode, Progress};

const AFTER_HELP: &str = "\
It starts, all inside this process and on loopback only:
  - an upstream API answering GET /v1/items/N with a little JSON;
  - the proxy in front of it (reverse mode, every request watched) with the `throttle` preset:
    half the requests get 429 with a Retry-After of 2 to 5 seconds;
  - two clients, one request at a time over /v1/items/1 to /v1/items/5, for --duration:
      holdoff-client  reqwest with holdoff's middleware: it waits as long as each Retry-After
                      says, and defers a retry that would fall after the end
      naive-client    retries 100 ms after a 429 or 503, up to 3 times, whatever Retry-After says
Then it stops the proxy, writes the reports and prints the outcome: the naive client caught
retrying early, the holdoff client clean. The proxy's summary above the outcome says FAIL: that
is the naive client, as it should be.

The progress line goes to stderr: redrawn in place on a terminal, a plain line every 5 seconds
otherwise, none with --no-progress. The reports go into --out DIR (created if missing; files of
the same names in it are replaced), by default a new directory holdoff-demo-XXXXXX in the
system's temporary directory (TMPDIR), kept afterwards:
  report.html   one page with a timeline per client     report.md    for a pull request
  report.json   the outcome, the counts, the violations   junit.xml    for a CI's test tab
  events.jsonl  every event (`holdoff report` reads it)    proxy.log    one line per request
No CA is made or read: the proxy is a reverse proxy over plain HTTP. Config files in the current
directory are not read either.

--seed fixes which requests are throttled and for how long, and the holdoff client's jitter. The
clients run in real time, so two runs with the same seed are alike, not identical.

Exit status: 0 when the outcome is the expected one (the naive client retried early at least
once, the holdoff client never did), 1 otherwise or when the demo could not run (the message says
why), 2 for a usage error.

Examples:
  holdoff demo
  holdoff demo --duration 1m --seed 42 --out holdoff-demo-report";

/// The seed when none is given: every run throttles alike.
const DEFAULT_SEED: u64 = 7;

/// How long the clients run when `--duration` is not given.
const DEFAULT_DURATION: Duration = Duration::from_secs(20);

/// See the judge catch a client that retries early, and clear one that uses holdoff.
#[derive(Debug, clap::Args)]
#[command(after_help = AFTER_HELP)]
pub(crate) struct Args {
    /// How long the clients run.
    #[arg(long, value_name = "DURATION", default_value = "20s", value_parser = duration::parse)]
    duration: Duration,

    /// The seed of the faults (which requests are throttled, each Retry-After) and of the
    /// holdoff client's jitter.
    #[arg(long, value_name = "N", default_value_t = DEFAULT_SEED)]
    seed: u64,

    /// Write the reports, the event log and the proxy's log into DIR. Default: a new
    /// directory in the system's temporary directory.
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,

    /// Show no progress line while the clients run.
    #[arg(long)]
    no_progress: bool,
}

/// Where everything the demo writes goes.
struct Files {
    dir: PathBuf,
    events: PathBuf,
    log: PathBuf,
    reports: ReportArgs,
}

impl Files {
    fn new(dir: PathBuf) -> Files {
        Files {
            events: dir.join("events.jsonl"),
            log: dir.join("proxy.log"),
            reports: ReportArgs {
                report_json: Some(dir.join("report.json")),
                report_junit: Some(dir.join("junit.xml")),
                report_md: Some(dir.join("report.md")),
                report_html: Some(dir.join("report.html")),
            },
            dir,
        }
    }
}

/// Runs `holdoff demo`: the story and the outcome on `out`, progress and the proxy's summary
/// on stderr.
pub(crate) fn run(args: Args, out: &mut impl Write) -> Result<(), Failure> {
    if args.duration.is_zero() {
        return Err(Failure::Usage(
            "--duration must be greater than zero, e.g. 20s".to_owned(),
        ));
    }
    let files = Files::new(out_dir(args.out.as_deref())?);
    let options = proxy_options(args.seed, &files)?;
    let listener = upstream::bind().map_err(|err| {
        Failure::Runtime(format!(
            "failed to bind a loopback port for the demo's upstream: {err}"
        ))
    })?;
    let upstream_url = match listener.local_addr() {
        Ok(addr) => format!("http://{addr}"),
        Err(err) => {
            return Err(Failure::Runtime(format!(
                "failed to read the demo upstream's address: {err}"
            )));
        }
    };
    let mut config = options.config();
    config.listen = SocketAddr::from((Ipv4Addr::LOCALHOST, 0));
    config.upstream = Some(upstream_url.parse().map_err(|err| {
        Failure::Usage(format!(
            "failed to use the demo's upstream {upstream_url}: {err}"
        ))
    })?);
    // A reverse proxy intercepts nothing and loads no CA; were that to change, the demo must
    // still never touch the user's.
    config.ca = CaSource::Ephemeral;
    let (mut prepared, logs) = session::prepare(&options, config, session::Verbosity::Info)?;
    prepared.reproducible_as(reproduce_line(&args));
    let http = clients::http().map_err(Failure::Runtime)?;

    let runtime = session::runtime()?;
    let result = runtime.block_on(async {
        let upstream = upstream::Upstream::serve(listener).map_err(|err| {
            Failure::Runtime(format!("failed to start the demo's upstream: {err}"))
        })?;
        let serving = prepared.start(None).await?;
        let proxy_url = format!("http://{}", serving.local_addr());
        let total = duration::friendly(args.duration);
        writeln!(
            out,
            "holdoff demo: two clients for {total} through the throttling proxy (preset \
             throttle, seed {})\n  \
             upstream        {upstream_url}  GET /v1/items/N\n  \
             proxy           {proxy_url}  half the requests get 429 with Retry-After 2-5 s\n  \
             {HOLDOFF_CLIENT}  holdoff-reqwest: waits as long as each Retry-After says\n  \
             {NAIVE_CLIENT}    retries 100 ms after a 429 or 503, whatever Retry-After says",
            args.seed
        )?;
        out.flush()?;

        let clock = TokioClock;
        let started = clock.now();
        let end = started + args.duration;
        let tally = Arc::new(Tally::default());
        let holdoff = tokio::spawn({
            let (http, base, tally) = (http.clone(), proxy_url.clone(), Arc::clone(&tally));
            async move { clients::holdoff(http, &base, end, args.seed, &tally).await }
        });
        let naive = tokio::spawn({
            let (base, tally) = (proxy_url.clone(), Arc::clone(&tally));
            async move { clients::naive(http, &base, end, &tally).await }
        });
        let mut progress = Progress::new(
            Mode::pick(args.no_progress),
            args.duration,
            started,
            &files.events,
        );
        let mut crashed = Vec::new();
        let stopped = serving
            .stop_when(async {
                let clients = async { tokio::join!(holdoff, naive) };
                let mut clients = std::pin::pin!(clients);
                let mut next = started;
                let (holdoff, naive) = loop {
                    next += progress::TICK;
                    tokio::select! {
                        done = &mut clients => break done,
                        () = clock.sleep_until(next) => progress.tick(clock.now(), tally.sent()),
                    }
                };
                progress.finish(clock.now(), tally.sent());
                for (client, joined) in [(HOLDOFF_CLIENT, holdoff), (NAIVE_CLIENT, naive)] {
                    if let Err(err) = joined {
                        crashed.push(format!("{client} stopped unexpectedly: {err}"));
                    }
                }
            })
            .await;
        // The proxy's summary judges both clients as one run, so it says FAIL: say first
        // that this is the naive client's, as the demo means it to be.
        out.flush()?;
        let _ = writeln!(
            io::stderr(),
            "\nThe proxy's summary follows, as `holdoff run` prints it. Its FAIL is the expected \
             result:\n{NAIVE_CLIENT} retries early on purpose, and this is how holdoff reports it."
        );
        stopped.report(None, &files.reports, &logs);
        drop(upstream);

        let report = match Report::read_log(&files.events) {
            Ok(events) => Report::from_events(&events),
            Err(err) => {
                let cause = std::error::Error::source(&err)
                    .map(|c| format!(": {c}"))
                    .unwrap_or_default();
                return Err(Failure::Runtime(format!("failed to {err}{cause}")));
            }
        };
        let outcome = DemoOutcome::of(&report);
        let expected = match outcome.problems.is_empty() {
            true => "as expected",
            false => "NOT as expected",
        };
        writeln!(out, "\nverdict of the demo, {expected}: {}", outcome.line)?;
        writeln!(out, "  event log  {}", files.events.display())?;
        writeln!(out, "  proxy log  {}", files.log.display())?;
        writeln!(
            out,
            "  open {} to see each client's throttles and retries on a timeline",
            files.dir.join("report.html").display()
        )?;
        out.flush()?;

        let (failed, first) = tally.failed();
        if failed > 0 {
            let first = first.unwrap_or_default();
            let _ = writeln!(
                io::stderr(),
                "holdoff demo: {failed} request(s) got no response; the first: {first}"
            );
        }
        let problems: Vec<String> = crashed.into_iter().chain(outcome.problems).collect();
        for problem in &problems {
            let _ = writeln!(io::stderr(), "holdoff demo: {problem}");
        }
        match problems.is_empty() {
            true => Ok(()),
            false => Err(Failure::Unexpected),
        }
    });
    // Every log line is out before the process exits.
    drop(runtime);
    drop(logs);
    result
}

/// The command line that repeats this demo, for the reports' "Reproduce" section: `holdoff
/// demo`, its duration when not the default, and its seed (the `--out` directory and the
/// progress line change nothing the reports show).
fn reproduce_line(args: &Args) -> Vec<String> {
    let mut argv = vec!["holdoff".to_owned(), "demo".to_owned()];
    if args.duration != DEFAULT_DURATION {
        argv.extend(["--duration".to_owned(), duration::friendly(args.duration)]);
    }
    argv.extend(["--seed".to_owned(), args.seed.to_string()]);
    argv
}

/// The directory the files go into: `out`, created if missing, or a new one in the system's
/// temporary directory, kept.
///
/// # Errors
///
/// [`Failure::Usage`] when `out` cannot be created, [`Failure::Runtime`] when no temporary
/// directory can.
fn out_dir(out: Option<&Path>) -> Result<PathBuf, Failure> {
    match out {
        Some(dir) => match fs::create_dir_all(dir) {
            Ok(()) => Ok(dir.to_path_buf()),
            Err(err) => Err(Failure::Usage(format!(
                "cannot create the --out directory {}: {err}; pick a directory you can write to",
                dir.display()
            ))),
        },
        None => match tempfile::Builder::new().prefix("holdoff-demo-").tempdir() {
            Ok(dir) => Ok(dir.keep()),
            Err(err) => Err(Failure::Runtime(format!(
                "failed to create a directory for the reports in {}: {err}; pass --out DIR, or \
                 point TMPDIR at a writable directory",
                std::env::temp_dir().display()
            ))),
        },
    }
}

/// The proxy's options, as `holdoff proxy --preset throttle --seed N --events … --log-file …`
/// would have them.
///
/// # Errors
///
/// A usage error if clap refuses them, which only a bug here can cause.
fn proxy_options(seed: u64, files: &Files) -> Result<Options, Failure> {
    /// The proxy's options, parsed from arguments made here.
    #[derive(Debug, Parser)]
    #[command(name = "holdoff demo", no_binary_name = true)]
    struct Proxy {
        #[command(flatten)]
        options: Options,
    }

    // `--name=VALUE`: a path starting with `-` stays a value.
    let path = |name: &str, path: &Path| {
        let mut arg = OsString::from(format!("--{name}="));
        arg.push(path);
        arg
    };
    let argv = [
        OsString::from("--preset=throttle"),
        OsString::from(format!("--seed={seed}")),
        // The clients are done when the proxy stops: there is nothing in flight to wait for.
        OsString::from("--grace=1s"),
        path("events", &files.events),
        path("log-file", &files.log),
    ];
    Proxy::try_parse_from(argv)
        .map(|proxy| proxy.options)
        .map_err(|err| Failure::Usage(format!("failed to set up the demo's proxy: {err}")))
}

/// What the judge made of one client.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Judged {
    throttled: usize,
    premature: usize,
    compliant: usize,
}

impl Judged {
    /// Sums `client`'s endpoints in `report` (the proxy names it `header:CLIENT`).
    fn of(report: &Report, client: &str) -> Judged {
        let id = format!("header:{client}");
        report
            .endpoints()
            .iter()
            .filter(|endpoint| endpoint.client == id)
            .fold(Judged::default(), |sum, endpoint| Judged {
                throttled: sum.throttled + endpoint.throttles,
                premature: sum.premature + endpoint.premature,
                compliant: sum.compliant + endpoint.compliant,
            })
    }
}

/// The demo's outcome: one line in plain words, and what was not as expected.
#[derive(Debug, PartialEq, Eq)]
struct DemoOutcome {
    line: String,
    problems: Vec<String>,
}

impl DemoOutcome {
    fn of(report: &Report) -> DemoOutcome {
        DemoOutcome::from_counts(
            Judged::of(report, NAIVE_CLIENT),
            Judged::of(report, HOLDOFF_CLIENT),
        )
    }

    fn from_counts(naive: Judged, holdoff: Judged) -> DemoOutcome {
        let mut problems = Vec::new();
        let naive_part = match naive.premature {
            0 => {
                problems.push(match naive.throttled {
                    0 => format!(
                        "{NAIVE_CLIENT} was never throttled, so there was nothing to catch; \
                         run longer (--duration 30s) or with another --seed"
                    ),
                    n => format!(
                        "{NAIVE_CLIENT} was throttled {} but never caught retrying early; run \
                         longer (--duration 30s) or with another --seed",
                        times(n)
                    ),
                });
                format!("{NAIVE_CLIENT} never retried early (not caught)")
            }
            n => format!("{NAIVE_CLIENT} retried early {} (caught)", times(n)),
        };
        let holdoff_part = match (holdoff.premature, holdoff.compliant) {
            (0, 0) => format!("{HOLDOFF_CLIENT} never retried early (clean)"),
            (0, 1) => format!("{HOLDOFF_CLIENT} waited every time, 1 retry (clean)"),
            (0, n) => format!("{HOLDOFF_CLIENT} waited every time, {n} retries (clean)"),
            (n, _) => {
                problems.push(format!(
                    "{HOLDOFF_CLIENT} retried early {}: that is a bug in holdoff; please \
                     report it with the files listed above",
                    times(n)
                ));
                format!("{HOLDOFF_CLIENT} retried early {} (caught)", times(n))
            }
        };
        DemoOutcome {
            line: format!("{naive_part}; {holdoff_part}"),
            problems,
        }
    }
}

/// `1 time`, `N times`.
fn times(n: usize) -> String {
    match n {
        1 => "1 time".to_owned(),
        n => format!("{n} times"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    mod proxy_options {
        use super::*;

        #[test]
        fn parse_with_paths_that_look_like_options() {
            let files = Files::new(PathBuf::from("-out"));
            let options = proxy_options(9, &files).unwrap();
            let config = options.config();
            assert!(config.urls_to_watch.is_empty());
        }
    }

    mod reproduce_line {
        use super::*;

        fn line(args: &[&str]) -> String {
            #[derive(Debug, Parser)]
            struct Cli {
                #[command(flatten)]
                args: Args,
            }
            let cli = Cli::parse_from(std::iter::once("demo").chain(args.iter().copied()));
            reproduce_line(&cli.args).join(" ")
        }

        #[test]
        fn is_the_demo_with_its_seed_and_any_other_duration() {
            assert_eq!(line(&[]), "holdoff demo --seed 7");
            assert_eq!(
                line(&["--out", "x", "--no-progress", "--seed", "3"]),
                "holdoff demo --seed 3"
            );
            assert_eq!(
                line(&["--duration", "1m30s"]),
                "holdoff demo --duration 1m30s --seed 7"
            );
            assert_eq!(line(&["--duration", "20s"]), "holdoff demo --seed 7");
        }
    }

    mod outcome {
        use super::*;

        fn judged(throttled: usize, premature: usize, compliant: usize) -> Judged {
            Judged {
                throttled,
                premature,
                compliant,
            }
        }

        #[test]
        fn says_caught_and_clean_when_that_is_what_happened() {
            let outcome = DemoOutcome::from_counts(judged(40, 37, 3), judged(12, 0, 12));
            assert_eq!(
                outcome.line,
                "naive-client retried early 37 times (caught); holdoff-client waited every \
                 time, 12 retries (clean)"
            );
            assert!(outcome.problems.is_empty());
            let outcome = DemoOutcome::from_counts(judged(1, 1, 0), judged(0, 0, 0));
            assert_eq!(
                outcome.line,
                "naive-client retried early 1 time (caught); holdoff-client never retried \
                 early (clean)"
            );
            assert!(outcome.problems.is_empty());
        }

        #[test]
        fn names_each_thing_that_went_wrong() {
            let outcome = DemoOutcome::from_counts(judged(4, 0, 4), judged(5, 2, 3));
            assert_eq!(
                outcome.line,
                "naive-client never retried early (not caught); holdoff-client retried early \
                 2 times (caught)"
            );
            assert_eq!(outcome.problems.len(), 2, "{:?}", outcome.problems);
            assert!(outcome.problems[0].contains("throttled 4 times but never caught"));
            assert!(outcome.problems[1].contains("a bug in holdoff"));
            let outcome = DemoOutcome::from_counts(judged(0, 0, 0), judged(0, 0, 0));
            assert!(outcome.problems[0].contains("never throttled"));
        }
    }
}
