//! Nothing but tests: `tests/scenarios.rs` drives the published API against a local server.
