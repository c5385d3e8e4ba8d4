//! What a request can carry, in its extensions or headers, to steer the policy: holdoff's
//! own markers, so one request type steers the tower and reqwest integrations alike.

use std::sync::{Arc, Mutex, PoisonError};

use holdoff::request::Markers;
use holdoff::{Decision, DeferReason, RetryReport};
use http::Request;

/// The markers `request` carries.
pub(crate) fn markers<B>(request: &Request<B>) -> Markers {
    Markers::of(request.headers(), request.extensions())
}

/// The gate key of `request`: its [`GateKey`](holdoff::request::GateKey) if it has one,
/// else its URI's.
pub(crate) fn gate_key<B>(request: &Request<B>) -> Option<String> {
    markers(request)
        .gate_key
        .or_else(|| holdoff::gate::key_of(request.uri()))
}

/// Where the policy leaves each judged attempt's report for [`Retry`](crate::Retry), which
/// hands it back with an error: it travels with the request, in its extensions, from the
/// service to the request's own clone of the policy.
#[derive(Clone, Debug, Default)]
pub(crate) struct ReportSlot(Arc<Mutex<Progress>>);

#[derive(Debug, Default)]
struct Progress {
    /// The last judged attempt's report.
    last: Option<RetryReport>,
    /// Attempts sent so far, the one in flight included.
    sent: u32,
}

impl ReportSlot {
    fn progress(&self) -> std::sync::MutexGuard<'_, Progress> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The slot `request` carries, if [`Retry`](crate::Retry) gave it one.
    pub(crate) fn of<B>(request: &Request<B>) -> Option<&ReportSlot> {
        request.extensions().get::<ReportSlot>()
    }

    /// An attempt is being sent.
    pub(crate) fn sending(&self) {
        let mut progress = self.progress();
        progress.sent = progress.sent.saturating_add(1);
    }

    /// The policy judged an attempt.
    pub(crate) fn judged(&self, report: &RetryReport) {
        self.progress().last = Some(report.clone());
    }

    /// The last judged attempt's report.
    pub(crate) fn last(&self) -> Option<RetryReport> {
        self.progress().last.clone()
    }

    /// The report of a task cut at its deadline: every attempt sent counts, the one in
    /// flight included, and the cut attempt named no time.
    pub(crate) fn cut(&self) -> RetryReport {
        let sent = self.progress().sent.max(1);
        RetryReport::new(sent, Decision::Defer(DeferReason::DeadlineReached))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use holdoff::request::GateKey;

    mod gate_key {
        use super::*;

        #[test]
        fn defaults_to_scheme_host_and_port() {
            let request = Request::get("https://a.test/v1?q=1")
                .body(())
                .expect("request");
            assert_eq!(gate_key(&request).as_deref(), Some("https://a.test:443"));
        }

        #[test]
        fn an_extension_overrides_it() {
            let request = Request::get("https://a.test/v1")
                .extension(GateKey("shared".to_owned()))
                .body(())
                .expect("request");
            assert_eq!(gate_key(&request).as_deref(), Some("shared"));
        }
    }
}
