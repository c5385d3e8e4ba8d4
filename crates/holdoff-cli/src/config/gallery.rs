//! `holdoff config get NAME`: a sample from Dev Proxy's sample gallery (the `pnp/proxy-samples`
//! repository), saved where Dev Proxy's `devproxy config get` saves it, so that the command
//! Dev Proxy's guidance prints next runs it.
//!
//! The gallery is read through GitHub's REST API alone: the tree of the `main` branch, then
//! each file's raw contents. One base URL thus names the whole gallery, and a test points it at
//! a loopback fake.

use std::fmt::Write as _;
use std::fs;
use std::io::{self, Write};
use std::path::{Component, Path, PathBuf};
use std::time::Duration;

use holdoff_config::{devproxy, preset};
use serde::Deserialize;
use serde_json::json;

use crate::failure::Failure;

/// The gallery Dev Proxy's `config get` reads, as GitHub's API names the repository.
pub(super) const DEFAULT_GALLERY: &str = "https://api.github.com/repos/pnp/proxy-samples";

/// The branch Dev Proxy reads the samples from.
const BRANCH: &str = "main";

/// A file larger than this is not a sample's config: refused rather than written.
const MAX_FILE: u64 = 10 * 1024 * 1024;

/// How long one request to the gallery may take.
const TIMEOUT: Duration = Duration::from_secs(30);

/// What `config get` prints: text for a person, or one JSON object (Dev Proxy's `--output
/// json` fields).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub(super) enum Output {
    #[default]
    Text,
    Json,
}

/// `holdoff config get`'s arguments.
#[derive(Debug, clap::Args)]
pub(super) struct GetArgs {
    /// The sample's name: its folder under `samples/` in the gallery (e.g. openai-throttling).
    name: String,
    /// The gallery, as GitHub's API names its repository.
    #[arg(long, value_name = "URL", env = "HOLDOFF_GALLERY", default_value = DEFAULT_GALLERY)]
    gallery: String,
    /// text, or one JSON object with the folder and the config and mocks files saved.
    #[arg(long, value_name = "FORMAT", value_enum, default_value_t)]
    output: Output,
}

/// GitHub's answer to `GET /repos/{owner}/{repo}/git/trees/{branch}?recursive=1`: only what
/// is read of it.
#[derive(Debug, Deserialize)]
struct Tree {
    tree: Vec<Entry>,
    #[serde(default)]
    truncated: bool,
}

#[derive(Debug, Deserialize)]
struct Entry {
    path: String,
    #[serde(rename = "type")]
    kind: String,
}

/// What a sample saved holds: the files to run holdoff with, and, when there are none, the
/// mocks files (Dev Proxy's rule: a file with `plugins` is a config, one with `mocks` or
/// `responses` a mocks file).
#[derive(Debug, Default, PartialEq, Eq)]
struct Saved {
    config_files: Vec<PathBuf>,
    mock_files: Vec<PathBuf>,
}

/// Runs `holdoff config get`: the sample saved in `~dataFolder/configs/NAME` (`NAME1`, `NAME2`,
/// … when that is taken, as Dev Proxy does), and the command that runs it on `out`.
pub(super) fn get(args: GetArgs, out: &mut impl Write) -> Result<(), Failure> {
    let name = args.name.trim_matches('/');
    if name.is_empty() || Path::new(name).components().any(|c| !is_plain(c)) {
        return Err(Failure::Usage(format!(
            "`{}` is not a sample's name: give the folder's name under samples/ in the gallery, \
             e.g. openai-throttling",
            args.name
        )));
    }
    let data = devproxy::data_folder().ok_or_else(|| {
        Failure::Runtime(
            "cannot tell where Dev Proxy's data folder is: this environment names no home \
             folder (HOME or XDG_CONFIG_HOME); set one and run again"
                .to_owned(),
        )
    })?;
    let gallery = Gallery::new(&args.gallery)?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|err| Failure::Runtime(format!("cannot start the async runtime: {err}")))?;
    let (folder, saved) = runtime.block_on(download(&gallery, name, &data, args.output))?;
    match args.output {
        Output::Json => print_json(name, &folder, &saved, out),
        Output::Text => print_text(name, &folder, &data, &saved, out),
    }
}

fn is_plain(component: Component<'_>) -> bool {
    matches!(component, Component::Normal(_))
}

