//! The judge as a pipeline stage: opens windows from the hints responses carry, and answers
//! premature retries itself.

use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use holdoff::clock::Clock;
use holdoff::{Earliest, Policy, Receipt, ResponseInfo};
use http::{Method, Request, Response, StatusCode, header};

use crate::judge::lines::{Budget, LINES_PER_SECOND};
use crate::judge::{Check, Judge, WindowKey, WindowKind};
use crate::judge::{HintKind, JudgeEvent, Record, ThrottleEvent, Verdict};
use crate::proxy::reply::{OwnAnswer, graph_error, is_graph_host};
use crate::secs::ceil_secs;
use crate::shared::{OnFailure, SharedCheck, SharedStore};
use crate::{Action, Body, Finish, Notes, RequestMeta, Stage};

/// In header mode, the value of the header a request is keyed by: left for its response,
/// whose window opens under the same key.
#[derive(Clone, Debug)]
struct KeyHeader(String);

/// The judge stage: its [`Pipeline`](crate::Pipeline) slot is before the faults, so that
/// premature retries never reach a fault or the upstream.
///
/// With [`JudgeStage::with_shared`], windows live in a store several proxies share as well as
/// in this proxy's own [`Judge`]: each request is judged by the store (one round trip), and a
/// window a hint opens is written there before the response reaches the client.
pub struct JudgeStage {
    judge: Arc<Judge>,
    /// The pipeline's: a window opens when its hint reaches the client.
    clock: Arc<dyn Clock>,
    verdicts: Verdicts,
    hints: Policy,
    /// How long a retry must wait after a throttle whose hint was malformed or missing.
    min_backoff: Duration,
    /// The store other proxies share, if any.
    shared: Option<Arc<SharedStore>>,
}

/// How many verdicts [`JudgeStage::events`] keeps by default: the first.
pub const KEPT_EVENTS: usize = 10_000;

/// Where verdicts go: the stage's list (the first of them), the log (within a budget of
/// lines), and the recorder if it records.
#[derive(Clone, Debug, Default)]
struct Verdicts {
    events: Arc<Kept>,
    lines: Arc<Budgets>,
    /// Where throttles and verdicts go for the event log and the reports, if anywhere.
    recorder: Option<Arc<dyn Record>>,
}

impl Verdicts {
    /// The recorder, when it is set and recording: events are built only then.
    fn recording(&self) -> Option<&dyn Record> {
        self.recorder.as_deref().filter(|r| r.is_recording())
    }

    fn record(
        &self,
        verdict: Verdict,
        request: &Request<Body>,
        meta: &RequestMeta,
        throttled_at: Instant,
        permitted_at: Option<Instant>,
        by: Option<Duration>,
    ) {
        self.log(verdict, meta, by);
        let recorder = self.recording();
        let keep = self.events.wants_more();
        if recorder.is_none() && !keep {
            return;
        }
        let arrival = meta.received;
        let wall = |at: Instant| wall_of(arrival, at);
        let event = JudgeEvent {
            verdict,
            client: meta.client.to_string(),
            user_agent: user_agent(meta),
            idempotency_key: request.headers().contains_key(IDEMPOTENCY_KEY),
            method: meta.method.to_string(),
            url: meta.target.to_string(),
            throttled_at: wall(throttled_at),
            permitted_at: permitted_at.map(wall),
            retried_at: arrival.wall,
            by,
        };
        match recorder {
            Some(recorder) if keep => {
                recorder.retry(event.clone());
                self.events.push(event);
            }
            Some(recorder) => recorder.retry(event),
            None => self.events.push(event),
        }
    }

