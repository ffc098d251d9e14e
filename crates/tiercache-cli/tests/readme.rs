//! Every shell block of README.md runs as written, in order, in a scratch directory that sees
//! the repository's `data/`, `lab/` and `docs/` (what a fresh clone has), with this build's
//! `tiercache` first on PATH. A block fails the test with its line in the README and what it
//! printed. Three blocks cannot run inside the test suite and are replaced, each by name
//! below with the reason; a replacement that no longer matches a block fails the test, so the
//! list cannot outlive the README. A planted broken block shows the runner failing.
//!
//! The blocks run in two lanes at once, each in order in a directory of its own: those before
//! the section `SECOND_LANE` names (the simulator and the lab, which run on one core each) and
//! those from it on (the engine, the Python package, `serve`, the databases). The first lane
//! names no absolute path, so the lanes share no file (checked).
//!
//! The README's Rust blocks that an example runs (the lines of `crates/*/examples/*.rs` between
//! "The README's lines, from here." and "To here.") are checked to be those lines; the
//! examples run in their crates' tests.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// A block run otherwise: its first line, what runs instead, and why.
type Instead = (&'static str, &'static str, &'static str);

/// The README's blocks run otherwise.
const INSTEAD: &[Instead] = &[
    (
        "cargo run --release -p tiercache-cli -- demo",
        "tiercache demo --quick",
        "the demo from this test's build; the block's second command, scripts/test, is the run \
         this test is part of",
    ),
    (
        "cargo install --locked --path crates/tiercache-cli",
        "command -v tiercache",
        "this test puts its own build on PATH; installing builds it again in release (minutes)",
    ),
    (
        "pip install .",
        "true",
        "scripts/test runs exactly this after the Rust tests, then the Python package's tests",
    ),
];

/// The heading of the README's section from which on its blocks run in the second lane.
const SECOND_LANE: &str = "## From Python";

/// The longest one block may run.
const BLOCK_LIMIT: Duration = Duration::from_secs(300);

/// A shell block of a Markdown file: the line its first command is on, and its text.
struct Block {
    line: usize,
    text: String,
}

/// The ```sh blocks of `markdown`, in order.
fn shell_blocks(markdown: &str) -> Vec<Block> {
    fenced(markdown, "sh")
}

/// The blocks of `markdown` fenced as `language`, in order.
fn fenced(markdown: &str, language: &str) -> Vec<Block> {
    let fence = format!("```{language}");
    let mut blocks = Vec::new();
    let mut open: Option<Block> = None;
    for (i, line) in markdown.lines().enumerate() {
        match open.take() {
            None if line.trim_end() == fence => {
                open = Some(Block { line: i + 2, text: String::new() });
            }
            None => {}
            Some(block) if line.starts_with("```") => blocks.push(block),
            Some(mut block) => {
                block.text += line;
                block.text.push('\n');
                open = Some(block);
            }
        }
    }
    assert!(open.is_none(), "a shell block is never closed");
    blocks
}

/// A scratch directory that sees the repository's shipped files as a fresh clone has them.
fn workspace(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("tiercache-readme-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let root = repository();
    for shipped in ["data", "lab", "docs"] {
        std::os::unix::fs::symlink(root.join(shipped), dir.join(shipped)).unwrap();
    }
    dir
}

fn repository() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().unwrap()
}

/// Runs `markdown`'s shell blocks in `dir`, those `instead` names replaced, stopping at the
/// first that fails: how many ran, or how it failed (a replacement that matched no block too).
fn run_blocks(markdown: &str, dir: &Path, instead: &[Instead]) -> Result<usize, String> {
    let blocks = shell_blocks(markdown);
    let used = run_in(&blocks, dir, instead)?;
    all_used(&used, instead)?;
    Ok(blocks.len())
}

/// Fails naming the first of `instead` that replaced no block.
fn all_used(used: &[bool], instead: &[Instead]) -> Result<(), String> {
    match used.iter().position(|u| !u) {
        Some(i) => Err(format!("no block starts with {:?} any more", instead[i].0)),
        None => Ok(()),
    }
}

/// Runs `blocks` in order in `dir`, those `instead` names replaced, stopping at the first that
/// fails: which of `instead` replaced a block, or how one failed.
fn run_in(blocks: &[Block], dir: &Path, instead: &[Instead]) -> Result<Vec<bool>, String> {
    let bin = Path::new(env!("CARGO_BIN_EXE_tiercache")).parent().unwrap().to_path_buf();
    let path = std::env::join_paths(
        std::iter::once(bin).chain(std::env::split_paths(&std::env::var_os("PATH").unwrap())),
    )
    .unwrap();
    let mut used = vec![false; instead.len()];
    for block in blocks {
        let first = block.text.lines().next().unwrap_or("");
        let script = match instead.iter().position(|(line, _, _)| first.starts_with(line)) {
            Some(i) => {
                used[i] = true;
                instead[i].1.to_string()
            }
            None => block.text.clone(),
        };
        let started = Instant::now();
        let mut child = Command::new("bash")
            .args(["-e", "-o", "pipefail", "-c", &script])
            .current_dir(dir)
            .env("PATH", &path)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("bash");
        // Output is read on threads, so a block that prints much never blocks on its pipe.
        let read = |pipe: Option<Box<dyn std::io::Read + Send>>| {
            std::thread::spawn(move || {
                let mut text = String::new();
                if let Some(mut pipe) = pipe {
                    let _ = pipe.read_to_string(&mut text);
                }
                text
            })
        };
        let out = read(child.stdout.take().map(|p| Box::new(p) as _));
        let err = read(child.stderr.take().map(|p| Box::new(p) as _));
        let status = loop {
            if let Some(status) = child.try_wait().unwrap() {
                break Some(status);
            }
            if started.elapsed() > BLOCK_LIMIT {
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        let printed = out.join().unwrap() + &err.join().unwrap();
        let tail: String = printed
            .lines()
            .rev()
            .take(30)
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect::<Vec<_>>()
            .join("\n");
        match status {
            Some(status) if status.success() => {
                eprintln!(
                    "README line {}: ok in {:.1} s",
                    block.line,
                    started.elapsed().as_secs_f64()
                );
            }
            Some(status) => {
                return Err(format!(
                    "README line {}: {status}\n{}\n--- printed:\n{tail}",
                    block.line, block.text
                ))
            }
            None => {
                return Err(format!(
                    "README line {}: still running after {BLOCK_LIMIT:?}\n{}\n--- printed:\n{tail}",
                    block.line, block.text
                ))
            }
        }
    }
    Ok(used)
}

#[test]
fn every_shell_block_of_the_readme_runs_as_written() {
    let readme = std::fs::read_to_string(repository().join("README.md")).unwrap();
    let split = readme
        .lines()
        .position(|line| line == SECOND_LANE)
        .unwrap_or_else(|| panic!("README.md has no section {SECOND_LANE:?}"));
    let blocks = shell_blocks(&readme);
    let (first, second) = blocks.split_at(blocks.partition_point(|b| b.line < split));
    for block in first {
        assert!(
            !block.text.contains(" /"),
            "README line {}: a block before {SECOND_LANE:?} names an absolute path, which the \
             lane after it may share; move the section or the block",
            block.line
        );
    }
    let (sim, engine) = (workspace("first-lane"), workspace("second-lane"));
    let (a, b) = std::thread::scope(|scope| {
        let other = scope.spawn(|| run_in(second, &engine, INSTEAD));
        let first = run_in(first, &sim, INSTEAD);
        // Then the shell blocks of the documents the README links, each in a directory of
        // its own (those beside it in the repository: data/README.md, docs/*.md).
        let linked = first.and_then(|used| {
            for doc in linked_documents(&readme) {
                let text = std::fs::read_to_string(repository().join(&doc)).unwrap();
                let dir = workspace("linked");
                run_in(&shell_blocks(&text), &dir, &[]).map_err(|e| format!("{doc}: {e}"))?;
                let _ = std::fs::remove_dir_all(&dir);
            }
            Ok(used)
        });
        (linked, other.join().unwrap())
    });
    let (a, b) = (a.unwrap_or_else(|e| panic!("{e}")), b.unwrap_or_else(|e| panic!("{e}")));
    let used: Vec<bool> = a.iter().zip(&b).map(|(a, b)| a | b).collect();
    all_used(&used, INSTEAD).unwrap_or_else(|e| panic!("{e}"));
    assert!(
        first.len() >= 6 && second.len() >= 6,
        "the lanes: {} and {}",
        first.len(),
        second.len()
    );
    let _ = std::fs::remove_dir_all(&sim);
    let _ = std::fs::remove_dir_all(&engine);
}

#[test]
fn a_broken_example_fails_naming_its_line() {
    let planted =
        "# A README\n\n```sh\ntiercache sim --trace data/arc_OLTP.lis.zst --unit objects \
                   --policy arc --capacity 100\n```\n\ntext\n\n```sh\ntiercache sim --trace \
                   hm_0.csv --policy arc --capacity 64MiB\n```\n";
    let dir = workspace("planted");
    let e = run_blocks(planted, &dir, &[]).expect_err("the second block cannot run");
    assert!(e.starts_with("README line 10:") && e.contains("hm_0.csv"), "{e}");
    let e = run_blocks("no blocks\n", &dir, INSTEAD).expect_err("nothing to replace");
    assert!(e.contains("no block starts with"), "{e}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// The Markdown files of the repository that `markdown` links to (relative links to `.md`).
fn linked_documents(markdown: &str) -> Vec<String> {
    let mut docs: Vec<String> = markdown
        .split("](")
        .skip(1)
        .filter_map(|rest| rest.split([')', '#']).next())
        .filter(|link| link.ends_with(".md") && !link.contains("://"))
        .map(str::to_string)
        .collect();
    docs.sort();
    docs.dedup();
    docs
}

/// The documents found are the README's (their links are checked in docs_links.rs).
#[test]
fn the_readmes_linked_documents_are_found() {
    let readme = std::fs::read_to_string(repository().join("README.md")).unwrap();
    let docs = linked_documents(&readme);
    for doc in ["docs/RESULTS.md", "docs/ARCHITECTURE.md", "data/README.md", "docs/lab/kassa.md"] {
        assert!(docs.iter().any(|d| d == doc), "{doc} not among {docs:?}");
    }
    assert!(docs.iter().all(|d| repository().join(d).is_file()), "{docs:?}");
}

/// The lines of a Rust snippet as compared: each without its comment and the space around it,
/// blank ones left out.
fn code_lines(text: &str) -> Vec<String> {
    text.lines()
        .map(|line| {
            let code = match line.find("//") {
                Some(at) if at == 0 || line[..at].ends_with(' ') => &line[..at],
                _ => line,
            };
            code.trim().to_string()
        })
        .filter(|line| !line.is_empty())
        .collect()
}

#[test]
fn the_readmes_rust_blocks_are_the_lines_its_examples_run() {
    let readme = std::fs::read_to_string(repository().join("README.md")).unwrap();
    let blocks: Vec<Vec<String>> =
        fenced(&readme, "rust").iter().map(|b| code_lines(&b.text)).collect();
    let (from, to) = ("// The README's lines, from here.", "// To here.");
    let mut examples = Vec::new();
    for krate in std::fs::read_dir(repository().join("crates")).unwrap() {
        let Ok(dir) = std::fs::read_dir(krate.unwrap().path().join("examples")) else { continue };
        for file in dir {
            let path = file.unwrap().path();
            let text = std::fs::read_to_string(&path).unwrap();
            let Some(start) = text.find(from) else { continue };
            let end = text[start..].find(to).map(|e| start + e);
            let end = end.unwrap_or_else(|| panic!("{}: {from:?} without {to:?}", path.display()));
            let lines = code_lines(&text[start + from.len()..end]);
            assert!(
                blocks.contains(&lines),
                "{}: its lines for the README are in no ```rust block of it:\n{}",
                path.display(),
                lines.join("\n")
            );
            examples.push(path);
        }
    }
    assert!(examples.len() >= 2, "the examples that run the README's lines: {examples:?}");
}
