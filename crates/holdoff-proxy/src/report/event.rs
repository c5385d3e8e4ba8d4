//! The events of a run, as kept in memory and written one JSON object per line to the event
//! log.

use std::time::SystemTime;

use serde::{Deserialize, Serialize};

use super::time::rfc3339;
use crate::fault::FaultCounts;
use crate::judge::{JudgeEvent, Verdict};

/// One thing that happened during a run.
///
/// In the event log each is one line of JSON, tagged by `"event"`, with times in RFC 3339
/// (UTC, milliseconds):
///
/// ```json
/// {"event":"throttle","at":"2025-03-01T12:00:00.000Z","client":"alice","method":"GET","url":"http://api.example/items","status":429,"permitted_at":"2025-03-01T12:00:02.000Z"}
/// {"event":"retry","verdict":"premature","client":"alice","method":"GET","url":"http://api.example/items","throttled_at":"2025-03-01T12:00:00.000Z","permitted_at":"2025-03-01T12:00:02.000Z","retried_at":"2025-03-01T12:00:00.100Z","early_by_ms":1900.0}
/// ```
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
#[non_exhaustive]
pub enum Event {
    /// The run started: the first event.
    Start {
        /// When.
        #[serde(with = "rfc3339")]
        at: SystemTime,
        /// The seed the faults drew from, if any.
        #[serde(default)]
        seed: Option<u64>,
        /// Where the faults came from, e.g. `preset throttle`.
        source: String,
        /// The command `holdoff run` ran, if any.
        #[serde(default)]
        command: Option<Vec<String>>,
        /// The proxy's URL.
        proxy_url: String,
        /// What windows were keyed by, e.g. `client-method-url`.
        judge_key: String,
    },
    /// A response carrying a hint (status 400 or above) reached a client: a window opened,
    /// or an open one was renewed.
    Throttle {
        /// When the response passed to the client.
        #[serde(with = "rfc3339")]
        at: SystemTime,
        /// Who was throttled.
        client: String,
        /// The request's method.
        method: String,
        /// The request's URL.
        url: String,
        /// The response's status.
        status: u16,
        /// When a retry is permitted.
        #[serde(with = "rfc3339")]
        permitted_at: SystemTime,
    },
    /// A request came under an open window: the judge's verdict on it.
    Retry {
        /// Premature or compliant.
        verdict: Verdict,
        /// Who retried.
        client: String,
        /// The method.
        method: String,
        /// The URL.
        url: String,
        /// When the window opened.
        #[serde(with = "rfc3339")]
        throttled_at: SystemTime,
        /// When a retry was permitted.
        #[serde(with = "rfc3339")]
        permitted_at: SystemTime,
        /// When the retry came.
        #[serde(with = "rfc3339")]
        retried_at: SystemTime,
        /// How early a premature retry came, in milliseconds.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        early_by_ms: Option<f64>,
        /// How late a compliant retry came, in milliseconds.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        late_by_ms: Option<f64>,
    },
    /// The run ended: the last event.
    Finish {
        /// When.
        #[serde(with = "rfc3339")]
        at: SystemTime,
        /// How many requests the proxy answered.
        requests: u64,
        /// The faults injected, by kind.
        #[serde(default)]
        faults: FaultCounts,
        /// The exit status of the command `holdoff run` ran, if any (none when a signal
        /// ended it).
        #[serde(default)]
        exit_code: Option<i32>,
    },
}

impl Event {
    /// Whether it is a throttle or a verdict, which are recorded only while recording is on.
    pub(crate) fn is_judged(&self) -> bool {
        matches!(self, Event::Throttle { .. } | Event::Retry { .. })
    }
}