    /// Logs the verdict, within its budget of lines ([`lines`](super::lines)).
    fn log(&self, verdict: Verdict, meta: &RequestMeta, by: Option<Duration>) {
        let second = meta
            .received
            .wall
            .duration_since(UNIX_EPOCH)
            .map_or(0, |since| since.as_secs());
        let take = self.lines.of(verdict).take(second);
        if take.left_out > 0 {
            log_left_out(verdict, take.left_out);
        }
        if !take.log {
            return;
        }
        let ms = by.map_or(u64::MAX, |by| by.as_millis() as u64);
        let (client, method, url) = (&meta.client, &meta.method, &meta.target);
        match verdict {
            Verdict::Premature => tracing::warn!(
                %client, %method, %url, early_ms = ms, "premature retry"
            ),
            Verdict::ReadAsZero => tracing::warn!(
                %client, %method, %url, early_ms = ms,
                "retried sooner than the minimum backoff after a malformed Retry-After: read as zero?"
            ),
            Verdict::NoBackoff => tracing::info!(
                %client, %method, %url, early_ms = ms,
                "retried sooner than the minimum backoff after a throttle without a hint"
            ),
            Verdict::Compliant => tracing::info!(
                %client, %method, %url, late_ms = ms, "compliant retry"
            ),
        }
    }

    /// Records `check`'s verdict on the request, and answers a retry that broke a window.
    fn act(&self, check: Check, request: Request<Body>, meta: &RequestMeta) -> Action {
        let (permitted_at, text) = match check {
            Check::Open => return Action::Continue(request),
            Check::Compliant {
                throttled_at,
                permitted_at,
                late_by,
            } => {
                let verdict = Verdict::Compliant;
                self.record(
                    verdict,
                    &request,
                    meta,
                    throttled_at,
                    Some(permitted_at),
                    Some(late_by),
                );
                return Action::Continue(request);
            }
            Check::TooSoon {
                kind: WindowKind::NoHint,
                throttled_at,
                permitted_at,
                early_by,
            } => {
                let verdict = Verdict::NoBackoff;
                self.record(
                    verdict,
                    &request,
                    meta,
                    throttled_at,
                    Some(permitted_at),
                    Some(early_by),
                );
                return Action::Continue(request);
            }
            Check::TooSoon {
                throttled_at,
                permitted_at,
                early_by,
                ..
            } => {
                let verdict = Verdict::ReadAsZero;
                self.record(
                    verdict,
                    &request,
                    meta,
                    throttled_at,
                    Some(permitted_at),
                    Some(early_by),
                );
                (
                    Some(permitted_at),
                    "retry too soon: the Retry-After this client got was malformed, which is \
                     never zero; this request was not forwarded",
                )
            }
            Check::Unbounded { throttled_at } => {
                self.record(Verdict::Premature, &request, meta, throttled_at, None, None);
                (
                    None,
                    "premature retry: the server asked for a wait longer than any clock can \
                     hold; this request was not forwarded",
                )
            }
            Check::Premature {
                throttled_at,
                permitted_at,
                early_by,
            } => {
                let verdict = Verdict::Premature;
                self.record(
                    verdict,
                    &request,
                    meta,
                    throttled_at,
                    Some(permitted_at),
                    Some(early_by),
                );
                (
                    Some(permitted_at),
                    "premature retry: the server permitted a retry later; this request was not \
                     forwarded",
                )
            }
        };
        let seconds = permitted_at.map_or(u64::from(u32::MAX), |at| {
            ceil_secs(at.saturating_duration_since(meta.received.instant))
        });
        let text = format!("{text} (Retry-After: {seconds})\n");
        let mut response = if is_graph_host(meta.target.host()) {
            // As Dev Proxy's RetryAfterPlugin answers Graph requests.
            graph_error(StatusCode::TOO_MANY_REQUESTS, &text)
        } else {
            judge_answer(StatusCode::TOO_MANY_REQUESTS, text)
        };
        mark_judge_answer(&mut response, seconds);
        Action::Respond(response)
    }
}

/// A budget of log lines per verdict.
#[derive(Debug, Default)]
struct Budgets([Budget; 4]);

