//! `holdoff run` and CONNECT tunnels: plain HTTP inside a tunnel (`curl --proxytunnel`,
//! undici's `EnvHttpProxyAgent`) is judged like any plain request, and a client that does not
//! trust the throwaway CA is a failure the run shows, never a pass.

mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use holdoff_testkit::tls::TestCa;
use holdoff_testkit::{Reply, TestServer};
use support::{TempDir, first_request_throttled, json_report, runtime, show};

/// Watches every plain-HTTP URL on loopback, whatever its port.
const WATCH: &str = "http://127.0.0.1:*/*";

/// `holdoff run --log-level warn ARGS…` in `dir` with `env`, waiting for it to exit.
fn holdoff_run(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    Command::new(assert_cmd::cargo::cargo_bin("holdoff"))
        .args(["run", "--log-level", "warn"])
        .args(args)
        .envs(env.iter().copied())
        .current_dir(dir)
        .stdin(Stdio::null())
        .output()
        .expect("run holdoff")
}

/// A plain-HTTP upstream answering `/api` with `200 hello`, and a directory with the config
/// throttling its first request for `seconds`, and where the JSON report goes.
struct Setup {
    upstream: TestServer,
    dir: TempDir,
    config: String,
    report: PathBuf,
}

fn setup(name: &str, seconds: u64) -> (tokio::runtime::Runtime, Setup) {
    let rt = runtime();
    let upstream = rt.block_on(TestServer::start());
    upstream.set_default("/api", Reply::ok("hello"));
    let dir = TempDir::new(name);
    let config = dir.write("holdoff.json", &first_request_throttled("http", seconds));
    let report = dir.path().join("report.json");
    let setup = Setup {
        upstream,
        dir,
        config,
        report,
    };
    (rt, setup)
}

impl Setup {
    /// `holdoff run -u WATCH -c CONFIG --report-json REPORT -- client…`.
    fn run(&self, client: &[&str], env: &[(&str, &str)]) -> Output {
        let report = self.report.display().to_string();
        let mut args = vec![
            "-u",
            WATCH,
            "-c",
            &self.config,
            "--report-json",
            &report,
            "--",
        ];
        args.extend_from_slice(client);
        holdoff_run(self.dir.path(), &args, env)
    }
}

#[test]
fn curl_proxytunnel_retrying_at_once_is_premature() {
    let (_rt, setup) = setup("tunnel-curl-premature", 30);
    let url = setup.upstream.url("/api");

    // One curl fetching the URL twice through one tunnel.
    let client = [
        "curl",
        "--proxytunnel",
        "-sS",
        "-w",
        "%{http_code} ",
        "-o",
        "/dev/null",
        "-o",
        "/dev/null",
        &url,
        &url,
    ];
    let output = setup.run(&client, &[]);

    assert_eq!(output.status.code(), Some(3), "{}", show(&output));
    assert_eq!(String::from_utf8_lossy(&output.stdout), "429 429 ");
    assert!(
        setup.upstream.requests().is_empty(),
        "the second 429 was the judge's: {}",
        show(&output)
    );
    let report = json_report(&setup.report);
    assert_eq!(report["verdict"], "fail", "{report:#}");
    assert_eq!(report["retries"]["premature"], 1, "{report:#}");
    assert_eq!(report["violations"][0]["url"], url.as_str(), "{report:#}");
}

/// h2c in a tunnel reaches the pipeline too: its one request is throttled by the mock, and
/// judged. (One request only: curl 7.88 fails to reuse an h2c connection through a tunnel,
/// before sending anything.)
#[test]
fn curl_proxytunnel_with_h2c_is_throttled_and_judged() {
    let (_rt, setup) = setup("tunnel-h2c", 30);
    let url = setup.upstream.url("/api");
    let client = [
        "curl",
        "--proxytunnel",
        "--http2-prior-knowledge",
        "-sS",
        "-w",
        "%{http_code} %{http_version}",
        "-o",
        "/dev/null",
        &url,
    ];
    let output = setup.run(&client, &[]);

    assert_eq!(output.status.code(), Some(0), "{}", show(&output));
    assert_eq!(String::from_utf8_lossy(&output.stdout), "429 2");
    let report = json_report(&setup.report);
    assert_eq!(report["throttled"], 1, "{report:#}");
    assert_eq!(report["requests"], 1, "{report:#}");
}

#[test]
fn curl_proxytunnel_waiting_is_compliant() {
    let (_rt, setup) = setup("tunnel-curl-compliant", 1);
    let url = setup.upstream.url("/api");
    let body = setup.dir.path().join("body").display().to_string();

    let client = [
        "curl",
        "--proxytunnel",
        "--retry",
        "3",
        "-sS",
        "-o",
        &body,
        &url,
    ];
    let output = setup.run(&client, &[]);

    assert_eq!(output.status.code(), Some(0), "{}", show(&output));
    assert_eq!(std::fs::read_to_string(&body).unwrap_or_default(), "hello");
    assert_eq!(setup.upstream.requests_to("/api").len(), 1);
    let report = json_report(&setup.report);
    assert_eq!(report["verdict"], "pass", "{report:#}");
    assert_eq!(report["retries"]["compliant"], 1, "{report:#}");
}

