//! DRAM + disk tier in front of a backing file, tiercache next to foyer's hybrid cache,
//! configured to the same sizes, in one run: 4 KiB blocks, a 512 MiB backing file read and
//! written through the cache (Zipf 0.9 scrambled over its blocks, 90% reads), 32 MiB of memory
//! and a 128 MiB disk tier (direct I/O in both) in a scratch directory. A read hit copies the
//! block out; a miss reads the backing file and inserts the block; a write writes the backing
//! file, then the cache (write-through in both). Threads: `--threads 1,4,16` (any list; 1 and
//! 2 by default), each after a warm-up; at each count foyer runs first, then tiercache.
//!
//! Writes dropped are counted for both: tiercache's `writes_dropped` counter, and foyer's
//! disk-tier insertions dropped because its submit queue or buffer was full (its
//! `channel_overflow` and `buffer_overflow` counters, read through a metrics registry of ours).
//! Neither loses data here (the backing file has every write); a dropped insertion is a block
//! the disk tier does not get.
//!
//! Both start cold: foyer's device directory and tiercache's tier file are removed before each
//! run. tiercache's DRAM tier runs LRU; its disk tier runs each policy of `--disk-policy` in
//! turn (`log` by default: evicted in the order written, so the engine writes the tier in runs
//! of adjacent slots, as foyer writes its regions; `lru` reuses each freed slot where it is).
//! The table's `blocks/write` is how many blocks tiercache's disk writes carried on average.
//!
//! Run: `cargo run --release --bin hybrid -- [DIR] [--threads 1,4,16] [--disk-tier direct]
//! [--disk-policy log,lru] [--json]` in this directory (foyer pinned to 0.22.3). `--json`
//! prints one JSON object per thread count, tiercache disk tier and policy.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use clap::{Parser, ValueEnum};
use foyer::{
    BlockEngineConfig, DeviceBuilder, FsDeviceBuilder, HybridCache, HybridCacheBuilder,
    PsyncIoEngineConfig,
};
use foyer_compare::{Common, Row};
use mixtrics::metrics::{
    BoxedCounter, BoxedCounterVec, BoxedGauge, BoxedGaugeVec, BoxedHistogram, BoxedHistogramVec,
    CounterOps, CounterVecOps, GaugeOps, GaugeVecOps, HistogramOps, HistogramVecOps, RegistryOps,
};
use tiercache_core::Op;
use tiercache_engine::{CacheBuilder, CachedFile, TierKind};
use tiercache_policy::PolicyConfig;
use tiercache_workload::gen::{KeyDistribution, SizeDistribution, Synthetic, SyntheticConfig};

const BLOCK: usize = 4096;
const BACKING: u64 = 512 << 20;
const MEMORY: usize = 32 << 20;
const DISK: usize = 128 << 20;
const WARMUP: f64 = 5.0;
const SECONDS: f64 = 10.0;

/// DRAM + disk tier over a backing file, tiercache next to foyer's hybrid cache.
#[derive(Debug, Parser)]
struct Args {
    /// Scratch directory for the backing file and both disk tiers.
    dir: Option<PathBuf>,
    #[command(flatten)]
    common: Common,
    /// Seconds of warm-up before each measured run.
    #[arg(long, default_value_t = WARMUP)]
    warmup: f64,
    /// tiercache's disk tier: direct I/O, through the page cache, or both in turn.
    #[arg(long, value_enum, default_value_t = DiskTier::Both)]
    disk_tier: DiskTier,
    /// tiercache's disk tier policies to run, in turn (comma-separated). `log` (the default)
    /// evicts in the order blocks were written and leaves a rewritten block's space until the
    /// log reaches it, as foyer's and CacheLib's region-based disk caches do, so the engine
    /// writes the tier sequentially in runs of adjacent slots; `lru` and `fifo` reuse each
    /// freed slot at once, wherever it is.
    #[arg(long, value_delimiter = ',', default_value = "log")]
    disk_policy: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, ValueEnum)]
enum DiskTier {
    Direct,
    File,
    Both,
}

/// How long each phase of a run lasts.
#[derive(Debug, Clone, Copy)]
struct Phases {
    warmup: f64,
    measured: f64,
}

