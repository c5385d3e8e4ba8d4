//! `GET /verdicts`: the judge's findings against retries, numbered, each with the process that
//! retried and the judge's sentence, for a test runner to pin on the test that was running
//! (the pytest plugin does). [`VerdictFeed`] collects them; [`answer`] lists them.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, PoisonError};

use http::StatusCode;
use serde::Serialize;

use super::answer::{Answer, json, text};
use crate::judge::{JudgeEvent, Record, ThrottleEvent, Verdict};
use crate::report::{Event, JudgedBy, Report, client_name, time};

/// How many verdicts the feed keeps (the latest): a reader that fell further behind is told
/// how many it missed.
pub const KEPT_VERDICTS: usize = 10_000;

/// How many throttles the feed keeps (the latest), to find the one a verdict's window opened
/// with: the judge's sentence names its status and hint.
const KEPT_THROTTLES: usize = 4_096;

/// The judge's verdicts against retries — every one but a compliant retry — numbered in the
/// order they came, for `GET /verdicts` ([`Control::verdicts`](super::Control::verdicts)).
///
/// Give it to the judge as its recorder ([`JudgeStage::with_recorder`]) with the run's own
/// recorder to forward to: it keeps what it needs and passes every event on. A verdict is
/// recorded before the judge's answer goes back to the client, so once a client's request
/// has returned, its verdict is listed.
///
/// [`JudgeStage::with_recorder`]: crate::JudgeStage::with_recorder
///
/// # Examples
///
/// ```
/// use std::sync::Arc;
/// use holdoff::clock::{Clock, TokioClock};
/// use holdoff_proxy::judge::{Judge, KeyMode};
/// use holdoff_proxy::report::Recorder;
/// use holdoff_proxy::{Control, JudgeStage, MetricsStage, VerdictFeed};
///
/// let clock: Arc<dyn Clock> = Arc::new(TokioClock);
/// let recorder = Arc::new(Recorder::new(None)?);
/// let feed = Arc::new(VerdictFeed::new().forward_to(recorder));
/// let judge = Arc::new(Judge::new(KeyMode::default(), clock.now()));
/// let stage = JudgeStage::new(judge, Arc::clone(&clock)).with_recorder(feed.clone());
/// let control = Control::new(Arc::new(MetricsStage::new(clock))).verdicts(feed);
/// # let _ = (stage, control);
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Debug, Default)]
pub struct VerdictFeed {
    /// Where every event goes on to: the run's recorder.
    forward: Option<Arc<dyn Record>>,
    /// Whether a retry without backoff after a hint-less throttle fails, as the run's report
    /// counts it.
    fail_on_no_backoff: bool,
    kept: Mutex<Kept>,
}

/// What the feed holds.
#[derive(Debug, Default)]
struct Kept {
    /// How many verdicts came so far: the latest is numbered this, the first 1.
    count: u64,
    /// The latest verdicts, oldest first, each with its throttle when one was kept.
    verdicts: VecDeque<(JudgeEvent, Option<ThrottleEvent>)>,
    /// The latest throttles, oldest first.
    throttles: VecDeque<ThrottleEvent>,
}

impl VerdictFeed {
    /// An empty feed that forwards nothing.
    pub fn new() -> VerdictFeed {
        VerdictFeed::default()
    }

    /// Passes every throttle and verdict on to `recorder` (while it records).
    pub fn forward_to(mut self, recorder: Arc<dyn Record>) -> VerdictFeed {
        self.forward = Some(recorder);
        self
    }

    /// Marks a retry without backoff after a throttle with no hint as failing (`"fails":
    /// true`), as `--judge-no-backoff fail` makes the run's report count it; by default it
    /// is listed as a warning.
    pub fn fail_on_no_backoff(mut self, fail: bool) -> VerdictFeed {
        self.fail_on_no_backoff = fail;
        self
    }

