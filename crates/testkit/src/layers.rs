//! A crate's layers point one way: no module imports, directly or through others, a module
//! that imports it back. [`top_level_cycles`] checks the top-level modules (`proxy`, `judge`,
//! `fault`, `report`, …), [`file_cycles`] the files; each crate that keeps its layers runs
//! both from a test of its own (`tests/layers.rs`), and on a cycle the message names the
//! modules and, for each arrow, the file and the path that makes it.
//!
//! The imports are read as text, which is enough for a crate that names other modules only as
//! `crate::…`, `super::…` or through the crate root's re-exports: comments and test modules
//! (`#[cfg(test)]` to the end of the file, `tests.rs`) are left out, and so are a `mod.rs`'s
//! `pub use` re-exports of its own children, which document a folder's face rather than
//! depend on it. A real tool (`cargo modules dependencies --acyclic`) builds rust-analyzer,
//! some ten minutes on this project's two cores, for the same answer.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

/// A module: its path below the crate root (`["judge", "stage"]`); `[]` is `lib.rs`.
type Module = Vec<String>;

struct Crate {
    src: PathBuf,
    /// Every module with its file.
    files: BTreeMap<Module, PathBuf>,
    /// Names the crate root re-exports, with the top-level module each comes from.
    root_exports: BTreeMap<String, String>,
}

impl Crate {
    fn read(src: &Path) -> Crate {
        let mut files = BTreeMap::new();
        collect(src, src, &mut files);
        let lib = fs::read_to_string(src.join("lib.rs")).expect("src/lib.rs");
        let mut root_exports = BTreeMap::new();
        for statement in code(&lib).split(';') {
            let statement = statement.trim();
            let Some(rest) = statement.strip_prefix("pub use ") else {
                continue;
            };
            let (top, names) = rest.split_once("::").unwrap_or((rest, rest));
            for name in names.split(|c: char| !(c.is_alphanumeric() || c == '_')) {
                if name.chars().next().is_some_and(char::is_alphabetic) {
                    root_exports.insert(name.to_owned(), top.to_owned());
                }
            }
        }
        Crate {
            src: src.to_owned(),
            files,
            root_exports,
        }
    }

    fn is_module(&self, path: &[String]) -> bool {
        self.files.contains_key(path)
    }

    /// The longest module `path` names (the rest are items in it), read from `from`.
    fn resolve(&self, from: &Module, path: &[&str]) -> Option<Module> {
        let mut module: Module = Vec::new();
        let mut rest = path;
        match rest.first() {
            Some(&"crate") => rest = &rest[1..],
            Some(&"super") => {
                module = from.clone();
                while rest.first() == Some(&"super") {
                    module.pop()?;
                    rest = &rest[1..];
                }
            }
            _ => return None,
        }
        if module.is_empty() {
            let first = rest.first()?;
            if !self.is_module(&[first.to_string()]) {
                let top = self.root_exports.get(*first)?;
                return Some(vec![top.clone()]);
            }
        }
        for segment in rest {
            let mut next = module.clone();
            next.push(segment.to_string());
            if !self.is_module(&next) {
                break;
            }
            module = next;
        }
        Some(module)
    }

    /// Every module each module imports, with the path that makes each arrow.
    fn imports(&self) -> BTreeMap<Module, BTreeMap<Module, String>> {
        let mut arrows: BTreeMap<Module, BTreeMap<Module, String>> = BTreeMap::new();
        for (module, file) in &self.files {
            let text = fs::read_to_string(file).expect("a source file");
            let is_folder_face = file.ends_with("mod.rs") || file.ends_with("lib.rs");
            for statement in code(&text).split(';') {
                let statement = statement.trim();
                let re_export = statement.starts_with("pub use ")
                    || statement.starts_with("pub(crate) use ")
                    || statement.starts_with("pub(super) use ");
                for path in paths(statement) {
                    let Some(target) = self.resolve(module, &path) else {
                        continue;
                    };
                    let child_of_face = target.len() > module.len() && target.starts_with(module);
                    if target == *module || (is_folder_face && re_export && child_of_face) {
                        continue;
                    }
                    let why = format!(
                        "{}: {}",
                        file.strip_prefix(&self.src).unwrap_or(file).display(),
                        path.join("::")
                    );
                    arrows
                        .entry(module.clone())
                        .or_default()
                        .entry(target)
                        .or_insert(why);
                }
            }
        }
        arrows
    }
}

