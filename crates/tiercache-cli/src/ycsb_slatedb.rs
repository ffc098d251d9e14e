//! `tiercache ycsb --db slatedb`: YCSB's core workloads on SlateDB, an LSM over object storage,
//! with its block cache on tiercache's tiers (`tiercache_slatedb`), on SlateDB's own cache of
//! object parts on local disk, or on none, over a local object store that answers like S3.
//! Loads the records (no cache), then runs each workload asked for over the cache, checking
//! every value read, and reports ops/s, latency, the object store's GETs and the cache's hits
//! by tier. `--restart` then closes the database and its cache, reopens both and runs the
//! first workload again: a warm cache makes fewer GETs than the cold first run.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{bail, Context};
use serde::Serialize;
use tiercache_core::{format_size, parse_size};
use tiercache_engine::latency::Percentiles;
use tiercache_engine::{Recover, StatsSnapshot};
use tiercache_slatedb::slatedb::config::{ObjectStoreCacheOptions, Settings};
use tiercache_slatedb::slatedb::db_cache::DbCache;
use tiercache_slatedb::slatedb::Db;
use tiercache_slatedb::store::{self, CountingStore, Latency, Requests};
use tiercache_slatedb::ycsb::{self, LoadReport, RunOptions, RunReport};
use tiercache_slatedb::TiercacheDbCache;
use tiercache_workload::gen::ycsb::records::Records;

use crate::progress::Progress;
use crate::ycsb::{checked, ratio, Checked, YcsbArgs};

/// Which cache SlateDB reads through.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Which {
    Tiercache,
    Foyer,
    ObjectStore,
    None,
}

/// One workload's run, with what the object store and the cache did meanwhile.
#[derive(Clone, Debug, Serialize)]
pub struct SlateRun {
    #[serde(flatten)]
    pub report: RunReport,
    pub object_store: Requests,
    pub cache: Option<TierHits>,
}

/// tiercache's lookups and hits over a run, by tier (the top tier first).
#[derive(Clone, Debug, Serialize)]
pub struct TierHits {
    pub lookups: u64,
    pub hits: u64,
    pub hit_ratio: Option<f64>,
    pub tier_hits: Vec<u64>,
    /// Entries the cache would not take, by reason (too large for its tiers, say).
    pub rejected: serde_json::Value,
    /// Entries written to the cache (SlateDB's inserts and the fetches' loads).
    pub puts: u64,
}

#[derive(Clone, Debug, Serialize)]
pub struct SlateReport {
    pub db: &'static str,
    pub dir: PathBuf,
    pub setup: String,
    pub load: LoadReport,
    /// Over every workload run (not the restart's).
    pub ops_per_second: f64,
    pub p99_us: f64,
    pub object_store_gets: u64,
    pub object_store_get_bytes: u64,
    /// tiercache's hits over its lookups (none for the other caches).
    pub hit_ratio: Option<f64>,
    pub verified: bool,
    pub runs: Vec<SlateRun>,
    /// With --restart: the first workload again, over the reopened cache.
    pub restart: Option<SlateRun>,
}

/// The folder and whether it is ours to remove.
struct Folder {
    path: PathBuf,
    temporary: bool,
}

impl Drop for Folder {
    fn drop(&mut self) {
        if self.temporary {
            let _ = std::fs::remove_dir_all(&self.path);
        }
    }
}

fn folder(args: &YcsbArgs) -> anyhow::Result<Folder> {
    let (path, temporary) = match &args.slatedb.dir {
        Some(dir) => {
            let objects = dir.join("objects");
            anyhow::ensure!(
                !objects.exists(),
                "--dir {}: {} exists; the load makes a new database, so name an empty folder",
                dir.display(),
                objects.display()
            );
            (dir.clone(), false)
        }
        None => {
            let dir =
                std::env::temp_dir().join(format!("tiercache-ycsb-slatedb-{}", std::process::id()));
            (dir, true)
        }
    };
    std::fs::create_dir_all(&path).with_context(|| format!("cannot create {}", path.display()))?;
    Ok(Folder { path, temporary })
}

/// The cache, built: SlateDB's handle on it, and tiercache's own when it is tiercache.
struct Built {
    cache: Option<Arc<dyn DbCache>>,
    tiercache: Option<Arc<TiercacheDbCache>>,
    settings: Settings,
    setup: String,
}

