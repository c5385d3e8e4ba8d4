//! The CRUD step: an in-memory API over a JSON file answers its actions.

use http::{Request, StatusCode};

use crate::body::Body;
use crate::proxy::RequestMeta;
use crate::proxy::reply::Refusal;

use super::{Armed, BODY_LIMIT, Flow, Inner, Kind, Read};

impl Inner {
    /// The first CRUD API with an action for the request (or a CORS preflight under its base
    /// URL) answers from its data.
    pub(super) fn crud_api(
        &self,
        armed: &Armed,
        request: Request<Body>,
        meta: &RequestMeta,
        url: &str,
        read: &Read,
    ) -> Flow {
        let headers = request.headers();
        let Some(api) = armed
            .plan
            .crud_apis
            .iter()
            .find(|api| api.answers(&meta.method, url, headers))
        else {
            return Flow::Next(request);
        };
        if matches!(read, Read::TooLarge) {
            self.record(
                Kind::Mocked,
                meta,
                Some(StatusCode::PAYLOAD_TOO_LARGE),
                None,
            );
            let refusal = Refusal::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                format!("the request body is larger than the CRUD API reads ({BODY_LIMIT} bytes)"),
            );
            return Flow::answer(request, refusal.into_response());
        }
        let Some(answer) = api.answer(&meta.method, url, headers, read.body()) else {
            return Flow::Next(request);
        };
        self.record(Kind::Mocked, meta, Some(answer.status()), None);
        // A rate limit that counted this request first: its headers go on the answer.
        Flow::answer(request, answer.map(Body::full))
    }
}
