//! `holdoff`: explain HTTP `Retry-After` values and what a client should do with them.
//!
//! Each subcommand lives in its own module with the same shape: a clap `Args` struct and a
//! `run` function that writes to the given output and returns `Ok(())`, or a [`Failure`]
//! saying what went wrong. Only [`main`] turns a failure into an exit code
//! ([`Failure::exit_code`]); the codes are in [`exit_codes`].
#![forbid(unsafe_code)]

mod background;
mod ca;
mod check;
mod config;
mod demo;
mod devproxy;
mod duration;
mod exit_codes;
mod explain;
mod failure;
mod http;
mod instances;
mod jwt;
mod orphans;
mod proxy;
mod report;
mod run;
mod size;

use std::ffi::OsString;
use std::io::{self, Write};
use std::process::ExitCode;

/// mimalloc instead of the system allocator: the proxy allocates small buffers per request on
/// every worker thread, and measured A/B with wrk on loopback it serves 2-6% more small and
/// about 10% more 64 KiB responses per second.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use clap::{CommandFactory, Parser, Subcommand};

use failure::Failure;

/// Honour HTTP Retry-After exactly as RFC 9110 defines it.
///
/// `holdoff OPTIONS…` with no command (or `holdoff` alone) is `holdoff proxy OPTIONS…`, as
/// `devproxy OPTIONS…` runs Dev Proxy: `holdoff --config-file
/// "~dataFolder/configs/NAME/devproxyrc.json"` works as written. `holdoff --help` lists the
/// commands; `holdoff demo` shows what holdoff does, in one command.
#[derive(Debug, Parser)]
#[command(
    name = "holdoff",
    version,
    propagate_version = true,
    override_usage = "holdoff <COMMAND>\n       holdoff [PROXY OPTIONS]  (holdoff proxy [PROXY OPTIONS])",
    after_help = exit_codes::help()
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Explain a Retry-After value: what it means, when a retry is permitted, and what a
    /// client should do.
    Explain(explain::Args),
    /// Manage the local CA that the proxy signs intercepted hosts' certificates with: print
    /// its path, create it, export its certificate, remove it, and see how to trust it.
    Ca(ca::Args),
    /// Run the throttling proxy: forward (HTTP, and HTTPS intercepted for watched URLs) or,
    /// with --upstream, reverse.
    Proxy(Box<proxy::Args>),
    /// Run a command through a throttling proxy of its own, with a throwaway CA, and fail
    /// (exit 3) if it retried before a Retry-After had passed, or (exit 4) if no request
    /// reached the proxy.
    Run(Box<run::Args>),
    /// Work with configuration files: print the JSON Schema, check a file, print a built-in
    /// preset, import Microsoft Dev Proxy's configuration.
    Config(config::Args),
    /// Write the reports (Markdown, JSON, JUnit XML, HTML) of a saved event log; exit 3 if a
    /// client retried early.
    Report(report::Args),
    /// See the judge at work in one command, no network or setup needed: an embedded
    /// upstream, the proxy, and two clients (one using holdoff, one retrying after 100 ms).
    Demo(demo::Args),
    /// Check how a client handles Retry-After: run it once per scenario (429 and 503 with a
    /// delay, an HTTP-date, malformed hints, none, a used-up quota, a POST) through a proxy of
    /// its own, and fail (exit 3) if it retried too early in any.
    Check(Box<check::Args>),
    /// Show the proxies `holdoff proxy --detach` runs in the background: where they listen
    /// and log, and what they have seen so far; exit 1 when none runs.
    Status(background::StatusArgs),
    /// Stop the proxies `holdoff proxy --detach` runs, as Ctrl-C would: they write their
    /// reports; exit with the verdict (0, 3 when a client retried early, 4 when no request
    /// reached them).
    Stop(background::StopArgs),
    /// Print the log of the proxy `holdoff proxy --detach` runs.
    Logs(background::LogsArgs),
    /// Make a bearer token (JWT) for testing an API that wants one, as Dev Proxy's `jwt
    /// create` does.
    Jwt(jwt::Args),
}

impl Command {
    fn name(&self) -> &'static str {
        match self {
            Command::Explain(_) => "explain",
            Command::Ca(_) => "ca",
            Command::Proxy(_) => "proxy",
            Command::Run(_) => "run",
            Command::Config(_) => "config",
            Command::Report(_) => "report",
            Command::Demo(_) => "demo",
            Command::Check(_) => "check",
            Command::Status(_) => "status",
            Command::Stop(_) => "stop",
            Command::Logs(_) => "logs",
            Command::Jwt(_) => "jwt",
        }
    }
}

