//! `holdoff run -- COMMAND`: run one command through a proxy of its own, and judge it.
//!
//! The flow: a throwaway CA (its key in memory only), its certificate and the CA bundles in a
//! temporary directory → the proxy, as `holdoff proxy` runs it ([`session`]), on a free
//! loopback port → the command, with the proxy and CA variables set, its signals forwarded →
//! the proxy stopped → the reports → the exit status: 3 if any retry broke its window, else
//! the command's own if it failed, else 4 if no request reached the proxy (unless
//! `--allow-no-traffic`).

use std::ffi::OsString;
use std::fs;
use std::io::{self, Write};
use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::ExitStatus;
use std::sync::Arc;

use holdoff_proxy::CaSource;
use holdoff_proxy::tls::CertificateAuthority;
use tokio::process::{Child, Command};

use crate::exit_codes;
use crate::failure::Failure;
use crate::proxy::{Options, session};
use crate::report;

const AFTER_HELP: &str = "\
It starts a proxy of its own on a free loopback port, with a throwaway CA (never your CA, never
installed anywhere; its key is kept in memory, its certificate written to a temporary directory
removed at the end), runs COMMAND with the variables below set, waits for it, stops the proxy,
writes the reports and exits.

Watched URLs are the -u patterns, else those of the config. Without any, everything is watched:
every request the command sends through the proxy meets the faults and the judge, and HTTPS to
every host is intercepted (the command trusts the throwaway CA through its environment). Narrow
it with -u, e.g. -u 'https://api.example.com/*'. The faults are those of `holdoff proxy`: without
a config, the `throttle` preset answers half the watched requests with 429 (-f 0: none).

The command's environment, besides holdoff's own:
  HTTP_PROXY HTTPS_PROXY ALL_PROXY http_proxy https_proxy all_proxy
                         the proxy's URL, http://127.0.0.1:PORT
  NO_PROXY no_proxy      removed, unless --keep-no-proxy
  SSL_CERT_FILE CURL_CA_BUNDLE REQUESTS_CA_BUNDLE AWS_CA_BUNDLE GIT_SSL_CAINFO CARGO_HTTP_CAINFO
                         a CA bundle: the system's roots and the throwaway CA, so that hosts
                         tunnelled untouched still verify
  NODE_EXTRA_CA_CERTS HOLDOFF_CA_CERT
                         the throwaway CA's certificate alone
  NODE_USE_ENV_PROXY=1   makes the fetch and http of Node.js 24 (and 22.21) use the proxy
  JAVA_TOOL_OPTIONS      appended to: -Dhttp(s).proxyHost/proxyPort naming the proxy, an empty
                         -Dhttp.nonProxyHosts (the JVM bypasses localhost by default), and
                         -Djavax.net.ssl.trustStore, a PKCS #12 trust store of the system's roots
                         and the throwaway CA (the JVM ignores SSL_CERT_FILE)
  HOLDOFF_PROXY_URL      the proxy's URL
  HOLDOFF_CONTROL_URL    the control API's URL, http://127.0.0.1:PORT, with --control-port
Clients that ignore the proxy variables must be pointed at HOLDOFF_PROXY_URL themselves: fetch in
Node.js before 22.21 (undici's EnvHttpProxyAgent as the global dispatcher does it), urllib3
(ProxyManager), and aiohttp unless its session has trust_env=True. Go never proxies localhost or
127.0.0.1 whatever the variables say: call a loopback server by a hostname that resolves to it
(one /etc/hosts names) or its requests are not tested. Ruby's Net::HTTP proxies no host that
resolves to 127.* or ::1, whatever its name. Java's own proxy or trust settings in the program
(a ProxySelector, an SSLContext) override JAVA_TOOL_OPTIONS.

The command's input and output are holdoff's own. The proxy logs only warnings on stderr (or
--log-file) unless -v, --log-level or RUST_LOG asks for more; the summary follows when the command
is done, ending with the command line that repeats the run, its seed included. SIGINT, SIGTERM and
SIGHUP are passed on to the command (Ctrl-C in a terminal reaches it directly); when it exits, the
proxy lets the requests in flight finish within --grace.

Exit status:
  0    the command succeeded and no client retried early (requests reached the proxy, or
       --allow-no-traffic)
  3    a client retried before its Retry-After had passed, or sooner than the minimum backoff
       after a malformed one (read as zero), even if the command succeeded
  4    the command succeeded but no request reached the proxy: nothing was tested (its HTTP
       clients bypassed the proxy; the summary names the usual causes and their fixes); or a
       client's TLS handshake with holdoff failed (it does not trust the throwaway CA; the
       warnings name the host), even with --allow-no-traffic
  N    otherwise the command's own status (128+S when signal S ended it)
  1    the proxy could not start
  2    a usage or config error
  126  the command was found but could not be run (not executable)
  127  the command was not found
