//! What the tests against a real `redis-server` share: counting the commands it served, and
//! hanging it with `SIGSTOP`.

// Each test file uses its own part of this module.
#![allow(dead_code)]

use std::process::Command;

use holdoff_testkit::redis::{RedisServer, inspect};

/// Calls clients made of each command in `names`, as Redis counts them (`INFO
/// commandstats`). Commands a script runs inside are counted under their own names (`SET`,
/// `PEXPIREAT`), which these are not.
pub(crate) async fn calls(redis: &RedisServer, names: &[&str]) -> Vec<u64> {
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query_async(&mut inspect(redis).await)
        .await
        .expect("INFO");
    names
        .iter()
        .map(|wanted| {
            info.lines()
                .find_map(|line| {
                    let (name, stats) = line.strip_prefix("cmdstat_")?.split_once(':')?;
                    (name == *wanted).then_some(())?;
                    stats
                        .split(',')
                        .find_map(|f| f.strip_prefix("calls="))?
                        .parse()
                        .ok()
                })
                .unwrap_or(0)
        })
        .collect()
}

/// A `redis-server` stopped with `SIGSTOP`, as a hung one: it keeps its connections and
/// accepts new ones (the kernel does), and answers nothing until [`Stopped::resume`] (or the
/// value is dropped) sends `SIGCONT`. What clients send meanwhile waits in its sockets and is
/// served, and counted, once it resumes.
#[must_use = "the server resumes when this is dropped"]
pub(crate) struct Stopped {
    pid: String,
    resumed: bool,
}

impl Stopped {
    /// Stops `redis` (its process id read from `INFO server`).
    pub(crate) async fn stop(redis: &RedisServer) -> Stopped {
        let info: String = redis::cmd("INFO")
            .arg("server")
            .query_async(&mut inspect(redis).await)
            .await
            .expect("INFO server");
        let pid = info
            .lines()
            .find_map(|line| line.strip_prefix("process_id:"))
            .expect("a process_id line")
            .trim()
            .to_owned();
        assert!(signal("-STOP", &pid), "kill -STOP {pid}");
        Stopped {
            pid,
            resumed: false,
        }
    }

    /// Lets it run again (`SIGCONT`).
    pub(crate) fn resume(mut self) {
        self.resumed = true;
        assert!(signal("-CONT", &self.pid), "kill -CONT {}", self.pid);
    }
}

impl Drop for Stopped {
    fn drop(&mut self) {
        if !self.resumed {
            // Unwinding from a failed test, perhaps: no second panic here.
            let _ = signal("-CONT", &self.pid);
        }
    }
}

/// Sends `which` (`-STOP`, `-CONT`) to `pid`; whether it was sent.
fn signal(which: &str, pid: &str) -> bool {
    Command::new("kill")
        .args([which, pid])
        .status()
        .is_ok_and(|status| status.success())
}
