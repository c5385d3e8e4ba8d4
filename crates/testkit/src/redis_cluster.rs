//! [`RedisCluster`]: a real Redis Cluster of a test's own — three primaries, three
//! replicas — on free loopback ports.
//!
//! ```no_run
//! use holdoff_testkit::redis_cluster::RedisCluster;
//!
//! let mut cluster = RedisCluster::start();
//! let seeds = cluster.seeds(); // redis://127.0.0.1:<port> of each primary
//! let port = cluster.primary_of("some-key"); // the primary that serves the key
//! cluster.kill(port); // SIGKILL, as a crash
//! cluster.wait_until_served(); // a replica has taken over its slots
//! # drop(seeds);
//! ```
//!
//! [`RedisCluster::start_tls`] makes one whose nodes serve TLS, and talk TLS to each other
//! (the cluster bus and replication); its [`seeds`](RedisCluster::seeds) are `rediss://`.
//!
//! The nodes time each other out after 1 s (`cluster-node-timeout 1000`), and a replica
//! takes over however stale its data (`cluster-replica-validity-factor 0`), so a failover
//! takes about two seconds. Nothing is saved: each node's data and `nodes.conf` live in a
//! temporary directory. Every node is killed when the value is dropped.

use std::net::{Ipv4Addr, TcpListener};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use holdoff::clock::SystemClock;

/// How long the nodes wait before they call one that does not answer failed.
pub const NODE_TIMEOUT: Duration = Duration::from_millis(1000);

/// A Redis Cluster of this test's own: three primaries with a replica each, on loopback,
/// killed on drop.
#[derive(Debug)]
pub struct RedisCluster {
    nodes: Vec<Node>,
    _dir: tempfile::TempDir,
}

/// A node. `port` is plain TCP, for the test's own queries (and a node's name for
/// [`RedisCluster::kill`] and the like); a node with TLS serves clients on `tls_port` too,
/// and names the TLS ports of the others to a client that asks over TLS.
#[derive(Debug)]
struct Node {
    port: u16,
    tls_port: Option<u16>,
    child: Option<Child>,
}

/// The PEM a TLS cluster's nodes are given: the CA that issued their certificate, which
/// each also checks its peers' against.
struct Tls<'a> {
    ca_pem: &'a str,
    cert_pem: &'a str,
    key_pem: &'a str,
}

impl RedisCluster {
    /// Starts six `redis-server`s and makes them one cluster (`redis-cli --cluster
    /// create … --cluster-replicas 1`), and waits until it serves every slot.
    ///
    /// # Panics
    ///
    /// If `redis-server` or `redis-cli` is not installed, or the cluster does not form within
    /// about 30 seconds.
    pub fn start() -> RedisCluster {
        RedisCluster::start_with("redis-server")
    }

    /// As [`RedisCluster::start`], with another server that speaks the cluster protocol,
    /// e.g. `valkey-server` (`redis-cli` still creates the cluster).
    ///
    /// # Panics
    ///
    /// As [`RedisCluster::start`].
    pub fn start_with(server: &str) -> RedisCluster {
        RedisCluster::start_on(server, None)
    }

    /// As [`RedisCluster::start`], with nodes that serve TLS with this certificate chain and
    /// key, issued by the CA `ca_pem` (all PEM), and speak TLS to each other with them: on
    /// the cluster bus, where a peer always asks for a client certificate (so the
    /// certificate must be good for client authentication too: `TestCa::peer_leaf`), and
    /// for replication. Clients are not asked for one. [`RedisCluster::seeds`] are then
    /// `rediss://` URLs.
    ///
    /// # Panics
    ///
    /// As [`RedisCluster::start`], and if this `redis-server` was built without TLS.
    pub fn start_tls(ca_pem: &str, cert_pem: &str, key_pem: &str) -> RedisCluster {
        let tls = Tls {
            ca_pem,
            cert_pem,
            key_pem,
        };
        RedisCluster::start_on("redis-server", Some(&tls))
    }

