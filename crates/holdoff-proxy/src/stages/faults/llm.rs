//! The fault stage's token-budget step, beside the windows it drives
//! ([`TokenWindows`](crate::fault::tokens::TokenWindows)): refuse a completion request once a
//! budget it counts under is used up; otherwise let it through, and count the tokens its
//! response says it used ([`tap`]) in every budget it matched.

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use http::{HeaderValue, Request, Response, StatusCode, header};

use super::{Armed, Flow, Inner, Kind, Read, Step, answer, with_wait};
use crate::body::Body;
use crate::fault::tokens::{BudgetCheck, Spent, TokenWindows, Usage};
use crate::fault::usage::{Reader, Tap, prompt_estimate};
use crate::fault::{FaultPlan, LlmRateLimitRule, Scope};
use crate::fault::{Rendered, RetryAfterForm};
use crate::proxy::{Action, Notes, RequestMeta};
use crate::secs::ceil_secs;
use crate::shared::fail_closed_answer;
use crate::shared::{CounterKey, OnFailure, SharedStore};

/// The run-time state of a plan's token budgets: one set of windows per rule, in order.
pub(super) struct Budgets {
    windows: Box<[Arc<TokenWindows>]>,
    /// Each rule's budgets' name in a shared store.
    names: Box<[String]>,
}

impl Budgets {
    /// Windows for every budget of `plan`; those of `previous` whose rule is unchanged carry
    /// over (a data file was reloaded).
    pub(super) fn new(plan: &FaultPlan, previous: Option<&Armed>) -> Budgets {
        let mut reusable: Vec<Option<(&LlmRateLimitRule, &Arc<TokenWindows>)>> = previous
            .map(|previous| {
                previous
                    .plan
                    .llm_rate_limits
                    .iter()
                    .zip(previous.budgets.windows.iter())
                    .map(Some)
                    .collect()
            })
            .unwrap_or_default();
        let windows = plan
            .llm_rate_limits
            .iter()
            .map(|rule| {
                let kept = reusable
                    .iter_mut()
                    .find(|slot| slot.is_some_and(|(old, _)| same_budget(old, rule)))
                    .and_then(Option::take);
                match kept {
                    Some((_, windows)) => Arc::clone(windows),
                    None => Arc::new(TokenWindows::new(rule.budget)),
                }
            })
            .collect();
        let names = plan.llm_rate_limits.iter().map(budget_name).collect();
        Budgets { windows, names }
    }

    /// Forgets ended windows, and returns how many.
    pub(super) fn evict(&self, now: Instant) -> usize {
        self.windows.iter().map(|windows| windows.evict(now)).sum()
    }
}

/// The name of a rule's budgets in a shared store: a digest of what [`same_budget`]
/// compares, so replicas with the same rule share them and an edited rule starts afresh.
fn budget_name(rule: &LlmRateLimitRule) -> String {
    let text = format!(
        "tokens\n{}\n{}\n{}\n{}\n{:?}",
        rule.budget.prompt,
        rule.budget.completion,
        rule.budget.window.as_nanos(),
        rule.url.as_ref().map_or("*", |url| url.as_str()),
        rule.scope,
    );
    format!("{:032x}", xxhash_rust::xxh3::xxh3_128(text.as_bytes()))
}

/// Whether two budgets count the same thing the same way.
fn same_budget(old: &LlmRateLimitRule, new: &LlmRateLimitRule) -> bool {
    old.budget == new.budget && old.url == new.url && old.scope == new.scope
}

/// What a counted request leaves for its response: its prompt's estimate, and the windows
/// its tokens count in: this proxy's (windows, key, window) and a shared store's.
#[derive(Clone)]
struct Counted {
    prompt: u64,
    spends: Vec<(Arc<TokenWindows>, String, u64)>,
    shared: Option<(Arc<SharedStore>, SharedSpends)>,
}

/// The shared store's budgets a request's tokens count in: (budget, window).
type SharedSpends = Vec<(CounterKey, u64)>;

/// One budget's verdict on a request: this proxy's, and the shared store's when there is one.
struct Checked {
    index: usize,
    key: String,
    local: BudgetCheck,
    shared: Option<(CounterKey, BudgetCheck)>,
}

impl LlmRateLimitRule {
    /// Whether this budget counts a request with `method` to `url` (its body aside).
    fn counts(&self, method: &http::Method, url: &str) -> bool {
        method == http::Method::POST
            && self
                .url
                .as_ref()
                .is_none_or(|pattern| pattern.matches_url(url))
    }
}

