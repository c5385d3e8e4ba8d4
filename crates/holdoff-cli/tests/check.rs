//! `holdoff check -- CLIENT` against clients whose behaviour is known by construction: a
//! Python client that honours Retry-After (tests/check/honours.py), one that retries at
//! once whatever it is told (tests/check/naive.py), and curl with `--retry 2`. Each calls a
//! loopback upstream the test starts, through the proxy variables `holdoff check` sets.

mod support;

use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

use holdoff_testkit::{Reply, TestServer};
use serde_json::Value;
use support::{TempDir, runtime, show};

/// The scenarios, in the order they are reported.
const SCENARIOS: [&str; 18] = [
    "delay-429",
    "delay-503",
    "http-date",
    "clock-behind",
    "date-past",
    "second-throttle",
    "retry-after-ms",
    "malformed",
    "malformed-negative",
    "malformed-decimal",
    "malformed-empty",
    "wrong-weekday",
    "no-hint",
    "quota",
    "post",
    "long-90",
    "long-150",
    "long-hour",
];

/// The scenarios run by default that a GET client meets: all but `post` and the long ones.
const GET_SCENARIOS: [&str; 14] = [
    "delay-429",
    "delay-503",
    "http-date",
    "clock-behind",
    "date-past",
    "second-throttle",
    "retry-after-ms",
    "malformed",
    "malformed-negative",
    "malformed-decimal",
    "malformed-empty",
    "wrong-weekday",
    "no-hint",
    "quota",
];

/// The malformed hints: a client must not read one as zero.
const MALFORMED: [&str; 5] = [
    "malformed",
    "malformed-negative",
    "malformed-decimal",
    "malformed-empty",
    "wrong-weekday",
];

/// A loopback upstream answering `/v1/items` 200, and the runtime it runs on (keep it).
fn items() -> (tokio::runtime::Runtime, TestServer) {
    let rt = runtime();
    let upstream = rt.block_on(TestServer::start());
    upstream.set_default("/v1/items", Reply::ok("items"));
    (rt, upstream)
}

/// A test client's script.
fn script(name: &str) -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/check")
        .join(name)
        .display()
        .to_string()
}

/// `holdoff check ARGS…` with `--json`: its output and the JSON read back (`Null` if none).
fn check(dir: &TempDir, args: &[&str]) -> (Output, Value) {
    let json = dir.path().join("check.json");
    let output = Command::new(assert_cmd::cargo::cargo_bin("holdoff"))
        .arg("check")
        .arg("--json")
        .arg(&json)
        .args(args)
        .current_dir(dir.path())
        .stdin(Stdio::null())
        .output()
        .expect("run holdoff check");
    let value = std::fs::read_to_string(&json)
        .ok()
        .and_then(|text| serde_json::from_str(&text).ok())
        .unwrap_or(Value::Null);
    (output, value)
}