/// The gallery's API, with the client that reads it.
struct Gallery {
    base: url::Url,
    client: reqwest::Client,
}

impl Gallery {
    fn new(base: &str) -> Result<Gallery, Failure> {
        let base = url::Url::parse(base.trim_end_matches('/'))
            .ok()
            .filter(|url| matches!(url.scheme(), "http" | "https") && url.has_host())
            .ok_or_else(|| {
                Failure::Usage(format!(
                    "--gallery {base:?} is not an http(s) URL; it names the gallery's \
                     repository in GitHub's API, as {DEFAULT_GALLERY} does"
                ))
            })?;
        let client = crate::http::client(TIMEOUT, crate::http::Route::Environment)
            .map_err(Failure::Runtime)?;
        Ok(Gallery { base, client })
    }

    /// `base/segments…`, each segment percent-encoded as a path segment.
    fn url(&self, segments: &[&str]) -> url::Url {
        let mut url = self.base.clone();
        if let Ok(mut path) = url.path_segments_mut() {
            path.pop_if_empty().extend(segments);
        }
        url
    }

    /// A GET with GitHub's headers (and `GITHUB_TOKEN`, when set, for its higher rate limit).
    async fn fetch(&self, url: url::Url, accept: &str) -> Result<reqwest::Response, Reach> {
        let mut request = self
            .client
            .get(url.clone())
            .header("accept", accept)
            .header("x-github-api-version", "2022-11-28");
        if let Some(token) = std::env::var("GITHUB_TOKEN").ok().filter(|t| !t.is_empty()) {
            request = request.bearer_auth(token);
        }
        let response = request.send().await.map_err(|err| Reach::Unreachable {
            url: url.to_string(),
            why: error_chain(&err.without_url()),
        })?;
        let status = response.status();
        if !status.is_success() {
            let limited = status == 429
                || (status == 403
                    && response
                        .headers()
                        .get("x-ratelimit-remaining")
                        .is_some_and(|left| left == "0"));
            return Err(Reach::Refused {
                url: url.to_string(),
                status: status.as_u16(),
                limited,
            });
        }
        Ok(response)
    }

    async fn tree(&self) -> Result<Tree, Reach> {
        let mut url = self.url(&["git", "trees", BRANCH]);
        url.set_query(Some("recursive=1"));
        let response = self
            .fetch(url.clone(), "application/vnd.github+json")
            .await?;
        let body = response.bytes().await.map_err(|err| Reach::Unreachable {
            url: url.to_string(),
            why: error_chain(&err.without_url()),
        })?;
        serde_json::from_slice(&body).map_err(|err| Reach::Unreadable {
            url: url.to_string(),
            why: err.to_string(),
        })
    }

    /// The raw bytes of the file at `path` in the repository.
    async fn file(&self, path: &str) -> Result<Vec<u8>, Reach> {
        let mut segments = vec!["contents"];
        segments.extend(path.split('/'));
        let mut url = self.url(&segments);
        url.set_query(Some(&format!("ref={BRANCH}")));
        let mut response = self
            .fetch(url.clone(), "application/vnd.github.raw+json")
            .await?;
        let too_big = || Reach::Unreadable {
            url: url.to_string(),
            why: format!("the file is larger than {} MiB", MAX_FILE / 1024 / 1024),
        };
        if response.content_length().is_some_and(|len| len > MAX_FILE) {
            return Err(too_big());
        }
        let mut bytes = Vec::new();
        while let Some(chunk) = response.chunk().await.map_err(|err| Reach::Unreachable {
            url: url.to_string(),
            why: error_chain(&err.without_url()),
        })? {
            bytes.extend_from_slice(&chunk);
            if bytes.len() as u64 > MAX_FILE {
                return Err(too_big());
            }
        }
        Ok(bytes)
    }
}

/// Why the gallery could not be read.
#[derive(Debug)]
enum Reach {
    /// No answer: offline, a name that does not resolve, a refused connection, a timeout.
    Unreachable { url: String, why: String },
    /// An answer other than success.
    Refused {
        url: String,
        status: u16,
        limited: bool,
    },
    /// An answer that is not what GitHub's API sends.
    Unreadable { url: String, why: String },
}