    fn start_on(server: &str, tls: Option<&Tls<'_>>) -> RedisCluster {
        for _ in 0..5 {
            if let Some(cluster) = RedisCluster::try_start(server, tls) {
                return cluster;
            }
        }
        panic!("could not start a redis cluster on free loopback ports");
    }

    /// One attempt: `None` if a node could not take its port (someone took it in between).
    fn try_start(server: &str, tls: Option<&Tls<'_>>) -> Option<RedisCluster> {
        let dir = tempfile::tempdir().expect("temporary directory");
        // Every port at once, so that they differ: a client port and a bus port per node,
        // and a TLS port with TLS.
        let per_node = if tls.is_some() { 3 } else { 2 };
        let listeners: Vec<TcpListener> = (0..6 * per_node)
            .map(|_| TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).expect("free port"))
            .collect();
        let ports: Vec<u16> = listeners
            .iter()
            .map(|l| l.local_addr().expect("its address").port())
            .collect();
        drop(listeners);
        let mut cluster = RedisCluster {
            nodes: Vec::new(),
            _dir: dir,
        };
        let tls_args = tls.map(|tls| tls_args(cluster._dir.path(), tls));
        for ports in ports.chunks(per_node) {
            let (port, bus, tls_port) = (ports[0], ports[1], ports.get(2).copied());
            let data = cluster._dir.path().join(port.to_string());
            std::fs::create_dir(&data).expect("a node's directory");
            let child = Command::new(server)
                .args(["--bind", "127.0.0.1", "--port", &port.to_string()])
                .args([
                    "--cluster-enabled",
                    "yes",
                    "--cluster-port",
                    &bus.to_string(),
                ])
                .args([
                    "--cluster-node-timeout",
                    &NODE_TIMEOUT.as_millis().to_string(),
                ])
                .args(["--cluster-replica-validity-factor", "0"])
                .args(
                    tls_port
                        .map(|p| ["--tls-port".to_owned(), p.to_string()])
                        .into_iter()
                        .flatten(),
                )
                .args(tls_args.iter().flatten())
                .args(["--save", "", "--appendonly", "no"])
                .arg("--dir")
                .arg(&data)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap_or_else(|e| {
                    panic!("{server} is installed (scripts/test installs it): {e}")
                });
            cluster.nodes.push(Node {
                port,
                tls_port,
                child: Some(child),
            });
        }
        for node in &mut cluster.nodes {
            if !answers(node) {
                return None;
            }
        }
        let created = Command::new("redis-cli")
            .args(["--cluster", "create"])
            .args(
                cluster
                    .nodes
                    .iter()
                    .map(|n| format!("127.0.0.1:{}", n.port)),
            )
            .args(["--cluster-replicas", "1", "--cluster-yes"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .expect("redis-cli is installed (scripts/test installs it)");
        assert!(created.success(), "redis-cli --cluster create failed");
        cluster.wait_until_served();
        Some(cluster)
    }

    /// `redis://127.0.0.1:<port>` of each node running, primaries and replicas, or
    /// `rediss://127.0.0.1:<TLS port>` with TLS: the seeds to give a client.
    pub fn seeds(&self) -> Vec<String> {
        self.nodes
            .iter()
            .filter(|n| n.child.is_some())
            .map(|n| match n.tls_port {
                Some(port) => format!("rediss://127.0.0.1:{port}"),
                None => format!("redis://127.0.0.1:{}", n.port),
            })
            .collect()
    }

    /// The ports of the nodes that are primaries now, as a running node sees them.
    pub fn primaries(&self) -> Vec<u16> {
        let mut primaries: Vec<u16> = slots(&self.query(redis::cmd("CLUSTER").arg("SLOTS")))
            .into_iter()
            .map(|(_, _, port)| port)
            .collect();
        primaries.sort_unstable();
        primaries.dedup();
        primaries
    }

    /// The port of the primary that serves `key` now.
    ///
    /// # Panics
    ///
    /// If no node runs, or no primary serves the key's slot.
    pub fn primary_of(&self, key: &str) -> u16 {
        let slot: i64 = self.query(redis::cmd("CLUSTER").arg("KEYSLOT").arg(key));
        slots(&self.query(redis::cmd("CLUSTER").arg("SLOTS")))
            .into_iter()
            .find(|&(start, end, _)| (start..=end).contains(&slot))
            .map(|(_, _, port)| port)
            .unwrap_or_else(|| panic!("no primary serves slot {slot}"))
    }

    /// A plain connection to the node on `port`, for looking at what a test left there.
    ///
    /// # Panics
    ///
    /// If it cannot be reached.
    pub fn node(&self, port: u16) -> redis::Connection {
        redis::Client::open(format!("redis://127.0.0.1:{port}"))
            .expect("a node's URL")
            .get_connection_with_timeout(Duration::from_secs(5))
            .unwrap_or_else(|e| panic!("connect to the node on {port}: {e}"))
    }

    /// Kills the node on `port` (`SIGKILL`), as a crash would.
    ///
    /// # Panics
    ///
    /// If no node of this cluster listens on `port`.
    pub fn kill(&mut self, port: u16) {
        let node = (self.nodes.iter_mut())
            .find(|n| n.port == port)
            .unwrap_or_else(|| panic!("no node of this cluster on port {port}"));
        if let Some(mut child) = node.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Waits until every slot is served by a running primary and every running node says
    /// the cluster is `ok`: after [`RedisCluster::start`], or after a primary was killed and
    /// its replica has taken over.
    ///
    /// # Panics
    ///
    /// If that takes more than 30 seconds.
    pub fn wait_until_served(&self) {
        let started = SystemClock.now();
        while SystemClock.now() - started < Duration::from_secs(30) {
            if self.served() {
                return;
            }
            SystemClock.block_for(Duration::from_millis(50));
        }
        panic!("the redis cluster did not serve every slot within 30 s");
    }

    /// Whether every slot is served by a running primary, all of them agreeing, and every
    /// running node says the cluster is `ok`.
    fn served(&self) -> bool {
        let running: Vec<u16> = (self.nodes.iter())
            .filter(|n| n.child.is_some())
            .map(|n| n.port)
            .collect();
        let mut views = Vec::new();
        for &port in &running {
            let Ok(mut connection) = redis::Client::open(format!("redis://127.0.0.1:{port}"))
                .and_then(|c| c.get_connection_with_timeout(Duration::from_secs(1)))
            else {
                return false;
            };
            let info: String = match redis::cmd("CLUSTER").arg("INFO").query(&mut connection) {
                Ok(info) => info,
                Err(_) => return false,
            };
            if !info.lines().any(|l| l.trim() == "cluster_state:ok") {
                return false;
            }
            let Ok(reply) = redis::cmd("CLUSTER")
                .arg("SLOTS")
                .query::<redis::Value>(&mut connection)
            else {
                return false;
            };
            let mut view = slots(&reply);
            view.sort_unstable();
            let covered: i64 = view.iter().map(|(s, e, _)| e - s + 1).sum();
            if covered != 16384 || view.iter().any(|(_, _, p)| !running.contains(p)) {
                return false;
            }
            views.push(view);
        }
        views.windows(2).all(|w| w[0] == w[1])
    }

    /// Starts moving the slot of `key` to the primary on `to`, as `redis-cli --cluster
    /// reshard` does, one step at a time: the slot is marked importing there and migrating
    /// where it is. Until [`Migration::move_keys`], its keys stay where they are; from then
    /// until [`Migration::finish`], the old primary answers `ASK` for them.
    ///
    /// # Panics
    ///
    /// If a node refuses a step (`to` is not a primary, or already serves the slot).
    pub fn migrate(&self, key: &str, to: u16) -> Migration<'_> {
        let slot: i64 = self.query(redis::cmd("CLUSTER").arg("KEYSLOT").arg(key));
        let from = self.primary_of(key);
        let id = |port: u16| -> String {
            (redis::cmd("CLUSTER")
                .arg("MYID")
                .query(&mut self.node(port)))
            .unwrap_or_else(|e| panic!("CLUSTER MYID on {port}: {e}"))
        };
        let (from_id, to_id) = (id(from), id(to));
        let setslot = |port: u16, state: &str, node: &str| {
            redis::cmd("CLUSTER")
                .arg("SETSLOT")
                .arg(slot)
                .arg(state)
                .arg(node)
                .exec(&mut self.node(port))
                .unwrap_or_else(|e| panic!("CLUSTER SETSLOT {slot} {state} on {port}: {e}"));
        };
        setslot(to, "IMPORTING", &from_id);
        setslot(from, "MIGRATING", &to_id);
        Migration {
            cluster: self,
            slot,
            from,
            to,
            to_id,
        }
    }

    /// Waits until every running replica has applied all that its primary wrote, so that a
    /// primary killed next loses nothing: Redis replicates asynchronously, and a write it
    /// acknowledged a moment before a crash may be gone after the failover.
    ///
    /// # Panics
    ///
    /// If that takes more than 10 seconds.
    pub fn wait_until_replicated(&self) {
        let started = SystemClock.now();
        while SystemClock.now() - started < Duration::from_secs(10) {
            if self.replicated() {
                return;
            }
            SystemClock.block_for(Duration::from_millis(20));
        }
        panic!("the redis cluster's replicas did not catch up within 10 s");
    }

    /// Whether every running replica's offset has reached its primary's.
    fn replicated(&self) -> bool {
        let mut primaries = Vec::new();
        let mut replicas = Vec::new();
        for node in self.nodes.iter().filter(|n| n.child.is_some()) {
            let info: String = match redis::cmd("INFO")
                .arg("replication")
                .query(&mut self.node(node.port))
            {
                Ok(info) => info,
                Err(_) => return false,
            };
            let field = |name: &str| {
                info.lines()
                    .find_map(|l| l.trim().strip_prefix(name)?.strip_prefix(':'))
                    .and_then(|v| v.parse::<u64>().ok())
            };
            if info.contains("role:master") {
                primaries.push((node, field("master_repl_offset")));
            } else {
                replicas.push((field("master_port"), field("slave_repl_offset")));
            }
        }
        replicas.iter().all(|&(primary, offset)| {
            // A replica names its primary by the port it replicates from: the TLS one with
            // TLS.
            let primary = primaries.iter().find(|(node, _)| {
                let port = node.tls_port.unwrap_or(node.port);
                Some(u64::from(port)) == primary
            });
            matches!((primary, offset), (Some((_, Some(want))), Some(have)) if have >= *want)
        })
    }

    /// `command`'s answer from the first node that runs.
    fn query<T: redis::FromRedisValue>(&self, command: &mut redis::Cmd) -> T {
        let port = (self.nodes.iter())
            .find(|n| n.child.is_some())
            .expect("a node that runs")
            .port;
        command
            .query(&mut self.node(port))
            .unwrap_or_else(|e| panic!("ask the node on {port}: {e}"))
    }
}

/// A slot on its way from one primary to another: see [`RedisCluster::migrate`].
#[derive(Debug)]
pub struct Migration<'a> {
    cluster: &'a RedisCluster,
    slot: i64,
    from: u16,
    to: u16,
    to_id: String,
}

