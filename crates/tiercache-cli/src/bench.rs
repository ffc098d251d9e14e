//! `tiercache bench`: the engine under load, in the spirit of the Orthus paper's HFIO (Wu et
//! al., FAST'21, section 5): threads issue block reads and writes on a backing file through the
//! cache, with a chosen key distribution and read ratio, and the run reports throughput and
//! latency percentiles per operation. `--raw` measures the medium alone (the same random block
//! reads and writes as copies to and from the tier's memory or file), so cache overhead can be
//! stated as a ratio. Without writes, raw threads read one region as the cache's threads share
//! its blocks; with writes, each thread copies to and from a stripe of its own.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::Args;
use hdrhistogram::Histogram;
use serde::Serialize;
use tiercache_core::{format_size, parse_size, DeviceProfile, Op};
use tiercache_engine::latency::{self, Percentiles};
use tiercache_engine::{CacheConfig, CachedFile, Recover, StatsSnapshot, TierKind};
use tiercache_policy::PolicyConfig;

use crate::cache_args::Defaults;
use tiercache_workload::gen::{KeyDistribution, SizeDistribution, Synthetic, SyntheticConfig};

use crate::progress::Progress;

mod objects;
pub use objects::ValueSizes;

#[derive(Args, Clone)]
pub struct BenchArgs {
    /// What the threads do: `blocks` (reads and writes of a backing file's blocks through
    /// the cache) or `objects` (values of mixed sizes under their keys: see --objects and
    /// --value-sizes; no backing file).
    #[arg(long, default_value = "blocks")]
    pub workload: String,
    /// The objects workload's keys.
    #[arg(long, default_value = "100000")]
    pub objects: String,
    /// The objects workload's value sizes: log-uniform between two sizes, and sizes apart
    /// for a share of the keys (`64B-64KiB,1MiB@1%`: one key in a hundred of 1 MiB). The
    /// cache takes values up to the largest (its max_value).
    #[arg(long, default_value = "64B-64KiB,1MiB@1%")]
    pub value_sizes: String,
    /// Client threads.
    #[arg(long, default_value_t = 1)]
    pub threads: usize,
    /// Fraction of operations that are reads.
    #[arg(long, default_value_t = 0.9)]
    pub read_ratio: f64,
    /// Key distribution over the working set: uniform, zipf, hotspot.
    #[arg(long, default_value = "zipf")]
    pub dist: String,
    /// Zipf exponent of `--dist zipf`.
    #[arg(long, default_value_t = 0.9)]
    pub theta: f64,
    /// Spatial locality: each request the distribution draws names a run of this many
    /// consecutive blocks, which the thread then reads or writes one after another.
    #[arg(long, default_value_t = 1)]
    pub run_blocks: u64,
    /// Size of the backing file the keys range over.
    #[arg(long, default_value = "256MiB")]
    pub working_set: String,
    /// Stop after this many operations (over all threads) instead of --duration.
    #[arg(long)]
    pub ops: Option<String>,
    /// Seconds of measured run.
    #[arg(long, default_value_t = 5.0)]
    pub duration: f64,
    /// Seconds of unmeasured warm-up first.
    #[arg(long, default_value_t = 1.0)]
    pub warmup: f64,
    /// Write-back: after the run, wait up to this many seconds with no requests while the
    /// cleaner works (stopping once nothing is dirty), and report what it wrote back.
    #[arg(long, default_value_t = 0.0)]
    pub idle: f64,
    /// The backing file, which the bench writes: created and filled to --working-set. A file
    /// that exists is refused unless --reuse-backing. Default: a new file in the temporary
    /// directory, removed at the end.
    #[arg(long)]
    pub backing: Option<PathBuf>,
    /// Let --backing name a file that exists (it is written, and extended if shorter than
    /// --working-set); a symbolic link is still refused.
    #[arg(long)]
    pub reuse_backing: bool,
    /// Overwrite a --slow-path or --flash-path that holds a file which is not a tier file
    /// (without it, such a file is refused and left as it was).
    #[arg(long)]
    pub force: bool,
    /// Interval of the controllers' measurements, in milliseconds.
    #[arg(long, default_value_t = 10.0)]
    pub measure_ms: f64,
    /// Make the backing file behave like a device preset (nvme, sata-ssd, hdd...) or TOML
    /// profile: its reads and writes then take the profile's time.
    #[arg(long)]
    pub backing_profile: Option<String>,
    /// Allow write-back over DRAM only (acknowledged writes are lost in a crash until a sync).
    #[arg(long)]
    pub volatile_write_back: bool,
    /// Threads writing the flash tier behind its callers (0: callers write it themselves).
    /// Default: 4 with a flash tier.
    #[arg(long)]
    pub write_behind: Option<usize>,
    /// Seed of the key stream and of the policy's randomness.
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
    /// Read hits through read handles (`get_ref`: in place on DRAM and mapped tiers, the slot
    /// pinned while held) instead of copies; each read looks at the block's first and last 8
    /// bytes. A miss is then read through the file as usual (so the policy sees it twice: the
    /// handle's lookup, then the read).
    #[arg(long)]
    pub handle: bool,
    /// Every hit takes its shard's lock: turns off upper-tier hits served without it (the
    /// policy told in batches), to measure what they are worth.
    #[arg(long)]
    pub locked_hits: bool,
    /// Bytes per second the scrubber reads of a mapped upper tier: hits without the lock
    /// check a mapped block once until it changes, and the scrubber checks it again in the
    /// background. 0: no scrubber, every hit checks its block.
    #[arg(long, default_value = "256MiB", value_name = "BYTES")]
    pub scrub_rate: String,
    /// Measure the medium alone: the same operations as plain copies, no cache.
    #[arg(long)]
    pub raw: bool,
    /// Measure the backing file alone: the same operations as buffered reads and writes of
    /// its blocks, no cache (what a cache whose misses and writes go through can reach at
    /// most). The tier options are then unused.
    #[arg(long, conflicts_with_all = ["raw", "handle"])]
    pub raw_backing: bool,
    /// Print the report as one JSON object instead of the table.
    #[arg(long)]
    pub json: bool,
    /// The cache: its tiers, policies and engine options (shared with `serve` and `ycsb`).
    /// bench puts no DRAM over --slow-path or --flash-path unless --dram is given, starts its
    /// tiers empty unless --recover says otherwise, and runs 16 shards a core.
    #[command(flatten)]
    pub cache: crate::cache_args::CacheArgs,
}

