//! holdoff's configuration files, read the way `holdoff proxy --config` reads them: JSON with
//! comments or YAML ([`load`]), checked and compiled into the
//! [`FaultPlan`](holdoff_proxy::fault::FaultPlan) the proxy runs ([`compile`]), Microsoft Dev
//! Proxy configurations imported into the same shape ([`devproxy`]), the built-in presets
//! ([`preset`]) and the JSON Schema of the file ([`schema`]).
//!
//! Configuration goes in three stages: the raw serde types of [`file`](mod@file) (every field as the
//! user spelled it) → each value validated, every problem collected as a [`FileError`] that
//! names its file and key path → the compiled plan. The engine itself, `holdoff-proxy`, knows
//! nothing of files: it is given a [`ProxyConfig`](holdoff_proxy::ProxyConfig) and stages.
//!
//! ```
//! use std::path::Path;
//! use holdoff_config::{compile, load};
//!
//! let text = r#"{ "urlsToWatch": ["https://api.example.com/*"],
//!                 "rateLimits": [{ "limit": 100, "windowSeconds": 60 }] }"#;
//! let raw = load::parse(text, load::Format::Json, "holdoff.json")?;
//! let compiled = compile::compile(&raw, "holdoff.json", Path::new("."))?;
//! assert_eq!(compiled.plan.to_string(), "1 rate limit");
//! # Ok::<(), holdoff_config::ConfigProblems>(())
//! ```
#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod compile;
pub mod devproxy;
mod error;
pub mod file;
mod files;
mod jsonc;
pub mod load;
pub mod preset;
pub mod schema;

pub use error::{ConfigProblems, FileError};
