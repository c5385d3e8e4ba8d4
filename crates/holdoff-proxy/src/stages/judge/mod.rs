//! The judge as a pipeline stage: opens windows from the hints responses carry, and answers
//! premature retries itself. `read.rs` reads a response's hint into the window it opens;
//! `verdicts.rs` is where verdicts go (the stage's list, the log, the recorder).

mod read;
mod verdicts;

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use holdoff::clock::Clock;
use holdoff::{Policy, Receipt, ResponseInfo};
use http::{Request, Response};

pub(crate) use read::wall_of;
use read::{CENTURY, Read, asks_to_wait, followed, has_hint_header};
use verdicts::{Kept, Verdicts, check_of, user_agent};

use crate::body::Body;
use crate::judge::{
    Check, HintKind, Judge, JudgeEvent, Record, SiblingCheck, ThrottleEvent, WindowKey, WindowKind,
};
use crate::proxy::reply::OwnAnswer;
use crate::proxy::{Action, ClientId, Finish, Notes, RequestMeta, Stage};
use crate::shared::{OnFailure, SharedStore};

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
    /// sooner retry is [`Verdict::ReadAsZero`](crate::judge::Verdict::ReadAsZero)) or missing ([`Verdict::NoBackoff`](crate::judge::Verdict::NoBackoff)); 100 ms by
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

    /// The wait another process was told on this request's method and URL, if the request
    /// comes from a process inside it: see [`Verdict::Sibling`](crate::judge::Verdict::Sibling).
    fn sibling(&self, meta: &RequestMeta) -> Option<SiblingCheck> {
        let ClientId::Process { pid, .. } = meta.client else {
            return None;
        };
        let siblings = self.judge.siblings();
        if !siblings.any() {
            return None;
        }
        let key = self.judge.sibling_key(meta)?;
        siblings.check(key, pid, meta.received.instant)
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
        if let (ClientId::Process { pid, .. }, WindowKind::Hinted) = (&meta.client, read.kind)
            && let Some(key) = self.judge.sibling_key(meta)
        {
            let client = || Arc::from(meta.client.to_string());
            (self.judge.siblings()).open(key, *pid, client, receipt.instant, read.permitted_at);
        }
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

/// How long a retry waits after a malformed or missing hint, by default.
pub const DEFAULT_MIN_BACKOFF: Duration = Duration::from_millis(100);

impl Stage for JudgeStage {
    fn on_request(&self, mut request: Request<Body>, meta: &RequestMeta) -> Action {
        let header = header_value(self, &request);
        let (local, shared) = self.keys(meta, header.as_deref());
        if let Some(value) = header {
            Notes::leave(&mut request, KeyHeader(value));
        }
        let (Some(store), Some(shared)) = (&self.shared, shared) else {
            let check = self.judge.check(local, meta.received.instant);
            if check == Check::Open
                && let Some(found) = self.sibling(meta)
            {
                self.verdicts.sibling(found, &request, meta);
            }
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
mod tests;
