//! Importing Microsoft Dev Proxy configurations: the fixtures under `fixtures/devproxy/` are
//! written to Dev Proxy's published schemas (v2.2.0), and each import is checked value by
//! value, note by note, and then compiled as holdoff would run it.

use std::path::{Path, PathBuf};

use holdoff_config::compile::{Compiled, FileError, compile};
use holdoff_config::devproxy::{Imported, import};
use holdoff_proxy::fault::FaultOutcome;
use serde_json::{Value, json};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/devproxy")
}

/// A path as the importer shows it, with the fixtures' directory left out.
fn shown(text: &str) -> String {
    text.replace(&format!("{}/", fixtures().display()), "")
}

fn imported(case: &str) -> Imported {
    import(&fixtures().join(case)).unwrap_or_else(|errors| panic!("{case}: {errors}"))
}

fn config(imported: &Imported) -> Value {
    serde_json::to_value(&imported.config).expect("a config serializes")
}

fn notes(imported: &Imported) -> Vec<String> {
    imported.notes.iter().map(|note| shown(note)).collect()
}

/// Compiles the import as `holdoff proxy --devproxy-config` does: relative paths against the
/// Dev Proxy file's directory.
fn compiled(case: &str, imported: &Imported) -> Compiled {
    let path = fixtures().join(case);
    let dir = path.parent().expect("a fixture has a directory");
    compile(&imported.config, "devproxyrc.json", dir)
        .unwrap_or_else(|errors| panic!("{case} does not compile: {errors}"))
}

fn errors(case: &str) -> Vec<FileError> {
    match import(&fixtures().join(case)) {
        Ok(imported) => panic!("{case} imported: {:?}", imported.config),
        Err(errors) => errors
            .0
            .into_iter()
            .map(|error| FileError {
                file: shown(&error.file),
                message: shown(&error.message),
                ..error
            })
            .collect(),
    }
}

fn error(file: &str, path: &str, message: &str, line: Option<(usize, usize)>) -> FileError {
    FileError {
        file: file.to_owned(),
        path: path.to_owned(),
        message: message.to_owned(),
        line,
    }
}

const RETRY_AFTER_PLUGIN_NOTE: &str = "RetryAfterPlugin needs no setting: holdoff's judge is \
    always on. It keys its windows by client, method and URL, and judges every Retry-After a \
    client receives, the upstream's too, not only the ones holdoff sends; Dev Proxy kept one \
    wait per host, and started it over on a retry that came too soon. For Dev Proxy's \
    behaviour set judge.key to `host` and judge.penalty to `sliding` (or pass --judge-key host \
    --judge-penalty sliding).";

const NO_RETRY_AFTER_PLUGIN_NOTE: &str = "RetryAfterPlugin is not enabled, so Dev Proxy let \
    early retries through; holdoff's judge is always on, and answers a retry that comes before \
    its Retry-After again without forwarding it (--judge-key host --judge-penalty sliding \
    judge as Dev Proxy's RetryAfterPlugin does).";

mod openai_throttling {
    use super::*;

    const CASE: &str = "openai/devproxyrc.json";

    #[test]
    fn inlines_the_errors_file_as_it_is_with_the_rate() {
        let imported = imported(CASE);
        let config = config(&imported);
        assert_eq!(config["urlsToWatch"], json!(["https://api.openai.com/*"]));
        assert_eq!(config["errors"]["rate"], json!(90.0));
        assert_eq!(config["errors"]["dynamicRange"], json!([5, 5]));
        // Every rule, header (`@dynamic` and `@dynamic=20` kept) and body, exactly as written.
        let text = std::fs::read_to_string(fixtures().join("openai/openai-errors.json"))
            .expect("the errors file");
        let file: Value = serde_json::from_str(&text).expect("the errors file is JSON");
        assert_eq!(config["errors"]["errors"], file["errors"]);
        assert_eq!(
            config.as_object().map(|map| map.len()),
            Some(2),
            "only urlsToWatch and errors: {config}"
        );
        assert_eq!(
            imported.config.judge, None,
            "judge.key is never set for the user"
        );
    }

