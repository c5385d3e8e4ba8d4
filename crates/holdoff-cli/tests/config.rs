//! `holdoff config`, run as a built binary in a directory of its own: exit codes, what it
//! prints on standard output and standard error.

use std::path::Path;

use assert_cmd::Command;
use insta::assert_snapshot;

mod support;

use support::TempDir as TestDir;

/// Runs `holdoff config <args>` in `dir`.
fn config(dir: &Path, args: &[&str]) -> assert_cmd::assert::Assert {
    let mut cmd = Command::cargo_bin("holdoff").expect("the holdoff binary is built");
    cmd.current_dir(dir).arg("config").args(args).assert()
}

fn stdout(assert: &assert_cmd::assert::Assert) -> String {
    String::from_utf8(assert.get_output().stdout.clone()).expect("utf-8")
}

fn stderr(assert: &assert_cmd::assert::Assert) -> String {
    String::from_utf8(assert.get_output().stderr.clone()).expect("utf-8")
}

const TWO_RULES_AND_A_LIMIT: &str = r#"{
  // Two error rules and a rate limit.
  "errors": {
    "errors": [
      { "request": { "url": "https://a.example/*" }, "responses": [{ "statusCode": 429 }] },
      { "request": { "url": "https://b.example/*" }, "responses": [{ "network": "reset" }] }
    ]
  },
  "rateLimits": [{ "limit": 10, "windowSeconds": 60 }]
}
"#;

mod schema {
    use super::*;

    #[test]
    fn prints_the_checked_in_schema() {
        let dir = TestDir::new("schema");
        let assert = config(dir.path(), &["schema"]).code(0).stderr("");
        assert_eq!(
            stdout(&assert),
            include_str!("../../../schema/holdoff.schema.json"),
            "regenerate with: cargo run -p holdoff-cli -- config schema > schema/holdoff.schema.json"
        );
    }
}

mod validate {
    use super::*;

    #[test]
    fn finds_the_file_in_the_current_directory_and_sums_it_up() {
        let dir = TestDir::new("found");
        dir.write("holdoff.json", TWO_RULES_AND_A_LIMIT);
        let assert = config(dir.path(), &["validate"]).code(0).stderr("");
        assert_eq!(
            stdout(&assert),
            "holdoff.json: valid — 2 error rules (50%), 1 rate limit\n"
        );
    }

    #[test]
    fn says_where_state_is_shared_without_the_password() {
        let dir = TestDir::new("shared-state");
        dir.write(
            "holdoff.json",
            r#"{"state": {"redis": "redis://:hunter2@127.0.0.1:6379/0", "prefix": "api:",
                          "onFailure": "fail-closed"}}"#,
        );
        let assert = config(dir.path(), &["validate"]).code(0).stderr("");
        assert_eq!(
            stdout(&assert),
            "holdoff.json: valid — no faults; state shared in redis://:***@127.0.0.1:6379/0 \
             (keys api:*, fail-closed)\n"
        );
    }

    #[test]
    fn names_every_kind_of_fault_a_preset_holds() {
        // Token budgets, CRUD APIs and auth rules are faults too: a summary that counted only
        // errors, rate limits and mocks called the openai-tokens preset empty.
        let dir = TestDir::new("every-kind");
        let text = stdout(&config(dir.path(), &["preset", "openai-tokens"]).code(0));
        dir.write("tokens.json", &text);
        let summary = stdout(&config(dir.path(), &["validate", "tokens.json"]).code(0));
        assert_eq!(summary, "tokens.json: valid — 1 token budget\n");
        dir.write("customers.json", "[]");
        dir.write(
            "kinds.json",
            r#"{
  "auth": [{ "apiKey": { "parameters": [{ "in": "header", "name": "x-api-key" }],
                         "allowedKeys": ["k"] } }],
  "crudApis": [{ "baseUrl": "https://api.test/v1/customers", "dataFile": "customers.json",
                 "actions": [{ "action": "getAll" }] }]
}"#,
        );
        let summary = stdout(&config(dir.path(), &["validate", "kinds.json"]).code(0));
        assert_eq!(summary, "kinds.json: valid — 1 CRUD API, 1 auth rule\n");
    }

    #[test]
    fn checks_the_file_named() {
        let dir = TestDir::new("named");
        dir.write(
            "faults.yml",
            "latency: {minMs: 10, maxMs: 20}\nmocks:\n  mocks:\n    - request: {url: '*'}\n      response: {statusCode: 204}\n",
        );
        let assert = config(dir.path(), &["validate", "faults.yml"])
            .code(0)
            .stderr("");
        assert_eq!(
            stdout(&assert),
            "faults.yml: valid — 1 mock, latency 10–20 ms\n"
        );
    }

    #[test]
    fn prints_every_problem_and_exits_1() {
        let dir = TestDir::new("invalid");
        dir.write(
            "holdoff.yaml",
            "errors:\n  rate: 150\n  errors:\n    - request: {url: '!*'}\n      responses: []\nlatency: {minMs: 9, maxMs: 1}\n",
        );
        let assert = config(dir.path(), &["validate"]).code(1).stdout("");
        assert_snapshot!(stderr(&assert));
    }

    #[test]
    fn gives_the_line_and_column_of_a_wrong_type() {
        let dir = TestDir::new("wrong-type");
        dir.write("holdoff.json", "{\n  \"seed\": \"forty-two\"\n}\n");
        let assert = config(dir.path(), &["validate"]).code(1).stdout("");
        assert_eq!(
            stderr(&assert),
            "holdoff: holdoff.json:2:21: seed: invalid type: string \"forty-two\", expected a \
             whole number, 0 or more\n"
        );
    }

    #[test]
    fn names_a_file_that_cannot_be_read() {
        let dir = TestDir::new("missing");
        let assert = config(dir.path(), &["validate", "nowhere.json"])
            .code(1)
            .stdout("");
        let stderr = stderr(&assert);
        assert!(
            stderr.starts_with("holdoff: nowhere.json: cannot read the file: "),
            "{stderr}"
        );
    }

    #[test]
    fn is_a_usage_error_without_a_file_to_check() {
        let dir = TestDir::new("none");
        let assert = config(dir.path(), &["validate"]).code(2).stdout("");
        let stderr = stderr(&assert);
        assert!(
            stderr.contains(
                "none in the current directory (looked for holdoff.json, holdoff.jsonc, \
                 holdoff.yaml, holdoff.yml)"
            ),
            "{stderr}"
        );
    }
}

