//! [`Failure`]: why a subcommand could not do its job, and the exit code that says so.

use std::io;

use crate::exit_codes;

/// Why a subcommand could not do its job, or what it found wrong: [`main`](crate::main) reports
/// it and exits with its [`exit_code`](Failure::exit_code).
///
/// A variant with a message is printed by [`main`](crate::main); one without has been reported where it
/// happened (the explanation, the problems in a file, the verdict say it already).
#[derive(Debug)]
pub(crate) enum Failure {
    /// The arguments parsed but make no sense together; the message says what to change.
    Usage(String),
    /// Writing the output failed.
    Io(io::Error),
    /// `report`: the event log cannot be read; the message says where and why.
    EventLog(String),
    /// `report`: a report could not be written; each one that was not is named on stderr.
    Reports,
    /// `explain`: the value is malformed; the explanation says why.
    Malformed,
    /// `config`: the file has problems, each printed on stderr.
    Config,
    /// `ca`: there is no CA yet, or it cannot be read or written; stderr says what to do.
    Ca,
    /// `demo`: the verdict is not the expected one; stderr says why.
    Unexpected,
    /// Something holdoff needs could not be had or done at run time: the async runtime, a
    /// port, a temporary directory, a file to write, the command to wait for. The message
    /// fits after `holdoff: `.
    Runtime(String),
    /// A client retried before its permitted time (or read a malformed hint as zero).
    Premature,
    /// No request reached the proxy, or a client's TLS handshake with it failed.
    NotTested,
    /// `run`: the command was not found; the message says which and what to check.
    NotFound(String),
    /// `run`: the command was found but could not be run; the message says why.
    CannotExecute(String),
    /// `run`: the command failed with this status (never 0).
    Command(u8),
}

impl From<io::Error> for Failure {
    fn from(err: io::Error) -> Failure {
        Failure::Io(err)
    }
}

impl Failure {
    /// The exit code that reports this failure (see [`exit_codes`]).
    pub(crate) fn exit_code(&self) -> u8 {
        match self {
            // The reader went away (`holdoff explain 120 | head -1`): nothing left to say.
            Failure::Io(err) if err.kind() == io::ErrorKind::BrokenPipe => exit_codes::SUCCESS,
            Failure::Usage(_) | Failure::Io(_) | Failure::EventLog(_) | Failure::Reports => {
                exit_codes::USAGE
            }
            Failure::Malformed
            | Failure::Config
            | Failure::Ca
            | Failure::Unexpected
            | Failure::Runtime(_) => exit_codes::FAILED,
            Failure::Premature => exit_codes::PREMATURE,
            Failure::NotTested => exit_codes::NOT_TESTED,
            Failure::NotFound(_) => exit_codes::NOT_FOUND,
            Failure::CannotExecute(_) => exit_codes::CANNOT_EXECUTE,
            Failure::Command(status) => *status,
        }
    }
}