    #[test]
    fn explains_what_holdoff_does_differently() {
        assert_eq!(
            notes(&imported(CASE)),
            [
                RETRY_AFTER_PLUGIN_NOTE,
                "GenericRandomErrorPlugin: rate 90 became errors.rate. It is a probability per \
                 request: holdoff fails each request a rule matches with a chance of 90 %, so a \
                 run shows about that share, not exactly it; Dev Proxy failed 90.9 % (it draws \
                 from 1 to 99, so its 99 fails every request).",
                "openai/openai-errors.json: Dev Proxy fills in a `@dynamic` Retry-After only on \
                 a 429 and sends it as written otherwise; holdoff fills it in on any status: \
                 `errors[0].responses[3]`.",
                "A bare `@dynamic` Retry-After waits 5 s, as Dev Proxy's retryAfterInSeconds \
                 says (errors.dynamicRange is [5, 5]).",
                "logLevel information: holdoff proxy and run log at it when they read this \
                 file; a holdoff file has no log level: pass --log-level information.",
                "Settings without a counterpart in holdoff were ignored: \
                 `newVersionNotification`, `showSkipMessages`.",
            ]
        );
    }

    #[test]
    fn compiles() {
        let compiled = compiled(CASE, &imported(CASE));
        let plan = &compiled.plan;
        assert_eq!(plan.errors.len(), 2);
        assert!(
            plan.errors
                .iter()
                .all(|rule| rule.rate.as_percent() == 90.0)
        );
        assert_eq!(plan.errors[0].outcomes.len(), 4);
        assert_eq!(compiled.urls_to_watch.map(|urls| urls.len()), Some(1));
    }
}

mod github_rate_limiting {
    use super::*;

    const CASE: &str = "github/devproxyrc.json";

    #[test]
    fn becomes_a_shared_fixed_window_with_the_custom_response() {
        let imported = imported(CASE);
        assert_eq!(
            config(&imported),
            json!({
                "urlsToWatch": ["https://api.github.com/*"],
                "rateLimits": [{
                    "algorithm": "fixed-window-from-first-request",
                    "limit": 60,
                    "windowSeconds": 3600,
                    "cost": 1,
                    "scope": "shared",
                    "headers": "x-ratelimit",
                    "resetFormat": "epoch-seconds",
                    "warningThresholdPercent": 0,
                    "whenExceeded": {
                        "statusCode": 403,
                        "headers": [
                            {"name": "Retry-After", "value": "@dynamic"},
                            {"name": "X-GitHub-Media-Type", "value": "github.v3; format=json"}
                        ],
                        "body": {
                            "message": "API rate limit exceeded for 203.0.113.7. (But here's the \
                                        good news: Authenticated requests get a higher rate \
                                        limit. Check out the documentation for more details.)",
                            "documentation_url": "https://docs.github.com/rest/overview/resources-in-the-rest-api#rate-limiting"
                        }
                    }
                }]
            })
        );
    }

    #[test]
    fn explains_the_window_and_the_custom_response() {
        assert_eq!(
            notes(&imported(CASE)),
            [
                RETRY_AFTER_PLUGIN_NOTE,
                "RateLimitingPlugin: 60 per 3600 s at 1 a request became rateLimits[0], a fixed \
                 window from the first request (as Dev Proxy's: it starts at the first request, \
                 and again at the first request after it ends) with scope shared (Dev Proxy \
                 counts every client's requests together).",
                "RateLimitingPlugin: past the limit, the response in \
                 github/github-rate-limit-exceeded.json is sent (rateLimits[0].whenExceeded).",
            ]
        );
    }

    #[test]
    fn compiles() {
        let compiled = compiled(CASE, &imported(CASE));
        let [limit] = compiled.plan.rate_limits.as_slice() else {
            panic!("one rate limit: {:?}", compiled.plan.rate_limits);
        };
        assert_eq!(limit.limit.limit, 60);
        let exceeded = limit.when_exceeded.as_ref().expect("a custom response");
        assert_eq!(exceeded.status.as_u16(), 403);
    }
}

