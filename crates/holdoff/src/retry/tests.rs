//! The retry loop, run on tokio's paused clock.

use super::*;
use crate::backoff::Backoff;
use crate::jitter::Jitter;
use std::sync::Mutex;

fn reply(status: u16, retry_after: Option<&str>) -> Result<http::Response<()>, std::io::Error> {
    let mut builder = http::Response::builder().status(status);
    if let Some(value) = retry_after {
        builder = builder.header("retry-after", value);
    }
    Ok(builder.body(()).expect("valid response"))
}

fn get(policy: Policy) -> Retrier<TokioClock, MemoryGateStore, std::io::Error> {
    Retrier::new(policy, Method::GET)
}

fn plain_policy() -> Policy {
    Policy::default()
        .with_backoff(Backoff::None)
        .with_jitter(Jitter::None)
}

/// Runs `script` (one reply per attempt) and returns the outcome and the instant of
/// every attempt, relative to the start.
async fn run_script(
    retrier: Retrier<TokioClock, MemoryGateStore, std::io::Error>,
    script: Vec<Result<http::Response<()>, std::io::Error>>,
) -> (
    Outcome<http::Response<()>, std::io::Error>,
    Vec<Duration>,
    RetryReport,
) {
    let start = TokioClock.now();
    let calls = Arc::new(Mutex::new(Vec::new()));
    let mut script = script.into_iter();
    let seen = calls.clone();
    let (outcome, report) = retrier
        .run(move |_| {
            seen.lock().expect("lock").push(TokioClock.now() - start);
            let next = script.next().unwrap_or_else(|| reply(200, None));
            async move { next }
        })
        .await;
    let calls = calls.lock().expect("lock").clone();
    (outcome, calls, report)
}

mod run {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn retries_exactly_when_the_hint_permits() {
        let (outcome, calls, report) = run_script(
            get(plain_policy()),
            vec![reply(503, Some("2")), reply(429, Some("5"))],
        )
        .await;
        assert!(outcome.is_success());
        assert_eq!(
            (report.attempts, report.reason()),
            (3, crate::Reason::Success)
        );
        assert_eq!(
            calls,
            [
                Duration::ZERO,
                Duration::from_secs(2),
                Duration::from_secs(7)
            ]
        );
    }

    #[tokio::test(start_paused = true)]
    async fn never_retries_before_the_backoff() {
        let policy = plain_policy().with_backoff(Backoff::Constant(Duration::from_secs(5)));
        let (_, calls, _) = run_script(get(policy), vec![reply(503, Some("1"))]).await;
        assert_eq!(calls, [Duration::ZERO, Duration::from_secs(5)]);
    }

    #[tokio::test(start_paused = true)]
    async fn defers_when_the_wait_cannot_fit_and_does_not_sleep() {
        let start = TokioClock.now();
        let retrier = get(plain_policy().with_backoff(Backoff::Constant(Duration::from_secs(8))))
            .timeout(Duration::from_secs(12));
        let (outcome, calls, report) = run_script(retrier, vec![reply(503, Some("30"))]).await;
        let Outcome::Deferred { reason, last } = outcome else {
            panic!("expected a deferral, got {outcome:?}");
        };
        assert_eq!(reason, DeferReason::DeadlineExceeded);
        assert!(matches!(last, Some(Last::Response(_))));
        assert_eq!(report.deferred(), Some(DeferReason::DeadlineExceeded));
        assert_eq!(
            report.permitted.and_then(|p| p.at),
            Some(start + Duration::from_secs(30))
        );
        assert!(matches!(report.requeue_at(), crate::Requeue::At(_)));
        assert_eq!(calls.len(), 1);
        assert_eq!(TokioClock.now(), start, "no virtual time may pass");
    }

    #[tokio::test(start_paused = true)]
    async fn does_not_retry_a_post_unless_marked_safe() {
        let retrier = Retrier::new(plain_policy(), Method::POST);
        let (outcome, calls, report) = run_script(retrier, vec![reply(503, Some("1"))]).await;
        assert!(matches!(
            outcome,
            Outcome::GaveUp {
                reason: GiveUpReason::NonIdempotent,
                ..
            }
        ));
        assert_eq!(calls.len(), 1);
        assert_eq!(report.gave_up(), Some(GiveUpReason::NonIdempotent));

        let retrier = Retrier::new(plain_policy(), Method::POST).repeat_safe(true);
        let (outcome, calls, report) = run_script(retrier, vec![reply(503, Some("1"))]).await;
        assert!(outcome.is_success());
        assert_eq!((calls.len(), report.attempts), (2, 2));
    }

