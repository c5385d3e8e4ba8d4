//! The built-in presets, run by the real binary: `holdoff proxy --preset NAME`, re-pointed at
//! a test upstream on loopback with `-u`, driven by Python's http.client. Each test checks the
//! shape the preset's vendor documents: statuses, header names and values, body fields, that a
//! rate limit refuses after N and that a vendor without Retry-After gets none.
//!
//! Error presets run with `-f 100` (every request fails) and a fixed `--seed`, so a test sees
//! every response a preset draws from. Rate-limit presets run from their printed text with the
//! window widened to ten hours, so that no window ends while a test counts.

mod support;

use std::collections::HashSet;
use std::process::Command;
use std::time::UNIX_EPOCH;

use holdoff_config::preset::PRESETS;
use holdoff_testkit::TestServer;
use serde_json::Value;
use support::{Proxy, TempDir, runtime, show};

/// Watches every plain-HTTP URL on loopback, whatever its port.
const WATCH: &str = "http://127.0.0.1:*/*";

/// GETs each URL in `argv[2:]` through the proxy at `argv[1]` on one keep-alive connection,
/// and prints one JSON object per answer; a connection dropped without an answer is status 0.
const CLIENT: &str = r#"
import http.client, json, sys
host, port = sys.argv[1].rsplit(":", 1)
def connect():
    return http.client.HTTPConnection(host, int(port), timeout=30)
conn = connect()
answers = []
for url in sys.argv[2:]:
    try:
        conn.request("GET", url)
        response = conn.getresponse()
        body = response.read().decode("utf-8", "replace")
        headers = {name.lower(): value for name, value in response.getheaders()}
        answers.append({"status": response.status, "headers": headers, "body": body})
    except (ConnectionError, http.client.HTTPException) as err:
        answers.append({"status": 0, "headers": {}, "body": type(err).__name__})
        conn.close()
        conn = connect()
print(json.dumps(answers))
"#;

/// One answer the client got.
#[derive(Debug)]
struct Answer {
    status: u16,
    headers: serde_json::Map<String, Value>,
    body: String,
}

impl Answer {
    /// The header `name` (lowercase), if sent.
    fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(Value::as_str)
    }

    /// The header `name`, which must be there.
    fn must(&self, name: &str) -> &str {
        self.header(name)
            .unwrap_or_else(|| panic!("no {name} header in {self:#?}"))
    }

    /// `Retry-After` as whole seconds.
    fn retry_after(&self) -> u64 {
        let value = self.must("retry-after");
        value
            .parse()
            .unwrap_or_else(|_| panic!("Retry-After {value:?} is not delay-seconds"))
    }

    /// The body as JSON.
    fn json(&self) -> Value {
        serde_json::from_str(&self.body)
            .unwrap_or_else(|err| panic!("the body is not JSON ({err}): {self:#?}"))
    }
}

/// The venv's python, which scripts/test installs.
fn python() -> String {
    let python =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/py-clients/bin/python");
    assert!(
        python.is_file(),
        "{} is missing: run ./scripts/test, which creates it",
        python.display()
    );
    python.display().to_string()
}

/// GETs `paths` of `upstream` through `proxy`, in order, from one Python process (one client).
fn get(proxy: &Proxy, upstream: &TestServer, paths: &[String]) -> Vec<Answer> {
    let urls: Vec<String> = paths.iter().map(|path| upstream.url(path)).collect();
    let output = Command::new(python())
        .args(["-c", CLIENT, &proxy.addr.to_string()])
        .args(&urls)
        .output()
        .expect("run python");
    assert!(output.status.success(), "{}", show(&output));
    let answers: Vec<Value> = serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|err| panic!("{err}: {}", show(&output)));
    answers
        .into_iter()
        .map(|answer| Answer {
            status: answer["status"]
                .as_u64()
                .and_then(|s| u16::try_from(s).ok())
                .unwrap_or(0),
            headers: answer["headers"].as_object().cloned().unwrap_or_default(),
            body: answer["body"].as_str().unwrap_or_default().to_owned(),
        })
        .collect()
}

/// `/r/0` … `/r/{n-1}`: a URL each, so that the judge never takes one for a retry of another.
fn paths(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("/r/{i}")).collect()
}

/// `holdoff proxy --preset NAME -u WATCH --seed 7 EXTRA…`, with every request failing.
fn failing(name: &str, extra: &[&str]) -> Proxy {
    let mut args = vec!["--preset", name, "-u", WATCH, "--seed", "7", "-f", "100"];
    args.extend_from_slice(extra);
    Proxy::start(&args)
}