The command's own status can be any of these too: the summary, or the JSON report, tells.

Examples:
  holdoff run -- npm test
  holdoff run -u 'https://api.example.com/*' --report-junit holdoff.xml -- pytest -q
  holdoff run --preset github --seed 7 --report-html report.html -- ./sync.sh";

/// Variables that name the proxy.
const PROXY_VARS: [&str; 7] = [
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "ALL_PROXY",
    "http_proxy",
    "https_proxy",
    "all_proxy",
    "HOLDOFF_PROXY_URL",
];

/// Variables that name a CA bundle replacing the system's roots.
const BUNDLE_VARS: [&str; 6] = [
    "SSL_CERT_FILE",
    "CURL_CA_BUNDLE",
    "REQUESTS_CA_BUNDLE",
    "AWS_CA_BUNDLE",
    "GIT_SSL_CAINFO",
    "CARGO_HTTP_CAINFO",
];

/// Variables that name certificates to trust besides the system's roots.
const EXTRA_CA_VARS: [&str; 2] = ["NODE_EXTRA_CA_CERTS", "HOLDOFF_CA_CERT"];

/// The JVM's trust store's password. It guards nothing (the store holds certificates only,
/// no key) but PKCS #12 needs one for its integrity check, and the JVM must be told it.
const TRUST_STORE_PASSWORD: &str = "holdoff";

/// Where Debian, Ubuntu and Alpine keep the system's roots as one PEM file.
const SYSTEM_BUNDLE: &str = "/etc/ssl/certs/ca-certificates.crt";

/// Run a command through a throttling proxy of its own, and fail if it retried too early.
#[derive(Debug, clap::Args)]
#[command(after_help = SHORT_AFTER_HELP, after_long_help = AFTER_HELP)]
pub(crate) struct Args {
    /// The command to run, after `--`, and its arguments.
    #[arg(last = true, required = true, value_name = "COMMAND")]
    command: Vec<OsString>,

    #[command(flatten)]
    options: Options,

    /// Leave NO_PROXY and no_proxy as they are: hosts they name bypass the proxy, unjudged.
    #[arg(long, help_heading = "What to watch", hide_short_help = true)]
    keep_no_proxy: bool,

    /// Exit 0, not 4, when no request reaches the proxy (for a command that legitimately sends
    /// none); the reports still say nothing was tested.
    #[arg(long, help_heading = "Judging")]
    allow_no_traffic: bool,

    /// Log what the proxy does: where it listens, the faults and their seed, each request
    /// (-vv: and the details). Default: warnings only; the summary says what happened.
    // First of its heading: it is what most want of the logs.
    #[arg(
        short,
        long,
        help_heading = "Logs",
        display_order = 0,
        action = clap::ArgAction::Count,
        conflicts_with = "log_level",
    )]
    verbose: u8,
}

/// The end of `holdoff run -h`; `--help` has [`AFTER_HELP`].
const SHORT_AFTER_HELP: &str = "\
Exit status: 3 a client retried early, 4 no request reached the proxy, else the command's own.

Examples:
  holdoff run -- npm test
  holdoff run -u 'https://api.example.com/*' --report-junit holdoff.xml -- pytest -q

--help says more: every option, the environment the command gets, which clients it reaches.";