mod yaml_config_with_its_own_watch_lists {
    use super::*;

    const CASE: &str = "throttle/devproxyrc.yaml";

    #[test]
    fn writes_out_dev_proxys_defaults_and_each_plugins_urls() {
        let imported = imported(CASE);
        assert_eq!(
            config(&imported),
            json!({
                "urlsToWatch": ["https://api.contoso.com/*", "https://api.contoso.com/v1/*"],
                "rateLimits": [{
                    // The plugin's own urlsToWatch, exactly.
                    "url": "https://api.contoso.com/v1/*",
                    "algorithm": "fixed-window-from-first-request",
                    "limit": 10,
                    "windowSeconds": 30,
                    // Dev Proxy's default cost.
                    "cost": 2,
                    "scope": "shared",
                    "headers": "draft",
                    "resetFormat": "seconds-left",
                    // Dev Proxy's default.
                    "warningThresholdPercent": 80
                }],
                // Dev Proxy's default delay, on the URLs it watched.
                "latency": {"minMs": 0, "maxMs": 5000, "url": "https://api.contoso.com/*"}
            })
        );
    }

    #[test]
    fn explains_the_settings_holdoff_takes_elsewhere() {
        assert_eq!(
            notes(&imported(CASE)),
            [
                "RateLimitingPlugin watches its own URLs (`https://api.contoso.com/v1/*`); \
                 holdoff has one watch list, so they were added to urlsToWatch.",
                "RateLimitingPlugin: 10 per 30 s at 2 a request became rateLimits[0], a fixed \
                 window from the first request (as Dev Proxy's: it starts at the first request, \
                 and again at the first request after it ends) with scope shared (Dev Proxy \
                 counts every client's requests together); costPerRequest is not set, and Dev \
                 Proxy's default is 2.",
                "RateLimitingPlugin: holdoff's refusals carry `Retry-After`, not \
                 `X-Retry-After` (headerRetryAfter).",
                // `WhenLimitExceeded` is read in any case, as Dev Proxy does; `burst` is not
                // Dev Proxy's.
                "throttle/devproxyrc.yaml: not in Dev Proxy's schema, so ignored: \
                 `rateLimiting.burst`.",
                "ipAddress 127.0.0.1: holdoff's configuration has no address; pass --ip-address \
                 127.0.0.1 (anything but loopback needs --proxy-auth).",
                "port 8897: holdoff's configuration has no port; pass --port 8897.",
                "The top-level rate (30) is not read by current Dev Proxy versions \
                 (GenericRandomErrorPlugin's section has the rate), and was ignored; pass \
                 --failure-rate 30 if you meant it.",
                "watchProcessNames [\"msedge\"]: Dev Proxy handled only these processes' \
                 traffic; a holdoff file has no such setting: pass --watch-process-names msedge \
                 (Linux).",
                NO_RETRY_AFTER_PLUGIN_NOTE,
            ]
        );
    }

    #[test]
    fn compiles() {
        let compiled = compiled(CASE, &imported(CASE));
        assert_eq!(compiled.plan.rate_limits.len(), 1);
        assert!(compiled.plan.latency.is_some());
    }
}

mod mocks_latency_and_plugins_left_out {
    use super::*;

    const CASE: &str = "mocks/devproxyrc.json";

