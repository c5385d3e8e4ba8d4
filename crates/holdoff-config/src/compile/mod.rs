//! Raw configuration → validated → compiled: every value of a [`RawConfig`] checked, every
//! data file read, and the result turned into the [`FaultPlan`] the proxy runs.
//!
//! Every problem is collected, not just the first, each naming its file and key path and
//! saying what is allowed.

mod api_keys;
mod crud_apis;
mod data_files;
mod errors;
mod judge;
mod latency;
mod llm_failures;
mod llm_mocks;
mod llm_rate_limits;
mod matching;
mod mock_request;
mod mocks;
mod order;
mod rate_limits;
mod response;
mod state;

use std::ops::RangeInclusive;
use std::path::{Path, PathBuf};

pub use data_files::MAX_DATA_FILE_BYTES;
pub use errors::{DEFAULT_DYNAMIC_RANGE, DEFAULT_ERROR_RATE};
pub use llm_mocks::DEFAULT_LLM_TEXT;
pub use mock_request::MockRequest;
pub use state::{
    DEFAULT_STATE_HOLD, DEFAULT_STATE_PREFIX, DEFAULT_STATE_TIMEOUT, StateConfig, StateRedis,
};

use crate::error::index;
pub use crate::error::{ConfigProblems, FileError};
use crate::file::RawConfig;
use crate::load;
use holdoff_proxy::WatchPattern;
use holdoff_proxy::fault::FaultPlan;
use holdoff_proxy::fault::Rate;
use holdoff_proxy::judge::{KeyMode, Penalty};

/// A configuration, checked and compiled.
#[derive(Clone, Debug)]
pub struct Compiled {
    /// The faults.
    pub plan: FaultPlan,
    /// `urlsToWatch`, if the file sets it.
    pub urls_to_watch: Option<Vec<WatchPattern>>,
    /// `seed`, if the file sets it.
    pub seed: Option<u64>,
    /// `judge.key`, if the file sets it.
    pub judge_key: Option<KeyMode>,
    /// `judge.penalty`, if the file sets it.
    pub judge_penalty: Option<Penalty>,
    /// Every data file read (errors file, mocks file, `@file` bodies), absolute paths, so the
    /// caller can watch them for changes.
    pub data_files: Vec<PathBuf>,
    /// `state`, if the file sets it: where state shared with other replicas lives.
    pub state: Option<StateConfig>,
    /// What is valid but likely not meant, e.g. a static `Retry-After` that clients cannot
    /// read: `key.path: what and why`, for `config validate` and the proxy's start.
    pub warnings: Vec<String>,
    /// `mockRequest`, if the file sets it.
    pub mock_request: Option<MockRequest>,
}

/// Checks and compiles `raw`, read from `file`; relative paths in it (the errors and mocks
/// files, `@file` bodies) are resolved against `base_dir`.
///
/// The rules of an errors or mocks file come after the inline ones, and `@file` bodies in
/// such a file are resolved against that file's directory. Wherever it is named, a body file
/// must be a regular file of at most [`MAX_DATA_FILE_BYTES`] under `base_dir` once symbolic
/// links are resolved, unless `raw` sets `bodyFilesAnywhere`.
///
/// # Errors
///
/// Every problem found, in the order of the file: values out of range, keys that do not go
/// together, invalid URL patterns, methods and headers, data files that cannot be read or
/// parsed.
///
/// # Examples
///
/// ```
/// use std::path::Path;
/// use holdoff_config::{compile::compile, load::{Format, parse}};
///
/// let raw = parse(
///     r#"{"errors": {"errors": [{"request": {"url": "*"},
///         "responses": [{"statusCode": 429, "headers": {"Retry-After": "@dynamic"}}]}]}}"#,
///     Format::Json,
///     "holdoff.json",
/// )?;
/// let compiled = compile(&raw, "holdoff.json", Path::new("."))?;
/// assert_eq!(compiled.plan.errors.len(), 1);
///
/// let raw = parse(r#"{"latency": {"minMs": 500, "maxMs": 100}}"#, Format::Json, "holdoff.json")?;
/// let errors = compile(&raw, "holdoff.json", Path::new(".")).unwrap_err();
/// assert_eq!(
///     errors.to_string(),
///     "holdoff.json: latency.minMs: the least delay (500 ms) is more than the most (`maxMs`, \
///      100 ms)"
/// );
/// # Ok::<(), holdoff_config::compile::ConfigProblems>(())
/// ```
pub fn compile(raw: &RawConfig, file: &str, base_dir: &Path) -> Result<Compiled, ConfigProblems> {
    let mut compiler = Compiler {
        bodies_anywhere: raw.body_files_anywhere == Some(true),
        ..Compiler::default()
    };
    let top = WrittenIn {
        file,
        dir: base_dir,
        root: base_dir,
    };
    let compiled = compiler.config(raw, top);
    if compiler.errors.is_empty() {
        Ok(Compiled {
            data_files: compiler.data_files,
            warnings: compiler.warnings,
            ..compiled
        })
    } else {
        Err(ConfigProblems(compiler.errors))
    }
}

