//! Small text helpers the report formats share: durations for people, escaping for XML,
//! HTML and Markdown, and times shortened to what a reader needs.

use std::borrow::Cow;
use std::time::SystemTime;

use super::time;

/// A duration in milliseconds for people: `0 ms`, `250 ms`, `1.90 s`, `2 min 5 s`.
pub(crate) fn millis(ms: f64) -> String {
    let ms = ms.max(0.0);
    if ms < 1000.0 {
        format!("{ms:.0} ms")
    } else if ms < 60_000.0 {
        format!("{:.2} s", ms / 1000.0)
    } else {
        let secs = (ms / 1000.0).round();
        format!("{} min {} s", (secs / 60.0).floor(), secs % 60.0)
    }
}

/// `count` and `noun`, plural unless one: `1 retry`, `2 retries`.
pub(crate) fn count(count: usize, one: &str, many: &str) -> String {
    format!("{count} {}", if count == 1 { one } else { many })
}

/// `s` escaped for XML and HTML text and attribute values: `& < > " '` as entities, and the
/// characters XML 1.0 forbids even as entities (controls other than tab, newline and carriage
/// return) replaced by U+FFFD.
pub(crate) fn xml(s: &str) -> Cow<'_, str> {
    let clean = |c: char| {
        !matches!(c, '&' | '<' | '>' | '"' | '\'')
            && (!c.is_control() || matches!(c, '\t' | '\n' | '\r'))
            && !matches!(c, '\u{FFFE}' | '\u{FFFF}')
    };
    if s.chars().all(clean) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 16);
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            '\t' | '\n' | '\r' => out.push(c),
            // C1 controls are allowed in XML 1.0 but useless and invisible: replaced too.
            c if c.is_control() || matches!(c, '\u{FFFE}' | '\u{FFFF}') => out.push('\u{FFFD}'),
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// `s` as plain text in a Markdown table cell: no HTML, no formatting, no column break, one
/// line.
pub(crate) fn md(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '\\' | '`' | '*' | '_' | '[' | ']' | '|' | '#' | '~' | '!' => {
                out.push('\\');
                out.push(c);
            }
            c if c.is_control() => out.push(' '),
            c => out.push(c),
        }
    }
    out
}

/// `s` as inline code in Markdown (safe in a table cell): fenced with more backticks than
/// it contains in a row, with `|` escaped for the table.
pub(crate) fn md_code(s: &str) -> String {
    let s: String = s
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    let longest = s.split(|c| c != '`').map(str::len).max().unwrap_or(0);
    let fence = "`".repeat(longest + 1);
    let pad = if s.starts_with('`') || s.ends_with('`') {
        " "
    } else {
        ""
    };
    format!("{fence}{pad}{}{pad}{fence}", s.replace('|', "\\|"))
}

/// `command` quoted for a POSIX shell, by `shlex`: it also quotes what an interactive shell
/// would expand (`!`, `{`, non-ASCII). A NUL, which no real argument holds (only an edited
/// event log), is quoted like any other character, as the report's escaping then shows it.
pub(crate) fn shell_words(command: &[String]) -> String {
    // With NULs allowed, joining cannot fail.
    shlex::Quoter::new()
        .allow_nul(true)
        .join(command.iter().map(String::as_str))
        .unwrap_or_default()
}

/// `s` cut to `max` characters, with `…` at the end when cut.
pub(crate) fn truncate(s: &str, max: usize) -> Cow<'_, str> {
    if s.chars().count() <= max {
        return Cow::Borrowed(s);
    }
    let mut cut: String = s.chars().take(max.saturating_sub(1)).collect();
    cut.push('…');
    Cow::Owned(cut)
}

/// A header name for people: `retry-after` as `Retry-After`.
pub(crate) fn header_name(name: &str) -> String {
    name.split('-')
        .map(|word| {
            let mut chars = word.chars();
            match chars.next() {
                Some(first) => first.to_uppercase().chain(chars).collect(),
                None => String::new(),
            }
        })
        .collect::<Vec<String>>()
        .join("-")
}

/// The client and, when known, its `User-Agent`: `alice · curl/8.5.0`, the client as
/// [`client_name`] writes it.
pub(crate) fn client_label(client: &str, user_agent: Option<&str>) -> String {
    let client = client_name(client);
    match user_agent {
        Some(agent) => format!("{client} · {}", truncate(agent, 60)),
        None => client.into_owned(),
    }
}

/// A client as a person reads it, from the machine form the judge keys windows by (which the
/// JSON report and the event log keep): the name a client gives itself, `header:worker-3`
/// and `user:alice` as `worker-3` and `alice`; a process, `process:curl[4242]`, as `pid 4242
/// (curl)`; anything else (a peer address) as it is.
pub(crate) fn client_name(client: &str) -> Cow<'_, str> {
    if let Some(name) = client
        .strip_prefix("header:")
        .or_else(|| client.strip_prefix("user:"))
        .filter(|name| !name.is_empty())
    {
        return Cow::Borrowed(name);
    }
    let process = client
        .strip_prefix("process:")
        .and_then(|rest| rest.strip_suffix(']'))
        .and_then(|rest| rest.rsplit_once('['))
        .filter(|(_, pid)| !pid.is_empty() && pid.bytes().all(|b| b.is_ascii_digit()));
    match process {
        Some((name, pid)) => Cow::Owned(format!("pid {pid} ({name})")),
        None => Cow::Borrowed(client),
    }
}