/// Each scenario's verdict, by name, from the JSON.
fn verdicts(json: &Value) -> Vec<(String, String)> {
    json["scenarios"]
        .as_array()
        .map(|rows| {
            rows.iter()
                .map(|row| {
                    (
                        row["scenario"].as_str().unwrap_or_default().to_owned(),
                        row["verdict"].as_str().unwrap_or_default().to_owned(),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Every scenario a GET client meets with `verdict`, then `post` not tested (it sends no
/// POST).
fn all(verdict: &str) -> Vec<(String, String)> {
    let mut want: Vec<(String, String)> = GET_SCENARIOS
        .iter()
        .map(|name| ((*name).to_owned(), verdict.to_owned()))
        .collect();
    want.push(("post".to_owned(), "n/a".to_owned()));
    want
}

/// `want` with scenario `name`'s verdict set to `verdict`.
fn except(mut want: Vec<(String, String)>, name: &str, verdict: &str) -> Vec<(String, String)> {
    let row = want
        .iter_mut()
        .find(|(scenario, _)| scenario == name)
        .expect("a known scenario");
    row.1 = verdict.to_owned();
    want
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

#[test]
fn list_describes_every_scenario() {
    let output = Command::new(assert_cmd::cargo::cargo_bin("holdoff"))
        .args(["check", "--list"])
        .output()
        .expect("run holdoff check --list");
    assert_eq!(output.status.code(), Some(0), "{}", show(&output));
    let text = stdout(&output);
    assert_eq!(text.lines().count(), SCENARIOS.len(), "{text}");
    for (line, name) in text.lines().zip(SCENARIOS) {
        assert!(line.starts_with(name), "{text}");
    }
    assert!(text.contains("Retry-After: soon"), "{text}");
}

#[test]
fn an_unknown_scenario_is_a_usage_error_naming_the_known_ones() {
    let dir = TempDir::new("check-unknown");
    let (output, _) = check(&dir, &["--scenario", "delay", "--", "true"]);
    assert_eq!(output.status.code(), Some(2), "{}", show(&output));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("unknown scenario `delay`"), "{stderr}");
    for name in SCENARIOS {
        assert!(stderr.contains(name), "{stderr}");
    }
}

/// The row of scenario `name`.
fn row<'a>(json: &'a Value, name: &str) -> &'a Value {
    json["scenarios"]
        .as_array()
        .and_then(|rows| rows.iter().find(|row| row["scenario"] == name))
        .unwrap_or(&Value::Null)
}

/// Seconds from the throttle to the first retry in scenario `name` (-1 for none).
fn first_retry(json: &Value, name: &str) -> f64 {
    row(json, name)["first_retry_after_s"]
        .as_f64()
        .unwrap_or(-1.0)
}

#[test]
fn a_client_that_honours_retry_after_passes_every_scenario() {
    let (_rt, upstream) = items();
    let dir = TempDir::new("check-honours");
    let url = upstream.url("/v1/items");
    let (output, json) = check(&dir, &["--", "python3", &script("honours.py"), &url]);

    assert_eq!(output.status.code(), Some(0), "{}\n{json:#}", show(&output));
    assert_eq!(verdicts(&json), all("pass"), "{json:#}");
    for name in ["delay-429", "delay-503", "http-date"] {
        assert!(first_retry(&json, name) >= 2.0, "{json:#}");
        assert_eq!(row(&json, name)["retries"], 1, "{json:#}");
    }
    // The server's clock is an hour behind: 3 s by its Date is 3 s, not an hour ago.
    assert!(first_retry(&json, "clock-behind") >= 3.0, "{json:#}");
    // Beside retry-after-ms: 1500, it waited Retry-After's 3 s.
    assert!(first_retry(&json, "retry-after-ms") >= 3.0, "{json:#}");
    let why = row(&json, "retry-after-ms")["why"]
        .as_str()
        .unwrap_or_default();
    assert!(why.contains("Retry-After's 3 s"), "{why}");
    // A date in the past permits a retry at once, and it came at once.
    assert!(
        (0.0..1.0).contains(&first_retry(&json, "date-past")),
        "{json:#}"
    );
    // The second throttle's hint was waited out too: two retries.
    assert_eq!(row(&json, "second-throttle")["retries"], 2, "{json:#}");
    assert!(first_retry(&json, "second-throttle") >= 1.0, "{json:#}");
    for name in MALFORMED.iter().chain(&["quota"]) {
        assert_eq!(row(&json, name)["did"], "gave up (exited 1)", "{json:#}");
        assert_eq!(row(&json, name)["retries"], 0, "{json:#}");
    }
    // The throttles were the proxy's; every retry that came reached the upstream (but the one
    // the second throttle answered), and so did the GET of the post scenario, which throttles
    // only a POST.
    assert_eq!(upstream.requests_to("/v1/items").len(), 9, "{json:#}");
    let table = stdout(&output);
    assert!(table.starts_with("SCENARIO "), "{table}");
    assert!(
        table.contains("honours Retry-After: 14/14 (1 n/a)\n"),
        "{table}"
    );
    assert_eq!(json["summary"], "honours Retry-After: 14/14 (1 n/a)");
    assert_eq!(
        row(&json, "post")["why"],
        "the client sent no POST: nothing was tested"
    );
}

#[test]
fn a_client_that_retries_at_once_fails_every_scenario_but_a_past_date() {
    let (_rt, upstream) = items();
    let dir = TempDir::new("check-naive");
    let url = upstream.url("/v1/items");
    let (output, json) = check(&dir, &["--", "python3", &script("naive.py"), &url]);

    assert_eq!(output.status.code(), Some(3), "{}\n{json:#}", show(&output));
    // A date in the past permits a retry at once: at once is right.
    assert_eq!(
        verdicts(&json),
        except(all("fail"), "date-past", "pass"),
        "{json:#}"
    );
    for name in GET_SCENARIOS {
        assert!((0.0..0.1).contains(&first_retry(&json, name)), "{json:#}");
    }
    let why = row(&json, "malformed")["why"].as_str().unwrap_or_default();
    assert!(why.contains("read the hint as zero"), "{why}");
    // The summary says what the failures show about the client, with where it showed: early
    // on http-date as well, its early retry on clock-behind is no sign of a skew.
    let why = row(&json, "clock-behind")["why"]
        .as_str()
        .unwrap_or_default();
    assert!(why.contains("it retries early on http-date too"), "{why}");
    assert_eq!(
        json["summary"],
        "honours Retry-After: 1/14 (13 fail, 1 n/a); retries before Retry-After permits \
         (delay-429, delay-503, http-date, clock-behind, second-throttle, retry-after-ms); \
         reads a malformed Retry-After as zero (malformed, malformed-negative, \
         malformed-decimal, malformed-empty, wrong-weekday); does not back off without a hint \
         (no-hint); hammers a used-up quota (quota)",
        "{json:#}"
    );
    assert!(stdout(&output).ends_with(&format!("{}\n", json["summary"].as_str().unwrap())));
}

#[test]
fn curl_with_retry_honours_delay_seconds_and_dates_but_waits_on_past_ones() {
    let (_rt, upstream) = items();
    let dir = TempDir::new("check-curl");
    let url = upstream.url("/v1/items");
    let client = ["--timeout", "8s", "--", "curl", "-s", "--retry", "2", &url];
    let (output, json) = check(&dir, &client);

    assert_eq!(output.status.code(), Some(0), "{}\n{json:#}", show(&output));
    // curl waits as long as Retry-After says (seconds or a date) and backs off 1 s after a
    // malformed hint or none; it retries a used-up quota all the same, and a date in the past
    // (by its own clock, so an hour-behind server's too, and a wrong weekday's, read
    // leniently) it waits for past the time limit.
    let mut want = all("pass");
    for name in ["clock-behind", "date-past", "wrong-weekday", "quota"] {
        want = except(want, name, "warn");
    }
    assert_eq!(verdicts(&json), want, "{json:#}");
    for name in [
        "delay-429",
        "delay-503",
        "http-date",
        "retry-after-ms",
        "malformed",
        "malformed-negative",
        "malformed-decimal",
        "malformed-empty",
        "no-hint",
        "quota",
    ] {
        assert_eq!(row(&json, name)["retries"], 1, "{json:#}");
        assert!(first_retry(&json, name) >= 1.0, "{json:#}");
    }
    assert!(first_retry(&json, "retry-after-ms") >= 3.0, "{json:#}");
    assert_eq!(row(&json, "second-throttle")["retries"], 2, "{json:#}");
    // A date in the past, one with the wrong weekday (read leniently, it is in the past too),
    // or one by a server clock an hour behind, which curl reads by its own clock as an hour
    // ago: curl does not retry before the time limit.
    for name in ["date-past", "wrong-weekday", "clock-behind"] {
        assert_eq!(row(&json, name)["timed_out"], true, "{json:#}");
        assert_eq!(
            row(&json, name)["did"],
            "no retry before the time limit (stopped)"
        );
    }
    let why = row(&json, "wrong-weekday")["why"]
        .as_str()
        .unwrap_or_default();
    assert!(why.contains("neither backed off nor gave up"), "{why}");
    assert_eq!(
        json["summary"],
        "honours Retry-After: 10/14 (4 warn, 1 n/a); reads a past date as a long wait \
         (clock-behind, date-past); waits on a malformed Retry-After (wrong-weekday); retries \
         a used-up quota (quota)"
    );
}

/// The real urllib3 (from target/py-clients, which the test script installs) with
/// `Retry(total=3, backoff_factor=0.5, status_forcelist=[429, 503])`, as its users write it
/// (tests/matrix/python/urllib3_client.py).
#[test]
fn urllib3_honours_the_hints_it_reads_but_not_the_servers_date_nor_a_429_without_one() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let python = root.join("target/py-clients/bin/python");
    let client = root.join("tests/matrix/python/urllib3_client.py");
    let (_rt, upstream) = items();
    let dir = TempDir::new("check-urllib3");
    let url = upstream.url("/v1/items");
    let (python, client) = (python.display().to_string(), client.display().to_string());
    let args = ["--timeout", "8s", "--", &python, &client, "GET", &url];
    let (output, json) = check(&dir, &args);

    assert_eq!(output.status.code(), Some(3), "{}\n{json:#}", show(&output));
    // It waits delay-seconds and dates, and raises on a hint it cannot parse (a pass: never
    // read as zero); but it reads a date by its own clock, so the server an hour behind gets
    // a retry at once; reads Monday 6 Nov 1994 (a Sunday) leniently, as long past; and its
    // first backoff without a hint is zero.
    let mut want = all("pass");
    for name in ["clock-behind", "wrong-weekday", "no-hint", "quota"] {
        want = except(want, name, "fail");
    }
    assert_eq!(verdicts(&json), want, "{json:#}");
    for name in ["delay-429", "delay-503", "http-date"] {
        assert!(first_retry(&json, name) >= 2.0, "{json:#}");
    }
    assert!(first_retry(&json, "retry-after-ms") >= 3.0, "{json:#}");
    for name in &MALFORMED[..4] {
        assert_eq!(row(&json, name)["did"], "gave up (exited 1)", "{json:#}");
    }
    assert_eq!(
        row(&json, "clock-behind")["finding"],
        "ignores the server's Date (measures dates by its own clock)",
        "{json:#}"
    );
}

/// `holdoff check -s post -- CLIENT… URL`: the post scenario's row.
fn post(name: &str, client: &[&str]) -> (Output, Value) {
    let rt = runtime();
    let upstream = rt.block_on(TestServer::start());
    upstream.set_default("/v1/jobs", Reply::ok("queued"));
    let dir = TempDir::new(name);
    let url = upstream.url("/v1/jobs");
    let mut args = vec!["-s", "post", "--"];
    args.extend(client);
    args.push(&url);
    let (output, json) = check(&dir, &args);
    (output, json["scenarios"][0].clone())
}

#[test]
fn a_post_repeated_after_the_hint_with_an_idempotency_key_passes() {
    let (output, row) = post(
        "check-post-keyed",
        &["python3", &script("honours.py"), "POST"],
    );
    assert_eq!(output.status.code(), Some(0), "{}\n{row:#}", show(&output));
    assert_eq!(row["verdict"], "pass", "{row:#}");
    assert!(
        row["first_retry_after_s"].as_f64().unwrap_or(0.0) >= 1.0,
        "{row:#}"
    );
}

#[test]
fn a_post_repeated_without_an_idempotency_key_warns() {
    let client = ["python3", &script("honours.py"), "--no-key", "POST"];
    let (output, row) = post("check-post-blind", &client);
    assert_eq!(
        output.status.code(),
        Some(0),
        "a warning: {}\n{row:#}",
        show(&output)
    );
    assert_eq!(row["verdict"], "warn", "{row:#}");
    let why = row["why"].as_str().unwrap_or_default();
    assert!(why.contains("a hint does not make a POST safe"), "{why}");
}

#[test]
fn curl_repeats_a_post_without_a_key() {
    let (output, row) = post(
        "check-post-curl",
        &["curl", "-s", "--retry", "2", "-d", "{}"],
    );
    assert_eq!(output.status.code(), Some(0), "{}\n{row:#}", show(&output));
    assert_eq!(row["verdict"], "warn", "{row:#}");
}

#[test]
fn a_post_repeated_before_the_hint_fails() {
    let (output, row) = post(
        "check-post-naive",
        &["python3", &script("naive.py"), "POST"],
    );
    assert_eq!(output.status.code(), Some(3), "{}\n{row:#}", show(&output));
    assert_eq!(row["verdict"], "fail", "{row:#}");
}

#[test]
fn a_command_that_sends_nothing_is_not_tested() {
    let dir = TempDir::new("check-nothing");
    let (output, json) = check(&dir, &["-s", "delay-429", "-s", "no-hint", "--", "true"]);
    assert_eq!(output.status.code(), Some(4), "{}\n{json:#}", show(&output));
    let want = vec![
        ("delay-429".to_owned(), "n/a".to_owned()),
        ("no-hint".to_owned(), "n/a".to_owned()),
    ];
    assert_eq!(verdicts(&json), want, "{json:#}");
    assert!(stdout(&output).contains("honours Retry-After: 0/0 (2 n/a)"));
}

#[test]
fn a_command_not_found_exits_127() {
    let dir = TempDir::new("check-missing");
    let (output, _) = check(&dir, &["-s", "delay-429", "--", "holdoff-no-such-client"]);
    assert_eq!(output.status.code(), Some(127), "{}", show(&output));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("command not found"), "{stderr}");
    // In reverse mode too, where holdoff check starts the command itself.
    let (_rt, upstream) = items();
    let base = upstream.url("");
    let args = [
        "--upstream",
        &base,
        "-s",
        "delay-429",
        "--",
        "holdoff-no-such-client",
    ];
    let (output, _) = check(&dir, &args);
    assert_eq!(output.status.code(), Some(127), "{}", show(&output));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("command not found"), "{stderr}");
}

#[test]
fn a_client_still_running_at_the_timeout_is_stopped_and_judged() {
    let dir = TempDir::new("check-timeout");
    let (_rt, upstream) = items();
    let url = upstream.url("/v1/items");
    // One request, throttled, then a sleep far past the time limit.
    let client = format!("curl -s {url}; sleep 30");
    let (output, json) = check(
        &dir,
        &[
            "-s",
            "delay-429",
            "--timeout",
            "5s",
            "--",
            "sh",
            "-c",
            &client,
        ],
    );
    assert_eq!(output.status.code(), Some(0), "{}\n{json:#}", show(&output));
    let row = &json["scenarios"][0];
    assert_eq!(row["timed_out"], true, "{row:#}");
    assert_eq!(row["verdict"], "pass", "{row:#}");
    assert_eq!(
        row["did"], "no retry before the time limit (stopped)",
        "{row:#}"
    );
}

/// The long hints at a thirtieth (`--long-scale 30`: 3 s, 5 s and 2 min, the last stopped
/// after 5.5 s), for `honours.py` with `options`.
fn long(name: &str, options: &[&str]) -> (Output, Value) {
    let (_rt, upstream) = items();
    let dir = TempDir::new(name);
    let url = upstream.url("/v1/items");
    let mut args = vec!["--long", "--long-scale", "30", "--timeout", "5s"];
    for scenario in ["long-90", "long-150", "long-hour"] {
        args.extend(["-s", scenario]);
    }
    let script = script("honours.py");
    args.extend(["--", "python3", &script]);
    args.extend(options);
    args.push(&url);
    check(&dir, &args)
}

#[test]
fn a_client_that_caps_long_hints_fails_them_and_the_summary_names_the_cap() {
    // A cap of 2 s at a thirtieth is the 60 s cap of real SDKs; on an hour's hint (2 min at a
    // thirtieth) a retry after a sixtieth of it is no sign of a cap.
    let (output, json) = long("check-long-capped", &["--cap", "2"]);
    assert_eq!(output.status.code(), Some(3), "{}\n{json:#}", show(&output));
    let want: Vec<(String, String)> = ["long-90", "long-150", "long-hour"]
        .iter()
        .map(|name| ((*name).to_owned(), "fail".to_owned()))
        .collect();
    assert_eq!(verdicts(&json), want, "{json:#}");
    for name in ["long-90", "long-150", "long-hour"] {
        assert!((2.0..3.0).contains(&first_retry(&json, name)), "{json:#}");
    }
    assert_eq!(
        json["summary"],
        "honours Retry-After: 0/3 (3 fail); caps long hints at about 2 s (long-90, long-150); \
         retries before Retry-After permits (long-hour)"
    );
}

#[test]
fn a_client_that_waits_long_hints_or_gives_up_on_an_hour_passes_them() {
    let (output, json) = long("check-long-defers", &["--max-wait", "10"]);
    assert_eq!(output.status.code(), Some(0), "{}\n{json:#}", show(&output));
    assert_eq!(row(&json, "long-90")["verdict"], "pass", "{json:#}");
    assert!(first_retry(&json, "long-90") >= 3.0, "{json:#}");
    assert_eq!(row(&json, "long-150")["verdict"], "pass", "{json:#}");
    assert!(first_retry(&json, "long-150") >= 5.0, "{json:#}");
    assert_eq!(row(&json, "long-hour")["verdict"], "pass", "{json:#}");
    assert_eq!(row(&json, "long-hour")["did"], "gave up (exited 1)");
    assert_eq!(json["summary"], "honours Retry-After: 3/3");
}

#[test]
fn a_client_that_waits_out_an_hour_is_stopped_and_warned() {
    let (output, json) = long("check-long-waits", &[]);
    assert_eq!(output.status.code(), Some(0), "{}\n{json:#}", show(&output));
    let hour = row(&json, "long-hour");
    assert_eq!(hour["verdict"], "warn", "{json:#}");
    assert_eq!(hour["timed_out"], true, "{json:#}");
    assert!(
        hour["why"]
            .as_str()
            .unwrap_or_default()
            .contains("blocks the task"),
        "{json:#}"
    );
    // Stopped once it had shown its hand (165 s at a thirtieth), not after the hint.
    assert!(
        hour["duration_s"].as_f64().unwrap_or(f64::MAX) < 30.0,
        "{json:#}"
    );
}

/// `--parallel 4 -s no-hint` with honours.py and `options`.
fn parallel(name: &str, options: &[&str]) -> Value {
    let (_rt, upstream) = items();
    let dir = TempDir::new(name);
    let url = upstream.url("/v1/items");
    let script = script("honours.py");
    let mut args = vec!["--parallel", "4", "-s", "no-hint", "--", "python3", &script];
    args.extend(options);
    args.push(&url);
    let (output, json) = check(&dir, &args);
    assert_eq!(output.status.code(), Some(0), "{}\n{json:#}", show(&output));
    // Every copy was throttled and retried once: four retries reached the upstream.
    assert_eq!(upstream.requests_to("/v1/items").len(), 4, "{json:#}");
    json["scenarios"][0].clone()
}

#[test]
fn copies_that_back_off_the_same_second_are_a_herd() {
    let row = parallel("check-herd", &[]);
    assert_eq!(row["verdict"], "warn", "{row:#}");
    assert!(
        row["did"]
            .as_str()
            .unwrap_or_default()
            .starts_with("4 copies; 4 retried after 1.0"),
        "{row:#}"
    );
    assert!(
        row["why"]
            .as_str()
            .unwrap_or_default()
            .contains("for want of jitter"),
        "{row:#}"
    );
}

#[test]
fn copies_with_jitter_are_no_herd() {
    let row = parallel("check-jitter", &["--jitter"]);
    assert_eq!(row["verdict"], "pass", "{row:#}");
}

#[test]
fn with_a_success_answer_the_client_needs_no_upstream() {
    let dir = TempDir::new("check-success");
    // A loopback port nothing listens on: the success answer must come from the proxy.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .map(|addr| addr.port())
        .expect("a free port");
    let client = format!(
        "echo $HOLDOFF_CHECK_SCENARIO > scenario.txt; python3 {} http://127.0.0.1:{port}/v1/items \
         > answer.txt",
        script("honours.py")
    );
    let (output, json) = check(
        &dir,
        &[
            "-s",
            "delay-429",
            "--success-status",
            "201",
            "--success-header",
            "X-Answer: configured",
            "--success-body",
            r#"{"ok": true}"#,
            "--",
            "sh",
            "-c",
            &client,
        ],
    );
    assert_eq!(output.status.code(), Some(0), "{}\n{json:#}", show(&output));
    assert_eq!(
        verdicts(&json),
        [("delay-429".to_owned(), "pass".to_owned())]
    );
    let answer = std::fs::read_to_string(dir.path().join("answer.txt")).expect("the answer");
    // The JSON body, as the mock sends it: compact.
    assert_eq!(answer.trim(), r#"201 {"ok":true}"#, "{json:#}");
    // The command is told which scenario it is in.
    let scenario = std::fs::read_to_string(dir.path().join("scenario.txt")).expect("a name");
    assert_eq!(scenario.trim(), "delay-429");
}

#[test]
fn a_bad_success_header_is_a_usage_error_that_says_what_to_write() {
    let dir = TempDir::new("check-bad-header");
    let (output, _) = check(&dir, &["--success-header", "X-Answer", "--", "true"]);
    assert_eq!(output.status.code(), Some(2), "{}", show(&output));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("is not `Name: value`"), "{stderr}");
}

#[test]
fn junit_and_html_reports_hold_a_case_per_scenario() {
    let (_rt, upstream) = items();
    let dir = TempDir::new("check-reports");
    let url = upstream.url("/v1/items");
    let (output, json) = check(
        &dir,
        &[
            "-s",
            "delay-429",
            "-s",
            "malformed",
            "-s",
            "post",
            "--junit",
            "check.xml",
            "--html",
            "check.html",
            "--",
            "python3",
            &script("naive.py"),
            &url,
        ],
    );
    assert_eq!(output.status.code(), Some(3), "{}\n{json:#}", show(&output));
    let junit = std::fs::read_to_string(dir.path().join("check.xml")).expect("the JUnit file");
    assert!(junit.starts_with("<?xml"), "{junit}");
    assert!(
        junit.contains(r#"tests="3" failures="2" errors="0" skipped="1""#),
        "{junit}"
    );
    for name in ["delay-429", "malformed", "post"] {
        assert!(junit.contains(&format!(r#"name="{name}""#)), "{junit}");
    }
    assert_eq!(junit.matches("<failure ").count(), 2, "{junit}");
    assert_eq!(junit.matches("<skipped").count(), 1, "{junit}");
    let html = std::fs::read_to_string(dir.path().join("check.html")).expect("the HTML file");
    assert!(html.starts_with("<!DOCTYPE html>"), "{html}");
    for name in ["delay-429", "malformed", "post"] {
        assert!(html.contains(name), "{html}");
    }
    assert!(html.contains("honours Retry-After: 0/2"), "{html}");
    // Self-contained: nothing fetched from elsewhere.
    assert!(
        !html.contains("<script src") && !html.contains("<link"),
        "{html}"
    );
}

#[test]
fn reverse_mode_checks_a_client_that_ignores_proxies_through_its_base_url() {
    let (_rt, upstream) = items();
    let dir = TempDir::new("check-reverse");
    let base = upstream.url("");
    let script = script("honours.py");
    let scenarios = ["delay-429", "clock-behind", "malformed", "no-hint"];
    let mut args = vec!["--upstream", base.trim_end_matches('/'), "--timeout", "5s"];
    for name in scenarios {
        args.extend(["-s", name]);
    }
    // No proxy variables are set in reverse mode, and this curl would not use them anyway.
    args.extend(["--", "curl", "-s", "--noproxy", "*", "--retry", "2"]);
    args.push("{url}/v1/items");
    let (output, json) = check(&dir, &args);
    assert_eq!(output.status.code(), Some(0), "{}\n{json:#}", show(&output));
    let want: Vec<(String, String)> = scenarios
        .iter()
        .map(|name| ((*name).to_owned(), "pass".to_owned()))
        .collect();
    // curl reads the hour-behind date by its own clock, as an hour ago, and waits on it.
    assert_eq!(
        verdicts(&json),
        except(want, "clock-behind", "warn"),
        "{json:#}"
    );
    assert_eq!(row(&json, "clock-behind")["timed_out"], true, "{json:#}");
    assert!(first_retry(&json, "delay-429") >= 2.0, "{json:#}");
    assert_eq!(row(&json, "delay-429")["exit_code"], 0, "{json:#}");
    // Each retry went on to the upstream through the scenario's proxy.
    assert_eq!(upstream.requests_to("/v1/items").len(), 3, "{json:#}");

    // The command's own exit status, and HOLDOFF_CHECK_URL for a client configured by its
    // environment.
    let dir = TempDir::new("check-reverse-env");
    let client = format!("python3 {script} \"$HOLDOFF_CHECK_URL/v1/items\"");
    let args = [
        "--upstream",
        base.trim_end_matches('/'),
        "-s",
        "malformed",
        "--",
        "sh",
        "-c",
        &client,
    ];
    let (output, json) = check(&dir, &args);
    assert_eq!(output.status.code(), Some(0), "{}\n{json:#}", show(&output));
    assert_eq!(
        row(&json, "malformed")["did"],
        "gave up (exited 1)",
        "{json:#}"
    );
}

#[test]
fn reverse_mode_wants_an_http_url() {
    let dir = TempDir::new("check-reverse-bad");
    let (output, _) = check(&dir, &["--upstream", "127.0.0.1:8080", "--", "true"]);
    assert_eq!(output.status.code(), Some(2), "{}", show(&output));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("give http://HOST[:PORT][/PATH]"),
        "{stderr}"
    );
}