/// tiercache over the tiers the options describe, values up to 16 MiB (SlateDB's index blocks
/// grow with its SSTs), recovered from its files (`recover`) or started empty.
fn tiercache(args: &YcsbArgs, recover: Recover) -> anyhow::Result<Arc<TiercacheDbCache>> {
    let (dram, decoded) = dram_and_decoded(args)?;
    let mut options = args.cache.clone();
    options.recover = Some(recover);
    options.dram = Some((dram - decoded).to_string());
    // SlateDB's indexes and filters grow with its SSTs to megabytes, and an entry is cached
    // only where a shard of its tier holds it: shards of at least 1 MiB of DRAM each, unless
    // --shards says.
    if options.shards.is_none() {
        let shards = ((dram - decoded) >> 20).clamp(1, 16);
        options.shards = Some(1 << shards.ilog2());
    }
    let config = options.config(&crate::cache_args::Defaults::SERVE, None)?;
    let builder = config.builder()?.overwrite_foreign_files(args.force).max_value_at_most(16 << 20);
    let cache = builder.build()?;
    for warning in cache.warnings() {
        eprintln!("note: {warning}");
    }
    Ok(Arc::new(TiercacheDbCache::new(cache)?.with_decoded(decoded as usize)))
}

/// The bytes of --dram (64 MiB unless given, as every command takes it).
fn dram_bytes(args: &YcsbArgs) -> anyhow::Result<u64> {
    args.cache.dram.as_deref().map_or(Ok(64 << 20), |text| parse_size(text).context("--dram"))
}

/// The bytes of --dram, and of them those of decoded metadata (--decoded).
fn dram_and_decoded(args: &YcsbArgs) -> anyhow::Result<(u64, u64)> {
    let dram = dram_bytes(args)?;
    let decoded = match &args.slatedb.decoded {
        Some(text) => parse_size(text).context("--decoded")?,
        None => dram / 4,
    };
    anyhow::ensure!(decoded < dram, "--decoded {decoded} bytes: less than --dram ({dram})");
    Ok((dram, decoded))
}

/// The bytes of the tiers the options describe.
fn tier_bytes(args: &YcsbArgs) -> anyhow::Result<u64> {
    let c = &args.cache;
    let size = |text: &Option<String>, flag: &str| -> anyhow::Result<u64> {
        text.as_ref().map_or(Ok(0), |t| parse_size(t).with_context(|| flag.to_string()))
    };
    Ok(dram_bytes(args)?
        + size(&c.slow_size, "--slow-size")?
        + size(&c.flash_size, "--flash-size")?)
}

/// The bytes of DRAM the options give, and of the tiers below it.
#[cfg(feature = "foyer")]
fn memory_and_disk(args: &YcsbArgs) -> anyhow::Result<(u64, u64)> {
    let dram = dram_bytes(args)?;
    Ok((dram, tier_bytes(args)? - dram))
}

async fn build(
    args: &YcsbArgs,
    which: Which,
    dir: &std::path::Path,
    recover: Recover,
) -> anyhow::Result<Built> {
    let mut settings = Settings::default();
    Ok(match which {
        #[cfg(feature = "foyer")]
        Which::Foyer => {
            let (memory, disk) = memory_and_disk(args)?;
            anyhow::ensure!(disk > 0, "--slatedb-cache foyer needs a disk: --flash-size");
            let folder = dir.join("foyer");
            if recover == Recover::Wipe {
                let _ = std::fs::remove_dir_all(&folder);
            }
            let cache = tiercache_slatedb::foyer::hybrid(memory as usize, &folder, disk as usize)
                .await
                .map_err(anyhow::Error::msg)?;
            let setup = format!(
                "foyer's hybrid cache (SlateDB's), memory {} over disk {} in {}",
                format_size(memory),
                format_size(disk),
                folder.display()
            );
            Built { cache: Some(cache), tiercache: None, settings, setup }
        }
        #[cfg(not(feature = "foyer"))]
        Which::Foyer => bail!(
            "--slatedb-cache foyer: this build has no foyer; build with `cargo build --release \
             -p tiercache-cli --features foyer`"
        ),
        Which::Tiercache => {
            let cache = tiercache(args, recover)?;
            let (_, decoded) = dram_and_decoded(args)?;
            let setup = format!(
                "tiercache {}, {} of it for decoded indexes, filters and stats",
                crate::ycsb::tiers_in_words(args)?,
                format_size(decoded)
            );
            Built { cache: Some(cache.clone()), tiercache: Some(cache), settings, setup }
        }
        Which::ObjectStore => {
            let bytes = match &args.slatedb.object_cache_size {
                Some(text) => parse_size(text).context("--object-cache-size")?,
                None => tier_bytes(args)?,
            };
            settings.object_store_cache_options = ObjectStoreCacheOptions {
                root_folder: Some(dir.join("object-cache")),
                max_cache_size_bytes: Some(bytes as usize),
                ..ObjectStoreCacheOptions::default()
            };
            let setup =
                format!("SlateDB's object-store cache of {} on local disk", format_size(bytes));
            Built { cache: None, tiercache: None, settings, setup }
        }
        Which::None => Built { cache: None, tiercache: None, settings, setup: "no cache".into() },
    })
}

