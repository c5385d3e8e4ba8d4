//! The [`Pipeline`]: the stages in the one order that works, the clock they and the server
//! read, and the upkeep the server runs for them.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use holdoff::clock::{Clock, TokioClock};

use super::Stage;
use crate::control::{MetricsStage, WindowBook};
use crate::fault::FaultStage;
use crate::judge::JudgeStage;

/// How often the server runs [`Stage::maintain`] by default.
pub const UPKEEP_EVERY: Duration = Duration::from_secs(30);

/// The stages every request passes, in order, with the clock the whole proxy reads.
///
/// Build one with [`Pipeline::builder`]: each built-in stage has a slot of its own, and the
/// slots fix the order, so it cannot be got wrong:
///
/// 1. **metrics** ([`MetricsStage`]) first, so it times every request and sees every final
///    answer, the judge's and the faults' included;
/// 2. **windows** ([`WindowBook`]) before the judge, so its `on_response` runs after the
///    judge's and labels the window the judge has just opened;
/// 3. **judge** ([`JudgeStage`]) before the faults, so a premature retry is answered before
///    any fault runs, and every hint a client receives, the faults' included, opens a window
///    as the responses unwind;
/// 4. **faults** ([`FaultStage`]);
/// 5. then the stages added with [`PipelineBuilder::stage`], in the order added: the
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
/// the stages that read time ([`PipelineBuilder::clock`]). A test can drive the whole proxy
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
/// use holdoff_proxy::control::MetricsStage;
/// use holdoff_proxy::judge::{Judge, JudgeStage, KeyMode};
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
    /// A pipeline on `clock`, with nothing in its slots yet.
    pub fn builder(clock: Arc<dyn Clock>) -> PipelineBuilder {
        PipelineBuilder {
            clock,
            metrics: None,
            windows: None,
            judge: None,
            faults: None,
            others: Vec::new(),
            upkeep_every: UPKEEP_EVERY,
        }
    }

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

impl Default for Pipeline {
    /// No stages, on [`TokioClock`]: everything passes through.
    fn default() -> Pipeline {
        Pipeline::from(Vec::new())
    }
}

