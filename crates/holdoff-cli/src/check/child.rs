//! A scenario's command, run and watched: `holdoff run` with the command in it (or, in
//! reverse mode, the command beside a `holdoff proxy` of its own), stopped at the scenario's
//! time limit, and judged on the event log its proxy wrote.

use std::ffi::OsString;
use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use holdoff::clock::{Clock, TokioClock};
use holdoff_proxy::report::{Event, Report};
use tokio::process::{Child, Command};

use super::scenarios::{MIN_BACKOFF, Scenario, Setup};
use super::verdict::{self, Outcome, Run, Tails};
use crate::failure::Failure;

/// Writes the scenario's config into `dir`, and says where.
pub(super) fn write_config(
    scenario: &Scenario,
    setup: &Setup,
    dir: &Path,
) -> Result<PathBuf, Failure> {
    let path = dir.join(format!("{}.json", scenario.name));
    let text = serde_json::to_string_pretty(&scenario.config(setup)).unwrap_or_default();
    fs::write(&path, text)
        .map_err(|err| Failure::Runtime(format!("failed to write {}: {err}", path.display())))?;
    Ok(path)
}

/// Where a scenario's run keeps its files: in the check's directory, named after the scenario
/// (and copy).
pub(super) struct Files {
    events: PathBuf,
    stdout: PathBuf,
    /// Where holdoff's (and the command's) stderr goes: a run that could not start says why
    /// there.
    stderr: PathBuf,
}

impl Files {
    pub(super) fn new(dir: &Path, name: &str) -> Files {
        let file = |ext: &str| dir.join(format!("{name}.{ext}"));
        Files {
            events: file("events"),
            stdout: file("out"),
            stderr: file("err"),
        }
    }

    /// `path`, created for writing.
    fn create(path: &Path) -> Result<File, Failure> {
        File::create(path)
            .map_err(|err| Failure::Runtime(format!("failed to create {}: {err}", path.display())))
    }
}

/// A scenario's run, started: `holdoff run` with the command in it, or in reverse mode the
/// command with a `holdoff proxy` of its own beside it.
pub(super) struct Spawned {
    child: Child,
    /// Reverse mode's proxy, stopped once the command has ended.
    proxy: Option<Child>,
    files: Files,
}

/// The options every scenario's proxy gets: the scenario's config, the judge as `holdoff
/// check` applies it, no log, the event log.
fn proxy_args(command: &mut Command, config: &Path, events: &Path) {
    command
        .arg("--config")
        .arg(config)
        .args(["--client-id", "peer", "--judge-min-backoff"])
        .arg(format!("{}ms", MIN_BACKOFF.as_millis()))
        .args(["--log-level", "off"])
        .arg("--events")
        .arg(events)
        .stdin(Stdio::null())
        .kill_on_drop(true);
}

/// Starts `holdoff run` with `config` and the command.
pub(super) fn spawn(
    exe: &Path,
    config: &Path,
    files: Files,
    scenario: &str,
    command: &[OsString],
) -> Result<Spawned, Failure> {
    let mut run = crate::orphans::command(exe.as_os_str());
    // `holdoff run` passes its environment on to the command.
    run.arg("run").env(SCENARIO_VARIABLE, scenario);
    proxy_args(&mut run, config, &files.events);
    run.arg("--")
        .args(command)
        .stdout(Files::create(&files.stdout)?)
        .stderr(Files::create(&files.stderr)?);
    let child = run
        .spawn()
        .map_err(|err| Failure::Runtime(format!("failed to run {} run: {err}", exe.display())))?;
    Ok(Spawned {
        child,
        proxy: None,
        files,
    })
}

/// The variable that tells the command which scenario it is in: for a script that must send a
/// POST in `post`, or log where it is.
const SCENARIO_VARIABLE: &str = "HOLDOFF_CHECK_SCENARIO";

/// How long reverse mode's proxy may take to start listening.
const PROXY_START: Duration = Duration::from_secs(10);

