//! `holdoff proxy`, run as a built binary on a free loopback port: the line on stdout, the log
//! on stderr (text and JSON), the summary and exit status after SIGTERM, and the refusals.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::{Child, ChildStdout, Command, Output, Stdio};

use serde_json::Value;

/// A running `holdoff proxy`.
struct Running {
    child: Child,
    addr: SocketAddr,
    /// The rest of stdout, to check that nothing else was printed.
    stdout: BufReader<ChildStdout>,
}

impl Running {
    /// Starts `holdoff proxy --port 0 ARGS` and reads the line that says where it listens.
    fn start(args: &[&str]) -> Running {
        let mut child = Command::new(assert_cmd::cargo::cargo_bin("holdoff"))
            .arg("proxy")
            .args(["--port", "0"])
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start holdoff proxy");
        let mut stdout = BufReader::new(child.stdout.take().expect("stdout is piped"));
        let mut line = String::new();
        stdout.read_line(&mut line).expect("read stdout");
        let addr = line
            .strip_prefix("listening on http://")
            .and_then(|rest| rest.trim_end().parse().ok())
            .unwrap_or_else(|| panic!("unexpected first line {line:?}"));
        Running {
            child,
            addr,
            stdout,
        }
    }

    /// Sends SIGTERM and waits for the exit; returns what it wrote after the first line.
    fn terminate(mut self) -> (Output, String) {
        let status = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .expect("run kill");
        assert!(status.success());
        let mut rest = String::new();
        self.stdout.read_to_string(&mut rest).expect("read stdout");
        let output = self.child.wait_with_output().expect("wait for holdoff");
        (output, rest)
    }
}

/// Sends raw bytes and reads the whole answer.
fn exchange(addr: SocketAddr, request: &str) -> String {
    let mut stream = TcpStream::connect(addr).expect("connect to the proxy");
    stream.write_all(request.as_bytes()).expect("send");
    let mut answer = String::new();
    stream.read_to_string(&mut answer).expect("receive");
    answer
}

/// A request to a port nothing listens on: the proxy answers 502 itself.
const TO_CLOSED_PORT: &str =
    "GET http://127.0.0.1:1/x HTTP/1.1\r\nhost: 127.0.0.1:1\r\nconnection: close\r\n\r\n";

