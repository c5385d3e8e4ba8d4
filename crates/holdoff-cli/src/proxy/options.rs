//! What `holdoff proxy` and `holdoff run` share on their command lines ([`Options`]), with
//! the parsers of their values and the part of the config they make.

use std::path::{Path, PathBuf};
use std::time::Duration;

use holdoff_proxy::fault::{Rate, RetryAfterForm};
use holdoff_proxy::judge::KeyMode;
use holdoff_proxy::{ClientIdMode, ConfigError, ProxyConfig, WatchPattern};

use super::dev_proxy_options::DevProxyOptions;
use crate::report::ReportArgs;
use crate::{duration, size};

/// What `holdoff proxy` and `holdoff run` share: what is watched, the faults, the judge, the
/// reports and the event log, the logs, the timeouts. The fields are in the order of use, each
/// under its help heading: clap lists the headings in the order they first appear.
#[derive(Debug, clap::Args)]
pub(crate) struct Options {
    /// A URL pattern to watch (and to intercept when it is HTTPS): `*` matches anything, a
    /// leading `!` excludes. Repeat for more.
    ///
    /// The first match wins. Without any (here or in the config), `holdoff proxy` intercepts
    /// nothing (in reverse mode: watches everything) and `holdoff run` watches everything.
    #[arg(
        help_heading = "What to watch",
        short,
        long,
        value_name = "PATTERN",
        value_parser = parse_pattern,
    )]
    pub(super) urls_to_watch: Vec<WatchPattern>,

    /// Set NAME=VALUE in the environment of `holdoff run`'s command (Dev Proxy's --env).
    /// Repeat for more.
    #[arg(
        help_heading = "What to watch",
        short,
        long = "env",
        value_name = "NAME=VALUE",
        value_parser = parse_env,
    )]
    pub(crate) env: Vec<(String, String)>,

    /// Handle only the traffic of these processes and those they start (Dev Proxy's
    /// --watch-pids; Linux, loopback clients): other clients pass through untouched, neither
    /// intercepted nor judged.
    #[arg(
        help_heading = "What to watch",
        hide_short_help = true,
        long,
        value_name = "PID",
        num_args = 1..,
    )]
    pub(super) watch_pids: Vec<u32>,

    /// Handle only the traffic of processes with these names (their command name, or their
    /// executable's file name) and those they start; as --watch-pids.
    #[arg(
        help_heading = "What to watch",
        hide_short_help = true,
        long,
        value_name = "NAME",
        num_args = 1..,
    )]
    pub(super) watch_process_names: Vec<String>,

    /// The faults to inject, from a holdoff config file (JSON with comments, or YAML), or a Dev
    /// Proxy one. Default: holdoff.json here, else devproxyrc.json, else the `throttle` preset.
    ///
    /// A Dev Proxy file is imported as --devproxy-config does. The files looked for, in order:
    /// holdoff.json, holdoff.jsonc, holdoff.yaml or holdoff.yml in the current directory, else Dev
    /// Proxy's devproxyrc.jsonc, .json, .yaml or .yml there or in .devproxy/.
    ///
    /// `~dataFolder` and `~appFolder` stand for Dev Proxy's folders, as in Dev Proxy, and a
    /// leading `~` for the home folder, quoted or not.
    #[arg(
        help_heading = "Faults",
        short,
        long,
        value_name = "FILE",
        group = "faults",
        alias = "config-file",
        value_parser = parse_config_path,
    )]
    pub(super) config: Option<PathBuf>,

    /// A built-in preset instead of a config file: openai, anthropic, github, graph, stripe
    /// and more.
    ///
    /// `holdoff config preset` lists them, `holdoff config preset NAME` prints one.
    #[arg(help_heading = "Faults", long, value_name = "NAME", group = "faults")]
    pub(super) preset: Option<String>,

    /// Read Microsoft Dev Proxy's config (devproxyrc.json, with its errors and mocks files)
    /// instead; anything holdoff does differently is explained at start.
    #[arg(
        help_heading = "Faults",
        hide_short_help = true,
        long,
        value_name = "FILE",
        group = "faults",
        value_parser = parse_config_path,
    )]
    pub(super) devproxy_config: Option<PathBuf>,

    /// Percent of matching requests that get an error response, 0–100, for every error rule.
    ///
    /// 0 never, 100 always.
    #[arg(help_heading = "Faults", short, long, value_name = "PERCENT", value_parser = parse_rate)]
    pub(super) failure_rate: Option<Rate>,

    /// The seed of every random choice the faults make: the same seed and the same requests
    /// give the same faults.
    ///
    /// Default: a fresh one, which the reports' reproduce line and the summary give.
    #[arg(help_heading = "Faults", long, value_name = "N")]
    pub(super) seed: Option<u64>,

    /// How a `@dynamic` Retry-After is written: delay (seconds), http-date (with a matching
    /// Date header) or mixed. Default: as the config says, else delay.
    #[arg(
        help_heading = "Faults",
        hide_short_help = true,
        long,
        value_name = "FORM",
        value_enum
    )]
    pub(super) retry_after_form: Option<FormArg>,

    /// Forward everything untouched: no faults and no judge (for comparing against other
    /// proxies, or finding out whether holdoff is what breaks a client).
    #[arg(
        help_heading = "Faults",
        hide_short_help = true,
        long,
        conflicts_with_all = ["faults", "failure_rate", "seed", "retry_after_form", "judge_key", "judge_penalty", "judge_min_backoff", "judge_no_backoff", "judge_max_windows"],
    )]
    pub(super) pass_through: bool,

    /// What a throttle's window is keyed by: client-method-url (the default), method-url, url,
    /// host, workload or header:NAME.
    ///
    /// client-method-url judges each client on its own; host is Dev Proxy's one wait per host,
    /// workload its one wait per Microsoft Graph workload (/v1.0/users/…).
    #[arg(help_heading = "Judging", long, value_name = "MODE")]
    pub(super) judge_key: Option<KeyMode>,

    /// Who a request comes from when it does not name itself: auto (its process, else its
    /// address) or peer (its address).
    ///
    /// A client names itself with proxy credentials or an X-Holdoff-Client header. auto finds
    /// the process at the other end of a loopback connection where the system says which
    /// (Linux), else takes the peer address.
    #[arg(
        help_heading = "Judging",
        long,
        value_name = "MODE",
        value_enum,
        default_value_t = ClientIdArg::Auto,
    )]
    pub(super) client_id: ClientIdArg,

    /// What a retry sooner than --judge-min-backoff after a 429 or 503 with no hint at all
    /// does to the run: warn (the default: RFC 9110 sets no wait without a hint), or fail it
    #[arg(
        help_heading = "Judging",
        hide_short_help = true,
        long,
        value_name = "WHAT",
        value_enum,
        default_value_t = NoBackoffArg::Warn,
    )]
    pub(super) judge_no_backoff: NoBackoffArg,

    /// How long a client must wait after a throttle whose Retry-After was malformed (a sooner
    /// retry fails the run: the hint was read as zero) or missing (a sooner retry is reported
    /// as a warning)
    #[arg(
        help_heading = "Judging",
        hide_short_help = true,
        long,
        value_name = "DURATION",
        default_value = "100ms",
        value_parser = duration::parse,
    )]
    pub(super) judge_min_backoff: Duration,

    /// What a premature retry does to its window: none (the default), or sliding (the full
    /// wait starts over from the premature request)
    #[arg(
        help_heading = "Judging",
        hide_short_help = true,
        long,
        value_name = "PENALTY",
        value_enum
    )]
    pub(super) judge_penalty: Option<PenaltyArg>,

    /// The most judge windows open at once: past it, opening one drops the oldest, and the
    /// reports count them as not judged. Bounds the memory a flood of long hints on distinct
    /// URLs can take (85 to 175 bytes a window).
    #[arg(
        help_heading = "Judging",
        hide_short_help = true,
        long,
        value_name = "N",
        default_value_t = holdoff_proxy::judge::DEFAULT_MAX_WINDOWS,
        value_parser = parse_max_windows,
    )]
    pub(crate) judge_max_windows: usize,

    /// The reports to write when the run ends.
    #[command(flatten, next_help_heading = "Reports")]
    pub(crate) reports: ReportArgs,

    /// Keep every event in FILE as JSON lines while the proxy runs (`holdoff report FILE`
    /// turns it into reports).
    ///
    /// The events are the start, each verdict and the end.
    #[arg(help_heading = "Reports", long, value_name = "FILE")]
    pub(super) events: Option<PathBuf>,

    /// Rotate the event log when it reaches SIZE (e.g. 512MiB): FILE becomes FILE.1, the
    /// older FILE.1 becomes FILE.2, up to --events-keep files. The reports at the end still
    /// count every event. Without it the log grows as long as the proxy runs.
    #[arg(
        help_heading = "Reports",
        hide_short_help = true,
        long,
        value_name = "SIZE",
        value_parser = size::parse,
        requires = "events",
    )]
    pub(super) events_max_size: Option<u64>,

    /// How many rotated event logs --events-max-size keeps (0: none, only the current one).
    #[arg(
        help_heading = "Reports",
        hide_short_help = true,
        long,
        value_name = "N",
        default_value_t = 1,
        requires = "events_max_size"
    )]
    pub(super) events_keep: usize,

    /// The log level: error, warn, info, debug, trace or off (or Dev Proxy's names), or a
    /// filter such as `info,holdoff::request=warn`.
    ///
    /// Dev Proxy's names are information, warning, critical and none, in any case. Notes on the
    /// config are shown at every level but off. Default: the Dev Proxy file's logLevel, else
    /// RUST_LOG, else info (`holdoff run`: warnings only, unless -v).
    #[arg(help_heading = "Logs", long, value_name = "LEVEL")]
    pub(super) log_level: Option<String>,

    /// Write the log to FILE (created or truncated) instead of stderr.
    ///
    /// With --output text the summary at the end still goes to stderr.
    #[arg(help_heading = "Logs", long, value_name = "FILE")]
    pub(super) log_file: Option<PathBuf>,

    /// The log format: text for people, json for one JSON object per line.
    #[arg(
        help_heading = "Logs",
        hide_short_help = true,
        long,
        value_name = "FORMAT",
        value_enum,
        default_value_t = Output::Text,
    )]
    pub(super) output: Output,

    /// A PEM file of root certificates to trust for upstream TLS, besides the system's.
    /// Repeat for more.
    ///
    /// E.g. a test server's own CA.
    #[arg(help_heading = "Network and TLS", long, value_name = "PEM")]
    pub(super) upstream_ca: Vec<PathBuf>,

    /// How long an upstream may make no progress before the client gets 504: to connect, to
    /// take the next piece of the request body, to send its response head once the request is
    /// sent, or (then the response is cut) the next piece of its response body.
    #[arg(
        help_heading = "Network and TLS",
        hide_short_help = true,
        long,
        value_name = "DURATION",
        default_value = "30s",
        value_parser = duration::parse,
    )]
    pub(super) upstream_timeout: Duration,

    /// How long a client connection may stay idle before it is closed.
    #[arg(
        help_heading = "Network and TLS",
        hide_short_help = true,
        long,
        value_name = "DURATION",
        default_value = "60s",
        value_parser = duration::parse,
    )]
    pub(super) idle_timeout: Duration,

    /// How long a write to a client may make no progress (the client reads nothing of its
    /// response) before the connection is closed.
    #[arg(
        help_heading = "Network and TLS",
        hide_short_help = true,
        long,
        value_name = "DURATION",
        default_value = "60s",
        value_parser = duration::parse,
    )]
    pub(super) send_timeout: Duration,

    /// On shutdown, how long requests in flight may take to finish before they are cut.
    #[arg(
        help_heading = "Network and TLS",
        hide_short_help = true,
        long,
        value_name = "DURATION",
        default_value = "5s",
        value_parser = duration::parse,
    )]
    pub(super) grace: Duration,

    /// At most this many connections from one client address at once; more are refused
    /// (default: 2500, a quarter of all; every client of `holdoff run` is the one loopback
    /// address)
    #[arg(
        help_heading = "Network and TLS",
        hide_short_help = true,
        long,
        value_name = "N"
    )]
    pub(super) max_connections_per_peer: Option<usize>,

    /// Threads serving connections, each an event loop keeping a connection and its requests
    /// together (default: one per core); 0 serves them on the shared runtime
    #[arg(
        help_heading = "Network and TLS",
        hide_short_help = true,
        long,
        value_name = "N"
    )]
    pub(super) threads: Option<usize>,

    /// Serve the control API on this loopback port (0 picks one; the log says which):
    /// /status, /windows, /verdicts, /recording/start|stop, /ca.pem and /metrics, and Dev Proxy's
    /// API paths (/proxy…); --api-port is Dev Proxy's name for it.
    #[arg(
        help_heading = "Control API",
        hide_short_help = true,
        long,
        value_name = "PORT",
        visible_alias = "api-port"
    )]
    pub(crate) control_port: Option<u16>,

    /// Serve Prometheus metrics (/metrics) on this loopback port (0 picks one).
    #[arg(
        help_heading = "Control API",
        hide_short_help = true,
        long,
        value_name = "PORT"
    )]
    pub(crate) metrics_port: Option<u16>,

    #[command(flatten, next_help_heading = "Dev Proxy compatibility")]
    pub(crate) dev_proxy: DevProxyOptions,
}

