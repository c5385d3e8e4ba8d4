//! How many tokens a language-model exchange used: the prompt estimated from the request
//! body, and what the response says in its `usage` — a JSON body's, or a streamed (SSE)
//! body's last chunk — read as the body passes through, without holding any of it back.
//!
//! The estimate, where a response says nothing (a stream without
//! `stream_options.include_usage`): one token per four characters of text, rounded up —
//! OpenAI's rule of thumb for English — of the request's messages (or prompt, or input) for
//! the prompt, and of the streamed deltas for the completion. Dev Proxy counts nothing then.

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::{HeaderMap, header};
use http_body::{Frame, SizeHint};
use serde_json::Value;

use super::tokens::Usage;
use crate::body::{Body, BoxError};

/// The most of a JSON response body kept to read its `usage`, and of one SSE line.
const KEEP_LIMIT: usize = 1 << 20;

/// What a completion-like request asks: Dev Proxy's test (a JSON object with `prompt`, with
/// `messages`, or with an `input` list of objects, as the Responses API sends), and the
/// prompt's estimated tokens. `None` for any other body (embeddings, audio, not JSON).
pub(crate) fn prompt_estimate(body: &[u8]) -> Option<u64> {
    let Ok(Value::Object(request)) = serde_json::from_slice::<Value>(body) else {
        return None;
    };
    let mut chars = 0;
    if let Some(prompt) = request.get("prompt") {
        chars += text_chars(prompt);
    } else if let Some(messages) = request.get("messages") {
        chars += messages_chars(messages);
    } else {
        let input = request.get("input")?.as_array()?;
        let first = input.first()?.as_object()?;
        if !(first.contains_key("role") || first.contains_key("type")) {
            return None;
        }
        chars += messages_chars(&Value::Array(input.clone()));
        chars += request.get("instructions").map_or(0, text_chars);
    }
    Some(tokens_of(chars))
}

/// Tokens of `chars` characters of text, by the estimate.
fn tokens_of(chars: u64) -> u64 {
    chars.div_ceil(4)
}

/// Characters of a string, or of the strings (and `text` parts) in a list.
fn text_chars(value: &Value) -> u64 {
    match value {
        Value::String(text) => text.chars().count() as u64,
        Value::Array(items) => items.iter().map(text_chars).sum(),
        Value::Object(part) => part.get("text").map_or(0, text_chars),
        _ => 0,
    }
}

/// Characters of the `content` of each message in a list.
fn messages_chars(messages: &Value) -> u64 {
    messages.as_array().map_or(0, |messages| {
        messages
            .iter()
            .map(|message| message.get("content").map_or(0, text_chars))
            .sum()
    })
}

/// The `usage` of a response, or of a chunk of one: OpenAI's chat and completions
/// (`prompt_tokens`, `completion_tokens`) or the Responses API's (`input_tokens`,
/// `output_tokens`, also under `response` in its stream's last event).
fn usage_of(value: &Value) -> Option<Usage> {
    let usage = value
        .get("usage")
        .filter(|usage| usage.is_object())
        .or_else(|| value.get("response")?.get("usage"))?
        .as_object()?;
    let count = |names: [&str; 2]| names.iter().find_map(|name| usage.get(*name)?.as_u64());
    let prompt = count(["prompt_tokens", "input_tokens"]);
    let completion = count(["completion_tokens", "output_tokens"]);
    if prompt.is_none() && completion.is_none() {
        return None;
    }
    Some(Usage {
        prompt: prompt.unwrap_or(0),
        completion: completion.unwrap_or(0),
    })
}

/// Characters of completion text in a response or a streamed chunk: each choice's
/// `message.content`, `delta.content`, `text`, and tool-call arguments.
fn completion_chars(value: &Value) -> u64 {
    let Some(choices) = value.get("choices").and_then(Value::as_array) else {
        return 0;
    };
    choices
        .iter()
        .map(|choice| {
            let said = ["message", "delta"]
                .iter()
                .filter_map(|part| choice.get(*part))
                .map(|said| {
                    let calls =
                        said.get("tool_calls")
                            .and_then(Value::as_array)
                            .map_or(0, |calls| {
                                calls
                                    .iter()
                                    .filter_map(|call| call.get("function")?.get("arguments"))
                                    .map(text_chars)
                                    .sum()
                            });
                    said.get("content").map_or(0, text_chars) + calls
                })
                .sum::<u64>();
            said + choice.get("text").map_or(0, text_chars)
        })
        .sum()
}

