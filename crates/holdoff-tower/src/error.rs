//! The error [`Retry`](crate::Retry) returns: what went wrong, the report, and the service's
//! own error.

use std::fmt;

use holdoff::RetryReport;

/// What went wrong.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The last attempt failed without a response (connection refused or reset, a TLS
    /// failure, the service's own error), and the retries ended there: the error is
    /// [`Error::into_source`], the report says how many attempts were made and why they
    /// stopped.
    Transport,
    /// The task's deadline came while an attempt was running: the attempt was cut, and
    /// nothing came back.
    DeadlineReached,
}

/// An error of [`Retry`](crate::Retry), with the [`RetryReport`] that every outcome carries.
///
/// # Examples
///
/// ```
/// use holdoff_tower::{Error, ErrorKind};
///
/// fn describe<E>(error: &Error<E>) -> String {
///     let report = error.report();
///     match error.kind() {
///         ErrorKind::DeadlineReached => format!("cut at the deadline, attempt {}", report.attempts),
///         _ => format!("failed after {} attempts ({})", report.attempts, report.reason()),
///     }
/// }
/// # let _ = describe::<std::io::Error>;
/// ```
pub struct Error<E> {
    kind: ErrorKind,
    report: RetryReport,
    source: Option<E>,
}

impl<E> Error<E> {
    pub(crate) fn transport(source: E, report: RetryReport) -> Error<E> {
        Error {
            kind: ErrorKind::Transport,
            report,
            source: Some(source),
        }
    }

    pub(crate) fn deadline_reached(report: RetryReport) -> Error<E> {
        Error {
            kind: ErrorKind::DeadlineReached,
            report,
            source: None,
        }
    }

    /// What went wrong.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// How the retries ended: attempts sent, the last decision, and when the server permits
    /// the next request.
    pub fn report(&self) -> &RetryReport {
        &self.report
    }

    /// The service's own error, for [`ErrorKind::Transport`].
    pub fn source_error(&self) -> Option<&E> {
        self.source.as_ref()
    }

    /// Takes the service's own error, for [`ErrorKind::Transport`].
    pub fn into_source(self) -> Option<E> {
        self.source
    }
}

impl<E> fmt::Display for Error<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let attempts = self.report.attempts;
        match self.kind {
            ErrorKind::Transport => write!(
                f,
                "send the request: attempt {attempts} failed without a response, and the \
                 retries ended there ({})",
                self.report.reason()
            ),
            ErrorKind::DeadlineReached => write!(
                f,
                "send the request: the task's deadline came while attempt {attempts} was \
                 running; re-queue the task, or give it a longer timeout"
            ),
        }
    }
}

impl<E: fmt::Debug> fmt::Debug for Error<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Error")
            .field("kind", &self.kind)
            .field("report", &self.report)
            .field("source", &self.source)
            .finish()
    }
}

impl<E: std::error::Error + 'static> std::error::Error for Error<E> {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source
            .as_ref()
            .map(|source| source as &(dyn std::error::Error + 'static))
    }
}
