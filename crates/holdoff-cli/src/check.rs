//! `holdoff check -- COMMAND`: a Retry-After conformance suite for any HTTP client.
//!
//! Each scenario is one `holdoff run` of the command (this same binary, so the throwaway CA,
//! the proxy variables and the judge are exactly `holdoff run`'s) with a config whose mock
//! answers the first watched request with the scenario's throttle and lets every later one
//! through to the upstream. The scenarios run side by side, each with a proxy of its own;
//! each one's verdict comes from its event log ([`verdict::judge`]).

mod scenarios;
mod verdict;

use std::ffi::OsString;
use std::fs::{self, File};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use holdoff::clock::{Clock, TokioClock};
use holdoff_proxy::report::{Event, Report};
use serde_json::json;
use tokio::process::{Child, Command};

use self::scenarios::{MIN_BACKOFF, Scenario};
use self::verdict::{Outcome, Verdict};
use crate::{Failure, duration};

const AFTER_HELP: &str = "\
Each scenario starts a proxy of its own exactly as `holdoff run` does (a throwaway CA, the proxy
and CA variables set for the command), runs COMMAND once, answers its first request with the
scenario's throttle and every later one from the upstream, and judges what the client did next
with the judge's own rules. The scenarios run at the same time, each with its own proxy; every
request the command sends is one client's (the peer address), so a shell script running several
programs is judged as one client. A scenario ends when the command exits, or at --timeout, when
it is stopped (SIGTERM) and judged on what it did until then. The command's own output is not
shown.

Exit status:
  0    no scenario failed (warnings and n/a allowed), and at least one was tested
  3    a scenario failed: the client retried before Retry-After permitted, or sooner than the
       minimum backoff (100 ms) after a malformed hint, none, or a used-up quota
  4    no scenario was tested: no request reached the proxy in any
  1    a scenario's proxy could not start
  2    a usage error (e.g. an unknown scenario)
  126  the command was found but could not be run (not executable)
  127  the command was not found

Examples:
  holdoff check --list
  holdoff check -- curl -s --retry 2 http://127.0.0.1:8080/v1/items
  holdoff check --scenario delay-429 --scenario malformed --json check.json -- python3 client.py";

/// Check how a client handles Retry-After: every scenario at once, each with a fresh proxy.
#[derive(Debug, clap::Args)]
#[command(after_help = AFTER_HELP)]
pub(crate) struct Args {
    /// Run only this scenario (repeatable); every one by default. `--list` names them.
    #[arg(long = "scenario", short = 's', value_name = "NAME")]
    scenarios: Vec<String>,

    /// Describe every scenario and exit.
    #[arg(long)]
    list: bool,

    /// Also write the results as JSON to this file.
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,

    /// Stop the command after this long in each scenario, and judge what it did until then.
    #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = duration::parse)]
    timeout: Duration,

    /// The client command to check, after `--`, and its arguments.
    #[arg(last = true, required_unless_present = "list", value_name = "COMMAND")]
    command: Vec<OsString>,
}

/// One scenario's result.
struct Row {
    scenario: Scenario,
    outcome: Outcome,
}