fn holdoff(args: &[&str]) -> Output {
    Command::new(assert_cmd::cargo::cargo_bin("holdoff"))
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("run holdoff")
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

mod running {
    use super::*;

    #[test]
    fn logs_each_request_and_summarises_after_sigterm() {
        let proxy = Running::start(&[]);
        let answer = exchange(proxy.addr, TO_CLOSED_PORT);
        assert!(answer.starts_with("HTTP/1.1 502"), "{answer}");
        assert!(answer.contains("could not connect"), "{answer}");
        let origin_form = exchange(
            proxy.addr,
            "GET / HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n",
        );
        assert!(origin_form.starts_with("HTTP/1.1 400"), "{origin_form}");

        let (output, rest) = proxy.terminate();
        assert_eq!(output.status.code(), Some(0));
        assert_eq!(rest, "", "stdout has only the listening line");
        let log = stderr(&output);
        assert!(log.contains("url=http://127.0.0.1:1/x status=502"), "{log}");
        // The test is the client: its process, found from the loopback socket.
        let client = "mode=forward client=process:";
        assert!(log.contains(client), "{log}");
        assert!(log.contains(&format!("[{}]", std::process::id())), "{log}");
        let summary = log
            .lines()
            .find(|line| line.starts_with("holdoff proxy: "))
            .unwrap_or_default();
        assert!(
            summary.starts_with("holdoff proxy: 2 requests in ")
                && summary.contains("(1 4xx, 1 5xx)")
                && summary.contains("2 errors"),
            "{summary}"
        );
    }

    #[test]
    fn writes_json_lines_with_json_output() {
        let proxy = Running::start(&["--output", "json"]);
        exchange(proxy.addr, TO_CLOSED_PORT);
        let (output, _) = proxy.terminate();
        assert_eq!(output.status.code(), Some(0));
        let lines: Vec<Value> = stderr(&output)
            .lines()
            .map(|line| serde_json::from_str(line).unwrap_or_else(|_| panic!("not JSON: {line}")))
            .collect();
        let request = lines
            .iter()
            .find(|line| line["target"] == "holdoff::request")
            .expect("a request line");
        assert_eq!(request["method"], "GET");
        assert_eq!(request["status"], 502);
        assert_eq!(request["mode"], "forward");
        assert!(request["duration_ms"].is_number());
        let summary = lines
            .iter()
            .find(|line| line["target"] == "holdoff::summary")
            .expect("a summary line");
        assert_eq!(summary["requests"], 1);
        assert_eq!(summary["status_5xx"], 1);
    }

    #[test]
    fn names_the_ca_certificate_first_when_intercepting() {
        let dir = std::env::temp_dir().join(format!("holdoff-cli-proxy-ca-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let dir_arg = dir.to_string_lossy().into_owned();
        let proxy = Running::start(&["--ca-dir", &dir_arg, "-u", "https://api.example.com/*"]);
        let (output, _) = proxy.terminate();
        assert_eq!(output.status.code(), Some(0));
        let cert = dir.join("ca-cert.pem");
        assert!(cert.exists(), "the CA was created");
        let log = stderr(&output);
        let first = log.lines().next().unwrap_or_default();
        assert!(first.contains(&*cert.to_string_lossy()), "{first}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn makes_no_ca_when_only_plain_http_is_watched() {
        let dir = holdoff_testkit::TempDir::new("proxy-http-only");
        let ca_dir = dir.path().join("ca");
        let ca_arg = ca_dir.to_string_lossy().into_owned();
        let proxy = Running::start(&[
            "--ca-dir",
            &ca_arg,
            "-u",
            "http://api.example.invalid/*",
            "-u",
            "http://127.0.0.1:*/*",
        ]);
        let (output, _) = proxy.terminate();
        assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
        assert!(!ca_dir.exists(), "a CA was made for plain HTTP: {ca_dir:?}");
        let log = stderr(&output);
        assert!(log.contains("none of them HTTPS"), "{log}");
        assert!(!log.contains("trust the CA"), "{log}");
    }
}

mod refusals {
    use super::*;

    #[test]
    fn refuses_an_open_address_without_proxy_auth_with_exit_2() {
        let output = holdoff(&["proxy", "--port", "0", "--ip-address", "0.0.0.0"]);
        assert_eq!(output.status.code(), Some(2));
        let message = stderr(&output);
        assert!(
            message.contains(
                "refusing to listen on 0.0.0.0 without --proxy-auth: anyone on the network \
                 could use this proxy"
            ),
            "{message}"
        );
        assert!(output.stdout.is_empty());
    }

    #[test]
    fn says_which_port_is_taken_with_exit_1() {
        let taken = TcpListener::bind("127.0.0.1:0").expect("bind a port");
        let port = taken.local_addr().expect("its address").port().to_string();
        let output = holdoff(&["proxy", "--port", &port]);
        assert_eq!(output.status.code(), Some(1));
        let message = stderr(&output);
        assert!(
            message.contains(&format!("port {port} is in use")),
            "{message}"
        );
        assert!(message.contains("--port 0"), "{message}");
    }

    #[test]
    fn rejects_a_bad_upstream_with_exit_2() {
        let output = holdoff(&["proxy", "--upstream", "localhost:3000"]);
        assert_eq!(output.status.code(), Some(2));
        assert!(stderr(&output).contains("expected a URL such as http://127.0.0.1:3000"));
    }

    #[test]
    fn rejects_a_bad_log_level_with_exit_2() {
        let output = holdoff(&["proxy", "--port", "0", "--log-level", "loud=very"]);
        assert_eq!(output.status.code(), Some(2));
        assert!(
            stderr(&output).contains("invalid --log-level"),
            "{}",
            stderr(&output)
        );
    }
}
