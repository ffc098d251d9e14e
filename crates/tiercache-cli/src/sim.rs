//! `tiercache sim`: one policy, one capacity, one trace.

use clap::Args;
use tiercache_core::format_size;
use tiercache_policy::stack::Amount;
use tiercache_policy::{PolicyError, StackConfig, StackSpec};
use tiercache_sim::counters::run_length_label;
use tiercache_sim::SimReport;

use crate::progress::Progress;
use crate::run_options::RunArgs;
use crate::TraceArgs;
pub use tiercache_run::run::{flat_fields, simulate_stack, LoadedTrace, SimOutput};

#[derive(Args)]
pub struct SimArgs {
    #[command(flatten)]
    pub trace: TraceArgs,
    #[command(flatten)]
    pub stack: StackArgs,
    #[command(flatten)]
    pub run: RunArgs,
}

/// The cache's policy stack, option for option the keys of an experiment file's `[cache]`
/// table (`tiercache_policy::StackSpec`), read by the same code.
#[derive(Args)]
pub struct StackArgs {
    /// Policy, optionally with parameters: lru, arc, 'clock:bits=2', 's3fifo:small_ratio=0.2'...
    #[arg(long)]
    pub policy: String,
    /// Admission filters joined by '+': always, prob:P, second-hit[:N],
    /// second-hit-over:BYTES[:N], size:BYTES.
    #[arg(long, default_value = "always")]
    pub admission: String,
    /// Cache size: bytes ('64MiB', '4GiB') or, with --unit objects, a count.
    #[arg(long)]
    pub capacity: String,
    /// What capacity counts: bytes (object sizes respected) or objects.
    #[arg(long, default_value = "bytes", value_parser = ["bytes", "objects"])]
    pub unit: String,
    /// A second, lower tier of this capacity (same unit) below --capacity: a two-tier hybrid
    /// cache (Kassa et al.).
    #[arg(long)]
    pub lower_capacity: Option<String>,
    /// Policy of the lower tier.
    #[arg(long, default_value = "lru")]
    pub lower_policy: String,
    /// A further tier below --lower-capacity, as CAPACITY[:POLICY] (same unit; policy lru by
    /// default): repeat for each tier, top down, e.g. a flash tier under slow memory.
    #[arg(long = "tier", value_name = "CAPACITY[:POLICY]")]
    pub tiers: Vec<String>,
    /// Placement across the two tiers: dram-first, scm-first[:T], bidirectional[:T].
    #[arg(long, default_value = "dram-first")]
    pub placement: String,
    /// With two or more tiers: a miss of a value larger than this size (256KiB) goes to the
    /// tier below the top, whatever the placement, and is never promoted [default: off].
    #[arg(long, value_name = "SIZE")]
    pub large_values: Option<String>,
    /// Run in an Open CAS cache mode: wt, wb, wa, wi, wo, pt (write-through, write-back,
    /// write-around, write-invalidate, write-only, pass-through).
    #[arg(long)]
    pub mode: Option<String>,
    /// NVCache's admission (Writes Hurt, section 3.2) in front of the cache: obp[:TARGET],
    /// alloc-read-write or no-write-allocate, then ',small-bypass=DRAM_BYTES', ',window=LOOKUPS'
    /// (sliding OBP), ',write-allocate', ',no-eviction'. E.g. 'obp:0.1,small-bypass=16GiB'.
    #[arg(long)]
    pub nvcache: Option<String>,
    /// Non-hierarchical caching (Orthus, section 4) on top: 'nhc' tunes load_admit with
    /// Algorithm 1 (needs --clients or --arrival-rate: it is fed each interval's measurement),
    /// options ':target=throughput|mean-latency|p99-latency,step=0.02,window=20,alpha=0.05';
    /// 'nhc:load_admit=0.7' holds a static split.
    #[arg(long)]
    pub nhc: Option<String>,
    /// With --mode: NHIT promotion (insert on the 3rd miss once the cache is 80% full).
    #[arg(long)]
    pub nhit: bool,
    /// With --mode: sequential cutoff policy (always, full, never) and threshold.
    #[arg(long, default_value = "full")]
    pub seq_cutoff: String,
    /// With `--mode`: how long a sequential stream must run before the cutoff applies.
    #[arg(long, default_value = "1MiB")]
    pub seq_threshold: String,
    /// With --mode: the cleaning policy, alru, nop, or acp with its options
    /// ('acp:high_watermark=0.2,low_watermark=0.1,flush_max_buffers=256,wake_up_us=10000'):
    /// dirty blocks written back in block order while too many are dirty, in periodic work
    /// (give --tick-us).
    #[arg(long, default_value = "alru")]
    pub cleaning: String,
    /// Periodic work (ACP cleaning, LFRU's sweep) every this many microseconds of the trace's
    /// time, as the engine's worker does on its clock; none without it.
    #[arg(long)]
    pub tick_us: Option<u64>,
    /// Seed of the policy's and filters' randomness.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Model the engine's sharding: this many stacks (a power of two), each over its shard's
    /// keys with its share of every tier, as `bench` and `serve` run with `--shards`.
    #[arg(long)]
    pub shards: Option<usize>,
    /// How a policy with quiet hits is told of its hits: exact (every hit) or
    /// epochs[:DIVISOR] (a key's first hit in each epoch of capacity / DIVISOR insertions;
    /// the engine's default is epochs:32, which this replays).
    #[arg(long)]
    pub hit_rule: Option<String>,
}

