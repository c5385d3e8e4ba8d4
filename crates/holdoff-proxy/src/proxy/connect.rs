//! `CONNECT`: a watched host is intercepted (TLS terminated with a leaf certificate, the
//! requests inside served like any other); any other is tunnelled blind, bytes untouched.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use holdoff::Receipt;
use http::request::Parts;
use http::uri::Authority;
use http::{Response, StatusCode};
use hyper::upgrade::OnUpgrade;
use hyper_util::rt::TokioIo;
use rustls::ServerConfig;
use tokio::net::TcpStream;
use tokio_rustls::TlsAcceptor;

use super::affinity::Affinity;
use super::handler::{Line, Origin, Who, log, reason};
use super::server::{Conn, serve_http};
use super::{Route, Shared, reply};
use crate::Body;
use crate::config::proxy_user;

/// How much encrypted output an intercepted connection may hold before writing it.
const TLS_BUFFER: usize = 256 * 1024;

/// An intercepted tunnel: what its requests share.
pub(crate) struct Tunnel {
    /// The client connection the tunnel was made on.
    pub(crate) conn: Arc<Conn>,
    /// Where the client asked to go, without the port when it is 443.
    pub(crate) authority: Authority,
    /// The proxy user of the `CONNECT`, which names the client for every request inside.
    pub(crate) user: Option<Arc<str>>,
    /// Its own upstream connection, when the client chose HTTP/1.1 (HTTP/2 requests run
    /// concurrently and share the pool).
    pub(crate) affinity: Option<Affinity>,
}

/// [`handle`], boxed: the request handler's future, which hyper moves into place for every
/// request, stays small when the rare paths it may take are behind a pointer.
pub(crate) fn boxed<'a>(
    conn: &'a Arc<Conn>,
    parts: Parts,
    received: Receipt,
) -> Pin<Box<dyn Future<Output = Response<Body>> + Send + 'a>> {
    Box::pin(handle(conn, parts, received))
}

/// Answers a `CONNECT` and sets up what follows it.
async fn handle(conn: &Arc<Conn>, mut parts: Parts, received: Receipt) -> Response<Body> {
    let shared = &*conn.shared;
    let user: Option<Arc<str>> = proxy_user(&parts.headers).map(Into::into);
    let who = match &user {
        Some(user) => Who::User(user),
        None => Who::Id(&conn.identity),
    };
    let leaves = match &shared.route {
        Route::Forward { leaves } => leaves.as_ref(),
        Route::Reverse(upstream) => {
            let message = format!(
                "holdoff: this is a reverse proxy for {upstream}; it does not take CONNECT\n"
            );
            return refuse(
                shared,
                &parts,
                who,
                received,
                StatusCode::BAD_REQUEST,
                message,
                "tunnel",
            );
        }
    };
    let Some(authority) = parts
        .uri
        .authority()
        .cloned()
        .filter(|a| a.port_u16().is_some())
    else {
        let message = "holdoff: CONNECT needs a host and a port (CONNECT host:443)\n";
        return refuse(
            shared,
            &parts,
            who,
            received,
            StatusCode::BAD_REQUEST,
            message.into(),
            "tunnel",
        );
    };
    let Some(on_upgrade) = parts.extensions.remove::<OnUpgrade>() else {
        // hyper always provides it on an HTTP/1.1 connection that allows upgrades.
        let message = "holdoff: this connection cannot be tunnelled\n";
        return refuse(
            shared,
            &parts,
            who,
            received,
            StatusCode::BAD_REQUEST,
            message.into(),
            "tunnel",
        );
    };

    let watched = leaves.zip(shared.watch.intercepting(authority.host()));
    if let Some((leaves, _pattern)) = watched {
        let config = match leaves.server_config(authority.host()) {
            Ok(config) => config,
            Err(err) => {
                let message = format!(
                    "holdoff: cannot issue a certificate for {}: {err}\n",
                    authority.host()
                );
                return refuse(
                    shared,
                    &parts,
                    who,
                    received,
                    StatusCode::BAD_GATEWAY,
                    message,
                    "intercepted",
                );
            }
        };
        shared.stats.intercepted();
        let tunnel = Tunnel {
            conn: Arc::clone(conn),
            authority: without_default_port(authority),
            user,
            affinity: None,
        };
        // The CONNECT is no request of its own: the requests inside are counted as they come.
        let response = Response::new(Body::empty());
        log_connect(
            shared,
            &parts,
            who_of(&tunnel, conn),
            received,
            StatusCode::OK,
            "intercepted",
            None,
        );
        shared.tasks.spawn(intercept(tunnel, on_upgrade, config));
        return response;
    }

    let target = authority.as_str();
    let connected = tokio::time::timeout(shared.upstream_timeout, TcpStream::connect(target)).await;
    let upstream = match connected {
        Ok(Ok(stream)) => stream,
        Ok(Err(err)) => {
            let message = format!("holdoff: could not connect to {target}: {err}\n");
            return refuse(
                shared,
                &parts,
                who,
                received,
                StatusCode::BAD_GATEWAY,
                message,
                "tunnel",
            );
        }
        Err(_) => {
            let message = format!(
                "holdoff: could not connect to {target} within {}s\n",
                shared.upstream_timeout.as_secs_f64()
            );
            return refuse(
                shared,
                &parts,
                who,
                received,
                StatusCode::GATEWAY_TIMEOUT,
                message,
                "tunnel",
            );
        }
    };
    let _ = upstream.set_nodelay(true);
    shared.stats.tunnel();
    log_connect(
        shared,
        &parts,
        who,
        received,
        StatusCode::OK,
        "tunnel",
        None,
    );
    shared
        .tasks
        .spawn(relay_blind(Arc::clone(conn), on_upgrade, upstream));
    Response::new(Body::empty())
}

