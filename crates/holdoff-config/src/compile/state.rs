//! `state`: where the judge's windows and the rate limiters' counters are shared with other
//! replicas.

use std::fmt;
use std::fs;
use std::time::Duration;

use super::{Compiler, WrittenIn};
use crate::file::{RawOnFailure, RawState};
use holdoff_proxy::shared::OnFailure;

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

impl Compiler {
    /// Checks `state`. The URL is checked for its form only (connecting is the proxy's job),
    /// and never quoted back: it may hold a password.
    pub(super) fn state(&mut self, at: WrittenIn<'_>, raw: &RawState) -> Option<StateConfig> {
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
}
