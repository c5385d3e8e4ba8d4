//! A proxy in the background, for CI scripts shaped like Dev Proxy's: `holdoff proxy
//! --detach` starts it and returns once it listens; `holdoff status`, `holdoff logs` and
//! `holdoff stop` find it through [`crate::instances`]. `holdoff stop` writes its reports (the
//! proxy does, as on Ctrl-C) and exits with its verdict, as `holdoff report` would.

use std::ffi::OsString;
use std::fs::{self, File};
use std::io::{self, BufRead, BufReader, Read, Seek, SeekFrom, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use holdoff::clock::SystemClock;

use holdoff_proxy::report::Report;

use crate::failure::Failure;
use crate::instances::{Ended, Instance, Store, alive};

/// The hidden option that tells a proxy it was started by `--detach`, with its log file.
pub(crate) const CHILD_FLAG: &str = "--_detached-child";

/// How long `--detach` waits for the proxy to listen.
const START_WAIT: Duration = Duration::from_secs(30);

/// How often a wait looks again.
const POLL: Duration = Duration::from_millis(50);

/// Starts `argv` (holdoff's command line, `proxy` in it) again without `--detach`, in the
/// background, logging to a file of its own, and returns once it listens, having said where.
/// `has_control` is whether the command line asks for the control API; without it, one is
/// added on a free port, for `holdoff status`.
pub(crate) fn start(
    argv: &[OsString],
    has_control: bool,
    out: &mut impl Write,
) -> Result<(), Failure> {
    let store = Store::from_env().map_err(Failure::Usage)?;
    let logs = store
        .logs()
        .map_err(|err| Failure::Runtime(format!("cannot create the log folder: {err}")))?;
    let stamp = now().strftime("%Y%m%dT%H%M%S").to_string();
    let exe = std::env::current_exe()
        .map_err(|err| Failure::Runtime(format!("cannot find holdoff's own executable: {err}")))?;
    let mut child_args = without_detach(argv.get(1..).unwrap_or_default());
    if !has_control {
        child_args.extend(["--control-port".into(), "0".into()]);
    }
    // Named before the proxy runs, so after this process; `holdoff status` names it.
    let log_file = logs.join(format!("holdoff-{}-{stamp}.log", std::process::id()));
    let log = File::create(&log_file).map_err(|err| cannot_log(&log_file, &err))?;
    let log_err = log.try_clone().map_err(|err| cannot_log(&log_file, &err))?;
    child_args.push(CHILD_FLAG.into());
    child_args.push(log_file.clone().into_os_string());
    let mut command = Command::new(exe);
    command
        .args(&child_args)
        .stdin(Stdio::null())
        .stdout(log)
        .stderr(log_err);
    // A group of its own: Ctrl-C in this terminal, or the end of this shell's job, leaves it.
    #[cfg(unix)]
    std::os::unix::process::CommandExt::process_group(&mut command, 0);
    let mut child = command
        .spawn()
        .map_err(|err| Failure::Runtime(format!("cannot start the proxy: {err}")))?;
    let pid = child.id();
    let deadline = SystemClock.now() + START_WAIT;
    let instance = loop {
        if let Some(instance) = store.instance(pid) {
            break instance;
        }
        if let Ok(Some(status)) = child.try_wait() {
            let tail = tail_lines(&log_file, 20).unwrap_or_default();
            return Err(Failure::Runtime(format!(
                "the proxy did not start ({status}); its log, {}:\n{}",
                log_file.display(),
                tail.join("\n")
            )));
        }
        if SystemClock.now() > deadline {
            let _ = child.kill();
            return Err(Failure::Runtime(format!(
                "the proxy did not listen within {} s; see its log, {}",
                START_WAIT.as_secs(),
                log_file.display()
            )));
        }
        SystemClock.block_for(POLL);
    };
    writeln!(out, "listening on {}", instance.proxy_url)?;
    if let Some(api) = &instance.api_url {
        writeln!(out, "control API on {api}/")?;
    }
    writeln!(
        out,
        "holdoff proxy runs in the background (pid {pid}), logging to {}.\n`holdoff status` \
         shows it, `holdoff logs` prints its log, `holdoff stop` stops it, writes its reports \
         and exits with its verdict.",
        instance.log_file.display()
    )?;
    Ok(())
}

/// The wall clock's time now.
fn now() -> jiff::Timestamp {
    jiff::Timestamp::try_from(SystemClock.wall_now()).unwrap_or(jiff::Timestamp::UNIX_EPOCH)
}

fn cannot_log(path: &Path, err: &io::Error) -> Failure {
    Failure::Runtime(format!(
        "cannot create the log file {}: {err}",
        path.display()
    ))
}

/// `args` without `-d`/`--detach` (and a `true`/`false` after it, or `=value`).
fn without_detach(args: &[OsString]) -> Vec<OsString> {
    let mut kept = Vec::with_capacity(args.len());
    let mut iter = args.iter().peekable();
    while let Some(arg) = iter.next() {
        let text = arg.to_string_lossy();
        if text == "--" {
            kept.push(arg.clone());
            kept.extend(iter.cloned());
            break;
        }
        if text == "-d" || text == "--detach" {
            if iter.peek().is_some_and(|next| {
                let next = next.to_string_lossy().to_ascii_lowercase();
                next == "true" || next == "false"
            }) {
                iter.next();
            }
            continue;
        }
        if text.starts_with("--detach=") {
            continue;
        }
        kept.push(arg.clone());
    }
    kept
}

/// In the proxy `--detach` started: records it as running, once it listens.
pub(crate) fn register(
    log_file: &Path,
    proxy: std::net::SocketAddr,
    endpoints: &[(&'static str, String)],
    source: &str,
) -> Result<(), Failure> {
    let store = Store::from_env().map_err(Failure::Usage)?;
    let instance = Instance {
        pid: std::process::id(),
        proxy_url: format!("http://{proxy}"),
        api_url: endpoints
            .iter()
            .find(|(what, _)| *what == "control API")
            .map(|(_, addr)| format!("http://{addr}")),
        log_file: log_file.to_owned(),
        started_at: now().to_string(),
        source: source.to_owned(),
    };
    store
        .register(&instance)
        .map_err(|err| Failure::Runtime(format!("cannot record the background proxy: {err}")))
}

/// In the proxy `--detach` started, as it exits: records its verdict for `holdoff stop`.
pub(crate) fn ended(report: &Report) {
    let code = match crate::report::judged(report) {
        Ok(()) => crate::exit_codes::SUCCESS,
        Err(failure) => failure.exit_code(),
    };
    let ended = Ended {
        exit_code: code,
        verdict: report.outcome().as_str().to_owned(),
        summary: report.terminal_summary(&[]),
    };
    if let Ok(store) = Store::from_env()
        && let Err(err) = store.ended(std::process::id(), &ended)
    {
        tracing::warn!("cannot record how the background proxy ended: {err}");
    }
}

/// Which background proxy a command is about.
#[derive(Debug, clap::Args)]
pub(crate) struct Which {
    /// The proxy with this process ID (`holdoff status` lists them); default: every one.
    #[arg(long, value_name = "PID")]
    pid: Option<u32>,
}

impl Which {
    /// The running instances meant, or why there are none.
    fn instances(&self, store: &Store) -> Result<Vec<Instance>, Failure> {
        let running = store.running();
        let chosen: Vec<Instance> = match self.pid {
            Some(pid) => running.into_iter().filter(|i| i.pid == pid).collect(),
            None => running,
        };
        if chosen.is_empty() {
            let what = match self.pid {
                Some(pid) => format!("no holdoff proxy with pid {pid} runs in the background"),
                None => "no holdoff proxy runs in the background".to_owned(),
            };
            return Err(Failure::Runtime(format!(
                "{what} (start one with `holdoff proxy --detach`)"
            )));
        }
        Ok(chosen)
    }
}

/// `holdoff status`.
#[derive(Debug, clap::Args)]
pub(crate) struct StatusArgs {
    #[command(flatten)]
    which: Which,
}

/// Prints each background proxy: where it listens and logs, and what its control API says.
pub(crate) fn status(args: StatusArgs, out: &mut impl Write) -> Result<(), Failure> {
    let store = Store::from_env().map_err(Failure::Usage)?;
    let instances = args.which.instances(&store)?;
    for instance in instances {
        writeln!(out, "holdoff proxy is running.\n")?;
        writeln!(out, "  PID:          {}", instance.pid)?;
        writeln!(out, "  Proxy:        {}", instance.proxy_url)?;
        if let Some(api) = &instance.api_url {
            writeln!(out, "  API:          {api}")?;
        }
        writeln!(out, "  Faults from:  {}", instance.source)?;
        writeln!(out, "  Log file:     {}", instance.log_file.display())?;
        writeln!(out, "  Started:      {}", instance.started_at)?;
        if let Some(api) = &instance.api_url {
            match live_status(api) {
                Ok(line) => writeln!(out, "  So far:       {line}")?,
                Err(err) => writeln!(out, "  So far:       (the API did not answer: {err})")?,
            }
        }
        writeln!(out)?;
    }
    Ok(())
}

/// One line from the control API's `/status`: requests, retries, open windows.
fn live_status(api: &str) -> Result<String, String> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|err| err.to_string())?;
    let value: serde_json::Value = runtime.block_on(async {
        let client = crate::http::client(Duration::from_secs(5), crate::http::Route::Direct)?;
        let response = client
            .get(format!("{api}/status"))
            .send()
            .await
            .map_err(|err| err.without_url().to_string())?;
        let body = response.bytes().await.map_err(|err| err.to_string())?;
        serde_json::from_slice(&body).map_err(|err| err.to_string())
    })?;
    let count = |pointer: &str| value.pointer(pointer).and_then(serde_json::Value::as_u64);
    Ok(format!(
        "{} requests; {} premature and {} compliant retries; {} windows open",
        count("/requests").unwrap_or(0),
        count("/retries/premature").unwrap_or(0),
        count("/retries/compliant").unwrap_or(0),
        count("/open_windows").unwrap_or(0),
    ))
}

/// `holdoff stop`.
#[derive(Debug, clap::Args)]
pub(crate) struct StopArgs {
    #[command(flatten)]
    which: Which,
    /// Kill it at once (SIGKILL): no reports, no verdict.
    #[arg(short, long)]
    force: bool,
    /// How long to wait for it to finish the requests in flight and write its reports.
    #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = crate::duration::parse)]
    wait: Duration,
}

/// Stops each background proxy meant, as Ctrl-C would (its reports are written), prints its
/// summary and exits with its verdict: 3 if a client retried early, 4 if no request reached
/// it; with several, the worst.
pub(crate) fn stop(args: StopArgs, out: &mut impl Write) -> Result<(), Failure> {
    let store = Store::from_env().map_err(Failure::Usage)?;
    let mut worst = crate::exit_codes::SUCCESS;
    for instance in args.which.instances(&store)? {
        let pid = instance.pid;
        let signal = if args.force {
            rustix::process::Signal::KILL
        } else {
            rustix::process::Signal::TERM
        };
        if let Some(process) = rustix::process::Pid::from_raw(pid.cast_signed())
            && let Err(err) = rustix::process::kill_process(process, signal)
        {
            return Err(Failure::Runtime(format!(
                "cannot signal the proxy (pid {pid}): {err}"
            )));
        }
        let deadline = SystemClock.now() + args.wait;
        while alive(pid) {
            if SystemClock.now() > deadline {
                return Err(Failure::Runtime(format!(
                    "the proxy (pid {pid}) did not stop within {} s; `holdoff stop --force` \
                     kills it",
                    args.wait.as_secs()
                )));
            }
            SystemClock.block_for(POLL);
        }
        writeln!(out, "Stopped holdoff proxy (pid {pid}).")?;
        match store.take_ended(pid) {
            Some(ended) => {
                write!(out, "{}", ended.summary)?;
                worst = worse(worst, ended.exit_code);
            }
            None => {
                writeln!(
                    out,
                    "It left no verdict (killed before it could write one); its log is {}",
                    instance.log_file.display()
                )?;
                worst = worse(worst, crate::exit_codes::FAILED);
            }
        }
    }
    match worst {
        crate::exit_codes::SUCCESS => Ok(()),
        crate::exit_codes::PREMATURE => Err(Failure::Premature),
        crate::exit_codes::NOT_TESTED => Err(Failure::NotTested),
        _ => Err(Failure::Runtime(
            "a background proxy left no verdict: see its log".to_owned(),
        )),
    }
}

/// The exit code that says more: a premature retry, then nothing tested, then a failure.
fn worse(a: u8, b: u8) -> u8 {
    let rank = |code: u8| match code {
        crate::exit_codes::PREMATURE => 3,
        crate::exit_codes::NOT_TESTED => 2,
        crate::exit_codes::SUCCESS => 0,
        _ => 1,
    };
    if rank(b) > rank(a) { b } else { a }
}

/// `holdoff logs`.
#[derive(Debug, clap::Args)]
pub(crate) struct LogsArgs {
    #[command(flatten)]
    which: Which,
    /// Only the last N lines.
    #[arg(short = 'n', long, value_name = "N")]
    lines: Option<usize>,
    /// Keep printing what it logs, until it stops (or Ctrl-C).
    #[arg(short, long)]
    follow: bool,
}

/// Prints the log of the background proxy (the newest, with several and no --pid).
pub(crate) fn logs(args: LogsArgs, out: &mut impl Write) -> Result<(), Failure> {
    let store = Store::from_env().map_err(Failure::Usage)?;
    let instances = args.which.instances(&store)?;
    let Some(instance) = instances.last() else {
        return Ok(());
    };
    let path = &instance.log_file;
    let lines = match args.lines {
        Some(n) => tail_lines(path, n),
        None => fs::read_to_string(path).map(|text| text.lines().map(str::to_owned).collect()),
    }
    .map_err(|err| Failure::Runtime(format!("cannot read the log {}: {err}", path.display())))?;
    for line in &lines {
        writeln!(out, "{line}")?;
    }
    if args.follow {
        follow(path, instance.pid, out)?;
    }
    Ok(())
}

/// Prints what is appended to `path` while `pid` runs.
fn follow(path: &Path, pid: u32, out: &mut impl Write) -> Result<(), Failure> {
    let cannot =
        |err: io::Error| Failure::Runtime(format!("cannot read the log {}: {err}", path.display()));
    let mut file = File::open(path).map_err(cannot)?;
    file.seek(SeekFrom::End(0)).map_err(cannot)?;
    let mut reader = BufReader::new(file);
    let mut line = String::new();
    loop {
        line.clear();
        let read = reader.read_line(&mut line).map_err(cannot)?;
        if read > 0 {
            write!(out, "{line}")?;
            out.flush()?;
            continue;
        }
        if !alive(pid) {
            // What it wrote as it stopped.
            let mut rest = String::new();
            reader.read_to_string(&mut rest).map_err(cannot)?;
            write!(out, "{rest}")?;
            return Ok(());
        }
        SystemClock.block_for(POLL * 4);
    }
}

/// The last `n` lines of the file at `path`.
fn tail_lines(path: &Path, n: usize) -> io::Result<Vec<String>> {
    let text = fs::read_to_string(path)?;
    let lines: Vec<&str> = text.lines().collect();
    let from = lines.len().saturating_sub(n);
    Ok(lines[from..]
        .iter()
        .map(|line| (*line).to_owned())
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(list: &[&str]) -> Vec<OsString> {
        list.iter().map(OsString::from).collect()
    }

    #[test]
    fn detach_is_taken_out_in_each_spelling_and_nothing_else() {
        assert_eq!(
            without_detach(&args(&["proxy", "-d", "-c", "rc.json"])),
            args(&["proxy", "-c", "rc.json"])
        );
        assert_eq!(
            without_detach(&args(&["proxy", "--detach", "true", "--port", "0"])),
            args(&["proxy", "--port", "0"])
        );
        assert_eq!(
            without_detach(&args(&["proxy", "--detach=true", "--no-mocks"])),
            args(&["proxy", "--no-mocks"])
        );
        // A value that is not a boolean belongs to the next option.
        assert_eq!(
            without_detach(&args(&["proxy", "-d", "-u", "*"])),
            args(&["proxy", "-u", "*"])
        );
    }

    #[test]
    fn the_worst_verdict_wins() {
        use crate::exit_codes::{FAILED, NOT_TESTED, PREMATURE, SUCCESS};
        assert_eq!(worse(SUCCESS, NOT_TESTED), NOT_TESTED);
        assert_eq!(worse(PREMATURE, NOT_TESTED), PREMATURE);
        assert_eq!(worse(FAILED, SUCCESS), FAILED);
        assert_eq!(worse(NOT_TESTED, FAILED), NOT_TESTED);
    }
}
