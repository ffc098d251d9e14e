//! `tiercache trace`: statistics, format conversion and generation.

use std::path::PathBuf;

use anyhow::Context;
use clap::{Args, Subcommand};
use tiercache_core::{format_size, parse_size, Request};
use tiercache_workload::gen::mixgraph::{Mixgraph, MixgraphConfig};
use tiercache_workload::gen::ycsb::{Ycsb, YcsbConfig, YcsbWorkload};
use tiercache_workload::gen::{KeyDistribution, SizeDistribution, Synthetic, SyntheticConfig};
use tiercache_workload::stats::{ReuseHistogram, StatsBuilder, TraceStats, VolumeStats};
use tiercache_workload::writer::{write_oracle_general, CsvWriter};
use tiercache_workload::TraceReader;

use crate::progress::Progress;
use crate::TraceArgs;

#[derive(Subcommand)]
pub enum TraceCommand {
    /// Requests, unique keys, footprint, read/write mix and the reuse-distance histogram.
    Stats {
        #[command(flatten)]
        trace: TraceArgs,
        /// Print the statistics as one JSON object.
        #[arg(long)]
        json: bool,
    },
    /// Rewrite a trace in another format (block view and skip-bad apply).
    Convert {
        #[command(flatten)]
        trace: TraceArgs,
        #[command(flatten)]
        output: OutputArgs,
    },
    /// Generate a seeded synthetic trace.
    Gen(GenArgs),
}

#[derive(Args)]
pub struct OutputArgs {
    /// Output format: oracle-general or csv (tiercache's `time_us,key,size,op`).
    #[arg(long, default_value = "csv", value_parser = ["csv", "oracle-general"])]
    pub to: String,
    /// Output file; a .zst or .gz name compresses.
    #[arg(long, short)]
    pub output: PathBuf,
}

#[derive(Args)]
pub struct GenArgs {
    /// Key distribution: uniform, zipf, scrambled-zipf, hotspot, latest, sequential.
    #[arg(long, default_value = "zipf")]
    pub dist: String,
    /// Zipf exponent.
    #[arg(long, default_value_t = 0.99)]
    pub theta: f64,
    /// Hotspot: fraction of keys that are hot.
    #[arg(long, default_value_t = 0.2)]
    pub hot_fraction: f64,
    /// Hotspot: fraction of requests that go to the hot keys.
    #[arg(long, default_value_t = 0.8)]
    pub hot_op_fraction: f64,
    /// Distinct keys (1M, 50M).
    #[arg(long, default_value = "1000000")]
    pub objects: String,
    /// Requests to generate (10M).
    #[arg(long, default_value = "10000000")]
    pub requests: String,
    /// Fraction of reads; the rest are writes.
    #[arg(long, default_value_t = 1.0)]
    pub read_ratio: f64,
    /// Object size, or a range 'MIN..MAX' drawn per object.
    #[arg(long, default_value = "4096")]
    pub size: String,
    /// Seed of the generator.
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
    /// A YCSB core workload (A-F) instead of --dist; uses --records and --operations.
    #[arg(long)]
    pub ycsb: Option<String>,
    /// With --ycsb: records loaded.
    #[arg(long, default_value = "1000")]
    pub records: String,
    /// With --ycsb: operations after the load.
    #[arg(long, default_value = "1000")]
    pub operations: String,
    /// db_bench's mixgraph model (Cao et al., FAST'20) instead of --dist: --objects keys,
    /// --requests operations. `--mixgraph default` is RocksDB's documented fit; db_bench
    /// parameters change it, pasted as they are: --mixgraph "-keyrange_num=30 -value_k=0.2615".
    #[arg(long, allow_hyphen_values = true, value_name = "PARAMS")]
    pub mixgraph: Option<String>,
    /// Mixgraph: emit the data blocks of this size that each operation touches (RocksDB's
    /// block-cache view, keys packed in key order) instead of key-value requests.
    #[arg(long, value_name = "SIZE")]
    pub block_size: Option<String>,
    #[command(flatten)]
    pub output: OutputArgs,
}