/// Runs `holdoff run`; it writes nothing on stdout, which is the command's.
pub(crate) fn run(args: Args, argv: Vec<OsString>) -> Result<(), Failure> {
    // Signals first, before the CA and the config take their few hundred ms: from here on a
    // SIGTERM is passed to the command as soon as it starts (so the run is recorded, ended by
    // it), never the end of holdoff with nothing written.
    let runtime = session::runtime()?;
    let mut signals = {
        let _entered = runtime.enter();
        Signals::new()
            .map_err(|err| Failure::Runtime(format!("failed to listen for signals: {err}")))?
    };
    let mut builder = tempfile::Builder::new();
    builder.prefix("holdoff-run-");
    // Only its owner may look inside or write there: the command trusts what it holds.
    #[cfg(unix)]
    builder.permissions(std::os::unix::fs::PermissionsExt::from_mode(0o700));
    let dir = builder.tempdir().map_err(|err| {
        Failure::Runtime(format!(
            "failed to create a temporary directory for the throwaway CA in {}: {err}; point \
             TMPDIR at a writable directory",
            std::env::temp_dir().display()
        ))
    })?;
    let trust = Trust::create(dir.path()).map_err(Failure::Runtime)?;

    let mut config = args.options.config();
    config.listen = SocketAddr::from((Ipv4Addr::LOCALHOST, 0));
    config.ca = CaSource::Provided(Arc::clone(&trust.ca));
    let verbosity = match args.verbose {
        0 => session::Verbosity::Quiet,
        1 => session::Verbosity::Info,
        _ => session::Verbosity::Debug,
    };
    let (mut prepared, logs) = session::prepare(&args.options, config, verbosity)?;
    prepared.reproducible_as(session::reproducible_argv(argv));
    prepared.allow_no_traffic(args.allow_no_traffic);
    // `*` always parses; were it ever not to, nothing would be watched.
    prepared.watch_by_default("*".parse().into_iter().collect());

    let command: Vec<String> = args
        .command
        .iter()
        .map(|arg| arg.to_string_lossy().into_owned())
        .collect();
    let result = runtime.block_on(async {
        let serving = prepared.start(Some(command.clone())).await?;
        let proxy_url = format!("http://{}", serving.local_addr());
        tracing::info!(
            "running `{}` through the proxy {proxy_url}, trusting the throwaway CA {}",
            command.join(" "),
            trust.cert.display()
        );
        let control_url = serving.control_addr().map(|addr| format!("http://{addr}"));
        let spawned = environment(&args, &proxy_url, control_url.as_deref(), &trust).spawn();
        let mut child = match spawned {
            Ok(child) => child,
            Err(err) => {
                let failure = cannot_spawn(&command[0], &err);
                let stopped = serving.stop_when(std::future::ready(())).await;
                stopped.abandon(i32::from(failure.exit_code()));
                return Err(failure);
            }
        };
        // The proxy serves until the command exits.
        let mut waited = None;
        let exited = async {
            let status = signals.forward_until_exit(&mut child).await;
            match &status {
                Ok(status) => tracing::info!(
                    "`{}` exited with status {}; stopping the proxy",
                    command[0],
                    status_code(*status)
                ),
                Err(_) => {
                    // Nothing is left to wait for it: it must not outlive its proxy unseen.
                    let _ = child.start_kill();
                }
            }
            waited = Some(status);
        };
        let stopped = serving.stop_when(exited).await;
        let own = match waited {
            Some(Ok(status)) => status_code(status),
            Some(Err(err)) => {
                let failure =
                    Failure::Runtime(format!("failed to wait for `{}`: {err}", command[0]));
                stopped.abandon(i32::from(failure.exit_code()));
                return Err(failure);
            }
            // The server stops only when the command exits; were it to stop on its own, the
            // command must not outlive its proxy.
            None => {
                let _ = child.start_kill();
                let failure =
                    Failure::Runtime("the proxy stopped before the command exited".to_owned());
                stopped.abandon(i32::from(failure.exit_code()));
                return Err(failure);
            }
        };
        let report = stopped.report(Some(i32::from(own)), &args.options.reports, &logs);
        outcome(report::judged(&report), own)
    });
    // Every log line is out before the process exits, and the certificates are gone.
    drop(runtime);
    drop(logs);
    if let Err(err) = dir.close() {
        let _ = writeln!(
            io::stderr(),
            "holdoff: failed to remove the throwaway CA's temporary directory: {err}"
        );
    }
    result
}

