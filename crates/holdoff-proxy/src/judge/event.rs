//! What the judge finds, in its own terms: a [`ThrottleEvent`] when a window opens, a
//! [`JudgeEvent`] with a [`Verdict`] when a request comes under one; and [`Record`], where
//! the stage writes them (the run's recorder, above the judge, implements it).

use std::fmt::Debug;
use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};

/// What the judge found, for the log and the reports.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JudgeEvent {
    /// The verdict.
    pub verdict: Verdict,
    /// Who retried (`ClientId`'s display form).
    pub client: String,
    /// The retry's `User-Agent`, if it had one.
    pub user_agent: Option<String>,
    /// Whether the retry carried an `Idempotency-Key` header: a repeated POST is safe only
    /// with one (a hint does not make it safe).
    pub idempotency_key: bool,
    /// The method.
    pub method: String,
    /// The URL.
    pub url: String,
    /// When the throttled response passed to the client (wall clock).
    pub throttled_at: SystemTime,
    /// When a retry was permitted (wall clock); `None` for a window that never closes.
    pub permitted_at: Option<SystemTime>,
    /// When the retry arrived (wall clock).
    pub retried_at: SystemTime,
    /// How early (a violation) or late (compliant) it came; `None` when early against a
    /// window that never closes.
    pub by: Option<Duration>,
    /// For [`Verdict::Sibling`]: the other process, the one that was told to wait
    /// (`ClientId`'s display form); `None` for every other verdict.
    pub throttled_client: Option<String>,
}

/// A verdict on a retry; in the event log and the reports, `"premature"`, `"read_as_zero"`,
/// `"no_backoff"`, `"compliant"` or `"sibling"`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Verdict {
    /// Came before the permitted time of a usable hint (or inside a window that never
    /// closes). Fails the run.
    Premature,
    /// Came sooner than the minimum backoff after a throttle whose hint was malformed, as if
    /// the client had read it as zero. Fails the run.
    ReadAsZero,
    /// Came sooner than the minimum backoff after a throttle with no hint at all. Reported;
    /// fails the run only when the judge is told to (RFC 9110 names no wait to honour).
    NoBackoff,
    /// Came at or after the permitted time (or the minimum backoff).
    Compliant,
    /// Came from one process inside the wait another process was told, on the same method
    /// and URL (windows keyed by client, and clients told apart by process): e.g. a shell
    /// loop of `curl`s, each a process of its own. Reported; it does not fail the run, since
    /// independent processes (pytest-xdist's workers) may ask for one URL. Judging every
    /// process as one client (`--judge-key method-url`) makes such a request premature.
    Sibling,
}

impl Verdict {
    /// `premature`, `read_as_zero`, `no_backoff`, `compliant` or `sibling`, as in the event
    /// log.
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Premature => "premature",
            Verdict::ReadAsZero => "read_as_zero",
            Verdict::NoBackoff => "no_backoff",
            Verdict::Compliant => "compliant",
            Verdict::Sibling => "sibling",
        }
    }
}

/// A throttle that reached a client: a window opened, or an open one was renewed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ThrottleEvent {
    /// When the response passed to the client (wall clock).
    pub at: SystemTime,
    /// Who was throttled (`ClientId`'s display form).
    pub client: String,
    /// The request's `User-Agent`, if it had one.
    pub user_agent: Option<String>,
    /// The request's method.
    pub method: String,
    /// The request's URL.
    pub url: String,
    /// The response's status.
    pub status: u16,
    /// When a retry is permitted (wall clock); `None` for a window that never closes.
    pub permitted_at: Option<SystemTime>,
    /// What the response said about when to retry.
    pub hint: HintKind,
    /// The header that decided (or, for a malformed hint, the one that could not be read),
    /// lowercase.
    pub header: Option<String>,
    /// That header's value, as sent.
    pub value: Option<String>,
    /// How the judge read it, for people.
    pub reading: Option<String>,
}

/// What a throttled response said about when to retry, as the judge read it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum HintKind {
    /// A hint the judge could read: the window lasts until its earliest reading.
    #[default]
    Usable,
    /// A hint was sent but could not be read. It is never read as zero: the window lasts the
    /// minimum backoff, and a retry inside it is a violation ([`Verdict::ReadAsZero`]).
    Malformed,
    /// No hint at all: the gap to the next request is measured against the minimum backoff
    /// ([`Verdict::NoBackoff`]).
    None,
    /// A hint too long for the monotonic clock: a window that never closes (until evicted).
    Unbounded,
}

impl HintKind {
    /// `usable`, `malformed`, `none` or `unbounded`, as in the event log.
    pub fn as_str(self) -> &'static str {
        match self {
            HintKind::Usable => "usable",
            HintKind::Malformed => "malformed",
            HintKind::None => "none",
            HintKind::Unbounded => "unbounded",
        }
    }
}

/// Where the judge stage writes what it finds, beside its own list and log lines: the run's
/// [`Recorder`](crate::report::Recorder) is one.
pub trait Record: Send + Sync + Debug {
    /// Whether events are wanted now: the stage builds none while this is `false`.
    fn is_recording(&self) -> bool;
    /// A window opened or was renewed.
    fn throttle(&self, event: ThrottleEvent);
    /// A request came under a window.
    fn retry(&self, event: JudgeEvent);
}
