//! Where `holdoff proxy` gets its faults — a config file, a preset, or Microsoft Dev Proxy's
//! config — and reloading them when their files change.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use holdoff::clock::Clock;
use holdoff_config::compile::{self, Compiled, ConfigProblems, StateConfig};
use holdoff_config::{load, preset};
use holdoff_proxy::FaultStage;
use holdoff_proxy::fault::FaultPlan;
use holdoff_proxy::fault::{Rate, RetryAfterForm};

use super::options::Options;

/// The preset used when no config is given or found.
pub(crate) const DEFAULT_PRESET: &str = "throttle";

/// Where the faults come from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Source {
    /// A holdoff config file (`-c`, or `holdoff.json`/`holdoff.yaml` found in the current
    /// directory).
    File(PathBuf),
    /// A built-in preset.
    Preset(String),
    /// Dev Proxy's `devproxyrc.json`.
    DevProxy(PathBuf),
}

impl Source {
    /// The source the options ask for (`-c` naming a Dev Proxy file imports it, as
    /// `--devproxy-config` does); with none, holdoff's config file in `cwd`, else Dev Proxy's
    /// where Dev Proxy looks for it ([`crate::devproxy::find_in`]), else the default preset.
    pub(crate) fn pick(
        config: Option<&Path>,
        preset: Option<&str>,
        devproxy: Option<&Path>,
        cwd: &Path,
    ) -> Source {
        if let Some(path) = devproxy {
            return Source::DevProxy(path.to_owned());
        }
        if let Some(path) = config {
            if crate::devproxy::is_devproxy(path) {
                return Source::DevProxy(path.to_owned());
            }
            return Source::File(path.to_owned());
        }
        if let Some(name) = preset {
            return Source::Preset(name.to_owned());
        }
        // Shown as the user would have typed them.
        let here = |path: PathBuf| path.strip_prefix(cwd).map(Path::to_owned).unwrap_or(path);
        if let Some(path) = load::find_in(cwd) {
            return Source::File(here(path));
        }
        match crate::devproxy::find_in(cwd) {
            Some(path) => Source::DevProxy(here(path)),
            None => Source::Preset(DEFAULT_PRESET.to_owned()),
        }
    }

    /// The line that says which source was found when none was asked for.
    pub(crate) fn found(&self) -> String {
        match self {
            Source::File(path) => {
                format!("using {}, found in the current directory", path.display())
            }
            Source::DevProxy(path) => format!(
                "no holdoff.json here: using Dev Proxy's {}, imported as --devproxy-config \
                 imports it",
                path.display()
            ),
            Source::Preset(name) => format!(
                "no holdoff.json or devproxyrc.json here: using the `{name}` preset (choose \
                 with -c FILE or --preset NAME)"
            ),
        }
    }

    /// The file it is read from, unless a preset.
    pub(crate) fn path(&self) -> Option<&Path> {
        match self {
            Source::File(path) | Source::DevProxy(path) => Some(path),
            Source::Preset(_) => None,
        }
    }

    /// Reads and compiles it; Dev Proxy's config also yields notes on what it could not map.
    pub(crate) fn load(&self, overrides: &Overrides) -> Result<Loaded, String> {
        let shown = |errors: ConfigProblems| errors.to_string();
        if let Some(file) = &overrides.mocks_file
            && !matches!(self, Source::DevProxy(_))
        {
            return Err(format!(
                "--mocks-file {} names the mocks file of a Dev Proxy config's \
                 MockResponsePlugin, and the faults come from {self}: put the mocks in its \
                 `mocks` section, or run with the Dev Proxy config (-c devproxyrc.json)",
                file.display()
            ));
        }
        match self {
            Source::File(path) => {
                let compiled = compile::load_and_compile(path).map_err(shown)?;
                Ok(Loaded::new(compiled, Some(path), Vec::new()))
            }
            Source::Preset(name) => match preset::text(name) {
                Some(_) => {
                    let compiled = preset::compile(name).map_err(shown)?;
                    Ok(Loaded::new(compiled, None, Vec::new()))
                }
                None => Err(preset::unknown(name)),
            },
            Source::DevProxy(path) => {
                let mut import = holdoff_config::devproxy::ImportOptions::default();
                if let Some(file) = &overrides.mocks_file {
                    import = import.mocks_file(file);
                }
                let imported = crate::devproxy::import_and_compile(path, &import).map_err(shown)?;
                Ok(Loaded::new(imported.compiled, Some(path), imported.notes))
            }
        }
    }
}

