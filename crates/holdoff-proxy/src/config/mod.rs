//! What the proxy is told: [`ProxyConfig`], checked by [`ProxyConfig::validate`]. Files are
//! read and compiled into stages by the `holdoff-config` crate, above the engine.

mod auth;
mod error;
mod upstream;
mod watch;

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

pub use auth::Credentials;
pub(crate) use auth::proxy_user;
pub use error::ConfigError;
pub use upstream::Upstream;
pub use watch::WatchPattern;
pub(crate) use watch::{UrlParts, WatchList};

use crate::tls::CertificateAuthority;

/// The port the proxy listens on by default, as Dev Proxy.
pub const DEFAULT_PORT: u16 = 8000;

/// How the proxy is set up: where it listens, what it forwards where, what it intercepts, and
/// its limits.
///
/// Start from [`ProxyConfig::default`] and set the fields you need.
///
/// # Examples
///
/// ```
/// use holdoff_proxy::ProxyConfig;
/// use std::net::{Ipv4Addr, SocketAddr};
///
/// let mut config = ProxyConfig::default();
/// config.listen = SocketAddr::from((Ipv4Addr::LOCALHOST, 0));
/// config.urls_to_watch = vec!["https://api.example.com/*".parse()?];
/// config.validate()?;
///
/// config.listen = SocketAddr::from((Ipv4Addr::UNSPECIFIED, 8000));
/// assert!(config.validate().is_err(), "open to the network without credentials");
/// # Ok::<(), holdoff_proxy::ConfigError>(())
/// ```
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct ProxyConfig {
    /// The address to listen on; port 0 picks a free one. Default `127.0.0.1:8000`.
    pub listen: SocketAddr,
    /// Reverse-proxy mode: send every request to this upstream. Default: none (a forward
    /// proxy).
    pub upstream: Option<Upstream>,
    /// Which URLs are watched (and, for HTTPS, intercepted). Default: none. In reverse-proxy
    /// mode an empty list watches everything.
    pub urls_to_watch: Vec<WatchPattern>,
    /// Extra root certificates (PEM files) trusted for upstream TLS, besides the system's.
    pub upstream_ca: Vec<PathBuf>,
    /// Where the CA that signs intercepted hosts' certificates comes from. It is loaded only
    /// when something can be intercepted.
    pub ca: CaSource,
    /// Credentials every client must send in `Proxy-Authorization`. Required to listen on a
    /// non-loopback address.
    pub proxy_auth: Option<Credentials>,
    /// How long an upstream may make no progress before the client gets `504`: to connect,
    /// to take the next piece of the request body, to send its response head once the whole
    /// request is sent, or the next piece of its response body (which then ends with an error).
    /// Default 30 s.
    pub upstream_timeout: Duration,
    /// How long a client connection may sit without sending a complete request head (idle
    /// keep-alive included) before it is closed. Default 60 s.
    pub idle_timeout: Duration,
    /// How long a write to a client may make no progress — the client reads nothing of its
    /// response — before the connection is closed, as nginx's `send_timeout`. Default 60 s.
    pub send_timeout: Duration,
    /// On shutdown, how long requests in flight may take to finish before they are cut.
    /// Default 5 s.
    pub grace: Duration,
    /// At most this many client connections (tunnels included) at once; more wait in the
    /// listen backlog. Default 10,000.
    pub max_connections: usize,
    /// At most this many of those from one peer address at once; more are refused as they
    /// are accepted. A loopback peer told apart by process (`client_id` auto, on Linux) is
    /// counted per process instead, once its process is known, so that one process cannot
    /// take the places of the others on the same address. Default (`None`): a quarter of
    /// `max_connections`, see [`connections_per_peer`](ProxyConfig::connections_per_peer).
    pub max_connections_per_peer: Option<usize>,
    /// The largest request head (request line and headers) accepted, in bytes; a larger one
    /// gets `431`. Default 64 KiB.
    pub max_header_bytes: usize,
    /// Serve connections on this many threads of their own, each a single-threaded runtime
    /// that keeps a connection, its requests and its own upstream connection together, as
    /// an event loop per core does; `0` (the default) serves them on the runtime that runs
    /// the server. `holdoff proxy` uses one per core.
    pub connection_threads: usize,
    /// How a client that does not name itself (by proxy credentials or `X-Holdoff-Client`)
    /// is told apart. Default [`ClientIdMode::Auto`]: by its process when it can be found.
    pub client_id: ClientIdMode,
}

