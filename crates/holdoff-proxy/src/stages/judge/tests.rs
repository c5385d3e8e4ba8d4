use std::time::UNIX_EPOCH;

use http::{Method, StatusCode, header};

use super::read::*;
use super::verdicts::*;
use super::*;
use crate::judge::Verdict;
use crate::lines::LINES_PER_SECOND;
use crate::proxy::reply::is_graph_host;

/// A judge stage keying by `mode`, on `clock`.
fn stage_on(mode: crate::judge::KeyMode, clock: &holdoff::clock::ManualClock) -> JudgeStage {
    JudgeStage::new(
        Arc::new(Judge::new(mode, clock.now())),
        Arc::new(clock.clone()),
    )
}

/// Request `id` of `client` for `url`, watched, arriving at `clock`'s time.
fn watched(id: u64, client: &str, url: &str, clock: &holdoff::clock::ManualClock) -> RequestMeta {
    RequestMeta {
        watched: Some("*".into()),
        ..RequestMeta::for_test(
            id,
            client,
            url,
            Receipt {
                instant: clock.now(),
                wall: clock.wall_now(),
            },
        )
    }
}

mod has_hint_header {
    use super::*;

    #[test]
    fn finds_each_hint_and_nothing_else() {
        for name in holdoff::HINT_HEADERS {
            let mut headers = http::HeaderMap::new();
            headers.insert("content-type", "text/plain".parse().unwrap());
            headers.insert(*name, "1".parse().unwrap());
            assert!(has_hint_header(&headers), "{name}");
        }
        let mut headers = http::HeaderMap::new();
        headers.insert("x-ratelimit-remaining", "0".parse().unwrap());
        headers.insert("date", "Sun, 06 Nov 1994 08:49:37 GMT".parse().unwrap());
        assert!(!has_hint_header(&headers));
    }
}

mod followed {
    use super::*;

    fn follow(status: u16, method: Method, location: &str) -> Option<(Method, String)> {
        let mut meta = RequestMeta::for_test(
            0,
            "alice",
            "http://api.test/v1/old?x=1",
            Receipt::now(&holdoff::clock::TokioClock),
        );
        meta.method = method;
        let mut headers = http::HeaderMap::new();
        headers.insert(header::LOCATION, location.parse().unwrap());
        let status = StatusCode::from_u16(status).unwrap();
        followed(status, &headers, &meta).map(|next| (next.method, next.target.to_string()))
    }

    #[test]
    fn resolves_the_location_against_the_request() {
        assert_eq!(
            follow(307, Method::PUT, "new"),
            Some((Method::PUT, "http://api.test/v1/new".to_owned()))
        );
        assert_eq!(
            follow(308, Method::GET, "https://other.test:8443/x"),
            Some((Method::GET, "https://other.test:8443/x".to_owned()))
        );
        assert_eq!(follow(307, Method::GET, "mailto:ops@api.test"), None);
    }

    #[test]
    fn takes_the_method_a_client_follows_with() {
        let get = |status, method| follow(status, method, "/n").map(|(method, _)| method);
        assert_eq!(get(303, Method::POST), Some(Method::GET));
        assert_eq!(get(303, Method::HEAD), Some(Method::HEAD));
        assert_eq!(get(302, Method::POST), Some(Method::GET));
        assert_eq!(get(301, Method::POST), Some(Method::GET));
        assert_eq!(get(307, Method::POST), Some(Method::POST));
        assert_eq!(get(302, Method::DELETE), Some(Method::DELETE));
    }
}

mod graph_hosts {
    use http_body_util::BodyExt;

    use super::*;

    /// A throttle of `url` then an immediate retry, through the stage alone.
    async fn premature_retry(url: &str) -> Response<Body> {
        let clock = holdoff::clock::ManualClock::new(UNIX_EPOCH + Duration::from_secs(1));
        let stage = stage_on(crate::judge::KeyMode::default(), &clock);
        let meta = |id| watched(id, "alice", url, &clock);
        let request = || Request::get(url).body(Body::empty()).unwrap();
        let first = meta(1);
        let Action::Continue(_) = stage.on_request(request(), &first) else {
            panic!("the first request goes on");
        };
        let mut throttle = Response::new(Body::empty());
        *throttle.status_mut() = StatusCode::TOO_MANY_REQUESTS;
        throttle
            .headers_mut()
            .insert(header::RETRY_AFTER, 30.into());
        stage.on_response(&mut throttle, &first);
        let _ = stage.finish_response(&throttle, &first);
        match stage.on_request(request(), &meta(2)) {
            Action::Respond(response) => response,
            other => panic!("a premature retry is answered: {other:?}"),
        }
    }

