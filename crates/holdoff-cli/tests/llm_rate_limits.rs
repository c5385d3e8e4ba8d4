//! Token budgets (`llmRateLimits`, Dev Proxy's LanguageModelRateLimitingPlugin) run by the real
//! `holdoff proxy`, driven by openai-python (`max_retries=0`, so each call is one request)
//! against a loopback upstream that answers chat completions with their usage, as JSON and as
//! a streamed (SSE) body.

mod support;

#[path = "real_clients/clients.rs"]
#[allow(dead_code)]
mod clients;

use std::process::Command;

use holdoff_testkit::{Reply, TestServer};
use serde_json::json;
use support::{Proxy, TempDir, runtime};

/// Calls the chat completions API `CALLS` times through the proxy in `HTTP_PROXY`, one line
/// each: `200 PROMPT COMPLETION` (the usage the client read; for a stream, the characters
/// streamed and the usage chunk's completion tokens, `None` without one), or `429
/// RETRY-AFTER CODE`.
const CLIENT: &str = r#"
import sys
import openai

base, mode, calls = sys.argv[1], sys.argv[2], int(sys.argv[3])
client = openai.OpenAI(base_url=base, api_key="test", max_retries=0)
messages = [{"role": "user", "content": "Say hello to the tests, please."}]
for _ in range(calls):
    try:
        if mode == "json":
            reply = client.chat.completions.create(model="m", messages=messages)
            print(200, reply.usage.prompt_tokens, reply.usage.completion_tokens)
        else:
            extra = {"stream_options": {"include_usage": True}} if mode == "stream-usage" else {}
            stream = client.chat.completions.create(model="m", messages=messages, stream=True, **extra)
            text, usage = "", None
            for chunk in stream:
                for choice in chunk.choices:
                    text += choice.delta.content or ""
                if chunk.usage:
                    usage = chunk.usage.completion_tokens
            print(200, len(text), usage)
    except openai.RateLimitError as error:
        print(429, error.response.headers.get("retry-after"), error.code)
"#;

/// A chat completion that used `prompt` and `completion` tokens.
fn completion(prompt: u64, completion: u64) -> Reply {
    Reply::ok("").json(&json!({
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1,
        "model": "m",
        "choices": [{
            "index": 0,
            "message": {"role": "assistant", "content": "Hello, tests."},
            "finish_reason": "stop"
        }],
        "usage": {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}
    }))
}

/// A streamed chat completion of `content`, ending with a usage chunk when `usage` is set.
fn streamed(content: &str, usage: Option<(u64, u64)>) -> Reply {
    let chunk = |delta: serde_json::Value, finish: Option<&str>| {
        json!({
            "id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "m",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]
        })
    };
    let mut events = vec![chunk(json!({"role": "assistant", "content": ""}), None)];
    let (head, tail) = content.split_at(content.len() / 2);
    events.push(chunk(json!({"content": head}), None));
    events.push(chunk(json!({"content": tail}), Some("stop")));
    if let Some((prompt, completion)) = usage {
        events.push(json!({
            "id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "m",
            "choices": [],
            "usage": {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}
        }));
    }
    let mut body: String = events
        .iter()
        .map(|event| format!("data: {event}\n\n"))
        .collect();
    body.push_str("data: [DONE]\n\n");
    Reply::ok(body).header("content-type", "text/event-stream; charset=utf-8")
}

/// Runs [`CLIENT`] through `proxy` against `upstream`'s `/v1`; its lines.
fn client(proxy: &Proxy, upstream: &TestServer, mode: &str, calls: usize) -> Vec<String> {
    let output = Command::new(clients::python())
        .args(["-c", CLIENT, &upstream.url("/v1"), mode, &calls.to_string()])
        .env("HTTP_PROXY", proxy.url())
        .env("NO_PROXY", "")
        .output()
        .expect("run python");
    assert!(
        output.status.success(),
        "the client failed: {}",
        support::show(&output)
    );
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(str::to_owned)
        .collect()
}

/// The wait of a `429 RETRY-AFTER CODE` line, checked to be whole seconds within the window.
fn refused(line: &str, window: u64) -> u64 {
    let parts: Vec<&str> = line.split(' ').collect();
    assert_eq!(parts.len(), 3, "{line}");
    assert_eq!(parts[0], "429", "{line}");
    assert_eq!(parts[2], "rate_limit_exceeded", "{line}");
    let wait: u64 = parts[1]
        .parse()
        .unwrap_or_else(|_| panic!("Retry-After is whole seconds: {line}"));
    assert!((1..=window).contains(&wait), "{line}");
    wait
}

fn config(dir: &TempDir, budget: &str) -> String {
    dir.write(
        "holdoff.json",
        &format!(
            r#"{{
  "urlsToWatch": ["http://127.0.0.1:*/*"],
  "llmRateLimits": [{{ "url": "http://127.0.0.1:*/v1/*", {budget}, "resetTimeWindowSeconds": 60 }}]
}}"#
        ),
    )
}

#[test]
fn prompts_that_use_up_the_budget_get_429_with_the_wait_until_the_window_ends() {
    let rt = runtime();
    let upstream = rt.block_on(TestServer::start());
    upstream.set_default("/v1/chat/completions", completion(60, 5));
    let dir = TempDir::new("llm-prompts");
    let file = config(
        &dir,
        r#""promptTokenLimit": 100, "completionTokenLimit": 1000"#,
    );
    let proxy = Proxy::start(&["--config", &file]);
    let lines = client(&proxy, &upstream, "json", 3);
    assert_eq!(lines[..2], ["200 60 5", "200 60 5"]);
    refused(&lines[2], 60);
    assert_eq!(
        upstream.requests_to("/v1/chat/completions").len(),
        2,
        "the refused call never reached the upstream"
    );
    let stderr = proxy.stop();
    assert!(stderr.contains("1 rate-limited"), "{stderr}");
}

