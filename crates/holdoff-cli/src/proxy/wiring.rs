//! What a run of the proxy builds, decided before anything is built: [`wire`] turns the
//! [`Settings`] (the options, checked, and the config, compiled) into a [`Wiring`] without
//! binding a socket, spawning a task or reading a clock; [`super::start`] builds it. So which
//! stages a preset and the flags give, which seed a run uses and what it logs are tested here
//! without a network.

use std::path::{Path, PathBuf};
use std::time::Duration;

use holdoff_config::compile::StateConfig;
use holdoff_proxy::ProxyConfig;
use holdoff_proxy::fault::FaultPlan;
use holdoff_proxy::judge::{KeyMode, Penalty};
use holdoff_proxy::report::RunInfo;

use super::faults::{Loaded, Overrides, Source};
use super::options::{NoBackoffArg, Options, Output, PenaltyArg};
use super::process_tree::ProcessTree;
use super::reproduce::with_seed;

/// A run as the options and the loaded config say it: checked, with nothing opened or bound.
pub(super) struct Settings {
    pub(super) config: ProxyConfig,
    /// `None` with `--pass-through`.
    faults: Option<(Source, Loaded)>,
    /// Which source was found, when none was asked for: logged at start.
    found: Option<String>,
    judge_key: Option<KeyMode>,
    judge_penalty: Option<PenaltyArg>,
    judge_min_backoff: Duration,
    judge_max_windows: usize,
    /// Whether a retry without backoff after a hint-less throttle fails the run.
    fail_on_no_backoff: bool,
    seed: Option<u64>,
    overrides: Overrides,
    /// Whether the config is reloaded when its files change (not with `--no-watch`).
    watch_files: bool,
    output: Output,
    /// The log is off (`--log-level off`, Dev Proxy's `none`): no summaries on stderr either.
    quiet: bool,
    /// `--control-port` and `--metrics-port`.
    control_port: Option<u16>,
    metrics_port: Option<u16>,
    /// The command line that repeats the run ([`super::reproduce::reproducible_argv`]), when
    /// known.
    pub(super) argv: Option<Vec<String>>,
    /// `holdoff run --allow-no-traffic`.
    pub(super) allow_no_traffic: bool,
    /// `holdoff proxy --timeout`: stop after this long without a request.
    pub(super) idle_timeout: Option<Duration>,
    /// `--watch-pids`, `--watch-process-names`.
    processes: Option<ProcessTree>,
    /// Whether Dev Proxy's `POST /proxy/stopProxy` stops the proxy (`holdoff proxy`; not
    /// `holdoff run`, whose proxy lives as long as its command).
    pub(super) api_stop: bool,
}

impl Settings {
    /// The settings `options`, the proxy's `config` and the loaded `faults` (`None` with
    /// `--pass-through`) give; `quiet` when the log is off.
    ///
    /// URL patterns on the command line win; without any, the config file's.
    pub(super) fn new(
        options: &Options,
        cwd: &Path,
        mut config: ProxyConfig,
        faults: Option<(Source, Loaded)>,
        quiet: bool,
    ) -> Settings {
        if config.urls_to_watch.is_empty()
            && let Some(urls) = faults
                .as_ref()
                .and_then(|(_, loaded)| loaded.compiled.urls_to_watch.as_ref())
        {
            config.urls_to_watch = urls.clone();
        }
        // Dev Proxy's URL discovery watches every URL.
        if options.dev_proxy.discover()
            && config.urls_to_watch.is_empty()
            && let Ok(everything) = "*".parse()
        {
            config.urls_to_watch = vec![everything];
        }
        let asked = options.config.is_some()
            || options.preset.is_some()
            || options.devproxy_config.is_some();
        let found = match &faults {
            Some((source, _)) if !asked => Some(source.found()),
            _ => None,
        };
        Settings {
            config,
            faults,
            found,
            judge_key: options.judge_key.clone(),
            judge_penalty: options.judge_penalty,
            judge_min_backoff: options.judge_min_backoff,
            judge_max_windows: options.judge_max_windows,
            fail_on_no_backoff: options.judge_no_backoff == NoBackoffArg::Fail,
            seed: options.seed,
            overrides: Overrides::from_options(options, cwd),
            watch_files: !options.dev_proxy.no_watch(),
            output: options.output,
            quiet,
            control_port: options.control_port,
            metrics_port: options.metrics_port,
            argv: None,
            allow_no_traffic: false,
            idle_timeout: None,
            processes: ProcessTree::new(&options.watch_pids, &options.watch_process_names),
            api_stop: false,
        }
    }
}

