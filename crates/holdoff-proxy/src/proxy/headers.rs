//! Header rewriting at the proxy: hop-by-hop fields (RFC 9110 §7.6.1) and `Via` (§7.6.3), with
//! the checks that go with them: a request that came back (its `Via`), two `Host`s.

use http::header::{
    CONNECTION, HOST, HeaderName, PROXY_AUTHENTICATE, PROXY_AUTHORIZATION, TE, TRAILER,
    TRANSFER_ENCODING, UPGRADE, VIA,
};
use http::{HeaderMap, HeaderValue, Version};

/// Fields that concern one connection only, besides those `Connection` names. As names, not
/// strings: removing by a string parses it first. A `static`, not a `const`: each use of a
/// `const` array builds and drops a copy.
static HOP_BY_HOP: [HeaderName; HOP_BY_HOP_COUNT] = [
    HeaderName::from_static("keep-alive"),
    HeaderName::from_static("proxy-connection"),
    PROXY_AUTHENTICATE,
    PROXY_AUTHORIZATION,
    TE,
    TRAILER,
    TRANSFER_ENCODING,
    UPGRADE,
];

const HOP_BY_HOP_COUNT: usize = 8;
/// Where `TE` is in [`HOP_BY_HOP`].
const TE_INDEX: usize = 4;

/// The header that names a client to the proxy; never forwarded.
pub(crate) const CLIENT_HEADER: HeaderName = HeaderName::from_static("x-holdoff-client");

/// Whether a request asks to switch protocols (`Connection: upgrade` with `Upgrade`), as a
/// WebSocket handshake does.
pub(crate) fn wants_upgrade(headers: &HeaderMap) -> bool {
    headers.contains_key(UPGRADE) && connection_has(headers, "upgrade")
}

/// Whether `Connection` lists `token`.
fn connection_has(headers: &HeaderMap, token: &str) -> bool {
    headers
        .get_all(CONNECTION)
        .iter()
        .any(|value| tokens(value).any(|t| t.eq_ignore_ascii_case(token)))
}

fn tokens(value: &HeaderValue) -> impl Iterator<Item = &str> {
    value
        .to_str()
        .unwrap_or("")
        .split(',')
        .map(str::trim)
        .filter(|token| !token.is_empty())
}

/// Removes the hop-by-hop fields: `Connection`, every field it names, and the fixed set. For
/// an upgrade, `Upgrade` is kept and `Connection: upgrade` put back, so the next hop sees the
/// handshake. A `TE: trailers` (which HTTP/2 and gRPC need end to end) is kept as just that.
pub(crate) fn strip_hop_by_hop(headers: &mut HeaderMap, upgrade: bool) {
    // One pass over the names finds which are there: most messages carry none, or just
    // `Connection: keep-alive`, and a lookup by name costs a hash each (twice per request
    // for each of the nine).
    let mut present = [false; HOP_BY_HOP_COUNT];
    let mut connection = false;
    for name in headers.keys() {
        let name = name.as_str();
        // Names are lower case in a map. Most have none of the lengths of these.
        if !matches!(name.len(), 2 | 7 | 10 | 16..=19) {
            continue;
        }
        if name == CONNECTION.as_str() {
            connection = true;
        } else if let Some(index) = HOP_BY_HOP.iter().position(|hop| hop.as_str() == name) {
            present[index] = true;
        }
    }
    if !upgrade && !connection && !present.contains(&true) {
        return;
    }
    let trailers = present[TE_INDEX]
        && headers
            .get_all(TE)
            .iter()
            .any(|value| tokens(value).any(|t| t.eq_ignore_ascii_case("trailers")));
    if connection {
        // Fields of the fixed set that `Connection` names are removed below if they are
        // there; any other it names (rare) is looked for first, without parsing or hashing
        // the token: `close` and `keep-alive` name no field.
        let mut named: Vec<HeaderName> = Vec::new();
        for token in headers.get_all(CONNECTION).iter().flat_map(tokens) {
            if upgrade && token.eq_ignore_ascii_case("upgrade") {
                continue;
            }
            if HOP_BY_HOP
                .iter()
                .any(|hop| hop.as_str().eq_ignore_ascii_case(token))
            {
                continue;
            }
            let field = headers
                .keys()
                .find(|name| name.as_str().eq_ignore_ascii_case(token));
            if let Some(field) = field {
                named.push(field.clone());
            }
        }
        // Every value of it; the usual single `keep-alive` costs one lookup to read and one
        // to remove.
        headers.remove(CONNECTION);
        for field in named {
            headers.remove(field);
        }
    }
    for (name, _) in HOP_BY_HOP
        .iter()
        .zip(present)
        .filter(|(_, present)| *present)
    {
        if upgrade && *name == UPGRADE {
            continue;
        }
        headers.remove(name);
    }
    if upgrade {
        headers.insert(CONNECTION, HeaderValue::from_static("upgrade"));
    }
    if trailers {
        headers.insert(TE, HeaderValue::from_static("trailers"));
    }
}

