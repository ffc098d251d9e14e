//! One run of a policy stack over a trace: counted, or in virtual time on modeled devices
//! (`--clients`, `--arrival-rate`), and its report as `tiercache sim --json` prints it.

use std::path::PathBuf;

use anyhow::Context;
use tiercache_policy::StackConfig;
use tiercache_sim::timed::TimedReport;
use tiercache_sim::{simulate, RunOptions, SimReport};
use tiercache_workload::{TraceInfo, TraceReader};

use crate::run_options::RunArgs;
use crate::TraceArgs;

/// What a simulation gives: counters, or a virtual-time report.
pub enum SimOutput {
    Counted { report: Box<SimReport>, info: TraceInfo, skipped: u64 },
    Timed { report: Box<TimedReport>, trace: PathBuf },
}

impl SimOutput {
    /// The object `sim --json` prints.
    pub fn to_json(&self) -> serde_json::Value {
        match self {
            SimOutput::Counted { report, info, skipped } => {
                let mut value = serde_json::to_value(report).expect("reports serialize");
                value["trace"] = serde_json::json!(info.path);
                value["format"] = serde_json::json!(info.format);
                value["skipped_records"] = serde_json::json!(skipped);
                value
            }
            SimOutput::Timed { report, .. } => {
                serde_json::to_value(report).expect("reports serialize")
            }
        }
    }
}

/// A trace read into memory once, for many simulations of it (a sweep's cells).
pub struct LoadedTrace {
    pub requests: Vec<tiercache_core::Request>,
    pub info: TraceInfo,
    pub skipped: u64,
    /// The requests annotated with their next access, made on the first policy that needs it.
    annotated: std::sync::OnceLock<Vec<tiercache_core::Request>>,
}

impl LoadedTrace {
    pub fn read(trace: &TraceArgs) -> anyhow::Result<LoadedTrace> {
        let mut reader = TraceReader::open(&trace.trace, &trace.options()?)?;
        let mut requests = Vec::new();
        let mut batch = Vec::new();
        loop {
            reader.next_batch(&mut batch)?;
            if batch.is_empty() {
                break;
            }
            requests.extend_from_slice(&batch);
        }
        let (info, skipped) = (reader.info().clone(), reader.skipped());
        Ok(LoadedTrace { requests, info, skipped, annotated: std::sync::OnceLock::new() })
    }

    fn annotated(&self) -> &[tiercache_core::Request] {
        self.annotated.get_or_init(|| {
            let mut requests = self.requests.clone();
            tiercache_core::annotate_next_access(&mut requests);
            requests
        })
    }
}

/// As [`simulate_stack`] over a trace read already: the same report as reading it again.
pub fn simulate_loaded(
    trace: &TraceArgs,
    loaded: &LoadedTrace,
    stack: StackConfig,
    args: &RunArgs,
) -> anyhow::Result<SimOutput> {
    check_run(&stack, args)?;
    let options = RunOptions::new(stack);
    if args.clients.is_some() || args.arrival_rate.is_some() {
        let clients = args.clients.unwrap_or(1);
        let report =
            crate::timed::simulate_on(trace, Some(&loaded.requests), args, &options, clients)?;
        return Ok(SimOutput::Timed { report: Box::new(report), trace: trace.trace.clone() });
    }
    let options = RunOptions { logical_time: !loaded.info.has_time, ..options };
    let requests =
        if options.stack.needs_future() { loaded.annotated() } else { &loaded.requests[..] };
    let report = tiercache_sim::simulate_slice(&options, requests)?;
    let (info, skipped) = (loaded.info.clone(), loaded.skipped);
    Ok(SimOutput::Counted { report: Box::new(report), info, skipped })
}

fn check_run(stack: &StackConfig, args: &RunArgs) -> anyhow::Result<()> {
    anyhow::ensure!(
        stack.nhc.is_none() || args.clients.is_some() || args.arrival_rate.is_some(),
        "--nhc tunes on measured throughput: run in virtual time with --clients or --arrival-rate"
    );
    anyhow::ensure!(
        args.interval_ms > 0.0 && args.interval_ms.is_finite(),
        "--interval-ms must be above 0"
    );
    if args.lower_profile.is_some() {
        anyhow::ensure!(
            stack.tiers.len() > 1,
            "--lower-profile models the tier below the top, and this cache has one tier: give \
             --lower-capacity too"
        );
        anyhow::ensure!(
            args.clients.is_some() || args.arrival_rate.is_some(),
            "--lower-profile models a device in virtual time: give --clients or --arrival-rate"
        );
    }
    Ok(())
}

/// Runs `stack` over the trace as `args` say (virtual time with --clients or --arrival-rate),
/// writing `--csv` if asked. `progress` hears the requests simulated so far as the run goes
/// (`Some`), and `None` once the trace is read (the command line draws a bar with it).
pub fn simulate_stack(
    trace: &TraceArgs,
    stack: StackConfig,
    args: &RunArgs,
    progress: &mut dyn FnMut(Option<u64>),
) -> anyhow::Result<SimOutput> {
    check_run(&stack, args)?;
    let options = RunOptions::new(stack);
    if args.clients.is_some() || args.arrival_rate.is_some() {
        let report = crate::timed::simulate(trace, args, &options, args.clients.unwrap_or(1))?;
        return Ok(SimOutput::Timed { report: Box::new(report), trace: trace.trace.clone() });
    }
    let mut reader = TraceReader::open(&trace.trace, &trace.options()?)?;
    let options = RunOptions { logical_time: !reader.info().has_time, ..options };
    let report =
        simulate(&options, &mut |batch| reader.next_batch(batch), &mut |n| progress(Some(n)))?;
    progress(None);
    if reader.skipped() > 0 {
        eprintln!(
            "warning: skipped {} malformed records; the first: {}",
            reader.skipped(),
            reader.first_skipped().unwrap_or("")
        );
    }
    if let Some(path) = &args.csv {
        write_csv(path, &report, reader.skipped())?;
    }
    let (info, skipped) = (reader.info().clone(), reader.skipped());
    Ok(SimOutput::Counted { report: Box::new(report), info, skipped })
}

/// Flattens a report to (column, value) pairs for CSV.
pub fn flat_fields(report: &SimReport) -> Vec<(String, String)> {
    let value = serde_json::to_value(report).expect("reports serialize");
    let mut fields = Vec::new();
    if let serde_json::Value::Object(map) = value {
        for (key, v) in map {
            match v {
                serde_json::Value::Object(inner) => {
                    for (k, x) in inner {
                        fields.push((format!("{key}_{k}"), x.to_string()));
                    }
                }
                serde_json::Value::Array(_) => {}
                serde_json::Value::String(s) => fields.push((key, s)),
                other => fields.push((key, other.to_string())),
            }
        }
    }
    fields
}

fn write_csv(path: &std::path::Path, report: &SimReport, skipped: u64) -> anyhow::Result<()> {
    let mut fields = flat_fields(report);
    fields.push(("skipped_records".into(), skipped.to_string()));
    let header: Vec<&str> = fields.iter().map(|(k, _)| k.as_str()).collect();
    let row: Vec<&str> = fields.iter().map(|(_, v)| v.as_str()).collect();
    let text = format!("{}\n{}\n", header.join(","), row.join(","));
    std::fs::write(path, text).with_context(|| format!("cannot write {}", path.display()))
}