fn stream(seed: u64) -> Synthetic {
    let config = SyntheticConfig {
        distribution: KeyDistribution::ScrambledZipf { theta: 0.9 },
        objects: BACKING / BLOCK as u64,
        requests: u64::MAX,
        read_ratio: 0.9,
        size: SizeDistribution::Fixed { bytes: BLOCK as u32 },
        seed,
    };
    Synthetic::new(config).expect("a valid workload")
}

fn prepare(path: &Path) {
    let file =
        OpenOptions::new().create(true).truncate(false).read(true).write(true).open(path).unwrap();
    if file.metadata().unwrap().len() >= BACKING {
        return;
    }
    let chunk: Vec<u8> = (0..1 << 20).map(|i: u32| (i % 251) as u8).collect();
    for at in (0..BACKING).step_by(chunk.len()) {
        file.write_all_at(&chunk, at).unwrap();
    }
    file.sync_all().unwrap();
}

/// Runs `op` on `threads` threads for a warm-up and then a measured phase; ops/s.
/// What a thread does with one request: its operation, key and a block-sized buffer.
type Request<'a> = dyn Fn(Op, u64, &mut [u8]) + Sync + 'a;

fn drive(threads: usize, phases: Phases, op: &Request) -> f64 {
    let phase = |seconds: f64, seed: u64| -> u64 {
        let done = AtomicU64::new(0);
        let deadline = Instant::now() + Duration::from_secs_f64(seconds);
        std::thread::scope(|s| {
            for t in 0..threads {
                let done = &done;
                s.spawn(move || {
                    let mut requests = stream(seed + t as u64);
                    let mut buf = vec![0u8; BLOCK];
                    let mut n = 0;
                    while Instant::now() < deadline {
                        for _ in 0..64 {
                            let req = requests.next().expect("endless");
                            op(req.op, req.key, &mut buf);
                        }
                        n += 64;
                    }
                    done.fetch_add(n, Ordering::Relaxed);
                });
            }
        });
        done.into_inner()
    };
    phase(phases.warmup, 100);
    let start = Instant::now();
    let ops = phase(phases.measured, 200);
    ops as f64 / start.elapsed().as_secs_f64()
}

/// tiercache with its disk tier read and written with direct I/O (`Flash`, as foyer's device
/// here) or through the page cache (`File`).
fn tiercache(
    dir: &Path,
    backing: &Path,
    threads: usize,
    phases: Phases,
    (direct, policy): (bool, &PolicyConfig),
) -> (f64, u64, f64, f64) {
    let tier = match direct {
        true => TierKind::Flash { path: dir.join("tiercache.flash") },
        false => TierKind::File { path: dir.join("tiercache.file") },
    };
    // Cold, as foyer starts (its device directory is removed before each run): a tier file
    // left by the last run would be recovered, a warm start foyer does not get.
    let _ = std::fs::remove_file(dir.join("tiercache.flash"));
    let _ = std::fs::remove_file(dir.join("tiercache.file"));
    let cache = CacheBuilder::new(PolicyConfig::Lru)
        .capacity_bytes(MEMORY as u64)
        .lower_tier(tier, DISK as u64, policy.clone())
        .block_size(BLOCK)
        .shards(32)
        .build()
        .expect("a valid cache");
    for warning in cache.warnings() {
        eprintln!("note: {warning}");
    }
    let file = CachedFile::open(backing, cache).unwrap();
    let ops = drive(threads, phases, &|op, key, buf| {
        let at = key * BLOCK as u64;
        match op {
            Op::Read => file.read_at(at, buf).map(|_| ()).unwrap(),
            _ => file.write_at(at, buf).map(|_| ()).unwrap(),
        }
    });
    let stats = file.cache().stats();
    let hit_ratio = stats.hits as f64 / stats.lookups.max(1) as f64;
    let blocks_per_write = stats.writes_behind as f64 / stats.behind_requests.max(1) as f64;
    (ops, stats.writes_dropped, hit_ratio, blocks_per_write)
}

/// A metrics registry that keeps counters, so foyer's drops can be read after a run.
#[derive(Debug, Default, Clone)]
struct Counters(Arc<Mutex<BTreeMap<String, Arc<AtomicU64>>>>);