/// The throwaway CA, and the files the command is told to trust.
struct Trust {
    ca: Arc<CertificateAuthority>,
    /// The CA's certificate alone.
    cert: PathBuf,
    /// The system's roots and the CA's certificate.
    bundle: PathBuf,
    /// The same as a PKCS #12 trust store, for the JVM.
    trust_store: PathBuf,
}

impl Trust {
    /// Creates the CA, its key in memory only (a `holdoff run` killed with SIGKILL leaves no
    /// key behind), and writes its certificate and the bundles into `dir`.
    ///
    /// # Errors
    ///
    /// A message for the user when either cannot be made.
    fn create(dir: &Path) -> Result<Trust, String> {
        let ca = CertificateAuthority::throwaway(dir)
            .map_err(|err| format!("failed to create the throwaway CA: {}", chain(&err)))?;
        let cert = CertificateAuthority::cert_file(dir);
        let bundle = dir.join("ca-bundle.pem");
        let mut text = system_roots();
        if !text.is_empty() && !text.ends_with('\n') {
            text.push('\n');
        }
        text.push_str(ca.cert_pem());
        fs::write(&bundle, &text).map_err(|err| {
            format!(
                "failed to write the CA bundle {}: {err}; point TMPDIR at a writable directory",
                bundle.display()
            )
        })?;
        let trust_store = dir.join("truststore.p12");
        let store = trust_store_of(&text)?;
        fs::write(&trust_store, store).map_err(|err| {
            format!(
                "failed to write the JVM's trust store {}: {err}; point TMPDIR at a writable \
                 directory",
                trust_store.display()
            )
        })?;
        Ok(Trust {
            ca: Arc::new(ca),
            cert,
            bundle,
            trust_store,
        })
    }
}

/// A PKCS #12 trust store of every certificate in the PEM `bundle`, each a trusted-certificate
/// entry as `keytool -importcert` writes it (the JVM reads no other kind as a trust anchor). A
/// block that is not a certificate X.509 parsing accepts is left out.
///
/// # Errors
///
/// A message for the user when the store cannot be encoded.
fn trust_store_of(bundle: &str) -> Result<Vec<u8>, String> {
    use p12_keystore::{Certificate, KeyStore, KeyStoreEntry};
    let mut store = KeyStore::new();
    // A bundle with a block it cannot parse still has its other certificates.
    let blocks = pem::parse_many(bundle).unwrap_or_default();
    for (n, block) in blocks
        .iter()
        .filter(|block| block.tag() == "CERTIFICATE")
        .enumerate()
    {
        if let Ok(cert) = Certificate::from_der(block.contents()) {
            store.add_entry(&format!("cert-{n}"), KeyStoreEntry::Certificate(cert));
        }
    }
    store
        .writer(TRUST_STORE_PASSWORD)
        .write()
        .map_err(|err| format!("failed to encode the JVM's trust store: {err}"))
}

/// The system's root certificates as PEM text: the bundle `SSL_CERT_FILE` names if holdoff was
/// given one, else Debian's bundle, else what rustls-native-certs finds (macOS's keychain,
/// Windows' store, other distributions' files). Empty if there are none: the command then
/// trusts the throwaway CA alone, and hosts tunnelled untouched will not verify.
fn system_roots() -> String {
    let inherited = std::env::var_os("SSL_CERT_FILE").map(PathBuf::from);
    for path in inherited
        .iter()
        .map(PathBuf::as_path)
        .chain([Path::new(SYSTEM_BUNDLE)])
    {
        if let Ok(text) = fs::read_to_string(path) {
            return text;
        }
    }
    let found = rustls_native_certs::load_native_certs();
    if found.certs.is_empty() {
        tracing::warn!(
            "found none of the system's root certificates: the command trusts only the \
             throwaway CA, so HTTPS to hosts that are not watched will fail to verify"
        );
    }
    found
        .certs
        .iter()
        .map(|cert| pem("CERTIFICATE", cert))
        .collect()
}

/// `bytes` as a PEM block with `label`, 64 characters a line (RFC 7468).
fn pem(label: &str, bytes: &[u8]) -> String {
    let config = pem::EncodeConfig::new().set_line_ending(pem::LineEnding::LF);
    pem::encode_config(&pem::Pem::new(label, bytes), config)
}