impl From<Vec<Arc<dyn Stage>>> for Pipeline {
    /// `stages` in this order, on [`TokioClock`].
    fn from(stages: Vec<Arc<dyn Stage>>) -> Pipeline {
        Pipeline {
            stages: stages.into_boxed_slice(),
            clock: Arc::new(TokioClock),
            upkeep_every: UPKEEP_EVERY,
        }
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

/// Fills a [`Pipeline`]'s slots; see there for the order they run in.
#[must_use = "a builder does nothing until `build`"]
pub struct PipelineBuilder {
    clock: Arc<dyn Clock>,
    metrics: Option<Arc<MetricsStage>>,
    windows: Option<Arc<WindowBook>>,
    judge: Option<Arc<JudgeStage>>,
    faults: Option<Arc<FaultStage>>,
    others: Vec<Arc<dyn Stage>>,
    upkeep_every: Duration,
}

impl PipelineBuilder {
    /// The pipeline's clock, for the stages that read time.
    pub fn clock(&self) -> &Arc<dyn Clock> {
        &self.clock
    }

    /// Counts and times every request: the first slot.
    pub fn metrics(mut self, stage: Arc<MetricsStage>) -> PipelineBuilder {
        self.metrics = Some(stage);
        self
    }

    /// Labels the judge's windows for `/windows`: the slot before the judge.
    pub fn windows(mut self, stage: Arc<WindowBook>) -> PipelineBuilder {
        self.windows = Some(stage);
        self
    }

    /// Judges every retry: the slot before the faults.
    pub fn judge(mut self, stage: Arc<JudgeStage>) -> PipelineBuilder {
        self.judge = Some(stage);
        self
    }

    /// Injects the faults.
    pub fn faults(mut self, stage: Arc<FaultStage>) -> PipelineBuilder {
        self.faults = Some(stage);
        self
    }

    /// A stage of your own, after the built-in ones and those added before it.
    pub fn stage(mut self, stage: Arc<dyn Stage>) -> PipelineBuilder {
        self.others.push(stage);
        self
    }

    /// How often the server runs the stages' upkeep ([`UPKEEP_EVERY`] by default).
    pub fn upkeep_every(mut self, every: Duration) -> PipelineBuilder {
        self.upkeep_every = every;
        self
    }

    /// The pipeline, its stages in slot order.
    pub fn build(self) -> Pipeline {
        let builtin = [
            self.metrics.map(|stage| stage as Arc<dyn Stage>),
            self.windows.map(|stage| stage as Arc<dyn Stage>),
            self.judge.map(|stage| stage as Arc<dyn Stage>),
            self.faults.map(|stage| stage as Arc<dyn Stage>),
        ];
        let stages: Vec<Arc<dyn Stage>> =
            builtin.into_iter().flatten().chain(self.others).collect();
        Pipeline {
            stages: stages.into_boxed_slice(),
            clock: self.clock,
            upkeep_every: self.upkeep_every,
        }
    }
}

impl fmt::Debug for PipelineBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PipelineBuilder")
            .field("metrics", &self.metrics.is_some())
            .field("windows", &self.windows.is_some())
            .field("judge", &self.judge.is_some())
            .field("faults", &self.faults.is_some())
            .field("others", &self.others.len())
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fault::plan::FaultPlan;
    use crate::fault::rng::FaultRng;
    use crate::judge::{Judge, KeyMode};
    use crate::{Action, Body, RequestMeta};

    struct Mine;

    impl Stage for Mine {
        fn on_request(&self, request: http::Request<Body>, _: &RequestMeta) -> Action {
            Action::Continue(request)
        }
    }

    /// The data pointer of a stage, to tell stages apart.
    fn address(stage: &Arc<dyn Stage>) -> *const () {
        Arc::as_ptr(stage).cast()
    }

    #[test]
    fn slots_fix_the_order_whatever_order_they_are_filled_in() {
        let clock: Arc<dyn Clock> = Arc::new(TokioClock);
        let judge = Arc::new(Judge::new(KeyMode::default(), clock.now()));
        let metrics = Arc::new(MetricsStage::new(Arc::clone(&clock)));
        let book = Arc::new(WindowBook::new(Arc::clone(&judge)));
        let judge = Arc::new(JudgeStage::new(judge, Arc::clone(&clock)));
        let faults = Arc::new(FaultStage::new(
            FaultPlan::default(),
            FaultRng::new(1),
            Arc::clone(&clock),
        ));
        let (first, second): (Arc<dyn Stage>, Arc<dyn Stage>) = (Arc::new(Mine), Arc::new(Mine));

        let pipeline = Pipeline::builder(clock)
            .stage(Arc::clone(&first))
            .faults(Arc::clone(&faults))
            .judge(Arc::clone(&judge))
            .stage(Arc::clone(&second))
            .windows(Arc::clone(&book))
            .metrics(Arc::clone(&metrics))
            .build();

        let expected: Vec<Arc<dyn Stage>> = vec![metrics, book, judge, faults, first, second];
        let got: Vec<_> = pipeline.stages().iter().map(address).collect();
        let want: Vec<_> = expected.iter().map(address).collect();
        assert_eq!(got, want);
    }

    #[test]
    fn a_vec_keeps_its_order_and_an_empty_pipeline_passes_everything() {
        let (first, second): (Arc<dyn Stage>, Arc<dyn Stage>) = (Arc::new(Mine), Arc::new(Mine));
        let pipeline = Pipeline::from(vec![Arc::clone(&second), Arc::clone(&first)]);
        let got: Vec<_> = pipeline.stages().iter().map(address).collect();
        assert_eq!(got, [address(&second), address(&first)]);
        assert!(Pipeline::default().stages().is_empty());
        assert_eq!(Pipeline::default().upkeep_every(), UPKEEP_EVERY);
    }
}
