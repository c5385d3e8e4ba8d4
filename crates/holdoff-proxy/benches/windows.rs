//! The control API's window book (`--control-port`): labelling a throttled response's window
//! while 10,000 windows are open.

use std::hint::black_box;
use std::sync::Arc;
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use holdoff::Receipt;
use holdoff::clock::{Clock, TokioClock};
use holdoff_proxy::JudgeStage;
use holdoff_proxy::WindowBook;
use holdoff_proxy::judge::{Judge, KeyMode};
use holdoff_proxy::{Body, ClientId, RequestMeta, Stage, Target};
use http::{Response, StatusCode, header};

/// How many windows are open while the book is measured.
const OPEN: usize = 10_000;

fn throttled() -> Response<Body> {
    let mut response = Response::new(Body::empty());
    *response.status_mut() = StatusCode::TOO_MANY_REQUESTS;
    response
        .headers_mut()
        .insert(header::RETRY_AFTER, http::HeaderValue::from_static("60"));
    response
}

fn windows(c: &mut Criterion) {
    let mut meta = RequestMeta::new(
        Target::new("http://api.example/v1/items".parse().expect("a URI")),
        Receipt::now(&TokioClock),
    );
    meta.client = ClientId::Header("bench".into());
    let judge = Arc::new(Judge::new(KeyMode::default(), TokioClock.now()));
    let stage = JudgeStage::new(Arc::clone(&judge), Arc::new(TokioClock));
    let book = WindowBook::new(Arc::clone(&judge));
    // 10,000 throttled responses, each opening a window of a minute that the book labels:
    // the book is full of open windows, as under load.
    for i in 0..OPEN {
        meta.target = Target::new(
            format!("http://api.example/v1/items/{i}")
                .parse()
                .expect("a URI"),
        );
        let mut response = throttled();
        stage.on_response(&mut response, &meta);
        book.on_response(&mut response, &meta);
    }
    assert_eq!(judge.open_windows(), OPEN);
    assert_eq!(book.unlabelled(), 0);

    let mut group = c.benchmark_group("windows");
    group
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3));
    // A throttled response on a key the book has no room for.
    let mut new = meta.clone();
    new.target = Target::new(
        "http://api.example/v1/chat/completions"
            .parse()
            .expect("a URI"),
    );
    group.bench_function("note-new-window-10k-open", |b| {
        b.iter(|| book.on_response(black_box(&mut throttled()), black_box(&new)));
    });
    // A throttled response on a key it has labelled already (a premature retry's).
    let mut known = meta.clone();
    known.target = Target::new("http://api.example/v1/items/0".parse().expect("a URI"));
    group.bench_function("note-labelled-window-10k-open", |b| {
        b.iter(|| book.on_response(black_box(&mut throttled()), black_box(&known)));
    });
    group.finish();
}

criterion_group!(benches, windows);
criterion_main!(benches);
