//! The auth step: API keys and bearer tokens, checked before anything else answers.

use holdoff::clock::Clock;
use http::{HeaderValue, Request, Response, StatusCode, header};

use crate::body::Body;
use crate::proxy::RequestMeta;

use super::{Armed, Flow, Inner, Kind};

impl Inner {
    /// The first auth rule covering the request refuses it `401` without an allowed key, as
    /// Dev Proxy's AuthPlugin answers: `{"error": {"message": "Unauthorized"}}`.
    pub(super) fn auth(
        &self,
        armed: &Armed,
        request: Request<Body>,
        meta: &RequestMeta,
        url: &str,
    ) -> Flow {
        let Some(rule) = armed.plan.auth.iter().find(|rule| rule.covers(url)) else {
            return Flow::Next(request);
        };
        let Err(why) = rule.authorizes(request.headers(), request.uri(), self.clock.wall_now())
        else {
            return Flow::Next(request);
        };
        self.record(
            Kind::Unauthorized,
            meta,
            Some(StatusCode::UNAUTHORIZED),
            None,
        );
        tracing::debug!(target: "holdoff::fault", url = %meta.target, "401: {}", why.as_str());
        let mut response = Response::new(Body::from(r#"{"error":{"message":"Unauthorized"}}"#));
        *response.status_mut() = StatusCode::UNAUTHORIZED;
        response.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        Flow::answer(request, response)
    }
}
