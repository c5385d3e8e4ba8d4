//! Where a request goes, read once: [`Target`], and the one rule for a scheme's default port.

use std::fmt;

use http::Uri;

/// The port a URL of `scheme` means when it names none (RFC 9110 §4.2): 443 for `https`, 80
/// for `http` (the only other scheme the proxy forwards).
pub(crate) fn default_port(scheme: &str) -> u16 {
    if scheme.eq_ignore_ascii_case("https") {
        443
    } else {
        80
    }
}

/// The absolute URL a request goes to, with its parts read once, in the handler, for every
/// stage and check that needs them: the watch list, the fault rules, the judge's keys.
///
/// Its [`Display`](fmt::Display) is the URL in one form, whoever writes it and however the
/// client spelled it: `scheme://host[:port]/path?query`, the scheme and host in lowercase
/// (RFC 9110 §4.2.3: they are case-insensitive), the port compared as a number and left out
/// when it is the scheme's default (so `https://API.test:0443/x` and `https://api.test/x`
/// are one URL), with no user information. The watch list, the fault rules and the judge's
/// keys all read it.
///
/// # Examples
///
/// ```
/// use holdoff_proxy::Target;
///
/// let target = Target::new("https://API.test:443/v1/items?page=2".parse().unwrap());
/// assert_eq!(target.to_string(), "https://api.test/v1/items?page=2");
/// assert_eq!(target.port(), 443);
/// assert_eq!(target.origin().to_string(), "https://api.test:443");
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Target {
    /// Each part is read from it when asked for, so a request whose stages ask for none (the
    /// engine alone, a watch list of `*`) pays for none.
    uri: Uri,
    /// `host[:port]` in its one form, when the URI does not already write it so (a host with
    /// capitals, a default port written, a port with leading zeros): made once, here, so that
    /// the common URL costs nothing.
    canonical: Option<Box<str>>,
}

impl Target {
    /// The target of an absolute URI (`http://…` or `https://…`); a URI without a scheme is
    /// read as `http`, one without an authority as having an empty host.
    pub fn new(uri: Uri) -> Target {
        let canonical = canonical_authority(&uri);
        Target { uri, canonical }
    }

    /// Where a reference (a redirect's `Location`) resolved against this URL leads (RFC 3986
    /// §5: an absolute URL as it is, a path on this origin, a relative one against this
    /// path); `None` when it is no URL, or not an `http` or `https` one.
    ///
    /// # Examples
    ///
    /// ```
    /// use holdoff_proxy::Target;
    ///
    /// let here = Target::new("http://api.test/v1/items?page=2".parse().unwrap());
    /// assert_eq!(here.join("/v2/items").unwrap().to_string(), "http://api.test/v2/items");
    /// assert_eq!(here.join("next").unwrap().to_string(), "http://api.test/v1/next");
    /// assert_eq!(here.join("mailto:ops@api.test"), None);
    /// ```
    pub fn join(&self, reference: &str) -> Option<Target> {
        // The url crate resolves references exactly as RFC 3986 says, dot segments and all:
        // a rule too easy to get subtly wrong by hand.
        let base = url::Url::parse(&self.text()).ok()?;
        let joined = base.join(reference).ok()?;
        if !matches!(joined.scheme(), "http" | "https") {
            return None;
        }
        joined.as_str().parse().ok().map(Target::new)
    }

    /// The URI, as the request carries it upstream.
    pub fn uri(&self) -> &Uri {
        &self.uri
    }

    /// `http` or `https`.
    pub fn scheme(&self) -> &str {
        self.uri.scheme_str().unwrap_or("http")
    }

    /// Whether it goes over TLS.
    pub fn is_https(&self) -> bool {
        self.scheme().eq_ignore_ascii_case("https")
    }

    /// The host, as written (an IPv6 address in brackets).
    pub fn host(&self) -> &str {
        self.uri.host().unwrap_or("")
    }

    /// The port: the one written, or the scheme's default.
    pub fn port(&self) -> u16 {
        self.uri
            .port_u16()
            .unwrap_or_else(|| default_port(self.scheme()))
    }

    /// The port when it is not the scheme's default: what a URL must write.
    pub fn non_default_port(&self) -> Option<u16> {
        self.uri
            .port_u16()
            .filter(|port| *port != default_port(self.scheme()))
    }

