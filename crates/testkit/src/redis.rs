//! [`RedisServer`]: a real `redis-server` of a test's own, on a free loopback port.
//!
//! ```no_run
//! use holdoff_testkit::redis::RedisServer;
//!
//! let mut redis = RedisServer::start();
//! let url = redis.url(); // redis://127.0.0.1:<port>/0
//! redis.stop(); // as if it crashed: clients see refused connections
//! redis.restart(); // the same port, empty
//! # drop(url);
//! ```
//!
//! Nothing is saved: the data lives in a temporary directory, and a restarted server starts
//! empty. The server is killed when the value is dropped.

use std::io::{Read, Write};
use std::net::{Ipv4Addr, TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use holdoff::clock::SystemClock;

/// A `redis-server` of this test's own, killed on drop, its data in a temporary directory.
#[derive(Debug)]
pub struct RedisServer {
    child: Option<Child>,
    port: u16,
    /// With TLS: the port serving TLS (`port` then serves plain connections too, for the
    /// readiness check and [`inspect`]).
    tls_port: Option<u16>,
    dir: tempfile::TempDir,
    extra: Vec<String>,
}

impl RedisServer {
    /// Starts a server on a free loopback port.
    ///
    /// # Panics
    ///
    /// If `redis-server` is not installed, or does not start within about 10 seconds.
    pub fn start() -> RedisServer {
        RedisServer::start_with(&[])
    }

    /// Starts a server with extra command-line arguments, e.g.
    /// `["--requirepass", "hunter2"]`; they are kept for [`RedisServer::restart`].
    ///
    /// # Panics
    ///
    /// As [`RedisServer::start`].
    pub fn start_with(extra: &[&str]) -> RedisServer {
        let server = RedisServer {
            child: None,
            port: 0,
            tls_port: None,
            dir: tempfile::tempdir().expect("temporary directory"),
            extra: extra.iter().map(|s| (*s).to_owned()).collect(),
        };
        server.launch()
    }

    /// Starts a server serving TLS with this certificate chain and key (PEM), which clients
    /// verify against the CA that issued it; no client certificates asked for. [`url`] is
    /// then a `rediss://` URL.
    ///
    /// [`url`]: RedisServer::url
    ///
    /// # Panics
    ///
    /// As [`RedisServer::start`], and if this `redis-server` was built without TLS.
    pub fn start_tls(cert_pem: &str, key_pem: &str) -> RedisServer {
        let dir = tempfile::tempdir().expect("temporary directory");
        let (cert, key) = (dir.path().join("redis.crt"), dir.path().join("redis.key"));
        std::fs::write(&cert, cert_pem).expect("write the certificate");
        std::fs::write(&key, key_pem).expect("write the key");
        let extra = vec![
            "--tls-cert-file".to_owned(),
            cert.display().to_string(),
            "--tls-key-file".to_owned(),
            key.display().to_string(),
            "--tls-auth-clients".to_owned(),
            "no".to_owned(),
        ];
        let server = RedisServer {
            child: None,
            port: 0,
            tls_port: Some(0),
            dir,
            extra,
        };
        server.launch()
    }

    /// Picks free ports and spawns, trying others if someone took one in between (Redis has
    /// no `--port 0`: a port the kernel says is free is taken, released, and given to it).
    fn launch(mut self) -> RedisServer {
        let free = || {
            TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
                .and_then(|l| l.local_addr())
                .expect("free port")
                .port()
        };
        for _ in 0..10 {
            self.port = free();
            if self.tls_port.is_some() {
                self.tls_port = Some(free()).filter(|&p| p != self.port);
                if self.tls_port.is_none() {
                    self.tls_port = Some(0);
                    continue;
                }
            }
            if self.spawn() {
                return self;
            }
        }
        panic!("could not start redis-server on a free loopback port");
    }

    /// Starts the server on `self.port`; false if it exited (the port was taken).
    fn spawn(&mut self) -> bool {
        let mut child = Command::new("redis-server")
            .args(["--bind", "127.0.0.1", "--port", &self.port.to_string()])
            .args(
                self.tls_port
                    .map(|port| ["--tls-port".to_owned(), port.to_string()])
                    .into_iter()
                    .flatten(),
            )
            .args(["--save", "", "--appendonly", "no"])
            .arg("--dir")
            .arg(self.dir.path())
            .args(&self.extra)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("redis-server is installed (scripts/test installs it)");
        let started = SystemClock.now();
        while SystemClock.now() - started < Duration::from_secs(10) {
            if child.try_wait().expect("redis-server status").is_some() {
                return false;
            }
            if let Ok(mut stream) = TcpStream::connect((Ipv4Addr::LOCALHOST, self.port)) {
                // Any reply (PONG or NOAUTH) means it is serving.
                let mut reply = [0u8; 1];
                if stream.write_all(b"PING\r\n").is_ok()
                    && stream.read(&mut reply).unwrap_or(0) == 1
                {
                    self.child = Some(child);
                    return true;
                }
            }
            holdoff::clock::SystemClock.block_for(Duration::from_millis(20));
        }
        let _ = child.kill();
        let _ = child.wait();
        false
    }

    /// `redis://127.0.0.1:<port>/0`, or `rediss://…` with TLS; without credentials.
    pub fn url(&self) -> String {
        match self.tls_port {
            Some(port) => format!("rediss://127.0.0.1:{port}/0"),
            None => self.plain_url(),
        }
    }

    /// `redis://127.0.0.1:<port>/0`: the plain port, also open on a TLS server.
    pub fn plain_url(&self) -> String {
        format!("redis://127.0.0.1:{}/0", self.port)
    }

    /// The plain loopback port it listens on (the same across restarts).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Whether it is running (started, and not stopped since).
    pub fn is_running(&self) -> bool {
        self.child.is_some()
    }

    /// Kills the server (`SIGKILL`), as a crash would; does nothing if it is stopped.
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts it again on the same port with the same arguments, empty, as an operator
    /// would after a crash. Stops it first if it is running.
    ///
    /// # Panics
    ///
    /// If it cannot listen on its port again (another process took it meanwhile).
    pub fn restart(&mut self) {
        self.stop();
        for _ in 0..50 {
            if self.spawn() {
                return;
            }
            holdoff::clock::SystemClock.block_for(Duration::from_millis(100));
        }
        panic!("could not restart redis-server on port {}", self.port);
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A plain connection to `redis`, for looking at what a test's code left there.
///
/// # Panics
///
/// If the server cannot be reached.
pub async fn inspect(redis: &RedisServer) -> ::redis::aio::MultiplexedConnection {
    ::redis::Client::open(redis.plain_url())
        .expect("the test server's URL")
        .get_multiplexed_async_connection()
        .await
        .expect("connect to the test redis-server")
}

/// A loopback server that accepts connections and never answers, as a hung Redis: its
/// `redis://` URL, and the task holding the connections (abort it to let them go).
///
/// # Panics
///
/// If no loopback port can be bound.
pub async fn silent_server() -> (String, tokio::task::JoinHandle<()>) {
    let silent = tokio::net::TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .await
        .expect("bind a loopback port");
    let url = format!("redis://{}/0", silent.local_addr().expect("its address"));
    let held = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((stream, _)) = silent.accept().await {
            held.push(stream);
        }
    });
    (url, held)
}