impl Failure {
    /// Says what failed on stderr, unless that is said already, and returns the exit code;
    /// `name` is the subcommand, whose usage a usage error shows.
    fn report(self, name: &str) -> u8 {
        let code = self.exit_code();
        // If stderr is gone there is nobody to tell; the exit code still says it.
        let mut stderr = io::stderr();
        match self {
            Failure::Usage(message) => {
                // Formatted like clap's own errors, with the subcommand's usage.
                let kind = clap::error::ErrorKind::ValueValidation;
                let mut root = Cli::command();
                root.build();
                let err = match root.find_subcommand_mut(name) {
                    Some(sub) => sub.error(kind, message),
                    None => root.error(kind, message),
                };
                let _ = err.print();
            }
            Failure::Io(err) if err.kind() == io::ErrorKind::BrokenPipe => {}
            Failure::Io(err) => {
                let _ = writeln!(stderr, "holdoff: failed to write output: {err}");
            }
            Failure::EventLog(message)
            | Failure::Runtime(message)
            | Failure::NotFound(message)
            | Failure::CannotExecute(message) => {
                let _ = writeln!(stderr, "holdoff: {message}");
            }
            Failure::Reports
            | Failure::Malformed
            | Failure::Config
            | Failure::Ca
            | Failure::Unexpected
            | Failure::Premature
            | Failure::NotTested
            | Failure::Command(_) => {}
        }
        code
    }
}

/// The command line with `proxy` put in when it is empty or starts with an option other than
/// help or the version: Dev Proxy's command line has the proxy's options at its top level
/// (`devproxy --config-file FILE`, or `devproxy` alone), and its users type them so.
fn with_default_command(mut args: Vec<OsString>) -> Vec<OsString> {
    let first = args.get(1).and_then(|arg| arg.to_str());
    let is_option = first.is_some_and(|arg| arg.starts_with('-') && arg != "-");
    let asks_about_holdoff = matches!(first, Some("-h" | "--help" | "-V" | "--version"));
    // Nothing at all is `devproxy` alone: the proxy, with the config it finds.
    if (args.len() == 1 || is_option) && !asks_about_holdoff {
        args.insert(1, OsString::from("proxy"));
    }
    args
}

/// A hint for `holdoff run curl …` (or `check`): the command must follow `--`, and clap
/// took its first word for an argument it does not know.
fn forgotten_dashes(args: &[OsString], err: &clap::Error) -> Option<String> {
    let command = args.get(1)?.to_str()?;
    let wants_dashes = matches!(command, "run" | "check");
    let has_dashes = args.iter().any(|arg| arg == "--");
    if !wants_dashes || has_dashes || err.kind() != clap::error::ErrorKind::UnknownArgument {
        return None;
    }
    let unknown = err.get(clap::error::ContextKind::InvalidArg)?.to_string();
    if unknown.starts_with('-') {
        return None;
    }
    Some(format!(
        "hint: put `--` before the command to run: holdoff {command} [OPTIONS] -- {unknown} …"
    ))
}

fn main() -> ExitCode {
    let args = with_default_command(std::env::args_os().collect());
    let cli = match Cli::try_parse_from(&args) {
        Ok(cli) => cli,
        Err(err) => {
            let hint = forgotten_dashes(&args, &err);
            let code = err.exit_code();
            let _ = err.print();
            if let Some(hint) = hint {
                eprintln!("{hint}");
            }
            return ExitCode::from(u8::try_from(code).unwrap_or(exit_codes::USAGE));
        }
    };
    let name = cli.command.name();
    let mut stdout = io::stdout().lock();
    let result = match cli.command {
        Command::Explain(args) => explain::run(args, &mut stdout),
        Command::Ca(args) => ca::run(args, &mut stdout),
        Command::Proxy(proxy) => proxy::run(*proxy, args, &mut stdout),
        Command::Run(run) => run::run(*run, args),
        Command::Config(args) => config::run(args, &mut stdout),
        Command::Report(args) => report::run(args, &mut stdout),
        Command::Demo(args) => demo::run(args, &mut stdout),
        Command::Check(args) => check::run(*args, &mut stdout),
        Command::Status(args) => background::status(args, &mut stdout),
        Command::Stop(args) => background::stop(args, &mut stdout),
        Command::Logs(args) => background::logs(args, &mut stdout),
        Command::Jwt(args) => jwt::run(args, &mut stdout),
    };
    let result = result.and_then(|()| Ok(stdout.flush()?));
    ExitCode::from(match result {
        Ok(()) => exit_codes::SUCCESS,
        Err(failure) => failure.report(name),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    mod cli {
        use super::*;

        #[test]
        fn is_a_valid_clap_definition() {
            Cli::command().debug_assert();
        }

        fn line(args: &[&str]) -> Vec<OsString> {
            args.iter().map(OsString::from).collect()
        }

        #[test]
        fn options_without_a_command_go_to_the_proxy_as_in_dev_proxy() {
            assert_eq!(
                with_default_command(line(&["holdoff", "--config-file", "rc.json"])),
                line(&["holdoff", "proxy", "--config-file", "rc.json"])
            );
            assert_eq!(
                with_default_command(line(&["holdoff", "-c", "rc.json", "--port", "0"])),
                line(&["holdoff", "proxy", "-c", "rc.json", "--port", "0"])
            );
            assert_eq!(
                with_default_command(line(&["holdoff"])),
                line(&["holdoff", "proxy"])
            );
            for unchanged in [
                &["holdoff", "--help"][..],
                &["holdoff", "-V"],
                &["holdoff", "run", "--", "curl"],
                &["holdoff", "config", "get", "x"],
            ] {
                assert_eq!(with_default_command(line(unchanged)), line(unchanged));
            }
            let cli = Cli::parse_from(with_default_command(line(&["holdoff", "-c", "rc.json"])));
            assert_eq!(cli.command.name(), "proxy");
        }
    }
}
