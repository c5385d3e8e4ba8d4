//! Where a request goes and who sent it: its absolute URL (from the request, the reverse
//! proxy's upstream, or the intercepted tunnel's authority), its `Host`, and its client.

use std::sync::Arc;

use http::header::HOST;
use http::request::Parts;
use http::uri::{Authority, PathAndQuery, Scheme};
use http::{HeaderMap, StatusCode, Uri};

use super::conn::Tunnel;
use super::headers::CLIENT_HEADER;
use super::reply::{Refusal, to_itself};
use super::shared::{Route, Shared};
use super::stage::{ClientId, Mode};
use super::target::{Target, default_port};
use crate::config::{UrlParts, proxy_user};

/// Where the request goes: its mode and absolute URL; or why it cannot go anywhere.
pub(crate) fn target(
    shared: &Shared,
    tunnel: Option<&Tunnel>,
    parts: &Parts,
) -> Result<(Mode, Uri), Refusal> {
    let path = || {
        parts
            .uri
            .path_and_query()
            .cloned()
            .unwrap_or_else(|| PathAndQuery::from_static("/"))
    };
    if let Some(tunnel) = tunnel {
        // The tunnel's authority, not the request's Host: that is where the client connected.
        let uri = absolute(Scheme::HTTPS, tunnel.authority.clone(), path())?;
        return Ok((Mode::Intercepted, uri));
    }
    match &shared.route {
        Route::Reverse(upstream) => {
            let uri = absolute(
                upstream.scheme().clone(),
                upstream.authority().clone(),
                path(),
            )?;
            Ok((Mode::Reverse, uri))
        }
        Route::Forward { .. } => {
            let uri = &parts.uri;
            let (Some(scheme), Some(authority)) = (uri.scheme(), uri.authority()) else {
                return Err(Refusal::new(
                    StatusCode::BAD_REQUEST,
                    format!(
                        "this is a forward proxy: send absolute-form requests \
                         (GET http://host/path) or CONNECT, not `{} {}`",
                        parts.method,
                        uri.path()
                    ),
                ));
            };
            if *scheme != Scheme::HTTP && *scheme != Scheme::HTTPS {
                return Err(Refusal::new(
                    StatusCode::BAD_REQUEST,
                    format!("cannot forward {scheme} URLs, only http and https"),
                ));
            }
            let port = authority
                .port_u16()
                .unwrap_or_else(|| default_port(scheme.as_str()));
            if let Some(own) = shared.own.named_by(authority.host(), port) {
                return Err(to_itself(&uri.to_string(), own));
            }
            Ok((Mode::Forward, uri.clone()))
        }
    }
}

fn absolute(scheme: Scheme, authority: Authority, path: PathAndQuery) -> Result<Uri, Refusal> {
    let mut parts = http::uri::Parts::default();
    parts.scheme = Some(scheme);
    parts.authority = Some(authority);
    parts.path_and_query = Some(path);
    Uri::from_parts(parts).map_err(|err| {
        Refusal::new(
            StatusCode::BAD_REQUEST,
            format!("cannot build the request URL: {err}"),
        )
    })
}

/// Removes the user information from `uri` (`http://user:password@host/`): it is no part of
/// where the request goes (RFC 9110 §4.2.4), and a password must not reach a log.
pub(crate) fn strip_userinfo(uri: &mut Uri) {
    let Some(host) = uri
        .authority()
        .and_then(|authority| authority.as_str().rsplit_once('@'))
        .map(|(_, host)| host.to_owned())
    else {
        return;
    };
    let mut parts = uri.clone().into_parts();
    parts.authority = Authority::try_from(host).ok();
    match Uri::from_parts(parts) {
        Ok(stripped) => *uri = stripped,
        // `user@` and nothing else: no host left to go to.
        Err(_) => *uri = Uri::from_static("/"),
    }
}

/// Sets `Host` to the authority of `uri`, unless it says that already (it usually does, and
/// then nothing is copied).
pub(crate) fn set_host(headers: &mut HeaderMap, uri: &Uri) {
    let Some(authority) = uri.authority() else {
        return;
    };
    let same = headers.get(HOST).is_some_and(|host| {
        host.as_bytes()
            .eq_ignore_ascii_case(authority.as_str().as_bytes())
    });
    if !same && let Ok(host) = http::HeaderValue::from_str(authority.as_str()) {
        headers.insert(HOST, host);
    }
}

/// The URL as the watch list sees it.
pub(crate) fn url_parts(target: &Target) -> UrlParts<'_> {
    UrlParts {
        scheme: target.scheme(),
        host: target.host(),
        port: target.non_default_port(),
        path_and_query: target.path_and_query(),
    }
}

/// Who sent the request: proxy credentials (on the request, or on the tunnel's `CONNECT`),
/// then `X-Holdoff-Client`, then the connection's own identity (its process, or its peer
/// address), found once for the connection. `X-Holdoff-Client` is removed either way.
pub(crate) fn identify(
    headers: &mut HeaderMap,
    tunnel: Option<&Tunnel>,
    connection: &ClientId,
) -> ClientId {
    let named = headers.remove(CLIENT_HEADER);
    if let Some(user) = proxy_user(headers) {
        return ClientId::ProxyUser(user.into());
    }
    if let Some(user) = tunnel.and_then(|tunnel| tunnel.user.as_ref()) {
        return ClientId::ProxyUser(Arc::clone(user));
    }
    if let Some(name) = named
        .as_ref()
        .and_then(|value| value.to_str().ok())
        .map(str::trim)
        .filter(|name| !name.is_empty())
    {
        return ClientId::Header(name.into());
    }
    connection.clone()
}

#[cfg(test)]
mod tests {
    use super::*;

    mod strip_userinfo {
        use super::*;

        fn stripped(uri: &str) -> String {
            let mut uri: Uri = uri.parse().unwrap();
            strip_userinfo(&mut uri);
            uri.to_string()
        }

        #[test]
        fn removes_the_user_and_password_and_keeps_the_rest() {
            assert_eq!(
                stripped("http://user:pw@127.0.0.1:8080/a?b=c"),
                "http://127.0.0.1:8080/a?b=c"
            );
            assert_eq!(
                stripped("https://a%40b:p@c@example.com/"),
                "https://example.com/"
            );
            assert_eq!(stripped("http://user@[::1]/"), "http://[::1]/");
        }

        #[test]
        fn leaves_a_url_without_any_alone() {
            assert_eq!(stripped("http://example.com/@x"), "http://example.com/@x");
            assert_eq!(stripped("/origin/form"), "/origin/form");
        }
    }
}