/// The faults `options` ask for, loaded, or `None` with `--pass-through`; when they name no
/// source, the one found in `cwd` ([`Source::pick`]).
pub(crate) fn from_options(
    options: &Options,
    cwd: &Path,
) -> Result<Option<(Source, Loaded)>, String> {
    if options.pass_through || options.dev_proxy.discover() {
        return Ok(None);
    }
    let source = Source::pick(
        options.config.as_deref(),
        options.preset.as_deref(),
        options.devproxy_config.as_deref(),
        cwd,
    );
    let loaded = source.load(&Overrides::from_options(options, cwd))?;
    Ok(Some((source, loaded)))
}

impl std::fmt::Display for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Source::File(path) => write!(f, "{}", path.display()),
            Source::Preset(name) => write!(f, "preset {name}"),
            Source::DevProxy(path) => write!(f, "Dev Proxy config {}", path.display()),
        }
    }
}

/// A compiled source, with the files it was read from.
pub(crate) struct Loaded {
    pub(crate) compiled: Compiled,
    /// The config file and every data file it read, to watch for changes.
    pub(crate) files: Vec<PathBuf>,
    /// What Dev Proxy's config asked for that holdoff does differently or not at all, and
    /// what the config sets that is valid but likely not meant: logged as warnings at start.
    pub(crate) notes: Vec<String>,
}

impl Loaded {
    fn new(compiled: Compiled, file: Option<&Path>, mut notes: Vec<String>) -> Loaded {
        notes.extend(compiled.warnings.iter().cloned());
        let mut files: Vec<PathBuf> = file.map(Path::to_owned).into_iter().collect();
        files.extend(compiled.data_files.iter().cloned());
        Loaded {
            compiled,
            files,
            notes,
        }
    }
}

/// What the command line changes in any plan.
#[derive(Clone, Debug, Default)]
pub(crate) struct Overrides {
    /// `--failure-rate`.
    pub(crate) failure_rate: Option<Rate>,
    /// `--retry-after-form`.
    pub(crate) retry_after_form: Option<RetryAfterForm>,
    /// `--no-mocks`.
    pub(crate) no_mocks: bool,
    /// `--allowed-errors`: the only statuses error rules may answer with (empty: any).
    pub(crate) allowed_errors: Vec<u16>,
    /// `--mocks-file`, absolute: read by a Dev Proxy config's MockResponsePlugin.
    pub(crate) mocks_file: Option<PathBuf>,
}

impl Overrides {
    /// What `options` change, a relative `--mocks-file` taken from `cwd`.
    pub(crate) fn from_options(options: &Options, cwd: &Path) -> Overrides {
        let dev_proxy = &options.dev_proxy;
        Overrides {
            failure_rate: options.failure_rate,
            retry_after_form: options.retry_after_form.map(Into::into),
            no_mocks: dev_proxy.no_mocks(),
            allowed_errors: dev_proxy.allowed_errors.clone(),
            mocks_file: dev_proxy.mocks_file.as_ref().map(|file| cwd.join(file)),
        }
    }

    pub(crate) fn apply(&self, mut plan: FaultPlan) -> FaultPlan {
        if let Some(rate) = self.failure_rate {
            plan = plan.with_failure_rate(rate);
        }
        if let Some(form) = self.retry_after_form {
            plan.retry_after_form = form;
        }
        if self.no_mocks {
            plan.mocks.clear();
        }
        plan.with_allowed_statuses(&self.allowed_errors)
    }
}

/// How often the files are looked at.
const POLL: Duration = Duration::from_secs(1);