impl Migration<'_> {
    /// Moves every key of the slot to the new primary (`MIGRATE`): the old one answers `ASK`
    /// for them from now on.
    ///
    /// # Panics
    ///
    /// If a node refuses.
    pub fn move_keys(&self) {
        let mut from = self.cluster.node(self.from);
        let keys: Vec<String> = redis::cmd("CLUSTER")
            .arg("GETKEYSINSLOT")
            .arg(self.slot)
            .arg(1000)
            .query(&mut from)
            .unwrap_or_else(|e| panic!("CLUSTER GETKEYSINSLOT {}: {e}", self.slot));
        if keys.is_empty() {
            return;
        }
        redis::cmd("MIGRATE")
            .arg("127.0.0.1")
            .arg(self.to)
            .arg("")
            .arg(0)
            .arg(5000)
            .arg("KEYS")
            .arg(&keys)
            .exec(&mut from)
            .unwrap_or_else(|e| panic!("MIGRATE to {}: {e}", self.to));
    }

    /// Gives the slot to the new primary, on it first, then on every other primary (the
    /// replicas learn it from them): they answer `MOVED` for it from now on. Returns once
    /// every node agrees.
    ///
    /// # Panics
    ///
    /// If a node refuses, or the nodes do not agree within 30 seconds.
    pub fn finish(self) {
        let mut primaries = self.cluster.primaries();
        primaries.retain(|&p| p != self.to);
        primaries.insert(0, self.to);
        for port in primaries {
            redis::cmd("CLUSTER")
                .arg("SETSLOT")
                .arg(self.slot)
                .arg("NODE")
                .arg(&self.to_id)
                .exec(&mut self.cluster.node(port))
                .unwrap_or_else(|e| panic!("CLUSTER SETSLOT NODE on {port}: {e}"));
        }
        self.cluster.wait_until_served();
    }
}

