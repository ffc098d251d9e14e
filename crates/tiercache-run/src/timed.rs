//! A policy stack on modeled devices in virtual time (`tiercache sim --clients N`).

use anyhow::Context;
use tiercache_core::{DeviceProfile, Request};
use tiercache_sim::timed::{simulate_timed, CpuModel, TimedOptions, TimedReport};
use tiercache_sim::RunOptions;
use tiercache_workload::TraceReader;

use crate::run_options::RunArgs;
use crate::TraceArgs;

fn profile(text: &str, flag: &str) -> anyhow::Result<DeviceProfile> {
    DeviceProfile::load(text).map_err(anyhow::Error::msg).with_context(|| flag.to_string())
}

/// Runs the stack of `options` over the trace in virtual time; writes `--csv` if asked.
pub fn simulate(
    trace: &TraceArgs,
    args: &RunArgs,
    options: &RunOptions,
    clients: usize,
) -> anyhow::Result<TimedReport> {
    simulate_on(trace, None, args, options, clients)
}

/// As [`simulate`], over `requests` already read from the trace when given.
pub fn simulate_on(
    trace: &TraceArgs,
    requests: Option<&[Request]>,
    args: &RunArgs,
    options: &RunOptions,
    clients: usize,
) -> anyhow::Result<TimedReport> {
    anyhow::ensure!(clients >= 1, "--clients must be at least 1");
    let mut tiers = vec![profile(&args.profile, "--profile")?];
    let further = options.stack.tiers.len().saturating_sub(2);
    if options.stack.tiers.len() > 1 {
        let lower = args.lower_profile.as_deref().unwrap_or("optane-dcpm");
        tiers.push(profile(lower, "--lower-profile")?);
        anyhow::ensure!(
            args.tier_profiles.len() <= further,
            "{} --tier-profile for {further} --tier",
            args.tier_profiles.len(),
        );
        for i in 0..further {
            let name = args.tier_profiles.get(i).map_or("nvme", String::as_str);
            tiers.push(profile(name, "--tier-profile")?);
        }
    }
    let backing = profile(&args.backing_profile, "--backing-profile")?;
    let timed = TimedOptions {
        arrival_rate: args.arrival_rate,
        interval_us: ((args.interval_ms * 1000.0).round() as u64).max(1),
        cpu: args
            .cpu
            .as_deref()
            .map(|text| CpuModel::parse(text, clients))
            .transpose()
            .map_err(anyhow::Error::msg)
            .context("--cpu")?,
        ..TimedOptions::closed(clients, tiers, backing)
    };
    // Before the trace is read: a run that could never end is refused at once.
    timed
        .validate()
        .map_err(anyhow::Error::msg)
        .context("virtual time (--arrival-rate, --clients)")?;
    let read;
    let requests = match requests {
        Some(requests) => requests,
        None => {
            let mut reader = TraceReader::open(&trace.trace, &trace.options()?)?;
            read = reader.by_ref().collect::<Result<Vec<Request>, _>>()?;
            &read
        }
    };
    let mut policy = tiercache_sim::build(options)?;
    let report = simulate_timed(&mut policy, requests, &timed);
    if let Some(path) = &args.csv {
        std::fs::write(path, series_csv(&report))
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    Ok(report)
}

/// The time series as CSV: one row per interval, the policy's knobs as the last columns.
pub fn series_csv(report: &TimedReport) -> String {
    let knobs: Vec<&str> =
        report.series.first().map(|p| p.knobs.keys().copied().collect()).unwrap_or_default();
    let mut text =
        String::from("start_seconds,ops_per_second,hit_ratio,mean_latency_us,p99_latency_us");
    for knob in &knobs {
        text += &format!(",{knob}");
    }
    text.push('\n');
    for p in &report.series {
        text += &format!(
            "{},{},{},{},{}",
            p.start_seconds, p.ops_per_second, p.hit_ratio, p.mean_latency_us, p.p99_latency_us
        );
        for knob in &knobs {
            text += &format!(",{}", p.knobs.get(knob).copied().unwrap_or(f64::NAN));
        }
        text.push('\n');
    }
    text
}