/// Reverse mode: starts `holdoff proxy --upstream UPSTREAM` with `config` on a free loopback
/// port, waits for it to listen (its start event names its URL), then the command, with
/// `{url}` in its arguments and `HOLDOFF_CHECK_URL` set to the proxy's URL.
pub(super) async fn spawn_reverse(
    exe: &Path,
    config: &Path,
    files: Files,
    upstream: &str,
    scenario: &str,
    command: &[OsString],
) -> Result<Spawned, Failure> {
    let mut proxy = crate::orphans::command(exe.as_os_str());
    proxy
        .args([
            "proxy",
            "--ip-address",
            "127.0.0.1",
            "--port",
            "0",
            "--upstream",
        ])
        .arg(upstream);
    proxy_args(&mut proxy, config, &files.events);
    proxy
        .stdout(Stdio::null())
        .stderr(Files::create(&files.stderr)?);
    let mut proxy = proxy
        .spawn()
        .map_err(|err| Failure::Runtime(format!("failed to run {} proxy: {err}", exe.display())))?;
    let clock = TokioClock;
    let deadline = clock.now() + PROXY_START;
    let url = loop {
        if let Some(url) = proxy_url(&files.events) {
            break url;
        }
        let stopped = proxy.try_wait().ok().flatten().is_some();
        if stopped || clock.now() >= deadline {
            let _ = proxy.start_kill();
            let said = fs::read_to_string(&files.stderr).unwrap_or_default();
            let said = said.trim();
            return Err(Failure::Runtime(format!(
                "the proxy for --upstream {upstream} did not start{}",
                match said.is_empty() {
                    true => format!(" within {} s", PROXY_START.as_secs()),
                    false => format!(": {}", said.strip_prefix("holdoff: ").unwrap_or(said)),
                }
            )));
        }
        clock.sleep_until(clock.now() + POLL).await;
    };
    let url = url.trim_end_matches('/').to_owned();
    let mut words = command.iter().map(|word| match word.to_str() {
        Some(text) if text.contains("{url}") => OsString::from(text.replace("{url}", &url)),
        _ => word.clone(),
    });
    let program = words.next().unwrap_or_default();
    let child = crate::orphans::command(&program)
        .args(words)
        .env("HOLDOFF_CHECK_URL", &url)
        .env(SCENARIO_VARIABLE, scenario)
        .stdin(Stdio::null())
        .stdout(Files::create(&files.stdout)?)
        .stderr(
            fs::OpenOptions::new()
                .append(true)
                .open(&files.stderr)
                .map_err(|err| {
                    Failure::Runtime(format!("failed to open {}: {err}", files.stderr.display()))
                })?,
        )
        .kill_on_drop(true)
        .spawn();
    let child = match child {
        Ok(child) => child,
        Err(err) => {
            let _ = proxy.start_kill();
            return Err(crate::run::cannot_spawn(&program.to_string_lossy(), &err));
        }
    };
    Ok(Spawned {
        child,
        proxy: Some(proxy),
        files,
    })
}

/// The proxy's URL, from the start event of its event log, once it has been written.
fn proxy_url(events: &Path) -> Option<String> {
    let log = fs::read_to_string(events).ok()?;
    log.lines()
        .filter_map(|line| serde_json::from_str::<Event>(line).ok())
        .find_map(|event| match event {
            Event::Start { proxy_url, .. } => Some(proxy_url),
            _ => None,
        })
}

/// How long a scenario's `holdoff run` stopped at the time limit has to exit before it is
/// killed: longer than the 5 s `holdoff run` gives its command before killing it, so that the
/// run ends on its own and records what it saw.
const STOP_GRACE: Duration = Duration::from_secs(10);

/// How long a command has, at least, to send its first request: starting up is not what is
/// checked, and a busy machine starting a dozen proxies and clients at once is slow at it.
const START_ALLOWANCE: Duration = Duration::from_secs(60);

/// How often a running scenario's event log is read for its throttle.
const POLL: Duration = Duration::from_millis(100);

