//! What a scenario sends: the proxy's config, whose mocks answer the first watched request
//! with the scenario's throttle and every later one from the upstream or with the configured
//! success.

use std::time::SystemTime;

use holdoff::HttpDate;
use serde_json::{Value, json};

use super::{Hint, REDIRECTED, Repeat, Rule, Scenario, Setup, Success, scaled};

/// OpenAI's answer when the account's quota is used up: a 429 no wait will end.
fn quota_body() -> Value {
    json!({ "error": {
        "message": "You exceeded your current quota, please check your plan and billing details.",
        "type": "insufficient_quota",
        "param": null,
        "code": "insufficient_quota",
    } })
}

impl Scenario {
    /// The proxy's config: a mock answering the first watched request (`nth` 1) with the
    /// scenario's throttle (and, for each throttle after it, another answering the first
    /// request the ones before let through: a mock counts only the requests that reach it;
    /// or, for a throttle every time, one mock without `nth`); every later request goes to
    /// the upstream, or gets the configured success answer.
    pub(crate) fn config(&self, setup: &Setup) -> Value {
        let first = match self.hint {
            Hint::None => vec![],
            Hint::Literal(value) => vec![("Retry-After".to_owned(), value.to_owned())],
            Hint::Date(ahead) => vec![("Retry-After".to_owned(), format!("@dynamic={ahead}"))],
            Hint::Behind { behind, ahead } => behind_by(setup.now, behind, ahead),
            Hint::Long(seconds) => vec![(
                "Retry-After".to_owned(),
                scaled(seconds, setup.long_scale).to_string(),
            )],
            Hint::Delay(seconds) => vec![("Retry-After".to_owned(), seconds.to_string())],
        };
        // `nth` numbers the requests across the mocks of one URL (as Dev Proxy does): the
        // throttles answer the first, second, … request, then the success answers the rest.
        let mut mocks = match self.repeat {
            Repeat::Once => vec![self.mock(first, Some(1))],
            Repeat::Then(value) => vec![
                self.mock(first, Some(1)),
                self.mock(vec![("Retry-After".to_owned(), value.to_owned())], Some(2)),
            ],
            Repeat::Times(times) => (1..=u64::from(times))
                .map(|nth| self.mock(first.clone(), Some(nth)))
                .collect(),
            Repeat::Always => vec![self.mock(first, None)],
        };
        if self.rule == Rule::Redirect {
            // The redirect's target is answered by the proxy, before the throttle's mock can
            // count it: a client following it gets an answer whatever the upstream has.
            let answer = match &setup.success {
                Some(success) => success.mock()["response"].clone(),
                None => json!({ "statusCode": 200, "body": "holdoff check: redirected\n" }),
            };
            mocks.insert(
                0,
                json!({ "request": { "url": format!("*{REDIRECTED}") }, "response": answer }),
            );
        }
        if let Some(success) = &setup.success {
            mocks.push(success.mock());
        }
        let form = match self.hint {
            Hint::Date(_) => "http-date",
            _ => "delay",
        };
        json!({ "retryAfterForm": form, "mocks": { "mocks": mocks } })
    }

    /// A mock answering the `nth` request that reaches the mocks (every one, without `nth`)
    /// with the scenario's status and `headers` (and [`Scenario::also`]).
    fn mock(&self, mut headers: Vec<(String, String)>, nth: Option<u64>) -> Value {
        for (name, value) in self.also {
            headers.push(((*name).to_owned(), (*value).to_owned()));
        }
        let mut request = match nth {
            Some(nth) => json!({ "url": "*", "nth": nth }),
            None => json!({ "url": "*" }),
        };
        if let Some(method) = self.method {
            request["method"] = json!(method);
        }
        let body = match self.rule {
            Rule::Quota => quota_body(),
            _ => json!(format!("holdoff check: scenario {}\n", self.name)),
        };
        json!({
            "request": request,
            "response": { "statusCode": self.status, "headers": pairs(&headers), "body": body },
        })
    }
}

