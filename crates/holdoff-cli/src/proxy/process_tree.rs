//! `--watch-pids` and `--watch-process-names`: only these processes, and those they started,
//! are handled; every other client passes through untouched.
//!
//! The proxy asks once per connection ([`ConnectionFilter`]) with the pid it found at the
//! other end (Linux: the peer port's socket in `/proc/net/tcp{,6}`, and the process holding it
//! among `/proc/*/fd`); this walks from that process up its parents (`/proc/PID/stat`) until
//! one is watched or the chain ends.

use std::fs;
use std::net::SocketAddr;
use std::path::Path;

use holdoff_proxy::ConnectionFilter;

/// The longest chain of parents looked at: far more than any real tree, and a bound on a
/// loop should `/proc` ever report one.
const MAX_DEPTH: usize = 128;

/// The processes watched, by pid or by name.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct ProcessTree {
    pids: Vec<u32>,
    names: Vec<String>,
}

impl ProcessTree {
    /// The tree to watch, or `None` when neither list names anything.
    pub(crate) fn new(pids: &[u32], names: &[String]) -> Option<ProcessTree> {
        (!pids.is_empty() || !names.is_empty()).then(|| ProcessTree {
            pids: pids.to_vec(),
            names: names.to_vec(),
        })
    }

    /// `processes 12, 34 and those named curl, and their children`, for the log.
    pub(crate) fn describe(&self) -> String {
        let mut parts = Vec::new();
        if !self.pids.is_empty() {
            let pids: Vec<String> = self.pids.iter().map(u32::to_string).collect();
            parts.push(format!("processes {}", pids.join(", ")));
        }
        if !self.names.is_empty() {
            parts.push(format!("processes named {}", self.names.join(", ")));
        }
        format!("{} and their children", parts.join(" and "))
    }

    /// Whether `pid`, or one of its parents, is watched, under the `proc` file system at
    /// `proc`.
    fn watches(&self, proc: &Path, pid: u32) -> bool {
        let mut next = Some(pid);
        for _ in 0..MAX_DEPTH {
            let Some(pid) = next.filter(|pid| *pid > 0) else {
                return false;
            };
            let dir = proc.join(pid.to_string());
            if self.pids.contains(&pid) || self.named(&dir) {
                return true;
            }
            next = parent(&dir);
        }
        false
    }

    /// Whether the process at `dir` has one of the names: its `comm` (which Linux cuts at 15
    /// bytes) or its executable's file name.
    fn named(&self, dir: &Path) -> bool {
        if self.names.is_empty() {
            return false;
        }
        let comm = fs::read_to_string(dir.join("comm")).unwrap_or_default();
        let comm = comm.trim_end_matches('\n');
        let exe = fs::read_link(dir.join("exe")).ok();
        let exe = exe
            .as_deref()
            .and_then(Path::file_name)
            .and_then(|name| name.to_str());
        self.names.iter().any(|name| {
            let cut = name.get(..15).unwrap_or(name);
            (!comm.is_empty() && (comm == name || comm == cut)) || exe == Some(name.as_str())
        })
    }
}

/// The parent of the process at `dir`: the field after the state in `stat`, which follows
/// the command name in parentheses (itself possibly holding spaces or parentheses).
fn parent(dir: &Path) -> Option<u32> {
    let stat = fs::read_to_string(dir.join("stat")).ok()?;
    let (_, rest) = stat.rsplit_once(')')?;
    rest.split_whitespace().nth(1)?.parse().ok()
}

impl ConnectionFilter for ProcessTree {
    fn handles(&self, _peer: SocketAddr, pid: Option<u32>) -> bool {
        // A client whose process cannot be told (not on loopback) is not one of the watched.
        pid.is_some_and(|pid| self.watches(Path::new("/proc"), pid))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use holdoff_testkit::TempDir;

    /// A fake `/proc` with processes `(pid, ppid, comm)`.
    fn proc(processes: &[(u32, u32, &str)]) -> TempDir {
        let dir = TempDir::new("fake-proc");
        for (pid, ppid, comm) in processes {
            let at = dir.join(pid.to_string());
            fs::create_dir(&at).unwrap();
            fs::write(at.join("comm"), format!("{comm}\n")).unwrap();
            fs::write(
                at.join("stat"),
                format!("{pid} ({comm}) S {ppid} {pid} {pid} 0 -1 4194560 100 0 0 0"),
            )
            .unwrap();
        }
        dir
    }

    mod watches {
        use super::*;

        #[test]
        fn a_watched_process_and_its_descendants_and_nothing_else() {
            let proc = proc(&[
                (1, 0, "init"),
                (10, 1, "bash"),
                (20, 10, "sh"),
                (30, 20, "cur) l x"),
                (40, 1, "other"),
            ]);
            let tree = ProcessTree::new(&[20], &[]).unwrap();
            assert!(tree.watches(proc.path(), 20));
            assert!(
                tree.watches(proc.path(), 30),
                "a child, its name with a paren"
            );
            assert!(
                !tree.watches(proc.path(), 10),
                "a parent is not in the tree"
            );
            assert!(!tree.watches(proc.path(), 40));
            assert!(!tree.watches(proc.path(), 99), "gone");
        }

        #[test]
        fn by_name_too_cut_as_linux_cuts_comm() {
            let proc = proc(&[(1, 0, "init"), (5, 1, "averylongprogra"), (6, 5, "curl")]);
            let tree = ProcessTree::new(&[], &["averylongprogram".to_owned()]).unwrap();
            assert!(tree.watches(proc.path(), 6));
            let tree = ProcessTree::new(&[], &["wget".to_owned()]).unwrap();
            assert!(!tree.watches(proc.path(), 6));
        }

        #[test]
        fn stops_at_a_loop() {
            let proc = proc(&[(7, 8, "a"), (8, 7, "b")]);
            let tree = ProcessTree::new(&[1], &[]).unwrap();
            assert!(!tree.watches(proc.path(), 7));
        }
    }

    #[test]
    fn is_none_without_pids_or_names() {
        assert_eq!(ProcessTree::new(&[], &[]), None);
        let tree = ProcessTree::new(&[12, 34], &["curl".to_owned()]).unwrap();
        assert_eq!(
            tree.describe(),
            "processes 12, 34 and processes named curl and their children"
        );
    }
}
