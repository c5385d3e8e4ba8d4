//! A Dev Proxy user's workflow, carried over: `holdoff proxy` and `holdoff run` in a folder
//! with a devproxyrc.json, Dev Proxy's options on the command line. The real binary, driven
//! with curl against a test upstream on loopback.

mod support;

#[path = "real_clients/clients.rs"]
#[allow(dead_code)]
mod clients;

use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};

use holdoff_testkit::TestServer;
use support::{TempDir, curl, runtime, show};

fn holdoff() -> Command {
    Command::new(assert_cmd::cargo::cargo_bin("holdoff"))
}

/// A Dev Proxy configuration in `dir` (at `name`, inside it) whose one plugin mocks
/// `http://127.0.0.1:*/mocked` with 418, and its mocks file beside it; `extra` goes at its
/// top level (e.g. `"logLevel": "none",`).
fn write_rc(dir: &Path, name: &str, extra: &str) -> String {
    let rc = dir.join(name);
    let folder = rc.parent().expect("a folder");
    std::fs::create_dir_all(folder).expect("create the folder");
    std::fs::write(
        folder.join("mocks.json"),
        r#"{
  "mocks": [{
    "request": { "url": "http://127.0.0.1:*/mocked" },
    "response": { "statusCode": 418, "body": "a teapot, from the mocks file" }
  }]
}"#,
    )
    .expect("write the mocks file");
    std::fs::write(
        &rc,
        format!(
            r#"{{
  // Written as a Dev Proxy user would.
  "$schema": "https://raw.githubusercontent.com/dotnet/dev-proxy/main/schemas/v2.0.0/rc.schema.json",
  "plugins": [
    {{ "name": "MockResponsePlugin", "enabled": true, "pluginPath": "~appFolder/plugins/DevProxy.Plugins.dll", "configSection": "mocking" }}
  ],
  "urlsToWatch": ["http://127.0.0.1:*/*"],
  {extra}
  "mocking": {{ "mocksFile": "mocks.json" }}
}}"#
        ),
    )
    .expect("write the Dev Proxy file");
    rc.display().to_string()
}

/// `holdoff proxy --port 0 ARGS…` in `dir`, at its default log level unless `args` says.
struct Running {
    child: Child,
    addr: std::net::SocketAddr,
}