impl Default for ProxyConfig {
    fn default() -> ProxyConfig {
        ProxyConfig {
            listen: SocketAddr::from((Ipv4Addr::LOCALHOST, DEFAULT_PORT)),
            upstream: None,
            urls_to_watch: Vec::new(),
            upstream_ca: Vec::new(),
            ca: CaSource::default(),
            proxy_auth: None,
            upstream_timeout: Duration::from_secs(30),
            idle_timeout: Duration::from_secs(60),
            send_timeout: Duration::from_secs(60),
            grace: Duration::from_secs(5),
            max_connections: 10_000,
            max_connections_per_peer: None,
            max_header_bytes: 64 * 1024,
            connection_threads: 0,
            client_id: ClientIdMode::default(),
        }
    }
}

/// The smallest `max_header_bytes` accepted: room for a request line and a few headers.
const MIN_HEADER_BYTES: usize = 1024;

impl ProxyConfig {
    /// Checks the settings against each other and the safety rules.
    ///
    /// # Errors
    ///
    /// The first problem found: listening beyond loopback without [`proxy_auth`], a zero
    /// timeout or limit.
    ///
    /// [`proxy_auth`]: ProxyConfig::proxy_auth
    pub fn validate(&self) -> Result<(), ConfigError> {
        let ip = self.listen.ip();
        if !is_loopback(ip) && self.proxy_auth.is_none() {
            return Err(ConfigError::OpenToNetwork { ip });
        }
        for (key, value) in [
            ("upstream_timeout", self.upstream_timeout),
            ("idle_timeout", self.idle_timeout),
            ("send_timeout", self.send_timeout),
        ] {
            if value.is_zero() {
                return Err(ConfigError::Zero { key });
            }
        }
        for (key, value) in [
            ("max_connections", Some(self.max_connections)),
            ("max_connections_per_peer", self.max_connections_per_peer),
        ] {
            if value == Some(0) {
                return Err(ConfigError::Zero { key });
            }
        }
        if self.max_header_bytes < MIN_HEADER_BYTES {
            return Err(ConfigError::TooSmall {
                key: "max_header_bytes",
                min: MIN_HEADER_BYTES,
            });
        }
        Ok(())
    }

    /// How many connections one peer address may hold at once: `max_connections_per_peer`,
    /// else a quarter of `max_connections` (2,500 by default).
    ///
    /// A quarter leaves most of the slots to other peers when one opens connections without
    /// end, and is still far more than a parallel test suite opens: under `holdoff run` every
    /// client is the one loopback peer, so a small limit would refuse the suite itself.
    pub fn connections_per_peer(&self) -> usize {
        self.max_connections_per_peer
            .unwrap_or(self.max_connections / 4)
            .max(1)
    }

    /// Whether this configuration can intercept HTTPS (and so needs a CA): a forward proxy
    /// with at least one inclusion in its watch list that can match an `https://` URL. A
    /// proxy that watches only `http://` URLs neither loads nor creates a CA.
    pub fn intercepts(&self) -> bool {
        self.upstream.is_none()
            && self
                .urls_to_watch
                .iter()
                .any(|p| !p.is_exclusion() && p.can_match_https())
    }
}

/// Loopback, including an IPv4-mapped IPv6 loopback address.
fn is_loopback(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => v4.is_loopback(),
        IpAddr::V6(v6) => {
            v6.is_loopback() || v6.to_ipv4_mapped().is_some_and(|v4| v4.is_loopback())
        }
    }
}

/// How the proxy tells apart clients that do not name themselves.
///
/// A name always wins: proxy credentials, then `X-Holdoff-Client`. Without one, a client is
/// [`ClientId::Process`](crate::ClientId::Process) or [`ClientId::Peer`](crate::ClientId::Peer).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ClientIdMode {
    /// The process at the other end of the connection, when the peer is loopback and the
    /// system says which (Linux, under `/proc`, looked up once per connection); else the peer
    /// address. Every process on the machine connects from `127.0.0.1`: this keeps them apart.
    #[default]
    Auto,
    /// The peer address, always: no lookup.
    Peer,
}