/// `holdoff CONFIG ARGS…`: stdout, after checking it succeeded.
fn holdoff_config(dir: &TempDir, args: &[&str]) -> String {
    let output = Command::new(assert_cmd::cargo::cargo_bin("holdoff"))
        .arg("config")
        .args(args)
        .current_dir(dir.path())
        .output()
        .expect("run holdoff");
    assert!(output.status.success(), "{}", show(&output));
    String::from_utf8(output.stdout).expect("UTF-8")
}

mod listing {
    use super::*;

    /// What the brief for the presets asked for, by name; the old names keep working.
    const EXPECTED: [&str; 17] = [
        "throttle",
        "openai",
        "openai-tokens",
        "azure-openai",
        "anthropic",
        "github",
        "github-models",
        "graph",
        "graph-rate-limit",
        "apim",
        "stripe",
        "twilio",
        "postmark",
        "resend",
        "paypal",
        "flaky",
        "degradation",
    ];

    #[test]
    fn lists_every_preset_on_a_line_with_its_description() {
        let dir = TempDir::new("preset-list");
        let listed = holdoff_config(&dir, &["preset"]);
        let lines: Vec<&str> = listed.lines().collect();
        assert_eq!(lines.len(), PRESETS.len(), "{listed}");
        for ((name, description), line) in PRESETS.iter().zip(&lines) {
            let (first, rest) = line.split_once(' ').expect("a name, then the description");
            assert_eq!(first, *name, "{listed}");
            assert_eq!(rest.trim_start(), *description, "{listed}");
        }
        let names: Vec<&str> = PRESETS.iter().map(|(name, _)| *name).collect();
        assert_eq!(names, EXPECTED);
    }

    #[test]
    fn prints_every_preset_as_a_file_that_validates() {
        let dir = TempDir::new("preset-validate");
        for name in EXPECTED {
            let text = holdoff_config(&dir, &["preset", name]);
            assert!(
                text.starts_with(&format!("// holdoff preset `{name}`: ")),
                "{text}"
            );
            let file = format!("{name}.json");
            dir.write(&file, &text);
            let summary = holdoff_config(&dir, &["validate", &file]);
            assert!(
                summary.starts_with(&format!("{file}: valid — ")),
                "{summary}"
            );
        }
    }
}

mod errors {
    use super::*;

    #[test]
    fn openai_answers_rate_limit_exceeded_for_requests_or_tokens_with_matching_waits() {
        let rt = runtime();
        let upstream = rt.block_on(TestServer::start());
        let proxy = failing("openai", &[]);
        let answers = get(&proxy, &upstream, &paths(16));
        let mut kinds = HashSet::new();
        for answer in &answers {
            assert_eq!(answer.status, 429, "{answer:#?}");
            let body = answer.json();
            let error = &body["error"];
            assert_eq!(error["code"], "rate_limit_exceeded");
            assert_eq!(error["param"], Value::Null);
            let kind = error["type"].as_str().expect("a type").to_owned();
            let wait = answer.retry_after();
            // The exhausted limit's reset and the message say the same wait as Retry-After.
            assert_eq!(answer.must(&format!("x-ratelimit-remaining-{kind}")), "0");
            assert_eq!(
                answer.must(&format!("x-ratelimit-reset-{kind}")),
                format!("{wait}s")
            );
            let message = error["message"].as_str().expect("a message");
            assert!(
                message.contains(&format!("Please try again in {wait}s.")),
                "{message}"
            );
            for name in ["limit-requests", "limit-tokens", "remaining-requests"] {
                answer.must(&format!("x-ratelimit-{name}"));
            }
            kinds.insert(kind);
        }
        assert_eq!(kinds, HashSet::from(["requests".into(), "tokens".into()]));
        assert!(upstream.requests().is_empty(), "the proxy answered");
        drop(proxy);
    }

    #[test]
    fn openai_fails_about_one_request_in_four() {
        let rt = runtime();
        let upstream = rt.block_on(TestServer::start());
        let proxy = Proxy::start(&["--preset", "openai", "-u", WATCH, "--seed", "7"]);
        let answers = get(&proxy, &upstream, &paths(80));
        let failed = answers.iter().filter(|a| a.status == 429).count();
        assert!((8..=32).contains(&failed), "{failed} of 80 failed");
        assert!(answers.iter().all(|a| matches!(a.status, 200 | 429)));
        assert_eq!(upstream.requests().len(), 80 - failed);
        drop(proxy);
    }