mod preset {
    use super::*;

    const NAMES: [&str; 17] = [
        "throttle",
        "openai",
        "openai-tokens",
        "azure-openai",
        "anthropic",
        "github",
        "github-models",
        "graph",
        "graph-rate-limit",
        "apim",
        "stripe",
        "twilio",
        "postmark",
        "resend",
        "paypal",
        "flaky",
        "degradation",
    ];

    #[test]
    fn lists_the_presets_with_or_without_the_flag() {
        let dir = TestDir::new("list");
        let listed = stdout(&config(dir.path(), &["preset", "--list"]).code(0).stderr(""));
        let bare = stdout(&config(dir.path(), &["preset"]).code(0).stderr(""));
        assert_eq!(listed, bare);
        let names: Vec<&str> = listed
            .lines()
            .filter_map(|line| line.split_whitespace().next())
            .collect();
        assert_eq!(names, NAMES);
        assert!(listed.contains("(the default)"), "{listed}");
    }

    #[test]
    fn prints_presets_that_validate_as_files() {
        let dir = TestDir::new("print");
        for name in NAMES {
            let text = stdout(&config(dir.path(), &["preset", name]).code(0).stderr(""));
            assert!(text.contains("\"$schema\""), "{name}");
            let file = format!("{name}.jsonc");
            dir.write(&file, &text);
            let summary = stdout(&config(dir.path(), &["validate", &file]).code(0).stderr(""));
            assert!(
                summary.starts_with(&format!("{file}: valid — ")),
                "{summary}"
            );
        }
    }

    #[test]
    fn is_a_usage_error_for_an_unknown_name() {
        let dir = TestDir::new("unknown");
        let assert = config(dir.path(), &["preset", "gitlab"]).code(2).stdout("");
        let stderr = stderr(&assert);
        assert!(
            stderr.contains(&format!(
                "there is no preset `gitlab`; the presets are {}",
                NAMES.join(", ")
            )),
            "{stderr}"
        );
    }

    #[test]
    fn refuses_a_name_with_the_list_flag() {
        let dir = TestDir::new("both");
        config(dir.path(), &["preset", "github", "--list"])
            .code(2)
            .stdout("");
    }
}

mod import_devproxy {
    use super::*;

