//! `holdoff proxy` with its control API and metrics: neither is reachable through the proxy,
//! so a client under test cannot pause the recording of its own retries.

mod support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::Command;
use std::time::Duration;

use support::Serving;

/// Sends `request` to `proxy` (`host:port`) and reads the answer to its end.
fn exchange(proxy: &str, request: &str) -> String {
    let mut stream = TcpStream::connect(proxy).expect("connect to the proxy");
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .expect("a read timeout");
    stream.write_all(request.as_bytes()).expect("send");
    let mut answer = Vec::new();
    let _ = stream.read_to_end(&mut answer);
    String::from_utf8_lossy(&answer).into_owned()
}

/// `curl -s [-X METHOD] URL`, straight to the URL: the body.
fn curl(method: &str, url: &str) -> String {
    let output = Command::new("curl")
        .args(["-s", "--noproxy", "*", "-X", method, url])
        .output()
        .expect("curl is needed for these tests: run ./scripts/test, which installs it");
    String::from_utf8_lossy(&output.stdout).into_owned()
}

#[test]
fn the_control_api_and_the_metrics_cannot_be_reached_through_the_proxy() {
    let serving = Serving::start(&["--pass-through"]);
    let address = |url: &str| url.trim_start_matches("http://").to_owned();
    let (proxy, control, metrics) = (
        address(&serving.proxy),
        address(&serving.control),
        address(&serving.metrics),
    );

    let pause = format!(
        "POST http://{control}/recording/stop HTTP/1.1\r\nHost: {control}\r\n\
         Content-Length: 0\r\nConnection: close\r\n\r\n"
    );
    let refused = exchange(&proxy, &pause);
    assert!(refused.starts_with("HTTP/1.1 508"), "{refused}");
    assert!(refused.contains("holdoff: "), "{refused}");
    let status: serde_json::Value =
        serde_json::from_str(&curl("GET", &format!("http://{control}/status")))
            .expect("JSON status");
    assert_eq!(status["recording"], true, "still recording: {status}");

    for target in [&control, &metrics, &proxy] {
        let connect =
            format!("CONNECT {target} HTTP/1.1\r\nHost: {target}\r\nConnection: close\r\n\r\n");
        let refused = exchange(&proxy, &connect);
        assert!(refused.starts_with("HTTP/1.1 508"), "{target}: {refused}");
    }
    let scrape = format!(
        "GET http://{metrics}/metrics HTTP/1.1\r\nHost: {metrics}\r\nConnection: close\r\n\r\n"
    );
    assert!(exchange(&proxy, &scrape).starts_with("HTTP/1.1 508"));
}
