//! Dev Proxy's command-line options that `holdoff proxy` and `holdoff run` take as Dev Proxy's
//! documentation and CI scripts spell them: its switches take an optional `true`/`false`
//! (`--as-system-proxy false`), and what holdoff cannot honour is said in one line at start,
//! never refused with a usage error.

use std::path::PathBuf;

/// Dev Proxy's options without a holdoff counterpart of another name.
#[derive(Debug, Default, clap::Args)]
pub(crate) struct DevProxyOptions {
    /// Turn the config's mocks off: their requests go upstream (Dev Proxy's -n/--no-mocks;
    /// `--no-mocks false` leaves them on).
    #[arg(hide_short_help = true, short = 'n', long, value_name = "BOOL", num_args = 0..=1, default_missing_value = "true", value_parser = parse_bool)]
    pub(crate) no_mocks: Option<bool>,

    /// Dev Proxy's --mocks-file: the mocks file the Dev Proxy config's MockResponsePlugin
    /// reads, instead of the one its settings name.
    #[arg(hide_short_help = true, long, value_name = "FILE")]
    pub(crate) mocks_file: Option<PathBuf>,

    /// Dev Proxy's -a/--allowed-errors: only the error responses with these statuses are sent
    /// (e.g. `-a 429 503`); error rules left with none are dropped. Dev Proxy applies it to
    /// GraphRandomErrorPlugin; holdoff to every error rule.
    #[arg(hide_short_help = true, short = 'a', long, value_name = "STATUS", num_args = 1.., value_parser = clap::value_parser!(u16).range(100..=599))]
    pub(crate) allowed_errors: Vec<u16>,

    /// Dev Proxy's --record: holdoff records every request from the start (the reports and
    /// --events have them), so this changes nothing; the control API's /recording/stop and
    /// /recording/start pause and resume it.
    #[arg(hide_short_help = true, long, value_name = "BOOL", num_args = 0..=1, default_missing_value = "true", value_parser = parse_bool)]
    pub(crate) record: Option<bool>,

    /// Do not reload the config when its files change (Dev Proxy's --no-watch).
    #[arg(hide_short_help = true, long, value_name = "BOOL", num_args = 0..=1, default_missing_value = "true", value_parser = parse_bool)]
    pub(crate) no_watch: Option<bool>,

    /// No colours in the log (Dev Proxy's --no-color; NO_COLOR in the environment does the
    /// same).
    #[arg(hide_short_help = true, long, value_name = "BOOL", num_args = 0..=1, default_missing_value = "true", value_parser = parse_bool)]
    pub(crate) no_color: Option<bool>,

    /// Dev Proxy's --no-first-run: holdoff has no first-run experience to skip.
    #[arg(hide_short_help = true, long, value_name = "BOOL", num_args = 0..=1, default_missing_value = "true", value_parser = parse_bool)]
    pub(crate) no_first_run: Option<bool>,

    /// Dev Proxy's --discover (URL discovery mode): the config's faults are off and every URL
    /// is watched (intercepted when HTTPS); the request log lists each URL the proxy sees.
    #[arg(hide_short_help = true, long, value_name = "BOOL", num_args = 0..=1, default_missing_value = "true", value_parser = parse_bool)]
    pub(crate) discover: Option<bool>,

    /// Dev Proxy's --summary-group-by (url or messageType): taken, and said at start that
    /// holdoff's summary and reports are grouped by client, method and URL.
    #[arg(hide_short_help = true, long, value_name = "GROUP", value_parser = ["url", "messageType", "messagetype"])]
    pub(crate) summary_group_by: Option<String>,
}

impl DevProxyOptions {
    /// `--no-mocks`, as given.
    pub(crate) fn no_mocks(&self) -> bool {
        self.no_mocks == Some(true)
    }

    /// `--discover`, as given.
    pub(crate) fn discover(&self) -> bool {
        self.discover == Some(true)
    }

    /// `--no-watch`, as given.
    pub(crate) fn no_watch(&self) -> bool {
        self.no_watch == Some(true)
    }

    /// Whether the log may use colours: not with `--no-color`, nor with `NO_COLOR` set to
    /// anything but the empty string (no-color.org).
    pub(crate) fn colour_allowed(&self) -> bool {
        self.no_color != Some(true) && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
    }

    /// One line for each option that was given and that holdoff takes without doing what Dev
    /// Proxy would: logged as notes at start.
    pub(crate) fn notes(&self) -> Vec<String> {
        let mut notes = Vec::new();
        if self.record == Some(true) {
            notes.push(
                "--record: holdoff records every request from the start, into its reports (and \
                 --events); the control API's /recording/stop and /recording/start pause and \
                 resume it"
                    .to_owned(),
            );
        }
        if self.discover() {
            notes.push(
                "--discover: URL discovery, as Dev Proxy's: no faults, every URL watched; the \
                 request log (--log-level info) lists each URL the proxy sees, where Dev Proxy \
                 writes them to a report of their own"
                    .to_owned(),
            );
        }
        if let Some(group) = &self.summary_group_by {
            notes.push(format!(
                "--summary-group-by {group}: holdoff's summary and reports group what they \
                 found by client, method and URL; the option changes nothing"
            ));
        }
        notes
    }
}

/// `true` or `false` in any case, as Dev Proxy's command line reads a switch's value.
pub(crate) fn parse_bool(s: &str) -> Result<bool, String> {
    match s.to_ascii_lowercase().as_str() {
        "true" => Ok(true),
        "false" => Ok(false),
        _ => Err("expected true or false (or nothing: the switch alone means true)".to_owned()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(flatten)]
        options: DevProxyOptions,
    }

    fn parse(args: &[&str]) -> Result<DevProxyOptions, clap::Error> {
        Cli::try_parse_from(std::iter::once("holdoff").chain(args.iter().copied()))
            .map(|cli| cli.options)
    }

    #[test]
    fn a_switch_takes_an_optional_true_or_false_as_dev_proxy_does() {
        assert_eq!(parse(&["--no-mocks"]).unwrap().no_mocks, Some(true));
        assert_eq!(parse(&["-n"]).unwrap().no_mocks, Some(true));
        assert_eq!(
            parse(&["--no-mocks", "false"]).unwrap().no_mocks,
            Some(false)
        );
        assert_eq!(parse(&["--no-watch", "True"]).unwrap().no_watch, Some(true));
        assert_eq!(parse(&["--record=false"]).unwrap().record, Some(false));
        assert_eq!(parse(&[]).unwrap().no_first_run, None);
        let err = parse(&["--discover", "maybe"]).unwrap_err().to_string();
        assert!(err.contains("expected true or false"), "{err}");
    }

    #[test]
    fn allowed_errors_take_several_statuses_after_one_flag() {
        let options = parse(&["-a", "429", "503", "--no-first-run"]).unwrap();
        assert_eq!(options.allowed_errors, [429, 503]);
        assert_eq!(options.no_first_run, Some(true));
        assert!(parse(&["-a", "42"]).is_err());
    }

    #[test]
    fn what_changes_nothing_says_so_and_what_is_off_says_nothing() {
        let options = parse(&[
            "--record",
            "--discover",
            "--summary-group-by",
            "messageType",
        ])
        .unwrap();
        let notes = options.notes();
        assert_eq!(notes.len(), 3, "{notes:?}");
        assert!(notes[1].starts_with("--discover: URL discovery, as Dev Proxy's"));
        assert!(notes[2].starts_with("--summary-group-by messageType: "));
        let off = parse(&["--record", "false", "--discover", "false"]).unwrap();
        assert!(off.notes().is_empty());
    }
}
