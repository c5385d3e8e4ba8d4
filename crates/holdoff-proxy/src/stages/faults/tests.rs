//! The fault stage driven by hand: every fault, its counts, its notes.

use super::*;
use crate::fault::Rate;
use crate::fault::ratelimit::{Algorithm, HeaderStyle, Limit, ResetFormat};
use crate::fault::{ErrorRule, FaultOutcome, LatencyRule, MockRule, RequestMatch, Scope};
use holdoff::Receipt;
use holdoff::clock::{ManualClock, SystemClock, TokioClock};
use http::Method;
use http_body_util::BodyExt;
use std::time::UNIX_EPOCH;

const API: &str = "http://api.test/*";

fn meta(id: u64, client: &str, method: Method, url: &str) -> RequestMeta {
    let received = Receipt {
        instant: SystemClock.now(),
        wall: UNIX_EPOCH,
    };
    RequestMeta {
        id,
        method,
        watched: Some(API.into()),
        ..RequestMeta::for_test(id, client, url, received)
    }
}

fn request(method: Method, url: &str, body: impl Into<Body>) -> Request<Body> {
    Request::builder()
        .method(method)
        .uri(url)
        .body(body.into())
        .unwrap()
}

/// Runs one request through the stage; ids count up from 0 per stage.
struct Driver {
    stage: FaultStage,
    next_id: u64,
}

impl Driver {
    fn new(plan: FaultPlan, seed: u64) -> Driver {
        let clock = ManualClock::new(UNIX_EPOCH + Duration::from_secs(1_700_000_000));
        Driver::with_clock(plan, seed, Arc::new(clock))
    }

    fn with_clock(plan: FaultPlan, seed: u64, clock: Arc<dyn Clock>) -> Driver {
        Driver {
            stage: FaultStage::new(plan, FaultRng::new(seed), clock),
            next_id: 0,
        }
    }

    fn meta(&mut self, client: &str, method: Method, url: &str) -> RequestMeta {
        self.next_id += 1;
        meta(self.next_id, client, method, url)
    }

    /// The action for a bodiless request, as the pipeline would see it.
    fn send(&mut self, method: Method, url: &str) -> Action {
        let meta = self.meta("alice", method.clone(), url);
        self.stage
            .on_request(request(method, url, Body::empty()), &meta)
    }

    fn get(&mut self, url: &str) -> Action {
        self.send(Method::GET, url)
    }

    /// A GET as `client` through the stage and, when it continues, a `200` back through
    /// `on_response`.
    async fn exchange(&mut self, client: &str, url: &str) -> Response<Body> {
        let meta = self.meta(client, Method::GET, url);
        let action = self
            .stage
            .on_request(request(Method::GET, url, Body::empty()), &meta);
        let mut response = match settle(action).await {
            Action::Continue(mut request) => {
                let mut response = Response::new(Body::from("upstream"));
                Notes::pass(&mut request, &mut response);
                response
            }
            Action::Respond(response) => response,
            other => panic!("unexpected {other:?}"),
        };
        self.stage.on_response(&mut response, &meta);
        response
    }
}

async fn settle(mut action: Action) -> Action {
    while let Action::Later(future) = action {
        action = future.await;
    }
    action
}

/// The status of an answer, `None` for a request that goes on.
fn answered(action: &Action) -> Option<StatusCode> {
    match action {
        Action::Continue(_) => None,
        Action::Respond(response) => Some(response.status()),
        other => panic!("unexpected {other:?}"),
    }
}

fn header(response: &Response<Body>, name: &str) -> String {
    response
        .headers()
        .get(name)
        .map(|value| value.to_str().unwrap().to_owned())
        .unwrap_or_default()
}

fn error_response(status: u16, retry_after: Option<&str>) -> ErrorResponse {
    ErrorResponse {
        status: StatusCode::from_u16(status).unwrap(),
        headers: retry_after
            .map(|value| {
                (
                    header::RETRY_AFTER,
                    HeaderTemplate::parse(value, 2..=60).unwrap(),
                )
            })
            .into_iter()
            .collect(),
        body: Bytes::from_static(b"injected"),
    }
}

fn error_rule(url: &str, percent: f64, outcomes: Vec<FaultOutcome>) -> ErrorRule {
    ErrorRule {
        request: RequestMatch::url(url.parse().unwrap()),
        rate: Rate::percent(percent).unwrap(),
        outcomes,
    }
}