/// The command, with the proxy, control API and CA variables set.
fn environment(args: &Args, proxy_url: &str, control_url: Option<&str>, trust: &Trust) -> Command {
    let mut command = crate::orphans::command(&args.command[0]);
    command.args(&args.command[1..]);
    for var in PROXY_VARS {
        command.env(var, proxy_url);
    }
    if let Some(url) = control_url {
        command.env("HOLDOFF_CONTROL_URL", url);
    }
    if !args.keep_no_proxy {
        command.env_remove("NO_PROXY").env_remove("no_proxy");
    }
    for var in BUNDLE_VARS {
        command.env(var, &trust.bundle);
    }
    for var in EXTRA_CA_VARS {
        command.env(var, &trust.cert);
    }
    command.env("NODE_USE_ENV_PROXY", "1");
    let existing = std::env::var_os("JAVA_TOOL_OPTIONS");
    command.env(
        "JAVA_TOOL_OPTIONS",
        java_tool_options(existing.as_deref(), proxy_url, &trust.trust_store),
    );
    // Last: what the user asked for wins.
    for (name, value) in &args.options.env {
        command.env(name, value);
    }
    command
}

/// `JAVA_TOOL_OPTIONS` for the JVM, which reads neither the proxy variables nor
/// `SSL_CERT_FILE`: `existing` (the user's own options, kept first) and the proxy, for HTTP and
/// HTTPS, with no host exempt (the default exempts localhost and 127.*), trusting `trust_store`.
/// HttpURLConnection and java.net.http.HttpClient (through `ProxySelector.getDefault()`) both
/// follow these properties.
fn java_tool_options(
    existing: Option<&std::ffi::OsStr>,
    proxy_url: &str,
    trust_store: &Path,
) -> OsString {
    let authority = proxy_url.strip_prefix("http://").unwrap_or(proxy_url);
    let (host, port) = authority.rsplit_once(':').unwrap_or((authority, "80"));
    let mut options = OsString::new();
    if let Some(existing) = existing.filter(|existing| !existing.is_empty()) {
        options.push(existing);
        options.push(" ");
    }
    options.push(format!(
        "-Dhttp.proxyHost={host} -Dhttp.proxyPort={port} -Dhttps.proxyHost={host} \
         -Dhttps.proxyPort={port} -Dhttp.nonProxyHosts= -Djavax.net.ssl.trustStoreType=PKCS12 \
         -Djavax.net.ssl.trustStorePassword={TRUST_STORE_PASSWORD} "
    ));
    // The JVM splits the variable at white space, except inside quotes.
    let store = trust_store.display().to_string();
    if store.contains(char::is_whitespace) {
        options.push(format!("\"-Djavax.net.ssl.trustStore={store}\""));
    } else {
        options.push(format!("-Djavax.net.ssl.trustStore={store}"));
    }
    options
}

/// Why the command did not start, as a shell tells it apart: not found, or not runnable.
pub(crate) fn cannot_spawn(program: &str, err: &io::Error) -> Failure {
    match err.kind() {
        io::ErrorKind::NotFound => Failure::NotFound(format!(
            "cannot run `{program}`: command not found; check its name, and that it is \
             installed and on PATH"
        )),
        io::ErrorKind::PermissionDenied => Failure::CannotExecute(format!(
            "cannot run `{program}`: permission denied; is it an executable file (chmod +x)?"
        )),
        _ => Failure::CannotExecute(format!("cannot run `{program}`: {err}")),
    }
}

/// The command's exit status as a shell reports it: its code, or 128 + the signal that ended
/// it.
fn status_code(status: ExitStatus) -> u8 {
    if let Some(code) = status.code() {
        // Only Windows has codes past 255; they are failures all the same.
        return u8::try_from(code).unwrap_or(1);
    }
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        if let Some(signal) = status.signal() {
            return u8::try_from(128 + signal).unwrap_or(255);
        }
    }
    1
}

