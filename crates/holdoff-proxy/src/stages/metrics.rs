//! [`MetricsStage`]: counts requests and responses and times them, lock-free; and the
//! Prometheus text exposition of those counts with the judge's and the faults', read at
//! scrape time.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use holdoff::clock::Clock;
use http::{Request, Response, header};
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric, NoLabelSet};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::registry::Registry;

use super::faults::{FaultCounts, FaultStage};
use super::judge::JudgeStage;
use crate::body::Body;
use crate::judge::VerdictCounts;
use crate::proxy::{Action, Mode, RequestMeta, Stage};

/// The upper bounds of the response-time buckets, in seconds: Prometheus' defaults, and 30 s
/// and 60 s for injected latency and slow upstreams. The last bucket, `+Inf`, is implied.
const BOUNDS: [f64; 13] = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
];

/// `holdoff_requests_total`'s `mode` label, by [`mode_index`].
const MODES: [&str; 3] = ["forward", "intercepted", "reverse"];

/// `holdoff_responses_total`'s `class` label.
const CLASSES: [&str; 5] = ["1xx", "2xx", "3xx", "4xx", "5xx"];

/// `holdoff_response_seconds`'s `source` label: the upstream answered, or holdoff did (a
/// stage, or the proxy itself when the upstream failed).
const SOURCES: [&str; 2] = ["upstream", "holdoff"];

/// A pipeline stage that counts every request and response, and times each response from
/// the moment its request's head arrived.
///
/// Put it **first**, so that the time covers every other stage (an injected latency
/// included) and its counts see the response the client gets. It never changes a request
/// or a response, takes no lock and allocates nothing.
///
/// - Requests are counted by [`Mode`] as they enter the pipeline: `CONNECT`s, and requests
///   the proxy refuses before routing them (`400`, `407`), never reach it.
/// - Responses are counted by status class. A request a stage drops without an answer gets
///   no response, so requests minus responses is what was dropped or is still in flight.
/// - Response times go into a histogram by source: `upstream` when the response came from
///   the upstream (the proxy marks those with its `Via`), `holdoff` when a stage answered or
///   the proxy did because the upstream failed. The time runs from the request head's
///   arrival ([`RequestMeta::received`]) to the response head being ready, so an upstream's
///   time includes the proxy's own and any latency a fault added.
///
/// Read it through [`Control`](crate::Control): `/status` and `/metrics`.
///
/// # Examples
///
/// ```
/// use std::sync::Arc;
/// use holdoff::clock::TokioClock;
/// use holdoff_proxy::MetricsStage;
///
/// let metrics = Arc::new(MetricsStage::new(Arc::new(TokioClock)));
/// assert_eq!(metrics.requests(), 0);
/// ```
pub struct MetricsStage {
    clock: Arc<dyn Clock>,
    started: Instant,
    requests: [AtomicU64; MODES.len()],
    responses: [AtomicU64; CLASSES.len()],
    times: [Histogram; SOURCES.len()],
}

/// A histogram of durations in atomics: a count per bucket (not cumulative) and the sum.
#[derive(Default)]
struct Histogram {
    buckets: [AtomicU64; BOUNDS.len() + 1],
    sum_nanos: AtomicU64,
}

impl Histogram {
    fn observe(&self, took: Duration) {
        let seconds = took.as_secs_f64();
        let bucket = BOUNDS
            .iter()
            .position(|bound| seconds <= *bound)
            .unwrap_or(BOUNDS.len());
        self.buckets[bucket].fetch_add(1, Ordering::Relaxed);
        let nanos = u64::try_from(took.as_nanos()).unwrap_or(u64::MAX);
        self.sum_nanos.fetch_add(nanos, Ordering::Relaxed);
    }

