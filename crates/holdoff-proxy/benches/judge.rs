//! The judge's hot path: the window key of a request, as the proxy's stages compute it
//! ([`Judge::key_for`]), then opening a window and judging a request under it.

use std::hint::black_box;
use std::net::Ipv4Addr;
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use holdoff::Receipt;
use holdoff::clock::SystemClock;
use holdoff_proxy::judge::{Judge, KeyMode};
use holdoff_proxy::{ClientId, RequestMeta, Target};

fn judge(c: &mut Criterion) {
    let t0 = SystemClock.now();
    let at = Receipt {
        instant: t0,
        wall: SystemClock.wall_now(),
    };
    let judge = Judge::new(KeyMode::default(), t0);
    let mut meta = RequestMeta::new(
        Target::new("https://api.example/".parse().expect("a URI")),
        at,
    );
    meta.client = ClientId::Peer(Ipv4Addr::new(10, 0, 0, 1).into());
    // A judge that already holds 100,000 windows, as under load.
    for i in 0..100_000 {
        let url = format!("https://api.example/v1/items/{i}");
        meta.target = Target::new(url.parse().expect("a URI"));
        judge.open(judge.key_for(&meta, None), t0, t0 + Duration::from_secs(30));
    }
    meta.client = ClientId::Peer(Ipv4Addr::LOCALHOST.into());
    meta.target = Target::new(
        "https://api.example/v1/chat/completions?stream=false"
            .parse()
            .expect("a URI"),
    );
    let mut group = c.benchmark_group("judge");
    group
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(2));
    group.bench_function("key", |b| b.iter(|| judge.key_for(black_box(&meta), None)));
    group.bench_function("open-then-check", |b| {
        b.iter(|| {
            let key = judge.key_for(black_box(&meta), None);
            judge.open(key, t0, t0 + Duration::from_secs(2));
            judge.check(key, t0 + Duration::from_secs(3))
        });
    });
    group.bench_function("check-no-window", |b| {
        b.iter(|| judge.check(judge.key_for(black_box(&meta), None), t0));
    });
    group.finish();
}

criterion_group!(benches, judge);
criterion_main!(benches);
