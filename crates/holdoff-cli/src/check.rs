//! `holdoff check -- COMMAND`: a Retry-After conformance suite for any HTTP client.
//!
//! Each scenario is one `holdoff run` of the command (this same binary, so the throwaway CA,
//! the proxy variables and the judge are exactly `holdoff run`'s) with a config whose mock
//! answers the first watched request with the scenario's throttle and lets every later one
//! through to the upstream (or answers it with a configured success). The scenarios run side
//! by side, each with a proxy of its own; each one's verdict comes from its event log
//! ([`verdict::judge`]), and the reports from the verdicts ([`report`]).

mod child;
mod load;
mod noise;
mod relate;
mod report;
mod scenarios;
mod suite;
mod verdict;

use std::ffi::OsString;
use std::fs;
use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use holdoff::clock::{Clock, TokioClock};

use self::child::{Files, finish, spawn, spawn_reverse, write_config};
use self::noise::{Noise, Sampler};
use self::scenarios::{Rule, Scenario, Setup, Success};
use self::verdict::{Outcome, Verdict};
use crate::duration;
use crate::failure::Failure;

const AFTER_HELP: &str = "\
Each scenario starts a proxy of its own exactly as `holdoff run` does (a throwaway CA, the proxy
and CA variables set for the command), runs COMMAND once, answers its first request with the
scenario's throttle and every later one from the upstream (or with --success-*), and judges what
the client did next with the judge's own rules. The scenarios run at the same time, each with its
own proxy; every request the command sends is one client's (the peer address), so a shell script
running several programs is judged as one client. A scenario ends when the command exits, or
--timeout after the throttle (a long hint's scenario: the hint, then --timeout), when it is
stopped (SIGTERM) and judged on what it did until then. The command's own output is not shown.

The command runs with HOLDOFF_CHECK_SCENARIO set to the scenario's name.

A client that cannot use a proxy: --upstream URL makes each scenario's proxy a reverse proxy for
that API, and the command calls it instead (`{url}` in its arguments, or HOLDOFF_CHECK_URL).

A client that made no retry in a scenario gave up: that shows nothing about how it honours a
hint, and is never counted as honouring one. When every wait exceeded its hint, one more
scenario (reads-hint) sends a hint twice the longest wait, to tell a client that reads the hint
from one that waits the same whatever it says.

Exit status:
  0    no scenario failed (warnings, give-ups and n/a allowed), and the client retried in one
  3    a scenario failed: the client retried before Retry-After permitted, or sooner than the
       minimum backoff (100 ms) after a malformed hint
  4    nothing was tested: no request reached the proxy in any scenario, or the client retried
       in none (--allow-no-retry accepts that)
  1    a scenario's proxy could not start
  2    a usage error (e.g. an unknown scenario)
  126  the command was found but could not be run (not executable)
  127  the command was not found
  130, 143  stopped by SIGINT or SIGTERM: every scenario running was stopped and judged on what
       it did, the reports asked for were written, and the others did not run

Examples:
  holdoff check --list
  holdoff check -- curl -s --retry 2 http://127.0.0.1:8080/v1/items
  holdoff check --long --parallel 4 --junit check.xml -- python3 client.py
  holdoff check --upstream http://127.0.0.1:8080 -- ./my-client --base-url '{url}/v1'
  holdoff check --success-body '{\"ok\": true}' -- node client.js https://api.example.com/v1";

/// Check how a client handles Retry-After: every scenario at once, each with a fresh proxy.
#[derive(Debug, clap::Args)]
#[command(after_help = AFTER_HELP)]
pub(crate) struct Args {
    /// Run only this scenario (repeatable); every one but the long ones by default. `--list`
    /// names them.
    #[arg(long = "scenario", short = 's', value_name = "NAME")]
    scenarios: Vec<String>,

    /// Describe every scenario and exit.
    #[arg(long)]
    list: bool,

    /// Exit 0 even when the client retried in no scenario (it gave up every time): for a
    /// client that is meant never to retry. Without it that exits 4, not tested.
    #[arg(long)]
    allow_no_retry: bool,

    /// Also run the long hints: 90 s and 150 s (above the 60 s and 120 s caps of real SDKs)
    /// and an hour, which ends once the client has shown its hand (165 s at most).
    #[arg(long)]
    long: bool,

    /// Divide the long hints, and how long `long-hour` waits, by N: to test a client whose cap
    /// can be divided the same way, quickly.
    #[arg(long, value_name = "N", default_value_t = 1,
          value_parser = clap::value_parser!(u32).range(1..=3600))]
    long_scale: u32,

    /// Run at most N scenarios at a time (default: twice the CPUs, 4 at least). Each starts a
    /// proxy and the command: too many at once on a small machine delay a client's retries
    /// by hundreds of ms, enough to pass one that retries at once.
    #[arg(long, short = 'j', value_name = "N",
          value_parser = clap::value_parser!(u16).range(1..=256))]
    jobs: Option<u16>,

    /// Run N copies of the command at once in `no-hint`, each with its own proxy: copies that
    /// all come back the same time after their throttles are a herd (a warning: no jitter).
    #[arg(long, value_name = "N", default_value_t = 1,
          value_parser = clap::value_parser!(u16).range(1..=64))]
    parallel: u16,

    /// Answer every request a throttle does not answer with this status instead of sending it
    /// upstream: for an API CI cannot reach. 200 when only --success-body or --success-header
    /// is given.
    #[arg(long, value_name = "CODE", value_parser = clap::value_parser!(u16).range(100..=599))]
    success_status: Option<u16>,

    /// A header of the success answer, `Name: value` (repeatable).
    #[arg(long, value_name = "HEADER", value_parser = parse_header)]
    success_header: Vec<(String, String)>,

    /// The body of the success answer: sent as JSON (with a JSON content type) when it parses
    /// as JSON, else as text.
    #[arg(long, value_name = "TEXT", conflicts_with = "success_body_file")]
    success_body: Option<String>,

    /// The body of the success answer, from a file (as --success-body).
    #[arg(long, value_name = "FILE")]
    success_body_file: Option<PathBuf>,

    /// Also write the results as JSON to this file.
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,

    /// Also write the results as JUnit XML to this file: a test case per scenario, a failure
    /// per failed one, n/a as skipped.
    #[arg(long, value_name = "FILE")]
    junit: Option<PathBuf>,

    /// Also write the results as a self-contained HTML page to this file.
    #[arg(long, value_name = "FILE")]
    html: Option<PathBuf>,

    /// Reverse mode, for a client that cannot use a proxy: each scenario's proxy listens as
    /// this API itself (`holdoff proxy --upstream URL`), and the command calls the proxy's URL
    /// instead — `{url}` in its arguments, or the HOLDOFF_CHECK_URL variable.
    #[arg(long, value_name = "URL", value_parser = parse_upstream)]
    upstream: Option<String>,

    /// Stop the command this long after its throttle in each scenario (after the hint, for a
    /// long one; if no request comes, after its start, 60 s at least), and judge what it did
    /// until then.
    #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = duration::parse)]
    timeout: Duration,

    /// The client command to check, after `--`, and its arguments.
    #[arg(last = true, required_unless_present = "list", value_name = "COMMAND")]
    command: Vec<OsString>,
}

