//! `holdoff`: explain HTTP `Retry-After` values and what a client should do with them.
//!
//! Each subcommand lives in its own module with the same shape: a clap `Args` struct and a
//! `run` function that writes to the given output and returns the exit code, or a [`Failure`]
//! that [`main`] reports.
//!
//! # Exit codes
//!
//! - 0: success (for `explain`: the value is valid).
//! - 1: the command ran and found a problem (for `explain`: the value is malformed).
//! - 2: usage error (bad option or argument), or the output could not be written.
//! - 3: a client retried before its permitted time, or read a malformed hint as zero (`run`,
//!   `report`).
//! - 4: no request reached the proxy: nothing was tested (`run`, `report`; 0 with
//!   `--allow-no-traffic`).
#![forbid(unsafe_code)]

mod ca;
mod config;
mod demo;
mod duration;
mod explain;
mod proxy;
mod report;
mod run;
mod size;

use std::io::{self, Write};
use std::process::ExitCode;

/// mimalloc instead of the system allocator: the proxy allocates small buffers per request on
/// every worker thread, and measured A/B with wrk on loopback it serves 2-6% more small and
/// about 10% more 64 KiB responses per second.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use clap::{CommandFactory, Parser, Subcommand};

/// Honour HTTP Retry-After exactly as RFC 9110 defines it.
#[derive(Debug, Parser)]
#[command(name = "holdoff", version, propagate_version = true)]
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
        }
    }
}

/// Why a subcommand could not do its job.
#[derive(Debug)]
enum Failure {
    /// The arguments parsed but make no sense together; the message says what to change.
    Usage(String),
    /// Writing the output failed.
    Io(io::Error),
}

impl From<io::Error> for Failure {
    fn from(err: io::Error) -> Failure {
        Failure::Io(err)
    }
}

/// The exit code for a usage error, as clap uses it.
const EXIT_USAGE: u8 = 2;

fn main() -> ExitCode {
    let cli = Cli::parse();
    let name = cli.command.name();
    let mut stdout = io::stdout().lock();
    let result = match cli.command {
        Command::Explain(args) => explain::run(args, &mut stdout),
        Command::Ca(args) => ca::run(args, &mut stdout),
        Command::Proxy(args) => proxy::run(*args, std::env::args_os().collect(), &mut stdout),
        Command::Run(args) => run::run(*args, std::env::args_os().collect()),
        Command::Config(args) => config::run(args, &mut stdout),
        Command::Report(args) => report::run(args, &mut stdout),
        Command::Demo(args) => demo::run(args, &mut stdout),
    };
    let result = result.and_then(|code| {
        stdout.flush()?;
        Ok(code)
    });
    match result {
        Ok(code) => code,
        // The reader went away (`holdoff explain 120 | head -1`): nothing left to say.
        Err(Failure::Io(err)) if err.kind() == io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        Err(Failure::Io(err)) => {
            // If stderr is gone too there is nobody to tell.
            let _ = writeln!(io::stderr(), "holdoff: failed to write output: {err}");
            ExitCode::from(EXIT_USAGE)
        }
        Err(Failure::Usage(message)) => {
            // Formatted like clap's own errors, with the subcommand's usage; exits with 2.
            let kind = clap::error::ErrorKind::ValueValidation;
            let mut root = Cli::command();
            root.build();
            let err = match root.find_subcommand_mut(name) {
                Some(sub) => sub.error(kind, message),
                None => root.error(kind, message),
            };
            err.exit()
        }
    }
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
    }
}