    #[test]
    fn azure_openai_sends_retry_after_and_retry_after_ms_that_agree() {
        let rt = runtime();
        let upstream = rt.block_on(TestServer::start());
        let proxy = failing("azure-openai", &[]);
        let mut waits = HashSet::new();
        for answer in get(&proxy, &upstream, &paths(12)) {
            assert_eq!(answer.status, 429);
            let wait = answer.retry_after();
            let ms: u64 = answer.must("retry-after-ms").parse().expect("milliseconds");
            assert!(
                ms <= wait * 1000 && ms > (wait - 1) * 1000,
                "{wait} s, {ms} ms"
            );
            let body = answer.json();
            assert_eq!(body["error"]["code"], "429");
            let message = body["error"]["message"].as_str().expect("a message");
            assert!(
                message.contains(&format!("Please retry after {wait} seconds.")),
                "{message}"
            );
            let exhausted = if message.contains("token rate limit") {
                "x-ratelimit-remaining-tokens"
            } else {
                "x-ratelimit-remaining-requests"
            };
            assert_eq!(answer.must(exhausted), "0");
            waits.insert(wait);
        }
        assert_eq!(waits, HashSet::from([2, 8]));
        drop(proxy);
    }

    #[test]
    fn anthropic_answers_rate_limit_error_with_retry_after_and_overloaded_without() {
        let rt = runtime();
        let upstream = rt.block_on(TestServer::start());
        let proxy = failing("anthropic", &[]);
        let mut statuses = HashSet::new();
        for answer in get(&proxy, &upstream, &paths(16)) {
            let body = answer.json();
            assert_eq!(body["type"], "error");
            assert_eq!(body["request_id"], answer.must("request-id"));
            match answer.status {
                429 => {
                    assert_eq!(body["error"]["type"], "rate_limit_error");
                    assert!((2..=8).contains(&answer.retry_after()));
                    assert_eq!(answer.must("anthropic-ratelimit-requests-remaining"), "0");
                    for name in ["requests-limit", "tokens-limit", "tokens-remaining"] {
                        answer.must(&format!("anthropic-ratelimit-{name}"));
                    }
                }
                529 => {
                    assert_eq!(body["error"]["type"], "overloaded_error");
                    assert_eq!(answer.header("retry-after"), None);
                }
                other => panic!("status {other}: {answer:#?}"),
            }
            assert!(body["error"]["message"].is_string());
            statuses.insert(answer.status);
        }
        assert_eq!(statuses, HashSet::from([429, 529]));
        drop(proxy);
    }

    #[test]
    fn graph_answers_429_503_and_504_with_graph_bodies() {
        let rt = runtime();
        let upstream = rt.block_on(TestServer::start());
        let proxy = failing("graph", &[]);
        let mut statuses = HashSet::new();
        for answer in get(&proxy, &upstream, &paths(20)) {
            let body = answer.json();
            let code = &body["error"]["code"];
            assert!(body["error"]["innerError"].is_object(), "{body}");
            match answer.status {
                429 => {
                    assert_eq!(code, "TooManyRequests");
                    assert!((2..=5).contains(&answer.retry_after()));
                }
                503 => {
                    assert_eq!(code, "serviceNotAvailable");
                    assert!((2..=5).contains(&answer.retry_after()));
                }
                504 => {
                    assert_eq!(code, "generalException");
                    assert_eq!(answer.header("retry-after"), None);
                }
                other => panic!("status {other}: {answer:#?}"),
            }
            statuses.insert(answer.status);
        }
        assert_eq!(statuses, HashSet::from([429, 503, 504]));
        drop(proxy);
    }

    #[test]
    fn flaky_answers_503_with_retry_after_or_resets_the_connection() {
        let rt = runtime();
        let upstream = rt.block_on(TestServer::start());
        let proxy = failing("flaky", &[]);
        let mut statuses = HashSet::new();
        for answer in get(&proxy, &upstream, &paths(12)) {
            match answer.status {
                503 => assert!((2..=5).contains(&answer.retry_after())),
                0 => {}
                other => panic!("status {other}: {answer:#?}"),
            }
            statuses.insert(answer.status);
        }
        assert_eq!(statuses, HashSet::from([0, 503]));
        drop(proxy);
    }

    /// The vendors that document no Retry-After: their 429 and its body, and none sent.
    fn without_retry_after(name: &str, check: impl Fn(&Answer, &Value)) {
        let rt = runtime();
        let upstream = rt.block_on(TestServer::start());
        let proxy = failing(name, &[]);
        for answer in get(&proxy, &upstream, &paths(4)) {
            assert_eq!(answer.status, 429, "{answer:#?}");
            for header in [
                "retry-after",
                "retry-after-ms",
                "ratelimit",
                "x-ratelimit-reset",
            ] {
                assert_eq!(answer.header(header), None, "{name} sent {header}");
            }
            check(&answer, &answer.json());
        }
        drop(proxy);
    }

