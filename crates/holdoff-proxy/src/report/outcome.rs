//! What a run comes to — pass, fail or not tested — and the one case each report's headline
//! is written from, so that the terminal, Markdown, HTML and JUnit never disagree.

use super::parts::RunOutcome;
use super::run::Report;
use super::text::count;

/// Why no request reaches the proxy, usually, and what to do about each; code in backticks.
pub(crate) const NO_TRAFFIC_CAUSES: [(&str, &str); 8] = [
    (
        "Node.js before 22.21: the global `fetch` ignores `HTTP_PROXY`",
        "make undici's `EnvHttpProxyAgent` the global dispatcher \
         (`setGlobalDispatcher(new EnvHttpProxyAgent())`), or use Node.js 22.21+ or 24, which \
         honour `NODE_USE_ENV_PROXY=1` (holdoff run sets it)",
    ),
    (
        "httpx with an explicit `transport=` ignores the proxy variables",
        "pass `proxy=` (or `mounts=`) to the client, or leave the transport out so that \
         `trust_env` applies",
    ),
    (
        "aiohttp ignores the proxy variables by default",
        "create the `ClientSession` with `trust_env=True`",
    ),
    (
        "Go never proxies requests to `localhost` or `127.0.0.1`",
        "call the server by the machine's non-loopback name, or give the client an \
         `http.Transport{Proxy: …}` with the URL in `HOLDOFF_PROXY_URL`",
    ),
    (
        "Java ignores `HTTP_PROXY`, so holdoff run sets `JAVA_TOOL_OPTIONS`",
        "keep that variable and the JVM's default `ProxySelector`, or build a selector from \
         `HOLDOFF_PROXY_URL`",
    ),
    (
        "Ruby never proxies a host that resolves to loopback (`127.*`, `::1`)",
        "call the server by a name that does not resolve to loopback, or pass the proxy to \
         `Net::HTTP.new` yourself (`HOLDOFF_PROXY_URL`)",
    ),
    (
        "`NO_PROXY` names the host",
        "holdoff run removes `NO_PROXY` and `no_proxy` unless `--keep-no-proxy`: drop that \
         flag, or leave the host out",
    ),
    (
        "the command sends no HTTP request at all",
        "if that is expected, pass `--allow-no-traffic`",
    ),
];

/// What a run's headline says, in the order the cases are tried.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Case {
    /// A retry broke its window.
    Fail,
    /// Interceptions failed: requests in those tunnels never reached the judge.
    Unintercepted,
    /// No request reached the proxy; `allowed` by `--allow-no-traffic`.
    NotTested { allowed: bool },
    /// Requests, but no throttle.
    NothingThrottled,
    /// Throttles, but no client came back under a window.
    NoRetry,
    /// Every retry waited, but some came without backoff after a throttle with no hint.
    PassWithWarnings,
    /// Every retry waited.
    Pass,
}

impl Case {
    /// The case of `report`.
    pub(crate) fn of(report: &Report) -> Case {
        match report.verdict {
            RunOutcome::Fail => Case::Fail,
            RunOutcome::NotTested if report.interception_failures > 0 => Case::Unintercepted,
            RunOutcome::NotTested => Case::NotTested {
                allowed: report.allow_no_traffic,
            },
            RunOutcome::Pass if report.throttled == 0 && report.all_retries.is_empty() => {
                Case::NothingThrottled
            }
            RunOutcome::Pass if report.all_retries.is_empty() => Case::NoRetry,
            RunOutcome::Pass if !report.warnings.is_empty() => Case::PassWithWarnings,
            RunOutcome::Pass => Case::Pass,
        }
    }

