//! `holdoff config`: the configuration file — its JSON Schema, checking a file, the built-in
//! presets, and importing Microsoft Dev Proxy's configuration.

use std::env;
use std::fs;
use std::io::{self, Read as _, Write};
use std::path::{Path, PathBuf};

use holdoff_config::compile::{self, Compiled, ConfigProblems, StateRedis};
use holdoff_config::devproxy as holdoff_devproxy;
use holdoff_config::load::Format;
use holdoff_config::{load, preset, schema};
use holdoff_proxy::shared::OnFailure;

use crate::devproxy;
use crate::failure::Failure;

mod gallery;

const AFTER_HELP: &str = "\
A configuration file is holdoff.json (comments allowed), holdoff.jsonc, holdoff.yaml or
holdoff.yml; `holdoff proxy` reads the first of these it finds in the current directory, else
Dev Proxy's devproxyrc.jsonc, .json, .yaml or .yml there or in .devproxy/ (imported), or the
file given with --config. `validate` takes Dev Proxy files too, printing the import's notes.

Exit status: 0 on success, 1 when the file has problems (each is printed as
FILE:LINE:COL: KEY.PATH: message) or cannot be read or written, 2 for a usage error.

Examples:
  holdoff config get openai-throttling
  holdoff config preset github > holdoff.json
  holdoff config validate
  holdoff config schema > holdoff.schema.json
  holdoff config import-devproxy devproxyrc.json -o holdoff.json";

/// Work with holdoff's configuration files.
#[derive(Debug, clap::Args)]
#[command(after_help = AFTER_HELP)]
pub(crate) struct Args {
    #[command(subcommand)]
    action: Action,
}

#[derive(Debug, clap::Subcommand)]
enum Action {
    /// Print the JSON Schema of the configuration file, for editors to complete and check it.
    Schema,
    /// Check a configuration file and the files it names; print every problem found.
    Validate {
        /// The file to check, holdoff's or Dev Proxy's. Default: the first that exists of
        /// holdoff.json, holdoff.jsonc, holdoff.yaml or holdoff.yml in the current directory,
        /// else of Dev Proxy's devproxyrc.* there or in .devproxy/.
        #[arg(value_parser = expand)]
        file: Option<PathBuf>,
        /// The file to check, as Dev Proxy's `config validate -c FILE` names it.
        #[arg(short = 'c', long = "config-file", value_name = "FILE", conflicts_with = "file", value_parser = expand)]
        config_file: Option<PathBuf>,
    },
    /// Print a built-in preset (a commented configuration file), or list the presets.
    Preset {
        /// The preset to print; without it, the presets are listed.
        #[arg(conflicts_with = "list")]
        name: Option<String>,
        /// List the presets with what each does.
        #[arg(long)]
        list: bool,
    },
    /// Write a starter configuration file (holdoff.json, or NAME): the `throttle` preset,
    /// commented, to edit. An existing file is never overwritten: the new one gets a number,
    /// as Dev Proxy's `config new` does.
    New {
        /// The file to write. Default: holdoff.json (holdoff.yaml with --format yaml).
        name: Option<PathBuf>,
        /// json (with comments) or yaml.
        #[arg(long, value_enum)]
        format: Option<NewFormat>,
    },
    /// Download a sample from Dev Proxy's sample gallery into Dev Proxy's data folder
    /// (~dataFolder/configs/NAME), as `devproxy config get` does, and print the command that
    /// runs it.
    Get(gallery::GetArgs),
    /// Convert Microsoft Dev Proxy's configuration (devproxyrc.json) to a holdoff
    /// configuration, printing what could not be carried over; exit 1 if the result does not
    /// compile.
    #[command(name = "import-devproxy")]
    ImportDevproxy {
        /// Dev Proxy's configuration file.
        file: PathBuf,
        /// Write the holdoff configuration to OUT instead of standard output.
        #[arg(short, long, value_name = "OUT")]
        out: Option<PathBuf>,
    },
}

/// Runs `holdoff config`: results on `out`, problems on standard error.
pub(crate) fn run(args: Args, out: &mut impl Write) -> Result<(), Failure> {
    match args.action {
        Action::Schema => {
            writeln!(out, "{}", pretty(&schema::schema()))?;
            Ok(())
        }
        Action::Validate { file, config_file } => validate(file.or(config_file), out),
        Action::Preset { name: None, .. } => list_presets(out),
        Action::Preset {
            name: Some(name), ..
        } => print_preset(&name, out),
        Action::ImportDevproxy { file, out: target } => import(&file, target.as_deref(), out),
        Action::Get(args) => gallery::get(args, out),
        Action::New { name, format } => new_file(name, format, out),
    }
}

