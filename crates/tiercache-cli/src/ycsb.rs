//! `tiercache ycsb`: YCSB's core workloads on a redb database that lives behind the cache
//! (`tiercache_redb`), as NVCache ran under WiredTiger and Kassa's cache under RocksDB: redb's
//! own page cache is the engine's DRAM cache, tiercache the slow-memory cache below it. Loads
//! the records, runs each workload asked for, checks every value read, and reports throughput,
//! latency per operation, the database's and the cache's hit ratios and the bytes written to
//! the slow tier.

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};

use anyhow::{bail, Context};
use clap::Args;
use serde::Serialize;
use tiercache_core::{format_size, parse_size, DeviceProfile};
use tiercache_engine::device::{Device, Emulated, FileDevice};
use tiercache_engine::{CacheConfig, CachedFile, Recover, StatsSnapshot, TierKind};
use tiercache_redb::redb::{self, Database, Durability};
use tiercache_redb::ycsb::{self, LoadReport, Records, RunOptions, RunReport, YcsbWorkload};
use tiercache_redb::{CachedBackend, DeviceBackend};

use crate::cache_args::Defaults;
use crate::progress::Progress;

#[derive(Args, Clone, Debug)]
pub struct YcsbArgs {
    /// The database: redb (a file behind tiercache), or slatedb (an LSM over object storage,
    /// tiercache its block cache: see --slatedb-cache).
    #[arg(long, alias = "engine", default_value = "redb")]
    pub db: String,
    /// The workloads run after the load, in order: one of A-F, several joined by commas
    /// (A,B,C), or all (A,B,C,F,D,E: YCSB's order, the inserting workloads last).
    #[arg(long, default_value = "A")]
    pub workload: String,
    /// Records loaded [default: 100000 for redb, 20000 for slatedb].
    #[arg(long)]
    pub records: Option<u64>,
    /// Operations of each workload, over all threads [default: 100000 for redb, 10000 for
    /// slatedb].
    #[arg(long)]
    pub operations: Option<u64>,
    /// Client threads (with slatedb, clients: tasks of one runtime) [default: 1 for redb, 16
    /// for slatedb, whose every miss waits for the object store].
    #[arg(long)]
    pub threads: Option<usize>,
    /// The database file: made by the load (a file that exists must be empty), or checked with
    /// --check. Default: a new file in the temporary directory, removed at the end.
    #[arg(long)]
    pub path: Option<PathBuf>,
    /// Bytes of a record (YCSB's default: 10 fields of 100 bytes).
    #[arg(long, default_value = "1000")]
    pub record_size: String,
    /// redb's own page cache (the DRAM cache of the storage engine, above tiercache).
    #[arg(long, default_value = "16MiB")]
    pub db_cache: String,
    /// redb straight on the file, no tiercache below it (the file still behaves like
    /// --backing-profile).
    #[arg(long)]
    pub no_cache: bool,
    /// tiercache under the database: its tiers, policies and engine options (shared with
    /// `serve` and `bench`). A load starts the tiers empty; --recover is for --check.
    #[command(flatten)]
    pub cache: crate::cache_args::CacheArgs,
    /// Make the database file behave like a device (sata-ssd, nvme, hdd, or a TOML profile).
    #[arg(long)]
    pub backing_profile: Option<String>,
    /// Overwrite a --slow-path or --flash-path that holds a file which is not a tier file.
    #[arg(long)]
    pub force: bool,
    /// When a commit is durable: immediate (every commit syncs, redb's default) or none
    /// (commits reach the file; the next immediate commit or the close makes them durable).
    #[arg(long, default_value = "immediate")]
    pub durability: String,
    /// Seed of the keys, the values and the operation mix.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Check the database at --path through the cache described, without loading or running:
    /// the tier's blocks recovered (after a crash, say), every record read and checked.
    #[arg(long)]
    pub check: bool,
    /// Print the results as one JSON object instead of the table.
    #[arg(long)]
    pub json: bool,
    /// Append `NUMBER VERSION` for each committed write to this file (for crash tests).
    #[arg(long, hide = true)]
    pub commit_log: Option<PathBuf>,
    #[command(flatten)]
    pub slatedb: SlateDbArgs,
}

