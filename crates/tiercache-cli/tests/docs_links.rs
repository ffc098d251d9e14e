//! Every relative link in README.md and in the Markdown files under docs/ points at a file
//! of the repository: the committed lab reports, results and design notes stay reachable.

use std::path::{Path, PathBuf};

fn repository() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn markdown_under(dir: &Path, found: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            markdown_under(&path, found);
        } else if path.extension().is_some_and(|e| e == "md") {
            found.push(path);
        }
    }
}

/// The targets of `[text](target)` and `![alt](target)` outside code blocks and code spans.
fn links(text: &str) -> Vec<String> {
    let mut targets = Vec::new();
    let mut fenced = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            continue;
        }
        // Drop code spans, whose brackets are not links.
        let prose: String =
            line.split('`').enumerate().filter(|(i, _)| i % 2 == 0).map(|(_, s)| s).collect();
        for piece in prose.split("](").skip(1) {
            if let Some(end) = piece.find(')') {
                targets.push(piece[..end].trim().to_string());
            }
        }
    }
    targets
}

#[test]
fn every_relative_link_in_the_readme_and_docs_resolves() {
    let root = repository();
    let mut files = vec![root.join("README.md")];
    markdown_under(&root.join("docs"), &mut files);
    assert!(files.len() > 3, "README.md and docs/ have Markdown files: {files:?}");
    let mut checked = 0;
    let mut broken = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        for target in links(&text) {
            let external = ["http://", "https://", "mailto:"].iter().any(|p| target.starts_with(p));
            if external || target.starts_with('#') || target.is_empty() {
                continue;
            }
            let path = target.split('#').next().unwrap_or_default();
            let resolved = file.parent().unwrap().join(path);
            checked += 1;
            if !resolved.exists() {
                broken.push(format!("{}: {target}", file.strip_prefix(&root).unwrap().display()));
            }
        }
    }
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
    assert!(checked > 20, "only {checked} relative links found: is the parser right?");
}

#[test]
fn the_link_parser_skips_code_and_reads_images() {
    let text =
        "see [a](x/a.md) and ![p](p.png)\n`[no](code)`\n```\n[no](block)\n```\n[b](b.md#part)";
    assert_eq!(links(text), ["x/a.md", "p.png", "b.md#part"]);
}