    const DEVPROXYRC: &str = r#"{
  // Dev Proxy's configuration: random errors from a file.
  "plugins": [
    {
      "name": "GenericRandomErrorPlugin",
      "enabled": true,
      "pluginPath": "~appFolder/plugins/dev-proxy-plugins.dll",
      "configSection": "errors"
    }
  ],
  "urlsToWatch": ["https://api.example.com/*"],
  "errors": { "errorsFile": "errors.json", "rate": 30 }
}
"#;

    const ERRORS: &str = r#"{"errors": [{"request": {"url": "https://api.example.com/*"},
        "responses": [{"statusCode": 429, "headers": [{"name": "Retry-After", "value": "@dynamic"}]}]}]}"#;

    #[test]
    fn writes_a_configuration_that_validates_and_notes_the_differences() {
        let dir = TestDir::new("import");
        dir.write("devproxyrc.json", DEVPROXYRC);
        dir.write("errors.json", ERRORS);
        let assert = config(dir.path(), &["import-devproxy", "devproxyrc.json"]).code(0);
        let json: serde_json::Value =
            serde_json::from_str(&stdout(&assert)).expect("stdout is one JSON object");
        assert_eq!(json["urlsToWatch"][0], "https://api.example.com/*");
        assert_eq!(json["errors"]["rate"], 30.0);
        assert!(json["$schema"].is_string());
        let notes = stderr(&assert);
        assert!(
            !notes.is_empty() && notes.lines().all(|l| l.starts_with("note: ")),
            "{notes}"
        );

        let assert = config(
            dir.path(),
            &["import-devproxy", "devproxyrc.json", "-o", "holdoff.json"],
        )
        .code(0);
        assert_eq!(stdout(&assert), "Wrote holdoff.json.\n");
        let summary = stdout(&config(dir.path(), &["validate"]).code(0).stderr(""));
        assert_eq!(summary, "holdoff.json: valid — 1 error rule (30%)\n");
    }

    #[test]
    fn exits_1_naming_a_file_that_cannot_be_imported() {
        let dir = TestDir::new("import-missing");
        let assert = config(dir.path(), &["import-devproxy", "devproxyrc.json"])
            .code(1)
            .stdout("");
        let stderr = stderr(&assert);
        assert!(stderr.starts_with("holdoff: devproxyrc.json"), "{stderr}");
    }
}

/// Files no configuration is (issue 37): refused at once, never read, never a hang.
mod hostile_files {
    fn holdoff_in(dir: &std::path::Path, args: &[&str]) -> std::process::Output {
        assert_cmd::Command::cargo_bin("holdoff")
            .expect("the holdoff binary")
            .args(args)
            .current_dir(dir)
            .timeout(std::time::Duration::from_secs(30))
            .output()
            .expect("run holdoff")
    }

    #[test]
    fn dev_zero_and_a_fifo_are_refused_as_not_regular_files() {
        let dir = holdoff_testkit::TempDir::new("hostile-cli");
        let zero = holdoff_in(dir.path(), &["config", "validate", "/dev/zero"]);
        assert_eq!(zero.status.code(), Some(1));
        assert!(
            String::from_utf8_lossy(&zero.stderr).contains("is a device, not a regular file"),
            "{zero:?}"
        );
        let proxy = holdoff_in(dir.path(), &["-c", "/dev/zero", "--port", "0"]);
        assert_eq!(proxy.status.code(), Some(2), "{proxy:?}");
        let made = std::process::Command::new("mkfifo")
            .arg(dir.join("holdoff.json"))
            .status()
            .expect("mkfifo");
        assert!(made.success());
        // Named: refused. (Looking for a config in the folder, holdoff takes only files.)
        let fifo = holdoff_in(dir.path(), &["config", "validate", "holdoff.json"]);
        assert_eq!(fifo.status.code(), Some(1), "{fifo:?}");
        assert!(
            String::from_utf8_lossy(&fifo.stderr).contains("named pipe (FIFO)"),
            "{fifo:?}"
        );
    }

    #[test]
    fn deep_yaml_is_refused_at_once() {
        let dir = holdoff_testkit::TempDir::new("hostile-yaml");
        let deep = format!("x: {}{}\n", "[".repeat(100_000), "]".repeat(100_000));
        std::fs::write(dir.join("deep.yaml"), deep).expect("write");
        let output = holdoff_in(dir.path(), &["config", "validate", "deep.yaml"]);
        assert_eq!(output.status.code(), Some(1), "{output:?}");
        assert!(
            String::from_utf8_lossy(&output.stderr).contains("nested more than 64 levels deep"),
            "{output:?}"
        );
    }
}
