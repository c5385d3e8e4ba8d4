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
}

/// An error of the middleware itself, as opposed to the transport errors reqwest reports.
///
/// It reaches the caller inside `reqwest_middleware::Error::Middleware`; downcast it to read
/// the details, and to take back the response that could not be retried:
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
/// # let _ = unretried;
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
