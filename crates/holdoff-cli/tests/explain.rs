//! `holdoff explain`, run as a built binary: exit codes, the JSON report, the text for people.
//!
//! Every run passes `--now`, so the output does not depend on the real clock.

use std::process::Stdio;

use assert_cmd::Command;
use serde_json::{Value, json};

/// A Wednesday: the dates below are relative to it.
const NOW: &str = "2025-01-01T00:00:00Z";

/// Runs `holdoff explain` with `--now NOW` unless `args` set `--now` themselves.
fn explain(args: &[&str]) -> assert_cmd::assert::Assert {
    let mut cmd = Command::cargo_bin("holdoff").expect("the holdoff binary is built");
    cmd.arg("explain");
    if !args.contains(&"--now") {
        cmd.args(["--now", NOW]);
    }
    cmd.args(args).assert()
}

/// Runs with `--json`, checks the exit code, and parses stdout as exactly one JSON value.
fn report(args: &[&str], code: i32) -> Value {
    let assert = explain(&[&["--json"], args].concat()).code(code).stderr("");
    serde_json::from_slice(&assert.get_output().stdout).expect("stdout is one JSON object")
}

fn text(args: &[&str], code: i32) -> String {
    let assert = explain(args).code(code).stderr("");
    String::from_utf8(assert.get_output().stdout.clone()).expect("utf-8")
}

mod exit_codes {
    use super::*;

    #[test]
    fn is_0_for_a_valid_value() {
        explain(&["120"]).code(0);
        explain(&["--json", "Wed, 01 Jan 2025 00:01:00 GMT"]).code(0);
    }

    #[test]
    fn is_1_for_a_malformed_value_in_either_mode() {
        let stdout = text(&["1.5"], 1);
        assert!(stdout.contains("malformed"), "{stdout}");
        report(&["1.5"], 1);
    }

    #[test]
    fn is_1_for_a_malformed_value_even_when_it_falls_back() {
        report(&["--on-malformed", "fallback", "soon"], 1);
    }

    #[test]
    fn is_2_for_a_bad_duration_with_what_to_write_instead() {
        let assert = explain(&["--backoff", "8x", "30"]).code(2).stdout("");
        let stderr = stderr(&assert);
        assert!(
            stderr
                .contains("invalid duration `8x`: expected e.g. 8s, 500ms, 1m30s or 0.7 (seconds)"),
            "{stderr}"
        );
    }

    #[test]
    fn is_2_for_other_bad_options() {
        let cases: [(&[&str], &str); 6] = [
            (&["--now", "yesterday", "30"], "invalid time `yesterday`"),
            (&["--attempt", "6/5", "30"], "invalid attempt `6/5`"),
            (&["--status", "600", "30"], "600 is not in 100..=599"),
            (&["--method", "GE T", "30"], "invalid method `GE T`"),
            (
                &["--date", "soon", "30"],
                "invalid --date `soon`: not an HTTP-date",
            ),
            (
                &["--date", "Thu, 01 Jan 2025 00:00:10 GMT", "30"],
                "the weekday does not match the date",
            ),
        ];
        for (args, message) in cases {
            let assert = explain(args).code(2).stdout("");
            let stderr = stderr(&assert);
            assert!(stderr.contains(message), "{args:?}: {stderr}");
        }
    }

    #[test]
    fn is_2_without_a_value() {
        explain(&[]).code(2).stdout("");
    }

