//! What telling a policy of a key's first hit an epoch costs in hit ratio
//! (`tiercache_policy::told`), against telling it every hit, on the traces in `data/`:
//!
//!     cargo run --release -p tiercache-sim --example hit_rule_cost -- [--json] [--divisors 8,16,32,64]
//!
//! Every policy with quiet hits (the ones the rule applies to) at five cache sizes, 0.5% to 30%
//! of each trace's distinct keys, in objects. The ARC paper's traces count 512-byte blocks as
//! their paper does; CloudPhysics is read in its 4 KiB block view, as the engine's tests read
//! it. For each rule the table gives the largest loss of hit ratio over every trace, policy and
//! size, in points, the mean loss, and the share of hits the policy is still told.

use std::path::{Path, PathBuf};

use rayon::prelude::*;
use tiercache_core::{Capacity, Decision, KeySet, Op, Request, TierId};
use tiercache_policy::{AnyPolicy, HitRule, PolicyConfig, StackConfig};
use tiercache_workload::{TraceOptions, TraceReader};

const POLICIES: [&str; 7] = ["lru", "clock", "arc", "s3fifo", "lfu", "fifo", "setassoc"];
const FRACTIONS: [f64; 5] = [0.005, 0.01, 0.03, 0.1, 0.3];

/// A trace in `data/` and the block size it is read in (`None`: its own units).
const TRACES: [(&str, Option<u32>); 7] = [
    ("arc_OLTP.lis.zst", None),
    ("arc_P2.lis.zst", None),
    ("arc_P3.lis.zst", None),
    ("cloudPhysicsIO.vscsi.zst", Some(4096)),
    ("msr_hm_0_first1000.csv.zst", Some(4096)),
    ("systor17_traces_sample1000.csv.gz", Some(4096)),
    ("systor17_additional_sample1000.csv.gz", Some(4096)),
];

