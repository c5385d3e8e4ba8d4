//! `holdoff proxy --control-port 0 --metrics-port 0`: the control API and the metrics, read
//! with curl while the proxy runs; and `GET /verdicts` under `holdoff run --control-port 0`,
//! read by the command it runs.

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

/// Two requests in one curl, the second at once, then the control API asked, all under
/// `holdoff run`, which names the API to its command. curl's pid comes first.
const EARLY_THEN_ASK: &str = r#"
curl -s -o /dev/null -o /dev/null http://api.example.invalid/v1/items http://api.example.invalid/v1/items &
pid=$!
wait $pid
echo "$pid"
curl -s --noproxy '*' "$HOLDOFF_CONTROL_URL/verdicts"
curl -s --noproxy '*' "$HOLDOFF_CONTROL_URL/verdicts?since=2"
"#;

#[test]
fn verdicts_name_the_process_that_retried_early_as_soon_as_its_call_returns() {
    let output = Command::new(assert_cmd::cargo::cargo_bin("holdoff"))
        .args(["run", "--control-port", "0", "-f", "100", "--seed", "1"])
        .args(["--log-level", "warn", "--", "sh", "-c", EARLY_THEN_ASK])
        .stdin(std::process::Stdio::null())
        .output()
        .expect("run holdoff");
    let shown = support::show(&output);
    assert_eq!(output.status.code(), Some(3), "{shown}");
    let out = String::from_utf8_lossy(&output.stdout);
    let (pid, answers) = out.split_once('\n').expect("curl's pid, then the answers");
    let pid: u64 = pid.trim().parse().expect("curl's pid");
    let mut answers = serde_json::Deserializer::from_str(answers).into_iter::<serde_json::Value>();
    let all = answers.next().expect("the first answer").expect("JSON");
    assert_eq!(all["next"], 2, "{all}");
    assert_eq!(all["missed"], 0, "{all}");
    let verdict = &all["verdicts"][0];
    assert_eq!(verdict["seq"], 1, "{all}");
    assert_eq!(verdict["kind"], "premature", "{all}");
    assert_eq!(verdict["fails"], true, "{all}");
    assert_eq!(verdict["pid"], pid, "{all}");
    assert_eq!(verdict["client"], format!("process:curl[{pid}]"), "{all}");
    assert_eq!(
        verdict["url"], "http://api.example.invalid/v1/items",
        "{all}"
    );
    let why = verdict["why"].as_str().expect("the judge's sentence");
    assert!(
        why.starts_with("retried ") && why.contains("a 429"),
        "{all}"
    );
    let judged_by = verdict["judged_by"]
        .as_str()
        .expect("how the hint was read");
    assert!(judged_by.starts_with("`Retry-After: "), "{all}");
    let since = answers.next().expect("the second answer").expect("JSON");
    assert_eq!(
        since,
        serde_json::json!({"next": 2, "missed": 0, "verdicts": []})
    );
}