/// An `http://` or `https://` URL, for `--upstream`.
fn parse_upstream(text: &str) -> Result<String, String> {
    let uri: http::Uri = text
        .parse()
        .map_err(|err| format!("`{text}` is not a URL ({err}): give http://HOST[:PORT][/PATH]"))?;
    match (uri.scheme_str(), uri.authority()) {
        (Some("http" | "https"), Some(_)) => Ok(text.to_owned()),
        _ => Err(format!(
            "`{text}` is not an http:// or https:// URL with a host: give \
             http://HOST[:PORT][/PATH]"
        )),
    }
}

/// `Name: value`, for `--success-header`.
fn parse_header(text: &str) -> Result<(String, String), String> {
    let (name, value) = text
        .split_once(':')
        .ok_or_else(|| format!("`{text}` is not `Name: value`: put a colon after the name"))?;
    let name = name.trim();
    http::HeaderName::from_bytes(name.as_bytes())
        .map_err(|_| format!("`{name}` is not a header name (letters, digits and -)"))?;
    http::HeaderValue::from_str(value.trim())
        .map_err(|_| format!("the value of `{name}` has a character a header cannot carry"))?;
    Ok((name.to_owned(), value.trim().to_owned()))
}

/// One scenario's result.
pub(crate) struct Row {
    scenario: Scenario,
    /// What it sent, as the table shows it.
    sends: String,
    outcome: Outcome,
    /// How long its command ran (the longest copy's, with `--parallel`).
    elapsed: Duration,
    /// The machine's scheduling lateness while it ran.
    noise: Noise,
}