struct Point {
    trace: &'static str,
    policy: &'static str,
    capacity: u64,
    rule: HitRule,
    requests: u64,
    hits: u64,
    untold: u64,
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let json = args.iter().any(|a| a == "--json");
    let divisors: Vec<u32> = match args.iter().position(|a| a == "--divisors") {
        Some(i) => args
            .get(i + 1)
            .ok_or("--divisors needs a list, e.g. 8,16,32")?
            .split(',')
            .map(|d| d.trim().parse())
            .collect::<Result<_, _>>()?,
        None => vec![8, 16, 32, 64, 128],
    };
    let rules: Vec<HitRule> = std::iter::once(HitRule::Exact)
        .chain(divisors.iter().map(|&divisor| HitRule::Epochs { divisor }))
        .collect();
    let data = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../data");
    let traces: Vec<(&'static str, Vec<Request>)> = TRACES
        .iter()
        .map(|&(name, block)| Ok((name, read(&data.join(name), block)?)))
        .collect::<Result<_, Box<dyn std::error::Error>>>()?;
    let mut jobs = Vec::new();
    for (trace, requests) in &traces {
        let distinct = requests.iter().map(|r| r.key).collect::<KeySet>().len() as f64;
        for policy in POLICIES {
            for fraction in FRACTIONS {
                let capacity = ((distinct * fraction) as u64).max(2);
                for &rule in &rules {
                    jobs.push((*trace, requests, policy, capacity, rule));
                }
            }
        }
    }
    let points: Vec<Point> = jobs
        .par_iter()
        .map(|&(trace, requests, policy, capacity, rule)| {
            run(trace, requests, policy, capacity, rule)
        })
        .collect();
    if json {
        print_json(&points);
    } else {
        print_table(&points, &rules);
    }
    Ok(())
}

fn read(path: &Path, block: Option<u32>) -> Result<Vec<Request>, Box<dyn std::error::Error>> {
    let options = TraceOptions { block_size: block, ..TraceOptions::default() };
    let requests = TraceReader::open(path, &options)?.collect::<Result<Vec<_>, _>>()?;
    Ok(requests)
}

fn run(
    trace: &'static str,
    requests: &[Request],
    policy: &'static str,
    capacity: u64,
    rule: HitRule,
) -> Point {
    let config = PolicyConfig::parse(policy).expect("a registered policy");
    let stack = StackConfig {
        hit_rule: Some(rule),
        ..StackConfig::single(config, Capacity::objects(capacity))
    };
    let mut built: AnyPolicy = stack.build().expect("a policy of this size");
    let mut decision = Decision::new();
    let mut hits = 0;
    for req in requests {
        decision.clear();
        tiercache_policy::Policy::decide(&mut built, req, &mut decision);
        hits += (decision.hit == Some(TierId(0)) && req.op != Op::Delete) as u64;
    }
    let untold = built.untold_hits();
    Point { trace, policy, capacity, rule, requests: requests.len() as u64, hits, untold }
}

/// The loss of hit ratio of `p` against the exact run of the same trace, policy and size, in
/// points.
fn loss(points: &[Point], p: &Point) -> f64 {
    let exact = points
        .iter()
        .find(|e| {
            e.rule == HitRule::Exact
                && e.trace == p.trace
                && e.policy == p.policy
                && e.capacity == p.capacity
        })
        .expect("every case has an exact run");
    100.0 * (exact.hits as f64 - p.hits as f64) / p.requests as f64
}

fn print_table(points: &[Point], rules: &[HitRule]) {
    println!("Loss of hit ratio against exact telling, in points (positive: fewer hits), over");
    println!("{} traces x {} policies x {} sizes:", TRACES.len(), POLICIES.len(), FRACTIONS.len());
    println!();
    println!(
        "{:<10} {:>10} {:>10} {:>12} {:>16}",
        "rule", "max loss", "mean loss", "largest gain", "hits told"
    );
    for rule in rules.iter().filter(|r| **r != HitRule::Exact) {
        let of_rule: Vec<&Point> = points.iter().filter(|p| p.rule == *rule).collect();
        let losses: Vec<f64> = of_rule.iter().map(|p| loss(points, p)).collect();
        let max = losses.iter().cloned().fold(f64::MIN, f64::max);
        let min = losses.iter().cloned().fold(f64::MAX, f64::min);
        let mean = losses.iter().sum::<f64>() / losses.len() as f64;
        let hits: u64 = of_rule.iter().map(|p| p.hits).sum();
        let untold: u64 = of_rule.iter().map(|p| p.untold).sum();
        let told = 100.0 * (hits - untold) as f64 / hits.max(1) as f64;
        println!("{:<10} {max:>10.3} {mean:>10.3} {:>12.3} {told:>15.1}%", rule.label(), -min);
    }
    println!();
    println!("The largest losses:");
    let mut worst: Vec<(&Point, f64)> =
        points.iter().filter(|p| p.rule != HitRule::Exact).map(|p| (p, loss(points, p))).collect();
    worst.sort_by(|a, b| b.1.total_cmp(&a.1));
    println!("{:<10} {:<38} {:<9} {:>9} {:>9}", "rule", "trace", "policy", "capacity", "loss");
    for (p, l) in worst.iter().take(10) {
        println!(
            "{:<10} {:<38} {:<9} {:>9} {l:>9.3}",
            p.rule.label(),
            p.trace,
            p.policy,
            p.capacity
        );
    }
}

fn print_json(points: &[Point]) {
    let rows: Vec<String> = points
        .iter()
        .map(|p| {
            format!(
                "{{\"trace\":\"{}\",\"policy\":\"{}\",\"capacity_objects\":{},\"rule\":\"{}\",\"requests\":{},\"hits\":{},\"untold_hits\":{},\"loss_points\":{:.4}}}",
                p.trace, p.policy, p.capacity, p.rule.label(), p.requests, p.hits, p.untold, loss(points, p)
            )
        })
        .collect();
    println!("[\n{}\n]", rows.join(",\n"));
}