/// Runs `holdoff check`: the table on `out`.
pub(crate) fn run(args: Args, out: &mut dyn Write) -> Result<(), Failure> {
    let chosen = match args.scenarios.is_empty() {
        true => scenarios::ALL.to_vec(),
        false => args
            .scenarios
            .iter()
            .map(|name| Scenario::find(name))
            .collect::<Result<Vec<_>, _>>()
            .map_err(Failure::Usage)?,
    };
    if args.list {
        let width = scenarios::ALL
            .iter()
            .map(|s| s.name.len())
            .max()
            .unwrap_or(0);
        for scenario in scenarios::ALL {
            writeln!(out, "{:width$}  {}", scenario.name, scenario.description)?;
        }
        return Ok(());
    }
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
    let results = runtime.block_on(async {
        let mut runs = Vec::new();
        for scenario in &chosen {
            let spawned = spawn(&exe, scenario, &args, dir.path())?;
            runs.push(tokio::spawn(finish(*scenario, spawned, args.timeout)));
        }
        let mut rows = Vec::new();
        for run in runs {
            let row = run
                .await
                .map_err(|err| Failure::Runtime(format!("a scenario's task failed: {err}")))??;
            rows.push(row);
        }
        Ok::<_, Failure>(rows)
    });
    drop(runtime);
    let rows = results?;
    write_table(&rows, out)?;
    if let Some(path) = &args.json {
        let text = serde_json::to_string_pretty(&to_json(&rows)).unwrap_or_default();
        fs::write(path, text + "\n").map_err(|err| {
            Failure::Usage(format!(
                "cannot write the JSON report {}: {err}",
                path.display()
            ))
        })?;
    }
    let count = |verdict| {
        rows.iter()
            .filter(|row| row.outcome.verdict == verdict)
            .count()
    };
    if count(Verdict::Fail) > 0 {
        return Err(Failure::Premature);
    }
    if count(Verdict::NotApplicable) == rows.len() {
        return Err(Failure::NotTested);
    }
    Ok(())
}

/// A scenario's `holdoff run`, started.
struct Spawned {
    child: Child,
    events: PathBuf,
    /// Where holdoff's (and the command's) stderr went: a run that could not start says why
    /// there.
    stderr: PathBuf,
}

/// Writes the scenario's config and starts `holdoff run` with it.
fn spawn(exe: &Path, scenario: &Scenario, args: &Args, dir: &Path) -> Result<Spawned, Failure> {
    let file = |ext: &str| dir.join(format!("{}.{ext}", scenario.name));
    let (config, events, stdout, stderr) = (file("json"), file("events"), file("out"), file("err"));
    let text = serde_json::to_string_pretty(&scenario.config()).unwrap_or_default();
    let created = |path: &Path| {
        File::create(path)
            .map_err(|err| Failure::Runtime(format!("failed to create {}: {err}", path.display())))
    };
    created(&config)?.write_all(text.as_bytes())?;
    let mut command = Command::new(exe);
    command
        .arg("run")
        .arg("--config")
        .arg(&config)
        .args(["--client-id", "peer", "--judge-min-backoff"])
        .arg(format!("{}ms", MIN_BACKOFF.as_millis()))
        .args(["--log-level", "off"])
        .arg("--events")
        .arg(&events)
        .arg("--")
        .args(&args.command)
        .stdin(Stdio::null())
        .stdout(created(&stdout)?)
        .stderr(created(&stderr)?)
        .kill_on_drop(true);
    let child = command
        .spawn()
        .map_err(|err| Failure::Runtime(format!("failed to run {} run: {err}", exe.display())))?;
    Ok(Spawned {
        child,
        events,
        stderr,
    })
}

/// How long a command stopped at the time limit has to exit before it is killed.
const STOP_GRACE: Duration = Duration::from_secs(5);

/// Waits for a scenario's run (stopping it at `timeout`), and judges its event log.
async fn finish(
    scenario: Scenario,
    mut spawned: Spawned,
    timeout: Duration,
) -> Result<Row, Failure> {
    let clock = TokioClock;
    let deadline = clock.now() + timeout;
    let mut timed_out = false;
    let status = tokio::select! {
        status = spawned.child.wait() => status,
        () = clock.sleep_until(deadline) => {
            timed_out = true;
            terminate(&spawned.child);
            let grace = clock.now() + STOP_GRACE;
            tokio::select! {
                status = spawned.child.wait() => status,
                () = clock.sleep_until(grace) => {
                    let _ = spawned.child.start_kill();
                    spawned.child.wait().await
                }
            }
        }
    };
    status.map_err(|err| {
        Failure::Runtime(format!(
            "failed to wait for scenario {}: {err}",
            scenario.name
        ))
    })?;
    let events = Report::read_log(&spawned.events).unwrap_or_default();
    let own = events.iter().find_map(|event| match event {
        Event::Finish {
            exit_code,
            requests,
            ..
        } => Some((*exit_code, *requests)),
        _ => None,
    });
    let said = || {
        let text = fs::read_to_string(&spawned.stderr).unwrap_or_default();
        let text = text.trim();
        let text = text.strip_prefix("holdoff: ").unwrap_or(text);
        format!("scenario {}: {text}", scenario.name)
    };
    match own {
        Some((Some(127), 0)) => return Err(Failure::NotFound(said())),
        Some((Some(126), 0)) => return Err(Failure::CannotExecute(said())),
        // No end recorded: the proxy could not start (stderr says why), or was killed.
        None => return Err(Failure::Runtime(said())),
        _ => {}
    }
    Ok(Row {
        scenario,
        outcome: verdict::judge(scenario.rule, &events, timed_out),
    })
}

