//! The stage that runs a [`FaultPlan`] on every watched request: latency, auth, mocks, CRUD
//! APIs, rate limits, error rules and network faults, in that order.
//!
//! Each request is decided by a chain of steps, each drawing from the seeded generator only
//! when a rule of its own matches (one draw for an error rule's rate, one more for the
//! outcome of a failure), so that a seed replays. A step that has to wait — a latency fault,
//! or a body to read for a fragment — returns [`Action::Later`] with a future that waits and
//! then resumes the chain at the step after (or at the same step, with the body read).
//!
//! What a request leaves for its response — the rate-limit headers of a counted request, a
//! truncated or slowed body — is a [`Notes`] note on the request, which the proxy carries to
//! the response for [`Stage::on_response`]; a request that never gets there (its client went
//! away, a later stage dropped it) takes its note with it.
//!
//! Each fault kind's step is a file of its own, beside its rule in [`crate::fault`]:
//! `latency.rs`, `auth.rs`, `mocks.rs`, `crud.rs`, `limits.rs` (rate limits), `llm.rs`
//! (token budgets) and `errors.rs` (error rules and network faults); this file holds the
//! stage, the chain that runs the steps in the plan's order, and the body reading they share;
//! `counts.rs` counts what was injected.

mod auth;
mod batch;
mod counts;
mod crud;
mod errors;
mod latency;
mod limits;
mod llm;
mod mirror;
mod mocks;
#[cfg(test)]
mod tests;

pub use counts::FaultCounts;
use counts::{Counters, Kind};
use limits::{counter_name, same_counter};

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock, PoisonError, RwLock};
use std::time::{Duration, Instant};

use bytes::Bytes;
use holdoff::clock::Clock;
use http::{HeaderName, HeaderValue, Request, Response, StatusCode, header};
use http_body::Body as _;

use crate::body::Body;
use crate::fault::FaultRng;
use crate::fault::body::{self, Slowed, Truncated};
use crate::fault::ratelimit::RateLimiter;
use crate::fault::{ErrorResponse, HeaderTemplate};
use crate::fault::{FaultOutcome, FaultPlan, FaultStep, NetworkFault, RateLimitRule};
use crate::proxy::reply::Refusal;
use crate::proxy::{Action, Notes, RequestMeta, Stage};
use crate::shared::SharedStore;

/// The most of a request body read to look for a fragment; a larger body matches no
/// fragment and passes on whole.
const BODY_LIMIT: usize = 1 << 20;

/// The fault stage: runs a [`FaultPlan`] on every watched request.
///
/// Unwatched requests pass untouched, without a lock or an allocation. Every random choice
/// comes from one seeded [`FaultRng`], so the same seed and the same sequence of requests
/// give the same faults.
///
/// # Examples
///
/// ```
/// use std::sync::Arc;
/// use holdoff::clock::TokioClock;
/// use holdoff_proxy::fault::Rate;
/// use holdoff_proxy::fault::FaultRng;
/// use holdoff_proxy::fault::{ErrorRule, FaultPlan, NetworkFault, FaultOutcome, RequestMatch};
/// use holdoff_proxy::FaultStage;
///
/// let mut plan = FaultPlan::default();
/// plan.errors.push(ErrorRule {
///     request: RequestMatch::url("https://api.example.com/*".parse()?),
///     rate: Rate::percent(10.0).expect("a percentage"),
///     outcomes: vec![FaultOutcome::Network(NetworkFault::Reset)],
/// });
/// let stage = FaultStage::new(plan, FaultRng::new(42), Arc::new(TokioClock));
/// assert_eq!(stage.seed(), 42);
/// assert_eq!(stage.counts().resets, 0);
/// # Ok::<(), holdoff_proxy::ConfigError>(())
/// ```
pub struct FaultStage {
    inner: Arc<Inner>,
}

/// What the stage and the futures it returns share.
struct Inner {
    armed: RwLock<Arc<Armed>>,
    rng: FaultRng,
    clock: Arc<dyn Clock>,
    counts: Counters,
    /// The store rate-limit counters are shared with other proxies in, if any.
    shared: OnceLock<Arc<SharedStore>>,
}

/// A plan with its run-time state.
struct Armed {
    plan: FaultPlan,
    /// One per rate-limit rule, in order.
    limiters: Box<[Arc<RateLimiter>]>,
    /// One per rate-limit rule, in order: its counters' name in a shared store.
    counter_names: Box<[String]>,
    /// The mocks' `nth` numbering: see [`MockNumbers`].
    mock_numbers: MockNumbers,
    /// The token budgets' windows.
    budgets: llm::Budgets,
    /// Whether the plan does nothing at all.
    idle: bool,
}

