//! `holdoff proxy --control-port 0 --metrics-port 0`: the control API and the metrics, read
//! with curl while the proxy runs.

mod support;

use std::process::Command;

use holdoff_testkit::{Reply, TestServer};
use support::{Serving, runtime};

/// `curl -s [-X METHOD] URL`: the body.
fn get(method: &str, url: &str) -> String {
    let output = Command::new("curl")
        .args(["-s", "-X", method, url])
        .output()
        .expect("curl is needed for these tests: run ./scripts/test, which installs it");
    String::from_utf8_lossy(&output.stdout).into_owned()
}

#[test]
fn the_control_api_and_the_metrics_describe_the_running_proxy() {
    let rt = runtime();
    let upstream = rt.block_on(TestServer::start());
    upstream.script("/api", [Reply::too_many_requests("60")]);
    let upstream_url = format!("http://{}", upstream.addr());
    let serving = Serving::start(&["--pass-through", "--upstream", &upstream_url]);
    let (proxy, control, metrics) = (&serving.proxy, &serving.control, &serving.metrics);

    // Pass-through: no judge, so the upstream's 429 opens no window.
    assert!(get("GET", &format!("{proxy}/api")).is_empty());
    get("GET", &format!("{proxy}/other"));

    let status: serde_json::Value =
        serde_json::from_str(&get("GET", &format!("{control}/status"))).expect("JSON status");
    assert_eq!(status["requests"], 2, "{status}");
    assert_eq!(status["recording"], true, "{status}");
    let stopped: serde_json::Value =
        serde_json::from_str(&get("POST", &format!("{control}/recording/stop"))).expect("JSON");
    assert_eq!(stopped["recording"], false, "{stopped}");
    assert!(get("GET", &format!("{control}/ca.pem")).contains("no CA"));

    let scrape = get("GET", &format!("{metrics}/metrics"));
    assert!(
        scrape.contains("holdoff_responses_total{class=\"4xx\"} 1"),
        "{scrape}"
    );
    assert!(
        scrape.contains("holdoff_responses_total{class=\"2xx\"} 1"),
        "{scrape}"
    );
}
