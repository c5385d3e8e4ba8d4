//! `order`: which of the faults that can answer meets a request first.

use super::{Compiler, WrittenIn};
use crate::error::index;
use crate::file::RawFaultStep;
use holdoff_proxy::fault::{FaultOrder, FaultStep};

impl Compiler {
    /// `order`, its steps first and the ones it leaves out after, in the default order; the
    /// default order (with an error) when it names a step twice.
    pub(super) fn order(&mut self, at: WrittenIn<'_>, order: &[RawFaultStep]) -> FaultOrder {
        FaultOrder::new(order.iter().copied().map(FaultStep::from)).unwrap_or_else(|twice| {
            let again = order
                .iter()
                .enumerate()
                .filter(|(_, step)| FaultStep::from(**step) == twice)
                .nth(1)
                .map_or(0, |(i, _)| i);
            self.error(
                at,
                index("order", again),
                format!(
                    "`{}` is already in the list: name each step once (the ones left out \
                     follow in the default order, auth, mocks, crudApis, rateLimits, \
                     llmRateLimits, errors)",
                    twice.key()
                ),
            );
            FaultOrder::default()
        })
    }
}

impl RawFaultStep {
    /// The step's key in `order`, as the file spells it.
    pub fn key(self) -> &'static str {
        FaultStep::from(self).key()
    }
}

impl From<RawFaultStep> for FaultStep {
    fn from(raw: RawFaultStep) -> FaultStep {
        match raw {
            RawFaultStep::Auth => FaultStep::Auth,
            RawFaultStep::Mocks => FaultStep::Mocks,
            RawFaultStep::CrudApis => FaultStep::CrudApis,
            RawFaultStep::RateLimits => FaultStep::RateLimits,
            RawFaultStep::LlmRateLimits => FaultStep::LanguageModelRateLimits,
            RawFaultStep::Errors => FaultStep::Errors,
        }
    }
}
