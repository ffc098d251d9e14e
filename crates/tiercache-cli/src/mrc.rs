//! `tiercache mrc`: miss-ratio curves at a fraction of a sweep's cost. LRU's exactly, from
//! stack distances in one pass; every other policy's by spatial sampling (SHARDS), over
//! several independent samples whose range is reported as the sampling error. `--check` runs
//! the full simulations too and reports each point's error and both times.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Instant;

use anyhow::Context;
use clap::Args;
use serde::Serialize;
use tiercache_core::{format_size, Request};
use tiercache_policy::{AdmissionConfig, PolicyConfig};
use tiercache_sim::mrc::{self, Estimator, MrcPoint, SampledRun, Sampling};

use crate::progress::Progress;
use crate::sweep::{capacities, load, plot, print_table};
use crate::TraceArgs;

#[derive(Args)]
pub struct MrcArgs {
    #[command(flatten)]
    pub trace: TraceArgs,
    /// A policy (repeat the flag for more). Default: lru, fifo, clock, arc, s3fifo, sieve.
    #[arg(long = "policy")]
    pub policies: Vec<String>,
    /// Capacities, comma-separated ('1MiB,4MiB' or '1000,2000'). Default: 0.1% to 50% of the
    /// trace's footprint.
    #[arg(long, value_delimiter = ',')]
    pub capacities: Vec<String>,
    /// What capacities count: bytes (object sizes respected) or objects.
    #[arg(long, default_value = "bytes", value_parser = ["bytes", "objects"])]
    pub unit: String,
    /// The fraction of the key space sampled, in (0, 1].
    #[arg(long, default_value_t = 0.01, conflicts_with = "sample_keys")]
    pub rate: f64,
    /// Sample at most this many keys instead of a fixed rate (SHARDS' fixed size: memory stays
    /// bounded whatever the trace; the rate follows from a first pass).
    #[arg(long, value_name = "KEYS")]
    pub sample_keys: Option<u64>,
    /// Raise the rate, for each size whose sampled cache would hold fewer objects (of the
    /// trace's mean size) than this, until it holds this many (from a rate of 0.5 up, the size
    /// is simulated on the whole trace, once). Small sizes then cost more, and say more.
    #[arg(long, value_name = "OBJECTS", conflicts_with = "sample_keys")]
    pub min_sampled_objects: Option<u64>,
    /// Independent samples per point; the curve is their mean, its spread their range.
    #[arg(long, default_value_t = 3)]
    pub samples: u32,
    /// How a sample's miss ratio stands for the stream's: `stratified` weighs its hit ratio
    /// per class of keys by request count (⌊log₂⌋) with each class's share of the stream, from a
    /// counting pass; `plain` takes its misses over its requests, as SHARDS does.
    #[arg(long, default_value = "stratified", value_parser = ["stratified", "plain"])]
    pub estimator: String,
    /// Sample LRU too, instead of its exact curve from stack distances.
    #[arg(long)]
    pub sample_lru: bool,
    /// Also run every point's full simulation: each point's error, the mean absolute error and
    /// both times.
    #[arg(long)]
    pub check: bool,
    /// Admission filters joined by '+' (as sweep's).
    #[arg(long, default_value = "always")]
    pub admission: String,
    /// Seed of the policies' and filters' randomness.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Directory for mrc.csv, mrc.svg and mrc.png.
    #[arg(long, default_value = "mrc-results")]
    pub out: PathBuf,
    /// Print the points (and the check) as JSON instead of the table.
    #[arg(long)]
    pub json: bool,
}

const DEFAULT_POLICIES: [&str; 6] = ["lru", "fifo", "clock", "arc", "s3fifo", "sieve"];

/// A sampled point whose capacity scales below this many objects is marked: a cache of a few
/// objects does not stand for one of many.
const FEW_OBJECTS: f64 = 100.0;

