//! The command line of `holdoff proxy` ([`Args`]): where it listens, the reverse-proxy
//! upstream, the CA and the credentials, beside the [`Options`] it shares with `holdoff run`;
//! the config they make, and its errors in terms of the options.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;

use holdoff_proxy::{CaSource, ConfigError, Credentials, ProxyConfig, Upstream};

use super::dev_proxy_options;
use super::options::{Options, reason};

const AFTER_HELP: &str = "\
Clients use it as their proxy: HTTP_PROXY=http://127.0.0.1:8000 HTTPS_PROXY=http://127.0.0.1:8000.
HTTPS to a watched URL is intercepted with a certificate from holdoff's local CA, which the client
must trust (see `holdoff ca`); other HTTPS is tunnelled untouched. With --upstream it is a reverse
proxy instead: clients talk to it as if it were the upstream, and no CA is needed. To run one
command through a proxy of its own, with a throwaway CA, see `holdoff run`.

Watched requests meet the faults: error responses, rate limits, latency, mocks and network faults,
from -c FILE (holdoff's or Dev Proxy's), --preset NAME, --devproxy-config FILE, or holdoff.json /
holdoff.yaml in the current directory, else Dev Proxy's devproxyrc.json(c)/.yaml there or in
.devproxy/ (the start says which); without any, the `throttle` preset answers half of them with
429 and a Retry-After of 2-5 s (-f 0 turns that off). Every Retry-After a client receives,
injected or from the upstream, opens a window; a retry before it ends is judged premature and answered 429 without reaching the
upstream. Windows are kept per client: the proxy user name, else an X-Holdoff-Client header, else
(--client-id auto) the process at the other end of a loopback connection, found under /proc on
Linux, else the peer address.

On start it prints one line on stdout, `listening on http://IP:PORT` (then `control API on
http://IP:PORT/` and `metrics on http://IP:PORT/` when asked for); logs go to stderr (or
--log-file), one line per request, starting with the faults in use and their seed. Config and data
files are reloaded when they change. Ctrl-C or SIGTERM stops accepting, lets requests in flight
finish within --grace, writes the reports asked for (--report-json, --report-junit, --report-md,
--report-html; --events keeps every event as JSON lines while it runs), and prints what the faults
did, the judge's verdicts and a summary.

Durations: 8s, 500ms, 1m30s, or plain seconds.

Exit status: 0 after a clean shutdown, 1 if the proxy could not start (port in use, CA not
readable), 2 for a usage or config error.

Examples:
  holdoff proxy --urls-to-watch 'https://api.example.com/*'
  holdoff proxy --port 0 --upstream http://127.0.0.1:3000 --preset flaky --seed 7
  holdoff proxy -c holdoff.yaml -u 'https://api.example.com/*' --report-html report.html
  holdoff proxy --devproxy-config devproxyrc.json
  holdoff proxy --ip-address 0.0.0.0 --proxy-auth alice:s3cret --output json";

/// The end of `holdoff proxy -h`; `--help` has [`AFTER_HELP`].
const SHORT_AFTER_HELP: &str = "\
Clients use it as their proxy: HTTP_PROXY=http://127.0.0.1:8000 HTTPS_PROXY=http://127.0.0.1:8000.
Ctrl-C or SIGTERM stops it, writes the reports asked for and prints a summary.

Examples:
  holdoff proxy --urls-to-watch 'https://api.example.com/*'
  holdoff proxy --port 0 --upstream http://127.0.0.1:3000 --preset flaky --seed 7

--help says more: every option, HTTPS interception, the faults, how clients are told apart.";

