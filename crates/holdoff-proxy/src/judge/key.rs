//! Which requests share a window: the key a throttle opens and a retry is judged under.

use std::fmt::{self, Write as _};
use std::hash::Hasher;

use siphasher::sip128::Hasher128 as _;

use crate::ascii::InlineText;

/// How windows are keyed.
///
/// The default keys by client identity, method and URL: two clients retrying the same URL are
/// judged apart. [`KeyMode::Host`] is Microsoft Dev Proxy's behaviour (one wait per host,
/// shared by everyone).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum KeyMode {
    /// Client identity + method + URL.
    #[default]
    ClientMethodUrl,
    /// Method + URL, whoever the client is.
    MethodUrl,
    /// URL only.
    Url,
    /// Scheme + host + port only (Dev Proxy's per-host key).
    Host,
    /// Scheme + host + port and the path's second segment: Microsoft Graph's workload
    /// (`users` in `/v1.0/users/42`), whoever the client is, as Dev Proxy keys Graph's
    /// throttles. A path with fewer segments keys by the host alone.
    Workload,
    /// The value of this request header (lowercase name), plus method and URL; requests
    /// without it fall back to the client identity.
    Header(String),
}

impl KeyMode {
    /// The name used in config files and reports: `client-method-url`, `method-url`, `url`,
    /// `host`, `header:<name>`.
    pub fn name(&self) -> String {
        match self {
            KeyMode::ClientMethodUrl => "client-method-url".into(),
            KeyMode::MethodUrl => "method-url".into(),
            KeyMode::Url => "url".into(),
            KeyMode::Host => "host".into(),
            KeyMode::Workload => "workload".into(),
            KeyMode::Header(name) => format!("header:{name}"),
        }
    }
}

impl std::str::FromStr for KeyMode {
    type Err = String;

    /// Reads a [`KeyMode::name`]: `client-method-url`, `method-url`, `url`, `host`,
    /// `workload` or `header:<name>`.
    fn from_str(s: &str) -> Result<KeyMode, String> {
        Ok(match s {
            "client-method-url" => KeyMode::ClientMethodUrl,
            "method-url" => KeyMode::MethodUrl,
            "url" => KeyMode::Url,
            "host" => KeyMode::Host,
            "workload" => KeyMode::Workload,
            _ => match s.strip_prefix("header:") {
                Some(name) if http::HeaderName::from_bytes(name.as_bytes()).is_ok() => {
                    KeyMode::Header(name.to_ascii_lowercase())
                }
                _ => {
                    return Err(format!(
                        "expected client-method-url, method-url, url, host, workload or header:NAME, \
                         not `{s}`"
                    ));
                }
            },
        })
    }
}

/// What a request is keyed by, borrowed from it.
#[derive(Clone, Copy, Debug)]
pub struct KeyParts<'a> {
    /// The client's identity (proxy user, `X-Holdoff-Client`, or peer address).
    pub client: &'a str,
    /// The request method.
    pub method: &'a str,
    /// The full URL, `scheme://authority/path?query`.
    pub url: &'a str,
    /// `scheme://authority` of the URL.
    pub origin: &'a str,
    /// The value of the header named by [`KeyMode::Header`], if the request had it.
    pub header: Option<&'a str>,
}

/// A window key: a 128-bit digest of the parts the mode selects.
///
/// Windows keep the digest, not the strings, so a million open windows stay small; the
/// strings go into each verdict as it is made. A 128-bit digest makes an accidental
/// collision between live windows vanishingly unlikely.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct WindowKey(u64, u64);

impl fmt::Display for WindowKey {
    /// 32 lowercase hex digits: the name of the window in a shared store.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:016x}{:016x}", self.0, self.1)
    }
}

impl WindowKey {
    /// Which of `shards` maps the key belongs in: the digest is uniform, so its low bits do.
    pub(crate) fn shard(self, shards: usize) -> usize {
        (self.0 % shards as u64) as usize
    }

    /// A key of this number, for tests that need keys apart from any request.
    #[cfg(test)]
    pub(crate) fn numbered(n: u64) -> WindowKey {
        WindowKey(n, !n)
    }
}

