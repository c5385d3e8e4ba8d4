//! The way out: one pooled client for every upstream, how long an upstream may take, what
//! its failures mean to a client, and where the way out must not lead: back to the proxy.

use std::error::Error as StdError;
use std::fmt::{self, Write as _};
use std::future::Future;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::pin::Pin;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use holdoff::clock::{Clock, TokioClock};
use http::{Request, Response, StatusCode};
use hyper::body::Incoming;
use hyper_rustls::{HttpsConnector, HttpsConnectorBuilder};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioTimer};
use rustls::ClientConfig;

use super::reply::Refusal;
use crate::body::Body;
use crate::body::{Phase, Progress};

/// Idle upstream connections kept per host: enough for a benchmark's 64 connections and
/// more, so a busy host never reconnects.
const POOL_PER_HOST: usize = 256;
/// How long an idle upstream connection is kept.
const POOL_IDLE: Duration = Duration::from_secs(90);

/// The most an upstream connection's read buffer grows to (hyper's default is ~400 KiB), on
/// the pool's connections and a client's own ([`affinity`](super::affinity)). A client that
/// stops reading leaves its upstream's buffer full until the send timeout: this caps what it
/// holds, as the client side's buffers are capped. It is also the largest response head the
/// proxy reads from an upstream (Envoy's default limit is 60 KiB, nginx's 4–8 KiB).
pub(crate) const UPSTREAM_BUFFER: usize = 64 * 1024;

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
            .http1_max_buf_size(UPSTREAM_BUFFER)
            .pool_timer(TokioTimer::new())
            .timer(TokioTimer::new());
        Upstreams {
            any: builder.build(any),
            http1: builder.build(http1),
            timeout,
        }
    }

    /// Sends `request` (absolute URI) and waits for the response head: at most the upstream
    /// timeout, counted from the end of its body (`progress`, if it has one; see [`stalled`]).
    ///
    /// Boxed: the client's future is large, and a request handler awaiting it in place would
    /// be as large, which hyper moves into place for every request.
    pub(crate) fn send(
        &self,
        request: Request<Body>,
        upgrade: bool,
        progress: Option<Arc<Progress>>,
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
            let sent = client.request(request);
            let sent = match &progress {
                None => tokio::time::timeout(self.timeout, sent).await,
                Some(progress) => tokio::select! {
                    sent = sent => Ok(sent),
                    stall = stalled(progress, self.timeout) => {
                        return Err(stall.failure(target(), self.timeout));
                    }
                },
            };
            match sent {
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

/// Completes once a request with a body has made no progress for `timeout`: the upstream took
/// no frame of the body, or the client sent none, or, once the body is all sent, no response
/// head came. An upload that streams for longer than the timeout is not cut while it moves,
/// and the response head is timed from the end of the request, as it is for one without a
/// body. Whose turn it was is in the answer.
pub(crate) async fn stalled(progress: &Progress, timeout: Duration) -> Stall {
    let clock = TokioClock;
    loop {
        let Some(due) = progress.last().checked_add(timeout) else {
            return std::future::pending().await;
        };
        if due <= clock.now() {
            return Stall(progress.phase());
        }
        clock.sleep_until(due).await;
    }
}

/// How a request with a body stalled: whose turn it was.
#[derive(Debug)]
pub(crate) struct Stall(Phase);

impl Stall {
    /// The failure it is, with `target` the upstream.
    pub(crate) fn failure(self, target: String, after: Duration) -> Failure {
        match self.0 {
            Phase::Unread | Phase::Sent => Failure::Timeout { target, after },
            Phase::Taken => Failure::Stalled { target, after },
            Phase::Waiting => Failure::ClientStalled { after },
        }
    }
}

/// The addresses this proxy serves on: its own port, and those of its control API and its
/// metrics. Nothing is forwarded or tunnelled to them: a request to itself comes back as
/// another request to itself (one write of 118 KB of `CONNECT`s once built 2,000 nested
/// tunnels), and one to its control API would let a client under test pause the recording
/// of its own retries.
///
/// A target names one of them by an IP literal, by `localhost`, or by a name that resolves to
/// one: [`Own::named_by`] sees the first two; a tunnel's target is looked up before it is
/// connected to and checked with [`Own::reached_by`]. A plain request by such a name comes
/// back carrying the proxy's own `Via`, and is refused then.
#[derive(Debug)]
pub(crate) struct Own {
    proxy: SocketAddr,
    /// The control API and metrics, known before the server runs.
    others: OnceLock<Box<[SocketAddr]>>,
}

impl Own {
    pub(crate) fn new(proxy: SocketAddr) -> Own {
        Own {
            proxy,
            others: OnceLock::new(),
        }
    }

    /// Adds the proxy's other addresses; only the first call counts.
    pub(crate) fn set_others(&self, others: Vec<SocketAddr>) {
        let _ = self.others.set(others.into_boxed_slice());
    }

    fn all(&self) -> impl Iterator<Item = SocketAddr> + '_ {
        std::iter::once(self.proxy).chain(self.others.get().into_iter().flatten().copied())
    }

    /// The address of this proxy that a connection to `target` reaches, if any.
    pub(crate) fn reached_by(&self, target: SocketAddr) -> Option<SocketAddr> {
        self.all().find(|own| reaches(target, *own))
    }

    /// The address of this proxy that `host:port` names without a lookup — an IP literal
    /// (`[::1]` too), `localhost` or a name under `.localhost` — if any.
    pub(crate) fn named_by(&self, host: &str, port: u16) -> Option<SocketAddr> {
        // A fully qualified `localhost.` is `localhost`.
        let host = host.strip_suffix('.').unwrap_or(host);
        let loopback = host.eq_ignore_ascii_case("localhost")
            || host
                .get(host.len().saturating_sub(".localhost".len())..)
                .is_some_and(|end| end.eq_ignore_ascii_case(".localhost"));
        if loopback {
            return [
                IpAddr::V4(Ipv4Addr::LOCALHOST),
                IpAddr::V6(Ipv6Addr::LOCALHOST),
            ]
            .into_iter()
            .find_map(|ip| self.reached_by(SocketAddr::new(ip, port)));
        }
        let literal = host
            .strip_prefix('[')
            .and_then(|inner| inner.strip_suffix(']'))
            .unwrap_or(host);
        let ip = literal.parse::<IpAddr>().ok()?;
        self.reached_by(SocketAddr::new(ip, port))
    }
}

/// Whether connecting to `target` reaches a socket listening on `own`.
fn reaches(target: SocketAddr, own: SocketAddr) -> bool {
    if target.port() != own.port() {
        return false;
    }
    let (ip, own) = (target.ip().to_canonical(), own.ip().to_canonical());
    if ip == own {
        return true;
    }
    // Connecting to `0.0.0.0` or `::` reaches this host, by its loopback.
    let here = ip.is_unspecified() || ip.is_loopback();
    if own.is_unspecified() {
        // Listening on every address: any of this host's own.
        return here || is_local(ip);
    }
    ip.is_unspecified() && own.is_loopback()
}

/// Whether `ip` is an address of this host: one a socket can be bound to. Asked only of a
/// target on the port of a proxy listening on every address, which is rare.
fn is_local(ip: IpAddr) -> bool {
    std::net::UdpSocket::bind(SocketAddr::new(ip, 0)).is_ok()
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
    /// The upstream's response head was larger than [`UPSTREAM_BUFFER`].
    HeadTooLarge { target: String },
    /// No response head within the timeout (after the request's end, for one with a body).
    Timeout { target: String, after: Duration },
    /// The upstream took none of the request body for the timeout.
    Stalled { target: String, after: Duration },
    /// The client sent none of its request body for the timeout, while the upstream waited.
    ClientStalled { after: Duration },
    /// The client's request body broke off: a malformed chunk, a reset.
    ClientBody { reason: String },
}

impl Failure {
    /// The connection to `target` broke before a response head arrived.
    pub(crate) fn broken(target: String, err: &(dyn StdError + 'static)) -> Failure {
        if find::<hyper::Error>(err).is_some_and(hyper::Error::is_parse_too_large) {
            return Failure::HeadTooLarge { target };
        }
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
            Failure::broken(target, err)
        }
    }

    /// The status the client gets.
    pub(crate) fn status(&self) -> StatusCode {
        match self {
            Failure::Timeout { .. } | Failure::Stalled { .. } => StatusCode::GATEWAY_TIMEOUT,
            Failure::ClientStalled { .. } => StatusCode::REQUEST_TIMEOUT,
            Failure::ClientBody { .. } => StatusCode::BAD_REQUEST,
            _ => StatusCode::BAD_GATEWAY,
        }
    }

    /// The answer the client gets: [`Failure::status`] and what went wrong.
    pub(crate) fn refusal(&self) -> Refusal {
        Refusal::new(self.status(), self.to_string())
    }
}

impl fmt::Display for Failure {
    /// What went wrong, in one line.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Failure::Connect { target, reason } => {
                write!(f, "could not connect to the upstream {target}: {reason}")
            }
            Failure::Untrusted { target, reason } => write!(
                f,
                "the certificate of the upstream {target} was not trusted ({reason}); \
                 if it is a test server, pass its CA certificate with --upstream-ca"
            ),
            Failure::Tls { target, reason } => {
                write!(f, "TLS with the upstream {target} failed: {reason}")
            }
            Failure::Broken { target, reason } => write!(
                f,
                "the upstream {target} closed the connection without a response: \
                 {reason}"
            ),
            Failure::HeadTooLarge { target } => write!(
                f,
                "the upstream {target} sent a response head larger than {} KiB, the \
                 most the proxy reads; have it send fewer or shorter header fields",
                UPSTREAM_BUFFER / 1024
            ),
            Failure::Timeout { target, after } => write!(
                f,
                "the upstream {target} did not answer within {}s",
                after.as_secs_f64()
            ),
            Failure::Stalled { target, after } => write!(
                f,
                "the upstream {target} took none of the request body for {}s",
                after.as_secs_f64()
            ),
            Failure::ClientStalled { after } => write!(
                f,
                "the client sent none of its request body for {}s",
                after.as_secs_f64()
            ),
            Failure::ClientBody { reason } => {
                write!(f, "the client's request body could not be read: {reason}")
            }
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
                timeout.refusal().body_text(),
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
            assert!(untrusted.refusal().body_text().contains("--upstream-ca"));
            assert!(untrusted.refusal().body_text().contains("not trusted"));
        }
    }

    mod own {
        use super::*;

        fn addr(text: &str) -> SocketAddr {
            text.parse().unwrap()
        }

        fn own(proxy: &str, others: &[&str]) -> Own {
            let own = Own::new(addr(proxy));
            own.set_others(others.iter().map(|other| addr(other)).collect());
            own
        }

        #[test]
        fn is_named_by_its_literal_localhost_and_the_unspecified_address() {
            let own = own("127.0.0.1:8000", &["127.0.0.1:9000"]);
            for (host, port) in [
                ("127.0.0.1", 8000),
                ("localhost", 8000),
                ("LOCALHOST", 9000),
                ("api.localhost", 9000),
                ("localhost.", 8000),
                ("0.0.0.0", 8000),
                ("[::ffff:127.0.0.1]", 8000),
            ] {
                assert!(own.named_by(host, port).is_some(), "{host}:{port}");
            }
            for (host, port) in [
                ("127.0.0.1", 8001),
                ("127.0.0.2", 8000),
                ("[::1]", 8000),
                ("example.com", 8000),
                ("notlocalhost", 8000),
            ] {
                assert!(own.named_by(host, port).is_none(), "{host}:{port}");
            }
        }

        #[test]
        fn listening_on_every_address_is_reached_by_any_of_this_hosts_own() {
            let own = own("0.0.0.0:8000", &[]);
            for target in [
                "127.0.0.1:8000",
                "127.9.9.9:8000",
                "[::1]:8000",
                "0.0.0.0:8000",
            ] {
                assert!(own.reached_by(addr(target)).is_some(), "{target}");
            }
            // TEST-NET-3: no host's own address.
            assert!(own.reached_by(addr("203.0.113.7:8000")).is_none());
            assert!(own.reached_by(addr("127.0.0.1:8001")).is_none());
        }

        #[test]
        fn knows_the_other_addresses_only_once_set() {
            let own = Own::new(addr("127.0.0.1:8000"));
            assert!(own.named_by("127.0.0.1", 9000).is_none());
            own.set_others(vec![addr("127.0.0.1:9000")]);
            assert_eq!(
                own.named_by("127.0.0.1", 9000),
                Some(addr("127.0.0.1:9000"))
            );
        }
    }

    mod stall {
        use super::*;

        #[test]
        fn blames_whoever_had_the_turn() {
            let after = Duration::from_millis(300);
            let failure = |phase| Stall(phase).failure("up:1".into(), after);
            assert_eq!(failure(Phase::Sent).status(), StatusCode::GATEWAY_TIMEOUT);
            assert_eq!(failure(Phase::Unread).status(), StatusCode::GATEWAY_TIMEOUT);
            let taken = failure(Phase::Taken);
            assert_eq!(taken.status(), StatusCode::GATEWAY_TIMEOUT);
            assert_eq!(
                taken.refusal().body_text(),
                "holdoff: the upstream up:1 took none of the request body for 0.3s\n"
            );
            let waiting = failure(Phase::Waiting);
            assert_eq!(waiting.status(), StatusCode::REQUEST_TIMEOUT);
            assert_eq!(
                waiting.refusal().body_text(),
                "holdoff: the client sent none of its request body for 0.3s\n"
            );
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