/// The options of `--db slatedb`.
#[derive(Args, Clone, Debug)]
pub struct SlateDbArgs {
    /// With --db slatedb, its block cache: tiercache (on the tiers --dram, --slow-path and
    /// --flash-path describe), foyer (SlateDB's own hybrid cache: --dram of memory over a disk
    /// cache of the lower tiers' bytes in --dir; in builds with the `foyer` feature),
    /// object-store (SlateDB's cache of object parts on local disk, of --object-cache-size),
    /// or none.
    #[arg(long, default_value = "tiercache")]
    pub slatedb_cache: String,
    /// With --db slatedb: the folder of the object store's root and the caches' files.
    /// Default: a new folder in the temporary directory, removed at the end.
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// With --db slatedb: milliseconds the object store waits before each request's first
    /// byte (S3 within a region: about 20).
    #[arg(long, default_value_t = 20.0)]
    pub first_byte_ms: f64,
    /// With --db slatedb: bytes a second of one request, after its first byte (0: no limit).
    #[arg(long, default_value = "100MB")]
    pub bandwidth: String,
    /// With --slatedb-cache object-store: its disk budget. Default: the bytes of tiercache's
    /// tiers the options describe, so both caches get the same.
    #[arg(long)]
    pub object_cache_size: Option<String>,
    /// With --db slatedb: after the workloads, close the database and its cache, reopen both,
    /// and run the first workload again.
    #[arg(long)]
    pub restart: bool,
    /// With --slatedb-cache tiercache: bytes of SlateDB's indexes, filters and stats kept
    /// decoded beside the cache, taken from --dram [default: a quarter of --dram].
    #[arg(long)]
    pub decoded: Option<String>,
}

/// Options of `--db slatedb` given with another database: refused, naming them.
pub fn refuse_slatedb_options(args: &YcsbArgs) -> anyhow::Result<()> {
    let s = &args.slatedb;
    let mut given = Vec::new();
    given.extend((s.slatedb_cache != "tiercache").then_some("--slatedb-cache"));
    given.extend(s.dir.as_ref().map(|_| "--dir"));
    given.extend(s.object_cache_size.as_ref().map(|_| "--object-cache-size"));
    given.extend(s.restart.then_some("--restart"));
    given.extend(s.decoded.as_ref().map(|_| "--decoded"));
    anyhow::ensure!(given.is_empty(), "{} are for --db slatedb", given.join(", "));
    Ok(())
}

/// The database's own page cache over a run.
#[derive(Clone, Debug, Default, Serialize)]
pub struct DbCache {
    pub bytes: u64,
    pub read_hits: u64,
    pub read_misses: u64,
    pub evictions: u64,
    pub hit_ratio: Option<f64>,
}

/// tiercache over a run.
#[derive(Clone, Debug, Default, Serialize)]
pub struct CacheCounters {
    pub lookups: u64,
    pub hits: u64,
    pub hit_ratio: Option<f64>,
    /// Bytes written to the slow tier: writes, fills and demotions.
    pub slow_tier_bytes_written: u64,
    pub bytes_written_back: u64,
    pub dirty_blocks: usize,
}

#[derive(Clone, Debug, Serialize)]
pub struct Run {
    #[serde(flatten)]
    pub report: RunReport,
    pub db_cache: DbCache,
    pub cache: Option<CacheCounters>,
}

#[derive(Clone, Debug, Serialize)]
pub struct YcsbReport {
    pub db: &'static str,
    pub path: PathBuf,
    /// The stack under the database, in words.
    pub setup: String,
    pub load: LoadReport,
    /// Over every workload run: operations per second, whether every read checked out, the
    /// caches' hit ratios.
    pub ops_per_second: f64,
    pub verified: bool,
    pub db_cache: DbCache,
    pub cache: Option<CacheCounters>,
    pub runs: Vec<Run>,
}

/// What `--check` found.
#[derive(Clone, Debug, Serialize)]
pub struct CheckOutput {
    pub path: PathBuf,
    pub setup: String,
    /// Blocks the slow tier gave back, and of those dirty.
    pub recovered_blocks: u64,
    pub recovered_dirty: usize,
    #[serde(flatten)]
    pub check: ycsb::CheckReport,
    pub verified: bool,
}

/// The workloads of `--workload`.
fn workloads(text: &str) -> anyhow::Result<Vec<YcsbWorkload>> {
    if text.trim().eq_ignore_ascii_case("all") {
        return workloads("A,B,C,F,D,E");
    }
    text.split(',')
        .map(|w| YcsbWorkload::parse(w).with_context(|| format!("--workload {text}")))
        .collect()
}