/// Reloads the plan whenever one of `files` changes, for as long as the proxy runs. The judge
/// and the rate limiters keep their state; a file that no longer compiles is reported and the
/// running plan kept.
///
/// Polls modification times rather than using OS notifications: one `stat` per file per
/// second is nothing, and it sees editors that replace a file by renaming as well as those
/// that write it in place.
pub(crate) async fn reload(
    source: Source,
    mut files: Vec<PathBuf>,
    stage: Arc<FaultStage>,
    overrides: Overrides,
    mut state: Option<StateConfig>,
    clock: Arc<dyn Clock>,
) {
    if files.is_empty() {
        return;
    }
    let mut seen = stamps(&files);
    loop {
        clock.sleep_until(clock.now() + POLL).await;
        let now = stamps(&files);
        if now == seen {
            continue;
        }
        seen = now;
        match source.load(&overrides) {
            Ok(loaded) => {
                if loaded.compiled.state != state {
                    tracing::warn!(
                        "{source}: the `state` section changed; it takes effect when the proxy \
                         restarts (the running proxy keeps its shared state)"
                    );
                    state = loaded.compiled.state;
                }
                let plan = overrides.apply(loaded.compiled.plan);
                tracing::info!("reloaded {source}: {plan}");
                stage.replace_plan(plan);
                if loaded.files != files {
                    files = loaded.files;
                    seen = stamps(&files);
                }
            }
            Err(errors) => tracing::error!(
                "{source} changed but does not load; the faults stay as they were:\n{errors}"
            ),
        }
    }
}

/// Each file's modification time, `None` when it cannot be read.
fn stamps(files: &[PathBuf]) -> Vec<Option<SystemTime>> {
    files
        .iter()
        .map(|file| fs::metadata(file).and_then(|m| m.modified()).ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_explicit_source_wins_then_a_file_here_then_the_default_preset() {
        let here = Path::new("/nonexistent-holdoff-dir");
        assert_eq!(
            Source::pick(None, None, None, here),
            Source::Preset(DEFAULT_PRESET.to_owned())
        );
        assert_eq!(
            Source::pick(Some(Path::new("a.json")), None, None, here),
            Source::File("a.json".into())
        );
        assert_eq!(
            Source::pick(None, Some("flaky"), None, here),
            Source::Preset("flaky".into())
        );
        assert_eq!(
            Source::pick(None, None, Some(Path::new("rc.json")), here),
            Source::DevProxy("rc.json".into())
        );
    }

    #[test]
    fn a_holdoff_file_here_wins_over_dev_proxys_which_wins_over_the_preset() {
        let dir = holdoff_testkit::TempDir::new("pick-devproxy");
        fs::create_dir(dir.join(".devproxy")).unwrap();
        dir.write(".devproxy/devproxyrc.json", r#"{ "plugins": [] }"#);
        assert_eq!(
            Source::pick(None, None, None, dir.path()),
            Source::DevProxy(PathBuf::from(".devproxy/devproxyrc.json"))
        );
        dir.write("devproxyrc.yaml", "plugins: []\n");
        assert_eq!(
            Source::pick(None, None, None, dir.path()),
            Source::DevProxy(PathBuf::from("devproxyrc.yaml"))
        );
        dir.write("holdoff.json", "{}");
        assert_eq!(
            Source::pick(None, None, None, dir.path()),
            Source::File(PathBuf::from("holdoff.json"))
        );
        // -c naming Dev Proxy's file imports it.
        let rc = dir.join("devproxyrc.yaml");
        assert_eq!(
            Source::pick(Some(&rc), None, None, dir.path()),
            Source::DevProxy(rc.clone())
        );
    }

    #[test]
    fn an_unknown_preset_lists_the_known_ones() {
        let err = Source::Preset("nope".into())
            .load(&Overrides::default())
            .err()
            .unwrap_or_default();
        assert!(err.contains("there is no preset `nope`"), "{err}");
        assert!(err.contains(DEFAULT_PRESET), "{err}");
    }

    #[test]
    fn the_default_preset_loads() {
        let loaded = Source::Preset(DEFAULT_PRESET.into())
            .load(&Overrides::default())
            .unwrap_or_else(|err| panic!("{err}"));
        assert!(!loaded.compiled.plan.errors.is_empty());
        assert!(loaded.files.is_empty());
    }
}
