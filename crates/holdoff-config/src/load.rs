//! Reading configuration files: JSON with comments, or YAML, into the raw types of
//! [`file`](crate::file).
//!
//! Only the syntax and the shape are checked here: an unknown key, a value of the wrong type
//! or a missing key is reported with its key path (`errors.errors[0].responses[1].statusCode`)
//! and, where the parser knows it, the line and column. The values themselves are checked by
//! [`compile`](crate::compile).

use std::path::{Path, PathBuf};

use serde::de::DeserializeOwned;
use serde_path_to_error::Segment;

use crate::error::{ConfigProblems, FileError, index, key};
use crate::file::RawConfig;
use crate::jsonc;

/// The names a configuration file is looked for under, in this order.
pub const FILE_NAMES: [&str; 4] = [
    "holdoff.json",
    "holdoff.jsonc",
    "holdoff.yaml",
    "holdoff.yml",
];

/// The syntax of a configuration or data file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Format {
    /// JSON, with `//` and `/* */` comments allowed.
    Json,
    /// YAML.
    Yaml,
}

impl Format {
    /// The format its extension names: `.json` and `.jsonc` are JSON, `.yaml` and `.yml` YAML
    /// (any case); `None` for anything else.
    pub fn from_path(path: &Path) -> Option<Format> {
        let extension = path.extension()?.to_str()?.to_ascii_lowercase();
        match extension.as_str() {
            "json" | "jsonc" => Some(Format::Json),
            "yaml" | "yml" => Some(Format::Yaml),
            _ => None,
        }
    }

    /// The format the text looks like: JSON if it starts (after blanks) with `{`, `[` or a
    /// `/` comment, else YAML.
    pub fn sniff(text: &str) -> Format {
        match text
            .trim_start_matches('\u{feff}')
            .trim_start()
            .bytes()
            .next()
        {
            Some(b'{' | b'[' | b'/') => Format::Json,
            _ => Format::Yaml,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Format::Json => "JSON",
            Format::Yaml => "YAML",
        }
    }
}

/// Reads a configuration file's text.
///
/// `file` names the text in errors.
///
/// # Errors
///
/// The first syntax or shape error: the key path, the line and column where the parser gives
/// them, and what was expected.
///
/// # Examples
///
/// ```
/// use holdoff_config::load::{Format, parse};
///
/// let text = r#"{
///     // Everything at api.example.com.
///     "urlsToWatch": ["https://api.example.com/*"]
/// }"#;
/// let raw = parse(text, Format::Json, "holdoff.json")?;
/// assert_eq!(raw.urls_to_watch.unwrap().len(), 1);
///
/// let err = parse("{\"urlsToWach\": []}", Format::Json, "holdoff.json").unwrap_err();
/// assert!(err.to_string().contains("unknown key `urlsToWach`"));
/// # Ok::<(), holdoff_config::compile::ConfigProblems>(())
/// ```
pub fn parse(text: &str, format: Format, file: &str) -> Result<RawConfig, ConfigProblems> {
    parse_as(text, format, file)
}

/// Reads and parses the configuration file at `path`, in the format its extension names (or,
/// for another extension, the format its content looks like).
///
/// # Errors
///
/// The file cannot be read (the error names the path and the reason), or [`parse`] fails.
pub fn load_file(path: &Path) -> Result<RawConfig, ConfigProblems> {
    read_as(path, &path.display().to_string())
}

/// The first of [`FILE_NAMES`] that exists in `dir`.
pub fn find_in(dir: &Path) -> Option<PathBuf> {
    FILE_NAMES
        .iter()
        .map(|name| dir.join(name))
        .find(|path| path.is_file())
}

/// Reads the file at `path` as a `T`, naming it `file` in errors.
pub(crate) fn read_as<T: DeserializeOwned>(path: &Path, file: &str) -> Result<T, ConfigProblems> {
    let text = read_text(path)
        .map_err(|message| ConfigProblems::one(FileError::new(file, "", message)))?;
    parse_for_path(&text, path, file)
}

/// The text of the configuration file at `path`, if it is a regular file of at most 16 MiB in
/// UTF-8: a named pipe would
/// block the read, and a device such as `/dev/zero` never ends.
///
/// # Errors
///
/// A message saying what the file is instead, or why it cannot be read.
pub fn read_text(path: &Path) -> Result<String, String> {
    let bytes = crate::files::read_regular(path, "the file")?;
    String::from_utf8(bytes).map_err(|err| {
        format!(
            "cannot read the file: it is not UTF-8 text (byte {} is not); save it as UTF-8",
            err.utf8_error().valid_up_to()
        )
    })
}

