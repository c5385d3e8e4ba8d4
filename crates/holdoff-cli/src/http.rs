//! The HTTP client holdoff's own commands use: `config get` for the sample gallery, `status`
//! for a background proxy's control API.

use std::time::Duration;

/// Where a client's requests go.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Route {
    /// Through the proxies the environment names (`HTTPS_PROXY`, …), as any download would.
    Environment,
    /// Straight to the address: a loopback API, never through a proxy.
    Direct,
}

/// A client with holdoff's User-Agent and `timeout` per request.
///
/// # Errors
///
/// When the TLS roots cannot be loaded (the message says so).
pub(crate) fn client(timeout: Duration, route: Route) -> Result<reqwest::Client, String> {
    // reqwest is built without a crypto provider of its own: the process's default is this
    // one, as for `holdoff demo`'s clients.
    let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
    let mut builder = reqwest::Client::builder()
        .user_agent(concat!("holdoff/", env!("CARGO_PKG_VERSION")))
        .timeout(timeout);
    if route == Route::Direct {
        builder = builder.no_proxy();
    }
    builder
        .build()
        .map_err(|err| format!("cannot set up an HTTP client: {err}"))
}
