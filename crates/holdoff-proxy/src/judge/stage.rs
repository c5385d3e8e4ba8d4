//! The judge as a pipeline stage: opens windows from the hints responses carry, and answers
//! premature retries itself.

use std::fmt::{self, Write as _};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant, SystemTime};

use holdoff::clock::TokioClock;
use holdoff::{Attempt, JitterDraw, Policy, Receipt, ResponseInfo};
use http::{Request, Response, StatusCode, header};
use serde::{Deserialize, Serialize};

use super::{Check, Judge, KeyHasher, KeyText, KeyUrl, WindowKey};
use crate::fault::ratelimit::ceil_secs;
use crate::report::{Event, Recorder};
use crate::shared::{OnFailure, SharedCheck, SharedStore};
use crate::{Action, Body, Finish, RequestMeta, Stage};

/// What the judge found, for the log and the reports.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JudgeEvent {
    /// Premature or compliant.
    pub verdict: Verdict,
    /// Who retried (`ClientId`'s display form).
    pub client: String,
    /// The method.
    pub method: String,
    /// The URL.
    pub url: String,
    /// When the throttled response passed to the client (wall clock).
    pub throttled_at: SystemTime,
    /// When a retry was permitted (wall clock).
    pub permitted_at: SystemTime,
    /// When the retry arrived (wall clock).
    pub retried_at: SystemTime,
    /// How early (premature) or late (compliant) it came.
    pub by: Duration,
}

/// A verdict on a retry; in the event log and the reports, `"premature"` or `"compliant"`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// Came before the permitted time.
    Premature,
    /// Came at or after it.
    Compliant,
}

/// Marks a response the judge made itself, so it does not open a window of its own.
#[derive(Clone, Copy, Debug)]
struct JudgeAnswer;

/// The judge stage. Put it first, so that premature retries never reach a fault or the
/// upstream.
///
/// With [`JudgeStage::with_shared`], windows live in a store several proxies share as well as
/// in this proxy's own [`Judge`]: each request is judged by the store (one round trip), and a
/// window a hint opens is written there before the response reaches the client.
#[derive(Debug)]
pub struct JudgeStage {
    judge: Arc<Judge>,
    verdicts: Verdicts,
    hints: Policy,
    /// In header mode, the header's value per request id, from the request to its response.
    pending_headers: Mutex<std::collections::HashMap<u64, String>>,
    /// The store other proxies share, if any.
    shared: Option<Arc<SharedStore>>,
}

/// Where verdicts go: the stage's list, the log, and the recorder if it records.
#[derive(Clone, Debug, Default)]
struct Verdicts {
    events: Arc<Mutex<Vec<JudgeEvent>>>,
    /// Where throttles and verdicts go for the event log and the reports, if anywhere.
    recorder: Option<Arc<Recorder>>,
}

impl Verdicts {
    /// The recorder, when it is set and recording: events are built only then.
    fn recording(&self) -> Option<&Recorder> {
        self.recorder.as_deref().filter(|r| r.is_recording())
    }

    fn record(&self, verdict: Verdict, meta: &RequestMeta, times: [Instant; 2], by: Duration) {
        let arrival = meta.received;
        let wall = |at: Instant| wall_of(arrival, at);
        let event = JudgeEvent {
            verdict,
            client: meta.client.to_string(),
            method: meta.method.to_string(),
            url: meta.uri.to_string(),
            throttled_at: wall(times[0]),
            permitted_at: wall(times[1]),
            retried_at: arrival.wall,
            by,
        };
        match verdict {
            Verdict::Premature => tracing::warn!(
                client = %event.client, method = %event.method, url = %event.url,
                early_ms = by.as_millis() as u64, "premature retry"
            ),
            Verdict::Compliant => tracing::info!(
                client = %event.client, method = %event.method, url = %event.url,
                late_ms = by.as_millis() as u64, "compliant retry"
            ),
        }
        if let Some(recorder) = self.recording() {
            recorder.record(Event::from(&event));
        }
        self.events
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(event);
    }

