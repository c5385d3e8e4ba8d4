//! The latency step: a delay drawn for the request, before the plan's order runs.

use std::time::Duration;

use rand::Rng;

use crate::fault::FaultPlan;

use super::Inner;

impl Inner {
    /// The delay a latency fault adds to this request, if it does.
    pub(super) fn latency(&self, plan: &FaultPlan, url: &str) -> Option<Duration> {
        let rule = plan.latency.as_ref()?;
        if rule
            .url
            .as_ref()
            .is_some_and(|url_rule| !url_rule.matches_url(url))
        {
            return None;
        }
        self.rng.with(|rng| {
            if !rule.rate.fails(rng.random()) {
                return None;
            }
            let (low, high) = (*rule.delay.start(), *rule.delay.end());
            Some(if low < high {
                rng.random_range(low..=high)
            } else {
                low
            })
        })
    }
}
