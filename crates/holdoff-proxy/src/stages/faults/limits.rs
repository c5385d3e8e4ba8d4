//! The fault stage's rate-limit step, beside the limiter it drives
//! ([`RateLimiter`](super::ratelimit::RateLimiter)): count a request under every limit that
//! matches it, here and in a shared store, refuse past a limit, and leave the limits' headers
//! for the response otherwise.

use std::sync::Arc;
use std::time::SystemTime;

use http::{HeaderName, HeaderValue, Request, Response, StatusCode, header};

use super::{Armed, Flow, Inner, Kind, Left, Read, Step, answer, with_wait};
use crate::body::Body;
use crate::fault::ratelimit::{self, Limit, Taken};
use crate::fault::{RateLimitRule, Scope};
use crate::fault::{Rendered, RetryAfterForm};
use crate::proxy::reply::Refusal;
use crate::proxy::{Action, Notes, RequestMeta};
use crate::secs::ceil_secs;
use crate::shared::fail_closed_answer;
use crate::shared::{CounterKey, OnFailure};

/// The name of a rule's counters in a shared store: a digest of what [`same_counter`]
/// compares, so replicas with the same rule share counters and an edited rule starts afresh.
pub(super) fn counter_name(rule: &RateLimitRule) -> String {
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
pub(super) fn same_counter(old: &RateLimitRule, new: &RateLimitRule) -> bool {
    old.limit == new.limit
        && old.url == new.url
        && old.method == new.method
        && old.scope == new.scope
}

impl Inner {
    /// Counts the request under every rate limit it matches, in this proxy's limiters:
    /// each matching rule's index and what its limiter decided.
    pub(super) fn take_local(
        &self,
        armed: &Armed,
        meta: &RequestMeta,
        url: &str,
    ) -> Vec<(usize, Taken)> {
        let mut matching = armed
            .plan
            .rate_limits
            .iter()
            .enumerate()
            .filter(|(_, rule)| rule.counts(&meta.method, url))
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

    /// Counts the request in this proxy's limiters and in the shared store (the caller found
    /// one), then goes on with the store's answers (or, while it fails, by its failure mode)
    /// and resumes at `next`.
    pub(super) fn rate_limit_shared(
        self: &Arc<Self>,
        armed: &Arc<Armed>,
        request: Request<Body>,
        meta: &RequestMeta,
        url: &str,
        read: Read,
        next: Step,
    ) -> Action {
        let local = self.take_local(armed, meta, url);
        let store = match self.shared.get() {
            Some(store) if !local.is_empty() => Arc::clone(store),
            _ => return self.decide(armed, request, meta, url, next, read),
        };
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
                            return answer((request, fail_closed_answer(hold)));
                        }
                        _ => taken.push((index, mine)),
                    },
                }
            }
            match this.conclude_limits(&armed, request, &meta, taken) {
                Flow::Next(request) => this.decide(&armed, request, &meta, &url, next, read),
                Flow::Answer(answered) => answer(*answered),
                Flow::Done(action) => action,
            }
        })
    }

    /// The first limit that refused answers; otherwise an allowed request leaves the limits'
    /// headers for its response.
    pub(super) fn conclude_limits(
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
            let response = self.refusal(plan.retry_after_form, rule, taken, wall, meta);
            let wait = taken.retry_after.unwrap_or(taken.reset);
            self.record(Kind::RateLimited, meta, Some(response.status()), Some(wait));
            return Flow::answer(request, response);
        }
        let mut headers: Vec<(HeaderName, HeaderValue)> = Vec::new();
        for (index, taken) in &taken {
            let rule = &plan.rate_limits[*index];
            if !rule.warns(taken.remaining) {
                continue;
            }
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
    /// `429` with `Retry-After` (in Microsoft Graph's JSON for a Graph host, as Dev Proxy
    /// answers); and the style's headers, unless it sets them itself.
    fn refusal(
        &self,
        form: RetryAfterForm,
        rule: &RateLimitRule,
        taken: &Taken,
        wall: SystemTime,
        meta: &RequestMeta,
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
                .into_response_for(meta.target.host());
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
}