async fn open(objects: &Arc<CountingStore>, built: &Built) -> anyhow::Result<Db> {
    let builder = Db::builder("db", objects.clone()).with_settings(built.settings.clone());
    let builder = match &built.cache {
        Some(cache) => builder.with_db_cache(cache.clone(), 0),
        None => builder.with_db_cache_disabled(),
    };
    builder.build().await.context("cannot open the SlateDB database")
}

fn hits_between(before: &StatsSnapshot, after: &StatsSnapshot) -> TierHits {
    let lookups = after.lookups - before.lookups;
    let hits = after.hits - before.hits;
    TierHits {
        lookups,
        hits,
        hit_ratio: (lookups > 0).then(|| hits as f64 / lookups as f64),
        tier_hits: after.tier_hits.iter().zip(&before.tier_hits).map(|(a, b)| a - b).collect(),
        rejected: serde_json::to_value(&after.rejections).unwrap_or_default(),
        puts: after.puts - before.puts,
    }
}

/// Runs one workload, with what the object store and tiercache did meanwhile.
async fn one_run(
    db: &Arc<Db>,
    records: &Arc<Records>,
    objects: &CountingStore,
    tiercache: Option<&TiercacheDbCache>,
    options: RunOptions,
) -> anyhow::Result<SlateRun> {
    let requests = objects.requests();
    let stats = tiercache.map(|c| c.keyed().cache().stats());
    let workload = options.workload;
    let report = ycsb::run(db.clone(), records.clone(), options)
        .await
        .with_context(|| format!("workload {workload:?} failed"))?;
    let cache =
        tiercache.zip(stats).map(|(c, before)| hits_between(&before, &c.keyed().cache().stats()));
    Ok(SlateRun { report, object_store: objects.requests() - requests, cache })
}

pub fn run(args: &YcsbArgs) -> anyhow::Result<()> {
    let which = match args.slatedb.slatedb_cache.as_str() {
        "tiercache" => Which::Tiercache,
        "foyer" => Which::Foyer,
        "object-store" => Which::ObjectStore,
        "none" => Which::None,
        other => bail!("--slatedb-cache {other}: tiercache, foyer, object-store or none"),
    };
    anyhow::ensure!(!args.check, "--check is for --db redb");
    anyhow::ensure!(args.path.is_none(), "--path is for --db redb; SlateDB's files go in --dir");
    anyhow::ensure!(!args.no_cache, "--no-cache is for --db redb; use --slatedb-cache none");
    anyhow::ensure!(
        args.slatedb.first_byte_ms.is_finite()
            && (0.0..=10_000.0).contains(&args.slatedb.first_byte_ms),
        "--first-byte-ms {}: between 0 and 10000",
        args.slatedb.first_byte_ms
    );
    let latency = Latency {
        first_byte: Duration::from_secs_f64(args.slatedb.first_byte_ms / 1000.0),
        bytes_per_second: parse_size(&args.slatedb.bandwidth).context("--bandwidth")?,
    };
    let durable = match args.durability.as_str() {
        "immediate" => true,
        "none" => false,
        other => bail!("--durability {other}: use immediate or none"),
    };
    let checked = checked(args, (20_000, 10_000, 16))?;
    let folder = folder(args)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    let report = runtime.block_on(drive(args, which, latency, durable, &checked, &folder.path))?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print_report(&report);
    }
    if !report.verified {
        let first =
            report.runs.iter().chain(&report.restart).find_map(|r| r.report.first_failure.clone());
        bail!("reads did not match what was written: {}", first.unwrap_or_default());
    }
    Ok(())
}