/// How `nth` numbers requests, as Dev Proxy does: per URL pattern, across the mocks that
/// share it, so that `nth: 1`, `nth: 2` and an un-numbered mock on one URL answer the first
/// request, the second, then every other ("fail twice, then succeed"). A request is numbered
/// once per pattern, when it reaches the first of its mocks whose method and URL match.
struct MockNumbers {
    /// Each mock's pattern, as an index into `counts`.
    group: Box<[usize]>,
    /// Requests numbered so far, one per pattern.
    counts: Box<[AtomicU64]>,
    /// Whether any mock has an `nth`: without one nothing is numbered.
    any: bool,
    /// Whether each mock's body mirrors the request's (`@request.body.…`; see `mirror`).
    mirrors: Box<[bool]>,
}

impl MockNumbers {
    fn new(mocks: &[crate::fault::MockRule]) -> MockNumbers {
        let mut patterns: Vec<&str> = Vec::new();
        let group = mocks
            .iter()
            .map(|mock| {
                let pattern = mock.request.url.as_str();
                patterns
                    .iter()
                    .position(|known| *known == pattern)
                    .unwrap_or_else(|| {
                        patterns.push(pattern);
                        patterns.len() - 1
                    })
            })
            .collect();
        MockNumbers {
            group,
            counts: patterns.iter().map(|_| AtomicU64::new(0)).collect(),
            any: mocks.iter().any(|mock| mock.nth.is_some()),
            mirrors: mocks
                .iter()
                .map(|mock| mirror::mirrors(&mock.response))
                .collect(),
        }
    }

    /// A request's numbers, one per pattern, taken as its mocks are reached.
    fn for_request(&self) -> Vec<u64> {
        if self.any {
            vec![0; self.counts.len()]
        } else {
            Vec::new()
        }
    }

    /// The request's number under the pattern of mock `index` (from 1), numbering it now
    /// if this is the first of that pattern's mocks it reaches.
    fn number(&self, index: usize, taken: &mut [u64]) -> u64 {
        let group = self.group[index];
        if taken[group] == 0 {
            taken[group] = self.counts[group].fetch_add(1, Ordering::Relaxed) + 1;
        }
        taken[group]
    }
}

/// What a request leaves for its response, as its [`Notes`] note.
#[derive(Clone, Debug, Default)]
struct Left {
    /// Rate-limit headers of a counted request.
    headers: Vec<(HeaderName, HeaderValue)>,
    /// A truncate or slow-body fault to apply to the response body.
    body: Option<NetworkFault>,
}

/// Where the decision resumes after a wait.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Step {
    /// At the start: latency.
    Latency,
    /// At this position of the plan's [`FaultOrder`](super::plan::FaultOrder).
    At(usize),
}

/// The request body, as far as fragments are concerned.
#[derive(Clone)]
enum Read {
    /// Not needed yet.
    Unread,
    /// All of it.
    Whole(Bytes),
    /// More than [`BODY_LIMIT`]: no fragment matches.
    TooLarge,
}

impl Read {
    /// The body, when it was read whole.
    fn body(&self) -> Option<&[u8]> {
        match self {
            Read::Whole(bytes) => Some(bytes),
            Read::Unread | Read::TooLarge => None,
        }
    }
}

/// The result of one step: go on with the request, or this is the decision.
enum Flow {
    /// On to the next step, with the request.
    Next(Request<Body>),
    /// The step answers the request with this: [`answer`] hands the answer every note the
    /// request carries, so that no answering step can forget to. Boxed: an answer is the rare
    /// path, and every step's `Flow` is moved by value.
    Answer(Box<(Request<Body>, Response<Body>)>),
    /// Anything else: a later decision, a network fault, a request sent on as it is.
    Done(Action),
}

impl Flow {
    /// [`Flow::Answer`]: `request` answered with `response`.
    fn answer(request: Request<Body>, response: Response<Body>) -> Flow {
        Flow::Answer(Box::new((request, response)))
    }
}

/// Answers the request with the response, which takes the request's notes with it (a rate
/// limit's headers, a token budget's count), whichever step answered.
fn answer((mut request, mut response): (Request<Body>, Response<Body>)) -> Action {
    Notes::hand_over(&mut request, &mut response);
    Action::Respond(response)
}

