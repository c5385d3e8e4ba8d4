//! The events of a run, as kept in memory and written one JSON object per line to the event
//! log.

use std::time::SystemTime;

use serde::{Deserialize, Serialize};

use super::time::{rfc3339, rfc3339_option};
pub use crate::judge::HintKind;
use crate::judge::{JudgeEvent, ThrottleEvent, Verdict};
use crate::stages::FaultCounts;

/// One thing that happened during a run.
///
/// In the event log each is one line of JSON, tagged by `"event"`, with times in RFC 3339
/// (UTC, milliseconds):
///
/// ```json
/// {"event":"throttle","at":"2025-03-01T12:00:00.000Z","client":"alice","method":"GET","url":"http://api.example/items","status":429,"permitted_at":"2025-03-01T12:00:02.000Z","hint":"usable","header":"retry-after","value":"2","reading":"delay-seconds, counted from the response"}
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
        /// The holdoff command line that repeats the run, program first (`holdoff`), with
        /// `--seed` when the seed was drawn and without the options that only say where output
        /// goes; `None` when not known (older logs, `holdoff demo`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        argv: Option<Vec<String>>,
        /// Whether a run in which no request reached the proxy is allowed
        /// (`--allow-no-traffic`): it is still *not tested*, but does not fail.
        #[serde(default, skip_serializing_if = "is_false")]
        allow_no_traffic: bool,
        /// Whether a retry without backoff after a throttle with no hint fails the run, rather
        /// than being a warning.
        #[serde(default, skip_serializing_if = "is_false")]
        fail_on_no_backoff: bool,
    },
    /// A throttle reached a client: a 429 or 503 (hint or not), or any other error status
    /// with a hint. A window opened, or an open one was renewed.
    Throttle {
        /// When the response passed to the client.
        #[serde(with = "rfc3339")]
        at: SystemTime,
        /// Who was throttled.
        client: String,
        /// The request's `User-Agent`, if it had one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        user_agent: Option<String>,
        /// The request's method.
        method: String,
        /// The request's URL.
        url: String,
        /// The response's status.
        status: u16,
        /// When a retry is permitted: the hint's earliest reading, or for a malformed or
        /// missing hint the minimum backoff; `null` for a window that never closes (a hint
        /// beyond the clock's range).
        #[serde(default, with = "rfc3339_option")]
        permitted_at: Option<SystemTime>,
        /// What the response said about when to retry.
        #[serde(default)]
        hint: HintKind,
        /// The header that decided (or, for a malformed hint, the one that could not be
        /// read), lowercase.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        header: Option<String>,
        /// That header's value, as sent.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        value: Option<String>,
        /// How the judge read it, for people: e.g. `HTTP-date − Date − 1 s (the server's
        /// clock has whole seconds)`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reading: Option<String>,
    },
    /// A request came under an open window: the judge's verdict on it.
    Retry {
        /// The verdict.
        verdict: Verdict,
        /// Who retried.
        client: String,
        /// The request's `User-Agent`, if it had one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        user_agent: Option<String>,
        /// Whether the retry carried an `Idempotency-Key` header. Left out when it did not.
        #[serde(default, skip_serializing_if = "is_false")]
        idempotency_key: bool,
        /// The method.
        method: String,
        /// The URL.
        url: String,
        /// When the window opened.
        #[serde(with = "rfc3339")]
        throttled_at: SystemTime,
        /// When a retry was permitted; `null` for a window that never closes.
        #[serde(default, with = "rfc3339_option")]
        permitted_at: Option<SystemTime>,
        /// When the retry came.
        #[serde(with = "rfc3339")]
        retried_at: SystemTime,
        /// How early a retry that broke its window came, in milliseconds (none for a window
        /// that never closes).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        early_by_ms: Option<f64>,
        /// How late a compliant retry came, in milliseconds.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        late_by_ms: Option<f64>,
        /// For a `sibling` verdict: the other process, which was told to wait.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        throttled_client: Option<String>,
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
        /// Intercepted tunnels whose TLS handshake with the client failed: their requests
        /// never reached the proxy, so the run cannot pass. Left out when 0.
        #[serde(default, skip_serializing_if = "is_zero")]
        interception_failures: u64,
        /// Judge windows dropped at the cap on open windows before they were judged: retries
        /// under them went unjudged. Left out when 0.
        #[serde(default, skip_serializing_if = "is_zero")]
        evicted_windows: u64,
    },
}

fn is_zero(count: &u64) -> bool {
    *count == 0
}

/// For `skip_serializing_if`: a flag that is off is left out of the event log.
fn is_false(flag: &bool) -> bool {
    !*flag
}

impl Event {
    /// Whether it is a throttle or a verdict, which are recorded only while recording is on.
    pub(crate) fn is_judged(&self) -> bool {
        matches!(self, Event::Throttle { .. } | Event::Retry { .. })
    }
}

impl From<&JudgeEvent> for Event {
    fn from(event: &JudgeEvent) -> Event {
        Event::from(event.clone())
    }
}