/// Parses the text of the file at `path` as a `T`, in the format its extension names or, for
/// another extension, the format its content looks like (and then the first error says so).
pub(crate) fn parse_for_path<T: DeserializeOwned>(
    text: &str,
    path: &Path,
    file: &str,
) -> Result<T, ConfigProblems> {
    if let Some(format) = Format::from_path(path) {
        return parse_as(text, format, file);
    }
    let format = Format::sniff(text);
    parse_as(text, format, file).map_err(|mut errors| {
        if let Some(first) = errors.0.first_mut() {
            first.message.push_str(&format!(
                " (read as {} from its content: the extension is not .json, .jsonc, .yaml or \
                 .yml)",
                format.name()
            ));
        }
        errors
    })
}

/// Parses `text` as a `T`: the same reading, error paths and messages as [`parse`], for the
/// data files (errors and mocks files) too.
pub(crate) fn parse_as<T: DeserializeOwned>(
    text: &str,
    format: Format,
    file: &str,
) -> Result<T, ConfigProblems> {
    let result = match format {
        Format::Json => parse_json(text, file),
        Format::Yaml => parse_yaml(text, file),
    };
    result.map_err(ConfigProblems::one)
}

fn parse_json<T: DeserializeOwned>(text: &str, file: &str) -> Result<T, FileError> {
    // A byte order mark is not JSON; the comments are blanked with their positions kept, so
    // serde_json's lines and columns are the file's.
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let Ok(stripped) = jsonc::strip_comments(text) else {
        return Err(FileError::new(
            file,
            "",
            "a `/` outside a string must start a comment (`//` or `/* */`), and a `/*` \
             comment must end with `*/`",
        ));
    };
    let mut de = serde_json::Deserializer::from_slice(&stripped);
    let value = serde_path_to_error::deserialize(&mut de).map_err(|err| {
        let path = key_path(err.path());
        json_error(&err.into_inner(), path, file)
    })?;
    de.end()
        .map_err(|err| json_error(&err, String::new(), file))?;
    Ok(value)
}

fn json_error(err: &serde_json::Error, path: String, file: &str) -> FileError {
    let (line, column) = (err.line(), err.column());
    let mut message = err.to_string();
    let suffix = format!(" at line {line} column {column}");
    if let Some(stripped) = message.strip_suffix(&suffix) {
        message = stripped.to_owned();
    }
    FileError {
        file: file.to_owned(),
        message: humanize(&message, &path),
        path,
        // serde_json's column is 0 at the end of the input.
        line: (line > 0).then_some((line, column.max(1))),
    }
}

/// The deepest a YAML file may nest: a configuration nests a few levels, and the parser takes
/// time that grows with the square of the depth.
const MAX_YAML_DEPTH: usize = 64;

fn parse_yaml<T: DeserializeOwned>(text: &str, file: &str) -> Result<T, FileError> {
    if let Some(line) = too_deep(text, MAX_YAML_DEPTH) {
        return Err(FileError {
            file: file.to_owned(),
            path: String::new(),
            message: format!(
                "nested more than {MAX_YAML_DEPTH} levels deep: a holdoff configuration nests a \
                 few; is this the file you meant?"
            ),
            line: Some((line, 1)),
        });
    }
    let de = serde_yaml_ng::Deserializer::from_str(text);
    serde_path_to_error::deserialize(de).map_err(|err| {
        let path = key_path(err.path());
        let inner = err.into_inner();
        let location = inner.location().map(|l| (l.line(), l.column()));
        let mut message = inner.to_string();
        if let Some((line, column)) = location {
            message = message.replace(&format!(" at line {line} column {column}"), "");
        }
        // serde_yaml_ng puts its own key path in front (for an unknown key, the parent's);
        // ours is reported apart.
        if let Some((prefix, rest)) = message.split_once(": ") {
            let within = |p: &str| {
                path.strip_prefix(p)
                    .is_some_and(|rest| rest.is_empty() || rest.starts_with(['.', '[']))
            };
            if within(prefix) {
                message = rest.to_owned();
            }
        }
        FileError {
            file: file.to_owned(),
            message: humanize(&message, &path),
            path,
            line: location,
        }
    })
}

