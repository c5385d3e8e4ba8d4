//! [`Recorder`]: the events of a run, in memory and, optionally, in an event log on disk.

use std::fs::{self, File};
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::thread;
use std::time::SystemTime;

use super::event::{Event, RunInfo};
use super::run::Report;
use super::tally::Tally;
use crate::judge::{JudgeEvent, Record, ThrottleEvent};
use crate::stages::FaultCounts;

/// Keeps the events of a run: the start, every throttle and verdict, the finish. Share it
/// behind an `Arc` between the judge ([`JudgeStage::with_recorder`]) and whoever starts and
/// finishes the run.
///
/// Recording takes no lock: each event goes down a channel to the recorder's own thread,
/// which counts it into the report — in memory that does not grow with the run (see
/// [`Omitted`](super::Omitted) for what a long run's report lists) — and, with an event log,
/// appends it to that file as one line of JSON. The log is the full record; `holdoff report`
/// builds every report from it later. Lines are written in batches and flushed whenever the
/// channel runs dry, so the log is whole up to the last event but a moment's worth even if
/// the process is killed.
///
/// [`JudgeStage::with_recorder`]: crate::JudgeStage::with_recorder
///
/// # Examples
///
/// ```
/// use std::time::{Duration, SystemTime};
/// use holdoff_proxy::FaultCounts;
/// use holdoff_proxy::report::{Recorder, Report, RunInfo};
///
/// let recorder = Recorder::new(None)?;
/// let start = SystemTime::UNIX_EPOCH + Duration::from_secs(1_740_830_400);
/// recorder.start(start, RunInfo { source: "preset throttle".into(), ..RunInfo::default() });
/// recorder.finish(start + Duration::from_secs(3), 10, FaultCounts::default(), Some(0));
/// let report = recorder.report();
/// assert!(report.passed());
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Debug)]
pub struct Recorder {
    recording: AtomicBool,
    log_path: Option<PathBuf>,
    /// To the recorder's thread; `None` once dropped.
    sender: Option<mpsc::Sender<Message>>,
    worker: Option<thread::JoinHandle<()>>,
}

/// How big the event log may grow.
///
/// Past `max_bytes`, the log is rotated: `events.jsonl` becomes `events.jsonl.1` (the older
/// `.1` becomes `.2`, and so on, up to `keep` files; older ones are deleted) and a new
/// `events.jsonl` starts with the run's start event, so that each file is a log `holdoff
/// report` can read. The report at the end of the run counts every event either way.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct LogLimit {
    /// The size at which the log rotates; `None`: no limit.
    pub max_bytes: Option<u64>,
    /// How many rotated files are kept.
    pub keep: usize,
}

impl LogLimit {
    /// Rotates past `max_bytes`, keeping `keep` rotated files.
    pub fn rotate(max_bytes: u64, keep: usize) -> LogLimit {
        LogLimit {
            max_bytes: Some(max_bytes),
            keep,
        }
    }
}

#[derive(Debug)]
enum Message {
    Event(Box<Event>),
    Report(mpsc::SyncSender<Report>),
    Flush(mpsc::SyncSender<()>),
}

impl Recorder {
    /// A recorder keeping the report in memory and, with `log`, appending each event to that
    /// file (created, or truncated if it exists) as one JSON line, without a size limit.
    /// Recording is on.
    ///
    /// # Errors
    ///
    /// When the event log cannot be created.
    pub fn new(log: Option<&Path>) -> io::Result<Recorder> {
        Recorder::with_limit(log, LogLimit::default())
    }

    /// As [`Recorder::new`], with the event log rotated as `limit` says.
    ///
    /// # Errors
    ///
    /// When the event log cannot be created, or the recorder's thread cannot be started.
    pub fn with_limit(log: Option<&Path>, limit: LogLimit) -> io::Result<Recorder> {
        let log_file = match log {
            Some(path) => Some(Log {
                path: path.to_path_buf(),
                file: BufWriter::with_capacity(64 * 1024, File::create(path)?),
                written: 0,
                limit,
                start: None,
            }),
            None => None,
        };
        let (sender, receiver) = mpsc::channel();
        let mut worker = Worker {
            tally: Tally::default(),
            log: log_file,
        };
        let handle = thread::Builder::new()
            .name("holdoff-recorder".into())
            .spawn(move || worker.run(&receiver))?;
        Ok(Recorder {
            recording: AtomicBool::new(true),
            log_path: log.map(Path::to_path_buf),
            sender: Some(sender),
            worker: Some(handle),
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
            evicted_windows: 0,
        });
    }