#[derive(Serialize)]
pub struct BenchReport {
    pub mode: &'static str,
    pub tier: String,
    pub threads: usize,
    pub block_size: usize,
    pub working_set_blocks: u64,
    pub distribution: String,
    pub read_ratio: f64,
    pub seconds: f64,
    pub ops_per_second: f64,
    pub mb_per_second: f64,
    pub read: Percentiles,
    pub write: Percentiles,
    pub hit_ratio: Option<f64>,
    /// With two or more tiers: the reads served by each tier, top down, over the reads of the
    /// measured run.
    pub tier_hit_ratios: Option<Vec<f64>>,
    pub cache: Option<StatsSnapshot>,
    /// The controllers' knobs at the end of the run (NHC's load_admit...).
    pub knobs: std::collections::BTreeMap<&'static str, f64>,
    /// What the cache found on its tier files when it opened (`--recover quiet|strict`); the
    /// blocks counted are in `cache` (`recovered`, `recovery_damaged`...).
    pub recovery: Option<tiercache_engine::Recovery>,
    /// Write-back with `--idle`: what the cleaner wrote back while no requests came.
    pub cleaned_while_idle: Option<Cleaned>,
    /// Write-back: the blocks still dirty when the timed run ended (and `--idle` after it),
    /// written back after it.
    pub written_back_after: Option<WrittenBack>,
    /// DRAM the cache spent beside its tiers' bytes, per cached block, measured (caches
    /// without a DRAM tier only).
    pub metadata: Option<Metadata>,
}

/// DRAM for metadata, measured as the process's anonymous memory (`RssAnon`) grown from before
/// the cache was built to the end of the run, over the blocks then cached. Mapped tiers are
/// file memory, flash tiers are read with direct I/O: neither is in `RssAnon`, so what grew is
/// the index, the policy, the per-slot state and the bench's own few buffers.
#[derive(Serialize)]
pub struct Metadata {
    pub grown_bytes: u64,
    pub cached_blocks: u64,
    pub bytes_per_block: f64,
    /// What the builder's footprint check assumes a block costs.
    pub estimated_bytes_per_block: u64,
}

/// The process's anonymous resident memory, from `/proc/self/status`.
fn rss_anon_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("RssAnon:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// Dirty blocks written back after a timed run, and how long that took.
#[derive(Serialize)]
pub struct WrittenBack {
    pub blocks: u64,
    pub seconds: f64,
}

/// The cleaner's work while the cache was idle (`--idle`).
#[derive(Serialize, Clone, Debug)]
pub struct Cleaned {
    /// Dirty blocks when the idle time began.
    pub dirty_before: u64,
    /// Dirty blocks when it ended.
    pub dirty_after: u64,
    pub seconds: f64,
    /// Blocks the cleaner wrote back (and synced) meanwhile, and their rate.
    pub written_back: u64,
    pub blocks_per_second: f64,
    /// Of its writes, runs of more than one block.
    pub runs: u64,
}

/// The setup every thread shares.
struct Plan {
    block: usize,
    /// Keys: blocks of the backing file, or objects.
    blocks: u64,
    /// The objects workload's value sizes (`None`: blocks).
    objects: Option<ValueSizes>,
    /// Bytes of a thread's buffer: a block, or the largest value.
    buffer: usize,
    distribution: KeyDistribution,
    stop_after_ops: Option<u64>,
    done_ops: AtomicU64,
    replay: Option<Replay>,
}

/// A request stream the threads share instead of each drawing its own keys: each takes the
/// next request when it finishes one (the simulator's closed loop), the warm-up part first,
/// unmeasured, then the measured part, each to its end. Keys are block numbers below the
/// working set.
pub struct Replay {
    pub warm: Vec<tiercache_core::Request>,
    pub measured: Vec<tiercache_core::Request>,
    next: std::sync::atomic::AtomicUsize,
}

impl Replay {
    pub fn new(warm: Vec<tiercache_core::Request>, measured: Vec<tiercache_core::Request>) -> Self {
        Replay { warm, measured, next: Default::default() }
    }

    /// The next request of the measured part (or of the warm-up), if any is left.
    fn take(&self, measured: bool) -> Option<&tiercache_core::Request> {
        let part = if measured { &self.measured } else { &self.warm };
        part.get(self.next.fetch_add(1, Ordering::Relaxed))
    }
}

/// Most client threads a bench runs.
const THREADS_MAX: usize = 1024;
/// Longest measured run or warm-up, in seconds (a week).
const SECONDS_MAX: f64 = 7.0 * 24.0 * 3600.0;

/// The numbers of a bench that must be in range before anything is opened or spawned; each
/// error names the option and its range.
fn validate(args: &BenchArgs, block: usize) -> anyhow::Result<()> {
    use tiercache_engine::builder::BLOCK_SIZE_MIN;
    let block_max = tiercache_core::limits::BLOCK_SIZE_MAX as usize;
    anyhow::ensure!(
        (BLOCK_SIZE_MIN..=block_max).contains(&block) && block.is_multiple_of(BLOCK_SIZE_MIN),
        "--block-size {} must be a multiple of {BLOCK_SIZE_MIN} B up to {}",
        block_size(args),
        format_size(block_max as u64)
    );
    anyhow::ensure!(
        (1..=THREADS_MAX).contains(&args.threads),
        "--threads must be 1 to {THREADS_MAX}, got {}",
        args.threads
    );
    anyhow::ensure!(
        args.duration > 0.0 && args.duration <= SECONDS_MAX,
        "--duration must be above 0 and at most {SECONDS_MAX} seconds, got {}",
        args.duration
    );
    anyhow::ensure!(
        (0.0..=SECONDS_MAX).contains(&args.warmup),
        "--warmup must be 0 to {SECONDS_MAX} seconds, got {}",
        args.warmup
    );
    anyhow::ensure!(
        args.measure_ms > 0.0 && args.measure_ms <= 3.6e6,
        "--measure-ms must be above 0 and at most an hour, got {}",
        args.measure_ms
    );
    anyhow::ensure!(
        args.run_blocks >= 1 && args.run_blocks <= 1 << 20,
        "--run-blocks must be 1 to {}, got {}",
        1 << 20,
        args.run_blocks
    );
    anyhow::ensure!(
        (0.0..=1.0).contains(&args.read_ratio),
        "--read-ratio must be in [0, 1], got {}",
        args.read_ratio
    );
    Ok(())
}

pub fn run(args: &BenchArgs) -> anyhow::Result<()> {
    let report = measure(args, None)?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print(&report);
    }
    Ok(())
}

