//! Every message a configuration file can get, as the user sees it (`FILE:LINE:COL: KEY.PATH:
//! message`): syntax and shape errors from parsing, then each validation rule, then the data
//! files a configuration names.
//!
//! Paths are relative to the crate, as `cargo test` runs there; the data files are in
//! `tests/fixtures/config`.

use std::path::Path;

use holdoff_config::compile::{compile, load_and_compile};
use holdoff_config::load::{Format, parse};
use insta::assert_snapshot;

const DIR: &str = "tests/fixtures/config";

/// The errors for `text`, read as `format` from `DIR/file`.
fn errors(text: &str, format: Format, file: &str) -> String {
    let result = parse(text, format, file).and_then(|raw| compile(&raw, file, Path::new(DIR)));
    match result {
        Ok(_) => panic!("expected errors for {text}"),
        Err(errors) => errors.to_string(),
    }
}

fn json(text: &str) -> String {
    errors(text, Format::Json, "holdoff.json")
}

fn yaml(text: &str) -> String {
    errors(text, Format::Yaml, "holdoff.yaml")
}

/// A configuration with one error rule for every URL, whose one response is `response`.
fn response(response: &str) -> String {
    json(&format!(
        r#"{{"errors": {{"errors": [{{"request": {{"url": "*"}}, "responses": [{response}]}}]}}}}"#
    ))
}

/// A configuration with one rate limit: `fields` added to a limit of 10 a minute.
fn rate_limit(fields: &str) -> String {
    json(&format!(
        r#"{{"rateLimits": [{{"limit": 10, "windowSeconds": 60, {fields}}}]}}"#
    ))
}

mod parsing {
    use super::*;

    #[test]
    fn unknown_key_with_a_suggestion() {
        assert_snapshot!(json("{\n  \"urlsToWach\": [\"*\"]\n}"));
    }