    #[tokio::test(start_paused = true)]
    async fn reads_the_method_and_markers_of_a_request() {
        let post = http::Request::post("http://127.0.0.1:1/v1/jobs")
            .body(())
            .expect("request");
        let (outcome, calls, _) = run_script(
            Retrier::for_request(plain_policy(), &post),
            vec![reply(503, Some("1"))],
        )
        .await;
        assert!(matches!(outcome, Outcome::GaveUp { .. }));
        assert_eq!(calls.len(), 1);

        let keyed = http::Request::post("http://127.0.0.1:1/v1/jobs")
            .header("Idempotency-Key", "8e03978e")
            .extension(crate::request::Timeout(Duration::from_secs(10)))
            .body(())
            .expect("request");
        let (outcome, calls, report) = run_script(
            Retrier::for_request(plain_policy(), &keyed),
            vec![reply(503, Some("1")), reply(503, Some("30"))],
        )
        .await;
        assert!(matches!(outcome, Outcome::Deferred { .. }), "{outcome:?}");
        assert_eq!(calls.len(), 2);
        assert_eq!(report.deferred(), Some(DeferReason::DeadlineExceeded));
    }

    #[tokio::test(start_paused = true)]
    async fn hands_back_a_malformed_hint_with_its_raw_value() {
        let (outcome, calls, report) =
            run_script(get(plain_policy()), vec![reply(503, Some("1.5"))]).await;
        let Outcome::Malformed { error, response } = outcome else {
            panic!("expected malformed, got {outcome:?}");
        };
        assert_eq!(error.raw(), b"1.5");
        assert_eq!(response.status(), 503);
        assert_eq!(calls.len(), 1);
        assert_eq!(
            report.malformed.as_ref().map(ParseError::raw),
            Some(&b"1.5"[..])
        );
        // A malformed hint names no time: never "permitted now".
        assert_eq!(report.permitted, None);
    }

    #[tokio::test(start_paused = true)]
    async fn stops_after_the_last_attempt() {
        let retrier = get(plain_policy().with_max_attempts(3));
        let (outcome, calls, report) =
            run_script(retrier, (0..5).map(|_| reply(503, Some("1"))).collect()).await;
        assert!(matches!(
            outcome,
            Outcome::GaveUp {
                reason: GiveUpReason::AttemptsExhausted,
                ..
            }
        ));
        assert_eq!(calls.len(), 3);
        assert_eq!(report.attempts, 3);
    }

    #[tokio::test(start_paused = true)]
    async fn retries_transport_errors_on_the_backoff_alone() {
        let policy = plain_policy().with_backoff(Backoff::exponential(
            Duration::from_secs(1),
            Duration::from_secs(60),
        ));
        let refused = || Err(std::io::Error::from(std::io::ErrorKind::ConnectionRefused));
        let (outcome, calls, report) = run_script(get(policy), vec![refused(), refused()]).await;
        assert!(outcome.is_success());
        assert_eq!(report.attempts, 3);
        assert_eq!(
            calls,
            [
                Duration::ZERO,
                Duration::from_secs(1),
                Duration::from_secs(3)
            ]
        );
    }

    #[tokio::test(start_paused = true)]
    async fn gives_up_on_a_permanent_transport_error() {
        let retrier = get(plain_policy())
            .transient_if(|e: &std::io::Error| e.kind() != std::io::ErrorKind::InvalidInput);
        let start = TokioClock.now();
        let (outcome, report) = retrier
            .run(|_| async {
                Err::<http::Response<()>, _>(std::io::Error::from(std::io::ErrorKind::InvalidInput))
            })
            .await;
        assert!(matches!(
            outcome,
            Outcome::GaveUp {
                reason: GiveUpReason::PermanentError,
                last: Last::Error(_)
            }
        ));
        assert_eq!(report.reason(), crate::Reason::PermanentError);
        assert_eq!(TokioClock.now(), start);
    }