/// Reads the configuration file at `path` ([`load_file`](load::load_file)) and compiles it
/// with the file's directory as the base of relative paths.
///
/// # Errors
///
/// As [`load_file`](load::load_file), then as [`compile`].
pub fn load_and_compile(path: &Path) -> Result<Compiled, ConfigProblems> {
    let raw = load::load_file(path)?;
    let base_dir = path.parent().unwrap_or(Path::new(""));
    compile(&raw, &path.display().to_string(), base_dir)
}

/// Where a value was written: the file that names it in errors, the directory its
/// relative paths resolve against, and the configuration's directory, which body files must
/// be under.
#[derive(Clone, Copy)]
struct WrittenIn<'a> {
    file: &'a str,
    dir: &'a Path,
    root: &'a Path,
}

/// Settings shared by every response in a configuration.
struct Shared {
    dynamic_range: RangeInclusive<u64>,
}

#[derive(Default)]
struct Compiler {
    errors: Vec<FileError>,
    warnings: Vec<String>,
    data_files: Vec<PathBuf>,
    /// `bodyFilesAnywhere`: body files may be outside the configuration's directory.
    bodies_anywhere: bool,
}

impl Compiler {
    fn error(&mut self, at: WrittenIn<'_>, path: impl Into<String>, message: impl Into<String>) {
        self.errors.push(FileError::new(at.file, path, message));
    }

    /// Every element of `raw`, in the order of the file, so that errors come in that order.
    fn config(&mut self, raw: &RawConfig, at: WrittenIn<'_>) -> Compiled {
        let urls_to_watch = raw
            .urls_to_watch
            .as_ref()
            .map(|urls| self.urls_to_watch(at, urls));
        let (judge_key, judge_penalty) = self.judge(at, raw.judge.as_ref());
        let shared = Shared {
            dynamic_range: self.dynamic_range(at, raw.errors.as_ref()),
        };
        let mut plan = FaultPlan::default();
        plan.retry_after_form = response::retry_after_form(raw.retry_after_form);
        if let Some(errors) = &raw.errors {
            self.errors(at, errors, &shared, &mut plan.errors);
            plan.batch_errors = errors.answer_batches.unwrap_or(false);
        }
        self.auth(at, &raw.auth, &mut plan.auth);
        self.rate_limits(at, &raw.rate_limits, &shared, &mut plan.rate_limits);
        self.llm_rate_limits(at, &raw.llm_rate_limits, &shared, &mut plan.llm_rate_limits);
        if let Some(latency) = &raw.latency {
            plan.latency = self.latency(at, "latency", latency);
        }
        if let Some(mocks) = &raw.mocks {
            plan.block_unmocked = mocks.block_unmocked.unwrap_or(false);
            plan.batch_mocks = mocks.answer_batches.unwrap_or(false);
            self.mocks(at, mocks, &shared, &mut plan.mocks);
        }
        self.llm_mocks(at, &raw.llm_mocks, &mut plan.mocks);
        self.llm_failures(at, &raw.llm_failures, &mut plan.llm_failures);
        self.crud_apis(at, &raw.crud_apis, &mut plan.crud_apis);
        if let Some(order) = &raw.order {
            plan.order = self.order(at, order);
        }
        let state = raw.state.as_ref().and_then(|state| self.state(at, state));
        let mock_request = raw
            .mock_request
            .as_ref()
            .and_then(|request| self.mock_request(at, request));
        Compiled {
            plan,
            urls_to_watch,
            seed: raw.seed,
            judge_key,
            judge_penalty,
            data_files: Vec::new(),
            state,
            warnings: Vec::new(),
            mock_request,
        }
    }

