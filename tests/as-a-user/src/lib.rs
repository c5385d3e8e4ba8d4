//! The crates' READMEs, compiled as a user who copied them would compile them (`cargo test
//! --doc`; their examples are `no_run`: they name public hosts), and, in
//! `tests/scenarios.rs`, the published API driven against a local server.

// The workspace's README: its library example is a whole program, compiled as written.
#[doc = include_str!("../../../README.md")]
pub mod readme {}

#[doc = include_str!("../../../crates/holdoff/README.md")]
pub mod holdoff_readme {}

#[doc = include_str!("../../../crates/holdoff-reqwest/README.md")]
pub mod holdoff_reqwest_readme {}

#[doc = include_str!("../../../crates/holdoff-tower/README.md")]
pub mod holdoff_tower_readme {}

#[doc = include_str!("../../../crates/holdoff-redis/README.md")]
pub mod holdoff_redis_readme {}