/// Builds [`WindowKey`]s: with per-process random seeds, or, for windows in a store several
/// processes share, with a hash every process computes alike.
#[derive(Clone, Debug)]
pub(crate) enum KeyHasher {
    /// SipHash-1-3 with a random 128-bit key and a 128-bit output: unguessable, so a client
    /// cannot aim at another's window, but meaningful only inside this process. std's
    /// `RandomState` gives the same keyed hash with a 64-bit output only, which took two
    /// passes over the text per request.
    Random { keys: (u64, u64) },
    /// XXH3-128, unseeded: fixed by its specification, so every replica (of any holdoff
    /// version) names a window alike. `DefaultHasher` would not do: its algorithm may change
    /// between Rust releases.
    Stable,
}

impl KeyHasher {
    pub(crate) fn new() -> KeyHasher {
        KeyHasher::Random {
            keys: rand::random(),
        }
    }

    pub(crate) fn key(&self, mode: &KeyMode, parts: &KeyParts<'_>) -> WindowKey {
        self.key_of(
            mode,
            &KeyText {
                client: &parts.client,
                method: parts.method,
                url: KeyUrl::Text(&parts.url),
                origin: &parts.origin,
                header: parts.header,
            },
        )
    }

    /// The key of parts given as text written on demand: the digest of exactly the bytes
    /// [`KeyHasher::key`] would hash for their display forms, without building them.
    ///
    /// The text is written once, into a buffer on the stack (on the heap past its size), and
    /// hashed in one call: written piece by piece it went through the formatting machinery and
    /// the hasher once per piece. Both hashers read a byte stream, so the digests are those
    /// of the text written in pieces.
    pub(crate) fn key_of(&self, mode: &KeyMode, parts: &KeyText<'_>) -> WindowKey {
        let mut text = InlineText::new();
        feed(&mut text, mode, parts);
        let bytes = text.as_bytes();
        match self {
            KeyHasher::Random { keys: (k0, k1) } => {
                let mut h = siphasher::sip128::SipHasher13::new_with_keys(*k0, *k1);
                h.write(bytes);
                let digest = h.finish128();
                WindowKey(digest.h1, digest.h2)
            }
            KeyHasher::Stable => {
                let digest = xxhash_rust::xxh3::xxh3_128(bytes);
                WindowKey((digest >> 64) as u64, digest as u64)
            }
        }
    }
}

/// Writes the parts `mode` selects into `text`, each followed by a separator byte that cannot
/// appear in a URL, which keeps "a"+"bc" apart from "ab"+"c". The hasher is a byte stream, so
/// text written in pieces hashes as if whole.
fn feed(text: &mut InlineText, mode: &KeyMode, parts: &KeyText<'_>) {
    match mode {
        KeyMode::ClientMethodUrl => {
            text.part_display(parts.client);
            text.part(parts.method);
            text.part_url(&parts.url);
        }
        KeyMode::MethodUrl => {
            text.part(parts.method);
            text.part_url(&parts.url);
        }
        KeyMode::Url => text.part_url(&parts.url),
        KeyMode::Host => text.part_display(parts.origin),
        KeyMode::Workload => {
            text.part_display(parts.origin);
            match &parts.url {
                KeyUrl::Target(target) => text.part(workload(target.path_and_query())),
                KeyUrl::Text(url) => text.part(workload(&url.to_string())),
            }
        }
        KeyMode::Header(_) => {
            match parts.header {
                Some(value) => {
                    text.part("h");
                    text.part(value);
                }
                None => {
                    text.part("c");
                    text.part_display(parts.client);
                }
            }
            text.part(parts.method);
            text.part_url(&parts.url);
        }
    }
}

/// The second segment of the path of `url` (a whole URL, or a path with its query): the
/// workload of a Microsoft Graph URL (`/v1.0/users/42` → `users`); empty when there is none.
fn workload(url: &str) -> &str {
    let path = match url.find("://") {
        Some(scheme) => {
            let rest = &url[scheme + 3..];
            rest.find('/').map_or("", |slash| &rest[slash..])
        }
        None => url,
    };
    let path = path.split(['?', '#']).next().unwrap_or("");
    path.split('/')
        .filter(|segment| !segment.is_empty())
        .nth(1)
        .unwrap_or("")
}

/// Writing a key's parts, each followed by its separator.
impl InlineText {
    /// One part: its text, then the separator.
    fn part(&mut self, text: &str) {
        self.push(text.as_bytes());
        self.push(&[0xff]);
    }

    fn part_display(&mut self, part: &dyn fmt::Display) {
        let _ = write!(self, "{part}");
        self.push(&[0xff]);
    }

