//! The judge against real clients nobody here wrote (issue 15): Python's requests and
//! urllib3, openai-python, curl, Java's HttpClient, axios with axios-retry. Each runs under
//! `holdoff run -f 0` (no faults injected) against a loopback upstream that throttles by
//! itself, so the judge reads the upstream's own 429s — the way DESIGN's "How the judge reads a
//! hint" says: a date hint by its most lenient reading, `Retry-After` before reset-style
//! headers, and a malformed hint as a minimum backoff, never as zero.
//!
//! The clients come from scripts/test, which installs them under `target/`.

mod support;

#[path = "real_clients/clients.rs"]
mod clients;
#[path = "real_clients/upstream.rs"]
mod upstream;

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, SystemTime};

use serde_json::Value;
use support::TempDir;
use upstream::{Headers, MODELS, Scheme, Upstream, date_hint};

/// One `holdoff run` of a client: what it printed and how it exited, and the JSON report.
struct Run {
    output: Output,
    report: Value,
}

impl Run {
    /// Runs `client…` under `holdoff run -f 0`, watching every loopback URL, trusting the
    /// upstream's CA, with `env` set for the client. The report is read back as JSON.
    fn new(name: &str, upstream: &Upstream, client: &[&str], env: &[(&str, &str)]) -> Run {
        let dir = TempDir::new(name);
        let report = dir.path().join("report.json");
        let mut command = Command::new(assert_cmd::cargo::cargo_bin("holdoff"));
        command
            .args(["run", "--log-level", "warn", "-f", "0"])
            .args(["-u", "http://127.0.0.1:*/*", "-u", "https://127.0.0.1:*/*"])
            .arg("--report-json")
            .arg(&report);
        if let Some(ca) = upstream.ca() {
            command.arg("--upstream-ca").arg(ca);
        }
        let output = command
            .arg("--")
            .args(client)
            .envs(env.iter().copied())
            .current_dir(dir.path())
            .stdin(Stdio::null())
            .output()
            .expect("run holdoff");
        let report = json_report(&report, &output);
        Run { output, report }
    }

    fn code(&self) -> Option<i32> {
        self.output.status.code()
    }

    fn stdout(&self) -> String {
        String::from_utf8_lossy(&self.output.stdout).into_owned()
    }

    /// Everything about the run, for assertion messages.
    fn show(&self) -> String {
        format!(
            "{}\nstdout:\n{}\nstderr:\n{}\nreport:\n{:#}",
            self.output.status,
            self.stdout(),
            String::from_utf8_lossy(&self.output.stderr),
            self.report
        )
    }

    /// The client printed `expected` (and a newline), and nothing else.
    fn assert_printed(&self, expected: &str) {
        assert_eq!(self.stdout().trim_end(), expected, "{}", self.show());
    }

    /// The run passed with no premature retry and at least one compliant one, and the
    /// client's retry reached the upstream, which saw the throttled request and the retry.
    fn assert_compliant(&self, upstream: &Upstream) {
        assert_eq!(self.code(), Some(0), "{}", self.show());
        assert_eq!(self.report["verdict"], "pass", "{}", self.show());
        assert_eq!(self.report["retries"]["premature"], 0, "{}", self.show());
        assert!(
            self.report["retries"]["compliant"].as_u64() >= Some(1),
            "{}",
            self.show()
        );
        assert_eq!(
            self.report["violations"].as_array().map(Vec::len),
            Some(0),
            "{}",
            self.show()
        );
        assert_eq!(upstream.requests(), 2, "{}", self.show());
    }
}

/// The JSON report at `path`.
fn json_report(path: &Path, output: &Output) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|err| {
        panic!(
            "read the JSON report {}: {err}\n{}\nstderr:\n{}",
            path.display(),
            output.status,
            String::from_utf8_lossy(&output.stderr)
        )
    });
    serde_json::from_str(&text).unwrap_or_else(|err| panic!("parse the JSON report: {err}\n{text}"))
}

/// How far ahead of the upstream's `Date` the HTTP-date hints are.
const DATE_AHEAD: Duration = Duration::from_secs(2);

/// requests on a Session with urllib3's Retry mounted, honouring Retry-After (its date form:
/// the date minus the local clock). requests finds the proxy (HTTP(S)_PROXY) and the CA
/// bundle (REQUESTS_CA_BUNDLE) in the environment itself.
const REQUESTS_CLIENT: &str = r#"
import sys
import requests
from requests.adapters import HTTPAdapter
from urllib3.util.retry import Retry

retry = Retry(total=3, status_forcelist=[429], respect_retry_after_header=True)
session = requests.Session()
session.mount("http://", HTTPAdapter(max_retries=retry))
session.mount("https://", HTTPAdapter(max_retries=retry))
response = session.get(sys.argv[1], timeout=30)
print(response.status_code, response.text)
"#;

