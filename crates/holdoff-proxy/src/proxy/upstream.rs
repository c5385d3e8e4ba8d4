//! The way out: one pooled client for every upstream, and what its failures mean to a client.

use std::error::Error as StdError;
use std::fmt::Write as _;
use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use http::{Request, Response, StatusCode};
use hyper::body::Incoming;
use hyper_rustls::{HttpsConnector, HttpsConnectorBuilder};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioTimer};
use rustls::ClientConfig;

use crate::Body;

/// Idle upstream connections kept per host: enough for a benchmark's 64 connections and
/// more, so a busy host never reconnects.
const POOL_PER_HOST: usize = 256;
/// How long an idle upstream connection is kept.
const POOL_IDLE: Duration = Duration::from_secs(90);

type HttpsClient = Client<HttpsConnector<HttpConnector>, Body>;

/// The clients every request shares.
#[derive(Clone, Debug)]
pub(crate) struct Upstreams {
    /// HTTP/1.1 or HTTP/2, whichever the upstream picks by ALPN (HTTP/1.1 for plain HTTP).
    any: HttpsClient,
    /// HTTP/1.1 only, for upgrades (WebSocket), which HTTP/2 connections cannot carry.
    http1: HttpsClient,
    timeout: Duration,
}

impl Upstreams {
    /// Clients verifying upstream TLS with `tls` (whose ALPN list is replaced).
    pub(crate) fn new(mut tls: ClientConfig, timeout: Duration) -> Upstreams {
        tls.alpn_protocols.clear();
        let mut tcp = HttpConnector::new();
        tcp.enforce_http(false);
        tcp.set_nodelay(true);
        tcp.set_connect_timeout(Some(timeout));
        let any = HttpsConnectorBuilder::new()
            .with_tls_config(tls.clone())
            .https_or_http()
            .enable_all_versions()
            .wrap_connector(tcp.clone());
        let http1 = HttpsConnectorBuilder::new()
            .with_tls_config(tls)
            .https_or_http()
            .enable_http1()
            .wrap_connector(tcp);
        let mut builder = Client::builder(TokioExecutor::new());
        builder
            .pool_max_idle_per_host(POOL_PER_HOST)
            .pool_idle_timeout(POOL_IDLE)
            .pool_timer(TokioTimer::new())
            .timer(TokioTimer::new());
        Upstreams {
            any: builder.build(any),
            http1: builder.build(http1),
            timeout,
        }
    }

    /// Sends `request` (absolute URI) and waits for the response head, at most the upstream
    /// timeout.
    ///
    /// Boxed: the client's future is large, and a request handler awaiting it in place would
    /// be as large, which hyper moves into place for every request.
    pub(crate) fn send(
        &self,
        request: Request<Body>,
        upgrade: bool,
    ) -> Pin<Box<dyn Future<Output = Result<Response<Incoming>, Failure>> + Send + '_>> {
        let client = if upgrade { &self.http1 } else { &self.any };
        // A cheap clone (shared bytes), turned into text only on failure.
        let authority = request.uri().authority().cloned();
        Box::pin(async move {
            let target = || {
                authority
                    .as_ref()
                    .map_or_else(String::new, ToString::to_string)
            };
            match tokio::time::timeout(self.timeout, client.request(request)).await {
                Ok(Ok(response)) => Ok(response),
                Ok(Err(err)) => Err(Failure::from_client_error(&err, target())),
                Err(_) => Err(Failure::Timeout {
                    target: target(),
                    after: self.timeout,
                }),
            }
        })
    }
}

/// Why a request got no response from upstream.
#[derive(Debug)]
pub(crate) enum Failure {
    /// Connecting failed: refused, unreachable, unknown host.
    Connect { target: String, reason: String },
    /// The upstream's certificate was not trusted (or not for this host).
    Untrusted { target: String, reason: String },
    /// Another TLS failure.
    Tls { target: String, reason: String },
    /// The connection broke before a response head arrived.
    Broken { target: String, reason: String },
    /// No response head within the timeout.
    Timeout { target: String, after: Duration },
}