/// Reads a response body's usage as its bytes pass.
#[derive(Debug)]
pub(crate) enum Reader {
    /// A JSON body, kept (up to [`KEEP_LIMIT`]) to be read at its end.
    Json {
        kept: Vec<u8>,
        /// More than the limit came: nothing is kept.
        over: bool,
    },
    /// A stream of server-sent events, read line by line.
    Sse {
        /// The line so far.
        line: Vec<u8>,
        /// The line is longer than the limit: skipped up to its end.
        skipping: bool,
        /// The last `usage` a chunk carried.
        usage: Option<Usage>,
        /// Characters of completion text streamed.
        chars: u64,
    },
}

impl Reader {
    /// A reader for a response with these headers.
    pub(crate) fn new(headers: &HeaderMap) -> Reader {
        let streamed = headers
            .get(header::CONTENT_TYPE)
            .and_then(|value| value.to_str().ok())
            .is_some_and(|value| value.to_ascii_lowercase().contains("text/event-stream"));
        if streamed {
            Reader::Sse {
                line: Vec::new(),
                skipping: false,
                usage: None,
                chars: 0,
            }
        } else {
            Reader::Json {
                kept: Vec::new(),
                over: false,
            }
        }
    }

    /// Reads the next bytes of the body.
    pub(crate) fn feed(&mut self, mut data: &[u8]) {
        match self {
            Reader::Json { kept, over } => {
                if *over {
                    return;
                }
                if kept.len() + data.len() > KEEP_LIMIT {
                    *over = true;
                    *kept = Vec::new();
                } else {
                    kept.extend_from_slice(data);
                }
            }
            Reader::Sse {
                line,
                skipping,
                usage,
                chars,
            } => {
                while !data.is_empty() {
                    let Some(end) = data.iter().position(|byte| *byte == b'\n') else {
                        if !*skipping && line.len() + data.len() > KEEP_LIMIT {
                            *skipping = true;
                            line.clear();
                        }
                        if !*skipping {
                            line.extend_from_slice(data);
                        }
                        return;
                    };
                    if !*skipping {
                        line.extend_from_slice(&data[..end]);
                        event_line(line, usage, chars);
                    }
                    line.clear();
                    *skipping = false;
                    data = &data[end + 1..];
                }
            }
        }
    }

    /// What the exchange used, once the body is over (or broke off): the response's `usage`;
    /// failing that, for a success, the estimate (`prompt`, from the request, and the
    /// completion text seen); `None` for a failure that says nothing.
    pub(crate) fn finish(mut self, prompt: u64, success: bool) -> Option<Usage> {
        let (usage, chars) = match &mut self {
            Reader::Json { kept, over } => {
                let value = (!*over)
                    .then(|| serde_json::from_slice::<Value>(kept).ok())
                    .flatten();
                match value {
                    Some(value) => (usage_of(&value), completion_chars(&value)),
                    None => (None, 0),
                }
            }
            Reader::Sse {
                line,
                skipping,
                usage,
                chars,
            } => {
                // A last line without its newline.
                if !*skipping && !line.is_empty() {
                    event_line(line, usage, chars);
                }
                (*usage, *chars)
            }
        };
        usage.or_else(|| {
            success.then_some(Usage {
                prompt,
                completion: tokens_of(chars),
            })
        })
    }
}

/// Reads one line of an event stream: a `data:` line's JSON, for its usage and text.
fn event_line(line: &[u8], usage: &mut Option<Usage>, chars: &mut u64) {
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let Some(data) = line.strip_prefix(b"data:") else {
        return;
    };
    let data = data.strip_prefix(b" ").unwrap_or(data);
    let Ok(chunk) = serde_json::from_slice::<Value>(data) else {
        // `[DONE]`, or not JSON.
        return;
    };
    if let Some(found) = usage_of(&chunk) {
        *usage = Some(found);
    }
    *chars += completion_chars(&chunk);
}

/// What a [`Tap`] does with the usage once its body is over.
pub(crate) type Settle = Box<dyn FnOnce(Option<Usage>) + Send>;

