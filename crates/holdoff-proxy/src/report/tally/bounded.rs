//! The tally's bounded collections: the earliest violations ([`Kept`]), a uniform sample of
//! lateness ([`Sample`]), and the links from a window's key to its latest throttles
//! ([`Links`]): each keeps its part of the detail in memory that does not grow with the run.

use std::collections::HashMap;
use std::time::SystemTime;

use super::{LATENESS_SAMPLE, LINKED_KEYS, LINKS_PER_KEY};
use crate::report::parts::LISTED_VIOLATIONS;
use crate::report::parts::{JudgedBy, Lateness, SAME_WINDOW, Violation, WindowRow};
use crate::report::time;

/// The earliest violations, up to [`LISTED_VIOLATIONS`], and how many were left out.
#[derive(Clone, Debug, Default)]
pub(super) struct Kept {
    pub(super) list: Vec<Violation>,
    pub(super) left_out: usize,
}

impl Kept {
    pub(super) fn add(&mut self, violation: Violation) {
        self.list.push(violation);
        // Trimmed in batches: a sort per LISTED_VIOLATIONS additions.
        if self.list.len() >= 2 * LISTED_VIOLATIONS {
            self.trim();
        }
    }

    pub(super) fn merge(&mut self, other: Kept) {
        self.left_out += other.left_out;
        self.list.extend(other.list);
        self.trim();
    }

    pub(super) fn trim(&mut self) {
        if self.list.len() <= LISTED_VIOLATIONS {
            return;
        }
        // The earliest first; inside a window that never closes counts as earliest of all.
        let early = |v: &Violation| v.early_by_ms.unwrap_or(f64::INFINITY);
        self.list.sort_by(|a, b| early(b).total_cmp(&early(a)));
        self.left_out += self.list.len() - LISTED_VIOLATIONS;
        self.list.truncate(LISTED_VIOLATIONS);
    }

    /// The kept violations (trimmed), in the order they came.
    pub(super) fn into_sorted(mut self) -> Vec<Violation> {
        self.list.sort_by_key(|v| v.retried_at);
        self.list
    }
}

/// Lateness in milliseconds: every value up to [`LATENESS_SAMPLE`], then a uniform sample of
/// that size (Vitter's algorithm R, from a fixed seed so a report is the same every time it
/// is built from the same log).
#[derive(Clone, Debug)]
pub(super) struct Sample {
    pub(super) values: Vec<f64>,
    pub(super) seen: usize,
    pub(super) max: f64,
    pub(super) rng: u64,
}

impl Default for Sample {
    fn default() -> Sample {
        Sample {
            values: Vec::new(),
            seen: 0,
            max: 0.0,
            rng: 0x9E37_79B9_7F4A_7C15,
        }
    }
}

impl Sample {
    pub(super) fn add(&mut self, ms: f64) {
        self.seen += 1;
        self.max = if self.seen == 1 { ms } else { self.max.max(ms) };
        if self.values.len() < LATENESS_SAMPLE {
            self.values.push(ms);
            return;
        }
        // xorshift64*: plenty for choosing which sample to replace.
        self.rng ^= self.rng >> 12;
        self.rng ^= self.rng << 25;
        self.rng ^= self.rng >> 27;
        let draw = self.rng.wrapping_mul(0x2545_F491_4F6C_DD1D);
        let j = (draw % self.seen as u64) as usize;
        if j < LATENESS_SAMPLE {
            self.values[j] = ms;
        }
    }

    pub(super) fn lateness(mut self) -> Option<Lateness> {
        let mut lateness = Lateness::of(&mut self.values)?;
        lateness.count = self.seen;
        lateness.max_ms = self.max;
        Some(lateness)
    }
}

/// The recent windows of each client, method and URL, to link retries to.
#[derive(Clone, Debug, Default)]
pub(super) struct Links {
    pub(super) keys: HashMap<(String, String, String), Recent>,
    /// Counts uses, for evicting the least recently used families.
    pub(super) tick: u64,
}

#[derive(Clone, Debug, Default)]
pub(super) struct Recent {
    pub(super) windows: Vec<Linked>,
    /// When a retry that was let through came, until a throttle answers it.
    pub(super) open_retry: Option<SystemTime>,
    pub(super) used: u64,
}

impl Links {
    pub(super) fn of(&mut self, client: &str, method: &str, url: &str) -> &mut Recent {
        self.tick += 1;
        let key = (client.to_owned(), method.to_owned(), url.to_owned());
        let recent = self.keys.entry(key).or_default();
        recent.used = self.tick;
        recent
    }

    /// Forgets the least recently used eighth when there are too many families: a pass over
    /// them per eighth of new ones.
    pub(super) fn trim(&mut self) {
        if self.keys.len() <= LINKED_KEYS {
            return;
        }
        let mut used: Vec<u64> = self.keys.values().map(|r| r.used).collect();
        let eighth = used.len() / 8;
        let (_, oldest_kept, _) = used.select_nth_unstable(eighth);
        let oldest_kept = *oldest_kept;
        self.keys.retain(|_, r| r.used >= oldest_kept);
    }
}

/// A recent window, as much of it as a violation needs, and its row in the timeline if it
/// has one. (The client, method and URL are the family's key.)
#[derive(Clone, Debug)]
pub(super) struct Linked {
    pub(super) from: SystemTime,
    pub(super) status: Option<u16>,
    pub(super) judged_by: Option<JudgedBy>,
    pub(super) row: Option<usize>,
}

impl Linked {
    pub(super) fn new(window: &WindowRow, row: Option<usize>) -> Linked {
        Linked {
            from: window.from,
            status: window.status,
            judged_by: window.judged_by.clone(),
            row,
        }
    }
}

impl Recent {
    pub(super) fn push(&mut self, window: Linked) {
        if self.windows.len() == LINKS_PER_KEY {
            self.windows.remove(0);
        }
        self.windows.push(window);
    }

    /// The window that opened nearest `throttled_at`, within [`SAME_WINDOW`].
    pub(super) fn nearest(&self, throttled_at: SystemTime) -> Option<&Linked> {
        let same = SAME_WINDOW.as_secs_f64() * 1000.0;
        let apart = |l: &Linked| time::millis_between(l.from, throttled_at).abs();
        self.windows
            .iter()
            .filter(|w| apart(w) <= same)
            .min_by(|a, b| apart(a).total_cmp(&apart(b)))
    }
}
