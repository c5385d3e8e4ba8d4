//! Every report format, as its reader sees it, built from the fixture event log
//! (`tests/fixtures/report/events.jsonl`: fixed times, no clock): a naive client that retries
//! after 100 ms, a client that waits, and three workers that resume together (a herd).
//!
//! The HTML report is checked in a real browser by `scripts/check-html-report`. Last, the
//! judge in a real proxy feeds a recorder.

mod support;

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use holdoff_proxy::fault::FaultCounts;
use holdoff_proxy::judge::Verdict;
use holdoff_proxy::report::{Event, Format, Recorder, Report, RunInfo};
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
    use holdoff_proxy::judge::{Judge, JudgeStage, KeyMode};
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
        let recorder = Arc::new(Recorder::new(None).expect("recorder"));
        let judge = JudgeStage::new(Arc::new(Judge::new(KeyMode::default(), TokioClock.now())))
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

        let events = recorder.events();
        assert_eq!(events.len(), 2, "{events:#?}");
        let Event::Throttle {
            at,
            client,
            method,
            url: throttled_url,
            status,
            permitted_at,
        } = &events[0]
        else {
            panic!("expected a throttle first: {events:#?}");
        };
        assert_eq!(
            (client.as_str(), method.as_str(), throttled_url, *status),
            ("header:alice", "GET", &url, 429)
        );
        assert!(*at >= before);
        let wait = permitted_at.duration_since(*at).expect("permitted after");
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
