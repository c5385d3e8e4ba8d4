//! The store of a config's `state` section: the judge's windows and the rate limits'
//! counters, shared with other replicas in Redis.

use std::sync::Arc;

use holdoff_config::compile::{StateConfig, StateRedis};
use holdoff_proxy::shared::{OnFailure, SharedState, SharedStore};
use holdoff_redis::RedisState;

/// The store of the `state` section: Redis (one server or a cluster), shared with other
/// replicas; logs where. The error names the key at fault (`state.redis: …`).
pub(super) fn shared_store(state: &StateConfig) -> Result<Arc<SharedStore>, String> {
    let (builder, key, form) = match &state.redis {
        StateRedis::Cluster(seeds) => (
            RedisState::cluster_builder(seeds.iter().cloned()),
            "state.redisCluster",
            "write some nodes of one cluster, [\"redis://[[USER]:PASSWORD@]HOST:PORT\", …], \
             all with the same credentials, or rediss://… for TLS with caFile naming a PEM \
             certificate",
        ),
        StateRedis::Server(url) => (
            RedisState::builder(url),
            "state.redis",
            "write redis://[[USER]:PASSWORD@]HOST[:PORT][/DB], or rediss://… for TLS with \
             caFile naming a PEM certificate",
        ),
        _ => return Err("state: names a kind of Redis this build cannot use".to_owned()),
    };
    let mut builder = builder.prefix(state.prefix.clone()).timeout(state.timeout);
    if let Some(ca) = &state.ca {
        builder = builder.root_ca(ca.clone());
    }
    let redis = builder
        .build()
        .map_err(|err| format!("{key}: could not {err}: {form}"))?;
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
