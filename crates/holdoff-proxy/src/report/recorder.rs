//! [`Recorder`]: the events of a run, in memory and, optionally, in an event log on disk.

use std::fs::File;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::SystemTime;

use super::{Event, Report, RunInfo};
use crate::fault::FaultCounts;

/// Keeps the events of a run: the start, every throttle and verdict, the finish. Share it
/// behind an `Arc` between the judge ([`JudgeStage::with_recorder`]) and whoever starts and
/// finishes the run.
///
/// With an event log, each event is also appended to that file as one line of JSON, written
/// with one system call as it is recorded — so the log is whole up to the last event even if
/// the process is killed — and `holdoff report` can build every report from it later.
///
/// [`JudgeStage::with_recorder`]: crate::judge::JudgeStage::with_recorder
///
/// # Examples
///
/// ```
/// use std::time::{Duration, SystemTime};
/// use holdoff_proxy::fault::FaultCounts;
/// use holdoff_proxy::report::{Recorder, Report, RunInfo};
///
/// let recorder = Recorder::new(None)?;
/// let start = SystemTime::UNIX_EPOCH + Duration::from_secs(1_740_830_400);
/// recorder.start(start, RunInfo { source: "preset throttle".into(), ..RunInfo::default() });
/// recorder.finish(start + Duration::from_secs(3), 10, FaultCounts::default(), Some(0));
/// let report = Report::from_events(&recorder.events());
/// assert!(report.passed());
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Debug)]
pub struct Recorder {
    recording: AtomicBool,
    log_path: Option<PathBuf>,
    state: Mutex<State>,
}

#[derive(Debug)]
struct State {
    events: Vec<Event>,
    /// The event log, until writing to it fails.
    log: Option<File>,
}

impl Recorder {
    /// A recorder keeping events in memory and, with `log`, appending each to that file
    /// (created, or truncated if it exists) as one JSON line. Recording is on.
    ///
    /// # Errors
    ///
    /// When the event log cannot be created.
    pub fn new(log: Option<&Path>) -> io::Result<Recorder> {
        let file = log.map(File::create).transpose()?;
        Ok(Recorder {
            recording: AtomicBool::new(true),
            log_path: log.map(Path::to_path_buf),
            state: Mutex::new(State {
                events: Vec::new(),
                log: file,
            }),
        })
    }

    /// The event log's path, if there is one.
    pub fn log_path(&self) -> Option<&Path> {
        self.log_path.as_deref()
    }

    /// Records the start of the run (the first event).
    pub fn start(&self, at: SystemTime, info: RunInfo) {
        self.push(Event::Start {
            at,
            seed: info.seed,
            source: info.source,
            command: info.command,
            proxy_url: info.proxy_url,
            judge_key: info.judge_key,
            argv: info.argv,
            allow_no_traffic: info.allow_no_traffic,
            fail_on_no_backoff: info.fail_on_no_backoff,
        });
    }

    /// Turns the recording of throttles and verdicts on or off (the start and the finish are
    /// always recorded). The judge keeps judging either way.
    pub fn set_recording(&self, on: bool) {
        self.recording.store(on, Ordering::Relaxed);
    }

    /// Whether throttles and verdicts are being recorded.
    pub fn is_recording(&self) -> bool {
        self.recording.load(Ordering::Relaxed)
    }

    /// Records `event`; a throttle or a retry only while recording is on.
    pub fn record(&self, event: Event) {
        if event.is_judged() && !self.is_recording() {
            return;
        }
        self.push(event);
    }

    /// Records the end of the run (the last event): how many requests the proxy answered,
    /// the faults it injected, and the command's exit status, if a command ran and exited.
    pub fn finish(
        &self,
        at: SystemTime,
        requests: u64,
        faults: FaultCounts,
        exit_code: Option<i32>,
    ) {
        self.push(Event::Finish {
            at,
            requests,
            faults,
            exit_code,
            interception_failures: 0,
        });
    }

