//! `RedisState`'s token budgets against a real `redis-server` that each test starts on a free
//! loopback port: replicas share one window, it starts at its first check and ends on Redis's
//! clock, and tokens of an ended window are not counted in the next.

use std::time::Duration;

use holdoff::clock::{Clock, TokioClock};
use holdoff_proxy::fault::{BudgetCheck, Spent, TokenBudget, Usage};
use holdoff_proxy::shared::{CounterKey, SharedState};
use holdoff_redis::RedisState;
use holdoff_testkit::redis::{RedisServer, inspect};

fn counter(scope: &str) -> CounterKey {
    CounterKey {
        rule: "fedcba9876543210fedcba9876543210".to_owned(),
        scope: scope.to_owned(),
    }
}

fn within(check: BudgetCheck) -> u64 {
    match check {
        BudgetCheck::Within { window } => window,
        other => panic!("within the budget, not {other:?}"),
    }
}

async fn pttl(redis: &RedisServer, key: &str) -> i64 {
    redis::cmd("PTTL")
        .arg(key)
        .query_async(&mut inspect(redis).await)
        .await
        .expect("PTTL")
}

const HOUR: Duration = Duration::from_secs(3600);

mod budget {
    use super::*;

    #[tokio::test]
    async fn replicas_share_one_window_until_a_budget_is_used_up() {
        let redis = RedisServer::start();
        let a = RedisState::builder(redis.url()).build().expect("state");
        let b = RedisState::builder(redis.url()).build().expect("state");
        let budget = TokenBudget {
            prompt: 100,
            completion: 1000,
            window: HOUR,
        };
        let shared = counter("");
        let window = within(a.budget_check(&shared, budget).await.expect("check"));
        let used = Usage {
            prompt: 60,
            completion: 5,
        };
        a.budget_spend(&shared, window, used).await.expect("spend");
        let same = within(b.budget_check(&shared, budget).await.expect("check"));
        assert_eq!(same, window, "one window for both");
        b.budget_spend(&shared, same, used).await.expect("spend");
        match a.budget_check(&shared, budget).await.expect("check") {
            BudgetCheck::Exhausted { spent, reset } => {
                assert_eq!(spent, Spent::Prompt);
                assert!(reset > Duration::ZERO && reset <= HOUR, "{reset:?}");
            }
            other => panic!("used up, not {other:?}"),
        }
        // Another scope has a budget of its own; the window's key goes when it ends.
        within(
            a.budget_check(&counter("alice"), budget)
                .await
                .expect("check"),
        );
        let ttl = pttl(&redis, &a.budget_key(&shared)).await;
        assert!(ttl > 0 && ttl <= HOUR.as_millis() as i64 + 1, "PTTL {ttl}");
    }

    #[tokio::test]
    async fn the_first_check_after_the_end_starts_a_new_window_that_old_tokens_miss() {
        let redis = RedisServer::start();
        let state = RedisState::builder(redis.url()).build().expect("state");
        let budget = TokenBudget {
            prompt: 10,
            completion: 10,
            window: Duration::from_millis(100),
        };
        let key = counter("bob");
        let old = within(state.budget_check(&key, budget).await.expect("check"));
        // Redis keeps the time: the window can only end by waiting for it.
        TokioClock
            .sleep_until(TokioClock.now() + Duration::from_millis(150))
            .await;
        let new = within(state.budget_check(&key, budget).await.expect("check"));
        assert_ne!(old, new);
        let all = Usage {
            prompt: 10,
            completion: 10,
        };
        state.budget_spend(&key, old, all).await.expect("spend");
        within(state.budget_check(&key, budget).await.expect("check"));
        state.budget_spend(&key, new, all).await.expect("spend");
        assert!(matches!(
            state.budget_check(&key, budget).await.expect("check"),
            BudgetCheck::Exhausted {
                spent: Spent::Prompt,
                ..
            }
        ));
    }
}