/// `--check`'s findings: the full simulations' miss ratios beside the curve's.
#[derive(Serialize)]
struct Check {
    /// Per point: the full simulation's miss ratio and the curve's error (curve - full).
    full_miss_ratio: Vec<f64>,
    error: Vec<f64>,
    /// Over the sampled points.
    mean_absolute_error: f64,
    max_absolute_error: f64,
    /// Over the sampled points whose cache holds at least [`FEW_OBJECTS`] objects (the ones
    /// the table does not flag); `None` if there are none.
    mean_absolute_error_flagged_out: Option<f64>,
    curve_seconds: f64,
    full_seconds: f64,
    speedup: f64,
}

pub fn run(args: &MrcArgs) -> anyhow::Result<()> {
    let sampling = sampling(args)?;
    let names: Vec<&str> = if args.policies.is_empty() {
        DEFAULT_POLICIES.to_vec()
    } else {
        args.policies.iter().map(String::as_str).collect()
    };
    let policies: Vec<PolicyConfig> =
        names.iter().map(|p| PolicyConfig::parse(p)).collect::<Result<_, _>>()?;
    let admission = AdmissionConfig::parse_chain(&args.admission)?;
    let (requests, logical_time) = load(&args.trace)?;
    let capacities = capacities(&args.capacities, &args.unit, &requests)?;
    let start = Instant::now();
    let run = SampledRun {
        policies: &policies,
        capacities: &capacities,
        admission: &admission,
        seed: args.seed,
        logical_time,
        estimator: Estimator::parse(&args.estimator).map_err(anyhow::Error::msg)?,
        min_sampled_objects: args.min_sampled_objects,
    };
    let points = curves(args, &requests, &run, sampling)?;
    let curve_seconds = start.elapsed().as_secs_f64();
    let check = match args.check {
        true => Some(check(&requests, &points, &run, curve_seconds)?),
        false => None,
    };
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("cannot create {}", args.out.display()))?;
    let csv = args.out.join("mrc.csv");
    write_csv(&csv, &points, check.as_ref())?;
    let curves: Vec<(String, u64, f64)> =
        points.iter().map(|p| (p.policy.clone(), p.capacity, p.miss_ratio)).collect();
    let plots = plot(&args.out, &args.trace, &args.unit, &curves)?;
    if args.json {
        let report = serde_json::json!({ "points": points, "check": check });
        println!("{}", serde_json::to_string_pretty(&report)?);
        return Ok(());
    }
    print_table(&curves, &capacities);
    println!();
    describe(&points, &requests, sampling, args.samples);
    if let Some(check) = &check {
        print_check(check, &points);
    }
    println!("wrote {}", csv.display());
    for p in plots {
        println!("wrote {}", p.display());
    }
    Ok(())
}

fn sampling(args: &MrcArgs) -> anyhow::Result<Sampling> {
    anyhow::ensure!(args.samples >= 1, "--samples must be at least 1");
    anyhow::ensure!(
        args.min_sampled_objects != Some(0),
        "--min-sampled-objects must be at least 1"
    );
    if let Some(keys) = args.sample_keys {
        anyhow::ensure!(keys >= 1, "--sample-keys must be at least 1");
        return Ok(Sampling::Keys(keys));
    }
    anyhow::ensure!(
        args.rate > 0.0 && args.rate <= 1.0,
        "--rate must be in (0, 1], got {}",
        args.rate
    );
    Ok(Sampling::Rate(args.rate))
}

/// Every policy's curve (`tiercache_sim::mrc::curves`), with a progress bar.
fn curves(
    args: &MrcArgs,
    requests: &[Request],
    run: &SampledRun,
    sampling: Sampling,
) -> anyhow::Result<Vec<MrcPoint>> {
    let sampled = run.policies.iter().filter(|p| **p != PolicyConfig::Lru || args.sample_lru);
    let per_policy: u64 = mrc::samplings(requests, run, sampling)
        .into_iter()
        .map(|s| mrc::samples_of(s, args.samples) as u64)
        .sum();
    let total = sampled.count() as u64 * per_policy;
    let progress = Mutex::new(Progress::new("sampled simulations", Some(total)));
    let finished = AtomicU64::new(0);
    let done = || {
        let n = finished.fetch_add(1, Ordering::Relaxed) + 1;
        progress.lock().expect("progress lock").set(n);
    };
    let (points, note) =
        mrc::curves(requests, run, sampling, args.samples, !args.sample_lru, &done)?;
    progress.into_inner().expect("progress lock").finish();
    if let Some(note) = note {
        eprintln!("warning: {note}");
    }
    Ok(points)
}