/// Where the interception CA comes from.
#[derive(Clone, Debug, Default)]
#[non_exhaustive]
pub enum CaSource {
    /// Loaded from, or created in, the user's data directory
    /// ([`CertificateAuthority::default_dir`]).
    #[default]
    DefaultDir,
    /// Loaded from, or created in, this directory.
    Dir(PathBuf),
    /// A throwaway CA made in memory for this run.
    Ephemeral,
    /// This CA, already loaded.
    Provided(Arc<CertificateAuthority>),
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv6Addr;

    mod validate {
        use super::*;

        #[test]
        fn accepts_the_defaults() {
            assert_eq!(ProxyConfig::default().validate(), Ok(()));
        }

        #[test]
        fn refuses_a_non_loopback_address_without_credentials() {
            let mut config = ProxyConfig {
                listen: SocketAddr::from((Ipv4Addr::UNSPECIFIED, 8000)),
                ..ProxyConfig::default()
            };
            assert_eq!(
                config.validate(),
                Err(ConfigError::OpenToNetwork {
                    ip: IpAddr::V4(Ipv4Addr::UNSPECIFIED)
                })
            );
            config.proxy_auth = Some("alice:secret".parse().unwrap());
            assert_eq!(config.validate(), Ok(()));
        }

        #[test]
        fn counts_every_loopback_form_as_loopback() {
            for ip in [
                IpAddr::V4(Ipv4Addr::new(127, 0, 0, 1)),
                IpAddr::V4(Ipv4Addr::new(127, 1, 2, 3)),
                IpAddr::V6(Ipv6Addr::LOCALHOST),
                IpAddr::V6(Ipv4Addr::LOCALHOST.to_ipv6_mapped()),
            ] {
                let config = ProxyConfig {
                    listen: SocketAddr::new(ip, 0),
                    ..ProxyConfig::default()
                };
                assert_eq!(config.validate(), Ok(()), "{ip}");
            }
        }

        #[test]
        fn refuses_zero_limits() {
            let config = ProxyConfig {
                upstream_timeout: Duration::ZERO,
                ..ProxyConfig::default()
            };
            assert_eq!(
                config.validate(),
                Err(ConfigError::Zero {
                    key: "upstream_timeout"
                })
            );
            let config = ProxyConfig {
                max_connections_per_peer: Some(0),
                ..ProxyConfig::default()
            };
            assert_eq!(
                config.validate(),
                Err(ConfigError::Zero {
                    key: "max_connections_per_peer"
                })
            );
            let config = ProxyConfig {
                max_header_bytes: 10,
                ..ProxyConfig::default()
            };
            assert!(matches!(
                config.validate(),
                Err(ConfigError::TooSmall { .. })
            ));
        }
    }

    mod intercepts {
        use super::*;

        #[test]
        fn only_in_forward_mode_with_an_inclusion() {
            let mut config = ProxyConfig::default();
            assert!(!config.intercepts());
            config.urls_to_watch = vec!["!https://a.com/*".parse().unwrap()];
            assert!(!config.intercepts());
            config
                .urls_to_watch
                .push("https://b.com/*".parse().unwrap());
            assert!(config.intercepts());
            config.upstream = Some("http://127.0.0.1:3000".parse().unwrap());
            assert!(!config.intercepts());
        }

        #[test]
        fn not_when_only_plain_http_is_watched() {
            let mut config = ProxyConfig {
                urls_to_watch: vec![
                    "http://api.example.com/*".parse().unwrap(),
                    "http://127.0.0.1:*/*".parse().unwrap(),
                ],
                ..ProxyConfig::default()
            };
            assert!(!config.intercepts());
            for https in ["https://a.com/*", "http*://a.com/*", "*.a.com", "*"] {
                config.urls_to_watch = vec![https.parse().unwrap()];
                assert!(config.intercepts(), "{https}");
            }
        }
    }

    mod connections_per_peer {
        use super::*;

        #[test]
        fn is_a_quarter_of_the_connections_unless_set() {
            let mut config = ProxyConfig::default();
            assert_eq!(config.connections_per_peer(), 2_500);
            config.max_connections = 2;
            assert_eq!(config.connections_per_peer(), 1, "never zero");
            config.max_connections_per_peer = Some(7);
            assert_eq!(config.connections_per_peer(), 7);
        }
    }
}