/// Whether `text`, read as YAML, nests deeper than any configuration does (and deeper than
/// the YAML parser reads quickly): such a file is refused before it is parsed.
pub fn yaml_too_deep(text: &str) -> bool {
    too_deep(text, MAX_YAML_DEPTH).is_some()
}

/// The first line (from 1) at which `text`, read as YAML, nests deeper than `max`: by its
/// flow brackets (`[`, `{`, outside quotes and comments), or by its block structure (lines
/// indented deeper than the line before). A quick look, not a parse: it may count a bracket
/// in a plain scalar, which only ever errs towards a lower depth limit on odd files.
fn too_deep(text: &str, max: usize) -> Option<usize> {
    let mut flow = 0usize;
    let mut indents: Vec<usize> = Vec::new();
    for (number, line) in text.lines().enumerate() {
        let trimmed = line.trim_start_matches(' ');
        if trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        let indent = line.len() - trimmed.len();
        while indents.last().is_some_and(|&top| top >= indent) {
            indents.pop();
        }
        indents.push(indent);
        let mut quote = None;
        for c in trimmed.chars() {
            match (quote, c) {
                (Some(q), c) if c == q => quote = None,
                (Some(_), _) => {}
                (None, '"' | '\'') => quote = Some(c),
                (None, '#') => break,
                (None, '[' | '{') => {
                    flow += 1;
                    if flow + indents.len() > max {
                        return Some(number + 1);
                    }
                }
                (None, ']' | '}') => flow = flow.saturating_sub(1),
                _ => {}
            }
        }
        if flow + indents.len() > max {
            return Some(number + 1);
        }
    }
    None
}

/// `errors.errors[0].responses[1].statusCode`; empty for the root.
fn key_path(path: &serde_path_to_error::Path) -> String {
    let mut out = String::new();
    for segment in path {
        match segment {
            Segment::Seq { index: i } => out = index(&out, *i),
            Segment::Map { key: name } | Segment::Enum { variant: name } => out = key(&out, name),
            // A key not read yet (the parser failed on it): the path up to its parent.
            Segment::Unknown => break,
        }
    }
    out
}

/// serde's messages, said in the file's terms: keys rather than fields, JSON's names for
/// types rather than Rust's, and the keys allowed after an unknown one.
fn humanize(message: &str, path: &str) -> String {
    if let Some(rest) = message.strip_prefix("unknown field `")
        && let Some((key, allowed)) = rest.split_once('`')
    {
        let allowed = backticked(allowed);
        return unknown("key", key, &allowed, "the keys allowed here are");
    }
    if let Some(rest) = message.strip_prefix("unknown variant `")
        && let Some((value, allowed)) = rest.split_once('`')
    {
        let allowed = backticked(allowed);
        return unknown("value", value, &allowed, "expected one of");
    }
    if let Some(key) = message
        .strip_prefix("missing field `")
        .and_then(|rest| rest.strip_suffix('`'))
    {
        return format!("missing key `{key}`, which is required here");
    }
    if message.contains("untagged enum RawHeaders") {
        return "expected a list of {\"name\": …, \"value\": …} objects, or an object of \
                header names to string values"
            .to_owned();
    }
    // The one list of fixed length.
    if path.ends_with("dynamicRange")
        && (message == "trailing characters" || message.starts_with("invalid length"))
    {
        return "expected [MIN, MAX]: two whole numbers of seconds".to_owned();
    }
    if let Some((found, expected)) = message.split_once(", expected ")
        && (found.starts_with("invalid type: ") || found.starts_with("invalid value: "))
    {
        let expected = if path.ends_with("statusCode") {
            "an HTTP status, a whole number from 100 to 599".to_owned()
        } else {
            expected_in_file_terms(expected)
        };
        return format!("{found}, expected {expected}");
    }
    let said = match message {
        "trailing comma" => "a comma after the last item: JSON allows none there",
        "trailing characters" => {
            "more text after the end of the configuration: a file holds one object"
        }
        "EOF while parsing a value" => "the file ends where a value was expected",
        "EOF while parsing an object" => "the file ends inside an object: a `}` is missing",
        "EOF while parsing a list" => "the file ends inside a list: a `]` is missing",
        "EOF while parsing a string" => "the file ends inside a string: a closing `\"` is missing",
        // libyaml's, for a key indented differently from its siblings.
        other if other.contains("while parsing a block mapping") => {
            return format!("{other} (check the indentation)");
        }
        other => other,
    };
    said.to_owned()
}