/// The full simulations of every point, timed, and the curve's errors against them.
fn check(
    requests: &[Request],
    points: &[MrcPoint],
    run: &SampledRun,
    curve_seconds: f64,
) -> anyhow::Result<Check> {
    let mut requests = requests.to_vec();
    let total = (run.policies.len() * run.capacities.len()) as u64;
    let progress = Mutex::new(Progress::new("full simulations (--check)", Some(total)));
    let finished = AtomicU64::new(0);
    let done = || {
        let n = finished.fetch_add(1, Ordering::Relaxed) + 1;
        progress.lock().expect("progress lock").set(n);
    };
    let start = Instant::now();
    let full = tiercache_sim::sweep(
        &mut requests,
        run.policies,
        run.capacities,
        run.admission,
        run.seed,
        run.logical_time,
        &done,
    )?;
    let full_seconds = start.elapsed().as_secs_f64();
    progress.into_inner().expect("progress lock").finish();
    let full_miss_ratio: Vec<f64> = full.iter().map(|p| p.miss_ratio).collect();
    let error: Vec<f64> =
        points.iter().zip(&full_miss_ratio).map(|(p, f)| p.miss_ratio - f).collect();
    let sampled: Vec<f64> = points
        .iter()
        .zip(&error)
        .filter(|(p, _)| p.method == "sampled")
        .map(|(_, e)| e.abs())
        .collect();
    let mean_size = mrc::mean_size(&requests);
    let trusted: Vec<f64> = points
        .iter()
        .zip(&error)
        .filter(|(p, _)| p.method == "sampled" && !too_small(p, mean_size))
        .map(|(_, e)| e.abs())
        .collect();
    let mean = |v: &[f64]| if v.is_empty() { 0.0 } else { v.iter().sum::<f64>() / v.len() as f64 };
    Ok(Check {
        mean_absolute_error_flagged_out: (!trusted.is_empty()).then(|| mean(&trusted)),
        mean_absolute_error: mean(&sampled),
        max_absolute_error: sampled.iter().cloned().fold(0.0, f64::max),
        full_miss_ratio,
        error,
        curve_seconds,
        full_seconds,
        speedup: full_seconds / curve_seconds.max(1e-9),
    })
}

/// How the curves were made, and which sampled points stand on caches too small to trust.
fn describe(points: &[MrcPoint], requests: &[Request], sampling: Sampling, samples: u32) {
    let mean_size = mrc::mean_size(requests);
    if points.iter().any(|p| p.method == "exact") {
        println!("lru: exact, from stack distances ({} requests, one pass)", requests.len());
    }
    let sampled: Vec<&MrcPoint> = points.iter().filter(|p| p.method == "sampled").collect();
    let Some(first) = sampled.first() else { return };
    let mut how = match sampling {
        Sampling::Rate(rate) => format!("rate {rate:.4}"),
        Sampling::Keys(keys) => format!("at most {keys} keys (rate {:.4})", first.rate),
    };
    if let Sampling::Rate(rate) = sampling {
        let raised: std::collections::BTreeMap<u64, String> = sampled
            .iter()
            .filter(|p| p.rate > rate * (1.0 + 1e-9))
            .map(|p| (p.capacity, format!("{} at {:.4}", label(p), p.rate)))
            .collect();
        if !raised.is_empty() {
            let raised: Vec<String> = raised.into_values().collect();
            how += &format!(
                " (raised where the sampled cache would be small: {}; a rate of 1 is the \
                 whole trace, one run)",
                raised.join(", ")
            );
        }
    }
    let widest = sampled.iter().map(|p| p.spread).fold(0.0, f64::max);
    let estimator = match first.estimator {
        "plain" => "each sample's misses over its requests",
        _ => "each sample's hit ratio per class of key frequency, weighted by the class's share",
    };
    println!(
        "others: sampled by key hash, {how}, {samples} samples per point below a rate of 1 \
         ({estimator}); their \
         miss ratios differ by at most {:.2} points (the spread in mrc.csv)",
        widest * 100.0
    );
    let small: std::collections::BTreeMap<u64, String> = sampled
        .iter()
        .filter(|p| too_small(p, mean_size))
        .map(|p| (p.capacity, label(p)))
        .collect();
    let small: Vec<String> = small.into_values().collect();
    if !small.is_empty() {
        println!(
            "note: at {} the sampled cache holds under {FEW_OBJECTS} objects; raise the rate for \
             these sizes (--min-sampled-objects {FEW_OBJECTS})",
            small.join(", ")
        );
    }
}

