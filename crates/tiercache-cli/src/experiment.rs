//! `tiercache run EXPERIMENT.toml`: an experiment as one file. Every key is a `tiercache sim`
//! option (underscores for dashes), grouped as the reader likes: `[workload]` (the trace, or a
//! `[workload.generate]` table of `trace gen` options), `[cache]` (policy, capacity, lower tier,
//! mode...), `[devices]` (clients and profiles for virtual time). The `[cache]` table is a
//! policy stack read by serde (`tiercache_policy::StackSpec`), the same code `sim`'s options go
//! through; the other tables are read by `sim`'s own option parser. Either way a key means
//! exactly what its option means, and a bad key is an error naming the file.
//!
//! ```toml
//! [workload]
//! trace = "../data/cloudPhysicsIO.vscsi.zst"   # relative to this file
//! block_size = "4KiB"
//!
//! [cache]
//! unit = "objects"
//! policy = "lru"
//! capacity = "2000"
//! lower_capacity = "8000"
//! placement = "scm-first:2"
//! tier = ["100000:fifo"]      # a third tier (flash), repeatable in order
//!
//! [devices]
//! clients = 16
//! profile = "dram"
//! lower_profile = "optane-dcpm"
//! tier_profile = ["nvme"]
//! backing_profile = "hdd"
//! ```

use std::path::{Path, PathBuf};

use anyhow::Context;
use clap::Parser;

pub use tiercache_run::options::{cache, simulate_options, sweep_options, words, RunOnly};

#[derive(Parser)]
#[command(name = "experiment")]
struct GenOnly {
    #[command(flatten)]
    generate: crate::trace::GenArgs,
}

/// Generates the `[workload.generate]` trace once into the temp directory; returns its path.
/// The trace is written under a name of this process's and renamed into place only when
/// whole, so a run killed halfway leaves no truncated trace for the next run to trip on.
fn generated_trace(table: &toml::Table) -> anyhow::Result<PathBuf> {
    let key = tiercache_core::fnv1a_64(table.to_string().as_bytes());
    let dir = std::env::temp_dir();
    let path = dir.join(format!("tiercache-experiment-{key:016x}.csv.zst"));
    if !path.exists() {
        let partial = dir.join(format!(
            "tiercache-experiment-{key:016x}.{}.partial.csv.zst",
            std::process::id()
        ));
        let mut argv = vec!["experiment".to_string()];
        words(table, &[], &mut argv)?;
        argv.push(format!("--output={}", partial.display()));
        let args = GenOnly::try_parse_from(&argv)
            .map_err(|e| anyhow::anyhow!("[workload.generate]: {e}"))?;
        let generated = crate::trace::generate(&args.generate);
        if let Err(e) = generated {
            let _ = std::fs::remove_file(&partial);
            return Err(e);
        }
        std::fs::rename(&partial, &path)
            .with_context(|| format!("cannot move the generated trace to {}", path.display()))?;
    }
    Ok(path)
}

/// The sections of an experiment file.
const SECTIONS: [&str; 4] = ["workload", "cache", "devices", "output"];

pub fn run(path: &Path) -> anyhow::Result<()> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    let file: toml::Table =
        toml::from_str(&text).with_context(|| format!("{}: not valid TOML", path.display()))?;
    // Every section is known before any is read (a misspelt one is named first).
    if let Some(other) = file.keys().find(|s| !SECTIONS.contains(&s.as_str())) {
        anyhow::bail!(
            "{}: unknown section [{other}]; use [workload], [cache], [devices], [output]",
            path.display()
        );
    }
    let mut argv = vec!["experiment".to_string()];
    let mut stack = None;
    for (section, value) in &file {
        let table = value
            .as_table()
            .ok_or_else(|| anyhow::anyhow!("{}: '{section}' must be a table", path.display()))?;
        match section.as_str() {
            "workload" => {
                if let Some(generate) = table.get("generate") {
                    let generate =
                        generate.as_table().context("[workload.generate] must be a table")?;
                    argv.extend([
                        "--trace".to_string(),
                        generated_trace(generate)?.display().to_string(),
                    ]);
                }
                if let Some(trace) = table.get("trace").and_then(|t| t.as_str()) {
                    // Paths in an experiment file are relative to the file.
                    let base = path.parent().unwrap_or(Path::new("."));
                    argv.extend(["--trace".to_string(), base.join(trace).display().to_string()]);
                }
                words(table, &["generate", "trace"], &mut argv)
            }
            "cache" => cache(table).map(|config| stack = Some(config)),
            _ => words(table, &[], &mut argv),
        }
        .with_context(|| format!("{}: [{section}]", path.display()))?;
    }
    let stack = stack.ok_or_else(|| {
        anyhow::anyhow!(
            "{}: no [cache] table (it needs at least policy and capacity)",
            path.display()
        )
    })?;
    let args =
        RunOnly::try_parse_from(&argv).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
    crate::sim::run_stack(&args.trace, stack, &args.run)
}
