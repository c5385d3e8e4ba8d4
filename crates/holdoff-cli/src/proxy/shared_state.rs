//! The store of a config's `state` section: the judge's windows and the rate limits'
//! counters, shared with other replicas in Redis.

use std::sync::Arc;

use holdoff_config::compile::StateConfig;
use holdoff_proxy::shared::{OnFailure, SharedState, SharedStore};
use holdoff_redis::RedisState;

/// The store of the `state` section: Redis, shared with other replicas; logs where.
pub(super) fn shared_store(state: &StateConfig) -> Result<Arc<SharedStore>, String> {
    let mut builder = RedisState::builder(&state.redis)
        .prefix(state.prefix.clone())
        .timeout(state.timeout);
    if let Some(ca) = &state.ca {
        builder = builder.root_ca(ca.clone());
    }
    let redis = builder.build().map_err(|err| {
        format!(
            "could not {err}: write redis://[[USER]:PASSWORD@]HOST[:PORT][/DB], or \
                 rediss://… for TLS with caFile naming a PEM certificate"
        )
    })?;
    let mode = match state.on_failure {
        OnFailure::FailClosed { hold } => format!(
            "fail-closed: 503 with Retry-After: {}s while it is unreachable",
            holdoff::RetryAfter::Delay(hold)
        ),
        _ => "fail-open: this replica's own state while it is unreachable".to_owned(),
    };
    tracing::info!(
        "sharing the judge's windows and the rate limits' counters in {} (keys {}*; {mode})",
        redis.location(),
        state.prefix,
    );
    Ok(Arc::new(SharedStore::new(
        Arc::new(redis),
        state.on_failure,
    )))
}
