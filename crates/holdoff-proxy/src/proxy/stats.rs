//! Counters kept while the proxy runs, and the [`Summary`] made of them at the end.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use http::StatusCode;

/// Lock-free counters, bumped once or twice per request.
#[derive(Debug, Default)]
pub(crate) struct Stats {
    /// Responses by status class, 1xx to 5xx.
    by_class: [AtomicU64; 5],
    /// Requests that reached the handler (not `CONNECT`s), answered or not.
    received: AtomicU64,
    aborted: AtomicU64,
    tunnels: AtomicU64,
    intercepted: AtomicU64,
    errors: AtomicU64,
    rejected: AtomicU64,
    interception_failures: AtomicU64,
}

impl Stats {
    /// A response to a request: never to a `CONNECT`, which is a [`tunnel`](Stats::tunnel),
    /// an [`intercepted`](Stats::intercepted) one, or an [`error`](Stats::error).
    pub(crate) fn response(&self, status: StatusCode) {
        let class = usize::from(status.as_u16() / 100).clamp(1, 5) - 1;
        self.by_class[class].fetch_add(1, Ordering::Relaxed);
    }

    /// A request reached the proxy (not a `CONNECT`): counted whether or not it is answered,
    /// so that one cut at the end of the grace period is still a request.
    pub(crate) fn received(&self) {
        self.received.fetch_add(1, Ordering::Relaxed);
    }

    /// A request dropped without an answer (a stage's [`Abort`](crate::Action::Abort)).
    pub(crate) fn aborted(&self) {
        self.aborted.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn tunnel(&self) {
        self.tunnels.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn intercepted(&self) {
        self.intercepted.fetch_add(1, Ordering::Relaxed);
    }

    /// An answer the proxy made because something failed (400, 502, 504, …).
    pub(crate) fn error(&self) {
        self.errors.fetch_add(1, Ordering::Relaxed);
    }

    /// An intercepted tunnel whose TLS handshake with the client failed. Counted as an error.
    pub(crate) fn interception_failed(&self) {
        self.interception_failures.fetch_add(1, Ordering::Relaxed);
        self.error();
    }

    /// A request hyper refused before it reached the pipeline (malformed: 400, too large:
    /// 431). Counted as a 4xx response and an error.
    pub(crate) fn rejected(&self) {
        self.rejected.fetch_add(1, Ordering::Relaxed);
        self.by_class[3].fetch_add(1, Ordering::Relaxed);
        self.error();
    }

    pub(crate) fn summary(&self, uptime: Duration, cut: u64) -> Summary {
        let load = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
        let by_class = self.by_class.each_ref().map(load);
        let answered = by_class.iter().sum::<u64>() + load(&self.aborted);
        Summary {
            // Those answered, and those still in flight when the grace period cut them.
            requests: answered.max(load(&self.received) + load(&self.rejected)),
            by_class,
            aborted: load(&self.aborted),
            tunnels: load(&self.tunnels),
            intercepted: load(&self.intercepted),
            errors: load(&self.errors),
            interception_failures: load(&self.interception_failures),
            cut,
            uptime,
        }
    }
}

/// What the proxy did while it ran; `Display` writes it as one paragraph.
///
/// # Examples
///
/// ```
/// use holdoff_proxy::Summary;
///
/// let summary = Summary::default();
/// assert_eq!(summary.to_string(), "holdoff proxy: no requests in 0.0s.");
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Summary {
    /// Requests answered or dropped, those inside intercepted tunnels and those refused as
    /// malformed or too large included. A `CONNECT` is not a request: it is counted in
    /// `tunnels` or `intercepted`, or in `errors` when it failed.
    pub requests: u64,
    /// Responses to those requests by status class: `[1xx, 2xx, 3xx, 4xx, 5xx]`.
    pub by_class: [u64; 5],
    /// Requests dropped without an answer by a stage.
    pub aborted: u64,
    /// `CONNECT` tunnels relayed blind.
    pub tunnels: u64,
    /// `CONNECT` tunnels intercepted: TLS terminated (or plain HTTP inside served) and the
    /// requests inside seen, or a TLS handshake attempted and failed.
    pub intercepted: u64,
    /// Answers the proxy made because something failed: malformed or oversized requests,
    /// unreachable, failing or slow upstreams; and failed interceptions.
    pub errors: u64,
    /// Intercepted tunnels whose TLS handshake with the client failed (the client does not
    /// trust the CA, speaks something else, or closed), counted in `errors` too: their
    /// requests never reached the proxy.
    pub interception_failures: u64,
    /// Connections still busy when the grace period ended, and cut.
    pub cut: u64,
    /// How long the proxy ran.
    pub uptime: Duration,
}

impl fmt::Display for Summary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let uptime = self.uptime.as_secs_f64();
        if self.requests == 0 && self.tunnels == 0 && self.intercepted == 0 && self.errors == 0 {
            return write!(f, "holdoff proxy: no requests in {uptime:.1}s.");
        }
        write!(
            f,
            "holdoff proxy: {} {} in {uptime:.1}s",
            self.requests,
            plural(self.requests, "request", "requests")
        )?;
        let classes: Vec<String> = self
            .by_class
            .iter()
            .enumerate()
            .filter(|(_, count)| **count > 0)
            .map(|(class, count)| format!("{count} {}xx", class + 1))
            .collect();
        if !classes.is_empty() {
            write!(f, " ({})", classes.join(", "))?;
        }
        write!(
            f,
            "; {} {} tunnelled blind, {} intercepted; {} {}",
            self.tunnels,
            plural(self.tunnels, "connection", "connections"),
            self.intercepted,
            self.errors,
            plural(self.errors, "error", "errors"),
        )?;
        if self.interception_failures > 0 {
            write!(
                f,
                " ({} failed TLS {})",
                self.interception_failures,
                plural(self.interception_failures, "interception", "interceptions")
            )?;
        }
        if self.aborted > 0 {
            write!(f, "; {} dropped by a stage", self.aborted)?;
        }
        if self.cut > 0 {
            write!(
                f,
                "; {} {} cut at shutdown",
                self.cut,
                plural(self.cut, "connection", "connections")
            )?;
        }
        f.write_str(".")
    }
}

