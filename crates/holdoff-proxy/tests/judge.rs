//! The judge inside the real proxy: hints from a real upstream open windows, and a retry that
//! comes too early is answered 429 without reaching the upstream.

mod support;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use holdoff::clock::{Clock, TokioClock};
use holdoff_proxy::judge::{Judge, JudgeStage, KeyMode, Verdict};
use holdoff_testkit::{Reply, TestServer};
use support::get_as as get;

async fn proxy(judge: Arc<JudgeStage>) -> (SocketAddr, holdoff_proxy::ShutdownHandle) {
    support::in_process(vec![judge]).await
}

fn stage(mode: KeyMode) -> Arc<JudgeStage> {
    Arc::new(JudgeStage::new(Arc::new(Judge::new(
        mode,
        TokioClock.now(),
    ))))
}

#[tokio::test]
async fn an_upstream_hint_catches_an_immediate_retry() {
    let upstream = TestServer::start().await;
    upstream.script("/items", [Reply::unavailable("30")]);
    let judge = stage(KeyMode::default());
    let (addr, handle) = proxy(judge.clone()).await;
    let url = upstream.url("/items");

    let first = get(addr, &url, "alice").await;
    assert_eq!(first.status(), 503);
    let retry = get(addr, &url, "alice").await;
    assert_eq!(retry.status(), 429);
    let wait: u64 = retry.headers()["retry-after"]
        .to_str()
        .expect("ascii")
        .parse()
        .expect("secs");
    assert!((29..=30).contains(&wait), "{wait}");
    assert_eq!(
        upstream.requests_to("/items").len(),
        1,
        "the premature retry was not forwarded"
    );

    let events = judge.events();
    assert_eq!(events.len(), 1);
    assert_eq!(events[0].verdict, Verdict::Premature);
    assert_eq!(events[0].client, "header:alice");
    assert_eq!(events[0].url, url);
    assert!(events[0].by > Duration::from_secs(29) && events[0].by <= Duration::from_secs(30));
    handle.shutdown();
}

#[tokio::test]
async fn a_retry_after_the_permitted_time_is_compliant_and_forwarded() {
    let upstream = TestServer::start().await;
    upstream.script("/items", [Reply::too_many_requests("0")]);
    let judge = stage(KeyMode::default());
    let (addr, handle) = proxy(judge.clone()).await;
    let url = upstream.url("/items");

    assert_eq!(get(addr, &url, "alice").await.status(), 429);
    assert_eq!(get(addr, &url, "alice").await.status(), 200);
    assert_eq!(upstream.requests_to("/items").len(), 2);
    let events = judge.events();
    assert_eq!(events.len(), 1);
    assert_eq!(events[0].verdict, Verdict::Compliant);
    handle.shutdown();
}

#[tokio::test]
async fn clients_have_their_own_windows_unless_keyed_by_host() {
    let upstream = TestServer::start().await;
    upstream.script("/a", [Reply::unavailable("30"), Reply::unavailable("30")]);
    let url = upstream.url("/a");

    let judge = stage(KeyMode::default());
    let (addr, handle) = proxy(judge.clone()).await;
    assert_eq!(get(addr, &url, "alice").await.status(), 503);
    assert_eq!(
        get(addr, &url, "bob").await.status(),
        503,
        "bob was never throttled"
    );
    handle.shutdown();

    let upstream = TestServer::start().await;
    upstream.script("/a", [Reply::unavailable("30")]);
    let url = upstream.url("/a");
    let judge = stage(KeyMode::Host);
    let (addr, handle) = proxy(judge.clone()).await;
    assert_eq!(get(addr, &url, "alice").await.status(), 503);
    assert_eq!(
        get(addr, &url, "bob").await.status(),
        429,
        "one window per host"
    );
    assert_eq!(judge.events()[0].client, "header:bob");
    handle.shutdown();
}

#[tokio::test]
async fn a_date_hint_is_judged_against_the_date_sent_with_it() {
    let upstream = TestServer::start().await;
    // The upstream's clock is an hour fast; its date still means "30 s from now".
    let server_now = TokioClock.wall_now() + Duration::from_secs(3600);
    upstream.script(
        "/d",
        [Reply::status(503)
            .date(server_now)
            .retry_after_date(server_now + Duration::from_secs(30))],
    );
    let judge = stage(KeyMode::default());
    let (addr, handle) = proxy(judge.clone()).await;
    let url = upstream.url("/d");
    assert_eq!(get(addr, &url, "alice").await.status(), 503);
    let retry = get(addr, &url, "alice").await;
    assert_eq!(retry.status(), 429);
    let wait: u64 = retry.headers()["retry-after"]
        .to_str()
        .expect("ascii")
        .parse()
        .expect("secs");
    assert!(
        (29..=31).contains(&wait),
        "judged against Date, not our clock: {wait}"
    );
    handle.shutdown();
}
