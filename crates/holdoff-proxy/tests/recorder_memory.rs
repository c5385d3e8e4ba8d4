//! The recorder's memory does not grow with the run: the heap it holds after 100,000 events
//! and after 400,000 is counted by a counting allocator, not estimated, and the reports still
//! count every event.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use holdoff_proxy::FaultCounts;
use holdoff_proxy::judge::Verdict;
use holdoff_proxy::report::{
    Event, Format, HintKind, LISTED_ENDPOINTS, LISTED_VIOLATIONS, Recorder, RunInfo, TIMELINE_ROWS,
};
use holdoff_testkit::heap::{self, Counting};

#[global_allocator]
static ALLOCATOR: Counting = Counting;

fn at(ms: u64) -> SystemTime {
    UNIX_EPOCH + Duration::from_millis(1_740_830_400_000 + ms)
}

/// Throttle `i` on one of 30,000 URLs, and a premature retry 100 ms into its 1 s window (or
/// every third, a compliant one 10 ms after it).
fn pair(i: u64) -> [Event; 2] {
    let client = format!("worker-{}", i % 50);
    let url = format!("http://api.example/v1/items/{}", i % 30_000);
    let t = i * 20;
    let compliant = i.is_multiple_of(3);
    [
        Event::Throttle {
            at: at(t),
            client: client.clone(),
            user_agent: Some(format!("loadgen/{}", i % 7)),
            method: "GET".into(),
            url: url.clone(),
            status: 429,
            permitted_at: Some(at(t + 1000)),
            hint: HintKind::Usable,
            header: Some("retry-after".into()),
            value: Some("1".into()),
            reading: Some("a delay, counted from the response".into()),
        },
        Event::Retry {
            verdict: if compliant {
                Verdict::Compliant
            } else {
                Verdict::Premature
            },
            client,
            user_agent: Some(format!("loadgen/{}", i % 7)),
            idempotency_key: false,
            method: "GET".into(),
            url,
            throttled_at: at(t),
            permitted_at: Some(at(t + 1000)),
            retried_at: at(if compliant { t + 1010 } else { t + 100 }),
            early_by_ms: (!compliant).then_some(900.0 + (i % 100) as f64),
            late_by_ms: compliant.then_some(10.0),
            throttled_client: None,
        },
    ]
}

#[test]
fn holds_flat_memory_over_400_000_events_and_counts_every_one() {
    const PAIRS: u64 = 200_000;
    const EARLY: u64 = 50_000;
    let before = heap::live();
    let recorder = Recorder::new(None).expect("in memory");
    recorder.start(at(0), RunInfo::default());
    let mut held_at_early = 0;
    for i in 0..PAIRS {
        for event in pair(i) {
            recorder.record(event);
        }
        if i + 1 == EARLY {
            // The report waits for the recorder to count what was sent.
            drop(recorder.report());
            held_at_early = heap::live() - before;
        }
    }
    recorder.finish(
        at(PAIRS * 20 + 2000),
        PAIRS * 2,
        FaultCounts::default(),
        None,
    );
    // The recorder's own heap, without a report held.
    drop(recorder.report());
    let held = heap::live() - before;
    let report = recorder.report();
    let grew = held.saturating_sub(held_at_early);
    let mb = |bytes: usize| bytes as f64 / 1e6;
    eprintln!(
        "recorder heap: {:.1} MB after {} events, {:.1} MB after {} (grew {:.1} MB)",
        mb(held_at_early),
        EARLY * 2,
        mb(held),
        PAIRS * 2,
        mb(grew)
    );
    assert!(
        grew < 8_000_000,
        "the recorder grew by {:.1} MB from {} to {} events",
        mb(grew),
        EARLY * 2,
        PAIRS * 2
    );

    let compliant = (PAIRS as usize).div_ceil(3);
    assert_eq!(report.throttled(), PAIRS as usize);
    assert_eq!(report.compliant(), compliant);
    assert_eq!(report.premature(), PAIRS as usize - compliant);
    assert_eq!(report.requests(), PAIRS * 2);
    assert_eq!(report.violations().len(), LISTED_VIOLATIONS);
    let omitted = report.omitted();
    assert_eq!(
        omitted.violations,
        PAIRS as usize - compliant - LISTED_VIOLATIONS
    );
    // The violations listed are the earliest: 999 ms early is the most.
    assert!(report.worst()[0].early_by_ms == Some(999.0));
    assert_eq!(report.endpoints().len(), LISTED_ENDPOINTS);
    assert!(omitted.endpoint_events > 0);
    assert_eq!(omitted.timeline_windows, PAIRS as usize - TIMELINE_ROWS);
    assert_eq!(report.lateness().map(|l| l.count), Some(compliant));
    let json = report.render(Format::Json);
    assert!(
        json.len() < 20_000_000,
        "JSON report of {} bytes",
        json.len()
    );
    assert!(
        json.contains("\"omitted\""),
        "the JSON says what it left out"
    );
}