impl Running {
    fn start(dir: &Path, args: &[&str]) -> Running {
        let mut child = holdoff()
            .args(["proxy", "--port", "0"])
            .args(args)
            .current_dir(dir)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start holdoff proxy");
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("piped"))
            .read_line(&mut line)
            .expect("read stdout");
        let Some(addr) = line
            .strip_prefix("listening on http://")
            .and_then(|rest| rest.trim_end().parse().ok())
        else {
            let output = child.wait_with_output().expect("wait for holdoff");
            panic!("unexpected first line {line:?}; {}", show(&output));
        };
        Running { child, addr }
    }

    /// SIGTERM, then its stderr.
    fn stop(mut self) -> String {
        let status = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .expect("run kill");
        assert!(status.success());
        self.stderr()
    }

    /// Waits for it to exit on its own; its stderr.
    fn stderr(&mut self) -> String {
        let mut stderr = String::new();
        if let Some(mut pipe) = self.child.stderr.take() {
            let _ = pipe.read_to_string(&mut stderr);
        }
        let _ = self.child.wait();
        stderr
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

mod discovery {
    use super::*;

    #[test]
    fn a_devproxyrc_json_in_the_folder_is_imported_and_named() {
        let rt = runtime();
        let upstream = rt.block_on(TestServer::start());
        let dir = TempDir::new("discover-here");
        write_rc(dir.path(), "devproxyrc.json", "");
        let proxy = Running::start(dir.path(), &[]);
        assert_eq!(curl(proxy.addr, &[], &upstream.url("/mocked")), "418");
        assert!(upstream.requests().is_empty(), "the mock answered");
        let stderr = proxy.stop();
        assert!(
            stderr.contains("no holdoff.json here: using Dev Proxy's devproxyrc.json"),
            "{stderr}"
        );
    }

    #[test]
    fn one_in_dot_devproxy_is_found_too() {
        let rt = runtime();
        let upstream = rt.block_on(TestServer::start());
        let dir = TempDir::new("discover-dot-devproxy");
        write_rc(dir.path(), ".devproxy/devproxyrc.json", "");
        let proxy = Running::start(dir.path(), &[]);
        assert_eq!(curl(proxy.addr, &[], &upstream.url("/mocked")), "418");
        let stderr = proxy.stop();
        assert!(
            stderr.contains("using Dev Proxy's .devproxy/devproxyrc.json"),
            "{stderr}"
        );
    }

    #[test]
    fn holdoffs_own_file_comes_first() {
        let rt = runtime();
        let upstream = rt.block_on(TestServer::start());
        let dir = TempDir::new("discover-holdoff-first");
        write_rc(dir.path(), "devproxyrc.json", "");
        dir.write(
            "holdoff.json",
            r#"{ "errors": { "rate": 0, "errors": [] } }"#,
        );
        let proxy = Running::start(dir.path(), &[]);
        assert_eq!(curl(proxy.addr, &[], &upstream.url("/mocked")), "200");
        let stderr = proxy.stop();
        assert!(
            stderr.contains("using holdoff.json, found in the current directory"),
            "{stderr}"
        );
    }

    #[test]
    fn without_either_the_preset_in_use_is_named() {
        let dir = TempDir::new("discover-none");
        let proxy = Running::start(dir.path(), &[]);
        let stderr = proxy.stop();
        assert!(
            stderr.contains("no holdoff.json or devproxyrc.json here: using the `throttle` preset"),
            "{stderr}"
        );
    }
}

mod config_flag {
    use super::*;

    #[test]
    fn dash_c_imports_a_dev_proxy_file() {
        let rt = runtime();
        let upstream = rt.block_on(TestServer::start());
        let dir = TempDir::new("dash-c");
        // Not named like Dev Proxy's: its plugins and $schema tell.
        let rc = write_rc(dir.path(), "proxy-settings.json", "");
        let proxy = Running::start(dir.path(), &["-c", &rc, "--log-level", "warn"]);
        assert_eq!(curl(proxy.addr, &[], &upstream.url("/mocked")), "418");
        let stderr = proxy.stop();
        assert!(!stderr.contains("unknown key"), "{stderr}");
    }

    #[test]
    fn dev_proxys_own_spelling_config_file_works_too() {
        let rt = runtime();
        let upstream = rt.block_on(TestServer::start());
        let dir = TempDir::new("config-file");
        let rc = write_rc(dir.path(), "devproxyrc.json", "");
        let proxy = Running::start(dir.path(), &["--config-file", &rc, "--log-level", "warn"]);
        assert_eq!(curl(proxy.addr, &[], &upstream.url("/mocked")), "418");
        drop(proxy);
    }
}

mod validate {
    use super::*;

    fn validate(dir: &Path, args: &[&str]) -> Output {
        holdoff()
            .args(["config", "validate"])
            .args(args)
            .current_dir(dir)
            .output()
            .expect("run holdoff")
    }

    #[test]
    fn accepts_a_dev_proxy_file_and_prints_the_notes() {
        let dir = TempDir::new("validate-devproxy");
        write_rc(
            dir.path(),
            "devproxyrc.json",
            r#""logLevel": "information","#,
        );
        let output = validate(dir.path(), &["devproxyrc.json"]);
        assert!(output.status.success(), "{}", show(&output));
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(
            stdout.starts_with("devproxyrc.json: valid Dev Proxy configuration — imported as"),
            "{stdout}"
        );
        assert!(stdout.contains("1 mock"), "{stdout}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains("note: "), "{stderr}");
    }

    #[test]
    fn finds_one_in_dot_devproxy_without_a_file_named() {
        let dir = TempDir::new("validate-found");
        write_rc(dir.path(), ".devproxy/devproxyrc.json", "");
        let output = validate(dir.path(), &[]);
        assert!(output.status.success(), "{}", show(&output));
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(
            stdout.starts_with(".devproxy/devproxyrc.json: valid"),
            "{stdout}"
        );
    }

    #[test]
    fn reports_what_does_not_import() {
        let dir = TempDir::new("validate-broken");
        write_rc(dir.path(), "devproxyrc.json", "");
        // A missing mocks file is only a note (Dev Proxy loads no mocks then); a broken one is
        // an error.
        std::fs::write(dir.join("mocks.json"), "{ \"mocks\": [ oops ] }").expect("break it");
        let output = validate(dir.path(), &["devproxyrc.json"]);
        assert_eq!(output.status.code(), Some(1), "{}", show(&output));
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains("mocks.json"), "{stderr}");
    }
}

mod import_exit_code {
    use super::*;

    #[test]
    fn is_0_when_the_result_compiles_and_1_when_it_does_not() {
        let dir = TempDir::new("import-exit");
        let rc = write_rc(dir.path(), "devproxyrc.json", "");
        let output = holdoff()
            .args(["config", "import-devproxy", &rc])
            .output()
            .expect("run holdoff");
        assert!(output.status.success(), "{}", show(&output));

        // A watch pattern holdoff cannot read imports, but does not compile.
        let text = std::fs::read_to_string(&rc).expect("read it back");
        let bad = text.replace(r#""http://127.0.0.1:*/*""#, r#""http://127.0.0.1:*/*", """#);
        std::fs::write(&rc, bad).expect("write it");
        let output = holdoff()
            .args(["config", "import-devproxy", &rc])
            .output()
            .expect("run holdoff");
        assert_eq!(output.status.code(), Some(1), "{}", show(&output));
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains("does not compile"), "{stderr}");
        assert!(stderr.contains("urlsToWatch"), "{stderr}");
    }
}

mod log_levels {
    use super::*;

    /// A run in a folder with a Dev Proxy file: one request, then its stderr.
    fn run_with(extra: &str, args: &[&str]) -> String {
        let rt = runtime();
        let upstream = rt.block_on(TestServer::start());
        let dir = TempDir::new("log-levels");
        write_rc(dir.path(), "devproxyrc.json", extra);
        let proxy = Running::start(dir.path(), args);
        assert_eq!(curl(proxy.addr, &[], &upstream.url("/mocked")), "418");
        proxy.stop()
    }

    #[test]
    fn the_files_information_shows_the_notes_and_the_log() {
        let stderr = run_with(r#""logLevel": "information","#, &[]);
        assert!(
            stderr.contains("Dev Proxy config devproxyrc.json: "),
            "{stderr}"
        );
        assert!(stderr.contains("faults from Dev Proxy config"), "{stderr}");
        assert!(stderr.contains("418"), "the request's line: {stderr}");
    }

    #[test]
    fn dev_proxys_names_work_on_the_command_line_in_any_case() {
        let stderr = run_with("", &["--log-level", "Warning"]);
        assert!(stderr.contains("no holdoff.json here"), "{stderr}");
        assert!(
            !stderr.contains("faults from"),
            "info is below warning: {stderr}"
        );
    }

    #[test]
    fn notes_are_shown_even_at_error() {
        let stderr = run_with("", &["--log-level", "error"]);
        assert!(
            stderr.contains("no holdoff.json here: using Dev Proxy's devproxyrc.json"),
            "{stderr}"
        );
    }

    #[test]
    fn none_shows_nothing_in_the_file_or_on_the_command_line() {
        let stderr = run_with(r#""logLevel": "none","#, &[]);
        assert_eq!(stderr, "");
        let stderr = run_with("", &["--log-level", "None"]);
        assert_eq!(stderr, "");
    }

    #[test]
    fn the_command_line_wins_over_the_file() {
        let stderr = run_with(r#""logLevel": "none","#, &["--log-level", "information"]);
        assert!(stderr.contains("faults from Dev Proxy config"), "{stderr}");
    }
}

/// `holdoff ARGS…` in `dir`, run to its end (killed after a minute, for a test that would
/// otherwise hang).
fn run_to_end(dir: &Path, args: &[&str]) -> Output {
    assert_cmd::Command::cargo_bin("holdoff")
        .expect("the holdoff binary")
        .args(args)
        .current_dir(dir)
        .timeout(std::time::Duration::from_secs(60))
        .output()
        .expect("run holdoff")
}

mod dev_proxy_options {
    use super::*;

    #[test]
    fn timeout_stops_the_proxy_on_its_own_and_writes_the_report() {
        let dir = TempDir::new("timeout");
        let output = run_to_end(
            dir.path(),
            &[
                "proxy",
                "--port",
                "0",
                "-t",
                "1",
                "--report-json",
                "report.json",
            ],
        );
        assert!(output.status.success(), "{}", show(&output));
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            stderr.contains("no request for 1 s (--timeout)"),
            "{stderr}"
        );
        let report = support::json_report(&dir.join("report.json"));
        assert_eq!(report["requests"], 0, "{report}");
    }

    #[test]
    fn record_and_as_system_proxy_are_taken_and_say_what_they_do() {
        let dir = TempDir::new("record");
        let output = run_to_end(
            dir.path(),
            &[
                "proxy",
                "--port",
                "0",
                "--timeout",
                "1",
                "--record",
                "--as-system-proxy",
            ],
        );
        assert!(output.status.success(), "{}", show(&output));
        let stdout = String::from_utf8_lossy(&output.stdout);
        let addr = stdout
            .lines()
            .next()
            .and_then(|line| line.strip_prefix("listening on http://"))
            .unwrap_or_else(|| panic!("{stdout}"));
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            stderr.contains("--record: holdoff records every request"),
            "{stderr}"
        );
        assert!(
            stderr.contains(&format!("export http_proxy=http://{addr} ")),
            "{stderr}"
        );
        let port = addr.rsplit(':').next().unwrap_or_default();
        assert!(
            stderr.contains(&format!(
                "gsettings set org.gnome.system.proxy.http port {port}"
            )),
            "{stderr}"
        );
    }

    #[test]
    fn no_mocks_sends_the_mocked_requests_upstream() {
        let rt = runtime();
        let upstream = rt.block_on(TestServer::start());
        let dir = TempDir::new("no-mocks");
        write_rc(dir.path(), "devproxyrc.json", "");
        let proxy = Running::start(dir.path(), &["--no-mocks", "--log-level", "warn"]);
        assert_eq!(curl(proxy.addr, &[], &upstream.url("/mocked")), "200");
        assert_eq!(upstream.requests_to("/mocked").len(), 1);
        drop(proxy);
    }

    #[test]
    fn env_reaches_the_command_of_holdoff_run() {
        let dir = TempDir::new("env");
        let output = run_to_end(
            dir.path(),
            &[
                "run",
                "--allow-no-traffic",
                "--env",
                "GREETING=hello=world",
                "-e",
                "HTTP_PROXY=mine",
                "--",
                "sh",
                "-c",
                "printf '%s %s' \"$GREETING\" \"$HTTP_PROXY\"",
            ],
        );
        assert!(output.status.success(), "{}", show(&output));
        assert_eq!(String::from_utf8_lossy(&output.stdout), "hello=world mine");
    }

    #[test]
    fn env_without_a_name_is_a_usage_error() {
        let dir = TempDir::new("env-bad");
        let output = run_to_end(dir.path(), &["run", "--env", "=x", "--", "true"]);
        assert_eq!(output.status.code(), Some(2), "{}", show(&output));
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains("expected NAME=VALUE"), "{stderr}");
    }
}

/// Dev Proxy's options as its docs and CI scripts spell them (issue 35): every one is taken,
/// with Dev Proxy's meaning where holdoff has it, and a line at start where it has not.
mod dev_proxys_command_line {
    use super::*;

    /// A Dev Proxy config whose GenericRandomErrorPlugin fails every watched request with
    /// 429 or 503, drawn per request.
    fn write_errors_rc(dir: &Path) {
        std::fs::write(
            dir.join("errors.json"),
            r#"{ "errors": [{
  "request": { "url": "http://127.0.0.1:*/*" },
  "responses": [
    { "statusCode": 429, "headers": [{ "name": "Retry-After", "value": "1" }] },
    { "statusCode": 503, "headers": [{ "name": "Retry-After", "value": "1" }] }
  ]
}] }"#,
        )
        .expect("write the errors file");
        std::fs::write(
            dir.join("devproxyrc.json"),
            r#"{
  "plugins": [
    { "name": "GenericRandomErrorPlugin", "enabled": true, "pluginPath": "~appFolder/plugins/DevProxy.Plugins.dll", "configSection": "errors" }
  ],
  "urlsToWatch": ["http://127.0.0.1:*/*"],
  "errors": { "errorsFile": "errors.json", "rate": 100 }
}"#,
        )
        .expect("write the Dev Proxy file");
    }

    #[test]
    fn the_switches_take_true_and_false() {
        let dir = TempDir::new("dp-switches");
        write_rc(dir.path(), "devproxyrc.json", "");
        let output = run_to_end(
            dir.path(),
            &[
                "--port",
                "0",
                "--timeout",
                "1",
                "--as-system-proxy",
                "false",
                "--install-cert",
                "false",
                "--no-first-run",
                "--no-watch",
                "--no-color",
                "--discover",
                "false",
                "--record",
                "false",
                "-n",
                "false",
                "--summary-group-by",
                "url",
            ],
        );
        assert!(output.status.success(), "{}", show(&output));
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            stderr.contains("--summary-group-by url: holdoff's summary and reports group"),
            "{stderr}"
        );
        // `false` means false: no system-proxy lines, no --record note.
        assert!(!stderr.contains("gsettings"), "{stderr}");
        assert!(!stderr.contains("--record:"), "{stderr}");
        assert!(!stderr.contains('\u{1b}'), "no colours: {stderr}");
    }

    #[test]
    fn output_json_writes_one_json_object_a_line() {
        let dir = TempDir::new("dp-json");
        write_rc(dir.path(), "devproxyrc.json", "");
        let output = run_to_end(
            dir.path(),
            &["--port", "0", "--timeout", "1", "--output", "json"],
        );
        assert!(output.status.success(), "{}", show(&output));
        let stderr = String::from_utf8_lossy(&output.stderr);
        let logged: Vec<&str> = stderr
            .lines()
            .filter(|line| line.starts_with('{'))
            .collect();
        assert!(!logged.is_empty(), "{stderr}");
        for line in logged {
            let value: serde_json::Value =
                serde_json::from_str(line).unwrap_or_else(|err| panic!("{err}: {line}"));
            assert!(value["level"].is_string(), "{line}");
        }
    }

    #[test]
    fn no_mocks_false_keeps_them_and_n_turns_them_off() {
        let rt = runtime();
        let upstream = rt.block_on(TestServer::start());
        let dir = TempDir::new("dp-no-mocks");
        write_rc(dir.path(), "devproxyrc.json", "");
        let kept = Running::start(dir.path(), &["--no-mocks", "false", "--log-level", "warn"]);
        assert_eq!(curl(kept.addr, &[], &upstream.url("/mocked")), "418");
        drop(kept);
        let off = Running::start(dir.path(), &["-n", "--log-level", "warn"]);
        assert_eq!(curl(off.addr, &[], &upstream.url("/mocked")), "200");
    }

    #[test]
    fn mocks_file_replaces_the_plugins_own() {
        let rt = runtime();
        let upstream = rt.block_on(TestServer::start());
        let dir = TempDir::new("dp-mocks-file");
        write_rc(dir.path(), "devproxyrc.json", "");
        std::fs::create_dir(dir.join("other")).expect("a folder");
        std::fs::write(
            dir.join("other/legal.json"),
            r#"{ "mocks": [{
  "request": { "url": "http://127.0.0.1:*/mocked" },
  "response": { "statusCode": 451 }
}] }"#,
        )
        .expect("write the other mocks");
        let proxy = Running::start(
            dir.path(),
            &["--mocks-file", "other/legal.json", "--log-level", "warn"],
        );
        assert_eq!(curl(proxy.addr, &[], &upstream.url("/mocked")), "451");
        drop(proxy);

        // With holdoff's own config there is no MockResponsePlugin to give it to: said so.
        let own = TempDir::new("dp-mocks-file-holdoff");
        std::fs::write(own.join("holdoff.json"), "{}").expect("write holdoff.json");
        let output = run_to_end(
            own.path(),
            &[
                "--port",
                "0",
                "--timeout",
                "1",
                "--mocks-file",
                "legal.json",
            ],
        );
        assert_eq!(output.status.code(), Some(2), "{}", show(&output));
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            stderr.contains("names the mocks file of a Dev Proxy config's MockResponsePlugin"),
            "{stderr}"
        );
    }

    #[test]
    fn allowed_errors_keeps_only_those_statuses() {
        let rt = runtime();
        let upstream = rt.block_on(TestServer::start());
        let dir = TempDir::new("dp-allowed");
        write_errors_rc(dir.path());
        let proxy = Running::start(dir.path(), &["-a", "503", "--log-level", "warn"]);
        for i in 0..12 {
            // A URL each: no request is a retry the judge would answer itself.
            let status = curl(proxy.addr, &[], &upstream.url(&format!("/item/{i}")));
            assert_eq!(status, "503", "request {i}");
        }
    }

    #[test]
    fn discover_turns_the_faults_off_and_watches_everything() {
        let rt = runtime();
        let upstream = rt.block_on(TestServer::start());
        let dir = TempDir::new("dp-discover");
        write_errors_rc(dir.path());
        let proxy = Running::start(dir.path(), &["--discover"]);
        assert_eq!(curl(proxy.addr, &[], &upstream.url("/found")), "200");
        assert_eq!(upstream.requests_to("/found").len(), 1);
        let stderr = proxy.stop();
        assert!(stderr.contains("--discover: URL discovery"), "{stderr}");
        assert!(
            stderr.contains("/found"),
            "the request log names the URL: {stderr}"
        );
    }

    #[test]
    fn config_validate_takes_dash_c_as_dev_proxy_does() {
        let dir = TempDir::new("dp-validate-c");
        write_rc(dir.path(), "devproxyrc.json", "");
        let output = holdoff()
            .args(["config", "validate", "-c", "devproxyrc.json"])
            .current_dir(dir.path())
            .output()
            .expect("run holdoff");
        assert!(output.status.success(), "{}", show(&output));
        assert!(
            String::from_utf8_lossy(&output.stdout)
                .starts_with("devproxyrc.json: valid Dev Proxy configuration")
        );
    }
}

