//! Where a store's Redis is — one server, or a Redis Cluster reached through seed nodes — and
//! a connection to either that commands and scripts run on alike.

use std::time::Duration;

use redis::aio::{ConnectionLike, ConnectionManager};
use redis::cluster::{ClusterClient, ClusterClientBuilder};
use redis::cluster_async::ClusterConnection;
use redis::cluster_routing::{RoutingInfo, SingleNodeRoutingInfo};
use redis::{Cmd, IntoConnectionInfo, RedisFuture, RedisResult, Value};

use crate::error::{Error, ErrorKind};
use crate::url::{client, manager, redact};

/// The Redis a builder was given: one server's URL, or a cluster's seed nodes.
#[derive(Clone)]
pub(crate) enum Nodes {
    /// `redis://…` of one server.
    Server(String),
    /// `redis://…` of some nodes of one cluster; the client finds the others.
    Cluster(Vec<String>),
}

impl Nodes {
    /// For logs and `Debug`: the URL with its password hidden, or the seeds' URLs so,
    /// separated by commas and followed by ` (cluster)`.
    pub(crate) fn redacted(&self) -> String {
        match self {
            Nodes::Server(url) => redact(url),
            Nodes::Cluster(seeds) => {
                let seeds: Vec<String> = seeds.iter().map(|s| redact(s)).collect();
                format!("{} (cluster)", seeds.join(","))
            }
        }
    }

    /// The client for these nodes, verifying `rediss://` against `root_ca` (PEM) if given;
    /// a cluster's answers each bounded by `timeout`.
    pub(crate) fn client(
        &self,
        timeout: Duration,
        root_ca: Option<&[u8]>,
    ) -> Result<Client, Error> {
        match self {
            Nodes::Server(url) => Ok(Client::Server(client(url, root_ca)?)),
            Nodes::Cluster(seeds) => cluster_client(seeds, timeout, root_ca).map(Client::Cluster),
        }
    }
}

/// A client that makes [`Connection`]s.
#[derive(Clone)]
pub(crate) enum Client {
    Server(redis::Client),
    Cluster(ClusterClient),
}

impl Client {
    /// A connection that connects on first use, not here, and reconnects by itself; its
    /// driver runs on the current tokio runtime.
    pub(crate) fn connect(&self, timeout: Duration) -> Result<Connection, Error> {
        Ok(match self {
            Client::Server(client) => Connection::Server(manager(client.clone(), timeout)?),
            Client::Cluster(client) => {
                let config = redis::cluster::ClusterConfig::new()
                    .set_connection_timeout(timeout)
                    .set_response_timeout(timeout);
                Connection::Cluster(client.get_pending_async_connection_with_config(config))
            }
        })
    }

    /// Whether it reaches a cluster.
    #[cfg(feature = "proxy")]
    pub(crate) fn is_cluster(&self) -> bool {
        matches!(self, Client::Cluster(_))
    }
}

/// A connection to one server, or to every node of a cluster that it needs (following
/// `MOVED` and `ASK`, and learning the slots anew when they move).
#[derive(Clone)]
pub(crate) enum Connection {
    Server(ConnectionManager),
    Cluster(ClusterConnection),
}

impl ConnectionLike for Connection {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            Connection::Server(c) => c.req_packed_command(cmd),
            Connection::Cluster(c) => c.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        cmd: &'a redis::Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            Connection::Server(c) => c.req_packed_commands(cmd, offset, count),
            Connection::Cluster(c) => c.req_packed_commands(cmd, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Connection::Server(c) => c.get_db(),
            Connection::Cluster(c) => c.get_db(),
        }
    }
}

impl Connection {
    /// Whether Redis can serve every key again, for the circuit breaker's probe: one server
    /// answers `PING`; in a cluster, every primary that `CLUSTER SLOTS` names answers, and
    /// each says the cluster is `ok` (every slot served).
    ///
    /// A cluster's `PING` alone would not do: the client sends it to the primaries it holds a
    /// connection to, and a dead primary's connection is gone, so it would pass while that
    /// primary's slots are still served by no one.
    pub(crate) async fn probe(&mut self) -> RedisResult<()> {
        let cluster = match self {
            Connection::Server(c) => return redis::cmd("PING").query_async(c).await,
            Connection::Cluster(c) => c,
        };
        let slots = cluster
            .route_command(
                redis::cmd("CLUSTER").arg("SLOTS").clone(),
                RoutingInfo::SingleNode(SingleNodeRoutingInfo::Random),
            )
            .await?;
        let primaries = primaries(&slots).ok_or_else(|| {
            redis::RedisError::from((
                redis::ErrorKind::UnexpectedReturnType,
                "CLUSTER SLOTS answered with something else than slot ranges",
            ))
        })?;
        for (host, port) in primaries {
            let info = cluster
                .route_command(
                    redis::cmd("CLUSTER").arg("INFO").clone(),
                    RoutingInfo::SingleNode(SingleNodeRoutingInfo::ByAddress {
                        host: host.clone(),
                        port,
                    }),
                )
                .await?;
            let info: String = redis::FromRedisValue::from_redis_value(info)?;
            if !info.lines().any(|line| line.trim() == "cluster_state:ok") {
                return Err(redis::RedisError::from((
                    redis::ErrorKind::Server(redis::ServerErrorKind::ClusterDown),
                    "a primary says some slots are served by no one",
                    format!("{host}:{port}"),
                )));
            }
        }
        Ok(())
    }
}

/// A Lua script on one key, run by the node that serves the key.
pub(crate) struct Lua {
    /// Its SHA-1, as `EVALSHA` takes it.
    hash: String,
    code: String,
}

