//! Every report format, as its reader sees it, built from the fixture event log
//! (`tests/fixtures/report/events.jsonl`: fixed times, no clock): a naive client that retries
//! after 100 ms, a client that waits, and three workers that resume together (a herd).
//!
//! The HTML report is pinned here as text and checked in a real browser by
//! `scripts/check-html-report`. Last, the
//! judge in a real proxy feeds a recorder.

mod support;

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use holdoff_proxy::FaultCounts;
use holdoff_proxy::judge::Verdict;
use holdoff_proxy::report::{Event, Format, HintKind, Recorder, Report, RunInfo};
use insta::assert_snapshot;

const FIXTURE: &str = "tests/fixtures/report/events.jsonl";

fn fixture() -> Report {
    Report::from_events(&Report::read_log(Path::new(FIXTURE)).expect("the fixture reads"))
}

mod snapshots {
    use super::*;

    #[test]
    fn markdown() {
        assert_snapshot!(fixture().render(Format::Markdown));
    }

    #[test]
    fn junit() {
        assert_snapshot!(fixture().render(Format::Junit));
    }

    #[test]
    fn html() {
        assert_snapshot!(fixture().render(Format::Html));
    }

    #[test]
    fn json() {
        assert_snapshot!(fixture().render(Format::Json));
    }

    #[test]
    fn terminal_summary() {
        let written = [
            (Format::Json, "holdoff-report.json".into()),
            (Format::Junit, "holdoff-junit.xml".into()),
            (Format::Markdown, "holdoff-report.md".into()),
            (Format::Html, "holdoff-report.html".into()),
        ];
        assert_snapshot!(fixture().terminal_summary(&written));
    }

    #[test]
    fn markdown_of_a_clean_run() {
        let log = Report::read_log(Path::new(FIXTURE)).expect("the fixture reads");
        let clean: Vec<Event> = log
            .into_iter()
            .filter(|e| {
                !matches!(
                    e,
                    Event::Retry {
                        verdict: Verdict::Premature,
                        ..
                    }
                )
            })
            .collect();
        assert_snapshot!(Report::from_events(&clean).render(Format::Markdown));
    }
}

/// A run of hint-less, malformed and unbounded throttles: a client that read `soon` as zero,
/// one that did not back off after a bare 503 (a warning), one inside a window that never
/// closes, and one that waited out its minimum backoff.
const HINTLESS: &str = r#"{"event":"start","at":"2025-03-01T12:00:00.000Z","seed":9,"source":"config holdoff.yaml","command":["npm","test"],"proxy_url":"http://127.0.0.1:41234","judge_key":"client-method-url","argv":["holdoff","run","-c","holdoff.yaml","-f","100","--seed","9","--","npm","test"]}
{"event":"throttle","at":"2025-03-01T12:00:01.000Z","client":"process:1234 (node)","user_agent":"OpenAI/JS 4.77.0","method":"POST","url":"https://api.openai.com/v1/chat/completions","status":429,"permitted_at":"2025-03-01T12:00:01.100Z","hint":"malformed","header":"retry-after","value":"soon","reading":"malformed, so never zero: a retry must wait the minimum backoff"}
{"event":"retry","verdict":"read_as_zero","client":"process:1234 (node)","user_agent":"OpenAI/JS 4.77.0","method":"POST","url":"https://api.openai.com/v1/chat/completions","throttled_at":"2025-03-01T12:00:01.000Z","permitted_at":"2025-03-01T12:00:01.100Z","retried_at":"2025-03-01T12:00:01.004Z","early_by_ms":96.0}
{"event":"throttle","at":"2025-03-01T12:00:02.000Z","client":"process:1240 (python3)","user_agent":"python-requests/2.32.3","method":"GET","url":"https://api.example.com/v1/items","status":503,"permitted_at":"2025-03-01T12:00:02.100Z","hint":"none","reading":"no hint: the gap to the next request is measured against the minimum backoff"}
{"event":"retry","verdict":"no_backoff","client":"process:1240 (python3)","user_agent":"python-requests/2.32.3","method":"GET","url":"https://api.example.com/v1/items","throttled_at":"2025-03-01T12:00:02.000Z","permitted_at":"2025-03-01T12:00:02.100Z","retried_at":"2025-03-01T12:00:02.018Z","early_by_ms":82.0}
{"event":"throttle","at":"2025-03-01T12:00:03.000Z","client":"process:1250 (curl)","user_agent":"curl/8.5.0","method":"GET","url":"https://api.example.com/v1/users","status":429,"permitted_at":null,"hint":"unbounded","header":"retry-after","value":"99999999999999999999","reading":"longer than the monotonic clock can hold: a window that never closes"}
{"event":"retry","verdict":"premature","client":"process:1250 (curl)","user_agent":"curl/8.5.0","method":"GET","url":"https://api.example.com/v1/users","throttled_at":"2025-03-01T12:00:03.000Z","permitted_at":null,"retried_at":"2025-03-01T12:00:03.500Z"}
{"event":"throttle","at":"2025-03-01T12:00:04.000Z","client":"process:1260 (go)","user_agent":"Go-http-client/1.1","method":"GET","url":"https://api.example.com/v1/items","status":429,"permitted_at":"2025-03-01T12:00:04.100Z","hint":"none","reading":"no hint: the gap to the next request is measured against the minimum backoff"}
{"event":"retry","verdict":"compliant","client":"process:1260 (go)","user_agent":"Go-http-client/1.1","method":"GET","url":"https://api.example.com/v1/items","throttled_at":"2025-03-01T12:00:04.000Z","permitted_at":"2025-03-01T12:00:04.100Z","retried_at":"2025-03-01T12:00:05.000Z","late_by_ms":900.0}
{"event":"finish","at":"2025-03-01T12:00:06.000Z","requests":9,"faults":{"errors":4,"rate_limited":0,"mocked":0,"delayed":0,"resets":0,"hangs":0,"truncated":0,"slowed":0},"exit_code":0}
"#;