fn errors(rules: Vec<ErrorRule>) -> FaultPlan {
    FaultPlan {
        errors: rules,
        ..FaultPlan::default()
    }
}

fn throttled_at(percent: f64) -> FaultPlan {
    errors(vec![error_rule(
        API,
        percent,
        vec![FaultOutcome::Respond(error_response(429, Some("@dynamic")))],
    )])
}

fn failures(driver: &mut Driver, requests: usize) -> usize {
    (0..requests)
        .filter(|_| answered(&driver.get("http://api.test/items")).is_some())
        .count()
}

mod error_rules {
    use super::*;

    #[test]
    fn fire_on_every_spelling_of_a_watched_url() {
        // The watch list reads `:080` as port 80 and a host in any case; so do the rules.
        let mut driver = Driver::new(throttled_at(100.0), 1);
        for url in [
            "http://api.test/x",
            "http://api.test:80/x",
            "http://api.test:080/x",
            "http://API.Test/x",
        ] {
            assert_eq!(
                answered(&driver.get(url)),
                Some(StatusCode::TOO_MANY_REQUESTS),
                "{url}"
            );
        }
    }

    #[test]
    fn a_rate_of_zero_never_fails() {
        let mut driver = Driver::new(throttled_at(0.0), 1);
        assert_eq!(failures(&mut driver, 10_000), 0);
        assert_eq!(driver.stage.counts(), FaultCounts::default());
    }

    #[test]
    fn a_rate_of_a_hundred_always_fails() {
        let mut driver = Driver::new(throttled_at(100.0), 1);
        assert_eq!(failures(&mut driver, 10_000), 10_000);
        assert_eq!(driver.stage.counts().errors, 10_000);
    }

    #[test]
    fn a_rate_of_fifty_fails_about_half() {
        let mut driver = Driver::new(throttled_at(50.0), 1);
        let failed = failures(&mut driver, 10_000);
        assert!((4_800..=5_200).contains(&failed), "{failed}");
    }

    #[test]
    fn the_same_seed_gives_the_same_faults_and_another_seed_others() {
        let plan = || {
            errors(vec![error_rule(
                API,
                50.0,
                vec![
                    FaultOutcome::Respond(error_response(429, Some("@dynamic"))),
                    FaultOutcome::Respond(error_response(503, Some("@dynamic"))),
                ],
            )])
        };
        let run = |seed| {
            let mut driver = Driver::new(plan(), seed);
            (0..1_000)
                .map(|_| match driver.get("http://api.test/items") {
                    Action::Respond(response) => {
                        Some((response.status(), header(&response, "retry-after")))
                    }
                    _ => None,
                })
                .collect::<Vec<_>>()
        };
        let first = run(42);
        assert_eq!(first, run(42));
        assert_ne!(first, run(43));
        // Both outcomes are drawn.
        assert!(first.iter().flatten().any(|(status, _)| *status == 429));
        assert!(first.iter().flatten().any(|(status, _)| *status == 503));
    }

    #[test]
    fn the_first_rule_that_matches_decides() {
        let plan = errors(vec![
            error_rule(
                "http://api.test/quiet/*",
                0.0,
                vec![FaultOutcome::Respond(error_response(500, None))],
            ),
            error_rule(
                "http://api.test/a/*",
                100.0,
                vec![FaultOutcome::Respond(error_response(500, None))],
            ),
            error_rule(
                API,
                100.0,
                vec![FaultOutcome::Respond(error_response(503, None))],
            ),
        ]);
        let mut driver = Driver::new(plan, 1);
        assert_eq!(
            answered(&driver.get("http://api.test/a/1")),
            Some(StatusCode::INTERNAL_SERVER_ERROR)
        );
        assert_eq!(
            answered(&driver.get("http://api.test/b")),
            Some(StatusCode::SERVICE_UNAVAILABLE)
        );
        // The first match never fails, and the rules after it are not asked.
        assert_eq!(answered(&driver.get("http://api.test/quiet/1")), None);
    }

    #[test]
    fn a_method_limits_the_rule() {
        let mut rule = error_rule(
            API,
            100.0,
            vec![FaultOutcome::Respond(error_response(500, None))],
        );
        rule.request.method = Some(Method::POST);
        let mut driver = Driver::new(errors(vec![rule]), 1);
        assert_eq!(
            answered(&driver.send(Method::GET, "http://api.test/x")),
            None
        );
        assert_eq!(
            answered(&driver.send(Method::POST, "http://api.test/x")),
            Some(StatusCode::INTERNAL_SERVER_ERROR)
        );
    }

