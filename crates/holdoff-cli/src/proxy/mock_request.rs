//! The request `POST /proxy/mockRequest` sends (a config's `mockRequest`, Dev Proxy's
//! MockRequestPlugin), sent with reqwest straight to its target: never through this proxy.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use holdoff_config::compile::MockRequest;
use holdoff_proxy::MockRequestSender;

/// How long the target may take to answer.
const TIMEOUT: Duration = Duration::from_secs(30);

/// A [`MockRequestSender`] for one configured request.
pub(super) struct Sender {
    request: MockRequest,
}

impl Sender {
    pub(super) fn new(request: MockRequest) -> Sender {
        Sender { request }
    }
}

impl MockRequestSender for Sender {
    fn send(&self) -> Pin<Box<dyn Future<Output = Result<u16, String>> + Send + '_>> {
        Box::pin(async move {
            let client = crate::http::client(TIMEOUT, crate::http::Route::Direct)?;
            let request = &self.request;
            let mut builder = client.request(request.method.clone(), request.url.to_string());
            for (name, value) in &request.headers {
                builder = builder.header(name, value);
            }
            let response = builder
                .body(request.body.clone())
                .send()
                .await
                .map_err(|err| {
                    format!("{} {}: {}", request.method, request.url, err.without_url())
                })?;
            tracing::info!(
                target: "holdoff::request",
                method = %request.method,
                url = %request.url,
                status = response.status().as_u16(),
                "sent the mock request"
            );
            Ok(response.status().as_u16())
        })
    }
}