/// One bench run and its report; with `replay`, the threads take its requests rather than
/// drawing keys (--dist, --read-ratio, --duration, --warmup and --ops are then unused).
pub fn measure(args: &BenchArgs, replay: Option<Replay>) -> anyhow::Result<BenchReport> {
    let block = parse_size(block_size(args)).context("--block-size")? as usize;
    validate(args, block)?;
    let objects = match args.workload.as_str() {
        "blocks" => None,
        "objects" => Some(ValueSizes::parse(&args.value_sizes)?),
        other => anyhow::bail!("--workload {other}: use blocks or objects"),
    };
    anyhow::ensure!(
        objects.is_none() || !(args.raw || args.raw_backing || args.handle),
        "--workload objects runs through the cache: --raw, --raw-backing and --handle are for \
         blocks"
    );
    let blocks = match &objects {
        Some(_) => parse_size(&args.objects).context("--objects")?,
        None => parse_size(&args.working_set).context("--working-set")? / block as u64,
    };
    anyhow::ensure!(blocks >= 1, "--working-set {} holds no {block}-byte block", args.working_set);
    let buffer = objects.as_ref().map_or(block, |sizes| sizes.largest().max(16) as usize);
    let distribution = match args.dist.as_str() {
        "uniform" => KeyDistribution::Uniform,
        "zipf" => KeyDistribution::ScrambledZipf { theta: args.theta },
        "hotspot" => KeyDistribution::Hotspot { hot_fraction: 0.2, hot_op_fraction: 0.8 },
        other => anyhow::bail!("--dist {other}: use uniform, zipf or hotspot"),
    };
    // The stack is checked before the backing file is made.
    let tiers = tiers(args)?;
    for (kind, bytes) in &tiers {
        anyhow::ensure!(
            *bytes >= (block * args.threads) as u64,
            "the {} tier of {} holds fewer than one {block}-byte block per thread",
            tier_name(kind),
            format_size(*bytes)
        );
    }
    let plan = Plan {
        block,
        blocks,
        objects,
        buffer,
        distribution,
        stop_after_ops: args.ops.as_deref().map(parse_size).transpose()?,
        done_ops: AtomicU64::new(0),
        replay,
    };
    if let Some(replay) = &plan.replay {
        let beyond = replay.warm.iter().chain(&replay.measured).find(|r| r.key >= blocks);
        if let Some(r) = beyond {
            anyhow::bail!("the replayed key {} lies beyond the {blocks} blocks", r.key);
        }
    }
    if plan.objects.is_some() {
        return cached_objects(args, &plan, &tiers);
    }
    let backing = Backing::prepare(args, blocks * block as u64)?;
    let report = if args.raw_backing {
        raw::backing(args, &plan, &backing.path)?
    } else if args.raw {
        raw::run(args, &plan, &tiers[0].0, tiers[0].1)?
    } else {
        cached(args, &plan, &tiers, &backing.path)?
    };
    drop(backing);
    Ok(report)
}

/// The tiers, upper first, as the cache the options describe has them (`config`): --dram,
/// --slow-path and --flash-path, those given (DRAM alone by default), with their bytes.
fn tiers(args: &BenchArgs) -> anyhow::Result<Vec<(TierKind, u64)>> {
    let config = config(args)?;
    let stack = config.stack()?;
    let kinds = config.tier_kinds(stack.tiers.len());
    let tiers: Vec<_> = kinds.into_iter().zip(stack.tiers.iter().map(|(_, c)| c.amount)).collect();
    anyhow::ensure!(!(args.raw && tiers.len() > 1), "--raw measures one medium: give one tier");
    anyhow::ensure!(!(args.raw && args.handle), "--handle reads through the cache; --raw has none");
    Ok(tiers)
}

/// `--block-size`, 4 KiB unless given.
fn block_size(args: &BenchArgs) -> &str {
    args.cache.block_size.as_deref().unwrap_or("4KiB")
}

/// The cache the options describe (`crate::cache_args`): no DRAM over lower tiers unless
/// `--dram` is given, tiers started empty unless `--recover` says otherwise, 16 shards a core.
fn config(args: &BenchArgs) -> anyhow::Result<CacheConfig> {
    let defaults =
        Defaults { dram_over_lower: false, shards: shards(args), recover: Recover::Wipe };
    let mut config = args.cache.config(&defaults, None)?;
    // `--shards 0`, as before the options were shared: 16 a core.
    config.engine.shards = shards(args);
    config.stack.seed = args.seed;
    config.engine.overwrite_foreign_files = args.force;
    Ok(config)
}

/// The file the bench writes through the cache: one it made (and removes, when it chose the
/// path) or, with --reuse-backing, one the user named.
struct Backing {
    path: PathBuf,
    remove: bool,
}

