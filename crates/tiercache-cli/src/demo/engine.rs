//! Part 2 of the demo: the engine live, DRAM alone and DRAM over a memory-mapped tier that
//! emulates Optane, on the same requests from two threads, each beside the simulator's
//! prediction for the same stack and shards.

use std::time::Instant;

use serde::Serialize;
use tiercache_core::{Op, Request};
use tiercache_engine::{Cache, CacheConfig};
use tiercache_policy::StackConfig;
use tiercache_sim::{simulate_slice, RunOptions};

const THREADS: usize = 2;
const SHARDS: usize = 8;
const BLOCK: usize = 4096;

/// One stack run live.
#[derive(Serialize)]
pub struct EngineRun {
    pub stack: String,
    pub threads: usize,
    pub ops_per_second: f64,
    pub mean_us: f64,
    pub p99_us: f64,
    /// Read hits served by each tier, top down, over the reads.
    pub tier_hit_ratios: Vec<f64>,
    /// The same from the simulator, given the same stack, shards and requests.
    pub predicted_tier_hit_ratios: Vec<f64>,
}

/// The two stacks: DRAM of 5% of the hot set alone, and over a mapped tier of 25%.
pub fn run(requests: &[Request], hot: u64, quiet: bool) -> anyhow::Result<Vec<EngineRun>> {
    let dir = super::restart::scratch_dir("engine")?;
    let dram_kib = hot * 5 / 100 * 4;
    let slow_kib = hot * 25 / 100 * 4;
    let tier = dir.path.join("slow-tier.tc");
    let stacks = [
        (
            "DRAM alone (LRU)".to_string(),
            format!("policy = \"lru\"\ncapacity = \"{dram_kib}KiB\"\n"),
            None,
        ),
        (
            "DRAM over a mapped tier emulating Optane (LRU > LRU)".to_string(),
            format!(
                "policy = \"lru\"\ncapacity = \"{dram_kib}KiB\"\nlower_policy = \"lru\"\n\
                 lower_capacity = \"{slow_kib}KiB\"\n"
            ),
            Some(format!(
                "[[media]]\nkind = \"mapped\"\npath = {:?}\nprofile = \"optane-dcpm\"\n",
                tier.display().to_string()
            )),
        ),
    ];
    let mut runs = Vec::new();
    for (name, stack, media) in stacks {
        if !quiet {
            eprintln!("demo: running the engine: {name}");
        }
        let text = format!(
            "[stack]\n{stack}\n{}\n[engine]\nshards = {SHARDS}\n",
            media.as_deref().unwrap_or("")
        );
        let config: CacheConfig = toml::from_str(&text)?;
        let cache = config.builder()?.build()?;
        let (seconds, mean_us, p99_us) = drive(&cache, requests)?;
        let stats = cache.stats();
        let lookups = stats.lookups.max(1) as f64;
        let tier_hit_ratios = stats.tier_hits.iter().map(|&h| h as f64 / lookups).collect();
        drop(cache);
        let predicted = StackConfig::from_toml(&format!("{stack}shards = {SHARDS}\n"))
            .map_err(anyhow::Error::msg)?;
        let tiers = predicted.tiers.len();
        let report = simulate_slice(&RunOptions::new(predicted), requests)?;
        let reads = report.counters.reads.max(1) as f64;
        let predicted_tier_hit_ratios =
            (0..tiers).map(|t| report.counters.read_tier_hits[t] as f64 / reads).collect();
        runs.push(EngineRun {
            stack: name,
            threads: THREADS,
            ops_per_second: requests.len() as f64 / seconds,
            mean_us,
            p99_us,
            tier_hit_ratios,
            predicted_tier_hit_ratios,
        });
    }
    let _ = std::fs::remove_file(&tier);
    Ok(runs)
}

/// Runs `requests` on `THREADS` threads, each taking every `THREADS`th request in order: a
/// read is a read-through (a miss loads the block and the policy may admit it), a write a
/// put. The seconds it took, and the mean and 99th percentile latency in microseconds.
fn drive(cache: &Cache, requests: &[Request]) -> anyhow::Result<(f64, f64, f64)> {
    let started = Instant::now();
    let histograms = std::thread::scope(|s| {
        let workers: Vec<_> = (0..THREADS)
            .map(|t| {
                s.spawn(move || -> anyhow::Result<hdrhistogram::Histogram<u64>> {
                    let mut latency =
                        hdrhistogram::Histogram::<u64>::new_with_bounds(1, 60_000_000_000, 3)?;
                    let mut buf = vec![0u8; BLOCK];
                    for r in requests.iter().skip(t).step_by(THREADS) {
                        let op = Instant::now();
                        match r.op {
                            Op::Write => {
                                buf[..8].copy_from_slice(&r.key.to_le_bytes());
                                cache.put(r.key, &buf)?;
                            }
                            _ => {
                                let key = r.key;
                                cache.read_through(key, &mut buf, |b| {
                                    b[..8].copy_from_slice(&key.to_le_bytes());
                                    Ok(b.len())
                                })?;
                            }
                        }
                        latency.saturating_record(op.elapsed().as_nanos() as u64);
                    }
                    Ok(latency)
                })
            })
            .collect();
        workers.into_iter().map(|w| w.join().expect("a demo thread panicked")).collect::<Vec<_>>()
    });
    let seconds = started.elapsed().as_secs_f64();
    let mut all = hdrhistogram::Histogram::<u64>::new_with_bounds(1, 60_000_000_000, 3)?;
    for h in histograms {
        all.add(h?)?;
    }
    Ok((seconds, all.mean() / 1000.0, all.value_at_quantile(0.99) as f64 / 1000.0))
}

pub fn print(runs: &[EngineRun], requests: usize) {
    println!(
        "2. The engine, live: the first {requests} requests from {THREADS} threads ({SHARDS} \
         shards), read hits by tier beside the simulator's prediction"
    );
    println!(
        "   {:<52} {:>10} {:>8} {:>8} {:>22} {:>22}",
        "stack", "ops/s", "mean us", "p99 us", "hits DRAM / slow", "predicted"
    );
    let ratios = |r: &[f64]| r.iter().map(|x| format!("{:.2}%", x * 100.0)).collect::<Vec<_>>();
    for run in runs {
        println!(
            "   {:<52} {:>10.0} {:>8.1} {:>8.1} {:>22} {:>22}",
            run.stack,
            run.ops_per_second,
            run.mean_us,
            run.p99_us,
            ratios(&run.tier_hit_ratios).join(" / "),
            ratios(&run.predicted_tier_hit_ratios).join(" / ")
        );
    }
    println!(
        "   The slow tier is a file mapped from tmpfs, slowed to the optane-dcpm profile; the \
         prediction is the simulator's for the same stack and shards (threads interleave \
         differently, so it is close, not equal)."
    );
}