/// How times are shown in tables: the time of day when the whole run is on one UTC date
/// (stated once, in the heading), the full RFC 3339 time otherwise.
#[derive(Clone, Debug)]
pub(crate) struct Times {
    /// The one UTC date, if there is one.
    pub(crate) date: Option<String>,
}

impl Times {
    /// The style for times from `first` to `last`.
    pub(crate) fn new(first: Option<SystemTime>, last: Option<SystemTime>) -> Times {
        let date = match (first, last) {
            (Some(first), Some(last)) if time::date(first) == time::date(last) => {
                Some(time::date(first))
            }
            (Some(first), None) => Some(time::date(first)),
            _ => None,
        };
        Times { date }
    }

    /// `at`, shortened if the style allows.
    pub(crate) fn show(&self, at: SystemTime) -> String {
        match self.date {
            Some(_) => time::time_of_day(at),
            None => time::format(at),
        }
    }

    /// A note for the heading of a table: `(times UTC, 2025-03-01)` or `(times UTC)`.
    pub(crate) fn note(&self) -> String {
        match &self.date {
            Some(date) => format!("times UTC, {date}"),
            None => "times UTC".to_owned(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    mod millis {
        use super::*;

        #[test]
        fn picks_a_unit_for_people() {
            assert_eq!(millis(0.0), "0 ms");
            assert_eq!(millis(0.4), "0 ms");
            assert_eq!(millis(250.4), "250 ms");
            assert_eq!(millis(1900.0), "1.90 s");
            assert_eq!(millis(59_994.0), "59.99 s");
            assert_eq!(millis(125_000.0), "2 min 5 s");
            assert_eq!(millis(-3.0), "0 ms");
        }
    }

    mod xml {
        use super::*;

        #[test]
        fn escapes_markup_and_quotes() {
            assert_eq!(
                xml(r#"<a href="x?a=1&b='2'">"#),
                "&lt;a href=&quot;x?a=1&amp;b=&apos;2&apos;&quot;&gt;"
            );
        }

        #[test]
        fn leaves_clean_text_borrowed() {
            assert!(matches!(xml("GET https://api.example/ü"), Cow::Borrowed(_)));
        }

        #[test]
        fn replaces_what_xml_cannot_carry_and_keeps_whitespace() {
            assert_eq!(
                xml("a\u{0}b\u{1b}c\td\ne\u{85}f"),
                "a\u{FFFD}b\u{FFFD}c\td\ne\u{FFFD}f"
            );
        }
    }

    mod md {
        use super::*;

        #[test]
        fn neutralises_markup_and_column_breaks() {
            assert_eq!(md("<b>*a*|_b_</b>"), "&lt;b&gt;\\*a\\*\\|\\_b\\_&lt;/b&gt;");
            assert_eq!(md("two\nlines"), "two lines");
        }

        #[test]
        fn code_fences_around_backticks_and_escapes_pipes() {
            assert_eq!(md_code("GET /a|b"), "`GET /a\\|b`");
            assert_eq!(md_code("a``b"), "```a``b```");
            assert_eq!(md_code("`x"), "`` `x ``");
        }
    }

    mod shell_words {
        use super::*;

        #[test]
        fn quotes_only_what_needs_it() {
            let words: Vec<String> = ["curl", "-s", "http://a/b?x=1&y", "it's", "", "a!{b,c}"]
                .map(String::from)
                .to_vec();
            assert_eq!(
                shell_words(&words),
                r#"curl -s 'http://a/b?x=1&y' "it's" '' 'a!{b,c}'"#
            );
        }
    }

    mod header_name {
        use super::*;

        #[test]
        fn capitalises_each_word() {
            assert_eq!(header_name("retry-after"), "Retry-After");
            assert_eq!(header_name("x-ratelimit-reset"), "X-Ratelimit-Reset");
            assert_eq!(header_name("ratelimit"), "Ratelimit");
        }
    }

    mod client_name {
        use super::*;

        #[test]
        fn reads_as_a_person_would_say_it() {
            assert_eq!(client_name("header:naive-client"), "naive-client");
            assert_eq!(client_name("user:alice"), "alice");
            assert_eq!(client_name("process:curl[1234]"), "pid 1234 (curl)");
            assert_eq!(client_name("process:a[b][77]"), "pid 77 (a[b])");
            assert_eq!(client_name("127.0.0.1"), "127.0.0.1");
            assert_eq!(client_name("::1"), "::1");
        }

        #[test]
        fn leaves_what_it_does_not_recognise_as_it_is() {
            for odd in [
                "header:",
                "process:curl",
                "process:curl[]",
                "process:x[12a]",
            ] {
                assert_eq!(client_name(odd), odd);
            }
        }

        #[test]
        fn is_what_the_label_shows_before_the_user_agent() {
            assert_eq!(
                client_label("header:naive-client", Some("reqwest/0.13")),
                "naive-client · reqwest/0.13"
            );
        }
    }

    mod truncate {
        use super::*;

        #[test]
        fn cuts_on_characters() {
            assert_eq!(truncate("héllo", 5), "héllo");
            assert_eq!(truncate("héllo world", 5), "héll…");
        }
    }
}
