//! Logs for `holdoff proxy` and `holdoff run`: `tracing` events on stderr or in a file, as
//! text or JSON lines.
//!
//! Lines go through a writer thread, so a request never waits for the terminal: each event is
//! formatted into its own buffer, queued, and written out in batches, one system call for
//! many lines under load. The queue is bounded; when it is full, events wait (nothing is
//! dropped).

use std::fs::File;
use std::io::{self, BufWriter, IsTerminal, Write};
use std::path::Path;
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
use std::thread;

use tracing_subscriber::EnvFilter;
use tracing_subscriber::fmt::MakeWriter;

use super::options::Output;

/// Lines queued before events wait for the writer thread.
const QUEUE: usize = 16 * 1024;

/// Flushes every queued line when dropped.
pub(crate) struct Guard {
    queue: SyncSender<Message>,
}

impl Guard {
    /// Returns once every line queued so far is written.
    pub(crate) fn flush(&self) {
        let (done, flushed) = sync_channel(1);
        if self.queue.send(Message::Flush(done)).is_ok() {
            let _ = flushed.recv();
        }
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        self.flush();
    }
}

enum Message {
    Line(Vec<u8>),
    Flush(SyncSender<()>),
}

/// The target of the notes on the configuration (what a Dev Proxy file asked for that holdoff
/// does differently, which file was found): shown at every level but off.
pub(crate) const NOTES: &str = "holdoff::notes";

/// The target of the Redis client's own log lines (the `redis` crate's, through `log`): it
/// warns at every failed attempt to reach a node, hundreds a second while a cluster's primary
/// is down. The shared state's circuit breaker says what matters instead, once each way.
const REDIS_CLIENT: &str = "redis";

/// What `--log-level` (or a Dev Proxy file's `logLevel`, or `RUST_LOG`) asks for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Level {
    /// As given, for messages.
    given: String,
    /// The `EnvFilter` directives it means.
    filter: String,
    /// The level the notes on the configuration are shown at, unless the filter is off.
    notes: &'static str,
}

impl Level {
    /// A level by holdoff's name or Dev Proxy's (`trace`, `debug`, `information`, `warning`,
    /// `error`, `critical`, `none`), in any case; anything else is kept as an `EnvFilter`
    /// directive (`info,holdoff::request=warn`). Dev Proxy's names matter: `EnvFilter` would
    /// read `information` as a target, and so silence every other line.
    pub(crate) fn parse(given: &str) -> Level {
        let filter = match given.trim().to_ascii_lowercase().as_str() {
            "trace" => "trace",
            "debug" => "debug",
            "info" | "information" => "info",
            "warn" | "warning" => "warn",
            "error" | "critical" => "error",
            "off" | "none" => "off",
            _ => given,
        };
        Level {
            given: given.to_owned(),
            filter: filter.to_owned(),
            notes: "info",
        }
    }

    /// Warnings only, the notes on the configuration that are warnings included: `holdoff
    /// run`'s default, quiet as a test runner is, since the report says what the proxy did.
    pub(crate) fn quiet() -> Level {
        Level {
            given: "warn".to_owned(),
            filter: "warn".to_owned(),
            notes: "warn",
        }
    }

    /// Nothing is to be logged.
    pub(crate) fn is_off(&self) -> bool {
        self.filter == "off"
    }

    /// The filter: the level's, with the notes shown unless it is off, and the Redis client's
    /// own lines off unless the level names them.
    fn env_filter(&self) -> Result<EnvFilter, String> {
        let directives = match self.is_off() {
            true => self.filter.clone(),
            false if self.filter.split(',').any(|d| d.starts_with(REDIS_CLIENT)) => {
                format!("{},{NOTES}={}", self.filter, self.notes)
            }
            false => format!("{},{NOTES}={},{REDIS_CLIENT}=off", self.filter, self.notes),
        };
        EnvFilter::try_new(&directives).map_err(|err| {
            format!(
                "invalid --log-level `{}`: {err} (use error, warn, info, debug, trace or off, \
                 or Dev Proxy's information, warning, critical or none)",
                self.given
            )
        })
    }
}