    /// `(sum in seconds, count, [(upper bound, count in that bucket)])`.
    fn read(&self) -> (f64, u64, [(f64, u64); BOUNDS.len() + 1]) {
        let mut buckets = [(f64::INFINITY, 0); BOUNDS.len() + 1];
        for (slot, (bound, counter)) in buckets.iter_mut().zip(
            BOUNDS
                .iter()
                .copied()
                .chain([f64::INFINITY])
                .zip(&self.buckets),
        ) {
            *slot = (bound, counter.load(Ordering::Relaxed));
        }
        let count = buckets.iter().map(|(_, n)| n).sum();
        let sum = Duration::from_nanos(self.sum_nanos.load(Ordering::Relaxed)).as_secs_f64();
        (sum, count, buckets)
    }
}

impl MetricsStage {
    /// A stage reading `clock` for response times; its uptime starts now.
    pub fn new(clock: Arc<dyn Clock>) -> MetricsStage {
        MetricsStage {
            started: clock.now(),
            clock,
            requests: Default::default(),
            responses: Default::default(),
            times: Default::default(),
        }
    }

    /// Requests that entered the pipeline so far, in every mode.
    pub fn requests(&self) -> u64 {
        self.requests
            .iter()
            .map(|count| count.load(Ordering::Relaxed))
            .sum()
    }

    /// Responses so far by status class: `[1xx, 2xx, 3xx, 4xx, 5xx]`.
    pub fn responses(&self) -> [u64; 5] {
        self.responses
            .each_ref()
            .map(|count| count.load(Ordering::Relaxed))
    }

    /// How long since the stage was made.
    pub fn uptime(&self) -> Duration {
        self.clock.now().saturating_duration_since(self.started)
    }

    /// The clock the stage reads.
    pub(crate) fn clock(&self) -> &Arc<dyn Clock> {
        &self.clock
    }
}

impl fmt::Debug for MetricsStage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MetricsStage")
            .field("requests", &self.requests())
            .field("responses", &self.responses())
            .finish_non_exhaustive()
    }
}

fn mode_index(mode: Mode) -> usize {
    match mode {
        Mode::Forward => 0,
        Mode::Intercepted => 1,
        Mode::Reverse => 2,
    }
}

/// Whether the upstream made the response: the proxy appends its `Via` to an upstream's
/// response only, so the last `Via` is holdoff's.
fn from_upstream(response: &Response<Body>) -> bool {
    response
        .headers()
        .get_all(header::VIA)
        .iter()
        .next_back()
        .is_some_and(|via| via.as_bytes().ends_with(b" holdoff"))
}

impl Stage for MetricsStage {
    fn on_request(&self, request: Request<Body>, meta: &RequestMeta) -> Action {
        self.requests[mode_index(meta.mode)].fetch_add(1, Ordering::Relaxed);
        Action::Continue(request)
    }

    fn on_response(&self, response: &mut Response<Body>, meta: &RequestMeta) {
        let class = usize::from(response.status().as_u16() / 100).clamp(1, 5) - 1;
        self.responses[class].fetch_add(1, Ordering::Relaxed);
        let took = self
            .clock
            .now()
            .saturating_duration_since(meta.received.instant);
        let source = if from_upstream(response) { 0 } else { 1 };
        self.times[source].observe(took);
    }
}

/// What a scrape reads: the stages, at the moment of the scrape.
#[derive(Debug)]
pub(crate) struct Scrape {
    pub(crate) metrics: Arc<MetricsStage>,
    pub(crate) judge: Option<Arc<JudgeStage>>,
    pub(crate) faults: Option<Arc<FaultStage>>,
}

impl Scrape {
    /// The exposition, in the Prometheus text format (version 0.0.4).
    pub(crate) fn text(self) -> String {
        let mut registry = Registry::default();
        registry.register_collector(Box::new(self));
        let mut text = String::new();
        // Writing into a String fails only if a collector fails, and ours do not.
        if let Err(err) = prometheus_client::encoding::prometheus_text::encode(&mut text, &registry)
        {
            tracing::warn!(error = %err, "failed to encode the metrics");
        }
        text
    }
}