/// The names between backticks in `, expected one of `a`, `b``.
fn backticked(text: &str) -> Vec<&str> {
    text.split('`').skip(1).step_by(2).collect()
}

fn unknown(what: &str, given: &str, allowed: &[&str], lead: &str) -> String {
    let mut message = format!("unknown {what} `{}`", crate::error::cut(given));
    // No slip of the keyboard is several times longer than a name: no search then.
    let longest = allowed.iter().map(|name| name.len()).max().unwrap_or(0);
    let near = (given.len() <= 2 * longest + 2)
        .then(|| closest(given, allowed))
        .flatten();
    if let Some(near) = near {
        message.push_str(&format!(" (did you mean `{near}`?)"));
    }
    if allowed.is_empty() {
        message.push_str(&format!("; no {what}s are allowed here"));
    } else {
        message.push_str(&format!("; {lead} {}", allowed.join(", ")));
    }
    message
}

/// The allowed name nearest to `given`, if it is near enough to be a typo.
fn closest<'a>(given: &str, allowed: &[&'a str]) -> Option<&'a str> {
    let given = given.to_ascii_lowercase();
    allowed
        .iter()
        .map(|name| (edit_distance(&given, &name.to_ascii_lowercase()), *name))
        .filter(|(distance, name)| *distance <= 2.max(name.len() / 4))
        .min_by_key(|(distance, _)| *distance)
        .map(|(_, name)| name)
}

/// Levenshtein distance, in characters.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let above = row[j + 1];
            row[j + 1] = if ca == *cb {
                diagonal
            } else {
                1 + diagonal.min(above).min(row[j])
            };
            diagonal = above;
        }
    }
    row[b.len()]
}

