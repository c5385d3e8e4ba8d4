//! The [`Pipeline`] the server runs: the stages in order, the clock they and the server read,
//! and the upkeep the server runs for them. The slots that fix the built-in stages' order are
//! filled above the engine, by [`PipelineBuilder`](crate::PipelineBuilder).

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use holdoff::clock::{Clock, TokioClock};

use super::stage::Stage;

/// How often the server runs [`Stage::maintain`] by default.
pub const UPKEEP_EVERY: Duration = Duration::from_secs(30);

/// The stages every request passes, in order, with the clock the whole proxy reads.
///
/// Build one with [`Pipeline::builder`](crate::Pipeline::builder): each built-in stage has a slot of its own, and the
/// slots fix the order, so it cannot be got wrong:
///
/// 1. **metrics** ([`MetricsStage`](crate::MetricsStage)) first, so it times every request and sees every final
///    answer, the judge's and the faults' included;
/// 2. **windows** ([`WindowBook`](crate::WindowBook)) before the judge, so its `on_response` runs after the
///    judge's and labels the window the judge has just opened;
/// 3. **judge** ([`JudgeStage`](crate::JudgeStage)) before the faults, so a premature retry is answered before
///    any fault runs, and every hint a client receives, the faults' included, opens a window
///    as the responses unwind;
/// 4. **faults** ([`FaultStage`](crate::FaultStage));
/// 5. then the stages added with [`PipelineBuilder::stage`](crate::PipelineBuilder::stage), in the order added: the
///    closest to the upstream.
///
/// A `Vec` of stages converts into a pipeline of those stages in that order, on
/// [`TokioClock`]; an empty pipeline passes everything through.
///
/// # Time
///
/// The pipeline's clock is the one clock the proxy judges by: the server stamps each
/// request's [`RequestMeta::received`](crate::RequestMeta::received) with it, times idle
/// connections and stalled clients with it, and runs the upkeep on it; give the same clock to
/// the stages that read time ([`PipelineBuilder::clock`](crate::PipelineBuilder::clock)). A test can drive the whole proxy
/// with a [`ManualClock`](holdoff::clock::ManualClock). The network deadlines inside tokio's
/// and hyper's I/O (connecting, TLS handshakes, the upstream's timeout) run on tokio's timer,
/// which `tokio::time::pause` controls.
///
/// # Upkeep
///
/// While it serves, the server calls every stage's [`Stage::maintain`] every
/// [`UPKEEP_EVERY`] (30 s) of the pipeline's clock: the judge drops windows long closed, the
/// faults drop idle rate-limit counters. Nothing else needs to run beside the server for its
/// memory to stay bounded.
///
/// # Examples
///
/// ```
/// use std::sync::Arc;
/// use holdoff::clock::{Clock, TokioClock};
/// use holdoff_proxy::Pipeline;
/// use holdoff_proxy::MetricsStage;
/// use holdoff_proxy::judge::{Judge, KeyMode};
/// use holdoff_proxy::JudgeStage;
///
/// # #[tokio::main] async fn main() {
/// let clock: Arc<dyn Clock> = Arc::new(TokioClock);
/// let judge = Arc::new(Judge::new(KeyMode::default(), clock.now()));
/// let pipeline = Pipeline::builder(Arc::clone(&clock))
///     .judge(Arc::new(JudgeStage::new(judge, Arc::clone(&clock))))
///     .metrics(Arc::new(MetricsStage::new(clock)))
///     .build();
/// assert_eq!(pipeline.stages().len(), 2); // metrics first, whatever the calls' order
/// # }
/// ```
#[derive(Clone)]
pub struct Pipeline {
    stages: Box<[Arc<dyn Stage>]>,
    clock: Arc<dyn Clock>,
    upkeep_every: Duration,
}

impl Pipeline {
    /// The stages, in the order requests pass them.
    pub fn stages(&self) -> &[Arc<dyn Stage>] {
        &self.stages
    }

    /// The clock the proxy reads.
    pub fn clock(&self) -> &Arc<dyn Clock> {
        &self.clock
    }

    /// How often the server runs [`Pipeline::maintain`].
    pub fn upkeep_every(&self) -> Duration {
        self.upkeep_every
    }

    /// Runs every stage's [`Stage::maintain`] now, by the pipeline's clock: what the server
    /// does every [`Pipeline::upkeep_every`].
    pub fn maintain(&self) {
        let now = self.clock.now();
        for stage in &self.stages {
            stage.maintain(now);
        }
    }
}

impl Pipeline {
    /// `stages` in this order, on `clock`, with upkeep every `upkeep_every`.
    pub(crate) fn new(
        stages: Vec<Arc<dyn Stage>>,
        clock: Arc<dyn Clock>,
        upkeep_every: Duration,
    ) -> Pipeline {
        Pipeline {
            stages: stages.into_boxed_slice(),
            clock,
            upkeep_every,
        }
    }
}

impl Default for Pipeline {
    /// No stages, on [`TokioClock`]: everything passes through.
    fn default() -> Pipeline {
        Pipeline::from(Vec::new())
    }
}

impl From<Vec<Arc<dyn Stage>>> for Pipeline {
    /// `stages` in this order, on [`TokioClock`].
    fn from(stages: Vec<Arc<dyn Stage>>) -> Pipeline {
        Pipeline::new(stages, Arc::new(TokioClock), UPKEEP_EVERY)
    }
}

impl fmt::Debug for Pipeline {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Pipeline")
            .field("stages", &self.stages.len())
            .field("upkeep_every", &self.upkeep_every)
            .finish_non_exhaustive()
    }
}