/// Everything a run builds, and what it logs and records of it.
pub(super) struct Wiring {
    /// The server's settings: where it listens, what it watches, its timeouts.
    pub(super) config: ProxyConfig,
    /// The judge and the faults; `None` with `--pass-through`.
    pub(super) stages: Option<StagesWiring>,
    /// Whether a metrics stage counts the requests (and, with stages, a window book shows the
    /// judge's windows): when the control API, the metrics or `--timeout` reads them.
    pub(super) counted: bool,
    /// The side servers asked for, each on its loopback port.
    pub(super) side_servers: Vec<SideServer>,
    /// `holdoff proxy --timeout`.
    pub(super) idle_timeout: Option<Duration>,
    /// `--watch-pids`, `--watch-process-names`.
    pub(super) processes: Option<ProcessTree>,
    /// What the event log's start records; its `proxy_url` is left empty, to be filled in
    /// once the server is bound.
    pub(super) run: RunInfo,
    pub(super) output: Output,
    pub(super) quiet: bool,
    /// See [`Settings`]' field of the name.
    pub(super) api_stop: bool,
    /// The config file the faults come from, if a file: what Dev Proxy's `GET /proxy` names.
    pub(super) config_file: Option<PathBuf>,
    /// The config's `mockRequest`: what `POST /proxy/mockRequest` sends.
    pub(super) mock_request: Option<holdoff_config::compile::MockRequest>,
}

/// The judge and the faults, with what they are built from.
pub(super) struct StagesWiring {
    /// What a throttle's window is keyed by: `--judge-key`, else the config's, else the
    /// default.
    pub(super) key: KeyMode,
    /// `--judge-penalty`, else the config's, else the default.
    pub(super) penalty: Penalty,
    pub(super) min_backoff: Duration,
    /// `--judge-max-windows`.
    pub(super) max_windows: usize,
    /// The config's plan, with the command line's overrides.
    pub(super) plan: FaultPlan,
    /// `--seed`, else the config's, else the one drawn.
    pub(super) seed: u64,
    /// The config's `state` section: a store shared with other replicas.
    pub(super) state: Option<StateConfig>,
    /// What reloads the plan when the source's files change.
    pub(super) reload: Reload,
    /// Logged once the proxy listens.
    pub(super) log: FaultsLog,
}

/// Where the faults come from, to load them again when their files change.
pub(super) struct Reload {
    pub(super) source: Source,
    /// The config file and every data file it read.
    pub(super) files: Vec<PathBuf>,
    pub(super) overrides: Overrides,
}

/// What the faults are, for the log.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct FaultsLog {
    /// Which source was found, when none was asked for.
    pub(super) found: Option<String>,
    /// What a Dev Proxy config asked for that holdoff does differently, and what the config
    /// sets that is valid but likely not meant, each after its source.
    pub(super) notes: Vec<String>,
    /// `faults from SOURCE: PLAN`.
    pub(super) describe: String,
}

/// A server beside the proxy, on a loopback port (0: a free one).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum SideServer {
    /// `--control-port`: the control API, metrics included.
    Control(u16),
    /// `--metrics-port`: the metrics alone.
    Metrics(u16),
}

impl SideServer {
    /// `control API` or `metrics`, as the start's lines and
    /// [`super::serving::Serving::endpoints`] name it.
    pub(super) fn what(self) -> &'static str {
        match self {
            SideServer::Control(_) => "control API",
            SideServer::Metrics(_) => "metrics",
        }
    }

    pub(super) fn port(self) -> u16 {
        match self {
            SideServer::Control(port) | SideServer::Metrics(port) => port,
        }
    }
}