    /// Checks each item of the list at `path`, keeping the valid ones in `out`.
    fn list<R, T>(
        &mut self,
        at: WrittenIn<'_>,
        path: &str,
        items: &[R],
        out: &mut Vec<T>,
        check: impl Fn(&mut Compiler, WrittenIn<'_>, &str, &R) -> Option<T>,
    ) {
        for (i, item) in items.iter().enumerate() {
            if let Some(valid) = check(self, at, &index(path, i), item) {
                out.push(valid);
            }
        }
    }

    fn rate(&mut self, at: WrittenIn<'_>, path: &str, percent: f64) -> Option<Rate> {
        let rate = Rate::percent(percent).filter(|_| percent.is_finite());
        if rate.is_none() {
            self.error(
                at,
                path,
                format!(
                    "{percent} is not a percentage: a rate is a number from 0 (never) to 100 \
                     (always)"
                ),
            );
        }
        rate
    }
}

/// An optional setting, checked: `Some(None)` when absent, `Some(Some(value))` when valid,
/// `None` when invalid (and reported by `check`).
fn optional<R, T>(raw: Option<R>, check: impl FnOnce(R) -> Option<T>) -> Option<Option<T>> {
    match raw {
        None => Some(None),
        Some(raw) => check(raw).map(Some),
    }
}

#[cfg(test)]
mod tests {
    use super::response::DEFAULT_HANG;
    use super::*;
    use crate::load::{Format, parse};
    use holdoff_proxy::fault::{ErrorResponse, HeaderTemplate, RetryAfterForm};
    use holdoff_proxy::fault::{FaultOutcome, NetworkFault};
    use http::{HeaderValue, Method};
    use std::time::Duration;

    /// The fixtures of `tests/config_errors.rs`, from the crate's directory.
    pub(super) const FIXTURES: &str = "tests/fixtures/config";

    pub(super) fn compiled(text: &str) -> Compiled {
        let raw = parse(text, Format::Json, "holdoff.json").expect("parses");
        compile(&raw, "holdoff.json", Path::new(FIXTURES)).unwrap_or_else(|e| panic!("{e}"))
    }

    pub(super) fn respond(outcome: &FaultOutcome) -> &ErrorResponse {
        match outcome {
            FaultOutcome::Respond(response) => response,
            other => panic!("a response, not {other:?}"),
        }
    }

    pub(super) fn header<'a>(
        response: &'a ErrorResponse,
        name: &str,
    ) -> Option<&'a HeaderTemplate> {
        response
            .headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, template)| template)
    }

    pub(super) fn literal(value: &'static str) -> HeaderTemplate {
        HeaderTemplate::Literal(HeaderValue::from_static(value))
    }

    mod compile {
        use super::*;

        #[test]
        fn carries_every_top_level_setting() {
            let compiled = compiled(
                r#"{"urlsToWatch": ["https://a.example/*", "!https://a.example/health"],
                    "seed": 7, "retryAfterForm": "mixed",
                    "judge": {"key": "header:X-Tenant", "penalty": "sliding"},
                    "errors": {"rate": 10, "dynamicRange": [1, 1], "errors": [
                        {"request": {"url": "*", "method": "post"}, "rate": 100,
                         "responses": [{"statusCode": 503, "headers": [{"name": "Retry-After", "value": "@dynamic"}]}]},
                        {"request": {"url": "*"}, "responses": [{"network": "hang"}]}]},
                    "latency": {"minMs": 10, "maxMs": 20}}"#,
            );
            let urls = compiled.urls_to_watch.expect("set");
            assert!(urls[1].is_exclusion());
            assert_eq!(compiled.seed, Some(7));
            assert_eq!(compiled.judge_key, Some(KeyMode::Header("x-tenant".into())));
            assert_eq!(compiled.judge_penalty, Some(Penalty::Sliding));
            let plan = compiled.plan;
            assert_eq!(plan.retry_after_form, RetryAfterForm::Mixed);
            assert_eq!(plan.errors[0].request.method, Some(Method::POST));
            assert_eq!(plan.errors[0].rate, Rate::ALWAYS);
            assert_eq!(
                header(respond(&plan.errors[0].outcomes[0]), "retry-after"),
                Some(&HeaderTemplate::Dynamic(1..=1))
            );
            assert_eq!(plan.errors[1].rate.as_percent(), 10.0);
            assert!(matches!(
                plan.errors[1].outcomes[0],
                FaultOutcome::Network(NetworkFault::Hang { r#for }) if r#for == DEFAULT_HANG
            ));
            let latency = plan.latency.expect("set");
            assert_eq!(latency.rate, Rate::ALWAYS);
            assert_eq!(
                latency.delay,
                Duration::from_millis(10)..=Duration::from_millis(20)
            );
        }
    }
}
