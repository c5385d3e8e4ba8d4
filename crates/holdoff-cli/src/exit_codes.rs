//! Every exit code `holdoff` returns, in one place (as nextest's `exit_codes.rs`).
//!
//! The subcommands return a [`Failure`](crate::failure::Failure) saying what went wrong;
//! [`Failure::exit_code`](crate::failure::Failure::exit_code) maps it to one of these, and only
//! [`main`](crate::main) turns the code into the process's exit status. Besides these,
//! `holdoff run` exits with its command's own status when the command fails (128 + S when
//! signal S ended it), which can be any number, these included: its summary, or its JSON
//! report, tells which it was.
//!
//! The `--help` of each subcommand, the README and `docs/` say which of these it returns;
//! `holdoff --help` lists them all ([`help`]).

/// Success: the command did what was asked and found nothing wrong (`explain`: the value is
/// valid; `run`: the command succeeded and no client retried early).
pub(crate) const SUCCESS: u8 = 0;

/// The command ran and found a problem, or could not do its job, and says why on stderr:
/// `explain`: the value is malformed; `config`: the file has problems, or the result cannot
/// be written; `ca`: there is no CA yet, or it cannot be read or written; `demo`: the verdict
/// is not the expected one; `proxy`, `run`, `demo`: the proxy could not start (port in use,
/// CA unreadable, no temporary directory).
pub(crate) const FAILED: u8 = 1;

/// A usage error: a bad option or argument (clap exits with the same code for the ones it
/// finds itself), a config that does not load, an event log `report` cannot read, or output
/// or a report that cannot be written.
pub(crate) const USAGE: u8 = 2;

/// A client retried before its `Retry-After` had passed, or sooner than the minimum backoff
/// after a malformed one (read as zero): `run` (even if the command succeeded) and `report`;
/// `check`: a scenario failed.
pub(crate) const PREMATURE: u8 = 3;

/// No request reached the proxy, so nothing was tested (as nextest exits 4 when no test ran),
/// or a client's TLS handshake with the proxy failed: `run` and `report`; `check`: no
/// scenario was tested. With
/// `--allow-no-traffic`, a run without requests exits [`SUCCESS`] instead (not one whose
/// handshakes failed).
pub(crate) const NOT_TESTED: u8 = 4;

/// `run`, `check`: the command was found but could not be run (not executable), as a shell
/// has it.
pub(crate) const CANNOT_EXECUTE: u8 = 126;

/// `run`, `check`: the command was not found, as a shell has it.
pub(crate) const NOT_FOUND: u8 = 127;

/// The table at the end of `holdoff --help`.
pub(crate) fn help() -> String {
    format!(
        "\
Exit status (each subcommand's --help says which it returns):
  {SUCCESS:<4} success: nothing wrong found
  {FAILED:<4} a problem found (explain: a malformed value; config: a file with problems), or the
       command could not do its job (no CA, the proxy could not start)
  {USAGE:<4} a usage or config error, an unreadable event log, or output that cannot be written
  {PREMATURE:<4} a client retried before its Retry-After had passed (run, report; check: a
       scenario failed)
  {NOT_TESTED:<4} no request reached the proxy: nothing was tested (run, report, check)
  {CANNOT_EXECUTE:<4} run, check: the command could not be run (not executable)
  {NOT_FOUND:<4} run, check: the command was not found
  N    run: otherwise the command's own status, when it failed"
    )
}
