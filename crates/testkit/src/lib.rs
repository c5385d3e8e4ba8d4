//! Test fixtures for holdoff: a scripted HTTP upstream on loopback, a real `redis-server`
//! ([`redis::RedisServer`]) or Redis Cluster ([`redis_cluster::RedisCluster`]), the one
//! test PKI ([`tls::TestCa`]), temporary directories ([`TempDir`]) and the one counting
//! allocator ([`heap::Counting`]).
//!
//! [`TestServer`] is a real HTTP/1.1 server (hyper) on `127.0.0.1`, on a port the OS picks.
//! A test scripts what each path answers — a `429` with `Retry-After`, a `503` with a skewed
//! `Date`, an OpenAI quota error, a connection reset — points the client under test at it,
//! and then reads back every request the server received and when it arrived.
//!
//! ```
//! use bytes::Bytes;
//! use holdoff_testkit::{Reply, TestServer};
//! use http_body_util::{BodyExt, Empty};
//! use hyper_util::client::legacy::Client;
//! use hyper_util::rt::TokioExecutor;
//!
//! #[tokio::main(flavor = "current_thread")]
//! async fn main() -> Result<(), Box<dyn std::error::Error>> {
//!     let server = TestServer::start().await;
//!     server.script("/v1/chat", [Reply::too_many_requests("2"), Reply::ok("done")]);
//!
//!     let client = Client::builder(TokioExecutor::new()).build_http::<Empty<Bytes>>();
//!     let first = client.get(server.url("/v1/chat").parse()?).await?;
//!     assert_eq!(first.status(), 429);
//!     assert_eq!(first.headers()["retry-after"], "2");
//!     let second = client.get(server.url("/v1/chat").parse()?).await?;
//!     assert_eq!(second.into_body().collect().await?.to_bytes(), "done");
//!
//!     let seen = server.requests_to("/v1/chat");
//!     assert_eq!(seen.len(), 2);
//!     assert!(seen[1].at >= seen[0].at);
//!     server.shutdown().await;
//!     Ok(())
//! }
//! ```
//!
//! # Time
//!
//! The server reads one [`Clock`](holdoff::clock::Clock): for each request's arrival
//! ([`Recorded::at`] and [`Recorded::wall`], read when the header section has been parsed),
//! for [`Reply::delay`] and for [`Reply::date_now`]. By default it is
//! [`TokioClock`](holdoff::clock::TokioClock), so under tokio's paused time
//! (`#[tokio::test(start_paused = true)]`) arrivals are virtual instants and delays take no
//! real time; [`TestServer::start_with_clock`] shares a
//! [`ManualClock`](holdoff::clock::ManualClock) with the client under test instead.
//! Nothing else about a response depends on time: the server adds no `Date` header of its
//! own.
//!
//! # Faults
//!
//! Besides responses, a script can [reset](Reply::reset) the connection without answering,
//! or [delay](Reply::delay) an answer, for ever if need be, to exercise a client's timeouts.
//! Bad requests never panic the server: hyper answers malformed ones with `400` and closes
//! the connection, and a body broken off mid-way is recorded as
//! [incomplete](Recorded::body_complete).
//!
//! # Shutdown
//!
//! [`TestServer::shutdown`] stops accepting, ends delays and requests still arriving, lets
//! responses being written finish, and waits until every connection is closed. Dropping the
//! server starts the same shutdown in the background.
// Denied, not forbidden: `heap` implements a counting global allocator, which is `unsafe impl`.
#![deny(unsafe_code)]
#![deny(missing_docs)]

mod dir;
pub mod heap;
pub mod layers;
mod recorded;
pub mod redis;
pub mod redis_cluster;
mod reply;
mod server;
mod socket;
pub mod tls;

pub use dir::TempDir;
pub use recorded::Recorded;
pub use reply::Reply;
pub use server::TestServer;