#[test]
fn requests_with_urllib3_retry_waits_for_an_http_date_over_https() {
    let upstream = Upstream::start(Scheme::Https, date_hint(DATE_AHEAD));
    let python = clients::python();
    let url = upstream.url("/api");
    let run = Run::new(
        "real-requests",
        &upstream,
        &[&python, "-c", REQUESTS_CLIENT, &url],
        &[],
    );
    run.assert_compliant(&upstream);
    run.assert_printed(&format!("200 {MODELS}"));
}

/// openai-python, whose client retries 429s itself. It reads `retry-after-ms`, then
/// `retry-after` as (float) seconds, then as an HTTP-date minus the local clock — and uses a
/// hint only when it is within (0, 60] s (else its own backoff, 0.5 s doubling to 8 s, ×0.75–1
/// jitter). httpx, under it, finds the proxy and SSL_CERT_FILE in the environment.
const OPENAI_CLIENT: &str = r#"
import sys
import openai

client = openai.OpenAI(base_url=sys.argv[1] + "/v1", api_key="test", max_retries=2)
models = client.models.list()
print(200, " ".join(model.id for model in models.data))
"#;

#[test]
fn openai_python_waits_for_an_http_date_over_https() {
    let upstream = Upstream::start(Scheme::Https, date_hint(DATE_AHEAD));
    let python = clients::python();
    let base = upstream.url("");
    let run = Run::new(
        "real-openai",
        &upstream,
        &[&python, "-c", OPENAI_CLIENT, &base],
        &[],
    );
    run.assert_compliant(&upstream);
    run.assert_printed("200 holdoff-test");
}

#[test]
fn curl_retry_waits_for_an_http_date() {
    let upstream = Upstream::start(Scheme::Http, date_hint(DATE_AHEAD));
    let dir = TempDir::new("real-curl-body");
    // A file, not /dev/null: curl truncates its output before a retry.
    let body = dir.path().join("body").display().to_string();
    let url = upstream.url("/api");
    let run = Run::new(
        "real-curl",
        &upstream,
        &["curl", "-sS", "--retry", "2", "-o", &body, &url],
        &[],
    );
    run.assert_compliant(&upstream);
    assert_eq!(std::fs::read_to_string(&body).unwrap_or_default(), MODELS);
}

#[test]
fn java_httpclient_sleeping_until_the_http_date_is_compliant() {
    let upstream = Upstream::start(Scheme::Http, date_hint(DATE_AHEAD));
    let classes = clients::java_client();
    let url = upstream.url("/api");
    let run = Run::new(
        "real-java",
        &upstream,
        &["java", "-cp", &classes, "RetryAfterClient", &url],
        &[],
    );
    run.assert_compliant(&upstream);
    run.assert_printed(&format!("200 {MODELS}"));
}

/// http.client through the proxy, retrying 1.5 s before the HTTP-date the upstream named.
const EARLY_CLIENT: &str = r#"
import email.utils, http.client, os, sys, time
from urllib.parse import urlsplit

proxy = urlsplit(os.environ["HTTP_PROXY"])

def get(url):
    connection = http.client.HTTPConnection(proxy.hostname, proxy.port, timeout=30)
    connection.request("GET", url)
    response = connection.getresponse()
    response.read()
    connection.close()
    return response

first = get(sys.argv[1])
assert first.status == 429, first.status
date = email.utils.parsedate_to_datetime(first.getheader("Retry-After")).timestamp()
time.sleep(max(0.0, date - 1.5 - time.time()))
print(get(sys.argv[1]).status)
"#;

/// 1.5 s before the date is early under every reading of it: the most lenient permits a retry
/// 1 s (date − Date − 1 s) after receipt, and the client comes at most 0.5 s after receipt.
#[test]
fn a_client_retrying_one_and_a_half_seconds_before_the_date_is_caught() {
    let upstream = Upstream::start(Scheme::Http, date_hint(DATE_AHEAD));
    let python = clients::python();
    let url = upstream.url("/api");
    let run = Run::new(
        "real-early",
        &upstream,
        &[&python, "-c", EARLY_CLIENT, &url],
        &[],
    );

    assert_eq!(run.code(), Some(3), "{}", run.show());
    // The judge answered the retry itself.
    run.assert_printed("429");
    assert_eq!(
        upstream.requests(),
        1,
        "the retry never reached the upstream"
    );
    assert_eq!(run.report["verdict"], "fail", "{}", run.show());
    assert_eq!(run.report["retries"]["premature"], 1, "{}", run.show());
    let violation = &run.report["violations"][0];
    assert_eq!(violation["url"], url.as_str(), "{}", run.show());
    let early = violation["early_by_ms"].as_f64().unwrap_or(0.0);
    assert!(early > 0.0, "early_by_ms: {}", run.show());
}

