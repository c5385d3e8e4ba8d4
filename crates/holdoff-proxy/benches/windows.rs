//! The control API's window book (`--control-port`): labelling a throttled response's window
//! while 10,000 windows are open.

use std::hint::black_box;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use holdoff::clock::{Clock, TokioClock};
use holdoff_proxy::control::WindowBook;
use holdoff_proxy::judge::{Judge, JudgeStage, KeyMode};
use holdoff_proxy::{Action, Body, Pipeline, ProxyConfig, ProxyServer, RequestMeta, Stage, Target};
use http::{Request, Response, StatusCode, header};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// How many windows are open while the book is measured.
const OPEN: usize = 10_000;

/// Keeps the first request's metadata and answers it itself.
#[derive(Default)]
struct Capture(Mutex<Option<RequestMeta>>);

impl Stage for Capture {
    fn on_request(&self, _: Request<Body>, meta: &RequestMeta) -> Action {
        *self.0.lock().expect("not poisoned") = Some(meta.clone());
        Action::Respond(Response::new(Body::empty()))
    }
}

/// A request's metadata as the proxy makes it (it cannot be built outside the crate): one
/// request through a proxy on loopback.
fn captured_meta(runtime: &tokio::runtime::Runtime) -> RequestMeta {
    let capture = Arc::new(Capture::default());
    runtime.block_on(async {
        let mut config = ProxyConfig::default();
        config.listen = SocketAddr::from((Ipv4Addr::LOCALHOST, 0));
        let server = ProxyServer::bind(
            config,
            Pipeline::from(vec![capture.clone() as Arc<dyn Stage>]),
        )
        .await
        .expect("bind the proxy");
        let addr = server.local_addr();
        let handle = server.shutdown_handle();
        let task = tokio::spawn(server.run());
        let mut stream = TcpStream::connect(addr)
            .await
            .expect("connect to the proxy");
        stream
            .write_all(
                b"GET http://api.example/v1/items HTTP/1.1\r\nHost: api.example\r\n\
                  X-Holdoff-Client: bench\r\nConnection: close\r\n\r\n",
            )
            .await
            .expect("send a request");
        let mut answer = Vec::new();
        stream
            .read_to_end(&mut answer)
            .await
            .expect("read the answer");
        handle.shutdown();
        task.await.expect("the proxy stops");
    });
    let meta = capture.0.lock().expect("not poisoned").take();
    meta.expect("the proxy saw the request")
}

fn throttled() -> Response<Body> {
    let mut response = Response::new(Body::empty());
    *response.status_mut() = StatusCode::TOO_MANY_REQUESTS;
    response
        .headers_mut()
        .insert(header::RETRY_AFTER, http::HeaderValue::from_static("60"));
    response
}

fn windows(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    let mut meta = captured_meta(&runtime);
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