/// The plugins' behaviour that Dev Proxy users rely on (issue 35, part 3), with real clients.
mod dev_proxys_plugins {
    use super::*;

    #[test]
    fn nth_mocks_fail_twice_then_succeed_as_in_dev_proxy() {
        let rt = runtime();
        let upstream = rt.block_on(TestServer::start());
        let dir = TempDir::new("dp-nth");
        write_rc(dir.path(), "devproxyrc.json", "");
        std::fs::write(
            dir.join("mocks.json"),
            r#"{ "mocks": [
  { "request": { "url": "http://127.0.0.1:*/flaky", "nth": 1 },
    "response": { "statusCode": 429, "headers": [{ "name": "Retry-After", "value": "0" }] } },
  { "request": { "url": "http://127.0.0.1:*/flaky", "nth": 2 },
    "response": { "statusCode": 503, "headers": [{ "name": "Retry-After", "value": "0" }] } },
  { "request": { "url": "http://127.0.0.1:*/flaky" }, "response": { "statusCode": 200 } }
] }"#,
        )
        .expect("write the mocks");
        let proxy = Running::start(dir.path(), &["--log-level", "warn"]);
        let statuses: Vec<String> = (0..4)
            .map(|_| curl(proxy.addr, &[], &upstream.url("/flaky")))
            .collect();
        assert_eq!(statuses, ["429", "503", "200", "200"]);
    }

    #[test]
    fn a_mock_mirrors_the_request_body_as_dev_proxy_does() {
        let rt = runtime();
        let upstream = rt.block_on(TestServer::start());
        let dir = TempDir::new("dp-mirror");
        write_rc(dir.path(), "devproxyrc.json", "");
        std::fs::write(
            dir.join("mocks.json"),
            r#"{ "mocks": [{
  "request": { "url": "http://127.0.0.1:*/users", "method": "POST" },
  "response": { "statusCode": 201,
    "headers": [{ "name": "content-type", "value": "application/json" }],
    "body": { "id": 42, "name": "@request.body.name", "city": "@request.body.address.city" } }
}] }"#,
        )
        .expect("write the mocks");
        let proxy = Running::start(dir.path(), &["--log-level", "warn"]);
        let output = std::process::Command::new("curl")
            .args(["-sS", "-x", &format!("http://{}", proxy.addr)])
            .args(["-H", "content-type: application/json"])
            .args(["-d", r#"{"name": "Ada", "address": {"city": "London"}}"#])
            .arg(upstream.url("/users"))
            .output()
            .expect("curl");
        assert!(output.status.success(), "{}", show(&output));
        let body: serde_json::Value = serde_json::from_slice(&output.stdout)
            .unwrap_or_else(|err| panic!("{err}: {}", show(&output)));
        assert_eq!(
            body,
            serde_json::json!({ "id": 42, "name": "Ada", "city": "London" })
        );
        assert!(upstream.requests_to("/users").is_empty());
    }

    #[test]
    fn a_reset_fault_is_a_tcp_reset_for_curl_and_a_raw_socket() {
        let rt = runtime();
        let upstream = rt.block_on(TestServer::start());
        let dir = TempDir::new("reset-rst");
        std::fs::write(
            dir.join("holdoff.json"),
            r#"{ "errors": { "rate": 100, "errors": [{
  "request": { "url": "http://127.0.0.1:*/*" }, "responses": [{ "network": "reset" }]
}] } }"#,
        )
        .expect("write holdoff.json");
        let proxy = Running::start(
            dir.path(),
            &["-u", "http://127.0.0.1:*/*", "--log-level", "warn"],
        );
        // curl: 56, "Recv failure: Connection reset by peer" (a clean close would be 52).
        let output = std::process::Command::new("curl")
            .args([
                "-sS",
                "-o",
                "/dev/null",
                "-x",
                &format!("http://{}", proxy.addr),
            ])
            .arg(upstream.url("/reset"))
            .output()
            .expect("curl");
        assert_eq!(output.status.code(), Some(56), "{}", show(&output));
        assert!(
            String::from_utf8_lossy(&output.stderr).contains("reset by peer"),
            "{}",
            show(&output)
        );
        // A raw socket reads ECONNRESET.
        use std::io::Write as _;
        let mut socket = std::net::TcpStream::connect(proxy.addr).expect("connect");
        let url = upstream.url("/reset");
        write!(socket, "GET {url} HTTP/1.1\r\nhost: 127.0.0.1\r\n\r\n").expect("write");
        socket
            .set_read_timeout(Some(std::time::Duration::from_secs(10)))
            .expect("a timeout");
        let mut received = Vec::new();
        let err = socket
            .read_to_end(&mut received)
            .expect_err("no clean close");
        assert_eq!(err.kind(), std::io::ErrorKind::ConnectionReset, "{err}");
        assert!(received.is_empty());
    }
}