/// urllib3 honouring Retry-After and nothing else. One retry only: a judge that wrongly held
/// it to the 100 s reset would answer that retry with a 429 of its own, and a second retry
/// would wait out its 99 s.
const URLLIB3_CLIENT: &str = r#"
import os, sys, urllib3
from urllib3.util.retry import Retry

retry = Retry(total=1, status_forcelist=[429], respect_retry_after_header=True)
http = urllib3.ProxyManager(os.environ["HTTP_PROXY"], retries=retry)
response = http.request("GET", sys.argv[1])
print(response.status, response.data.decode())
"#;

/// A GitHub-style 429: `Retry-After: 1` beside reset headers that say 100 s. The IETF
/// RateLimit draft, and DESIGN, let `Retry-After` decide.
#[test]
fn retry_after_takes_precedence_over_reset_headers() {
    let upstream = Upstream::start(Scheme::Http, |now: SystemTime| {
        let epoch = now
            .duration_since(SystemTime::UNIX_EPOCH)
            .expect("after 1970")
            .as_secs();
        vec![
            ("retry-after", "1".to_owned()),
            ("ratelimit", r#""default";r=0;t=100"#.to_owned()),
            ("ratelimit-limit", "10".to_owned()),
            ("ratelimit-remaining", "0".to_owned()),
            ("ratelimit-reset", "100".to_owned()),
            ("x-ratelimit-limit", "10".to_owned()),
            ("x-ratelimit-remaining", "0".to_owned()),
            ("x-ratelimit-reset", (epoch + 100).to_string()),
        ]
    });
    let python = clients::python();
    let url = upstream.url("/api");
    let run = Run::new(
        "real-precedence",
        &upstream,
        &[&python, "-c", URLLIB3_CLIENT, &url],
        &[],
    );
    run.assert_compliant(&upstream);
    run.assert_printed(&format!("200 {MODELS}"));
}

/// axios with axios-retry on 429s, its delay chosen by argv[2]: `none` is axios-retry's
/// default (the Retry-After if it parses, else no delay at all), `exponential` its
/// exponentialDelay (at least 200 ms on the first retry). axios finds HTTP_PROXY itself.
const AXIOS_CLIENT: &str = r#"
const axios = require("axios");
const axiosRetry = require("axios-retry").default;
const [url, delay] = process.argv.slice(1);
const retryDelay = delay === "exponential" ? axiosRetry.exponentialDelay : undefined;
axiosRetry(axios, { retries: 2, ...(retryDelay && { retryDelay }) });
axios.get(url).then(
  (response) => console.log(response.status, JSON.stringify(response.data)),
  (error) => {
    console.error(error.message);
    process.exitCode = 1;
  },
);
"#;

/// A 429 whose `Retry-After` cannot be read.
fn malformed_hint(_: SystemTime) -> Headers {
    vec![("retry-after", "soon".to_owned())]
}

/// Each violation's kind (`premature`, `read_as_zero`, …).
fn violation_kinds(report: &Value) -> Vec<&str> {
    report["violations"]
        .as_array()
        .map(|violations| {
            violations
                .iter()
                .filter_map(|v| v["kind"].as_str())
                .collect()
        })
        .unwrap_or_default()
}

/// axios-retry reads `Retry-After: soon` as no delay and retries at once: the hammer a
/// malformed hint must not hide.
#[test]
fn axios_retry_reading_a_malformed_hint_as_zero_fails_the_run() {
    let upstream = Upstream::start(Scheme::Http, malformed_hint);
    let modules = clients::node_modules();
    let url = upstream.url("/api");
    let run = Run::new(
        "real-axios-hammer",
        &upstream,
        &["node", "-e", AXIOS_CLIENT, &url, "none"],
        &[("NODE_PATH", &modules)],
    );

    assert_eq!(run.code(), Some(3), "{}", run.show());
    assert_eq!(run.report["verdict"], "fail", "{}", run.show());
    let kinds = violation_kinds(&run.report);
    assert!(
        kinds.contains(&"read_as_zero"),
        "a read_as_zero violation, in {kinds:?}: {}",
        run.show()
    );
}

#[test]
fn axios_retry_backing_off_after_a_malformed_hint_passes() {
    let upstream = Upstream::start(Scheme::Http, malformed_hint);
    let modules = clients::node_modules();
    let url = upstream.url("/api");
    let run = Run::new(
        "real-axios-backoff",
        &upstream,
        &["node", "-e", AXIOS_CLIENT, &url, "exponential"],
        &[("NODE_PATH", &modules)],
    );
    run.assert_compliant(&upstream);
    run.assert_printed(&format!("200 {MODELS}"));
}