impl Backing {
    fn prepare(args: &BenchArgs, bytes: u64) -> anyhow::Result<Backing> {
        use std::os::unix::fs::OpenOptionsExt;
        let (path, remove) = match &args.backing {
            Some(path) => (path.clone(), false),
            None => {
                static RUNS: AtomicU64 = AtomicU64::new(0);
                let name = format!(
                    "tiercache-bench-{}-{}.backing",
                    std::process::id(),
                    RUNS.fetch_add(1, Ordering::Relaxed)
                );
                (std::env::temp_dir().join(name), true)
            }
        };
        // A new file is created exclusively (never through a link someone left at the path);
        // an existing one only with --reuse-backing, and never through a link.
        let mut options = std::fs::OpenOptions::new();
        options.read(true).write(true).mode(0o600);
        let file = match options.clone().create_new(true).open(&path) {
            Ok(file) => file,
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && !args.reuse_backing => {
                anyhow::bail!(
                    "the backing file {} exists, and the bench writes its backing file: name a \
                     new one, or pass --reuse-backing to let it write this one",
                    path.display()
                )
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                options.custom_flags(libc::O_NOFOLLOW).open(&path).with_context(|| {
                    format!("cannot open the backing file {} (a link?)", path.display())
                })?
            }
            Err(e) => {
                return Err(e)
                    .with_context(|| format!("cannot create the backing file {}", path.display()))
            }
        };
        let backing = Backing { path, remove };
        fill(&file, &backing.path, bytes)?;
        Ok(backing)
    }
}

