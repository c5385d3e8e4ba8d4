//! Whole seconds, as headers carry them.

use std::time::Duration;

/// Whole seconds, rounded up: a wait sent to a client is never shorter than the real one.
pub(crate) fn ceil_secs(wait: Duration) -> u64 {
    wait.as_secs() + u64::from(wait.subsec_nanos() > 0)
}