fn plural(count: u64, one: &'static str, many: &'static str) -> &'static str {
    if count == 1 { one } else { many }
}

#[cfg(test)]
mod tests {
    use super::*;

    mod summary {
        use super::*;

        #[test]
        fn counts_a_request_cut_before_its_answer() {
            let stats = Stats::default();
            for _ in 0..3 {
                stats.received();
            }
            stats.response(StatusCode::OK);
            stats.response(StatusCode::OK);
            // The third was in flight when the grace period ended.
            let summary = stats.summary(Duration::from_secs(1), 1);
            assert_eq!(summary.requests, 3);
            assert_eq!(summary.by_class, [0, 2, 0, 0, 0]);
        }

        #[test]
        fn counts_each_class_and_every_kind_of_event() {
            let stats = Stats::default();
            stats.response(StatusCode::OK);
            stats.response(StatusCode::OK);
            stats.response(StatusCode::TOO_MANY_REQUESTS);
            stats.response(StatusCode::BAD_GATEWAY);
            stats.error();
            stats.rejected();
            stats.tunnel();
            stats.intercepted();
            stats.aborted();
            let summary = stats.summary(Duration::from_millis(12_340), 1);
            assert_eq!(summary.requests, 6);
            assert_eq!(summary.by_class, [0, 2, 0, 2, 1]);
            assert_eq!(summary.errors, 2);
            assert_eq!(
                summary.to_string(),
                "holdoff proxy: 6 requests in 12.3s (2 2xx, 2 4xx, 1 5xx); 1 connection \
                 tunnelled blind, 1 intercepted; 2 errors; 1 dropped by a stage; 1 connection \
                 cut at shutdown."
            );
        }

        #[test]
        fn tunnels_are_not_requests() {
            let stats = Stats::default();
            stats.tunnel();
            stats.intercepted();
            stats.response(StatusCode::OK);
            let summary = stats.summary(Duration::from_secs(1), 0);
            assert_eq!(
                summary.requests, 1,
                "the request inside the intercepted tunnel"
            );
            assert_eq!(
                summary.to_string(),
                "holdoff proxy: 1 request in 1.0s (1 2xx); 1 connection tunnelled blind, 1 \
                 intercepted; 0 errors."
            );
        }

        #[test]
        fn a_failed_connect_alone_is_still_reported() {
            let stats = Stats::default();
            stats.error();
            assert_eq!(
                stats.summary(Duration::from_secs(1), 0).to_string(),
                "holdoff proxy: 0 requests in 1.0s; 0 connections tunnelled blind, 0 \
                 intercepted; 1 error."
            );
        }

        #[test]
        fn a_failed_interception_is_an_error_and_says_so() {
            let stats = Stats::default();
            stats.intercepted();
            stats.interception_failed();
            let summary = stats.summary(Duration::from_secs(1), 0);
            assert_eq!((summary.errors, summary.interception_failures), (1, 1));
            assert_eq!(
                summary.to_string(),
                "holdoff proxy: 0 requests in 1.0s; 0 connections tunnelled blind, 1 \
                 intercepted; 1 error (1 failed TLS interception)."
            );
        }

        #[test]
        fn says_so_when_nothing_happened() {
            let summary = Stats::default().summary(Duration::from_secs(3), 0);
            assert_eq!(summary.to_string(), "holdoff proxy: no requests in 3.0s.");
        }
    }
}
