//! The stage that runs a [`FaultPlan`](super::plan::FaultPlan).