/// The database file and whether it is ours to remove at the end.
struct DbFile {
    path: PathBuf,
    temporary: Option<PathBuf>,
}

impl Drop for DbFile {
    fn drop(&mut self) {
        if let Some(dir) = &self.temporary {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

fn db_file(args: &YcsbArgs) -> anyhow::Result<DbFile> {
    let Some(path) = &args.path else {
        anyhow::ensure!(!args.check, "--check needs --path, the database to check");
        let dir = std::env::temp_dir().join(format!("tiercache-ycsb-{}", std::process::id()));
        std::fs::create_dir_all(&dir)
            .with_context(|| format!("cannot create {}", dir.display()))?;
        let path = dir.join("ycsb.redb");
        std::fs::File::create(&path)
            .with_context(|| format!("cannot create {}", path.display()))?;
        return Ok(DbFile { path, temporary: Some(dir) });
    };
    let shown = path.display();
    match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.file_type().is_symlink() => {
            bail!("--path {shown} is a symbolic link; name the database file itself")
        }
        Ok(meta) if !meta.is_file() => bail!("--path {shown} is not a regular file"),
        Ok(_) if args.check => {}
        Ok(meta) if meta.len() > 0 => bail!(
            "--path {shown} exists and is not empty: the load makes a new database, so it would \
             be overwritten; remove it, name another, or check it with --check"
        ),
        Ok(_) => {}
        Err(_) if args.check => bail!("--path {shown}: no such database to check"),
        Err(_) => {
            std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(path)
                .with_context(|| format!("--path {shown}: cannot create the database file"))?;
        }
    }
    Ok(DbFile { path: path.clone(), temporary: None })
}

fn durability(text: &str) -> anyhow::Result<Durability> {
    match text {
        "immediate" => Ok(Durability::Immediate),
        "none" => Ok(Durability::None),
        other => bail!("--durability {other}: use immediate or none"),
    }
}

fn profile(name: &Option<String>, flag: &str) -> anyhow::Result<Option<DeviceProfile>> {
    name.as_ref()
        .map(|n| DeviceProfile::load(n).map_err(|e| anyhow::anyhow!("{flag} {n}: {e}")))
        .transpose()
}

/// The cache the options describe, as `serve` takes them: a load starts it empty.
fn cache_config(args: &YcsbArgs) -> anyhow::Result<CacheConfig> {
    let mut cache = args.cache.clone();
    cache.recover = Some(match args.check {
        true => args.cache.recover.unwrap_or(Recover::Quiet),
        // A new database: what the tier holds belongs to another.
        false => Recover::Wipe,
    });
    cache.config(&Defaults::SERVE, None)
}

/// The options that describe tiercache, by flag, when given: the stack's, as `serve` takes
/// them, and the tiers' files and devices.
fn cache_options(args: &YcsbArgs) -> Vec<&'static str> {
    let c = &args.cache;
    let mut given = c.stack_options();
    given.extend(c.slow_path.as_ref().map(|_| "--slow-path"));
    given.extend(c.flash_path.as_ref().map(|_| "--flash-path"));
    given.extend(c.slow_profile.as_ref().map(|_| "--slow-profile"));
    given.extend(c.flash_profile.as_ref().map(|_| "--flash-profile"));
    given
}

/// An open database: redb over tiercache, or over the file alone.
pub struct Opened {
    pub db: Database,
    pub file: Option<Arc<CachedFile>>,
    /// Dirty blocks the cache recovered when it opened, before the database wrote anything
    /// (opening a redb database writes its header).
    pub recovered_dirty: usize,
    /// The stack under the database, in words.
    pub setup: String,
}

/// The two caches' counters at one moment, to measure a stretch of work against.
pub struct Counters {
    db: DbCache,
    cache: Option<StatsSnapshot>,
}

impl Opened {
    pub fn counters(&self) -> Counters {
        Counters {
            db: db_cache_counters(&self.db),
            cache: self.file.as_ref().map(|f| f.cache().stats()),
        }
    }

    /// What redb's cache (of `db_cache` bytes) and tiercache did since `before`.
    pub fn since(&self, before: &Counters, db_cache: u64) -> (DbCache, Option<CacheCounters>) {
        let db = db_cache_between(&before.db, &db_cache_counters(&self.db), db_cache);
        let cache = self
            .file
            .as_ref()
            .zip(before.cache.as_ref())
            .map(|(f, before)| cache_between(f, before, &f.cache().stats()));
        (db, cache)
    }