    /// The verdicts numbered `since` and later (as many as are still kept), and the number
    /// the next one will get.
    fn since(&self, since: u64) -> Verdicts {
        let kept = self.kept.lock().unwrap_or_else(PoisonError::into_inner);
        let first = kept.count + 1 - kept.verdicts.len() as u64;
        let from = since.max(first);
        let skip = usize::try_from(from - first).unwrap_or(usize::MAX);
        let found: Vec<(u64, JudgeEvent, Option<ThrottleEvent>)> = kept
            .verdicts
            .iter()
            .skip(skip)
            .zip(from..)
            .map(|((verdict, throttle), seq)| (seq, verdict.clone(), throttle.clone()))
            .collect();
        let next = kept.count + 1;
        drop(kept);
        // The sentences are written outside the lock: the judge waits for it.
        let verdicts = found
            .into_iter()
            .filter_map(|(seq, verdict, throttle)| self.listed(seq, verdict, throttle))
            .collect();
        Verdicts {
            next,
            missed: first.saturating_sub(since.max(1)),
            verdicts,
        }
    }

    /// One verdict as `GET /verdicts` lists it, worded by the run's report; `None` for a
    /// verdict the report lists neither as a violation nor as a warning.
    fn listed(
        &self,
        seq: u64,
        verdict: JudgeEvent,
        throttle: Option<ThrottleEvent>,
    ) -> Option<Listed> {
        let mut events = vec![Event::Start {
            at: verdict.throttled_at,
            seed: None,
            source: String::new(),
            command: None,
            proxy_url: String::new(),
            judge_key: String::new(),
            argv: None,
            allow_no_traffic: false,
            fail_on_no_backoff: self.fail_on_no_backoff,
        }];
        events.extend(throttle.map(Event::from));
        events.push(Event::from(&verdict));
        let report = Report::from_events(&events);
        let (fails, found) = match (report.violations().first(), report.warnings().first()) {
            (Some(violation), _) => (true, violation),
            (None, Some(warning)) => (false, warning),
            (None, None) => return None,
        };
        Some(Listed {
            seq,
            kind: verdict.verdict.as_str(),
            fails,
            pid: pid_of(&verdict.client),
            client_name: client_name(&verdict.client).into_owned(),
            client: verdict.client,
            method: verdict.method,
            url: verdict.url,
            retried_at: time::format(verdict.retried_at),
            why: found.why.clone(),
            judged_by: found.judged_by.as_ref().map(JudgedBy::plain),
        })
    }
}

impl Record for VerdictFeed {
    /// Always: the feed wants every verdict, whether or not the run's recorder records.
    fn is_recording(&self) -> bool {
        true
    }

    fn throttle(&self, event: ThrottleEvent) {
        {
            let mut kept = self.kept.lock().unwrap_or_else(PoisonError::into_inner);
            if kept.throttles.len() == KEPT_THROTTLES {
                kept.throttles.pop_front();
            }
            kept.throttles.push_back(event.clone());
        }
        if let Some(forward) = self.forward.as_ref().filter(|r| r.is_recording()) {
            forward.throttle(event);
        }
    }

    fn retry(&self, event: JudgeEvent) {
        if event.verdict != Verdict::Compliant {
            let mut kept = self.kept.lock().unwrap_or_else(PoisonError::into_inner);
            // The latest throttle of the same request: the report links it to the verdict
            // when its window is the one the verdict was under.
            let throttle = kept
                .throttles
                .iter()
                .rev()
                .find(|t| {
                    t.at <= event.retried_at
                        && (&t.client, &t.method, &t.url)
                            == (&event.client, &event.method, &event.url)
                })
                .cloned();
            if kept.verdicts.len() == KEPT_VERDICTS {
                kept.verdicts.pop_front();
            }
            kept.verdicts.push_back((event.clone(), throttle));
            kept.count += 1;
        }
        if let Some(forward) = self.forward.as_ref().filter(|r| r.is_recording()) {
            forward.retry(event);
        }
    }
}

