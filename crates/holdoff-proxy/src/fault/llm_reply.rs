//! Answers to language-model API calls made without a model: what Dev Proxy's
//! OpenAIMockResponsePlugin answers with a local model, answered here from a fixed text, so
//! that an app's calls to OpenAI's chat completions, completions and responses APIs can be
//! exercised offline, retries and token budgets included.
//!
//! The request's body says which API it calls (`messages`: chat completions, `input`:
//! responses, `prompt`: completions) and whether it streams (`"stream": true`: server-sent
//! events, as OpenAI's are, ending with `data: [DONE]`). Token counts are estimated at four
//! characters a token, as OpenAI's own rule of thumb has it.

use bytes::Bytes;
use serde_json::{Value, json};

/// A language model's answer, from a fixed text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LanguageModelReply {
    /// What the model "says"; `{prompt}` stands for the last user message (or the prompt).
    pub text: String,
}

/// Which API a request calls.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Api {
    Chat,
    Responses,
    Completions,
}

impl LanguageModelReply {
    /// The answer to a request with `body`, made at `created` (Unix seconds) and numbered
    /// `id`: its content type and body. `None` when the body is not a language-model call
    /// (then the request goes on, unanswered by this mock).
    pub(crate) fn answer(
        &self,
        body: &[u8],
        created: u64,
        id: u64,
    ) -> Option<(&'static str, Bytes)> {
        let request: Value = serde_json::from_slice(body).ok()?;
        let fields = request.as_object()?;
        let api = if fields.contains_key("messages") {
            Api::Chat
        } else if fields.contains_key("input") {
            Api::Responses
        } else if fields.contains_key("prompt") {
            Api::Completions
        } else {
            return None;
        };
        let model = fields
            .get("model")
            .and_then(Value::as_str)
            .unwrap_or("holdoff-mock");
        let prompt = last_prompt(&request, api);
        let text = self.text.replace("{prompt}", &prompt);
        let usage = Tokens {
            prompt: estimate(&prompt_text(&request)),
            completion: estimate(&text),
        };
        let stream = fields.get("stream").and_then(Value::as_bool) == Some(true);
        let include_usage = request
            .pointer("/stream_options/include_usage")
            .and_then(Value::as_bool)
            == Some(true);
        let reply = Reply {
            model,
            text: &text,
            created,
            id,
            usage,
        };
        Some(match (api, stream) {
            (Api::Chat, false) => ("application/json", json_bytes(&reply.chat())),
            (Api::Chat, true) => ("text/event-stream", reply.chat_stream(include_usage)),
            (Api::Completions, false) => ("application/json", json_bytes(&reply.completion())),
            (Api::Completions, true) => ("text/event-stream", reply.completion_stream()),
            (Api::Responses, false) => ("application/json", json_bytes(&reply.response())),
            (Api::Responses, true) => ("text/event-stream", reply.response_stream()),
        })
    }
}

/// Estimated token counts.
#[derive(Clone, Copy)]
struct Tokens {
    prompt: u64,
    completion: u64,
}

/// Four characters a token, at least one for any text.
fn estimate(text: &str) -> u64 {
    (text.chars().count() as u64).div_ceil(4)
}

/// The text of a message's `content`: a string, or the text parts of an array.
fn content_text(content: &Value) -> String {
    match content {
        Value::String(text) => text.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|part| part.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join(" "),
        _ => String::new(),
    }
}

/// Every message's text, for the prompt's token count.
fn prompt_text(request: &Value) -> String {
    let messages = request
        .get("messages")
        .or_else(|| request.get("input"))
        .and_then(Value::as_array);
    match (messages, request.get("input"), request.get("prompt")) {
        (Some(messages), ..) => messages
            .iter()
            .map(|message| content_text(message.get("content").unwrap_or(&Value::Null)))
            .collect::<Vec<_>>()
            .join("\n"),
        (None, Some(input), _) => content_text(input),
        (None, None, Some(prompt)) => content_text(prompt),
        _ => String::new(),
    }
}

