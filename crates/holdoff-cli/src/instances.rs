//! Proxies running in the background (`holdoff proxy --detach`), as files in holdoff's state
//! folder: one per instance saying where it listens and logs, and, once it has stopped, one
//! with its verdict, for `holdoff status`, `holdoff logs` and `holdoff stop` to read.
//!
//! The folder is `$HOLDOFF_STATE_DIR`, else `$XDG_STATE_HOME/holdoff`, else
//! `~/.local/state/holdoff`: holdoff's own, so a Dev Proxy running beside it is never touched.
//!
//! ```text
//! instances/1234.json          written once the proxy listens, removed when it exits
//! instances/1234.result.json   written when it exits: its exit code and summary
//! logs/holdoff-1234-….log      everything it printed
//! ```

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// A proxy running in the background.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Instance {
    pub(crate) pid: u32,
    /// `http://127.0.0.1:8000`.
    pub(crate) proxy_url: String,
    /// The control API, which answers Dev Proxy's API paths too.
    pub(crate) api_url: Option<String>,
    pub(crate) log_file: PathBuf,
    /// RFC 3339.
    pub(crate) started_at: String,
    /// Where its faults come from (`preset throttle`, `Dev Proxy config …`).
    pub(crate) source: String,
}

/// How a background proxy ended.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Ended {
    /// The exit code its verdict gives: 0, 3 (a premature retry) or 4 (no request reached it).
    pub(crate) exit_code: u8,
    /// `pass`, `fail` or `not_tested`.
    pub(crate) verdict: String,
    /// The summary it printed, as printed.
    pub(crate) summary: String,
}

/// holdoff's state folder, if the environment names one.
pub(crate) fn state_dir() -> Option<PathBuf> {
    let var = |name: &str| std::env::var_os(name).filter(|value| !value.is_empty());
    var("HOLDOFF_STATE_DIR")
        .map(PathBuf::from)
        .or_else(|| var("XDG_STATE_HOME").map(|dir| PathBuf::from(dir).join("holdoff")))
        .or_else(|| var("HOME").map(|home| PathBuf::from(home).join(".local/state/holdoff")))
}

/// The folders of one state folder.
#[derive(Clone, Debug)]
pub(crate) struct Store {
    root: PathBuf,
}

impl Store {
    pub(crate) fn new(root: PathBuf) -> Store {
        Store { root }
    }

    /// The store in [`state_dir`], or a message saying what to set.
    pub(crate) fn from_env() -> Result<Store, String> {
        state_dir().map(Store::new).ok_or_else(|| {
            "cannot tell where holdoff keeps its background proxies: set HOME, XDG_STATE_HOME \
             or HOLDOFF_STATE_DIR"
                .to_owned()
        })
    }

    fn instances(&self) -> PathBuf {
        self.root.join("instances")
    }

    /// The folder of the logs, created.
    pub(crate) fn logs(&self) -> io::Result<PathBuf> {
        let logs = self.root.join("logs");
        fs::create_dir_all(&logs)?;
        Ok(logs)
    }

    fn state_file(&self, pid: u32) -> PathBuf {
        self.instances().join(format!("{pid}.json"))
    }

    fn ended_file(&self, pid: u32) -> PathBuf {
        self.instances().join(format!("{pid}.result.json"))
    }

    /// Records `instance` as running, whole or not at all (written beside, then renamed).
    pub(crate) fn register(&self, instance: &Instance) -> io::Result<()> {
        write_whole(&self.state_file(instance.pid), instance)
    }

    /// The instance with `pid`, if it registered (whether or not it still runs).
    pub(crate) fn instance(&self, pid: u32) -> Option<Instance> {
        read(&self.state_file(pid))
    }

    /// Records how `pid` ended, and that it no longer runs.
    pub(crate) fn ended(&self, pid: u32, ended: &Ended) -> io::Result<()> {
        write_whole(&self.ended_file(pid), ended)?;
        remove(&self.state_file(pid))
    }