/// Runs `holdoff check`: the table on `out`.
pub(crate) fn run(args: Args, out: &mut dyn Write) -> Result<(), Failure> {
    if args.list {
        let width = scenarios::ALL
            .iter()
            .map(|s| s.name.len())
            .max()
            .unwrap_or(0);
        for scenario in scenarios::ALL {
            writeln!(out, "{:width$}  {}", scenario.name, scenario.description)?;
        }
        writeln!(
            out,
            "{:width$}  {}",
            scenarios::READS,
            scenarios::READS_DESCRIPTION
        )?;
        return Ok(());
    }
    let chosen = match args.scenarios.is_empty() {
        true => scenarios::ALL
            .iter()
            .filter(|scenario| args.long || !scenario.long)
            .copied()
            .collect(),
        false => args
            .scenarios
            .iter()
            .map(|name| Scenario::find(name))
            .collect::<Result<Vec<_>, _>>()
            .map_err(Failure::Usage)?,
    };
    let setup = Setup {
        now: TokioClock.wall_now(),
        long_scale: args.long_scale,
        success: success(&args)?,
    };
    let exe = std::env::current_exe().map_err(|err| {
        Failure::Runtime(format!(
            "failed to find the holdoff executable to run: {err}"
        ))
    })?;
    let dir = tempfile::Builder::new()
        .prefix("holdoff-check-")
        .tempdir()
        .map_err(|err| {
            Failure::Runtime(format!(
                "failed to create a temporary directory in {}: {err}; point TMPDIR at a \
                 writable directory",
                std::env::temp_dir().display()
            ))
        })?;
    let runtime = crate::proxy::session::runtime()?;
    let sampler = Sampler::start();
    let shared = Arc::new(Shared {
        exe,
        dir: dir.path().to_owned(),
        command: args.command.clone(),
        upstream: args.upstream.clone(),
        timeout: args.timeout,
        parallel: args.parallel,
        setup,
        sampler,
        stop: tokio_util::sync::CancellationToken::new(),
        stopped_by: std::sync::atomic::AtomicU8::new(0),
        sent_nothing: std::sync::atomic::AtomicBool::new(false),
    });
    let jobs = args.jobs.map_or_else(default_jobs, usize::from);
    let listening = runtime.block_on(async { stop_on_signal(&shared) });
    let results = runtime.block_on(suite::run(&shared, &chosen, jobs, out));
    drop(listening);
    let stopped_by = shared.stopped_by.load(std::sync::atomic::Ordering::Relaxed);
    let sent_nothing = shared
        .sent_nothing
        .load(std::sync::atomic::Ordering::Relaxed);
    drop(shared);
    drop(runtime);
    let rows = results?;
    if sent_nothing && rows.len() < chosen.len() {
        eprintln!(
            "holdoff: the client sent no request in the first {} scenarios, so the other {} \
             were not run: each would only have waited to say the same",
            rows.len(),
            chosen.len() - rows.len()
        );
    }
    if stopped_by != 0 {
        eprintln!(
            "holdoff: stopped by {}: {} of {} scenarios were judged on what the client did \
             until then; the others did not run",
            if stopped_by == 2 { "SIGINT" } else { "SIGTERM" },
            rows.len(),
            chosen.len()
        );
    }
    let command = report::command_line(&args.command);
    let reports: [(&Option<PathBuf>, &str, Render); 3] = [
        (&args.json, "JSON", report::json),
        (&args.junit, "JUnit", report::junit),
        (&args.html, "HTML", report::html),
    ];
    for (path, kind, render) in reports {
        if let Some(path) = path {
            fs::write(path, render(&rows, &command)).map_err(|err| {
                Failure::Usage(format!(
                    "cannot write the {kind} report {}: {err}",
                    path.display()
                ))
            })?;
        }
    }
    let count = |verdict| {
        rows.iter()
            .filter(|row| row.outcome.verdict == verdict)
            .count()
    };
    if count(Verdict::Fail) > 0 {
        return Err(Failure::Premature);
    }
    // Stopped: what ran was judged and reported; the check as a whole did not finish.
    if stopped_by != 0 {
        return Err(Failure::Command(128 + stopped_by));
    }
    if count(Verdict::NotApplicable) == rows.len() {
        eprintln!("holdoff: {NO_TRAFFIC}");
        return Err(Failure::NotTested);
    }
    if !rows.iter().any(|row| row.outcome.retried()) && !args.allow_no_retry {
        eprintln!("holdoff: {NO_RETRY}");
        return Err(Failure::NotTested);
    }
    Ok(())
}