#[derive(Debug)]
struct CounterVec {
    name: Cow<'static, str>,
    counters: Counters,
}

#[derive(Debug)]
struct Counter(Arc<AtomicU64>);

#[derive(Debug)]
struct Ignored;

impl CounterOps for Counter {
    fn increase(&self, val: u64) {
        self.0.fetch_add(val, Ordering::Relaxed);
    }
}

impl CounterVecOps for CounterVec {
    fn counter(&self, labels: &[Cow<'static, str>]) -> BoxedCounter {
        let key = format!("{}{{{}}}", self.name, labels.join(","));
        let mut map = self.counters.0.lock().unwrap();
        Box::new(Counter(map.entry(key).or_default().clone()))
    }
}

impl GaugeOps for Ignored {
    fn increase(&self, _: u64) {}
    fn decrease(&self, _: u64) {}
    fn absolute(&self, _: u64) {}
}

impl GaugeVecOps for Ignored {
    fn gauge(&self, _: &[Cow<'static, str>]) -> BoxedGauge {
        Box::new(Ignored)
    }
}

impl HistogramOps for Ignored {
    fn record(&self, _: f64) {}
}

impl HistogramVecOps for Ignored {
    fn histogram(&self, _: &[Cow<'static, str>]) -> BoxedHistogram {
        Box::new(Ignored)
    }
}

impl RegistryOps for Counters {
    fn register_counter_vec(
        &self,
        name: Cow<'static, str>,
        _: Cow<'static, str>,
        _: &'static [&'static str],
    ) -> BoxedCounterVec {
        Box::new(CounterVec { name, counters: self.clone() })
    }

    fn register_gauge_vec(
        &self,
        _: Cow<'static, str>,
        _: Cow<'static, str>,
        _: &'static [&'static str],
    ) -> BoxedGaugeVec {
        Box::new(Ignored)
    }

    fn register_histogram_vec(
        &self,
        _: Cow<'static, str>,
        _: Cow<'static, str>,
        _: &'static [&'static str],
    ) -> BoxedHistogramVec {
        Box::new(Ignored)
    }

    fn register_histogram_vec_with_buckets(
        &self,
        _: Cow<'static, str>,
        _: Cow<'static, str>,
        _: &'static [&'static str],
        _: Vec<f64>,
    ) -> BoxedHistogramVec {
        Box::new(Ignored)
    }
}

impl Counters {
    fn sum(&self, suffix: &str) -> u64 {
        let map = self.0.lock().unwrap();
        map.iter()
            .filter(|(k, _)| k.ends_with(suffix))
            .map(|(_, v)| v.load(Ordering::Relaxed))
            .sum()
    }
}

fn foyer(dir: &Path, backing: &Path, threads: usize, phases: Phases) -> (f64, u64, f64) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads)
        .enable_all()
        .build()
        .unwrap();
    let counters = Counters::default();
    let device_dir = dir.join(format!("foyer-{threads}"));
    let _ = std::fs::remove_dir_all(&device_dir);
    let cache: HybridCache<u64, Vec<u8>> = runtime.block_on(async {
        let device = FsDeviceBuilder::new(&device_dir)
            .with_capacity(DISK)
            .with_direct(true)
            .build()
            .expect("a foyer device");
        HybridCacheBuilder::new()
            .with_metrics_registry(Box::new(counters.clone()))
            .memory(MEMORY)
            .with_shards(32)
            .with_weighter(|_: &u64, v: &Vec<u8>| v.len())
            .storage()
            .with_io_engine_config(PsyncIoEngineConfig::new())
            .with_engine_config(BlockEngineConfig::new(device))
            .build()
            .await
            .expect("a foyer hybrid cache")
    });
    let file = File::options().read(true).write(true).open(backing).unwrap();
    let hits = AtomicU64::new(0);
    let lookups = AtomicU64::new(0);
    let handle = runtime.handle().clone();
    let ops = drive(threads, phases, &|op, key, buf| {
        let at = key * BLOCK as u64;
        match op {
            Op::Read => {
                lookups.fetch_add(1, Ordering::Relaxed);
                let found = handle.block_on(cache.get(&key)).expect("foyer get");
                match found {
                    Some(entry) => {
                        hits.fetch_add(1, Ordering::Relaxed);
                        buf.copy_from_slice(entry.value());
                    }
                    None => {
                        file.read_exact_at(buf, at).unwrap();
                        cache.insert(key, buf.to_vec());
                    }
                }
            }
            _ => {
                file.write_all_at(buf, at).unwrap();
                cache.insert(key, buf.to_vec());
            }
        }
    });
    runtime.block_on(cache.close()).unwrap();
    let dropped = counters.sum("channel_overflow}") + counters.sum("buffer_overflow}");
    let _ = std::fs::remove_dir_all(&device_dir);
    let hit_ratio =
        hits.load(Ordering::Relaxed) as f64 / lookups.load(Ordering::Relaxed).max(1) as f64;
    (ops, dropped, hit_ratio)
}