    #[test]
    fn is_quiet_when_the_reader_goes_away() {
        let mut child = std::process::Command::new(assert_cmd::cargo::cargo_bin("holdoff"))
            .args(["explain", "--now", NOW, "120"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn");
        // Close our end of stdout before the child writes (if the child wins the race, it
        // simply succeeds, which passes too).
        drop(child.stdout.take());
        let output = child.wait_with_output().expect("wait");
        assert!(output.status.success(), "{output:?}");
        assert_eq!(String::from_utf8_lossy(&output.stderr), "");
    }
}

fn stderr(assert: &assert_cmd::assert::Assert) -> String {
    String::from_utf8_lossy(&assert.get_output().stderr).into_owned()
}

mod json {
    use super::*;

    #[test]
    fn reports_a_delay() {
        let r = report(&["120"], 0);
        assert_eq!(r["input"], "120");
        assert_eq!(
            r["hint"],
            json!({"form": "delay", "seconds": 120, "saturated": false})
        );
        assert_eq!(r["decision"]["action"], "retry");
        assert_eq!(r["decision"]["reason"], "retryable");
        assert_eq!(r["decision"]["wait_ms"], 120_000);
        assert_eq!(r["decision"]["permitted_in_ms"], 120_000);
        assert_eq!(r["decision"]["permitted_at"], "2025-01-01T00:02:00Z");
        assert_eq!(r["diagnostics"]["reference"], "local-clock");
        assert_eq!(r["diagnostics"]["skew_s"], Value::Null);
        assert_eq!(r["diagnostics"]["clamped_past"], false);
    }

    #[test]
    fn defers_the_canonical_case() {
        let r = report(&["--backoff", "8s", "--remaining", "12s", "30"], 0);
        assert_eq!(r["decision"]["action"], "defer");
        assert_eq!(r["decision"]["reason"], "deadline-exceeded");
        assert_eq!(r["decision"]["wait_ms"], Value::Null);
        assert_eq!(r["decision"]["permitted_in_ms"], 30_000);
        assert_eq!(r["diagnostics"]["backoff_ms"], 8_000);
        assert_eq!(r["diagnostics"]["computed_wait_ms"], 30_000);
    }

    #[test]
    fn measures_a_date_against_the_servers_clock() {
        // The server's clock is 10 s ahead: the date is 50 s away by its clock, not 60 s.
        let r = report(
            &[
                "--date",
                "Wed, 01 Jan 2025 00:00:10 GMT",
                "Wed, 01 Jan 2025 00:01:00 GMT",
            ],
            0,
        );
        assert_eq!(
            r["hint"],
            json!({
                "form": "date",
                "unix": 1_735_689_660,
                "format": "imf-fixdate",
                "date": "2025-01-01T00:01:00Z",
            })
        );
        assert_eq!(r["diagnostics"]["reference"], "server-date");
        assert_eq!(r["diagnostics"]["skew_s"], 10);
        assert_eq!(r["diagnostics"]["clamped_past"], false);
        assert_eq!(r["decision"]["permitted_in_ms"], 50_000);
        assert_eq!(r["decision"]["wait_ms"], 50_000);
    }

    #[test]
    fn adds_age_to_the_servers_clock() {
        let r = report(
            &[
                "--date",
                "Wed, 01 Jan 2025 00:00:10 GMT",
                "--age",
                "5",
                "Wed, 01 Jan 2025 00:01:00 GMT",
            ],
            0,
        );
        assert_eq!(r["diagnostics"]["skew_s"], 15);
        assert_eq!(r["decision"]["permitted_in_ms"], 45_000);
    }

    #[test]
    fn clamps_a_past_date_to_zero() {
        let r = report(&["Tue, 31 Dec 2024 23:00:00 GMT"], 0);
        assert_eq!(r["diagnostics"]["clamped_past"], true);
        assert_eq!(r["decision"]["permitted_in_ms"], 0);
        // The local backoff still applies.
        assert_eq!(r["decision"]["action"], "retry");
        assert_eq!(r["decision"]["wait_ms"], 1_000);
    }

    #[test]
    fn reads_the_obsolete_date_formats() {
        for (value, format) in [
            ("Wednesday, 01-Jan-25 00:02:00 GMT", "rfc850"),
            ("Wed Jan  1 00:02:00 2025", "asctime"),
        ] {
            let r = report(&[value], 0);
            assert_eq!(r["hint"]["form"], "date");
            assert_eq!(r["hint"]["format"], format);
            assert_eq!(r["hint"]["unix"], 1_735_689_720);
            assert_eq!(r["decision"]["permitted_in_ms"], 120_000);
        }
    }

    #[test]
    fn saturates_a_huge_delay_upward_and_defers() {
        let r = report(&["99999999999999999999999"], 0);
        assert_eq!(
            r["hint"],
            json!({"form": "delay", "seconds": 18_446_744_073_709_551_615_u64, "saturated": true})
        );
        assert_eq!(r["decision"]["action"], "defer");
        assert_eq!(r["decision"]["reason"], "beyond-clock-range");
        assert_eq!(r["decision"]["permitted_in_ms"], Value::Null);
    }

    #[test]
    fn explains_a_malformed_value() {
        let r = report(&["1.5"], 1);
        assert_eq!(r["input"], "1.5");
        assert_eq!(r["hint"]["form"], "invalid");
        assert_eq!(r["hint"]["error_kind"], "bad-delay");
        assert_eq!(
            r["hint"]["error"],
            "invalid value \"1.5\": delay-seconds must be digits only \
             (no sign, decimal point, exponent or unit)"
        );
        assert_eq!(r["decision"]["action"], "error");
        assert_eq!(r["decision"]["reason"], "malformed-retry-after");
        assert_eq!(r["diagnostics"]["dropped_malformed"], false);
    }

    #[test]
    fn falls_back_to_the_backoff_when_told_to() {
        let r = report(&["--on-malformed", "fallback", "--backoff", "3s", "1.5"], 1);
        assert_eq!(r["decision"]["action"], "retry");
        assert_eq!(r["decision"]["reason"], "retryable");
        assert_eq!(r["decision"]["wait_ms"], 3_000);
        assert_eq!(r["diagnostics"]["dropped_malformed"], true);
    }

    #[test]
    fn gives_up_on_a_status_it_does_not_retry() {
        let r = report(&["--status", "403", "30"], 0);
        assert_eq!(r["decision"]["action"], "give-up");
        assert_eq!(r["decision"]["reason"], "status-not-retryable");
        // Still reported, so the task can be re-queued.
        assert_eq!(r["decision"]["permitted_in_ms"], 30_000);
    }

    #[test]
    fn a_413_with_a_hint_is_temporary_and_retried_after_it() {
        let r = report(&["--status", "413", "5"], 0);
        assert_eq!(r["decision"]["action"], "retry");
        assert_eq!(r["decision"]["reason"], "retryable");
        assert!(r["decision"]["wait_ms"].as_u64() >= Some(5_000));
    }

    #[test]
    fn soon_is_neither_delay_seconds_nor_a_date() {
        let r = report(&["soon"], 1);
        assert_eq!(r["hint"]["error_kind"], "neither-delay-nor-date");
        assert_eq!(r["decision"]["permitted_in_ms"], serde_json::Value::Null);
    }

    #[test]
    fn gives_up_on_a_post_unless_marked_safe() {
        let r = report(&["--method", "POST", "30"], 0);
        assert_eq!(r["decision"]["action"], "give-up");
        assert_eq!(r["decision"]["reason"], "non-idempotent");
        let r = report(&["--method", "POST", "--idempotent", "30"], 0);
        assert_eq!(r["decision"]["action"], "retry");
        assert_eq!(r["decision"]["wait_ms"], 30_000);
    }

    #[test]
    fn gives_up_when_attempts_are_exhausted() {
        let r = report(&["--attempt", "5/5", "30"], 0);
        assert_eq!(r["decision"]["action"], "give-up");
        assert_eq!(r["decision"]["reason"], "attempts-exhausted");
    }

    #[test]
    fn defers_a_hint_beyond_max_wait() {
        let r = report(&["--max-wait", "10s", "30"], 0);
        assert_eq!(r["decision"]["action"], "defer");
        assert_eq!(r["decision"]["reason"], "hint-exceeds-max-wait");
        assert_eq!(r["decision"]["permitted_in_ms"], 30_000);
    }

    #[test]
    fn is_done_on_success() {
        let r = report(&["--status", "200", "30"], 0);
        assert_eq!(r["decision"]["action"], "done");
        assert_eq!(r["decision"]["reason"], "success");
    }

    #[test]
    fn follows_a_redirect_after_the_hint() {
        let r = report(&["--status", "301", "30"], 0);
        assert_eq!(r["decision"]["action"], "follow-redirect");
        assert_eq!(r["decision"]["reason"], "redirect");
        assert_eq!(r["decision"]["wait_ms"], 30_000);
    }

    #[test]
    fn adds_the_jitter_draw() {
        let r = report(&["--backoff", "4s", "--jitter", "250ms", "2"], 0);
        assert_eq!(r["decision"]["wait_ms"], 4_250);
        assert_eq!(r["decision"]["wait_until"], "2025-01-01T00:00:04.25Z");
        assert_eq!(r["decision"]["permitted_in_ms"], 2_000);
    }

    #[test]
    fn accepts_now_as_unix_seconds() {
        let r = report(&["--now", "1735689600.5", "30"], 0);
        assert_eq!(r["request"]["received_at"], "2025-01-01T00:00:00.5Z");
    }
}

mod human {
    use super::*;

    /// Snapshots of the text, kept in tests/snapshots whatever `cargo metadata` says (insta
    /// asks it for the workspace root, and falls back to this crate's directory if it fails).
    fn assert_text(name: &str, text: String) {
        let mut settings = insta::Settings::clone_current();
        settings.set_snapshot_path(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/snapshots"));
        settings.bind(|| insta::assert_snapshot!(name, text));
    }

    #[test]
    fn explains_the_canonical_defer() {
        let args = ["--backoff", "8s", "--remaining", "12s", "30"];
        assert_text("canonical_defer", text(&args, 0));
    }

    #[test]
    fn explains_a_date_with_skew() {
        let args = [
            "--date",
            "Wed, 01 Jan 2025 00:00:10 GMT",
            "Wed, 01 Jan 2025 00:01:00 GMT",
        ];
        assert_text("date_with_skew", text(&args, 0));
    }

    #[test]
    fn explains_a_malformed_value() {
        assert_text("malformed", text(&["1.5"], 1));
    }

    #[test]
    fn names_the_header_that_decided_over_a_reset() {
        let args = [
            "-H",
            "RateLimit-Reset: 100",
            "-H",
            "retry-after-ms: 1500",
            "1",
        ];
        assert_text("retry_after_over_reset", text(&args, 0));
        let reset = text(&["-H", "RateLimit-Reset: 100", "soon"], 1);
        assert!(
            reset.contains("the reset decides") || reset.contains("malformed"),
            "{reset}"
        );
    }

    #[test]
    fn names_the_aws_header_as_one_of_the_retry_after_family() {
        let args = [
            "-H",
            "x-amz-retry-after: 2500",
            "-H",
            "RateLimit: \"default\";r=0;t=40",
            "1",
        ];
        let out = text(&args, 0);
        assert!(out.contains("hint        2s500ms after receipt"), "{out}");
        assert!(
            out.contains("decided by  x-amz-retry-after: Retry-After and its millisecond"),
            "{out}"
        );
    }

    #[test]
    fn a_header_that_is_not_name_colon_value_is_a_usage_error() {
        explain(&["-H", "RateLimit-Reset 100", "1"]).code(2);
        explain(&["-H", "Retry-After: 3", "1"]).code(2);
    }

    #[test]
    fn explains_a_saturated_delay() {
        assert_text("saturated", text(&["99999999999999999999999"], 0));
    }

    #[test]
    fn documents_the_location_assumption() {
        let help = explain(&["--help"]).code(0);
        let help = String::from_utf8_lossy(&help.get_output().stdout).into_owned();
        assert!(help.contains("assumed to carry a Location"), "{help}");
    }
}
