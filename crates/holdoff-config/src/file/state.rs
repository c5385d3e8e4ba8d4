//! State shared by several proxy replicas: `state`.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// State shared by several proxy replicas, in Redis: one server (`redis`) or a Redis Cluster
/// (`redisCluster`), exactly one of the two.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RawState {
    /// One Redis server's URL: `redis://[[USER]:PASSWORD@]HOST[:PORT][/DB]`, or `rediss://…`
    /// for TLS. The password never appears in logs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub redis: Option<String>,
    /// A Redis Cluster (or Valkey cluster): the URLs of some of its nodes, any of them —
    /// `redis://[[USER]:PASSWORD@]HOST:PORT`, or `rediss://…` for TLS, all with the same
    /// credentials. The proxy learns the other nodes, and which slots each serves, from
    /// these. Instead of `redis`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub redis_cluster: Option<Vec<String>>,
    /// Put before every key, so that proxies in front of different APIs can share one Redis
    /// without sharing windows. Default `holdoff:`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefix: Option<String>,
    /// How long one Redis operation may take before it counts as a failure. Default 500.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
    /// What the proxy does while Redis fails: `fail-open` (default: judge and rate-limit with
    /// this replica's own state) or `fail-closed` (answer every watched request `503`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_failure: Option<RawOnFailure>,
    /// With `fail-closed`: the `Retry-After` of each `503`, in seconds. Default 5.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hold_seconds: Option<u64>,
    /// For `rediss://`: the CA certificate (PEM file, relative to this file) to verify the
    /// Redis server against, instead of the system's roots.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca_file: Option<String>,
}

/// What the proxy does while its shared state fails.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum RawOnFailure {
    /// Judge and rate-limit with this replica's own state, and say so in the log.
    FailOpen,
    /// Answer every watched request `503` with `Retry-After`, without forwarding it.
    FailClosed,
}