impl From<&JudgeEvent> for Event {
    fn from(event: &JudgeEvent) -> Event {
        let ms = event.by.as_secs_f64() * 1000.0;
        let (early_by_ms, late_by_ms) = match event.verdict {
            Verdict::Premature => (Some(ms), None),
            Verdict::Compliant => (None, Some(ms)),
        };
        Event::Retry {
            verdict: event.verdict,
            client: event.client.clone(),
            method: event.method.clone(),
            url: event.url.clone(),
            throttled_at: event.throttled_at,
            permitted_at: event.permitted_at,
            retried_at: event.retried_at,
            early_by_ms,
            late_by_ms,
        }
    }
}

/// What a run is, for its first event: where the faults came from, and what ran through it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RunInfo {
    /// The seed the faults drew from, if any.
    pub seed: Option<u64>,
    /// Where the faults came from, e.g. `preset throttle` or `config holdoff.yaml`.
    pub source: String,
    /// The command `holdoff run` runs, program first; `None` for `holdoff proxy`.
    pub command: Option<Vec<String>>,
    /// The proxy's URL, e.g. `http://127.0.0.1:8000`.
    pub proxy_url: String,
    /// What windows are keyed by, e.g. `client-method-url`.
    pub judge_key: String,
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, UNIX_EPOCH};

    use super::*;

    fn t(ms: u64) -> SystemTime {
        UNIX_EPOCH + Duration::from_millis(1_740_830_400_000 + ms)
    }

    mod serde {
        use super::*;

        #[test]
        fn a_retry_is_one_tagged_object_with_rfc3339_times() {
            let event = Event::Retry {
                verdict: Verdict::Premature,
                client: "alice".into(),
                method: "GET".into(),
                url: "http://api.example/items".into(),
                throttled_at: t(0),
                permitted_at: t(2000),
                retried_at: t(100),
                early_by_ms: Some(1900.0),
                late_by_ms: None,
            };
            let line = serde_json::to_string(&event).unwrap();
            assert_eq!(
                line,
                r#"{"event":"retry","verdict":"premature","client":"alice","method":"GET","url":"http://api.example/items","throttled_at":"2025-03-01T12:00:00.000Z","permitted_at":"2025-03-01T12:00:02.000Z","retried_at":"2025-03-01T12:00:00.100Z","early_by_ms":1900.0}"#
            );
            assert_eq!(serde_json::from_str::<Event>(&line).unwrap(), event);
        }

        #[test]
        fn start_and_finish_round_trip() {
            let faults = FaultCounts {
                errors: 3,
                ..FaultCounts::default()
            };
            for event in [
                Event::Start {
                    at: t(0),
                    seed: Some(7),
                    source: "preset throttle".into(),
                    command: Some(vec!["curl".into(), "-s".into()]),
                    proxy_url: "http://127.0.0.1:8000".into(),
                    judge_key: "client-method-url".into(),
                },
                Event::Finish {
                    at: t(5000),
                    requests: 12,
                    faults,
                    exit_code: None,
                },
            ] {
                let line = serde_json::to_string(&event).unwrap();
                assert_eq!(
                    serde_json::from_str::<Event>(&line).unwrap(),
                    event,
                    "{line}"
                );
            }
        }
    }

    mod from_judge_event {
        use super::*;

        #[test]
        fn puts_the_duration_on_the_side_of_the_verdict() {
            let mut judged = JudgeEvent {
                verdict: Verdict::Compliant,
                client: "bob".into(),
                method: "POST".into(),
                url: "http://api.example/jobs".into(),
                throttled_at: t(0),
                permitted_at: t(1000),
                retried_at: t(1250),
                by: Duration::from_micros(250_500),
            };
            let Event::Retry {
                early_by_ms,
                late_by_ms,
                ..
            } = Event::from(&judged)
            else {
                panic!("expected a retry");
            };
            assert_eq!((early_by_ms, late_by_ms), (None, Some(250.5)));

            judged.verdict = Verdict::Premature;
            let Event::Retry {
                early_by_ms,
                late_by_ms,
                ..
            } = Event::from(&judged)
            else {
                panic!("expected a retry");
            };
            assert_eq!((early_by_ms, late_by_ms), (Some(250.5), None));
        }
    }
}