/// Waits for a scenario's run, stopping it `limit` after its throttle (or, if no throttle
/// comes, [`START_ALLOWANCE`] or `limit` after its start, whichever is longer: a client that
/// sends nothing), and judges its event log: the outcome,
/// and how long the run took. The limit counts from the throttle so that a client slow to
/// start — a JVM, or any client on a machine busy starting every scenario at once — gets the
/// whole of it to show what it does next.
pub(super) async fn finish(
    scenario: Scenario,
    hint: Option<u64>,
    mut spawned: Spawned,
    limit: Duration,
    stop: tokio_util::sync::CancellationToken,
) -> Result<(Outcome, Duration), Failure> {
    let clock = TokioClock;
    let started = clock.now();
    let mut deadline = started + limit.max(START_ALLOWANCE);
    let mut throttled = false;
    let mut watch = ThrottleWatch::default();
    let mut timed_out = false;
    let status = loop {
        tokio::select! {
            status = spawned.child.wait() => break status,
            () = clock.sleep_until(clock.now() + POLL), if !throttled => {
                if watch.throttled(&spawned.files.events) {
                    throttled = true;
                    deadline = clock.now() + limit;
                }
            }
            () = async {
                tokio::select! {
                    () = clock.sleep_until(deadline) => {}
                    () = stop.cancelled() => {}
                }
            } => {
                timed_out = true;
                terminate(&spawned.child);
                let grace = clock.now() + STOP_GRACE;
                tokio::select! {
                    status = spawned.child.wait() => break status,
                    () = clock.sleep_until(grace) => {
                        let _ = spawned.child.start_kill();
                        break spawned.child.wait().await;
                    }
                }
            }
        }
    };
    let elapsed = clock.now().saturating_duration_since(started);
    let status = status.map_err(|err| {
        Failure::Runtime(format!(
            "failed to wait for scenario {}: {err}",
            scenario.name
        ))
    })?;
    if let Some(proxy) = &mut spawned.proxy {
        // Reverse mode: the command is done, so is its proxy (SIGTERM writes its last events).
        terminate(proxy);
        let grace = clock.now() + STOP_GRACE;
        tokio::select! {
            _ = proxy.wait() => {}
            () = clock.sleep_until(grace) => {
                let _ = proxy.start_kill();
                let _ = proxy.wait().await;
            }
        }
    }
    let mut events = Report::read_log(&spawned.files.events).unwrap_or_default();
    if spawned.proxy.is_some() {
        // The proxy ran no command: the command's exit status is the one check waited for.
        for event in &mut events {
            if let Event::Finish { exit_code, .. } = event {
                *exit_code = status.code();
            }
        }
    }
    let own = events.iter().find_map(|event| match event {
        Event::Finish {
            exit_code,
            requests,
            ..
        } => Some((*exit_code, *requests)),
        _ => None,
    });
    let said = || {
        let text = fs::read_to_string(&spawned.files.stderr).unwrap_or_default();
        let text = text.trim();
        let text = text.strip_prefix("holdoff: ").unwrap_or(text);
        match text.is_empty() {
            true => format!(
                "scenario {}: its proxy ended without recording the run, and said nothing \
                 (killed from outside?); run it again alone, with -s {}",
                scenario.name, scenario.name
            ),
            false => format!("scenario {}: {text}", scenario.name),
        }
    };
    match own {
        Some((Some(127), 0)) => return Err(Failure::NotFound(said())),
        Some((Some(126), 0)) => return Err(Failure::CannotExecute(said())),
        // Stopped by a signal as it started: judged on what it recorded, if anything.
        None if stop.is_cancelled() => {}
        // No end recorded: the proxy could not start (stderr says why), or was killed.
        None => return Err(Failure::Runtime(said())),
        _ => {}
    }
    let read = |path: &Path| fs::read_to_string(path).unwrap_or_default();
    let tails = Tails::of(&read(&spawned.files.stdout), &read(&spawned.files.stderr));
    let run = Run {
        events: &events,
        timed_out,
        last_words: tails.last_words(),
    };
    let mut outcome = verdict::judge(scenario.rule, hint, &run);
    outcome.output = tails;
    Ok((outcome, elapsed))
}

/// Watches a run's event log (written as it goes, a JSON object a line) for its first
/// throttle, reading only what was added since the last look: a client that sends many
/// requests no throttle answers (a GET client in `post`) makes the log grow.
#[derive(Default)]
struct ThrottleWatch {
    /// How far the log has been read.
    offset: u64,
    /// The end of what was read, which may be the start of a line the writer has not finished.
    tail: Vec<u8>,
}

impl ThrottleWatch {
    const MARK: &'static [u8] = br#""event":"throttle""#;

    /// Whether the log holds a throttle by now.
    fn throttled(&mut self, events: &Path) -> bool {
        use std::io::{Read, Seek, SeekFrom};
        let Ok(mut file) = File::open(events) else {
            return false;
        };
        let mut added = std::mem::take(&mut self.tail);
        let before = added.len();
        if file.seek(SeekFrom::Start(self.offset)).is_err() || file.read_to_end(&mut added).is_err()
        {
            added.truncate(before);
            self.tail = added;
            return false;
        }
        self.offset += (added.len() - before) as u64;
        if added
            .windows(Self::MARK.len())
            .any(|window| window == Self::MARK)
        {
            return true;
        }
        let keep = added.len().min(Self::MARK.len() - 1);
        self.tail = added.split_off(added.len() - keep);
        false
    }
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

#[cfg(test)]
mod tests {
    use super::ThrottleWatch;
    use std::io::Write;

    #[test]
    fn a_throttle_is_found_when_written_in_pieces_and_only_new_bytes_are_read() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("run.events");
        let mut watch = ThrottleWatch::default();
        assert!(!watch.throttled(&path), "no log yet");
        let mut log = std::fs::File::create(&path).unwrap();
        writeln!(
            log,
            r#"{{"event":"start","at":"2026-12-04T00:00:00.000Z"}}"#
        )
        .unwrap();
        assert!(!watch.throttled(&path));
        // The line cut in the middle of its mark, as a flush of a full buffer can leave it.
        write!(log, r#"{{"event":"thr"#).unwrap();
        assert!(!watch.throttled(&path));
        let read = watch.offset;
        writeln!(log, r#"ottle","status":429}}"#).unwrap();
        assert!(watch.throttled(&path));
        assert!(watch.offset > read);
    }
}
