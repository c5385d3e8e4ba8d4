//! The stage that runs a [`FaultPlan`] on every watched request: latency, mocks, rate limits,
//! error rules and network faults, in that order.
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

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock, PoisonError, RwLock};
use std::time::{Duration, Instant, SystemTime};

use bytes::Bytes;
use holdoff::clock::Clock;
use http::{HeaderName, HeaderValue, Request, Response, StatusCode, header};
use http_body::Body as _;
use rand::Rng;

use super::body::{self, Slowed, Truncated};
use super::error::{ErrorResponse, HeaderTemplate, Rendered, RetryAfterForm};
use super::plan::{FaultOutcome, FaultPlan, NetworkFault, RateLimitRule, RequestMatch, Scope};
use super::ratelimit::{self, Limit, RateLimiter, Taken, ceil_secs};
use super::rng::FaultRng;
use crate::judge::fail_closed_answer;
use crate::proxy::reply::Refusal;
use crate::shared::{CounterKey, OnFailure, SharedStore};
use crate::{Action, Body, Notes, RequestMeta, Stage};

/// The most of a request body read to look for a fragment; a larger body matches no
/// fragment and passes on whole.
const BODY_LIMIT: usize = 1 << 20;

/// How many faults a [`FaultStage`] has injected, by kind.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(default)]
#[non_exhaustive]
pub struct FaultCounts {
    /// Error responses from error rules, and `502`s to unmocked requests when blocking.
    pub errors: u64,
    /// Requests refused by a rate limit.
    pub rate_limited: u64,
    /// Requests a mock answered (with a response or a network fault).
    pub mocked: u64,
    /// Requests delayed by a latency fault.
    pub delayed: u64,
    /// Requests dropped without an answer (connection reset).
    pub resets: u64,
    /// Requests held without an answer.
    pub hangs: u64,
    /// Responses cut short.
    pub truncated: u64,
    /// Responses slowed down.
    pub slowed: u64,
}

/// The kinds of fault, as logged (`kind`) and counted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Error,
    Blocked,
    RateLimited,
    Mocked,
    Delayed,
    Reset,
    Hang,
    Truncate,
    Slow,
}

impl Kind {
    fn as_str(self) -> &'static str {
        match self {
            Kind::Error => "error",
            Kind::Blocked => "blocked",
            Kind::RateLimited => "rate_limited",
            Kind::Mocked => "mock",
            Kind::Delayed => "latency",
            Kind::Reset => "reset",
            Kind::Hang => "hang",
            Kind::Truncate => "truncate",
            Kind::Slow => "slow_body",
        }
    }

    /// The index of its counter.
    fn counter(self) -> usize {
        match self {
            Kind::Error | Kind::Blocked => 0,
            Kind::RateLimited => 1,
            Kind::Mocked => 2,
            Kind::Delayed => 3,
            Kind::Reset => 4,
            Kind::Hang => 5,
            Kind::Truncate => 6,
            Kind::Slow => 7,
        }
    }
}

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
/// use holdoff_proxy::fault::error::Rate;
/// use holdoff_proxy::fault::rng::FaultRng;
/// use holdoff_proxy::fault::plan::{ErrorRule, FaultPlan, NetworkFault, FaultOutcome, RequestMatch};
/// use holdoff_proxy::fault::stage::FaultStage;
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
    counts: [AtomicU64; 8],
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
    /// Matches so far, one per mock, in order (for `nth`).
    mock_hits: Box<[AtomicU64]>,
    /// Whether the plan does nothing at all.
    idle: bool,
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
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Step {
    Latency,
    Mocks,
    RateLimits,
    Errors,
}

/// The request body, as far as fragments are concerned.
enum Read {
    /// Not needed yet.
    Unread,
    /// All of it.
    Whole(Bytes),
    /// More than [`BODY_LIMIT`]: no fragment matches.
    TooLarge,
}

/// The result of one step: go on with the request, or this is the decision.
enum Flow {
    Next(Request<Body>),
    Done(Action),
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
        let count = |kind: Kind| self.inner.counts[kind.counter()].load(Ordering::Relaxed);
        FaultCounts {
            errors: count(Kind::Error),
            rate_limited: count(Kind::RateLimited),
            mocked: count(Kind::Mocked),
            delayed: count(Kind::Delayed),
            resets: count(Kind::Reset),
            hangs: count(Kind::Hang),
            truncated: count(Kind::Truncate),
            slowed: count(Kind::Slow),
        }
    }

    /// Drops idle rate-limit counters, and returns how many: the stage's upkeep
    /// ([`Stage::maintain`]), which the server runs.
    pub fn evict(&self, now: Instant) -> usize {
        let armed = self.inner.current();
        armed.limiters.iter().map(|l| l.evict(now)).sum()
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
        let mock_hits = plan.mocks.iter().map(|_| AtomicU64::new(0)).collect();
        let idle = plan.latency.is_none()
            && plan.mocks.is_empty()
            && !plan.block_unmocked
            && plan.rate_limits.is_empty()
            && plan.errors.is_empty();
        Armed {
            plan,
            limiters,
            counter_names,
            mock_hits,
            idle,
        }
    }
}

/// The name of a rule's counters in a shared store: a digest of what [`same_counter`]
/// compares, so replicas with the same rule share counters and an edited rule starts afresh.
fn counter_name(rule: &RateLimitRule) -> String {
    let Limit {
        algorithm,
        limit,
        window,
        cost,
    } = rule.limit;
    let text = format!(
        "{algorithm:?}\n{limit}\n{}\n{cost}\n{}\n{}\n{:?}",
        window.as_nanos(),
        rule.url.as_ref().map_or("*", |url| url.as_str()),
        rule.method.as_ref().map_or("*", |method| method.as_str()),
        rule.scope,
    );
    format!("{:032x}", xxhash_rust::xxh3::xxh3_128(text.as_bytes()))
}

