//! [`ConfigError`]: one setting of a [`ProxyConfig`](super::ProxyConfig) that cannot work.

use std::fmt;
use std::net::IpAddr;

/// A setting that cannot work, said in terms of [`ProxyConfig`](super::ProxyConfig)'s fields.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ConfigError {
    /// A non-loopback listen address without proxy credentials.
    OpenToNetwork {
        /// The address asked for.
        ip: IpAddr,
    },
    /// A duration or limit that must be positive is zero.
    Zero {
        /// The field.
        key: &'static str,
    },
    /// A limit below its minimum.
    TooSmall {
        /// The field.
        key: &'static str,
        /// The smallest value allowed.
        min: usize,
    },
    /// An upstream URL that cannot be used.
    Upstream {
        /// The value given.
        value: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// A watch-list pattern that cannot be used.
    WatchPattern {
        /// The pattern given.
        pattern: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// Credentials not of the form `user:password` with a non-empty user.
    Credentials,
    /// Interception needs a CA, and no data directory was found to keep it in.
    NoCaDir,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConfigError::OpenToNetwork { ip } => write!(
                f,
                "refusing to listen on {ip} without proxy credentials (proxy_auth): anyone on \
                 the network could use this proxy"
            ),
            ConfigError::Zero { key } => write!(f, "{key} must be greater than zero"),
            ConfigError::TooSmall { key, min } => write!(f, "{key} must be at least {min}"),
            ConfigError::Upstream { value, reason } => {
                write!(f, "invalid upstream `{value}`: {reason}")
            }
            ConfigError::WatchPattern { pattern, reason } => {
                write!(f, "invalid URL pattern `{pattern}`: {reason}")
            }
            ConfigError::Credentials => f.write_str(
                "invalid proxy credentials: expected USER:PASSWORD with a non-empty user name \
                 and no `:` in it",
            ),
            ConfigError::NoCaDir => f.write_str(
                "no data directory found to keep the CA in: give a CA directory (ca_dir)",
            ),
        }
    }
}

impl std::error::Error for ConfigError {}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    mod display {
        use super::*;

        #[test]
        fn says_why_an_open_address_is_refused() {
            let err = ConfigError::OpenToNetwork {
                ip: IpAddr::V4(Ipv4Addr::UNSPECIFIED),
            };
            assert_eq!(
                err.to_string(),
                "refusing to listen on 0.0.0.0 without proxy credentials (proxy_auth): anyone \
                 on the network could use this proxy"
            );
        }
    }
}
