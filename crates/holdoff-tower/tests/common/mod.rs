//! What the integration tests share: a real hyper-util client and request builders.

#![allow(dead_code, unreachable_pub)] // Each test binary uses its own part of this module.

use std::time::Duration;

use bytes::Bytes;
use holdoff::{Backoff, Jitter, Policy};
use http::Request;
use http_body_util::Full;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;

/// How long a real-time guard lets a step take before the test fails: never reached when
/// the test passes.
pub const PATIENCE: Duration = Duration::from_secs(10);

/// A real hyper-util client, new for each test.
pub fn client<B>() -> Client<HttpConnector, B>
where
    B: hyper::body::Body + Send + 'static,
    B::Data: Send,
{
    Client::builder(TokioExecutor::new()).build_http()
}

/// A policy whose waits come from the server's hint alone: no backoff, no jitter.
pub fn plain() -> Policy {
    Policy::default()
        .with_backoff(Backoff::None)
        .with_jitter(Jitter::None)
}

/// A GET with an empty body.
pub fn get(url: &str) -> Request<Full<Bytes>> {
    Request::get(url).body(Full::default()).expect("request")
}

/// A POST with `body`.
pub fn post(url: &str, body: &'static str) -> Request<Full<Bytes>> {
    Request::post(url)
        .body(Full::new(Bytes::from_static(body.as_bytes())))
        .expect("request")
}
