//! Faults the proxy injects: error responses, rate limits (request counts and language-model
//! token budgets), latency, mocks, CRUD APIs, API-key and bearer-token checks and network
//! faults, compiled into a [`FaultPlan`] (by hand or by the `holdoff-config` crate) and run by
//! the [`FaultStage`](crate::FaultStage).
//!
//! The plan's rules and their parts are re-exported here, whichever file keeps them; the
//! files are not API.

mod auth;
pub(crate) mod body;
mod crud;
mod error;
mod llm_failure;
mod llm_reply;
mod plan;
pub(crate) mod ratelimit;
mod rng;
pub(crate) mod tokens;
pub(crate) mod usage;

pub use auth::{AuthCheck, AuthRule, BearerCheck, KeyIn, KeyParameter};
pub use crud::{CrudAction, CrudActionKind, CrudApi};
pub(crate) use error::Rendered;
pub use error::{ErrorResponse, HeaderTemplate, Rate, RetryAfterForm};
pub use llm_failure::{LlmFailureRule, failure_names};
pub use llm_reply::LanguageModelReply;
pub use plan::{
    ErrorRule, FaultOrder, FaultOutcome, FaultPlan, FaultStep, LatencyRule, LlmRateLimitRule,
    MockRule, NetworkFault, RateLimitRule, RequestMatch, Scope,
};
pub use ratelimit::{Algorithm, HeaderStyle, Limit, ResetFormat, Taken};
pub use rng::FaultRng;
pub use tokens::{BudgetCheck, Spent, TokenBudget, Usage};