    /// The report of the events recorded so far. Waits for the recorder's thread to count
    /// them (it builds the report from its bounded tally, not from the events).
    pub fn report(&self) -> Report {
        let (reply, report) = mpsc::sync_channel(1);
        if self.send(Message::Report(reply))
            && let Ok(report) = report.recv()
        {
            return report;
        }
        Report::from_events(&[])
    }

    /// Waits until every event recorded so far is written to the event log.
    pub fn flush(&self) {
        let (reply, done) = mpsc::sync_channel(1);
        if self.send(Message::Flush(reply)) {
            let _ = done.recv();
        }
    }

    fn push(&self, event: Event) {
        self.send(Message::Event(Box::new(event)));
    }

    /// Whether the recorder's thread took `message`.
    fn send(&self, message: Message) -> bool {
        self.sender
            .as_ref()
            .is_some_and(|sender| sender.send(message).is_ok())
    }
}

impl Drop for Recorder {
    /// Lets the recorder's thread write what is left and stop.
    fn drop(&mut self) {
        drop(self.sender.take());
        if let Some(worker) = self.worker.take() {
            let _ = worker.join();
        }
    }
}

/// The recorder's thread: the tally and the event log.
struct Worker {
    tally: Tally,
    log: Option<Log>,
}

impl Worker {
    fn run(&mut self, messages: &mpsc::Receiver<Message>) {
        while let Ok(message) = messages.recv() {
            self.handle(message);
            // What else is waiting, then one flush for the batch.
            while let Ok(message) = messages.try_recv() {
                self.handle(message);
            }
            self.flush();
        }
        self.flush();
    }

    fn handle(&mut self, message: Message) {
        match message {
            Message::Event(event) => {
                if let Some(log) = &mut self.log
                    && let Err(err) = log.append(&event)
                {
                    tracing::error!(
                        target: "holdoff::report",
                        path = %log.path.display(),
                        error = %err,
                        "cannot write to the event log; the reports still count every \
                         event, but the log stops here"
                    );
                    self.log = None;
                }
                self.tally.add(&event);
            }
            Message::Report(reply) => {
                let _ = reply.send(self.tally.report());
            }
            Message::Flush(reply) => {
                self.flush();
                let _ = reply.send(());
            }
        }
    }

    fn flush(&mut self) {
        if let Some(log) = &mut self.log
            && let Err(err) = log.file.flush()
        {
            tracing::error!(
                target: "holdoff::report",
                path = %log.path.display(),
                error = %err,
                "cannot write to the event log; the reports still count every event, but \
                 the log stops here"
            );
            self.log = None;
        }
    }
}

/// The event log being written.
struct Log {
    path: PathBuf,
    file: BufWriter<File>,
    /// Bytes in the current file.
    written: u64,
    limit: LogLimit,
    /// The run's start event, as a line: the first line of each rotated file.
    start: Option<Vec<u8>>,
}

impl Log {
    fn append(&mut self, event: &Event) -> io::Result<()> {
        let mut line = serde_json::to_vec(event).map_err(io::Error::other)?;
        line.push(b'\n');
        let is_start = matches!(event, Event::Start { .. });
        if is_start && self.start.is_none() {
            self.start = Some(line.clone());
        }
        if let Some(max) = self.limit.max_bytes
            && self.written > 0
            && self.written + line.len() as u64 > max
        {
            self.rotate()?;
            if !is_start && let Some(start) = self.start.clone() {
                self.write(&start)?;
            }
        }
        self.write(&line)
    }

    fn write(&mut self, line: &[u8]) -> io::Result<()> {
        self.file.write_all(line)?;
        self.written += line.len() as u64;
        Ok(())
    }

    /// `events.jsonl` → `events.jsonl.1` → `.2` …, then a new `events.jsonl`.
    fn rotate(&mut self) -> io::Result<()> {
        self.file.flush()?;
        let numbered = |n: usize| {
            let mut name = self.path.clone().into_os_string();
            name.push(format!(".{n}"));
            PathBuf::from(name)
        };
        if self.limit.keep == 0 {
            fs::remove_file(&self.path)?;
        } else {
            let _ = fs::remove_file(numbered(self.limit.keep));
            for n in (1..self.limit.keep).rev() {
                let from = numbered(n);
                if from.exists() {
                    fs::rename(&from, numbered(n + 1))?;
                }
            }
            fs::rename(&self.path, numbered(1))?;
        }
        self.file = BufWriter::with_capacity(64 * 1024, File::create(&self.path)?);
        self.written = 0;
        Ok(())
    }
}