/// Why a check that no request reached tested nothing, and what to do.
const NO_TRAFFIC: &str = "no request reached the proxy in any scenario, so nothing was \
tested. The command's client may ignore HTTP_PROXY and HTTPS_PROXY: Node's own http and https \
modules (and got, node-fetch and axios without a proxy agent) do, as do Node's fetch before \
22.21, Go and Ruby for loopback hosts, and httpx with its own transport. Check it in reverse \
mode instead: --upstream URL, with the command calling '{url}' (or $HOLDOFF_CHECK_URL). \
`holdoff run -- COMMAND` lists more causes and their fixes.";

/// Why a check in which the client never retried tested nothing, and what to do.
const NO_RETRY: &str = "the client retried in no scenario: each time it was throttled it gave \
up (or was still waiting when stopped), so nothing shows whether it honours Retry-After. Is \
retrying on (curl's --retry, urllib3's Retry(status_forcelist=[429, 503]), your SDK's \
max_retries)? The table's CLIENT column says how each scenario ended. If the client is meant \
never to retry, pass --allow-no-retry.";

/// What every scenario's run needs, shared by their tasks.
pub(crate) struct Shared {
    exe: PathBuf,
    dir: PathBuf,
    command: Vec<OsString>,
    upstream: Option<String>,
    timeout: Duration,
    parallel: u16,
    setup: Setup,
    /// The machine's scheduling lateness, sampled the whole time.
    sampler: Sampler,
    /// Cancelled by SIGINT or SIGTERM: every scenario running is stopped and judged on what
    /// it did, and none starts.
    stop: tokio_util::sync::CancellationToken,
    /// The signal that stopped the check, as its number (0: none).
    stopped_by: std::sync::atomic::AtomicU8,
    /// Whether the check stopped because the first scenarios saw no request at all.
    sent_nothing: std::sync::atomic::AtomicBool,
}

/// Listens for SIGINT and SIGTERM for as long as the returned task lives: the first stops
/// every scenario (see [`Shared::stop`]), so that the check ends on its own, judges what it
/// saw, writes its reports and removes its temporary folder, rather than dying with its
/// clients and proxies left running.
fn stop_on_signal(shared: &Arc<Shared>) -> Option<tokio::task::JoinHandle<()>> {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let mut interrupt = signal(SignalKind::interrupt()).ok()?;
        let mut terminate = signal(SignalKind::terminate()).ok()?;
        let shared = Arc::clone(shared);
        Some(tokio::spawn(async move {
            let number = tokio::select! {
                _ = interrupt.recv() => 2,
                _ = terminate.recv() => 15,
            };
            shared
                .stopped_by
                .store(number, std::sync::atomic::Ordering::Relaxed);
            shared.stop.cancel();
        }))
    }
    #[cfg(not(unix))]
    {
        let _ = shared;
        None
    }
}

