//! The judge inside the real proxy: hints from a real upstream open windows, and a retry that
//! comes too early is answered 429 without reaching the upstream.

mod support;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use holdoff::clock::{Clock, TokioClock};
use holdoff_proxy::JudgeStage;
use holdoff_proxy::judge::{Judge, KeyMode, Verdict};
use holdoff_proxy::report::{Event, HintKind, Recorder, Report};
use holdoff_testkit::{Reply, TestServer};
use support::get_as as get;

async fn proxy(judge: Arc<JudgeStage>) -> (SocketAddr, holdoff_proxy::ShutdownHandle) {
    support::in_process(vec![judge]).await
}

fn stage(mode: KeyMode) -> Arc<JudgeStage> {
    Arc::new(JudgeStage::new(
        Arc::new(Judge::new(mode, TokioClock.now())),
        Arc::new(TokioClock),
    ))
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
    let by = events[0].by.expect("a bounded window");
    assert!(by > Duration::from_secs(29) && by <= Duration::from_secs(30));
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
async fn a_retry_records_whether_it_carried_an_idempotency_key() {
    let upstream = TestServer::start().await;
    upstream.script("/jobs", [Reply::unavailable("0"), Reply::unavailable("0")]);
    let judge = stage(KeyMode::default());
    let (addr, handle) = proxy(judge.clone()).await;
    let url = upstream.url("/jobs");
    let post = |key: Option<&str>| {
        let mut request = http::Request::post(&url)
            .header(http::header::HOST, upstream.addr().to_string())
            .header("x-holdoff-client", "alice");
        if let Some(key) = key {
            request = request.header("Idempotency-Key", key);
        }
        request
            .body(http_body_util::Full::new(bytes::Bytes::new()))
            .expect("request")
    };

    assert_eq!(support::send(addr, post(None)).await.status(), 503);
    assert_eq!(support::send(addr, post(None)).await.status(), 503);
    assert_eq!(support::send(addr, post(Some("k1"))).await.status(), 200);
    let keyed: Vec<bool> = judge.events().iter().map(|e| e.idempotency_key).collect();
    assert_eq!(keyed, [false, true]);
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

/// The `Retry-After` of the judge's own answer, in seconds.
fn judged_wait(response: &http::Response<bytes::Bytes>) -> u64 {
    response.headers()["retry-after"]
        .to_str()
        .expect("ascii")
        .parse()
        .expect("secs")
}

/// A recorder and the event log it writes in a folder of its own.
struct Recording {
    recorder: Arc<Recorder>,
    log: std::path::PathBuf,
    _dir: holdoff_testkit::TempDir,
}

/// A stage recording its throttles, and the recording.
fn recording_stage() -> (Arc<JudgeStage>, Recording) {
    let dir = holdoff_testkit::TempDir::new("judge-recording");
    let log = dir.path().join("events.jsonl");
    let recorder = Arc::new(Recorder::new(Some(&log)).expect("the event log"));
    let judge = Judge::new(KeyMode::default(), TokioClock.now());
    let stage =
        JudgeStage::new(Arc::new(judge), Arc::new(TokioClock)).with_recorder(recorder.clone());
    let recording = Recording {
        recorder,
        log,
        _dir: dir,
    };
    (Arc::new(stage), recording)
}

/// The recorded throttles: `(status, hint, header, reading)`.
fn throttles(recording: &Recording) -> Vec<(u16, HintKind, Option<String>, Option<String>)> {
    recording.recorder.flush();
    Report::read_log(&recording.log)
        .expect("the event log")
        .into_iter()
        .filter_map(|event| match event {
            Event::Throttle {
                status,
                hint,
                header,
                reading,
                ..
            } => Some((status, hint, header, reading)),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn a_date_against_a_whole_second_date_is_judged_by_its_earliest_reading() {
    let upstream = TestServer::start().await;
    // A real server: `Date` is its clock truncated to the second, the hint two seconds on.
    // Its clock was anywhere in [Date, Date + 1 s): a retry as soon as 1 s after the
    // response can be exactly on time.
    let now = TokioClock.wall_now();
    let since_epoch = now
        .duration_since(std::time::UNIX_EPOCH)
        .expect("after 1970");
    let date = std::time::UNIX_EPOCH + Duration::from_secs(since_epoch.as_secs());
    upstream.script(
        "/d",
        [Reply::status(429)
            .date(date)
            .retry_after_date(date + Duration::from_secs(2))],
    );
    let (judge, recorder) = recording_stage();
    let (addr, handle) = proxy(judge.clone()).await;
    let url = upstream.url("/d");
    assert_eq!(get(addr, &url, "alice").await.status(), 429);
    let retry = get(addr, &url, "alice").await;
    assert_eq!(retry.status(), 429, "still early under every reading");
    assert_eq!(judged_wait(&retry), 1, "Date + 2 s − (Date + 1 s), not 2 s");
    let by = judge.events()[0].by.expect("bounded");
    assert!(by <= Duration::from_secs(1), "{by:?}");
    let found = throttles(&recorder);
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].1, HintKind::Usable);
    assert_eq!(found[0].2.as_deref(), Some("retry-after"));
    assert!(
        found[0]
            .3
            .as_deref()
            .is_some_and(|r| r.contains("Date − 1 s")),
        "{:?}",
        found[0].3
    );
    handle.shutdown();
}

#[tokio::test]
async fn retry_after_takes_precedence_over_a_longer_reset() {
    let upstream = TestServer::start().await;
    upstream.script(
        "/p",
        [Reply::too_many_requests("1").header("ratelimit-reset", "100")],
    );
    let (judge, recorder) = recording_stage();
    let (addr, handle) = proxy(judge.clone()).await;
    let url = upstream.url("/p");
    assert_eq!(get(addr, &url, "alice").await.status(), 429);
    let retry = get(addr, &url, "alice").await;
    assert_eq!(
        judged_wait(&retry),
        1,
        "Retry-After decides, not RateLimit-Reset"
    );
    assert_eq!(throttles(&recorder)[0].2.as_deref(), Some("retry-after"));
    handle.shutdown();
}

#[tokio::test]
async fn a_reset_decides_when_no_retry_after_is_sent() {
    let upstream = TestServer::start().await;
    upstream.script("/r", [Reply::status(429).header("ratelimit-reset", "40")]);
    let (judge, recorder) = recording_stage();
    let (addr, handle) = proxy(judge.clone()).await;
    let url = upstream.url("/r");
    assert_eq!(get(addr, &url, "alice").await.status(), 429);
    let retry = get(addr, &url, "alice").await;
    assert!((39..=40).contains(&judged_wait(&retry)));
    assert_eq!(
        throttles(&recorder)[0].2.as_deref(),
        Some("ratelimit-reset")
    );
    handle.shutdown();
}

#[tokio::test]
async fn an_aws_millisecond_hint_opens_a_window_and_is_named() {
    let upstream = TestServer::start().await;
    upstream.script(
        "/aws",
        [Reply::status(503).header("x-amz-retry-after", "3000")],
    );
    let (judge, recorder) = recording_stage();
    let (addr, handle) = proxy(judge.clone()).await;
    let url = upstream.url("/aws");
    assert_eq!(get(addr, &url, "alice").await.status(), 503);
    let retry = get(addr, &url, "alice").await;
    assert_eq!(retry.status(), 429, "answered by the judge");
    assert!((2..=3).contains(&judged_wait(&retry)));
    assert_eq!(
        throttles(&recorder)[0].2.as_deref(),
        Some("x-amz-retry-after")
    );
    handle.shutdown();
}

#[tokio::test]
async fn the_draft_11_ratelimit_field_decides_only_without_retry_after() {
    let upstream = TestServer::start().await;
    let policy = "\"minute\";q=10;w=60, \"day\";q=1000;w=86400";
    let state = "\"minute\";r=0;t=40, \"day\";r=990;t=80000";
    upstream.script(
        "/ietf",
        [Reply::status(429)
            .header("ratelimit-policy", policy)
            .header("ratelimit", state)],
    );
    upstream.script(
        "/both",
        [Reply::too_many_requests("2")
            .header("ratelimit-policy", policy)
            .header("ratelimit", state)],
    );
    let (judge, recorder) = recording_stage();
    let (addr, handle) = proxy(judge.clone()).await;
    for path in ["/ietf", "/both"] {
        let url = upstream.url(path);
        assert_eq!(get(addr, &url, "alice").await.status(), 429);
    }
    let ietf = get(addr, &upstream.url("/ietf"), "alice").await;
    assert!(
        (39..=40).contains(&judged_wait(&ietf)),
        "the exhausted policy's t"
    );
    let both = get(addr, &upstream.url("/both"), "alice").await;
    assert!((1..=2).contains(&judged_wait(&both)), "Retry-After decides");
    let sources: Vec<_> = throttles(&recorder)
        .into_iter()
        .map(|throttle| throttle.2)
        .collect();
    assert_eq!(
        sources,
        [Some("ratelimit".to_owned()), Some("retry-after".to_owned())]
    );
    handle.shutdown();
}

#[tokio::test]
async fn an_immediate_retry_after_a_malformed_hint_was_read_as_zero() {
    let upstream = TestServer::start().await;
    upstream.script("/m", [Reply::too_many_requests("soon")]);
    let (judge, recorder) = recording_stage();
    let (addr, handle) = proxy(judge.clone()).await;
    let url = upstream.url("/m");
    assert_eq!(get(addr, &url, "alice").await.status(), 429);
    let retry = get(addr, &url, "alice").await;
    assert_eq!(retry.status(), 429, "answered by the judge");
    assert_eq!(upstream.requests_to("/m").len(), 1, "not forwarded");
    assert_eq!(judge.events()[0].verdict, Verdict::ReadAsZero);
    assert_eq!(
        throttles(&recorder),
        [(
            429,
            HintKind::Malformed,
            Some("retry-after".to_owned()),
            throttles(&recorder)[0].3.clone()
        )]
    );
    assert_eq!(judge.judge().verdicts().too_soon, 1);
    handle.shutdown();
}

#[tokio::test]
async fn a_retry_after_the_minimum_backoff_is_compliant_after_a_malformed_hint() {
    let upstream = TestServer::start().await;
    upstream.script("/m", [Reply::too_many_requests("-1")]);
    let judge = JudgeStage::new(
        Arc::new(Judge::new(KeyMode::default(), TokioClock.now())),
        Arc::new(TokioClock),
    )
    .min_backoff(Duration::ZERO);
    let judge = Arc::new(judge);
    let (addr, handle) = proxy(judge.clone()).await;
    let url = upstream.url("/m");
    assert_eq!(get(addr, &url, "alice").await.status(), 429);
    assert_eq!(get(addr, &url, "alice").await.status(), 200);
    assert_eq!(judge.events()[0].verdict, Verdict::Compliant);
    handle.shutdown();
}

#[tokio::test]
async fn a_throttle_without_a_hint_is_counted_and_its_gap_measured() {
    let upstream = TestServer::start().await;
    upstream.script("/n", [Reply::status(503)]);
    let (judge, recorder) = recording_stage();
    let (addr, handle) = proxy(judge.clone()).await;
    let url = upstream.url("/n");
    assert_eq!(get(addr, &url, "alice").await.status(), 503);
    assert_eq!(
        get(addr, &url, "alice").await.status(),
        200,
        "forwarded: without a hint there is no wait to enforce"
    );
    let events = judge.events();
    assert_eq!(events.len(), 1);
    assert_eq!(events[0].verdict, Verdict::NoBackoff);
    let found = throttles(&recorder);
    assert_eq!((found[0].0, found[0].1), (503, HintKind::None));
    assert_eq!(found[0].2, None);
    handle.shutdown();
}

#[tokio::test]
async fn an_error_without_a_hint_other_than_429_or_503_is_no_throttle() {
    let upstream = TestServer::start().await;
    upstream.script("/e", [Reply::status(500)]);
    let (judge, recorder) = recording_stage();
    let (addr, handle) = proxy(judge.clone()).await;
    let url = upstream.url("/e");
    assert_eq!(get(addr, &url, "alice").await.status(), 500);
    assert_eq!(get(addr, &url, "alice").await.status(), 200);
    assert!(judge.events().is_empty());
    assert!(throttles(&recorder).is_empty());
    handle.shutdown();
}

#[tokio::test]
async fn a_hint_beyond_the_clock_opens_a_window_that_does_not_close() {
    let upstream = TestServer::start().await;
    upstream.script("/u", [Reply::too_many_requests("99999999999999999999999")]);
    let (judge, recorder) = recording_stage();
    let (addr, handle) = proxy(judge.clone()).await;
    let url = upstream.url("/u");
    assert_eq!(get(addr, &url, "alice").await.status(), 429);
    for _ in 0..2 {
        assert_eq!(get(addr, &url, "alice").await.status(), 429);
    }
    assert_eq!(upstream.requests_to("/u").len(), 1, "no retry reached it");
    let events = judge.events();
    assert_eq!(events.len(), 2);
    assert!(events.iter().all(|e| e.verdict == Verdict::Premature));
    assert!(
        events
            .iter()
            .all(|e| e.permitted_at.is_none() && e.by.is_none())
    );
    assert_eq!(throttles(&recorder)[0].1, HintKind::Unbounded);
    handle.shutdown();
}

/// The whole proxy on a manual clock, no real sleep: the server stamps each request, the judge
/// opens and checks windows, the metrics count uptime and the upkeep drops closed windows, all
/// by the one clock the pipeline was given.
#[tokio::test]
async fn the_whole_proxy_runs_on_the_pipelines_manual_clock() {
    use holdoff::clock::ManualClock;
    use holdoff_proxy::MetricsStage;
    use holdoff_proxy::Pipeline;
    use std::time::SystemTime;

    const S: Duration = Duration::from_secs(1);
    let upstream = TestServer::start().await;
    upstream.script("/items", [Reply::too_many_requests("120")]);
    upstream.script("/slow", [Reply::too_many_requests("3600")]);
    let manual = Arc::new(ManualClock::new(SystemTime::UNIX_EPOCH + 1_800_000_000 * S));
    let clock: Arc<dyn Clock> = manual.clone();
    let judge = Arc::new(JudgeStage::new(
        Arc::new(Judge::new(KeyMode::default(), clock.now()).retention(60 * S)),
        Arc::clone(&clock),
    ));
    let metrics = Arc::new(MetricsStage::new(Arc::clone(&clock)));
    let pipeline = Pipeline::builder(Arc::clone(&clock))
        .judge(judge.clone())
        .metrics(metrics.clone())
        .build();
    let proxy = support::InProcess::serve(support::InProcess::config(), pipeline, &[]).await;
    let (addr, handle, served) = (proxy.addr, proxy.handle, proxy.task);
    let url = upstream.url("/items");
    // Bob is told to wait an hour, and never comes back.
    assert_eq!(get(addr, &upstream.url("/slow"), "bob").await.status(), 429);

    // Alice's hint opens a window of exactly 120 s: the clock does not move on its own.
    assert_eq!(get(addr, &url, "alice").await.status(), 429);
    assert_eq!(get(addr, &url, "alice").await.status(), 429, "at once");
    manual.advance(119 * S);
    assert_eq!(
        get(addr, &url, "alice").await.status(),
        429,
        "a second early"
    );
    manual.advance(S);
    assert_eq!(get(addr, &url, "alice").await.status(), 200, "on time");
    assert_eq!(upstream.requests_to("/items").len(), 2);
    let verdicts: Vec<_> = judge
        .events()
        .iter()
        .map(|event| (event.verdict, event.by))
        .collect();
    assert_eq!(
        verdicts,
        [
            (Verdict::Premature, Some(120 * S)),
            (Verdict::Premature, Some(S)),
            (Verdict::Compliant, Some(Duration::ZERO)),
        ]
    );
    assert_eq!(metrics.uptime(), 120 * S);

    // The server's upkeep, on the same clock, drops Bob's window once its retention is over.
    assert_eq!(judge.judge().open_windows(), 1, "Bob's");
    manual.advance(3600 * S);
    for _ in 0..1_000 {
        if judge.judge().open_windows() == 0 {
            break;
        }
        tokio::task::yield_now().await;
    }
    assert_eq!(judge.judge().open_windows(), 0, "the upkeep ran at 3,720 s");

    handle.shutdown();
    let summary = served.await.expect("the proxy task");
    assert_eq!(summary.uptime, 3720 * S);
    assert_eq!(summary.requests, 5);
}

#[tokio::test]
async fn a_redirect_with_a_hint_opens_a_window_on_its_location() {
    let upstream = TestServer::start().await;
    upstream.script(
        "/old",
        [Reply::status(307)
            .header("location", "/new?page=1")
            .retry_after("30")],
    );
    upstream.set_default("/new", Reply::ok("moved"));
    let judge = stage(KeyMode::default());
    let (addr, handle) = proxy(judge.clone()).await;

    assert_eq!(
        get(addr, &upstream.url("/old"), "alice").await.status(),
        307
    );
    // Following at once is before the hint: premature, and not forwarded.
    let followed = get(addr, &upstream.url("/new?page=1"), "alice").await;
    assert_eq!(followed.status(), 429);
    assert!(upstream.requests_to("/new").is_empty());
    let events = judge.events();
    assert_eq!(events.len(), 1);
    assert_eq!(events[0].verdict, Verdict::Premature);
    assert_eq!(events[0].url, upstream.url("/new?page=1"));
    // Another URL is no follow of it.
    assert_eq!(
        get(addr, &upstream.url("/new"), "alice").await.status(),
        200
    );
    handle.shutdown();
}

#[tokio::test]
async fn a_redirect_without_a_hint_or_with_only_a_reset_opens_none() {
    let upstream = TestServer::start().await;
    upstream.script(
        "/old",
        [
            Reply::status(302).header("location", "/new"),
            Reply::status(302)
                .header("location", "/new")
                .header("x-ratelimit-remaining", "0")
                .header("x-ratelimit-reset", "4102444800"),
        ],
    );
    upstream.set_default("/new", Reply::ok("moved"));
    let judge = stage(KeyMode::default());
    let (addr, handle) = proxy(judge.clone()).await;
    for _ in 0..2 {
        assert_eq!(
            get(addr, &upstream.url("/old"), "alice").await.status(),
            302
        );
        assert_eq!(
            get(addr, &upstream.url("/new"), "alice").await.status(),
            200
        );
    }
    assert!(judge.events().is_empty());
    handle.shutdown();
}