    #[test]
    fn a_default_port_in_the_url_still_matches() {
        let mut driver = Driver::new(throttled_at(100.0), 1);
        assert!(answered(&driver.get("http://api.test:80/x")).is_some());
        assert!(answered(&driver.get("http://api.test:8080/x")).is_none());
    }

    #[test]
    fn an_unwatched_request_is_not_touched() {
        let mut driver = Driver::new(throttled_at(100.0), 1);
        let mut meta = driver.meta("alice", Method::GET, "http://api.test/x");
        meta.watched = None;
        let action = driver.stage.on_request(
            request(Method::GET, "http://api.test/x", Body::empty()),
            &meta,
        );
        assert_eq!(answered(&action), None);
        assert_eq!(driver.stage.counts(), FaultCounts::default());
    }
}

mod mocks {
    use super::*;

    fn mock(nth: Option<u64>) -> MockRule {
        MockRule {
            request: RequestMatch::url("http://api.test/mocked".parse().unwrap()),
            nth,
            response: FaultOutcome::Respond(ErrorResponse {
                status: StatusCode::OK,
                headers: Vec::new(),
                body: Bytes::from_static(b"{\"mocked\":true}"),
            }),
        }
    }

    #[tokio::test]
    async fn a_mock_answers_with_its_body() {
        let mut plan = FaultPlan::default();
        plan.mocks.push(mock(None));
        let mut driver = Driver::new(plan, 1);
        let response = driver.exchange("alice", "http://api.test/mocked").await;
        let body = response.into_body().collect().await.unwrap().to_bytes();
        assert_eq!(body, "{\"mocked\":true}");
        assert_eq!(driver.stage.counts().mocked, 1);
    }

    #[test]
    fn nth_answers_only_the_nth_match() {
        let mut plan = FaultPlan::default();
        plan.mocks.push(mock(Some(2)));
        let mut driver = Driver::new(plan, 1);
        let statuses: Vec<_> = (0..4)
            .map(|_| answered(&driver.get("http://api.test/mocked")))
            .collect();
        assert_eq!(statuses, [None, Some(StatusCode::OK), None, None]);
        // Other URLs do not count.
        assert_eq!(answered(&driver.get("http://api.test/other")), None);
    }

    /// A mock of `status` for the same URL as [`mock`]'s.
    fn mock_with(nth: Option<u64>, status: StatusCode) -> MockRule {
        let mut mock = mock(nth);
        if let FaultOutcome::Respond(response) = &mut mock.response {
            response.status = status;
        }
        mock
    }

    #[test]
    fn nth_numbers_the_requests_of_a_url_across_its_mocks_as_dev_proxy_does() {
        // Dev Proxy's "fail twice, then succeed": 429, 503, then the un-numbered 200.
        let mut plan = FaultPlan::default();
        plan.mocks
            .push(mock_with(Some(1), StatusCode::TOO_MANY_REQUESTS));
        plan.mocks
            .push(mock_with(Some(2), StatusCode::SERVICE_UNAVAILABLE));
        plan.mocks.push(mock_with(None, StatusCode::OK));
        let mut driver = Driver::new(plan, 1);
        let statuses: Vec<_> = (0..4)
            .map(|_| answered(&driver.get("http://api.test/mocked")))
            .collect();
        assert_eq!(
            statuses,
            [
                Some(StatusCode::TOO_MANY_REQUESTS),
                Some(StatusCode::SERVICE_UNAVAILABLE),
                Some(StatusCode::OK),
                Some(StatusCode::OK)
            ]
        );
    }

    #[test]
    fn replacing_the_plan_restarts_nth() {
        let plan = || {
            let mut plan = FaultPlan::default();
            plan.mocks.push(mock(Some(1)));
            plan
        };
        let mut driver = Driver::new(plan(), 1);
        assert!(answered(&driver.get("http://api.test/mocked")).is_some());
        assert!(answered(&driver.get("http://api.test/mocked")).is_none());
        driver.stage.replace_plan(plan());
        assert!(answered(&driver.get("http://api.test/mocked")).is_some());
    }

