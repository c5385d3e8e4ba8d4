//! `@file` bodies: read from under the configuration's folder (unless `bodyFilesAnywhere`),
//! regular files only, at most 16 MiB, each refusal naming the key path and what to do.

use std::fs;
use std::path::{Component, Path};
use std::sync::mpsc;
use std::time::Duration;

use holdoff_config::compile::{
    Compiled, ConfigProblems, MAX_DATA_FILE_BYTES, compile, load_and_compile,
};
use holdoff_config::devproxy;
use holdoff_proxy::fault::FaultOutcome;
use holdoff_testkit::TempDir;

/// The key path of the body in [`config_with_body`].
const BODY: &str = "errors.errors[0].responses[0].body";

/// A configuration with one error rule whose response's body is `body`.
fn config_with_body(body: &str, anywhere: bool) -> String {
    let anywhere = if anywhere {
        r#""bodyFilesAnywhere": true, "#
    } else {
        ""
    };
    let body = serde_json::to_string(body).expect("a string serializes");
    format!(
        r#"{{{anywhere}"errors": {{"errors": [{{"request": {{"url": "*"}},
            "responses": [{{"statusCode": 500, "body": {body}}}]}}]}}}}"#
    )
}

/// Writes `text` as `holdoff.json` in `dir` and compiles it as `holdoff proxy -c` does, in a
/// thread of its own: a read that blocks fails the test rather than hanging it.
fn load(dir: &Path, text: &str) -> Result<Compiled, ConfigProblems> {
    let path = dir.join("holdoff.json");
    fs::write(&path, text).expect("write the config");
    let (sent, received) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = sent.send(load_and_compile(&path));
    });
    received
        .recv_timeout(Duration::from_secs(10))
        .expect("compiling the config does not block")
}

fn body_of(compiled: &Compiled) -> &[u8] {
    match &compiled.plan.errors[0].outcomes[0] {
        FaultOutcome::Respond(response) => &response.body,
        other => panic!("a response, not {other:?}"),
    }
}

/// The one error, with the config's folder written `DIR` (and the other folder `OUTSIDE`).
fn refusal(result: Result<Compiled, ConfigProblems>, dirs: &[(&TempDir, &str)]) -> String {
    let errors = match result {
        Ok(compiled) => panic!("compiled, with a body of {:?}", body_of(&compiled)),
        Err(errors) => errors,
    };
    assert_eq!(errors.0.len(), 1, "{errors}");
    let error = &errors.0[0];
    assert_eq!(error.path, BODY, "{errors}");
    let mut text = error.to_string();
    for (dir, name) in dirs {
        let canonical = fs::canonicalize(dir.path()).expect("a temporary folder resolves");
        text = text
            .replace(&canonical.display().to_string(), name)
            .replace(&dir.path().display().to_string(), name);
    }
    text
}

fn folder() -> TempDir {
    TempDir::new("body-files")
}

#[test]
fn a_relative_file_under_the_config_is_served() {
    let dir = folder();
    fs::create_dir(dir.path().join("bodies")).unwrap();
    fs::write(dir.path().join("bodies/oops.json"), "{\"error\": 1}\n").unwrap();
    let compiled = load(dir.path(), &config_with_body("@bodies/oops.json", false)).unwrap();
    assert_eq!(body_of(&compiled), b"{\"error\": 1}\n");
}

#[test]
fn an_errors_file_in_a_subfolder_may_name_a_body_beside_the_config() {
    let dir = folder();
    fs::write(dir.path().join("body.txt"), "shared\n").unwrap();
    fs::create_dir(dir.path().join("rules")).unwrap();
    fs::write(
        dir.path().join("rules/errors.json"),
        r#"{"errors": [{"request": {"url": "*"},
            "responses": [{"statusCode": 503, "body": "@../body.txt"}]}]}"#,
    )
    .unwrap();
    let compiled = load(dir.path(), r#"{"errors": {"file": "rules/errors.json"}}"#).unwrap();
    assert_eq!(body_of(&compiled), b"shared\n");
}