    /// Records `check`'s verdict on the request, and answers a premature one.
    fn act(&self, check: Check, request: Request<Body>, meta: &RequestMeta) -> Action {
        match check {
            Check::Open => Action::Continue(request),
            Check::Compliant {
                throttled_at,
                permitted_at,
                late_by,
            } => {
                self.record(
                    Verdict::Compliant,
                    meta,
                    [throttled_at, permitted_at],
                    late_by,
                );
                Action::Continue(request)
            }
            Check::Premature {
                throttled_at,
                permitted_at,
                early_by,
            } => {
                self.record(
                    Verdict::Premature,
                    meta,
                    [throttled_at, permitted_at],
                    early_by,
                );
                let wait = permitted_at.saturating_duration_since(meta.received.instant);
                let seconds = ceil_secs(wait);
                Action::Respond(judge_answer(
                    StatusCode::TOO_MANY_REQUESTS,
                    seconds,
                    format!(
                        "premature retry: the server permitted a retry in {seconds}s; this request was not forwarded\n"
                    ),
                ))
            }
        }
    }
}

/// An answer of the judge's own, with `Retry-After: seconds`.
fn judge_answer(status: StatusCode, seconds: u64, text: String) -> Response<Body> {
    let mut response = Response::new(Body::from(text));
    *response.status_mut() = status;
    response
        .headers_mut()
        .insert(header::RETRY_AFTER, seconds.into());
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        http::HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response.extensions_mut().insert(JudgeAnswer);
    response
}

/// The answer to a watched request while the shared store fails and the mode is fail-closed.
pub(crate) fn fail_closed_answer(hold: Duration) -> Response<Body> {
    let seconds = ceil_secs(hold);
    judge_answer(
        StatusCode::SERVICE_UNAVAILABLE,
        seconds,
        format!(
            "holdoff: the shared state is unreachable and the proxy fails closed; retry in {seconds}s\n"
        ),
    )
}

/// A shared store's verdict as instants, against the request's arrival: the store measured
/// its durations from its own now, a moment later, so each instant is at worst a round trip
/// early — never later than the truth for the permitted time.
fn check_of(shared: SharedCheck, arrival: Instant) -> Check {
    let before = |d: Duration| arrival.checked_sub(d).unwrap_or(arrival);
    match shared {
        SharedCheck::Open => Check::Open,
        SharedCheck::Premature {
            since_throttle,
            early_by,
            permitted_in,
        } => Check::Premature {
            throttled_at: before(since_throttle),
            permitted_at: arrival + permitted_in,
            early_by,
        },
        SharedCheck::Compliant {
            since_throttle,
            late_by,
        } => Check::Compliant {
            throttled_at: before(since_throttle),
            permitted_at: before(late_by),
            late_by,
        },
    }
}

impl JudgeStage {
    /// A stage judging with `judge`.
    pub fn new(judge: Arc<Judge>) -> JudgeStage {
        JudgeStage {
            judge,
            verdicts: Verdicts::default(),
            hints: Policy::default(),
            pending_headers: Mutex::default(),
            shared: None,
        }
    }

    /// Records every throttle (a window opening) and every verdict in `recorder` too, for
    /// the event log and the reports.
    pub fn with_recorder(mut self, recorder: Arc<Recorder>) -> JudgeStage {
        self.verdicts.recorder = Some(recorder);
        self
    }

    /// Judges with windows in `store`, shared with other proxies, too: see
    /// [`shared`](crate::shared). This proxy's own judge keeps a copy of the windows opened
    /// here, for `/windows` and for failing open.
    pub fn with_shared(mut self, store: Arc<SharedStore>) -> JudgeStage {
        self.shared = Some(store);
        self
    }

    /// The recorder set with [`JudgeStage::with_recorder`].
    pub fn recorder(&self) -> Option<&Arc<Recorder>> {
        self.verdicts.recorder.as_ref()
    }

    /// The shared store set with [`JudgeStage::with_shared`].
    pub fn shared(&self) -> Option<&Arc<SharedStore>> {
        self.shared.as_ref()
    }