impl FaultStage {
    /// A stage running `plan`, drawing from `rng`, reading `clock` (whose `now` also starts
    /// the rate limiters' windows).
    pub fn new(plan: FaultPlan, rng: FaultRng, clock: Arc<dyn Clock>) -> FaultStage {
        let armed = Armed::new(plan, None, clock.now());
        FaultStage {
            inner: Arc::new(Inner {
                armed: RwLock::new(Arc::new(armed)),
                rng,
                clock,
                counts: Default::default(),
                shared: OnceLock::new(),
            }),
        }
    }

    /// Counts rate limits in `store`, shared with other proxies, too: a limit of N per
    /// window then admits N requests across every proxy that shares the store. This stage's
    /// own limiters keep counting as well, for failing open.
    pub fn with_shared(self, store: Arc<SharedStore>) -> FaultStage {
        // Set once, here, before the stage serves: a second call keeps the first store.
        let _ = self.inner.shared.set(store);
        self
    }

    /// Swaps in a new plan (a data file changed) without losing the RNG, and keeping the rate
    /// limiters' counters for rules whose limit, url, method and scope are unchanged; mock
    /// `nth` counters restart.
    ///
    /// Requests already being decided finish with the plan they started with.
    pub fn replace_plan(&self, plan: FaultPlan) {
        let mut slot = self
            .inner
            .armed
            .write()
            .unwrap_or_else(PoisonError::into_inner);
        let armed = Armed::new(plan, Some(&slot), self.inner.clock.now());
        *slot = Arc::new(armed);
    }

    /// The seed of the stage's random choices, to repeat a run.
    pub fn seed(&self) -> u64 {
        self.inner.rng.seed()
    }

    /// Counts so far, for the summary and metrics.
    pub fn counts(&self) -> FaultCounts {
        self.inner.counts.snapshot()
    }

    /// Drops idle rate-limit counters, and returns how many: the stage's upkeep
    /// ([`Stage::maintain`]), which the server runs.
    pub fn evict(&self, now: Instant) -> usize {
        let armed = self.inner.current();
        armed.limiters.iter().map(|l| l.evict(now)).sum::<usize>() + armed.budgets.evict(now)
    }
}

impl fmt::Debug for FaultStage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FaultStage")
            .field("seed", &self.seed())
            .field("counts", &self.counts())
            .finish_non_exhaustive()
    }
}

impl Stage for FaultStage {
    fn on_request(&self, request: Request<Body>, meta: &RequestMeta) -> Action {
        if meta.watched.is_none() {
            return Action::Continue(request);
        }
        let armed = self.inner.current();
        if armed.idle {
            return Action::Continue(request);
        }
        let url = meta.target.text();
        self.inner
            .decide(&armed, request, meta, &url, Step::Latency, Read::Unread)
    }

    fn on_response(&self, response: &mut Response<Body>, _: &RequestMeta) {
        llm::tap(response);
        let Some(left) = Notes::take::<Left>(response) else {
            return;
        };
        // The limiter counted this request: its state is what the client should see.
        for (name, value) in left.headers {
            response.headers_mut().insert(name, value);
        }
        if response.body().is_end_stream() {
            return;
        }
        match left.body {
            Some(NetworkFault::Truncate { after }) => {
                let length = response
                    .headers()
                    .get(header::CONTENT_LENGTH)
                    .and_then(|value| value.to_str().ok()?.parse::<u64>().ok());
                let after = match (after, length) {
                    // A cut at or past the end would not cut anything: keep the last byte back.
                    (Some(after), Some(length)) => after.min(length.saturating_sub(1)),
                    (Some(after), None) => after,
                    (None, Some(length)) => length / 2,
                    (None, None) => 1024,
                };
                let inner = std::mem::take(response.body_mut());
                *response.body_mut() = Body::wrap(Truncated::new(inner, after));
            }
            Some(NetworkFault::SlowBody { bytes_per_second }) => {
                let inner = std::mem::take(response.body_mut());
                let clock = Arc::clone(&self.inner.clock);
                *response.body_mut() = Body::wrap(Slowed::new(inner, bytes_per_second, clock));
            }
            _ => {}
        }
    }

    fn maintain(&self, now: Instant) {
        let dropped = self.evict(now);
        if dropped > 0 {
            tracing::debug!(dropped, "evicted idle rate-limit counters");
        }
    }
}