pub fn run(command: TraceCommand) -> anyhow::Result<()> {
    match command {
        TraceCommand::Stats { trace, json } => stats(&trace, json),
        TraceCommand::Convert { trace, output } => {
            let mut reader = TraceReader::open(&trace.trace, &trace.options()?)?;
            let written = write(reader.by_ref().map(|r| r.map_err(anyhow::Error::from)), &output)?;
            if reader.skipped() > 0 {
                eprintln!("warning: skipped {} malformed records", reader.skipped());
            }
            println!("wrote {written} requests to {}", output.output.display());
            Ok(())
        }
        TraceCommand::Gen(args) => {
            let written = generate(&args)?;
            println!("wrote {written} requests to {}", args.output.output.display());
            Ok(())
        }
    }
}

fn write(
    requests: impl Iterator<Item = anyhow::Result<Request>>,
    output: &OutputArgs,
) -> anyhow::Result<u64> {
    let mut progress = Progress::new("writing", None);
    let mut count = 0u64;
    if output.to == "oracle-general" {
        let mut all: Vec<Request> = Vec::new();
        for r in requests {
            all.push(r?);
        }
        count = all.len() as u64;
        write_oracle_general(&output.output, &mut all)?;
    } else {
        let mut writer = CsvWriter::create(&output.output)?;
        for r in requests {
            writer.write(&r?)?;
            count += 1;
            if count.is_multiple_of(65536) {
                progress.set(count);
            }
        }
        writer.finish()?;
    }
    progress.finish();
    Ok(count)
}

fn count(text: &str, flag: &str) -> anyhow::Result<u64> {
    parse_size(text).with_context(|| format!("{flag} {text}"))
}

/// Generates the trace `args` describe; returns how many requests were written.
pub fn generate(args: &GenArgs) -> anyhow::Result<u64> {
    if args.block_size.is_some() && args.mixgraph.is_none() {
        anyhow::bail!("--block-size is a view of --mixgraph; other generators emit blocks already");
    }
    let written = if let Some(params) = &args.mixgraph {
        let mut config = MixgraphConfig {
            keys: count(&args.objects, "--objects")?,
            operations: count(&args.requests, "--requests")?,
            seed: args.seed,
            ..MixgraphConfig::default()
        };
        config.apply(params)?;
        if let Some(text) = &args.block_size {
            config.block_bytes = Some(size32(text, "--block-size")?);
        }
        write(Mixgraph::new(config)?.map(Ok), &args.output)?
    } else if let Some(workload) = &args.ycsb {
        let config = YcsbConfig {
            record_count: count(&args.records, "--records")?,
            operation_count: count(&args.operations, "--operations")?,
            seed: args.seed,
            ..YcsbConfig::new(YcsbWorkload::parse(workload)?)
        };
        write(Ycsb::new(config)?.map(Ok), &args.output)?
    } else {
        let distribution = match args.dist.as_str() {
            "uniform" => KeyDistribution::Uniform,
            "zipf" => KeyDistribution::Zipf { theta: args.theta },
            "scrambled-zipf" => KeyDistribution::ScrambledZipf { theta: args.theta },
            "hotspot" => KeyDistribution::Hotspot {
                hot_fraction: args.hot_fraction,
                hot_op_fraction: args.hot_op_fraction,
            },
            "latest" => KeyDistribution::Latest { theta: args.theta },
            "sequential" => KeyDistribution::Sequential,
            other => anyhow::bail!(
                "--dist {other}: use uniform, zipf, scrambled-zipf, hotspot, latest or sequential"
            ),
        };
        let size = match args.size.split_once("..") {
            Some((a, b)) => {
                SizeDistribution::Uniform { min: size32(a, "--size")?, max: size32(b, "--size")? }
            }
            None => SizeDistribution::Fixed { bytes: size32(&args.size, "--size")? },
        };
        let config = SyntheticConfig {
            distribution,
            objects: count(&args.objects, "--objects")?,
            requests: count(&args.requests, "--requests")?,
            read_ratio: args.read_ratio,
            size,
            seed: args.seed,
        };
        write(Synthetic::new(config)?.map(Ok), &args.output)?
    };
    Ok(written)
}

