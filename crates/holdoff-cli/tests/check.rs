//! `holdoff check -- CLIENT` against clients whose behaviour is known by construction: a
//! Python client that honours Retry-After (tests/check/honours.py), one that retries at
//! once whatever it is told (tests/check/naive.py), one that waits the same whatever it is
//! told (tests/check/fixed.py), and curl with and without `--retry 2`. Each calls a loopback
//! upstream the test starts, through the proxy variables `holdoff check` sets.

mod support;

use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

use holdoff_testkit::{Reply, TestServer};
use serde_json::Value;
use support::{TempDir, runtime, show};

/// The scenarios, in the order they are reported.
const SCENARIOS: [&str; 23] = [
    "delay-429",
    "delay-503",
    "too-large",
    "redirect",
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
    "ratelimit-reset",
    "backoff",
    "persistent",
    "post",
    "long-90",
    "long-150",
    "long-hour",
];

/// The scenarios run by default that a GET client meets: all but `post` and the long ones.
const GET_SCENARIOS: [&str; 19] = [
    "delay-429",
    "delay-503",
    "too-large",
    "redirect",
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
    "ratelimit-reset",
    "backoff",
    "persistent",
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
///
/// A pass the check measured twice within the machine's scheduling noise is `unreliable`:
/// neither a pass nor a fail, and only on a loaded machine (the test run's own parallel tests).
/// It is compared as the pass a quiet machine gives. No fail hides this way: noise makes a
/// retry later, never earlier.
fn verdicts(json: &Value) -> Vec<(String, String)> {
    json["scenarios"]
        .as_array()
        .map(|rows| {
            rows.iter()
                .map(|row| {
                    let verdict = match row["verdict"].as_str().unwrap_or_default() {
                        "unreliable" => "pass",
                        other => other,
                    };
                    (
                        row["scenario"].as_str().unwrap_or_default().to_owned(),
                        verdict.to_owned(),
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
    // Every scenario, then the one the suite adds by itself.
    assert_eq!(text.lines().count(), SCENARIOS.len() + 1, "{text}");
    for (line, name) in text.lines().zip(SCENARIOS.iter().chain(&["reads-hint"])) {
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
fn a_client_that_honours_retry_after_passes_every_scenario_it_retried_in() {
    let (_rt, upstream) = items();
    let dir = TempDir::new("check-honours");
    let url = upstream.url("/v1/items");
    let (output, json) = check(&dir, &["--", "python3", &script("honours.py"), &url]);

    assert_eq!(output.status.code(), Some(0), "{}\n{json:#}", show(&output));
    // It gives up on a malformed hint (the wrong weekday's too) and on a used-up quota, which
    // is right there; everywhere else it retried, and passed.
    let mut want = all("pass");
    for name in MALFORMED {
        want = except(want, name, "gave up");
    }
    assert_eq!(verdicts(&json), want, "{json:#}");
    for name in ["delay-429", "delay-503", "too-large", "http-date"] {
        assert!(first_retry(&json, name) >= 2.0, "{json:#}");
        assert_eq!(row(&json, name)["retries"], 1, "{json:#}");
    }
    // The server's clock is an hour behind: 3 s by its Date is 3 s, not an hour ago.
    assert!(first_retry(&json, "clock-behind") >= 3.0, "{json:#}");
    // Beside retry-after-ms: 1500, it waited Retry-After's 3 s; the why says only that.
    assert!(first_retry(&json, "retry-after-ms") >= 3.0, "{json:#}");
    let why = row(&json, "retry-after-ms")["why"]
        .as_str()
        .unwrap_or_default();
    assert!(why.ends_with("at or after both hints"), "{why}");
    // A date in the past permits a retry at once, and it came at once.
    assert!(
        (0.0..1.0).contains(&first_retry(&json, "date-past")),
        "{json:#}"
    );
    // The second throttle's hint was waited out too: two retries.
    assert_eq!(row(&json, "second-throttle")["retries"], 2, "{json:#}");
    assert!(first_retry(&json, "second-throttle") >= 1.0, "{json:#}");
    for name in MALFORMED {
        assert_eq!(
            row(&json, name)["did"],
            "gave up (exited 1: malformed Retry-After: giving up)",
            "{json:#}"
        );
        assert_eq!(row(&json, name)["retries"], 0, "{json:#}");
        assert_eq!(
            row(&json, name)["stderr_tail"],
            serde_json::json!(["malformed Retry-After: giving up"]),
            "{json:#}"
        );
    }
    assert_eq!(
        row(&json, "quota")["why"],
        "gave up, which is right: the quota is used up, and waiting won't help"
    );
    // GitHub's reset, with no Retry-After: it waited until the reset.
    assert!(first_retry(&json, "ratelimit-reset") >= 2.0, "{json:#}");
    // Three throttles without a hint: 1 s, then 2 s, then it gave up.
    let waits = row(&json, "backoff")["waits_s"].clone();
    assert_eq!(waits.as_array().map(Vec::len), Some(2), "{json:#}");
    assert!(
        waits[1].as_f64() > waits[0].as_f64().map(|w| w * 1.5),
        "{json:#}"
    );
    // Throttled every time: two retries, then it stopped and said so.
    let persistent = row(&json, "persistent")["why"].as_str().unwrap_or_default();
    assert!(
        persistent.starts_with(
            "stopped after 2 retries over 2.0 s, none early; then exited 1: \
                                HTTP 429 after 3 attempts: giving up"
        ),
        "{persistent}"
    );
    // No wait exceeded its hint by much: no reads-hint scenario was needed.
    assert!(row(&json, "reads-hint").is_null(), "{json:#}");
    // The throttles were the proxy's; every retry that came reached the upstream (but the ones
    // a second throttle answered), and so did the GET of the post scenario, which throttles
    // only a POST (a scenario measured again adds its own).
    assert!(upstream.requests_to("/v1/items").len() >= 11, "{json:#}");
    let table = stdout(&output);
    assert!(table.starts_with("SCENARIO "), "{table}");
    // It followed the redirect once its hint had passed.
    assert!(first_retry(&json, "redirect") >= 2.0, "{json:#}");
    let did = row(&json, "redirect")["did"].as_str().unwrap_or_default();
    assert!(did.starts_with("followed after 2."), "{json:#}");
    let summary = "honours Retry-After in 13 of 13 scenarios where it retried; gave up in 6 \
                   (rightly in quota); 1 n/a";
    assert!(table.ends_with(&format!("{summary}\n")), "{table}");
    assert_eq!(json["summary"], summary);
    assert_eq!(
        row(&json, "post")["why"],
        "the client sent no POST: nothing was tested"
    );
    // The table fits 100 columns.
    for line in table
        .lines()
        .filter(|line| !line.contains("honours Retry-After"))
    {
        assert!(line.chars().count() <= 100, "{line}");
    }
}

#[test]
fn a_client_that_retries_at_once_fails_every_hint_and_warns_where_rfc_9110_asks_no_wait() {
    let (_rt, upstream) = items();
    let dir = TempDir::new("check-naive");
    let url = upstream.url("/v1/items");
    let (output, json) = check(&dir, &["--", "python3", &script("naive.py"), &url]);

    assert_eq!(output.status.code(), Some(3), "{}\n{json:#}", show(&output));
    // A date in the past permits a retry at once: at once is right. An hour-behind server's
    // date read by the client's own clock, no backoff without a hint (or on a used-up quota),
    // and a retry before a reset time are warnings: RFC 9110 names no clock for a date, and
    // asks for no wait without Retry-After. A wrong weekday read at once is what a robust
    // parser does, but this client reads malformed hints as zero too: a warning. It does not
    // retry a 413.
    let mut want = all("fail");
    want = except(want, "date-past", "pass");
    want = except(want, "too-large", "gave up");
    for name in [
        "redirect",
        "clock-behind",
        "wrong-weekday",
        "no-hint",
        "quota",
        "ratelimit-reset",
        "backoff",
    ] {
        want = except(want, name, "warn");
    }
    assert_eq!(verdicts(&json), want, "{json:#}");
    for name in GET_SCENARIOS.iter().filter(|name| **name != "too-large") {
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
        "honours Retry-After in 1 of 18 scenarios where it retried (10 fail, 7 warn); gave up \
         in 1; 1 n/a; retries before Retry-After permits (delay-429, delay-503, http-date, \
         second-throttle, retry-after-ms, persistent, clock-behind); reads a malformed \
         Retry-After as zero (malformed, malformed-negative, malformed-decimal, \
         malformed-empty, wrong-weekday); follows a redirect before its Retry-After \
         (redirect); does not back off without a hint (no-hint, backoff); hammers a used-up \
         quota (quota); retries before X-RateLimit-Reset (ratelimit-reset)",
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
    // curl waits as long as Retry-After says (seconds or a date) and backs off 1 s, then 2 s,
    // after a malformed hint or none; it retries a used-up quota all the same, does not read
    // GitHub's reset time, does not retry a 413, and a date in the past (by its own clock, so
    // an hour-behind server's too, and a wrong weekday's, read leniently) it waits for past
    // the time limit.
    let mut want = all("pass");
    for name in [
        "clock-behind",
        "date-past",
        "wrong-weekday",
        "quota",
        "ratelimit-reset",
    ] {
        want = except(want, name, "warn");
    }
    want = except(want, "too-large", "gave up");
    // Without -L, curl does not follow the redirect.
    want = except(want, "redirect", "gave up");
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
    assert_eq!(row(&json, "backoff")["verdict"], "pass", "{json:#}");
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
    assert_eq!(
        json["summary"],
        "honours Retry-After in 12 of 14 scenarios where it retried (2 warn); gave up in 2; no \
         retry before the time limit in 3; 1 n/a; reads a past date as a long wait \
         (clock-behind, date-past, wrong-weekday); retries a used-up quota (quota); retries \
         before X-RateLimit-Reset (ratelimit-reset)"
    );
}

#[test]
fn curl_without_retry_never_retried_and_is_not_tested() {
    let (_rt, upstream) = items();
    let dir = TempDir::new("check-curl-no-retry");
    let url = upstream.url("/v1/items");
    let (output, json) = check(&dir, &["--", "curl", "-s", &url]);

    assert_eq!(output.status.code(), Some(4), "{}\n{json:#}", show(&output));
    // It made no retry anywhere: no scenario says it honours anything; giving up on the quota
    // is right, and said so.
    let mut want = all("gave up");
    want = except(want, "quota", "pass");
    assert_eq!(verdicts(&json), want, "{json:#}");
    assert_eq!(
        json["summary"],
        "never retried: is retrying on?; gave up in 19 (rightly in quota); 1 n/a"
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("--allow-no-retry"), "{stderr}");

    // Accepted when never retrying is what the client is meant to do.
    let (output, _) = check(
        &dir,
        &[
            "--allow-no-retry",
            "-s",
            "delay-429",
            "--",
            "curl",
            "-s",
            &url,
        ],
    );
    assert_eq!(output.status.code(), Some(0), "{}", show(&output));
}

#[test]
fn a_command_that_fails_after_the_throttle_shows_its_last_words() {
    let (_rt, upstream) = items();
    let dir = TempDir::new("check-crash");
    let url = upstream.url("/v1/items");
    let client = format!(
        "curl -s {url}; echo 'NameError: uninitialized constant Faraday::Retry' >&2; exit 1"
    );
    let (output, json) = check(
        &dir,
        &[
            "-s",
            "delay-429",
            "--html",
            "check.html",
            "--",
            "sh",
            "-c",
            &client,
        ],
    );

    assert_eq!(output.status.code(), Some(4), "{}\n{json:#}", show(&output));
    let row = row(&json, "delay-429");
    assert_eq!(row["verdict"], "gave up", "{row:#}");
    assert_eq!(
        row["did"],
        "gave up (exited 1: NameError: uninitialized constant Faraday::Retry)"
    );
    assert_eq!(
        row["stderr_tail"],
        serde_json::json!(["NameError: uninitialized constant Faraday::Retry"])
    );
    let html = std::fs::read_to_string(dir.path().join("check.html")).expect("the HTML file");
    assert!(html.contains("last lines of stderr"), "{html}");
    assert!(
        html.contains("uninitialized constant Faraday::Retry"),
        "{html}"
    );
}

#[test]
fn a_fixed_wait_fails_the_hint_twice_its_wait_and_a_reader_passes_it() {
    let (_rt, upstream) = items();
    let url = upstream.url("/v1/items");
    let scenarios = ["-s", "delay-429", "-s", "http-date"];
    // A client that waits 4 s whatever the hint: both waits exceed their hints (2 s and 3 s),
    // so the suite sends a hint of twice that, 8 s, and the fixed wait comes 4 s early.
    let dir = TempDir::new("check-fixed");
    let mut args = scenarios.to_vec();
    let fixed = script("fixed.py");
    args.extend(["--", "python3", &fixed, "--wait", "4", &url]);
    let (output, json) = check(&dir, &args);
    assert_eq!(output.status.code(), Some(3), "{}\n{json:#}", show(&output));
    let reads = row(&json, "reads-hint");
    assert_eq!(reads["verdict"], "fail", "{json:#}");
    assert_eq!(
        reads["sent"],
        "429, Retry-After: 8 (twice its longest wait)"
    );
    assert!(
        json["summary"]
            .as_str()
            .unwrap_or_default()
            .contains("does not read Retry-After: its wait is the same whatever the hint"),
        "{json:#}"
    );
    // Its passes say what was measured, never that it read the date.
    let why = row(&json, "http-date")["why"].as_str().unwrap_or_default();
    assert!(why.starts_with("retried after 4.0"), "{why}");

    // A client that waits at least 4 s, longer when the hint says: the same first waits, but
    // it waits out the 8 s.
    let dir = TempDir::new("check-at-least");
    let mut args = scenarios.to_vec();
    let honours = script("honours.py");
    args.extend(["--", "python3", &honours, "--at-least", "4", &url]);
    let (output, json) = check(&dir, &args);
    assert_eq!(output.status.code(), Some(0), "{}\n{json:#}", show(&output));
    let reads = row(&json, "reads-hint");
    assert_eq!(reads["verdict"], "pass", "{json:#}");
    assert!(
        reads["first_retry_after_s"].as_f64().unwrap_or(0.0) >= 8.0,
        "{json:#}"
    );
    assert!(
        reads["why"]
            .as_str()
            .unwrap_or_default()
            .contains("it reads Retry-After"),
        "{json:#}"
    );
}

/// The real urllib3 (from target/py-clients, which the test script installs) with
/// `Retry(total=3, backoff_factor=0.5, status_forcelist=[429, 503])`, as its users write it
/// (tests/matrix/python/urllib3_client.py).
#[test]
fn urllib3_honours_the_hints_it_reads_and_is_warned_for_the_servers_date_and_no_backoff() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let python = root.join("target/py-clients/bin/python");
    let client = root.join("tests/matrix/python/urllib3_client.py");
    let (_rt, upstream) = items();
    let dir = TempDir::new("check-urllib3");
    let url = upstream.url("/v1/items");
    let (python, client) = (python.display().to_string(), client.display().to_string());
    let args = ["--timeout", "8s", "--", &python, &client, "GET", &url];
    let (output, json) = check(&dir, &args);

    assert_eq!(output.status.code(), Some(0), "{}\n{json:#}", show(&output));
    // It waits delay-seconds and dates (on a 413 too), and raises on a hint it cannot parse
    // (giving up: never read as zero); but it reads a date by its own clock, so the server an
    // hour behind gets a retry at once (a warning: RFC 9110 names no clock); reads Monday
    // 6 Nov 1994 (a Sunday) leniently, as long past, and retries at once, as a robust parser
    // may; its first backoff without a hint is zero (a warning, as the judge says), on a
    // used-up quota too; it does not read GitHub's reset time, and follows a redirect at once
    // (its Retry-After is respected only on 413, 429 and 503).
    let mut want = all("pass");
    for name in [
        "redirect",
        "clock-behind",
        "no-hint",
        "quota",
        "ratelimit-reset",
        "backoff",
    ] {
        want = except(want, name, "warn");
    }
    for name in &MALFORMED[..4] {
        want = except(want, name, "gave up");
    }
    assert_eq!(verdicts(&json), want, "{json:#}");
    for name in ["delay-429", "delay-503", "too-large", "http-date"] {
        assert!(first_retry(&json, name) >= 2.0, "{json:#}");
    }
    assert!(first_retry(&json, "retry-after-ms") >= 3.0, "{json:#}");
    assert_eq!(
        row(&json, "malformed")["did"],
        "gave up (exited 1: Invalid Retry-After header: soon)",
        "{json:#}"
    );
    assert_eq!(
        row(&json, "clock-behind")["finding"],
        "reads dates by its own clock: a server whose clock is behind sees early retries",
        "{json:#}"
    );
    // Throttled every time, it stopped after Retry(total=3), never early.
    assert_eq!(row(&json, "persistent")["retries"], 3, "{json:#}");
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
    assert!(
        stdout(&output)
            .ends_with("not tested: no request reached the proxy in any scenario; 2 n/a\n"),
        "{}",
        show(&output)
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("--upstream"), "{stderr}");
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
    // No retry at all, so nothing was shown of how it honours a hint: not tested.
    assert_eq!(output.status.code(), Some(4), "{}\n{json:#}", show(&output));
    let row = &json["scenarios"][0];
    assert_eq!(row["timed_out"], true, "{row:#}");
    assert_eq!(row["verdict"], "warn", "{row:#}");
    assert_eq!(
        row["finding"], "waits far longer than the hint asks",
        "{row:#}"
    );
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
    // One cap, named once, with its measured value: the wait stopped growing at 2 s.
    assert_eq!(
        json["summary"],
        "honours Retry-After in 0 of 3 scenarios where it retried (3 fail); caps long hints at \
         about 2 s (long-90, long-150, long-hour)"
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
    assert_eq!(
        row(&json, "long-hour")["did"],
        "gave up (exited 1: told to wait 120 s: giving up, to try later)"
    );
    assert_eq!(
        json["summary"],
        "honours Retry-After in 2 of 2 scenarios where it retried; gave up in 1 (rightly in \
         long-hour)"
    );
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

/// `--parallel 8 -s no-hint` with honours.py and `options`: eight copies, enough to tell a
/// jitter of a tenth of the wait from none.
fn parallel(name: &str, options: &[&str]) -> Value {
    let (_rt, upstream) = items();
    let dir = TempDir::new(name);
    let url = upstream.url("/v1/items");
    let script = script("honours.py");
    let mut args = vec!["--parallel", "8", "-s", "no-hint", "--", "python3", &script];
    args.extend(options);
    args.push(&url);
    let (output, json) = check(&dir, &args);
    assert_eq!(output.status.code(), Some(0), "{}\n{json:#}", show(&output));
    // Every copy was throttled and retried once: eight retries reached the upstream.
    assert_eq!(upstream.requests_to("/v1/items").len(), 8, "{json:#}");
    json["scenarios"][0].clone()
}

/// Eight copies that back off 4 s flat. At 4 s, a jitter of a tenth of the wait would spread
/// them over 80 ms or more but once in a hundred runs, farther than the test run's own load
/// spreads copies without it.
#[test]
fn copies_that_back_off_the_same_second_are_a_herd() {
    let row = parallel("check-herd", &["--at-least", "4"]);
    assert!(
        row["did"]
            .as_str()
            .unwrap_or_default()
            .starts_with("8 copies; 8 retried after 4.0"),
        "{row:#}"
    );
    let why = row["why"].as_str().unwrap_or_default();
    // A herd is a warning; on a machine too loaded to tell a small jitter from none (the test
    // run's own parallel tests) the check says so instead, and never calls it a pass.
    match row["verdict"].as_str() {
        Some("warn") => assert!(why.contains("for want of jitter"), "{row:#}"),
        Some("unreliable") => assert!(
            [
                "cannot be told",
                "scheduling noise allows",
                "waited for a CPU"
            ]
            .iter()
            .any(|reason| why.contains(reason)),
            "{row:#}"
        ),
        _ => panic!("a herd is a warning: {row:#}"),
    }
}

/// Copies with a jitter of up to 0.3 s on a 1 s backoff: their middle six spread less than
/// the 20 ms that tells a jitter about once in a hundred thousand runs. They pass, or, when
/// the test run's own load crowds the cores, are unreliable: never a herd.
#[test]
fn copies_with_jitter_are_no_herd() {
    let row = parallel("check-jitter", &["--jitter-up-to", "0.3"]);
    let why = row["why"].as_str().unwrap_or_default();
    match row["verdict"].as_str() {
        Some("pass") => assert!(why.starts_with("retried after 1."), "{row:#}"),
        Some("unreliable") => assert!(why.contains("waited for a CPU"), "{row:#}"),
        _ => panic!("copies with jitter are no herd: {row:#}"),
    }
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
        junit.contains(r#"tests="3" disabled="1" errors="0" failures="2""#),
        "{junit}"
    );
    assert!(junit.contains(r#"skipped="1">"#), "{junit}");
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
    assert!(
        html.contains("honours Retry-After in 0 of 2 scenarios where it retried (2 fail)"),
        "{html}"
    );
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
    // Each retry went on to the upstream through the scenario's proxy (and each of a
    // scenario measured again).
    assert!(upstream.requests_to("/v1/items").len() >= 3, "{json:#}");

    // The command's own exit status, and HOLDOFF_CHECK_URL for a client configured by its
    // environment.
    let dir = TempDir::new("check-reverse-env");
    let client = format!("python3 {script} \"$HOLDOFF_CHECK_URL/v1/items\"");
    let args = [
        "--upstream",
        base.trim_end_matches('/'),
        "--allow-no-retry",
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
        "gave up (exited 1: malformed Retry-After: giving up)",
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

/// Issue 37: SIGTERM to `holdoff check` outside a terminal stops every scenario, judges what
/// each did until then, writes the JSON report, removes its temporary folder and exits 143.
#[test]
fn sigterm_stops_every_scenario_writes_what_was_measured_and_cleans_up() {
    let dir = TempDir::new("check-sigterm");
    let tmp = dir.path().join("tmp");
    std::fs::create_dir(&tmp).expect("a TMPDIR");
    let json = dir.path().join("check.json");
    let child = Command::new(assert_cmd::cargo::cargo_bin("holdoff"))
        .arg("check")
        .arg("--json")
        .arg(&json)
        .args(["-j", "2", "--", "sh", "-c", "sleep 30"])
        .env("TMPDIR", &tmp)
        .current_dir(dir.path())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start holdoff check");
    // Its scenarios' proxies and clients are running once their folders appear.
    let running = |tmp: &std::path::Path| {
        std::fs::read_dir(tmp)
            .into_iter()
            .flatten()
            .flatten()
            .any(|entry| std::fs::read_dir(entry.path()).is_ok_and(|mut d| d.next().is_some()))
    };
    for _ in 0..300 {
        if running(&tmp) {
            break;
        }
        std::thread::park_timeout(std::time::Duration::from_millis(50));
    }
    assert!(running(&tmp), "no scenario started");
    let status = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .expect("run kill");
    assert!(status.success());
    let output = child.wait_with_output().expect("wait for holdoff check");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(143), "{stderr}");
    assert!(stderr.contains("holdoff: stopped by SIGTERM: "), "{stderr}");
    let report: Value =
        serde_json::from_str(&std::fs::read_to_string(&json).expect("the JSON")).expect("JSON");
    let judged = report["scenarios"].as_array().map_or(0, Vec::len);
    assert!(judged >= 1, "{report:#}");
    assert_eq!(
        std::fs::read_dir(&tmp).expect("TMPDIR").count(),
        0,
        "the temporary folder is removed"
    );
}

/// Issue 37: a client that sends nothing through the proxy in the first round of scenarios
/// is not made to wait out every other scenario (`check -- sleep 200` took 240 s).
#[test]
fn a_client_that_sends_nothing_in_the_first_round_ends_the_check() {
    let dir = TempDir::new("check-first-round");
    let (output, json) = check(
        &dir,
        &[
            "-j",
            "1",
            "-s",
            "delay-429",
            "-s",
            "delay-503",
            "-s",
            "no-hint",
            "--",
            "true",
        ],
    );
    assert_eq!(output.status.code(), Some(4), "{}\n{json:#}", show(&output));
    let ran = json["scenarios"].as_array().map_or(0, Vec::len);
    assert!((1..3).contains(&ran), "{ran} scenarios ran: {json:#}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("the client sent no request in the first")
            && stderr.contains("were not run"),
        "{stderr}"
    );
}
