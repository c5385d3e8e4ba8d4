//! The demo's upstream: a tiny API on a free loopback port, in process, that answers `GET /v1/items/{n}`
//! with a small JSON body, and 404 to anything else.

use std::convert::Infallible;
use std::io;
use std::net::{Ipv4Addr, SocketAddr};

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode, header};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

/// The upstream, serving until dropped.
pub(super) struct Upstream {
    accepting: JoinHandle<()>,
}

/// Binds a free loopback port for the upstream, before any runtime runs.
///
/// # Errors
///
/// When no loopback port can be bound.
pub(super) fn bind() -> io::Result<std::net::TcpListener> {
    let listener = std::net::TcpListener::bind(SocketAddr::from((Ipv4Addr::LOCALHOST, 0)))?;
    listener.set_nonblocking(true)?;
    Ok(listener)
}

impl Upstream {
    /// Serves on `listener` (from [`bind`]); call it inside the runtime.
    ///
    /// # Errors
    ///
    /// When tokio cannot take the listener over.
    pub(super) fn serve(listener: std::net::TcpListener) -> io::Result<Upstream> {
        let listener = TcpListener::from_std(listener)?;
        let accepting = tokio::spawn(async move {
            loop {
                let stream = match listener.accept().await {
                    Ok((stream, _)) => stream,
                    // A connection that failed before it was accepted: the client sees it.
                    Err(err) => {
                        tracing::debug!("demo upstream: failed to accept a connection: {err}");
                        continue;
                    }
                };
                tokio::spawn(async move {
                    let served = http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service_fn(answer))
                        .await;
                    if let Err(err) = served {
                        tracing::debug!("demo upstream: connection ended with an error: {err}");
                    }
                });
            }
        });
        Ok(Upstream { accepting })
    }
}

impl Drop for Upstream {
    fn drop(&mut self) {
        self.accepting.abort();
    }
}

async fn answer(request: Request<Incoming>) -> Result<Response<Full<Bytes>>, Infallible> {
    let item = request
        .uri()
        .path()
        .strip_prefix("/v1/items/")
        .and_then(|n| n.parse::<u32>().ok());
    let (status, body) = match (request.method(), item) {
        (&Method::GET, Some(n)) => (
            StatusCode::OK,
            format!(r#"{{"id":{n},"name":"item {n}","in_stock":true}}"#),
        ),
        _ => (
            StatusCode::NOT_FOUND,
            r#"{"error":"not found: try GET /v1/items/1"}"#.to_owned(),
        ),
    };
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    Ok(response)
}

#[cfg(test)]
mod tests {
    use super::*;

    mod answer {
        use super::*;
        use http_body_util::BodyExt;

        async fn get(addr: SocketAddr, path: &str) -> (StatusCode, String) {
            let stream = tokio::net::TcpStream::connect(addr).await.unwrap();
            let (mut sender, connection) =
                hyper::client::conn::http1::handshake(TokioIo::new(stream))
                    .await
                    .unwrap();
            tokio::spawn(connection);
            let request = Request::get(path)
                .header(header::HOST, addr.to_string())
                .body(http_body_util::Empty::<Bytes>::new())
                .unwrap();
            let response = sender.send_request(request).await.unwrap();
            let status = response.status();
            let body = response.into_body().collect().await.unwrap().to_bytes();
            (status, String::from_utf8(body.to_vec()).unwrap())
        }

        #[tokio::test]
        async fn serves_items_as_json_and_404_for_anything_else() {
            let listener = bind().unwrap();
            let addr = listener.local_addr().unwrap();
            let _upstream = Upstream::serve(listener).unwrap();
            let (status, body) = get(addr, "/v1/items/3").await;
            assert_eq!(status, StatusCode::OK);
            let json: serde_json::Value = serde_json::from_str(&body).unwrap();
            assert_eq!(json["id"], 3);
            let (status, _) = get(addr, "/v1/items/x").await;
            assert_eq!(status, StatusCode::NOT_FOUND);
        }
    }
}