/// Asks a run to stop: SIGTERM, which `holdoff run` passes on to the command.
fn terminate(child: &Child) {
    #[cfg(unix)]
    if let Some(pid) = child
        .id()
        .and_then(|id| i32::try_from(id).ok())
        .and_then(rustix::process::Pid::from_raw)
    {
        let _ = rustix::process::kill_process(pid, rustix::process::Signal::TERM);
    }
    #[cfg(not(unix))]
    let _ = child;
}

/// The table: one row per scenario, then the summary line.
fn write_table(rows: &[Row], out: &mut dyn Write) -> std::io::Result<()> {
    let header = ["SCENARIO", "SENT", "CLIENT", "VERDICT", "WHY"];
    let cells: Vec<[String; 5]> = rows
        .iter()
        .map(|row| {
            [
                row.scenario.name.to_owned(),
                row.scenario.sends.to_owned(),
                row.outcome.did.clone(),
                row.outcome.verdict.as_str().to_owned(),
                row.outcome.why.clone(),
            ]
        })
        .collect();
    let mut widths = header.map(str::len);
    for row in &cells {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let line = |cells: [&str; 5], out: &mut dyn Write| {
        let mut text = String::new();
        for (n, cell) in cells.iter().enumerate().take(4) {
            text.push_str(&format!("{cell:width$}  ", width = widths[n]));
        }
        text.push_str(cells[4]);
        writeln!(out, "{}", text.trim_end())
    };
    line(header, out)?;
    for row in &cells {
        line(row.each_ref().map(String::as_str), out)?;
    }
    writeln!(out, "{}", summary(rows))
}

/// `honours Retry-After: 4/5 (1 fail)`: passes out of the scenarios tested.
fn summary(rows: &[Row]) -> String {
    let count = |verdict| {
        rows.iter()
            .filter(|row| row.outcome.verdict == verdict)
            .count()
    };
    let tested = rows.len() - count(Verdict::NotApplicable);
    let mut line = format!("honours Retry-After: {}/{tested}", count(Verdict::Pass));
    let mut rest = Vec::new();
    for verdict in [Verdict::Fail, Verdict::Warn, Verdict::NotApplicable] {
        if count(verdict) > 0 {
            rest.push(format!("{} {}", count(verdict), verdict.as_str()));
        }
    }
    if !rest.is_empty() {
        line.push_str(&format!(" ({})", rest.join(", ")));
    }
    let failed: Vec<&str> = rows
        .iter()
        .filter(|row| row.outcome.verdict == Verdict::Fail)
        .map(|row| row.scenario.name)
        .collect();
    if !failed.is_empty() {
        line.push_str(&format!("; fails {}", failed.join(", ")));
    }
    line
}

/// The results as JSON: the same rows and summary as the table.
fn to_json(rows: &[Row]) -> serde_json::Value {
    let scenarios: Vec<serde_json::Value> = rows
        .iter()
        .map(|row| {
            json!({
                "scenario": row.scenario.name,
                "sent": row.scenario.sends,
                "did": row.outcome.did,
                "verdict": row.outcome.verdict.as_str(),
                "why": row.outcome.why,
                "requests": row.outcome.requests,
                "retries": row.outcome.retries,
                "first_retry_after_s": row.outcome.first_retry_after_s,
                "exit_code": row.outcome.exit_code,
                "timed_out": row.outcome.timed_out,
            })
        })
        .collect();
    json!({ "scenarios": scenarios, "summary": summary(rows) })
}