/// A response body passed on frame by frame as it arrives, each frame read by a [`Reader`]
/// on its way; at its end, or when it is dropped before (the client went away), the usage
/// read goes to `settle`, once.
pub(crate) struct Tap {
    inner: Body,
    /// Until settled: the reader, the request's prompt estimate, whether the response is a
    /// success, and what to do with the usage.
    pending: Option<(Reader, u64, bool, Settle)>,
}

impl Tap {
    /// `inner`, read by `reader`; `prompt` is the request's estimate, `success` whether the
    /// response is a 2xx.
    pub(crate) fn new(
        inner: Body,
        reader: Reader,
        prompt: u64,
        success: bool,
        settle: Settle,
    ) -> Tap {
        Tap {
            inner,
            pending: Some((reader, prompt, success, settle)),
        }
    }

    fn settle(&mut self) {
        if let Some((reader, prompt, success, settle)) = self.pending.take() {
            settle(reader.finish(prompt, success));
        }
    }
}

impl http_body::Body for Tap {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.inner).poll_frame(cx);
        match &polled {
            Poll::Ready(Some(Ok(frame))) => {
                if let (Some(data), Some((reader, ..))) = (frame.data_ref(), &mut this.pending) {
                    reader.feed(data);
                }
                if this.inner.is_end_stream() {
                    this.settle();
                }
            }
            Poll::Ready(_) => this.settle(),
            Poll::Pending => {}
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

impl Drop for Tap {
    fn drop(&mut self) {
        self.settle();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;
    use std::sync::{Arc, Mutex};

    fn headers(content_type: &'static str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
        headers
    }

    /// The usage read from `body`, fed in pieces of `piece` bytes.
    fn read(content_type: &'static str, body: &str, piece: usize) -> Option<Usage> {
        let mut reader = Reader::new(&headers(content_type));
        for chunk in body.as_bytes().chunks(piece) {
            reader.feed(chunk);
        }
        reader.finish(7, true)
    }

    const STREAM_WITH_USAGE: &str = "data: {\"choices\":[{\"delta\":{\"content\":\"Hello\"}}]}\n\n\
        data: {\"choices\":[{\"delta\":{\"content\":\" there\"}}]}\n\n\
        data: {\"choices\":[],\"usage\":{\"prompt_tokens\":12,\"completion_tokens\":30,\"total_tokens\":42}}\n\n\
        data: [DONE]\n\n";

    mod prompt_estimate {
        use super::*;

        #[test]
        fn counts_four_characters_a_token_of_every_message() {
            let body = br#"{"model":"m","messages":[{"role":"system","content":"Be brief."},
                {"role":"user","content":[{"type":"text","text":"What is 2+2?"}]}]}"#;
            // 9 + 12 characters.
            assert_eq!(prompt_estimate(body), Some(6));
        }

        #[test]
        fn reads_completions_prompts_and_responses_input() {
            assert_eq!(prompt_estimate(br#"{"prompt":"12345678"}"#), Some(2));
            assert_eq!(prompt_estimate(br#"{"prompt":["1234","5"]}"#), Some(2));
            let responses =
                br#"{"instructions":"abcd","input":[{"role":"user","content":"efgh"}]}"#;
            assert_eq!(prompt_estimate(responses), Some(2));
        }

        #[test]
        fn is_none_for_other_requests() {
            assert_eq!(
                prompt_estimate(br#"{"input":"embed me","model":"e"}"#),
                None
            );
            assert_eq!(prompt_estimate(b"[1, 2]"), None);
            assert_eq!(prompt_estimate(b"not json"), None);
        }
    }

    mod finish {
        use super::*;

        #[test]
        fn reads_a_json_bodys_usage() {
            let body = r#"{"id":"c","choices":[{"message":{"role":"assistant","content":"Hi"}}],
                "usage":{"prompt_tokens":25,"completion_tokens":9,"total_tokens":34}}"#;
            let expected = Some(Usage {
                prompt: 25,
                completion: 9,
            });
            assert_eq!(read("application/json", body, 5), expected);
        }

        #[test]
        fn reads_the_responses_apis_usage() {
            let body = r#"{"output":[],"usage":{"input_tokens":3,"output_tokens":4}}"#;
            let expected = Some(Usage {
                prompt: 3,
                completion: 4,
            });
            assert_eq!(read("application/json", body, 100), expected);
        }

        #[test]
        fn reads_the_usage_chunk_of_a_stream_split_anywhere() {
            let expected = Some(Usage {
                prompt: 12,
                completion: 30,
            });
            for piece in [1, 3, 17, STREAM_WITH_USAGE.len()] {
                assert_eq!(
                    read("text/event-stream", STREAM_WITH_USAGE, piece),
                    expected
                );
            }
        }

        #[test]
        fn estimates_a_stream_without_usage_from_its_deltas() {
            let body = "data: {\"choices\":[{\"delta\":{\"role\":\"assistant\",\"content\":\"\"}}]}\r\n\r\n\
                data: {\"choices\":[{\"delta\":{\"content\":\"Hello, wor\"}}]}\r\n\r\n\
                data: {\"choices\":[{\"delta\":{\"content\":\"ld!\"},\"finish_reason\":\"stop\"}]}\r\n\r\n\
                data: [DONE]\r\n\r\n";
            // 13 characters: 4 tokens; the prompt is the request's estimate.
            let expected = Some(Usage {
                prompt: 7,
                completion: 4,
            });
            assert_eq!(read("text/event-stream; charset=utf-8", body, 4), expected);
        }

        #[test]
        fn estimates_a_json_success_without_usage() {
            let body = r#"{"choices":[{"message":{"content":"12345678"}}]}"#;
            assert_eq!(
                read("application/json", body, 8),
                Some(Usage {
                    prompt: 7,
                    completion: 2
                })
            );
        }

        #[test]
        fn counts_nothing_for_a_failure_without_usage() {
            let mut reader = Reader::new(&headers("application/json"));
            reader.feed(br#"{"error":{"message":"nope"}}"#);
            assert_eq!(reader.finish(7, false), None);
        }
    }

    mod tap {
        use super::*;
        use http_body_util::BodyExt;

        /// A body whose frames the test sends one at a time.
        struct Channel(tokio::sync::mpsc::Receiver<Bytes>);

        impl http_body::Body for Channel {
            type Data = Bytes;
            type Error = BoxError;

            fn poll_frame(
                self: Pin<&mut Self>,
                cx: &mut Context<'_>,
            ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
                self.get_mut()
                    .0
                    .poll_recv(cx)
                    .map(|data| data.map(|data| Ok(Frame::data(data))))
            }
        }

        #[tokio::test]
        async fn passes_each_chunk_on_as_it_comes_and_settles_at_the_end() {
            let (sender, receiver) = tokio::sync::mpsc::channel::<Bytes>(4);
            let seen: Arc<Mutex<Vec<Option<Usage>>>> = Arc::default();
            let record = Arc::clone(&seen);
            let mut tap = Tap::new(
                Body::wrap(Channel(receiver)),
                Reader::new(&headers("text/event-stream")),
                7,
                true,
                Box::new(move |usage| record.lock().unwrap().push(usage)),
            );
            for chunk in STREAM_WITH_USAGE.split_inclusive("\n\n") {
                sender.send(Bytes::from(chunk)).await.unwrap();
                // The chunk comes out before the next one is sent: nothing is held back.
                let frame = tap.frame().await.unwrap().unwrap();
                assert_eq!(frame.into_data().unwrap(), chunk.as_bytes());
                assert!(seen.lock().unwrap().is_empty());
            }
            drop(sender);
            assert!(tap.frame().await.is_none());
            assert_eq!(
                *seen.lock().unwrap(),
                [Some(Usage {
                    prompt: 12,
                    completion: 30
                })]
            );
            drop(tap);
            assert_eq!(seen.lock().unwrap().len(), 1, "settled once");
        }

        #[test]
        fn settles_what_it_saw_when_dropped_early() {
            let seen: Arc<Mutex<Vec<Option<Usage>>>> = Arc::default();
            let record = Arc::clone(&seen);
            let tap = Tap::new(
                Body::from("data: {\"choices\":[{\"delta\":{\"content\":\"abcd\"}}]}\n"),
                Reader::new(&headers("text/event-stream")),
                3,
                true,
                Box::new(move |usage| record.lock().unwrap().push(usage)),
            );
            drop(tap);
            assert_eq!(
                *seen.lock().unwrap(),
                [Some(Usage {
                    prompt: 3,
                    completion: 0
                })]
            );
        }
    }
}
