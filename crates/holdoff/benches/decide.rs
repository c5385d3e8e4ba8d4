//! One `Policy::decide` call, for the common shapes of a failed attempt. The policy, the
//! response and the attempt are built outside the timed loop: only the decision is measured
//! (parsing the hint and the `Date` header included, since `decide` does that).

use std::hint::black_box;
use std::time::{Duration, UNIX_EPOCH};

use criterion::{Criterion, criterion_group, criterion_main};
use holdoff::clock::SystemClock;
use holdoff::{Attempt, Decision, DeferReason, JitterDraw, Policy, Receipt, ResponseInfo};
use http::{Method, StatusCode};

fn decide(c: &mut Criterion) {
    let receipt = Receipt {
        instant: SystemClock.now(),
        // 1994-11-06T08:49:37Z, the RFC's example date.
        wall: UNIX_EPOCH + Duration::from_secs(784_111_777),
    };
    let policy = Policy::default();
    let attempt = Attempt::new(&Method::GET, 1)
        .with_backoff(policy.backoff_for(1))
        .with_jitter(JitterDraw::Unit(0.5));
    let canonical = attempt
        .with_backoff(Duration::from_secs(8))
        .with_remaining(Some(Duration::from_secs(12)));
    let cases: [(&str, ResponseInfo<'static>, &Attempt<'_>); 4] = [
        (
            "delay-retry",
            ResponseInfo::new(StatusCode::TOO_MANY_REQUESTS, receipt).with_retry_after(b"45"),
            &attempt,
        ),
        (
            "date-with-date-header",
            ResponseInfo::new(StatusCode::SERVICE_UNAVAILABLE, receipt)
                .with_retry_after(b"Sun, 06 Nov 1994 08:50:37 GMT")
                .with_date(b"Sun, 06 Nov 1994 08:49:37 GMT"),
            &attempt,
        ),
        (
            "canonical-defer",
            ResponseInfo::new(StatusCode::SERVICE_UNAVAILABLE, receipt).with_retry_after(b"30"),
            &canonical,
        ),
        (
            "no-hint-503",
            ResponseInfo::new(StatusCode::SERVICE_UNAVAILABLE, receipt),
            &attempt,
        ),
    ];

    let mut group = c.benchmark_group("decide");
    group
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(2));
    for (name, response, attempt) in &cases {
        // Measure the outcome the name promises, not some early exit.
        let decision = policy.decide(response, attempt).decision;
        let expected = match *name {
            "canonical-defer" => matches!(decision, Decision::Defer(DeferReason::DeadlineExceeded)),
            _ => matches!(decision, Decision::Retry { .. }),
        };
        assert!(expected, "{name}: {decision:?}");
        group.bench_function(*name, |b| {
            b.iter(|| policy.decide(black_box(response), black_box(attempt)));
        });
    }
    group.finish();
}

criterion_group!(benches, decide);
criterion_main!(benches);
