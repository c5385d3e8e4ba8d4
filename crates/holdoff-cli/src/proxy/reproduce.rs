//! The command line that repeats a run, as the reports show it: holdoff's own, less the
//! options that say only where output goes, with the seed the run drew.

use std::ffi::OsString;

/// Options that say only where output goes: left out of the command line that repeats a run.
const OUTPUT_OPTIONS: [&str; 6] = [
    "--report-json",
    "--report-junit",
    "--report-md",
    "--report-html",
    "--events",
    "--log-file",
];

/// The command line that repeats a run, from holdoff's own (`args`, program first): `holdoff`
/// and every option as given, but those that say only where output goes ([`OUTPUT_OPTIONS`],
/// with their values); everything after `--` is the command, kept as it is.
pub(crate) fn reproducible_argv(args: impl IntoIterator<Item = OsString>) -> Vec<String> {
    let mut argv = vec!["holdoff".to_owned()];
    let mut args = args
        .into_iter()
        .skip(1)
        .map(|arg| arg.to_string_lossy().into_owned());
    while let Some(arg) = args.next() {
        if arg == "--" {
            argv.push(arg);
            argv.extend(args);
            break;
        }
        if OUTPUT_OPTIONS.contains(&arg.as_str()) {
            // Its value.
            args.next();
            continue;
        }
        let joined = OUTPUT_OPTIONS
            .iter()
            .any(|option| arg.strip_prefix(option).is_some_and(|v| v.starts_with('=')));
        if !joined {
            argv.push(arg);
        }
    }
    argv
}

/// Adds `--seed SEED` to `argv`, before the command if there is one.
pub(super) fn with_seed(argv: &mut Vec<String>, seed: u64) {
    let at = argv
        .iter()
        .position(|arg| arg == "--")
        .unwrap_or(argv.len());
    argv.splice(at..at, ["--seed".to_owned(), seed.to_string()]);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(args: &[&str]) -> Vec<String> {
        reproducible_argv(args.iter().map(OsString::from))
    }

    mod reproducible_argv {
        use super::*;

        #[test]
        fn keeps_what_shapes_the_run_and_drops_where_output_goes() {
            assert_eq!(
                argv(&[
                    "/usr/local/bin/holdoff",
                    "run",
                    "-c",
                    "holdoff.yaml",
                    "--report-json",
                    "r.json",
                    "-f",
                    "100",
                    "--events=e.jsonl",
                    "--log-file",
                    "proxy.log",
                    "--judge-key",
                    "url",
                    "--report-md",
                    "r.md",
                    "--",
                    "sh",
                    "-c",
                    "curl --events x",
                    "--report-json",
                ]),
                [
                    "holdoff",
                    "run",
                    "-c",
                    "holdoff.yaml",
                    "-f",
                    "100",
                    "--judge-key",
                    "url",
                    "--",
                    "sh",
                    "-c",
                    "curl --events x",
                    "--report-json",
                ]
            );
        }

        #[test]
        fn takes_a_proxy_command_line_without_a_command() {
            assert_eq!(
                argv(&[
                    "holdoff",
                    "proxy",
                    "--preset",
                    "github",
                    "--report-html",
                    "r.html"
                ]),
                ["holdoff", "proxy", "--preset", "github"]
            );
        }
    }

    mod with_seed {
        use super::*;

        #[test]
        fn goes_before_the_command_or_at_the_end() {
            let mut run = argv(&["holdoff", "run", "-f", "50", "--", "npm", "test"]);
            with_seed(&mut run, 7);
            assert_eq!(
                run,
                [
                    "holdoff", "run", "-f", "50", "--seed", "7", "--", "npm", "test"
                ]
            );
            let mut proxy = argv(&["holdoff", "proxy"]);
            with_seed(&mut proxy, 7);
            assert_eq!(proxy, ["holdoff", "proxy", "--seed", "7"]);
        }
    }
}