    #[test]
    fn stripe_answers_rate_limit_without_retry_after() {
        without_retry_after("stripe", |answer, body| {
            assert_eq!(body["error"]["code"], "rate_limit");
            assert_eq!(body["error"]["type"], "invalid_request_error");
            assert!(body["error"]["doc_url"].is_string());
            let reason = answer.must("stripe-rate-limited-reason");
            assert!(["global-rate", "endpoint-concurrency"].contains(&reason));
        });
    }

    #[test]
    fn twilio_answers_error_20429_without_retry_after() {
        without_retry_after("twilio", |_, body| {
            assert_eq!(body["code"], 20429);
            assert_eq!(body["status"], 429);
            assert_eq!(
                body["more_info"],
                "https://www.twilio.com/docs/errors/20429"
            );
        });
    }

    #[test]
    fn postmark_answers_429_without_retry_after() {
        without_retry_after("postmark", |_, body| {
            assert!(body["Message"].is_string(), "{body}");
        });
    }

    #[test]
    fn paypal_answers_rate_limit_reached_without_retry_after() {
        without_retry_after("paypal", |answer, body| {
            assert_eq!(body["name"], "RATE_LIMIT_REACHED");
            assert_eq!(
                body["message"],
                "Too many requests. Blocked due to rate limiting."
            );
            assert_eq!(body["debug_id"], answer.must("paypal-debug-id"));
            assert_eq!(body["links"][0]["rel"], "information_link");
        });
    }

    #[test]
    fn a_retry_at_once_after_a_stripe_429_fails_when_the_judge_wants_a_backoff() {
        let rt = runtime();
        let upstream = rt.block_on(TestServer::start());
        let proxy = failing(
            "stripe",
            &["--judge-no-backoff", "fail", "--judge-min-backoff", "3600"],
        );
        let same = vec!["/v1/charges".to_owned(); 2];
        let answers = get(&proxy, &upstream, &same);
        assert!(answers.iter().all(|a| a.status == 429), "{answers:#?}");
        let stderr = proxy.stop();
        assert!(stderr.contains("with no hint"), "{stderr}");
        assert!(stderr.contains("holdoff: FAIL"), "{stderr}");
    }
}

mod rate_limits {
    use super::*;

    /// The preset `name` as printed, with its window widened to ten hours.
    fn widened(dir: &TempDir, name: &str, window: u64) -> String {
        let text = holdoff_config(dir, &["preset", name]);
        let from = format!("\"windowSeconds\": {window},");
        assert_eq!(text.matches(&from).count(), 1, "{name}: {text}");
        dir.write(
            &format!("{name}.json"),
            &text.replace(&from, "\"windowSeconds\": 36000,"),
        )
    }

    /// Runs the preset `name` (window `window` widened) and sends `limit` + 2 requests: the
    /// first `limit` reach the upstream, the others are refused with `status`. Returns the
    /// answers.
    fn counted(name: &str, window: u64, limit: usize, status: u16) -> Vec<Answer> {
        let rt = runtime();
        let upstream = rt.block_on(TestServer::start());
        let dir = TempDir::new(name);
        let config = widened(&dir, name, window);
        let proxy = Proxy::start(&["-c", &config, "-u", WATCH, "-f", "0"]);
        let answers = get(&proxy, &upstream, &paths(limit + 2));
        let statuses: Vec<u16> = answers.iter().map(|a| a.status).collect();
        let mut expected = vec![200; limit];
        expected.extend([status, status]);
        assert_eq!(statuses, expected);
        assert_eq!(
            upstream.requests().len(),
            limit,
            "refusals never go upstream"
        );
        for refused in &answers[limit..] {
            // A sliding window's previous count still weighs after the window ends: up to a
            // window more.
            let wait = refused.retry_after();
            assert!((1..=72000).contains(&wait), "{wait}");
        }
        drop(proxy);
        answers
    }

    fn now_epoch() -> u64 {
        holdoff::clock::SystemClock
            .wall_now()
            .duration_since(UNIX_EPOCH)
            .expect("after 1970")
            .as_secs()
    }

