//! Serving a tunnel once its `CONNECT` is answered ([`Tunnels`]): intercepted, served as plain
//! HTTP, or blind, as its first bytes say.
//!
//! What a client sends first into a tunnel is looked at before that ([`Opening`]): a TLS
//! `ClientHello` is intercepted (or tunnelled blind, for a host that is not watched); plain
//! HTTP/1.1 or the h2c preface — undici's `EnvHttpProxyAgent` and `curl --proxytunnel`
//! tunnel `http://` URLs too — is served exactly as plain requests to the tunnel's target on
//! the proxy's port are (faulted and judged alike) when the watch list watches the first
//! request's `http://` URL, and tunnelled blind, untouched, when it does not; anything else is
//! tunnelled blind. A protocol in which the server speaks first (SMTP, MySQL, …) waits for the
//! upstream: in a tunnel to a host that is not watched, whose upstream is connected before the
//! `CONNECT` is answered, the upstream's first bytes settle it at once; to a watched host,
//! a client silent for [`SNIFF_WAIT`] is tunnelled blind, so the upstream speaks that much
//! later.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use hyper::upgrade::{OnUpgrade, Upgraded};
use hyper_util::rt::TokioIo;
use rustls::ServerConfig;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite};
use tokio::net::TcpStream;
use tokio_rustls::TlsAcceptor;

use super::affinity::Affinity;
use super::conn::{Conn, Inbound, Tunnel};
use super::connect::{Opened, PlainTunnel, ServeTunnel, connect_upstream};
use super::io::{PREFACE, Rewind};
use super::serve::serve_http;
use super::shared::Shared;
use super::target::default_port;

/// How much encrypted output an intercepted connection may hold before writing it.
const TLS_BUFFER: usize = 256 * 1024;

/// How long a client in a tunnel may stay silent before holdoff takes it for one that waits
/// for the server to speak first, and tunnels it blind.
const SNIFF_WAIT: Duration = Duration::from_secs(1);

/// How many of a tunnel's first bytes are enough to tell what it carries: the h2c preface,
/// the longest thing looked for.
const SNIFF_BYTES: usize = PREFACE.len();

/// The longest method token taken for HTTP (the registered ones are far shorter).
const MAX_METHOD: usize = 20;

/// How much of a tunnel's first request is read to find its URL, before the watch list is
/// asked about `/` instead.
const MAX_REQUEST_LINE: usize = 8 * 1024;

/// A client's tunnel to the proxy's port: the client connection it was made on, as seen
/// from inside.
type ClientTunnel = Rewind<TokioIo<Upgraded>>;

/// What a client sends first into a tunnel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Opening {
    /// A TLS record of the handshake (`0x16 0x03`): intercepted.
    Tls,
    /// A method token and a space (HTTP/1.x), or the h2c preface (`h2`): served as plain HTTP.
    Http { h2: bool },
    /// Anything else: tunnelled blind.
    Other,
    /// Nothing within [`SNIFF_WAIT`]: the server speaks first; tunnelled blind.
    Silent,
    /// The client closed the tunnel without a byte.
    Closed,
}

impl Opening {
    /// What `first` (a tunnel's first bytes, at most [`SNIFF_BYTES`]) is; `None` while more
    /// bytes could tell.
    fn of(first: &[u8]) -> Option<Opening> {
        let enough = first.len() >= SNIFF_BYTES;
        match first {
            [] => None,
            [0x16] => None,
            [0x16, 0x03, ..] => Some(Opening::Tls),
            [0x16, ..] => Some(Opening::Other),
            _ if first.starts_with(PREFACE) => Some(Opening::Http { h2: true }),
            _ if PREFACE.starts_with(first) && !enough => None,
            _ => {
                let token = first.iter().take_while(|b| is_tchar(**b)).count();
                match first.get(token) {
                    Some(b' ') if (1..=MAX_METHOD).contains(&token) => {
                        Some(Opening::Http { h2: false })
                    }
                    None if token <= MAX_METHOD && !enough => None,
                    _ => Some(Opening::Other),
                }
            }
        }
    }
}

/// A `tchar` of RFC 9110 §5.6.2, of which a method token is made.
fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