fn who_of<'a>(tunnel: &'a Tunnel, conn: &'a Conn) -> Who<'a> {
    match &tunnel.user {
        Some(user) => Who::User(user),
        None => Who::Id(&conn.identity),
    }
}

/// `host:443` → `host`: the form `https://host/…` URLs and `Host` headers use.
fn without_default_port(authority: Authority) -> Authority {
    if authority.port_u16() != Some(443) {
        return authority;
    }
    Authority::from_maybe_shared(bytes::Bytes::copy_from_slice(authority.host().as_bytes()))
        .unwrap_or(authority)
}

/// Answers a `CONNECT` with an error and logs it: counted as an error, not as a request.
fn refuse(
    shared: &Shared,
    parts: &Parts,
    who: Who<'_>,
    received: Receipt,
    status: StatusCode,
    message: String,
    mode: &'static str,
) -> Response<Body> {
    shared.stats.error();
    log_connect(
        shared,
        parts,
        who,
        received,
        status,
        mode,
        Some(reason(&message)),
    );
    reply::text(status, message)
}

fn log_connect(
    shared: &Shared,
    parts: &Parts,
    who: Who<'_>,
    received: Receipt,
    status: StatusCode,
    mode: &'static str,
    error: Option<&str>,
) {
    let line = Line {
        method: &parts.method,
        url: &parts.uri,
        mode,
        client: who,
    };
    log(shared, &line, received.instant, Some(status), error);
}

