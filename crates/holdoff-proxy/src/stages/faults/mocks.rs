//! The mocks step: the first mock that matches answers, numbering requests for `nth` as
//! Dev Proxy does (see `MockNumbers`).

use holdoff::clock::Clock;
use http::{Request, StatusCode};

use crate::body::Body;
use crate::fault::FaultOutcome;
use crate::proxy::RequestMeta;
use crate::proxy::reply::Refusal;

use super::batch::Batch;
use super::{Armed, Flow, Inner, Kind, Read};

impl Inner {
    /// The first mock that matches answers, counting `nth`; then the unmocked are blocked if
    /// the plan says so.
    pub(super) fn mock(
        &self,
        armed: &Armed,
        request: Request<Body>,
        meta: &RequestMeta,
        url: &str,
        read: &Read,
    ) -> Flow {
        let plan = &armed.plan;
        if plan.batch_mocks
            && super::batch::is_batch(&meta.method, url)
            && let Some(sent) = read.body()
            && let Some(batch) = Batch::parse(url, sent)
        {
            let batch = batch.answer(armed, &self.rng, self.clock.wall_now());
            self.record(Kind::Mocked, meta, Some(StatusCode::OK), None);
            let response = http::Response::builder()
                .header(http::header::CONTENT_TYPE, "application/json")
                .body(Body::full(batch))
                .unwrap_or_default();
            return Flow::answer(request, response);
        }
        let numbers = &armed.mock_numbers;
        let mut taken = numbers.for_request();
        for (index, mock) in plan.mocks.iter().enumerate() {
            if !mock.request.head_matches(&meta.method, url) {
                continue;
            }
            let number = mock.nth.map(|_| numbers.number(index, &mut taken));
            if !mock.request.body_matches(read.body()) || number != mock.nth {
                continue;
            }
            if let FaultOutcome::LanguageModel(reply) = &mock.response {
                let created = self
                    .clock
                    .wall_now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .unwrap_or_default()
                    .as_secs();
                let id = self.rng.with(rand::Rng::random::<u32>);
                let Some((content_type, body)) = read
                    .body()
                    .and_then(|sent| reply.answer(sent, created, u64::from(id)))
                else {
                    continue;
                };
                self.record(Kind::Mocked, meta, Some(StatusCode::OK), None);
                let response = http::Response::builder()
                    .header(http::header::CONTENT_TYPE, content_type)
                    .body(Body::full(body))
                    .unwrap_or_default();
                return Flow::answer(request, response);
            }
            return match &mock.response {
                FaultOutcome::LanguageModel(_) => Flow::Next(request),
                FaultOutcome::Respond(response) => {
                    let wall = self.clock.wall_now();
                    let mut rendered = self
                        .rng
                        .with(|rng| response.render(plan.retry_after_form, rng, wall));
                    if numbers.mirrors[index]
                        && let Some(sent) = read.body()
                    {
                        let content_type = request
                            .headers()
                            .get(http::header::CONTENT_TYPE)
                            .and_then(|value| value.to_str().ok());
                        if let Some(filled) =
                            super::mirror::fill(&response.body, sent, content_type)
                        {
                            rendered
                                .response
                                .headers_mut()
                                .remove(http::header::CONTENT_LENGTH);
                            *rendered.response.body_mut() = filled;
                        }
                    }
                    self.record(
                        Kind::Mocked,
                        meta,
                        Some(rendered.response.status()),
                        rendered.hint,
                    );
                    // A rate limit that counted this request first: its headers go on the mock
                    // with the request's notes, and a token budget counts the mock's usage.
                    Flow::answer(request, rendered.response.map(Body::full))
                }
                FaultOutcome::Network(fault) => {
                    self.record(Kind::Mocked, meta, None, None);
                    Flow::Done(self.network(*fault, request, meta))
                }
            };
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
            return Flow::answer(request, refusal.into_response());
        }
        Flow::Next(request)
    }
}