    /// Every verdict so far, in order.
    pub fn events(&self) -> Vec<JudgeEvent> {
        self.verdicts
            .events
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// The judge.
    pub fn judge(&self) -> &Arc<Judge> {
        &self.judge
    }

    /// The request's key parts, from its client id and URL as they display, without
    /// formatting either into a string.
    fn text<'a>(
        meta: &'a RequestMeta,
        origin: &'a Origin<'a>,
        header: Option<&'a str>,
    ) -> KeyText<'a> {
        KeyText {
            client: &meta.client,
            method: meta.method.as_str(),
            url: KeyUrl::Uri(&meta.uri),
            origin,
            header,
        }
    }

    /// The request's window key in this proxy's judge and, with a shared store, in the store.
    fn keys(&self, meta: &RequestMeta, header: Option<&str>) -> (WindowKey, Option<WindowKey>) {
        let origin = Origin(&meta.uri);
        let text = Self::text(meta, &origin, header);
        let local = self.judge.key_of(&text);
        let shared = self
            .shared
            .as_ref()
            .map(|_| KeyHasher::Stable.key_of(self.judge.mode(), &text));
        (local, shared)
    }

    /// Opens the window a throttled response's hint asks for, in this proxy's judge, and
    /// records it; returns the shared key and the wait, for the shared store.
    fn throttled(
        &self,
        response: &Response<Body>,
        meta: &RequestMeta,
    ) -> Option<(WindowKey, Duration)> {
        // Only header mode keeps a value per request: the others take no lock here.
        let header = match self.judge.mode() {
            super::KeyMode::Header(_) => self
                .pending_headers
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .remove(&meta.id),
            _ => None,
        };
        if response.extensions().get::<JudgeAnswer>().is_some() {
            return None;
        }
        // A success or redirect is no throttle, whatever rate-limit headers it carries
        // (`X-RateLimit-Remaining: 0` on the last allowed request): the client's next request
        // is not a retry.
        if response.status().as_u16() < 400 || !has_hint_header(response.headers()) {
            return None;
        }
        // The hint reaches the client now: the window opens from here.
        let receipt = Receipt::now(&TokioClock);
        let info = ResponseInfo::from_headers(response.status(), response.headers(), receipt);
        let attempt = Attempt {
            method: &meta.method,
            repeat_safe: true,
            number: 1,
            backoff: Duration::ZERO,
            jitter: JitterDraw::Exact(Duration::ZERO),
            remaining: None,
        };
        let verdict = self.hints.decide(&info, &attempt);
        let (Some(_), Some(permitted_at)) = (verdict.diagnostics.interval, verdict.permitted.at)
        else {
            return None;
        };
        let (local, shared) = self.keys(meta, header.as_deref());
        self.judge.open(local, receipt.instant, permitted_at);
        if let Some(recorder) = self.verdicts.recording() {
            recorder.record(Event::Throttle {
                at: receipt.wall,
                client: meta.client.to_string(),
                method: meta.method.to_string(),
                url: meta.uri.to_string(),
                status: response.status().as_u16(),
                permitted_at: wall_of(receipt, permitted_at),
            });
        }
        Some((
            shared?,
            permitted_at.saturating_duration_since(receipt.instant),
        ))
    }
}

/// The wall time of a monotonic instant, through the receipt's pair of readings.
pub(crate) fn wall_of(receipt: Receipt, at: Instant) -> SystemTime {
    if at >= receipt.instant {
        receipt.wall + (at - receipt.instant)
    } else {
        receipt.wall - (receipt.instant - at)
    }
}

/// `scheme://host:port` of a URL, the host in lowercase and the port explicit.
pub(crate) struct Origin<'a>(pub(crate) &'a http::Uri);

impl fmt::Display for Origin<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let uri = self.0;
        let scheme = uri.scheme_str().unwrap_or("http");
        let port = uri
            .port_u16()
            .unwrap_or(if scheme == "https" { 443 } else { 80 });
        write!(f, "{scheme}://")?;
        for c in uri.host().unwrap_or_default().chars() {
            f.write_char(c.to_ascii_lowercase())?;
        }
        write!(f, ":{port}")
    }
}