fn main() {
    let args = Args::parse();
    // Checked before the backing file is written, so a bad name costs nothing.
    let policies: Vec<(String, PolicyConfig)> = args
        .disk_policy
        .iter()
        .map(|name| match PolicyConfig::parse(name) {
            Ok(policy) => (name.clone(), policy),
            Err(e) => {
                eprintln!("error: --disk-policy {name}: {e}");
                std::process::exit(2);
            }
        })
        .collect();
    let dir = args.dir.unwrap_or_else(|| std::env::temp_dir().join("tiercache-foyer-hybrid"));
    let phases = Phases { warmup: args.warmup, measured: args.common.seconds.unwrap_or(SECONDS) };
    let json = args.common.json;
    std::fs::create_dir_all(&dir).unwrap();
    let backing = dir.join("backing");
    prepare(&backing);
    if !json {
        println!(
            "DRAM {} MiB + disk {} MiB over a {} MiB backing file, 4 KiB blocks, Zipf 0.9, 90% reads, {} s warm-up, {} s measured; dir {}",
            MEMORY >> 20,
            DISK >> 20,
            BACKING >> 20,
            phases.warmup,
            phases.measured,
            dir.display()
        );
        println!(
            "{:>7} {:>22} {:>14} {:>10} {:>10} {:>12} {:>18} {:>13}",
            "threads",
            "tiercache disk tier",
            "ops/s",
            "vs foyer",
            "tc hits",
            "foyer hits",
            "dropped tc/foyer",
            "blocks/write"
        );
    }
    let tiers: &[bool] = match args.disk_tier {
        DiskTier::Direct => &[true],
        DiskTier::File => &[false],
        DiskTier::Both => &[true, false],
    };
    for &threads in &args.common.threads {
        let (theirs, theirs_dropped, theirs_hits) = foyer(&dir, &backing, threads, phases);
        if !json {
            println!("{threads:>7} {:>22} {theirs:>14.0}", "(foyer, direct I/O)");
        }
        for (&direct, (name, policy)) in
            tiers.iter().flat_map(|d| policies.iter().map(move |p| (d, p)))
        {
            let (ours, ours_dropped, ours_hits, blocks_per_write) =
                tiercache(&dir, &backing, threads, phases, (direct, policy));
            let tier = if direct { "direct I/O" } else { "page cache" };
            let tier = format!("{tier}, {name}");
            let row = Row {
                threads,
                cache: format!("DRAM + disk tier ({tier})"),
                tiercache_blocks_per_write: Some(blocks_per_write),
                tiercache_ops_per_second: ours,
                foyer_ops_per_second: theirs,
                tiercache_dropped: ours_dropped,
                foyer_dropped: theirs_dropped,
                tiercache_hit_ratio: ours_hits,
                foyer_hit_ratio: theirs_hits,
                raw_ops_per_second: None,
            };
            if json {
                row.print_json();
                continue;
            }
            println!(
                "{threads:>7} {tier:>22} {ours:>14.0} {:>9.0}% {:>9.1}% {:>11.1}% {:>18} {:>13.1}",
                ours / theirs * 100.0,
                ours_hits * 100.0,
                theirs_hits * 100.0,
                format!("{ours_dropped}/{theirs_dropped}"),
                blocks_per_write
            );
        }
    }
}