    /// The mark before the headline: `PASS`, `FAIL`, `NOT TESTED`, `PASS?`.
    pub(crate) fn mark(self) -> &'static str {
        match self {
            Case::Fail => "FAIL",
            Case::Unintercepted | Case::NotTested { .. } => "NOT TESTED",
            Case::NothingThrottled | Case::NoRetry => "PASS?",
            Case::PassWithWarnings | Case::Pass => "PASS",
        }
    }

    /// The CSS class of the HTML verdict: `pass`, `fail`, `untested` or `unsure`.
    pub(crate) fn class(self) -> &'static str {
        match self {
            Case::Fail => "fail",
            Case::Unintercepted | Case::NotTested { .. } => "untested",
            Case::NothingThrottled | Case::NoRetry | Case::PassWithWarnings => "unsure",
            Case::Pass => "pass",
        }
    }
}

/// What a pass with warnings warns of: retries without backoff after a throttle with no
/// hint, and requests inside the wait another process was told.
fn warned(report: &Report) -> String {
    let retries = report.retries;
    let mut what = Vec::new();
    if retries.no_backoff > 0 {
        what.push(format!(
            "{} came without backoff after a throttle with no hint",
            retries.no_backoff
        ));
    }
    if retries.sibling > 0 {
        let came = count(retries.sibling, "request", "requests");
        what.push(format!(
            "{came} came from another process inside the wait one was told (each process is \
             judged apart; --judge-key method-url judges them as one)"
        ));
    }
    if what.is_empty() {
        what.push(count(report.warnings.len(), "warning", "warnings"));
    }
    what.join(", and ")
}

/// What every report says of windows dropped at the cap: not judged, and why.
pub(crate) fn evicted(windows: u64) -> String {
    let windows = count(
        usize::try_from(windows).unwrap_or(usize::MAX),
        "judge window was",
        "judge windows were",
    );
    format!(
        "not judged: {windows} evicted at the cap on open windows (--judge-max-windows), \
         oldest first; retries under them were neither passed nor failed"
    )
}

/// Why a run with failed interceptions is not a pass, for the reports: `failures` of them.
pub(crate) fn unintercepted(failures: u64) -> String {
    let connections = count(
        usize::try_from(failures).unwrap_or(usize::MAX),
        "intercepted connection",
        "intercepted connections",
    );
    format!(
        "{connections} failed the TLS handshake with the client: it does not trust holdoff's CA, \
         speaks something else, or closed (the proxy's warnings name each host and the likely \
         cause). The requests it meant to send there never reached the proxy, so this is not a \
         pass. Under `holdoff run` the CA is in `SSL_CERT_FILE`, `REQUESTS_CA_BUNDLE` and \
         `NODE_EXTRA_CA_CERTS`; see `holdoff run --help`."
    )
}

/// What the reports say, before anything else, when the command failed and no request
/// reached the proxy: that the command failed, and how. The causes of a run with no traffic
/// are beside the point until the command runs, so they are named, not listed.
pub(crate) fn failed_before_any_request(code: i32) -> String {
    let how = match code {
        // How a shell reports a command that a signal ended.
        129..=192 => format!(
            "exit status {code}, as a shell reports signal {}",
            code - 128
        ),
        _ => format!("exit status {code}"),
    };
    format!(
        "the command failed ({how}) and sent no request through the proxy: its own output says \
         why; fix that first. If it then runs and still sends nothing through the proxy, \
         `holdoff run --help` names the usual causes."
    )
}

/// `Some(code)` when the command `holdoff run` ran exited with a failure.
pub(crate) fn command_failed(report: &Report) -> Option<i32> {
    report.exit_code.filter(|code| *code != 0)
}

/// A report's headline: `FAIL: 3 premature retries and 8 compliant (8 throttled responses, 57
/// requests)`, in parts for each format.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Headline {
    /// `PASS`, `FAIL`, `NOT TESTED`, `NOT TESTED (allowed)` or `PASS?`.
    pub(crate) mark: &'static str,
    /// A symbol for the mark: `✓`, `✗`, `⚠`.
    pub(crate) symbol: &'static str,
    /// The CSS class of the HTML verdict.
    pub(crate) class: &'static str,
    /// What the run found, e.g. `3 premature retries and 8 compliant`.
    pub(crate) what: String,
    /// The counts, e.g. `8 throttled responses, 57 requests`.
    pub(crate) counts: String,
}