/// Dev Proxy's OpenAIMockResponsePlugin, answered from a fixed text: openai-python, streamed
/// and not, gets chat completions with usage, and nothing reaches the upstream.
mod openai_mock_responses {
    use super::*;

    const CLIENT: &str = r#"
import sys
import openai

client = openai.OpenAI(base_url=sys.argv[1] + "/v1", api_key="test", max_retries=0)
reply = client.chat.completions.create(
    model="gpt-4o-mini", messages=[{"role": "user", "content": "Hello there"}])
print(reply.choices[0].message.content, reply.usage.total_tokens)
stream = client.chat.completions.create(
    model="gpt-4o-mini", messages=[{"role": "user", "content": "Hi"}], stream=True)
print("".join(chunk.choices[0].delta.content or "" for chunk in stream if chunk.choices))
"#;

    #[test]
    fn openai_python_gets_answers_without_a_model_or_an_upstream() {
        let rt = runtime();
        let upstream = rt.block_on(TestServer::start());
        let dir = TempDir::new("dp-openai-mock");
        std::fs::write(
            dir.join("devproxyrc.json"),
            r#"{
  "plugins": [
    { "name": "OpenAIMockResponsePlugin", "enabled": true, "pluginPath": "~appFolder/plugins/DevProxy.Plugins.dll" }
  ],
  "urlsToWatch": ["http://127.0.0.1:*/*"],
  "languageModel": { "enabled": true }
}"#,
        )
        .expect("write the Dev Proxy file");
        let proxy = Running::start(dir.path(), &[]);
        let output = std::process::Command::new(crate::clients::python())
            .args(["-c", CLIENT, upstream.url("").trim_end_matches('/')])
            .env("HTTP_PROXY", format!("http://{}", proxy.addr))
            .env("NO_PROXY", "")
            .output()
            .expect("run openai-python");
        let stderr = proxy.stop();
        assert!(
            output.status.success(),
            "{}\nproxy:\n{stderr}",
            show(&output)
        );
        assert_eq!(
            String::from_utf8_lossy(&output.stdout),
            "This is a mock response from holdoff. 13\nThis is a mock response from holdoff.\n"
        );
        assert!(upstream.requests().is_empty());
        assert!(
            stderr.contains("OpenAIMockResponsePlugin: holdoff answers OpenAI's chat completions"),
            "{stderr}"
        );
    }
}

