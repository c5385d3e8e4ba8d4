//! Dev Proxy's path tokens: `~appFolder` (where Dev Proxy is installed) and `~dataFolder`
//! (its per-user data folder), which its files may use in any path they name, in any case.

use std::env;
use std::path::{Path, PathBuf};

/// The folders Dev Proxy's tokens stand for on this machine, where they can be found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(super) struct Folders {
    /// `~appFolder`: the folder of the `devproxy` executable on `PATH` (links followed), if
    /// Dev Proxy is installed.
    pub(super) app: Option<PathBuf>,
    /// `~dataFolder`: `dev-proxy` in the user's application-data folder, as Dev Proxy puts it
    /// (`$XDG_CONFIG_HOME` or `~/.config` on Linux, `~/Library/Application Support` on macOS,
    /// `%LOCALAPPDATA%` on Windows).
    pub(super) data: Option<PathBuf>,
}

/// A token in a path that this machine has no folder for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Unresolved {
    App,
    Data,
}

impl Unresolved {
    /// Why the token has no folder here, for a note.
    pub(super) fn why(self) -> &'static str {
        match self {
            Unresolved::App => {
                "~appFolder is the folder Dev Proxy is installed in, and there is no `devproxy` \
                 on PATH here"
            }
            Unresolved::Data => {
                "~dataFolder is Dev Proxy's folder in the user's application data, and this \
                 environment names no home folder (HOME, XDG_CONFIG_HOME or LOCALAPPDATA)"
            }
        }
    }
}

impl Folders {
    /// The folders as this process's environment says they are.
    pub(super) fn from_env() -> Folders {
        Folders {
            app: app_folder(),
            data: data_folder(),
        }
    }

    /// `path` with its tokens replaced, as Dev Proxy does (`~dataFolder` first, then
    /// `~appFolder`, in any case); unchanged when it has none.
    pub(super) fn expand(&self, path: &str) -> Result<String, Unresolved> {
        let path = replace(path, "~dataFolder", self.data.as_deref(), Unresolved::Data)?;
        replace(&path, "~appFolder", self.app.as_deref(), Unresolved::App)
    }

    /// A path given on the command line, as [`super::expand_path`] reads it: the tokens, then
    /// a leading `~` or `~/` (the home folder, as a shell would have put it had the path not
    /// been quoted).
    pub(super) fn expand_command_line(&self, path: &str) -> Result<PathBuf, String> {
        let expanded = self.expand(path).map_err(|unresolved| {
            format!("cannot expand the path {path:?}: {}", unresolved.why())
        })?;
        let home_relative = match expanded.strip_prefix('~') {
            Some("") => Some(""),
            Some(rest) => rest.strip_prefix(['/', std::path::MAIN_SEPARATOR]),
            None => None,
        };
        match home_relative {
            None => Ok(PathBuf::from(expanded)),
            Some(rest) => match home() {
                Some(home) => Ok(home.join(rest)),
                None => Err(format!(
                    "cannot expand the path {path:?}: ~ is the home folder, and this \
                     environment names none (HOME)"
                )),
            },
        }
    }
}

fn home() -> Option<PathBuf> {
    let name = if cfg!(windows) { "USERPROFILE" } else { "HOME" };
    env::var_os(name)
        .filter(|value| !value.is_empty())
        .map(PathBuf::from)
}

/// `text` with every `token` (any case) replaced by `folder`.
fn replace(
    text: &str,
    token: &str,
    folder: Option<&Path>,
    unresolved: Unresolved,
) -> Result<String, Unresolved> {
    let lower = text.to_ascii_lowercase();
    let token_lower = token.to_ascii_lowercase();
    if !lower.contains(&token_lower) {
        return Ok(text.to_owned());
    }
    let folder = folder.ok_or(unresolved)?.display().to_string();
    let mut out = String::with_capacity(text.len() + folder.len());
    let mut rest = 0;
    // ASCII lowering keeps every byte where it was, so positions in `lower` are positions in
    // `text`, and on character boundaries (the token is ASCII).
    for (at, _) in lower.match_indices(&token_lower) {
        out.push_str(&text[rest..at]);
        out.push_str(&folder);
        rest = at + token.len();
    }
    out.push_str(&text[rest..]);
    Ok(out)
}