fn size32(text: &str, flag: &str) -> anyhow::Result<u32> {
    let bytes = parse_size(text).with_context(|| format!("{flag} {text}"))?;
    u32::try_from(bytes).map_err(|_| anyhow::anyhow!("{flag} {text} is above 4 GiB"))
}

fn stats(trace: &TraceArgs, json: bool) -> anyhow::Result<()> {
    let mut reader = TraceReader::open(&trace.trace, &trace.options()?)?;
    let mut builder = match reader.info().volumes {
        true => StatsBuilder::by_volume(),
        false => StatsBuilder::default(),
    };
    let mut progress = Progress::new("reading", None);
    let mut n = 0u64;
    for item in reader.by_ref() {
        builder.add(&item?);
        n += 1;
        if n.is_multiple_of(65536) {
            progress.set(n);
        }
    }
    progress.finish();
    let stats = builder.finish();
    if json {
        let mut value = serde_json::to_value(&stats)?;
        value["trace"] = serde_json::json!(trace.trace);
        value["skipped_records"] = serde_json::json!(reader.skipped());
        println!("{}", serde_json::to_string_pretty(&value)?);
        return Ok(());
    }
    print_stats(&stats, reader.info());
    if reader.skipped() > 0 {
        println!("skipped       {} malformed records", reader.skipped());
    }
    Ok(())
}

fn print_stats(s: &TraceStats, info: &tiercache_workload::TraceInfo) {
    let pct = |a: u64, b: u64| if b == 0 { 0.0 } else { a as f64 * 100.0 / b as f64 };
    println!("trace         {} ({})", info.path.display(), info.format);
    println!("requests      {}", s.requests);
    println!(
        "reads         {} ({:.1}%)   {}",
        s.reads,
        pct(s.reads, s.requests),
        format_size(s.read_bytes)
    );
    println!(
        "writes        {} ({:.1}%)   {}",
        s.writes,
        pct(s.writes, s.requests),
        format_size(s.write_bytes)
    );
    if s.deletes > 0 {
        println!("deletes       {}", s.deletes);
    }
    println!("unique keys   {}", s.unique_keys);
    println!("footprint     {}", format_size(s.footprint_bytes));
    println!("bytes         {}", format_size(s.bytes_requested));
    if let (Some(a), Some(b)) = (s.first_time_us, s.last_time_us) {
        if info.has_time {
            println!("duration      {:.1} s", b.saturating_sub(a) as f64 / 1e6);
        }
    }
    println!();
    println!("reuse distance (distinct keys in between)   requests   cumulative = LRU hit ratio at that many objects");
    let mut cumulative = 0u64;
    for (i, count) in s.reuse.buckets.iter().enumerate() {
        cumulative += count;
        let (lo, hi) = ReuseHistogram::bounds(i);
        println!("  {:>12} .. {:<12} {:>12} {:>10.2}%", lo, hi, count, pct(cumulative, s.requests));
    }
    println!("  {:>12}    {:<12} {:>12}", "first use", "", s.reuse.cold);
    print_volumes(&s.volumes);
}

/// Volumes shown in the text report, the busiest first; `--json` has them all.
const VOLUMES_SHOWN: usize = 20;

fn print_volumes(volumes: &[VolumeStats]) {
    if volumes.is_empty() {
        return;
    }
    let mut busiest: Vec<&VolumeStats> = volumes.iter().collect();
    busiest.sort_by_key(|v| (std::cmp::Reverse(v.requests), v.volume));
    println!();
    println!("{} volumes, the busiest first:", volumes.len());
    println!(
        "  {:>8} {:>12} {:>12} {:>12} {:>12} {:>12}",
        "volume", "requests", "reads", "writes", "unique keys", "footprint"
    );
    for v in busiest.iter().take(VOLUMES_SHOWN) {
        println!(
            "  {:>8} {:>12} {:>12} {:>12} {:>12} {:>12}",
            v.volume,
            v.requests,
            v.reads,
            v.writes,
            v.unique_keys,
            format_size(v.footprint_bytes)
        );
    }
    if volumes.len() > VOLUMES_SHOWN {
        println!("  ... and {} more (all of them with --json)", volumes.len() - VOLUMES_SHOWN);
    }
}