/// Rust's type names in serde's "expected …", as a file's author knows them.
fn expected_in_file_terms(expected: &str) -> String {
    let said = match expected {
        "u16" => "a whole number from 0 to 65535",
        "u64" => "a whole number, 0 or more",
        "f64" => "a number",
        "a boolean" => "true or false",
        "a sequence" => "a list",
        "a map" => "an object",
        other if other.starts_with("struct ") => "an object",
        other => other,
    };
    said.to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn error(text: &str, format: Format) -> FileError {
        let errors = parse(text, format, "f").expect_err("an error");
        assert_eq!(errors.0.len(), 1);
        errors.0.into_iter().next().expect("one error")
    }

    mod format {
        use super::*;

        #[test]
        fn is_named_by_the_extension_in_any_case() {
            assert_eq!(Format::from_path(Path::new("a.json")), Some(Format::Json));
            assert_eq!(Format::from_path(Path::new("a.JSONC")), Some(Format::Json));
            assert_eq!(Format::from_path(Path::new("a.yml")), Some(Format::Yaml));
            assert_eq!(Format::from_path(Path::new("a.Yaml")), Some(Format::Yaml));
            assert_eq!(Format::from_path(Path::new("a.toml")), None);
            assert_eq!(Format::from_path(Path::new("holdoff")), None);
        }

        #[test]
        fn is_sniffed_from_the_first_character() {
            assert_eq!(Format::sniff("  {\"a\": 1}"), Format::Json);
            assert_eq!(Format::sniff("// note\n{}"), Format::Json);
            assert_eq!(Format::sniff("seed: 1"), Format::Yaml);
            assert_eq!(Format::sniff(""), Format::Yaml);
        }
    }

    mod parse {
        use super::*;

        #[test]
        fn allows_comments_and_keeps_positions() {
            let text = "{\n  /* a\n  block */ \"seed\": 1, // line\n  \"seeed\": 2\n}";
            let err = error(text, Format::Json);
            assert_eq!(err.path, "seeed");
            assert_eq!(err.line, Some((4, 9)));
        }

        #[test]
        fn names_the_key_path_of_a_wrong_type() {
            let text = r#"{"errors": {"errors": [{"request": {"url": "*"},
                "responses": [{"statusCode": 429}, {"statusCode": "429"}]}]}}"#;
            let err = error(text, Format::Json);
            assert_eq!(err.path, "errors.errors[0].responses[1].statusCode");
            assert_eq!(
                err.message,
                "invalid type: string \"429\", expected an HTTP status, a whole number from 100 \
                 to 599"
            );
            assert_eq!(err.line.map(|(line, _)| line), Some(2));
        }

        #[test]
        fn reads_yaml_with_the_same_paths() {
            let text = "errors:\n  errors:\n    - request: {url: '*'}\n      responses:\n        - statusCode: soon\n";
            let err = error(text, Format::Yaml);
            assert_eq!(err.path, "errors.errors[0].responses[0].statusCode");
            assert!(
                err.message.starts_with("invalid type: string \"soon\""),
                "{}",
                err.message
            );
            assert_eq!(err.line, Some((5, 23)));
        }

        #[test]
        fn lists_the_allowed_keys_and_the_nearest() {
            let err = error("{\"latency\": {\"minMs\": 1, \"maxMS\": 2}}", Format::Json);
            assert_eq!(err.path, "latency.maxMS");
            assert_eq!(
                err.message,
                "unknown key `maxMS` (did you mean `maxMs`?); the keys allowed here are minMs, \
                 maxMs, url, rate"
            );
        }

        #[test]
        fn reads_an_empty_yaml_file_as_an_empty_configuration() {
            assert_eq!(parse("", Format::Yaml, "f"), Ok(RawConfig::default()));
            assert_eq!(
                parse("# nothing yet\n", Format::Yaml, "f"),
                Ok(RawConfig::default())
            );
        }

        #[test]
        fn refuses_trailing_text_and_unclosed_comments() {
            let err = error("{} {}", Format::Json);
            assert_eq!(
                err.message,
                "more text after the end of the configuration: a file holds one object"
            );
            let err = error("{} /* open", Format::Json);
            assert!(
                err.message.contains("must end with `*/`"),
                "{}",
                err.message
            );
        }
    }

    mod find_in {
        use super::*;

        #[test]
        fn finds_nothing_in_an_empty_place() {
            assert_eq!(find_in(Path::new("/nonexistent/holdoff")), None);
        }
    }

    mod hostile_files {
        use super::*;

        #[test]
        fn deep_yaml_is_refused_before_the_parser_sees_it() {
            let flow = format!("x: {}{}", "[".repeat(20_000), "]".repeat(20_000));
            assert_eq!(too_deep(&flow, MAX_YAML_DEPTH), Some(1));
            let block: String = (0..100)
                .map(|i| format!("{}k{i}:\n", "  ".repeat(i)))
                .collect();
            assert_eq!(too_deep(&block, MAX_YAML_DEPTH), Some(65));
            let err = parse(&flow, Format::Yaml, "deep.yaml")
                .unwrap_err()
                .to_string();
            assert!(
                err.starts_with("deep.yaml:1:1: nested more than 64 levels deep"),
                "{err}"
            );
            // Brackets in quotes or comments are text, and real files pass.
            assert_eq!(too_deep("a: \"[[[[\"  # [[[[\nb: [1, [2]]\n", 3), None);
            assert!(!yaml_too_deep(
                "errors:\n  errors:\n    - request: { url: \"*\" }\n"
            ));
        }

        #[test]
        fn a_huge_unknown_key_makes_a_short_message_at_once() {
            let key = "k".repeat(1_000_000);
            let err = parse(&format!("{{\"{key}\": 1}}"), Format::Json, "holdoff.json")
                .unwrap_err()
                .to_string();
            assert!(err.len() < 1_000, "{} bytes", err.len());
            assert!(err.contains("… (1000000 characters)"), "{err}");
        }

        #[test]
        fn a_fifo_a_device_and_a_directory_are_refused_unread() {
            let dir = holdoff_testkit::TempDir::new("hostile-config");
            let err = read_text(Path::new("/dev/zero")).unwrap_err();
            assert!(err.contains("is a device, not a regular file"), "{err}");
            let err = read_text(dir.path()).unwrap_err();
            assert!(err.contains("is a directory"), "{err}");
            #[cfg(unix)]
            {
                let fifo = dir.join("holdoff.json");
                let made = std::process::Command::new("mkfifo").arg(&fifo).status();
                if made.is_ok_and(|status| status.success()) {
                    let err = read_text(&fifo).unwrap_err();
                    assert!(err.contains("named pipe (FIFO)"), "{err}");
                }
            }
        }
    }
}