/// Reads a tunnel's first bytes into `first` until they tell what it carries, waiting at
/// most `wait` for each read. Cancelled, it keeps in `first` what it read.
async fn sniff<R>(client: &mut R, first: &mut Vec<u8>, wait: Duration) -> Opening
where
    R: AsyncRead + Unpin,
{
    loop {
        if let Some(opening) = Opening::of(first) {
            return opening;
        }
        let mut chunk = [0u8; SNIFF_BYTES];
        let want = SNIFF_BYTES - first.len();
        let (silent, ended) = if first.is_empty() {
            (Opening::Silent, Opening::Closed)
        } else {
            (Opening::Other, Opening::Other)
        };
        match tokio::time::timeout(wait, client.read(&mut chunk[..want])).await {
            Err(_) => return silent,
            Ok(Ok(0) | Err(_)) => return ended,
            Ok(Ok(n)) => first.extend_from_slice(&chunk[..n]),
        }
    }
}

/// Relays a blind tunnel until either side closes, or shutdown cuts it.
async fn relay_blind<C>(shared: &Shared, mut client: C, mut upstream: TcpStream)
where
    C: AsyncRead + AsyncWrite + Unpin,
{
    let _ = upstream.set_nodelay(true);
    tokio::select! {
        result = tokio::io::copy_bidirectional(&mut client, &mut upstream) => match result {
            Ok((sent, received)) => tracing::debug!(sent, received, "a tunnel closed"),
            Err(err) => tracing::debug!(error = %err, "a tunnel broke"),
        },
        () = shared.cut.cancelled() => {
            shared.cut_count.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
    }
}

/// What serves the tunnels of every connection: each as a task of its own, until the grace
/// period ends.
pub(crate) struct Tunnels;

impl ServeTunnel for Tunnels {
    fn serve(shared: &Shared, opened: Opened, on_upgrade: OnUpgrade) {
        shared.tasks.spawn(serve_tunnel(opened, on_upgrade));
    }
}

/// Serves a tunnel as its first bytes say: TLS intercepted (or blind, for a host that is not
/// watched), plain HTTP through the pipeline, anything else blind.
///
/// Boxed: the requests inside are handled by the same code that handled the `CONNECT`, and a
/// named future type breaks that cycle.
fn serve_tunnel(opened: Opened, on_upgrade: OnUpgrade) -> Pin<Box<dyn Future<Output = ()> + Send>> {
    Box::pin(async move {
        let conn = Arc::clone(&opened.tunnel.conn);
        let shared = &*conn.shared;
        let upgraded = match on_upgrade.await {
            Ok(upgraded) => upgraded,
            Err(err) => {
                tracing::debug!(error = %err, "a CONNECT tunnel was not opened");
                return;
            }
        };
        let mut client = TokioIo::new(upgraded);
        let mut first = Vec::with_capacity(SNIFF_BYTES);
        // An upstream already connected that speaks first settles it: a blind tunnel. Only the
        // end of the grace period cuts this short, not the start of shutdown: a client that
        // gave up on its handshake and exited (ending `holdoff run`) must still be counted.
        let mut opening = tokio::select! {
            opening = sniff(&mut client, &mut first, SNIFF_WAIT) => opening,
            () = speaks(opened.upstream.as_ref()) => Opening::Silent,
            () = shared.cut.cancelled() => return,
        };
        if opening == (Opening::Http { h2: false }) {
            // Plain HTTP is served only when its URL is watched: the first request's says.
            tokio::select! {
                () = request_line(&mut client, &mut first, SNIFF_WAIT) => {}
                () = shared.cut.cancelled() => return,
            }
        }
        if matches!(opening, Opening::Http { .. }) && !opened.plain.watches(shared, &first) {
            opening = Opening::Other;
        }
        let client = Rewind::new(first, client);
        let host = opened.target.as_str();
        match (opening, opened.config) {
            (Opening::Tls, Some(config)) => serve_intercepted(opened.tunnel, client, config).await,
            (Opening::Http { h2 }, _) => {
                drop(opened.upstream);
                serve_plain_tunnel(&conn, opened.plain, client, h2).await;
            }
            (Opening::Closed, _) => tracing::debug!(host, "a client closed its tunnel unused"),
            (opening, _) => {
                tracing::debug!(host, ?opening, "tunnelled blind");
                let upstream = match opened.upstream {
                    Some(upstream) => upstream,
                    None => match connect_upstream(shared, &opened.target).await {
                        Ok(upstream) => upstream,
                        Err(refusal) => {
                            // The client only sees its tunnel close.
                            shared.stats.error();
                            tracing::warn!(host, "{refusal} (for a blind tunnel)");
                            return;
                        }
                    },
                };
                shared.stats.tunnel();
                relay_blind(shared, client, upstream).await;
            }
        }
    })
}

/// Reads on until `first` holds a whole request line, at most [`MAX_REQUEST_LINE`] bytes,
/// waiting at most `wait` for each read. Cancelled, it keeps in `first` what it read.
async fn request_line<R>(client: &mut R, first: &mut Vec<u8>, wait: Duration)
where
    R: AsyncRead + Unpin,
{
    let mut chunk = [0u8; 1024];
    while first.len() < MAX_REQUEST_LINE && !first.windows(2).any(|w| w == b"\r\n") {
        let want = chunk.len().min(MAX_REQUEST_LINE - first.len());
        match tokio::time::timeout(wait, client.read(&mut chunk[..want])).await {
            Ok(Ok(n)) if n > 0 => first.extend_from_slice(&chunk[..n]),
            _ => return,
        }
    }
}

/// Completes when `upstream` has something to read (or failed); never without one.
async fn speaks(upstream: Option<&TcpStream>) {
    match upstream {
        Some(upstream) => {
            let _ = upstream.readable().await;
        }
        None => std::future::pending().await,
    }
}

/// Serves a tunnel that carries plain HTTP as the proxy's port serves a client: a connection
/// of its own inside, by the same client, every request addressed to the tunnel's target.
async fn serve_plain_tunnel(conn: &Conn, plain: PlainTunnel, client: ClientTunnel, h2: bool) {
    let shared = &*conn.shared;
    shared.stats.intercepted();
    let inside = Arc::new(conn.inside_tunnel(h2));
    // HTTP/2 requests run concurrently: they use the shared upstream pool.
    let affinity = (!h2).then_some(&inside.affinity);
    serve_http::<_, Tunnels>(
        shared,
        TokioIo::new(client),
        Inbound::Plain(Arc::clone(&inside)),
        h2,
        inside.peer,
        affinity,
        Some(Arc::new(plain)),
    )
    .await;
    inside.affinity.close(&shared.affine_count);
}

/// Terminates the client's TLS with a leaf certificate for the host, and serves the
/// requests inside (HTTP/2 or HTTP/1.1, as ALPN chose).
async fn serve_intercepted(mut tunnel: Tunnel, client: ClientTunnel, config: Arc<ServerConfig>) {
    let conn = Arc::clone(&tunnel.conn);
    let shared = &*conn.shared;
    shared.stats.intercepted();
    let handshake = TlsAcceptor::from(config).accept(client);
    // Not cut short when shutdown begins: a client that gave up on the handshake and exited
    // (and so ended `holdoff run`) must still be counted.
    let mut tls = tokio::select! {
        result = tokio::time::timeout(shared.idle_timeout, handshake) => match result {
            Ok(Ok(tls)) => tls,
            Ok(Err(err)) => {
                handshake_failed(shared, &tunnel, &handshake_cause(shared, &err));
                return;
            }
            Err(_) => {
                let cause = format!(
                    "the client did not finish it within {}s",
                    shared.idle_timeout.as_secs_f64()
                );
                handshake_failed(shared, &tunnel, &cause);
                return;
            }
        },
        () = shared.cut.cancelled() => return,
    };
    // rustls takes at most 64 KiB of plaintext before it must write, less than hyper hands it
    // at once (a response head and a 64 KiB body chunk): each response would go out in two
    // writes, the second a tiny record. Room for what hyper buffers keeps it to one.
    tls.get_mut().1.set_buffer_limit(Some(TLS_BUFFER));
    let h2 = tls.get_ref().1.alpn_protocol() == Some(b"h2");
    tunnel.affinity = (!h2).then(Affinity::default);
    let tunnel = Arc::new(tunnel);
    let peer = conn.peer;
    serve_http::<_, Tunnels>(
        shared,
        TokioIo::new(tls),
        Inbound::Tunnel(Arc::clone(&tunnel)),
        h2,
        peer,
        tunnel.affinity.as_ref(),
        None,
    )
    .await;
    if let Some(affinity) = &tunnel.affinity {
        affinity.close(&shared.affine_count);
    }
}

/// Logs a failed TLS handshake with an intercepting client at `warn`, and counts it: the
/// client's requests in that tunnel never reach the proxy, so the run cannot pass.
fn handshake_failed(shared: &Shared, tunnel: &Tunnel, cause: &str) {
    shared.stats.interception_failed();
    let host = tunnel.authority.host();
    let port = tunnel
        .authority
        .port_u16()
        .unwrap_or_else(|| default_port("https"));
    tracing::warn!(
        host,
        client = %tunnel.conn.peer.ip(),
        "TLS handshake with the client for {host}:{port} failed: {cause}"
    );
}

/// The likely cause of a failed interception handshake, in words fit after "failed: ".
fn handshake_cause(shared: &Shared, err: &io::Error) -> String {
    use rustls::AlertDescription::{
        BadCertificate, CertificateExpired, CertificateUnknown, UnknownCA, UnsupportedCertificate,
    };

    let ca = shared
        .ca_path
        .as_deref()
        .map(|path| format!(" ({})", path.display()))
        .unwrap_or_default();
    let trust = format!(
        "under `holdoff run` SSL_CERT_FILE, REQUESTS_CA_BUNDLE and NODE_EXTRA_CA_CERTS name it{ca}; \
         see holdoff run --help"
    );
    let tls = err
        .get_ref()
        .and_then(|inner| inner.downcast_ref::<rustls::Error>());
    match tls {
        Some(rustls::Error::AlertReceived(
            alert @ (UnknownCA
            | BadCertificate
            | CertificateUnknown
            | UnsupportedCertificate
            | CertificateExpired),
        )) => {
            let name = match alert {
                UnknownCA => "unknown_ca",
                BadCertificate => "bad_certificate",
                CertificateUnknown => "certificate_unknown",
                UnsupportedCertificate => "unsupported_certificate",
                _ => "certificate_expired",
            };
            format!("the client does not trust holdoff's CA (alert {name}); {trust}")
        }
        Some(rustls::Error::AlertReceived(alert)) => {
            format!("the client ended it with the alert {alert:?}")
        }
        Some(rustls::Error::PeerIncompatible(why)) => {
            format!("the client shares no TLS version or cipher suite with holdoff ({why:?})")
        }
        Some(other) => format!("the client does not speak TLS as expected: {other}"),
        None if matches!(
            err.kind(),
            io::ErrorKind::UnexpectedEof
                | io::ErrorKind::ConnectionReset
                | io::ErrorKind::BrokenPipe
        ) =>
        {
            format!(
                "the client closed the connection: it may not trust holdoff's CA (some clients \
                 close without an alert); {trust}"
            )
        }
        None => err.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use std::net::SocketAddr;

    use holdoff_testkit::{Reply, TestServer};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::{Opening, PREFACE, SNIFF_BYTES};
    use crate::{ProxyConfig, ProxyServer};

    mod opening_of {
        use super::*;

        #[test]
        fn a_tls_handshake_record_is_tls() {
            assert_eq!(Opening::of(&[0x16, 0x03, 0x01, 0x02]), Some(Opening::Tls));
            assert_eq!(Opening::of(&[0x16]), None, "one byte says nothing yet");
            assert_eq!(Opening::of(&[0x16, 0x01]), Some(Opening::Other));
        }

        #[test]
        fn a_method_and_a_space_is_http() {
            for first in [
                &b"GET /"[..],
                b"POST ",
                b"M-SEARCH * HTTP/1.1\r\n",
                b"PRI /x HTTP/1",
            ] {
                assert_eq!(
                    Opening::of(first),
                    Some(Opening::Http { h2: false }),
                    "{}",
                    String::from_utf8_lossy(first)
                );
            }
        }

        #[test]
        fn the_h2c_preface_is_http2_and_a_prefix_of_it_waits() {
            assert_eq!(Opening::of(PREFACE), Some(Opening::Http { h2: true }));
            assert_eq!(Opening::of(&PREFACE[..10]), None);
            assert_eq!(Opening::of(b"GE"), None);
        }

        #[test]
        fn anything_else_is_tunnelled_blind() {
            let long = [b'A'; SNIFF_BYTES];
            for first in [
                &b"\x00\x01"[..],
                b"*1\r\n$4\r\nPING\r\n",
                b" GET",
                b"GET\r\n",
                &long,
            ] {
                assert_eq!(
                    Opening::of(first),
                    Some(Opening::Other),
                    "{}",
                    String::from_utf8_lossy(first)
                );
            }
        }
    }

    /// Sends `head` on a new connection to `proxy` and reads the answer's head; then, if
    /// `then` is given, sends it and reads to the end.
    async fn exchange(proxy: SocketAddr, head: &str, then: Option<&str>) -> String {
        let mut stream = tokio::net::TcpStream::connect(proxy).await.unwrap();
        stream.write_all(head.as_bytes()).await.unwrap();
        let mut answer = Vec::new();
        let mut byte = [0u8; 1];
        while !answer.ends_with(b"\r\n\r\n") && stream.read(&mut byte).await.unwrap() == 1 {
            answer.push(byte[0]);
        }
        if let Some(then) = then {
            stream.write_all(then.as_bytes()).await.unwrap();
            stream.read_to_end(&mut answer).await.unwrap();
        }
        String::from_utf8_lossy(&answer).into_owned()
    }

    async fn proxy() -> (
        SocketAddr,
        crate::ShutdownHandle,
        tokio::task::JoinHandle<crate::Summary>,
    ) {
        let config = ProxyConfig {
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            ..ProxyConfig::default()
        };
        let server = ProxyServer::bind(config, Vec::new()).await.unwrap();
        let addr = server.local_addr();
        let stop = server.shutdown_handle();
        (addr, stop, tokio::spawn(server.run()))
    }

    #[tokio::test]
    async fn a_connect_is_no_request_only_what_the_proxy_sees_inside_counts() {
        let upstream = TestServer::start().await;
        upstream.set_default("/t", Reply::ok("hello"));
        let target = upstream.addr();
        let (proxy, stop, running) = proxy().await;

        // Plain HTTP to a host that is not watched: tunnelled blind, unseen.
        let get = format!("GET /t HTTP/1.1\r\nHost: {target}\r\nConnection: close\r\n\r\n");
        let connect = format!("CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n");
        let blind = exchange(proxy, &connect, Some(&get)).await;
        assert!(blind.starts_with("HTTP/1.1 200"), "{blind}");
        assert!(
            !blind.to_lowercase().contains("via: "),
            "untouched: {blind}"
        );
        assert!(blind.ends_with("hello"), "{blind}");
        // Something else: tunnelled blind, the upstream's own answer comes back.
        let tunnelled = exchange(proxy, &connect, Some("\x00\x01 not http\r\n\r\n")).await;
        assert!(tunnelled.starts_with("HTTP/1.1 200"), "{tunnelled}");
        assert!(tunnelled.contains("HTTP/1.1 400"), "{tunnelled}");
        // A CONNECT that fails.
        let closed = "CONNECT 127.0.0.1:1 HTTP/1.1\r\nHost: 127.0.0.1:1\r\n\r\n";
        let refused = exchange(proxy, closed, None).await;
        assert!(refused.starts_with("HTTP/1.1 502"), "{refused}");
        // One plain request.
        let forward = format!(
            "GET http://{target}/t HTTP/1.1\r\nHost: {target}\r\nConnection: close\r\n\r\n"
        );
        let forwarded = exchange(proxy, &forward, Some("")).await;
        assert!(forwarded.starts_with("HTTP/1.1 200"), "{forwarded}");

        stop.shutdown();
        let summary = running.await.unwrap();
        assert_eq!(summary.requests, 1, "{summary}");
        assert_eq!(summary.by_class, [0, 1, 0, 0, 0], "{summary}");
        assert_eq!(summary.tunnels, 2, "{summary}");
        assert_eq!(summary.intercepted, 0, "{summary}");
        assert_eq!(summary.errors, 1, "the CONNECT that failed: {summary}");
    }

    #[tokio::test]
    async fn an_upstream_that_speaks_first_is_tunnelled_blind_at_once() {
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0))
            .await
            .unwrap();
        let target = listener.local_addr().unwrap();
        let banner = tokio::spawn(async move {
            let (mut stream, _) = listener.accept().await.unwrap();
            stream.write_all(b"220 ready\r\n").await.unwrap();
            let mut reply = [0u8; 4];
            stream.read_exact(&mut reply).await.unwrap();
            assert_eq!(&reply, b"QUIT");
        });
        let (proxy, stop, running) = proxy().await;

        let mut stream = tokio::net::TcpStream::connect(proxy).await.unwrap();
        let connect = format!("CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n");
        stream.write_all(connect.as_bytes()).await.unwrap();
        let mut answer = Vec::new();
        let mut byte = [0u8; 1];
        while !answer.ends_with(b"220 ready\r\n") && stream.read(&mut byte).await.unwrap() == 1 {
            answer.push(byte[0]);
        }
        let answer = String::from_utf8_lossy(&answer).into_owned();
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
        assert!(answer.ends_with("220 ready\r\n"), "{answer}");
        stream.write_all(b"QUIT").await.unwrap();
        banner.await.unwrap();
        drop(stream);

        stop.shutdown();
        let summary = running.await.unwrap();
        assert_eq!((summary.tunnels, summary.requests), (1, 0), "{summary}");
    }
}