impl Armed {
    /// `plan` ready to run; rate limiters of `previous` whose rule is unchanged carry over,
    /// new ones start their windows at `epoch`.
    fn new(plan: FaultPlan, previous: Option<&Armed>, epoch: Instant) -> Armed {
        let mut reusable: Vec<Option<(&RateLimitRule, &Arc<RateLimiter>)>> = previous
            .map(|previous| {
                previous
                    .plan
                    .rate_limits
                    .iter()
                    .zip(previous.limiters.iter())
                    .map(Some)
                    .collect()
            })
            .unwrap_or_default();
        let limiters = plan
            .rate_limits
            .iter()
            .map(|rule| {
                let kept = reusable
                    .iter_mut()
                    .find(|slot| slot.is_some_and(|(old, _)| same_counter(old, rule)))
                    .and_then(Option::take);
                match kept {
                    Some((_, limiter)) => Arc::clone(limiter),
                    None => Arc::new(RateLimiter::new(rule.limit, epoch)),
                }
            })
            .collect();
        let counter_names = plan.rate_limits.iter().map(counter_name).collect();
        let mock_numbers = MockNumbers::new(&plan.mocks);
        let budgets = llm::Budgets::new(&plan, previous);
        let idle = plan.is_empty();
        Armed {
            plan,
            limiters,
            counter_names,
            mock_numbers,
            budgets,
            idle,
        }
    }
}

impl Inner {
    fn current(&self) -> Arc<Armed> {
        Arc::clone(&self.armed.read().unwrap_or_else(PoisonError::into_inner))
    }

    /// Counts and logs an injected fault.
    fn record(
        &self,
        kind: Kind,
        meta: &RequestMeta,
        status: Option<StatusCode>,
        wait: Option<Duration>,
    ) {
        self.counts.add(kind);
        tracing::debug!(
            target: "holdoff::fault",
            kind = kind.as_str(),
            url = %meta.target,
            client = %meta.client,
            method = %meta.method,
            status = status.map(|status| status.as_u16()),
            wait_ms = wait.map(|wait| wait.as_millis() as u64),
            "injected a fault"
        );
    }

    /// Runs the steps from `from` on: latency, then the plan's order, until one answers.
    fn decide(
        self: &Arc<Self>,
        armed: &Arc<Armed>,
        mut request: Request<Body>,
        meta: &RequestMeta,
        url: &str,
        from: Step,
        read: Read,
    ) -> Action {
        let start = match from {
            Step::Latency => {
                if let Some(delay) = self.latency(&armed.plan, url) {
                    self.record(Kind::Delayed, meta, None, Some(delay));
                    let deadline = self.clock.now().checked_add(delay);
                    let (this, armed, meta, url) = self.keep(armed, meta, url);
                    return Action::later(async move {
                        if let Some(deadline) = deadline {
                            this.clock.sleep_until(deadline).await;
                        }
                        this.decide(&armed, request, &meta, &url, Step::At(0), read)
                    });
                }
                0
            }
            Step::At(position) => position,
        };
        let order = armed.plan.order;
        for (position, step) in order.steps().iter().enumerate().skip(start) {
            // A step with nothing to do is not asked: each one asked moves the request in
            // and out.
            if !armed.plan.acts_at(*step) {
                continue;
            }
            let flow = match step {
                FaultStep::Auth => self.auth(armed, request, meta, url),
                FaultStep::Mocks => {
                    let mirrors = &armed.mock_numbers.mirrors;
                    let batch = armed.plan.batch_mocks && batch::is_batch(&meta.method, url);
                    let wants_body = matches!(read, Read::Unread)
                        && (batch
                            || armed.plan.mocks.iter().enumerate().any(|(index, mock)| {
                                let answers_from_body = mirrors[index]
                                    || matches!(mock.response, FaultOutcome::LanguageModel(_));
                                mock.request.needs_body(&meta.method, url)
                                    || answers_from_body
                                        && mock.request.head_matches(&meta.method, url)
                            }));
                    if wants_body {
                        return self.read_body(armed, request, meta, url, Step::At(position));
                    }
                    self.mock(armed, request, meta, url, &read)
                }
                FaultStep::CrudApis => {
                    let wants_body = matches!(read, Read::Unread)
                        && armed
                            .plan
                            .crud_apis
                            .iter()
                            .find_map(|api| api.action(&meta.method, url))
                            .is_some_and(|action| action.kind().reads_body());
                    if wants_body {
                        return self.read_body(armed, request, meta, url, Step::At(position));
                    }
                    self.crud_api(armed, request, meta, url, &read)
                }
                FaultStep::RateLimits => {
                    if self.shared.get().is_some() {
                        let next = Step::At(position + 1);
                        return self.rate_limit_shared(armed, request, meta, url, read, next);
                    }
                    let taken = self.take_local(armed, meta, url);
                    self.conclude_limits(armed, request, meta, taken)
                }
                FaultStep::LanguageModelRateLimits => {
                    self.llm_rate_limit(armed, request, meta, url, &read, position)
                }
                FaultStep::Errors => self.error(armed, request, meta, url, &read, position),
            };
            request = match flow {
                Flow::Next(request) => request,
                Flow::Answer(answered) => return answer(*answered),
                Flow::Done(action) => return action,
            };
        }
        if armed.plan.llm_failures.is_empty() {
            return Action::Continue(request);
        }
        self.llm_failure(armed, request, meta, url, &read, order.steps().len())
    }