    #[test]
    fn github_allows_60_then_answers_403_api_rate_limit_exceeded() {
        let answers = counted("github", 60, 60, 403);
        for (i, answer) in answers.iter().enumerate() {
            assert_eq!(answer.must("x-ratelimit-limit"), "60");
            let remaining = 60usize.saturating_sub(i + 1);
            assert_eq!(answer.must("x-ratelimit-remaining"), remaining.to_string());
            let reset: u64 = answer.must("x-ratelimit-reset").parse().expect("epoch");
            assert!(
                reset > now_epoch() && reset <= now_epoch() + 36001,
                "{reset}"
            );
        }
        let refused = &answers[60];
        assert_eq!(refused.must("x-ratelimit-used"), "60");
        assert_eq!(refused.must("x-ratelimit-resource"), "core");
        let body = refused.json();
        let message = body["message"].as_str().expect("a message");
        assert!(
            message.starts_with("API rate limit exceeded for "),
            "{message}"
        );
        assert!(body["documentation_url"].is_string());
    }

    #[test]
    fn github_models_allows_15_then_answers_rate_limit_reached() {
        let answers = counted("github-models", 60, 15, 429);
        assert_eq!(answers[0].header("x-ratelimit-limit"), None);
        let refused = &answers[15];
        assert_eq!(refused.must("x-ratelimit-type"), "UserByModelByMinute");
        assert_eq!(refused.json()["error"]["code"], "RateLimitReached");
    }

    #[test]
    fn graph_rate_limit_allows_20_then_answers_too_many_requests() {
        let answers = counted("graph-rate-limit", 10, 20, 429);
        assert_eq!(answers[0].must("ratelimit-limit"), "20");
        assert_eq!(answers[19].must("ratelimit-remaining"), "0");
        let body = answers[20].json();
        assert_eq!(body["error"]["code"], "TooManyRequests");
        assert_eq!(body["error"]["innerError"]["status"], "429");
    }

    #[test]
    fn apim_allows_10_then_answers_rate_limit_is_exceeded() {
        let answers = counted("apim", 60, 10, 429);
        assert_eq!(answers[0].header("ratelimit-limit"), None);
        assert_eq!(answers[0].header("x-ratelimit-limit"), None);
        let body = answers[10].json();
        assert_eq!(body["statusCode"], 429);
        let message = body["message"].as_str().expect("a message");
        assert!(
            message.starts_with("Rate limit is exceeded. Try again in"),
            "{message}"
        );
    }

    #[test]
    fn resend_allows_2_then_answers_rate_limit_exceeded() {
        let answers = counted("resend", 1, 2, 429);
        assert_eq!(answers[0].must("ratelimit-limit"), "2");
        assert_eq!(answers[0].must("ratelimit-remaining"), "1");
        answers[0].must("ratelimit-reset");
        let refused = &answers[2];
        assert_eq!(refused.must("ratelimit-remaining"), "0");
        let body = refused.json();
        assert_eq!(body["name"], "rate_limit_exceeded");
        assert_eq!(body["statusCode"], 429);
    }

    #[test]
    fn degradation_allows_10_then_answers_429_with_ietf_headers() {
        let answers = counted("degradation", 10, 10, 429);
        assert_eq!(
            answers[0].must("ratelimit-policy"),
            "\"default\";q=10;w=36000"
        );
        assert!(answers[0].must("ratelimit").starts_with("\"default\";r=9;"));
    }

    #[test]
    fn degradation_fails_with_503_and_retry_after() {
        let rt = runtime();
        let upstream = rt.block_on(TestServer::start());
        let proxy = failing("degradation", &[]);
        for answer in get(&proxy, &upstream, &paths(3)) {
            assert_eq!(answer.status, 503, "{answer:#?}");
            assert!((2..=5).contains(&answer.retry_after()));
        }
        drop(proxy);
    }

    /// The presets as they ship, re-pointed with `-u`: the limit counts the loopback URLs.
    #[test]
    fn the_shipped_limits_count_the_urls_watched_with_u() {
        let rt = runtime();
        let upstream = rt.block_on(TestServer::start());
        for (name, header, limit) in [
            ("github", "x-ratelimit-limit", "60"),
            ("graph-rate-limit", "ratelimit-limit", "20"),
            ("resend", "ratelimit-limit", "2"),
        ] {
            let proxy = Proxy::start(&["--preset", name, "-u", WATCH]);
            let [answer] = get(&proxy, &upstream, &paths(1)).try_into().expect("one");
            assert_eq!(answer.status, 200, "{name}");
            assert_eq!(answer.header(header), Some(limit), "{name}: {answer:#?}");
            drop(proxy);
        }
    }
}
