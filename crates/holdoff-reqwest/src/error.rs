//! The middleware's own error, returned as `reqwest_middleware::Error::Middleware`.

use std::fmt;
use std::time::{Instant, SystemTime};

use holdoff::{HttpDate, Permitted, RetryReport};
use http::StatusCode;

/// What went wrong.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The request was sent once and a retry is needed, but its body is a stream that cannot
    /// be cloned, so it cannot be sent again.
    BodyNotCloneable,
    /// The gate holds the request's key closed until after the task's deadline, so the
    /// request was not sent (again).
    DeferredAtGate,
    /// The last attempt failed without a response (connection refused or reset, a TLS
    /// failure, a timeout, or a later middleware's error), and the retries ended there:
    /// [`std::error::Error::source`] is that error, [`Error::report`] says how many attempts
    /// were made and why they stopped (out of attempts, not safe to repeat, deferred).
    Transport,
    /// The task's deadline came while the first attempt was still running: the attempt was
    /// cut, and nothing came back. (When an earlier attempt had a response, that response is
    /// returned instead, its report saying `deadline-reached`.)
    DeadlineReached,
    /// The retry loop ended in a way this version of the middleware does not know; the
    /// report says how.
    Unknown,
}

/// Every error the middleware returns, transport errors included, so that the
/// [`RetryReport`] is always there: attempts sent, the last decision and when the server
/// permits the next request.
///
/// It reaches the caller inside `reqwest_middleware::Error::Middleware`; downcast it to read
/// the report and the details, and to take back the response that could not be retried. A
/// transport error is its [`source`](std::error::Error::source):
///
/// ```
/// use holdoff_reqwest::{Error, ErrorKind};
///
/// fn unretried(error: reqwest_middleware::Error) -> Option<reqwest::Response> {
///     let reqwest_middleware::Error::Middleware(error) = error else { return None };
///     let error = error.downcast::<Error>().ok()?;
///     match error.kind() {
///         ErrorKind::BodyNotCloneable => error.into_response(),
///         _ => None,
///     }
/// }
///
/// fn attempts_made(error: &reqwest_middleware::Error) -> Option<u32> {
///     let reqwest_middleware::Error::Middleware(error) = error else { return None };
///     Some(error.downcast_ref::<Error>()?.report().attempts)
/// }
/// # let _ = (unretried, attempts_made);
/// ```
pub struct Error {
    kind: ErrorKind,
    status: Option<StatusCode>,
    report: RetryReport,
    response: Option<reqwest::Response>,
    source: Option<reqwest_middleware::Error>,
}

impl Error {
    pub(crate) fn new(kind: ErrorKind, report: RetryReport) -> Error {
        Error {
            kind,
            status: None,
            report,
            response: None,
            source: None,
        }
    }

    pub(crate) fn with_response(mut self, response: reqwest::Response) -> Error {
        self.status = Some(response.status());
        self.response = Some(response);
        self
    }

    pub(crate) fn with_source(mut self, source: reqwest_middleware::Error) -> Error {
        self.source = Some(source);
        self
    }

    /// The error of the last attempt (reqwest's, or a later middleware's), for
    /// [`ErrorKind::Transport`] and a [`ErrorKind::BodyNotCloneable`] request whose attempt
    /// failed.
    pub fn transport(&self) -> Option<&reqwest_middleware::Error> {
        self.source.as_ref()
    }

    /// What went wrong.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// The status of the response that would have been retried, if there was one.
    pub fn status(&self) -> Option<StatusCode> {
        self.status
    }

    /// How the retries ended: attempts sent, the last decision, and when the server (or
    /// the gate) permits the next request.
    pub fn report(&self) -> &RetryReport {
        &self.report
    }

    /// When the server (or the gate) permits the next request, on the monotonic clock;
    /// `None` when it named no time.
    pub fn permitted_at(&self) -> Option<Instant> {
        self.permitted().and_then(|p| p.at)
    }

    /// When the server (or the gate) permits the next request, on the wall clock; `None`
    /// when it named no time.
    pub fn permitted_wall(&self) -> Option<SystemTime> {
        self.report.requeue_at().time()
    }

    fn permitted(&self) -> Option<Permitted> {
        self.report.permitted
    }

    /// The response that would have been retried, if there was one.
    pub fn response(&self) -> Option<&reqwest::Response> {
        self.response.as_ref()
    }

    /// Takes the response that would have been retried, body unread, if there was one.
    pub fn into_response(self) -> Option<reqwest::Response> {
        self.response
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.kind {
            ErrorKind::BodyNotCloneable => {
                f.write_str("retry a request whose body is a stream that cannot be cloned")?;
                match self.status {
                    Some(status) => write!(f, ": the server answered {status}")?,
                    None => f.write_str(": the first attempt failed")?,
                }
                if let Some(after) = self.permitted().map(|p| p.after).filter(|a| !a.is_zero()) {
                    write!(f, " and permits a retry after {after:?}")?;
                    if let Some(date) = self.permitted_wall().and_then(HttpDate::from_system_time) {
                        write!(f, " ({date})")?;
                    }
                }
                f.write_str(
                    "; send the body as bytes (e.g. `reqwest::Body::from(Vec<u8>)`) so that \
                     holdoff can retry it, or retry it yourself",
                )
            }
            ErrorKind::DeferredAtGate => {
                f.write_str(
                    "send the request: the gate keeps its server closed until after the \
                     task's deadline",
                )?;
                if let Some(date) = self.permitted_wall().and_then(HttpDate::from_system_time) {
                    write!(f, " (a request is permitted at {date})")?;
                }
                Ok(())
            }
            ErrorKind::Transport => {
                let attempts = self.report.attempts;
                let reason = self.report.reason();
                write!(
                    f,
                    "send the request: attempt {attempts} failed without a response, and the \
                     retries ended there ({reason})"
                )
            }
            ErrorKind::DeadlineReached => f.write_str(
                "send the request: the task's deadline came while the attempt was running; \
                 re-queue the task, or give it a longer timeout",
            ),
            ErrorKind::Unknown => write!(
                f,
                "send the request: the retries ended ({})",
                self.report.reason()
            ),
        }
    }
}

impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Error")
            .field("kind", &self.kind)
            .field("status", &self.status)
            .field("report", &self.report)
            .field("source", &self.source)
            .finish_non_exhaustive()
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source
            .as_ref()
            .map(|source| source as &(dyn std::error::Error + 'static))
    }
}

impl From<Error> for reqwest_middleware::Error {
    fn from(error: Error) -> reqwest_middleware::Error {
        reqwest_middleware::Error::Middleware(anyhow::Error::new(error))
    }
}