    /// Runs one workload, with what the two caches did meanwhile.
    pub fn run(
        &self,
        records: &Records,
        version: &AtomicU64,
        options: &RunOptions,
        db_cache: u64,
    ) -> Result<Run, redb::Error> {
        let before = self.counters();
        let report = ycsb::run(&self.db, records, version, options)?;
        let (db_cache, cache) = self.since(&before, db_cache);
        Ok(Run { report, db_cache, cache })
    }
}

/// Opens the database at `path` over the stack `args` describe, redb's cache `db_cache` bytes.
pub fn open(args: &YcsbArgs, path: &Path, db_cache: u64) -> anyhow::Result<Opened> {
    let backing = profile(&args.backing_profile, "--backing-profile")?;
    let mut builder = redb::Builder::new();
    builder.set_cache_size(db_cache as usize);
    let like = match &args.backing_profile {
        Some(name) => format!(", the file behaving as {name}"),
        None => String::new(),
    };
    let redb_error = |e: redb::DatabaseError| {
        anyhow::Error::new(e).context(format!("{}: cannot open the database", path.display()))
    };
    if args.no_cache {
        let given = cache_options(args);
        anyhow::ensure!(
            given.is_empty(),
            "--no-cache runs without tiercache, so {} cannot be given",
            given.join(", ")
        );
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)
            .with_context(|| format!("cannot open {}", path.display()))?;
        let mut device: Arc<dyn Device> = Arc::new(FileDevice::new(file, path));
        if let Some(profile) = backing {
            device = Arc::new(Emulated::new(device, profile));
        }
        let db = builder.create_with_backend(DeviceBackend::new(device)).map_err(redb_error)?;
        let setup = format!("redb cache {}, no tiercache{like}", format_size(db_cache));
        return Ok(Opened { db, file: None, setup, recovered_dirty: 0 });
    }
    let config = cache_config(args)?;
    // Given the database file before recovery, which writes back what it cannot keep.
    let cache = config.builder()?.overwrite_foreign_files(args.force);
    let cache = cache.backing_file(path, false)?.build()?;
    for warning in cache.warnings() {
        eprintln!("note: {warning}");
    }
    let mut file = CachedFile::open(path, cache)?;
    let recovered_dirty = file.cache().dirty_blocks();
    if let Some(profile) = backing {
        file = file.emulate_backing(profile);
    }
    let file = Arc::new(file);
    let db = builder.create_with_backend(CachedBackend::new(file.clone())).map_err(redb_error)?;
    let tiers = tiers_in_words(args)?;
    let admission = match &args.cache.nvcache {
        Some(spec) => format!(", NVCache {spec}"),
        None => String::new(),
    };
    let setup = format!(
        "redb cache {} over tiercache {tiers} ({}{admission}){like}",
        format_size(db_cache),
        file.mode().short()
    );
    Ok(Opened { db, file: Some(file), setup, recovered_dirty })
}

/// The tiers the options describe, in words: `dram 64MiB over flash F 1GiB`.
pub(crate) fn tiers_in_words(args: &YcsbArgs) -> anyhow::Result<String> {
    let config = cache_config(args)?;
    let media = config.tier_kinds(config.stack()?.tiers.len());
    let c = &args.cache;
    let tiers: Vec<String> = media
        .iter()
        .map(|m| match m {
            TierKind::Dram => format!("dram {}", c.dram.as_deref().unwrap_or("64MiB")),
            TierKind::Mapped { path } => format!(
                "mapped {} {}{}",
                path.display(),
                c.slow_size.as_deref().unwrap_or("?"),
                match &c.slow_profile {
                    Some(name) => format!(" behaving as {name}"),
                    None => String::new(),
                }
            ),
            TierKind::Flash { path } => {
                format!("flash {} {}", path.display(), c.flash_size.as_deref().unwrap_or("?"))
            }
            other => format!("{other:?}"),
        })
        .collect();
    Ok(tiers.join(" over "))
}

fn db_cache_counters(db: &Database) -> DbCache {
    use redb::ReadableDatabase;
    let s = db.cache_stats();
    DbCache {
        bytes: 0,
        read_hits: s.read_hits(),
        read_misses: s.read_misses(),
        evictions: s.evictions(),
        hit_ratio: None,
    }
}