impl Failure {
    /// The connection to `target` broke before a response head arrived.
    pub(crate) fn broken(target: String, err: &(dyn StdError + 'static)) -> Failure {
        Failure::Broken {
            target,
            reason: innermost(err),
        }
    }

    fn from_client_error(err: &hyper_util::client::legacy::Error, target: String) -> Failure {
        let reason = innermost(err);
        if let Some(tls) = find::<rustls::Error>(err) {
            let reason = tls.to_string();
            return match tls {
                rustls::Error::InvalidCertificate(_) | rustls::Error::NoCertificatesPresented => {
                    Failure::Untrusted { target, reason }
                }
                _ => Failure::Tls { target, reason },
            };
        }
        if err.is_connect() {
            Failure::Connect { target, reason }
        } else {
            Failure::Broken { target, reason }
        }
    }

    /// The status the client gets.
    pub(crate) fn status(&self) -> StatusCode {
        match self {
            Failure::Timeout { .. } => StatusCode::GATEWAY_TIMEOUT,
            _ => StatusCode::BAD_GATEWAY,
        }
    }

    /// The one-line reason the client reads, ending in a newline.
    pub(crate) fn message(&self) -> String {
        match self {
            Failure::Connect { target, reason } => {
                format!("holdoff: could not connect to the upstream {target}: {reason}\n")
            }
            Failure::Untrusted { target, reason } => format!(
                "holdoff: the certificate of the upstream {target} was not trusted ({reason}); \
                 if it is a test server, pass its CA certificate with --upstream-ca\n"
            ),
            Failure::Tls { target, reason } => {
                format!("holdoff: TLS with the upstream {target} failed: {reason}\n")
            }
            Failure::Broken { target, reason } => format!(
                "holdoff: the upstream {target} closed the connection without a response: \
                 {reason}\n"
            ),
            Failure::Timeout { target, after } => format!(
                "holdoff: the upstream {target} did not answer within {}s\n",
                after.as_secs_f64()
            ),
        }
    }
}

/// The first error of type `T` in the source chain, looking inside `io::Error`s too (where
/// TLS connectors put theirs, sometimes one inside another).
fn find<'a, T: StdError + 'static>(err: &'a (dyn StdError + 'static)) -> Option<&'a T> {
    let mut next: Option<&(dyn StdError + 'static)> = Some(err);
    while let Some(err) = next {
        if let Some(found) = err.downcast_ref::<T>() {
            return Some(found);
        }
        next = match err.downcast_ref::<std::io::Error>() {
            // `io::Error::source` skips the error it wraps; `get_ref` is that error.
            Some(io) => match io.get_ref() {
                Some(inner) => Some(inner as &(dyn StdError + 'static)),
                None => io.source(),
            },
            None => err.source(),
        };
    }
    None
}

/// The deepest cause's message: the one that says what actually happened ("Connection
/// refused (os error 111)").
fn innermost(err: &(dyn StdError + 'static)) -> String {
    let mut last = err;
    while let Some(source) = last.source() {
        last = source;
    }
    let mut message = String::new();
    let _ = write!(message, "{last}");
    // A message never spans lines in the one-line body.
    message.replace(['\r', '\n'], " ")
}

#[cfg(test)]
mod tests {
    use super::*;

    mod failure {
        use super::*;

        #[test]
        fn maps_a_timeout_to_504_and_the_rest_to_502() {
            let timeout = Failure::Timeout {
                target: "127.0.0.1:1".into(),
                after: Duration::from_secs(30),
            };
            assert_eq!(timeout.status(), StatusCode::GATEWAY_TIMEOUT);
            assert_eq!(
                timeout.message(),
                "holdoff: the upstream 127.0.0.1:1 did not answer within 30s\n"
            );
            let refused = Failure::Connect {
                target: "127.0.0.1:1".into(),
                reason: "Connection refused (os error 111)".into(),
            };
            assert_eq!(refused.status(), StatusCode::BAD_GATEWAY);
        }

        #[test]
        fn suggests_upstream_ca_for_an_untrusted_certificate() {
            let untrusted = Failure::Untrusted {
                target: "127.0.0.1:8443".into(),
                reason: "invalid peer certificate: UnknownIssuer".into(),
            };
            assert!(untrusted.message().contains("--upstream-ca"));
            assert!(untrusted.message().contains("not trusted"));
        }
    }

    mod find {
        use super::*;

        #[test]
        fn looks_inside_io_errors_inside_io_errors() {
            let tls = rustls::Error::InvalidCertificate(rustls::CertificateError::UnknownIssuer);
            let io =
                std::io::Error::other(std::io::Error::new(std::io::ErrorKind::InvalidData, tls));
            assert!(find::<rustls::Error>(&io).is_some());
        }
    }
}