fn collect(src: &Path, dir: &Path, files: &mut BTreeMap<Module, PathBuf>) {
    for entry in fs::read_dir(dir).expect("a source folder") {
        let path = entry.expect("a folder entry").path();
        if path.is_dir() {
            collect(src, &path, files);
            continue;
        }
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if !name.ends_with(".rs") || name == "tests.rs" {
            continue;
        }
        let relative = path.strip_prefix(src).expect("under src");
        let mut module: Module = relative
            .iter()
            .map(|part| part.to_string_lossy().trim_end_matches(".rs").to_owned())
            .collect();
        if matches!(module.last().map(String::as_str), Some("mod" | "lib")) {
            module.pop();
        }
        files.insert(module, path);
    }
}

/// The code of a file: comments dropped, and its test code: a `#[cfg(test)] mod tests;` line,
/// or the test module at the file's end.
fn code(text: &str) -> String {
    let mut kept = String::new();
    let mut lines = text.lines();
    while let Some(line) = lines.next() {
        if line.starts_with("#[cfg(test)]") {
            match lines.next() {
                Some(item) if item.trim_end().ends_with(';') => continue,
                _ => break,
            }
        }
        let line = match line.find("//") {
            Some(at) => &line[..at],
            None => line,
        };
        kept.push_str(line);
        kept.push('\n');
    }
    kept
}

/// The `crate::…` and `super::…` paths in `statement`, a group (`crate::{a::B, c}`) read as
/// one path per member.
fn paths(statement: &str) -> Vec<Vec<&str>> {
    let mut found = Vec::new();
    let bytes = statement.as_bytes();
    let mut at = 0;
    while at < statement.len() {
        let Some(rest) = statement.get(at..) else {
            at += 1;
            continue;
        };
        let starts = (rest.starts_with("crate::") || rest.starts_with("super::"))
            && (at == 0 || !is_word(bytes[at - 1]));
        if !starts {
            at += 1;
            continue;
        }
        let mut segments = Vec::new();
        let mut end = at;
        loop {
            let word: usize = statement[end..].bytes().take_while(|b| is_word(*b)).count();
            segments.push(&statement[end..end + word]);
            end += word;
            if !statement[end..].starts_with("::") {
                break;
            }
            end += 2;
            if statement[end..].starts_with('{') {
                let close = statement[end..]
                    .find('}')
                    .map_or(statement.len(), |c| end + c);
                for member in statement[end + 1..close].split(',') {
                    let mut path = segments.clone();
                    path.extend(member.trim().split("::").map(str::trim));
                    found.push(path);
                }
                segments.clear();
                end = close;
                break;
            }
        }
        if !segments.is_empty() {
            found.push(segments);
        }
        at = end.max(at + 1);
    }
    found
}