/// What happened between two readings of the database's cache.
fn db_cache_between(before: &DbCache, after: &DbCache, bytes: u64) -> DbCache {
    let hits = after.read_hits - before.read_hits;
    let misses = after.read_misses - before.read_misses;
    DbCache {
        bytes,
        read_hits: hits,
        read_misses: misses,
        evictions: after.evictions - before.evictions,
        hit_ratio: (hits + misses > 0).then(|| hits as f64 / (hits + misses) as f64),
    }
}

/// What happened in tiercache between two readings of its counters.
fn cache_between(
    file: &CachedFile,
    before: &StatsSnapshot,
    after: &StatsSnapshot,
) -> CacheCounters {
    let lookups = after.lookups - before.lookups;
    // Hits the policy sent to the backing file (NHC) were cached all the same.
    let hits = (after.hits + after.offloaded) - (before.hits + before.offloaded);
    CacheCounters {
        lookups,
        hits,
        hit_ratio: (lookups > 0).then(|| hits as f64 / lookups as f64),
        slow_tier_bytes_written: after.persistent_bytes_written - before.persistent_bytes_written,
        bytes_written_back: after.bytes_written_back - before.bytes_written_back,
        dirty_blocks: file.cache().dirty_blocks(),
    }
}

/// What every database's run checks first: the workloads, the counts, the record size.
pub(crate) struct Checked {
    pub workloads: Vec<YcsbWorkload>,
    pub records: u64,
    pub operations: u64,
    pub threads: usize,
    pub record_bytes: usize,
}

pub(crate) fn checked(args: &YcsbArgs, defaults: (u64, u64, usize)) -> anyhow::Result<Checked> {
    let workloads = workloads(&args.workload)?;
    let records = args.records.unwrap_or(defaults.0);
    let operations = args.operations.unwrap_or(defaults.1);
    let threads = args.threads.unwrap_or(defaults.2);
    anyhow::ensure!(records > 0, "--records must be at least 1");
    anyhow::ensure!((1..=1024).contains(&threads), "--threads {threads}: between 1 and 1024");
    let record_bytes = parse_size(&args.record_size).context("--record-size")?;
    anyhow::ensure!(
        (ycsb::MIN_RECORD_BYTES as u64..=16 << 20).contains(&record_bytes),
        "--record-size {}: between {} bytes and 16 MiB",
        args.record_size,
        ycsb::MIN_RECORD_BYTES
    );
    Ok(Checked { workloads, records, operations, threads, record_bytes: record_bytes as usize })
}

pub fn run(args: &YcsbArgs) -> anyhow::Result<()> {
    match args.db.as_str() {
        "redb" => {}
        "slatedb" => bail!("--db slatedb is run by the command line's ycsb_slatedb::run"),
        other => bail!("--db {other}: the databases tiercache runs are redb and slatedb"),
    }
    refuse_slatedb_options(args)?;
    let Checked { workloads, records: record_count, operations, threads, record_bytes } =
        checked(args, (100_000, 100_000, 1))?;
    let record_bytes = record_bytes as u64;
    let db_cache = parse_size(&args.db_cache).context("--db-cache")?;
    anyhow::ensure!(db_cache <= 1 << 40, "--db-cache {}: at most 1 TiB", args.db_cache);
    let durability = durability(&args.durability)?;
    anyhow::ensure!(
        args.check || args.cache.recover.is_none(),
        "--recover is for --check: a load makes a new database, so the slow tier starts empty"
    );
    let file = db_file(args)?;
    let opened = open(args, &file.path, db_cache)?;
    if args.check {
        return check(args, &file.path, opened);
    }
    let mut bar = Progress::new("loading", Some(record_count));
    let load =
        ycsb::load(&opened.db, record_count, record_bytes as usize, durability, &mut |done| {
            bar.set(done)
        });
    bar.finish();
    let load = load.with_context(|| format!("{}: the load failed", file.path.display()))?;
    let commit_log = match &args.commit_log {
        Some(path) => Some(Mutex::new(
            std::fs::File::create(path)
                .with_context(|| format!("cannot create {}", path.display()))?,
        )),
        None => None,
    };
    let records = Records::new(record_count);
    // Loaded records are version 0; each committed write takes the next.
    let version = AtomicU64::new(0);
    let mut runs = Vec::new();
    let first = opened.counters();
    for workload in workloads {
        let bar = Mutex::new(Progress::new(&format!("workload {workload:?}"), Some(operations)));
        let options = RunOptions {
            workload,
            operations,
            threads,
            record_bytes: record_bytes as usize,
            seed: args.seed,
            durability,
            commit_log: commit_log.as_ref(),
            progress: &|done| bar.lock().unwrap_or_else(|p| p.into_inner()).set(done),
        };
        let run = opened
            .run(&records, &version, &options, db_cache)
            .with_context(|| format!("{}: workload {workload:?} failed", file.path.display()))?;
        bar.into_inner().unwrap_or_else(|p| p.into_inner()).finish();
        runs.push(run);
    }
    let seconds: f64 = runs.iter().map(|r| r.report.seconds).sum();
    let operations: u64 = runs.iter().map(|r| r.report.operations).sum();
    let (db_cache, cache) = opened.since(&first, db_cache);
    let report = YcsbReport {
        db: "redb",
        path: file.path.clone(),
        setup: opened.setup.clone(),
        load,
        ops_per_second: operations as f64 / seconds.max(1e-9),
        verified: runs.iter().all(|r| r.report.verified),
        db_cache,
        cache,
        runs,
    };
    // Closing writes every dirty block back and syncs the file.
    drop(opened);
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print_report(&report);
    }
    if !report.verified {
        let first = report.runs.iter().find_map(|r| r.report.first_failure.clone());
        bail!("reads did not match what was written: {}", first.unwrap_or_default());
    }
    Ok(())
}

