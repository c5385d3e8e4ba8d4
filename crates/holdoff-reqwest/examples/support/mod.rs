//! A stand-in for a rate-limited API, for the examples: a plain HTTP/1.1 server on a free
//! loopback port. Each request to a path gets the next answer scripted for that path, then
//! `200 OK`; every answer closes its connection. Nothing here is holdoff's: any server would
//! do, and the examples build from the published package alone.

#![allow(dead_code, unreachable_pub)] // Each example uses its own part of this module.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use holdoff_reqwest::holdoff::clock::{Clock, TokioClock};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

type Script = HashMap<String, Vec<&'static str>>;
type Arrivals = Vec<(String, Instant)>;

/// The running server.
pub struct Api {
    addr: SocketAddr,
    arrivals: Arc<Mutex<Arrivals>>,
}

impl Api {
    /// Starts the server. `script` pairs a path with the answers its first requests get, each
    /// a status line and headers, e.g. `"429 Too Many Requests\r\nretry-after: 1"`.
    pub async fn start(script: &[(&str, &[&'static str])]) -> std::io::Result<Api> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let script: Script = script
            .iter()
            .map(|(path, answers)| ((*path).to_owned(), answers.iter().rev().copied().collect()))
            .collect();
        let script = Arc::new(Mutex::new(script));
        let arrivals = Arc::new(Mutex::new(Vec::new()));
        let seen = Arc::clone(&arrivals);
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                tokio::spawn(answer(stream, Arc::clone(&script), Arc::clone(&seen)));
            }
        });
        Ok(Api { addr, arrivals })
    }

    /// The URL of `path` on this server.
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// When each request to `path` arrived.
    pub fn arrivals(&self, path: &str) -> Vec<Instant> {
        let arrivals = self.arrivals.lock().unwrap_or_else(PoisonError::into_inner);
        arrivals
            .iter()
            .filter(|(p, _)| p == path)
            .map(|(_, at)| *at)
            .collect()
    }
}

/// Reads one request (head and `content-length` body) and writes its answer.
async fn answer(mut stream: TcpStream, script: Arc<Mutex<Script>>, seen: Arc<Mutex<Arrivals>>) {
    let mut request = Vec::new();
    let mut buf = [0u8; 4096];
    let head_end = loop {
        match stream.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => request.extend_from_slice(&buf[..n]),
        }
        if let Some(end) = request.windows(4).position(|w| w == b"\r\n\r\n") {
            break end + 4;
        }
    };
    let head = String::from_utf8_lossy(&request[..head_end]).into_owned();
    let length = head
        .lines()
        .filter_map(|line| line.split_once(':'))
        .find(|(name, _)| name.eq_ignore_ascii_case("content-length"))
        .and_then(|(_, value)| value.trim().parse::<usize>().ok())
        .unwrap_or(0);
    while request.len() < head_end + length {
        match stream.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => request.extend_from_slice(&buf[..n]),
        }
    }
    let path = head.split(' ').nth(1).unwrap_or("/").to_owned();
    seen.lock()
        .unwrap_or_else(PoisonError::into_inner)
        .push((path.clone(), TokioClock.now()));
    let next = script
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .get_mut(&path)
        .and_then(Vec::pop)
        .unwrap_or("200 OK");
    let response = format!("HTTP/1.1 {next}\r\ncontent-length: 0\r\nconnection: close\r\n\r\n");
    let _ = stream.write_all(response.as_bytes()).await;
    let _ = stream.shutdown().await;
}