    /// Forwards a language-model call with an instruction to fail, if a rule matches it
    /// (read first, then resumed past the last step); else as it is.
    fn llm_failure(
        self: &Arc<Self>,
        armed: &Arc<Armed>,
        mut request: Request<Body>,
        meta: &RequestMeta,
        url: &str,
        read: &Read,
        past_the_end: usize,
    ) -> Action {
        let Some(rule) = armed
            .plan
            .llm_failures
            .iter()
            .find(|rule| rule.request.head_matches(&meta.method, url))
        else {
            return Action::Continue(request);
        };
        if matches!(read, Read::Unread) {
            return self.read_body(armed, request, meta, url, Step::At(past_the_end));
        }
        let pick = self.rng.with(rand::Rng::random::<u32>) as usize;
        if let Some((name, corrupted)) = read.body().and_then(|sent| rule.corrupt(sent, pick)) {
            self.record(Kind::LlmFailure, meta, None, None);
            tracing::debug!(target: "holdoff::fault", failure = name, "language-model failure");
            // Sent whole now, with its new length.
            request.headers_mut().remove(header::TRANSFER_ENCODING);
            request
                .headers_mut()
                .insert(header::CONTENT_LENGTH, HeaderValue::from(corrupted.len()));
            *request.body_mut() = Body::full(corrupted);
        }
        Action::Continue(request)
    }

    /// What a future resuming the decision needs, owned.
    fn keep(
        self: &Arc<Self>,
        armed: &Arc<Armed>,
        meta: &RequestMeta,
        url: &str,
    ) -> (Arc<Inner>, Arc<Armed>, RequestMeta, String) {
        (
            Arc::clone(self),
            Arc::clone(armed),
            meta.clone(),
            url.to_owned(),
        )
    }

    /// Reads the body (up to [`BODY_LIMIT`]) and resumes at `at` with it.
    fn read_body(
        self: &Arc<Self>,
        armed: &Arc<Armed>,
        request: Request<Body>,
        meta: &RequestMeta,
        url: &str,
        at: Step,
    ) -> Action {
        let (parts, body) = request.into_parts();
        if body.size_hint().lower() > BODY_LIMIT as u64 {
            let request = Request::from_parts(parts, body);
            return self.decide(armed, request, meta, url, at, Read::TooLarge);
        }
        let (this, armed, meta, url) = self.keep(armed, meta, url);
        Action::later(async move {
            match body::buffer(body, BODY_LIMIT).await {
                Ok(buffered) => {
                    let read = buffered.bytes.map_or(Read::TooLarge, Read::Whole);
                    let request = Request::from_parts(parts, buffered.body);
                    this.decide(&armed, request, &meta, &url, at, read)
                }
                Err(err) => {
                    tracing::debug!(
                        target: "holdoff::fault",
                        url = %meta.target,
                        client = %meta.client,
                        error = %err,
                        "the request body could not be read"
                    );
                    let refusal = Refusal::new(
                        StatusCode::BAD_REQUEST,
                        "the request body could not be read",
                    );
                    let request = Request::from_parts(parts, Body::empty());
                    answer((request, refusal.into_response()))
                }
            }
        })
    }
}

/// `response` with every `@dynamic` header fixed at `seconds`.
fn with_wait(response: &ErrorResponse, seconds: u64) -> ErrorResponse {
    let mut fixed = response.clone();
    for (_, template) in &mut fixed.headers {
        if let HeaderTemplate::Dynamic(range) = template {
            *range = seconds..=seconds;
        }
    }
    fixed
}
