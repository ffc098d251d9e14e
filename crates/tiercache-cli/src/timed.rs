//! `tiercache sim --clients N`: the policy on modeled devices in virtual time.

use anyhow::Context;
use tiercache_core::{format_size, DeviceProfile, Request};
use tiercache_sim::timed::{simulate_timed, TimedOptions, TimedReport};
use tiercache_sim::RunOptions;
use tiercache_workload::TraceReader;

use crate::sim::SimArgs;

fn profile(text: &str, flag: &str) -> anyhow::Result<DeviceProfile> {
    DeviceProfile::load(text).map_err(anyhow::Error::msg).with_context(|| flag.to_string())
}

pub fn run(args: &SimArgs, options: &RunOptions, clients: usize) -> anyhow::Result<()> {
    anyhow::ensure!(clients >= 1, "--clients must be at least 1");
    let mut tiers = vec![profile(&args.profile, "--profile")?];
    if options.lower.is_some() {
        tiers.push(profile(&args.lower_profile, "--lower-profile")?);
    }
    let backing = profile(&args.backing_profile, "--backing-profile")?;
    let mut reader = TraceReader::open(&args.trace.trace, &args.trace.options()?)?;
    let requests: Vec<Request> = reader.by_ref().collect::<Result<_, _>>()?;
    let mut policy = tiercache_sim::build(options)?;
    let report = simulate_timed(&mut policy, &requests, &TimedOptions { clients, tiers, backing });
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print(&report, &args.trace.trace);
    }
    Ok(())
}

fn print(r: &TimedReport, trace: &std::path::Path) {
    println!("trace     {}   clients {}", trace.display(), r.clients);
    println!(
        "{} requests in {:.3} virtual s: {:.0} ops/s   hit ratio {:.2}%",
        r.requests,
        r.virtual_seconds,
        r.ops_per_second,
        r.hit_ratio * 100.0
    );
    println!(
        "latency us: mean {:.1}   p50 {:.1}   p95 {:.1}   p99 {:.1}",
        r.latency_us_mean, r.latency_us_p50, r.latency_us_p95, r.latency_us_p99
    );
    for d in &r.devices {
        println!(
            "device {:<12} utilization {:>6.1}%   read {:>10}   written {:>10}",
            d.name,
            d.utilization * 100.0,
            format_size(d.bytes_read),
            format_size(d.bytes_written)
        );
    }
}
