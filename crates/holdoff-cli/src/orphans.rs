//! Commands that die with holdoff. `holdoff run` passes Ctrl-C and SIGTERM on to its command,
//! and kills it after a grace; but when holdoff itself is killed (SIGKILL, the OOM killer) it
//! passes nothing on, and the command would run on, orphaned, pointed at a proxy that is gone.
//! `holdoff check` starts its scenarios' `holdoff run`s, proxies and clients the same way, so a
//! killed check takes them all with it.
//!
//! On Linux the kernel can send a child a signal when its parent dies (`PR_SET_PDEATHSIG`).
//! Setting it takes a `prctl` in the child between fork and exec (`pre_exec`), which is
//! `unsafe`, and this crate forbids unsafe code. util-linux's `setpriv --pdeathsig KILL` makes
//! the same call and then `exec`s the command, which keeps its pid: so the command is started
//! through `setpriv` when it is installed (it is on every Debian and Ubuntu), and directly
//! otherwise. The signal follows the thread that started the child: holdoff starts it from the
//! main thread, which lives as long as holdoff.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

use tokio::process::Command;

/// `program`, to be started so that it is killed if holdoff dies first, where that can be
/// arranged; else as it is. A program that cannot be found is left to fail as it would.
pub(crate) fn command(program: &OsStr) -> Command {
    if cfg!(target_os = "linux")
        && let Some(setpriv) = on_path(OsStr::new("setpriv"))
        && on_path(program).is_some()
    {
        let mut command = Command::new(setpriv);
        command.args(["--pdeathsig", "KILL", "--"]).arg(program);
        return command;
    }
    Command::new(program)
}

/// Where `program` is: itself, if it names a path (has a `/`); else the first executable file
/// of that name in a directory of `PATH`.
fn on_path(program: &OsStr) -> Option<PathBuf> {
    let path = Path::new(program);
    if path.components().count() > 1 {
        return is_executable(path).then(|| path.to_owned());
    }
    let dirs = std::env::var_os("PATH")?;
    std::env::split_paths(&dirs)
        .map(|dir| dir.join(program))
        .find(|candidate| is_executable(candidate))
}

#[cfg(unix)]
fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    path.metadata()
        .is_ok_and(|meta| meta.is_file() && meta.permissions().mode() & 0o111 != 0)
}

#[cfg(not(unix))]
fn is_executable(path: &Path) -> bool {
    path.is_file()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_programs_on_the_path_and_by_their_own_path() {
        assert!(on_path(OsStr::new("sh")).is_some());
        assert_eq!(
            on_path(OsStr::new("/bin/sh")),
            Some(PathBuf::from("/bin/sh"))
        );
        assert_eq!(on_path(OsStr::new("no-such-program-here")), None);
        assert_eq!(on_path(OsStr::new("./no/such/program")), None);
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_program_that_cannot_be_found_is_started_as_it_is() {
        let command = command(OsStr::new("no-such-program-here"));
        assert_eq!(command.as_std().get_program(), "no-such-program-here");
    }
}
