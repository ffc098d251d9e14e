//! The shape of the code, kept true (STYLE.md, rules 10 and 11; the engine's limits are the
//! acceptance of the issue that made requests whole operations):
//!
//! - no source file of the engine over 800 lines, and no function of it over 100;
//! - no file of the policy crate imports from the crate's root (`lib.rs`): each names the
//!   module that defines what it uses, so the root only declares and re-exports;
//! - every file `docs/ARCHITECTURE.md` names exists, so the map stays true to the code.
//!
//! Like `module_cycles.rs`, it reads the sources as text.

use std::path::{Path, PathBuf};

fn crates() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("a source folder") {
        let path = entry.expect("a source entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The functions of a file formatted by rustfmt: each one's name, first line (from 1) and
/// length in lines, from its `fn` line to the closing brace at its indentation.
fn functions(text: &str) -> Vec<(String, usize, usize)> {
    let lines: Vec<&str> = text.lines().collect();
    let mut found = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let Some(name) = fn_name(lines[i]) else {
            i += 1;
            continue;
        };
        let indent = &lines[i][..lines[i].len() - lines[i].trim_start().len()];
        // The signature ends with the body's brace, or with `;` (a declaration).
        let Some(open) = (i..lines.len()).find(|&j| {
            let line = lines[j].trim_end();
            line.ends_with('{') || line.ends_with(';')
        }) else {
            break;
        };
        if lines[open].trim_end().ends_with(';') {
            i = open + 1;
            continue;
        }
        let close = (open..lines.len())
            .find(|&j| lines[j].strip_prefix(indent).is_some_and(|rest| rest.starts_with('}')))
            .unwrap_or(lines.len() - 1);
        found.push((name, i + 1, close - i + 1));
        // Functions nested in this one are measured on their own, and count in it too.
        i = open + 1;
    }
    found
}

/// The name of the function a line declares, if it does.
fn fn_name(line: &str) -> Option<String> {
    let mut words = line.trim_start();
    if words.starts_with("//") {
        return None;
    }
    for prefix in ["pub(crate) ", "pub(super) ", "pub ", "const ", "unsafe ", "async "] {
        words = words.strip_prefix(prefix).unwrap_or(words);
    }
    let rest = words.strip_prefix("fn ")?;
    let name: String = rest.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
    (!name.is_empty()).then_some(name)
}

#[test]
fn no_engine_file_over_800_lines_and_no_engine_function_over_100() {
    let src = crates().join("tiercache-engine/src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    assert!(files.len() > 30, "the engine's sources in {}", src.display());
    let mut over = Vec::new();
    let mut measured = 0;
    for file in files {
        let text = read(&file);
        let name = file.strip_prefix(&src).unwrap().display().to_string();
        if text.lines().count() > 800 {
            over.push(format!("{name}: {} lines", text.lines().count()));
        }
        for (function, line, length) in functions(&text) {
            measured += 1;
            if length > 100 {
                over.push(format!("{name}:{line}: fn {function} is {length} lines"));
            }
        }
    }
    assert!(measured > 500, "only {measured} functions found");
    assert!(over.is_empty(), "over the limits: {over:#?}");
}

#[test]
fn the_function_reader_measures_bodies_and_skips_declarations() {
    let text = "impl A {\n    pub fn one(&self) -> u8 {\n        1\n    }\n\n    fn decl();\n}\n\
                pub(crate) fn two(\n    x: u8,\n) -> u8 {\n    let y = {\n        x\n    };\n    \
                y\n}\n";
    let found = functions(text);
    assert_eq!(found, vec![("one".into(), 2, 3), ("two".into(), 8, 8)]);
}

#[test]
fn no_policy_file_imports_from_the_policy_crates_root() {
    let src = crates().join("tiercache-policy/src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut from_root = Vec::new();
    let mut paths = 0;
    for file in files.iter().filter(|f| !f.ends_with("lib.rs")) {
        let text = read(file);
        for (line_no, line) in text.lines().enumerate() {
            if line.trim_start().starts_with("//") {
                continue;
            }
            for piece in line.split("crate::").skip(1) {
                paths += 1;
                // The first segment must be a module (a file or folder of the crate).
                let first: String =
                    piece.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
                let module = src.join(format!("{first}.rs")).exists() || src.join(&first).is_dir();
                if !module {
                    let name = file.strip_prefix(&src).unwrap().display();
                    from_root.push(format!("{name}:{}: crate::{first}", line_no + 1));
                }
            }
        }
    }
    assert!(paths > 100, "only {paths} crate paths found");
    assert!(from_root.is_empty(), "imports from the crate's root: {from_root:#?}");
}

/// The file names `text` mentions in code spans outside fenced blocks (`shard.rs`,
/// `tier/store.rs`, `crates/tiercache-engine/src/cache.rs`, `docs/RESULTS.md`).
fn named_files(text: &str) -> Vec<String> {
    let extensions = [".rs", ".md", ".toml", ".py", ".sh"];
    let mut fenced = false;
    let prose: String = text
        .lines()
        .filter(|line| {
            let fence = line.trim_start().starts_with("```");
            fenced ^= fence;
            !fence && !fenced
        })
        .map(|line| format!("{line}\n"))
        .collect();
    prose
        .split('`')
        .skip(1)
        .step_by(2)
        .filter(|span| !span.contains(' ') && extensions.iter().any(|e| span.ends_with(e)))
        .map(|span| span.trim_start_matches("./").to_string())
        .collect()
}

#[test]
fn every_file_the_architecture_names_exists() {
    let root = crates().join("..");
    let text = read(&root.join("docs/ARCHITECTURE.md"));
    let names = named_files(&text);
    assert!(names.len() > 30, "ARCHITECTURE.md names only {} files", names.len());
    // A name is a path from the repository's root, or an engine source's path from the
    // engine's `src/`, or a crate's source from its `src/` where a crate is named before it.
    let bases = [
        root.clone(),
        root.join("crates/tiercache-engine/src"),
        root.join("crates/tiercache-policy/src"),
        root.join("crates/tiercache-cli/src"),
        root.join("crates/tiercache-lab/src"),
    ];
    let missing: Vec<&String> =
        names.iter().filter(|name| !bases.iter().any(|base| base.join(name).exists())).collect();
    assert!(missing.is_empty(), "ARCHITECTURE.md names files that do not exist: {missing:?}");
}
