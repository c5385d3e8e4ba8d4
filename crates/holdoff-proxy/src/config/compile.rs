//! Raw configuration → validated → compiled: every value of a [`RawConfig`] checked, every
//! data file read, and the result turned into the [`FaultPlan`] the proxy runs.
//!
//! Every problem is collected, not just the first, each naming its file and key path and
//! saying what is allowed.

use std::fmt;
use std::fs::{self, File};
use std::io::Read;
use std::ops::RangeInclusive;
use std::path::{Path, PathBuf};
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderName, HeaderValue, Method, StatusCode, header};
use serde::de::DeserializeOwned;

use super::WatchPattern;
pub use super::error::{ConfigProblems, FileError};
use super::error::{index, key};
use super::file::{
    RawAlgorithm, RawConfig, RawErrorRule, RawErrorsFile, RawHeaderStyle, RawHeaders, RawLatency,
    RawMock, RawMocksFile, RawNetworkFault, RawOnFailure, RawPenalty, RawRateLimit,
    RawRequestMatch, RawResetFormat, RawResponse, RawRetryAfterForm, RawScope, RawState,
};
use super::load;
use crate::fault::error::{ErrorResponse, HeaderTemplate, Rate, RetryAfterForm};
use crate::fault::plan::{
    ErrorRule, FaultPlan, LatencyRule, MockRule, NetworkFault, Outcome, RateLimitRule,
    RequestMatch, Scope,
};
use crate::fault::ratelimit::{Algorithm, HeaderStyle, Limit, ResetFormat};
use crate::judge::{KeyMode, Penalty};
use crate::shared::OnFailure;

/// The seconds a bare `@dynamic` draws from when `errors.dynamicRange` is not set.
pub const DEFAULT_DYNAMIC_RANGE: RangeInclusive<u64> = 2..=5;

/// The failure rate of an error rule when neither it nor `errors.rate` sets one, in percent.
pub const DEFAULT_ERROR_RATE: f64 = 50.0;

/// How long a `hang` holds a request when `hangSeconds` is not set.
const DEFAULT_HANG: Duration = Duration::from_secs(300);

/// The rate of a `slow-body` when `bytesPerSecond` is not set.
const DEFAULT_BYTES_PER_SECOND: u64 = 1024;

/// The most a data file (errors, mocks, `@file` body) may hold: each is read whole, and a
/// body is kept in memory.
pub const MAX_DATA_FILE_BYTES: u64 = 16 * 1024 * 1024;

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
}

/// Where the judge's windows and the rate limiters' counters are shared with other replicas.
#[derive(Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct StateConfig {
    /// The Redis URL (it may hold a password: never log it as it is).
    pub redis: String,
    /// The key prefix.
    pub prefix: String,
    /// The timeout of one operation.
    pub timeout: Duration,
    /// What to do while Redis fails.
    pub on_failure: OnFailure,
    /// The CA certificate (PEM) a `rediss://` server is verified against, read from
    /// `caFile`; the system's roots when `None`.
    pub ca: Option<Vec<u8>>,
}

impl fmt::Debug for StateConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StateConfig")
            .field("redis", &"…")
            .field("prefix", &self.prefix)
            .field("timeout", &self.timeout)
            .field("on_failure", &self.on_failure)
            .field("ca", &self.ca.as_ref().map(|_| "…"))
            .finish()
    }
}