    #[test]
    fn inlines_the_mocks_with_dev_proxys_defaults() {
        let imported = imported(CASE);
        assert_eq!(
            config(&imported),
            json!({
                // Comments and trailing commas read; the order kept.
                "urlsToWatch": [
                    "!https://jsonplaceholder.typicode.com/health",
                    "https://jsonplaceholder.typicode.com/*"
                ],
                "latency": {"minMs": 200, "maxMs": 10000},
                "mocks": {
                    "mocks": [
                        {
                            "request": {
                                "url": "https://jsonplaceholder.typicode.com/posts/1",
                                "method": "GET",
                                "nth": 2
                            },
                            "response": {
                                "statusCode": 500,
                                "body": {"error": "the second read fails"}
                            }
                        },
                        {
                            "request": {
                                "url": "https://jsonplaceholder.typicode.com/posts/1",
                                "method": "GET"
                            },
                            "response": {
                                "statusCode": 200,
                                "headers": [{"name": "Cache-Control", "value": "max-age=43200"}],
                                "body": {"userId": 1, "id": 1, "title": "a title"}
                            }
                        },
                        {
                            "request": {
                                "url": "https://jsonplaceholder.typicode.com/posts",
                                "method": "POST",
                                "bodyFragment": "draft"
                            },
                            // Relative to the mocks file in Dev Proxy, to devproxyrc.json here.
                            "response": {"statusCode": 201, "body": "@mocks/created.json"}
                        },
                        {
                            "request": {
                                "url": "https://jsonplaceholder.typicode.com/posts",
                                "method": "POST"
                            },
                            "response": {
                                "statusCode": 201,
                                "body": {"id": 101, "title": "@request.body.title"}
                            }
                        }
                    ],
                    "blockUnmocked": true
                }
            })
        );
        assert_eq!(
            imported.config.errors, None,
            "the disabled GenericRandomErrorPlugin injects nothing (its missing errors file is \
             not even read)"
        );
    }

    #[test]
    fn explains_the_defaults_and_the_plugins_left_out() {
        assert_eq!(
            notes(&imported(CASE)),
            [
                "mocks/mocks/mocks.json: 2 mocks have no method, which Dev Proxy matches to GET \
                 only; the import says `method: GET`: `mocks[0]`, `mocks[1]`.",
                "mocks/mocks/mocks.json: 1 response has no statusCode; Dev Proxy answers 200 \
                 then, and so does the import: `mocks[1]`.",
                "mocks/mocks/mocks.json: `nth` numbers the requests of a URL across the mocks \
                 that share it, as in Dev Proxy (nth 1, nth 2, then one without: the first \
                 request, the second, then the rest). Dev Proxy numbers only the requests a \
                 mock answered, holdoff every one that reaches them: a lone `nth: 2` answers \
                 the second request here, and none in Dev Proxy.",
                "CachingGuidancePlugin is not supported by holdoff; its section `caching` was \
                 ignored: it only logs advice about the requests it sees, and changes no \
                 traffic.",
                "Settings without a counterpart in holdoff were ignored: `asSystemProxy`.",
                "mocks/devproxyrc.json: neither a Dev Proxy setting holdoff knows nor a \
                 plugin's configSection, so ignored: `colour`.",
            ]
        );
    }

    #[test]
    fn compiles() {
        let compiled = compiled(CASE, &imported(CASE));
        let plan = &compiled.plan;
        assert_eq!(plan.mocks.len(), 4);
        assert!(plan.block_unmocked);
        assert_eq!(plan.mocks[0].nth, Some(2));
        let FaultOutcome::Respond(created) = &plan.mocks[2].response else {
            panic!("a response: {:?}", plan.mocks[2].response);
        };
        assert_eq!(&created.body[..], b"{ \"id\": 101, \"draft\": true }\n");
    }
}

mod yaml_errors_file_and_several_error_plugins {
    use super::*;

    const CASE: &str = "yaml/devproxyrc.json";