/// Run the throttling proxy: forward (HTTP and HTTPS) or, with --upstream, reverse.
#[derive(Debug, clap::Args)]
#[command(after_help = SHORT_AFTER_HELP, after_long_help = AFTER_HELP)]
pub(crate) struct Args {
    /// The port to listen on; 0 picks a free one (the line on stdout says which).
    #[arg(
        help_heading = "Where and how it runs",
        short,
        long,
        value_name = "N",
        env = "HOLDOFF_PORT",
        default_value_t = holdoff_proxy::DEFAULT_PORT,
    )]
    pub(super) port: u16,

    /// The address to listen on. Anything but loopback needs --proxy-auth.
    #[arg(
        help_heading = "Where and how it runs",
        long,
        value_name = "ADDR",
        default_value_t = IpAddr::V4(Ipv4Addr::LOCALHOST),
    )]
    pub(super) ip_address: IpAddr,

    /// Reverse-proxy mode: send every request to this upstream (http:// or https://, host and
    /// port, no path).
    #[arg(
        help_heading = "Where and how it runs",
        long,
        value_name = "URL",
        value_parser = parse_upstream,
    )]
    pub(super) upstream: Option<Upstream>,

    /// Require these proxy credentials (Proxy-Authorization: Basic) on every request.
    #[arg(
        help_heading = "Where and how it runs",
        long,
        value_name = "USER:PASSWORD",
        value_parser = parse_credentials,
    )]
    pub(super) proxy_auth: Option<Credentials>,

    /// Run in the background and return once listening (Dev Proxy's -d/--detach): `holdoff
    /// status`, `holdoff logs` and `holdoff stop` find it; `stop` writes its reports and exits
    /// with its verdict.
    #[arg(
        help_heading = "Where and how it runs",
        short = 'd',
        long,
        value_name = "BOOL",
        num_args = 0..=1,
        default_missing_value = "true",
        value_parser = dev_proxy_options::parse_bool,
    )]
    pub(super) detach: Option<bool>,

    /// Stop after N seconds without a request (from the start, or the last request), writing
    /// the reports as on Ctrl-C: Dev Proxy's --timeout.
    #[arg(
        help_heading = "Where and how it runs",
        hide_short_help = true,
        short,
        long,
        value_name = "N",
        value_parser = clap::value_parser!(u64).range(1..),
    )]
    pub(super) timeout: Option<u64>,

    /// Set by --detach on the proxy it starts: its log file.
    #[arg(
        help_heading = "Where and how it runs",
        long = "_detached-child",
        hide = true,
        value_name = "LOG"
    )]
    pub(super) detached_child: Option<PathBuf>,

    #[command(flatten)]
    pub(super) options: Options,

    /// Exit with the verdict when stopped, as `holdoff run` does: 3 when a client retried
    /// before its Retry-After, 4 when no request reached the proxy; else 0.
    #[arg(help_heading = "Judging", long)]
    pub(super) fail_on_premature: bool,

    /// Where the interception CA is kept: created there the first time an https:// URL is
    /// watched (watching only http:// URLs needs no CA). Default: the user's data directory, as
    /// `holdoff ca path` shows.
    #[arg(help_heading = "Network and TLS", long, value_name = "DIR")]
    pub(super) ca_dir: Option<PathBuf>,

    /// Install the CA (--ca-dir's, created if needed) into the system's trust store before
    /// starting, as `holdoff ca trust` does (Dev Proxy's --install-cert).
    #[arg(
        help_heading = "Network and TLS",
        hide_short_help = true,
        long,
        value_name = "BOOL",
        num_args = 0..=1,
        default_missing_value = "true",
        value_parser = dev_proxy_options::parse_bool,
    )]
    pub(super) install_cert: Option<bool>,

    /// Dev Proxy's --as-system-proxy: holdoff does not change the system's settings, but
    /// prints what to set (the proxy variables; on GNOME the gsettings commands; on macOS
    /// networksetup) for the address it listens on.
    #[arg(
        help_heading = "Dev Proxy compatibility",
        hide_short_help = true,
        long,
        value_name = "BOOL",
        num_args = 0..=1,
        default_missing_value = "true",
        value_parser = dev_proxy_options::parse_bool,
    )]
    pub(super) as_system_proxy: Option<bool>,
}

fn parse_upstream(s: &str) -> Result<Upstream, String> {
    s.parse().map_err(|err| reason(&err))
}

fn parse_credentials(s: &str) -> Result<Credentials, String> {
    s.parse()
        .map_err(|_| "expected USER:PASSWORD, with a non-empty user name".to_owned())
}

impl Args {
    pub(super) fn config(&self) -> ProxyConfig {
        let mut config = self.options.config();
        config.listen = SocketAddr::new(self.ip_address, self.port);
        config.upstream = self.upstream.clone();
        config.ca = match &self.ca_dir {
            Some(dir) => CaSource::Dir(dir.clone()),
            None => CaSource::DefaultDir,
        };
        config.proxy_auth = self.proxy_auth.clone();
        config
    }
}