impl Drop for Backing {
    fn drop(&mut self) {
        if self.remove {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// Extends `file` to `bytes` of recognisable data.
fn fill(mut file: &std::fs::File, path: &std::path::Path, bytes: u64) -> anyhow::Result<()> {
    use std::io::{Seek, Write};
    let existing = file.metadata()?.len();
    if existing >= bytes {
        return Ok(());
    }
    file.seek(std::io::SeekFrom::End(0))?;
    let chunk: Vec<u8> = (0..1u32 << 20).map(|i| (i % 253) as u8).collect();
    let mut progress = Progress::new("preparing backing file", Some(bytes));
    let mut written = existing;
    while written < bytes {
        let n = chunk.len().min((bytes - written) as usize);
        file.write_all(&chunk[..n]).with_context(|| format!("cannot write {}", path.display()))?;
        written += n as u64;
        progress.set(written);
    }
    progress.finish();
    file.sync_all().with_context(|| format!("cannot sync {}", path.display()))
}

fn shards(args: &BenchArgs) -> usize {
    match args.cache.shards {
        Some(shards) if shards > 0 => shards,
        _ => default_shards(),
    }
}

/// The shards `bench` gives a cache without `--shards`: 16 a core, rounded up to a power of two.
pub fn default_shards() -> usize {
    let cores = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
    (cores * 16).next_power_of_two()
}

fn generator(plan: &Plan, read_ratio: f64, seed: u64, run: u64) -> anyhow::Result<Synthetic> {
    Ok(Synthetic::new(SyntheticConfig {
        distribution: plan.distribution.clone(),
        objects: (plan.blocks / run).max(1),
        requests: u64::MAX,
        read_ratio,
        size: SizeDistribution::Fixed { bytes: plan.block as u32 },
        seed,
    })?)
}

/// Runs `op` on every thread, first unmeasured for the warm-up, then (after `measuring`)
/// measured; returns the merged read and write histograms and the measured seconds.
fn drive<F>(
    args: &BenchArgs,
    plan: &Plan,
    measuring: &dyn Fn(),
    op: F,
) -> anyhow::Result<(Histogram<u64>, Histogram<u64>, f64)>
where
    F: Fn(usize, Op, u64, &mut [u8]) -> anyhow::Result<()> + Sync,
{
    // A phase runs for `seconds`, or with `None` until the op count is reached.
    let phase = |measured: bool,
                 seconds: Option<f64>|
     -> anyhow::Result<(Histogram<u64>, Histogram<u64>, f64)> {
        let deadline = seconds.map(|s| Instant::now() + Duration::from_secs_f64(s));
        let start = Instant::now();
        let results: Vec<anyhow::Result<(Histogram<u64>, Histogram<u64>)>> =
            std::thread::scope(|s| {
                let handles: Vec<_> = (0..args.threads)
                    .map(|t| {
                        let op = &op;
                        std::thread::Builder::new()
                            .name(format!("bench-{t}"))
                            .spawn_scoped(s, move || {
                                thread_loop(args, plan, t, measured, deadline, op)
                            })
                            .with_context(|| format!("cannot start bench thread {t}"))
                    })
                    .collect();
                handles
                    .into_iter()
                    .map(|h| h.and_then(|h| h.join().expect("bench thread panicked")))
                    .collect()
            });
        let seconds = start.elapsed().as_secs_f64();
        let mut reads = latency::histogram();
        let mut writes = latency::histogram();
        for r in results {
            let (rd, wr) = r?;
            reads.add(rd)?;
            writes.add(wr)?;
        }
        Ok((reads, writes, seconds))
    };
    if let Some(replay) = &plan.replay {
        if !replay.warm.is_empty() {
            phase(false, None)?;
        }
        replay.next.store(0, Ordering::Relaxed);
        measuring();
        return phase(true, None);
    }
    if args.warmup > 0.0 {
        phase(false, Some(args.warmup))?;
    }
    plan.done_ops.store(0, Ordering::Relaxed);
    measuring();
    phase(true, if plan.stop_after_ops.is_some() { None } else { Some(args.duration) })
}

fn thread_loop<F>(
    args: &BenchArgs,
    plan: &Plan,
    thread: usize,
    measured: bool,
    deadline: Option<Instant>,
    op: &F,
) -> anyhow::Result<(Histogram<u64>, Histogram<u64>)>
where
    F: Fn(usize, Op, u64, &mut [u8]) -> anyhow::Result<()>,
{
    let mut reads = latency::histogram();
    let mut writes = latency::histogram();
    let seed =
        args.seed ^ (thread as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ measured as u64;
    let run = args.run_blocks.min(plan.blocks);
    let mut keys = generator(plan, args.read_ratio, seed, run)?;
    // The request being issued block by block: its operation, next block and blocks left.
    let (mut current, mut next, mut left) = (Op::Read, 0u64, 0u64);
    let mut buf = vec![0u8; plan.buffer];
    let limit = plan.stop_after_ops.filter(|_| measured);
    for i in 0u64.. {
        if i % 64 == 0 && deadline.is_some_and(|d| Instant::now() >= d) {
            break;
        }
        if let Some(limit) = limit {
            if plan.done_ops.fetch_add(1, Ordering::Relaxed) >= limit {
                break;
            }
        }
        if let Some(replay) = &plan.replay {
            let Some(req) = replay.take(measured) else { break };
            (current, next, left) = (req.op, req.key, 1);
        } else if left == 0 {
            let req = keys.next().expect("endless generator");
            (current, next, left) = (req.op, req.key * run, run);
        }
        let (kind, key) = (current, next);
        (next, left) = (next + 1, left - 1);
        let started = Instant::now();
        op(thread, kind, key, &mut buf)?;
        let ns = started.elapsed().as_nanos() as u64;
        let histogram = if kind == Op::Read { &mut reads } else { &mut writes };
        histogram.saturating_record(ns.max(1));
    }
    Ok((reads, writes))
}

fn cached(
    args: &BenchArgs,
    plan: &Plan,
    tiers: &[(TierKind, u64)],
    backing: &std::path::Path,
) -> anyhow::Result<BenchReport> {
    let config = config(args)?;
    let policy_base = config.stack()?.tiers[0].0.clone();
    let anon_before = rss_anon_bytes();
    // Hibachi and Hybrid-ARC place clean and dirty blocks themselves, in their own modes.
    let own = matches!(policy_base, PolicyConfig::Hibachi(_) | PolicyConfig::HybridArc);
    let mut builder = config.builder()?;
    if args.cache.nhc.is_some() {
        // --measure-ms was checked with the other numbers (`validate`).
        builder = builder.measure_every(Duration::from_secs_f64(args.measure_ms / 1000.0));
    }
    if let Some(threads) = args.write_behind {
        builder = builder.write_behind(threads);
    }
    let cache = builder
        .unlocked_hits(!args.locked_hits)
        .scrub_rate(parse_size(&args.scrub_rate).context("--scrub-rate")?)
        .volatile_write_back(args.volatile_write_back)
        .backing_file(backing, false)?
        .build()?;
    for warning in cache.warnings() {
        eprintln!("note: {warning}");
    }
    let recovery = cache.recovery().cloned();
    if let Some(r) = &recovery {
        let s = cache.stats();
        eprintln!(
            "recovered {} blocks in {:.3} s ({} damaged, {} stale, {} not taken back), after {}",
            s.recovered,
            r.seconds,
            s.recovery_damaged,
            s.recovery_stale,
            s.recovery_declined,
            r.stop()
        );
    }
    let mut file = CachedFile::open(backing, cache)?;
    if let Some(name) = &args.backing_profile {
        let profile =
            DeviceProfile::load(name).map_err(anyhow::Error::msg).context("--backing-profile")?;
        file = file.emulate_backing(profile);
    }
    let block = plan.block as u64;
    let handle = args.handle;
    // The hit ratio is the measured run's: the counters when it starts are taken off.
    let at_start = std::sync::Mutex::new(None);
    let measuring = || *at_start.lock().expect("not poisoned") = Some(file.cache().stats());
    let (reads, writes, seconds) = drive(args, plan, &measuring, |_, op, key, buf| {
        match op {
            Op::Read if handle => match file.cache().get_ref(key) {
                Some(held) => {
                    buf[..8].copy_from_slice(&held[..8]);
                    buf[8..16].copy_from_slice(&held[held.len() - 8..]);
                }
                None => file.read_at(key * block, buf).map(|_| ())?,
            },
            Op::Read => file.read_at(key * block, buf).map(|_| ())?,
            _ => file.write_at(key * block, buf).map(|_| ())?,
        };
        Ok(())
    })?;
    let anon_after = rss_anon_bytes();
    let cleaned = match file.cache().keeps_dirty() && args.idle > 0.0 {
        true => Some(idle(&file, args.idle)),
        false => None,
    };
    // What write-back deferred: the dirty blocks left, written back after the timed run.
    let written_back = match file.cache().keeps_dirty() {
        true => {
            let (blocks, started) = (file.cache().dirty_blocks() as u64, Instant::now());
            file.flush_backing()?;
            let seconds = started.elapsed().as_secs_f64();
            eprintln!("wrote back the {blocks} blocks still dirty after the run in {seconds:.3} s");
            Some(WrittenBack { blocks, seconds })
        }
        false => None,
    };
    let stats = file.cache().stats();
    let start = at_start.into_inner().expect("not poisoned").expect("taken before the run");
    // Hits the policy sent to the backing file (NHC) were cached all the same.
    let cached = (stats.hits + stats.offloaded) - (start.hits + start.offloaded);
    let lookups = stats.lookups - start.lookups;
    let hit_ratio = if lookups > 0 { Some(cached as f64 / lookups as f64) } else { None };
    let tier_hit_ratios: Vec<f64> = stats
        .tier_hits
        .iter()
        .zip(&start.tier_hits)
        .map(|(now, then)| (now - then) as f64 / lookups.max(1) as f64)
        .collect();
    let names: Vec<String> = tiers
        .iter()
        .map(|(kind, bytes)| format!("{} {}", tier_name(kind), format_size(*bytes)))
        .collect();
    let c = &args.cache;
    // The policy with its controllers in front, as `nhc+lru` or `obp:0.1+s3fifo`.
    let controllers = [&c.nhc, &c.nvcache].into_iter().flatten().map(String::as_str);
    let top = controllers.chain([c.policy.as_deref().unwrap_or("lru")]).collect::<Vec<_>>();
    let top = top.join("+");
    let mode = c.mode.as_deref().unwrap_or("write-through");
    let (policy, write_mode) = match tiers.len() {
        _ if own => (top, "clean in DRAM, dirty in the lower tier"),
        1 => (top, mode),
        n => {
            let lower = vec![c.lower_policy.as_deref().unwrap_or("lru"); n - 1].join(" > ");
            let placement = c.placement.as_deref().unwrap_or("dram-first");
            (format!("{placement} {top} > {lower}"), mode)
        }
    };
    let backing = match &args.backing_profile {
        Some(profile) => format!(" over a backing file like {profile}"),
        None => String::new(),
    };
    let label = format!(
        "{}{backing} ({policy}, {write_mode}, {} shards)",
        names.join(" over "),
        shards(args)
    );
    let mut report =
        report(args, plan, "cache", label, reads, writes, seconds, hit_ratio, Some(stats));
    report.knobs = file.cache().knobs().into_iter().collect();
    if tiers.len() > 1 {
        report.tier_hit_ratios = Some(tier_hit_ratios);
    }
    report.recovery = recovery;
    report.written_back_after = written_back;
    report.cleaned_while_idle = cleaned;
    let no_dram = tiers.iter().all(|(kind, _)| !matches!(kind, TierKind::Dram));
    if let (true, Some(before), Some(after)) = (no_dram, anon_before, anon_after) {
        let cached_blocks = file.cache().occupancy().0;
        let grown_bytes = after.saturating_sub(before);
        report.metadata = (cached_blocks > 0).then(|| Metadata {
            grown_bytes,
            cached_blocks,
            bytes_per_block: grown_bytes as f64 / cached_blocks as f64,
            estimated_bytes_per_block: match (&tiers[0].0, &policy_base) {
                // A flash tier run by the set-associative policy keeps no map entry a block.
                (TierKind::Flash { .. }, PolicyConfig::Setassoc(_)) => {
                    tiercache_engine::footprint::PLACED_SLOT_BYTES
                }
                (kind, _) => tiercache_engine::footprint::slot_bytes(kind, 1),
            },
        });
    }
    Ok(report)
}

/// The objects workload (`objects`) on the cache the options describe, taking values up to
/// the largest of `--value-sizes`.
fn cached_objects(
    args: &BenchArgs,
    plan: &Plan,
    tiers: &[(TierKind, u64)],
) -> anyhow::Result<BenchReport> {
    let sizes = plan.objects.as_ref().expect("the objects workload");
    let config = config(args)?;
    let mut builder = config.builder()?.max_value(sizes.largest() as usize);
    if let Some(threads) = args.write_behind {
        builder = builder.write_behind(threads);
    }
    let cache = builder
        .unlocked_hits(!args.locked_hits)
        .scrub_rate(parse_size(&args.scrub_rate).context("--scrub-rate")?)
        .build()?;
    for warning in cache.warnings() {
        eprintln!("note: {warning}");
    }
    let at_start = std::sync::Mutex::new(None);
    let measuring = || *at_start.lock().expect("not poisoned") = Some(cache.stats());
    let (reads, writes, seconds) = drive(args, plan, &measuring, |_, op, key, buf| {
        let len = sizes.size(key);
        match op {
            Op::Read => {
                if cache.get_object(key).is_none() {
                    cache.admit(key, objects::value(key, len, buf))?;
                }
            }
            _ => {
                cache.put(key, objects::value(key, len, buf))?;
            }
        }
        Ok(())
    })?;
    let stats = cache.stats();
    let start = at_start.into_inner().expect("not poisoned").expect("taken before the run");
    let lookups = stats.lookups - start.lookups;
    let hit_ratio = (lookups > 0).then(|| (stats.hits - start.hits) as f64 / lookups as f64);
    let names: Vec<String> = tiers
        .iter()
        .map(|(kind, bytes)| format!("{} {}", tier_name(kind), format_size(*bytes)))
        .collect();
    let label = format!(
        "{} (objects of {}, max_value {}, {} shards)",
        names.join(" over "),
        args.value_sizes,
        format_size(cache.max_value() as u64),
        shards(args)
    );
    let mut report =
        report(args, plan, "objects", label, reads, writes, seconds, hit_ratio, Some(stats));
    // Bytes moved: each operation's value, on average the keys' mean size.
    let mean = (0..plan.blocks.min(100_000)).map(|k| sizes.size(k) as f64).sum::<f64>()
        / plan.blocks.min(100_000) as f64;
    report.mb_per_second = report.ops_per_second * mean / 1e6;
    if tiers.len() > 1 {
        let start_hits = &start.tier_hits;
        let now = &report.cache.as_ref().expect("stats").tier_hits;
        let ratios =
            now.iter().zip(start_hits).map(|(n, t)| (n - t) as f64 / lookups.max(1) as f64);
        report.tier_hit_ratios = Some(ratios.collect());
    }
    Ok(report)
}

fn tier_name(tier: &TierKind) -> String {
    match tier {
        TierKind::Dram => "dram".into(),
        TierKind::Mapped { path } => format!("mapped {}", path.display()),
        TierKind::File { path } => format!("file {}", path.display()),
        TierKind::Flash { path } => format!("flash {}", path.display()),
    }
}

#[allow(clippy::too_many_arguments)]
fn report(
    args: &BenchArgs,
    plan: &Plan,
    mode: &'static str,
    tier: String,
    reads: Histogram<u64>,
    writes: Histogram<u64>,
    seconds: f64,
    hit_ratio: Option<f64>,
    cache: Option<StatsSnapshot>,
) -> BenchReport {
    let ops = reads.len() + writes.len();
    BenchReport {
        mode,
        tier,
        threads: args.threads,
        block_size: plan.block,
        working_set_blocks: plan.blocks,
        distribution: plan.distribution.to_string(),
        read_ratio: args.read_ratio,
        seconds,
        ops_per_second: ops as f64 / seconds,
        mb_per_second: ops as f64 * plan.block as f64 / seconds / 1e6,
        read: Percentiles::of(&reads),
        write: Percentiles::of(&writes),
        hit_ratio,
        tier_hit_ratios: None,
        cache,
        knobs: Default::default(),
        recovery: None,
        written_back_after: None,
        cleaned_while_idle: None,
        metadata: None,
    }
}

fn print(r: &BenchReport) {
    let keys = if r.mode == "objects" { "objects" } else { "blocks" };
    println!(
        "bench ({}): {} threads, {} B blocks, {} over {} {keys}, {:.0}% reads, {:.1} s",
        r.mode,
        r.threads,
        r.block_size,
        r.distribution,
        r.working_set_blocks,
        r.read_ratio * 100.0,
        r.seconds
    );
    println!("tier: {}", r.tier);
    println!("{:.0} ops/s   {:.1} MB/s", r.ops_per_second, r.mb_per_second);
    println!(
        "          {:>10} {:>9} {:>9} {:>9} {:>9}",
        "ops", "mean us", "p50 us", "p99 us", "p999 us"
    );
    for (name, l) in [("reads", &r.read), ("writes", &r.write)] {
        println!(
            "{name:<9} {:>10} {:>9.2} {:>9.2} {:>9.2} {:>9.2}",
            l.count, l.mean_us, l.p50_us, l.p99_us, l.p999_us
        );
    }
    if let (Some(h), Some(c)) = (r.hit_ratio, &r.cache) {
        println!(
            "hit ratio {:.2}%   written to tier {}   checksum failures {}   writes dropped {}",
            h * 100.0,
            format_size(c.bytes_written),
            c.checksum_failures,
            c.writes_dropped
        );
        if let Some(ratios) = &r.tier_hit_ratios {
            let each: Vec<String> = ratios
                .iter()
                .enumerate()
                .map(|(t, h)| format!("tier {t} {:.2}%", h * 100.0))
                .collect();
            println!("hits by tier   {}", each.join("   "));
        }
        if c.unlocked_hits > 0 {
            println!("hits served without the shard lock {}", c.unlocked_hits);
        }
        if c.untold_hits > 0 {
            println!("hits not told to the policy (the hit rule) {}", c.untold_hits);
        }
        if c.scrub_passes > 0 {
            println!(
                "scrubber: {} passes, {} blocks checked, {} found corrupted",
                c.scrub_passes, c.scrubbed, c.scrub_failures
            );
        }
        if c.offloaded > 0 {
            println!("read hits sent to the backing file {}", c.offloaded);
        }
        if c.writes_behind > 0 {
            println!(
                "blocks written behind {}   reads served while their write was in flight {}",
                c.writes_behind, c.staged_reads
            );
        }
    }
    if !r.knobs.is_empty() {
        let knobs: Vec<String> = r.knobs.iter().map(|(k, v)| format!("{k} {v:.3}")).collect();
        println!("knobs at the end: {}", knobs.join(", "));
    }
    if let Some(m) = &r.metadata {
        println!(
            "DRAM beside the tier: {:.0} bytes per cached block ({} for {} blocks; the \
             footprint check assumes {})",
            m.bytes_per_block,
            format_size(m.grown_bytes),
            m.cached_blocks,
            m.estimated_bytes_per_block
        );
    }
}

/// The medium alone: the same key stream as copies to and from the tier, no cache.
mod raw {
    use std::os::unix::fs::FileExt;

    use tiercache_engine::aligned::AlignedBuf;
    use tiercache_engine::tier::superblock::{self, Geometry, Recover};

    use super::*;

    pub fn run(
        args: &BenchArgs,
        plan: &Plan,
        tier: &TierKind,
        tier_bytes: u64,
    ) -> anyhow::Result<BenchReport> {
        let slots = (tier_bytes / plan.block as u64).max(1);
        let block = plan.block;
        // A run without writes has its threads read one region, as the cache's threads read
        // its blocks: each key is at one place for all of them, and the bytes they read
        // together are the working set, not a copy of it per thread. With writes, each thread
        // owns a disjoint stripe (plain copies from two threads to the same bytes would be a
        // data race), and a key is at one place per thread.
        let shared = plan.replay.is_none() && args.read_ratio >= 1.0;
        let stripes = if shared { 1 } else { args.threads };
        let per_stripe = (slots / stripes as u64).max(1);
        let (reads, writes, seconds) = match tier {
            TierKind::Dram | TierKind::Mapped { .. } => {
                let bytes = per_stripe * stripes as u64 * block as u64;
                let mut memory = Memory::open(tier, bytes, block, args.force)?;
                let stripes = memory.stripes(stripes);
                drive(args, plan, &|| {}, |t, op, key, buf| {
                    let stripe = &stripes[if shared { 0 } else { t }];
                    let at = (key % per_stripe) as usize * block;
                    // SAFETY: `at..at + block` lies in the stripe, a range of one live
                    // allocation or mapping. A shared stripe is only read (no writes in the
                    // run); any other is used by its thread alone.
                    unsafe {
                        let start = stripe.0.add(at);
                        match op {
                            Op::Read => {
                                buf.copy_from_slice(std::slice::from_raw_parts(start, block))
                            }
                            _ => std::slice::from_raw_parts_mut(start, block).copy_from_slice(buf),
                        }
                    }
                    std::hint::black_box(&buf);
                    Ok(())
                })?
            }
            TierKind::File { path } | TierKind::Flash { path } => {
                // Direct I/O with aligned buffers, as the flash tier does (buffered where the
                // file system refuses it, as there too).
                // The same tier file as the cache's: made or taken only as it allows, locked.
                let geometry = raw_geometry(block, slots, 2);
                // The run overwrites every slot: nothing in the file is kept.
                let _locked = superblock::open(path, geometry, args.force, Recover::Wipe)?;
                let (file, warning) = tiercache_engine::tier::flash::open_direct(path)?;
                if let Some(w) = warning {
                    eprintln!("note: {w}");
                }
                let buffers: Vec<std::sync::Mutex<AlignedBuf>> = (0..args.threads)
                    .map(|_| std::sync::Mutex::new(AlignedBuf::new(block)))
                    .collect();
                drive(args, plan, &|| {}, |t, op, key, buf| {
                    let at = superblock::HEADER_BYTES + (key % slots) * block as u64;
                    let mut aligned = buffers[t].lock().expect("one thread per buffer");
                    match op {
                        Op::Read => {
                            file.read_exact_at(aligned.as_mut_slice(), at)?;
                            buf.copy_from_slice(aligned.as_slice());
                        }
                        _ => {
                            aligned.as_mut_slice().copy_from_slice(buf);
                            file.write_all_at(aligned.as_slice(), at)?;
                        }
                    }
                    Ok(())
                })?
            }
        };
        let label = format!("{} {} (raw copies)", tier_name(tier), format_size(tier_bytes));
        Ok(report(args, plan, "raw", label, reads, writes, seconds, None, None))
    }

    /// The backing file alone: each block read or written where the cache reads or writes it
    /// through (`CachedFile` over a plain file: buffered, at the block's offset).
    pub fn backing(
        args: &BenchArgs,
        plan: &Plan,
        path: &std::path::Path,
    ) -> anyhow::Result<BenchReport> {
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)
            .with_context(|| format!("cannot open the backing file {}", path.display()))?;
        let block = plan.block;
        let (reads, writes, seconds) = drive(args, plan, &|| {}, |_, op, key, buf| {
            let at = key * block as u64;
            match op {
                Op::Read => file.read_exact_at(buf, at)?,
                _ => file.write_all_at(buf, at)?,
            }
            std::hint::black_box(&buf);
            Ok(())
        })?;
        let bytes = plan.blocks * block as u64;
        let label = format!(
            "backing file {} {} (raw reads and writes)",
            path.display(),
            format_size(bytes)
        );
        Ok(report(args, plan, "raw", label, reads, writes, seconds, None, None))
    }

    /// The geometry a raw run's tier file records: headerless slots of one block, one shard.
    fn raw_geometry(block: usize, slots: u64, kind: u32) -> Geometry {
        let block = block as u32;
        Geometry { slot_bytes: block, slots, block_size: block, shards: 1, chunks: 1, kind }
    }

    /// Process memory or a mapped file, held open for the run.
    enum Memory {
        Dram(memmap2::MmapMut),
        /// The mapping of a tier file's slots, and the file, locked while it is held.
        Mapped {
            mapping: memmap2::MmapMut,
            _locked: std::fs::File,
        },
    }

    /// A stripe of the medium: its start address.
    pub struct Stripe(*mut u8);
    // SAFETY: a stripe is a disjoint range, used by one thread or only read (see its use above).
    unsafe impl Sync for Stripe {}
    unsafe impl Send for Stripe {}

    impl Memory {
        fn open(tier: &TierKind, bytes: u64, block: usize, force: bool) -> anyhow::Result<Memory> {
            Ok(match tier {
                TierKind::Mapped { path } => {
                    let slots = bytes / block as u64;
                    let geometry = raw_geometry(block, slots, 1);
                    let file = superblock::open(path, geometry, force, Recover::Wipe)?.file;
                    // SAFETY: the file is locked for this run; nothing else maps it.
                    let mapping = unsafe {
                        memmap2::MmapOptions::new()
                            .offset(superblock::HEADER_BYTES)
                            .len(bytes as usize)
                            .map_mut(&file)?
                    };
                    Memory::Mapped { mapping, _locked: file }
                }
                _ => {
                    // As the cache's DRAM tier holds its blocks: anonymous memory with huge
                    // pages where the kernel has them, so both pay the same for the TLB.
                    let mut memory = memmap2::MmapOptions::new().len(bytes as usize).map_anon()?;
                    #[cfg(target_os = "linux")]
                    let _ = memory.advise(memmap2::Advice::HugePage);
                    memory.fill(1);
                    Memory::Dram(memory)
                }
            })
        }

        fn stripes(&mut self, threads: usize) -> Vec<Stripe> {
            let bytes: &mut [u8] = match self {
                Memory::Dram(v) => v,
                Memory::Mapped { mapping, .. } => mapping,
            };
            let per = bytes.len() / threads;
            (0..threads).map(|t| Stripe(bytes[t * per..].as_mut_ptr())).collect()
        }
    }
}

/// Waits up to `limit` seconds, with no requests, for the cleaner to write the dirty blocks
/// back, and measures what it did.
fn idle(file: &CachedFile, limit: f64) -> Cleaned {
    let cache = file.cache();
    let (before, started) = (cache.stats(), Instant::now());
    let dirty_before = cache.dirty_blocks() as u64;
    let limit = std::time::Duration::from_secs_f64(limit);
    let mut dirty_after = dirty_before;
    while dirty_after > 0 && started.elapsed() < limit {
        std::thread::sleep(std::time::Duration::from_millis(10));
        dirty_after = cache.dirty_blocks() as u64;
    }
    let seconds = started.elapsed().as_secs_f64();
    let after = cache.stats();
    let written_back = after.write_backs - before.write_backs;
    let cleaned = Cleaned {
        dirty_before,
        dirty_after,
        seconds,
        written_back,
        blocks_per_second: written_back as f64 / seconds,
        runs: after.write_back_runs - before.write_back_runs,
    };
    eprintln!(
        "idle {seconds:.2} s: the cleaner wrote back {written_back} blocks ({:.0} a second), \
         {dirty_after} of {dirty_before} still dirty",
        cleaned.blocks_per_second
    );
    cleaned
}