/// Whether a response carries any header a hint can come from: without one, no policy can
/// find an interval in it, so nothing needs to be read or built.
fn has_hint_header(headers: &http::HeaderMap) -> bool {
    headers
        .keys()
        .any(|name| holdoff::HINT_HEADERS.contains(&name.as_str()))
}

impl Stage for JudgeStage {
    fn on_request(&self, request: Request<Body>, meta: &RequestMeta) -> Action {
        let header = header_value(self, &request);
        let (local, shared) = self.keys(meta, header.as_deref());
        if let Some(value) = header {
            self.pending_headers
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .insert(meta.id, value);
        }
        let (Some(store), Some(shared)) = (&self.shared, shared) else {
            let check = self.judge.check(local, meta.received.instant);
            return self.verdicts.act(check, request, meta);
        };
        let (store, judge, verdicts, meta) = (
            Arc::clone(store),
            Arc::clone(&self.judge),
            self.verdicts.clone(),
            meta.clone(),
        );
        let penalty = judge.penalty_mode();
        Action::later(async move {
            let outcome = store.state().check(shared, penalty).await;
            let arrival = meta.received.instant;
            let check = match store.settle(outcome) {
                Some(found) => {
                    let check = check_of(found, arrival);
                    // This proxy's copy follows the store: a window closed elsewhere (or
                    // never opened here) is closed here too.
                    match check {
                        Check::Premature { .. } => judge.count(true),
                        Check::Compliant { .. } => {
                            judge.count(false);
                            judge.close(local);
                        }
                        Check::Open => judge.close(local),
                    }
                    check
                }
                None => match store.on_failure() {
                    OnFailure::FailClosed { hold } => {
                        return Action::Respond(fail_closed_answer(hold));
                    }
                    _ => judge.check(local, arrival),
                },
            };
            verdicts.act(check, request, &meta)
        })
    }

    fn on_response(&self, response: &mut Response<Body>, meta: &RequestMeta) {
        if self.shared.is_none() {
            self.throttled(response, meta);
        }
    }

    fn finish_response(&self, response: &Response<Body>, meta: &RequestMeta) -> Option<Finish> {
        let store = Arc::clone(self.shared.as_ref()?);
        let (key, wait) = self.throttled(response, meta)?;
        let retention = self.judge.retention_period();
        Some(Box::pin(async move {
            let outcome = store.state().open(key, wait, retention).await;
            store.settle(outcome);
        }))
    }
}

/// The value of the header a [`KeyMode::Header`](super::KeyMode::Header) judge keys by.
fn header_value(stage: &JudgeStage, request: &Request<Body>) -> Option<String> {
    match stage.judge.mode() {
        super::KeyMode::Header(name) => request
            .headers()
            .get(name.as_str())
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    mod origin {
        use super::*;

        #[test]
        fn lowercases_the_host_and_makes_the_port_explicit() {
            let uri: http::Uri = "HTTPS://Api.Example/a?b".parse().unwrap();
            assert_eq!(Origin(&uri).to_string(), "https://api.example:443");
            let uri: http::Uri = "http://127.0.0.1:8080/".parse().unwrap();
            assert_eq!(Origin(&uri).to_string(), "http://127.0.0.1:8080");
        }
    }

    mod has_hint_header {
        use super::*;

        #[test]
        fn finds_each_hint_and_nothing_else() {
            for name in holdoff::HINT_HEADERS {
                let mut headers = http::HeaderMap::new();
                headers.insert("content-type", "text/plain".parse().unwrap());
                headers.insert(name, "1".parse().unwrap());
                assert!(has_hint_header(&headers), "{name}");
            }
            let mut headers = http::HeaderMap::new();
            headers.insert("x-ratelimit-remaining", "0".parse().unwrap());
            headers.insert("date", "Sun, 06 Nov 1994 08:49:37 GMT".parse().unwrap());
            assert!(!has_hint_header(&headers));
        }
    }
}