    /// `host[:port]` in its one form: the host in lowercase, without user information, the
    /// port written only when it is not the scheme's default, as a plain number.
    pub fn authority(&self) -> &str {
        if let Some(canonical) = &self.canonical {
            return canonical;
        }
        let Some(authority) = self.uri.authority() else {
            return "";
        };
        let written = authority.as_str();
        written.rsplit_once('@').map_or(written, |(_, host)| host)
    }

    /// The path and query, `/` when there is neither.
    pub fn path_and_query(&self) -> &str {
        self.uri
            .path_and_query()
            .map_or("/", http::uri::PathAndQuery::as_str)
    }

    /// `scheme://host:port`, the host in lowercase and the port always written: what the
    /// judge's host mode keys by.
    pub fn origin(&self) -> impl fmt::Display + '_ {
        OriginText(self)
    }

    /// The URL's text in pieces, in order, for a writer that takes them one by one (the
    /// judge's key buffer); they join into the [`Display`](fmt::Display) form.
    pub(crate) fn pieces(&self) -> [&str; 4] {
        [
            self.scheme(),
            "://",
            self.authority(),
            self.path_and_query(),
        ]
    }

    /// The URL's text, built in one allocation.
    pub(crate) fn text(&self) -> String {
        let pieces = self.pieces();
        let mut text = String::with_capacity(pieces.iter().map(|piece| piece.len()).sum());
        pieces.iter().for_each(|piece| text.push_str(piece));
        text
    }
}

/// `uri`'s `host[:port]` in its one form, when the URI does not write it so already
/// ([`Target::authority`]); `None` when it does, the common case, which this only reads.
fn canonical_authority(uri: &Uri) -> Option<Box<str>> {
    let written = uri.authority()?.as_str();
    // The text is read once here: `Authority`'s `host`, `port` and `port_u16` each parse it
    // again, and this runs for every request. `host[:port]` follows any user information;
    // the port follows the last `:` outside an IPv6 literal's brackets.
    let hostport = written.rsplit_once('@').map_or(written, |(_, rest)| rest);
    let (host, port_text) = match hostport.rfind(':') {
        Some(colon) if !hostport[colon..].contains(']') => {
            (&hostport[..colon], Some(&hostport[colon + 1..]))
        }
        _ => (hostport, None),
    };
    // The port as a number (hyper-util's `get_non_default_port` rule): `:080` is `:80`.
    let number = port_text.and_then(|text| text.parse::<u16>().ok());
    let default = default_port(uri.scheme_str().unwrap_or("http"));
    let port = number.filter(|port| *port != default);
    // Written as the number is when it has no leading zero.
    let port_as_written = match (port_text.filter(|_| number.is_some()), port) {
        (None, None) => true,
        (Some(text), Some(_)) => !text.starts_with('0'),
        _ => false,
    };
    if port_as_written && !host.bytes().any(|b| b.is_ascii_uppercase()) {
        return None;
    }
    let mut text = host.to_ascii_lowercase();
    if let Some(port) = port {
        text.push(':');
        text.push_str(&port.to_string());
    }
    Some(text.into_boxed_str())
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.pieces()
            .iter()
            .try_for_each(|piece| f.write_str(piece))
    }
}

/// See [`Target::origin`].
struct OriginText<'a>(&'a Target);