/// A path with Dev Proxy's `~dataFolder` and `~appFolder`, and a leading `~`, expanded.
fn expand(s: &str) -> Result<PathBuf, String> {
    holdoff_devproxy::expand_path(s)
}

fn validate(file: Option<PathBuf>, out: &mut impl Write) -> Result<(), Failure> {
    let path = match file {
        Some(path) => path,
        None => {
            let cwd = env::current_dir().map_err(|err| {
                Failure::Usage(format!(
                    "cannot tell the current directory ({err}); name the file to check"
                ))
            })?;
            let Some(found) = load::find_in(&cwd).or_else(|| devproxy::find_in(&cwd)) else {
                return Err(Failure::Usage(format!(
                    "no configuration file given, and none in the current directory (looked \
                     for {}), nor Dev Proxy's ({} here and in {}/); name the file to check",
                    load::FILE_NAMES.join(", "),
                    devproxy::FILE_NAMES.join(", "),
                    devproxy::DIR,
                )));
            };
            // Shown relative to where the user is, as they would have typed it.
            found
                .strip_prefix(&cwd)
                .map(Path::to_owned)
                .unwrap_or(found)
        }
    };
    if devproxy::is_devproxy(&path) {
        return validate_devproxy(&path, out);
    }
    match compile::load_and_compile(&path) {
        Ok(compiled) => {
            writeln!(out, "{}: valid — {}", path.display(), summary(&compiled))?;
            let mut stderr = io::stderr().lock();
            for warning in &compiled.warnings {
                let _ = writeln!(stderr, "warning: {}: {warning}", path.display());
            }
            Ok(())
        }
        Err(errors) => Err(report(&errors)),
    }
}

/// `validate` for a Dev Proxy file: imported as `holdoff proxy -c FILE` would, its notes on
/// standard error.
fn validate_devproxy(path: &Path, out: &mut impl Write) -> Result<(), Failure> {
    let imported = devproxy::import_and_compile(path, &holdoff_devproxy::ImportOptions::default())
        .map_err(|errors| report(&errors))?;
    print_notes(&imported.notes);
    writeln!(
        out,
        "{}: valid Dev Proxy configuration — imported as {}",
        path.display(),
        summary(&imported.compiled)
    )?;
    let mut stderr = io::stderr().lock();
    for warning in &imported.compiled.warnings {
        let _ = writeln!(stderr, "warning: {}: {warning}", path.display());
    }
    Ok(())
}

/// The import's notes, one `note: …` line each on standard error.
fn print_notes(notes: &[String]) {
    let mut stderr = io::stderr().lock();
    for note in notes {
        // If standard error is gone there is nobody to tell.
        let _ = writeln!(stderr, "note: {note}");
    }
}

/// The plan's one-line summary ([`FaultPlan`]'s `Display`: `2 error rules (50%), 1 rate
/// limit`), and where state is shared if it is.
///
/// [`FaultPlan`]: holdoff_proxy::fault::FaultPlan
fn summary(compiled: &Compiled) -> String {
    let shared = compiled.state.as_ref().map_or_else(String::new, |state| {
        let mode = match state.on_failure {
            OnFailure::FailClosed { .. } => "fail-closed",
            _ => "fail-open",
        };
        let redis = match &state.redis {
            StateRedis::Cluster(seeds) => {
                let seeds: Vec<String> = seeds
                    .iter()
                    .map(|s| holdoff_redis::redacted_url(s))
                    .collect();
                format!("the redis cluster of {}", seeds.join(", "))
            }
            StateRedis::Server(url) => holdoff_redis::redacted_url(url),
            _ => "redis".to_owned(),
        };
        format!("; state shared in {redis} (keys {}*, {mode})", state.prefix)
    });
    format!("{}{shared}", compiled.plan)
}

/// The format `config new` writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum NewFormat {
    Json,
    Yaml,
}

