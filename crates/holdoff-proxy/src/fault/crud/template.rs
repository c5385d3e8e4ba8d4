//! URL and query templates of CRUD actions: `{name}` placeholders, filled from a request's
//! URL and quoted for JSONPath.

use serde_json::Value;

/// A piece of a URL or query template.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Part {
    Text(String),
    /// A placeholder; in a query, the quote it is written inside, if any.
    Param {
        name: String,
        quote: Option<char>,
    },
}

/// `base` and `path` joined with one `/`; `path` may be empty, or start with `?`.
pub(super) fn join_url(base: &str, path: &str) -> String {
    let base = base.trim_end_matches('/');
    match path {
        "" => base.to_owned(),
        path if path.starts_with('?') => format!("{base}{path}"),
        path => format!("{base}/{}", path.trim_start_matches('/')),
    }
}

/// The length of `scheme://host[:port]` at the start of `url`.
pub(super) fn origin_len(url: &str) -> usize {
    let after = url.find("://").map_or(0, |at| at + 3);
    url[after..].find('/').map_or(url.len(), |at| after + at)
}

/// `text` split at its `{name}` placeholders; in a query (`quoted`), each placeholder knows
/// the quote it is inside.
pub(super) fn template(text: &str, quoted: bool) -> Result<Vec<Part>, String> {
    let mut parts = Vec::new();
    let mut literal = String::new();
    let mut quote: Option<char> = None;
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        match c {
            '{' => {
                let mut name = String::new();
                loop {
                    match chars.next() {
                        Some('}') => break,
                        Some(c) => name.push(c),
                        None => {
                            return Err(format!(
                                "`{text}` opens a placeholder `{{{name}` that it does not \
                                 close: write `{{name}}`"
                            ));
                        }
                    }
                }
                if name.is_empty() {
                    return Err(format!(
                        "`{text}` has an empty placeholder `{{}}`: name it, as in `{{id}}`"
                    ));
                }
                if !literal.is_empty() {
                    parts.push(Part::Text(std::mem::take(&mut literal)));
                }
                parts.push(Part::Param { name, quote });
            }
            '\\' if quoted && quote.is_some() => {
                literal.push(c);
                if let Some(next) = chars.next() {
                    literal.push(next);
                }
            }
            '\'' | '"' if quoted => {
                match quote {
                    None => quote = Some(c),
                    Some(open) if open == c => quote = None,
                    Some(_) => {}
                }
                literal.push(c);
            }
            c => literal.push(c),
        }
    }
    if !literal.is_empty() {
        parts.push(Part::Text(literal));
    }
    if quoted {
        // Dev Proxy's queries start `$.[`, which Json.NET reads as `$[`.
        if let Some(Part::Text(first)) = parts.first_mut()
            && let Some(rest) = first.strip_prefix("$.[")
        {
            *first = format!("$[{rest}");
        }
    }
    Ok(parts)
}

/// The template with every placeholder replaced by `value(name)` as it stands.
pub(super) fn fill<'a>(parts: &'a [Part], value: impl Fn(&'a str) -> &'a str) -> String {
    parts
        .iter()
        .map(|part| match part {
            Part::Text(text) => text.as_str(),
            Part::Param { name, .. } => value(name),
        })
        .collect()
}

/// Writes `value` into a query: escaped inside quotes; outside them as it is when it is a
/// number, else as a string, so that a URL cannot change the query's shape.
pub(super) fn literal(out: &mut String, value: &str, quote: Option<char>) {
    let is_number = matches!(serde_json::from_str::<Value>(value), Ok(Value::Number(_)));
    let (open, close) = match quote {
        Some(_) => ("", ""),
        None if is_number => {
            out.push_str(value);
            return;
        }
        None => ("'", "'"),
    };
    let quote = quote.unwrap_or('\'');
    out.push_str(open);
    for c in value.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            c if c == quote => {
                out.push('\\');
                out.push(c);
            }
            c if c.is_control() => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push_str(close);
}

/// Whether two placeholder names are the same: Dev Proxy ignores case and reads `-` as `_`.
pub(super) fn same_name(a: &str, b: &str) -> bool {
    let norm = |c: char| {
        if c == '-' {
            '_'
        } else {
            c.to_ascii_lowercase()
        }
    };
    a.len() == b.len() && a.chars().map(norm).eq(b.chars().map(norm))
}

/// `%XX` escapes decoded; a bad escape is kept as written, and bytes that are not UTF-8
/// become U+FFFD.
pub(super) fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        if bytes[i] == b'%'
            && i + 2 < bytes.len()
            && let (Some(high), Some(low)) = (hex(bytes[i + 1]), hex(bytes[i + 2]))
        {
            out.push((high * 16 + low) as u8);
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}
