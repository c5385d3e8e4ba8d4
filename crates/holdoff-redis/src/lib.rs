//! Redis-backed state for holdoff: a gate that a fleet of processes shares, and the state
//! that replicas of the proxy share.
//!
//! Many workers behind one API quota must respect one server's `Retry-After` together: when
//! any of them learns "not before T", all of them wait. [`RedisGate`] is a
//! [`GateStore`](holdoff::gate::GateStore) that keeps T in Redis, so a
//! [`Gate`](holdoff::gate::Gate) over it works across processes without changing callers.
//!
//! With the `proxy` feature, `RedisState` is a `holdoff_proxy::shared::SharedState` in
//! Redis: the judge's open windows and the rate limiters' counters, shared by proxy replicas
//! in front of one API, each operation one atomic script on Redis's clock.
//!
//! ```no_run
//! use std::sync::Arc;
//! use holdoff_redis::holdoff::gate::Gate;
//! use holdoff_redis::{FailureMode, RedisGate};
//! use std::time::Duration;
//!
//! # async fn example() -> Result<(), holdoff_redis::Error> {
//! let store = RedisGate::builder("redis://127.0.0.1:6379/0")
//!     .prefix("myapp:gate:")
//!     .timeout(Duration::from_millis(200))
//!     .on_failure(FailureMode::FailClosed { hold: Duration::from_secs(1) })
//!     .build()?;
//! let gate = Arc::new(Gate::new(store));
//! // Share `gate` with a `holdoff::retry::Retrier`, a tower policy or the reqwest middleware.
//! # Ok(()) }
//! ```
//!
//! # Redis Cluster and Valkey
//!
//! Both stores also run on a Redis Cluster (or a Valkey cluster): build them with
//! [`RedisGate::cluster_builder`] or `RedisState::cluster_builder`, naming a few of its nodes.
//! Every script touches one key, so each operation runs on the one primary that serves the
//! key's slot, and keys spread over every primary; the client follows `MOVED` and `ASK`
//! while slots move, and learns the slots anew when a replica takes over from a failed
//! primary. A key's slot served by no one (a primary down, before its replica takes over)
//! is a failure like an unreachable server: the circuit opens, and the probe closes it once
//! every primary answers and says every slot is served (`CLUSTER INFO`), so that one
//! failover costs one line each way.
//!
//! The `redis` client logs through the `log` crate, at `warn`, every failed attempt to reach
//! a node: while a primary is down, hundreds a second. An application that forwards `log` to
//! its own logger may want the `redis` target at `error` or off; the breaker's two lines say
//! what matters.
//!
//! # Time
//!
//! Redis holds wall-clock milliseconds; each process turns them into an instant on its own
//! monotonic clock when it reads them (see [`RedisGate`]), and [`RedisGate::skew`] reports
//! how far its wall clock is from Redis's. `RedisState` reads no process's clock: its
//! scripts read Redis's `TIME`, and it answers in durations.
//!
//! # Failures
//!
//! Every operation is bounded by a timeout, and both stores sit behind a circuit breaker:
//! after one operation times out or cannot reach Redis, the next ones do not wait for it.
//! They fail at once ([`ErrorKind::CircuitOpen`]) while a task in the background sends
//! `PING` — 250 ms after the failure, then at intervals doubling up to 5 s, each within the
//! same timeout — and the first answer closes the circuit again. One `warn` line says when
//! it opened and why, and one line when it closed and after how long (`info` for the gate;
//! `warn` for `RedisState`, so that a proxy logging at `warn` shows both).
//!
//! Meanwhile the gate answers by its [`FailureMode`] (this process's own state, or every key
//! closed), and `RedisState` returns the error for the proxy's `SharedStore` to answer by its
//! own failure mode (this replica's own state, or `503`). Both count failures and reconnect
//! by themselves.
//!
//! # Features
//!
//! - `tls`: `rediss://` URLs, through rustls, verified against the platform's root
//!   certificates or a CA of your own (`root_ca` on either builder); a cluster's nodes too.
//! - `proxy` (off by default): `RedisState`, with a dependency on `holdoff-proxy`.

#![deny(missing_docs)]
#![forbid(unsafe_code)]
#![cfg_attr(docsrs, feature(doc_cfg))]

mod breaker;
mod connection;
mod error;
mod gate;
#[cfg(feature = "proxy")]
mod state;
mod url;

pub use error::{Error, ErrorKind};
pub use gate::{FailureMode, RedisGate, RedisGateBuilder};
/// The core crate, so that one dependency is enough.
pub use holdoff;
#[cfg(feature = "proxy")]
#[cfg_attr(docsrs, doc(cfg(feature = "proxy")))]
pub use state::{RedisState, RedisStateBuilder};
pub use url::redact as redacted_url;