/// Whether two rate-limit rules count the same thing the same way.
fn same_counter(old: &RateLimitRule, new: &RateLimitRule) -> bool {
    old.limit == new.limit
        && old.url == new.url
        && old.method == new.method
        && old.scope == new.scope
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
        self.counts[kind.counter()].fetch_add(1, Ordering::Relaxed);
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

    /// Runs the steps from `from` on: latency, mocks, rate limits, error rules.
    fn decide(
        self: &Arc<Self>,
        armed: &Arc<Armed>,
        mut request: Request<Body>,
        meta: &RequestMeta,
        url: &str,
        from: Step,
        read: Read,
    ) -> Action {
        if from <= Step::Latency {
            if let Some(delay) = self.latency(&armed.plan, url) {
                self.record(Kind::Delayed, meta, None, Some(delay));
                let deadline = self.clock.now().checked_add(delay);
                let (this, armed, meta, url) = self.keep(armed, meta, url);
                return Action::later(async move {
                    if let Some(deadline) = deadline {
                        this.clock.sleep_until(deadline).await;
                    }
                    this.decide(&armed, request, &meta, &url, Step::Mocks, read)
                });
            }
        }
        if from <= Step::Mocks {
            let wants_body = matches!(read, Read::Unread)
                && armed
                    .plan
                    .mocks
                    .iter()
                    .any(|mock| needs_body(&mock.request, meta, url));
            if wants_body {
                return self.read_body(armed, request, meta, url, Step::Mocks);
            }
            request = match self.mock(armed, request, meta, url, &read) {
                Flow::Next(request) => request,
                Flow::Done(action) => return action,
            };
        }
        if from <= Step::RateLimits {
            if let Some(store) = self.shared.get() {
                return self.rate_limit_shared(store, armed, request, meta, url, read);
            }
            let taken = self.take_local(armed, meta, url);
            request = match self.conclude_limits(armed, request, meta, taken) {
                Flow::Next(request) => request,
                Flow::Done(action) => return action,
            };
        }
        self.error(armed, request, meta, url, read)
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
                    Action::Respond(refusal.into_response())
                }
            }
        })
    }

    /// The delay a latency fault adds to this request, if it does.
    fn latency(&self, plan: &FaultPlan, url: &str) -> Option<Duration> {
        let rule = plan.latency.as_ref()?;
        if rule
            .url
            .as_ref()
            .is_some_and(|url_rule| !url_rule.matches_url(url))
        {
            return None;
        }
        self.rng.with(|rng| {
            if !rule.rate.fails(rng.random()) {
                return None;
            }
            let (low, high) = (*rule.delay.start(), *rule.delay.end());
            Some(if low < high {
                rng.random_range(low..=high)
            } else {
                low
            })
        })
    }

    /// The first mock that matches answers, counting `nth`; then the unmocked are blocked if
    /// the plan says so.
    fn mock(
        &self,
        armed: &Armed,
        request: Request<Body>,
        meta: &RequestMeta,
        url: &str,
        read: &Read,
    ) -> Flow {
        let plan = &armed.plan;
        for (index, mock) in plan.mocks.iter().enumerate() {
            if !matches(&mock.request, meta, url, read) {
                continue;
            }
            if let Some(nth) = mock.nth {
                let seen = armed.mock_hits[index].fetch_add(1, Ordering::Relaxed) + 1;
                if seen != nth {
                    continue;
                }
            }
            let action = match &mock.response {
                FaultOutcome::Respond(response) => {
                    let wall = self.clock.wall_now();
                    let rendered = self
                        .rng
                        .with(|rng| response.render(plan.retry_after_form, rng, wall));
                    self.record(
                        Kind::Mocked,
                        meta,
                        Some(rendered.response.status()),
                        rendered.hint,
                    );
                    Action::Respond(rendered.response.map(Body::full))
                }
                FaultOutcome::Network(fault) => {
                    self.record(Kind::Mocked, meta, None, None);
                    self.network(*fault, request, meta)
                }
            };
            return Flow::Done(action);
        }
        if plan.block_unmocked {
            self.record(Kind::Blocked, meta, Some(StatusCode::BAD_GATEWAY), None);
            let refusal = Refusal::new(
                StatusCode::BAD_GATEWAY,
                format!(
                    "no mock matches {} {} and unmocked requests are blocked",
                    meta.method, meta.target
                ),
            );
            return Flow::Done(Action::Respond(refusal.into_response()));
        }
        Flow::Next(request)
    }

    /// Counts the request under every rate limit it matches, in this proxy's limiters:
    /// each matching rule's index and what its limiter decided.
    fn take_local(&self, armed: &Armed, meta: &RequestMeta, url: &str) -> Vec<(usize, Taken)> {
        let mut matching = armed
            .plan
            .rate_limits
            .iter()
            .enumerate()
            .filter(|(_, rule)| limit_matches(rule, meta, url))
            .peekable();
        if matching.peek().is_none() {
            return Vec::new();
        }
        let now = self.clock.now();
        let mut client: Option<String> = None;
        matching
            .map(|(index, rule)| {
                let key = match rule.scope {
                    Scope::Client => client
                        .get_or_insert_with(|| meta.client.to_string())
                        .as_str(),
                    Scope::Shared => "",
                };
                (index, armed.limiters[index].take(key, now))
            })
            .collect()
    }

    /// Counts the request in this proxy's limiters and in the shared store, then goes on with
    /// the store's answers (or, while it fails, by its failure mode).
    fn rate_limit_shared(
        self: &Arc<Self>,
        store: &Arc<SharedStore>,
        armed: &Arc<Armed>,
        request: Request<Body>,
        meta: &RequestMeta,
        url: &str,
        read: Read,
    ) -> Action {
        let local = self.take_local(armed, meta, url);
        if local.is_empty() {
            return self.error(armed, request, meta, url, read);
        }
        let store = Arc::clone(store);
        let (this, armed, meta, url) = self.keep(armed, meta, url);
        Action::later(async move {
            let client = meta.client.to_string();
            let mut taken = Vec::with_capacity(local.len());
            for (index, mine) in local {
                let rule = &armed.plan.rate_limits[index];
                let counter = CounterKey {
                    rule: armed.counter_names[index].clone(),
                    scope: match rule.scope {
                        Scope::Client => client.clone(),
                        Scope::Shared => String::new(),
                    },
                };
                let outcome = store.state().take(&counter, rule.limit).await;
                match store.settle(outcome) {
                    Some(theirs) => taken.push((index, theirs)),
                    None => match store.on_failure() {
                        OnFailure::FailClosed { hold } => {
                            return Action::Respond(fail_closed_answer(hold));
                        }
                        _ => taken.push((index, mine)),
                    },
                }
            }
            match this.conclude_limits(&armed, request, &meta, taken) {
                Flow::Next(request) => this.error(&armed, request, &meta, &url, read),
                Flow::Done(action) => action,
            }
        })
    }

    /// The first limit that refused answers; otherwise an allowed request leaves the limits'
    /// headers for its response.
    fn conclude_limits(
        &self,
        armed: &Armed,
        mut request: Request<Body>,
        meta: &RequestMeta,
        taken: Vec<(usize, Taken)>,
    ) -> Flow {
        if taken.is_empty() {
            return Flow::Next(request);
        }
        let plan = &armed.plan;
        let wall = self.clock.wall_now();
        if let Some((rule, taken)) = taken
            .iter()
            .map(|(index, taken)| (&plan.rate_limits[*index], taken))
            .find(|(_, taken)| !taken.allowed)
        {
            let response = self.refusal(plan.retry_after_form, rule, taken, wall);
            let wait = taken.retry_after.unwrap_or(taken.reset);
            self.record(Kind::RateLimited, meta, Some(response.status()), Some(wait));
            return Flow::Done(Action::Respond(response));
        }
        let mut headers: Vec<(HeaderName, HeaderValue)> = Vec::new();
        for (index, taken) in &taken {
            let rule = &plan.rate_limits[*index];
            for (name, value) in
                ratelimit::headers(&rule.limit, taken, rule.headers, rule.reset_format, wall)
            {
                // Two limits in the same style: the first one's numbers are sent.
                if !headers.iter().any(|(known, _)| *known == name) {
                    headers.push((name, value));
                }
            }
        }
        if !headers.is_empty() {
            Notes::entry::<Left>(&mut request).headers = headers;
        }
        Flow::Next(request)
    }

    /// The answer past a limit: its `when_exceeded` with every `@dynamic` set to the wait, or
    /// `429` with `Retry-After`; and the style's headers, unless it sets them itself.
    fn refusal(
        &self,
        form: RetryAfterForm,
        rule: &RateLimitRule,
        taken: &Taken,
        wall: SystemTime,
    ) -> Response<Body> {
        let seconds = ceil_secs(taken.retry_after.unwrap_or(taken.reset));
        let mut response = match &rule.when_exceeded {
            Some(custom) => {
                let fixed = with_wait(custom, seconds);
                let Rendered { response, .. } = self.rng.with(|rng| fixed.render(form, rng, wall));
                response.map(Body::full)
            }
            None => {
                let mut response = Refusal::new(
                    StatusCode::TOO_MANY_REQUESTS,
                    format!("rate limit exceeded; retry in {seconds}s"),
                )
                .into_response();
                response
                    .headers_mut()
                    .insert(header::RETRY_AFTER, HeaderValue::from(seconds));
                response
            }
        };
        let headers = ratelimit::headers(&rule.limit, taken, rule.headers, rule.reset_format, wall);
        for (name, value) in headers {
            response.headers_mut().entry(name).or_insert(value);
        }
        response
    }

    /// The first error rule whose request matches decides: one draw for its rate, and on a
    /// failure one for the outcome.
    fn error(
        self: &Arc<Self>,
        armed: &Arc<Armed>,
        mut request: Request<Body>,
        meta: &RequestMeta,
        url: &str,
        read: Read,
    ) -> Action {
        let plan = &armed.plan;
        let mut chosen = None;
        for rule in &plan.errors {
            if !head_matches(&rule.request, meta, url) {
                continue;
            }
            if let Some(fragment) = &rule.request.body_fragment {
                match &read {
                    Read::Unread => {
                        return self.read_body(armed, request, meta, url, Step::Errors);
                    }
                    Read::Whole(bytes) if contains(bytes, fragment.as_bytes()) => {}
                    Read::Whole(_) | Read::TooLarge => continue,
                }
            }
            chosen = Some(rule);
            break;
        }
        let Some(rule) = chosen else {
            return Action::Continue(request);
        };
        let wall = self.clock.wall_now();
        let form = plan.retry_after_form;
        let failure = self.rng.with(|rng| {
            if !rule.rate.fails(rng.random()) {
                return None;
            }
            let pick = rng.random_range(0..rule.outcomes.len().max(1));
            Some(match rule.outcomes.get(pick)? {
                FaultOutcome::Respond(response) => Ok(response.render(form, rng, wall)),
                FaultOutcome::Network(fault) => Err(*fault),
            })
        });
        match failure {
            None => Action::Continue(request),
            Some(Ok(rendered)) => {
                self.record(
                    Kind::Error,
                    meta,
                    Some(rendered.response.status()),
                    rendered.hint,
                );
                // A counted request's limit headers go on the error that answers it.
                let mut response = rendered.response.map(Body::full);
                Notes::carry::<Left>(&mut request, &mut response);
                Action::Respond(response)
            }
            Some(Err(fault)) => self.network(fault, request, meta),
        }
    }

    /// Applies a network fault to the request.
    fn network(
        &self,
        fault: NetworkFault,
        mut request: Request<Body>,
        meta: &RequestMeta,
    ) -> Action {
        match fault {
            NetworkFault::Reset => {
                self.record(Kind::Reset, meta, None, None);
                Action::Abort
            }
            NetworkFault::Hang { r#for } => {
                self.record(Kind::Hang, meta, None, Some(r#for));
                drop(request);
                // hyper drops this future when the client closes the connection; otherwise
                // it ends as a reset.
                let deadline = self.clock.now().checked_add(r#for);
                let clock = Arc::clone(&self.clock);
                Action::later(async move {
                    match deadline {
                        Some(deadline) => clock.sleep_until(deadline).await,
                        None => std::future::pending().await,
                    }
                    Action::Abort
                })
            }
            NetworkFault::Truncate { .. } => {
                self.record(Kind::Truncate, meta, None, None);
                Notes::entry::<Left>(&mut request).body = Some(fault);
                Action::Continue(request)
            }
            NetworkFault::SlowBody { .. } => {
                self.record(Kind::Slow, meta, None, None);
                Notes::entry::<Left>(&mut request).body = Some(fault);
                Action::Continue(request)
            }
        }
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

/// Whether method and URL match (the body aside).
fn head_matches(rule: &RequestMatch, meta: &RequestMeta, url: &str) -> bool {
    rule.method
        .as_ref()
        .is_none_or(|method| *method == meta.method)
        && rule.url.matches_url(url)
}

/// Whether the request matches, body fragment included (no fragment matches a body not read).
fn matches(rule: &RequestMatch, meta: &RequestMeta, url: &str, read: &Read) -> bool {
    head_matches(rule, meta, url)
        && match (&rule.body_fragment, read) {
            (None, _) => true,
            (Some(fragment), Read::Whole(bytes)) => contains(bytes, fragment.as_bytes()),
            (Some(_), Read::Unread | Read::TooLarge) => false,
        }
}

/// Whether deciding `rule` needs the body.
fn needs_body(rule: &RequestMatch, meta: &RequestMeta, url: &str) -> bool {
    rule.body_fragment.is_some() && head_matches(rule, meta, url)
}

/// Whether a rate limit counts this request.
fn limit_matches(rule: &RateLimitRule, meta: &RequestMeta, url: &str) -> bool {
    rule.method
        .as_ref()
        .is_none_or(|method| *method == meta.method)
        && rule
            .url
            .as_ref()
            .is_none_or(|pattern| pattern.matches_url(url))
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    needle.is_empty()
        || haystack
            .windows(needle.len())
            .any(|window| window == needle)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fault::error::Rate;
    use crate::fault::plan::{ErrorRule, LatencyRule, MockRule};
    use crate::fault::ratelimit::{Algorithm, HeaderStyle, Limit, ResetFormat};
    use crate::{ClientId, Mode};
    use holdoff::Receipt;
    use holdoff::clock::{ManualClock, SystemClock, TokioClock};
    use http::Method;
    use http_body_util::BodyExt;
    use std::time::UNIX_EPOCH;

    const API: &str = "http://api.test/*";

    fn meta(id: u64, client: &str, method: Method, url: &str) -> RequestMeta {
        RequestMeta {
            id,
            client: ClientId::Header(client.into()),
            peer: "127.0.0.1:50000".parse().unwrap(),
            received: Receipt {
                instant: SystemClock.now(),
                wall: UNIX_EPOCH,
            },
            method,
            user_agent: None,
            target: crate::Target::new(url.parse().unwrap()),
            mode: Mode::Forward,
            watched: Some(API.into()),
        }
    }

    fn request(method: Method, url: &str, body: impl Into<Body>) -> Request<Body> {
        Request::builder()
            .method(method)
            .uri(url)
            .body(body.into())
            .unwrap()
    }

    /// Runs one request through the stage; ids count up from 0 per stage.
    struct Driver {
        stage: FaultStage,
        next_id: u64,
    }

    impl Driver {
        fn new(plan: FaultPlan, seed: u64) -> Driver {
            let clock = ManualClock::new(UNIX_EPOCH + Duration::from_secs(1_700_000_000));
            Driver::with_clock(plan, seed, Arc::new(clock))
        }

        fn with_clock(plan: FaultPlan, seed: u64, clock: Arc<dyn Clock>) -> Driver {
            Driver {
                stage: FaultStage::new(plan, FaultRng::new(seed), clock),
                next_id: 0,
            }
        }

        fn meta(&mut self, client: &str, method: Method, url: &str) -> RequestMeta {
            self.next_id += 1;
            meta(self.next_id, client, method, url)
        }

        /// The action for a bodiless request, as the pipeline would see it.
        fn send(&mut self, method: Method, url: &str) -> Action {
            let meta = self.meta("alice", method.clone(), url);
            self.stage
                .on_request(request(method, url, Body::empty()), &meta)
        }

        fn get(&mut self, url: &str) -> Action {
            self.send(Method::GET, url)
        }

        /// A GET as `client` through the stage and, when it continues, a `200` back through
        /// `on_response`.
        async fn exchange(&mut self, client: &str, url: &str) -> Response<Body> {
            let meta = self.meta(client, Method::GET, url);
            let action = self
                .stage
                .on_request(request(Method::GET, url, Body::empty()), &meta);
            let mut response = match settle(action).await {
                Action::Continue(mut request) => {
                    let mut response = Response::new(Body::from("upstream"));
                    Notes::pass(&mut request, &mut response);
                    response
                }
                Action::Respond(response) => response,
                other => panic!("unexpected {other:?}"),
            };
            self.stage.on_response(&mut response, &meta);
            response
        }
    }

    async fn settle(mut action: Action) -> Action {
        while let Action::Later(future) = action {
            action = future.await;
        }
        action
    }

    /// The status of an answer, `None` for a request that goes on.
    fn answered(action: &Action) -> Option<StatusCode> {
        match action {
            Action::Continue(_) => None,
            Action::Respond(response) => Some(response.status()),
            other => panic!("unexpected {other:?}"),
        }
    }

    fn header(response: &Response<Body>, name: &str) -> String {
        response
            .headers()
            .get(name)
            .map(|value| value.to_str().unwrap().to_owned())
            .unwrap_or_default()
    }

    fn error_response(status: u16, retry_after: Option<&str>) -> ErrorResponse {
        ErrorResponse {
            status: StatusCode::from_u16(status).unwrap(),
            headers: retry_after
                .map(|value| {
                    (
                        header::RETRY_AFTER,
                        HeaderTemplate::parse(value, 2..=60).unwrap(),
                    )
                })
                .into_iter()
                .collect(),
            body: Bytes::from_static(b"injected"),
        }
    }

    fn error_rule(url: &str, percent: f64, outcomes: Vec<FaultOutcome>) -> ErrorRule {
        ErrorRule {
            request: RequestMatch::url(url.parse().unwrap()),
            rate: Rate::percent(percent).unwrap(),
            outcomes,
        }
    }

    fn errors(rules: Vec<ErrorRule>) -> FaultPlan {
        FaultPlan {
            errors: rules,
            ..FaultPlan::default()
        }
    }

    fn throttled_at(percent: f64) -> FaultPlan {
        errors(vec![error_rule(
            API,
            percent,
            vec![FaultOutcome::Respond(error_response(429, Some("@dynamic")))],
        )])
    }

    fn failures(driver: &mut Driver, requests: usize) -> usize {
        (0..requests)
            .filter(|_| answered(&driver.get("http://api.test/items")).is_some())
            .count()
    }

    mod error_rules {
        use super::*;

        #[test]
        fn a_rate_of_zero_never_fails() {
            let mut driver = Driver::new(throttled_at(0.0), 1);
            assert_eq!(failures(&mut driver, 10_000), 0);
            assert_eq!(driver.stage.counts(), FaultCounts::default());
        }

        #[test]
        fn a_rate_of_a_hundred_always_fails() {
            let mut driver = Driver::new(throttled_at(100.0), 1);
            assert_eq!(failures(&mut driver, 10_000), 10_000);
            assert_eq!(driver.stage.counts().errors, 10_000);
        }

        #[test]
        fn a_rate_of_fifty_fails_about_half() {
            let mut driver = Driver::new(throttled_at(50.0), 1);
            let failed = failures(&mut driver, 10_000);
            assert!((4_800..=5_200).contains(&failed), "{failed}");
        }

        #[test]
        fn the_same_seed_gives_the_same_faults_and_another_seed_others() {
            let plan = || {
                errors(vec![error_rule(
                    API,
                    50.0,
                    vec![
                        FaultOutcome::Respond(error_response(429, Some("@dynamic"))),
                        FaultOutcome::Respond(error_response(503, Some("@dynamic"))),
                    ],
                )])
            };
            let run = |seed| {
                let mut driver = Driver::new(plan(), seed);
                (0..1_000)
                    .map(|_| match driver.get("http://api.test/items") {
                        Action::Respond(response) => {
                            Some((response.status(), header(&response, "retry-after")))
                        }
                        _ => None,
                    })
                    .collect::<Vec<_>>()
            };
            let first = run(42);
            assert_eq!(first, run(42));
            assert_ne!(first, run(43));
            // Both outcomes are drawn.
            assert!(first.iter().flatten().any(|(status, _)| *status == 429));
            assert!(first.iter().flatten().any(|(status, _)| *status == 503));
        }

        #[test]
        fn the_first_rule_that_matches_decides() {
            let plan = errors(vec![
                error_rule(
                    "http://api.test/quiet/*",
                    0.0,
                    vec![FaultOutcome::Respond(error_response(500, None))],
                ),
                error_rule(
                    "http://api.test/a/*",
                    100.0,
                    vec![FaultOutcome::Respond(error_response(500, None))],
                ),
                error_rule(
                    API,
                    100.0,
                    vec![FaultOutcome::Respond(error_response(503, None))],
                ),
            ]);
            let mut driver = Driver::new(plan, 1);
            assert_eq!(
                answered(&driver.get("http://api.test/a/1")),
                Some(StatusCode::INTERNAL_SERVER_ERROR)
            );
            assert_eq!(
                answered(&driver.get("http://api.test/b")),
                Some(StatusCode::SERVICE_UNAVAILABLE)
            );
            // The first match never fails, and the rules after it are not asked.
            assert_eq!(answered(&driver.get("http://api.test/quiet/1")), None);
        }

        #[test]
        fn a_method_limits_the_rule() {
            let mut rule = error_rule(
                API,
                100.0,
                vec![FaultOutcome::Respond(error_response(500, None))],
            );
            rule.request.method = Some(Method::POST);
            let mut driver = Driver::new(errors(vec![rule]), 1);
            assert_eq!(
                answered(&driver.send(Method::GET, "http://api.test/x")),
                None
            );
            assert_eq!(
                answered(&driver.send(Method::POST, "http://api.test/x")),
                Some(StatusCode::INTERNAL_SERVER_ERROR)
            );
        }

        #[test]
        fn a_default_port_in_the_url_still_matches() {
            let mut driver = Driver::new(throttled_at(100.0), 1);
            assert!(answered(&driver.get("http://api.test:80/x")).is_some());
            assert!(answered(&driver.get("http://api.test:8080/x")).is_none());
        }

        #[test]
        fn an_unwatched_request_is_not_touched() {
            let mut driver = Driver::new(throttled_at(100.0), 1);
            let mut meta = driver.meta("alice", Method::GET, "http://api.test/x");
            meta.watched = None;
            let action = driver.stage.on_request(
                request(Method::GET, "http://api.test/x", Body::empty()),
                &meta,
            );
            assert_eq!(answered(&action), None);
            assert_eq!(driver.stage.counts(), FaultCounts::default());
        }
    }

    mod mocks {
        use super::*;

        fn mock(nth: Option<u64>) -> MockRule {
            MockRule {
                request: RequestMatch::url("http://api.test/mocked".parse().unwrap()),
                nth,
                response: FaultOutcome::Respond(ErrorResponse {
                    status: StatusCode::OK,
                    headers: Vec::new(),
                    body: Bytes::from_static(b"{\"mocked\":true}"),
                }),
            }
        }

        #[tokio::test]
        async fn a_mock_answers_with_its_body() {
            let mut plan = FaultPlan::default();
            plan.mocks.push(mock(None));
            let mut driver = Driver::new(plan, 1);
            let response = driver.exchange("alice", "http://api.test/mocked").await;
            let body = response.into_body().collect().await.unwrap().to_bytes();
            assert_eq!(body, "{\"mocked\":true}");
            assert_eq!(driver.stage.counts().mocked, 1);
        }

        #[test]
        fn nth_answers_only_the_nth_match() {
            let mut plan = FaultPlan::default();
            plan.mocks.push(mock(Some(2)));
            let mut driver = Driver::new(plan, 1);
            let statuses: Vec<_> = (0..4)
                .map(|_| answered(&driver.get("http://api.test/mocked")))
                .collect();
            assert_eq!(statuses, [None, Some(StatusCode::OK), None, None]);
            // Other URLs do not count.
            assert_eq!(answered(&driver.get("http://api.test/other")), None);
        }

        #[test]
        fn replacing_the_plan_restarts_nth() {
            let plan = || {
                let mut plan = FaultPlan::default();
                plan.mocks.push(mock(Some(1)));
                plan
            };
            let mut driver = Driver::new(plan(), 1);
            assert!(answered(&driver.get("http://api.test/mocked")).is_some());
            assert!(answered(&driver.get("http://api.test/mocked")).is_none());
            driver.stage.replace_plan(plan());
            assert!(answered(&driver.get("http://api.test/mocked")).is_some());
        }

        #[tokio::test]
        async fn unmocked_requests_are_blocked_with_a_one_line_reason() {
            let mut plan = FaultPlan::default();
            plan.mocks.push(mock(None));
            plan.block_unmocked = true;
            let mut driver = Driver::new(plan, 1);
            assert_eq!(
                answered(&driver.get("http://api.test/mocked")),
                Some(StatusCode::OK)
            );
            let response = driver.exchange("alice", "http://api.test/other").await;
            assert_eq!(response.status(), StatusCode::BAD_GATEWAY);
            let body = response.into_body().collect().await.unwrap().to_bytes();
            let text = std::str::from_utf8(&body).unwrap();
            assert_eq!(text.trim_end().lines().count(), 1, "{text}");
        }
    }

    mod rate_limits {
        use super::*;

        const S: Duration = Duration::from_secs(1);

        fn limited(style: HeaderStyle, when_exceeded: Option<ErrorResponse>) -> FaultPlan {
            let mut plan = FaultPlan::default();
            plan.rate_limits.push(RateLimitRule {
                url: None,
                method: None,
                limit: Limit {
                    algorithm: Algorithm::FixedWindow,
                    limit: 3,
                    window: 10 * S,
                    cost: 1,
                },
                scope: Scope::Client,
                headers: style,
                reset_format: ResetFormat::SecondsLeft,
                when_exceeded,
            });
            plan
        }

        /// Three requests at 2.25 s into the window, then the refused fourth.
        async fn fill(driver: &mut Driver) -> (Vec<Response<Body>>, Response<Body>) {
            tokio::time::advance(2 * S + Duration::from_millis(250)).await;
            let mut allowed = Vec::new();
            for _ in 0..3 {
                allowed.push(driver.exchange("alice", "http://api.test/x").await);
            }
            let refused = driver.exchange("alice", "http://api.test/x").await;
            (allowed, refused)
        }

        fn driver(plan: FaultPlan) -> Driver {
            Driver::with_clock(plan, 1, Arc::new(TokioClock))
        }

        #[tokio::test(start_paused = true)]
        async fn admits_the_limit_then_refuses_with_the_wait_rounded_up() {
            let mut driver = driver(limited(HeaderStyle::Draft, None));
            let (allowed, refused) = fill(&mut driver).await;
            for (response, remaining) in allowed.iter().zip(["2", "1", "0"]) {
                assert_eq!(response.status(), StatusCode::OK);
                assert_eq!(header(response, "ratelimit-limit"), "3");
                assert_eq!(header(response, "ratelimit-remaining"), remaining);
                assert_eq!(header(response, "ratelimit-reset"), "8");
            }
            assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
            // 7.75 s are left in the window: 8 whole seconds.
            assert_eq!(header(&refused, "retry-after"), "8");
            assert_eq!(header(&refused, "ratelimit-remaining"), "0");
            assert!(header(&refused, "content-type").starts_with("text/plain"));
            assert_eq!(driver.stage.counts().rate_limited, 1);

            // Another client has its own counter.
            let bob = driver.exchange("bob", "http://api.test/x").await;
            assert_eq!(bob.status(), StatusCode::OK);
            // The window ends: the count starts over.
            tokio::time::advance(8 * S).await;
            let later = driver.exchange("alice", "http://api.test/x").await;
            assert_eq!(later.status(), StatusCode::OK);
        }

        #[tokio::test(start_paused = true)]
        async fn writes_each_style() {
            let mut driver = driver(limited(HeaderStyle::Ietf, None));
            let (allowed, refused) = fill(&mut driver).await;
            assert_eq!(
                header(&allowed[0], "ratelimit-policy"),
                "\"default\";q=3;w=10"
            );
            assert_eq!(header(&allowed[0], "ratelimit"), "\"default\";r=2;t=8");
            assert_eq!(header(&refused, "ratelimit"), "\"default\";r=0;t=8");

            let mut driver = self::driver(limited(HeaderStyle::XRateLimit, None));
            let (allowed, refused) = fill(&mut driver).await;
            assert_eq!(header(&allowed[2], "x-ratelimit-remaining"), "0");
            assert_eq!(header(&refused, "x-ratelimit-limit"), "3");

            let mut driver = self::driver(limited(HeaderStyle::None, None));
            let (allowed, refused) = fill(&mut driver).await;
            assert!(
                allowed[0]
                    .headers()
                    .keys()
                    .all(|name| !name.as_str().contains("ratelimit"))
            );
            assert_eq!(header(&refused, "retry-after"), "8");
        }

        #[tokio::test(start_paused = true)]
        async fn a_custom_refusal_gets_the_wait_in_its_dynamic_header() {
            let github = ErrorResponse {
                status: StatusCode::FORBIDDEN,
                headers: vec![
                    (
                        header::RETRY_AFTER,
                        HeaderTemplate::parse("@dynamic", 1..=1).unwrap(),
                    ),
                    (
                        header::CONTENT_TYPE,
                        HeaderTemplate::parse("application/json", 1..=1).unwrap(),
                    ),
                ],
                body: Bytes::from_static(b"{\"message\":\"API rate limit exceeded\"}"),
            };
            let mut plan = limited(HeaderStyle::XRateLimit, Some(github));
            plan.rate_limits[0].reset_format = ResetFormat::EpochSeconds;
            let mut driver = driver(plan);
            let (_, refused) = fill(&mut driver).await;
            assert_eq!(refused.status(), StatusCode::FORBIDDEN);
            assert_eq!(header(&refused, "retry-after"), "8");
            assert_eq!(header(&refused, "content-type"), "application/json");
            let reset: u64 = header(&refused, "x-ratelimit-reset").parse().unwrap();
            let now = TokioClock
                .wall_now()
                .duration_since(UNIX_EPOCH)
                .unwrap()
                .as_secs();
            assert!((now + 7..=now + 9).contains(&reset), "{reset} vs {now}");
            let body = refused.into_body().collect().await.unwrap().to_bytes();
            assert_eq!(body, "{\"message\":\"API rate limit exceeded\"}");
        }

        #[tokio::test(start_paused = true)]
        async fn a_shared_limit_counts_everyone_together() {
            let mut plan = limited(HeaderStyle::None, None);
            plan.rate_limits[0].scope = Scope::Shared;
            let mut driver = driver(plan);
            for client in ["a", "b", "c"] {
                assert_eq!(
                    driver.exchange(client, "http://api.test/x").await.status(),
                    200
                );
            }
            assert_eq!(
                driver.exchange("d", "http://api.test/x").await.status(),
                429
            );
        }

        #[tokio::test(start_paused = true)]
        async fn replacing_the_plan_keeps_unchanged_counters() {
            let mut driver = driver(limited(HeaderStyle::None, None));
            fill(&mut driver).await;
            // Same limit, plus an error rule that never fires: the counter carries over.
            let mut plan = limited(HeaderStyle::None, None);
            plan.errors = throttled_at(0.0).errors;
            driver.stage.replace_plan(plan);
            assert_eq!(
                driver.exchange("alice", "http://api.test/x").await.status(),
                429
            );
            // A changed limit starts afresh.
            let mut plan = limited(HeaderStyle::None, None);
            plan.rate_limits[0].limit.limit = 4;
            driver.stage.replace_plan(plan);
            assert_eq!(
                driver.exchange("alice", "http://api.test/x").await.status(),
                200
            );
        }

        #[tokio::test(start_paused = true)]
        async fn eviction_forgets_idle_counters() {
            let mut driver = driver(limited(HeaderStyle::None, None));
            fill(&mut driver).await;
            assert_eq!(driver.stage.evict(TokioClock.now()), 0);
            tokio::time::advance(30 * S).await;
            assert_eq!(driver.stage.evict(TokioClock.now()), 1);
        }
    }

    mod latency {
        use super::*;

        #[tokio::test(start_paused = true)]
        async fn delays_then_goes_on() {
            let mut plan = throttled_at(0.0);
            plan.latency = Some(LatencyRule {
                url: None,
                rate: Rate::ALWAYS,
                delay: Duration::from_millis(200)..=Duration::from_millis(400),
            });
            let mut driver = Driver::with_clock(plan, 1, Arc::new(TokioClock));
            let start = TokioClock.now();
            let action = driver.get("http://api.test/x");
            assert!(matches!(action, Action::Later(_)), "{action:?}");
            assert!(matches!(settle(action).await, Action::Continue(_)));
            let waited = TokioClock.now() - start;
            assert!(waited >= Duration::from_millis(200) && waited <= Duration::from_millis(400));
            assert_eq!(driver.stage.counts().delayed, 1);
            assert_eq!(driver.stage.counts().errors, 0);
        }
    }

    mod body_fragments {
        use super::*;

        fn plan() -> FaultPlan {
            let mut rule = error_rule(
                API,
                100.0,
                vec![FaultOutcome::Respond(error_response(500, None))],
            );
            rule.request.method = Some(Method::POST);
            rule.request.body_fragment = Some("\"model\":\"big\"".to_owned());
            errors(vec![rule])
        }

        async fn post(driver: &mut Driver, body: &'static str) -> Action {
            let meta = driver.meta("alice", Method::POST, "http://api.test/chat");
            let action = driver
                .stage
                .on_request(request(Method::POST, "http://api.test/chat", body), &meta);
            assert!(matches!(action, Action::Later(_)), "the body is read first");
            settle(action).await
        }

        #[tokio::test]
        async fn a_body_with_the_fragment_is_faulted() {
            let mut driver = Driver::new(plan(), 1);
            let action = post(&mut driver, "{\"model\":\"big\",\"n\":1}").await;
            assert_eq!(answered(&action), Some(StatusCode::INTERNAL_SERVER_ERROR));
        }

        #[tokio::test]
        async fn a_body_without_it_passes_whole() {
            let mut driver = Driver::new(plan(), 1);
            let Action::Continue(request) = post(&mut driver, "{\"model\":\"small\"}").await else {
                panic!("not passed on");
            };
            let body = request.into_body().collect().await.unwrap().to_bytes();
            assert_eq!(body, "{\"model\":\"small\"}");
        }

        #[tokio::test]
        async fn a_get_is_not_read() {
            let mut driver = Driver::new(plan(), 1);
            assert!(matches!(
                driver.get("http://api.test/chat"),
                Action::Continue(_)
            ));
        }
    }

    mod network {
        use super::*;

        fn faulting(fault: NetworkFault) -> FaultPlan {
            errors(vec![error_rule(
                API,
                100.0,
                vec![FaultOutcome::Network(fault)],
            )])
        }

        #[test]
        fn a_reset_aborts() {
            let mut driver = Driver::new(faulting(NetworkFault::Reset), 1);
            assert!(matches!(driver.get("http://api.test/x"), Action::Abort));
            assert_eq!(driver.stage.counts().resets, 1);
        }

        #[tokio::test(start_paused = true)]
        async fn a_hang_aborts_once_its_time_is_up() {
            let hang = NetworkFault::Hang {
                r#for: Duration::from_secs(3600),
            };
            let mut driver = Driver::with_clock(faulting(hang), 1, Arc::new(TokioClock));
            let start = TokioClock.now();
            let action = driver.get("http://api.test/x");
            assert!(matches!(settle(action).await, Action::Abort));
            assert_eq!(TokioClock.now() - start, Duration::from_secs(3600));
            assert_eq!(driver.stage.counts().hangs, 1);
        }

        #[tokio::test]
        async fn a_truncated_body_breaks_off_with_its_length_kept() {
            let fault = NetworkFault::Truncate { after: None };
            let mut driver = Driver::new(faulting(fault), 1);
            let meta = driver.meta("alice", Method::GET, "http://api.test/x");
            let action = driver.stage.on_request(
                request(Method::GET, "http://api.test/x", Body::empty()),
                &meta,
            );
            let Action::Continue(mut request) = action else {
                panic!("a truncate goes on upstream: {action:?}");
            };
            let mut response = Response::new(Body::from("0123456789"));
            response
                .headers_mut()
                .insert(header::CONTENT_LENGTH, HeaderValue::from(10));
            Notes::pass(&mut request, &mut response);
            driver.stage.on_response(&mut response, &meta);
            assert_eq!(header(&response, "content-length"), "10");
            let mut body = response.into_body();
            let first = body.frame().await.unwrap().unwrap().into_data().unwrap();
            assert_eq!(first, "01234");
            assert!(body.frame().await.unwrap().is_err());
            assert_eq!(driver.stage.counts().truncated, 1);
        }

        #[tokio::test]
        async fn what_a_request_leaves_is_taken_once() {
            let fault = NetworkFault::Truncate { after: Some(1) };
            let mut driver = Driver::new(faulting(fault), 1);
            let meta = driver.meta("alice", Method::GET, "http://api.test/x");
            let action = driver.stage.on_request(
                request(Method::GET, "http://api.test/x", Body::empty()),
                &meta,
            );
            let Action::Continue(mut request) = action else {
                panic!("a truncate goes on upstream: {action:?}");
            };
            let mut response = Response::new(Body::from("whole"));
            Notes::pass(&mut request, &mut response);
            driver.stage.on_response(&mut response, &meta);
            assert!(Notes::get::<Left>(&response).is_none(), "taken");
            // A second pass finds nothing to apply.
            let mut again = Response::new(Body::from("whole"));
            driver.stage.on_response(&mut again, &meta);
            assert_eq!(
                again.into_body().collect().await.unwrap().to_bytes(),
                "whole"
            );
        }
    }
}