/// The last user message (chat, responses) or the prompt (completions).
fn last_prompt(request: &Value, api: Api) -> String {
    let list = match api {
        Api::Chat => request.get("messages"),
        Api::Responses => request.get("input"),
        Api::Completions => return content_text(request.get("prompt").unwrap_or(&Value::Null)),
    };
    match list {
        Some(Value::Array(messages)) => messages
            .iter()
            .rev()
            .find(|message| message.get("role").and_then(Value::as_str) == Some("user"))
            .map(|message| content_text(message.get("content").unwrap_or(&Value::Null)))
            .unwrap_or_default(),
        Some(Value::String(text)) => text.clone(),
        _ => String::new(),
    }
}

fn json_bytes(value: &Value) -> Bytes {
    Bytes::from(value.to_string())
}

/// Server-sent events: each value a `data:` line, then `data: [DONE]`.
fn events(values: &[Value], done: bool) -> Bytes {
    let mut out = String::new();
    for value in values {
        out.push_str("data: ");
        out.push_str(&value.to_string());
        out.push_str("\n\n");
    }
    if done {
        out.push_str("data: [DONE]\n\n");
    }
    Bytes::from(out)
}

/// One answer's parts.
struct Reply<'a> {
    model: &'a str,
    text: &'a str,
    created: u64,
    id: u64,
    usage: Tokens,
}

