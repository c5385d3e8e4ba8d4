//! JSON with comments, read one way by holdoff's own files ([`load`](crate::load)) and by the
//! Dev Proxy import ([`devproxy`](crate::devproxy)).
//!
//! Comments become spaces and the line breaks inside them are kept, so the JSON parser's byte
//! offsets, lines and columns are those of the text as written.

use std::io::Read as _;

use json_comments::CommentSettings;

/// A `/` outside a string that starts no comment, or a `/*` comment that does not end.
#[derive(Debug)]
pub(crate) struct BadComment;

/// `text` with its `//` and `/* */` comments blanked out, its positions kept.
pub(crate) fn strip_comments(text: &str) -> Result<Vec<u8>, BadComment> {
    let mut stripped = Vec::with_capacity(text.len());
    CommentSettings::c_style()
        .strip_comments(text.as_bytes())
        .read_to_end(&mut stripped)
        .map_err(|_| BadComment)?;
    // json_comments blanks a block comment's line breaks too: they are put back, or every
    // line after a comment of several lines would be reported too high.
    for (out, original) in stripped.iter_mut().zip(text.bytes()) {
        if original == b'\n' {
            *out = b'\n';
        }
    }
    Ok(stripped)
}

/// Replaces each comma that only blanks separate from a closing `}` or `]` by a space.
///
/// Dev Proxy's files may have such commas; holdoff's own may not, so only the import calls
/// this.
pub(crate) fn blank_trailing_commas(json: &mut [u8]) {
    let mut in_string = false;
    let mut escaped = false;
    let mut comma = None;
    for i in 0..json.len() {
        let byte = json[i];
        if in_string {
            if escaped {
                escaped = false;
            } else if byte == b'\\' {
                escaped = true;
            } else if byte == b'"' {
                in_string = false;
            }
            continue;
        }
        match byte {
            b'"' => {
                in_string = true;
                comma = None;
            }
            b',' => comma = Some(i),
            b'}' | b']' => {
                if let Some(at) = comma.take() {
                    json[at] = b' ';
                }
            }
            b' ' | b'\t' | b'\n' | b'\r' => {}
            _ => comma = None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    mod strip_comments {
        use super::*;

        #[test]
        fn keeps_the_line_breaks_of_a_block_comment() {
            let text = "{/* one\ntwo */\n\"a\": 1 // three\n}";
            let stripped = strip_comments(text).expect("comments close");
            let text_breaks: Vec<_> = text.bytes().map(|b| b == b'\n').collect();
            let breaks: Vec<_> = stripped.iter().map(|b| *b == b'\n').collect();
            assert_eq!(breaks, text_breaks);
            let value: serde_json::Value = serde_json::from_slice(&stripped).expect("JSON");
            assert_eq!(value, serde_json::json!({"a": 1}));
        }

        #[test]
        fn refuses_an_unclosed_comment() {
            assert!(strip_comments("{} /* open").is_err());
        }
    }

    mod blank_trailing_commas {
        use super::*;

        fn blanked(text: &str) -> String {
            let mut bytes = text.as_bytes().to_vec();
            blank_trailing_commas(&mut bytes);
            String::from_utf8(bytes).expect("still UTF-8")
        }

        #[test]
        fn blanks_a_comma_before_a_closing_bracket() {
            assert_eq!(blanked("[1, 2,\n]"), "[1, 2 \n]");
            assert_eq!(blanked(r#"{"a": 1,}"#), r#"{"a": 1 }"#);
        }

        #[test]
        fn keeps_commas_between_values_and_in_strings() {
            assert_eq!(
                blanked(r#"{"a": ",}", "b": [1,2]}"#),
                r#"{"a": ",}", "b": [1,2]}"#
            );
            assert_eq!(blanked(r#"["\",]"]"#), r#"["\",]"]"#);
        }
    }
}
