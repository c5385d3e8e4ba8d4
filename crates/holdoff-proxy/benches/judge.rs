//! The judge's hot path: open a window and judge a request under a key.

use std::hint::black_box;
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use holdoff::clock::SystemClock;
use holdoff_proxy::judge::{Judge, KeyMode, KeyParts};

fn judge(c: &mut Criterion) {
    let t0 = SystemClock.now();
    let judge = Judge::new(KeyMode::default(), t0);
    // A judge that already holds 100,000 windows, as under load.
    for i in 0..100_000 {
        let url = format!("https://api.example/v1/items/{i}");
        let key = judge.key(&KeyParts {
            client: "10.0.0.1",
            method: "GET",
            url: &url,
            origin: "https://api.example:443",
            header: None,
        });
        judge.open(key, t0, t0 + Duration::from_secs(30));
    }
    let parts = KeyParts {
        client: "127.0.0.1",
        method: "GET",
        url: "https://api.example/v1/chat/completions?stream=false",
        origin: "https://api.example:443",
        header: None,
    };
    let mut group = c.benchmark_group("judge");
    group
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(2));
    group.bench_function("key", |b| b.iter(|| judge.key(black_box(&parts))));
    group.bench_function("open-then-check", |b| {
        b.iter(|| {
            let key = judge.key(black_box(&parts));
            judge.open(key, t0, t0 + Duration::from_secs(2));
            judge.check(key, t0 + Duration::from_secs(3))
        });
    });
    group.bench_function("check-no-window", |b| {
        b.iter(|| judge.check(judge.key(black_box(&parts)), t0));
    });
    group.finish();
}

criterion_group!(benches, judge);
criterion_main!(benches);