impl Drop for RedisCluster {
    fn drop(&mut self) {
        for node in &mut self.nodes {
            if let Some(mut child) = node.child.take() {
                let _ = child.kill();
                let _ = child.wait();
            }
        }
    }
}

/// A TLS node's options, its PEM files written in `dir`.
fn tls_args(dir: &std::path::Path, tls: &Tls<'_>) -> Vec<String> {
    let file = |name: &str, pem: &str| {
        let path = dir.join(name);
        std::fs::write(&path, pem).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
        path.display().to_string()
    };
    let (ca, cert, key) = (
        file("ca.pem", tls.ca_pem),
        file("node.crt", tls.cert_pem),
        file("node.key", tls.key_pem),
    );
    [
        ("--tls-cluster", "yes".to_owned()),
        ("--tls-replication", "yes".to_owned()),
        ("--tls-cert-file", cert),
        ("--tls-key-file", key),
        ("--tls-ca-cert-file", ca),
        ("--tls-auth-clients", "no".to_owned()),
    ]
    .into_iter()
    .flat_map(|(name, value)| [name.to_owned(), value])
    .collect()
}

/// Whether the node answers `PING` within about 10 seconds; false (and reaped) if it exited
/// (its port was taken).
fn answers(node: &mut Node) -> bool {
    let started = SystemClock.now();
    while SystemClock.now() - started < Duration::from_secs(10) {
        let Some(child) = node.child.as_mut() else {
            return false;
        };
        if child.try_wait().ok().flatten().is_some() {
            node.child = None;
            return false;
        }
        let pong = redis::Client::open(format!("redis://127.0.0.1:{}", node.port))
            .and_then(|c| c.get_connection_with_timeout(Duration::from_millis(200)))
            .and_then(|mut c| redis::cmd("PING").query::<String>(&mut c));
        if pong.is_ok() {
            return true;
        }
        SystemClock.block_for(Duration::from_millis(20));
    }
    false
}

/// The slot ranges of a `CLUSTER SLOTS` answer: (first, last, port of the primary).
fn slots(reply: &redis::Value) -> Vec<(i64, i64, u16)> {
    let redis::Value::Array(ranges) = reply else {
        return Vec::new();
    };
    ranges
        .iter()
        .filter_map(|range| {
            let redis::Value::Array(range) = range else {
                return None;
            };
            let (redis::Value::Int(start), redis::Value::Int(end)) =
                (range.first()?, range.get(1)?)
            else {
                return None;
            };
            let redis::Value::Array(primary) = range.get(2)? else {
                return None;
            };
            let redis::Value::Int(port) = primary.get(1)? else {
                return None;
            };
            Some((*start, *end, u16::try_from(*port).ok()?))
        })
        .collect()
}
