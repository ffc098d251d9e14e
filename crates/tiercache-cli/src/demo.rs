//! `tiercache demo`: the README's first command. On a synthetic workload built in memory, a
//! Zipf(0.9) hot set with a sequential scan interleaved (the case where recency alone fails):
//!
//! 1. the simulator: the classic policies at a few cache sizes, and the papers' hybrid stacks
//!    (DRAM over a slower memory tier: DRAM-first, NVCache's OBP in front, Hibachi);
//! 2. the engine, live: DRAM alone, then DRAM over a memory-mapped tier emulating Optane, on
//!    the same requests from two threads, beside the simulator's prediction for each stack;
//! 3. a warm restart: a child process writes through a write-back stack, syncs and exits
//!    without writing anything back; the cache reopens, finds the dirty blocks, and every
//!    write reads back.
//!
//! Every file it makes is in a temporary directory (on tmpfs where there is one), removed at
//! the end.

mod engine;
mod restart;

use clap::Args;
use serde::Serialize;
use tiercache_core::{Capacity, Request};
use tiercache_policy::{PolicyConfig, StackConfig};
use tiercache_sim::{simulate_slice, RunOptions};
use tiercache_workload::gen::{KeyDistribution, SizeDistribution, Synthetic, SyntheticConfig};

#[derive(Args)]
pub struct DemoArgs {
    /// Requests in the simulator's workload (the engine runs a fifth of them).
    #[arg(long, default_value_t = 2_000_000)]
    pub requests: u64,
    /// Seed of the workload's and the policies' randomness.
    #[arg(long, default_value_t = 7)]
    pub seed: u64,
    /// Everything as one JSON document.
    #[arg(long)]
    pub json: bool,
    /// A short run (a tenth of the requests), for tests and CI.
    #[arg(long)]
    pub quick: bool,
    /// Run as the warm restart's writer in this directory (used by the demo itself).
    #[arg(long, hide = true)]
    pub restart_child: Option<std::path::PathBuf>,
}

/// Everything the demo shows, for `--json`.
#[derive(Serialize)]
struct Demo {
    requests: u64,
    simulator: Vec<tiercache_sim::SweepPoint>,
    hybrid: Vec<Hybrid>,
    engine: Vec<engine::EngineRun>,
    warm_restart: restart::Restart,
}

/// A hybrid stack in the simulator: DRAM over a slower memory tier.
#[derive(Serialize)]
struct Hybrid {
    stack: &'static str,
    dram_percent: u64,
    slow_percent: u64,
    hit_ratio: f64,
    /// Read hits served by DRAM and by the slow tier, over the reads.
    dram_hit_ratio: f64,
    slow_hit_ratio: f64,
    /// Bytes written into the slow tier (inserted or moved there), a request: what its
    /// endurance and write bandwidth pay, and what NVCache's OBP saves.
    slow_bytes_written_per_request: f64,
}

const HOT_OBJECTS: u64 = 100_000;
const SCAN_EVERY: u64 = 5;
const POLICIES: [&str; 7] = ["fifo", "lru", "clock", "lfu", "arc", "s3fifo", "belady"];
const CAPACITY_PERCENT: [u64; 4] = [1, 5, 10, 25];

fn workload(requests: u64, seed: u64) -> anyhow::Result<Vec<Request>> {
    let hot = SyntheticConfig {
        distribution: KeyDistribution::ScrambledZipf { theta: 0.9 },
        objects: HOT_OBJECTS,
        requests,
        read_ratio: 0.9,
        size: SizeDistribution::Fixed { bytes: 4096 },
        seed,
    };
    let mut out = Vec::with_capacity(requests as usize);
    let mut scan_key = HOT_OBJECTS;
    for (i, mut req) in Synthetic::new(hot)?.enumerate() {
        if (i as u64).is_multiple_of(SCAN_EVERY) {
            req.key = scan_key;
            scan_key += 1;
        }
        out.push(req);
    }
    Ok(out)
}

/// The hybrid stacks of part 1, as the simulator's stack spec: `{dram}` and `{slow}` are
/// replaced by the tiers' sizes.
const HYBRIDS: [(&str, &str); 3] = [
    ("DRAM-first LRU over LRU", "policy = \"lru\"\nlower_policy = \"lru\""),
    (
        "NVCache: OBP in front of DRAM-first",
        "policy = \"lru\"\nlower_policy = \"lru\"\nnvcache = \"obp:0.1\"",
    ),
    ("Hibachi (clean in DRAM, dirty in the slow tier)", "policy = \"hibachi\""),
];
/// The hybrid stacks' sizes: DRAM and slow tier, percent of the hot set.
const HYBRID_SIZES: [(u64, u64); 2] = [(1, 10), (5, 25)];

/// A stack spec with DRAM of `dram` objects over a slow tier of `slow`.
fn hybrid_stack(spec: &str, dram: u64, slow: u64) -> anyhow::Result<StackConfig> {
    let text = format!("{spec}\nunit = \"objects\"\ncapacity = {dram}\nlower_capacity = {slow}\n");
    StackConfig::from_toml(&text).map_err(anyhow::Error::msg)
}

