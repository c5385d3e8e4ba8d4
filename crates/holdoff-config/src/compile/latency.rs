//! `latency`: a delay added to watched requests.

use std::time::Duration;

use super::matching::Exclusion;
use super::{Compiler, WrittenIn, optional};
use crate::error::key;
use crate::file::RawLatency;
use holdoff_proxy::fault::LatencyRule;
use holdoff_proxy::fault::Rate;

impl Compiler {
    pub(super) fn latency(
        &mut self,
        at: WrittenIn<'_>,
        path: &str,
        raw: &RawLatency,
    ) -> Option<LatencyRule> {
        let url = optional(raw.url.as_deref(), |url| {
            self.pattern(at, key(path, "url"), url, Exclusion::Refused)
        });
        let rate = match raw.rate {
            Some(rate) => self.rate(at, &key(path, "rate"), rate),
            None => Some(Rate::ALWAYS),
        };
        if raw.min_ms > raw.max_ms {
            self.error(
                at,
                key(path, "minMs"),
                format!(
                    "the least delay ({} ms) is more than the most (`maxMs`, {} ms)",
                    raw.min_ms, raw.max_ms
                ),
            );
            return None;
        }
        Some(LatencyRule {
            url: url?,
            rate: rate?,
            delay: Duration::from_millis(raw.min_ms)..=Duration::from_millis(raw.max_ms),
        })
    }
}
