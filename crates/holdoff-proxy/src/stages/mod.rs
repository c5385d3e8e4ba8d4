//! The built-in stages, each above the pure part it runs: the judge
//! ([`JudgeStage`]), the faults ([`FaultStage`]), the metrics ([`MetricsStage`]) and the
//! judge's window labels for the control API ([`WindowBook`]). The
//! [`PipelineBuilder`](crate::PipelineBuilder) gives each its slot.

mod faults;
mod judge;
mod metrics;
mod windows;

pub use faults::{FaultCounts, FaultStage};
pub(crate) use judge::wall_of;
pub use judge::{DEFAULT_MIN_BACKOFF, JudgeStage, KEPT_EVENTS};
pub use metrics::MetricsStage;
pub(crate) use metrics::{Scrape, fault_kinds};
pub use windows::{OpenWindows, WindowBook, WindowInfo};
