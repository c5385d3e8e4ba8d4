//! Faults the proxy injects: error responses, rate limiting, latency, mocks and network
//! faults, compiled into a [`FaultPlan`](plan::FaultPlan) and run by [`FaultStage`].

pub mod auth;
mod body;
pub mod crud;
pub mod error;
pub mod plan;
pub mod ratelimit;
pub mod rng;
pub mod stage;
pub mod tokens;
mod usage;

pub use stage::{FaultCounts, FaultStage};