/// `NAME=VALUE`, split at the first `=`.
fn parse_env(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((name, value)) if !name.is_empty() => Ok((name.to_owned(), value.to_owned())),
        _ => Err("expected NAME=VALUE, with a non-empty name".to_owned()),
    }
}

/// How a `@dynamic` Retry-After is written.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum FormArg {
    /// delay-seconds: `Retry-After: 5`.
    Delay,
    /// An IMF-fixdate, with a matching Date header.
    HttpDate,
    /// Either, drawn per response.
    Mixed,
}

impl From<FormArg> for RetryAfterForm {
    fn from(form: FormArg) -> RetryAfterForm {
        match form {
            FormArg::Delay => RetryAfterForm::Delay,
            FormArg::HttpDate => RetryAfterForm::HttpDate,
            FormArg::Mixed => RetryAfterForm::Mixed,
        }
    }
}

/// A config file's path with Dev Proxy's tokens (`~dataFolder`, `~appFolder`) and a leading `~`
/// expanded: the guidance Dev Proxy's users follow quotes such paths.
///
/// A file missing from a sample's folder in Dev Proxy's data folder is one `config get` has
/// not downloaded yet: the error says so.
fn parse_config_path(s: &str) -> Result<PathBuf, String> {
    let path = holdoff_config::devproxy::expand_path(s)?;
    let sample = holdoff_config::devproxy::data_folder()
        .and_then(|data| {
            path.strip_prefix(data.join("configs"))
                .ok()
                .map(Path::to_owned)
        })
        .and_then(|inside| {
            inside
                .iter()
                .next()
                .map(|name| name.to_string_lossy().into_owned())
        });
    match sample {
        Some(name) if !path.exists() => Err(format!(
            "{} does not exist: `holdoff config get {name}` downloads the sample `{name}` \
             from Dev Proxy's gallery into it",
            path.display()
        )),
        _ => Ok(path),
    }
}

