//! One way down inside every crate of the workspace: no module imports another that imports it
//! back, directly or around a circle (STYLE.md, rule 11).
//!
//! The test reads each library crate's sources as text, collects every path through `crate::`
//! (`use` trees included, and names the crate root re-exports resolved to the module that
//! defines them), and finds the strongly connected components of the module graph. A file's
//! `#[cfg(test)] mod tests` is a child module, so its imports are not the file's; comments do
//! not count. A module and its own submodules may name each other. The graph is read twice:
//! module by module, and folder by folder (each top-level module with everything under it, as
//! one), so that `a::x` naming `b` and `b` naming `a::y` is a circle too.
//! The test fails on any circle, naming its crate and modules.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

#[test]
fn no_module_imports_another_that_imports_it_back() {
    let crates = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut found: BTreeSet<(String, Vec<String>)> = BTreeSet::new();
    let mut names: Vec<PathBuf> = std::fs::read_dir(&crates)
        .expect("the crates folder")
        .map(|entry| entry.expect("a crate folder").path())
        .filter(|path| path.join("src/lib.rs").exists())
        .collect();
    names.sort();
    assert!(names.len() >= 6, "expected the workspace's library crates in {}", crates.display());
    for dir in names {
        let name = dir.file_name().unwrap().to_string_lossy().into_owned();
        for circle in circles(&dir.join("src")) {
            found.insert((name.clone(), circle));
        }
    }
    assert!(found.is_empty(), "modules that import each other around a circle: {found:?}");
}

/// The module circles of one crate's sources: each a sorted list of module paths.
fn circles(src: &Path) -> Vec<Vec<String>> {
    let mut files = Vec::new();
    collect_files(src, &mut files);
    let modules: BTreeMap<String, PathBuf> = files
        .into_iter()
        .filter_map(|file| module_path(src, &file).map(|module| (module, file)))
        .collect();
    let reexports = root_reexports(&strip(&read(&src.join("lib.rs"))), &modules);
    let mut edges: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for (module, file) in &modules {
        let text = strip(&read(file));
        let mut targets = BTreeSet::new();
        for path in crate_paths(&text) {
            if let Some(target) = resolve(&path, &modules, &reexports) {
                let related = target == module.as_str()
                    || module.starts_with(&format!("{target}::"))
                    || target.starts_with(&format!("{module}::"))
                    || target.is_empty();
                if !related {
                    targets.insert(target);
                }
            }
        }
        edges.insert(module.as_str(), targets);
    }
    let mut found = strongly_connected(&edges);
    found.extend(strongly_connected(&top_level(&edges)));
    found
}

/// The same graph between top-level modules: each with its submodules as one, but for test
/// modules kept in files of their own (`mod tests;`), which sit above the crate as an
/// integration test does.
fn top_level<'a>(
    edges: &BTreeMap<&'a str, BTreeSet<&'a str>>,
) -> BTreeMap<&'a str, BTreeSet<&'a str>> {
    let top = |module: &'a str| module.split("::").next().unwrap_or(module);
    let mut joined: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for (&from, targets) in edges.iter().filter(|(m, _)| !m.ends_with("::tests")) {
        let to = targets.iter().map(|&t| top(t)).filter(|&t| t != top(from));
        joined.entry(top(from)).or_default().extend(to);
    }
    joined
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn collect_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("a source folder") {
        let path = entry.expect("a source entry").path();
        if path.is_dir() {
            if path.file_name().is_some_and(|n| n != "bin") {
                collect_files(&path, out);
            }
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// `a/b.rs` and `a/b/mod.rs` are `a::b`; `lib.rs` is the root (""); `main.rs` is another
/// crate (a binary), left out.
fn module_path(src: &Path, file: &Path) -> Option<String> {
    let relative = file.strip_prefix(src).ok()?.with_extension("");
    let mut parts: Vec<String> =
        relative.components().map(|c| c.as_os_str().to_string_lossy().into_owned()).collect();
    match parts.last().map(String::as_str) {
        Some("main") if parts.len() == 1 => return None,
        Some("mod") | Some("lib") => {
            parts.pop();
        }
        _ => {}
    }
    Some(parts.join("::"))
}

/// The text without comments, string literals, and the file's test module.
fn strip(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let bytes = text.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        if text[i..].starts_with("//") {
            while i < bytes.len() && bytes[i] != b'\n' {
                i += 1;
            }
        } else if text[i..].starts_with("/*") {
            i += text[i..].find("*/").map_or(bytes.len(), |end| end + 2);
        } else if bytes[i] == b'"' {
            i += 1;
            while i < bytes.len() && bytes[i] != b'"' {
                i += if bytes[i] == b'\\' { 2 } else { 1 };
            }
            i += 1;
            out.push_str("\"\"");
        } else {
            let c = text[i..].chars().next().unwrap();
            out.push(c);
            i += c.len_utf8();
        }
    }
    let test_module = out.find("#[cfg(test)]").filter(|&at| {
        let rest = out[at + "#[cfg(test)]".len()..].trim_start();
        rest.starts_with("mod tests")
    });
    match test_module {
        Some(at) => out[..at].to_string(),
        None => out,
    }
}

/// Every path that starts at `crate::`, use trees expanded: `crate::{a::B, c::{D, E}}` gives
/// `a::B`, `c::D` and `c::E`.
fn crate_paths(text: &str) -> Vec<Vec<String>> {
    let mut paths = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find("crate::") {
        let boundary = rest[..at].chars().next_back().is_none_or(|c| !is_ident(c));
        rest = &rest[at + "crate::".len()..];
        if boundary {
            let mut chars = rest.chars().peekable();
            tree(&mut chars, Vec::new(), &mut paths);
        }
    }
    paths
}

fn is_ident(c: char) -> bool {
    c.is_alphanumeric() || c == '_' || c == '$'
}

/// Parses one use tree after `prefix` and appends its paths.
fn tree(
    chars: &mut std::iter::Peekable<std::str::Chars>,
    prefix: Vec<String>,
    out: &mut Vec<Vec<String>>,
) {
    skip_space(chars);
    if chars.peek() == Some(&'{') {
        chars.next();
        loop {
            tree(chars, prefix.clone(), out);
            skip_space(chars);
            match chars.next() {
                Some(',') => continue,
                _ => return,
            }
        }
    }
    let mut path = prefix;
    loop {
        let ident: String = std::iter::from_fn(|| chars.next_if(|&c| is_ident(c))).collect();
        if ident.is_empty() {
            break;
        }
        path.push(ident);
        if chars.next_if_eq(&':').is_some() && chars.next_if_eq(&':').is_some() {
            if chars.peek() == Some(&'{') {
                return tree(chars, path, out);
            }
            continue;
        }
        break;
    }
    if !path.is_empty() {
        out.push(path);
    }
}

fn skip_space(chars: &mut std::iter::Peekable<std::str::Chars>) {
    while chars.next_if(|c| c.is_whitespace()).is_some() {}
}

/// The names the crate root re-exports (`pub use a::{B, c::D}`), each with the module that
/// defines it.
fn root_reexports(lib: &str, modules: &BTreeMap<String, PathBuf>) -> BTreeMap<String, String> {
    let mut names = BTreeMap::new();
    let mut rest = lib;
    while let Some(at) = rest.find("pub use ") {
        rest = &rest[at + "pub use ".len()..];
        let mut chars = rest.chars().peekable();
        let mut paths = Vec::new();
        tree(&mut chars, Vec::new(), &mut paths);
        for path in paths {
            if let Some((name, module)) = path.split_last() {
                let module = module.join("::");
                if modules.contains_key(&module) && !module.is_empty() {
                    names.insert(name.clone(), module);
                }
            }
        }
    }
    names
}

/// The module a path names or reaches into: its longest prefix that is a module, or for a
/// name the root re-exports, the module that defines it.
fn resolve<'a>(
    path: &[String],
    modules: &'a BTreeMap<String, PathBuf>,
    reexports: &'a BTreeMap<String, String>,
) -> Option<&'a str> {
    for len in (1..=path.len()).rev() {
        if let Some((module, _)) = modules.get_key_value(&path[..len].join("::")) {
            return Some(module.as_str());
        }
    }
    reexports.get(path.first()?).map(String::as_str)
}

