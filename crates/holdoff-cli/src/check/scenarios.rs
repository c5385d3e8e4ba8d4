//! The scenarios of `holdoff check`: what the first watched request is answered with, and the
//! rule the client's next move is judged by. One home for each: the `--list` text, the config
//! the proxy runs with, and the rule.

use std::time::Duration;

use serde_json::{Value, json};

/// How long the judge makes a client wait after a throttle whose `Retry-After` is malformed
/// or missing: a retry sooner than this read the hint as zero (or did not back off at all).
/// Passed to `holdoff run --judge-min-backoff`, so the judge and the verdicts say the same.
pub(crate) const MIN_BACKOFF: Duration = Duration::from_millis(100);

/// [`MIN_BACKOFF`] for people, e.g. `100 ms`.
pub(crate) fn min_backoff() -> String {
    format!("{} ms", MIN_BACKOFF.as_millis())
}

/// What a scenario's verdict turns on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Rule {
    /// A usable hint: a retry before the permitted time fails (the judge's `premature`).
    Hint,
    /// A malformed hint: a retry sooner than the minimum backoff fails (`read_as_zero`).
    Malformed,
    /// No hint on a 429: a retry sooner than the minimum backoff fails (`no_backoff`).
    NoHint,
    /// A hint on a POST: a retry before it fails, one without an `Idempotency-Key` warns.
    Post,
    /// A date in the past: a retry is permitted at once, so still waiting at the time limit
    /// warns (the date was read as a long wait).
    PastDate,
    /// A 429 for a used-up quota (OpenAI's `insufficient_quota`): waiting won't help, so any
    /// retry warns, and one without a backoff fails.
    Quota,
}

/// OpenAI's answer when the account's quota is used up: a 429 no wait will end.
fn quota_body() -> Value {
    json!({ "error": {
        "message": "You exceeded your current quota, please check your plan and billing details.",
        "type": "insufficient_quota",
        "param": null,
        "code": "insufficient_quota",
    } })
}

/// One scenario.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Scenario {
    /// Its name, for `--scenario`.
    pub(crate) name: &'static str,
    /// One line for `--list`.
    pub(crate) description: &'static str,
    /// What the first watched request is answered with, short, for the table.
    pub(crate) sends: &'static str,
    /// What decides the verdict.
    pub(crate) rule: Rule,
    status: u16,
    /// The `Retry-After` sent, if any (`@dynamic=N` is filled in by the proxy).
    retry_after: Option<&'static str>,
    /// The config's `retryAfterForm`, for a `@dynamic` hint.
    form: &'static str,
    /// The only method throttled, if not every one.
    method: Option<&'static str>,
    /// A second throttle, the same status with this `Retry-After`, for the first request the
    /// first throttle did not answer (the retry).
    then: Option<&'static str>,
}

/// Every scenario, in the order they are reported.
pub(crate) const ALL: &[Scenario] = &[
    Scenario {
        name: "delay-429",
        description: "429 with Retry-After: 2; a retry sooner than 2 s fails, a later one or \
                      none passes",
        sends: "429, Retry-After: 2",
        rule: Rule::Hint,
        status: 429,
        retry_after: Some("2"),
        form: "delay",
        method: None,
        then: None,
    },
    Scenario {
        name: "delay-503",
        description: "503 with Retry-After: 2; a retry sooner than 2 s fails, a later one or \
                      none passes",
        sends: "503, Retry-After: 2",
        rule: Rule::Hint,
        status: 503,
        retry_after: Some("2"),
        form: "delay",
        method: None,
        then: None,
    },
    Scenario {
        name: "http-date",
        description: "503 with Retry-After an HTTP-date 3 s ahead and a matching Date; a retry \
                      before that date (the judge's lenient reading) fails",
        sends: "503, Retry-After: <HTTP-date +3 s>",
        rule: Rule::Hint,
        status: 503,
        retry_after: Some("@dynamic=3"),
        form: "http-date",
        method: None,
        then: None,
    },
    Scenario {
        name: "date-past",
        description: "503 with Retry-After: Sun, 06 Nov 1994 08:49:37 GMT, long past: a retry \
                      is permitted at once; still waiting at the time limit warns",
        sends: "503, Retry-After: <a date in 1994>",
        rule: Rule::PastDate,
        status: 503,
        retry_after: Some("Sun, 06 Nov 1994 08:49:37 GMT"),
        form: "delay",
        method: None,
        then: None,
    },
    Scenario {
        name: "second-throttle",
        description: "429 with Retry-After: 1, then the retry 429 with Retry-After: 3; a \
                      retry sooner than either fails",
        sends: "429, Retry-After: 1, then 3",
        rule: Rule::Hint,
        status: 429,
        retry_after: Some("1"),
        form: "delay",
        method: None,
        then: Some("3"),
    },
    Scenario {
        name: "malformed",
        description: "503 with Retry-After: soon; a retry within 100 ms (the hint read as \
                      zero) fails, backing off or giving up passes",
        sends: "503, Retry-After: soon",
        rule: Rule::Malformed,
        status: 503,
        retry_after: Some("soon"),
        form: "delay",
        method: None,
        then: None,
    },
    Scenario {
        name: "malformed-negative",
        description: "503 with Retry-After: -1; a retry within 100 ms (read as zero) fails",
        sends: "503, Retry-After: -1",
        rule: Rule::Malformed,
        status: 503,
        retry_after: Some("-1"),
        form: "delay",
        method: None,
        then: None,
    },
    Scenario {
        name: "malformed-decimal",
        description: "503 with Retry-After: 1.5 (delay-seconds are whole); a retry within \
                      100 ms fails",
        sends: "503, Retry-After: 1.5",
        rule: Rule::Malformed,
        status: 503,
        retry_after: Some("1.5"),
        form: "delay",
        method: None,
        then: None,
    },
    Scenario {
        name: "malformed-empty",
        description: "503 with an empty Retry-After; a retry within 100 ms fails",
        sends: "503, Retry-After: (empty)",
        rule: Rule::Malformed,
        status: 503,
        retry_after: Some(""),
        form: "delay",
        method: None,
        then: None,
    },
    Scenario {
        name: "wrong-weekday",
        description: "503 with Retry-After: Mon, 06 Nov 1994 08:49:37 GMT (a Sunday): \
                      malformed, so a retry within 100 ms (a lenient parser's past date) fails",
        sends: "503, Retry-After: Mon, 06 Nov 1994 …",
        rule: Rule::Malformed,
        status: 503,
        retry_after: Some("Mon, 06 Nov 1994 08:49:37 GMT"),
        form: "delay",
        method: None,
        then: None,
    },
    Scenario {
        name: "no-hint",
        description: "429 without Retry-After; a retry within 100 ms fails, backing off or \
                      giving up passes",
        sends: "429, no Retry-After",
        rule: Rule::NoHint,
        status: 429,
        retry_after: None,
        form: "delay",
        method: None,
        then: None,
    },
    Scenario {
        name: "quota",
        description: "429 with OpenAI's insufficient_quota error and no Retry-After; a retry \
                      warns (waiting won't help), one within 100 ms fails",
        sends: "429 insufficient_quota, no hint",
        rule: Rule::Quota,
        status: 429,
        retry_after: None,
        form: "delay",
        method: None,
        then: None,
    },
    Scenario {
        name: "post",
        description: "a POST answered 503 with Retry-After: 1; a retry sooner fails, one \
                      without an Idempotency-Key warns (a hint does not make a POST safe)",
        sends: "POST: 503, Retry-After: 1",
        rule: Rule::Post,
        status: 503,
        retry_after: Some("1"),
        form: "delay",
        method: Some("POST"),
        then: None,
    },
];

