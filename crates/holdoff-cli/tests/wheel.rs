//! The `holdoff` wheel (issue 38): built by maturin from this crate and installed into a fresh
//! venv, it puts a working `holdoff` on that venv's PATH, and its pytest plugin (`pytest
//! --holdoff`) runs a real pytest session behind the proxy and fails the one test whose client
//! retried before Retry-After permitted — with the judge's sentence — while its neighbours
//! pass, in one process or under pytest-xdist.
//!
//! The clients are requests with urllib3's `Retry` (which honours the hint) and requests
//! called twice in a row (which does not), against loopback upstreams that throttle by
//! themselves; the proxy injects no faults of its own (`--holdoff-failure-rate 0`) but where a
//! config says. scripts/test installs maturin and the Python packages under
//! `target/py-wheel` (see `wheel/venv.rs`).

mod support;

#[allow(dead_code)]
#[path = "real_clients/upstream.rs"]
mod upstream;
#[path = "wheel/venv.rs"]
mod venv;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use holdoff_testkit::{Reply, TestServer};
use support::{TempDir, runtime, show};
use tokio::runtime::Runtime;
use upstream::{Scheme, Upstream};

/// The sessions' fixtures, and their test modules.
const CONFTEST: &str = include_str!("wheel/conftest.py");
const HONOURS: &str = include_str!("wheel/test_honours.py");
const ONE_EARLY: &str = include_str!("wheel/test_one_early.py");
const TWO_WORKERS: &str = include_str!("wheel/test_two_workers.py");

/// A plain HTTP upstream on loopback whose `paths` each answer their first request `429` with
/// `Retry-After: 1`, and `200 done` after.
struct Throttling {
    server: TestServer,
    _runtime: Runtime,
}

impl Throttling {
    fn start(paths: &[&str]) -> Throttling {
        let runtime = runtime();
        let server = runtime.block_on(TestServer::start());
        for path in paths {
            server.script(path, [Reply::too_many_requests("1")]);
            server.set_default(path, Reply::ok("done"));
        }
        Throttling {
            server,
            _runtime: runtime,
        }
    }

    /// `http://127.0.0.1:PORT`, for the tests to add their paths to.
    fn url(&self) -> String {
        format!("http://{}", self.server.addr())
    }
}

/// `venv`'s `bin/` first on a PATH that has no other holdoff (no cargo folders).
fn path_of(venv: &Path) -> String {
    format!(
        "{}:/usr/local/bin:/usr/bin:/bin",
        venv.join("bin").display()
    )
}

/// `command` with the environment a user of the venv has: its `bin/` on PATH, and none of the
/// variables holdoff or a proxy would set already.
fn as_a_user<'a>(command: &'a mut Command, venv: &Path) -> &'a mut Command {
    command.env("PATH", path_of(venv)).stdin(Stdio::null());
    for var in [
        "HOLDOFF_BIN",
        "HOLDOFF_CONTROL_URL",
        "HOLDOFF_PROXY_URL",
        "HTTP_PROXY",
        "HTTPS_PROXY",
        "ALL_PROXY",
        "http_proxy",
        "https_proxy",
        "all_proxy",
        "NO_PROXY",
        "no_proxy",
        "SSL_CERT_FILE",
        "REQUESTS_CA_BUNDLE",
        "CURL_CA_BUNDLE",
        "PYTEST_ADDOPTS",
    ] {
        command.env_remove(var);
    }
    command
}

