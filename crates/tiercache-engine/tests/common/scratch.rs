//! Scratch paths for tests, shared by the engine's and the CLI's tests (the CLI's include this
//! file by path).

use std::path::PathBuf;

/// A path for `name` in this test process's scratch directory for `group`. The directory is
/// new to this run (a process id alone is reused, and a tier file left by an earlier run
/// would be recovered).
pub fn scratch(group: &str, name: &str) -> PathBuf {
    static RUN: std::sync::OnceLock<u128> = std::sync::OnceLock::new();
    let run = RUN.get_or_init(|| {
        remove_dead_runs();
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap();
        now.as_nanos()
    });
    let dir = std::env::temp_dir().join(format!("tiercache-{group}-{}-{run}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

/// Removes the scratch directories of test processes no longer running (Linux, where
/// `/proc` says which are), so that runs do not pile up files in the temporary directory.
fn remove_dead_runs() {
    if !std::path::Path::new("/proc/self").exists() {
        return;
    }
    let Ok(entries) = std::fs::read_dir(std::env::temp_dir()) else { return };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(rest) = name.to_str().and_then(|n| n.strip_prefix("tiercache-")) else {
            continue;
        };
        // tiercache-GROUP-PID-RUN: the process id is the second field from the end.
        let mut fields = rest.rsplit('-');
        let (Some(run), Some(pid)) = (fields.next(), fields.next()) else { continue };
        let ours = run.len() >= 18 && run.parse::<u128>().is_ok() && fields.next().is_some();
        if ours && pid.parse::<u32>().is_ok() && !std::path::Path::new("/proc").join(pid).exists() {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}
