//! `state`: where the judge's windows and the rate limiters' counters are shared with other
//! replicas.

use std::fmt;
use std::fs;
use std::time::Duration;

use super::{Compiler, WrittenIn};
use crate::file::{RawOnFailure, RawState};
use holdoff_proxy::shared::OnFailure;

/// Where the judge's windows and the rate limiters' counters are shared with other replicas.
#[derive(Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct StateConfig {
    /// The Redis server or cluster (its URLs may hold a password: never log them as they are).
    pub redis: StateRedis,
    /// The key prefix.
    pub prefix: String,
    /// The timeout of one operation.
    pub timeout: Duration,
    /// What to do while Redis fails.
    pub on_failure: OnFailure,
    /// The CA certificate (PEM) a `rediss://` server is verified against, read from
    /// `caFile`; the system's roots when `None`.
    pub ca: Option<Vec<u8>>,
}

/// The Redis a [`StateConfig`] names: `redis` or `redisCluster`.
#[derive(Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum StateRedis {
    /// One server: its URL.
    Server(String),
    /// A Redis Cluster: the URLs of some of its nodes, from which the others are found.
    Cluster(Vec<String>),
}

impl fmt::Debug for StateConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let redis = match &self.redis {
            StateRedis::Server(_) => "server …",
            StateRedis::Cluster(_) => "cluster …",
        };
        f.debug_struct("StateConfig")
            .field("redis", &redis)
            .field("prefix", &self.prefix)
            .field("timeout", &self.timeout)
            .field("on_failure", &self.on_failure)
            .field("ca", &self.ca.as_ref().map(|_| "…"))
            .finish()
    }
}

/// The default key prefix in a shared store.
pub const DEFAULT_STATE_PREFIX: &str = "holdoff:";
/// The default timeout of one shared-store operation.
pub const DEFAULT_STATE_TIMEOUT: Duration = Duration::from_millis(500);
/// The default `Retry-After` of a fail-closed `503`.
pub const DEFAULT_STATE_HOLD: Duration = Duration::from_secs(5);

impl Compiler {
    /// Checks `state`. The URL is checked for its form only (connecting is the proxy's job),
    /// and never quoted back: it may hold a password.
    pub(super) fn state(&mut self, at: WrittenIn<'_>, raw: &RawState) -> Option<StateConfig> {
        let mut ok = true;
        let redis = match (&raw.redis, &raw.redis_cluster) {
            (Some(url), None) => {
                let scheme_ok = ["redis://", "rediss://", "redis+unix://", "unix://"]
                    .into_iter()
                    .any(|scheme| starts_with(url, scheme));
                if !scheme_ok {
                    self.error(
                        at,
                        "state.redis",
                        "expected a Redis URL: redis://[[USER]:PASSWORD@]HOST[:PORT][/DB], or \
                         rediss://… for TLS",
                    );
                }
                scheme_ok.then(|| StateRedis::Server(url.clone()))
            }
            (None, Some(seeds)) => self.cluster(at, seeds).map(StateRedis::Cluster),
            (Some(_), Some(_)) => {
                self.error(
                    at,
                    "state.redisCluster",
                    "give either \"redis\" (one server) or \"redisCluster\" (some nodes of a \
                     Redis Cluster), not both",
                );
                None
            }
            (None, None) => {
                self.error(
                    at,
                    "state",
                    "name the Redis that keeps the state: \"redis\": \"redis://HOST:PORT/0\" for \
                     one server, or \"redisCluster\": [\"redis://HOST:PORT\", …] for some nodes of \
                     a Redis Cluster",
                );
                None
            }
        };
        ok &= redis.is_some();
        let tls = match &redis {
            Some(StateRedis::Server(url)) => starts_with(url, "rediss://"),
            Some(StateRedis::Cluster(seeds)) => seeds.iter().all(|s| starts_with(s, "rediss://")),
            None => true,
        };
        if raw.timeout_ms == Some(0) {
            ok = false;
            self.error(
                at,
                "state.timeoutMs",
                "must be more than 0: how long one Redis operation may take, in milliseconds",
            );
        }
        let on_failure = match (raw.on_failure, raw.hold_seconds) {
            (Some(RawOnFailure::FailClosed), hold) => OnFailure::FailClosed {
                hold: hold.map_or(DEFAULT_STATE_HOLD, Duration::from_secs),
            },
            (_, Some(_)) => {
                ok = false;
                self.error(
                    at,
                    "state.holdSeconds",
                    "applies only with \"onFailure\": \"fail-closed\"; remove it or set onFailure",
                );
                OnFailure::FailOpen
            }
            _ => OnFailure::FailOpen,
        };
        if raw.prefix.as_deref() == Some("") {
            ok = false;
            self.error(
                at,
                "state.prefix",
                "must not be empty: every key holdoff writes starts with it (default \"holdoff:\")",
            );
        }
        let ca = raw.ca_file.as_deref().and_then(|name| {
            if !tls {
                ok = false;
                self.error(
                    at,
                    "state.caFile",
                    "applies only to a rediss:// URL (Redis over TLS); remove it or use rediss://",
                );
                return None;
            }
            let path = at.dir.join(name);
            match fs::read(&path) {
                Ok(pem) if pem.windows(27).any(|w| w == b"-----BEGIN CERTIFICATE-----") => {
                    self.read(&path);
                    Some(pem)
                }
                Ok(_) => {
                    ok = false;
                    self.error(
                        at,
                        "state.caFile",
                        format!(
                            "{} holds no PEM certificate (-----BEGIN CERTIFICATE-----)",
                            path.display()
                        ),
                    );
                    None
                }
                Err(err) => {
                    ok = false;
                    self.error(
                        at,
                        "state.caFile",
                        format!("cannot read {}: {err}", path.display()),
                    );
                    None
                }
            }
        });
        let redis = redis?;
        ok.then(|| StateConfig {
            redis,
            prefix: raw
                .prefix
                .clone()
                .unwrap_or_else(|| DEFAULT_STATE_PREFIX.to_owned()),
            timeout: raw
                .timeout_ms
                .map_or(DEFAULT_STATE_TIMEOUT, Duration::from_millis),
            on_failure,
            ca,
        })
    }