#[test]
fn a_relative_path_out_of_the_folder_is_refused() {
    let dir = folder();
    // As many `..` as it takes to reach `/` from the folder, then `etc/passwd`.
    let depth = fs::canonicalize(dir.path())
        .unwrap()
        .components()
        .filter(|part| matches!(part, Component::Normal(_)))
        .count();
    let body = format!("@{}etc/passwd", "../".repeat(depth));
    let text = refusal(
        load(dir.path(), &config_with_body(&body, false)),
        &[(&dir, "DIR")],
    );
    assert_eq!(
        text,
        format!(
            "DIR/holdoff.json: {BODY}: the body file DIR/{} resolves to /etc/passwd, which is \
             outside the configuration's folder DIR: body files are read only from under it \
             (after symbolic links are followed); copy the file there, or set \
             \"bodyFilesAnywhere\": true at the top of the configuration to allow any folder",
            &body[1..]
        )
    );
}

#[test]
fn an_absolute_path_outside_is_refused() {
    let dir = folder();
    let outside = folder();
    fs::write(outside.path().join("body.txt"), "outside\n").unwrap();
    let outside = fs::canonicalize(outside.path()).unwrap();
    let body = format!("@{}", outside.join("body.txt").display());
    let text = refusal(
        load(dir.path(), &config_with_body(&body, false)),
        &[(&dir, "DIR")],
    );
    assert_eq!(
        text.replace(&outside.display().to_string(), "OUTSIDE"),
        format!(
            "DIR/holdoff.json: {BODY}: the body file OUTSIDE/body.txt is outside the \
             configuration's folder DIR: body files are read only from under it (after \
             symbolic links are followed); copy the file there, or set \
             \"bodyFilesAnywhere\": true at the top of the configuration to allow any folder"
        )
    );
    let text = refusal(
        load(dir.path(), &config_with_body("@/proc/self/environ", false)),
        &[(&dir, "DIR")],
    );
    assert!(
        text.contains("the body file /proc/self/environ resolves to /proc/"),
        "{text}"
    );
}

#[cfg(unix)]
#[test]
fn a_symbolic_link_out_of_the_folder_is_refused() {
    let dir = folder();
    let outside = folder();
    fs::write(outside.path().join("secret.txt"), "secret\n").unwrap();
    std::os::unix::fs::symlink(
        outside.path().join("secret.txt"),
        dir.path().join("body.txt"),
    )
    .unwrap();
    let text = refusal(
        load(dir.path(), &config_with_body("@body.txt", false)),
        &[(&dir, "DIR"), (&outside, "OUTSIDE")],
    );
    assert!(
        text.contains(
            "the body file DIR/body.txt resolves to OUTSIDE/secret.txt, which is outside the \
             configuration's folder DIR"
        ),
        "{text}"
    );
}

#[cfg(unix)]
#[test]
fn a_symbolic_link_within_the_folder_is_served() {
    let dir = folder();
    fs::create_dir(dir.path().join("real")).unwrap();
    fs::write(dir.path().join("real/body.txt"), "inside\n").unwrap();
    std::os::unix::fs::symlink("real/body.txt", dir.path().join("body.txt")).unwrap();
    let compiled = load(dir.path(), &config_with_body("@body.txt", false)).unwrap();
    assert_eq!(body_of(&compiled), b"inside\n");
}

#[test]
fn bodies_anywhere_allows_a_file_outside() {
    let dir = folder();
    let outside = folder();
    let file = outside.path().join("shared.txt");
    fs::write(&file, "from elsewhere\n").unwrap();
    let body = format!("@{}", file.display());
    let compiled = load(dir.path(), &config_with_body(&body, true)).unwrap();
    assert_eq!(body_of(&compiled), b"from elsewhere\n");
}

#[cfg(unix)]
#[test]
fn a_named_pipe_is_refused_without_blocking() {
    let dir = folder();
    let fifo = dir.path().join("body.json");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .expect("run mkfifo");
    assert!(made.success());
    // Refused under the folder, and with bodyFilesAnywhere too: a pipe is never a body.
    for anywhere in [false, true] {
        let text = refusal(
            load(dir.path(), &config_with_body("@body.json", anywhere)),
            &[(&dir, "DIR")],
        );
        assert_eq!(
            text,
            format!(
                "DIR/holdoff.json: {BODY}: the body file DIR/body.json is a named pipe (FIFO), \
                 not a regular file: name a regular file"
            )
        );
    }
}