fn check(args: &YcsbArgs, path: &Path, opened: Opened) -> anyhow::Result<()> {
    let Opened { db, file, setup, recovered_dirty } = opened;
    let recovered_blocks = file.as_ref().map_or(0, |f| f.cache().stats().recovered);
    let check = ycsb::check_all(&db).with_context(|| format!("{}: cannot read", path.display()))?;
    drop(db);
    let output = CheckOutput {
        path: path.to_path_buf(),
        setup,
        recovered_blocks,
        recovered_dirty,
        verified: check.bad == 0,
        check,
    };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&output)?);
    } else {
        println!("{}: {}", output.path.display(), output.setup);
        println!(
            "{} records ({} numbered contiguously from 0), highest version {}; {} blocks \
             recovered from the slow tier ({} dirty)",
            output.check.records,
            output.check.contiguous_records,
            output.check.highest_version,
            output.recovered_blocks,
            output.recovered_dirty
        );
    }
    match &output.check.first_bad {
        Some(first) => bail!("{} records do not check out; the first: {first}", output.check.bad),
        None => Ok(()),
    }
}

pub(crate) fn ratio(x: Option<f64>) -> String {
    x.map_or("-".into(), |x| format!("{:.1}%", x * 100.0))
}

fn print_report(report: &YcsbReport) {
    println!("{} at {}: {}", report.db, report.path.display(), report.setup);
    let load = &report.load;
    println!(
        "loaded {} records of {} B in {:.2} s ({:.0} records/s)\n",
        load.records, load.record_bytes, load.seconds, load.records_per_second
    );
    println!(
        "{:<9} {:>11} {:>9} {:>10} {:>13} {:>9}",
        "workload", "ops/s", "db hits", "cache hits", "slow written", "verified"
    );
    for run in &report.runs {
        let r = &run.report;
        let cache = run.cache.as_ref();
        println!(
            "{:<9} {:>11.0} {:>9} {:>10} {:>13} {:>9}",
            r.workload,
            r.ops_per_second,
            ratio(run.db_cache.hit_ratio),
            ratio(cache.and_then(|c| c.hit_ratio)),
            cache.map_or("-".into(), |c| format_size(c.slow_tier_bytes_written)),
            if r.verified { "yes" } else { "NO" },
        );
    }
    println!(
        "\n{:<9} {:<18} {:>9} {:>10} {:>10} {:>10} {:>10}",
        "workload", "operation", "count", "mean us", "p50 us", "p99 us", "p99.9 us"
    );
    for run in &report.runs {
        for (op, p) in &run.report.latency {
            println!(
                "{:<9} {:<18} {:>9} {:>10.1} {:>10.1} {:>10.1} {:>10.1}",
                run.report.workload, op, p.count, p.mean_us, p.p50_us, p.p99_us, p.p999_us
            );
        }
    }
}