impl Inner {
    /// The token-budget step: refuses the request once a budget it counts under is used up,
    /// and otherwise leaves what its response's tokens count in. Reads the body first (and
    /// resumes at `position`) when a budget's URL matches.
    pub(super) fn llm_rate_limit(
        self: &Arc<Self>,
        armed: &Arc<Armed>,
        request: Request<Body>,
        meta: &RequestMeta,
        url: &str,
        read: &Read,
        position: usize,
    ) -> Flow {
        let plan = &armed.plan;
        let mut matching = plan
            .llm_rate_limits
            .iter()
            .enumerate()
            .filter(|(_, rule)| rule.counts(&meta.method, url))
            .peekable();
        if matching.peek().is_none() {
            return Flow::Next(request);
        }
        let body = match read {
            Read::Unread => {
                let reading = self.read_body(armed, request, meta, url, Step::At(position));
                return Flow::Done(reading);
            }
            Read::TooLarge => return Flow::Next(request),
            Read::Whole(body) => body,
        };
        let Some(prompt) = prompt_estimate(body) else {
            return Flow::Next(request);
        };
        let now = self.clock.now();
        let client = meta.client.to_string();
        let checked: Vec<Checked> = matching
            .map(|(index, rule)| {
                let key = match rule.scope {
                    Scope::Client => client.clone(),
                    Scope::Shared => String::new(),
                };
                let local = armed.budgets.windows[index].check(&key, now);
                Checked {
                    index,
                    key,
                    local,
                    shared: None,
                }
            })
            .collect();
        let Some(store) = self.shared.get().map(Arc::clone) else {
            return self.conclude_budgets(armed, request, meta, prompt, checked, None);
        };
        let read = read.clone();
        let (this, armed, meta, url) = self.keep(armed, meta, url);
        Flow::Done(Action::later(async move {
            let mut checked = checked;
            for check in &mut checked {
                let rule = &armed.plan.llm_rate_limits[check.index];
                let counter = CounterKey {
                    rule: armed.budgets.names[check.index].clone(),
                    scope: check.key.clone(),
                };
                let outcome = store.state().budget_check(&counter, rule.budget).await;
                match store.settle(outcome) {
                    Some(theirs) => check.shared = Some((counter, theirs)),
                    None => {
                        if let OnFailure::FailClosed { hold } = store.on_failure() {
                            return answer((request, fail_closed_answer(hold)));
                        }
                    }
                }
            }
            let flow = this.conclude_budgets(&armed, request, &meta, prompt, checked, Some(store));
            match flow {
                Flow::Next(request) => {
                    let next = Step::At(position + 1);
                    this.decide(&armed, request, &meta, &url, next, read)
                }
                Flow::Answer(answered) => answer(*answered),
                Flow::Done(action) => action,
            }
        }))
    }

    /// The first budget used up answers (the shared store's verdict, where it gave one);
    /// otherwise the request leaves where its tokens count, and goes on.
    fn conclude_budgets(
        &self,
        armed: &Armed,
        mut request: Request<Body>,
        meta: &RequestMeta,
        prompt: u64,
        checked: Vec<Checked>,
        store: Option<Arc<SharedStore>>,
    ) -> Flow {
        let plan = &armed.plan;
        let verdict = |check: &Checked| check.shared.as_ref().map_or(check.local, |(_, c)| *c);
        if let Some((check, spent, reset)) = checked.iter().find_map(|check| match verdict(check) {
            BudgetCheck::Exhausted { spent, reset } => Some((check, spent, reset)),
            BudgetCheck::Within { .. } => None,
        }) {
            let rule = &plan.llm_rate_limits[check.index];
            let wall = self.clock.wall_now();
            let response = self.token_refusal(plan.retry_after_form, rule, spent, reset, wall);
            self.record(
                Kind::RateLimited,
                meta,
                Some(response.status()),
                Some(reset),
            );
            return Flow::answer(request, response);
        }
        let mut spends = Vec::new();
        let mut shared = Vec::new();
        for check in checked {
            if let BudgetCheck::Within { window } = check.local {
                let windows = Arc::clone(&armed.budgets.windows[check.index]);
                spends.push((windows, check.key, window));
            }
            if let Some((counter, BudgetCheck::Within { window })) = check.shared {
                shared.push((counter, window));
            }
        }
        // The usage is read from the body as it passes: an encoded one could not be read.
        request.headers_mut().remove(header::ACCEPT_ENCODING);
        let shared = store
            .filter(|_| !shared.is_empty())
            .map(|store| (store, shared));
        Notes::leave(
            &mut request,
            Counted {
                prompt,
                spends,
                shared,
            },
        );
        Flow::Next(request)
    }