fn parse_max_windows(s: &str) -> Result<usize, String> {
    match s.parse::<usize>() {
        Ok(n) if n > 0 => Ok(n),
        _ => Err("expected a whole number of windows, at least 1".to_owned()),
    }
}

fn parse_rate(s: &str) -> Result<Rate, String> {
    s.trim_end_matches('%')
        .parse::<f64>()
        .ok()
        .and_then(Rate::percent)
        .ok_or_else(|| "expected a percentage from 0 to 100".to_owned())
}

/// What a premature retry does to its window.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum PenaltyArg {
    /// The window keeps its permitted time.
    None,
    /// The full wait starts over from the premature request.
    Sliding,
}

/// What a retry without backoff after a hint-less throttle does to the run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum NoBackoffArg {
    /// A warning in the summary and the reports.
    Warn,
    /// A violation, like a premature retry: the run fails.
    Fail,
}

/// Who a request that does not name its client comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum ClientIdArg {
    /// Its process, when it can be found; else its peer address.
    Auto,
    /// Its peer address.
    Peer,
}

impl From<ClientIdArg> for ClientIdMode {
    fn from(arg: ClientIdArg) -> ClientIdMode {
        match arg {
            ClientIdArg::Auto => ClientIdMode::Auto,
            ClientIdArg::Peer => ClientIdMode::Peer,
        }
    }
}

/// The log format.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Output {
    /// One line per event, for people.
    Text,
    /// One JSON object per line.
    Json,
}

fn parse_pattern(s: &str) -> Result<WatchPattern, String> {
    s.parse().map_err(|err| reason(&err))
}

/// What is wrong with a value, without repeating the value (clap shows it).
pub(super) fn reason(err: &ConfigError) -> String {
    match err {
        ConfigError::Upstream { reason, .. } | ConfigError::WatchPattern { reason, .. } => {
            (*reason).to_owned()
        }
        other => other.to_string(),
    }
}

impl Options {
    /// The proxy's settings these options make; the caller sets where it listens and its CA.
    pub(crate) fn config(&self) -> ProxyConfig {
        let mut config = ProxyConfig::default();
        config.urls_to_watch = self.urls_to_watch.clone();
        config.upstream_ca = self.upstream_ca.clone();
        config.grace = self.grace;
        config.upstream_timeout = self.upstream_timeout;
        config.idle_timeout = self.idle_timeout;
        config.send_timeout = self.send_timeout;
        config.max_connections_per_peer = self.max_connections_per_peer;
        config.connection_threads = self
            .threads
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, usize::from));
        config.client_id = self.client_id.into();
        config
    }
}
