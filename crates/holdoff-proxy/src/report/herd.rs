//! Herds: clients that were told the same permitted time and came back together, all at
//! once — a thundering herd that honours `Retry-After` to the millisecond and so lacks
//! jitter.
//!
//! A herd is two or more distinct clients whose compliant retries (the ones that closed a
//! window) share a permitted time, within [`PERMITTED_TOLERANCE`] of the earliest one, and
//! arrived within [`RESUME_SPREAD`] of each other. Premature retries are not counted: they are
//! violations already, and they do not resume at the permitted time.
//!
//! The tolerances: a server that sends the same `Retry-After` date (or a rate-limit window
//! that resets at one moment) to many clients gives them permitted times that differ only by
//! the time each response took to pass, a few milliseconds; 50 ms takes that in while keeping
//! apart waits that merely happen to be close. Retries within 10 ms of each other reach the
//! server as one burst.

use std::collections::BTreeSet;
use std::time::{Duration, SystemTime};

use serde::Serialize;

use super::time::{self, rfc3339};

/// How far apart the permitted times of one herd's clients may be.
pub(crate) const PERMITTED_TOLERANCE: Duration = Duration::from_millis(50);

/// How far apart, at most, the retries of one herd arrive: first to last.
pub const RESUME_SPREAD: Duration = Duration::from_millis(10);

/// Clients that resumed together at the same permitted time.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[non_exhaustive]
pub(crate) struct Herd {
    /// The permitted time they were given (the earliest, when they differ slightly).
    #[serde(with = "rfc3339")]
    pub(crate) permitted_at: SystemTime,
    /// The clients, sorted, each once.
    pub(crate) clients: Vec<String>,
    /// How many retries came in the burst (a client may retry several URLs).
    pub(crate) retries: usize,
    /// When the first of them arrived.
    #[serde(with = "rfc3339")]
    pub(crate) first_retry_at: SystemTime,
    /// Milliseconds from the first retry of the burst to the last.
    pub(crate) spread_ms: f64,
}

impl Herd {
    /// What to do about it, one sentence.
    pub(crate) fn advice(&self) -> &'static str {
        "Add random jitter to the wait (e.g. Retry-After plus a random 0-1 s) so that clients \
         told the same time do not return in lockstep."
    }

    /// What happened, one clause with `at` as the permitted time: `worker-1, worker-2 resumed
    /// within 5 ms of each other at 12:00:10.000, the permitted time they shared`.
    pub(crate) fn describe(&self, at: &str) -> String {
        format!(
            "{} resumed within {} of each other at {at}, the permitted time they shared ({})",
            self.clients
                .iter()
                .map(|client| super::text::client_name(client))
                .collect::<Vec<_>>()
                .join(", "),
            super::text::millis(self.spread_ms),
            super::text::count(self.retries, "retry", "retries"),
        )
    }
}

/// A compliant retry, as herd detection sees it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Resume<'a> {
    pub(crate) client: &'a str,
    pub(crate) permitted_at: SystemTime,
    pub(crate) retried_at: SystemTime,
}