/// A pytest session in a fresh directory holding the conftest and `module` (its name and
/// text): `venv/bin/pytest --holdoff ARGS`, with `env` set.
fn pytest(venv: &Path, module: (&str, &str), env: &[(&str, String)], args: &[&str]) -> Output {
    let dir = TempDir::new("wheel-pytest");
    dir.write("conftest.py", CONFTEST);
    dir.write(&format!("{}.py", module.0), module.1);
    let mut command = Command::new(venv.join("bin/pytest"));
    as_a_user(&mut command, venv)
        .args(["-p", "no:cacheprovider", "--holdoff"])
        .args(args)
        .envs(env.iter().map(|(name, value)| (name, value)))
        .current_dir(dir.path());
    command.output().expect("run pytest")
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// The failure section pytest prints for `test`: from its `___ test ___` heading to the next
/// heading.
fn failure_of(out: &str, test: &str) -> String {
    let heading = format!(" {test} _");
    let start = out
        .find(&heading)
        .unwrap_or_else(|| panic!("no failure section for {test}:\n{out}"));
    let rest = &out[start + heading.len()..];
    let rest = rest.trim_start_matches('_');
    let end = rest
        .find("\n____")
        .or_else(|| rest.find("\n===="))
        .unwrap_or(rest.len());
    rest[..end].to_owned()
}

#[test]
fn a_fresh_venv_gets_a_holdoff_that_runs_python_requests_through_the_proxy() {
    let venv = venv::venv();
    let holdoff = venv.join("bin/holdoff");

    let version = as_a_user(&mut Command::new(&holdoff), &venv)
        .arg("--version")
        .output()
        .expect("run holdoff --version");
    assert!(version.status.success(), "{}", show(&version));
    assert_eq!(
        stdout(&version).trim(),
        format!("holdoff {}", env!("CARGO_PKG_VERSION"))
    );

    // `holdoff` alone, as PATH finds it: the venv's.
    let upstream = Throttling::start(&["/v1/items"]);
    let client = "import sys, requests\n\
                  from requests.adapters import HTTPAdapter\n\
                  from urllib3.util.retry import Retry\n\
                  session = requests.Session()\n\
                  retry = Retry(total=3, status_forcelist=[429], respect_retry_after_header=True)\n\
                  session.mount('http://', HTTPAdapter(max_retries=retry))\n\
                  response = session.get(sys.argv[1], timeout=30)\n\
                  print(response.status_code, response.text)\n";
    let run = as_a_user(&mut Command::new("holdoff"), &venv)
        .args([
            "run",
            "--log-level",
            "warn",
            "-f",
            "0",
            "--",
            "python",
            "-c",
            client,
        ])
        .arg(upstream.server.url("/v1/items"))
        .output()
        .expect("run holdoff run");
    assert_eq!(run.status.code(), Some(0), "{}", show(&run));
    assert_eq!(stdout(&run).trim(), "200 done", "{}", show(&run));
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(stderr.contains("holdoff: PASS"), "{}", show(&run));
    assert!(
        stderr.contains("holdoff judge: 0 premature and 1 compliant"),
        "{}",
        show(&run)
    );
    assert_eq!(upstream.server.requests_to("/v1/items").len(), 2);
}

#[test]
fn a_session_whose_clients_honour_the_hints_passes_over_http_and_https() {
    let venv = venv::venv();
    let plain = Throttling::start(&["/a"]);
    let tls = Upstream::start(Scheme::Https, |_| vec![("retry-after", "1".to_owned())]);
    let dir = TempDir::new("wheel-config");
    // The proxy's own fault, from a config file: the first HTTPS request to /api gets 429.
    let config = dir.write(
        "holdoff.json",
        &support::first_request_throttled("https", 1),
    );
    let ca = tls
        .ca()
        .expect("an HTTPS upstream's CA")
        .display()
        .to_string();
    let output = pytest(
        &venv,
        ("test_honours", HONOURS),
        &[
            ("UPSTREAM", plain.url()),
            ("UPSTREAM_TLS", tls.url("")),
            // holdoff trusts the upstream's CA through it, and puts it in the bundle the
            // session is given, beside its own.
            ("SSL_CERT_FILE", ca),
        ],
        &["--holdoff-config", &config],
    );
    let out = stdout(&output);
    assert_eq!(output.status.code(), Some(0), "{}", show(&output));
    assert!(out.contains("2 passed"), "{out}");
    assert!(out.contains("holdoff: PASS"), "{out}");
    assert!(
        out.contains("holdoff judge: 0 premature and 3 compliant"),
        "{out}"
    );
    assert_eq!(plain.server.requests_to("/a").len(), 2, "{out}");
    // The upstream saw its own throttled request and the retry: the mock's answered the first.
    assert_eq!(tls.requests(), 2, "{out}");
}

#[test]
fn the_test_that_retried_at_once_fails_with_the_judges_sentence_and_its_neighbours_pass() {
    let venv = venv::venv();
    let upstream = Throttling::start(&["/before", "/early", "/after"]);
    let output = pytest(
        &venv,
        ("test_one_early", ONE_EARLY),
        &[("UPSTREAM", upstream.url())],
        &["--holdoff-failure-rate", "0", "-rA"],
    );
    let out = stdout(&output);
    assert_eq!(output.status.code(), Some(1), "{}", show(&output));
    assert!(out.contains("1 failed, 2 passed"), "{out}");
    assert!(
        out.contains("PASSED test_one_early.py::test_waits_before"),
        "{out}"
    );
    assert!(
        out.contains("PASSED test_one_early.py::test_waits_after"),
        "{out}"
    );
    assert!(
        out.contains("FAILED test_one_early.py::test_retries_at_once"),
        "{out}"
    );
    let failure = failure_of(&out, "test_retries_at_once");
    let early = upstream.server.url("/early");
    assert!(
        failure.contains(&format!("GET {early}: retried ")),
        "{failure}"
    );
    assert!(failure.contains("after a 429"), "{failure}");
    assert!(failure.contains("`Retry-After: 1`"), "{failure}");
    assert!(
        failure.contains("; client pid "),
        "the client is the test's own process: {failure}"
    );
    // The session's summary: holdoff's headline.
    assert!(out.contains("holdoff: FAIL: 1 premature retry"), "{out}");
    // The premature retry never reached the upstream.
    assert_eq!(upstream.server.requests_to("/early").len(), 1);
}

#[test]
fn under_xdist_each_workers_early_retry_fails_its_own_test() {
    let venv = venv::venv();
    let upstream = Throttling::start(&["/a", "/b", "/c", "/d"]);
    let output = pytest(
        &venv,
        ("test_two_workers", TWO_WORKERS),
        &[("UPSTREAM", upstream.url())],
        &["--holdoff-failure-rate", "0", "-n", "2", "-rA"],
    );
    let out = stdout(&output);
    assert_eq!(output.status.code(), Some(1), "{}", show(&output));
    assert!(out.contains("2 workers [4 items]"), "{out}");
    assert!(out.contains("2 failed, 2 passed"), "{out}");
    for (test, path, other) in [
        ("test_b_retries_at_once", "/b", "/d"),
        ("test_d_retries_at_once", "/d", "/b"),
    ] {
        assert!(
            out.contains(&format!("FAILED test_two_workers.py::{test}")),
            "{out}"
        );
        let failure = failure_of(&out, test);
        let own = upstream.server.url(path);
        assert!(
            failure.contains(&format!("GET {own}: retried ")),
            "{failure}"
        );
        assert!(
            !failure.contains(&upstream.server.url(other)),
            "another test's retry: {failure}"
        );
    }
    for test in ["test_a_waits", "test_c_waits"] {
        assert!(
            out.contains(&format!("PASSED test_two_workers.py::{test}")),
            "{out}"
        );
    }
    assert!(out.contains("holdoff: FAIL: 2 premature retries"), "{out}");
}

#[test]
fn a_holdoff_bin_that_is_not_a_binary_is_a_usage_error_that_says_so() {
    let venv = venv::venv();
    let dir = TempDir::new("wheel-bin");
    let mut command = Command::new(venv.join("bin/pytest"));
    let output = as_a_user(&mut command, &venv)
        .args(["-p", "no:cacheprovider", "--holdoff"])
        .env("HOLDOFF_BIN", "/nonexistent/holdoff")
        .current_dir(dir.path())
        .output()
        .expect("run pytest");
    assert_eq!(output.status.code(), Some(4), "{}", show(&output));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains(
            "HOLDOFF_BIN=/nonexistent/holdoff is not an executable file: point it at a holdoff \
             binary"
        ),
        "{}",
        show(&output)
    );
}

/// Where the plugin finds the wheel's binary without PATH: the scripts folder of its venv.
#[test]
fn the_plugin_finds_the_wheels_binary_beside_its_package() {
    let venv = venv::venv();
    let output = Command::new(venv.join("bin/python"))
        .args([
            "-c",
            "import holdoff_pytest; print(holdoff_pytest.find_holdoff())",
        ])
        .env("PATH", "/usr/bin:/bin")
        .env_remove("HOLDOFF_BIN")
        .output()
        .expect("run python");
    assert!(output.status.success(), "{}", show(&output));
    let found = PathBuf::from(stdout(&output).trim());
    assert_eq!(
        found.canonicalize().ok(),
        venv.join("bin/holdoff").canonicalize().ok()
    );
}