impl Budgets {
    fn of(&self, verdict: Verdict) -> &Budget {
        let index = match verdict {
            Verdict::Premature => 0,
            Verdict::ReadAsZero => 1,
            Verdict::NoBackoff => 2,
            Verdict::Compliant => 3,
        };
        &self.0[index]
    }
}

/// Says how many verdicts of a kind were left out of the log, at that verdict's level.
fn log_left_out(verdict: Verdict, left_out: u64) {
    let what = match verdict {
        Verdict::Premature => "premature retries",
        Verdict::ReadAsZero => {
            "retries sooner than the minimum backoff after a malformed Retry-After"
        }
        Verdict::NoBackoff => {
            "retries sooner than the minimum backoff after a throttle without a hint"
        }
        Verdict::Compliant => "compliant retries",
    };
    let limit = LINES_PER_SECOND;
    match verdict {
        Verdict::Premature | Verdict::ReadAsZero => tracing::warn!(
            left_out,
            "{left_out} more {what} were not logged one by one (the log takes {limit} a second \
             of each verdict); the reports and the event log count every one"
        ),
        Verdict::NoBackoff | Verdict::Compliant => tracing::info!(
            left_out,
            "{left_out} more {what} were not logged one by one (the log takes {limit} a second \
             of each verdict); the reports and the event log count every one"
        ),
    }
}

/// The header that marks a request safe to repeat (draft-ietf-httpapi-idempotency-key-header).
const IDEMPOTENCY_KEY: &str = "idempotency-key";

/// The request's `User-Agent`, as text.
fn user_agent(meta: &RequestMeta) -> Option<String> {
    let value = meta.user_agent.as_ref()?;
    Some(String::from_utf8_lossy(value.as_bytes()).into_owned())
}

/// An answer of the judge's own, in plain text.
fn judge_answer(status: StatusCode, text: String) -> Response<Body> {
    let mut response = Response::new(Body::from(text));
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        http::HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}