    /// Checks `redisCluster`: some nodes of one cluster, reached by address, sharing their
    /// credentials and TLS, on database 0. No URL is quoted back: each may hold a password.
    fn cluster(&mut self, at: WrittenIn<'_>, seeds: &[String]) -> Option<Vec<String>> {
        if seeds.is_empty() {
            self.error(
                at,
                "state.redisCluster",
                "name at least one node of the cluster: [\"redis://HOST:PORT\", …]",
            );
            return None;
        }
        let mut ok = true;
        for (i, seed) in seeds.iter().enumerate() {
            let path = format!("state.redisCluster[{i}]");
            if !(starts_with(seed, "redis://") || starts_with(seed, "rediss://")) {
                ok = false;
                self.error(
                    at,
                    path,
                    "expected a node's URL: redis://[[USER]:PASSWORD@]HOST:PORT, or rediss://… \
                     for TLS (a cluster's nodes are reached by address: no Unix socket)",
                );
                continue;
            }
            if !matches!(database(seed), "" | "0") {
                ok = false;
                self.error(
                    at,
                    path,
                    "a Redis Cluster has database 0 only: end the URL at HOST:PORT or with /0",
                );
            }
        }
        if ok && !seeds.iter().all(|s| userinfo(s) == userinfo(&seeds[0])) {
            ok = false;
            self.error(
                at,
                "state.redisCluster",
                "every node must carry the same user and password (or none): the cluster's \
                 nodes share one",
            );
        }
        let tls = |s: &String| starts_with(s, "rediss://");
        if ok && seeds.iter().any(tls) && !seeds.iter().all(tls) {
            ok = false;
            self.error(
                at,
                "state.redisCluster",
                "every node must use rediss:// (TLS), or none: a cluster speaks TLS on all its \
                 nodes or on none",
            );
        }
        ok.then(|| seeds.to_vec())
    }
}

/// Whether `url` starts with `scheme`, in any case. By bytes, never by slicing the text: a
/// URL may start with any character.
fn starts_with(url: &str, scheme: &str) -> bool {
    url.len() > scheme.len()
        && url.as_bytes()[..scheme.len()].eq_ignore_ascii_case(scheme.as_bytes())
}

/// The authority of a `scheme://authority/path` URL, and what follows it.
fn authority(url: &str) -> (&str, &str) {
    let rest = url.split_once("://").map_or(url, |(_, rest)| rest);
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    rest.split_at(end)
}

/// The user information of a URL (before the authority's last `@`), empty if none.
fn userinfo(url: &str) -> &str {
    let (authority, _) = authority(url);
    authority.rfind('@').map_or("", |at| &authority[..at])
}

/// The database a URL's path names (`/3`: `3`), empty if none.
fn database(url: &str) -> &str {
    let (_, rest) = authority(url);
    let path = rest.split(['?', '#']).next().unwrap_or("");
    path.trim_start_matches('/')
}