/// This proxy's `Via` entry on requests (RFC 9110 §7.6.3), whose received-by names this
/// instance: `holdoff-` and a random token drawn when it starts. A request that carries it
/// already has come back through this proxy — sent to itself by name, or through another
/// proxy that sent it back — and is refused rather than forwarded again. The token is the
/// received-by, not a comment, because intermediaries may remove comments. Responses, which
/// cannot come back, carry the plain entry of [`add_via`], by which the metrics tell an
/// upstream's response from one holdoff made.
#[derive(Debug)]
pub(crate) struct Via {
    /// `holdoff-` and 16 hexadecimal digits.
    name: String,
    /// `1.1 holdoff-…` and the other versions: cloned (shared bytes) onto every message.
    entries: [HeaderValue; 4],
}

impl Via {
    /// An entry with a fresh token.
    pub(crate) fn new() -> Via {
        Via::with_token(rand::random())
    }

    fn with_token(token: u64) -> Via {
        let name = format!("holdoff-{token:016x}");
        let entry = |version: &str| {
            HeaderValue::from_maybe_shared(bytes::Bytes::from(format!("{version} {name}")))
                .unwrap_or_else(|_| HeaderValue::from_static("1.1 holdoff"))
        };
        let entries = [entry("1.0"), entry("1.1"), entry("2"), entry("3")];
        Via { name, entries }
    }

    /// Appends this proxy to a request's `Via`, with the protocol version the request was
    /// received in.
    pub(crate) fn add(&self, headers: &mut HeaderMap, received: Version) {
        let entry = match received {
            Version::HTTP_09 | Version::HTTP_10 => &self.entries[0],
            Version::HTTP_2 => &self.entries[2],
            Version::HTTP_3 => &self.entries[3],
            _ => &self.entries[1],
        };
        headers.append(VIA, entry.clone());
    }

    /// Whether `headers` say the message passed through this proxy already: an entry of `Via`
    /// received by this instance.
    pub(crate) fn seen_in(&self, headers: &HeaderMap) -> bool {
        headers.get_all(VIA).iter().flat_map(tokens).any(|entry| {
            // `1.1 holdoff-… (comment)`: the received-by is the second word.
            entry
                .split_ascii_whitespace()
                .nth(1)
                .is_some_and(|by| by.eq_ignore_ascii_case(&self.name))
        })
    }
}

/// Appends this proxy to a response's `Via`, with the protocol version the response was
/// received in.
pub(crate) fn add_via(headers: &mut HeaderMap, received: Version) {
    let value = match received {
        Version::HTTP_09 => "0.9 holdoff",
        Version::HTTP_10 => "1.0 holdoff",
        Version::HTTP_2 => "2 holdoff",
        Version::HTTP_3 => "3 holdoff",
        _ => "1.1 holdoff",
    };
    headers.append(VIA, HeaderValue::from_static(value));
}