impl Reach {
    /// The failure to report for the sample `name`: what went wrong, then what to do instead
    /// (the built-in preset that stands nearest, if one does).
    fn failure(self, name: &str) -> Failure {
        let what = match self {
            Reach::Unreachable { url, why } => {
                format!("could not reach the sample gallery ({url}: {why})")
            }
            Reach::Refused {
                url,
                status,
                limited: true,
            } => format!(
                "the sample gallery refused to answer ({url}: status {status}, GitHub's rate \
                 limit; set GITHUB_TOKEN to a token of yours for a higher one, or try later)"
            ),
            Reach::Refused { url, status, .. } => {
                format!("the sample gallery answered status {status} for {url}")
            }
            Reach::Unreadable { url, why } => {
                format!("could not read the sample gallery's answer ({url}: {why})")
            }
        };
        Failure::Runtime(format!("{what}.{}", instead(name)))
    }
}

/// What to run instead of the sample `name`: the nearest built-in preset, or the list.
fn instead(name: &str) -> String {
    match preset::nearest(name) {
        Some(near) => format!(
            " The built-in preset `{near}` stands nearest to `{name}`, and needs no download: \
             `holdoff run --preset {near} -- COMMAND` (`holdoff config preset {near}` prints it)."
        ),
        None => " holdoff's built-in presets need no download: `holdoff config preset` lists them."
            .to_owned(),
    }
}

/// The error and its causes, as one line: reqwest's own message alone says only "error
/// sending request".
fn error_chain(err: &(dyn std::error::Error + 'static)) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(cause) = source {
        let line = cause.to_string();
        if !text.contains(&line) {
            let _ = write!(text, ": {line}");
        }
        source = cause.source();
    }
    text
}

/// Reads the sample `name`'s files from the gallery and saves them under `data/configs`,
/// whole or not at all: they are written to a folder of their own first, renamed into place
/// once every file is there.
async fn download(
    gallery: &Gallery,
    name: &str,
    data: &Path,
    output: Output,
) -> Result<(PathBuf, Saved), Failure> {
    let tree = gallery.tree().await.map_err(|reach| reach.failure(name))?;
    let prefix = format!("samples/{}/", name.to_ascii_lowercase());
    let files: Vec<&Entry> = tree
        .tree
        .iter()
        .filter(|entry| {
            entry.kind == "blob" && entry.path.to_ascii_lowercase().starts_with(&prefix)
        })
        .collect();
    if files.is_empty() {
        return Err(no_such_sample(name, &tree));
    }
    if tree.truncated {
        eprintln!(
            "holdoff: warning: the gallery's list of files was cut short by GitHub; the sample \
             may be missing files"
        );
    }
    let configs = data.join("configs");
    fs::create_dir_all(&configs).map_err(|err| cannot_write(&configs, &err))?;
    let staging = tempfile::Builder::new()
        .prefix(&format!(".{name}."))
        .tempdir_in(&configs)
        .map_err(|err| cannot_write(&configs, &err))?;
    if output == Output::Text {
        eprintln!("Downloading the sample `{name}` ({} files)…", files.len());
    }
    for entry in &files {
        let inside = &entry.path[prefix.len()..];
        let relative = Path::new(inside);
        if inside.is_empty() || relative.components().any(|c| !is_plain(c)) {
            return Err(Failure::Runtime(format!(
                "the gallery lists a file outside the sample ({}); nothing was saved",
                entry.path
            )));
        }
        let bytes = gallery
            .file(&entry.path)
            .await
            .map_err(|reach| reach.failure(name))?;
        let target = staging.path().join(relative);
        if let Some(parent) = target.parent() {
            fs::create_dir_all(parent).map_err(|err| cannot_write(parent, &err))?;
        }
        fs::write(&target, bytes).map_err(|err| cannot_write(&target, &err))?;
    }
    let folder = free_folder(&configs, name);
    let staged = staging.keep();
    fs::rename(&staged, &folder).map_err(|err| {
        let _ = fs::remove_dir_all(&staged);
        cannot_write(&folder, &err)
    })?;
    let saved = classify(&folder).map_err(|err| cannot_write(&folder, &err))?;
    Ok((folder, saved))
}

/// `configs/NAME`, or the first of `NAME1`, `NAME2`, … that does not exist: a sample saved
/// before, and perhaps edited since, is never overwritten (Dev Proxy's rule).
fn free_folder(configs: &Path, name: &str) -> PathBuf {
    let base = configs.join(name);
    let mut folder = base.clone();
    let mut next = 1;
    while folder.exists() {
        folder = configs.join(format!("{name}{next}"));
        next += 1;
    }
    folder
}