    /// How `pid` ended, once; the record is removed as it is read.
    pub(crate) fn take_ended(&self, pid: u32) -> Option<Ended> {
        let path = self.ended_file(pid);
        let ended = read(&path);
        let _ = remove(&path);
        ended
    }

    /// Every registered instance whose process is alive, oldest first; the records of those
    /// that died without saying so are removed.
    pub(crate) fn running(&self) -> Vec<Instance> {
        let Ok(entries) = fs::read_dir(self.instances()) else {
            return Vec::new();
        };
        let mut running: Vec<Instance> = entries
            .flatten()
            .map(|entry| entry.path())
            .filter(|path| {
                path.extension().is_some_and(|ext| ext == "json")
                    && !path.to_string_lossy().ends_with(".result.json")
            })
            .filter_map(|path| {
                let instance: Instance = read(&path)?;
                if alive(instance.pid) {
                    Some(instance)
                } else {
                    let _ = remove(&path);
                    None
                }
            })
            .collect();
        running.sort_by(|a, b| (&a.started_at, a.pid).cmp(&(&b.started_at, b.pid)));
        running
    }
}

fn read<T: for<'de> Deserialize<'de>>(path: &Path) -> Option<T> {
    let text = fs::read_to_string(path).ok()?;
    serde_json::from_str(&text).ok()
}

fn write_whole(path: &Path, value: &impl Serialize) -> io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    fs::create_dir_all(dir)?;
    let text = serde_json::to_string_pretty(value).map_err(io::Error::other)?;
    let mut staged = tempfile::NamedTempFile::new_in(dir)?;
    io::Write::write_all(&mut staged, text.as_bytes())?;
    staged.persist(path).map_err(|err| err.error)?;
    Ok(())
}

fn remove(path: &Path) -> io::Result<()> {
    match fs::remove_file(path) {
        Err(err) if err.kind() != io::ErrorKind::NotFound => Err(err),
        _ => Ok(()),
    }
}

/// Whether a process with `pid` exists (and is not a zombie).
pub(crate) fn alive(pid: u32) -> bool {
    let status = fs::read_to_string(format!("/proc/{pid}/stat"));
    match status {
        // The state is the field after the command name in parentheses.
        Ok(stat) => stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().next())
            .is_some_and(|state| state != "Z" && state != "X"),
        Err(_) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use holdoff_testkit::TempDir;

    fn instance(pid: u32) -> Instance {
        Instance {
            pid,
            proxy_url: "http://127.0.0.1:8000".into(),
            api_url: Some("http://127.0.0.1:8897".into()),
            log_file: PathBuf::from("/tmp/holdoff.log"),
            started_at: "2026-12-06T16:00:00Z".into(),
            source: "preset throttle".into(),
        }
    }

    #[test]
    fn a_registered_instance_is_listed_while_it_runs_and_forgotten_after() {
        let dir = TempDir::new("instances");
        let store = Store::new(dir.path().to_owned());
        assert!(store.running().is_empty());
        let me = std::process::id();
        store.register(&instance(me)).unwrap();
        assert_eq!(store.running(), vec![instance(me)]);
        // A pid no process has: its record is dropped when listed.
        let gone = u32::MAX - 1;
        store.register(&instance(gone)).unwrap();
        assert_eq!(store.running(), vec![instance(me)]);
        assert_eq!(store.instance(gone), None);

        let ended = Ended {
            exit_code: 3,
            verdict: "fail".into(),
            summary: "holdoff: FAIL\n".into(),
        };
        store.ended(me, &ended).unwrap();
        assert!(store.running().is_empty());
        assert_eq!(store.take_ended(me), Some(ended));
        assert_eq!(store.take_ended(me), None);
    }

    #[test]
    fn this_process_is_alive_and_a_made_up_one_is_not() {
        assert!(alive(std::process::id()));
        assert!(!alive(u32::MAX - 1));
    }
}
