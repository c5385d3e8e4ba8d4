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
        let mut server = RedisServer {
            child: None,
            port: 0,
            dir: tempfile::tempdir().expect("temporary directory"),
            extra: extra.iter().map(|s| (*s).to_owned()).collect(),
        };
        // Redis has no `--port 0`: take a port the kernel says is free, release it, and try
        // again with another if someone else took it in between.
        for _ in 0..10 {
            server.port = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
                .and_then(|l| l.local_addr())
                .expect("free port")
                .port();
            if server.spawn() {
                return server;
            }
        }
        panic!("could not start redis-server on a free loopback port");
    }

    /// Starts the server on `self.port`; false if it exited (the port was taken).
    fn spawn(&mut self) -> bool {
        let mut child = Command::new("redis-server")
            .args(["--bind", "127.0.0.1", "--port", &self.port.to_string()])
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
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = child.kill();
        let _ = child.wait();
        false
    }

    /// `redis://127.0.0.1:<port>/0`, without credentials.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/0", self.port)
    }

    /// The loopback port it listens on (the same across restarts).
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
            std::thread::sleep(Duration::from_millis(100));
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
    ::redis::Client::open(redis.url())
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