/// Finds the herds among `resumes`, in order of permitted time.
pub(crate) fn detect(resumes: &[Resume<'_>]) -> Vec<Herd> {
    let mut by_permit: Vec<Resume<'_>> = resumes.to_vec();
    by_permit.sort_by_key(|r| r.permitted_at);
    let mut herds = Vec::new();
    let mut rest = by_permit.as_slice();
    while let Some(anchor) = rest.first() {
        // Clustered against the earliest permitted time, not the previous one, so that a
        // chain of close times does not stretch one cluster without bound.
        let len = rest
            .iter()
            .take_while(|r| within(anchor.permitted_at, r.permitted_at, PERMITTED_TOLERANCE))
            .count();
        let (cluster, after) = rest.split_at(len);
        bursts(cluster, anchor.permitted_at, &mut herds);
        rest = after;
    }
    herds
}

/// The bursts of retries from two or more clients in one cluster of permitted times.
fn bursts(cluster: &[Resume<'_>], permitted_at: SystemTime, herds: &mut Vec<Herd>) {
    let mut by_arrival = cluster.to_vec();
    by_arrival.sort_by_key(|r| r.retried_at);
    let mut i = 0;
    while i < by_arrival.len() {
        let first = by_arrival[i].retried_at;
        let len = by_arrival[i..]
            .iter()
            .take_while(|r| within(first, r.retried_at, RESUME_SPREAD))
            .count();
        let burst = &by_arrival[i..i + len];
        let clients: BTreeSet<&str> = burst.iter().map(|r| r.client).collect();
        if clients.len() < 2 {
            i += 1;
            continue;
        }
        let last = burst.last().map_or(first, |r| r.retried_at);
        herds.push(Herd {
            permitted_at,
            clients: clients.into_iter().map(str::to_owned).collect(),
            retries: burst.len(),
            first_retry_at: first,
            spread_ms: time::millis_between(first, last),
        });
        i += len;
    }
}

/// Whether `later` is at most `tolerance` after `earlier` (which it is not before).
fn within(earlier: SystemTime, later: SystemTime, tolerance: Duration) -> bool {
    later
        .duration_since(earlier)
        .is_ok_and(|gap| gap <= tolerance)
}

#[cfg(test)]
mod tests {
    use std::time::UNIX_EPOCH;

    use super::*;

    fn t(ms: u64) -> SystemTime {
        UNIX_EPOCH + Duration::from_millis(1_740_830_400_000 + ms)
    }

    fn resume(client: &str, permitted: u64, retried: u64) -> Resume<'_> {
        Resume {
            client,
            permitted_at: t(permitted),
            retried_at: t(retried),
        }
    }

    mod detect {
        use super::*;

        #[test]
        fn finds_clients_that_resume_together_at_one_permitted_time() {
            let herds = detect(&[
                resume("carol", 5000, 5004),
                resume("alice", 5000, 5001),
                resume("bob", 5003, 5009),
            ]);
            assert_eq!(
                herds,
                [Herd {
                    permitted_at: t(5000),
                    clients: vec!["alice".into(), "bob".into(), "carol".into()],
                    retries: 3,
                    first_retry_at: t(5001),
                    spread_ms: 8.0,
                }]
            );
            assert_eq!(
                herds[0].describe("12:00:05.000"),
                "alice, bob, carol resumed within 8 ms of each other at 12:00:05.000, the \
                 permitted time they shared (3 retries)"
            );
        }

        #[test]
        fn needs_two_distinct_clients() {
            assert!(detect(&[resume("alice", 5000, 5001), resume("alice", 5000, 5002)]).is_empty());
            assert!(detect(&[resume("alice", 5000, 5001)]).is_empty());
            assert!(detect(&[]).is_empty());
        }

        #[test]
        fn clients_with_jitter_are_no_herd() {
            // Same permitted time, retries spread over half a second.
            let herds = detect(&[
                resume("alice", 5000, 5012),
                resume("bob", 5000, 5230),
                resume("carol", 5000, 5470),
            ]);
            assert!(herds.is_empty(), "{herds:?}");
        }

        #[test]
        fn different_permitted_times_are_no_herd_even_when_retries_coincide() {
            // Bob was told 5.2 s, and happened to come back with Alice.
            let herds = detect(&[resume("alice", 5000, 5300), resume("bob", 5200, 5302)]);
            assert!(herds.is_empty(), "{herds:?}");
        }

        #[test]
        fn permitted_times_cluster_against_the_earliest_not_a_chain() {
            // 0, 40, 80: the third is 80 ms after the first, so it starts a cluster of its own.
            let herds = detect(&[
                resume("alice", 5000, 5100),
                resume("bob", 5040, 5102),
                resume("carol", 5080, 5104),
            ]);
            assert_eq!(herds.len(), 1);
            assert_eq!(herds[0].clients, ["alice", "bob"]);
        }

        #[test]
        fn one_permitted_time_can_have_two_bursts() {
            let herds = detect(&[
                resume("alice", 5000, 5001),
                resume("bob", 5000, 5002),
                resume("carol", 5000, 7000),
                resume("dave", 5000, 7005),
            ]);
            let clients: Vec<_> = herds.iter().map(|h| h.clients.join(",")).collect();
            assert_eq!(clients, ["alice,bob", "carol,dave"]);
        }

        #[test]
        fn the_tolerances_are_inclusive() {
            let herds = detect(&[resume("alice", 5000, 6000), resume("bob", 5050, 6010)]);
            assert_eq!(herds.len(), 1);
            assert_eq!(herds[0].spread_ms, 10.0);
            let herds = detect(&[resume("alice", 5000, 6000), resume("bob", 5051, 6000)]);
            assert!(herds.is_empty());
            let herds = detect(&[resume("alice", 5000, 6000), resume("bob", 5000, 6011)]);
            assert!(herds.is_empty());
        }
    }
}
