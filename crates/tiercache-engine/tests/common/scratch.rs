//! Scratch paths for tests, shared by the engine's and the CLI's tests (the CLI's include this
//! file by path).

use std::path::PathBuf;

/// A path for `name` in this test process's scratch directory for `group`. The directory is
/// new to this run (a process id alone is reused, and a tier file left by an earlier run
/// would be recovered).
pub fn scratch(group: &str, name: &str) -> PathBuf {
    static RUN: std::sync::OnceLock<u128> = std::sync::OnceLock::new();
    let run = RUN.get_or_init(|| {
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap();
        now.as_nanos()
    });
    let dir = std::env::temp_dir().join(format!("tiercache-{group}-{}-{run}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}