/// How many scenarios run at once without `--jobs`: twice the CPUs, 4 at least.
fn default_jobs() -> usize {
    std::thread::available_parallelism().map_or(4, |cpus| (cpus.get() * 2).max(4))
}

/// Runs one scenario — its copies at once, each with a proxy of its own — and judges each:
/// its row. `again` counts the times it was run before (its files are named apart).
pub(crate) async fn run_scenario(
    shared: &Shared,
    scenario: Scenario,
    again: usize,
) -> Result<Row, Failure> {
    let copies = match scenario.rule {
        Rule::NoHint | Rule::Backoff => shared.parallel,
        _ => 1,
    };
    let clock = TokioClock;
    let started = clock.now();
    let config = write_config(&scenario, &shared.setup, &shared.dir)?;
    let mut spawned = Vec::new();
    for copy in 1..=copies {
        let mut name = scenario.name.to_owned();
        if copies > 1 {
            name.push_str(&format!("-{copy}"));
        }
        if again > 0 {
            name.push_str(&format!(".again-{again}"));
        }
        let files = Files::new(&shared.dir, &name);
        spawned.push(match &shared.upstream {
            None => spawn(&shared.exe, &config, files, scenario.name, &shared.command)?,
            Some(upstream) => {
                let command = &shared.command;
                spawn_reverse(
                    &shared.exe,
                    &config,
                    files,
                    upstream,
                    scenario.name,
                    command,
                )
                .await?
            }
        });
    }
    let limit = scenario.time_limit(shared.timeout, &shared.setup);
    let hint = scenario.hint_secs(&shared.setup);
    let copies: Vec<_> = spawned
        .into_iter()
        .map(|one| tokio::spawn(finish(scenario, hint, one, limit, shared.stop.clone())))
        .collect();
    let mut outcomes = Vec::new();
    let mut elapsed = Duration::ZERO;
    for copy in copies {
        let (outcome, took) = copy
            .await
            .map_err(|err| Failure::Runtime(format!("a scenario's task failed: {err}")))??;
        outcomes.push(outcome);
        elapsed = elapsed.max(took);
    }
    let noise = shared.sampler.between(started, clock.now());
    // Copies are judged against the noise while their retries were on the way, not while a
    // dozen processes were starting.
    let retried: Vec<_> = outcomes.iter().filter_map(|o| o.first_retry_at).collect();
    let (herd_noise, crowding) = match (retried.iter().min(), retried.iter().max()) {
        (Some(first), Some(last)) => (
            shared.sampler.around(*first, *last),
            shared.sampler.crowding(*first, *last),
        ),
        _ => (noise, 0.0),
    };
    Ok(Row {
        scenario,
        sends: scenario.sends(&shared.setup),
        outcome: load::herd(outcomes, herd_noise, crowding),
        elapsed,
        noise,
    })
}

/// A report's renderer: the rows and the command line to the file's text.
type Render = fn(&[Row], &str) -> String;

/// The success answer the `--success-*` options configure, if any.
fn success(args: &Args) -> Result<Option<Success>, Failure> {
    let body = match (&args.success_body, &args.success_body_file) {
        (Some(text), _) => Some(text.clone()),
        (None, Some(path)) => Some(fs::read_to_string(path).map_err(|err| {
            Failure::Usage(format!(
                "cannot read --success-body-file {}: {err}",
                path.display()
            ))
        })?),
        (None, None) => None,
    };
    if args.success_status.is_none() && args.success_header.is_empty() && body.is_none() {
        return Ok(None);
    }
    Ok(Some(Success {
        status: args.success_status.unwrap_or(200),
        headers: args.success_header.clone(),
        body: body.unwrap_or_default(),
    }))
}