    #[tokio::test(start_paused = true)]
    async fn reports_every_attempt() {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let record = seen.clone();
        let retrier = get(plain_policy()).on_attempt(move |event| {
            record.lock().expect("lock").push((
                event.number,
                event.status.map(|s| s.as_u16()),
                event.decision.action(),
            ));
        });
        let _ = run_script(retrier, vec![reply(503, Some("1"))]).await;
        assert_eq!(
            *seen.lock().expect("lock"),
            [(1, Some(503), "retry"), (2, Some(200), "done")]
        );
    }
}

mod cancellation {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn interrupts_a_one_hour_wait_at_once() {
        let token = CancellationToken::new();
        let cancel = token.clone();
        let start = TokioClock.now();
        // Cancel as soon as the first attempt has been decided: mid-wait.
        let retrier = get(plain_policy().with_max_wait(None))
            .cancel_on(token)
            .on_attempt(move |_| cancel.cancel());
        let (outcome, calls, report) = run_script(retrier, vec![reply(503, Some("3600"))]).await;
        assert!(matches!(
            outcome,
            Outcome::Cancelled {
                last: Some(Last::Response(_))
            }
        ));
        assert_eq!(calls.len(), 1);
        assert_eq!(report.gave_up(), Some(GiveUpReason::Cancelled));
        assert_eq!(
            report.permitted.map(|p| p.after),
            Some(Duration::from_secs(3600))
        );
        assert_eq!(TokioClock.now(), start, "no virtual time may pass");
    }

    #[tokio::test(start_paused = true)]
    async fn dropping_the_future_stops_the_wait() {
        let start = TokioClock.now();
        let policy = plain_policy().with_max_wait(None);
        let run = run_script(get(policy), vec![reply(503, Some("3600"))]);
        let raced = tokio::select! {
            _ = run => "run",
            () = std::future::ready(()) => "dropped",
        };
        assert_eq!(raced, "dropped");
        assert_eq!(TokioClock.now(), start);
    }
}

mod deadline {
    use super::*;
    use crate::clock::ManualClock;
    use std::time::SystemTime;

    fn manual() -> ManualClock {
        ManualClock::new(SystemTime::UNIX_EPOCH)
    }

    /// A GET on `clock` that must be done within 5 s.
    fn within_5s(clock: &ManualClock) -> Retrier<ManualClock, MemoryGateStore, std::io::Error> {
        get(plain_policy())
            .clock(clock.clone())
            .timeout(Duration::from_secs(5))
    }

    #[tokio::test]
    async fn cuts_an_attempt_still_running_at_the_deadline() {
        let clock = manual();
        let start = clock.now();
        let server = clock.clone();
        let (outcome, report) = within_5s(&clock)
            .run(move |_| {
                // An answer that would come after 10 s; the clock moves 5 s meanwhile.
                let server = server.clone();
                async move {
                    server.advance(Duration::from_secs(5));
                    server.sleep_until(start + Duration::from_secs(10)).await;
                    reply(200, None)
                }
            })
            .await;
        let Outcome::Deferred { reason, last } = outcome else {
            panic!("expected a deadline result, got {outcome:?}");
        };
        assert_eq!(reason, DeferReason::DeadlineReached);
        assert!(last.is_none(), "the cut attempt gave nothing");
        assert_eq!(report.attempts, 1);
        assert_eq!(report.reason(), crate::Reason::DeadlineReached);
        assert_eq!(clock.now(), start + Duration::from_secs(5));
        assert_eq!(clock.sleepers(), 0, "the cut attempt was dropped");
    }

    #[tokio::test]
    async fn does_not_start_a_retry_that_would_not_finish_in_time() {
        let clock = manual();
        let start = clock.now();
        let server = clock.clone();
        let (outcome, report) = within_5s(&clock)
            .run(move |_| {
                // Each answer takes 3 s; the hint (1 s) fits in the 2 s left, the retry
                // that would follow it does not.
                server.advance(Duration::from_secs(3));
                std::future::ready(reply(503, Some("1")))
            })
            .await;
        let Outcome::Deferred { reason, last } = outcome else {
            panic!("expected a deferral, got {outcome:?}");
        };
        assert_eq!(reason, DeferReason::AttemptWouldNotFit);
        assert!(matches!(last, Some(Last::Response(_))));
        assert_eq!(report.attempts, 1);
        assert_eq!(report.reason(), crate::Reason::AttemptWouldNotFit);
        assert_eq!(
            report.permitted.and_then(|p| p.at),
            Some(start + Duration::from_secs(4)),
            "the server's time is kept for the re-queue"
        );
        assert_eq!(
            clock.now(),
            start + Duration::from_secs(3),
            "no wait was started"
        );
    }

