//! Where the judge stage's verdicts go: its own list (the first of them), the log (within a
//! budget of lines), and the recorder if it records.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant, UNIX_EPOCH};

use http::{Request, Response, StatusCode, header};

use super::KEPT_EVENTS;
use super::read::wall_of;
use crate::body::Body;
use crate::judge::{Check, JudgeEvent, Record, SiblingCheck, Verdict, WindowKind};
use crate::lines::{Budget, LINES_PER_SECOND};
use crate::proxy::reply::{OwnAnswer, graph_error, is_graph_host};
use crate::proxy::{Action, RequestMeta};
use crate::secs::ceil_secs;
use crate::shared::SharedCheck;
/// Where verdicts go: the stage's list (the first of them), the log (within a budget of
/// lines), and the recorder if it records.
#[derive(Clone, Debug, Default)]
pub(super) struct Verdicts {
    pub(super) events: Arc<Kept>,
    pub(super) lines: Arc<Budgets>,
    /// Where throttles and verdicts go for the event log and the reports, if anywhere.
    pub(super) recorder: Option<Arc<dyn Record>>,
}

impl Verdicts {
    /// The recorder, when it is set and recording: events are built only then.
    pub(super) fn recording(&self) -> Option<&dyn Record> {
        self.recorder.as_deref().filter(|r| r.is_recording())
    }

    pub(super) fn record(
        &self,
        verdict: Verdict,
        request: &Request<Body>,
        meta: &RequestMeta,
        window: Seen,
    ) {
        self.log(verdict, meta, window.by);
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
            throttled_at: wall(window.throttled_at),
            permitted_at: window.permitted_at.map(wall),
            retried_at: arrival.wall,
            by: window.by,
            throttled_client: window.holder.map(|holder| holder.to_string()),
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

    /// Records a request that came inside the wait another process was told
    /// ([`Verdict::Sibling`]); the request goes on, as any other that no window holds.
    pub(super) fn sibling(&self, found: SiblingCheck, request: &Request<Body>, meta: &RequestMeta) {
        let window = Seen {
            throttled_at: found.throttled_at,
            permitted_at: found.permitted_at,
            by: found.early_by,
            holder: Some(found.client),
        };
        self.record(Verdict::Sibling, request, meta, window);
    }

    /// Logs the verdict, within its budget of lines ([`lines`](super::lines)).
    pub(super) fn log(&self, verdict: Verdict, meta: &RequestMeta, by: Option<Duration>) {
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
            Verdict::Sibling => tracing::warn!(
                %client, %method, %url, early_ms = ms,
                "came inside the wait another process was told: not failed, each process is \
                 judged apart (--judge-key method-url judges them as one)"
            ),
        }
    }

    /// Records `check`'s verdict on the request, and answers a retry that broke a window.
    pub(super) fn act(&self, check: Check, request: Request<Body>, meta: &RequestMeta) -> Action {
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
                    Seen::of(throttled_at, permitted_at, late_by),
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
                    Seen::of(throttled_at, permitted_at, early_by),
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
                    Seen::of(throttled_at, permitted_at, early_by),
                );
                (
                    Some(permitted_at),
                    "retry too soon: the Retry-After this client got was malformed, which is \
                     never zero; this request was not forwarded",
                )
            }
            Check::Unbounded { throttled_at } => {
                let window = Seen {
                    throttled_at,
                    permitted_at: None,
                    by: None,
                    holder: None,
                };
                self.record(Verdict::Premature, &request, meta, window);
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
                    Seen::of(throttled_at, permitted_at, early_by),
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

/// The window a verdict was made against: when it opened, when a retry was permitted
/// (`None`: never), how early or late the request came, and, for [`Verdict::Sibling`], the
/// process that was told to wait.
pub(super) struct Seen {
    pub(super) throttled_at: Instant,
    pub(super) permitted_at: Option<Instant>,
    pub(super) by: Option<Duration>,
    pub(super) holder: Option<Arc<str>>,
}

impl Seen {
    /// A window of one client's own, permitted at `permitted_at`, met `by` early or late.
    fn of(throttled_at: Instant, permitted_at: Instant, by: Duration) -> Seen {
        Seen {
            throttled_at,
            permitted_at: Some(permitted_at),
            by: Some(by),
            holder: None,
        }
    }
}

/// A budget of log lines per verdict.
#[derive(Debug, Default)]
pub(super) struct Budgets([Budget; 5]);

impl Budgets {
    pub(super) fn of(&self, verdict: Verdict) -> &Budget {
        let index = match verdict {
            Verdict::Premature => 0,
            Verdict::ReadAsZero => 1,
            Verdict::NoBackoff => 2,
            Verdict::Compliant => 3,
            Verdict::Sibling => 4,
        };
        &self.0[index]
    }
}

/// Says how many verdicts of a kind were left out of the log, at that verdict's level.
pub(super) fn log_left_out(verdict: Verdict, left_out: u64) {
    let what = match verdict {
        Verdict::Premature => "premature retries",
        Verdict::ReadAsZero => {
            "retries sooner than the minimum backoff after a malformed Retry-After"
        }
        Verdict::NoBackoff => {
            "retries sooner than the minimum backoff after a throttle without a hint"
        }
        Verdict::Compliant => "compliant retries",
        Verdict::Sibling => "requests inside the wait another process was told",
    };
    let limit = LINES_PER_SECOND;
    match verdict {
        Verdict::Premature | Verdict::ReadAsZero | Verdict::Sibling => tracing::warn!(
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
pub(super) const IDEMPOTENCY_KEY: &str = "idempotency-key";

/// The request's `User-Agent`, as text.
pub(super) fn user_agent(meta: &RequestMeta) -> Option<String> {
    let value = meta.user_agent.as_ref()?;
    Some(String::from_utf8_lossy(value.as_bytes()).into_owned())
}

/// An answer of the judge's own, in plain text.
pub(super) fn judge_answer(status: StatusCode, text: String) -> Response<Body> {
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
pub(super) fn mark_judge_answer(response: &mut Response<Body>, seconds: u64) {
    response
        .headers_mut()
        .insert(header::RETRY_AFTER, seconds.into());
    response.extensions_mut().insert(OwnAnswer);
}

/// A shared store's verdict as instants, against the request's arrival: the store measured
/// its durations from its own now, a moment later, so each instant is at worst a round trip
/// early — never later than the truth for the permitted time.
pub(super) fn check_of(shared: SharedCheck, arrival: Instant) -> Check {
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
pub(super) struct Kept {
    pub(super) limit: usize,
    pub(super) full: AtomicBool,
    pub(super) list: Mutex<Vec<JudgeEvent>>,
}

impl Default for Kept {
    fn default() -> Kept {
        Kept::new(KEPT_EVENTS)
    }
}

impl Kept {
    pub(super) fn new(limit: usize) -> Kept {
        Kept {
            limit,
            full: AtomicBool::new(limit == 0),
            list: Mutex::default(),
        }
    }

    /// Whether the list has room for more: when it has none, no verdict is built for it.
    pub(super) fn wants_more(&self) -> bool {
        !self.full.load(Ordering::Relaxed)
    }

    pub(super) fn push(&self, event: JudgeEvent) {
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

    pub(super) fn list(&self) -> Vec<JudgeEvent> {
        self.list
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}