/// Whether `headers` carry more than one `Host`: such a request is invalid (RFC 9112 §3.2), and
/// which one a server reads is anyone's guess.
pub(crate) fn has_several_hosts(headers: &HeaderMap) -> bool {
    let mut hosts = headers.get_all(HOST).iter();
    hosts.next().is_some() && hosts.next().is_some()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(*name, HeaderValue::from_static(value));
        }
        map
    }

    mod strip_hop_by_hop {
        use super::*;

        #[test]
        fn removes_the_fixed_set_and_keeps_end_to_end_fields() {
            let mut map = headers(&[
                ("keep-alive", "timeout=5"),
                ("proxy-connection", "keep-alive"),
                ("proxy-authorization", "Basic YTpi"),
                ("te", "gzip"),
                ("trailer", "x-checksum"),
                ("transfer-encoding", "chunked"),
                ("upgrade", "websocket"),
                ("content-type", "text/plain"),
                ("authorization", "Bearer t"),
            ]);
            strip_hop_by_hop(&mut map, false);
            let mut left: Vec<_> = map.keys().map(|name| name.as_str()).collect();
            left.sort_unstable();
            assert_eq!(left, ["authorization", "content-type"]);
        }

        #[test]
        fn removes_every_field_connection_names() {
            let mut map = headers(&[
                ("connection", "close, X-Session-Hop"),
                ("connection", "x-other"),
                ("x-session-hop", "1"),
                ("x-other", "2"),
                ("x-kept", "3"),
            ]);
            strip_hop_by_hop(&mut map, false);
            let left: Vec<_> = map.keys().map(|name| name.as_str()).collect();
            assert_eq!(left, ["x-kept"]);
        }

        #[test]
        fn removes_a_fixed_field_connection_names_and_ignores_names_of_nothing() {
            let mut map = headers(&[
                ("connection", "Keep-Alive, close, TE"),
                ("keep-alive", "timeout=5"),
                ("te", "trailers"),
                ("x-kept", "3"),
            ]);
            strip_hop_by_hop(&mut map, false);
            let mut left: Vec<_> = map.keys().map(|name| name.as_str()).collect();
            left.sort_unstable();
            // `TE: trailers` is end to end even when `Connection` names it.
            assert_eq!(left, ["te", "x-kept"]);
        }

        #[test]
        fn keeps_the_handshake_of_an_upgrade() {
            let mut map = headers(&[
                ("connection", "keep-alive, Upgrade"),
                ("upgrade", "websocket"),
                ("sec-websocket-key", "dGhlIHNhbXBsZSBub25jZQ=="),
            ]);
            assert!(wants_upgrade(&map));
            strip_hop_by_hop(&mut map, true);
            assert_eq!(map["connection"], "upgrade");
            assert_eq!(map["upgrade"], "websocket");
            assert!(map.contains_key("sec-websocket-key"));
        }

        #[test]
        fn keeps_te_trailers_alone() {
            let mut map = headers(&[("te", "gzip, trailers")]);
            strip_hop_by_hop(&mut map, false);
            assert_eq!(map["te"], "trailers");
        }
    }

    #[test]
    fn te_index_points_at_te() {
        assert_eq!(HOP_BY_HOP[TE_INDEX], TE);
    }

    #[test]
    fn the_length_filter_lets_every_hop_by_hop_name_through() {
        for name in HOP_BY_HOP.iter().chain([&CONNECTION]) {
            assert!(
                matches!(name.as_str().len(), 2 | 7 | 10 | 16..=19),
                "{name}"
            );
        }
    }

    mod wants_upgrade {
        use super::*;

        #[test]
        fn needs_both_fields() {
            assert!(!wants_upgrade(&headers(&[("upgrade", "websocket")])));
            assert!(!wants_upgrade(&headers(&[("connection", "upgrade")])));
            assert!(wants_upgrade(&headers(&[
                ("connection", "Upgrade"),
                ("upgrade", "websocket")
            ])));
        }
    }

    mod via {
        use super::*;

        #[test]
        fn appends_to_an_existing_via_with_the_received_version() {
            let via = Via::with_token(0xabc);
            let mut map = headers(&[("via", "1.1 squid")]);
            via.add(&mut map, Version::HTTP_11);
            via.add(&mut map, Version::HTTP_2);
            via.add(&mut map, Version::HTTP_10);
            let all: Vec<_> = map.get_all(VIA).iter().collect();
            assert_eq!(
                all,
                [
                    "1.1 squid",
                    "1.1 holdoff-0000000000000abc",
                    "2 holdoff-0000000000000abc",
                    "1.0 holdoff-0000000000000abc"
                ]
            );
        }

        #[test]
        fn sees_its_own_entry_anywhere_in_the_list_and_no_other_instance() {
            let via = Via::with_token(0xabc);
            let mut map = headers(&[("via", "1.0 fred, 1.1 HOLDOFF-0000000000000ABC (x)")]);
            assert!(via.seen_in(&map));
            map = headers(&[("via", "1.1 squid"), ("via", "2 holdoff-0000000000000abc")]);
            assert!(via.seen_in(&map));
            let other = headers(&[("via", "1.1 holdoff-0000000000000abd, 1.1 holdoff")]);
            assert!(!via.seen_in(&other));
            // Named in a comment, or as the protocol, is not received by it.
            let elsewhere = headers(&[(
                "via",
                "holdoff-0000000000000abc squid (holdoff-0000000000000abc)",
            )]);
            assert!(!via.seen_in(&elsewhere));
            assert!(!via.seen_in(&HeaderMap::new()));
        }

        #[test]
        fn two_instances_draw_different_tokens() {
            assert_ne!(Via::new().name, Via::new().name);
        }
    }

    mod add_via {
        use super::*;

        #[test]
        fn appends_to_an_existing_via() {
            let mut map = headers(&[("via", "1.1 squid")]);
            add_via(&mut map, Version::HTTP_11);
            add_via(&mut map, Version::HTTP_2);
            let all: Vec<_> = map.get_all(VIA).iter().collect();
            assert_eq!(all, ["1.1 squid", "1.1 holdoff", "2 holdoff"]);
        }
    }

    mod has_several_hosts {
        use super::*;

        #[test]
        fn only_with_two_fields_or_more() {
            assert!(!has_several_hosts(&HeaderMap::new()));
            assert!(!has_several_hosts(&headers(&[("host", "a")])));
            assert!(has_several_hosts(&headers(&[("host", "a"), ("host", "b")])));
            assert!(has_several_hosts(&headers(&[("host", "a"), ("host", "a")])));
        }
    }
}
