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
//! `--workload objects` runs objects instead of blocks, as foyer's own benchmark does: no
//! backing file, 60,000 keys (Zipf 0.9, scrambled), each with a value of its own size, from
//! 64 B to 64 KiB (log-uniform) and 1 MiB for one key in a hundred; 90% reads, a miss loading
//! the value (generated) and inserting it, 10% writes inserting a new value. Both caches get
//! 32 MiB of memory and a 128 MiB disk tier with direct I/O, 16 shards (`--shards`); tiercache's DRAM and
//! disk tier (`log`) take objects up to 1 MiB and more (`max_value`), a value larger than a
//! block spanning pages. A miss of a value over 256 KiB goes straight to tiercache's disk tier
//! (`--large-values`, `CacheBuilder::large_values`): a 1 MiB value is half a shard's 2 MiB of
//! memory, and inserted there it pushes out as many bytes of smaller values, each then written
//! to disk. And such a value is cached on its second miss only (`--admission`, by default
//! `second-hit-over:256KiB`): its first miss is the costliest to admit, 1 MiB written to disk.
//! foyer has neither setting and puts every value in memory first; `--large-values off
//! --admission always` runs tiercache that way too. `--workload blocks,objects` runs both.
//!
//! `--backing-io direct` reads and writes the blocks workload's backing file with direct I/O in
//! both caches, as the slower device it stands for; by default both go through the page cache,
//! where the file sits whole (a miss then costs a memory copy, less than a disk-tier hit, and
//! every write takes the file's inode lock, one at a time).
//!
//! Every row also has CPU seconds per million operations (user and system, getrusage, over
//! the measured phase) and the 99th percentile latency of an operation (every 8th timed).
//!
//! Run: `cargo run --release --bin hybrid -- [DIR] [--threads 1,4,16] [--disk-tier direct]
//! [--disk-policy log,lru] [--workload blocks,objects] [--json]` in this directory (foyer
//! pinned to 0.22.3). `--json` prints one JSON object per workload, thread count, tiercache
//! disk tier and policy.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
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
use tiercache_core::Capacity;
use tiercache_core::Op;
use tiercache_engine::{CacheBuilder, CachedFile, TierKind};
use tiercache_policy::admission::{Admission, AdmissionConfig};
use tiercache_policy::PolicyConfig;
use tiercache_workload::gen::{KeyDistribution, SizeDistribution, Synthetic, SyntheticConfig};

const BLOCK: usize = 4096;
const BACKING: u64 = 512 << 20;
const MEMORY: usize = 32 << 20;
const DISK: usize = 128 << 20;
const WARMUP: f64 = 5.0;
const SECONDS: f64 = 10.0;
/// The objects workload's keys, and its largest value.
const OBJECTS: u64 = 60_000;
const LARGEST: usize = 1 << 20;
/// Shards of both caches in the blocks and the objects workload, unless `--shards` says.
const BLOCK_SHARDS: usize = 32;
const OBJECT_SHARDS: usize = 16;

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
    /// Workloads to run, in turn: `blocks` (a backing file read and written through the cache)
    /// and `objects` (values of mixed sizes under their keys).
    #[arg(long, value_delimiter = ',', default_value = "blocks")]
    workload: Vec<Workload>,
    /// Rounds of each comparison, foyer and tiercache alternating; each figure the median.
    #[arg(long, default_value_t = 1)]
    rounds: usize,
    /// Runs tiercache alone (foyer's figures then read 0), printing its counters after each
    /// run on stderr: for profiling.
    #[arg(long)]
    tiercache_only: bool,
    /// Shards of both caches (a power of two); by default 32 for blocks, 16 for objects.
    #[arg(long)]
    shards: Option<usize>,
    /// How both caches read and write the backing file of the blocks workload: through the
    /// page cache (the default; the file then sits in memory, a miss costs a copy, and every
    /// write takes the file's inode lock), or with direct I/O, as the slower device it stands for.
    #[arg(long, value_enum, default_value_t = BackingIo::Buffered)]
    backing_io: BackingIo,
    /// In the objects workload, a miss of a value larger than this goes straight to
    /// tiercache's disk tier (`CacheBuilder::large_values`), rather than pushing as many bytes
    /// out of a shard's 2 MiB of memory; `off` puts every miss in memory first, as foyer does.
    #[arg(long, default_value = "256KiB")]
    large_values: String,
    /// In the objects workload, tiercache's admission filters (`+`-joined, as `tiercache sim
    /// --admission`): by default a value over 256 KiB is cached on its second miss only, not its
    /// first (`always` admits every miss, as foyer does here).
    #[arg(long, default_value = "second-hit-over:256KiB")]
    admission: String,
}