impl Lua {
    pub(crate) fn new(code: String) -> Lua {
        Lua {
            hash: redis::Script::new(&code).get_hash().to_owned(),
            code,
        }
    }

    /// Runs it on `key` with `args`: by its hash (`EVALSHA`), or, on a node that has not
    /// seen it yet (`NOSCRIPT`: a server just restarted, a replica just promoted), by its
    /// text (`EVAL`), which leaves it in that node's cache. Both go to the one node that
    /// serves the key — unlike `SCRIPT LOAD`, which a cluster client sends to every node it
    /// knows, and which can miss a primary promoted a moment ago.
    pub(crate) async fn run<T: redis::FromRedisValue>(
        &self,
        connection: &mut Connection,
        key: &str,
        args: &[&str],
    ) -> RedisResult<T> {
        let by_hash = redis::cmd("EVALSHA")
            .arg(&self.hash)
            .arg(1)
            .arg(key)
            .arg(args)
            .query_async(connection)
            .await;
        match by_hash {
            Err(error)
                if error.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::NoScript) =>
            {
                redis::cmd("EVAL")
                    .arg(&self.code)
                    .arg(1)
                    .arg(key)
                    .arg(args)
                    .query_async(connection)
                    .await
            }
            other => other,
        }
    }
}

/// The primaries (host, port) a `CLUSTER SLOTS` reply names, each once, in order; `None` if
/// it is not such a reply or names none.
fn primaries(reply: &Value) -> Option<Vec<(String, u16)>> {
    let Value::Array(ranges) = reply else {
        return None;
    };
    let mut primaries: Vec<(String, u16)> = Vec::new();
    for range in ranges {
        let Value::Array(range) = range else {
            return None;
        };
        let Some(Value::Array(primary)) = range.get(2) else {
            return None;
        };
        let host = match primary.first()? {
            Value::BulkString(bytes) => String::from_utf8(bytes.clone()).ok()?,
            Value::SimpleString(text) => text.clone(),
            _ => return None,
        };
        let Value::Int(port) = primary.get(1)? else {
            return None;
        };
        let primary = (host, u16::try_from(*port).ok()?);
        if !primaries.contains(&primary) {
            primaries.push(primary);
        }
    }
    (!primaries.is_empty()).then_some(primaries)
}

/// A client for the cluster that `seeds` belong to: connecting and each answer bounded by
/// `timeout`, a few quick retries (the caller's timeout bounds the whole operation anyway).
fn cluster_client(
    seeds: &[String],
    timeout: Duration,
    root_ca: Option<&[u8]>,
) -> Result<ClusterClient, Error> {
    // The client's own errors may quote a URL, password included: none is passed on.
    let mut infos = Vec::with_capacity(seeds.len());
    for seed in seeds {
        let info = seed
            .as_str()
            .into_connection_info()
            .map_err(|_| Error::new(ErrorKind::InvalidUrl))?;
        // A cluster has database 0 only, and its nodes are found by address.
        if info.redis_settings().db() != 0 || matches!(info.addr(), redis::ConnectionAddr::Unix(_))
        {
            return Err(Error::new(ErrorKind::InvalidUrl));
        }
        infos.push(info);
    }
    if infos.is_empty() {
        return Err(Error::new(ErrorKind::InvalidUrl));
    }
    let builder = ClusterClientBuilder::new(infos)
        .connection_timeout(timeout)
        .response_timeout(timeout)
        // A redirection is followed at once; these waits are for TRYAGAIN, CLUSTERDOWN and a
        // node that cannot be reached, short enough for a few within one timeout.
        .retries(4)
        .min_retry_wait(10)
        .max_retry_wait(100);
    let builder = match root_ca {
        #[cfg(feature = "tls")]
        Some(pem) => {
            crate::url::check_ca(pem)?;
            builder.certs(redis::TlsCertificates {
                client_tls: None,
                root_cert: Some(pem.to_vec()),
            })
        }
        _ => builder,
    };
    // Seeds with different passwords, or some over TLS and some not, are refused here.
    builder
        .build()
        .map_err(|_| Error::new(ErrorKind::InvalidUrl))
}

#[cfg(test)]
mod tests {
    mod primaries {
        use redis::Value;

        use super::super::primaries;

        fn range(start: i64, end: i64, host: &str, port: i64) -> Value {
            Value::Array(vec![
                Value::Int(start),
                Value::Int(end),
                Value::Array(vec![
                    Value::BulkString(host.as_bytes().to_vec()),
                    Value::Int(port),
                    Value::BulkString(b"id".to_vec()),
                ]),
                Value::Array(vec![
                    Value::BulkString(b"127.0.0.1".to_vec()),
                    Value::Int(7004),
                ]),
            ])
        }

        #[test]
        fn names_each_primary_once() {
            let reply = Value::Array(vec![
                range(0, 5460, "127.0.0.1", 7000),
                range(5461, 10922, "127.0.0.1", 7001),
                range(10923, 12000, "127.0.0.1", 7002),
                range(12001, 16383, "127.0.0.1", 7000),
            ]);
            assert_eq!(
                primaries(&reply),
                Some(vec![
                    ("127.0.0.1".to_owned(), 7000),
                    ("127.0.0.1".to_owned(), 7001),
                    ("127.0.0.1".to_owned(), 7002),
                ])
            );
        }

        #[test]
        fn is_none_for_anything_else() {
            assert_eq!(primaries(&Value::Nil), None);
            assert_eq!(primaries(&Value::Array(vec![])), None);
            assert_eq!(
                primaries(&Value::Array(vec![Value::Array(vec![Value::Int(0)])])),
                None
            );
        }
    }
}