impl fmt::Display for OriginText<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.0.scheme())?;
        f.write_str("://")?;
        for c in self.0.host().chars() {
            fmt::Write::write_char(f, c.to_ascii_lowercase())?;
        }
        write!(f, ":{}", self.0.port())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `canonical_authority` as `http`'s own reading of an authority would have it: the text
    /// is read by hand there, and must agree.
    fn canonical_by_http(uri: &Uri) -> Option<Box<str>> {
        let authority = uri.authority()?;
        let default = default_port(uri.scheme_str().unwrap_or("http"));
        let port = authority.port_u16().filter(|port| *port != default);
        let as_written = match (authority.port(), port) {
            (None, None) => true,
            (Some(written), Some(_)) => !written.as_str().starts_with('0'),
            _ => false,
        };
        if as_written && !authority.host().bytes().any(|b| b.is_ascii_uppercase()) {
            return None;
        }
        let mut text = authority.host().to_ascii_lowercase();
        if let Some(port) = port {
            text.push_str(&format!(":{port}"));
        }
        Some(text.into_boxed_str())
    }

    #[test]
    fn reads_an_authority_as_http_does() {
        for scheme in ["http", "https", "HTTP"] {
            for authority in [
                "api.test",
                "API.test",
                "api.test:80",
                "api.test:443",
                "api.test:080",
                "api.test:0",
                "api.test:",
                "api.test:65535",
                "api.test:65536",
                "api.test:99999",
                "u@api.test",
                "u:p@API.test:0443",
                "a@b@c.test:81",
                "[::1]",
                "[::1]:",
                "[::1]:443",
                "[::1]:0080",
                "[::FFFF:7f00:1]:8080",
                "127.0.0.1",
                "127.0.0.1:8080",
                "Host:+80",
            ] {
                let Ok(uri) = format!("{scheme}://{authority}/x").parse::<Uri>() else {
                    continue;
                };
                assert_eq!(canonical_authority(&uri), canonical_by_http(&uri), "{uri}");
            }
        }
    }

    fn target(url: &str) -> Target {
        Target::new(url.parse().unwrap())
    }

    #[test]
    fn the_default_port_is_left_out_of_the_url_and_written_in_the_origin() {
        for (url, text, origin) in [
            (
                "http://api.test/x",
                "http://api.test/x",
                "http://api.test:80",
            ),
            (
                "http://api.test:80/x",
                "http://api.test/x",
                "http://api.test:80",
            ),
            (
                "https://api.test:443/x",
                "https://api.test/x",
                "https://api.test:443",
            ),
            (
                "https://api.test:80/x",
                "https://api.test:80/x",
                "https://api.test:80",
            ),
            (
                "http://API.Test:8080",
                "http://api.test:8080/",
                "http://api.test:8080",
            ),
            (
                "http://example.test:080/x",
                "http://example.test/x",
                "http://example.test:80",
            ),
            (
                "http://example.test:08080/x",
                "http://example.test:8080/x",
                "http://example.test:8080",
            ),
            (
                "https://[::1]:443/a?b=c",
                "https://[::1]/a?b=c",
                "https://[::1]:443",
            ),
            (
                "http://[::1]:8000/",
                "http://[::1]:8000/",
                "http://[::1]:8000",
            ),
            (
                "http://u:p@api.test:80/x",
                "http://api.test/x",
                "http://api.test:80",
            ),
            (
                "HTTPS://Api.Example/a?b",
                "https://api.example/a?b",
                "https://api.example:443",
            ),
            (
                "http://127.0.0.1:8080/",
                "http://127.0.0.1:8080/",
                "http://127.0.0.1:8080",
            ),
        ] {
            let target = target(url);
            assert_eq!(target.to_string(), text, "{url}");
            assert_eq!(target.text(), text, "{url}");
            assert_eq!(target.origin().to_string(), origin, "{url}");
        }
    }

    #[test]
    fn the_text_leaves_out_the_default_port_only() {
        let text = |url: &str| target(url).text();
        assert_eq!(
            text("https://a.example:443/v1?x=1"),
            "https://a.example/v1?x=1"
        );
        assert_eq!(text("http://a.example:80/"), "http://a.example/");
        assert_eq!(text("http://127.0.0.1:8080/x"), "http://127.0.0.1:8080/x");
        assert_eq!(
            text("http://u:p@a.example:8080/x"),
            "http://a.example:8080/x"
        );
        assert_eq!(text("http://u@a.example:80/x"), "http://a.example/x");
        assert_eq!(text("https://a.example:80/x"), "https://a.example:80/x");
        assert_eq!(text("http://[::1]:3000/x"), "http://[::1]:3000/x");
    }

    #[test]
    fn the_port_is_the_written_one_or_the_schemes_default() {
        assert_eq!(target("http://a.test/").port(), 80);
        assert_eq!(target("https://a.test/").port(), 443);
        assert_eq!(target("https://a.test:8443/").port(), 8443);
        assert_eq!(target("https://a.test:443/").non_default_port(), None);
        assert_eq!(target("http://a.test:443/").non_default_port(), Some(443));
        assert_eq!(default_port("HTTPS"), 443);
        assert_eq!(default_port("http"), 80);
    }

    #[test]
    fn a_url_without_a_default_port_reads_as_the_uri_displays() {
        // So a window key written from the pieces is the one written from the URI before.
        for url in [
            "http://127.0.0.1:8080/items?x=1",
            "https://api.test/v1/chat/completions",
            "http://[::1]:9/",
        ] {
            let uri: Uri = url.parse().unwrap();
            assert_eq!(Target::new(uri.clone()).to_string(), uri.to_string());
        }
    }
}