/// Whether a sampled point's cache holds under [`FEW_OBJECTS`] objects of the trace's mean size.
fn too_small(p: &MrcPoint, mean_size: f64) -> bool {
    let objects = if p.unit == "objects" { 1.0 } else { mean_size };
    p.method == "sampled" && p.capacity as f64 * p.rate / objects < FEW_OBJECTS
}

fn label(p: &MrcPoint) -> String {
    match p.unit {
        "objects" => format!("{} objects", p.capacity),
        _ => format_size(p.capacity),
    }
}

fn print_check(check: &Check, points: &[MrcPoint]) {
    println!();
    println!("check against the full simulations:");
    for ((p, full), error) in points.iter().zip(&check.full_miss_ratio).zip(&check.error) {
        println!(
            "  {:<10} {:>12}  curve {:>7.3}%  full {:>7.3}%  error {:>+6.2} points ({})",
            p.policy,
            label(p),
            p.miss_ratio * 100.0,
            full * 100.0,
            error * 100.0,
            p.method
        );
    }
    let sampled = points.iter().filter(|p| p.method == "sampled").count();
    if sampled == 0 {
        println!(
            "every point exact; curves {:.2} s, full simulations {:.2} s ({:.1}x)",
            check.curve_seconds, check.full_seconds, check.speedup
        );
        return;
    }
    let trusted = match check.mean_absolute_error_flagged_out {
        Some(mae) => format!(" ({:.2} over the points the note does not flag)", mae * 100.0),
        None => String::new(),
    };
    println!(
        "sampled points: mean absolute error {:.2} points{trusted}, largest {:.2}; curves {:.2} s, \
         full simulations {:.2} s ({:.1}x)",
        check.mean_absolute_error * 100.0,
        check.max_absolute_error * 100.0,
        check.curve_seconds,
        check.full_seconds,
        check.speedup
    );
}

fn write_csv(
    path: &std::path::Path,
    points: &[MrcPoint],
    check: Option<&Check>,
) -> anyhow::Result<()> {
    let mut text = String::from(
        "policy,capacity,unit,miss_ratio,byte_miss_ratio,method,rate,simulated_requests,spread,samples,\
         estimator",
    );
    text += if check.is_some() { ",full_miss_ratio,error\n" } else { "\n" };
    for (i, p) in points.iter().enumerate() {
        text += &format!(
            "{},{},{},{},{},{},{},{},{},{},{}",
            p.policy,
            p.capacity,
            p.unit,
            p.miss_ratio,
            p.byte_miss_ratio,
            p.method,
            p.rate,
            p.simulated_requests,
            p.spread,
            p.samples,
            p.estimator
        );
        if let Some(check) = check {
            text += &format!(",{},{}", check.full_miss_ratio[i], check.error[i]);
        }
        text.push('\n');
    }
    std::fs::write(path, text).with_context(|| format!("cannot write {}", path.display()))
}