/// What `settings` build for `command` (what `holdoff run` runs). `drawn` is the seed used
/// when neither `--seed` nor the config gives one; it is then added to the command line that
/// repeats the run.
pub(super) fn wire(settings: Settings, command: Option<Vec<String>>, drawn: u64) -> Wiring {
    let Settings {
        config,
        faults,
        found,
        judge_key,
        judge_penalty,
        judge_min_backoff,
        judge_max_windows,
        fail_on_no_backoff,
        seed,
        overrides,
        watch_files,
        output,
        quiet,
        control_port,
        metrics_port,
        mut argv,
        allow_no_traffic,
        idle_timeout,
        processes,
        api_stop,
    } = settings;
    let mut mock_request = None;
    let stages = faults.map(|(source, loaded)| {
        let Loaded {
            mut compiled,
            files,
            notes,
        } = loaded;
        mock_request = compiled.mock_request.take();
        let penalty = match judge_penalty {
            Some(PenaltyArg::None) => Penalty::None,
            Some(PenaltyArg::Sliding) => Penalty::Sliding,
            None => compiled.judge_penalty.unwrap_or_default(),
        };
        let seed = seed.or(compiled.seed).unwrap_or_else(|| {
            if let Some(argv) = &mut argv {
                with_seed(argv, drawn);
            }
            drawn
        });
        let plan = overrides.apply(compiled.plan);
        StagesWiring {
            key: judge_key.or(compiled.judge_key).unwrap_or_default(),
            penalty,
            min_backoff: judge_min_backoff,
            max_windows: judge_max_windows,
            log: FaultsLog {
                found,
                notes: notes
                    .iter()
                    .map(|note| format!("{source}: {note}"))
                    .collect(),
                describe: format!("faults from {source}: {plan}"),
            },
            plan,
            seed,
            state: compiled.state,
            reload: Reload {
                source,
                // Nothing to watch: the reload task ends at once.
                files: if watch_files { files } else { Vec::new() },
                overrides,
            },
        }
    });
    let side_servers = [
        control_port.map(SideServer::Control),
        metrics_port.map(SideServer::Metrics),
    ]
    .into_iter()
    .flatten()
    .collect();
    let run = RunInfo {
        seed: stages.as_ref().map(|stages| stages.seed),
        source: stages.as_ref().map_or_else(
            || "pass-through".to_owned(),
            |stages| stages.reload.source.to_string(),
        ),
        command,
        proxy_url: String::new(),
        judge_key: stages
            .as_ref()
            .map(|stages| stages.key.name())
            .unwrap_or_default(),
        argv,
        allow_no_traffic,
        fail_on_no_backoff,
    };
    let config_file = stages
        .as_ref()
        .and_then(|stages| stages.reload.source.path())
        .map(Path::to_owned);
    Wiring {
        config,
        stages,
        // The metrics stage sees every request first, so it also tells when the proxy is idle.
        counted: control_port.is_some() || metrics_port.is_some() || idle_timeout.is_some(),
        side_servers,
        idle_timeout,
        processes,
        run,
        output,
        quiet,
        api_stop,
        config_file,
        mock_request,
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;
    use holdoff_proxy::fault::{Rate, RetryAfterForm};

    use super::*;
    use crate::proxy::faults;

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(flatten)]
        options: Options,
    }

    /// The settings `args` give, the faults loaded as `holdoff proxy` loads them, in a
    /// directory with no config file.
    fn settings(args: &[&str]) -> Settings {
        let options = Cli::try_parse_from(std::iter::once("holdoff").chain(args.iter().copied()))
            .unwrap_or_else(|err| panic!("{err}"))
            .options;
        let cwd = Path::new("/nonexistent-holdoff-dir");
        let loaded = faults::from_options(&options, cwd).unwrap_or_else(|err| panic!("{err}"));
        Settings::new(&options, cwd, options.config(), loaded, false)
    }

    /// A directory with `holdoff.json` holding `text`, and the file's path.
    fn config_file(text: &str) -> (holdoff_testkit::TempDir, String) {
        let dir = holdoff_testkit::TempDir::new("wiring");
        dir.write("holdoff.json", text);
        let path = dir.join("holdoff.json").display().to_string();
        (dir, path)
    }

    fn argv(args: &[&str]) -> Option<Vec<String>> {
        Some(args.iter().map(|&arg| arg.to_owned()).collect())
    }

    mod settings_new {
        use super::*;

        #[test]
        fn says_which_source_was_found_only_when_none_was_asked_for() {
            let found = settings(&[]).found.unwrap_or_default();
            assert!(found.contains("using the `throttle` preset"), "{found}");
            assert_eq!(settings(&["--preset", "throttle"]).found, None);
            assert_eq!(settings(&["--pass-through"]).found, None);
        }

        #[test]
        fn watches_the_configs_urls_unless_the_command_line_names_some() {
            let (_dir, file) = config_file(r#"{ "urlsToWatch": ["https://api.example.com/*"] }"#);
            let from_file = settings(&["-c", &file]).config.urls_to_watch;
            assert_eq!(from_file.len(), 1);
            let given = settings(&["-c", &file, "-u", "https://a.test/*", "-u", "!x"]);
            assert_eq!(given.config.urls_to_watch.len(), 2);
        }
    }

    mod wire {
        use super::*;

        #[test]
        fn builds_the_judge_and_the_faults_of_a_preset() {
            let wiring = wire(settings(&["--preset", "flaky", "--seed", "7"]), None, 1);
            let stages = wiring.stages.expect("a preset gives stages");
            assert_eq!(stages.reload.source, Source::Preset("flaky".to_owned()));
            assert!(stages.reload.files.is_empty(), "a preset has no files");
            assert!(
                stages
                    .log
                    .describe
                    .starts_with("faults from preset flaky: "),
                "{}",
                stages.log.describe
            );
            assert_eq!(stages.key, KeyMode::default());
            assert_eq!(stages.penalty, Penalty::None);
            assert_eq!(stages.min_backoff, Duration::from_millis(100));
            assert_eq!(wiring.run.source, "preset flaky");
            assert_eq!(wiring.run.judge_key, KeyMode::default().name());
        }

        #[test]
        fn builds_no_stages_to_pass_through() {
            let wiring = wire(settings(&["--pass-through"]), None, 1);
            assert!(wiring.stages.is_none());
            assert_eq!(wiring.run.source, "pass-through");
            assert_eq!(wiring.run.seed, None);
            assert_eq!(wiring.run.judge_key, "");
        }

        #[test]
        fn takes_the_judges_settings_from_the_flags_over_the_config() {
            let (_dir, file) =
                config_file(r#"{ "judge": { "key": "host", "penalty": "sliding" } }"#);
            let from_file = wire(settings(&["-c", &file]), None, 1);
            let stages = from_file.stages.expect("stages");
            assert_eq!(stages.key.name(), "host");
            assert_eq!(stages.penalty, Penalty::Sliding);
            assert_eq!(stages.reload.files, [PathBuf::from(&file)]);

            let flags = [
                "-c",
                &file,
                "--judge-key",
                "url",
                "--judge-penalty",
                "none",
                "--judge-min-backoff",
                "1s",
                "--judge-no-backoff",
                "fail",
            ];
            let wiring = wire(settings(&flags), None, 1);
            assert_eq!(wiring.run.judge_key, "url");
            assert!(wiring.run.fail_on_no_backoff);
            let stages = wiring.stages.expect("stages");
            assert_eq!(stages.penalty, Penalty::None);
            assert_eq!(stages.min_backoff, Duration::from_secs(1));
        }

        #[test]
        fn uses_the_seed_flag_over_the_configs_over_the_one_drawn() {
            let (_dir, file) = config_file(r#"{ "seed": 5 }"#);
            let seed = |args: &[&str]| {
                wire(settings(args), None, 42)
                    .stages
                    .map(|stages| stages.seed)
            };
            assert_eq!(seed(&["-c", &file, "--seed", "7"]), Some(7));
            assert_eq!(seed(&["-c", &file]), Some(5));
            assert_eq!(seed(&[]), Some(42));
        }

        #[test]
        fn adds_a_drawn_seed_to_the_command_line_that_repeats_the_run() {
            let mut drawn = settings(&["-f", "50"]);
            drawn.argv = argv(&["holdoff", "run", "-f", "50", "--", "npm", "test"]);
            let wiring = wire(drawn, Some(vec!["npm".into(), "test".into()]), 42);
            assert_eq!(wiring.run.seed, Some(42));
            assert_eq!(
                wiring.run.argv,
                argv(&[
                    "holdoff", "run", "-f", "50", "--seed", "42", "--", "npm", "test"
                ])
            );
            assert_eq!(wiring.run.command, argv(&["npm", "test"]));

            let mut given = settings(&["--seed", "7"]);
            given.argv = argv(&["holdoff", "proxy", "--seed", "7"]);
            let wiring = wire(given, None, 42);
            assert_eq!(wiring.run.seed, Some(7));
            assert_eq!(wiring.run.argv, argv(&["holdoff", "proxy", "--seed", "7"]));
        }

        #[test]
        fn counts_requests_only_for_the_side_servers_or_the_idle_timeout() {
            let plain = wire(settings(&[]), None, 1);
            assert!(!plain.counted);
            assert!(plain.side_servers.is_empty());

            let both = wire(
                settings(&["--metrics-port", "9", "--control-port", "0"]),
                None,
                1,
            );
            assert!(both.counted);
            assert_eq!(
                both.side_servers,
                [SideServer::Control(0), SideServer::Metrics(9)]
            );

            let mut idle = settings(&[]);
            idle.idle_timeout = Some(Duration::from_secs(3));
            let idle = wire(idle, None, 1);
            assert!(idle.counted);
            assert!(idle.side_servers.is_empty());
        }

        #[test]
        fn applies_the_command_lines_overrides_to_the_plan() {
            let stages = |args: &[&str]| wire(settings(args), None, 1).stages.expect("stages");
            let never = Rate::percent(0.0);
            let preset = stages(&[]);
            assert!(
                preset
                    .plan
                    .errors
                    .iter()
                    .any(|rule| Some(rule.rate) != never)
            );
            let overridden = stages(&["-f", "0", "--retry-after-form", "http-date"]);
            assert!(!overridden.plan.errors.is_empty());
            assert!(
                overridden
                    .plan
                    .errors
                    .iter()
                    .all(|rule| Some(rule.rate) == never)
            );
            assert_eq!(overridden.plan.retry_after_form, RetryAfterForm::HttpDate);
            // Reloading applies them again.
            assert_eq!(overridden.reload.overrides.failure_rate, never);
        }
    }
}