    #[tokio::test]
    async fn unmocked_requests_are_blocked_with_a_one_line_reason() {
        let mut plan = FaultPlan::default();
        plan.mocks.push(mock(None));
        plan.block_unmocked = true;
        let mut driver = Driver::new(plan, 1);
        assert_eq!(
            answered(&driver.get("http://api.test/mocked")),
            Some(StatusCode::OK)
        );
        let response = driver.exchange("alice", "http://api.test/other").await;
        assert_eq!(response.status(), StatusCode::BAD_GATEWAY);
        let body = response.into_body().collect().await.unwrap().to_bytes();
        let text = std::str::from_utf8(&body).unwrap();
        assert_eq!(text.trim_end().lines().count(), 1, "{text}");
    }
}

mod rate_limits {
    use super::*;

    const S: Duration = Duration::from_secs(1);

    fn limited(style: HeaderStyle, when_exceeded: Option<ErrorResponse>) -> FaultPlan {
        let mut plan = FaultPlan::default();
        plan.rate_limits.push(RateLimitRule {
            url: None,
            method: None,
            limit: Limit {
                algorithm: Algorithm::FixedWindow,
                limit: 3,
                window: 10 * S,
                cost: 1,
            },
            scope: Scope::Client,
            headers: style,
            reset_format: ResetFormat::SecondsLeft,
            warning_threshold_percent: 0,
            when_exceeded,
        });
        plan
    }

    /// Three requests at 2.25 s into the window, then the refused fourth.
    async fn fill(driver: &mut Driver) -> (Vec<Response<Body>>, Response<Body>) {
        tokio::time::advance(2 * S + Duration::from_millis(250)).await;
        let mut allowed = Vec::new();
        for _ in 0..3 {
            allowed.push(driver.exchange("alice", "http://api.test/x").await);
        }
        let refused = driver.exchange("alice", "http://api.test/x").await;
        (allowed, refused)
    }

    fn driver(plan: FaultPlan) -> Driver {
        Driver::with_clock(plan, 1, Arc::new(TokioClock))
    }

    #[tokio::test(start_paused = true)]
    async fn a_later_step_that_answers_takes_the_counted_requests_headers() {
        // Rate limits first, then auth: a request without a key is counted, then refused; the
        // 401 carries the limit's headers, as any answer after the count does.
        use crate::fault::FaultOrder;
        use crate::fault::{AuthCheck, AuthRule, KeyIn, KeyParameter};
        let mut plan = limited(HeaderStyle::XRateLimit, None);
        plan.order = FaultOrder::new([FaultStep::RateLimits]).unwrap();
        plan.auth.push(AuthRule {
            url: None,
            check: AuthCheck::ApiKey {
                parameters: vec![KeyParameter {
                    location: KeyIn::Header,
                    name: "x-api-key".to_owned(),
                }],
                allowed_keys: vec!["key".to_owned()],
            },
        });
        let mut driver = driver(plan);
        for remaining in ["2", "1"] {
            let refused = driver.exchange("alice", "http://api.test/x").await;
            assert_eq!(refused.status(), StatusCode::UNAUTHORIZED);
            assert_eq!(refused.headers()["x-ratelimit-remaining"], remaining);
        }
    }

    #[tokio::test(start_paused = true)]
    async fn admits_the_limit_then_refuses_with_the_wait_rounded_up() {
        let mut driver = driver(limited(HeaderStyle::Draft, None));
        let (allowed, refused) = fill(&mut driver).await;
        for (response, remaining) in allowed.iter().zip(["2", "1", "0"]) {
            assert_eq!(response.status(), StatusCode::OK);
            assert_eq!(header(response, "ratelimit-limit"), "3");
            assert_eq!(header(response, "ratelimit-remaining"), remaining);
            assert_eq!(header(response, "ratelimit-reset"), "8");
        }
        assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
        // 7.75 s are left in the window: 8 whole seconds.
        assert_eq!(header(&refused, "retry-after"), "8");
        assert_eq!(header(&refused, "ratelimit-remaining"), "0");
        assert!(header(&refused, "content-type").starts_with("text/plain"));
        assert_eq!(driver.stage.counts().rate_limited, 1);

        // Another client has its own counter.
        let bob = driver.exchange("bob", "http://api.test/x").await;
        assert_eq!(bob.status(), StatusCode::OK);
        // The window ends: the count starts over.
        tokio::time::advance(8 * S).await;
        let later = driver.exchange("alice", "http://api.test/x").await;
        assert_eq!(later.status(), StatusCode::OK);
    }