/// [`Failure::Premature`] if a retry broke its window, whatever the command did; else the
/// command's own status if it failed (a failed command is failure enough, and may be why
/// nothing was sent); else what the judge says ([`Failure::NotTested`]), or success.
fn outcome(judged: Result<(), Failure>, own: u8) -> Result<(), Failure> {
    match judged {
        Err(Failure::Premature) => Err(Failure::Premature),
        _ if own != exit_codes::SUCCESS => Err(Failure::Command(own)),
        judged => judged,
    }
}

/// An error and its causes, `: `-separated.
fn chain(err: &dyn std::error::Error) -> String {
    let mut message = err.to_string();
    let mut source = err.source();
    while let Some(cause) = source {
        message.push_str(&format!(": {cause}"));
        source = cause.source();
    }
    message
}

/// The signals passed on to the command.
#[cfg(unix)]
struct Signals {
    interrupt: tokio::signal::unix::Signal,
    terminate: tokio::signal::unix::Signal,
    hangup: tokio::signal::unix::Signal,
}

#[cfg(unix)]
impl Signals {
    fn new() -> io::Result<Signals> {
        use tokio::signal::unix::{SignalKind, signal};
        Ok(Signals {
            interrupt: signal(SignalKind::interrupt())?,
            terminate: signal(SignalKind::terminate())?,
            hangup: signal(SignalKind::hangup())?,
        })
    }

    /// Waits for `child` to exit, passing on every signal holdoff receives meanwhile; a
    /// command still running [`KILL_GRACE`] after it was asked to stop is killed (SIGKILL),
    /// so that holdoff always ends, writes its reports, and leaves no command behind.
    async fn forward_until_exit(&mut self, child: &mut Child) -> io::Result<ExitStatus> {
        use holdoff::clock::{Clock, TokioClock};
        use rustix::process::Signal;
        let mut kill_at = None;
        loop {
            let grace = async {
                match kill_at {
                    Some(at) => TokioClock.sleep_until(at).await,
                    None => std::future::pending().await,
                }
            };
            let signal = tokio::select! {
                status = child.wait() => return status,
                () = grace => {
                    tracing::warn!(
                        "the command did not exit within {} s of being asked to stop: killing it \
                         (SIGKILL)",
                        KILL_GRACE.as_secs()
                    );
                    kill_at = None;
                    Signal::KILL
                }
                Some(()) = self.interrupt.recv() => {
                    // Ctrl-C in a terminal goes to its whole foreground process group, the
                    // command included: a second SIGINT would make many programs skip their
                    // cleanup.
                    if in_terminal_foreground() {
                        continue;
                    }
                    Signal::INT
                }
                Some(()) = self.terminate.recv() => Signal::TERM,
                Some(()) = self.hangup.recv() => Signal::HUP,
            };
            // `id` is `None` once the child is reaped, so this never signals a stranger that
            // took its pid.
            let Some(pid) = child
                .id()
                .and_then(|id| i32::try_from(id).ok())
                .and_then(rustix::process::Pid::from_raw)
            else {
                continue;
            };
            if signal != Signal::KILL {
                tracing::info!("passing {signal:?} on to the command (pid {pid:?})");
                if kill_at.is_none() {
                    kill_at = Some(TokioClock.now() + KILL_GRACE);
                }
            }
            if let Err(err) = rustix::process::kill_process(pid, signal) {
                tracing::warn!("failed to pass {signal:?} on to the command: {err}");
            }
        }
    }
}

/// How long a command asked to stop (SIGINT, SIGTERM, SIGHUP passed on) has before it is
/// killed.
#[cfg(unix)]
const KILL_GRACE: std::time::Duration = std::time::Duration::from_secs(5);

/// Whether holdoff runs in the foreground of a terminal, where the terminal signals the whole
/// process group.
#[cfg(unix)]
fn in_terminal_foreground() -> bool {
    rustix::termios::tcgetpgrp(io::stdin()).is_ok_and(|group| group == rustix::process::getpgrp())
}

/// Ctrl-C reaches every process attached to the console, the command included: holdoff only
/// keeps waiting for it.
#[cfg(not(unix))]
struct Signals;

#[cfg(not(unix))]
impl Signals {
    fn new() -> io::Result<Signals> {
        Ok(Signals)
    }

