//! Filling the [`Pipeline`]'s slots: the built-in stages in the one order that works, then
//! the caller's own. Above the engine, which knows no stage by name.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use holdoff::clock::Clock;

use crate::proxy::{Pipeline, Stage, UPKEEP_EVERY};
use crate::stages::{FaultStage, JudgeStage, MetricsStage, WindowBook};

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
        Pipeline::new(stages, self.clock, self.upkeep_every)
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
    use crate::body::Body;
    use crate::fault::FaultPlan;
    use crate::fault::FaultRng;
    use crate::judge::{Judge, KeyMode};
    use crate::proxy::Stage;
    use crate::proxy::{Action, RequestMeta};
    use holdoff::clock::TokioClock;

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