    #[test]
    fn keeps_each_plugins_rate_and_wait() {
        let imported = imported(CASE);
        assert_eq!(
            config(&imported),
            json!({
                "urlsToWatch": ["https://graph.microsoft.com/v1.0/*", "https://api.contoso.com/*"],
                "errors": {
                    // The first plugin's retryAfterInSeconds.
                    "dynamicRange": [7, 7],
                    "errors": [
                        {
                            // From errors.yaml: the anchor and the merge key resolved.
                            "request": {"url": "https://graph.microsoft.com/v1.0/me*", "method": "GET"},
                            "rate": 50.0,
                            "responses": [
                                {
                                    "statusCode": 429,
                                    "headers": [{"name": "Retry-After", "value": "@dynamic"}]
                                },
                                {
                                    "statusCode": 429,
                                    "headers": [{"name": "Retry-After", "value": "@dynamic"}],
                                    "body": {
                                        "error": {
                                            "code": "TooManyRequests",
                                            "message": "Too many requests, slow down."
                                        }
                                    }
                                }
                            ]
                        },
                        {
                            "request": {"url": "https://api.contoso.com/orders*", "bodyFragment": "express"},
                            "rate": 20.0,
                            "responses": [
                                {
                                    // The second plugin's retryAfterInSeconds, written out.
                                    "statusCode": 429,
                                    "headers": [{"name": "Retry-After", "value": "@dynamic=3"}]
                                },
                                {"statusCode": 500, "body": "@contoso/oops.txt"}
                            ]
                        }
                    ]
                },
                // Dev Proxy's list order: the error plugins, then the rate limit, so an error
                // answers before the limit counts the request.
                "order": ["errors", "rateLimits"],
                "rateLimits": [{
                    // A plugin without a configSection: all Dev Proxy's defaults.
                    "url": "https://graph.microsoft.com/v1.0/*",
                    "algorithm": "fixed-window-from-first-request",
                    "limit": 120,
                    "windowSeconds": 60,
                    "cost": 2,
                    "scope": "shared",
                    "headers": "draft",
                    "resetFormat": "seconds-left",
                    "warningThresholdPercent": 80
                }]
            })
        );
    }

    #[test]
    fn names_each_plugin_by_its_section() {
        let notes = notes(&imported(CASE));
        assert_eq!(
            notes[0],
            "GenericRandomErrorPlugin `contosoErrors` watches its own URLs \
             (`https://api.contoso.com/*`); holdoff has one watch list, so they were added to \
             urlsToWatch."
        );
        for expected in [
            "GenericRandomErrorPlugin `graphErrors`: Dev Proxy applied its error rules only to \
             `https://graph.microsoft.com/v1.0/*`; holdoff applies them to every watched URL \
             their own `url` matches.",
            "Several error plugins: each rule keeps its plugin's rate. In Dev Proxy a \
             request that one plugin let through could still fail in the next; in holdoff the \
             first rule that matches it decides.",
            "GenericRandomErrorPlugin `graphErrors`: rate is not set, and Dev Proxy's default 50 \
             became the rate of its rules. It is a probability per request: holdoff fails each \
             request a rule matches with a chance of 50 %, so a run shows about that share, not \
             exactly it; Dev Proxy failed 50.5 % (it draws from 1 to 99, so its 99 fails every \
             request).",
            "GenericRandomErrorPlugin `contosoErrors`: rate 20 became the rate of its rules. It \
             is a probability per request: holdoff fails each request a rule matches with a \
             chance of 20 %, so a run shows about that share, not exactly it; Dev Proxy failed \
             20.2 % (it draws from 1 to 99, so its 99 fails every request).",
            NO_RETRY_AFTER_PLUGIN_NOTE,
        ] {
            assert!(
                notes.iter().any(|note| note == expected),
                "no note\n  {expected}\nin\n  {}",
                notes.join("\n  ")
            );
        }
        assert_eq!(notes.len(), 9, "{notes:#?}");
    }

    #[test]
    fn compiles() {
        let compiled = compiled(CASE, &imported(CASE));
        let rates: Vec<f64> = compiled
            .plan
            .errors
            .iter()
            .map(|rule| rule.rate.as_percent())
            .collect();
        assert_eq!(rates, [50.0, 20.0]);
    }
}

mod errors {
    use super::*;

    #[test]
    fn name_a_file_that_cannot_be_read() {
        let errors = errors("nowhere/devproxyrc.json");
        assert_eq!(errors.len(), 1);
        assert_eq!(errors[0].file, "nowhere/devproxyrc.json");
        assert_eq!(errors[0].path, "");
        assert!(
            errors[0].message.starts_with("cannot read the file: "),
            "{}",
            errors[0].message
        );
    }

    #[test]
    fn say_a_file_without_plugins_is_not_dev_proxys() {
        assert_eq!(
            errors("broken/no-plugins/devproxyrc.json"),
            [error(
                "broken/no-plugins/devproxyrc.json",
                "",
                "there is no `plugins` list: a Dev Proxy configuration file names the plugins \
                 it runs there",
                None,
            )]
        );
    }