impl Record for Recorder {
    fn is_recording(&self) -> bool {
        Recorder::is_recording(self)
    }

    fn throttle(&self, event: ThrottleEvent) {
        self.record(Event::from(event));
    }

    fn retry(&self, event: JudgeEvent) {
        self.record(Event::from(event));
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
            idempotency_key: false,
            method: "GET".into(),
            url: "http://api.example/items".into(),
            throttled_at: t(0),
            permitted_at: Some(t(1000)),
            retried_at: t(ms),
            early_by_ms: None,
            late_by_ms: Some(ms as f64 - 1000.0),
            throttled_client: None,
        }
    }

    mod record {
        use super::*;

        #[test]
        fn skips_throttles_and_verdicts_while_recording_is_off() {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("events.jsonl");
            let recorder = Recorder::new(Some(&path)).unwrap();
            recorder.start(t(0), RunInfo::default());
            recorder.set_recording(false);
            assert!(!recorder.is_recording());
            recorder.record(throttle(0));
            recorder.record(retry(1500));
            recorder.set_recording(true);
            recorder.record(throttle(2000));
            recorder.finish(t(3000), 3, FaultCounts::default(), Some(0));
            recorder.flush();
            let events = Report::read_log(&path).unwrap();
            assert_eq!(events.len(), 3, "{events:?}");
            assert_eq!(events[1], throttle(2000));
            let report = recorder.report();
            assert_eq!((report.throttled(), report.compliant()), (1, 0));
        }

        #[test]
        fn appends_each_event_to_the_log_as_it_comes() {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("events.jsonl");
            std::fs::write(&path, "stale\n").unwrap();

            let recorder = Recorder::new(Some(&path)).unwrap();
            assert_eq!(recorder.log_path(), Some(path.as_path()));
            recorder.start(t(0), RunInfo::default());
            recorder.record(throttle(0));
            // Readable before the recorder is finished or dropped.
            recorder.flush();
            let events = Report::read_log(&path).unwrap();
            assert_eq!(events.len(), 2);
            assert_eq!(events[1], throttle(0));
            recorder.record(retry(1500));
            recorder.flush();
            assert_eq!(Report::read_log(&path).unwrap().len(), 3);
        }

        #[test]
        fn writes_what_is_left_when_dropped() {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("events.jsonl");
            let recorder = Recorder::new(Some(&path)).unwrap();
            recorder.start(t(0), RunInfo::default());
            for i in 0..1000 {
                recorder.record(throttle(i * 10));
            }
            drop(recorder);
            assert_eq!(Report::read_log(&path).unwrap().len(), 1001);
        }

        #[test]
        fn rotates_the_log_past_its_limit_and_each_file_has_the_start() {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("events.jsonl");
            let line = serde_json::to_vec(&throttle(0)).unwrap().len() as u64 + 1;
            let recorder =
                Recorder::with_limit(Some(&path), LogLimit::rotate(line * 10, 2)).unwrap();
            recorder.start(t(0), RunInfo::default());
            for i in 0..50 {
                recorder.record(throttle(i * 10));
            }
            recorder.finish(t(1000), 50, FaultCounts::default(), Some(0));
            let report = recorder.report();
            drop(recorder);
            // The report counts every event; the files hold the last ones.
            assert_eq!(report.throttled(), 50);
            let rotated = |n: usize| dir.path().join(format!("events.jsonl.{n}"));
            assert!(rotated(1).exists() && rotated(2).exists());
            assert!(!rotated(3).exists(), "keeps only two rotated files");
            for file in [path.clone(), rotated(1), rotated(2)] {
                let file: std::path::PathBuf = file;
                let events = Report::read_log(&file).unwrap();
                assert!(
                    matches!(events[0], Event::Start { .. }),
                    "{} starts with the start event",
                    file.display()
                );
                let size = std::fs::metadata(&file).unwrap().len();
                assert!(size <= line * 11, "{} is {size} bytes", file.display());
            }
            let last = Report::read_log(&path).unwrap();
            assert!(matches!(last.last(), Some(Event::Finish { .. })));
        }

        #[test]
        fn fails_when_the_log_cannot_be_created() {
            let missing = std::env::temp_dir().join("holdoff-no-such-dir/x/events.jsonl");
            assert!(Recorder::new(Some(&missing)).is_err());
        }
    }
}