/// Node's fetch through undici's `EnvHttpProxyAgent`, which tunnels `http://` URLs too;
/// retrying a 429 after `Retry-After` seconds, or at once when the first argument says
/// `eager`.
const UNDICI_CLIENT: &str = r#"
const { setGlobalDispatcher, EnvHttpProxyAgent } = require(process.env.HOLDOFF_TEST_UNDICI);
setGlobalDispatcher(new EnvHttpProxyAgent());
(async () => {
  const [eager, url] = process.argv.slice(1);
  for (let attempt = 0; attempt < 4; attempt++) {
    const response = await fetch(url);
    const body = await response.text();
    if (response.status !== 429) {
      console.log(response.status, body);
      return;
    }
    const seconds = eager === "eager" ? 0 : Number(response.headers.get("retry-after"));
    await new Promise((resolve) => setTimeout(resolve, seconds * 1000));
  }
  console.log("gave up");
})().catch((err) => {
  console.error(err);
  process.exitCode = 1;
});
"#;

/// undici: where scripts/test installs it, or `HOLDOFF_TEST_UNDICI`.
fn undici() -> String {
    if let Ok(path) = std::env::var("HOLDOFF_TEST_UNDICI") {
        return path;
    }
    let path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/node-clients/node_modules/undici");
    assert!(
        path.is_dir(),
        "undici is not installed at {}: run ./scripts/test, which installs it (npm install \
         --prefix target/node-clients undici@6)",
        path.display()
    );
    path.display().to_string()
}

#[test]
fn undici_env_http_proxy_agent_over_a_tunnel_is_judged() {
    let undici = undici();
    let env = [("HOLDOFF_TEST_UNDICI", undici.as_str())];

    let (_rt, patient) = setup("tunnel-undici-compliant", 1);
    let url = patient.upstream.url("/api");
    let output = patient.run(&["node", "-e", UNDICI_CLIENT, "patient", &url], &env);
    assert_eq!(output.status.code(), Some(0), "{}", show(&output));
    assert_eq!(String::from_utf8_lossy(&output.stdout).trim(), "200 hello");
    let report = json_report(&patient.report);
    assert_eq!(report["retries"]["compliant"], 1, "{report:#}");

    let (_rt, eager) = setup("tunnel-undici-premature", 30);
    let url = eager.upstream.url("/api");
    let output = eager.run(&["node", "-e", UNDICI_CLIENT, "eager", &url], &env);
    assert_eq!(output.status.code(), Some(3), "{}", show(&output));
    let report = json_report(&eager.report);
    assert_eq!(report["verdict"], "fail", "{report:#}");
    assert!(
        report["retries"]["premature"].as_u64().unwrap_or(0) >= 1,
        "{report:#}"
    );
}

#[test]
fn a_client_that_does_not_trust_the_ca_is_seen_counted_and_never_a_pass() {
    let rt = runtime();
    let upstream = rt.block_on(TestServer::start());
    let dir = TempDir::new("tunnel-untrusted");
    let other = TestCa::new("not holdoff's CA");
    let other_ca = dir.write("other-ca.pem", other.pem());
    let report = dir.path().join("report.json");
    let report_arg = report.display().to_string();
    let url = format!("https://{}/api", upstream.addr());

    // The command itself succeeds: only holdoff can tell that nothing was tested.
    let script = format!("curl -sS -o /dev/null --cacert '{other_ca}' '{url}' || true");
    let output = holdoff_run(
        dir.path(),
        &[
            "-u",
            "https://127.0.0.1:*/*",
            "--report-json",
            &report_arg,
            "--allow-no-traffic",
            "--",
            "sh",
            "-c",
            &script,
        ],
        &[],
    );

    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(4), "{}", show(&output));
    let host = format!("127.0.0.1:{}", upstream.addr().port());
    assert!(
        stderr.contains(&format!("TLS handshake with the client for {host} failed")),
        "a warning names the host: {stderr}"
    );
    assert!(
        stderr.contains("does not trust holdoff's CA"),
        "and the likely cause: {stderr}"
    );
    assert!(
        stderr.contains("1 error (1 failed TLS interception)"),
        "the summary counts it: {stderr}"
    );
    assert!(!stderr.contains("PASS"), "{stderr}");
    assert!(
        stderr.contains("NOT TESTED: 1 TLS interception failed"),
        "{stderr}"
    );
    let report = json_report(&report);
    assert_eq!(report["verdict"], "not_tested", "{report:#}");
    assert_eq!(report["interception_failures"], 1, "{report:#}");
    assert!(upstream.requests().is_empty());
}

/// Two holdoff proxies on one machine (issue 37): a tunnel from one to the other is refused,
/// so that CONNECTs written into it cannot nest from one proxy to the other without end.
#[test]
fn a_tunnel_to_another_holdoff_proxy_is_refused_as_a_loop() {
    let home = support::TempDir::new("two-proxies");
    let start = || {
        support::Proxy::spawn(
            std::process::Command::new(assert_cmd::cargo::cargo_bin("holdoff"))
                .args([
                    "proxy",
                    "--port",
                    "0",
                    "--pass-through",
                    "--log-level",
                    "warn",
                ])
                .env("HOME", home.path())
                .stdin(std::process::Stdio::null()),
        )
    };
    let (first, second) = (start(), start());
    let output = std::process::Command::new("curl")
        .args(["-s", "-o", "/dev/null", "-w", "%{http_connect}", "-p", "-x"])
        .arg(first.url())
        .arg(format!("{}/anything", second.url()))
        .output()
        .expect("curl");
    // The CONNECT's own status, as curl saw it.
    assert_eq!(String::from_utf8_lossy(&output.stdout), "508", "{output:?}");
    let stderr = first.stop();
    assert!(
        stderr.contains("is another holdoff proxy on this machine"),
        "{stderr}"
    );
    drop(second);
}