    #[test]
    fn say_a_mocks_file_named_like_a_configuration_is_a_mocks_file() {
        assert_eq!(
            errors("broken/mocks-as-config/devproxyrc.json"),
            [error(
                "broken/mocks-as-config/devproxyrc.json",
                "",
                "there is no `plugins` list: this is a MockResponsePlugin mocks file, not a \
                 configuration; name it in a MockResponsePlugin's `mocksFile`",
                None,
            )]
        );
    }

    #[test]
    fn give_the_line_and_column_of_bad_json() {
        assert_eq!(
            errors("broken/bad-json/devproxyrc.json"),
            [error(
                "broken/bad-json/errors.json",
                "errors[0]",
                "expected `,` or `}`",
                Some((5, 7)),
            )]
        );
    }

    #[test]
    fn are_all_collected_each_with_its_file_and_key() {
        assert_eq!(
            errors("broken/bad-values/devproxyrc.json"),
            [
                error(
                    "broken/bad-values/devproxyrc.json",
                    "tooOften.rate",
                    "150 is not a percentage: the rate is from 0 (never) to 100 (always)",
                    None,
                ),
                error(
                    "broken/bad-values/errors.json",
                    "errors[0].responses[0].statusCode",
                    "invalid type: string \"429\", expected an HTTP status, a whole number from \
                     100 to 599",
                    Some((5, 41)),
                ),
                error(
                    "broken/bad-values/no-responses.json",
                    "errors[1].responses",
                    "there are no responses: a rule needs at least one to draw from (Dev Proxy \
                     fails on such a rule too); add one, or remove the rule",
                    None,
                ),
                error(
                    "broken/bad-values/devproxyrc.json",
                    "latency.minMs",
                    "the least delay (3000 ms, minMs) is more than the most (1000 ms, maxMs; \
                     Dev Proxy's default is 5000)",
                    None,
                ),
                error(
                    "broken/bad-values/devproxyrc.json",
                    "hourly.resetFormat",
                    "unknown value `Hours`: expected SecondsLeft or UtcEpochSeconds",
                    None,
                ),
                error(
                    "broken/bad-values/mocks.json",
                    "mocks[0].request",
                    "missing key `url`, which is required here",
                    Some((3, 36)),
                ),
                error(
                    "broken/bad-values/devproxyrc.json",
                    "retry",
                    "expected an object: this is the section of RetryAfterPlugin (its \
                     configSection)",
                    None,
                ),
            ]
        );
    }

    #[test]
    fn name_the_section_key_of_a_wrong_type() {
        assert_eq!(
            errors("broken/section-types/devproxyrc.json"),
            [error(
                "broken/section-types/devproxyrc.json",
                "often.rate",
                "invalid type: string \"high\", expected a number",
                None,
            )]
        );
    }

    #[test]
    fn give_the_line_and_column_of_bad_yaml() {
        let errors = errors("broken/bad-yaml/devproxyrc.yaml");
        assert_eq!(errors.len(), 1);
        assert_eq!(errors[0].file, "broken/bad-yaml/devproxyrc.yaml");
        assert_eq!(errors[0].line, Some((4, 4)));
    }
}

/// Data files that are not there: Dev Proxy warns and goes on (a plugin without its file
/// loads no data, a body whose file is missing is sent as its path), and so does the import,
/// with a note for each.
mod missing_files {
    use super::*;

    const CASE: &str = "missing-files/devproxyrc.json";

    #[test]
    fn leave_their_plugin_without_data_with_a_note_naming_the_key() {
        let imported = imported(CASE);
        let notes = notes(&imported);
        let has = |text: &str| notes.iter().any(|note| note.contains(text));
        assert!(
            has(
                "the file missing-files/nowhere/errors.json does not exist: \
                 GenericRandomErrorPlugin `errors` fails no request, as Dev Proxy does"
            ),
            "{notes:#?}"
        );
        assert!(
            has("plugins[2].mocksFile is not set, and Dev Proxy's default \
                 missing-files/mocks.json does not exist: MockResponsePlugin mocks nothing"),
            "{notes:#?}"
        );
        let config = config(&imported);
        assert_eq!(config.get("mocks"), None, "{config:#}");
        // Only the `cats` plugin's rule is left.
        assert_eq!(config["errors"]["errors"].as_array().map(Vec::len), Some(1));
    }