/// Dev Proxy's LanguageModelFailurePlugin: openai-python's chat completion reaches the
/// upstream with an instruction to fail added.
mod language_model_failures {
    use super::*;

    const CLIENT: &str = r#"
import sys
import openai

client = openai.OpenAI(base_url=sys.argv[1] + "/v1", api_key="test", max_retries=0)
reply = client.chat.completions.create(
    model="gpt-4o-mini", messages=[{"role": "user", "content": "What is the capital of France?"}])
print(reply.choices[0].message.content)
"#;

    #[test]
    fn the_call_is_forwarded_with_an_instruction_to_fail() {
        let rt = runtime();
        let upstream = rt.block_on(TestServer::start());
        upstream.set_default(
            "/v1/chat/completions",
            holdoff_testkit::Reply::ok("").json(&serde_json::json!({
                "id": "x", "object": "chat.completion", "created": 0, "model": "gpt-4o-mini",
                "choices": [{ "index": 0, "finish_reason": "stop",
                              "message": { "role": "assistant", "content": "Lyon." } }],
                "usage": { "prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2 }
            })),
        );
        let dir = TempDir::new("dp-llm-failure");
        std::fs::write(
            dir.join("devproxyrc.json"),
            r#"{
  "plugins": [
    { "name": "LanguageModelFailurePlugin", "enabled": true, "pluginPath": "~appFolder/plugins/DevProxy.Plugins.dll", "configSection": "lmFailures" }
  ],
  "urlsToWatch": ["http://127.0.0.1:*/*"],
  "lmFailures": { "failures": ["Hallucination"] }
}"#,
        )
        .expect("write the Dev Proxy file");
        let proxy = Running::start(dir.path(), &[]);
        let output = std::process::Command::new(crate::clients::python())
            .args(["-c", CLIENT, upstream.url("").trim_end_matches('/')])
            .env("HTTP_PROXY", format!("http://{}", proxy.addr))
            .env("NO_PROXY", "")
            .output()
            .expect("run openai-python");
        let stderr = proxy.stop();
        assert!(
            output.status.success(),
            "{}\nproxy:\n{stderr}",
            show(&output)
        );
        assert_eq!(String::from_utf8_lossy(&output.stdout), "Lyon.\n");
        let sent = upstream.requests_to("/v1/chat/completions");
        assert_eq!(sent.len(), 1);
        let body: serde_json::Value = serde_json::from_slice(&sent[0].body).expect("JSON");
        let messages = body["messages"].as_array().expect("messages");
        assert_eq!(messages.len(), 2, "{body}");
        assert_eq!(messages[1]["role"], "system");
        assert!(
            messages[1]["content"]
                .as_str()
                .unwrap_or_default()
                .contains("made up"),
            "{body}"
        );
        assert!(stderr.contains("1 language-model failures"), "{stderr}");
    }
}