    /// The answer once a budget is used up: the rule's `when_exceeded` with every `@dynamic`
    /// set to the wait, or `429` with the wait and OpenAI's error body.
    fn token_refusal(
        &self,
        form: RetryAfterForm,
        rule: &LlmRateLimitRule,
        spent: Spent,
        reset: Duration,
        wall: SystemTime,
    ) -> Response<Body> {
        let seconds = ceil_secs(reset);
        if let Some(custom) = &rule.when_exceeded {
            let fixed = with_wait(custom, seconds);
            let Rendered { response, .. } = self.rng.with(|rng| fixed.render(form, rng, wall));
            return response.map(Body::full);
        }
        let (limit, which) = match spent {
            Spent::Prompt => (rule.budget.prompt, "prompt"),
            Spent::Completion => (rule.budget.completion, "completion"),
        };
        let body = serde_json::json!({
            "error": {
                "message": format!(
                    "Rate limit reached for {which} tokens: the limit of {limit} per {} s is \
                     used up. Please try again in {seconds}s.",
                    rule.budget.window.as_secs()
                ),
                "type": "tokens",
                "param": null,
                "code": "rate_limit_exceeded",
            }
        });
        let mut response = Response::new(Body::full(body.to_string()));
        *response.status_mut() = StatusCode::TOO_MANY_REQUESTS;
        let headers = response.headers_mut();
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        headers.insert(rule.retry_after_header.clone(), HeaderValue::from(seconds));
        response
    }
}

