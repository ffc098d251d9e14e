//! Helpers shared by the CLI tests: run the real `tiercache` binary and read its JSON.

#![allow(dead_code)]

use std::path::PathBuf;
use std::process::Command;

#[path = "../../../tiercache-engine/tests/common/scratch.rs"]
mod scratch;
// Not every test file uses it.
#[allow(unused_imports)]
pub use scratch::scratch;

/// A trace of the repository's test data (`data/`, with its provenance in `data/README.md`).
pub fn data_trace(name: &str) -> PathBuf {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../data").join(name);
    assert!(path.exists(), "{} is missing from the repository's test data", path.display());
    path
}

/// Runs `tiercache ARGS` and returns stdout; panics with stderr on failure.
pub fn tiercache(args: &[&str]) -> String {
    let output =
        Command::new(env!("CARGO_BIN_EXE_tiercache")).args(args).output().expect("run tiercache");
    assert!(
        output.status.success(),
        "tiercache {args:?} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).expect("utf-8 output")
}

/// Runs `tiercache ARGS`, expecting failure; returns stderr.
pub fn tiercache_fails(args: &[&str]) -> String {
    let output =
        Command::new(env!("CARGO_BIN_EXE_tiercache")).args(args).output().expect("run tiercache");
    assert!(!output.status.success(), "tiercache {args:?} should have failed");
    let stderr = String::from_utf8_lossy(&output.stderr).to_string();
    assert!(!stderr.contains("panicked"), "tiercache {args:?} panicked: {stderr}");
    stderr
}

/// `tiercache sim ... --json` as a JSON value.
pub fn sim_json(args: &[&str]) -> serde_json::Value {
    let mut all = vec!["sim", "--json"];
    all.extend_from_slice(args);
    serde_json::from_str(&tiercache(&all)).expect("sim --json prints JSON")
}

/// `tiercache sim --json` over `trace` in 4 KiB blocks with `policy` and a capacity in blocks,
/// then the `extra` arguments.
pub fn sim_blocks(trace: &str, policy: &str, capacity: &str, extra: &[&str]) -> serde_json::Value {
    let mut args = vec![
        "--trace",
        trace,
        "--block-size",
        "4KiB",
        "--unit",
        "objects",
        "--policy",
        policy,
        "--capacity",
        capacity,
    ];
    args.extend_from_slice(extra);
    sim_json(&args)
}