    #[test]
    fn unknown_key_deep_in_the_file() {
        assert_snapshot!(json(
            r#"{"errors": {"errors": [{"request": {"url": "*"},
                "responses": [{"statusCode": 429, "retryAfter": 5}]}]}}"#
        ));
    }

    #[test]
    fn unknown_key_in_yaml() {
        assert_snapshot!(yaml("latency:\n  minMs: 10\n  maxMs: 20\n  jitter: 5\n"));
    }

    #[test]
    fn wrong_type_in_json() {
        assert_snapshot!(json(
            r#"{
  "errors": {
    "errors": [
      {
        "request": { "url": "*" },
        "responses": [{ "statusCode": 429 }, { "statusCode": "503" }]
      }
    ]
  }
}"#
        ));
    }

    #[test]
    fn wrong_type_in_yaml() {
        assert_snapshot!(yaml(
            "errors:\n  errors:\n    - request: {url: '*'}\n      responses:\n        - statusCode: soon\n"
        ));
    }

    #[test]
    fn negative_number() {
        assert_snapshot!(json(r#"{"seed": -1}"#));
    }

    #[test]
    fn not_a_number() {
        assert_snapshot!(json(r#"{"errors": {"rate": "half"}}"#));
    }

    #[test]
    fn not_a_list() {
        assert_snapshot!(json(r#"{"urlsToWatch": "https://api.example.com/*"}"#));
    }

    #[test]
    fn not_an_object() {
        assert_snapshot!(json(r#"{"latency": 100}"#));
    }

    #[test]
    fn not_a_boolean() {
        assert_snapshot!(json(r#"{"mocks": {"blockUnmocked": "yes"}}"#));
    }

    #[test]
    fn range_of_the_wrong_length() {
        assert_snapshot!(json(r#"{"errors": {"dynamicRange": [1, 2, 3]}}"#));
    }

    #[test]
    fn unknown_value() {
        assert_snapshot!(json(
            r#"{"errors": {"errors": [{"request": {"url": "*"}, "responses": [{"network": "explode"}]}]}}"#
        ));
    }

    #[test]
    fn unknown_value_with_a_suggestion() {
        assert_snapshot!(json(r#"{"retryAfterForm": "http_date"}"#));
    }

    #[test]
    fn missing_key() {
        assert_snapshot!(json(
            r#"{"errors": {"errors": [{"request": {"method": "GET"}, "responses": []}]}}"#
        ));
    }

    #[test]
    fn headers_of_the_wrong_shape() {
        assert_snapshot!(response(
            r#"{"statusCode": 429, "headers": ["Retry-After: 5"]}"#
        ));
    }

    #[test]
    fn json_syntax() {
        assert_snapshot!(json("{\n  \"seed\": 1\n  \"urlsToWatch\": []\n}"));
    }

    #[test]
    fn trailing_comma() {
        assert_snapshot!(json("{\n  \"seed\": 1,\n}"));
    }

    #[test]
    fn trailing_text() {
        assert_snapshot!(json("{\"seed\": 1}\n{\"seed\": 2}"));
    }

    #[test]
    fn unclosed_comment() {
        assert_snapshot!(json("{\"seed\": 1} /* the end"));
    }

    #[test]
    fn yaml_syntax() {
        assert_snapshot!(yaml("errors:\n  rate: 50\n seed: 1\n"));
    }

    #[test]
    fn empty_json() {
        assert_snapshot!(json(""));
    }
}

mod files {
    use super::*;

    fn load(path: &str) -> String {
        match load_and_compile(Path::new(path)) {
            Ok(_) => panic!("expected errors for {path}"),
            Err(errors) => errors.to_string(),
        }
    }

    #[test]
    fn missing_config_file() {
        assert_snapshot!(load("tests/fixtures/config/nowhere.json"));
    }

    #[test]
    fn unknown_extension() {
        assert_snapshot!(load("tests/fixtures/config/holdoff.conf"));
    }

    #[test]
    fn unreadable_body_file() {
        assert_snapshot!(response(r#"{"statusCode": 200, "body": "@nowhere.json"}"#));
    }

    #[test]
    fn body_file_without_a_name() {
        assert_snapshot!(response(r#"{"statusCode": 200, "body": "@"}"#));
    }

    #[test]
    fn unreadable_errors_file() {
        assert_snapshot!(json(r#"{"errors": {"file": "nowhere.json"}}"#));
    }

    #[test]
    fn unreadable_mocks_file() {
        assert_snapshot!(json(r#"{"mocks": {"file": "nowhere.yaml"}}"#));
    }

    #[test]
    fn empty_data_file_name() {
        assert_snapshot!(json(r#"{"errors": {"file": ""}}"#));
    }

    #[test]
    fn invalid_rules_in_an_errors_file() {
        assert_snapshot!(json(r#"{"errors": {"file": "errors-invalid.json"}}"#));
    }

    #[test]
    fn malformed_errors_file() {
        assert_snapshot!(json(r#"{"errors": {"file": "errors-malformed.yaml"}}"#));
    }
}

mod validation {
    use super::*;

    #[test]
    fn rates_out_of_range() {
        assert_snapshot!(json(
            r#"{
                "errors": {"rate": 150, "errors": [
                    {"request": {"url": "*"}, "rate": -1, "responses": [{"statusCode": 503}]}
                ]},
                "latency": {"minMs": 1, "maxMs": 2, "rate": 100.5}
            }"#
        ));
    }

    #[test]
    fn rate_that_is_not_a_number() {
        assert_snapshot!(yaml("errors:\n  rate: .nan\n"));
    }

    #[test]
    fn status_out_of_range() {
        assert_snapshot!(response(r#"{"statusCode": 99}"#));
    }

    #[test]
    fn status_and_network_together() {
        assert_snapshot!(response(r#"{"statusCode": 503, "network": "reset"}"#));
    }

    #[test]
    fn neither_status_nor_network() {
        assert_snapshot!(response(r#"{"headers": {"Retry-After": "5"}}"#));
    }

    #[test]
    fn network_fault_with_a_response() {
        assert_snapshot!(response(
            r#"{"network": "reset", "headers": {"Retry-After": "5"}, "body": "late"}"#
        ));
    }

    #[test]
    fn network_options_on_the_wrong_fault() {
        assert_snapshot!(response(
            r#"{"network": "hang", "truncateAfter": 10, "bytesPerSecond": 100}"#
        ));
    }

    #[test]
    fn network_option_with_a_status() {
        assert_snapshot!(response(r#"{"statusCode": 503, "hangSeconds": 10}"#));
    }

    #[test]
    fn zero_bytes_per_second() {
        assert_snapshot!(response(r#"{"network": "slow-body", "bytesPerSecond": 0}"#));
    }

    #[test]
    fn zero_hang_seconds() {
        assert_snapshot!(response(r#"{"network": "hang", "hangSeconds": 0}"#));
    }

    #[test]
    fn invalid_header_name() {
        assert_snapshot!(response(
            r#"{"statusCode": 429, "headers": [{"name": "Retry After", "value": "5"}]}"#
        ));
    }

    #[test]
    fn invalid_header_value() {
        assert_snapshot!(response(
            r#"{"statusCode": 429, "headers": {"X-Note": "two\nlines"}}"#
        ));
    }

    #[test]
    fn invalid_dynamic_value() {
        assert_snapshot!(response(
            r#"{"statusCode": 429, "headers": [{"name": "Retry-After", "value": "@dynamic=soon"}]}"#
        ));
    }

    #[test]
    fn header_the_proxy_sets() {
        assert_snapshot!(response(
            r#"{"statusCode": 429, "headers": {"Content-Length": "0", "Transfer-Encoding": "chunked"}}"#
        ));
    }

    #[test]
    fn invalid_method() {
        assert_snapshot!(json(
            r#"{"errors": {"errors": [{"request": {"url": "*", "method": "GET /"}, "responses": [{"statusCode": 503}]}]}}"#
        ));
    }

    #[test]
    fn invalid_url_patterns() {
        assert_snapshot!(json(
            r#"{
                "urlsToWatch": ["https://api.example.com/*", "https:// api.example.com/"],
                "errors": {"errors": [{"request": {"url": ""}, "responses": [{"statusCode": 503}]}]},
                "latency": {"minMs": 1, "maxMs": 2, "url": "https:///"}
            }"#
        ));
    }

    #[test]
    fn exclusion_in_a_rule() {
        assert_snapshot!(json(
            r#"{"errors": {"errors": [{"request": {"url": "!https://api.example.com/health"}, "responses": [{"statusCode": 503}]}]}}"#
        ));
    }

    #[test]
    fn no_responses() {
        assert_snapshot!(json(
            r#"{"errors": {"errors": [{"request": {"url": "*"}, "responses": []}]}}"#
        ));
    }

    #[test]
    fn dynamic_range_upside_down() {
        assert_snapshot!(json(r#"{"errors": {"dynamicRange": [10, 2]}}"#));
    }

    #[test]
    fn rate_limit_of_zero() {
        assert_snapshot!(json(
            r#"{"rateLimits": [{"limit": 0, "windowSeconds": 0}]}"#
        ));
    }

    #[test]
    fn rate_limit_cost_of_zero() {
        assert_snapshot!(rate_limit(r#""cost": 0"#));
    }

    #[test]
    fn rate_limit_cost_above_the_limit() {
        assert_snapshot!(rate_limit(r#""cost": 11"#));
    }

    #[test]
    fn rate_limit_refusal_as_a_network_fault() {
        assert_snapshot!(rate_limit(r#""whenExceeded": {"network": "reset"}"#));
    }

    #[test]
    fn rate_limit_with_invalid_url_method_and_refusal() {
        assert_snapshot!(rate_limit(
            r#""url": "!*", "method": "", "whenExceeded": {"statusCode": 1000}"#
        ));
    }

    #[test]
    fn latency_upside_down() {
        assert_snapshot!(json(r#"{"latency": {"minMs": 500, "maxMs": 100}}"#));
    }

    #[test]
    fn mock_nth_of_zero() {
        assert_snapshot!(json(
            r#"{"mocks": {"mocks": [{"request": {"url": "*", "nth": 0}, "response": {"statusCode": 200}}]}}"#
        ));
    }

    #[test]
    fn nth_on_an_error_rule() {
        assert_snapshot!(json(
            r#"{"errors": {"errors": [{"request": {"url": "*", "nth": 2}, "responses": [{"statusCode": 503}]}]}}"#
        ));
    }

    #[test]
    fn invalid_judge_key() {
        assert_snapshot!(json(r#"{"judge": {"key": "header:"}}"#));
    }

    #[test]
    fn state_that_is_not_a_redis_url() {
        // The URL may hold a password: the message never quotes it.
        let errors = json(r#"{"state": {"redis": "http://user:hunter2@127.0.0.1:6379"}}"#);
        assert!(!errors.contains("hunter2"), "{errors}");
        assert_snapshot!(errors);
    }

    #[test]
    fn state_whose_url_has_a_multibyte_character_where_the_scheme_ends() {
        let errors = json(r#"{"state": {"redis": "redis:/é127.0.0.1:6379"}}"#);
        assert!(
            errors.contains("state.redis: expected a Redis URL"),
            "{errors}"
        );
    }

    #[test]
    fn state_with_a_zero_timeout_an_empty_prefix_and_a_hold_without_failing_closed() {
        assert_snapshot!(json(
            r#"{"state": {"redis": "redis://127.0.0.1:6379/0", "timeoutMs": 0, "prefix": "",
                "holdSeconds": 5}}"#
        ));
    }

    #[test]
    fn state_with_a_ca_file_for_a_plain_url_and_one_that_is_missing() {
        assert_snapshot!(json(
            r#"{"state": {"redis": "redis://127.0.0.1:6379/0", "caFile": "ca.pem"}}"#
        ));
        assert_snapshot!(json(
            r#"{"state": {"redis": "rediss://127.0.0.1:6379/0", "caFile": "no-such-ca.pem"}}"#
        ));
    }

    #[test]
    fn state_naming_no_redis_and_state_naming_both() {
        assert_snapshot!(json(r#"{"state": {"prefix": "api:"}}"#));
        assert_snapshot!(json(
            r#"{"state": {"redis": "redis://127.0.0.1:6379/0",
                "redisCluster": ["redis://127.0.0.1:7000"]}}"#
        ));
    }

    #[test]
    fn state_with_a_cluster_of_no_nodes() {
        assert_snapshot!(json(r#"{"state": {"redisCluster": []}}"#));
    }

    #[test]
    fn state_with_cluster_nodes_that_are_not_reached_by_address_or_not_on_database_0() {
        // The URLs may hold a password: the messages never quote them.
        let errors = json(
            r#"{"state": {"redisCluster": ["redis://:hunter2@127.0.0.1:7000/3",
                "unix:///run/redis.sock", "10.0.0.1:7000", "redis://:hunter2@127.0.0.1:7001/0"]}}"#,
        );
        assert!(!errors.contains("hunter2"), "{errors}");
        assert_snapshot!(errors);
    }

    #[test]
    fn state_with_cluster_nodes_that_disagree_on_the_password_or_on_tls() {
        let errors = json(
            r#"{"state": {"redisCluster": ["redis://:hunter2@127.0.0.1:7000",
                "redis://:hunter3@127.0.0.1:7001"]}}"#,
        );
        assert!(!errors.contains("hunter"), "{errors}");
        assert_snapshot!(errors);
        assert_snapshot!(json(
            r#"{"state": {"redisCluster": ["rediss://127.0.0.1:7000", "redis://127.0.0.1:7001"]}}"#
        ));
    }

    #[test]
    fn state_with_an_unknown_failure_mode() {
        assert_snapshot!(json(
            r#"{"state": {"redis": "redis://127.0.0.1:6379/0", "onFailure": "fail-shut"}}"#
        ));
    }

    #[test]
    fn every_problem_at_once() {
        assert_snapshot!(yaml(
            r"urlsToWatch: ['']
judge:
  key: client
errors:
  rate: 120
  errors:
    - request: {url: '*', method: 'G ET'}
      responses:
        - statusCode: 600
          headers: {Retry-After: '@dynamic=x'}
        - network: truncate
          bytesPerSecond: 10
rateLimits:
  - {limit: 5, windowSeconds: 0, cost: 6}
latency: {minMs: 9, maxMs: 1}
mocks:
  mocks:
    - request: {url: '!*', nth: 0}
      response: {}
"
        ));
    }
}
