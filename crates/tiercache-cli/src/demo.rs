//! `tiercache demo`: the README's first command. Builds a synthetic workload in memory, a
//! Zipf(0.9) hot set with a sequential scan interleaved (the case where recency alone fails),
//! runs the classic policies at a few cache sizes and prints a comparison.

use clap::Args;
use tiercache_core::{Capacity, Request};
use tiercache_policy::PolicyConfig;
use tiercache_workload::gen::{KeyDistribution, SizeDistribution, Synthetic, SyntheticConfig};

#[derive(Args)]
pub struct DemoArgs {
    /// Requests in the workload.
    #[arg(long, default_value_t = 2_000_000)]
    pub requests: u64,
    #[arg(long, default_value_t = 7)]
    pub seed: u64,
    #[arg(long)]
    pub json: bool,
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

pub fn run(args: &DemoArgs) -> anyhow::Result<()> {
    let mut requests = workload(args.requests, args.seed)?;
    let policies: Vec<PolicyConfig> =
        POLICIES.iter().map(|p| PolicyConfig::parse(p)).collect::<Result<_, _>>()?;
    let capacities: Vec<Capacity> =
        CAPACITY_PERCENT.iter().map(|p| Capacity::objects(HOT_OBJECTS * p / 100)).collect();
    let start = std::time::Instant::now();
    let points =
        tiercache_sim::sweep(&mut requests, &policies, &capacities, &[], args.seed, false, &|| {})?;
    let elapsed = start.elapsed().as_secs_f64();
    if args.json {
        println!("{}", serde_json::to_string_pretty(&points)?);
        return Ok(());
    }
    println!("tiercache demo: {} requests, 4 KiB objects, 90% reads", args.requests);
    println!("  a Zipf(0.9) hot set of {HOT_OBJECTS} objects; every {SCAN_EVERY}th request scans a new object");
    println!();
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
    println!();
    println!("belady is the offline optimum: no policy can beat it on this stream.");
    let simulated = points.iter().map(|p| p.report.counters.requests).sum::<u64>() as f64;
    println!(
        "{} simulations in {elapsed:.2} s ({:.1} M requests/s over all cores)",
        points.len(),
        simulated / elapsed / 1e6
    );
    println!();
    println!("next: tiercache sim --trace FILE --policy arc --capacity 64MiB  (see README.md)");
    Ok(())
}