    #[tokio::test]
    async fn get_graphs_json_error_as_dev_proxy_answers_them() {
        let response = premature_retry("https://graph.microsoft.com/v1.0/me").await;
        assert_eq!(response.status(), StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(response.headers()[header::RETRY_AFTER], "30");
        assert_eq!(response.headers()[header::CONTENT_TYPE], "application/json");
        assert!(response.extensions().get::<OwnAnswer>().is_some());
        let body = response.into_body().collect().await.unwrap().to_bytes();
        let body: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(body["error"]["code"], "Too Many Requests");
        let message = body["error"]["message"].as_str().unwrap();
        assert!(message.starts_with("premature retry"), "{message}");
        assert!(message.ends_with("(Retry-After: 30)"), "{message}");
    }

    #[tokio::test]
    async fn and_other_hosts_plain_text() {
        let response = premature_retry("https://api.example/items").await;
        assert_eq!(response.status(), StatusCode::TOO_MANY_REQUESTS);
        assert!(
            response.headers()[header::CONTENT_TYPE]
                .to_str()
                .unwrap()
                .starts_with("text/plain")
        );
    }

    #[test]
    fn are_told_as_dev_proxy_tells_them() {
        for host in [
            "graph.microsoft.com",
            "GRAPH.microsoft.us",
            "dod-graph.microsoft.us",
            "microsoftgraph.chinacloudapi.cn",
        ] {
            assert!(is_graph_host(host), "{host}");
        }
        for host in [
            "graph.example",
            "api.github.com",
            "mygraph.microsoft.com",
            "g",
        ] {
            assert!(!is_graph_host(host), "{host}");
        }
    }
}

mod verdict_log {
    use std::io;
    use std::sync::Mutex;

    use super::*;

    /// What the log received, one string per line.
    #[derive(Clone, Default)]
    struct Captured(Arc<Mutex<Vec<u8>>>);

    impl io::Write for Captured {
        fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(bytes);
            Ok(bytes.len())
        }

        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    /// Records `per_second[i]` premature retries in second `i`, and returns the log.
    fn log_of(verdicts: &Verdicts, per_second: &[u32]) -> Vec<String> {
        let captured = Captured::default();
        let writer = captured.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_writer(move || writer.clone())
            .with_ansi(false)
            .without_time()
            .finish();
        let start = UNIX_EPOCH + Duration::from_secs(1_740_830_400);
        let instant = holdoff::clock::Clock::now(&holdoff::clock::ManualClock::new(start));
        tracing::subscriber::with_default(subscriber, || {
            for (second, &count) in per_second.iter().enumerate() {
                let at = start + Duration::from_secs(second as u64);
                for _ in 0..count {
                    verdicts.record(
                        Verdict::Premature,
                        &Request::new(Body::empty()),
                        &RequestMeta::for_test(
                            0,
                            "alice",
                            "http://api.example/items",
                            Receipt { instant, wall: at },
                        ),
                        Seen {
                            throttled_at: instant,
                            permitted_at: Some(instant),
                            by: Some(Duration::from_millis(900)),
                            holder: None,
                        },
                    );
                }
            }
        });
        let text = String::from_utf8(captured.0.lock().unwrap().clone()).unwrap();
        text.lines().map(str::to_owned).collect()
    }

    #[test]
    fn logs_a_few_verdicts_a_second_and_says_how_many_it_left_out() {
        let verdicts = Verdicts::default();
        let limit = LINES_PER_SECOND as usize;
        let lines = log_of(&verdicts, &[500, 3]);
        let one_by_one = lines
            .iter()
            .filter(|line| line.contains("premature retry client=header:alice"))
            .count();
        assert_eq!(one_by_one, limit + 3, "{lines:#?}");
        let left_out: Vec<_> = lines
            .iter()
            .filter(|line| line.contains("more premature retries were not logged"))
            .collect();
        assert_eq!(left_out.len(), 1, "{lines:#?}");
        assert!(
            left_out[0].contains(&format!("{} more", 500 - limit)),
            "{}",
            left_out[0]
        );
        // The line saying so comes before the next second's first verdict.
        let at = lines.iter().position(|line| line == left_out[0]).unwrap();
        assert_eq!(at, limit, "{lines:#?}");
        // Every verdict is still kept for the reports.
        assert_eq!(verdicts.events.list().len(), 503);
    }

    #[test]
    fn logs_every_verdict_of_a_quiet_client() {
        let verdicts = Verdicts::default();
        let lines = log_of(&verdicts, &[3, 0, 5, 1]);
        assert_eq!(lines.len(), 9, "{lines:#?}");
        assert!(lines.iter().all(|line| line.contains("premature retry")));
    }
}

mod siblings {
    use super::*;
    use crate::judge::KeyMode;
    use holdoff::clock::ManualClock;

    /// Process `pid`'s request for `url` at the clock's time.
    fn from(pid: u32, url: &str, clock: &ManualClock) -> RequestMeta {
        RequestMeta {
            client: ClientId::Process {
                pid,
                name: "curl".into(),
            },
            ..watched(u64::from(pid), "unused", url, clock)
        }
    }