/// `GET /verdicts`' JSON.
#[derive(Debug, Serialize)]
struct Verdicts {
    /// What to ask for next time: `?since=` this.
    next: u64,
    /// Verdicts from `since` on that are no longer kept.
    missed: u64,
    verdicts: Vec<Listed>,
}

/// One verdict in `GET /verdicts`.
#[derive(Debug, Serialize)]
struct Listed {
    seq: u64,
    /// `premature`, `read_as_zero`, `no_backoff`, as in the event log.
    kind: &'static str,
    /// Whether it fails the run (else it is a warning).
    fails: bool,
    /// The client as the judge keys it: `process:python3[4242]`, `header:worker-3`.
    client: String,
    /// The client as the reports name it for a person: `pid 4242 (python3)`, `worker-3`.
    client_name: String,
    /// The process that retried, when the client is one (`process:NAME[PID]`).
    pid: Option<u32>,
    method: String,
    url: String,
    retried_at: String,
    /// The judge's sentence, as the reports word it.
    why: String,
    /// How the judge read the throttle's hint, `` `Retry-After: 2` read as … ``, when its
    /// throttle is known.
    judged_by: Option<String>,
}

/// `GET /verdicts?since=N`.
pub(super) fn answer(feed: Option<&VerdictFeed>, query: Option<&str>) -> Answer {
    let Some(feed) = feed else {
        return text(
            StatusCode::NOT_FOUND,
            "verdicts are not listed by this proxy (no judge)\n",
        );
    };
    match since(query) {
        Ok(since) => json(&feed.since(since)),
        Err(value) => text(
            StatusCode::BAD_REQUEST,
            format!(
                "since={value} is not a verdict number: give a whole number, 0 for every \
                 verdict kept or the `next` of an earlier answer\n"
            ),
        ),
    }
}

/// The `since` of a query string (0 without one), or the value that is not a number.
fn since(query: Option<&str>) -> Result<u64, &str> {
    let value = query
        .into_iter()
        .flat_map(|query| query.split('&'))
        .filter_map(|pair| pair.strip_prefix("since="))
        .next_back();
    match value {
        None => Ok(0),
        Some(value) => value.parse().map_err(|_| value),
    }
}