#[cfg(unix)]
#[test]
fn a_device_is_refused_even_anywhere() {
    let dir = folder();
    let text = refusal(
        load(dir.path(), &config_with_body("@/dev/zero", true)),
        &[(&dir, "DIR")],
    );
    assert!(
        text.ends_with(
            "the body file /dev/zero is a device, not a regular file: name a regular file"
        ),
        "{text}"
    );
}

#[test]
fn a_directory_is_refused() {
    let dir = folder();
    fs::create_dir(dir.path().join("bodies")).unwrap();
    let text = refusal(
        load(dir.path(), &config_with_body("@bodies", false)),
        &[(&dir, "DIR")],
    );
    assert!(text.ends_with("is a directory, not a regular file: name a regular file"));
}

#[test]
fn a_file_over_16_mib_is_refused_and_one_at_the_limit_served() {
    let dir = folder();
    // Sparse: nothing is written to disk.
    let at_limit = fs::File::create(dir.path().join("limit.bin")).unwrap();
    at_limit.set_len(MAX_DATA_FILE_BYTES).unwrap();
    let over = fs::File::create(dir.path().join("over.bin")).unwrap();
    over.set_len(MAX_DATA_FILE_BYTES + 1).unwrap();

    let compiled = load(dir.path(), &config_with_body("@limit.bin", false)).unwrap();
    assert_eq!(body_of(&compiled).len() as u64, MAX_DATA_FILE_BYTES);
    let text = refusal(
        load(dir.path(), &config_with_body("@over.bin", false)),
        &[(&dir, "DIR")],
    );
    assert_eq!(
        text,
        format!(
            "DIR/holdoff.json: {BODY}: the body file DIR/over.bin is larger than 16 MiB, the \
             most holdoff reads from one: make it smaller"
        )
    );
}

#[test]
fn a_missing_file_says_it_cannot_be_read() {
    let dir = folder();
    let text = refusal(
        load(dir.path(), &config_with_body("@nowhere.json", false)),
        &[(&dir, "DIR")],
    );
    assert!(
        text.ends_with(
            "cannot read the body file DIR/nowhere.json: No such file or directory (os error 2)"
        ),
        "{text}"
    );
}

mod devproxy_imports {
    use super::*;

    /// A Dev Proxy configuration in `dir` whose errors file, `errors/errors.json`, has one
    /// response with `body`.
    fn devproxy(dir: &Path, body: &str) -> Result<Compiled, ConfigProblems> {
        fs::create_dir_all(dir.join("errors")).expect("make the errors folder");
        fs::write(
            dir.join("devproxyrc.json"),
            r#"{"plugins": [{"name": "GenericRandomErrorPlugin", "enabled": true,
                "pluginPath": "~appFolder/plugins/DevProxy.Plugins.dll",
                "configSection": "errors"}],
                "urlsToWatch": ["https://api.example.com/*"],
                "errors": {"errorsFile": "errors/errors.json", "rate": 100}}"#,
        )
        .expect("write a Dev Proxy file");
        let body = serde_json::to_string(body).expect("a string serializes");
        fs::write(
            dir.join("errors/errors.json"),
            format!(
                r#"{{"errors": [{{"request": {{"url": "https://api.example.com/*"}},
                    "responses": [{{"statusCode": 500, "body": {body}}}]}}]}}"#
            ),
        )
        .expect("write a Dev Proxy file");
        let path = dir.join("devproxyrc.json");
        let imported = devproxy::import(&path)?;
        // As `holdoff proxy --devproxy-config` compiles it.
        compile(&imported.config, &path.display().to_string(), dir)
    }

    #[test]
    fn a_body_beside_the_errors_file_is_served() {
        let dir = folder();
        fs::create_dir(dir.path().join("errors")).unwrap();
        fs::write(dir.path().join("errors/oops.txt"), "oops\n").unwrap();
        let compiled = devproxy(dir.path(), "@oops.txt").unwrap();
        assert_eq!(body_of(&compiled), b"oops\n");
    }

    #[test]
    fn a_body_out_of_the_devproxy_folder_is_refused() {
        let dir = folder();
        let errors = devproxy(dir.path(), "@/etc/passwd").unwrap_err();
        assert_eq!(errors.0.len(), 1, "{errors}");
        let message = &errors.0[0].message;
        assert!(
            message.contains("outside the configuration's folder"),
            "{message}"
        );
    }
}