impl Success {
    /// A mock answering every request that reaches it (after the throttles) with this.
    fn mock(&self) -> Value {
        let body = serde_json::from_str::<Value>(&self.body).unwrap_or_else(|_| json!(self.body));
        json!({
            "request": { "url": "*" },
            "response": { "statusCode": self.status, "headers": pairs(&self.headers), "body": body },
        })
    }
}

/// Headers as a mock's list of `name`/`value` objects.
fn pairs(headers: &[(String, String)]) -> Vec<Value> {
    headers
        .iter()
        .map(|(name, value)| json!({ "name": name, "value": value }))
        .collect()
}

/// `Date` `behind` seconds before `now` (whole seconds) and `Retry-After` `ahead` seconds
/// after that `Date`, both IMF-fixdates: what a server whose clock is behind sends. Written
/// once, with the config: the judge reads the date against the `Date` beside it, so the
/// moment the proxy sends them does not change the wait they ask for.
fn behind_by(now: SystemTime, behind: u64, ahead: u64) -> Vec<(String, String)> {
    let date = HttpDate::from_system_time(now)
        .and_then(|now| HttpDate::from_unix_seconds(now.unix_seconds() - behind as i64));
    let until =
        date.and_then(|date| HttpDate::from_unix_seconds(date.unix_seconds() + ahead as i64));
    match (date, until) {
        (Some(date), Some(until)) => vec![
            ("Date".to_owned(), date.to_string()),
            ("Retry-After".to_owned(), until.to_string()),
        ],
        // A clock before 1970 plus an hour: nothing sensible to send but the delay.
        _ => vec![("Retry-After".to_owned(), ahead.to_string())],
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::super::tests::setup;
    use super::super::{ALL, HOUR_SHOWN_AFTER};
    use super::*;

    mod config {
        use super::*;

        fn headers(config: &Value, mock: usize) -> Vec<(String, String)> {
            config["mocks"]["mocks"][mock]["response"]["headers"]
                .as_array()
                .unwrap()
                .iter()
                .map(|h| {
                    let text = |key: &str| h[key].as_str().unwrap().to_owned();
                    (text("name"), text("value"))
                })
                .collect()
        }

        #[test]
        fn answers_only_the_first_request_with_the_throttle() {
            let config = Scenario::find("http-date").unwrap().config(&setup());
            let mock = &config["mocks"]["mocks"][0];
            assert_eq!(mock["request"]["nth"], 1);
            assert_eq!(mock["response"]["statusCode"], 503);
            assert_eq!(mock["response"]["headers"][0]["value"], "@dynamic=3");
            assert_eq!(config["retryAfterForm"], "http-date");
            let none = Scenario::find("no-hint").unwrap().config(&setup());
            assert_eq!(none["mocks"]["mocks"][0]["response"]["headers"], json!([]));
            assert_eq!(none["mocks"]["mocks"].as_array().map(Vec::len), Some(1));
        }

        #[test]
        fn answers_the_retry_too_for_a_second_throttle() {
            let config = Scenario::find("second-throttle").unwrap().config(&setup());
            let mocks = &config["mocks"]["mocks"];
            assert_eq!(mocks[0]["response"]["headers"][0]["value"], "1");
            assert_eq!(mocks[1]["request"]["nth"], 2);
            assert_eq!(mocks[1]["response"]["headers"][0]["value"], "3");
        }

        #[test]
        fn throttles_three_times_or_every_time() {
            let config = Scenario::find("backoff").unwrap().config(&setup());
            let mocks = config["mocks"]["mocks"].as_array().unwrap();
            assert_eq!(mocks.len(), 3);
            let numbers: Vec<_> = mocks
                .iter()
                .map(|mock| mock["request"]["nth"].clone())
                .collect();
            assert_eq!(numbers, [json!(1), json!(2), json!(3)]);
            let config = Scenario::find("persistent").unwrap().config(&setup());
            let mocks = config["mocks"]["mocks"].as_array().unwrap();
            assert_eq!(mocks.len(), 1);
            assert_eq!(mocks[0]["request"], json!({ "url": "*" }));
        }

        #[test]
        fn sends_a_reset_time_that_is_never_past_and_no_retry_after() {
            let scenario = Scenario::find("ratelimit-reset").unwrap();
            let headers = headers(&scenario.config(&setup()), 0);
            assert!(headers.iter().all(|(name, _)| name != "Retry-After"));
            assert!(headers.contains(&("X-RateLimit-Reset".to_owned(), "@epoch=3".to_owned())));
            assert!(headers.contains(&("X-RateLimit-Remaining".to_owned(), "0".to_owned())));
            assert_eq!(scenario.hint_secs(&setup()), Some(3));
        }

        #[test]
        fn sends_the_reading_scenarios_hint_as_given() {
            let reads = Scenario::reads(11);
            assert_eq!(headers(&reads.config(&setup()), 0)[0].1, "11");
            assert_eq!(reads.sends(&setup()), "429, Retry-After: 11");
            assert_eq!(
                reads.time_limit(Duration::from_secs(30), &setup()),
                Duration::from_secs(41)
            );
        }

        #[test]
        fn dates_a_server_an_hour_behind_from_the_given_clock() {
            let config = Scenario::find("clock-behind").unwrap().config(&setup());
            // 1_700_000_000 is Tue, 14 Nov 2023 22:13:20 GMT.
            assert_eq!(
                headers(&config, 0),
                [
                    (
                        "Date".to_owned(),
                        "Tue, 14 Nov 2023 21:13:20 GMT".to_owned()
                    ),
                    (
                        "Retry-After".to_owned(),
                        "Tue, 14 Nov 2023 21:13:23 GMT".to_owned()
                    ),
                ]
            );
        }

        #[test]
        fn sends_retry_after_ms_beside_retry_after() {
            let config = Scenario::find("retry-after-ms").unwrap().config(&setup());
            assert_eq!(
                headers(&config, 0),
                [
                    ("Retry-After".to_owned(), "3".to_owned()),
                    ("retry-after-ms".to_owned(), "1500".to_owned()),
                ]
            );
        }

        #[test]
        fn scales_long_hints_and_their_time_limits() {
            let long = Scenario::find("long-90").unwrap();
            let hour = Scenario::find("long-hour").unwrap();
            let timeout = Duration::from_secs(30);
            assert_eq!(headers(&long.config(&setup()), 0)[0].1, "90");
            assert_eq!(long.time_limit(timeout, &setup()), Duration::from_secs(120));
            assert_eq!(hour.time_limit(timeout, &setup()), HOUR_SHOWN_AFTER);
            let fast = Setup {
                long_scale: 30,
                ..setup()
            };
            assert_eq!(headers(&long.config(&fast), 0)[0].1, "3");
            assert_eq!(long.sends(&fast), "429, Retry-After: 3 (90 s / 30)");
            assert_eq!(headers(&hour.config(&fast), 0)[0].1, "120");
            assert_eq!(hour.time_limit(timeout, &fast), Duration::from_millis(5500));
            assert_eq!(
                Scenario::find("long-150").unwrap().hint_secs(&fast),
                Some(5)
            );
        }

        #[test]
        fn answers_everything_else_with_a_configured_success() {
            let with = Setup {
                success: Some(Success {
                    status: 201,
                    headers: vec![("x-from".to_owned(), "check".to_owned())],
                    body: r#"{"id": 1}"#.to_owned(),
                }),
                ..setup()
            };
            let config = Scenario::find("delay-429").unwrap().config(&with);
            let last = &config["mocks"]["mocks"][1];
            assert_eq!(last["request"], json!({ "url": "*" }));
            assert_eq!(last["response"]["statusCode"], 201);
            assert_eq!(last["response"]["body"], json!({ "id": 1 }));
            assert_eq!(
                headers(&config, 1),
                [("x-from".to_owned(), "check".to_owned())]
            );
        }

        #[test]
        fn every_scenario_has_a_config_the_proxy_accepts() {
            for scenario in ALL {
                use holdoff_config::{compile, load};
                let text = serde_json::to_string(&scenario.config(&setup())).unwrap();
                let raw = load::parse(&text, load::Format::Json, "scenario.json").unwrap();
                compile::compile(&raw, "scenario.json", std::path::Path::new("."))
                    .unwrap_or_else(|err| panic!("{}: {err}", scenario.name));
            }
        }
    }
}