    #[tokio::test(start_paused = true)]
    async fn a_graph_host_is_refused_with_graphs_json_error() {
        let mut driver = driver(limited(HeaderStyle::None, None));
        let url = "https://graph.microsoft.com/v1.0/me/messages";
        for _ in 0..3 {
            assert_eq!(driver.exchange("alice", url).await.status(), StatusCode::OK);
        }
        let refused = driver.exchange("alice", url).await;
        assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(header(&refused, "retry-after"), "10");
        assert_eq!(header(&refused, "content-type"), "application/json");
        let body = refused.into_body().collect().await.unwrap().to_bytes();
        let body: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(body["error"]["code"], "Too Many Requests");
        assert_eq!(
            body["error"]["message"],
            "holdoff: rate limit exceeded; retry in 10s"
        );
    }

    /// The judge reads the proxy's own draft-11 fields back: alone, on a refusal, they ask
    /// for the wait its `Retry-After` does, whatever the algorithm.
    #[tokio::test(start_paused = true)]
    async fn the_ietf_fields_of_a_refusal_ask_for_the_wait_of_its_retry_after() {
        use holdoff::{Attempt, Earliest, HintSource, Policy, ResponseInfo};
        for algorithm in [
            Algorithm::FixedWindow,
            Algorithm::SlidingWindow,
            Algorithm::TokenBucket,
            Algorithm::FixedFromFirstRequest,
        ] {
            let mut plan = limited(HeaderStyle::Ietf, None);
            plan.rate_limits[0].limit.algorithm = algorithm;
            let mut driver = driver(plan);
            let (_, refused) = fill(&mut driver).await;
            assert_eq!(
                refused.status(),
                StatusCode::TOO_MANY_REQUESTS,
                "{algorithm:?}"
            );
            let asked = Duration::from_secs(header(&refused, "retry-after").parse().unwrap());
            let receipt = Receipt {
                instant: SystemClock.now(),
                wall: UNIX_EPOCH,
            };
            let mut ietf_only = refused.headers().clone();
            ietf_only.remove(header::RETRY_AFTER);
            let policy = Policy::default();
            for (headers, decided_by) in [
                (refused.headers(), HintSource::RetryAfter),
                (&ietf_only, HintSource::RateLimit),
            ] {
                let response = ResponseInfo::from_headers(refused.status(), headers, receipt);
                let earliest = policy.earliest(&response);
                assert!(
                    matches!(earliest, Earliest::At { after, source, .. }
                        if after == asked && source == decided_by),
                    "{algorithm:?}: {earliest:?}, asked {asked:?}"
                );
                let attempt = Attempt::new(&Method::GET, 1);
                let verdict = policy.decide(&response, &attempt);
                assert_eq!(verdict.decision.wait(), Some(asked), "{algorithm:?}");
                assert_eq!(verdict.diagnostics.source, Some(decided_by));
            }
        }
    }

    #[tokio::test(start_paused = true)]
    async fn writes_each_style() {
        let mut driver = driver(limited(HeaderStyle::Ietf, None));
        let (allowed, refused) = fill(&mut driver).await;
        assert_eq!(
            header(&allowed[0], "ratelimit-policy"),
            "\"default\";q=3;w=10"
        );
        assert_eq!(header(&allowed[0], "ratelimit"), "\"default\";r=2;t=8");
        assert_eq!(header(&refused, "ratelimit"), "\"default\";r=0;t=8");

        let mut driver = self::driver(limited(HeaderStyle::XRateLimit, None));
        let (allowed, refused) = fill(&mut driver).await;
        assert_eq!(header(&allowed[2], "x-ratelimit-remaining"), "0");
        assert_eq!(header(&refused, "x-ratelimit-limit"), "3");

        let mut driver = self::driver(limited(HeaderStyle::None, None));
        let (allowed, refused) = fill(&mut driver).await;
        assert!(
            allowed[0]
                .headers()
                .keys()
                .all(|name| !name.as_str().contains("ratelimit"))
        );
        assert_eq!(header(&refused, "retry-after"), "8");
    }