/// Makes `response` the judge's: `Retry-After: seconds`, and the mark that tells the proxy
/// the judge answered.
fn mark_judge_answer(response: &mut Response<Body>, seconds: u64) {
    response
        .headers_mut()
        .insert(header::RETRY_AFTER, seconds.into());
    response.extensions_mut().insert(OwnAnswer);
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

/// The first verdicts, up to a limit: once it is reached, keeping takes no lock.
#[derive(Debug)]
struct Kept {
    limit: usize,
    full: AtomicBool,
    list: Mutex<Vec<JudgeEvent>>,
}

impl Default for Kept {
    fn default() -> Kept {
        Kept::new(KEPT_EVENTS)
    }
}

impl Kept {
    fn new(limit: usize) -> Kept {
        Kept {
            limit,
            full: AtomicBool::new(limit == 0),
            list: Mutex::default(),
        }
    }

    /// Whether the list has room for more: when it has none, no verdict is built for it.
    fn wants_more(&self) -> bool {
        !self.full.load(Ordering::Relaxed)
    }

    fn push(&self, event: JudgeEvent) {
        if !self.wants_more() {
            return;
        }
        let mut list = self.list.lock().unwrap_or_else(PoisonError::into_inner);
        if list.len() < self.limit {
            list.push(event);
        }
        if list.len() >= self.limit {
            self.full.store(true, Ordering::Relaxed);
        }
    }

    fn list(&self) -> Vec<JudgeEvent> {
        self.list
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

impl JudgeStage {
    /// A stage judging with `judge`, reading the time a hint reaches its client from `clock`:
    /// the pipeline's ([`PipelineBuilder::clock`](crate::PipelineBuilder::clock)).
    pub fn new(judge: Arc<Judge>, clock: Arc<dyn Clock>) -> JudgeStage {
        JudgeStage {
            judge,
            clock,
            verdicts: Verdicts::default(),
            hints: Policy::default(),
            min_backoff: DEFAULT_MIN_BACKOFF,
            shared: None,
        }
    }

    /// How long a retry must wait after a throttle whose `Retry-After` was malformed (a
    /// sooner retry is [`Verdict::ReadAsZero`]) or missing ([`Verdict::NoBackoff`]); 100 ms by
    /// default.
    pub fn min_backoff(mut self, min_backoff: Duration) -> JudgeStage {
        self.min_backoff = min_backoff;
        self
    }

    /// Records every throttle (a window opening) and every verdict in `recorder` too, for
    /// the event log and the reports.
    pub fn with_recorder(mut self, recorder: Arc<dyn Record>) -> JudgeStage {
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
    pub fn recorder(&self) -> Option<&Arc<dyn Record>> {
        self.verdicts.recorder.as_ref()
    }

    /// The shared store set with [`JudgeStage::with_shared`].
    pub fn shared(&self) -> Option<&Arc<SharedStore>> {
        self.shared.as_ref()
    }

    /// Keeps the first `limit` verdicts for [`JudgeStage::events`] ([`KEPT_EVENTS`] by
    /// default; 0 keeps none). A long run's verdicts belong in a [`Recorder`](crate::report::Recorder), which counts
    /// them all in bounded memory.
    pub fn keep_events(mut self, limit: usize) -> JudgeStage {
        self.verdicts.events = Arc::new(Kept::new(limit));
        self
    }

    /// The verdicts so far, in order: the first [`KEPT_EVENTS`] (or as many as
    /// [`JudgeStage::keep_events`] says).
    pub fn events(&self) -> Vec<JudgeEvent> {
        self.verdicts.events.list()
    }

    /// The judge.
    pub fn judge(&self) -> &Arc<Judge> {
        &self.judge
    }

    /// The request's window key in this proxy's judge and, with a shared store, in the store.
    fn keys(&self, meta: &RequestMeta, header: Option<&str>) -> (WindowKey, Option<WindowKey>) {
        self.judge.keys_for(meta, header, self.shared.is_some())
    }

    /// Opens the window a throttle asks for, in this proxy's judge, and records it; returns
    /// the shared key and the wait, for the shared store.
    ///
    /// A throttle is a 429 or 503, hint or not, or any other error status with a hint. Its
    /// hint is read as leniently as its headers allow ([`Policy::earliest`]): a retry is early
    /// only when it is early under every reading. A malformed or missing hint opens a window
    /// of the minimum backoff; one too long for the clock, a window that never closes.
    ///
    /// A redirect with a usable `Retry-After` (or its millisecond spellings) opens a window
    /// too, on the request that follows it — the `Location`'s URL, with the method a client
    /// follows with (`GET` after a 303, or a 301 or 302 to a `POST`): RFC 9110 §10.2.3 makes
    /// the hint the minimum time before issuing the redirected request.
    fn throttled(
        &self,
        response: &Response<Body>,
        meta: &RequestMeta,
    ) -> Option<(WindowKey, Duration)> {
        // Only header mode leaves a note: the header's value, as the request had it.
        let header = Notes::get::<KeyHeader>(response).map(|note| note.0.as_str());
        if response.extensions().get::<OwnAnswer>().is_some() {
            return None;
        }
        // A success is no throttle, whatever rate-limit headers it carries
        // (`X-RateLimit-Remaining: 0` on the last allowed request): the client's next request
        // is not a retry; nor is a redirect, but for a `Retry-After` on it.
        let status = response.status();
        let throttle = matches!(status.as_u16(), 429 | 503);
        let hinted = has_hint_header(response.headers());
        let followed = match status.is_redirection() && hinted {
            true => followed(status, response.headers(), meta),
            false => None,
        };
        if !throttle && followed.is_none() && (status.as_u16() < 400 || !hinted) {
            return None;
        }
        // The hint reaches the client now: the window opens from here.
        let receipt = Receipt::now(&self.clock);
        let info = ResponseInfo::from_headers(status, response.headers(), receipt);
        let read = Read::of(self.hints.earliest(&info), receipt, self.min_backoff);
        if read.hint == HintKind::None && !throttle {
            return None;
        }
        let meta = match &followed {
            // Only a hint the client was asked to wait on before following: no reset field
            // (a redirect is no refusal), no malformed value (a redirect is followed at once
            // by every client that does not read the hint; there is no backoff to measure).
            Some(_) if read.hint != HintKind::Usable || !read.source.is_some_and(asks_to_wait) => {
                return None;
            }
            Some(next) => next,
            None => meta,
        };
        let (local, shared) = self.keys(meta, header);
        self.judge
            .open_as(local, receipt.instant, read.permitted_at, read.kind);
        if let Some(recorder) = self.verdicts.recording() {
            let value = read.source.and_then(|source| {
                let value = response.headers().get(source.header_name())?;
                Some(String::from_utf8_lossy(value.as_bytes()).into_owned())
            });
            recorder.throttle(ThrottleEvent {
                at: receipt.wall,
                client: meta.client.to_string(),
                user_agent: user_agent(meta),
                method: meta.method.to_string(),
                url: meta.target.to_string(),
                status: status.as_u16(),
                permitted_at: read.permitted_at.map(|at| wall_of(receipt, at)),
                hint: read.hint,
                header: read.source.map(|source| source.header_name().to_owned()),
                value,
                reading: Some(read.reading.to_owned()),
            });
        }
        // A shared store holds windows of a length: one that never closes is kept there for
        // a century. A hint-less window only measures, and stays here.
        let wait = match read.permitted_at {
            _ if read.kind == WindowKind::NoHint => return None,
            Some(at) => at.saturating_duration_since(receipt.instant),
            None => CENTURY,
        };
        Some((shared?, wait))
    }
}

/// The request a client sends on following `status`'s `Location`, as the judge keys it: the
/// `Location` resolved against the request's URL, with the method a client follows with.
/// `None` for a redirect without a `Location` (`304`, `300` without one), or one that is no
/// `http` or `https` URL.
fn followed(
    status: StatusCode,
    headers: &http::HeaderMap,
    meta: &RequestMeta,
) -> Option<RequestMeta> {
    let location = headers.get(http::header::LOCATION)?.to_str().ok()?;
    let target = meta.target.join(location)?;
    // RFC 9110 §15.4.4: a 303 is followed with GET (HEAD stays HEAD); §15.4.2–3: clients
    // change a POST to GET on 301 and 302.
    let method = match (status.as_u16(), &meta.method) {
        (303, method) if method != Method::HEAD => Method::GET,
        (301 | 302, method) if method == Method::POST => Method::GET,
        (_, method) => method.clone(),
    };
    Some(RequestMeta {
        method,
        target,
        ..meta.clone()
    })
}

/// Whether a hint from `source` asks a client to wait before its next request, as a
/// redirect's may: `Retry-After` and its millisecond spellings, not a rate limit's reset time.
fn asks_to_wait(source: holdoff::HintSource) -> bool {
    use holdoff::HintSource;
    matches!(
        source,
        HintSource::RetryAfter
            | HintSource::RetryAfterMs
            | HintSource::XMsRetryAfterMs
            | HintSource::XAmzRetryAfter
    )
}

/// How long a retry waits after a malformed or missing hint, by default.
pub const DEFAULT_MIN_BACKOFF: Duration = Duration::from_millis(100);

/// How long a shared store keeps a window that never closes.
const CENTURY: Duration = Duration::from_secs(100 * 365 * 24 * 3600);

/// A throttle's hint as the judge reads it: the window it opens, and how it was read.
struct Read {
    kind: WindowKind,
    hint: HintKind,
    /// `None`: never.
    permitted_at: Option<Instant>,
    source: Option<holdoff::HintSource>,
    reading: &'static str,
}

impl Read {
    fn of(earliest: Earliest, receipt: Receipt, min_backoff: Duration) -> Read {
        let backoff = receipt.instant.checked_add(min_backoff);
        match earliest {
            Earliest::At {
                after,
                source,
                reading,
            } => {
                let permitted_at = receipt.instant.checked_add(after);
                Read {
                    kind: WindowKind::Hinted,
                    hint: if permitted_at.is_some() {
                        HintKind::Usable
                    } else {
                        HintKind::Unbounded
                    },
                    permitted_at,
                    source: Some(source),
                    reading: if permitted_at.is_some() {
                        reading.describe()
                    } else {
                        "longer than the monotonic clock can hold: a window that never closes"
                    },
                }
            }
            Earliest::Malformed { source } => Read {
                kind: WindowKind::Malformed,
                hint: HintKind::Malformed,
                permitted_at: backoff,
                source: Some(source),
                reading: "malformed, so never zero: a retry must wait the minimum backoff",
            },
            _ => Read {
                kind: WindowKind::NoHint,
                hint: HintKind::None,
                permitted_at: backoff,
                source: None,
                reading: "no hint: the gap to the next request is measured against the minimum backoff",
            },
        }
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

/// Whether a response carries any header a hint can come from: without one, no policy can
/// find an interval in it, so nothing needs to be read or built.
fn has_hint_header(headers: &http::HeaderMap) -> bool {
    headers
        .keys()
        .any(|name| holdoff::HINT_HEADERS.contains(&name.as_str()))
}

impl Stage for JudgeStage {
    fn on_request(&self, mut request: Request<Body>, meta: &RequestMeta) -> Action {
        let header = header_value(self, &request);
        let (local, shared) = self.keys(meta, header.as_deref());
        if let Some(value) = header {
            Notes::leave(&mut request, KeyHeader(value));
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
                        Check::Compliant { .. } => {
                            judge.count(false);
                            judge.close(local);
                        }
                        Check::Open => judge.close(local),
                        _ => judge.count(true),
                    }
                    check
                }
                None => match store.on_failure() {
                    OnFailure::FailClosed { hold } => {
                        return Action::Respond(crate::shared::fail_closed_answer(hold));
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

    fn maintain(&self, now: Instant) {
        let dropped = self.judge.evict(now);
        if dropped > 0 {
            tracing::debug!(dropped, "evicted expired judge windows");
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

impl fmt::Debug for JudgeStage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JudgeStage")
            .field("judge", &self.judge)
            .field("min_backoff", &self.min_backoff)
            .field("shared", &self.shared)
            .finish_non_exhaustive()
    }
}

/// The value of the header a [`KeyMode::Header`](crate::judge::KeyMode::Header) judge keys by.
fn header_value(stage: &JudgeStage, request: &Request<Body>) -> Option<String> {
    match stage.judge.mode() {
        crate::judge::KeyMode::Header(name) => request
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

    mod has_hint_header {
        use super::*;

        #[test]
        fn finds_each_hint_and_nothing_else() {
            for name in holdoff::HINT_HEADERS {
                let mut headers = http::HeaderMap::new();
                headers.insert("content-type", "text/plain".parse().unwrap());
                headers.insert(*name, "1".parse().unwrap());
                assert!(has_hint_header(&headers), "{name}");
            }
            let mut headers = http::HeaderMap::new();
            headers.insert("x-ratelimit-remaining", "0".parse().unwrap());
            headers.insert("date", "Sun, 06 Nov 1994 08:49:37 GMT".parse().unwrap());
            assert!(!has_hint_header(&headers));
        }
    }

    mod followed {
        use super::*;

        fn follow(status: u16, method: Method, location: &str) -> Option<(Method, String)> {
            let mut meta = RequestMeta::for_test(
                0,
                "alice",
                "http://api.test/v1/old?x=1",
                Receipt::now(&holdoff::clock::TokioClock),
            );
            meta.method = method;
            let mut headers = http::HeaderMap::new();
            headers.insert(header::LOCATION, location.parse().unwrap());
            let status = StatusCode::from_u16(status).unwrap();
            followed(status, &headers, &meta).map(|next| (next.method, next.target.to_string()))
        }

        #[test]
        fn resolves_the_location_against_the_request() {
            assert_eq!(
                follow(307, Method::PUT, "new"),
                Some((Method::PUT, "http://api.test/v1/new".to_owned()))
            );
            assert_eq!(
                follow(308, Method::GET, "https://other.test:8443/x"),
                Some((Method::GET, "https://other.test:8443/x".to_owned()))
            );
            assert_eq!(follow(307, Method::GET, "mailto:ops@api.test"), None);
        }

        #[test]
        fn takes_the_method_a_client_follows_with() {
            let get = |status, method| follow(status, method, "/n").map(|(method, _)| method);
            assert_eq!(get(303, Method::POST), Some(Method::GET));
            assert_eq!(get(303, Method::HEAD), Some(Method::HEAD));
            assert_eq!(get(302, Method::POST), Some(Method::GET));
            assert_eq!(get(301, Method::POST), Some(Method::GET));
            assert_eq!(get(307, Method::POST), Some(Method::POST));
            assert_eq!(get(302, Method::DELETE), Some(Method::DELETE));
        }
    }

    mod graph_hosts {
        use http_body_util::BodyExt;

        use super::*;

        /// A throttle of `url` then an immediate retry, through the stage alone.
        async fn premature_retry(url: &str) -> Response<Body> {
            let clock = holdoff::clock::ManualClock::new(UNIX_EPOCH + Duration::from_secs(1));
            let stage = JudgeStage::new(
                Arc::new(Judge::new(crate::judge::KeyMode::default(), clock.now())),
                Arc::new(clock.clone()),
            );
            let meta = |id| RequestMeta {
                watched: Some("*".into()),
                ..RequestMeta::for_test(
                    id,
                    "alice",
                    url,
                    Receipt {
                        instant: clock.now(),
                        wall: clock.wall_now(),
                    },
                )
            };
            let request = || Request::get(url).body(Body::empty()).unwrap();
            let first = meta(1);
            let Action::Continue(_) = stage.on_request(request(), &first) else {
                panic!("the first request goes on");
            };
            let mut throttle = Response::new(Body::empty());
            *throttle.status_mut() = StatusCode::TOO_MANY_REQUESTS;
            throttle
                .headers_mut()
                .insert(header::RETRY_AFTER, 30.into());
            stage.on_response(&mut throttle, &first);
            let _ = stage.finish_response(&throttle, &first);
            match stage.on_request(request(), &meta(2)) {
                Action::Respond(response) => response,
                other => panic!("a premature retry is answered: {other:?}"),
            }
        }

        #[tokio::test]
        async fn get_graphs_json_error_as_dev_proxy_answers_them() {
            let response = premature_retry("https://graph.microsoft.com/v1.0/me").await;
            assert_eq!(response.status(), StatusCode::TOO_MANY_REQUESTS);
            assert_eq!(response.headers()[header::RETRY_AFTER], "30");
            assert_eq!(response.headers()[header::CONTENT_TYPE], "application/json");
            assert!(response.extensions().get::<OwnAnswer>().is_some());
            let body = response.into_body().collect().await.unwrap().to_bytes();
            let body: serde_json::Value = serde_json::from_slice(&body).unwrap();
            assert_eq!(body["error"]["code"], "Too Many Requests");
            let message = body["error"]["message"].as_str().unwrap();
            assert!(message.starts_with("premature retry"), "{message}");
            assert!(message.ends_with("(Retry-After: 30)"), "{message}");
        }

        #[tokio::test]
        async fn and_other_hosts_plain_text() {
            let response = premature_retry("https://api.example/items").await;
            assert_eq!(response.status(), StatusCode::TOO_MANY_REQUESTS);
            assert!(
                response.headers()[header::CONTENT_TYPE]
                    .to_str()
                    .unwrap()
                    .starts_with("text/plain")
            );
        }

        #[test]
        fn are_told_as_dev_proxy_tells_them() {
            for host in [
                "graph.microsoft.com",
                "GRAPH.microsoft.us",
                "dod-graph.microsoft.us",
                "microsoftgraph.chinacloudapi.cn",
            ] {
                assert!(is_graph_host(host), "{host}");
            }
            for host in [
                "graph.example",
                "api.github.com",
                "mygraph.microsoft.com",
                "g",
            ] {
                assert!(!is_graph_host(host), "{host}");
            }
        }
    }

    mod verdict_log {
        use std::io;
        use std::sync::Mutex;

        use super::*;

        /// What the log received, one string per line.
        #[derive(Clone, Default)]
        struct Captured(Arc<Mutex<Vec<u8>>>);

        impl io::Write for Captured {
            fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
                self.0.lock().unwrap().extend_from_slice(bytes);
                Ok(bytes.len())
            }

            fn flush(&mut self) -> io::Result<()> {
                Ok(())
            }
        }

        /// Records `per_second[i]` premature retries in second `i`, and returns the log.
        fn log_of(verdicts: &Verdicts, per_second: &[u32]) -> Vec<String> {
            let captured = Captured::default();
            let writer = captured.clone();
            let subscriber = tracing_subscriber::fmt()
                .with_writer(move || writer.clone())
                .with_ansi(false)
                .without_time()
                .finish();
            let start = UNIX_EPOCH + Duration::from_secs(1_740_830_400);
            let instant = holdoff::clock::Clock::now(&holdoff::clock::ManualClock::new(start));
            tracing::subscriber::with_default(subscriber, || {
                for (second, &count) in per_second.iter().enumerate() {
                    let at = start + Duration::from_secs(second as u64);
                    for _ in 0..count {
                        verdicts.record(
                            Verdict::Premature,
                            &Request::new(Body::empty()),
                            &RequestMeta::for_test(
                                0,
                                "alice",
                                "http://api.example/items",
                                Receipt { instant, wall: at },
                            ),
                            instant,
                            Some(instant),
                            Some(Duration::from_millis(900)),
                        );
                    }
                }
            });
            let text = String::from_utf8(captured.0.lock().unwrap().clone()).unwrap();
            text.lines().map(str::to_owned).collect()
        }

        #[test]
        fn logs_a_few_verdicts_a_second_and_says_how_many_it_left_out() {
            let verdicts = Verdicts::default();
            let limit = LINES_PER_SECOND as usize;
            let lines = log_of(&verdicts, &[500, 3]);
            let one_by_one = lines
                .iter()
                .filter(|line| line.contains("premature retry client=header:alice"))
                .count();
            assert_eq!(one_by_one, limit + 3, "{lines:#?}");
            let left_out: Vec<_> = lines
                .iter()
                .filter(|line| line.contains("more premature retries were not logged"))
                .collect();
            assert_eq!(left_out.len(), 1, "{lines:#?}");
            assert!(
                left_out[0].contains(&format!("{} more", 500 - limit)),
                "{}",
                left_out[0]
            );
            // The line saying so comes before the next second's first verdict.
            let at = lines.iter().position(|line| line == left_out[0]).unwrap();
            assert_eq!(at, limit, "{lines:#?}");
            // Every verdict is still kept for the reports.
            assert_eq!(verdicts.events.list().len(), 503);
        }

        #[test]
        fn logs_every_verdict_of_a_quiet_client() {
            let verdicts = Verdicts::default();
            let lines = log_of(&verdicts, &[3, 0, 5, 1]);
            assert_eq!(lines.len(), 9, "{lines:#?}");
            assert!(lines.iter().all(|line| line.contains("premature retry")));
        }
    }
}
