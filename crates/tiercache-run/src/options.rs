//! Runs from named options, as an experiment file's tables and the Python package give them:
//! the keys of a `[cache]` table build the policy stack (read by serde, as
//! `tiercache_policy::StackSpec`), every other key is one of `sim`'s trace and run options, read
//! by the same parser as the command line.

use std::path::Path;

use clap::Parser;
use tiercache_policy::{StackConfig, StackSpec};

use crate::run::{LoadedTrace, SimOutput};
use crate::run_options::RunArgs;
use crate::TraceArgs;

/// What the `[workload]`, `[devices]` and `[output]` tables give: `sim`'s options apart from
/// the cache, whose `[cache]` table is read as a [`StackSpec`] instead.
#[derive(Parser)]
#[command(name = "experiment")]
pub struct RunOnly {
    #[command(flatten)]
    pub trace: TraceArgs,
    #[command(flatten)]
    pub run: RunArgs,
}

/// Flattens a table of options into command-line words.
pub fn words(table: &toml::Table, skip: &[&str], out: &mut Vec<String>) -> anyhow::Result<()> {
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

/// `sim` from named options, as the Python package gives them: the keys of an experiment
/// file's `[cache]` table build the stack (read by serde, as there), every other key is one of
/// `sim`'s trace and run options (`format`, `block_size`, `clients`, `backing_profile`...).
/// An unknown key is an error that lists the known ones.
pub fn simulate_options(trace: &Path, options: &toml::Table) -> anyhow::Result<SimOutput> {
    let (stack_table, args) = split_options(trace, options)?;
    crate::run::simulate_stack(&args.trace, cache(&stack_table)?, &args.run, &mut |_| {})
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
) -> anyhow::Result<Vec<anyhow::Result<SimOutput>>> {
    use rayon::prelude::*;
    let (_, args) = split_options(trace, common)?;
    let loaded = LoadedTrace::read(&args.trace)?;
    let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build()?;
    Ok(pool.install(|| {
        cells
            .par_iter()
            .map(|cell| {
                let mut options = common.clone();
                options.extend(cell.clone());
                let result = split_options(trace, &options).and_then(|(stack_table, args)| {
                    crate::run::simulate_loaded(
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