/// `config new`: the `throttle` preset as a file of its own, in a name not taken.
fn new_file(
    name: Option<PathBuf>,
    format: Option<NewFormat>,
    out: &mut impl Write,
) -> Result<(), Failure> {
    let from_name = name.as_deref().and_then(Format::from_path);
    let format = match (format, from_name) {
        (Some(format), _) => format,
        (None, Some(Format::Yaml)) => NewFormat::Yaml,
        (None, _) => NewFormat::Json,
    };
    let name = name.unwrap_or_else(|| match format {
        NewFormat::Json => PathBuf::from("holdoff.json"),
        NewFormat::Yaml => PathBuf::from("holdoff.yaml"),
    });
    if devproxy::is_devproxy_name(&name) {
        return Err(Failure::Usage(format!(
            "{} is Dev Proxy's name for its own config; `config new` writes holdoff's: name it \
             holdoff.json (a Dev Proxy devproxyrc.json works with holdoff as it is)",
            name.display()
        )));
    }
    let preset = preset::text(STARTER).unwrap_or_default();
    let text = match format {
        NewFormat::Json => preset.to_owned(),
        NewFormat::Yaml => {
            let mut json = String::new();
            json_comments::StripComments::new(preset.as_bytes())
                .read_to_string(&mut json)
                .map_err(|err| Failure::Runtime(format!("the preset does not read: {err}")))?;
            let value: serde_json::Value = serde_json::from_str(&json)
                .map_err(|err| Failure::Runtime(format!("the preset does not read: {err}")))?;
            let yaml = serde_yaml_ng::to_string(&value)
                .map_err(|err| Failure::Runtime(format!("cannot write YAML: {err}")))?;
            format!(
                "# holdoff configuration, from the `throttle` preset (`holdoff config preset \
                 throttle` prints it with comments).\n{yaml}"
            )
        }
    };
    let target = free_name(&name);
    fs::write(&target, text)
        .map_err(|err| Failure::Runtime(format!("cannot write {}: {err}", target.display())))?;
    writeln!(out, "Config file created at {}", target.display())?;
    Ok(())
}

/// The preset `config new` starts from: the default of `holdoff proxy` and `run`.
const STARTER: &str = "throttle";

/// `name`, or `stem-1.ext`, `stem-2.ext`, … when taken.
fn free_name(name: &Path) -> PathBuf {
    let stem = name
        .file_stem()
        .map(|stem| stem.to_string_lossy().into_owned())
        .unwrap_or_default();
    let ext = name
        .extension()
        .map(|ext| format!(".{}", ext.to_string_lossy()))
        .unwrap_or_default();
    let mut candidate = name.to_owned();
    let mut next = 1;
    while candidate.exists() {
        candidate = name.with_file_name(format!("{stem}-{next}{ext}"));
        next += 1;
    }
    candidate
}

fn list_presets(out: &mut impl Write) -> Result<(), Failure> {
    let width = preset::PRESETS
        .iter()
        .map(|(name, _)| name.len())
        .max()
        .unwrap_or(0);
    for (name, description) in preset::PRESETS {
        writeln!(out, "{name:width$}  {description}")?;
    }
    Ok(())
}

fn print_preset(name: &str, out: &mut impl Write) -> Result<(), Failure> {
    let Some(text) = preset::text(name) else {
        return Err(Failure::Usage(format!(
            "{} (see `holdoff config preset --list`)",
            preset::unknown(name)
        )));
    };
    out.write_all(text.as_bytes())?;
    Ok(())
}

fn import(file: &Path, target: Option<&Path>, out: &mut impl Write) -> Result<(), Failure> {
    let imported = match holdoff_devproxy::import(file) {
        Ok(imported) => imported,
        Err(errors) => return Err(report(&errors)),
    };
    print_notes(&imported.notes);
    // What is written must run: checked as `holdoff proxy` would, relative paths from the Dev
    // Proxy file's directory, where they were written.
    let base = file.parent().unwrap_or(Path::new("."));
    let compiled = compile::compile(&imported.config, &file.display().to_string(), base);
    let mut config = imported.config;
    if config.schema.is_none() {
        config.schema = Some(schema::SCHEMA_URL.to_owned());
    }
    // Straight from the struct, so the keys keep the order of the schema.
    let json = match serde_json::to_string_pretty(&config) {
        Ok(json) => format!("{json}\n"),
        Err(err) => {
            return Err(Failure::Runtime(format!(
                "failed to write the configuration as JSON: {err}"
            )));
        }
    };
    match target {
        None => out.write_all(json.as_bytes())?,
        Some(path) => {
            if let Err(err) = fs::write(path, json) {
                return Err(Failure::Runtime(format!(
                    "failed to write {}: {err}",
                    path.display()
                )));
            }
            writeln!(out, "Wrote {}.", path.display())?;
        }
    }
    match compiled {
        Ok(_) => Ok(()),
        Err(errors) => {
            let mut stderr = io::stderr().lock();
            let _ = writeln!(
                stderr,
                "holdoff: the imported configuration does not compile; fix these in the Dev \
                 Proxy files (or in the written file) before running it:"
            );
            drop(stderr);
            Err(report(&errors))
        }
    }
}

/// Every error on standard error, one `holdoff: …` line each.
fn report(errors: &ConfigProblems) -> Failure {
    let mut stderr = io::stderr().lock();
    for error in &errors.0 {
        // If standard error is gone there is nobody to tell; the exit code still says it.
        let _ = writeln!(stderr, "holdoff: {error}");
    }
    Failure::Config
}

fn pretty(value: &serde_json::Value) -> String {
    // A `Value` always serializes; were it not to, an empty document says so.
    serde_json::to_string_pretty(value).unwrap_or_default()
}