#[test]
fn streamed_completions_with_a_usage_chunk_use_up_the_completion_budget() {
    let rt = runtime();
    let upstream = rt.block_on(TestServer::start());
    upstream.set_default(
        "/v1/chat/completions",
        streamed("Hello there, tests!", Some((8, 30))),
    );
    let dir = TempDir::new("llm-stream-usage");
    let file = config(&dir, r#""completionTokenLimit": 50"#);
    let proxy = Proxy::start(&["--config", &file]);
    let lines = client(&proxy, &upstream, "stream-usage", 3);
    // The stream came through whole: 19 characters, then the usage chunk.
    assert_eq!(lines[..2], ["200 19 30", "200 19 30"]);
    refused(&lines[2], 60);
    assert_eq!(upstream.requests_to("/v1/chat/completions").len(), 2);
}

#[test]
fn a_stream_without_usage_is_estimated_at_four_characters_a_token() {
    let rt = runtime();
    let upstream = rt.block_on(TestServer::start());
    // 80 characters: 20 tokens by the estimate.
    let content = "0123456789".repeat(8);
    upstream.set_default("/v1/chat/completions", streamed(&content, None));
    let dir = TempDir::new("llm-stream-estimate");
    let file = config(&dir, r#""completionTokenLimit": 40"#);
    let proxy = Proxy::start(&["--config", &file]);
    let lines = client(&proxy, &upstream, "stream", 3);
    assert_eq!(lines[..2], ["200 80 None", "200 80 None"]);
    refused(&lines[2], 60);
}

#[test]
fn a_dev_proxy_file_with_the_plugin_imports_and_refuses_the_same() {
    let rt = runtime();
    let upstream = rt.block_on(TestServer::start());
    upstream.set_default("/v1/chat/completions", completion(60, 5));
    let dir = TempDir::new("llm-devproxy");
    let rc = dir.write(
        "devproxyrc.json",
        r#"{
  "$schema": "https://raw.githubusercontent.com/dotnet/dev-proxy/main/schemas/v2.0.0/rc.schema.json",
  "plugins": [
    { "name": "RetryAfterPlugin", "enabled": true, "pluginPath": "~appFolder/plugins/DevProxy.Plugins.dll" },
    { "name": "LanguageModelRateLimitingPlugin", "enabled": true,
      "pluginPath": "~appFolder/plugins/DevProxy.Plugins.dll", "configSection": "tokenLimits" }
  ],
  "urlsToWatch": ["http://127.0.0.1:*/v1/*"],
  "tokenLimits": {
    "$schema": "https://raw.githubusercontent.com/dotnet/dev-proxy/main/schemas/v2.0.0/languagemodelratelimitingplugin.schema.json",
    "promptTokenLimit": 100,
    "completionTokenLimit": 500,
    "resetTimeWindowSeconds": 30,
    "whenLimitExceeded": "Throttle"
  }
}"#,
    );
    let proxy = Proxy::start(&["--devproxy-config", &rc]);
    let lines = client(&proxy, &upstream, "json", 3);
    assert_eq!(lines[..2], ["200 60 5", "200 60 5"]);
    refused(&lines[2], 30);
    let stderr = proxy.stop();
    assert!(
        !stderr.contains("not supported"),
        "the plugin is mapped: {stderr}"
    );
    assert!(stderr.contains("1 rate-limited"), "{stderr}");
}

#[test]
fn two_replicas_sharing_redis_spend_one_budget() {
    let redis = holdoff_testkit::redis::RedisServer::start();
    let rt = runtime();
    let upstream = rt.block_on(TestServer::start());
    upstream.set_default("/v1/chat/completions", completion(60, 5));
    let dir = TempDir::new("llm-shared");
    let file = dir.write(
        "holdoff.json",
        &format!(
            r#"{{
  "urlsToWatch": ["http://127.0.0.1:*/*"],
  "llmRateLimits": [{{ "promptTokenLimit": 100, "scope": "shared" }}],
  "state": {{ "redis": "{}", "prefix": "holdoff-llm-test:" }}
}}"#,
            redis.url()
        ),
    );
    let first = Proxy::start(&["--config", &file]);
    let second = Proxy::start(&["--config", &file]);
    assert_eq!(
        client(&first, &upstream, "json", 2),
        ["200 60 5", "200 60 5"]
    );
    // The other replica has counted nothing itself; the store has both.
    let lines = client(&second, &upstream, "json", 1);
    refused(&lines[0], 60);
    assert_eq!(upstream.requests_to("/v1/chat/completions").len(), 2);
}

#[test]
fn the_openai_tokens_preset_refuses_once_the_completion_budget_is_spent() {
    let rt = runtime();
    let upstream = rt.block_on(TestServer::start());
    // 1,500 completion tokens a call: the third call finds 3,000 of 4,000 spent, the fourth
    // 4,500.
    upstream.set_default("/v1/chat/completions", completion(20, 1500));
    let proxy = Proxy::start(&["--preset", "openai-tokens", "-u", "http://127.0.0.1:*/*"]);
    let lines = client(&proxy, &upstream, "json", 4);
    assert_eq!(lines[..3], ["200 20 1500", "200 20 1500", "200 20 1500"]);
    refused(&lines[3], 60);
    assert_eq!(upstream.requests_to("/v1/chat/completions").len(), 3);
    drop(proxy);
}