impl Scenario {
    /// The scenario called `name`.
    ///
    /// # Errors
    ///
    /// A message naming every known scenario.
    pub(crate) fn find(name: &str) -> Result<Scenario, String> {
        ALL.iter()
            .find(|scenario| scenario.name == name)
            .copied()
            .ok_or_else(|| {
                let known: Vec<&str> = ALL.iter().map(|scenario| scenario.name).collect();
                format!(
                    "unknown scenario `{name}`; the scenarios are: {}",
                    known.join(", ")
                )
            })
    }

    /// The proxy's config: a mock answering the first watched request (`nth` 1) with the
    /// scenario's throttle (and, for a second throttle, another answering the first request
    /// the first mock let through: a mock counts only the requests that reach it); every
    /// later request goes to the upstream.
    pub(crate) fn config(&self) -> Value {
        let mocks: Vec<Value> = [Some(self.retry_after), self.then.map(Some)]
            .into_iter()
            .flatten()
            .map(|retry_after| self.mock(retry_after))
            .collect();
        json!({ "retryAfterForm": self.form, "mocks": { "mocks": mocks } })
    }

    /// A mock answering the first request that reaches it with the scenario's status and
    /// `retry_after`.
    fn mock(&self, retry_after: Option<&str>) -> Value {
        let headers: Vec<Value> = retry_after
            .iter()
            .map(|value| json!({ "name": "Retry-After", "value": value }))
            .collect();
        let mut request = json!({ "url": "*", "nth": 1 });
        if let Some(method) = self.method {
            request["method"] = json!(method);
        }
        let body = match self.rule {
            Rule::Quota => quota_body(),
            _ => json!(format!("holdoff check: scenario {}\n", self.name)),
        };
        json!({
            "request": request,
            "response": { "statusCode": self.status, "headers": headers, "body": body },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    mod find {
        use super::*;

        #[test]
        fn names_the_known_scenarios_for_an_unknown_one() {
            let err = Scenario::find("delay").unwrap_err();
            assert!(err.starts_with("unknown scenario `delay`"), "{err}");
            for scenario in ALL {
                assert!(err.contains(scenario.name), "{err}");
            }
            assert_eq!(Scenario::find("no-hint").map(|s| s.rule), Ok(Rule::NoHint));
        }
    }

    mod config {
        use super::*;

        #[test]
        fn answers_only_the_first_request_with_the_throttle() {
            let config = Scenario::find("http-date").unwrap().config();
            let mock = &config["mocks"]["mocks"][0];
            assert_eq!(mock["request"]["nth"], 1);
            assert_eq!(mock["response"]["statusCode"], 503);
            assert_eq!(mock["response"]["headers"][0]["value"], "@dynamic=3");
            assert_eq!(config["retryAfterForm"], "http-date");
            let none = Scenario::find("no-hint").unwrap().config();
            assert_eq!(none["mocks"]["mocks"][0]["response"]["headers"], json!([]));
            assert_eq!(none["mocks"]["mocks"].as_array().map(Vec::len), Some(1));
        }

        #[test]
        fn answers_the_retry_too_for_a_second_throttle() {
            let config = Scenario::find("second-throttle").unwrap().config();
            let mocks = &config["mocks"]["mocks"];
            assert_eq!(mocks[0]["response"]["headers"][0]["value"], "1");
            assert_eq!(mocks[1]["request"]["nth"], 1);
            assert_eq!(mocks[1]["response"]["headers"][0]["value"], "3");
        }
    }
}