    #[tokio::test(start_paused = true)]
    async fn a_custom_refusal_gets_the_wait_in_its_dynamic_header() {
        let github = ErrorResponse {
            status: StatusCode::FORBIDDEN,
            headers: vec![
                (
                    header::RETRY_AFTER,
                    HeaderTemplate::parse("@dynamic", 1..=1).unwrap(),
                ),
                (
                    header::CONTENT_TYPE,
                    HeaderTemplate::parse("application/json", 1..=1).unwrap(),
                ),
            ],
            body: Bytes::from_static(b"{\"message\":\"API rate limit exceeded\"}"),
        };
        let mut plan = limited(HeaderStyle::XRateLimit, Some(github));
        plan.rate_limits[0].reset_format = ResetFormat::EpochSeconds;
        let mut driver = driver(plan);
        let (_, refused) = fill(&mut driver).await;
        assert_eq!(refused.status(), StatusCode::FORBIDDEN);
        assert_eq!(header(&refused, "retry-after"), "8");
        assert_eq!(header(&refused, "content-type"), "application/json");
        let reset: u64 = header(&refused, "x-ratelimit-reset").parse().unwrap();
        let now = TokioClock
            .wall_now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_secs();
        assert!((now + 7..=now + 9).contains(&reset), "{reset} vs {now}");
        let body = refused.into_body().collect().await.unwrap().to_bytes();
        assert_eq!(body, "{\"message\":\"API rate limit exceeded\"}");
    }

    #[tokio::test(start_paused = true)]
    async fn a_shared_limit_counts_everyone_together() {
        let mut plan = limited(HeaderStyle::None, None);
        plan.rate_limits[0].scope = Scope::Shared;
        let mut driver = driver(plan);
        for client in ["a", "b", "c"] {
            assert_eq!(
                driver.exchange(client, "http://api.test/x").await.status(),
                200
            );
        }
        assert_eq!(
            driver.exchange("d", "http://api.test/x").await.status(),
            429
        );
    }

    #[tokio::test(start_paused = true)]
    async fn replacing_the_plan_keeps_unchanged_counters() {
        let mut driver = driver(limited(HeaderStyle::None, None));
        fill(&mut driver).await;
        // Same limit, plus an error rule that never fires: the counter carries over.
        let mut plan = limited(HeaderStyle::None, None);
        plan.errors = throttled_at(0.0).errors;
        driver.stage.replace_plan(plan);
        assert_eq!(
            driver.exchange("alice", "http://api.test/x").await.status(),
            429
        );
        // A changed limit starts afresh.
        let mut plan = limited(HeaderStyle::None, None);
        plan.rate_limits[0].limit.limit = 4;
        driver.stage.replace_plan(plan);
        assert_eq!(
            driver.exchange("alice", "http://api.test/x").await.status(),
            200
        );
    }

    #[tokio::test(start_paused = true)]
    async fn eviction_forgets_idle_counters() {
        let mut driver = driver(limited(HeaderStyle::None, None));
        fill(&mut driver).await;
        assert_eq!(driver.stage.evict(TokioClock.now()), 0);
        tokio::time::advance(30 * S).await;
        assert_eq!(driver.stage.evict(TokioClock.now()), 1);
    }
}

mod latency {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn delays_then_goes_on() {
        let mut plan = throttled_at(0.0);
        plan.latency = Some(LatencyRule {
            url: None,
            rate: Rate::ALWAYS,
            delay: Duration::from_millis(200)..=Duration::from_millis(400),
        });
        let mut driver = Driver::with_clock(plan, 1, Arc::new(TokioClock));
        let start = TokioClock.now();
        let action = driver.get("http://api.test/x");
        assert!(matches!(action, Action::Later(_)), "{action:?}");
        assert!(matches!(settle(action).await, Action::Continue(_)));
        let waited = TokioClock.now() - start;
        assert!(waited >= Duration::from_millis(200) && waited <= Duration::from_millis(400));
        assert_eq!(driver.stage.counts().delayed, 1);
        assert_eq!(driver.stage.counts().errors, 0);
    }
}

mod body_fragments {
    use super::*;

    fn plan() -> FaultPlan {
        let mut rule = error_rule(
            API,
            100.0,
            vec![FaultOutcome::Respond(error_response(500, None))],
        );
        rule.request.method = Some(Method::POST);
        rule.request.body_fragment = Some("\"model\":\"big\"".to_owned());
        errors(vec![rule])
    }

    async fn post(driver: &mut Driver, body: &'static str) -> Action {
        let meta = driver.meta("alice", Method::POST, "http://api.test/chat");
        let action = driver
            .stage
            .on_request(request(Method::POST, "http://api.test/chat", body), &meta);
        assert!(matches!(action, Action::Later(_)), "the body is read first");
        settle(action).await
    }

