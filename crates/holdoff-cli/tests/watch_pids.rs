//! `--watch-pids` and `--watch-process-names` (Linux): only the watched process tree's
//! requests meet the faults; every other client passes through untouched. Two curls through
//! one proxy whose config throttles the first request to /api.
#![cfg(target_os = "linux")]

mod support;

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, Command, Stdio};

use holdoff_testkit::TestServer;
use support::{Proxy, TempDir, curl, first_request_throttled, runtime};

/// Every URL the tests send to: the process filter alone decides.
const WATCHED: &str = "http://127.0.0.1:*/*";

/// A shell that prints its pid, then waits for the proxy's URL on its input before it runs
/// curl (as its child) through it: the pid is known, and given to the proxy, before curl
/// exists, so there is no race.
fn waiting_curl(url: &str) -> (Child, u32) {
    let mut child = Command::new("sh")
        .args([
            "-c",
            "echo $$; read proxy; curl -s -o /dev/null -w '%{http_code}' -x \"$proxy\" \"$1\"",
            "sh",
            url,
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("start sh");
    let mut line = String::new();
    BufReader::new(child.stdout.as_mut().expect("piped"))
        .read_line(&mut line)
        .expect("read the pid");
    let pid = line.trim().parse().expect("a pid");
    (child, pid)
}

/// Lets the waiting shell run its curl through `proxy`; the status curl printed.
fn go(mut child: Child, proxy: &str) -> String {
    let mut stdin = child.stdin.take().expect("piped");
    writeln!(stdin, "{proxy}").expect("write to sh");
    drop(stdin);
    let mut status = String::new();
    child
        .stdout
        .take()
        .expect("piped")
        .read_to_string(&mut status)
        .expect("read curl's status");
    assert!(child.wait().expect("wait for sh").success());
    status
}

#[test]
fn only_the_watched_process_tree_is_throttled() {
    let rt = runtime();
    let upstream = rt.block_on(TestServer::start());
    let dir = TempDir::new("watch-pids");
    dir.write("holdoff.json", &first_request_throttled("http", 5));
    let url = upstream.url("/api");

    let (watched, pid) = waiting_curl(&url);
    let proxy = Proxy::start_in(
        Some(dir.path()),
        &["-u", WATCHED, "--watch-pids", &pid.to_string()],
    );
    // Not watched: the mock that answers the first request to /api never sees it.
    assert_eq!(curl(proxy.addr, &[], &url), "200");
    assert_eq!(upstream.requests_to("/api").len(), 1);
    // The watched shell's curl is that first request.
    assert_eq!(go(watched, &proxy.url()), "429");
    assert_eq!(
        upstream.requests_to("/api").len(),
        1,
        "the mock answered it"
    );
    let stderr = proxy.stop();
    assert!(stderr.contains("1 mocked"), "{stderr}");
}

#[test]
fn by_name_the_same() {
    let rt = runtime();
    let upstream = rt.block_on(TestServer::start());
    let dir = TempDir::new("watch-names");
    dir.write("holdoff.json", &first_request_throttled("http", 5));
    let url = upstream.url("/api");

    let proxy = Proxy::start_in(
        Some(dir.path()),
        &["-u", WATCHED, "--watch-process-names", "wget"],
    );
    assert_eq!(curl(proxy.addr, &[], &url), "200", "curl is not wget");
    drop(proxy);

    let proxy = Proxy::start_in(
        Some(dir.path()),
        &["-u", WATCHED, "--watch-process-names", "wget", "curl"],
    );
    assert_eq!(curl(proxy.addr, &[], &url), "429");
    drop(proxy);
}
