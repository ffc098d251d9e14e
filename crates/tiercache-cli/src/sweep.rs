//! `tiercache sweep`: policies x capacities over one trace, in parallel on all cores; a table,
//! a CSV file and a miss-ratio-curve plot.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use anyhow::Context;
use clap::Args;
use tiercache_core::{format_size, parse_size, Capacity, Request, Unit};
use tiercache_policy::{AdmissionConfig, PolicyConfig};
use tiercache_sim::SweepPoint;
use tiercache_workload::TraceReader;

use crate::plot::{axis_bytes, axis_count, write_chart, Chart, Series};
use crate::progress::Progress;
use crate::TraceArgs;

#[derive(Args)]
pub struct SweepArgs {
    #[command(flatten)]
    pub trace: TraceArgs,
    /// A policy to run (repeat the flag for more). Default: fifo, lru, clock, lfu, arc, s3fifo, belady.
    #[arg(long = "policy")]
    pub policies: Vec<String>,
    /// Capacities, comma-separated ('1MiB,4MiB' or '1000,2000'). Default: 0.1% to 50% of the
    /// trace's footprint.
    #[arg(long, value_delimiter = ',')]
    pub capacities: Vec<String>,
    #[arg(long, default_value = "bytes", value_parser = ["bytes", "objects"])]
    pub unit: String,
    #[arg(long, default_value = "always")]
    pub admission: String,
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Directory for sweep.csv, mrc.svg and mrc.png.
    #[arg(long, default_value = "sweep-results")]
    pub out: PathBuf,
    /// Print the points as JSON instead of the table.
    #[arg(long)]
    pub json: bool,
}

const DEFAULT_POLICIES: [&str; 7] = ["fifo", "lru", "clock", "lfu", "arc", "s3fifo", "belady"];
const DEFAULT_FRACTIONS: [f64; 8] = [0.001, 0.003, 0.01, 0.03, 0.05, 0.1, 0.2, 0.5];

fn load(args: &SweepArgs) -> anyhow::Result<(Vec<Request>, bool)> {
    let mut reader = TraceReader::open(&args.trace.trace, &args.trace.options()?)?;
    let mut progress = Progress::new("reading trace", None);
    let mut requests = Vec::new();
    for item in reader.by_ref() {
        requests.push(item?);
        if (requests.len() as u64).is_multiple_of(65536) {
            progress.set(requests.len() as u64);
        }
    }
    progress.finish();
    if reader.skipped() > 0 {
        eprintln!("warning: skipped {} malformed records", reader.skipped());
    }
    anyhow::ensure!(
        !requests.is_empty(),
        "{}: the trace has no requests",
        args.trace.trace.display()
    );
    Ok((requests, !reader.info().has_time))
}

fn capacities(args: &SweepArgs, requests: &[Request]) -> anyhow::Result<Vec<Capacity>> {
    let unit = if args.unit == "objects" { Unit::Objects } else { Unit::Bytes };
    if !args.capacities.is_empty() {
        return args
            .capacities
            .iter()
            .map(|c| {
                let amount = parse_size(c).with_context(|| format!("--capacities {c}"))?;
                anyhow::ensure!(amount > 0, "--capacities: {c} is zero");
                Ok(Capacity { amount, unit })
            })
            .collect();
    }
    let mut seen = tiercache_core::KeySet::default();
    let footprint: u64 = requests
        .iter()
        .filter(|r| seen.insert(r.key))
        .map(|r| if unit == Unit::Objects { 1 } else { r.size as u64 })
        .sum();
    let mut list: Vec<Capacity> = DEFAULT_FRACTIONS
        .iter()
        .map(|f| Capacity { amount: ((footprint as f64 * f) as u64).max(1), unit })
        .collect();
    list.dedup();
    Ok(list)
}

pub fn run(args: &SweepArgs) -> anyhow::Result<()> {
    let names: Vec<&str> = if args.policies.is_empty() {
        DEFAULT_POLICIES.to_vec()
    } else {
        args.policies.iter().map(String::as_str).collect()
    };
    let policies: Vec<PolicyConfig> =
        names.iter().map(|p| PolicyConfig::parse(p)).collect::<Result<_, _>>()?;
    let admission = AdmissionConfig::parse_chain(&args.admission)?;
    let (mut requests, logical_time) = load(args)?;
    let capacities = capacities(args, &requests)?;
    let total = (policies.len() * capacities.len()) as u64;
    let progress = Mutex::new(Progress::new("simulations", Some(total)));
    let finished = AtomicU64::new(0);
    let done = || {
        let n = finished.fetch_add(1, Ordering::Relaxed) + 1;
        progress.lock().expect("progress lock").set(n);
    };
    let points = tiercache_sim::sweep(
        &mut requests,
        &policies,
        &capacities,
        &admission,
        args.seed,
        logical_time,
        &done,
    )?;
    progress.into_inner().expect("progress lock").finish();
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("cannot create {}", args.out.display()))?;
    let csv = args.out.join("sweep.csv");
    write_csv(&csv, &points)?;
    let plots = plot(args, &points)?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&points)?);
    } else {
        print_table(&points, &capacities);
        println!();
        println!("wrote {}", csv.display());
        for p in plots {
            println!("wrote {}", p.display());
        }
    }
    Ok(())
}

fn write_csv(path: &std::path::Path, points: &[SweepPoint]) -> anyhow::Result<()> {
    let mut text = String::new();
    for (i, p) in points.iter().enumerate() {
        let fields = crate::sim::flat_fields(&p.report);
        if i == 0 {
            let header: Vec<&str> = fields.iter().map(|(k, _)| k.as_str()).collect();
            text += &header.join(",");
            text.push('\n');
        }
        let row: Vec<&str> = fields.iter().map(|(_, v)| v.as_str()).collect();
        text += &row.join(",");
        text.push('\n');
    }
    std::fs::write(path, text).with_context(|| format!("cannot write {}", path.display()))
}

fn plot(args: &SweepArgs, points: &[SweepPoint]) -> anyhow::Result<Vec<PathBuf>> {
    let mut series: Vec<Series> = Vec::new();
    for p in points {
        let capacity = p.capacity as f64;
        match series.iter_mut().find(|s| s.name == p.policy) {
            Some(s) => s.points.push((capacity, p.miss_ratio)),
            None => series
                .push(Series { name: p.policy.clone(), points: vec![(capacity, p.miss_ratio)] }),
        }
    }
    let x_label =
        if args.unit == "objects" { "cache size (objects)" } else { "cache size (bytes)" };
    let name = args.trace.trace.file_name().and_then(|n| n.to_str()).unwrap_or("trace");
    let title = format!("miss ratio: {name}");
    let x_format = if args.unit == "objects" { axis_count } else { axis_bytes };
    let chart = Chart {
        title: &title,
        x_label,
        y_label: "miss ratio",
        log_x: true,
        x_format,
        series: &series,
    };
    write_chart(&args.out.join("mrc"), &chart)
}

fn print_table(points: &[SweepPoint], capacities: &[Capacity]) {
    let label = |c: &Capacity| match c.unit {
        Unit::Bytes => format_size(c.amount),
        Unit::Objects => c.amount.to_string(),
    };
    print!("miss ratio {:<14}", "policy");
    for c in capacities {
        print!(" {:>10}", label(c));
    }
    println!();
    for chunk in points.chunks(capacities.len()) {
        print!("           {:<14}", chunk[0].policy);
        for p in chunk {
            print!(" {:>9.2}%", p.miss_ratio * 100.0);
        }
        println!();
    }
}
