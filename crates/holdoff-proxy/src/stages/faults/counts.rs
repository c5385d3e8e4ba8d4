//! What the fault stage counts: a [`FaultCounts`] of every kind of fault it injects.

use std::sync::atomic::{AtomicU64, Ordering};

/// How many faults a [`FaultStage`](super::FaultStage) has injected, by kind.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(default)]
#[non_exhaustive]
pub struct FaultCounts {
    /// Error responses from error rules, `502`s to unmocked requests when blocking, and `401`s
    /// to requests without an allowed API key.
    pub errors: u64,
    /// Requests refused by a rate limit.
    pub rate_limited: u64,
    /// Requests a mock answered (with a response or a network fault).
    pub mocked: u64,
    /// Requests delayed by a latency fault.
    pub delayed: u64,
    /// Requests dropped without an answer (connection reset).
    pub resets: u64,
    /// Requests held without an answer.
    pub hangs: u64,
    /// Responses cut short.
    pub truncated: u64,
    /// Responses slowed down.
    pub slowed: u64,
    /// Language-model calls forwarded with an instruction to fail. Left out of JSON when 0,
    /// so that event logs and reports from runs without any read as before.
    #[serde(skip_serializing_if = "is_zero")]
    pub llm_failures: u64,
}

fn is_zero(count: &u64) -> bool {
    *count == 0
}

/// The kinds of fault, as logged (`kind`) and counted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Kind {
    Error,
    Unauthorized,
    Blocked,
    RateLimited,
    Mocked,
    Delayed,
    Reset,
    Hang,
    Truncate,
    Slow,
    LlmFailure,
}

impl Kind {
    pub(super) fn as_str(self) -> &'static str {
        match self {
            Kind::Error => "error",
            Kind::Unauthorized => "unauthorized",
            Kind::Blocked => "blocked",
            Kind::RateLimited => "rate_limited",
            Kind::Mocked => "mock",
            Kind::Delayed => "latency",
            Kind::Reset => "reset",
            Kind::Hang => "hang",
            Kind::Truncate => "truncate",
            Kind::Slow => "slow_body",
            Kind::LlmFailure => "llm_failure",
        }
    }
}

/// The running counts, one named counter per field of [`FaultCounts`].
#[derive(Debug, Default)]
pub(super) struct Counters {
    errors: AtomicU64,
    rate_limited: AtomicU64,
    mocked: AtomicU64,
    delayed: AtomicU64,
    resets: AtomicU64,
    hangs: AtomicU64,
    truncated: AtomicU64,
    slowed: AtomicU64,
    llm_failures: AtomicU64,
}

impl Counters {
    /// Counts one fault of `kind`.
    pub(super) fn add(&self, kind: Kind) {
        let counter = match kind {
            Kind::Error | Kind::Blocked | Kind::Unauthorized => &self.errors,
            Kind::RateLimited => &self.rate_limited,
            Kind::Mocked => &self.mocked,
            Kind::Delayed => &self.delayed,
            Kind::Reset => &self.resets,
            Kind::Hang => &self.hangs,
            Kind::Truncate => &self.truncated,
            Kind::Slow => &self.slowed,
            Kind::LlmFailure => &self.llm_failures,
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }

    /// The counts so far.
    pub(super) fn snapshot(&self) -> FaultCounts {
        let load = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
        FaultCounts {
            errors: load(&self.errors),
            rate_limited: load(&self.rate_limited),
            mocked: load(&self.mocked),
            delayed: load(&self.delayed),
            resets: load(&self.resets),
            hangs: load(&self.hangs),
            truncated: load(&self.truncated),
            slowed: load(&self.slowed),
            llm_failures: load(&self.llm_failures),
        }
    }
}