fn cannot_write(path: &Path, err: &io::Error) -> Failure {
    Failure::Runtime(format!(
        "cannot save the sample in {}: {err}; nothing was left half-written",
        path.display()
    ))
}

/// The gallery has no sample `name`: say so, with the samples whose names are near and the
/// nearest preset.
fn no_such_sample(name: &str, tree: &Tree) -> Failure {
    let mut samples: Vec<&str> = tree
        .tree
        .iter()
        .filter(|entry| entry.kind == "tree")
        .filter_map(|entry| entry.path.strip_prefix("samples/"))
        .filter(|rest| !rest.is_empty() && !rest.contains('/'))
        .collect();
    samples.sort_by(|a, b| {
        let score = |sample: &str| strsim::jaro_winkler(&name.to_ascii_lowercase(), sample);
        score(b).total_cmp(&score(a))
    });
    let near: Vec<String> = samples
        .iter()
        .filter(|sample| strsim::jaro_winkler(&name.to_ascii_lowercase(), sample) >= 0.8)
        .take(3)
        .map(|sample| format!("`{sample}`"))
        .collect();
    let did_you_mean = match near.as_slice() {
        [] => String::new(),
        near => format!(" Samples with near names: {}.", near.join(", ")),
    };
    Failure::Runtime(format!(
        "the sample gallery has no sample `{name}` (no folder samples/{name}/).{did_you_mean}{}",
        instead(name)
    ))
}

/// Dev Proxy's reading of a saved sample: every JSON or YAML file in it (at any depth) with
/// `plugins` is a config to run; with `mocks` or `responses`, a mocks file. Sorted, shallowest
/// first.
fn classify(folder: &Path) -> io::Result<Saved> {
    let mut saved = Saved::default();
    let mut pending = vec![folder.to_owned()];
    while let Some(dir) = pending.pop() {
        for entry in fs::read_dir(&dir)? {
            let path = entry?.path();
            if path.is_dir() {
                pending.push(path);
                continue;
            }
            let is_config_format =
                path.extension()
                    .and_then(|ext| ext.to_str())
                    .is_some_and(|ext| {
                        ["json", "jsonc", "yaml", "yml"]
                            .iter()
                            .any(|known| ext.eq_ignore_ascii_case(known))
                    });
            if !is_config_format {
                continue;
            }
            let text = fs::read_to_string(&path)
                .unwrap_or_default()
                .to_ascii_lowercase();
            let has = |key: &str| {
                text.contains(&format!("\"{key}\":")) || text.contains(&format!("{key}:"))
            };
            if has("plugins") {
                saved.config_files.push(path);
            } else if has("mocks") || has("responses") {
                saved.mock_files.push(path);
            }
        }
    }
    let order = |path: &PathBuf| (path.components().count(), path.clone());
    saved.config_files.sort_by_key(order);
    saved.mock_files.sort_by_key(order);
    if !saved.config_files.is_empty() {
        saved.mock_files.clear();
    }
    Ok(saved)
}

/// `path` as Dev Proxy's guidance writes it: under `~dataFolder` when it is in the data folder.
fn shown(path: &Path, data: &Path) -> String {
    match path.strip_prefix(data) {
        Ok(rest) => format!("~dataFolder/{}", rest.display()),
        Err(_) => path.display().to_string(),
    }
}

fn print_text(
    name: &str,
    folder: &Path,
    data: &Path,
    saved: &Saved,
    out: &mut impl Write,
) -> Result<(), Failure> {
    writeln!(out, "Saved the sample `{name}` in {}", folder.display())?;
    if let Some(first) = saved.config_files.first() {
        writeln!(
            out,
            "\nTo run holdoff with it (Dev Proxy's command, as it is):"
        )?;
        for config in &saved.config_files {
            writeln!(out, "  holdoff --config-file \"{}\"", shown(config, data))?;
        }
        writeln!(
            out,
            "or in front of one command, with a verdict on its retries:\n  holdoff run \
             --config-file \"{}\" -- COMMAND",
            shown(first, data)
        )?;
    } else if !saved.mock_files.is_empty() {
        writeln!(
            out,
            "\nThe sample has mocks and no config. To serve them, name the file as \
             `mocksFile` in a devproxyrc.json's MockResponsePlugin section:"
        )?;
        for mocks in &saved.mock_files {
            writeln!(out, "  {}", shown(mocks, data))?;
        }
    } else {
        writeln!(
            out,
            "\nThe sample has no config or mocks file for holdoff to run: read its README."
        )?;
    }
    Ok(())
}