/// Dev Proxy's GraphMockResponsePlugin: its mocks file served as MockResponsePlugin's, and a
/// Graph JSON batch answered request by request.
mod graph_mocks {
    use super::*;

    #[test]
    fn serves_its_mocks_and_answers_a_batch_request_by_request() {
        let rt = runtime();
        let upstream = rt.block_on(TestServer::start());
        let dir = TempDir::new("dp-graph-mocks");
        std::fs::write(
            dir.join("devproxyrc.json"),
            r#"{
  "plugins": [
    { "name": "GraphMockResponsePlugin", "enabled": true, "pluginPath": "~appFolder/plugins/DevProxy.Plugins.dll", "configSection": "mocksPlugin" }
  ],
  "urlsToWatch": ["http://127.0.0.1:*/*"],
  "mocksPlugin": { "mocksFile": "graph-mocks.json" }
}"#,
        )
        .expect("write the Dev Proxy file");
        std::fs::write(
            dir.join("graph-mocks.json"),
            r#"{ "mocks": [
  { "request": { "url": "http://127.0.0.1:*/v1.0/me" },
    "response": { "body": { "displayName": "Megan Bowen" } } },
  { "request": { "url": "http://127.0.0.1:*/v1.0/users/*" },
    "response": { "statusCode": 429, "headers": [{ "name": "Retry-After", "value": "3" }],
                  "body": { "error": { "code": "TooManyRequests" } } } }
] }"#,
        )
        .expect("write the mocks");
        let proxy = Running::start(dir.path(), &["--log-level", "warn"]);
        let curl = |args: &[&str], path: &str| {
            let output = std::process::Command::new("curl")
                .args(["-sS", "-x", &format!("http://{}", proxy.addr)])
                .args(args)
                .arg(upstream.url(path))
                .output()
                .expect("curl");
            assert!(output.status.success(), "{}", show(&output));
            serde_json::from_slice::<serde_json::Value>(&output.stdout)
                .unwrap_or_else(|err| panic!("{err}: {}", show(&output)))
        };
        assert_eq!(
            curl(&[], "/v1.0/me"),
            serde_json::json!({ "displayName": "Megan Bowen" })
        );
        let batch = r#"{ "requests": [
  { "id": "1", "method": "GET", "url": "/me" },
  { "id": "2", "method": "GET", "url": "/users/7" },
  { "id": "3", "method": "GET", "url": "/groups" }
] }"#;
        let answer = curl(
            &["-H", "content-type: application/json", "-d", batch],
            "/v1.0/$batch",
        );
        let responses = answer["responses"].as_array().expect("responses");
        let status = |i: usize| (responses[i]["id"].clone(), responses[i]["status"].clone());
        assert_eq!(status(0), (serde_json::json!("1"), serde_json::json!(200)));
        assert_eq!(responses[0]["body"]["displayName"], "Megan Bowen");
        assert_eq!(status(1), (serde_json::json!("2"), serde_json::json!(429)));
        assert_eq!(responses[1]["headers"]["retry-after"], "3");
        assert_eq!(status(2), (serde_json::json!("3"), serde_json::json!(502)));
        assert_eq!(responses[2]["body"]["error"]["code"], "BadGateway");
        assert!(upstream.requests().is_empty());
    }

    #[test]
    fn graph_random_errors_fail_a_batch_request_by_request() {
        let rt = runtime();
        let upstream = rt.block_on(TestServer::start());
        let dir = TempDir::new("dp-graph-batch-errors");
        std::fs::write(
            dir.join("devproxyrc.json"),
            r#"{
  "plugins": [
    { "name": "GraphRandomErrorPlugin", "enabled": true, "pluginPath": "~appFolder/plugins/DevProxy.Plugins.dll", "configSection": "graphRandomErrorsPlugin" }
  ],
  "urlsToWatch": ["http://127.0.0.1:*/*"],
  "graphRandomErrorsPlugin": { "rate": 100, "allowedErrors": [429], "retryAfterInSeconds": 4 }
}"#,
        )
        .expect("write the Dev Proxy file");
        let proxy = Running::start(dir.path(), &["--log-level", "warn"]);
        let batch = r#"{ "requests": [
  { "id": "1", "method": "GET", "url": "/me" },
  { "id": "2", "method": "POST", "url": "/me/sendMail", "body": {}, "headers": { "content-type": "application/json" } },
  { "id": "3", "method": "GET", "url": "/me/manager", "dependsOn": ["1"] }
] }"#;
        let output = std::process::Command::new("curl")
            .args([
                "-sS",
                "-w",
                "\n%{http_code}",
                "-x",
                &format!("http://{}", proxy.addr),
            ])
            .args(["-H", "content-type: application/json", "-d", batch])
            .arg(upstream.url("/v1.0/$batch"))
            .output()
            .expect("curl");
        let text = String::from_utf8_lossy(&output.stdout).into_owned();
        let (body, status) = text.rsplit_once('\n').expect("a status line");
        assert_eq!(status, "200", "{}", show(&output));
        let answer: serde_json::Value =
            serde_json::from_str(body).unwrap_or_else(|err| panic!("{err}: {body}"));
        let statuses: Vec<_> = answer["responses"]
            .as_array()
            .expect("responses")
            .iter()
            .map(|response| response["status"].as_u64().unwrap_or(0))
            .collect();
        assert_eq!(statuses, [429, 429, 424]);
        assert_eq!(answer["responses"][0]["headers"]["retry-after"], "4");
        assert_eq!(
            answer["responses"][0]["body"]["error"]["code"],
            "Too Many Requests"
        );
        assert!(upstream.requests().is_empty());
    }
}