fn events_of(text: &str) -> Vec<Event> {
    text.lines()
        .map(|line| serde_json::from_str(line).expect("an event"))
        .collect()
}

mod hintless {
    use super::*;

    #[test]
    fn markdown() {
        assert_snapshot!(Report::from_events(&events_of(HINTLESS)).render(Format::Markdown));
    }

    #[test]
    fn terminal_summary() {
        assert_snapshot!(Report::from_events(&events_of(HINTLESS)).terminal_summary(&[]));
    }

    #[test]
    fn junit() {
        assert_snapshot!(Report::from_events(&events_of(HINTLESS)).render(Format::Junit));
    }

    #[test]
    fn json() {
        assert_snapshot!(Report::from_events(&events_of(HINTLESS)).render(Format::Json));
    }

    #[test]
    fn html() {
        assert_snapshot!(Report::from_events(&events_of(HINTLESS)).render(Format::Html));
    }
}

mod not_tested {
    use super::*;

    const NOTHING: &str = r#"{"event":"start","at":"2025-03-01T12:00:00.000Z","seed":9,"source":"preset throttle","command":["node","-e","fetch(url)"],"proxy_url":"http://127.0.0.1:41234","judge_key":"client-method-url","argv":["holdoff","run","--seed","9","--","node","-e","fetch(url)"]}
{"event":"finish","at":"2025-03-01T12:00:01.000Z","requests":0,"faults":{"errors":0,"rate_limited":0,"mocked":0,"delayed":0,"resets":0,"hangs":0,"truncated":0,"slowed":0},"exit_code":0}
"#;

    #[test]
    fn markdown() {
        assert_snapshot!(Report::from_events(&events_of(NOTHING)).render(Format::Markdown));
    }

    #[test]
    fn terminal_summary() {
        assert_snapshot!(Report::from_events(&events_of(NOTHING)).terminal_summary(&[]));
    }

    #[test]
    fn junit() {
        assert_snapshot!(Report::from_events(&events_of(NOTHING)).render(Format::Junit));
    }

    #[test]
    fn html() {
        assert_snapshot!(Report::from_events(&events_of(NOTHING)).render(Format::Html));
    }
}

mod recorder {
    use super::*;

    fn at(ms: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_millis(1_740_830_400_000 + ms)
    }