/// The faults by `kind` label, as the fault stage logs them.
pub(crate) fn fault_kinds(counts: FaultCounts) -> [(&'static str, u64); 9] {
    let FaultCounts {
        errors,
        rate_limited,
        mocked,
        delayed,
        resets,
        hangs,
        truncated,
        slowed,
        llm_failures,
    } = counts;
    [
        ("error", errors),
        ("rate_limited", rate_limited),
        ("mock", mocked),
        ("latency", delayed),
        ("reset", resets),
        ("hang", hangs),
        ("truncate", truncated),
        ("slow_body", slowed),
        ("llm_failure", llm_failures),
    ]
}

/// Encodes a counter family with one label.
fn counters(
    encoder: &mut DescriptorEncoder<'_>,
    name: &str,
    help: &str,
    label: &str,
    values: impl IntoIterator<Item = (&'static str, u64)>,
) -> fmt::Result {
    let mut family = encoder.encode_descriptor(name, help, None, MetricType::Counter)?;
    for (value, count) in values {
        ConstCounter::new(count).encode(family.encode_family(&[(label, value)])?)?;
    }
    Ok(())
}

impl Collector for Scrape {
    fn encode(&self, mut encoder: DescriptorEncoder<'_>) -> fmt::Result {
        let requests = self
            .metrics
            .requests
            .each_ref()
            .map(|count| count.load(Ordering::Relaxed));
        counters(
            &mut encoder,
            "holdoff_requests",
            "Requests that entered the proxy's pipeline, by how they reached it.",
            "mode",
            MODES.into_iter().zip(requests),
        )?;
        counters(
            &mut encoder,
            "holdoff_responses",
            "Responses the proxy sent, by status class.",
            "class",
            CLASSES.into_iter().zip(self.metrics.responses()),
        )?;
        if let Some(faults) = &self.faults {
            counters(
                &mut encoder,
                "holdoff_faults",
                "Faults injected, by kind.",
                "kind",
                fault_kinds(faults.counts()),
            )?;
        }
        if let Some(judge) = &self.judge {
            let VerdictCounts {
                premature,
                too_soon,
                compliant,
                ..
            } = judge.judge().verdicts();
            counters(
                &mut encoder,
                "holdoff_retries",
                "Retries the judge judged, by verdict.",
                "verdict",
                [
                    ("premature", premature),
                    ("too_soon", too_soon),
                    ("compliant", compliant),
                ],
            )?;
            let open = i64::try_from(judge.judge().open_windows()).unwrap_or(i64::MAX);
            let gauge = ConstGauge::new(open);
            gauge.encode(encoder.encode_descriptor(
                "holdoff_open_windows",
                "Windows open: clients told to wait, whose retry has not come yet.",
                None,
                MetricType::Gauge,
            )?)?;
            if let Some(store) = judge.shared() {
                ConstCounter::new(store.failures()).encode(encoder.encode_descriptor(
                    "holdoff_shared_state_failures",
                    "Operations on the state shared with other replicas (Redis) that failed, \
                     timed out, or were refused at once while its circuit was open.",
                    None,
                    MetricType::Counter,
                )?)?;
                ConstGauge::new(i64::from(store.is_up())).encode(encoder.encode_descriptor(
                    "holdoff_shared_state_up",
                    "1 while the shared state is in use, 0 while the proxy answers by its \
                     failure mode.",
                    None,
                    MetricType::Gauge,
                )?)?;
                if let Some(circuit) = store.circuit() {
                    ConstGauge::new(i64::from(circuit.open)).encode(encoder.encode_descriptor(
                        "holdoff_shared_state_circuit_open",
                        "1 while the shared state's circuit breaker is open: after a timeout \
                         or a connection failure, it is not asked until a background probe \
                         gets an answer.",
                        None,
                        MetricType::Gauge,
                    )?)?;
                    ConstCounter::new(circuit.openings).encode(encoder.encode_descriptor(
                        "holdoff_shared_state_circuit_openings",
                        "Times the shared state's circuit breaker opened.",
                        None,
                        MetricType::Counter,
                    )?)?;
                }
            }
        }
        let mut histogram = encoder.encode_descriptor(
            "holdoff_response_seconds",
            "Time from a request's head arriving to its response's head being ready, by \
             whether the upstream or holdoff answered.",
            None,
            MetricType::Histogram,
        )?;
        for (source, times) in SOURCES.into_iter().zip(&self.metrics.times) {
            let (sum, count, buckets) = times.read();
            histogram
                .encode_family(&[("source", source)])?
                .encode_histogram::<NoLabelSet>(sum, count, &buckets, None)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use std::time::UNIX_EPOCH;

    use holdoff::Receipt;
    use holdoff::clock::ManualClock;
    use http::StatusCode;

    use crate::fault::FaultPlan;
    use crate::fault::FaultRng;
    use crate::judge::{Judge, KeyMode};

    mod exposition {
        use super::*;

        fn meta(mode: Mode, received: Receipt) -> RequestMeta {
            let target = crate::proxy::Target::new("http://api.test/".parse().unwrap());
            RequestMeta {
                mode,
                watched: None,
                ..RequestMeta::new(target, received)
            }
        }

        /// Sends one request through the stage and answers it `status` after `took`.
        fn exchange(
            stage: &MetricsStage,
            clock: &ManualClock,
            mode: Mode,
            status: u16,
            upstream: bool,
            took: Duration,
        ) {
            let meta = meta(mode, Receipt::now(clock));
            let request = Request::new(Body::empty());
            assert!(matches!(
                stage.on_request(request, &meta),
                Action::Continue(_)
            ));
            clock.advance(took);
            let mut response = Response::new(Body::empty());
            *response.status_mut() = StatusCode::from_u16(status).unwrap();
            if upstream {
                response
                    .headers_mut()
                    .insert(header::VIA, "1.1 holdoff".parse().unwrap());
            }
            stage.on_response(&mut response, &meta);
        }

        #[test]
        fn writes_every_family_in_the_prometheus_text_format() {
            let clock = Arc::new(ManualClock::new(UNIX_EPOCH));
            let stage = Arc::new(MetricsStage::new(clock.clone()));
            let ms = Duration::from_millis;
            exchange(&stage, &clock, Mode::Forward, 200, true, ms(3));
            exchange(&stage, &clock, Mode::Intercepted, 200, true, ms(120));
            exchange(&stage, &clock, Mode::Reverse, 503, false, ms(0));
            exchange(&stage, &clock, Mode::Forward, 429, false, ms(2_000));
            let judge = Judge::new(KeyMode::default(), clock.now());
            let scrape = Scrape {
                metrics: stage,
                judge: Some(Arc::new(JudgeStage::new(Arc::new(judge), clock.clone()))),
                faults: Some(Arc::new(FaultStage::new(
                    FaultPlan::default(),
                    FaultRng::new(1),
                    clock,
                ))),
            };
            insta::assert_snapshot!(scrape.text());
        }

        #[test]
        fn count_shared_state_failures_and_say_whether_it_is_up() {
            use crate::shared::{OnFailure, SharedStore, Unreachable};
            let clock = Arc::new(ManualClock::new(UNIX_EPOCH));
            let store = Arc::new(SharedStore::new(Arc::new(Unreachable), OnFailure::FailOpen));
            let scrape = || Scrape {
                metrics: Arc::new(MetricsStage::new(clock.clone())),
                judge: Some(Arc::new(
                    JudgeStage::new(
                        Arc::new(Judge::new(KeyMode::default(), clock.now())),
                        clock.clone(),
                    )
                    .with_shared(Arc::clone(&store)),
                )),
                faults: None,
            };
            let text = scrape().text();
            assert!(
                text.contains("holdoff_shared_state_failures_total 0\n"),
                "{text}"
            );
            assert!(text.contains("holdoff_shared_state_up 1\n"), "{text}");
            for _ in 0..2 {
                store.settle::<()>(Err("refused".into()));
            }
            let text = scrape().text();
            assert!(
                text.contains("holdoff_shared_state_failures_total 2\n"),
                "{text}"
            );
            assert!(text.contains("holdoff_shared_state_up 0\n"), "{text}");
            store.settle(Ok(()));
            let text = scrape().text();
            assert!(text.contains("holdoff_shared_state_up 1\n"));
            assert!(
                !text.contains("holdoff_shared_state_circuit"),
                "no breaker, no circuit metrics:\n{text}"
            );
        }

        #[test]
        fn say_whether_the_shared_states_circuit_is_open_and_how_often_it_opened() {
            use std::sync::Mutex;

            use crate::shared::{Breakered, Circuit, OnFailure, SharedStore};

            let clock = Arc::new(ManualClock::new(UNIX_EPOCH));
            let state = Arc::new(Breakered(Mutex::new(Circuit {
                open: true,
                openings: 3,
            })));
            let store = Arc::new(SharedStore::new(state.clone(), OnFailure::FailOpen));
            let scrape = || {
                Scrape {
                    metrics: Arc::new(MetricsStage::new(clock.clone())),
                    judge: Some(Arc::new(
                        JudgeStage::new(
                            Arc::new(Judge::new(KeyMode::default(), clock.now())),
                            clock.clone(),
                        )
                        .with_shared(Arc::clone(&store)),
                    )),
                    faults: None,
                }
                .text()
            };
            let text = scrape();
            assert!(
                text.contains("holdoff_shared_state_circuit_open 1\n"),
                "{text}"
            );
            assert!(
                text.contains("holdoff_shared_state_circuit_openings_total 3\n"),
                "{text}"
            );
            assert!(text.contains("holdoff_shared_state_up 0\n"), "{text}");

            state.0.lock().unwrap().open = false;
            let text = scrape();
            assert!(
                text.contains("holdoff_shared_state_circuit_open 0\n"),
                "{text}"
            );
            assert!(text.contains("holdoff_shared_state_up 1\n"), "{text}");
        }

        #[test]
        fn leaves_out_the_judge_and_the_faults_when_there_are_none() {
            let clock = Arc::new(ManualClock::new(UNIX_EPOCH));
            let scrape = Scrape {
                metrics: Arc::new(MetricsStage::new(clock)),
                judge: None,
                faults: None,
            };
            let text = scrape.text();
            assert!(text.contains("holdoff_requests_total{mode=\"forward\"} 0\n"));
            assert!(!text.contains("holdoff_faults"));
            assert!(!text.contains("holdoff_retries"));
            assert!(!text.contains("holdoff_open_windows"));
        }
    }

    mod histogram {
        use super::*;

        #[test]
        fn puts_each_time_in_the_first_bucket_that_holds_it() {
            let histogram = Histogram::default();
            histogram.observe(Duration::ZERO);
            histogram.observe(Duration::from_millis(5));
            histogram.observe(Duration::from_millis(6));
            histogram.observe(Duration::from_secs(61));
            let (sum, count, buckets) = histogram.read();
            assert_eq!(count, 4);
            assert!((sum - 61.011).abs() < 1e-9, "{sum}");
            assert_eq!(buckets[0], (0.005, 2));
            assert_eq!(buckets[1], (0.01, 1));
            assert_eq!(buckets[BOUNDS.len()], (f64::INFINITY, 1));
        }
    }

    mod from_upstream {
        use super::*;

        #[test]
        fn only_a_response_ending_in_holdoffs_via_came_from_upstream() {
            let mut response = Response::new(Body::empty());
            assert!(!from_upstream(&response));
            response
                .headers_mut()
                .append(header::VIA, "1.1 holdoff".parse().unwrap());
            assert!(from_upstream(&response));
            response
                .headers_mut()
                .append(header::VIA, "1.1 cache".parse().unwrap());
            assert!(!from_upstream(&response));
            let mut response = Response::new(Body::empty());
            response
                .headers_mut()
                .append(header::VIA, "1.0 cdn".parse().unwrap());
            response
                .headers_mut()
                .append(header::VIA, "2 holdoff".parse().unwrap());
            assert!(from_upstream(&response));
        }
    }
}
