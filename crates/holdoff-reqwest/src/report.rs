//! The report the middleware attaches to the response it hands back: holdoff's own
//! [`RetryReport`], the same type holdoff-tower attaches and holdoff's retry loop returns.

use holdoff::RetryReport;

/// Reads the [`RetryReport`] the middleware attached to a response.
///
/// A deferred request is an ordinary response, not an error: the caller decides whether to
/// re-queue the task for [`RetryReport::requeue_at`] instead of retrying early.
///
/// # Examples
///
/// ```
/// use holdoff_reqwest::RetryReportExt;
///
/// fn requeue_at(response: &reqwest::Response) -> Option<std::time::SystemTime> {
///     let report = response.retry_report()?;
///     if report.is_deferred() { report.requeue_at().time() } else { None }
/// }
/// # let _ = requeue_at;
/// ```
pub trait RetryReportExt {
    /// The report, if the response went through the middleware.
    fn retry_report(&self) -> Option<&RetryReport>;
}

impl RetryReportExt for reqwest::Response {
    fn retry_report(&self) -> Option<&RetryReport> {
        self.extensions().get::<RetryReport>()
    }
}