fn app_folder() -> Option<PathBuf> {
    let name = if cfg!(windows) {
        "devproxy.exe"
    } else {
        "devproxy"
    };
    let path = env::var_os("PATH")?;
    env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|candidate| candidate.is_file())
        .and_then(|found| found.canonicalize().ok())
        .and_then(|found| found.parent().map(Path::to_path_buf))
}

fn data_folder() -> Option<PathBuf> {
    let var = |name: &str| env::var_os(name).filter(|value| !value.is_empty());
    let base = if cfg!(windows) {
        var("LOCALAPPDATA").map(PathBuf::from)
    } else if cfg!(target_os = "macos") {
        var("HOME").map(|home| PathBuf::from(home).join("Library/Application Support"))
    } else {
        var("XDG_CONFIG_HOME")
            .map(PathBuf::from)
            .or_else(|| var("HOME").map(|home| PathBuf::from(home).join(".config")))
    };
    base.map(|base| base.join("dev-proxy"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn folders() -> Folders {
        Folders {
            app: Some(PathBuf::from("/opt/devproxy")),
            data: Some(PathBuf::from("/home/u/.config/dev-proxy")),
        }
    }

    #[test]
    fn a_command_line_path_expands_the_tokens_and_a_leading_tilde() {
        let folders = folders();
        assert_eq!(
            folders.expand_command_line("~dataFolder/configs/x/devproxyrc.json"),
            Ok(PathBuf::from(
                "/home/u/.config/dev-proxy/configs/x/devproxyrc.json"
            ))
        );
        assert_eq!(
            folders.expand_command_line("~APPFOLDER/devproxyrc.json"),
            Ok(PathBuf::from("/opt/devproxy/devproxyrc.json"))
        );
        assert_eq!(
            folders.expand_command_line("plain/~/devproxyrc.json"),
            Ok(PathBuf::from("plain/~/devproxyrc.json"))
        );
        // `~user` is a shell's business, not a token: left as written.
        assert_eq!(
            folders.expand_command_line("~bob/rc.json"),
            Ok(PathBuf::from("~bob/rc.json"))
        );
        if let Some(home) = home() {
            assert_eq!(
                folders.expand_command_line("~/rc.json"),
                Ok(home.join("rc.json"))
            );
        }
        let err = Folders::default()
            .expand_command_line("~dataFolder/rc.json")
            .unwrap_err();
        assert!(err.contains("~dataFolder is Dev Proxy's folder"), "{err}");
    }

    #[test]
    fn replaces_each_token_in_any_case() {
        let folders = folders();
        assert_eq!(
            folders.expand("~appFolder/config/m365-mocks.json"),
            Ok("/opt/devproxy/config/m365-mocks.json".to_owned())
        );
        assert_eq!(
            folders.expand("~DATAFOLDER/errors.json"),
            Ok("/home/u/.config/dev-proxy/errors.json".to_owned())
        );
        assert_eq!(
            folders.expand("a/~appfolder/b/~AppFolder"),
            Ok("a//opt/devproxy/b//opt/devproxy".to_owned())
        );
    }

    #[test]
    fn leaves_a_path_without_tokens_alone() {
        assert_eq!(
            Folders::default().expand("mocks/é.json"),
            Ok("mocks/é.json".to_owned())
        );
    }

    #[test]
    fn says_which_token_has_no_folder() {
        let no_app = Folders {
            app: None,
            ..folders()
        };
        assert_eq!(no_app.expand("~appFolder/x.json"), Err(Unresolved::App));
        assert_eq!(
            Folders::default().expand("~dataFolder/x.json"),
            Err(Unresolved::Data)
        );
    }
}