/// The default key prefix in a shared store.
pub const DEFAULT_STATE_PREFIX: &str = "holdoff:";
/// The default timeout of one shared-store operation.
pub const DEFAULT_STATE_TIMEOUT: Duration = Duration::from_millis(500);
/// The default `Retry-After` of a fail-closed `503`.
pub const DEFAULT_STATE_HOLD: Duration = Duration::from_secs(5);

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
/// use holdoff_proxy::config::{compile::compile, load::{Format, parse}};
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
/// # Ok::<(), holdoff_proxy::config::compile::ConfigProblems>(())
/// ```
pub fn compile(raw: &RawConfig, file: &str, base_dir: &Path) -> Result<Compiled, ConfigProblems> {
    let mut compiler = Compiler {
        bodies_anywhere: raw.body_files_anywhere == Some(true),
        ..Compiler::default()
    };
    let top = Origin {
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
struct Origin<'a> {
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
    fn error(&mut self, at: Origin<'_>, path: impl Into<String>, message: impl Into<String>) {
        self.errors.push(FileError::new(at.file, path, message));
    }

    /// Warns about a static `Retry-After` clients cannot read: it may be meant (to test how
    /// clients treat a malformed hint), so it is sent as is.
    fn check_retry_after(&mut self, path: &str, template: &HeaderTemplate) {
        let HeaderTemplate::Literal(value) = template else {
            return;
        };
        if let Err(err) = holdoff::RetryAfter::parse(value.as_bytes(), holdoff::from_str_now()) {
            self.warnings.push(format!(
                "{path}: `Retry-After: {}` is malformed ({}): it is sent as is, and \
                 the judge fails a client that retries within the minimum backoff after it; \
                 use whole seconds, an HTTP-date or @dynamic if a valid hint was meant",
                value.as_bytes().escape_ascii(),
                err.kind().describe(),
            ));
        }
    }

    fn read(&mut self, path: &Path) {
        let absolute = std::path::absolute(path).unwrap_or_else(|_| path.to_owned());
        if !self.data_files.contains(&absolute) {
            self.data_files.push(absolute);
        }
    }

    fn config(&mut self, raw: &RawConfig, at: Origin<'_>) -> Compiled {
        let urls_to_watch = raw.urls_to_watch.as_ref().map(|urls| {
            urls.iter()
                .enumerate()
                .filter_map(|(i, url)| {
                    self.pattern(at, index("urlsToWatch", i), url, Exclusion::Allowed)
                })
                .collect()
        });
        let judge = raw.judge.as_ref();
        let judge_key = judge
            .and_then(|judge| judge.key.as_deref())
            .and_then(|raw| match raw.parse::<KeyMode>() {
                Ok(mode) => Some(mode),
                Err(message) => {
                    self.error(at, "judge.key", message);
                    None
                }
            });
        let judge_penalty = judge.and_then(|judge| judge.penalty).map(|p| match p {
            RawPenalty::None => Penalty::None,
            RawPenalty::Sliding => Penalty::Sliding,
        });

        let errors = raw.errors.as_ref();
        let dynamic_range = match errors.and_then(|errors| errors.dynamic_range) {
            Some([min, max]) if min > max => {
                self.error(
                    at,
                    "errors.dynamicRange",
                    format!(
                        "the minimum ({min}) is more than the maximum ({max}): write [MIN, MAX] \
                         in seconds"
                    ),
                );
                DEFAULT_DYNAMIC_RANGE
            }
            Some([min, max]) => min..=max,
            None => DEFAULT_DYNAMIC_RANGE,
        };
        let shared = Shared { dynamic_range };

        let mut plan = FaultPlan {
            retry_after_form: match raw.retry_after_form {
                None | Some(RawRetryAfterForm::Delay) => RetryAfterForm::Delay,
                Some(RawRetryAfterForm::HttpDate) => RetryAfterForm::HttpDate,
                Some(RawRetryAfterForm::Mixed) => RetryAfterForm::Mixed,
            },
            ..FaultPlan::default()
        };

        if let Some(errors) = errors {
            let default_rate = match errors.rate {
                Some(rate) => self.rate(at, "errors.rate", rate),
                None => Rate::percent(DEFAULT_ERROR_RATE),
            }
            .unwrap_or(Rate::NEVER);
            for (i, rule) in errors.errors.iter().enumerate() {
                let path = index("errors.errors", i);
                if let Some(rule) = self.error_rule(at, &path, rule, default_rate, &shared) {
                    plan.errors.push(rule);
                }
            }
            if let Some(name) = &errors.file {
                self.data_file(
                    at,
                    "errors.file",
                    name,
                    "errors",
                    |this, inner, data: RawErrorsFile| {
                        for (i, rule) in data.errors.iter().enumerate() {
                            let path = index("errors", i);
                            if let Some(rule) =
                                this.error_rule(inner, &path, rule, default_rate, &shared)
                            {
                                plan.errors.push(rule);
                            }
                        }
                    },
                );
            }
        }

        for (i, limit) in raw.rate_limits.iter().enumerate() {
            let path = index("rateLimits", i);
            if let Some(rule) = self.rate_limit(at, &path, limit, &shared) {
                plan.rate_limits.push(rule);
            }
        }

        if let Some(latency) = &raw.latency {
            plan.latency = self.latency(at, "latency", latency);
        }

        if let Some(mocks) = &raw.mocks {
            plan.block_unmocked = mocks.block_unmocked.unwrap_or(false);
            for (i, mock) in mocks.mocks.iter().enumerate() {
                let path = index("mocks.mocks", i);
                if let Some(mock) = self.mock(at, &path, mock, &shared) {
                    plan.mocks.push(mock);
                }
            }
            if let Some(name) = &mocks.file {
                self.data_file(
                    at,
                    "mocks.file",
                    name,
                    "mocks",
                    |this, inner, data: RawMocksFile| {
                        for (i, mock) in data.mocks.iter().enumerate() {
                            let path = index("mocks", i);
                            if let Some(mock) = this.mock(inner, &path, mock, &shared) {
                                plan.mocks.push(mock);
                            }
                        }
                    },
                );
            }
        }

        let state = raw.state.as_ref().and_then(|state| self.state(at, state));
        Compiled {
            plan,
            urls_to_watch,
            seed: raw.seed,
            judge_key,
            judge_penalty,
            data_files: Vec::new(),
            state,
            warnings: Vec::new(),
        }
    }

    /// Checks `state`. The URL is checked for its form only (connecting is the proxy's job),
    /// and never quoted back: it may hold a password.
    fn state(&mut self, at: Origin<'_>, raw: &RawState) -> Option<StateConfig> {
        let mut ok = true;
        // By bytes, never by slicing the text: a URL may start with any character.
        let starts_with = |scheme: &str| {
            raw.redis.len() > scheme.len()
                && raw.redis.as_bytes()[..scheme.len()].eq_ignore_ascii_case(scheme.as_bytes())
        };
        let scheme_ok = ["redis://", "rediss://", "redis+unix://", "unix://"]
            .into_iter()
            .any(starts_with);
        if !scheme_ok {
            ok = false;
            self.error(
                at,
                "state.redis",
                "expected a Redis URL: redis://[[USER]:PASSWORD@]HOST[:PORT][/DB], or rediss://… \
                 for TLS",
            );
        }
        if raw.timeout_ms == Some(0) {
            ok = false;
            self.error(
                at,
                "state.timeoutMs",
                "must be more than 0: how long one Redis operation may take, in milliseconds",
            );
        }
        let on_failure = match (raw.on_failure, raw.hold_seconds) {
            (Some(RawOnFailure::FailClosed), hold) => OnFailure::FailClosed {
                hold: hold.map_or(DEFAULT_STATE_HOLD, Duration::from_secs),
            },
            (_, Some(_)) => {
                ok = false;
                self.error(
                    at,
                    "state.holdSeconds",
                    "applies only with \"onFailure\": \"fail-closed\"; remove it or set onFailure",
                );
                OnFailure::FailOpen
            }
            _ => OnFailure::FailOpen,
        };
        if raw.prefix.as_deref() == Some("") {
            ok = false;
            self.error(
                at,
                "state.prefix",
                "must not be empty: every key holdoff writes starts with it (default \"holdoff:\")",
            );
        }
        let ca = raw.ca_file.as_deref().and_then(|name| {
            if !starts_with("rediss://") {
                ok = false;
                self.error(
                    at,
                    "state.caFile",
                    "applies only to a rediss:// URL (Redis over TLS); remove it or use rediss://",
                );
                return None;
            }
            let path = at.dir.join(name);
            match fs::read(&path) {
                Ok(pem) if pem.windows(27).any(|w| w == b"-----BEGIN CERTIFICATE-----") => {
                    self.read(&path);
                    Some(pem)
                }
                Ok(_) => {
                    ok = false;
                    self.error(
                        at,
                        "state.caFile",
                        format!(
                            "{} holds no PEM certificate (-----BEGIN CERTIFICATE-----)",
                            path.display()
                        ),
                    );
                    None
                }
                Err(err) => {
                    ok = false;
                    self.error(
                        at,
                        "state.caFile",
                        format!("cannot read {}: {err}", path.display()),
                    );
                    None
                }
            }
        });
        ok.then(|| StateConfig {
            redis: raw.redis.clone(),
            prefix: raw
                .prefix
                .clone()
                .unwrap_or_else(|| DEFAULT_STATE_PREFIX.to_owned()),
            timeout: raw
                .timeout_ms
                .map_or(DEFAULT_STATE_TIMEOUT, Duration::from_millis),
            on_failure,
            ca,
        })
    }

    /// Reads and parses the data file `name` (given at `path`, relative to the naming file's
    /// directory) and hands it to `each` with its own origin; reports why not otherwise.
    fn data_file<D: DeserializeOwned>(
        &mut self,
        at: Origin<'_>,
        path: &str,
        name: &str,
        what: &str,
        each: impl FnOnce(&mut Compiler, Origin<'_>, D),
    ) {
        if name.trim().is_empty() {
            self.error(
                at,
                path,
                format!("the {what} file name is empty: give a path relative to this file"),
            );
            return;
        }
        let file = at.dir.join(name);
        let text = match read_data_file(&file, what).and_then(|bytes| {
            String::from_utf8(bytes).map_err(|_| {
                format!(
                    "cannot read the {what} file {}: it is not UTF-8 text",
                    file.display()
                )
            })
        }) {
            Ok(text) => text,
            Err(message) => {
                self.error(at, path, message);
                return;
            }
        };
        self.read(&file);
        let display = file.display().to_string();
        match load::parse_for_path::<D>(&text, &file, &display) {
            Ok(data) => {
                let inner = Origin {
                    file: &display,
                    dir: file.parent().unwrap_or(Path::new("")),
                    root: at.root,
                };
                each(self, inner, data);
            }
            Err(errors) => self.errors.extend(errors.0),
        }
    }

    fn rate(&mut self, at: Origin<'_>, path: &str, percent: f64) -> Option<Rate> {
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

    fn pattern(
        &mut self,
        at: Origin<'_>,
        path: String,
        raw: &str,
        exclusion: Exclusion,
    ) -> Option<WatchPattern> {
        if exclusion == Exclusion::Refused && raw.starts_with('!') {
            self.error(
                at,
                path,
                format!(
                    "`{raw}` starts with `!`: a rule's URL pattern says which requests it \
                     applies to, and cannot exclude (exclusions go in urlsToWatch)"
                ),
            );
            return None;
        }
        match raw.parse::<WatchPattern>() {
            Ok(pattern) => Some(pattern),
            Err(_) if raw.is_empty() => {
                self.error(
                    at,
                    path,
                    "the URL pattern is empty: write a URL with `*` wildcards, such as \
                     https://api.example.com/* or *",
                );
                None
            }
            Err(err) => {
                self.error(
                    at,
                    path,
                    format!(
                        "{err}; a pattern is a URL with `*` wildcards, such as \
                         https://api.example.com/* or *"
                    ),
                );
                None
            }
        }
    }

    fn method(&mut self, at: Origin<'_>, path: String, raw: &str) -> Option<Method> {
        match Method::from_bytes(raw.trim().to_ascii_uppercase().as_bytes()) {
            Ok(method) if !raw.trim().is_empty() => Some(method),
            _ if raw.trim().is_empty() => {
                self.error(
                    at,
                    path,
                    "the method is empty: leave `method` out to match any, or write one such as \
                     GET or POST",
                );
                None
            }
            _ => {
                self.error(
                    at,
                    path,
                    format!(
                        "invalid method `{raw}`: expected a method name such as GET, POST or \
                         DELETE (letters, digits and !#$%&'*+-.^_`|~ only)"
                    ),
                );
                None
            }
        }
    }

    fn request(
        &mut self,
        at: Origin<'_>,
        path: &str,
        raw: &RawRequestMatch,
    ) -> Option<RequestMatch> {
        let url = self.pattern(at, key(path, "url"), &raw.url, Exclusion::Refused);
        let method = optional(raw.method.as_deref(), |method| {
            self.method(at, key(path, "method"), method)
        });
        Some(RequestMatch {
            url: url?,
            method: method?,
            body_fragment: raw.body_fragment.clone(),
        })
    }

    fn error_rule(
        &mut self,
        at: Origin<'_>,
        path: &str,
        raw: &RawErrorRule,
        default_rate: Rate,
        shared: &Shared,
    ) -> Option<ErrorRule> {
        let request_path = key(path, "request");
        let request = self.request(at, &request_path, &raw.request);
        if raw.request.nth.is_some() {
            self.error(
                at,
                key(&request_path, "nth"),
                "`nth` is for mocks only: an error rule fails a share of requests set by `rate`",
            );
        }
        let rate = match raw.rate {
            Some(rate) => self.rate(at, &key(path, "rate"), rate),
            None => Some(default_rate),
        };
        if raw.responses.is_empty() {
            self.error(
                at,
                key(path, "responses"),
                "there are no responses: a rule needs at least one (`statusCode` or `network`) \
                 to draw from",
            );
        }
        let mut outcomes = Vec::with_capacity(raw.responses.len());
        let mut complete = true;
        for (i, response) in raw.responses.iter().enumerate() {
            let response_path = index(&key(path, "responses"), i);
            match self.response(at, &response_path, response, shared) {
                Some(outcome) => outcomes.push(outcome),
                None => complete = false,
            }
        }
        if !complete || outcomes.is_empty() {
            return None;
        }
        Some(ErrorRule {
            request: request?,
            rate: rate?,
            outcomes,
        })
    }

    fn mock(
        &mut self,
        at: Origin<'_>,
        path: &str,
        raw: &RawMock,
        shared: &Shared,
    ) -> Option<MockRule> {
        let request_path = key(path, "request");
        let request = self.request(at, &request_path, &raw.request);
        let nth = match raw.request.nth {
            Some(0) => {
                self.error(
                    at,
                    key(&request_path, "nth"),
                    "`nth` counts matching requests from 1: 1 answers the first, 2 the second",
                );
                None
            }
            nth => Some(nth),
        };
        let response = self.response(at, &key(path, "response"), &raw.response, shared);
        Some(MockRule {
            request: request?,
            nth: nth?,
            response: response?,
        })
    }

    fn latency(&mut self, at: Origin<'_>, path: &str, raw: &RawLatency) -> Option<LatencyRule> {
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

    fn rate_limit(
        &mut self,
        at: Origin<'_>,
        path: &str,
        raw: &RawRateLimit,
        shared: &Shared,
    ) -> Option<RateLimitRule> {
        let url = optional(raw.url.as_deref(), |url| {
            self.pattern(at, key(path, "url"), url, Exclusion::Refused)
        });
        let method = optional(raw.method.as_deref(), |method| {
            self.method(at, key(path, "method"), method)
        });
        let mut valid = true;
        if raw.limit == 0 {
            self.error(
                at,
                key(path, "limit"),
                "the limit is 0: it must be at least 1 (units per window)",
            );
            valid = false;
        }
        if raw.window_seconds == 0 {
            self.error(
                at,
                key(path, "windowSeconds"),
                "the window is 0 seconds: it must be at least 1",
            );
            valid = false;
        }
        let cost = raw.cost.unwrap_or(1);
        if cost == 0 {
            self.error(
                at,
                key(path, "cost"),
                "the cost is 0: a request must cost at least 1 unit",
            );
            valid = false;
        } else if raw.limit > 0 && cost > raw.limit {
            self.error(
                at,
                key(path, "cost"),
                format!(
                    "the cost ({cost}) is more than the limit ({}): no request could ever pass; \
                     the cost must be from 1 to the limit",
                    raw.limit
                ),
            );
            valid = false;
        }
        let when_exceeded = match &raw.when_exceeded {
            Some(response) => {
                let response_path = key(path, "whenExceeded");
                if response.network.is_some() && response.status_code.is_none() {
                    self.error(
                        at,
                        key(&response_path, "network"),
                        "a rate limit's refusal must be a response (`statusCode`), not a \
                         network fault",
                    );
                    None
                } else {
                    match self.response(at, &response_path, response, shared) {
                        Some(Outcome::Respond(response)) => Some(Some(response)),
                        _ => None,
                    }
                }
            }
            None => Some(None),
        };
        if !valid {
            return None;
        }
        Some(RateLimitRule {
            url: url?,
            method: method?,
            limit: Limit {
                algorithm: match raw.algorithm {
                    None | Some(RawAlgorithm::FixedWindow) => Algorithm::FixedWindow,
                    Some(RawAlgorithm::SlidingWindow) => Algorithm::SlidingWindow,
                    Some(RawAlgorithm::TokenBucket) => Algorithm::TokenBucket,
                },
                limit: raw.limit,
                window: Duration::from_secs(raw.window_seconds),
                cost,
            },
            scope: match raw.scope {
                None | Some(RawScope::Client) => Scope::Client,
                Some(RawScope::Shared) => Scope::Shared,
            },
            headers: match raw.headers {
                None | Some(RawHeaderStyle::Ietf) => HeaderStyle::Ietf,
                Some(RawHeaderStyle::Draft) => HeaderStyle::Draft,
                Some(RawHeaderStyle::XRatelimit) => HeaderStyle::XRateLimit,
                Some(RawHeaderStyle::None) => HeaderStyle::None,
            },
            reset_format: match raw.reset_format {
                None | Some(RawResetFormat::SecondsLeft) => ResetFormat::SecondsLeft,
                Some(RawResetFormat::EpochSeconds) => ResetFormat::EpochSeconds,
            },
            when_exceeded: when_exceeded?,
        })
    }

    fn response(
        &mut self,
        at: Origin<'_>,
        path: &str,
        raw: &RawResponse,
        shared: &Shared,
    ) -> Option<Outcome> {
        let errors_before = self.errors.len();
        // Options that belong to one network fault only.
        let options = [
            (
                "truncateAfter",
                raw.truncate_after.is_some(),
                RawNetworkFault::Truncate,
            ),
            (
                "bytesPerSecond",
                raw.bytes_per_second.is_some(),
                RawNetworkFault::SlowBody,
            ),
            (
                "hangSeconds",
                raw.hang_seconds.is_some(),
                RawNetworkFault::Hang,
            ),
        ];
        for (name, present, fault) in options {
            if present && raw.network != Some(fault) {
                self.error(
                    at,
                    key(path, name),
                    format!("`{name}` goes only with `network: {}`", network_name(fault)),
                );
            }
        }
        match (raw.status_code, raw.network) {
            (Some(_), Some(_)) => {
                self.error(
                    at,
                    path,
                    "a response has `statusCode` or `network`, not both: either a response is \
                     sent or the network fails",
                );
                None
            }
            (None, None) => {
                self.error(
                    at,
                    path,
                    "a response needs `statusCode` (a status from 100 to 599, with optional \
                     `headers` and `body`) or `network` (reset, hang, truncate or slow-body)",
                );
                None
            }
            (None, Some(fault)) => {
                for (name, present) in [
                    ("headers", raw.headers.is_some()),
                    ("body", raw.body.is_some()),
                ] {
                    if present {
                        self.error(
                            at,
                            key(path, name),
                            format!(
                                "`{name}` goes only with `statusCode`: a network fault sends no \
                                 response"
                            ),
                        );
                    }
                }
                let fault = match fault {
                    RawNetworkFault::Reset => NetworkFault::Reset,
                    RawNetworkFault::Hang => NetworkFault::Hang {
                        r#for: match raw.hang_seconds {
                            Some(0) => {
                                self.error(
                                    at,
                                    key(path, "hangSeconds"),
                                    "`hangSeconds` is 0: it must be at least 1 (default 300)",
                                );
                                DEFAULT_HANG
                            }
                            Some(seconds) => Duration::from_secs(seconds),
                            None => DEFAULT_HANG,
                        },
                    },
                    RawNetworkFault::Truncate => NetworkFault::Truncate {
                        after: raw.truncate_after,
                    },
                    RawNetworkFault::SlowBody => NetworkFault::SlowBody {
                        bytes_per_second: match raw.bytes_per_second {
                            Some(0) => {
                                self.error(
                                    at,
                                    key(path, "bytesPerSecond"),
                                    "`bytesPerSecond` is 0: it must be at least 1 (default \
                                     1024)",
                                );
                                DEFAULT_BYTES_PER_SECOND
                            }
                            Some(rate) => rate,
                            None => DEFAULT_BYTES_PER_SECOND,
                        },
                    },
                };
                (self.errors.len() == errors_before).then_some(Outcome::Network(fault))
            }
            (Some(status), None) => {
                let status = match StatusCode::from_u16(status) {
                    Ok(code) if (100..=599).contains(&status) => Some(code),
                    _ => {
                        self.error(
                            at,
                            key(path, "statusCode"),
                            format!("{status} is not an HTTP status: expected 100 to 599"),
                        );
                        None
                    }
                };
                let mut headers = self.headers(at, path, raw.headers.as_ref(), shared);
                let body = self.body(at, &key(path, "body"), raw.body.as_ref(), &mut headers);
                if self.errors.len() != errors_before {
                    return None;
                }
                Some(Outcome::Respond(ErrorResponse {
                    status: status?,
                    headers,
                    body: body?,
                }))
            }
        }
    }

    fn headers(
        &mut self,
        at: Origin<'_>,
        path: &str,
        raw: Option<&RawHeaders>,
        shared: &Shared,
    ) -> Vec<(HeaderName, HeaderTemplate)> {
        let path = key(path, "headers");
        let pairs: Vec<(String, String, &str, &str)> = match raw {
            None => Vec::new(),
            Some(RawHeaders::List(list)) => list
                .iter()
                .enumerate()
                .map(|(i, h)| {
                    let at = index(&path, i);
                    (
                        key(&at, "name"),
                        key(&at, "value"),
                        h.name.as_str(),
                        h.value.as_str(),
                    )
                })
                .collect(),
            Some(RawHeaders::Map(map)) => map
                .iter()
                .map(|(name, value)| {
                    let at = key(&path, name);
                    (at.clone(), at, name.as_str(), value.as_str())
                })
                .collect(),
        };
        let mut headers = Vec::with_capacity(pairs.len());
        for (name_path, value_path, name, value) in pairs {
            let name = match HeaderName::from_bytes(name.as_bytes()) {
                Ok(name) if name == header::CONTENT_LENGTH || name == header::TRANSFER_ENCODING => {
                    self.error(
                        at,
                        name_path,
                        format!("`{name}` is set by the proxy from the body: leave it out"),
                    );
                    None
                }
                Ok(name) => Some(name),
                Err(_) => {
                    self.error(
                        at,
                        name_path,
                        format!(
                            "invalid header name `{name}`: a name is one or more letters, \
                             digits and !#$%&'*+-.^_`|~, with no spaces or colons"
                        ),
                    );
                    None
                }
            };
            let template = match HeaderTemplate::parse(value, shared.dynamic_range.clone()) {
                Some(template) => Some(template),
                None if is_dynamic(value) => {
                    self.error(
                        at,
                        &value_path,
                        format!(
                            "invalid `{}`: expected @dynamic (a wait drawn from \
                             errors.dynamicRange) or @dynamic=SECONDS (a whole number)",
                            value.trim()
                        ),
                    );
                    None
                }
                None => {
                    self.error(
                        at,
                        &value_path,
                        format!(
                            "invalid header value {value:?}: a value may not contain control \
                             characters such as a line break (tab is allowed)"
                        ),
                    );
                    None
                }
            };
            if let (Some(name), Some(template)) = (name, template) {
                if name == header::RETRY_AFTER {
                    self.check_retry_after(&value_path, &template);
                }
                headers.push((name, template));
            }
        }
        headers
    }

    /// The body's bytes; adds a `Content-Type` for it unless `headers` has one.
    fn body(
        &mut self,
        at: Origin<'_>,
        path: &str,
        raw: Option<&serde_json::Value>,
        headers: &mut Vec<(HeaderName, HeaderTemplate)>,
    ) -> Option<Bytes> {
        let (body, content_type) = match raw {
            None => (Bytes::new(), None),
            Some(serde_json::Value::String(text)) => match text.strip_prefix('@') {
                Some(name) if name.trim().is_empty() => {
                    self.error(
                        at,
                        path,
                        "`@` must be followed by a file path (relative to this file), such as \
                         @body.json",
                    );
                    return None;
                }
                Some(name) => {
                    let file = at.dir.join(name);
                    let root = (!self.bodies_anywhere).then_some(at.root);
                    match read_body_file(&file, root) {
                        Ok(bytes) => {
                            self.read(&file);
                            (Bytes::from(bytes), content_type_of(&file))
                        }
                        Err(message) => {
                            self.error(at, path, message);
                            return None;
                        }
                    }
                }
                None if text.is_empty() => (Bytes::new(), None),
                None => (Bytes::from(text.clone()), Some(TEXT)),
            },
            Some(value) => match serde_json::to_vec(value) {
                Ok(json) => (Bytes::from(json), Some(JSON)),
                Err(err) => {
                    self.error(at, path, format!("cannot write the body as JSON: {err}"));
                    return None;
                }
            },
        };
        if let Some(content_type) = content_type {
            if !headers.iter().any(|(name, _)| name == header::CONTENT_TYPE) {
                headers.push((
                    header::CONTENT_TYPE,
                    HeaderTemplate::Literal(HeaderValue::from_static(content_type)),
                ));
            }
        }
        Some(body)
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

/// Whether a rule's URL pattern may be an exclusion.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Exclusion {
    /// `urlsToWatch`.
    Allowed,
    /// A rule's own URL: it picks requests, it cannot exclude them.
    Refused,
}

const TEXT: &str = "text/plain; charset=utf-8";
const JSON: &str = "application/json";

/// The `Content-Type` of a body file, by its extension; `None` when unknown.
fn content_type_of(file: &Path) -> Option<&'static str> {
    let extension = file.extension()?.to_str()?.to_ascii_lowercase();
    Some(match extension.as_str() {
        "json" => JSON,
        "txt" => TEXT,
        "html" | "htm" => "text/html; charset=utf-8",
        "xml" => "application/xml",
        _ => return None,
    })
}

/// Reads the body file `file`, which must resolve (symbolic links followed) to a place under
/// `root` when one is given; the error is a message fit after the key path.
fn read_body_file(file: &Path, root: Option<&Path>) -> Result<Vec<u8>, String> {
    let cannot =
        |err: std::io::Error| format!("cannot read the body file {}: {err}", file.display());
    let resolved = fs::canonicalize(file).map_err(cannot)?;
    if let Some(root) = root {
        // `compile(…, Path::new(""))`: relative to the current directory.
        let root = if root.as_os_str().is_empty() {
            Path::new(".")
        } else {
            root
        };
        let root = fs::canonicalize(root).map_err(|err| {
            format!(
                "cannot find the configuration's folder {} that body files are read from: {err}",
                root.display()
            )
        })?;
        if !resolved.starts_with(&root) {
            let resolves = if resolved == file {
                String::new()
            } else {
                format!(" resolves to {}, which", resolved.display())
            };
            return Err(format!(
                "the body file {}{resolves} is outside the configuration's folder {}: body \
                 files are read only from under it (after symbolic links are followed); copy \
                 the file there, or set \"bodyFilesAnywhere\": true at the top of the \
                 configuration to allow any folder",
                file.display(),
                root.display()
            ));
        }
    }
    // The resolved path: what was checked is what is opened.
    read_regular(&resolved, file, "body")
}

/// Reads the data file `file` whole; `what` (`errors`, `mocks`) names it in the error.
fn read_data_file(file: &Path, what: &str) -> Result<Vec<u8>, String> {
    read_regular(file, file, what)
}

/// Reads `file` whole, if it is a regular file of at most [`MAX_DATA_FILE_BYTES`]; the error,
/// a message fit after the key path, calls it the `what` file `shown`.
///
/// A named pipe would block the open until something writes to it, and a device such as
/// `/dev/zero` never ends: the type is checked before the file is opened, and again on the
/// opened file, and no more than the limit is read whatever size the file claims.
fn read_regular(file: &Path, shown: &Path, what: &str) -> Result<Vec<u8>, String> {
    let shown = shown.display();
    let cannot = |err: std::io::Error| format!("cannot read the {what} file {shown}: {err}");
    let not_regular = |kind: &str| {
        format!("the {what} file {shown} is {kind}, not a regular file: name a regular file")
    };
    let too_large = || {
        format!(
            "the {what} file {shown} is larger than {} MiB, the most holdoff reads from one: \
             make it smaller",
            MAX_DATA_FILE_BYTES / (1024 * 1024)
        )
    };
    let before = fs::metadata(file).map_err(cannot)?;
    if !before.is_file() {
        return Err(not_regular(file_kind(&before)));
    }
    if before.len() > MAX_DATA_FILE_BYTES {
        return Err(too_large());
    }
    let opened = File::open(file).map_err(cannot)?;
    let metadata = opened.metadata().map_err(cannot)?;
    if !metadata.is_file() {
        return Err(not_regular(file_kind(&metadata)));
    }
    let mut bytes = Vec::new();
    opened
        .take(MAX_DATA_FILE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(cannot)?;
    if u64::try_from(bytes.len()).map_or(true, |read| read > MAX_DATA_FILE_BYTES) {
        return Err(too_large());
    }
    Ok(bytes)
}

/// What a file that is not a regular file is, in words.
fn file_kind(metadata: &fs::Metadata) -> &'static str {
    let kind = metadata.file_type();
    if kind.is_dir() {
        return "a directory";
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if kind.is_fifo() {
            return "a named pipe (FIFO)";
        }
        if kind.is_socket() {
            return "a socket";
        }
        if kind.is_block_device() || kind.is_char_device() {
            return "a device";
        }
    }
    "of another kind"
}

/// Whether a header value was meant as `@dynamic…`.
fn is_dynamic(value: &str) -> bool {
    value
        .trim()
        .get(..8)
        .is_some_and(|prefix| prefix.eq_ignore_ascii_case("@dynamic"))
}

fn network_name(fault: RawNetworkFault) -> &'static str {
    match fault {
        RawNetworkFault::Reset => "reset",
        RawNetworkFault::Hang => "hang",
        RawNetworkFault::Truncate => "truncate",
        RawNetworkFault::SlowBody => "slow-body",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::load::{Format, parse};

    /// The fixtures of `tests/config_errors.rs`, from the crate's directory.
    const FIXTURES: &str = "tests/fixtures/config";

    fn compiled(text: &str) -> Compiled {
        let raw = parse(text, Format::Json, "holdoff.json").expect("parses");
        compile(&raw, "holdoff.json", Path::new(FIXTURES)).unwrap_or_else(|e| panic!("{e}"))
    }

    fn respond(outcome: &Outcome) -> &ErrorResponse {
        match outcome {
            Outcome::Respond(response) => response,
            other => panic!("a response, not {other:?}"),
        }
    }

    fn header<'a>(response: &'a ErrorResponse, name: &str) -> Option<&'a HeaderTemplate> {
        response
            .headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, template)| template)
    }

    fn literal(value: &'static str) -> HeaderTemplate {
        HeaderTemplate::Literal(HeaderValue::from_static(value))
    }

    mod check_retry_after {
        use super::*;

        fn warnings(retry_after: &str) -> Vec<String> {
            compiled(&format!(
                r#"{{"errors": {{"rate": 100, "errors": [{{"request": {{"url": "*"}},
                    "responses": [{{"statusCode": 429, "headers": {{"Retry-After": "{retry_after}"}}}}]}}]}}}}"#
            ))
            .warnings
        }

        #[test]
        fn warns_of_a_static_value_clients_cannot_read_and_keeps_it() {
            let found = warnings("soon");
            assert_eq!(found.len(), 1, "{found:?}");
            assert!(found[0].starts_with("errors.errors[0]"), "{}", found[0]);
            assert!(
                found[0].contains("`Retry-After: soon` is malformed"),
                "{}",
                found[0]
            );
            assert!(found[0].contains("sent as is"), "{}", found[0]);
            assert_eq!(warnings("-1").len(), 1);
        }

        #[test]
        fn is_quiet_for_seconds_dates_and_dynamic_values() {
            for value in [
                "2",
                "Sun, 06 Nov 1994 08:49:37 GMT",
                "@dynamic",
                "@dynamic=3",
            ] {
                assert_eq!(warnings(value), Vec::<String>::new(), "{value}");
            }
        }
    }

    mod compile {
        use super::*;

        #[test]
        fn fills_in_the_defaults() {
            let compiled = compiled(
                r#"{"errors": {"errors": [{"request": {"url": "*"},
                    "responses": [{"statusCode": 429, "headers": {"Retry-After": "@dynamic"}}]}]}}"#,
            );
            assert_eq!(compiled.urls_to_watch, None);
            assert_eq!(compiled.judge_key, None);
            assert_eq!(compiled.plan.retry_after_form, RetryAfterForm::Delay);
            let rule = &compiled.plan.errors[0];
            assert_eq!(rule.rate.as_percent(), DEFAULT_ERROR_RATE);
            assert_eq!(rule.request.method, None);
            let response = respond(&rule.outcomes[0]);
            assert_eq!(response.status, StatusCode::TOO_MANY_REQUESTS);
            assert_eq!(
                header(response, "retry-after"),
                Some(&HeaderTemplate::Dynamic(DEFAULT_DYNAMIC_RANGE))
            );
            assert!(response.body.is_empty());
            assert_eq!(header(response, "content-type"), None);
        }

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
                Outcome::Network(NetworkFault::Hang { r#for }) if r#for == DEFAULT_HANG
            ));
            let latency = plan.latency.expect("set");
            assert_eq!(latency.rate, Rate::ALWAYS);
            assert_eq!(
                latency.delay,
                Duration::from_millis(10)..=Duration::from_millis(20)
            );
        }

        #[test]
        fn types_text_and_json_bodies_unless_told() {
            let compiled = compiled(
                r#"{"errors": {"errors": [{"request": {"url": "*"}, "responses": [
                    {"statusCode": 503, "body": "down"},
                    {"statusCode": 429, "body": {"error": {"code": 429}}},
                    {"statusCode": 429, "body": [1], "headers": {"Content-Type": "application/problem+json"}}
                ]}]}}"#,
            );
            let outcomes = &compiled.plan.errors[0].outcomes;
            let text = respond(&outcomes[0]);
            assert_eq!(text.body, "down");
            assert_eq!(header(text, "content-type"), Some(&literal(TEXT)));
            let json = respond(&outcomes[1]);
            assert_eq!(json.body, r#"{"error":{"code":429}}"#);
            assert_eq!(header(json, "content-type"), Some(&literal(JSON)));
            let problem = respond(&outcomes[2]);
            assert_eq!(problem.headers.len(), 1);
            assert_eq!(
                header(problem, "content-type"),
                Some(&literal("application/problem+json"))
            );
        }

        #[test]
        fn reads_body_files_and_data_files_and_lists_them() {
            let compiled = compiled(
                r#"{"errors": {"errors": [{"request": {"url": "*"},
                        "responses": [{"statusCode": 500, "body": "@body.json"}]}]},
                    "mocks": {"file": "mocks.yaml", "blockUnmocked": true}}"#,
            );
            let response = respond(&compiled.plan.errors[0].outcomes[0]);
            assert_eq!(response.body, "{\"error\": \"from a file\"}\n");
            assert_eq!(header(response, "content-type"), Some(&literal(JSON)));
            let plan = &compiled.plan;
            assert!(plan.block_unmocked);
            let [mock] = plan.mocks.as_slice() else {
                panic!("one mock from the file")
            };
            assert_eq!(mock.request.method, Some(Method::GET));
            assert_eq!(mock.nth, None);
            assert_eq!(respond(&mock.response).body, response.body);
            let names: Vec<_> = compiled
                .data_files
                .iter()
                .map(|path| {
                    assert!(path.is_absolute(), "{}", path.display());
                    path.file_name().and_then(|n| n.to_str()).expect("a name")
                })
                .collect();
            assert_eq!(names, ["body.json", "mocks.yaml"]);
        }

        #[test]
        fn puts_a_data_files_rules_after_the_inline_ones() {
            let compiled = compiled(
                r#"{"errors": {"file": "nested/errors.yaml", "errors": [
                    {"request": {"url": "https://first.example/*"}, "responses": [{"network": "reset"}]}]}}"#,
            );
            let urls: Vec<_> = compiled
                .plan
                .errors
                .iter()
                .map(|rule| rule.request.url.as_str())
                .collect();
            assert_eq!(
                urls,
                ["https://first.example/*", "https://second.example/*"]
            );
            // `@../body.json` is relative to nested/, where the errors file is.
            let response = respond(&compiled.plan.errors[1].outcomes[0]);
            assert_eq!(response.body, "{\"error\": \"from a file\"}\n");
            assert_eq!(compiled.data_files.len(), 2);
        }

        #[test]
        fn reports_only_the_bad_rules_of_a_data_file() {
            let raw = parse(
                r#"{"errors": {"file": "errors-invalid.json"}}"#,
                Format::Json,
                "holdoff.json",
            )
            .expect("parses");
            let errors = compile(&raw, "holdoff.json", Path::new(FIXTURES)).expect_err("invalid");
            assert_eq!(errors.0.len(), 3, "{errors}");
            for error in &errors.0 {
                assert_eq!(error.file, "tests/fixtures/config/errors-invalid.json");
                assert!(error.path.starts_with("errors[1]."), "{errors}");
            }
        }

        #[test]
        fn compiles_a_rate_limit_and_its_refusal() {
            let compiled = compiled(
                r#"{"rateLimits": [{"url": "https://api.example.com/*", "method": "get",
                    "algorithm": "token-bucket", "limit": 10, "windowSeconds": 60, "cost": 2,
                    "scope": "shared", "headers": "x-ratelimit", "resetFormat": "epoch-seconds",
                    "whenExceeded": {"statusCode": 403, "headers": {"Retry-After": "@dynamic"},
                                     "body": {"message": "API rate limit exceeded"}}}]}"#,
            );
            let rule = &compiled.plan.rate_limits[0];
            assert_eq!(
                rule.limit,
                Limit {
                    algorithm: Algorithm::TokenBucket,
                    limit: 10,
                    window: Duration::from_secs(60),
                    cost: 2,
                }
            );
            assert_eq!(rule.method, Some(Method::GET));
            assert_eq!(rule.scope, Scope::Shared);
            assert_eq!(rule.headers, HeaderStyle::XRateLimit);
            assert_eq!(rule.reset_format, ResetFormat::EpochSeconds);
            let refusal = rule.when_exceeded.as_ref().expect("set");
            assert_eq!(refusal.status, StatusCode::FORBIDDEN);
            assert_eq!(header(refusal, "content-type"), Some(&literal(JSON)));
        }
    }
}