    #[test]
    fn its_log_makes_the_same_report_as_its_memory() {
        let dir = std::env::temp_dir().join(format!("holdoff-report-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("create a scratch directory");
        let path = dir.join("events.jsonl");
        let recorder = Arc::new(Recorder::new(Some(&path)).expect("create the log"));
        recorder.start(
            at(0),
            RunInfo {
                seed: Some(42),
                source: "preset throttle".into(),
                command: Some(vec!["sh".into(), "-c".into(), "npm test".into()]),
                proxy_url: "http://127.0.0.1:41234".into(),
                judge_key: "client-method-url".into(),
                argv: None,
                allow_no_traffic: false,
                fail_on_no_backoff: false,
            },
        );
        for event in Report::read_log(Path::new(FIXTURE)).expect("the fixture reads") {
            if matches!(event, Event::Throttle { .. } | Event::Retry { .. }) {
                recorder.record(event);
            }
        }
        let mut faults = FaultCounts::default();
        faults.errors = 2;
        faults.rate_limited = 9;
        recorder.finish(at(14_000), 57, faults, Some(0));
        // Written by the recorder's thread: wait for it.
        recorder.flush();

        let from_log = Report::from_events(&Report::read_log(&path).expect("the log reads"));
        assert_eq!(
            from_log.render(Format::Json),
            recorder.report().render(Format::Json)
        );
        // The recorder writes the fixture back line for line.
        assert_eq!(
            std::fs::read_to_string(&path).expect("read the log"),
            std::fs::read_to_string(FIXTURE).expect("read the fixture")
        );
        std::fs::remove_dir_all(&dir).expect("remove the scratch directory");
    }
}

mod judge {
    use std::net::SocketAddr;

    use holdoff::clock::{Clock, TokioClock};
    use holdoff_proxy::JudgeStage;
    use holdoff_proxy::judge::{Judge, KeyMode};
    use holdoff_testkit::{Reply, TestServer};

    use super::*;

    /// One GET through the proxy as `client`: the status.
    async fn get(proxy: SocketAddr, url: &str, client: &str) -> u16 {
        support::get_as(proxy, url, client).await.status().as_u16()
    }

    #[tokio::test]
    async fn records_each_throttle_and_verdict_while_recording() {
        let upstream = TestServer::start().await;
        upstream.script(
            "/items",
            [
                Reply::too_many_requests("30"),
                Reply::too_many_requests("30"),
            ],
        );
        let dir = holdoff_testkit::TempDir::new("report-recorder");
        let log = dir.path().join("events.jsonl");
        let recorder = Arc::new(Recorder::new(Some(&log)).expect("recorder"));
        let judge = JudgeStage::new(
            Arc::new(Judge::new(KeyMode::default(), TokioClock.now())),
            Arc::new(TokioClock),
        )
        .with_recorder(recorder.clone());
        let (addr, handle) = support::in_process(vec![Arc::new(judge)]).await;
        let url = upstream.url("/items");

        let before = TokioClock.wall_now();
        assert_eq!(get(addr, &url, "alice").await, 429);
        assert_eq!(get(addr, &url, "alice").await, 429, "premature");
        // Not recorded: Bob's throttle and his premature retry.
        recorder.set_recording(false);
        assert_eq!(get(addr, &url, "bob").await, 429);
        assert_eq!(get(addr, &url, "bob").await, 429);
        handle.shutdown();

        recorder.flush();
        let events = Report::read_log(&log).expect("the event log");
        assert_eq!(events.len(), 2, "{events:#?}");
        let Event::Throttle {
            at,
            client,
            method,
            url: throttled_url,
            status,
            permitted_at,
            hint,
            header,
            value,
            reading,
            ..
        } = &events[0]
        else {
            panic!("expected a throttle first: {events:#?}");
        };
        assert_eq!(
            (client.as_str(), method.as_str(), throttled_url, *status),
            ("header:alice", "GET", &url, 429)
        );
        assert!(*at >= before);
        assert_eq!(*hint, HintKind::Usable);
        assert_eq!(
            (header.as_deref(), value.as_deref()),
            (Some("retry-after"), Some("30"))
        );
        assert!(reading.is_some(), "the reading is recorded");
        let wait = permitted_at
            .expect("a window that closes")
            .duration_since(*at)
            .expect("permitted after");
        assert!(
            wait > Duration::from_secs(29) && wait <= Duration::from_secs(30),
            "{wait:?}"
        );
        let Event::Retry {
            verdict,
            client,
            throttled_at,
            early_by_ms,
            late_by_ms,
            ..
        } = &events[1]
        else {
            panic!("expected a retry second: {events:#?}");
        };
        assert_eq!(
            (*verdict, client.as_str()),
            (Verdict::Premature, "header:alice")
        );
        // Both read through the clock pair of their own request: equal to a few nanoseconds.
        let apart = throttled_at
            .duration_since(*at)
            .or_else(|_| at.duration_since(*throttled_at))
            .expect("comparable");
        assert!(apart < Duration::from_millis(1), "{apart:?}");
        assert!(early_by_ms.is_some_and(|ms| ms > 29_000.0) && late_by_ms.is_none());
        assert_eq!(Report::from_events(&events).premature(), 1);
    }
}