impl From<ThrottleEvent> for Event {
    fn from(event: ThrottleEvent) -> Event {
        let ThrottleEvent {
            at,
            client,
            user_agent,
            method,
            url,
            status,
            permitted_at,
            hint,
            header,
            value,
            reading,
        } = event;
        Event::Throttle {
            at,
            client,
            user_agent,
            method,
            url,
            status,
            permitted_at,
            hint,
            header,
            value,
            reading,
        }
    }
}

impl From<JudgeEvent> for Event {
    fn from(event: JudgeEvent) -> Event {
        let ms = event.by.map(|by| by.as_secs_f64() * 1000.0);
        let (early_by_ms, late_by_ms) = match event.verdict {
            Verdict::Compliant => (None, ms),
            Verdict::Premature | Verdict::ReadAsZero | Verdict::NoBackoff | Verdict::Sibling => {
                (ms, None)
            }
        };
        Event::Retry {
            verdict: event.verdict,
            client: event.client,
            user_agent: event.user_agent,
            idempotency_key: event.idempotency_key,
            method: event.method,
            url: event.url,
            throttled_at: event.throttled_at,
            permitted_at: event.permitted_at,
            retried_at: event.retried_at,
            early_by_ms,
            late_by_ms,
            throttled_client: event.throttled_client,
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
    /// The holdoff command line that repeats the run, program first: see [`Event::Start`].
    pub argv: Option<Vec<String>>,
    /// Whether a run that no request reached is allowed (`--allow-no-traffic`).
    pub allow_no_traffic: bool,
    /// Whether a retry without backoff after a throttle with no hint fails the run.
    pub fail_on_no_backoff: bool,
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
                user_agent: None,
                idempotency_key: false,
                method: "GET".into(),
                url: "http://api.example/items".into(),
                throttled_at: t(0),
                permitted_at: Some(t(2000)),
                retried_at: t(100),
                early_by_ms: Some(1900.0),
                late_by_ms: None,
                throttled_client: None,
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
                    argv: Some(vec![
                        "holdoff".into(),
                        "run".into(),
                        "--seed".into(),
                        "7".into(),
                    ]),
                    allow_no_traffic: true,
                    fail_on_no_backoff: false,
                },
                Event::Finish {
                    at: t(5000),
                    requests: 12,
                    faults,
                    exit_code: None,
                    interception_failures: 2,
                    evicted_windows: 3,
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

        #[test]
        fn a_throttle_without_a_window_end_round_trips_with_null() {
            let event = Event::Throttle {
                at: t(0),
                client: "alice".into(),
                user_agent: Some("openai-node/4".into()),
                method: "GET".into(),
                url: "http://api.example/items".into(),
                status: 429,
                permitted_at: None,
                hint: HintKind::Unbounded,
                header: Some("retry-after".into()),
                value: Some("99999999999999999999".into()),
                reading: Some("beyond the clock".into()),
            };
            let line = serde_json::to_string(&event).unwrap();
            assert!(
                line.contains(r#""permitted_at":null,"hint":"unbounded""#),
                "{line}"
            );
            assert_eq!(serde_json::from_str::<Event>(&line).unwrap(), event);
        }

        #[test]
        fn an_older_log_reads_with_the_new_fields_defaulted() {
            let start = r#"{"event":"start","at":"2025-03-01T12:00:00.000Z","source":"x","proxy_url":"u","judge_key":"k"}"#;
            let Event::Start {
                argv,
                allow_no_traffic,
                fail_on_no_backoff,
                ..
            } = serde_json::from_str(start).unwrap()
            else {
                panic!("a start");
            };
            assert_eq!(
                (argv, allow_no_traffic, fail_on_no_backoff),
                (None, false, false)
            );
            let throttle = r#"{"event":"throttle","at":"2025-03-01T12:00:00.000Z","client":"a","method":"GET","url":"http://x/","status":429,"permitted_at":"2025-03-01T12:00:01.000Z"}"#;
            let Event::Throttle {
                hint, permitted_at, ..
            } = serde_json::from_str(throttle).unwrap()
            else {
                panic!("a throttle");
            };
            assert_eq!((hint, permitted_at), (HintKind::Usable, Some(t(1000))));
        }
    }

    mod from_judge_event {
        use super::*;

        #[test]
        fn puts_the_duration_on_the_side_of_the_verdict() {
            let mut judged = JudgeEvent {
                verdict: Verdict::Compliant,
                client: "bob".into(),
                user_agent: Some("curl/8.5.0".into()),
                idempotency_key: false,
                method: "POST".into(),
                url: "http://api.example/jobs".into(),
                throttled_at: t(0),
                permitted_at: Some(t(1000)),
                retried_at: t(1250),
                by: Some(Duration::from_micros(250_500)),
                throttled_client: None,
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

            judged.verdict = Verdict::ReadAsZero;
            judged.permitted_at = None;
            judged.by = None;
            let Event::Retry {
                early_by_ms,
                late_by_ms,
                user_agent,
                ..
            } = Event::from(&judged)
            else {
                panic!("expected a retry");
            };
            assert_eq!((early_by_ms, late_by_ms), (None, None));
            assert_eq!(user_agent.as_deref(), Some("curl/8.5.0"));
        }
    }
}