fn hybrids(requests: &[Request]) -> anyhow::Result<Vec<Hybrid>> {
    use rayon::prelude::*;
    let jobs: Vec<(usize, (u64, u64))> =
        (0..HYBRIDS.len()).flat_map(|h| HYBRID_SIZES.iter().map(move |&size| (h, size))).collect();
    jobs.par_iter()
        .map(|&(h, (dram, slow))| {
            let (name, spec) = HYBRIDS[h];
            let stack = hybrid_stack(spec, HOT_OBJECTS * dram / 100, HOT_OBJECTS * slow / 100)?;
            let report = simulate_slice(&RunOptions::new(stack), requests)?;
            let c = &report.counters;
            let reads = c.reads.max(1) as f64;
            Ok(Hybrid {
                stack: name,
                dram_percent: dram,
                slow_percent: slow,
                hit_ratio: report.hit_ratio,
                dram_hit_ratio: c.read_tier_hits[0] as f64 / reads,
                slow_hit_ratio: c.read_tier_hits[1] as f64 / reads,
                slow_bytes_written_per_request: c.bytes_written_to_tier[1] as f64
                    / c.requests.max(1) as f64,
            })
        })
        .collect()
}

pub fn run(args: &DemoArgs) -> anyhow::Result<()> {
    if let Some(dir) = &args.restart_child {
        return restart::child(dir);
    }
    let total = if args.quick { args.requests / 10 } else { args.requests };
    let mut requests = workload(total, args.seed)?;
    let policies: Vec<PolicyConfig> =
        POLICIES.iter().map(|p| PolicyConfig::parse(p)).collect::<Result<_, _>>()?;
    let capacities: Vec<Capacity> =
        CAPACITY_PERCENT.iter().map(|p| Capacity::objects(HOT_OBJECTS * p / 100)).collect();
    let start = std::time::Instant::now();
    let points =
        tiercache_sim::sweep(&mut requests, &policies, &capacities, &[], args.seed, false, &|| {})?;
    let elapsed = start.elapsed().as_secs_f64();
    let hybrid = hybrids(&requests)?;
    let engine_requests = &requests[..requests.len() / 5];
    let engine = engine::run(engine_requests, HOT_OBJECTS, args.json)?;
    let warm_restart = restart::run(args.quick)?;
    if args.json {
        let demo = Demo { requests: total, simulator: points, hybrid, engine, warm_restart };
        println!("{}", serde_json::to_string_pretty(&demo)?);
        return Ok(());
    }
    println!("tiercache demo: {total} requests, 4 KiB objects, 90% reads");
    println!("  a Zipf(0.9) hot set of {HOT_OBJECTS} objects; every {SCAN_EVERY}th request scans a new object");
    println!();
    println!("1. The simulator: classic policies, one tier");
    print!("hit ratio   {:<16}", "policy");
    for c in &capacities {
        print!(" {:>9}", format!("{} obj", c.amount));
    }
    println!();
    for chunk in points.chunks(capacities.len()) {
        print!("            {:<16}", chunk[0].policy);
        for p in chunk {
            print!(" {:>8.2}%", p.report.hit_ratio * 100.0);
        }
        println!();
    }
    println!("belady is the offline optimum: no policy can beat it on this stream.");
    let simulated = points.iter().map(|p| p.report.counters.requests).sum::<u64>() as f64;
    println!(
        "{} simulations in {elapsed:.2} s ({:.1} M requests/s over all cores)",
        points.len(),
        simulated / elapsed / 1e6
    );
    println!();
    println!(
        "   The papers' hybrid stacks: DRAM over a slower memory tier (read hits by tier; KiB \
         written into the slow tier a request)"
    );
    let head = ("stack", "DRAM + slow", "hit", "DRAM", "slow", "slow KiB");
    println!(
        "   {:<48} {:>12} {:>9} {:>9} {:>9} {:>9}",
        head.0, head.1, head.2, head.3, head.4, head.5
    );
    for h in &hybrid {
        println!(
            "   {:<48} {:>12} {:>8.2}% {:>8.2}% {:>8.2}% {:>9.2}",
            h.stack,
            format!("{}% + {}%", h.dram_percent, h.slow_percent),
            h.hit_ratio * 100.0,
            h.dram_hit_ratio * 100.0,
            h.slow_hit_ratio * 100.0,
            h.slow_bytes_written_per_request / 1024.0
        );
    }
    println!(
        "   NVCache's OBP admits to the slow tier only while (inserted + removed) / looked up \
         stays under 10%: fewer hits, far fewer bytes written."
    );
    println!();
    engine::print(&engine, engine_requests.len());
    println!();
    restart::print(&warm_restart);
    println!();
    println!("next: tiercache sim --trace FILE --policy arc --capacity 64MiB  (see README.md)");
    Ok(())
}
