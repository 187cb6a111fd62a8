//! The crate's layers, read from its sources (no server): each module names only modules of
//! the layers below it, and a verb file names no other verb file. A verb that needs what
//! another verb does finds it in `queue` (or `domain`, when it is pure), where both use it;
//! an option two verbs share is declared in `verbs/options.rs`.
// A test may panic: that is how it fails. The module's own rules are for src/.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    clippy::arithmetic_side_effects
)]

use std::path::{Path, PathBuf};

/// Each top-level module and its layer: a module may name modules of lower layers only.
/// `lib.rs`, above them all, declares the module and may name any.
const LAYERS: &[(&str, u8)] = &[
    ("keyspace", 0),
    ("errors", 0),
    ("about", 0),
    ("domain", 1),
    ("config", 2),
    ("metrics", 3),
    ("registry", 3),
    ("host", 4),
    ("queue", 5),
    ("bus", 5),
    ("upkeep", 6),
    ("verbs", 7),
];

/// Files in `src/verbs/` that are not verbs: the list (`mod.rs`) and the shared arguments.
const NOT_VERBS: &[&str] = &["mod", "options"];

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).expect("read a source directory") {
        let p = e.expect("a directory entry").path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The source's code lines, comments left out (a doc comment may name any module).
fn code(p: &Path) -> Vec<String> {
    std::fs::read_to_string(p)
        .expect("read a source")
        .lines()
        .map(|l| l.split("//").next().unwrap_or("").to_string())
        .collect()
}

/// The top-level modules a line names through `crate::`, alone or in a `crate::{…}` list.
fn named(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = line;
    while let Some(at) = rest.find("crate::") {
        rest = &rest[at + "crate::".len()..];
        if let Some(list) = rest.strip_prefix('{') {
            let inner = list.split('}').next().unwrap_or("");
            for item in inner.split(',') {
                out.push(item.trim().split("::").next().unwrap_or("").to_string());
            }
        } else {
            let word: String = rest.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
            out.push(word);
        }
    }
    out.retain(|w| !w.is_empty());
    out
}

fn layer_of(file: &Path) -> Option<(&'static str, u8)> {
    let rel = file.strip_prefix(src()).ok()?;
    let top = rel.components().next()?.as_os_str().to_str()?;
    let top = top.strip_suffix(".rs").unwrap_or(top);
    LAYERS.iter().find(|(m, _)| *m == top).copied()
}

#[test]
fn every_module_names_only_the_layers_below_it() {
    let mut files = Vec::new();
    rust_files(&src(), &mut files);
    let mut faults = Vec::new();
    let mut seen = 0;
    for f in &files {
        if f.ends_with("lib.rs") {
            continue;
        }
        let (module, layer) =
            layer_of(f).unwrap_or_else(|| panic!("{} is in no layer: add its module to LAYERS", f.display()));
        seen += 1;
        for (n, line) in code(f).iter().enumerate() {
            for other in named(line) {
                if other == module || other == "self" {
                    continue;
                }
                match LAYERS.iter().find(|(m, _)| *m == other) {
                    Some((_, l)) if *l < layer => {}
                    Some((_, l)) => faults.push(format!(
                        "{}:{}: {module} (layer {layer}) names {other} (layer {l})",
                        f.display(),
                        n + 1
                    )),
                    None => faults.push(format!(
                        "{}:{}: names crate::{other}, which is not a module of LAYERS (lib.rs holds only the declaration)",
                        f.display(),
                        n + 1
                    )),
                }
            }
        }
    }
    assert!(seen > 40, "the sources were found");
    assert!(faults.is_empty(), "imports against the layers:\n{}", faults.join("\n"));
}

#[test]
fn no_verb_file_names_another() {
    let dir = src().join("verbs");
    let mut files = Vec::new();
    rust_files(&dir, &mut files);
    let verbs: Vec<String> = files
        .iter()
        .filter_map(|f| f.file_stem()?.to_str().map(str::to_string))
        .filter(|v| !NOT_VERBS.contains(&v.as_str()))
        .collect();
    assert!(verbs.len() > 40, "the verb files were found");
    let mut faults = Vec::new();
    for f in &files {
        let me = f.file_stem().and_then(|s| s.to_str()).unwrap_or("");
        if me == "mod" {
            continue;
        }
        for (n, line) in code(f).iter().enumerate() {
            for v in verbs.iter().filter(|v| v.as_str() != me) {
                let paths = [format!("super::{v}::"), format!("verbs::{v}::"), format!("super::{v};")];
                let listed = line.contains("super::{")
                    && line.split("super::{").nth(1).is_some_and(|l| {
                        l.split('}')
                            .next()
                            .unwrap_or("")
                            .split(',')
                            .any(|i| i.trim().split("::").next() == Some(v))
                    });
                if paths.iter().any(|p| line.contains(p.as_str())) || listed {
                    faults.push(format!("{}:{}: names the verb file {v}.rs", f.display(), n + 1));
                }
            }
        }
    }
    assert!(
        faults.is_empty(),
        "verb files naming siblings (move what they share to queue/ or domain/):\n{}",
        faults.join("\n")
    );
}

/// The scan itself: the forms of a name it must see.
#[test]
fn the_scan_sees_each_form_of_a_name() {
    assert_eq!(named("use crate::queue::{self, Row};"), ["queue"]);
    assert_eq!(named("use crate::{keyspace, about::X};"), ["keyspace", "about"]);
    assert_eq!(named("let x = crate::host::timer::now() + crate::domain::f();"), ["host", "domain"]);
    assert!(named("use super::options::KEEP;").is_empty());
}

/// The README's layout table, row by row: the paths of its first cell (`src/verbs/`,
/// `src/upkeep.rs`, …) and the whole row's text.
fn layout() -> Vec<(Vec<String>, String)> {
    let readme =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md")).expect("README.md");
    let start = readme.find("\n## Layout\n").expect("the README's Layout section");
    let section = &readme[start + 1..];
    let end = section[3..].find("\n## ").map_or(section.len(), |i| i + 3);
    section[..end]
        .lines()
        .filter(|l| l.starts_with("| `"))
        .map(|l| {
            let first = l.split('|').nth(1).unwrap_or("");
            let paths = first.split('`').skip(1).step_by(2).map(str::to_string).collect();
            (paths, l.to_string())
        })
        .collect()
}

/// The README's layout table matches the tree: every path it names exists, every entry of
/// `src/` has its row, and every file of the directories whose row lists its files (`src/queue/`,
/// `src/domain/`, `src/host/`, `tests/`) is named in that row.
#[test]
fn the_readme_layout_names_every_file() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let rows = layout();
    assert!(rows.len() > 10, "the layout table was found");
    let mut faults = Vec::new();
    for (paths, _) in &rows {
        for p in paths {
            if !root.join(p).exists() {
                faults.push(format!("the layout names {p}, which does not exist"));
            }
        }
    }
    for e in std::fs::read_dir(src()).expect("src/") {
        let e = e.expect("an entry");
        let dir = e.path().is_dir();
        let name = format!("src/{}{}", e.file_name().to_string_lossy(), if dir { "/" } else { "" });
        if !rows.iter().any(|(paths, _)| paths.contains(&name)) {
            faults.push(format!("{name} has no row in the layout table"));
        }
    }
    for dir in ["src/queue/", "src/domain/", "src/host/", "tests/"] {
        let Some((_, row)) = rows.iter().find(|(paths, _)| paths.iter().any(|p| p == dir)) else {
            faults.push(format!("{dir} has no row"));
            continue;
        };
        for e in std::fs::read_dir(root.join(dir)).expect("a listed directory") {
            let name = e.expect("an entry").file_name().to_string_lossy().to_string();
            if name.ends_with(".rs") && name != "mod.rs" && !row.contains(&format!("`{name}`")) {
                faults.push(format!("{dir}{name} is not named in its row"));
            }
        }
    }
    assert!(faults.is_empty(), "the README's layout and the tree differ:\n{}", faults.join("\n"));
}