#[derive(Debug, Clone, Copy, PartialEq, ValueEnum)]
enum BackingIo {
    Buffered,
    Direct,
}

/// A block-sized buffer aligned for direct I/O: foyer's side reads and writes a direct backing
/// file through one (tiercache's `CachedFile::open_direct` does the same inside).
#[repr(C, align(4096))]
struct Page([u8; BLOCK]);

thread_local! {
    static PAGE: std::cell::RefCell<Box<Page>> = std::cell::RefCell::new(Box::new(Page([0; BLOCK])));
}

#[derive(Debug, Clone, Copy, PartialEq, ValueEnum)]
enum Workload {
    Blocks,
    Objects,
}

impl Workload {
    fn name(self) -> &'static str {
        match self {
            Workload::Blocks => "blocks",
            Workload::Objects => "objects",
        }
    }
}

/// The size of `key`'s value in the objects workload: 1 MiB for one key in a hundred, the
/// others from 64 B to 64 KiB, log-uniform; fixed by the key, the same for both caches.
fn object_size(key: u64) -> usize {
    let mut h = key.wrapping_add(0x9E37_79B9_7F4A_7C15);
    h = (h ^ (h >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    h = (h ^ (h >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    h ^= h >> 31;
    if h.is_multiple_of(100) {
        return LARGEST;
    }
    let fraction = (h >> 11) as f64 / (1u64 << 53) as f64;
    (64.0 * 1024f64.powf(fraction)) as usize
}

/// Writes `key`'s value (its size, its key at both ends) into `buf`; returns its length.
fn object(key: u64, buf: &mut [u8]) -> usize {
    let len = object_size(key).max(16);
    buf[..8].copy_from_slice(&key.to_le_bytes());
    buf[len - 8..len].copy_from_slice(&key.to_le_bytes());
    len
}

/// What a run measured: ops/s, CPU seconds per million operations, p99 latency (µs), and KiB
/// read from and written to storage per operation.
#[derive(Clone, Copy, Debug, Default)]
struct Measured {
    ops: f64,
    cpu_per_million: f64,
    p99_us: f64,
    storage_kib_per_op: (f64, f64),
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

fn stream(workload: Workload, seed: u64) -> Synthetic {
    let objects = match workload {
        Workload::Blocks => BACKING / BLOCK as u64,
        Workload::Objects => OBJECTS,
    };
    let config = SyntheticConfig {
        distribution: KeyDistribution::ScrambledZipf { theta: 0.9 },
        objects,
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

fn drive(threads: usize, phases: Phases, workload: Workload, op: &Request) -> Measured {
    let buffer = match workload {
        Workload::Blocks => BLOCK,
        Workload::Objects => LARGEST,
    };
    let phase = |seconds: f64, seed: u64| -> (u64, Vec<u32>) {
        let done = AtomicU64::new(0);
        let timed = Mutex::new(Vec::new());
        let deadline = Instant::now() + Duration::from_secs_f64(seconds);
        std::thread::scope(|s| {
            for t in 0..threads {
                let (done, timed) = (&done, &timed);
                s.spawn(move || {
                    let mut requests = stream(workload, seed + t as u64);
                    let mut buf = vec![0u8; buffer];
                    let mut samples = Vec::new();
                    let mut n = 0;
                    while Instant::now() < deadline {
                        for i in 0..64 {
                            let req = requests.next().expect("endless");
                            if i % 8 == 0 {
                                let started = Instant::now();
                                op(req.op, req.key, &mut buf);
                                samples.push(started.elapsed().as_nanos().min(u32::MAX as u128) as u32);
                            } else {
                                op(req.op, req.key, &mut buf);
                            }
                        }
                        n += 64;
                    }
                    done.fetch_add(n, Ordering::Relaxed);
                    timed.lock().unwrap().extend(samples);
                });
            }
        });
        (done.into_inner(), timed.into_inner().unwrap())
    };
    phase(phases.warmup, 100);
    let (start, cpu) = (Instant::now(), foyer_compare::cpu_seconds());
    let storage = foyer_compare::storage_bytes();
    let (ops, mut samples) = phase(phases.measured, 200);
    let cpu = foyer_compare::cpu_seconds() - cpu;
    let (read, written) = foyer_compare::storage_bytes();
    let per_op = |bytes: u64| bytes as f64 / 1024.0 / ops.max(1) as f64;
    Measured {
        ops: ops as f64 / start.elapsed().as_secs_f64(),
        cpu_per_million: cpu / ops.max(1) as f64 * 1e6,
        p99_us: foyer_compare::p99_us(&mut samples),
        storage_kib_per_op: (per_op(read - storage.0), per_op(written - storage.1)),
    }
}

/// tiercache with its disk tier read and written with direct I/O (`Flash`, as foyer's device
/// here) or through the page cache (`File`).
fn tiercache(
    dir: &Path,
    backing: &Path,
    threads: usize,
    phases: Phases,
    (direct, policy, workload, shards): (bool, &PolicyConfig, Workload, usize),
    (large, admission): (Option<u64>, &[AdmissionConfig]),
    (backing_io, profiling): (BackingIo, bool),
) -> (Measured, u64, f64, f64) {
    let tier = match direct {
        true => TierKind::Flash { path: dir.join("tiercache.flash") },
        false => TierKind::File { path: dir.join("tiercache.file") },
    };
    // Cold, as foyer starts (its device directory is removed before each run): a tier file
    // left by the last run would be recovered, a warm start foyer does not get.
    let _ = std::fs::remove_file(dir.join("tiercache.flash"));
    let _ = std::fs::remove_file(dir.join("tiercache.file"));
    let builder = CacheBuilder::new(PolicyConfig::Lru)
        .capacity_bytes(MEMORY as u64)
        .lower_tier(tier, DISK as u64, policy.clone())
        .block_size(BLOCK);
    let builder = builder.shards(shards);
    let builder = match workload {
        Workload::Blocks => builder,
        Workload::Objects => builder.max_value(LARGEST),
    };
    let builder = match (workload, large) {
        (Workload::Objects, Some(bytes)) => builder.large_values(bytes),
        _ => builder,
    };
    let builder = match workload {
        Workload::Objects => builder.admission(admission.to_vec()),
        Workload::Blocks => builder,
    };
    let cache = builder.build().expect("a valid cache");
    for warning in cache.warnings() {
        eprintln!("note: {warning}");
    }
    if workload == Workload::Objects {
        let ops = drive(threads, phases, workload, &|op, key, buf| match op {
            Op::Read => match cache.get_object(key) {
                Some(value) => {
                    std::hint::black_box(value);
                }
                None => {
                    let len = object(key, buf);
                    cache.admit(key, &buf[..len]).unwrap();
                }
            },
            _ => {
                let len = object(key, buf);
                cache.put(key, &buf[..len]).unwrap();
            }
        });
        let stats = cache.stats();
        if profiling {
            eprintln!("{}", serde_json::to_string(&stats).expect("stats serialize"));
        }
        let hit_ratio = stats.hits as f64 / stats.lookups.max(1) as f64;
        let blocks_per_write = stats.writes_behind as f64 / stats.behind_requests.max(1) as f64;
        return (ops, stats.writes_dropped, hit_ratio, blocks_per_write);
    }
    let file = match backing_io {
        BackingIo::Buffered => CachedFile::open(backing, cache).unwrap(),
        BackingIo::Direct => CachedFile::open_direct(backing, cache).unwrap(),
    };
    let ops = drive(threads, phases, workload, &|op, key, buf| {
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

fn foyer(
    dir: &Path,
    backing: &Path,
    threads: usize,
    phases: Phases,
    (workload, shards, backing_io): (Workload, usize, BackingIo),
) -> (Measured, u64, f64) {
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
            .with_shards(shards)
            .with_weighter(|_: &u64, v: &Vec<u8>| v.len())
            .storage()
            .with_io_engine_config(PsyncIoEngineConfig::new())
            .with_engine_config(BlockEngineConfig::new(device))
            .build()
            .await
            .expect("a foyer hybrid cache")
    });
    let mut options = File::options();
    if backing_io == BackingIo::Direct {
        options.custom_flags(libc::O_DIRECT);
    }
    let file = options.read(true).write(true).open(backing).unwrap();
    let read = |buf: &mut [u8], at| match backing_io {
        BackingIo::Buffered => file.read_exact_at(buf, at).unwrap(),
        BackingIo::Direct => PAGE.with_borrow_mut(|page| {
            file.read_exact_at(&mut page.0, at).unwrap();
            buf.copy_from_slice(&page.0);
        }),
    };
    let write = |buf: &[u8], at| match backing_io {
        BackingIo::Buffered => file.write_all_at(buf, at).unwrap(),
        BackingIo::Direct => PAGE.with_borrow_mut(|page| {
            page.0.copy_from_slice(buf);
            file.write_all_at(&page.0, at).unwrap();
        }),
    };
    let hits = AtomicU64::new(0);
    let lookups = AtomicU64::new(0);
    let handle = runtime.handle().clone();
    let ops = drive(threads, phases, workload, &|op, key, buf| {
        if workload == Workload::Objects {
            if op == Op::Read {
                lookups.fetch_add(1, Ordering::Relaxed);
                if let Some(entry) = handle.block_on(cache.get(&key)).expect("foyer get") {
                    hits.fetch_add(1, Ordering::Relaxed);
                    let value = entry.value();
                    buf[..value.len()].copy_from_slice(value);
                    return;
                }
            }
            let len = object(key, buf);
            cache.insert(key, buf[..len].to_vec());
            return;
        }
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
                        read(buf, at);
                        cache.insert(key, buf.to_vec());
                    }
                }
            }
            _ => {
                write(buf, at);
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
    let large = match args.large_values.as_str() {
        "off" => None,
        text => match tiercache_core::parse_size(text) {
            Ok(bytes) => Some(bytes),
            Err(e) => {
                eprintln!("error: --large-values {text}: {e} (a size, or off)");
                std::process::exit(2);
            }
        },
    };
    let admission = match AdmissionConfig::parse_chain(&args.admission) {
        Ok(chain) => chain,
        Err(e) => {
            eprintln!("error: --admission {}: {e}", args.admission);
            std::process::exit(2);
        }
    };
    let dir = args.dir.unwrap_or_else(|| std::env::temp_dir().join("tiercache-foyer-hybrid"));
    let phases = Phases { warmup: args.warmup, measured: args.common.seconds.unwrap_or(SECONDS) };
    let json = args.common.json;
    std::fs::create_dir_all(&dir).unwrap();
    let backing = dir.join("backing");
    prepare(&backing);
    if !json {
        println!(
            "DRAM {} MiB + disk {} MiB over a {} MiB backing file ({}), 4 KiB blocks, Zipf 0.9, 90% reads, {} s warm-up, {} s measured; dir {}",
            MEMORY >> 20,
            DISK >> 20,
            BACKING >> 20,
            match args.backing_io {
                BackingIo::Buffered => "page cache",
                BackingIo::Direct => "direct I/O",
            },
            phases.warmup,
            phases.measured,
            dir.display()
        );
        println!(
            "{:>8} {:>7} {:>22} {:>14} {:>10} {:>10} {:>13} {:>18} {:>9} {:>9} {:>13} {:>16}",
            "workload",
            "threads",
            "tiercache disk tier",
            "ops/s",
            "vs foyer",
            "tc hits",
            "foyer hits",
            "dropped tc/foyer",
            "cpu s/M",
            "p99 us",
            "blocks/write",
            "storage KiB/op"
        );
    }
    let tiers: &[bool] = match args.disk_tier {
        DiskTier::Direct => &[true],
        DiskTier::File => &[false],
        DiskTier::Both => &[true, false],
    };
    let variants: Vec<(bool, &(String, PolicyConfig))> =
        tiers.iter().flat_map(|d| policies.iter().map(move |p| (*d, p))).collect();
    for &workload in &args.workload {
        let shards = args.shards.unwrap_or(match workload {
            Workload::Blocks => BLOCK_SHARDS,
            Workload::Objects => OBJECT_SHARDS,
        });
        for &threads in &args.common.threads {
            // Rounds alternate foyer and tiercache's variants; each figure is the median of
            // its rounds.
            let mut theirs = Vec::new();
            let mut ours: Vec<Vec<(Measured, u64, f64, f64)>> = vec![Vec::new(); variants.len()];
            for _ in 0..args.rounds.max(1) {
                theirs.push(match args.tiercache_only {
                    true => (Measured::default(), 0, 0.0),
                    false => {
                        foyer(&dir, &backing, threads, phases, (workload, shards, args.backing_io))
                    }
                });
                for (i, &(direct, (_, policy))) in variants.iter().enumerate() {
                    let setup = (direct, policy, workload, shards);
                    let how = (args.backing_io, args.tiercache_only);
                    let objects = (large, admission.as_slice());
                    ours[i].push(tiercache(&dir, &backing, threads, phases, setup, objects, how));
                }
            }
            let foyer_at = median_by(&theirs, |t| t.0.ops);
            let (theirs, theirs_dropped, theirs_hits) = theirs[foyer_at];
            if !json {
                println!(
                    "{:>8} {threads:>7} {:>22} {:>14.0} {:>10} {:>10} {:>12.1}% {:>18} {:>9.2} {:>9.0} {:>13} {:>16}",
                    workload.name(),
                    "(foyer, direct I/O)",
                    theirs.ops,
                    "",
                    "",
                    theirs_hits * 100.0,
                    "",
                    theirs.cpu_per_million,
                    theirs.p99_us,
                    "",
                    storage(theirs)
                );
            }
            for (&(direct, (name, _)), runs) in variants.iter().zip(&ours) {
                let at = median_by(runs, |r| r.0.ops);
                let (ours, ours_dropped, ours_hits, blocks_per_write) = runs[at];
                let tier = if direct { "direct I/O" } else { "page cache" };
                let tier = format!("{tier}, {name}");
                let over = match (workload, args.backing_io, large) {
                    (Workload::Blocks, BackingIo::Direct, _) => {
                        ", backing file with direct I/O".to_string()
                    }
                    (Workload::Objects, _, large) => {
                        let mut over = match large {
                            Some(bytes) => {
                                format!(", misses over {} KiB straight to disk", bytes >> 10)
                            }
                            None => String::new(),
                        };
                        let filters = Admission::new(&admission, Capacity::objects(1), 0).label();
                        if let Some(filters) = filters {
                            over += &format!(", admission {filters}");
                        }
                        over
                    }
                    _ => String::new(),
                };
                let row = Row {
                    threads,
                    cache: format!("DRAM + disk tier ({tier}){over}"),
                    workload: Some(workload.name().into()),
                    tiercache_blocks_per_write: Some(blocks_per_write),
                    tiercache_ops_per_second: ours.ops,
                    foyer_ops_per_second: theirs.ops,
                    tiercache_cpu_s_per_million: Some(ours.cpu_per_million),
                    foyer_cpu_s_per_million: Some(theirs.cpu_per_million),
                    tiercache_p99_us: Some(ours.p99_us),
                    foyer_p99_us: Some(theirs.p99_us),
                    tiercache_storage_read_kib_per_op: Some(ours.storage_kib_per_op.0),
                    tiercache_storage_written_kib_per_op: Some(ours.storage_kib_per_op.1),
                    foyer_storage_read_kib_per_op: Some(theirs.storage_kib_per_op.0),
                    foyer_storage_written_kib_per_op: Some(theirs.storage_kib_per_op.1),
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
                    "{:>8} {threads:>7} {tier:>22} {:>14.0} {:>9.0}% {:>9.1}% {:>12.1}% {:>18} {:>9.2} {:>9.0} {:>13.1} {:>16}",
                    workload.name(),
                    ours.ops,
                    ours.ops / theirs.ops * 100.0,
                    ours_hits * 100.0,
                    theirs_hits * 100.0,
                    format!("{ours_dropped}/{theirs_dropped}"),
                    ours.cpu_per_million,
                    ours.p99_us,
                    blocks_per_write,
                    storage(ours)
                );
            }
        }
    }
}

/// A run's storage KiB per operation, read and written, for the table.
fn storage(run: Measured) -> String {
    let (read, written) = run.storage_kib_per_op;
    format!("{read:.1} r {written:.1} w")
}

/// The index of the median of `runs` by `key` (the lower middle of an even count).
fn median_by<T>(runs: &[T], key: impl Fn(&T) -> f64) -> usize {
    let mut order: Vec<usize> = (0..runs.len()).collect();
    order.sort_by(|a, b| key(&runs[*a]).total_cmp(&key(&runs[*b])));
    order[(runs.len() - 1) / 2]
}
