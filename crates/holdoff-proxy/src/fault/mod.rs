//! Faults the proxy injects: rate limiting (and, next, error responses, latency, mocks and
//! network faults).

pub mod error;
pub mod plan;
pub mod ratelimit;
pub mod stage;