fn print_json(
    name: &str,
    folder: &Path,
    saved: &Saved,
    out: &mut impl Write,
) -> Result<(), Failure> {
    let paths = |paths: &[PathBuf]| -> Vec<String> {
        paths
            .iter()
            .map(|path| path.display().to_string())
            .collect()
    };
    let value = json!({
        "configId": name,
        "path": folder.display().to_string(),
        "configFiles": paths(&saved.config_files),
        "mockFiles": paths(&saved.mock_files),
    });
    writeln!(out, "{value}")?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use holdoff_testkit::TempDir;

    #[test]
    fn a_sample_is_read_as_dev_proxy_reads_it_configs_first() {
        let dir = TempDir::new("gallery-classify");
        std::fs::create_dir_all(dir.join(".devproxy")).unwrap();
        dir.write(
            ".devproxy/devproxyrc.json",
            r#"{ "plugins": [], "urlsToWatch": [] }"#,
        );
        dir.write(".devproxy/mocks.json", r#"{ "mocks": [] }"#);
        dir.write("README.md", "plugins: in prose");
        std::fs::create_dir_all(dir.join("assets")).unwrap();
        dir.write("assets/sample.json", r#"{ "sample": "no" }"#);
        let saved = classify(dir.path()).unwrap();
        assert_eq!(
            saved,
            Saved {
                config_files: vec![dir.join(".devproxy/devproxyrc.json")],
                mock_files: vec![],
            }
        );
        std::fs::remove_file(dir.join(".devproxy/devproxyrc.json")).unwrap();
        dir.write(
            "devproxyrc.yaml",
            "plugins:\n  - name: MockResponsePlugin\n",
        );
        let saved = classify(dir.path()).unwrap();
        assert_eq!(saved.config_files, vec![dir.join("devproxyrc.yaml")]);
        std::fs::remove_file(dir.join("devproxyrc.yaml")).unwrap();
        let saved = classify(dir.path()).unwrap();
        assert_eq!(saved.mock_files, vec![dir.join(".devproxy/mocks.json")]);
    }

    #[test]
    fn a_folder_taken_gets_a_number_as_in_dev_proxy() {
        let dir = TempDir::new("gallery-free-folder");
        assert_eq!(free_folder(dir.path(), "s"), dir.join("s"));
        std::fs::create_dir(dir.join("s")).unwrap();
        assert_eq!(free_folder(dir.path(), "s"), dir.join("s1"));
        std::fs::create_dir(dir.join("s1")).unwrap();
        assert_eq!(free_folder(dir.path(), "s"), dir.join("s2"));
    }

    #[test]
    fn paths_in_the_data_folder_are_shown_under_its_token() {
        let data = Path::new("/home/u/.config/dev-proxy");
        assert_eq!(
            shown(&data.join("configs/x/.devproxy/devproxyrc.json"), data),
            "~dataFolder/configs/x/.devproxy/devproxyrc.json"
        );
        assert_eq!(
            shown(Path::new("/elsewhere/rc.json"), data),
            "/elsewhere/rc.json"
        );
    }

    #[test]
    fn file_urls_encode_each_segment_of_the_path() {
        let gallery = Gallery::new("http://127.0.0.1:9/repos/pnp/proxy-samples/").unwrap();
        assert_eq!(
            gallery
                .url(&["contents", "samples", "a b", "c#d.json"])
                .as_str(),
            "http://127.0.0.1:9/repos/pnp/proxy-samples/contents/samples/a%20b/c%23d.json"
        );
        assert!(matches!(
            Gallery::new("ftp://example.invalid/x"),
            Err(Failure::Usage(_))
        ));
    }

    #[test]
    fn a_failure_names_the_nearest_preset() {
        let Failure::Runtime(message) = (Reach::Unreachable {
            url: "https://api.github.com/x".into(),
            why: "dns error".into(),
        })
        .failure("openai-throttling") else {
            panic!("a runtime failure")
        };
        assert!(
            message.starts_with(
                "could not reach the sample gallery (https://api.github.com/x: dns error)."
            ),
            "{message}"
        );
        assert!(
            message.contains("`holdoff run --preset openai -- COMMAND`"),
            "{message}"
        );
    }
}