fn is_word(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

/// The cycles among `nodes` under `arrows`: each strongly connected set of two or more.
fn cycles(arrows: &BTreeMap<String, BTreeMap<String, String>>) -> Vec<BTreeSet<String>> {
    let nodes: BTreeSet<&String> = arrows
        .keys()
        .chain(arrows.values().flat_map(BTreeMap::keys))
        .collect();
    let reaches = |from: &String| {
        let mut seen = BTreeSet::new();
        let mut stack = vec![from.clone()];
        while let Some(node) = stack.pop() {
            for next in arrows.get(&node).into_iter().flat_map(BTreeMap::keys) {
                if seen.insert(next.clone()) {
                    stack.push(next.clone());
                }
            }
        }
        seen
    };
    let reach: BTreeMap<&String, BTreeSet<String>> =
        nodes.iter().map(|n| (*n, reaches(n))).collect();
    let mut found: Vec<BTreeSet<String>> = Vec::new();
    for node in &nodes {
        let set: BTreeSet<String> = reach[node]
            .iter()
            .filter(|other| reach.get(other).is_some_and(|back| back.contains(*node)))
            .cloned()
            .collect();
        if set.len() > 1 && !found.contains(&set) {
            found.push(set);
        }
    }
    found
}

/// `cycle`'s arrows, each with the file and path that makes it.
fn explain(
    cycle: &BTreeSet<String>,
    arrows: &BTreeMap<String, BTreeMap<String, String>>,
) -> String {
    let mut text = String::new();
    for from in cycle {
        for (to, why) in arrows.get(from).into_iter().flatten() {
            if cycle.contains(to) {
                text.push_str(&format!("  {from} -> {to}  ({why})\n"));
            }
        }
    }
    text
}

fn name(module: &[String]) -> String {
    if module.is_empty() {
        "crate".to_owned()
    } else {
        module.join("::")
    }
}

/// The cycles among the top-level modules of the crate whose sources are in `src`, each
/// explained arrow by arrow; empty when the modules import one way.
///
/// # Panics
///
/// When `src` cannot be read: this is for tests.
pub fn top_level_cycles(src: &Path) -> Vec<String> {
    let krate = Crate::read(src);
    let mut arrows: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
    for (from, targets) in krate.imports() {
        let Some(from_top) = from.first() else {
            continue; // lib.rs: the crate's face
        };
        for (to, why) in targets {
            let Some(to_top) = to.first() else { continue };
            if to_top != from_top {
                arrows
                    .entry(from_top.clone())
                    .or_default()
                    .entry(to_top.clone())
                    .or_insert(why);
            }
        }
    }
    assert!(
        !arrows.is_empty(),
        "no imports found under {}",
        src.display()
    );
    cycles(&arrows)
        .iter()
        .map(|c| explain(c, &arrows))
        .collect()
}

/// The cycles among the files of the crate whose sources are in `src`, each explained arrow
/// by arrow; empty when its files import one way.
///
/// # Panics
///
/// When `src` cannot be read: this is for tests.
pub fn file_cycles(src: &Path) -> Vec<String> {
    let krate = Crate::read(src);
    let mut arrows: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
    for (from, targets) in krate.imports() {
        for (to, why) in targets {
            arrows
                .entry(name(&from))
                .or_default()
                .insert(name(&to), why);
        }
    }
    cycles(&arrows)
        .iter()
        .map(|c| explain(c, &arrows))
        .collect()
}

#[cfg(test)]
mod reader {
    use super::*;

    #[test]
    fn leaves_out_comments_and_test_code_only() {
        let text = "use crate::a::B; // crate::c\n#[cfg(test)]\nmod tests;\nuse crate::d::E;\n\
                    #[cfg(test)]\nmod more {\n    use crate::f::G;\n}\n";
        let kept = code(text);
        assert!(
            kept.contains("crate::a::B") && kept.contains("crate::d::E"),
            "{kept}"
        );
        assert!(
            !kept.contains("crate::c") && !kept.contains("crate::f"),
            "{kept}"
        );
    }

    #[test]
    fn reads_plain_grouped_and_relative_paths() {
        assert_eq!(
            paths("use crate::{judge::Verdict, Body}"),
            [vec!["crate", "judge", "Verdict"], vec!["crate", "Body"]]
        );
        assert_eq!(
            paths("use super::super::x::Y"),
            [vec!["super", "super", "x", "Y"]]
        );
        assert_eq!(
            paths("let a = notcrate::x + crate::y::z()"),
            [vec!["crate", "y", "z"]]
        );
    }

    #[test]
    fn finds_a_cycle_and_only_a_cycle() {
        let arrow = |pairs: &[(&str, &str)]| {
            let mut arrows: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
            for (a, b) in pairs {
                arrows
                    .entry(a.to_string())
                    .or_default()
                    .insert(b.to_string(), String::new());
            }
            arrows
        };
        assert!(cycles(&arrow(&[("a", "b"), ("b", "c")])).is_empty());
        let found = cycles(&arrow(&[("a", "b"), ("b", "c"), ("c", "a"), ("c", "d")]));
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].len(), 3);
    }
}