    #[tokio::test]
    async fn retries_while_a_retry_still_fits() {
        let clock = manual();
        let server = clock.clone();
        let mut calls = 0u32;
        let run = within_5s(&clock).run(move |_| {
            calls += 1;
            server.advance(Duration::from_secs(1));
            let answer = if calls == 1 {
                reply(503, Some("1"))
            } else {
                reply(200, None)
            };
            std::future::ready(answer)
        });
        let driver = async {
            // The wait after the first answer: release it once it is registered.
            while clock.sleepers() < 2 {
                tokio::task::yield_now().await;
            }
            let next = clock.next_deadline().expect("a wait");
            clock.advance(next - clock.now());
        };
        let ((outcome, report), ()) = tokio::join!(run, driver);
        assert!(outcome.is_success(), "{outcome:?}");
        assert_eq!(report.attempts, 2);
    }

    #[tokio::test]
    async fn cancellation_stops_an_attempt_in_flight_the_same_way() {
        let clock = manual();
        let token = CancellationToken::new();
        let cancel = token.clone();
        let (outcome, report) = within_5s(&clock)
            .cancel_on(token)
            .run(move |_| {
                cancel.cancel();
                std::future::pending::<Result<http::Response<()>, std::io::Error>>()
            })
            .await;
        assert!(
            matches!(outcome, Outcome::Cancelled { last: None }),
            "{outcome:?}"
        );
        assert_eq!(report.gave_up(), Some(GiveUpReason::Cancelled));
        assert_eq!(clock.sleepers(), 0, "the deadline's sleep was dropped too");
    }
}

mod gate {
    use super::*;
    use crate::gate::Gate;

    #[tokio::test(start_paused = true)]
    async fn holds_every_task_until_the_hint_and_spreads_them() {
        let gate = Arc::new(
            Gate::in_memory()
                .spread(Jitter::Uniform(Duration::from_secs(1)))
                .seed(3),
        );
        let start = TokioClock.now();
        let first = Arc::new(std::sync::atomic::AtomicBool::new(true));
        let calls = Arc::new(Mutex::new(Vec::<Duration>::new()));
        let mut tasks = tokio::task::JoinSet::new();
        for task in 0..200u64 {
            let (gate, first, calls) = (gate.clone(), first.clone(), calls.clone());
            tasks.spawn(async move {
                // Task 0 goes first and learns the hint; the others arrive just after.
                if task > 0 {
                    TokioClock
                        .sleep_until(start + Duration::from_millis(10))
                        .await;
                }
                get(plain_policy())
                    .seed(task)
                    .gate(gate, "http://api.test:80")
                    .run(move |_| {
                        calls.lock().expect("lock").push(TokioClock.now() - start);
                        let throttled = first.swap(false, std::sync::atomic::Ordering::SeqCst);
                        async move {
                            if throttled {
                                reply(503, Some("2"))
                            } else {
                                reply(200, None)
                            }
                        }
                    })
                    .await
                    .0
                    .is_success()
            });
        }
        while let Some(done) = tasks.join_next().await {
            assert!(done.expect("task"));
        }
        let mut calls = calls.lock().expect("lock").clone();
        calls.sort();
        assert_eq!(
            calls.len(),
            201,
            "one throttled call, then one call per task"
        );
        assert_eq!(calls[0], Duration::ZERO);
        let resumed = &calls[1..];
        assert!(
            resumed.iter().all(|t| *t >= Duration::from_secs(2)),
            "nobody early: {:?}",
            resumed[0]
        );
        assert!(resumed.iter().all(|t| *t <= Duration::from_secs(3)));
        // Spread over the window, not bunched: every quarter of the second has many.
        for quarter in 0..4u32 {
            let lo = Duration::from_secs(2) + Duration::from_millis(250) * quarter;
            let hi = lo + Duration::from_millis(250);
            let n = resumed.iter().filter(|t| **t >= lo && **t < hi).count();
            assert!(n >= 25, "quarter {quarter} has only {n} resumptions");
        }
    }
}