impl Reply<'_> {
    fn usage(&self) -> Value {
        json!({
            "prompt_tokens": self.usage.prompt,
            "completion_tokens": self.usage.completion,
            "total_tokens": self.usage.prompt + self.usage.completion,
        })
    }

    fn chat(&self) -> Value {
        json!({
            "id": format!("chatcmpl-holdoff{}", self.id),
            "object": "chat.completion",
            "created": self.created,
            "model": self.model,
            "choices": [{
                "index": 0,
                "message": { "role": "assistant", "content": self.text, "refusal": null },
                "logprobs": null,
                "finish_reason": "stop",
            }],
            "usage": self.usage(),
        })
    }

    fn chat_stream(&self, include_usage: bool) -> Bytes {
        let chunk = |delta: Value, finish: Value| {
            let mut chunk = json!({
                "id": format!("chatcmpl-holdoff{}", self.id),
                "object": "chat.completion.chunk",
                "created": self.created,
                "model": self.model,
                "choices": [{ "index": 0, "delta": delta, "logprobs": null, "finish_reason": finish }],
            });
            if include_usage {
                chunk["usage"] = Value::Null;
            }
            chunk
        };
        let mut chunks = vec![
            chunk(json!({ "role": "assistant", "content": "" }), Value::Null),
            chunk(json!({ "content": self.text }), Value::Null),
            chunk(json!({}), json!("stop")),
        ];
        if include_usage {
            chunks.push(json!({
                "id": format!("chatcmpl-holdoff{}", self.id),
                "object": "chat.completion.chunk",
                "created": self.created,
                "model": self.model,
                "choices": [],
                "usage": self.usage(),
            }));
        }
        events(&chunks, true)
    }

    fn completion(&self) -> Value {
        json!({
            "id": format!("cmpl-holdoff{}", self.id),
            "object": "text_completion",
            "created": self.created,
            "model": self.model,
            "choices": [{ "text": self.text, "index": 0, "logprobs": null, "finish_reason": "stop" }],
            "usage": self.usage(),
        })
    }

    fn completion_stream(&self) -> Bytes {
        let mut chunk = self.completion();
        chunk.as_object_mut().map(|fields| fields.remove("usage"));
        events(&[chunk], true)
    }

    fn response(&self) -> Value {
        json!({
            "id": format!("resp_holdoff{}", self.id),
            "object": "response",
            "created_at": self.created,
            "status": "completed",
            "model": self.model,
            "output": [{
                "type": "message",
                "id": format!("msg_holdoff{}", self.id),
                "status": "completed",
                "role": "assistant",
                "content": [{ "type": "output_text", "text": self.text, "annotations": [] }],
            }],
            "usage": {
                "input_tokens": self.usage.prompt,
                "output_tokens": self.usage.completion,
                "total_tokens": self.usage.prompt + self.usage.completion,
            },
        })
    }

    fn response_stream(&self) -> Bytes {
        let response = self.response();
        let event = |kind: &str, mut value: Value| {
            value["type"] = json!(kind);
            value
        };
        events(
            &[
                event("response.created", json!({ "response": response })),
                event(
                    "response.output_text.delta",
                    json!({ "output_index": 0, "content_index": 0, "delta": self.text }),
                ),
                event("response.completed", json!({ "response": response })),
            ],
            false,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reply() -> LanguageModelReply {
        LanguageModelReply {
            text: "A mock answer to: {prompt}".to_owned(),
        }
    }

    fn answer(body: Value) -> (&'static str, Value) {
        let (kind, bytes) = reply()
            .answer(body.to_string().as_bytes(), 1_800_000_000, 7)
            .expect("an answer");
        let value = match kind {
            "application/json" => serde_json::from_slice(&bytes).unwrap(),
            _ => Value::String(String::from_utf8(bytes.to_vec()).unwrap()),
        };
        (kind, value)
    }

    #[test]
    fn a_chat_completion_answers_the_last_user_message_with_usage() {
        let (kind, body) = answer(json!({
            "model": "gpt-4o-mini",
            "messages": [
                { "role": "system", "content": "Be brief." },
                { "role": "user", "content": "Hello there" }
            ]
        }));
        assert_eq!(kind, "application/json");
        assert_eq!(body["object"], "chat.completion");
        assert_eq!(body["model"], "gpt-4o-mini");
        assert_eq!(
            body["choices"][0]["message"]["content"],
            "A mock answer to: Hello there"
        );
        assert_eq!(body["usage"]["prompt_tokens"], 6); // "Be brief.\nHello there": 21 chars
        assert_eq!(body["usage"]["completion_tokens"], 8);
        assert_eq!(body["usage"]["total_tokens"], 14);
    }

    #[test]
    fn a_stream_is_server_sent_events_ending_with_done() {
        let (kind, body) = answer(json!({
            "model": "m", "stream": true, "stream_options": { "include_usage": true },
            "messages": [{ "role": "user", "content": [{ "type": "text", "text": "Hi" }] }]
        }));
        assert_eq!(kind, "text/event-stream");
        let text = body.as_str().unwrap();
        let events: Vec<&str> = text
            .split("\n\n")
            .filter_map(|event| event.strip_prefix("data: "))
            .collect();
        assert_eq!(events.last(), Some(&"[DONE]"));
        let chunk: Value = serde_json::from_str(events[1]).unwrap();
        assert_eq!(
            chunk["choices"][0]["delta"]["content"],
            "A mock answer to: Hi"
        );
        let usage: Value = serde_json::from_str(events[3]).unwrap();
        assert_eq!(usage["usage"]["completion_tokens"], 5);
    }

    #[test]
    fn completions_and_responses_have_their_own_shapes() {
        let (_, completion) = answer(json!({ "model": "m", "prompt": "Say hi" }));
        assert_eq!(completion["object"], "text_completion");
        assert_eq!(completion["choices"][0]["text"], "A mock answer to: Say hi");
        let (_, response) = answer(json!({ "model": "m", "input": "Say hi" }));
        assert_eq!(response["object"], "response");
        assert_eq!(
            response["output"][0]["content"][0]["text"],
            "A mock answer to: Say hi"
        );
        assert_eq!(response["usage"]["input_tokens"], 2);
    }

    #[test]
    fn a_body_that_is_no_language_model_call_is_left_alone() {
        assert_eq!(reply().answer(br#"{"name": "x"}"#, 0, 1), None);
        assert_eq!(reply().answer(b"not json", 0, 1), None);
    }
}