impl StackArgs {
    /// The options as a written stack.
    pub fn spec(&self) -> StackSpec {
        StackSpec {
            unit: self.unit.clone(),
            admission: self.admission.clone(),
            lower_capacity: self.lower_capacity.clone().map(Amount::Text),
            lower_policy: self.lower_policy.clone(),
            tier: self.tiers.clone(),
            placement: self.placement.clone(),
            large_values: self.large_values.clone().map(Amount::Text),
            mode: self.mode.clone(),
            nhit: self.nhit,
            seq_cutoff: self.seq_cutoff.clone(),
            seq_threshold: Amount::Text(self.seq_threshold.clone()),
            cleaning: self.cleaning.clone(),
            tick_us: self.tick_us,
            nvcache: self.nvcache.clone(),
            nhc: self.nhc.clone(),
            seed: self.seed,
            shards: self.shards,
            hit_rule: self.hit_rule.clone(),
            ..StackSpec::new(&self.policy, Amount::Text(self.capacity.clone()))
        }
    }

    /// The stack, checked; an error names the option (a key the reason names in backticks
    /// becomes its option too).
    pub fn config(&self) -> anyhow::Result<StackConfig> {
        let option = |key: &str| format!("--{}", key.replace('_', "-"));
        StackConfig::try_from(self.spec()).map_err(|e| match e {
            PolicyError::Setting { key, reason } => {
                let mut parts = reason.split('`');
                let mut text = parts.next().unwrap_or("").to_string();
                for (i, part) in parts.enumerate() {
                    text += &if i % 2 == 0 { option(part) } else { part.to_string() };
                }
                anyhow::anyhow!("{}: {text}", option(&key))
            }
            other => other.into(),
        })
    }
}

/// `tiercache sim`: the stack from the command line.
pub fn run(args: &SimArgs) -> anyhow::Result<()> {
    run_stack(&args.trace, args.stack.config()?, &args.run)
}

/// One simulation of `stack` over the trace (`sim`, and `run` with an experiment file).
pub fn run_stack(trace: &TraceArgs, stack: StackConfig, args: &RunArgs) -> anyhow::Result<()> {
    let mut bar = Some(Progress::new("simulating", None));
    let output = simulate_stack(trace, stack, args, &mut |done| match done {
        Some(n) => bar.iter_mut().for_each(|bar| bar.set(n)),
        None => bar.take().into_iter().for_each(Progress::finish),
    })?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&output.to_json())?);
    } else {
        print(&output);
    }
    Ok(())
}

/// The table `sim` prints without --json.
pub fn print(output: &SimOutput) {
    match output {
        SimOutput::Counted { report, info, .. } => print_table(report, info),
        SimOutput::Timed { report, trace } => crate::timed::print(report, trace),
    }
}

fn pct(x: f64) -> String {
    format!("{:6.2}%", x * 100.0)
}

fn print_table(r: &SimReport, info: &tiercache_workload::TraceInfo) {
    let c = &r.counters;
    let capacity =
        if r.unit == "bytes" { format_size(r.capacity) } else { format!("{} objects", r.capacity) };
    println!("trace     {} ({})", info.path.display(), info.format);
    println!("policy    {}   capacity {}", r.policy, capacity);
    println!();
    println!(
        "          {:>12} {:>12} {:>9} {:>14}",
        "requests", "hits", "hit ratio", "byte hit ratio"
    );
    let row = |name: &str, n: u64, h: u64, hr: f64, bhr: f64| {
        println!("{name:<9} {n:>12} {h:>12} {:>9} {:>14}", pct(hr), pct(bhr));
    };
    row("all", c.reads + c.writes, c.hits, r.hit_ratio, r.byte_hit_ratio);
    row("reads", c.reads, c.read_hits, r.read_hit_ratio, r.read_byte_hit_ratio);
    row("writes", c.writes, c.write_hits, r.write_hit_ratio, r.write_byte_hit_ratio);
    if c.deletes > 0 {
        println!("deletes   {:>12}", c.deletes);
    }
    println!();
    println!(
        "insertions {}   evictions {}   invalidations {}",
        c.insertions, c.evictions, c.invalidations
    );
    if r.lower_capacity.is_some() {
        println!(
            "upper-tier hits {}   lower-tier hits {}   moved down {} ({})   moved up {} ({})",
            c.upper_hits,
            c.lower_hits,
            c.demotions,
            format_size(c.bytes_demoted),
            c.promotions,
            format_size(c.bytes_promoted)
        );
    }
    if r.hits_by_tier.len() > 2 {
        let hits: Vec<String> =
            r.hits_by_tier.iter().map(|(t, n)| format!("tier {t}: {n}")).collect();
        println!("hits by tier  {}", hits.join("   "));
    }
    if c.rejections > 0 {
        let reasons: Vec<String> =
            r.rejections_by_reason.iter().map(|(k, v)| format!("{k} {v}")).collect();
        println!("not admitted {} ({})", c.rejections, reasons.join(", "));
    }
    if c.write_backs > 0 {
        let runs: Vec<String> = c
            .write_back_run_lengths
            .iter()
            .enumerate()
            .filter(|(_, n)| **n > 0)
            .map(|(bucket, n)| format!("{} blocks: {n}", run_length_label(bucket)))
            .collect();
        println!(
            "written back {} blocks in {} runs (mean {:.2}; {})",
            c.write_backs,
            c.write_back_runs,
            c.mean_write_back_run(),
            runs.join(", ")
        );
    }
    println!(
        "bytes written to cache {}   read from backing {}   written to backing {}",
        format_size(c.bytes_written_to_cache),
        format_size(c.bytes_read_from_backing),
        format_size(c.bytes_written_to_backing)
    );
    println!(
        "simulated {} requests in {:.2} s ({:.2} M requests/s)",
        c.requests,
        r.elapsed_seconds,
        r.requests_per_second / 1e6
    );
}