async fn drive(
    args: &YcsbArgs,
    which: Which,
    latency: Latency,
    durable: bool,
    checked: &Checked,
    dir: &std::path::Path,
) -> anyhow::Result<SlateReport> {
    let objects = store::local(&dir.join("objects"), latency).context("the object store")?;
    let loading = Db::builder("db", objects.clone()).with_db_cache_disabled().build().await?;
    let mut bar = Progress::new("loading", Some(checked.records));
    let progress = Mutex::new(&mut bar);
    let load = ycsb::load(&loading, checked.records, checked.record_bytes, &|done| {
        progress.lock().unwrap_or_else(|p| p.into_inner()).set(done)
    })
    .await
    .context("the load failed")?;
    bar.finish();
    loading.close().await?;

    let mut built = build(args, which, dir, Recover::Wipe).await?;
    let db = Arc::new(open(&objects, &built).await?);
    let records = Arc::new(Records::new(checked.records));
    let options = |workload| {
        let bar = Arc::new(Mutex::new(Progress::new(
            &format!("workload {workload:?}"),
            Some(checked.operations),
        )));
        let shown = bar.clone();
        let options = RunOptions {
            workload,
            operations: checked.operations,
            clients: checked.threads,
            record_bytes: checked.record_bytes,
            seed: args.seed,
            durable,
            progress: Arc::new(move |done| {
                shown.lock().unwrap_or_else(|p| p.into_inner()).set(done)
            }),
        };
        (options, bar)
    };
    let mut runs = Vec::new();
    for &workload in &checked.workloads {
        let (run_options, bar) = options(workload);
        runs.push(one_run(&db, &records, &objects, built.tiercache.as_deref(), run_options).await?);
        finish(bar);
    }
    db.close().await?;
    let mut restart = None;
    if args.slatedb.restart {
        if let Some(cache) = &built.cache {
            cache.close().await?;
        }
        // Every handle on the cache let go, so its files are free to reopen.
        drop(db);
        built.cache = None;
        built.tiercache = None;
        built = build(args, which, dir, Recover::Quiet).await?;
        let db = Arc::new(open(&objects, &built).await?);
        let (run_options, bar) = options(checked.workloads[0]);
        restart =
            Some(one_run(&db, &records, &objects, built.tiercache.as_deref(), run_options).await?);
        finish(bar);
        db.close().await?;
    }
    let seconds: f64 = runs.iter().map(|r| r.report.seconds).sum();
    let operations: u64 = runs.iter().map(|r| r.report.operations).sum();
    let (lookups, hits) = runs
        .iter()
        .filter_map(|r| r.cache.as_ref())
        .fold((0, 0), |(l, h), c| (l + c.lookups, h + c.hits));
    Ok(SlateReport {
        db: "slatedb",
        dir: dir.to_path_buf(),
        setup: format!(
            "SlateDB over a local object store ({} ms to the first byte, {}/s), {}",
            args.slatedb.first_byte_ms,
            format_size(latency.bytes_per_second),
            built.setup
        ),
        load,
        ops_per_second: operations as f64 / seconds.max(1e-9),
        p99_us: runs.iter().map(|r| r.report.all.p99_us).fold(0.0, f64::max),
        object_store_gets: runs.iter().map(|r| r.object_store.gets).sum(),
        object_store_get_bytes: runs.iter().map(|r| r.object_store.get_bytes).sum(),
        hit_ratio: (lookups > 0).then(|| hits as f64 / lookups as f64),
        verified: runs.iter().chain(&restart).all(|r| r.report.verified),
        runs,
        restart,
    })
}

/// Ends a run's progress bar, once the run has let go of it.
fn finish(bar: Arc<Mutex<Progress>>) {
    if let Ok(bar) = Arc::try_unwrap(bar) {
        bar.into_inner().unwrap_or_else(|p| p.into_inner()).finish();
    }
}

fn print_report(report: &SlateReport) {
    println!("{} in {}: {}", report.db, report.dir.display(), report.setup);
    let load = &report.load;
    println!(
        "loaded {} records of {} B in {:.2} s ({:.0} records/s)\n",
        load.records, load.record_bytes, load.seconds, load.records_per_second
    );
    println!(
        "{:<9} {:>9} {:>9} {:>9} {:>8} {:>10} {:>10} {:>16} {:>9}",
        "workload",
        "ops/s",
        "p50 us",
        "p99 us",
        "GETs",
        "GET bytes",
        "cache hits",
        "hits by tier",
        "verified"
    );
    let row = |name: &str, run: &SlateRun| {
        let r = &run.report;
        let Percentiles { p50_us, p99_us, .. } = r.all;
        println!(
            "{:<9} {:>9.0} {:>9.0} {:>9.0} {:>8} {:>10} {:>10} {:>16} {:>9}",
            name,
            r.ops_per_second,
            p50_us,
            p99_us,
            run.object_store.gets,
            format_size(run.object_store.get_bytes),
            ratio(run.cache.as_ref().and_then(|c| c.hit_ratio)),
            run.cache.as_ref().map_or("-".into(), |c| {
                c.tier_hits.iter().map(u64::to_string).collect::<Vec<_>>().join(" / ")
            }),
            if r.verified { "yes" } else { "NO" },
        );
    };
    for run in &report.runs {
        row(&run.report.workload, run);
    }
    if let Some(run) = &report.restart {
        row(&format!("{} again", run.report.workload), run);
    }
    println!(
        "\nall: {:.0} ops/s, p99 {:.0} us, {} GETs ({}), tiercache hits {}",
        report.ops_per_second,
        report.p99_us,
        report.object_store_gets,
        format_size(report.object_store_get_bytes),
        ratio(report.hit_ratio)
    );
}
