//! The retry loop's own overhead per attempt, and an uncontended gate check.
//!
//! The loop runs on a `ManualClock`, whose sleeps end at once when their deadline has come:
//! with no backoff, no jitter and `Retry-After: 0`, every wait is zero, so what is measured is
//! the loop itself (deciding, tracing, observing, rescheduling), not time spent waiting.

use std::future::Future;
use std::hint::black_box;
use std::pin::pin;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, SystemTime};

use criterion::{Criterion, criterion_group, criterion_main};
use holdoff::clock::{Clock, ManualClock};
use holdoff::gate::Gate;
use holdoff::retry::Retrier;
use holdoff::{Backoff, Jitter, Policy};

const ATTEMPTS: u32 = 10;

/// Polls a future that must be ready at once (nothing in these benches waits).
fn ready<F: Future>(future: F) -> F::Output {
    let mut future = pin!(future);
    match future
        .as_mut()
        .poll(&mut Context::from_waker(Waker::noop()))
    {
        Poll::Ready(output) => output,
        Poll::Pending => panic!("the future was expected to be ready at once"),
    }
}

fn retry_loop(c: &mut Criterion) {
    let clock = ManualClock::new(SystemTime::UNIX_EPOCH);
    let policy = Policy::default()
        .with_max_attempts(ATTEMPTS)
        .with_backoff(Backoff::None)
        .with_jitter(Jitter::None);
    let throttled = || {
        http::Response::builder()
            .status(503)
            .header("retry-after", "0")
            .body(())
            .expect("valid response")
    };
    let mut group = c.benchmark_group("retry-loop");
    group
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(2));
    // ATTEMPTS attempts per iteration, all but the last answered 503: divide by ATTEMPTS.
    group.bench_function(format!("{ATTEMPTS}-attempts"), |b| {
        b.iter(|| {
            let (outcome, _report) = ready(
                Retrier::new(policy.clone(), http::Method::GET)
                    .clock(clock.clone())
                    .seed(1)
                    .run(|n| {
                        let response = if n < ATTEMPTS {
                            throttled()
                        } else {
                            http::Response::new(())
                        };
                        std::future::ready(Ok::<_, std::io::Error>(response))
                    }),
            );
            assert!(outcome.is_success());
        });
    });
    group.finish();
}

fn gate_check(c: &mut Criterion) {
    let clock = ManualClock::new(SystemTime::UNIX_EPOCH);
    let gate = Gate::in_memory();
    // Other keys are closed; the one checked is open (the common, uncontended case).
    for host in 0..100 {
        let key = format!("https://api{host}.example:443");
        ready(gate.raise(&key, clock.now() + Duration::from_secs(5), clock.wall_now())).ok();
    }
    let key = "https://api.example:443";
    let mut group = c.benchmark_group("gate");
    group
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(2));
    group.bench_function("admit-open-key", |b| {
        b.iter(|| ready(gate.admit_at(black_box(key), &clock)));
    });
    group.bench_function("admit-closed-key", |b| {
        b.iter(|| ready(gate.admit_at(black_box("https://api7.example:443"), &clock)));
    });
    group.finish();
}

criterion_group!(benches, retry_loop, gate_check);
criterion_main!(benches);
