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

use tiercache_policy::{StackConfig, StackSpec};

use crate::run_options::RunArgs;
use crate::TraceArgs;

/// What the `[workload]`, `[devices]` and `[output]` tables give: `sim`'s options apart from
/// the cache, whose `[cache]` table is read as a [`StackSpec`] instead.
#[derive(Parser)]
#[command(name = "experiment")]
struct RunOnly {
    #[command(flatten)]
    trace: TraceArgs,
    #[command(flatten)]
    run: RunArgs,
}

#[derive(Parser)]
#[command(name = "experiment")]
struct GenOnly {
    #[command(flatten)]
    generate: crate::trace::GenArgs,
}

/// Flattens a table of options into command-line words.
pub(crate) fn words(
    table: &toml::Table,
    skip: &[&str],
    out: &mut Vec<String>,
) -> anyhow::Result<()> {
    for (key, value) in table {
        if skip.contains(&key.as_str()) {
            continue;
        }
        let flag = format!("--{}", key.replace('_', "-"));
        // `--flag=value`, so that a value such as -5 reaches the option's own check.
        match value {
            toml::Value::Boolean(true) => out.push(flag),
            toml::Value::Boolean(false) => {}
            toml::Value::String(s) => out.push(format!("{flag}={s}")),
            toml::Value::Integer(i) => out.push(format!("{flag}={i}")),
            toml::Value::Float(f) => out.push(format!("{flag}={f}")),
            // A repeatable option: `tier = ["1GiB:lru", "8GiB:fifo"]`.
            toml::Value::Array(items) => {
                for item in items {
                    let toml::Value::String(s) = item else {
                        anyhow::bail!(
                            "'{key}' must be an array of strings, not {}",
                            item.type_str()
                        )
                    };
                    out.push(format!("{flag}={s}"));
                }
            }
            other => anyhow::bail!(
                "'{key}' must be a string, number, boolean or array of strings, not {}",
                other.type_str()
            ),
        }
    }
    Ok(())
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

/// `sim` from named options, as the Python package gives them: the keys of an experiment
/// file's `[cache]` table build the stack (read by serde, as there), every other key is one of
/// `sim`'s trace and run options (`format`, `block_size`, `clients`, `backing_profile`...).
/// An unknown key is an error that lists the known ones.
pub fn simulate_options(
    trace: &Path,
    options: &toml::Table,
) -> anyhow::Result<crate::sim::SimOutput> {
    let (stack_table, args) = split_options(trace, options)?;
    crate::sim::simulate_stack(&args.trace, cache(&stack_table)?, &args.run, false)
}

/// Many cells over one trace, read once: each cell's options are `common` plus its own
/// (a policy and a capacity, say), run in parallel on every core; `done` is called as each
/// cell ends. A cell's result is what [`simulate_options`] gives for the same options.
/// `threads` 0 runs on every core.
pub fn sweep_options(
    trace: &Path,
    common: &toml::Table,
    cells: &[toml::Table],
    threads: usize,
    done: &(dyn Fn() + Sync),
) -> anyhow::Result<Vec<anyhow::Result<crate::sim::SimOutput>>> {
    use rayon::prelude::*;
    let (_, args) = split_options(trace, common)?;
    let loaded = crate::sim::LoadedTrace::read(&args.trace)?;
    let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build()?;
    Ok(pool.install(|| {
        cells
            .par_iter()
            .map(|cell| {
                let mut options = common.clone();
                options.extend(cell.clone());
                let result = split_options(trace, &options).and_then(|(stack_table, args)| {
                    crate::sim::simulate_loaded(
                        &args.trace,
                        &loaded,
                        cache(&stack_table)?,
                        &args.run,
                    )
                });
                done();
                result
            })
            .collect()
    }))
}

/// Named options as a `[cache]` table and `sim`'s trace and run options.
fn split_options(trace: &Path, options: &toml::Table) -> anyhow::Result<(toml::Table, RunOnly)> {
    let stack_keys = stack_keys();
    let (mut stack_table, mut rest) = (toml::Table::new(), toml::Table::new());
    for (key, value) in options {
        match stack_keys.contains(key) {
            true => stack_table.insert(key.clone(), value.clone()),
            false => rest.insert(key.clone(), value.clone()),
        };
    }
    // Options by their long names, as `words` turns keys into flags; --json is the CLI's own.
    let run_keys: Vec<String> = <RunOnly as clap::CommandFactory>::command()
        .get_arguments()
        .filter_map(|a| a.get_long().map(|long| long.replace('-', "_")))
        .filter(|name| name != "trace" && name != "json")
        .collect();
    if let Some(unknown) = rest.keys().find(|k| !run_keys.contains(k)) {
        let mut known: Vec<&str> = stack_keys.iter().map(String::as_str).collect();
        known.extend(run_keys.iter().map(String::as_str));
        known.sort_unstable();
        anyhow::bail!("unknown option '{unknown}'; known: {}", known.join(", "));
    }
    let mut argv = vec!["sim".to_string(), format!("--trace={}", trace.display())];
    words(&rest, &[], &mut argv)?;
    let args = RunOnly::try_parse_from(&argv).map_err(|e| {
        // clap's message names the flag; the first line is the reason.
        let text = e.to_string();
        anyhow::anyhow!("{}", text.lines().next().unwrap_or("").trim_start_matches("error: "))
    })?;
    Ok((stack_table, args))
}

/// The keys a `[cache]` table takes.
fn stack_keys() -> Vec<String> {
    let spec = StackSpec::new("lru", tiercache_policy::stack::Amount::Text("1".into()));
    match serde_json::to_value(spec) {
        Ok(serde_json::Value::Object(map)) => map.keys().cloned().collect(),
        _ => Vec::new(),
    }
}

/// The `[cache]` table: a policy stack, read by serde (`tiercache_policy::stack`), so its keys
/// are checked by the code that `sim`'s options go through.
pub fn cache(table: &toml::Table) -> anyhow::Result<StackConfig> {
    let spec: StackSpec = table.clone().try_into()?;
    Ok(StackConfig::try_from(spec)?)
}