/// Relays a blind tunnel until either side closes, or shutdown cuts it.
async fn relay_blind(conn: Arc<Conn>, on_upgrade: OnUpgrade, mut upstream: TcpStream) {
    let shared = &conn.shared;
    let upgraded = match on_upgrade.await {
        Ok(upgraded) => upgraded,
        Err(err) => {
            tracing::debug!(error = %err, "a CONNECT tunnel was not opened");
            return;
        }
    };
    let mut client = TokioIo::new(upgraded);
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

/// Terminates the client's TLS with a leaf certificate for the host, and serves the
/// requests inside (HTTP/2 or HTTP/1.1, as ALPN chose).
///
/// Boxed: the requests inside are handled by the same code that handled the `CONNECT`, and a
/// named future type breaks that cycle.
fn intercept(
    tunnel: Tunnel,
    on_upgrade: OnUpgrade,
    config: Arc<ServerConfig>,
) -> Pin<Box<dyn Future<Output = ()> + Send>> {
    Box::pin(serve_intercepted(tunnel, on_upgrade, config))
}

async fn serve_intercepted(mut tunnel: Tunnel, on_upgrade: OnUpgrade, config: Arc<ServerConfig>) {
    let conn = Arc::clone(&tunnel.conn);
    let shared = &*conn.shared;
    let upgraded = match on_upgrade.await {
        Ok(upgraded) => upgraded,
        Err(err) => {
            tracing::debug!(error = %err, "a CONNECT tunnel was not opened");
            return;
        }
    };
    let handshake = TlsAcceptor::from(config).accept(TokioIo::new(upgraded));
    let mut tls = tokio::select! {
        result = tokio::time::timeout(shared.idle_timeout, handshake) => match result {
            Ok(Ok(tls)) => tls,
            Ok(Err(err)) => {
                handshake_failed(shared, &tunnel, &err);
                return;
            }
            Err(_) => {
                tracing::debug!(host = tunnel.authority.host(), "a client never finished TLS");
                return;
            }
        },
        () = shared.drain.cancelled() => return,
    };
    // rustls takes at most 64 KiB of plaintext before it must write, less than hyper hands it
    // at once (a response head and a 64 KiB body chunk): each response would go out in two
    // writes, the second a tiny record. Room for what hyper buffers keeps it to one.
    tls.get_mut().1.set_buffer_limit(Some(TLS_BUFFER));
    let h2 = tls.get_ref().1.alpn_protocol() == Some(b"h2");
    tunnel.affinity = (!h2).then(Affinity::default);
    let tunnel = Arc::new(tunnel);
    let peer = conn.peer;
    serve_http(
        shared,
        TokioIo::new(tls),
        Origin::Tunnel(Arc::clone(&tunnel)),
        h2,
        peer,
        tunnel.affinity.as_ref(),
    )
    .await;
    if let Some(affinity) = &tunnel.affinity {
        affinity.close(&shared.affine_count);
    }
}

/// Logs a failed TLS handshake with an intercepting client, with a hint when the client
/// refused the certificate.
fn handshake_failed(shared: &Shared, tunnel: &Tunnel, err: &std::io::Error) {
    use rustls::AlertDescription::{BadCertificate, CertificateUnknown, UnknownCA};

    let refused = err
        .get_ref()
        .and_then(|inner| inner.downcast_ref::<rustls::Error>())
        .is_some_and(|tls| {
            matches!(
                tls,
                rustls::Error::AlertReceived(UnknownCA | BadCertificate | CertificateUnknown)
            )
        });
    let host = tunnel.authority.host();
    if refused {
        let ca = shared.ca_path.as_deref().map_or_else(
            || "holdoff's CA".to_owned(),
            |path| path.display().to_string(),
        );
        tracing::warn!(
            host,
            client = %tunnel.conn.peer.ip(),
            "the client refused the certificate holdoff made for {host}: does it trust {ca}?"
        );
    } else {
        tracing::debug!(host, error = %err, "TLS with an intercepting client failed");
    }
}

#[cfg(test)]
mod tests {
    use std::net::SocketAddr;

    use holdoff_testkit::{Reply, TestServer};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use crate::{ProxyConfig, ProxyServer};

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

    #[tokio::test]
    async fn a_connect_is_no_request_only_what_the_proxy_sees_inside_counts() {
        let upstream = TestServer::start().await;
        upstream.set_default("/t", Reply::ok("hello"));
        let target = upstream.addr();
        let config = ProxyConfig {
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            ..ProxyConfig::default()
        };
        let server = ProxyServer::bind(config, Vec::new()).await.unwrap();
        let proxy = server.local_addr();
        let stop = server.shutdown_handle();
        let running = tokio::spawn(server.run());

        // A blind tunnel, and a request through it that the proxy cannot see.
        let get = format!("GET /t HTTP/1.1\r\nHost: {target}\r\nConnection: close\r\n\r\n");
        let connect = format!("CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n");
        let tunnelled = exchange(proxy, &connect, Some(&get)).await;
        assert!(tunnelled.starts_with("HTTP/1.1 200"), "{tunnelled}");
        assert!(tunnelled.ends_with("hello"), "{tunnelled}");
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
        assert_eq!(summary.tunnels, 1, "{summary}");
        assert_eq!(summary.errors, 1, "the CONNECT that failed: {summary}");
    }
}