/// Reads the response of a counted request as it passes, and counts the tokens it used once
/// it is over: [`Stage::on_response`](crate::Stage::on_response)'s part.
pub(super) fn tap(response: &mut Response<Body>) {
    let Some(Counted {
        prompt,
        spends,
        shared,
    }) = Notes::take::<Counted>(response)
    else {
        return;
    };
    let reader = Reader::new(response.headers());
    let success = response.status().is_success();
    let inner = std::mem::take(response.body_mut());
    let settle = Box::new(move |usage: Option<Usage>| {
        let Some(usage) = usage else {
            return;
        };
        for (windows, key, window) in &spends {
            let counted = windows.spend(key, *window, usage);
            tracing::debug!(
                target: "holdoff::fault",
                prompt = usage.prompt,
                completion = usage.completion,
                counted,
                "language-model tokens used"
            );
        }
        let Some((store, counters)) = shared else {
            return;
        };
        // The body is over, and nobody waits for the store: it is told in the background.
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        runtime.spawn(async move {
            for (counter, window) in counters {
                let outcome = store.state().budget_spend(&counter, window, usage).await;
                store.settle(outcome);
            }
        });
    });
    *response.body_mut() = Body::wrap(Tap::new(inner, reader, prompt, success, settle));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fault::FaultRng;
    use crate::fault::tokens::TokenBudget;
    use crate::proxy::{RequestMeta, Stage};
    use crate::stages::faults::FaultStage;
    use holdoff::Receipt;
    use holdoff::clock::{Clock, ManualClock};
    use http::Method;
    use http_body_util::BodyExt;
    use std::time::UNIX_EPOCH;

    const URL: &str = "http://llm.test/v1/chat/completions";
    const CHAT: &str = r#"{"model":"m","messages":[{"role":"user","content":"Hi"}]}"#;

    struct Driver {
        stage: FaultStage,
        clock: Arc<ManualClock>,
        next_id: u64,
    }

    impl Driver {
        fn new(budget: TokenBudget, scope: Scope) -> Driver {
            let mut plan = FaultPlan::default();
            plan.llm_rate_limits.push(LlmRateLimitRule {
                url: None,
                budget,
                scope,
                retry_after_header: header::RETRY_AFTER,
                when_exceeded: None,
            });
            let clock = Arc::new(ManualClock::new(UNIX_EPOCH));
            let stage = FaultStage::new(plan, FaultRng::new(1), clock.clone());
            Driver {
                stage,
                clock,
                next_id: 0,
            }
        }

        /// A chat completion from `client`; when it goes on, the upstream answers `reply`
        /// (`content_type`), read to its end through the stage.
        async fn chat(&mut self, client: &str, content_type: &str, reply: &str) -> Response<Body> {
            self.next_id += 1;
            let received = Receipt {
                instant: self.clock.now(),
                wall: self.clock.wall_now(),
            };
            let meta = RequestMeta {
                method: Method::POST,
                watched: Some("*".into()),
                ..RequestMeta::for_test(self.next_id, client, URL, received)
            };
            let request = Request::builder()
                .method(Method::POST)
                .uri(URL)
                .header(header::ACCEPT_ENCODING, "gzip")
                .body(Body::from(CHAT))
                .unwrap();
            let mut action = self.stage.on_request(request, &meta);
            while let Action::Later(future) = action {
                action = future.await;
            }
            let mut response = match action {
                Action::Continue(mut request) => {
                    assert!(!request.headers().contains_key(header::ACCEPT_ENCODING));
                    let mut response = Response::new(Body::from(reply.to_owned()));
                    response
                        .headers_mut()
                        .insert(header::CONTENT_TYPE, content_type.parse().unwrap());
                    Notes::pass(&mut request, &mut response);
                    response
                }
                Action::Respond(response) => response,
                other => panic!("unexpected {other:?}"),
            };
            self.stage.on_response(&mut response, &meta);
            let (parts, body) = response.into_parts();
            let bytes = body.collect().await.unwrap().to_bytes();
            Response::from_parts(parts, Body::from(bytes))
        }
    }

    fn usage(prompt: u64, completion: u64) -> String {
        format!(
            r#"{{"choices":[{{"message":{{"content":"ok"}}}}],
               "usage":{{"prompt_tokens":{prompt},"completion_tokens":{completion}}}}}"#
        )
    }

    const BUDGET: TokenBudget = TokenBudget {
        prompt: 100,
        completion: u64::MAX,
        window: Duration::from_secs(60),
    };

    mod llm_rate_limit {
        use super::*;

        #[tokio::test]
        async fn refuses_once_the_prompts_use_the_budget_until_the_window_ends() {
            let mut driver = Driver::new(BUDGET, Scope::Client);
            for _ in 0..2 {
                let response = driver
                    .chat("alice", "application/json", &usage(50, 5))
                    .await;
                assert_eq!(response.status(), StatusCode::OK);
            }
            driver.clock.advance(Duration::from_millis(20_500));
            let refused = driver.chat("alice", "application/json", &usage(1, 1)).await;
            assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
            assert_eq!(refused.headers()[header::RETRY_AFTER], "40");
            let body: serde_json::Value =
                serde_json::from_slice(&refused.into_body().collect().await.unwrap().to_bytes())
                    .unwrap();
            assert_eq!(body["error"]["code"], "rate_limit_exceeded");
            assert_eq!(driver.stage.counts().rate_limited, 1);
            // Another client has its own budget.
            let other = driver.chat("bob", "application/json", &usage(1, 1)).await;
            assert_eq!(other.status(), StatusCode::OK);
            driver.clock.advance(Duration::from_millis(39_500));
            let again = driver.chat("alice", "application/json", &usage(1, 1)).await;
            assert_eq!(again.status(), StatusCode::OK, "a new window");
        }

        #[tokio::test]
        async fn counts_a_streams_usage_chunk_for_everyone_when_shared() {
            let budget = TokenBudget {
                prompt: u64::MAX,
                completion: 30,
                window: Duration::from_secs(10),
            };
            let mut driver = Driver::new(budget, Scope::Shared);
            let stream = "data: {\"choices\":[{\"delta\":{\"content\":\"Hi\"}}]}\n\n\
                data: {\"choices\":[],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":30}}\n\n\
                data: [DONE]\n\n";
            let first = driver.chat("alice", "text/event-stream", stream).await;
            assert_eq!(first.status(), StatusCode::OK);
            let refused = driver.chat("bob", "application/json", &usage(1, 1)).await;
            assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
            assert_eq!(refused.headers()[header::RETRY_AFTER], "10");
        }

        #[tokio::test]
        async fn passes_requests_that_are_not_completions() {
            let mut driver = Driver::new(
                TokenBudget {
                    prompt: 1,
                    ..BUDGET
                },
                Scope::Client,
            );
            driver.chat("alice", "application/json", &usage(5, 5)).await;
            // Used up; a GET is not counted, nor refused.
            let meta = RequestMeta {
                watched: Some("*".into()),
                ..RequestMeta::for_test(
                    99,
                    "alice",
                    URL,
                    Receipt {
                        instant: driver.clock.now(),
                        wall: driver.clock.wall_now(),
                    },
                )
            };
            let get = Request::get(URL).body(Body::empty()).unwrap();
            assert!(matches!(
                driver.stage.on_request(get, &meta),
                Action::Continue(_)
            ));
        }
    }
}