/// Installs the global subscriber at `level`; the lines go to `file` (created or truncated) if
/// given, else to stderr, in colour when that is a terminal and `colour_allowed`.
///
/// # Errors
///
/// A message for the user when `level` is not a valid filter, `file` cannot be created, or
/// logging cannot be set up.
pub(super) fn init(
    level: &Level,
    output: Output,
    file: Option<&Path>,
    colour_allowed: bool,
) -> Result<Guard, String> {
    let filter = level.env_filter()?;
    let sink: Box<dyn Write + Send> = match file {
        Some(path) => Box::new(File::create(path).map_err(|err| {
            format!(
                "cannot write the log file {}: {err}; check that its directory exists and is \
                 writable",
                path.display()
            )
        })?),
        None => Box::new(io::stderr()),
    };
    let colour = colour_allowed && file.is_none() && io::stderr().is_terminal();
    let (queue, lines) = sync_channel(QUEUE);
    thread::Builder::new()
        .name("holdoff-log".to_owned())
        .spawn(move || write_lines(&lines, sink))
        .map_err(|err| format!("cannot start the log writer: {err}"))?;
    let writer = Queue(queue.clone());
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(writer);
    let installed = match output {
        Output::Text => builder.with_target(false).with_ansi(colour).try_init(),
        Output::Json => builder
            .json()
            .flatten_event(true)
            .with_current_span(false)
            .with_span_list(false)
            .try_init(),
    };
    installed.map_err(|err| format!("cannot set up logging: {err}"))?;
    Ok(Guard { queue })
}

/// The writer thread: writes lines as they come, flushing whenever the queue runs dry.
fn write_lines(lines: &Receiver<Message>, sink: Box<dyn Write + Send>) {
    let mut out = BufWriter::with_capacity(64 * 1024, sink);
    while let Ok(first) = lines.recv() {
        let mut next = Some(first);
        while let Some(message) = next {
            match message {
                // Nothing to do if stderr (or the disk) is gone.
                Message::Line(line) => {
                    let _ = out.write_all(&line);
                }
                Message::Flush(done) => {
                    let _ = out.flush();
                    let _ = done.send(());
                }
            }
            next = lines.try_recv().ok();
        }
        let _ = out.flush();
    }
}

/// Makes one [`Line`] per event.
struct Queue(SyncSender<Message>);

impl<'a> MakeWriter<'a> for Queue {
    type Writer = Line<'a>;

    fn make_writer(&'a self) -> Line<'a> {
        Line {
            buf: Vec::new(),
            queue: &self.0,
        }
    }
}

/// One event's text, queued whole when the formatter is done with it.
struct Line<'a> {
    buf: Vec<u8>,
    queue: &'a SyncSender<Message>,
}

impl Write for Line<'_> {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        self.buf.extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Drop for Line<'_> {
    fn drop(&mut self) {
        if !self.buf.is_empty() {
            let _ = self
                .queue
                .send(Message::Line(std::mem::take(&mut self.buf)));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    mod level {
        use super::*;

        #[test]
        fn reads_dev_proxys_names_in_any_case() {
            for (given, filter) in [
                ("trace", "trace"),
                ("Debug", "debug"),
                ("information", "info"),
                ("Information", "info"),
                ("WARNING", "warn"),
                ("warn", "warn"),
                ("Error", "error"),
                ("critical", "error"),
                ("None", "off"),
                ("off", "off"),
                ("info,holdoff::request=warn", "info,holdoff::request=warn"),
            ] {
                assert_eq!(Level::parse(given).filter, filter, "{given}");
            }
            assert!(Level::parse("none").is_off());
            assert!(!Level::parse("error").is_off());
        }

        #[test]
        fn shows_the_notes_at_every_level_but_off() {
            let filter = Level::parse("error").env_filter().unwrap().to_string();
            assert!(filter.contains("holdoff::notes=info"), "{filter}");
            let filter = Level::parse("none").env_filter().unwrap().to_string();
            assert!(!filter.contains("holdoff::notes"), "{filter}");
        }

        #[test]
        fn leaves_the_redis_clients_own_lines_out_unless_it_names_them() {
            let filter = Level::parse("warn").env_filter().unwrap().to_string();
            assert!(filter.contains("redis=off"), "{filter}");
            let filter = Level::parse("warn,redis=debug")
                .env_filter()
                .unwrap()
                .to_string();
            assert!(!filter.contains("redis=off"), "{filter}");
        }

        #[test]
        fn quiet_shows_warnings_and_the_notes_that_are_warnings() {
            let filter = Level::quiet().env_filter().unwrap().to_string();
            assert!(filter.contains("holdoff::notes=warn"), "{filter}");
            assert!(!filter.contains("info"), "{filter}");
            assert!(!Level::quiet().is_off());
        }

        #[test]
        fn says_what_it_takes_when_a_filter_is_invalid() {
            let err = Level::parse("info,=bogus[").env_filter().unwrap_err();
            assert!(err.contains("Dev Proxy's information"), "{err}");
        }
    }
}