    #[tokio::test]
    async fn a_body_with_the_fragment_is_faulted() {
        let mut driver = Driver::new(plan(), 1);
        let action = post(&mut driver, "{\"model\":\"big\",\"n\":1}").await;
        assert_eq!(answered(&action), Some(StatusCode::INTERNAL_SERVER_ERROR));
    }

    #[tokio::test]
    async fn a_body_without_it_passes_whole() {
        let mut driver = Driver::new(plan(), 1);
        let Action::Continue(request) = post(&mut driver, "{\"model\":\"small\"}").await else {
            panic!("not passed on");
        };
        let body = request.into_body().collect().await.unwrap().to_bytes();
        assert_eq!(body, "{\"model\":\"small\"}");
    }

    #[tokio::test]
    async fn a_get_is_not_read() {
        let mut driver = Driver::new(plan(), 1);
        assert!(matches!(
            driver.get("http://api.test/chat"),
            Action::Continue(_)
        ));
    }
}

mod network {
    use super::*;

    fn faulting(fault: NetworkFault) -> FaultPlan {
        errors(vec![error_rule(
            API,
            100.0,
            vec![FaultOutcome::Network(fault)],
        )])
    }

    #[test]
    fn a_reset_aborts() {
        let mut driver = Driver::new(faulting(NetworkFault::Reset), 1);
        assert!(matches!(driver.get("http://api.test/x"), Action::Abort));
        assert_eq!(driver.stage.counts().resets, 1);
    }

    #[tokio::test(start_paused = true)]
    async fn a_hang_aborts_once_its_time_is_up() {
        let hang = NetworkFault::Hang {
            r#for: Duration::from_secs(3600),
        };
        let mut driver = Driver::with_clock(faulting(hang), 1, Arc::new(TokioClock));
        let start = TokioClock.now();
        let action = driver.get("http://api.test/x");
        assert!(matches!(settle(action).await, Action::Abort));
        assert_eq!(TokioClock.now() - start, Duration::from_secs(3600));
        assert_eq!(driver.stage.counts().hangs, 1);
    }

    #[tokio::test]
    async fn a_truncated_body_breaks_off_with_its_length_kept() {
        let fault = NetworkFault::Truncate { after: None };
        let mut driver = Driver::new(faulting(fault), 1);
        let meta = driver.meta("alice", Method::GET, "http://api.test/x");
        let action = driver.stage.on_request(
            request(Method::GET, "http://api.test/x", Body::empty()),
            &meta,
        );
        let Action::Continue(mut request) = action else {
            panic!("a truncate goes on upstream: {action:?}");
        };
        let mut response = Response::new(Body::from("0123456789"));
        response
            .headers_mut()
            .insert(header::CONTENT_LENGTH, HeaderValue::from(10));
        Notes::pass(&mut request, &mut response);
        driver.stage.on_response(&mut response, &meta);
        assert_eq!(header(&response, "content-length"), "10");
        let mut body = response.into_body();
        let first = body.frame().await.unwrap().unwrap().into_data().unwrap();
        assert_eq!(first, "01234");
        assert!(body.frame().await.unwrap().is_err());
        assert_eq!(driver.stage.counts().truncated, 1);
    }

    #[tokio::test]
    async fn what_a_request_leaves_is_taken_once() {
        let fault = NetworkFault::Truncate { after: Some(1) };
        let mut driver = Driver::new(faulting(fault), 1);
        let meta = driver.meta("alice", Method::GET, "http://api.test/x");
        let action = driver.stage.on_request(
            request(Method::GET, "http://api.test/x", Body::empty()),
            &meta,
        );
        let Action::Continue(mut request) = action else {
            panic!("a truncate goes on upstream: {action:?}");
        };
        let mut response = Response::new(Body::from("whole"));
        Notes::pass(&mut request, &mut response);
        driver.stage.on_response(&mut response, &meta);
        assert!(Notes::get::<Left>(&response).is_none(), "taken");
        // A second pass finds nothing to apply.
        let mut again = Response::new(Body::from("whole"));
        driver.stage.on_response(&mut again, &meta);
        assert_eq!(
            again.into_body().collect().await.unwrap().to_bytes(),
            "whole"
        );
    }
}