/// The process id in a client's name, `process:python3[4242]` (see
/// [`ClientId`](crate::ClientId)'s display form); `None` for any other client.
fn pid_of(client: &str) -> Option<u32> {
    let (_, pid) = client
        .strip_prefix("process:")?
        .strip_suffix(']')?
        .rsplit_once('[')?;
    pid.parse().ok()
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, SystemTime, UNIX_EPOCH};

    use super::*;
    use crate::judge::HintKind;

    fn at(ms: u64) -> SystemTime {
        UNIX_EPOCH + Duration::from_millis(1_740_830_400_000 + ms)
    }

    fn throttle(client: &str, url: &str) -> ThrottleEvent {
        ThrottleEvent {
            at: at(0),
            client: client.into(),
            user_agent: None,
            method: "GET".into(),
            url: url.into(),
            status: 429,
            permitted_at: Some(at(2000)),
            hint: HintKind::Usable,
            header: Some("retry-after".into()),
            value: Some("2".into()),
            reading: Some("a delay, counted from the response".into()),
        }
    }

    fn retry(verdict: Verdict, client: &str, url: &str, ms: u64) -> JudgeEvent {
        JudgeEvent {
            verdict,
            client: client.into(),
            user_agent: None,
            idempotency_key: false,
            method: "GET".into(),
            url: url.into(),
            throttled_at: at(0),
            permitted_at: Some(at(2000)),
            retried_at: at(ms),
            by: Some(Duration::from_millis(2000_u64.abs_diff(ms))),
            throttled_client: None,
        }
    }

    const PROCESS: &str = "process:python3[4242]";
    const URL: &str = "http://api.example/items";

    mod since {
        use super::*;

        #[test]
        fn numbers_every_verdict_but_a_compliant_one_from_one() {
            let feed = VerdictFeed::new();
            feed.throttle(throttle(PROCESS, URL));
            feed.retry(retry(Verdict::Premature, PROCESS, URL, 50));
            feed.retry(retry(Verdict::Compliant, PROCESS, URL, 2100));
            let listed = feed.since(0);
            assert_eq!((listed.next, listed.missed), (2, 0));
            assert_eq!(listed.verdicts.len(), 1);
            let verdict = &listed.verdicts[0];
            assert_eq!(
                (verdict.seq, verdict.kind, verdict.fails),
                (1, "premature", true)
            );
            assert_eq!(verdict.pid, Some(4242));
            assert_eq!(verdict.client_name, "pid 4242 (python3)");
            assert!(verdict.why.contains("a 429"), "{}", verdict.why);
            assert!(verdict.why.contains("retried"), "{}", verdict.why);
            assert_eq!(
                verdict.judged_by.as_deref(),
                Some("`Retry-After: 2` read as a delay, counted from the response")
            );
            assert!(feed.since(2).verdicts.is_empty());
            assert_eq!(feed.since(2).next, 2);
        }

        #[test]
        fn lists_a_missing_backoff_as_a_warning_unless_it_fails() {
            let mut throttled = throttle(PROCESS, URL);
            throttled.hint = HintKind::None;
            throttled.header = None;
            throttled.value = None;
            for fail in [false, true] {
                let feed = VerdictFeed::new().fail_on_no_backoff(fail);
                feed.throttle(throttled.clone());
                feed.retry(retry(Verdict::NoBackoff, PROCESS, URL, 10));
                let listed = feed.since(1);
                assert_eq!(listed.verdicts[0].kind, "no_backoff");
                assert_eq!(listed.verdicts[0].fails, fail);
            }
        }

        #[test]
        fn says_how_many_verdicts_were_no_longer_kept() {
            let feed = VerdictFeed::new();
            for _ in 0..KEPT_VERDICTS + 3 {
                feed.retry(retry(Verdict::Premature, "127.0.0.1", URL, 5));
            }
            let listed = feed.since(1);
            assert_eq!(listed.missed, 3);
            assert_eq!(listed.verdicts.len(), KEPT_VERDICTS);
            assert_eq!(listed.verdicts[0].seq, 4);
            assert_eq!(listed.verdicts[0].pid, None);
            assert_eq!(listed.verdicts[0].client_name, "127.0.0.1");
            assert_eq!(feed.since(KEPT_VERDICTS as u64 + 3).verdicts.len(), 1);
        }

        #[test]
        fn passes_every_event_on_to_the_recorder() {
            let recorder = Arc::new(crate::report::Recorder::new(None).unwrap());
            let feed = VerdictFeed::new().forward_to(recorder.clone());
            feed.throttle(throttle(PROCESS, URL));
            feed.retry(retry(Verdict::Premature, PROCESS, URL, 50));
            feed.retry(retry(Verdict::Compliant, PROCESS, URL, 2100));
            let report = recorder.report();
            assert_eq!((report.premature(), report.compliant()), (1, 1));
            assert_eq!(report.throttled(), 1);
        }
    }

    mod query {
        use super::*;

        #[test]
        fn reads_since_or_says_which_value_is_not_a_number() {
            assert_eq!(since(None), Ok(0));
            assert_eq!(since(Some("since=12")), Ok(12));
            assert_eq!(since(Some("x=1&since=3")), Ok(3));
            assert_eq!(since(Some("since=-1")), Err("-1"));
        }
    }

    mod pid_of {
        use super::*;

        #[test]
        fn reads_a_process_clients_pid_only() {
            assert_eq!(pid_of("process:python3[4242]"), Some(4242));
            assert_eq!(pid_of("process:a [b][7]"), Some(7));
            assert_eq!(pid_of("user:process:x[1]"), None);
            assert_eq!(pid_of("127.0.0.1"), None);
            assert_eq!(pid_of("header:worker[2]"), None);
        }
    }
}