    /// A request's URL as `Uri` displays it, written piece by piece without the formatting
    /// machinery, which it would go through once per piece.
    fn part_url(&mut self, url: &KeyUrl<'_>) {
        match url {
            KeyUrl::Target(target) => {
                for piece in target.pieces() {
                    self.push(piece.as_bytes());
                }
                self.push(&[0xff]);
            }
            KeyUrl::Text(text) => self.part_display(*text),
        }
    }
}

/// [`KeyParts`] as anything that displays as the text: a request's key is made from its
/// `ClientId` and `Uri` directly, with no string allocated per request.
#[derive(Clone, Copy)]
pub(crate) struct KeyText<'a> {
    pub(crate) client: &'a dyn fmt::Display,
    pub(crate) method: &'a str,
    pub(crate) url: KeyUrl<'a>,
    pub(crate) origin: &'a dyn fmt::Display,
    pub(crate) header: Option<&'a str>,
}

/// A key's URL: a request's, or any text that displays as one.
#[derive(Clone, Copy)]
pub(crate) enum KeyUrl<'a> {
    Target(&'a crate::proxy::Target),
    Text(&'a dyn fmt::Display),
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parts<'a>(client: &'a str, method: &'a str, url: &'a str) -> KeyParts<'a> {
        KeyParts {
            client,
            method,
            url,
            origin: "https://api.example:443",
            header: None,
        }
    }

    mod from_str {
        use super::*;

        #[test]
        fn reads_every_name_back() {
            for mode in [
                KeyMode::ClientMethodUrl,
                KeyMode::MethodUrl,
                KeyMode::Url,
                KeyMode::Host,
                KeyMode::Workload,
                KeyMode::Header("x-tenant".into()),
            ] {
                assert_eq!(mode.name().parse::<KeyMode>(), Ok(mode));
            }
            assert!("per-host".parse::<KeyMode>().is_err());
            assert!("header:bad name".parse::<KeyMode>().is_err());
        }
    }

    mod key {
        use super::*;

        #[test]
        fn the_default_mode_keeps_clients_apart() {
            let h = KeyHasher::new();
            let mode = KeyMode::default();
            let alice = h.key(&mode, &parts("alice", "GET", "https://api.example/a"));
            let bob = h.key(&mode, &parts("bob", "GET", "https://api.example/a"));
            assert_ne!(alice, bob);
            assert_eq!(
                alice,
                h.key(&mode, &parts("alice", "GET", "https://api.example/a"))
            );
        }

        #[test]
        fn host_mode_shares_one_window_per_origin() {
            let h = KeyHasher::new();
            let a = h.key(
                &KeyMode::Host,
                &parts("alice", "GET", "https://api.example/a"),
            );
            let b = h.key(
                &KeyMode::Host,
                &parts("bob", "POST", "https://api.example/b"),
            );
            assert_eq!(a, b);
        }

        #[test]
        fn workload_mode_shares_a_window_per_graph_workload() {
            let h = KeyHasher::new();
            let key = |client, method, url| h.key(&KeyMode::Workload, &parts(client, method, url));
            let users = key(
                "alice",
                "GET",
                "https://graph.example/v1.0/users/42?$select=id",
            );
            assert_eq!(
                users,
                key("bob", "PATCH", "https://graph.example/v1.0/users")
            );
            assert_eq!(
                users,
                key("bob", "GET", "https://graph.example/beta/users/7/manager")
            );
            assert_ne!(
                users,
                key("alice", "GET", "https://graph.example/v1.0/groups/42")
            );
            // Without a workload segment: the host alone.
            assert_eq!(
                key("alice", "GET", "https://graph.example/v1.0"),
                key("bob", "GET", "https://graph.example/")
            );
            assert_eq!(workload("/v1.0/me/messages"), "me");
            assert_eq!(workload("https://graph.example/v1.0/sites?x=/a/b"), "sites");
            assert_eq!(workload("https://graph.example"), "");
        }

        #[test]
        fn method_url_mode_ignores_the_client_but_not_the_method() {
            let h = KeyHasher::new();
            let mode = KeyMode::MethodUrl;
            let get = h.key(&mode, &parts("alice", "GET", "https://api.example/a"));
            assert_eq!(
                get,
                h.key(&mode, &parts("bob", "GET", "https://api.example/a"))
            );
            assert_ne!(
                get,
                h.key(&mode, &parts("alice", "PUT", "https://api.example/a"))
            );
        }

        #[test]
        fn parts_do_not_run_into_each_other() {
            let h = KeyHasher::new();
            let mode = KeyMode::default();
            assert_ne!(
                h.key(&mode, &parts("ab", "GET", "c")),
                h.key(&mode, &parts("a", "bGET", "c"))
            );
        }

        #[test]
        fn text_written_in_pieces_keys_as_the_whole_string() {
            let h = KeyHasher::new();
            let url = format_args!("https://{}/{}", "api.example", "a");
            let client = format_args!("{}:{}", "user", "alice");
            for mode in [
                KeyMode::ClientMethodUrl,
                KeyMode::MethodUrl,
                KeyMode::Url,
                KeyMode::Host,
                KeyMode::Workload,
                KeyMode::Header("x-tenant".into()),
            ] {
                let text = KeyText {
                    client: &client,
                    method: "GET",
                    url: KeyUrl::Text(&url),
                    origin: &"https://api.example:443",
                    header: None,
                };
                assert_eq!(
                    h.key_of(&mode, &text),
                    h.key(&mode, &parts("user:alice", "GET", "https://api.example/a"))
                );
            }
        }

        #[test]
        fn a_request_target_keys_as_its_display_form() {
            let hashers = [KeyHasher::new(), KeyHasher::Stable];
            for url in [
                "https://api.example/v1/chat?x=1&y=2",
                "http://127.0.0.1:8080/",
                "http://[::1]:3000/a/b",
                "https://api.example",
                "https://api.example/?",
                "http://api.example/path?",
                "https://api.example:443/x",
                "http://API.example:80",
            ] {
                let target = crate::proxy::Target::new(url.parse().expect("a valid URL"));
                for h in &hashers {
                    let key = |url: KeyUrl<'_>| {
                        h.key_of(
                            &KeyMode::MethodUrl,
                            &KeyText {
                                client: &"127.0.0.1",
                                method: "GET",
                                url,
                                origin: &"",
                                header: None,
                            },
                        )
                    };
                    let display = key(KeyUrl::Text(&target));
                    assert_eq!(key(KeyUrl::Target(&target)), display, "{url}");
                    let workload = |url: KeyUrl<'_>| {
                        h.key_of(
                            &KeyMode::Workload,
                            &KeyText {
                                client: &"127.0.0.1",
                                method: "GET",
                                url,
                                origin: &"",
                                header: None,
                            },
                        )
                    };
                    assert_eq!(
                        workload(KeyUrl::Target(&target)),
                        workload(KeyUrl::Text(&target)),
                        "{url}"
                    );
                }
            }
        }

        #[test]
        fn stable_keys_never_change() {
            // Replicas of different versions share windows through these keys: a change here
            // splits every fleet mid-upgrade.
            let key = KeyHasher::Stable.key(
                &KeyMode::ClientMethodUrl,
                &parts("127.0.0.1", "GET", "https://api.example/v1/chat?x=1"),
            );
            assert_eq!(
                (format!("{:016x}", key.0), format!("{:016x}", key.1)),
                ("eb3c52b90d012ea4".to_owned(), "4800610f625c95e1".to_owned())
            );
            // A text past the stack buffer keys as it would in one piece.
            let long = format!("https://api.example/{}", "a".repeat(600));
            let parts = parts("127.0.0.1", "GET", &long);
            let mut whole = b"127.0.0.1\xffGET\xff".to_vec();
            whole.extend_from_slice(long.as_bytes());
            whole.push(0xff);
            let digest = xxhash_rust::xxh3::xxh3_128(&whole);
            assert_eq!(
                KeyHasher::Stable.key(&KeyMode::ClientMethodUrl, &parts),
                WindowKey((digest >> 64) as u64, digest as u64)
            );
        }

        #[test]
        fn header_mode_falls_back_to_the_client() {
            let h = KeyHasher::new();
            let mode = KeyMode::Header("x-tenant".into());
            let with = |value| KeyParts {
                header: Some(value),
                ..parts("alice", "GET", "https://api.example/a")
            };
            assert_eq!(
                h.key(&mode, &with("t1")),
                h.key(
                    &mode,
                    &KeyParts {
                        client: "bob",
                        ..with("t1")
                    }
                )
            );
            assert_ne!(h.key(&mode, &with("t1")), h.key(&mode, &with("t2")));
            assert_ne!(
                h.key(&mode, &parts("alice", "GET", "https://api.example/a")),
                h.key(&mode, &parts("bob", "GET", "https://api.example/a"))
            );
        }
    }
}
