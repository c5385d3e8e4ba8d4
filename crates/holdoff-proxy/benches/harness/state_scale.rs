//! The cost of a request beside a great deal of state: the work the judge and the fault stage
//! do for one watched request (the judge's check, a per-client rate limit counted, both
//! stages' response side), with `--windows` judge windows open and `--counters` rate-limit
//! counters held, and the memory each open window takes.
//!
//!   state_scale --windows 1000000 --counters 100000 --requests 20000
//!
//! Prints the memory the windows took (resident set before and after opening them) and the
//! time per request; `scripts/count-state-instructions` runs it under callgrind, counting
//! only inside [`measure`], for instructions per request that do not move with the machine.

use std::hint::black_box;
use std::sync::Arc;
use std::time::Duration;

use holdoff::Receipt;
use holdoff::clock::{Clock, TokioClock};
use holdoff_proxy::fault::{
    Algorithm, FaultPlan, FaultRng, HeaderStyle, Limit, RateLimitRule, ResetFormat, Scope,
};
use holdoff_proxy::judge::{Judge, KeyMode};
use holdoff_proxy::{Action, Body, ClientId, FaultStage, JudgeStage, RequestMeta, Stage, Target};
use http::{Request, Response};

struct Args {
    windows: usize,
    counters: usize,
    requests: usize,
}

fn args() -> Result<Args, String> {
    let mut args = Args {
        windows: 0,
        counters: 0,
        requests: 10_000,
    };
    let mut words = std::env::args().skip(1);
    while let Some(flag) = words.next() {
        let value = words
            .next()
            .ok_or_else(|| format!("{flag} needs a number"))?;
        let number: usize = value
            .parse()
            .map_err(|_| format!("{flag}: `{value}` is not a number"))?;
        match flag.as_str() {
            "--windows" => args.windows = number,
            "--counters" => args.counters = number,
            "--requests" => args.requests = number,
            _ => {
                return Err(format!(
                    "unknown flag {flag} (--windows, --counters, --requests)"
                ));
            }
        }
    }
    Ok(args)
}

/// The resident set of this process, in bytes (Linux; 0 elsewhere).
fn resident() -> u64 {
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|statm| statm.split_whitespace().nth(1)?.parse::<u64>().ok())
        .map_or(0, |pages| pages * 4096)
}

/// The two stages as users run them, over the same judge.
struct Stages {
    judge: Arc<Judge>,
    judging: JudgeStage,
    faults: FaultStage,
}

fn stages(clock: &Arc<dyn Clock>) -> Stages {
    let judge = Arc::new(Judge::new(KeyMode::default(), clock.now()));
    let mut plan = FaultPlan::default();
    // Counted for every client, never refused: each client holds a counter.
    plan.rate_limits.push(RateLimitRule {
        url: None,
        method: None,
        limit: Limit {
            algorithm: Algorithm::FixedWindow,
            limit: u64::MAX / 2,
            window: Duration::from_secs(3600),
            cost: 1,
        },
        scope: Scope::Client,
        headers: HeaderStyle::default(),
        warning_threshold_percent: 100,
        reset_format: ResetFormat::default(),
        when_exceeded: None,
    });
    Stages {
        judging: JudgeStage::new(Arc::clone(&judge), Arc::clone(clock)),
        faults: FaultStage::new(plan, FaultRng::new(7), Arc::clone(clock)),
        judge,
    }
}

/// One watched request through both stages and its response back.
fn request(stages: &Stages, meta: &RequestMeta) {
    let mut request = Request::new(Body::empty());
    for stage in [&stages.judging as &dyn Stage, &stages.faults] {
        request = match stage.on_request(request, meta) {
            Action::Continue(request) => request,
            _ => panic!("a stage answered a request it should have let through"),
        };
    }
    let mut response = Response::new(Body::empty());
    stages.faults.on_response(&mut response, meta);
    stages.judging.on_response(&mut response, meta);
    black_box(response);
}

/// The requests measured: callgrind counts inside this function only.
#[inline(never)]
fn measure(stages: &Stages, meta: &RequestMeta, requests: usize) {
    for _ in 0..requests {
        request(stages, black_box(meta));
    }
}

fn main() {
    let args = match args() {
        Ok(args) => args,
        Err(err) => {
            eprintln!("state_scale: {err}");
            std::process::exit(2);
        }
    };
    let clock: Arc<dyn Clock> = Arc::new(TokioClock);
    let stages = stages(&clock);
    let t0 = clock.now();
    let mut meta = RequestMeta::new(
        Target::new("http://api.test/v1/items".parse().expect("a URI")),
        Receipt::now(&clock),
    );
    meta.watched = Some(Arc::from("*"));

    // The counters: one request from each of that many clients.
    for i in 0..args.counters {
        meta.client = ClientId::Header(Arc::from(format!("client-{i}")));
        request(&stages, &meta);
    }
    // The windows: a year each, on distinct URLs of one client, as long hints on many URLs
    // leave them.
    let before = resident();
    meta.client = ClientId::Header(Arc::from("windows"));
    let year = Duration::from_secs(365 * 24 * 3600);
    for i in 0..args.windows {
        meta.target = Target::new(
            format!("http://api.test/v1/items/{i}")
                .parse()
                .expect("a URI"),
        );
        stages
            .judge
            .open(stages.judge.key_for(&meta, None), t0, t0 + year);
    }
    let after = resident();
    assert_eq!(stages.judge.open_windows(), args.windows);

    // The request measured: a client and a URL with a counter and no window of their own.
    meta.client = ClientId::Header(Arc::from("measured"));
    meta.target = Target::new(
        "http://api.test/v1/chat/completions"
            .parse()
            .expect("a URI"),
    );
    request(&stages, &meta);
    let start = clock.now();
    measure(&stages, &meta, args.requests);
    let took = clock.now() - start;
    if args.windows > 0 {
        println!(
            "windows: {} open, resident set +{} bytes ({} bytes per window)",
            args.windows,
            after.saturating_sub(before),
            after.saturating_sub(before) / args.windows as u64
        );
    }
    println!(
        "requests: {} in {:?} ({} ns per request)",
        args.requests,
        took,
        took.as_nanos() / args.requests.max(1) as u128
    );
}
