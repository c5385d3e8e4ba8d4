//! The error step: error rules draw their rate and an outcome, a response or a network fault.

use std::sync::Arc;

use holdoff::clock::Clock;
use http::Request;
use rand::Rng;

use crate::body::Body;
use crate::fault::{FaultOutcome, NetworkFault};
use crate::proxy::{Action, Notes, RequestMeta};

use super::batch::Batch;
use super::{Armed, Flow, Inner, Kind, Left, Read, Step};

impl Inner {
    /// The first error rule whose request matches decides: one draw for its rate, and on a
    /// failure one for the outcome.
    pub(super) fn error(
        self: &Arc<Self>,
        armed: &Arc<Armed>,
        request: Request<Body>,
        meta: &RequestMeta,
        url: &str,
        read: &Read,
        position: usize,
    ) -> Flow {
        let plan = &armed.plan;
        let batch = plan.batch_errors && super::batch::is_batch(&meta.method, url);
        if batch
            && matches!(read, Read::Unread)
            && plan
                .errors
                .iter()
                .any(|rule| rule.request.head_matches(&meta.method, url))
        {
            let reading = self.read_body(armed, request, meta, url, Step::At(position));
            return Flow::Done(reading);
        }
        let mut chosen = None;
        for rule in &plan.errors {
            if !rule.request.head_matches(&meta.method, url) {
                continue;
            }
            if rule.request.body_fragment.is_some() && matches!(read, Read::Unread) {
                let reading = self.read_body(armed, request, meta, url, Step::At(position));
                return Flow::Done(reading);
            }
            if !rule.request.body_matches(read.body()) {
                continue;
            }
            chosen = Some(rule);
            break;
        }
        let Some(rule) = chosen else {
            return Flow::Next(request);
        };
        let wall = self.clock.wall_now();
        let form = plan.retry_after_form;
        if batch && let Some(sent) = read.body() {
            if !self.rng.with(|rng| rule.rate.fails(rng.random())) {
                return Flow::Next(request);
            }
            if let Some(batch) = Batch::parse(url, sent) {
                let answer = batch.fail(armed, rule, &self.rng, wall);
                self.record(Kind::Error, meta, Some(http::StatusCode::OK), None);
                let response = http::Response::builder()
                    .header(http::header::CONTENT_TYPE, "application/json")
                    .body(Body::full(answer))
                    .unwrap_or_default();
                return Flow::answer(request, response);
            }
        }
        let failure = self.rng.with(|rng| {
            if !rule.rate.fails(rng.random()) {
                return None;
            }
            let pick = rng.random_range(0..rule.outcomes.len().max(1));
            Some(match rule.outcomes.get(pick)? {
                FaultOutcome::Respond(response) => Ok(response.render(form, rng, wall)),
                FaultOutcome::Network(fault) => Err(*fault),
                // Mocks only: an error rule never holds one.
                FaultOutcome::LanguageModel(_) => return None,
            })
        });
        match failure {
            None => Flow::Next(request),
            Some(Ok(rendered)) => {
                self.record(
                    Kind::Error,
                    meta,
                    Some(rendered.response.status()),
                    rendered.hint,
                );
                // A counted request's limit headers go on the error that answers it.
                Flow::answer(request, rendered.response.map(Body::full))
            }
            Some(Err(fault)) => Flow::Done(self.network(fault, request, meta)),
        }
    }

    /// Applies a network fault to the request.
    pub(super) fn network(
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