/// A configuration problem in terms of this command's options.
pub(super) fn usage(err: &ConfigError) -> String {
    match err {
        ConfigError::OpenToNetwork { ip } => format!(
            "refusing to listen on {ip} without --proxy-auth: anyone on the network could use \
             this proxy"
        ),
        ConfigError::Zero { key } => {
            format!("--{} must be greater than zero", key.replace('_', "-"))
        }
        ConfigError::NoCaDir => {
            "cannot find a data directory for the CA (is HOME set?); pass --ca-dir DIR".to_owned()
        }
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use clap::Parser;
    use holdoff_proxy::ClientIdMode;

    use super::super::options::Output;
    use super::*;

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(flatten)]
        args: Args,
    }

    fn parse(args: &[&str]) -> Result<Args, clap::Error> {
        Cli::try_parse_from(std::iter::once("proxy").chain(args.iter().copied()))
            .map(|cli| cli.args)
    }

    mod args {
        use super::*;

        #[test]
        fn default_to_a_loopback_forward_proxy_on_8000() {
            let config = parse(&[]).unwrap().config();
            assert_eq!(config.listen, "127.0.0.1:8000".parse().unwrap());
            assert!(config.upstream.is_none());
            assert!(config.urls_to_watch.is_empty());
            assert_eq!(config.grace, Duration::from_secs(5));
            assert_eq!(config.upstream_timeout, Duration::from_secs(30));
            assert_eq!(config.send_timeout, Duration::from_secs(60));
            assert_eq!(config.connections_per_peer(), 2_500);
            assert!(config.connection_threads >= 1, "one per core");
            assert_eq!(config.client_id, ClientIdMode::Auto);
            assert!(config.validate().is_ok());
        }

        #[test]
        fn read_every_option() {
            let args = parse(&[
                "--port",
                "0",
                "--ip-address",
                "::1",
                "-u",
                "https://api.example.com/*",
                "--urls-to-watch",
                "!https://api.example.com/health",
                "--upstream",
                "https://127.0.0.1:8443",
                "--upstream-ca",
                "test-ca.pem",
                "--ca-dir",
                "/tmp/ca",
                "--proxy-auth",
                "alice:s3:cret",
                "--grace",
                "1s",
                "--upstream-timeout",
                "500ms",
                "--idle-timeout",
                "2m",
                "--send-timeout",
                "90s",
                "--max-connections-per-peer",
                "16",
                "--threads",
                "3",
                "--output",
                "json",
                "--client-id",
                "peer",
            ])
            .unwrap();
            assert_eq!(args.options.output, Output::Json);
            let config = args.config();
            assert_eq!(config.listen, "[::1]:0".parse().unwrap());
            assert_eq!(config.urls_to_watch.len(), 2);
            assert!(config.urls_to_watch[1].is_exclusion());
            assert_eq!(
                config.upstream.map(|u| u.to_string()).as_deref(),
                Some("https://127.0.0.1:8443")
            );
            assert_eq!(config.upstream_ca, [PathBuf::from("test-ca.pem")]);
            assert!(
                matches!(config.ca, CaSource::Dir(dir) if dir == std::path::Path::new("/tmp/ca"))
            );
            assert_eq!(
                config.proxy_auth.map(|c| c.user().to_owned()).as_deref(),
                Some("alice")
            );
            assert_eq!(config.grace, Duration::from_secs(1));
            assert_eq!(config.upstream_timeout, Duration::from_millis(500));
            assert_eq!(config.idle_timeout, Duration::from_secs(120));
            assert_eq!(config.send_timeout, Duration::from_secs(90));
            assert_eq!(config.max_connections_per_peer, Some(16));
            assert_eq!(config.connection_threads, 3);
            assert_eq!(config.client_id, ClientIdMode::Peer);
        }

        #[test]
        fn reject_bad_values_with_a_reason() {
            let err = parse(&["--upstream", "ftp://x"]).unwrap_err().to_string();
            assert!(err.contains("the scheme must be http or https"), "{err}");
            let err = parse(&["--proxy-auth", "alice"]).unwrap_err().to_string();
            assert!(err.contains("expected USER:PASSWORD"), "{err}");
            let err = parse(&["-u", ""]).unwrap_err().to_string();
            assert!(err.contains("the pattern is empty"), "{err}");
        }
    }

    mod usage {
        use super::*;

        #[test]
        fn names_the_option_that_would_fix_it() {
            let config = parse(&["--ip-address", "0.0.0.0"]).unwrap().config();
            let err = config.validate().unwrap_err();
            assert_eq!(
                usage(&err),
                "refusing to listen on 0.0.0.0 without --proxy-auth: anyone on the network \
                 could use this proxy"
            );
            let config = parse(&["--idle-timeout", "0"]).unwrap().config();
            assert_eq!(
                usage(&config.validate().unwrap_err()),
                "--idle-timeout must be greater than zero"
            );
            let config = parse(&["--max-connections-per-peer", "0"])
                .unwrap()
                .config();
            assert_eq!(
                usage(&config.validate().unwrap_err()),
                "--max-connections-per-peer must be greater than zero"
            );
        }
    }
}
