//! The judge in `holdoff proxy`, with curl as the client: an immediate retry is caught and
//! answered without reaching the upstream; `curl --retry`, which honours `Retry-After`, is
//! judged compliant. The summary on exit says which.

mod support;

use holdoff_testkit::{Reply, TestServer};
use support::{Proxy, curl, runtime};

#[test]
fn an_immediate_curl_retry_is_premature_and_not_forwarded() {
    let rt = runtime();
    let upstream = rt.block_on(TestServer::start());
    upstream.script("/api", [Reply::unavailable("30")]);
    let url = upstream.url("/api");
    // Each curl below is a process of its own, and so a client of its own by default: by
    // address, they are one client retrying.
    let proxy = Proxy::start(&["--client-id", "peer"]);

    assert_eq!(curl(proxy.addr, &[], &url), "503");
    assert_eq!(curl(proxy.addr, &[], &url), "429");
    assert_eq!(curl(proxy.addr, &[], &url), "429");
    assert_eq!(
        upstream.requests_to("/api").len(),
        1,
        "premature retries never reach it"
    );

    let stderr = proxy.stop();
    assert!(
        stderr.contains("holdoff judge: 2 premature and 0 compliant retries."),
        "{stderr}"
    );
    // Among the worst offenders of the summary: `CLIENT  GET URL  … early`.
    assert!(
        stderr
            .lines()
            .any(|line| line.contains(&format!("GET {url} ")) && line.contains(" early")),
        "{stderr}"
    );
}

#[test]
fn curl_retry_honours_retry_after_and_is_compliant() {
    let rt = runtime();
    let upstream = rt.block_on(TestServer::start());
    // curl --retry waits as long as Retry-After says (1 s here), then retries.
    upstream.script("/api", [Reply::unavailable("1")]);
    let url = upstream.url("/api");
    let proxy = Proxy::start(&[]);

    assert_eq!(curl(proxy.addr, &["--retry", "3"], &url), "200");
    let requests = upstream.requests_to("/api");
    assert_eq!(requests.len(), 2);

    let stderr = proxy.stop();
    assert!(
        stderr.contains("holdoff judge: 0 premature and 1 compliant retry."),
        "{stderr}"
    );
}

/// Issue 37: long hints on many distinct URLs fill the judge no further than its cap; the
/// windows dropped are counted as not judged in the summary and the JSON report.
#[test]
fn windows_past_the_cap_are_dropped_and_reported_as_not_judged() {
    let rt = support::runtime();
    let upstream = rt.block_on(holdoff_testkit::TestServer::start());
    let dir = support::TempDir::new("max-windows");
    let report = dir.join("report.json");
    let report_arg = report.display().to_string();
    let proxy = support::Proxy::start(&[
        "--preset",
        "throttle",
        "-f",
        "100",
        "-u",
        "http://127.0.0.1:*/*",
        "--judge-max-windows",
        "32",
        "--report-json",
        &report_arg,
    ]);
    for i in 0..100 {
        let status = support::curl(proxy.addr, &[], &upstream.url(&format!("/item/{i}")));
        assert_eq!(status, "429", "request {i}");
    }
    let stderr = proxy.stop();
    let json = support::json_report(&report);
    let evicted = json["evicted_windows"].as_u64().unwrap_or(0);
    // 32 windows, a quarter more a shard for keys that crowd one: at most 64 open.
    assert!(evicted >= 36, "{evicted} evicted: {json:#}");
    assert!(
        stderr.contains(&format!("not judged: {evicted} judge windows were evicted")),
        "{stderr}"
    );
}
