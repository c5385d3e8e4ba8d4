use std::error::Error as _;
use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::judge::Verdict;
use crate::stages::FaultCounts;

use super::*;

/// 2025-03-01T12:00:00Z plus `ms`.
fn t(ms: u64) -> SystemTime {
    UNIX_EPOCH + Duration::from_millis(1_740_830_400_000 + ms)
}

/// The fixture run: three premature retries (two by `naive` on one URL, one on another),
/// eight compliant, and a herd of three workers.
fn fixture() -> Vec<Event> {
    include_str!("../../tests/fixtures/report/events.jsonl")
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

fn throttle(client: &str, url: &str, at: u64, permitted: u64) -> Event {
    Event::Throttle {
        at: t(at),
        client: client.into(),
        user_agent: None,
        method: "GET".into(),
        url: url.into(),
        status: 429,
        permitted_at: Some(t(permitted)),
        hint: HintKind::Usable,
        header: Some("retry-after".into()),
        value: Some(((permitted - at) / 1000).to_string()),
        reading: Some("a delay, counted from the response".into()),
    }
}

/// A throttle whose hint is `hint` (`value` as sent, if any): a window of the minimum backoff
/// (100 ms) for a malformed or missing hint, one that never closes for an unbounded one.
fn throttle_with(client: &str, url: &str, at: u64, hint: HintKind, value: Option<&str>) -> Event {
    let (permitted_at, reading) = match hint {
        HintKind::Unbounded => (
            None,
            "longer than the monotonic clock can hold: a window that never closes",
        ),
        HintKind::Malformed => (
            Some(t(at + 100)),
            "malformed, so never zero: a retry must wait the minimum backoff",
        ),
        _ => (
            Some(t(at + 100)),
            "no hint: the gap to the next request is measured against the minimum backoff",
        ),
    };
    Event::Throttle {
        at: t(at),
        client: client.into(),
        user_agent: Some("openai-node/4.77".into()),
        method: "GET".into(),
        url: url.into(),
        status: 429,
        permitted_at,
        hint,
        header: value.map(|_| "retry-after".into()),
        value: value.map(Into::into),
        reading: Some(reading.into()),
    }
}

fn retry(client: &str, url: &str, throttled: u64, permitted: u64, at: u64) -> Event {
    let premature = at < permitted;
    Event::Retry {
        verdict: if premature {
            Verdict::Premature
        } else {
            Verdict::Compliant
        },
        client: client.into(),
        user_agent: None,
        idempotency_key: false,
        method: "GET".into(),
        url: url.into(),
        throttled_at: t(throttled),
        permitted_at: Some(t(permitted)),
        retried_at: t(at),
        early_by_ms: premature.then(|| (permitted - at) as f64),
        late_by_ms: (!premature).then(|| (at - permitted) as f64),
        throttled_client: None,
    }
}

/// A retry judged `verdict` at `at` under the window from `throttled` to `permitted` (`None`:
/// one that never closes).
fn judged(
    verdict: Verdict,
    client: &str,
    url: &str,
    throttled: u64,
    permitted: Option<u64>,
    at: u64,
) -> Event {
    Event::Retry {
        verdict,
        client: client.into(),
        user_agent: Some("openai-node/4.77".into()),
        idempotency_key: false,
        method: "GET".into(),
        url: url.into(),
        throttled_at: t(throttled),
        permitted_at: permitted.map(t),
        retried_at: t(at),
        early_by_ms: permitted.map(|p| p.saturating_sub(at) as f64),
        late_by_ms: None,
        throttled_client: None,
    }
}

/// A start (with `fail_on_no_backoff`) and a finish with `requests`, around `events`.
fn run(requests: u64, fail_on_no_backoff: bool, events: Vec<Event>) -> Vec<Event> {
    let mut all = vec![Event::Start {
        at: t(0),
        seed: Some(1),
        source: "preset throttle".into(),
        command: Some(vec!["npm".into(), "test".into()]),
        proxy_url: "http://127.0.0.1:1".into(),
        judge_key: "client-method-url".into(),
        argv: None,
        allow_no_traffic: false,
        fail_on_no_backoff,
    }];
    all.extend(events);
    all.push(Event::Finish {
        at: t(10_000),
        requests,
        faults: FaultCounts::default(),
        exit_code: Some(0),
        interception_failures: 0,
        evicted_windows: 0,
    });
    all
}

/// A scratch directory, removed on drop.
struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Scratch {
        let dir =
            std::env::temp_dir().join(format!("holdoff-report-{name}-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        Scratch(dir)
    }

    fn file(&self, name: &str, contents: &str) -> PathBuf {
        let path = self.0.join(name);
        fs::write(&path, contents).unwrap();
        path
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

mod from_events {
    use super::*;

    #[test]
    fn counts_the_fixture_run() {
        let report = Report::from_events(&fixture());
        assert!(!report.passed());
        assert_eq!(report.premature(), 3);
        assert_eq!(report.compliant(), 8);
        assert_eq!(report.throttled(), 8);
        assert_eq!(report.requests(), 57);
        assert_eq!(report.seed(), Some(42));
        assert_eq!(report.exit_code(), Some(0));
        assert!(report.is_complete());
        assert_eq!(report.duration_ms, Some(14_000.0));
        assert_eq!(report.herds.len(), 1);
        assert_eq!(
            report.herds[0].clients,
            ["worker-1", "worker-2", "worker-3"]
        );
    }

    #[test]
    fn lists_violations_in_order_and_the_worst_first() {
        let report = Report::from_events(&fixture());
        let early: Vec<Option<f64>> = report.violations().iter().map(|v| v.early_by_ms).collect();
        assert_eq!(early, [Some(1900.0), Some(1800.0), Some(2900.0)]);
        let worst: Vec<Option<f64>> = report.worst().iter().map(|v| v.early_by_ms).collect();
        assert_eq!(worst, [Some(2900.0), Some(1900.0), Some(1800.0)]);
        assert_eq!(report.violations()[2].method, "POST");
    }

    #[test]
    fn groups_by_client_and_request() {
        let report = Report::from_events(&fixture());
        let rows: Vec<String> = report
            .endpoints()
            .iter()
            .map(|e| {
                format!(
                    "{} {} {}: {}/{}/{}",
                    e.client,
                    e.method,
                    e.url.rsplit('/').next().unwrap(),
                    e.throttles,
                    e.compliant,
                    e.premature
                )
            })
            .collect();
        assert_eq!(
            rows,
            [
                "holdoff-client GET items: 1/1/0",
                "holdoff-client GET search?q=o'brien&page=2: 1/1/0",
                "holdoff-client GET users: 1/1/0",
                "naive GET items: 1/1/2",
                "naive POST orders: 1/1/1",
                "worker-1 GET reports: 1/1/0",
                "worker-2 GET reports: 1/1/0",
                "worker-3 GET reports: 1/1/0",
            ]
        );
        assert_eq!(report.endpoints()[3].worst_early_by_ms, Some(1900.0));
    }

    #[test]
    fn takes_lateness_percentiles_by_nearest_rank() {
        let report = Report::from_events(&fixture());
        // 1, 3, 6, 10, 50, 120, 380, 600 ms.
        let lateness = report.lateness().unwrap();
        assert_eq!(lateness.count, 8);
        assert_eq!(lateness.p50_ms, 10.0);
        assert_eq!(lateness.p90_ms, 600.0);
        assert_eq!(lateness.max_ms, 600.0);
    }

    #[test]
    fn passes_with_no_events_and_says_the_log_is_incomplete() {
        let report = Report::from_events(&[]);
        assert!(report.passed());
        assert!(!report.is_complete());
        assert_eq!((report.requests(), report.throttled()), (0, 0));
        assert!(report.lateness().is_none());
        assert!(report.span().is_none());
    }

    #[test]
    fn works_out_a_missing_duration_from_the_times() {
        let mut event = retry("a", "http://x/", 0, 2000, 500);
        if let Event::Retry { early_by_ms, .. } = &mut event {
            *early_by_ms = None;
        }
        let report = Report::from_events(&[event]);
        assert_eq!(report.violations()[0].early_by_ms, Some(1500.0));
    }

    #[test]
    fn draws_a_window_known_only_from_a_retry() {
        // Recording was off when the throttle came: the retry still shows the window.
        let report = Report::from_events(&[
            throttle("a", "http://x/", 0, 1000),
            retry("a", "http://x/", 0, 1000, 1200),
            retry("a", "http://x/", 5000, 6000, 5500),
        ]);
        let windows: Vec<_> = report
            .windows
            .iter()
            .map(|w| (w.from, w.to, w.status))
            .collect();
        assert_eq!(
            windows,
            [
                (t(0), Some(t(1000)), Some(429)),
                (t(5000), Some(t(6000)), None)
            ]
        );
        assert_eq!(report.throttled(), 1);
        assert_eq!(report.endpoints()[0].throttles, 1);
    }

    #[test]
    fn keeps_the_first_start_of_logs_appended_together() {
        let start = |at, seed| Event::Start {
            at,
            seed: Some(seed),
            source: "preset throttle".into(),
            command: None,
            proxy_url: "http://127.0.0.1:1".into(),
            judge_key: "client-method-url".into(),
            argv: None,
            allow_no_traffic: false,
            fail_on_no_backoff: false,
        };
        let report = Report::from_events(&[start(t(0), 1), start(t(10_000), 2)]);
        assert_eq!(report.seed(), Some(1));
        assert_eq!(report.started_at, Some(t(0)));
    }
}

mod throttles_and_verdicts {
    use super::*;

    const URL: &str = "http://api.example/chat";

    #[test]
    fn a_throttle_without_a_hint_is_counted_and_drawn() {
        let report = Report::from_events(&run(
            2,
            false,
            vec![throttle_with("node", URL, 1000, HintKind::None, None)],
        ));
        assert_eq!(report.throttled(), 1);
        assert_eq!(report.throttled_by_hint().none, 1);
        assert_eq!(report.endpoints()[0].throttles, 1);
        assert_eq!(report.outcome(), RunOutcome::Pass);
        let html = report.render(Format::Html);
        assert_eq!(html.matches(r#"class="throttle""#).count(), 1, "{html}");
        assert_eq!(html.matches(r#"class="window no-hint""#).count(), 1);
        let md = report.render(Format::Markdown);
        assert!(md.contains("| … with no hint | 1 |"), "{md}");
        assert!(md.contains("no hint: the gap to the next request"), "{md}");
        let json: serde_json::Value = serde_json::from_str(&report.render(Format::Json)).unwrap();
        assert_eq!(json["throttled"], 1);
        assert_eq!(json["throttled_by_hint"]["none"], 1);
        assert_eq!(json["user_agents"][0], "openai-node/4.77");
    }

    #[test]
    fn a_retry_that_read_a_malformed_hint_as_zero_fails_and_says_why() {
        let report = Report::from_events(&run(
            2,
            false,
            vec![
                throttle_with("node", URL, 1000, HintKind::Malformed, Some("soon")),
                judged(Verdict::ReadAsZero, "node", URL, 1000, Some(1100), 1004),
            ],
        ));
        assert_eq!(report.outcome(), RunOutcome::Fail);
        assert_eq!((report.read_as_zero(), report.premature()), (1, 0));
        let v = &report.violations()[0];
        assert_eq!(v.kind, Verdict::ReadAsZero);
        assert_eq!(
            v.why,
            "retried 4 ms after a malformed Retry-After (`soon`) on a 429, sooner than the \
             minimum backoff of 100 ms: read as zero?"
        );
        assert_eq!(
            v.judged_by.as_ref().map(JudgedBy::plain).as_deref(),
            Some(
                "`Retry-After: soon`, malformed, so never zero: a retry must wait the minimum \
                 backoff"
            )
        );
        assert!(
            report
                .terminal_summary(&[])
                .starts_with("holdoff: FAIL: 1 read-as-zero retry and 0 compliant ")
        );
        let md = report.render(Format::Markdown);
        assert!(
            md.contains("judged by `Retry-After: soon`, malformed, so never zero"),
            "{md}"
        );
        assert!(md.contains("| node · openai-node/4.77 |"), "{md}");
        let xml = report.render(Format::Junit);
        assert!(xml.contains(r#"type="ReadAsZero">"#), "{xml}");
        let html = report.render(Format::Html);
        assert_eq!(html.matches(r#"class="retry read-as-zero""#).count(), 1);
        assert_eq!(html.matches(r#"class="window malformed""#).count(), 1);
    }

    #[test]
    fn a_retry_without_backoff_after_no_hint_is_a_warning() {
        let events = vec![
            throttle_with("node", URL, 1000, HintKind::None, None),
            judged(Verdict::NoBackoff, "node", URL, 1000, Some(1100), 1003),
        ];
        let report = Report::from_events(&run(2, false, events.clone()));
        assert_eq!(report.outcome(), RunOutcome::Pass);
        assert!(report.violations().is_empty());
        assert_eq!(report.warnings().len(), 1);
        assert_eq!(
            report.warnings()[0].why,
            "retried 3 ms after a 429 with no hint, sooner than the minimum backoff of 100 ms"
        );
        let summary = report.terminal_summary(&[]);
        assert!(
            summary.starts_with(
                "holdoff: PASS: no retry broke its window, but 1 came without backoff after a \
                 throttle with no hint"
            ),
            "{summary}"
        );
        assert!(
            summary.contains("warnings: retries without backoff"),
            "{summary}"
        );
        let md = report.render(Format::Markdown);
        assert!(md.contains("### Warnings"), "{md}");
        assert!(!md.contains("every retry waited"), "{md}");
        assert!(!report.render(Format::Junit).contains("<failure"));

        // Unless the run says a retry without backoff fails.
        let report = Report::from_events(&run(2, true, events));
        assert_eq!(report.outcome(), RunOutcome::Fail);
        assert_eq!(report.violations()[0].kind, Verdict::NoBackoff);
        assert!(
            report
                .render(Format::Junit)
                .contains(r#"type="NoBackoff">"#)
        );
    }

    #[test]
    fn another_process_inside_the_wait_is_a_warning_in_every_report_even_when_no_backoff_fails() {
        let told = "process:curl[100]";
        let mut sibling = judged(
            Verdict::Sibling,
            "process:curl[101]",
            URL,
            1000,
            Some(3000),
            1020,
        );
        if let Event::Retry {
            throttled_client, ..
        } = &mut sibling
        {
            *throttled_client = Some(told.into());
        }
        let events = vec![
            throttle_with(told, URL, 1000, HintKind::Usable, Some("2")),
            sibling,
        ];
        // A run that fails retries without backoff still only warns of another process.
        let report = Report::from_events(&run(3, true, events));
        assert_eq!(report.outcome(), RunOutcome::Pass);
        assert!(report.violations().is_empty());
        assert_eq!(report.siblings(), 1);
        assert_eq!(
            report.warnings()[0].why,
            "came 20 ms after pid 100 (curl) got a 429, 1.98 s before it was permitted to \
             retry: another process of the same client machine, judged apart (--judge-key \
             method-url judges all processes as one client)"
        );
        let summary = report.terminal_summary(&[]);
        assert!(
            summary.starts_with(
                "holdoff: PASS: no retry broke its window, but 1 request came from another \
                 process inside the wait one was told"
            ),
            "{summary}"
        );
        assert!(
            summary.contains("warnings: requests inside the wait another process was told"),
            "{summary}"
        );
        let md = report.render(Format::Markdown);
        assert!(
            md.contains("Warnings: requests inside the wait another process was told"),
            "{md}"
        );
        assert!(md.contains("--judge-key method-url"), "{md}");
        assert!(!md.contains("RFC 9110 names no wait"), "{md}");
        let html = report.render(Format::Html);
        assert!(html.contains("another process was told"), "{html}");
        let junit = report.render(Format::Junit);
        assert!(!junit.contains("<failure"), "{junit}");
        let json: serde_json::Value = serde_json::from_str(&report.render(Format::Json)).unwrap();
        assert_eq!(json["retries"]["sibling"], 1, "{json:#}");
    }

    #[test]
    fn a_window_that_never_closes_is_drawn_to_the_end_and_a_retry_inside_is_premature() {
        let report = Report::from_events(&run(
            2,
            false,
            vec![
                throttle_with(
                    "node",
                    URL,
                    1000,
                    HintKind::Unbounded,
                    Some("99999999999999999999"),
                ),
                judged(Verdict::Premature, "node", URL, 1000, None, 1050),
                throttle("other", URL, 2000, 3000),
                retry("other", URL, 2000, 3000, 2500),
            ],
        ));
        assert_eq!(report.outcome(), RunOutcome::Fail);
        assert_eq!(report.throttled_by_hint().unbounded, 1);
        // Inside a window that never closes is the worst of all.
        let worst = report.worst();
        assert_eq!(
            (worst[0].client.as_str(), worst[0].early_by_ms),
            ("node", None)
        );
        assert_eq!(worst[0].permitted_at, None);
        assert_eq!(
            worst[0].why,
            "retried 50 ms after a 429 whose hint never expires"
        );
        let html = report.render(Format::Html);
        let rect = html
            .lines()
            .find(|l| l.contains(r#"class="window unbounded""#))
            .expect("the unbounded window is drawn");
        let number = |attr: &str| -> f64 {
            let start = rect.find(&format!(r#" {attr}=""#)).unwrap() + attr.len() + 3;
            rect[start..].split('"').next().unwrap().parse().unwrap()
        };
        assert_eq!(number("x") + number("width"), html::PLOT_END, "{rect}");
        let json: serde_json::Value = serde_json::from_str(&report.render(Format::Json)).unwrap();
        assert!(json["violations"][0]["permitted_at"].is_null());
        assert!(json["violations"][0]["early_by_ms"].is_null());
        assert!(
            report
                .terminal_summary(&[])
                .contains("inside a window that never closes")
        );
    }
}

mod headline {
    use super::*;

    fn first_line(report: &Report) -> String {
        report
            .terminal_summary(&[])
            .lines()
            .next()
            .unwrap()
            .to_owned()
    }

    #[test]
    fn no_request_is_not_tested_never_a_pass() {
        let report = Report::from_events(&run(0, false, vec![]));
        assert_eq!(report.outcome(), RunOutcome::NotTested);
        assert!(!report.passed());
        assert_eq!(
            first_line(&report),
            "holdoff: NOT TESTED: no request reached the proxy (0 requests)"
        );
        let summary = report.terminal_summary(&[]);
        for cause in [
            "Node.js before 22.21",
            "httpx",
            "aiohttp",
            "Go never",
            "Java",
            "NO_PROXY",
        ] {
            assert!(summary.contains(cause), "{cause}: {summary}");
        }
        let json: serde_json::Value = serde_json::from_str(&report.render(Format::Json)).unwrap();
        assert_eq!(json["verdict"], "not_tested");
        let xml = report.render(Format::Junit);
        assert!(
            xml.contains(r#"<testsuites name="holdoff" tests="1" failures="1""#),
            "{xml}"
        );
        assert!(xml.contains(r#"name="no request reached the proxy""#));
        assert!(xml.contains(r#"type="NotTested">"#));
        for format in [Format::Markdown, Format::Html] {
            let text = report.render(format);
            assert!(
                !text.to_lowercase().contains("every retry waited"),
                "{text}"
            );
            assert!(text.contains("trust_env=True"), "{text}");
        }
    }

    /// `events` with `failures` failed interceptions in the finish event, allowed no traffic.
    fn unintercepted(mut events: Vec<Event>, failures: u64) -> Report {
        if let Event::Start {
            allow_no_traffic, ..
        } = &mut events[0]
        {
            *allow_no_traffic = true;
        }
        if let Some(Event::Finish {
            interception_failures,
            ..
        }) = events.last_mut()
        {
            *interception_failures = failures;
        }
        Report::from_events(&events)
    }

    #[test]
    fn a_failed_interception_is_never_a_pass_nor_allowed() {
        let events = run(
            5,
            false,
            vec![
                throttle("a", "http://x/", 0, 1000),
                retry("a", "http://x/", 0, 1000, 1200),
            ],
        );
        let report = unintercepted(events, 2);
        assert_eq!(report.outcome(), RunOutcome::NotTested);
        assert!(!report.passed());
        assert!(
            !report.allows_no_traffic(),
            "--allow-no-traffic does not cover it"
        );
        assert_eq!(report.interception_failures(), 2);
        assert_eq!(
            first_line(&report),
            "holdoff: NOT TESTED: 2 TLS interceptions failed (does the client trust holdoff's \
             CA?) (1 throttled response, 5 requests)"
        );
        let summary = report.terminal_summary(&[]);
        assert!(
            summary.contains("2 intercepted connections failed"),
            "{summary}"
        );
        let json: serde_json::Value = serde_json::from_str(&report.render(Format::Json)).unwrap();
        assert_eq!(json["verdict"], "not_tested");
        assert_eq!(json["interception_failures"], 2);
        let xml = report.render(Format::Junit);
        assert!(xml.contains(r#"type="InterceptionFailed">"#), "{xml}");
        assert!(xml.contains(r#"failures="1""#), "{xml}");
        for format in [Format::Markdown, Format::Html] {
            let text = report.render(format);
            assert!(!text.contains("PASS"), "{text}");
            assert!(text.contains("NODE_EXTRA_CA_CERTS"), "{text}");
        }
    }

    #[test]
    fn a_failed_interception_beside_a_premature_retry_fails_and_says_both() {
        let events = run(
            5,
            false,
            vec![
                throttle("a", "http://x/", 0, 1000),
                retry("a", "http://x/", 0, 1000, 100),
            ],
        );
        let report = unintercepted(events, 1);
        assert_eq!(report.outcome(), RunOutcome::Fail);
        assert!(
            first_line(&report).starts_with(
                "holdoff: FAIL: 1 premature retry and 0 compliant; 1 TLS interception failed"
            ),
            "{}",
            first_line(&report)
        );
    }

    #[test]
    fn without_failed_interceptions_the_json_report_has_no_such_field() {
        let report = Report::from_events(&run(3, false, vec![]));
        let json: serde_json::Value = serde_json::from_str(&report.render(Format::Json)).unwrap();
        assert!(json.get("interception_failures").is_none(), "{json:#}");
    }

    #[test]
    fn no_request_allowed_is_still_not_tested_but_skipped() {
        let mut events = run(0, false, vec![]);
        if let Event::Start {
            allow_no_traffic, ..
        } = &mut events[0]
        {
            *allow_no_traffic = true;
        }
        let report = Report::from_events(&events);
        assert_eq!(report.outcome(), RunOutcome::NotTested);
        assert!(report.allows_no_traffic());
        assert_eq!(
            first_line(&report),
            "holdoff: NOT TESTED (allowed): no request reached the proxy, as --allow-no-traffic \
             allows (0 requests)"
        );
        let xml = report.render(Format::Junit);
        assert!(xml.contains(r#"tests="1" failures="0""#), "{xml}");
        assert!(xml.contains("<skipped "), "{xml}");
    }

    #[test]
    fn requests_without_a_throttle_judged_nothing() {
        let report = Report::from_events(&run(12, false, vec![]));
        assert_eq!(report.outcome(), RunOutcome::Pass);
        assert_eq!(
            first_line(&report),
            "holdoff: PASS? nothing was judged (12 requests, 0 throttled)"
        );
        let md = report.render(Format::Markdown);
        assert!(
            md.starts_with("## holdoff: ⚠ PASS? nothing was judged"),
            "{md}"
        );
        let xml = report.render(Format::Junit);
        assert!(xml.contains(r#"tests="1" failures="0""#), "{xml}");
        assert!(xml.contains(r#"name="nothing was judged""#), "{xml}");

        let report =
            Report::from_events(&run(12, false, vec![throttle("a", "http://x/", 0, 1000)]));
        assert_eq!(
            first_line(&report),
            "holdoff: PASS? no retry was judged (1 throttled response, none retried; 12 requests)"
        );
    }

    #[test]
    fn a_failed_command_is_named_beside_the_verdict() {
        let mut events = run(
            5,
            false,
            vec![
                throttle("a", "http://x/", 0, 1000),
                retry("a", "http://x/", 0, 1000, 1200),
            ],
        );
        if let Some(Event::Finish { exit_code, .. }) = events.last_mut() {
            *exit_code = Some(1);
        }
        let report = Report::from_events(&events);
        assert_eq!(
            first_line(&report),
            "holdoff: FAIL: the command exited 1; no client retried early (1 compliant retry; 1 \
             throttled response, 5 requests)"
        );
        let md = report.render(Format::Markdown);
        assert!(
            md.starts_with("## holdoff: ✗ FAIL: the command exited 1; no client retried early"),
            "{md}"
        );
    }
}

mod reproduce {
    use super::*;

    #[test]
    fn quotes_the_recorded_command_line() {
        let mut events = run(3, false, vec![]);
        let argv = [
            "holdoff",
            "run",
            "-c",
            "my config.json",
            "-f",
            "100",
            "--seed",
            "7",
            "--",
        ]
        .map(String::from)
        .into_iter()
        .chain(["sh", "-c", "curl -s \"$URL\""].map(String::from))
        .collect();
        if let Event::Start { argv: a, .. } = &mut events[0] {
            *a = Some(argv);
        }
        let report = Report::from_events(&events);
        let line = r#"holdoff run -c 'my config.json' -f 100 --seed 7 -- sh -c 'curl -s "$URL"'"#;
        assert_eq!(report.reproduce(), line);
        assert!(
            report
                .render(Format::Markdown)
                .contains(&format!("```sh\n{line}\n```"))
        );
        let json: serde_json::Value = serde_json::from_str(&report.render(Format::Json)).unwrap();
        assert_eq!(json["reproduce"], line);
    }

    #[test]
    fn falls_back_to_the_seed_and_the_command_for_an_older_log() {
        let report = Report::from_events(&run(3, false, vec![]));
        assert_eq!(report.reproduce(), "holdoff run --seed 1 -- npm test");
    }
}

mod read_log {
    use super::*;

    #[test]
    fn reads_the_fixture_and_skips_blank_lines() {
        let scratch = Scratch::new("blank");
        let text = include_str!("../../tests/fixtures/report/events.jsonl");
        let path = scratch.file("events.jsonl", &format!("\n{}\r\n\n", text.trim_end()));
        assert_eq!(Report::read_log(&path).unwrap(), fixture());
    }

    #[test]
    fn names_the_file_the_line_and_what_is_wrong() {
        let scratch = Scratch::new("bad");
        let good = serde_json::to_string(&throttle("a", "http://x/", 0, 1000)).unwrap();
        for (line, expected) in [
            (
                r#"{"event":"throttle","at":"2025-03-01T12:00:00Z"}"#,
                "missing field `client`",
            ),
            (r#"{"event":"nap"}"#, "unknown variant `nap`"),
            ("not json", "expected ident (column 2)"),
            (
                r#"{"event":"finish","at":"yesterday","requests":1}"#,
                "`yesterday` is not an RFC 3339 time",
            ),
        ] {
            let path = scratch.file("events.jsonl", &format!("{good}\n\n{line}\n{good}\n"));
            let err = Report::read_log(&path).unwrap_err();
            assert_eq!(err.kind(), ReportErrorKind::Invalid);
            assert_eq!(err.line(), Some(3));
            assert_eq!(err.path(), path);
            assert_eq!(
                err.to_string(),
                format!("read the event log {}:3", path.display())
            );
            let cause = err.source().unwrap().to_string();
            assert!(cause.contains(expected), "{cause:?} lacks {expected:?}");
        }
    }

    #[test]
    fn says_when_the_file_cannot_be_read() {
        let err = Report::read_log(Path::new("/nonexistent/events.jsonl")).unwrap_err();
        assert_eq!(err.kind(), ReportErrorKind::Io);
        assert_eq!(err.line(), None);
        assert_eq!(
            err.to_string(),
            "read the event log /nonexistent/events.jsonl"
        );
    }
}

mod render {
    use super::*;

    #[test]
    fn json_has_the_fixed_keys() {
        let report = Report::from_events(&fixture());
        let json: serde_json::Value = serde_json::from_str(&report.render(Format::Json)).unwrap();
        assert_eq!(json["verdict"], "fail");
        assert_eq!(json["requests"], 57);
        assert_eq!(json["throttled"], 8);
        assert_eq!(json["retries"]["compliant"], 8);
        assert_eq!(json["retries"]["premature"], 3);
        let violation = &json["violations"][0];
        for key in [
            "client",
            "method",
            "url",
            "throttled_at",
            "permitted_at",
            "retried_at",
            "early_by_ms",
        ] {
            assert!(!violation[key].is_null(), "{key}");
        }
        assert_eq!(violation["retried_at"], "2025-03-01T12:00:00.300Z");
    }

    #[test]
    fn junit_escapes_what_clients_send() {
        let report = Report::from_events(&[
            throttle("<eve & \"co\">", "http://x/?a=1&b='2'", 0, 1000),
            retry("<eve & \"co\">", "http://x/?a=1&b='2'", 0, 1000, 100),
        ]);
        let xml = report.render(Format::Junit);
        assert!(
            xml.contains(r#"classname="&lt;eve &amp; &quot;co&quot;&gt;""#),
            "{xml}"
        );
        assert!(xml.contains(r#"name="GET http://x/?a=1&amp;b=&apos;2&apos;""#));
        assert!(!xml.contains("<eve"));
        assert!(xml.contains(r#"failures="1""#));
    }

    #[test]
    fn html_escapes_what_clients_send() {
        let report = Report::from_events(&[
            throttle("<script>alert(1)</script>", "http://x/", 0, 1000),
            retry("<script>alert(1)</script>", "http://x/", 0, 1000, 100),
        ]);
        let html = report.render(Format::Html);
        assert!(!html.contains("<script"), "{html}");
        assert!(html.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
    }

    #[test]
    fn html_draws_a_marker_per_retry() {
        let html = Report::from_events(&fixture()).render(Format::Html);
        assert_eq!(html.matches(r#"class="retry premature""#).count(), 3);
        assert_eq!(html.matches(r#"class="retry compliant""#).count(), 8);
        assert_eq!(html.matches(r#"<svg class="timeline""#).count(), 5);
        assert_eq!(html.matches(r#"class="throttle""#).count(), 8);
        assert!(
            !html.contains("http-equiv") && !html.contains("<script") && !html.contains("src=")
        );
    }

    #[test]
    fn html_shows_the_worst_ten_violations_and_folds_the_rest() {
        let events: Vec<Event> = (0..120)
            .map(|i| retry("naive", &format!("http://x/{i}"), 0, 5000, 100 + i))
            .collect();
        let html = Report::from_events(&events).render(Format::Html);
        let violations = &html[html.find(r#"<section id="violations">"#).unwrap()..];
        let violations = &violations[..violations.find("</section>").unwrap()];
        let (open, folded) = violations
            .split_once(r#"<details class="more"><summary>And 110 more</summary>"#)
            .expect("the rest folded, with their count");
        assert_eq!(open.matches("<tr data-kind").count(), 10, "{open}");
        assert_eq!(folded.matches("<tr data-kind").count(), 110, "{folded}");
        // The worst first: the earliest retry (at 100 ms, 4.90 s early) opens the list.
        let first = open.find("<tr data-kind").unwrap();
        assert!(open[first..].contains("4.90 s"), "{open}");
        assert!(!html.contains("<script"));
    }

    #[test]
    fn html_lets_urls_wrap_at_slashes_and_never_inside_a_word() {
        let report = Report::from_events(&[
            throttle("naive", "https://api.example.com/v1/items?a=1&b=2", 0, 1000),
            retry(
                "naive",
                "https://api.example.com/v1/items?a=1&b=2",
                0,
                1000,
                100,
            ),
        ]);
        let html = report.render(Format::Html);
        assert!(
            html.contains(
                r#"<td class="url">GET https://api.example.com/<wbr>v1/<wbr>items?<wbr>a=1&amp;<wbr>b=2</td>"#
            ),
            "{html}"
        );
        assert!(!html.contains("break-all"), "break-all cuts words anywhere");
        assert!(!html.contains("overflow-wrap: anywhere"));
    }

    #[test]
    fn html_names_clients_as_people_do_and_keeps_the_machine_form_for_tools() {
        let report = Report::from_events(&[
            throttle("header:naive-client", "http://x/", 0, 1000),
            retry("header:naive-client", "http://x/", 0, 1000, 100),
            throttle("process:curl[1234]", "http://x/", 0, 1000),
            retry("process:curl[1234]", "http://x/", 0, 1000, 100),
        ]);
        let html = report.render(Format::Html);
        assert!(html.contains("<td>naive-client</td>"), "{html}");
        assert!(html.contains("<td>pid 1234 (curl)</td>"), "{html}");
        assert!(html.contains("<figcaption>naive-client "), "{html}");
        assert!(
            html.contains(r#"data-client="header:naive-client""#),
            "{html}"
        );
        assert!(!html.contains(">header:"), "{html}");
        let json = report.render(Format::Json);
        assert!(
            json.contains(r#""client": "header:naive-client""#),
            "{json}"
        );
        let summary = report.terminal_summary(&[]);
        assert!(summary.contains("  naive-client "), "{summary}");
        assert!(!summary.contains("header:"), "{summary}");
    }

    #[test]
    fn markdown_caps_the_violation_table() {
        let events: Vec<Event> = (0..25)
            .map(|i| retry("naive", &format!("http://x/{i}"), 0, 5000, 100 + i))
            .collect();
        let md = Report::from_events(&events).render(Format::Markdown);
        assert!(
            md.contains("…and 5 more (the JSON report lists them all)."),
            "{md}"
        );
        assert!(md.contains("| naive | `GET http://x/0` | 4.90 s |"), "{md}");
    }
}

mod terminal_summary {
    use super::*;

    /// A run of `holdoff run` whose command exited `code` with no request through the proxy.
    fn no_traffic(code: i32) -> Report {
        let mut events = run(0, false, Vec::new());
        if let Some(Event::Finish { exit_code, .. }) = events.last_mut() {
            *exit_code = Some(code);
        }
        Report::from_events(&events)
    }

    #[test]
    fn says_first_that_the_command_failed_and_leaves_out_the_causes_of_no_traffic() {
        let summary = no_traffic(1).terminal_summary(&[]);
        let lines: Vec<&str> = summary.lines().collect();
        assert_eq!(
            lines[0],
            "holdoff: FAIL: the command exited 1; no request reached the proxy (0 requests)"
        );
        assert!(
            lines[1].starts_with(
                "  the command failed (exit status 1) and sent no request through the proxy: \
                 its own output says why; fix that first."
            ),
            "{summary}"
        );
        assert!(!summary.contains("Node.js"), "{summary}");
        let summary = no_traffic(137).terminal_summary(&[]);
        assert!(
            summary.contains("(exit status 137, as a shell reports signal 9)"),
            "{summary}"
        );
        let md = no_traffic(3).render(Format::Markdown);
        assert!(md.contains("The command failed (exit status 3)"), "{md}");
        assert!(!md.contains("Node.js"), "{md}");
        // A command that succeeded but sent nothing: the causes are the point.
        let summary = no_traffic(0).terminal_summary(&[]);
        assert!(summary.contains("Node.js before 22.21"), "{summary}");
    }

    #[test]
    fn gives_the_seed_once_in_the_command_that_repeats_the_run() {
        let summary = no_traffic(0).terminal_summary(&[]);
        assert!(
            summary.contains("\nreproduce: holdoff run --seed 1 -- npm test\n"),
            "{summary}"
        );
        assert_eq!(summary.matches("--seed 1").count(), 1, "{summary}");
    }

    #[test]
    fn lists_the_worst_five_the_herds_and_the_reports() {
        let mut events = fixture();
        events.extend((0..4).map(|i| retry("naive", "http://x/", 0, 60_000, 100 + i)));
        let summary = Report::from_events(&events).terminal_summary(&[
            (Format::Json, PathBuf::from("out/report.json")),
            (Format::Html, PathBuf::from("out/report.html")),
        ]);
        let lines: Vec<&str> = summary.lines().collect();
        assert_eq!(
            lines[0],
            "holdoff: FAIL: 7 premature retries and 8 compliant (8 throttled responses, 57 requests)"
        );
        assert_eq!(lines[1], "worst offenders (times UTC, 2025-03-01):");
        assert_eq!(lines.iter().filter(|l| l.starts_with("  naive")).count(), 5);
        assert!(summary.contains("  and 2 more\n"), "{summary}");
        assert!(summary.contains("herd: worker-1, worker-2, worker-3 resumed within 5 ms"));
        assert!(
            summary
                .ends_with("reports:\n  JSON      out/report.json\n  HTML      out/report.html\n")
        );
    }

    #[test]
    fn says_pass_briefly() {
        // Without a finish event, the requests are those the log holds: the throttled one
        // and its retry.
        let report = Report::from_events(&[
            throttle("a", "http://x/", 0, 1000),
            retry("a", "http://x/", 0, 1000, 1200),
        ]);
        assert_eq!(
            report.terminal_summary(&[]),
            "holdoff: PASS: every retry waited (1 compliant retry; 1 throttled response, 2 requests)\n  the event log has no finish event: the run was cut short, counts may be partial\n"
        );
    }
}

mod format {
    use super::*;

    #[test]
    fn parses_names_and_guesses_from_extensions() {
        for format in Format::ALL {
            assert_eq!(format.name().parse::<Format>(), Ok(format));
        }
        assert_eq!("Markdown".parse::<Format>(), Ok(Format::Markdown));
        assert!(
            "pdf"
                .parse::<Format>()
                .unwrap_err()
                .contains("json, junit, md or html")
        );
        assert_eq!(
            Format::from_extension(Path::new("r/junit.XML")),
            Some(Format::Junit)
        );
        assert_eq!(
            Format::from_extension(Path::new("r.htm")),
            Some(Format::Html)
        );
        assert_eq!(Format::from_extension(Path::new("report")), None);
    }
}