/// Tarjan's strongly connected components of more than one module, each sorted.
fn strongly_connected(edges: &BTreeMap<&str, BTreeSet<&str>>) -> Vec<Vec<String>> {
    struct State<'a> {
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on_stack: BTreeSet<&'a str>,
        found: Vec<Vec<String>>,
    }
    fn visit<'a>(v: &'a str, edges: &BTreeMap<&'a str, BTreeSet<&'a str>>, s: &mut State<'a>) {
        let at = s.index.len();
        s.index.insert(v, at);
        s.low.insert(v, at);
        s.stack.push(v);
        s.on_stack.insert(v);
        for &w in edges.get(v).into_iter().flatten() {
            if !s.index.contains_key(w) {
                visit(w, edges, s);
                let low = s.low[v].min(s.low[w]);
                s.low.insert(v, low);
            } else if s.on_stack.contains(w) {
                let low = s.low[v].min(s.index[w]);
                s.low.insert(v, low);
            }
        }
        if s.low[v] == s.index[v] {
            let mut component = Vec::new();
            while let Some(w) = s.stack.pop() {
                s.on_stack.remove(w);
                component.push(w.to_string());
                if w == v {
                    break;
                }
            }
            if component.len() > 1 {
                component.sort();
                s.found.push(component);
            }
        }
    }
    let mut state = State {
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        found: Vec::new(),
    };
    for &v in edges.keys() {
        if !state.index.contains_key(v) {
            visit(v, edges, &mut state);
        }
    }
    state.found
}

#[test]
fn the_reader_sees_circles_and_use_trees() {
    let paths = crate_paths("use crate::{a::B, c::{d::E, F}};\nfn x() { crate::g::h(); }");
    let joined: Vec<String> = paths.iter().map(|p| p.join("::")).collect();
    assert_eq!(joined, ["a::B", "c::d::E", "c::F", "g::h"]);
    let stripped = strip("// crate::a\nlet s = \"crate::b\"; /* crate::c */ crate::d");
    assert_eq!(crate_paths(&stripped), [vec!["d".to_string()]]);
    let edges: BTreeMap<&str, BTreeSet<&str>> = [
        ("a", BTreeSet::from(["b"])),
        ("b", BTreeSet::from(["c"])),
        ("c", BTreeSet::from(["a"])),
        ("d", BTreeSet::from(["a"])),
    ]
    .into_iter()
    .collect();
    assert_eq!(strongly_connected(&edges), [vec!["a", "b", "c"]]);
    // No circle module by module, one folder by folder.
    let edges: BTreeMap<&str, BTreeSet<&str>> = [
        ("a::x", BTreeSet::from(["b"])),
        ("b", BTreeSet::from(["a::y"])),
        ("a::y", BTreeSet::new()),
    ]
    .into_iter()
    .collect();
    assert!(strongly_connected(&edges).is_empty());
    assert_eq!(strongly_connected(&top_level(&edges)), [vec!["a", "b"]]);
}
