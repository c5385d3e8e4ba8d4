//! A client that stops reading holds a bounded amount of the proxy's memory until the send
//! timeout cuts it: the heap is counted by a counting allocator once every buffer between an
//! endless upstream and the client is full.

// The helpers outside the test functions fail the test by panicking, as the tests do.
#![allow(clippy::unwrap_used)]

mod support;

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use holdoff_proxy::{ClientIdMode, ProxyConfig};
use holdoff_testkit::heap::{self, Counting};
use support::InProcess as Proxy;
use support::{EndlessUpstream, small_window_client};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// How many clients stop reading at once.
const CLIENTS: usize = 16;

/// The most one of them may hold. The proxy's buffers towards the client and towards the
/// upstream are each capped at 64 KiB, and with the chunks in flight between them one holds
/// ~350 KiB here; with hyper's default upstream buffer (~400 KiB), ~1,000 KiB.
const BOUND: usize = 512 * 1024;

/// Returns once `written` has not moved for a while: the upstream cannot write any more.
// Real sockets fill up in real time; a paused clock cannot stand in.
#[allow(clippy::disallowed_methods)]
async fn stalled(written: &AtomicU64) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    let mut last = written.load(Ordering::Relaxed);
    loop {
        tokio::time::sleep(Duration::from_millis(250)).await;
        let now = written.load(Ordering::Relaxed);
        if now == last && now > 0 {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the upstream kept writing for 20 s ({now} bytes): something reads the responses"
        );
        last = now;
    }
}

/// Sends `CLIENTS` requests for an endless body, each on its own connection and, with
/// `warm`, after a short request on it (so that it goes over the client's own upstream
/// connection rather than the pool's), then reads nothing: the heap each one holds.
async fn held_by_stalled_clients(warm: bool) -> usize {
    let upstream = EndlessUpstream::start().await;
    let mut config = ProxyConfig::default();
    config.listen = SocketAddr::from((Ipv4Addr::LOCALHOST, 0));
    config.client_id = ClientIdMode::Peer;
    let proxy = Proxy::start(config, Vec::new()).await;
    let request = |path: &str| {
        format!(
            "GET http://{0}{path} HTTP/1.1\r\nHost: {0}\r\n\r\n",
            upstream.addr
        )
    };

    let before = heap::live();
    let mut clients = Vec::new();
    for _ in 0..CLIENTS {
        let mut client = small_window_client(proxy.addr).await;
        if warm {
            client
                .write_all(request("/small").as_bytes())
                .await
                .unwrap();
            let mut answer = Vec::new();
            while !answer.ends_with(b"\r\n\r\nok") {
                let mut chunk = [0u8; 1024];
                let read = client.read(&mut chunk).await.unwrap();
                assert!(read > 0, "the proxy closed the connection after /small");
                answer.extend_from_slice(&chunk[..read]);
            }
        }
        client
            .write_all(request("/endless").as_bytes())
            .await
            .unwrap();
        clients.push(client);
    }
    stalled(&upstream.written).await;
    let held = heap::live().saturating_sub(before);
    let each = held / CLIENTS;
    eprintln!(
        "{CLIENTS} clients that stopped reading ({}): {} KiB of heap each, {} KiB in all; \
         the upstream wrote {} KiB",
        if warm {
            "on their own upstream connections"
        } else {
            "on the pool's"
        },
        each / 1024,
        held / 1024,
        upstream.written.load(Ordering::Relaxed) / 1024
    );
    drop(clients);
    proxy.stop().await;
    each
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clients_that_stop_reading_each_hold_a_bounded_buffer() {
    let each = held_by_stalled_clients(false).await;
    assert!(
        each < BOUND,
        "a client that stops reading holds {} KiB of the proxy's heap (bound {} KiB)",
        each / 1024,
        BOUND / 1024
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn so_do_they_on_their_own_upstream_connections() {
    let each = held_by_stalled_clients(true).await;
    assert!(
        each < BOUND,
        "a client that stops reading on its second request holds {} KiB of the proxy's heap \
         (bound {} KiB)",
        each / 1024,
        BOUND / 1024
    );
}