    /// A stage keying by `mode`, on which process 100 was told to wait 2 s for `url`.
    fn throttled(mode: KeyMode, url: &str, clock: &ManualClock) -> JudgeStage {
        let stage = stage_on(mode, clock);
        let first = from(100, url, clock);
        let request = Request::get(url).body(Body::empty()).unwrap();
        let Action::Continue(_) = stage.on_request(request, &first) else {
            panic!("the first request goes on");
        };
        let mut throttle = Response::new(Body::empty());
        *throttle.status_mut() = StatusCode::TOO_MANY_REQUESTS;
        throttle.headers_mut().insert(header::RETRY_AFTER, 2.into());
        stage.on_response(&mut throttle, &first);
        stage
    }

    fn ask(stage: &JudgeStage, meta: &RequestMeta) -> bool {
        let request = Request::get(meta.target.to_string())
            .body(Body::empty())
            .unwrap();
        matches!(stage.on_request(request, meta), Action::Continue(_))
    }

    #[test]
    fn another_process_inside_the_wait_is_reported_and_let_through() {
        let clock = ManualClock::new(UNIX_EPOCH + Duration::from_secs(1));
        let url = "http://api.test/jobs";
        let stage = throttled(KeyMode::default(), url, &clock);
        clock.advance(Duration::from_millis(500));
        assert!(ask(&stage, &from(101, url, &clock)), "let through");
        // Another URL, then the same after the wait: nothing to report.
        assert!(ask(&stage, &from(102, "http://api.test/other", &clock)));
        clock.advance(Duration::from_millis(1500));
        assert!(ask(&stage, &from(103, url, &clock)));
        let events = stage.events();
        assert_eq!(events.len(), 1, "{events:?}");
        let event = &events[0];
        assert_eq!(event.verdict, Verdict::Sibling);
        assert_eq!(event.client, "process:curl[101]");
        assert_eq!(event.throttled_client.as_deref(), Some("process:curl[100]"));
        assert_eq!(event.by, Some(Duration::from_millis(1500)));
    }

    #[test]
    fn the_process_told_is_judged_by_its_own_window_and_other_keys_judge_all_as_one() {
        let clock = ManualClock::new(UNIX_EPOCH + Duration::from_secs(1));
        let url = "http://api.test/jobs";
        let stage = throttled(KeyMode::default(), url, &clock);
        clock.advance(Duration::from_millis(500));
        assert!(!ask(&stage, &from(100, url, &clock)), "answered: premature");
        assert_eq!(stage.events()[0].verdict, Verdict::Premature);
        assert_eq!(stage.events().len(), 1);

        let stage = throttled(KeyMode::MethodUrl, url, &clock);
        clock.advance(Duration::from_millis(500));
        assert!(
            !ask(&stage, &from(101, url, &clock)),
            "one client: premature"
        );
        let verdicts: Vec<Verdict> = stage.events().iter().map(|e| e.verdict).collect();
        assert_eq!(verdicts, [Verdict::Premature]);
    }
}

mod longest_wait {
    use super::*;
    use holdoff::clock::ManualClock;

    /// The verdict's permitted time on a retry 1 s after a 429 with `retry_after`.
    fn permitted_after(retry_after: &str) -> Option<std::time::SystemTime> {
        let clock = ManualClock::new(UNIX_EPOCH + Duration::from_secs(1_780_000_000));
        let stage = stage_on(crate::judge::KeyMode::default(), &clock);
        let url = "http://api.test/x";
        let meta = |id| watched(id, "alice", url, &clock);
        let first = meta(1);
        let _ = stage.on_request(Request::get(url).body(Body::empty()).unwrap(), &first);
        let mut throttle = Response::new(Body::empty());
        *throttle.status_mut() = StatusCode::TOO_MANY_REQUESTS;
        let headers = throttle.headers_mut();
        headers.insert(header::RETRY_AFTER, retry_after.parse().unwrap());
        stage.on_response(&mut throttle, &first);
        clock.advance(Duration::from_secs(1));
        let _ = stage.on_request(Request::get(url).body(Body::empty()).unwrap(), &meta(2));
        let events = stage.events();
        assert_eq!(events.len(), 1, "{events:?}");
        assert_eq!(events[0].verdict, Verdict::Premature);
        events[0].permitted_at
    }

    #[test]
    fn a_hint_longer_than_the_judge_holds_never_closes_and_is_not_cut_short() {
        // 317 years: a time.
        let year = 365 * 24 * 3600;
        let at = permitted_after(&(317 * year).to_string()).expect("a permitted time");
        let after = at.duration_since(UNIX_EPOCH).unwrap().as_secs() - 1_780_000_000;
        assert_eq!(after, 317 * year);
        // 3,170 years, in seconds or as an HTTP-date: never, not a time in 2611.
        assert_eq!(permitted_after("99999999999"), None);
        assert_eq!(permitted_after("Fri, 31 Dec 9999 23:59:59 GMT"), None);
    }
}