impl Headline {
    pub(crate) fn of(report: &Report) -> Headline {
        let case = Case::of(report);
        let requests = count(
            usize::try_from(report.requests).unwrap_or(usize::MAX),
            "request",
            "requests",
        );
        let throttled = count(
            report.throttled,
            "throttled response",
            "throttled responses",
        );
        let compliant = count(
            report.retries.compliant,
            "compliant retry",
            "compliant retries",
        );
        let failed = command_failed(report);
        let interceptions = count(
            usize::try_from(report.interception_failures).unwrap_or(usize::MAX),
            "TLS interception failed",
            "TLS interceptions failed",
        );
        let (what, counts) = match case {
            Case::Fail => {
                let r = &report.retries;
                let mut kinds = Vec::new();
                for (n, one, many, fails) in [
                    (r.premature, "premature retry", "premature retries", true),
                    (
                        r.read_as_zero,
                        "read-as-zero retry",
                        "read-as-zero retries",
                        true,
                    ),
                    (
                        r.no_backoff,
                        "retry without backoff",
                        "retries without backoff",
                        report.fail_on_no_backoff,
                    ),
                ] {
                    if n > 0 && fails {
                        kinds.push(count(n, one, many));
                    }
                }
                let what = format!("{} and {} compliant", kinds.join(", "), r.compliant);
                let what = if report.interception_failures > 0 {
                    format!("{what}; {interceptions}")
                } else {
                    what
                };
                (what, format!("{throttled}, {requests}"))
            }
            Case::Unintercepted => (
                format!("{interceptions} (does the client trust holdoff's CA?)"),
                format!("{throttled}, {requests}"),
            ),
            Case::NotTested { allowed: true } => (
                "no request reached the proxy, as --allow-no-traffic allows".to_owned(),
                requests,
            ),
            Case::NotTested { allowed: false } => {
                ("no request reached the proxy".to_owned(), requests)
            }
            Case::NothingThrottled => (
                "nothing was judged".to_owned(),
                format!("{requests}, 0 throttled"),
            ),
            Case::NoRetry => (
                "no retry was judged".to_owned(),
                format!("{throttled}, none retried; {requests}"),
            ),
            Case::PassWithWarnings => (
                format!("no retry broke its window, but {}", warned(report)),
                format!("{compliant}; {throttled}, {requests}"),
            ),
            Case::Pass if failed.is_some() => (
                "no client retried early".to_owned(),
                format!("{compliant}; {throttled}, {requests}"),
            ),
            Case::Pass => (
                "every retry waited".to_owned(),
                format!("{compliant}; {throttled}, {requests}"),
            ),
        };
        let (mark, symbol, class) = match (failed, case) {
            (Some(_), _) | (None, Case::Fail) => ("FAIL", "✗", "fail"),
            (None, Case::NotTested { allowed: true }) => {
                ("NOT TESTED (allowed)", "–", case.class())
            }
            (None, Case::Pass) => ("PASS", "✓", case.class()),
            (None, _) => (case.mark(), "⚠", case.class()),
        };
        let what = match failed {
            Some(code) => format!("the command exited {code}; {what}"),
            None => what,
        };
        Headline {
            mark,
            symbol,
            class,
            what,
            counts,
        }
    }

    /// The mark and what follows it: `FAIL:`, or `PASS?` (no colon after a question).
    pub(crate) fn lead(&self) -> String {
        let colon = if self.mark.ends_with('?') { "" } else { ":" };
        format!("{}{colon}", self.mark)
    }

    /// `FAIL: what (counts)`.
    pub(crate) fn line(&self) -> String {
        format!("{} {} ({})", self.lead(), self.what, self.counts)
    }
}