    #[test]
    fn send_a_missing_body_file_as_its_path_and_the_rest_as_files() {
        let imported = imported(CASE);
        let config = config(&imported);
        let bodies: Vec<&Value> = config["errors"]["errors"][0]["responses"]
            .as_array()
            .expect("responses")
            .iter()
            .map(|response| &response["body"])
            .collect();
        assert_eq!(
            bodies,
            [
                &json!("\"@images/404.jpg\""),
                &json!("@cats/images/418.txt"),
                &json!("\"@images/500.jpg\"")
            ]
        );
        let notes = notes(&imported);
        assert!(
            notes.contains(
                &"missing-files/cats/errors.json: 2 bodies name files that do not exist \
                  (`@images/404.jpg` at errors[0].responses[0], and 1 more); Dev Proxy then \
                  sends the path itself as the body, in quotes, and so does holdoff. Create the \
                  file (relative to missing-files/cats/errors.json's folder) to send it instead."
                    .to_owned()
            ),
            "{notes:#?}"
        );
        // What imports, starts: the proxy serves the text and the file alike.
        let compiled = compiled(CASE, &imported);
        let served: Vec<Vec<u8>> = compiled.plan.errors[0]
            .outcomes
            .iter()
            .filter_map(|outcome| match outcome {
                FaultOutcome::Respond(response) => Some(response.body.to_vec()),
                _ => None,
            })
            .collect();
        assert_eq!(
            served,
            [
                b"\"@images/404.jpg\"".to_vec(),
                b"short and stout\n".to_vec(),
                b"\"@images/500.jpg\"".to_vec()
            ]
        );
    }

    #[test]
    fn in_dev_proxys_install_folder_are_a_note_when_dev_proxy_is_not_installed() {
        let imported = imported("install-folder/devproxyrc.json");
        let notes = notes(&imported);
        assert!(
            notes.iter().any(|note| note.contains(
                "installed.mocksFile is `~appFolder/config/mocks.json`, but ~appFolder is the \
                 folder Dev Proxy is installed in, and there is no `devproxy` on PATH here: \
                 MockResponsePlugin mocks nothing"
            )),
            "{notes:#?}"
        );
        assert_eq!(config(&imported).get("mocks"), None);
    }
}

/// Framing headers copied from real responses into errors and mocks files: Dev Proxy sets the
/// framing of what it sends itself, and so does holdoff, so the import leaves them out, says
/// so, and what it imports compiles (what imports, starts).
mod framing_headers {
    use super::*;

    const CASE: &str = "framing/devproxyrc.json";

    #[test]
    fn are_left_out_with_a_note_and_the_import_compiles() {
        let imported = imported(CASE);
        let notes = notes(&imported);
        for (file, count) in [
            (
                "framing/shop-errors.json",
                "1 Content-Length or Transfer-Encoding header",
            ),
            (
                "framing/shop-mocks.json",
                "3 Content-Length and Transfer-Encoding headers",
            ),
        ] {
            let note = format!(
                "{file}: left out {count} of its responses: the proxy sets them from each body \
                 it sends, as Dev Proxy does."
            );
            assert!(notes.contains(&note), "{note:?} not in {notes:#?}");
        }
        let text = config(&imported).to_string().to_ascii_lowercase();
        assert!(!text.contains("content-length"), "{text}");
        assert!(!text.contains("transfer-encoding"), "{text}");
        assert!(text.contains("retry-after"), "{text}");

        let compiled = compiled(CASE, &imported);
        assert_eq!(compiled.plan.errors.len(), 1);
        assert_eq!(compiled.plan.mocks.len(), 2);
    }
}