    async fn forward_until_exit(&mut self, child: &mut Child) -> io::Result<ExitStatus> {
        loop {
            tokio::select! {
                status = child.wait() => return status,
                Ok(()) = tokio::signal::ctrl_c() => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    mod pem {
        use super::*;

        #[test]
        fn encodes_base64_in_lines_of_64_with_padding() {
            assert_eq!(
                pem("X", b"Man"),
                "-----BEGIN X-----\nTWFu\n-----END X-----\n"
            );
            assert_eq!(
                pem("X", b"Ma"),
                "-----BEGIN X-----\nTWE=\n-----END X-----\n"
            );
            assert_eq!(pem("X", b"M"), "-----BEGIN X-----\nTQ==\n-----END X-----\n");
            let long = pem("CERTIFICATE", &[0xff; 60]);
            let lines: Vec<&str> = long.lines().collect();
            assert_eq!(lines.len(), 4, "{long}");
            assert_eq!(lines[1], "/".repeat(64));
            assert_eq!(lines[2], "/".repeat(16));
        }
    }

    mod java_tool_options {
        use super::*;

        #[test]
        fn names_the_proxy_for_both_schemes_exempts_no_host_and_trusts_the_store() {
            let options = java_tool_options(
                None,
                "http://127.0.0.1:4321",
                Path::new("/tmp/h/truststore.p12"),
            );
            assert_eq!(
                options,
                "-Dhttp.proxyHost=127.0.0.1 -Dhttp.proxyPort=4321 -Dhttps.proxyHost=127.0.0.1 \
                 -Dhttps.proxyPort=4321 -Dhttp.nonProxyHosts= \
                 -Djavax.net.ssl.trustStoreType=PKCS12 -Djavax.net.ssl.trustStorePassword=holdoff \
                 -Djavax.net.ssl.trustStore=/tmp/h/truststore.p12"
            );
        }

        #[test]
        fn appends_to_the_users_own_and_quotes_a_path_with_spaces() {
            let options = java_tool_options(
                Some(std::ffi::OsStr::new("-Xmx64m")),
                "http://127.0.0.1:1",
                Path::new("/tmp/a b/truststore.p12"),
            );
            let options = options.to_string_lossy();
            assert!(
                options.starts_with("-Xmx64m -Dhttp.proxyHost="),
                "{options}"
            );
            assert!(
                options.ends_with(" \"-Djavax.net.ssl.trustStore=/tmp/a b/truststore.p12\""),
                "{options}"
            );
        }
    }

    mod trust_store {
        use super::*;

        #[test]
        fn holds_every_certificate_of_the_bundle_as_a_trusted_entry() {
            let ca = holdoff_testkit::tls::TestCa::new("trust store test CA");
            let bundle = format!("{}{}", ca.pem(), ca.leaf(&[]).cert_pem);
            let store = trust_store_of(&bundle).expect("a trust store");
            let read = p12_keystore::KeyStore::from_pkcs12(
                &store,
                TRUST_STORE_PASSWORD,
                p12_keystore::Pkcs12ImportPolicy::Strict,
            )
            .expect("read it back");
            assert_eq!(read.entries_len(), 2);
            assert!(
                read.entries()
                    .all(|(_, entry)| matches!(entry, p12_keystore::KeyStoreEntry::Certificate(_)))
            );
        }
    }

    mod outcome {
        use super::*;

        /// The exit code of `outcome(judged, own)`.
        fn code(judged: Result<(), Failure>, own: u8) -> u8 {
            outcome(judged, own).map_or_else(|failure| failure.exit_code(), |()| 0)
        }

        #[test]
        fn is_3_for_a_premature_retry_whatever_the_command_did() {
            assert_eq!(code(Err(Failure::Premature), 0), 3);
            assert_eq!(code(Err(Failure::Premature), 7), 3);
            assert_eq!(code(Ok(()), 0), 0);
            assert_eq!(code(Ok(()), 7), 7);
        }

        #[test]
        fn is_4_when_nothing_was_tested_unless_the_command_failed() {
            assert_eq!(code(Err(Failure::NotTested), 0), 4);
            assert_eq!(code(Err(Failure::NotTested), 7), 7);
        }
    }
}