    /// Every event so far, in the order recorded.
    pub fn events(&self) -> Vec<Event> {
        self.state().events.clone()
    }

    /// The report of the events so far (without copying them).
    pub fn report(&self) -> Report {
        Report::from_events(&self.state().events)
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn push(&self, event: Event) {
        // The line is made before taking the lock; the lock keeps the log in the same order
        // as the events in memory.
        let line = self.log_path.as_ref().and_then(|_| {
            let mut line = serde_json::to_vec(&event).ok()?;
            line.push(b'\n');
            Some(line)
        });
        let mut state = self.state();
        if let (Some(file), Some(line)) = (state.log.as_mut(), line) {
            // An unbuffered file: one write per event, in the kernel's hands once it returns.
            if let Err(err) = file.write_all(&line) {
                tracing::error!(
                    target: "holdoff::report",
                    path = %self.log_path.as_deref().unwrap_or(Path::new("")).display(),
                    error = %err,
                    "cannot write to the event log; events are kept in memory only from now on"
                );
                state.log = None;
            }
        }
        state.events.push(event);
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, UNIX_EPOCH};

    use super::*;
    use crate::judge::Verdict;

    fn t(ms: u64) -> SystemTime {
        UNIX_EPOCH + Duration::from_millis(1_740_830_400_000 + ms)
    }

    fn throttle(ms: u64) -> Event {
        Event::Throttle {
            at: t(ms),
            client: "alice".into(),
            user_agent: None,
            method: "GET".into(),
            url: "http://api.example/items".into(),
            status: 429,
            permitted_at: Some(t(ms + 1000)),
            hint: crate::report::HintKind::Usable,
            header: Some("retry-after".into()),
            value: Some("1".into()),
            reading: None,
        }
    }

    fn retry(ms: u64) -> Event {
        Event::Retry {
            verdict: Verdict::Compliant,
            client: "alice".into(),
            user_agent: None,
            method: "GET".into(),
            url: "http://api.example/items".into(),
            throttled_at: t(0),
            permitted_at: Some(t(1000)),
            retried_at: t(ms),
            early_by_ms: None,
            late_by_ms: Some(ms as f64 - 1000.0),
        }
    }

    mod record {
        use super::*;

        #[test]
        fn skips_throttles_and_verdicts_while_recording_is_off() {
            let recorder = Recorder::new(None).unwrap();
            recorder.start(t(0), RunInfo::default());
            recorder.set_recording(false);
            assert!(!recorder.is_recording());
            recorder.record(throttle(0));
            recorder.record(retry(1500));
            recorder.set_recording(true);
            recorder.record(throttle(2000));
            recorder.finish(t(3000), 3, FaultCounts::default(), Some(0));
            let events = recorder.events();
            assert_eq!(events.len(), 3, "{events:?}");
            assert_eq!(events[1], throttle(2000));
        }

        #[test]
        fn appends_each_event_to_the_log_as_it_comes() {
            let dir = std::env::temp_dir().join(format!("holdoff-recorder-{}", std::process::id()));
            std::fs::create_dir_all(&dir).unwrap();
            let path = dir.join("events.jsonl");
            std::fs::write(&path, "stale\n").unwrap();

            let recorder = Recorder::new(Some(&path)).unwrap();
            assert_eq!(recorder.log_path(), Some(path.as_path()));
            recorder.start(t(0), RunInfo::default());
            recorder.record(throttle(0));
            // Readable before the recorder is finished or dropped.
            let events = Report::read_log(&path).unwrap();
            assert_eq!(events, recorder.events());
            recorder.record(retry(1500));
            assert_eq!(Report::read_log(&path).unwrap().len(), 3);
            std::fs::remove_dir_all(&dir).unwrap();
        }

        #[test]
        fn fails_when_the_log_cannot_be_created() {
            let missing = std::env::temp_dir().join("holdoff-no-such-dir/x/events.jsonl");
            assert!(Recorder::new(Some(&missing)).is_err());
        }
    }
}
