//! [`ProxyError`]: why the proxy could not start.

use std::error::Error as StdError;
use std::fmt;
use std::io;
use std::net::SocketAddr;

use crate::config::ConfigError;
use crate::tls::TlsError;

/// The broad reason the proxy could not start.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The configuration is invalid or unsafe; see [`ProxyError::config`].
    Config,
    /// The listening socket could not be bound (the port is taken, the address is not local,
    /// permission denied); see [`ProxyError::io_kind`].
    Bind,
    /// The interception CA could not be loaded or created.
    Ca,
    /// The upstream root certificates could not be loaded.
    UpstreamRoots,
}

/// Why [`ProxyServer::bind`](crate::ProxyServer::bind) failed.
///
/// `Display` says what was being done, lowercase, fitting after "failed to …"; the cause is
/// in [`source`](StdError::source).
#[derive(Debug)]
pub struct ProxyError {
    repr: Repr,
}

#[derive(Debug)]
enum Repr {
    Config(ConfigError),
    Bind { addr: SocketAddr, source: io::Error },
    Ca(TlsError),
    UpstreamRoots(TlsError),
}

impl ProxyError {
    pub(crate) fn bind(addr: SocketAddr, source: io::Error) -> ProxyError {
        ProxyError {
            repr: Repr::Bind { addr, source },
        }
    }

    pub(crate) fn ca(source: TlsError) -> ProxyError {
        ProxyError {
            repr: Repr::Ca(source),
        }
    }

    pub(crate) fn upstream_roots(source: TlsError) -> ProxyError {
        ProxyError {
            repr: Repr::UpstreamRoots(source),
        }
    }

    /// The broad reason.
    pub fn kind(&self) -> ErrorKind {
        match self.repr {
            Repr::Config(_) => ErrorKind::Config,
            Repr::Bind { .. } => ErrorKind::Bind,
            Repr::Ca(_) => ErrorKind::Ca,
            Repr::UpstreamRoots(_) => ErrorKind::UpstreamRoots,
        }
    }

    /// The configuration problem, for [`ErrorKind::Config`].
    pub fn config(&self) -> Option<&ConfigError> {
        match &self.repr {
            Repr::Config(err) => Some(err),
            _ => None,
        }
    }

    /// The address that could not be bound, for [`ErrorKind::Bind`].
    pub fn addr(&self) -> Option<SocketAddr> {
        match self.repr {
            Repr::Bind { addr, .. } => Some(addr),
            _ => None,
        }
    }

    /// The operating system's reason, for [`ErrorKind::Bind`] (e.g.
    /// [`io::ErrorKind::AddrInUse`]).
    pub fn io_kind(&self) -> Option<io::ErrorKind> {
        match &self.repr {
            Repr::Bind { source, .. } => Some(source.kind()),
            _ => None,
        }
    }
}

impl From<ConfigError> for ProxyError {
    fn from(err: ConfigError) -> ProxyError {
        ProxyError {
            repr: Repr::Config(err),
        }
    }
}

impl fmt::Display for ProxyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.repr {
            Repr::Config(_) => f.write_str("accept the configuration"),
            Repr::Bind { addr, .. } => write!(f, "listen on {addr}"),
            Repr::Ca(_) => f.write_str("load the interception CA"),
            Repr::UpstreamRoots(_) => f.write_str("load the upstream root certificates"),
        }
    }
}

impl StdError for ProxyError {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        match &self.repr {
            Repr::Config(err) => Some(err),
            Repr::Bind { source, .. } => Some(source),
            Repr::Ca(err) | Repr::UpstreamRoots(err) => Some(err),
        }
    }
}
