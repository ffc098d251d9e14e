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
    /// What capacities count: bytes (object sizes respected) or objects.
    #[arg(long, default_value = "bytes", value_parser = ["bytes", "objects"])]
    pub unit: String,
    /// Admission filters joined by '+': always, prob:P, second-hit[:N],
    /// second-hit-over:BYTES[:N], size:BYTES.
    #[arg(long, default_value = "always")]
    pub admission: String,
    /// Seed of the policies' and filters' randomness.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Directory for sweep.csv, mrc.svg and mrc.png.
    #[arg(long, default_value = "sweep-results")]
    pub out: PathBuf,
    /// Print the points as JSON instead of the table.
    #[arg(long)]
    pub json: bool,
    /// Run each cell as a Ray task on the cluster at this address ('auto' for the one
    /// `ray start --head` made on this machine, or HOST:PORT), through the Python package
    /// (`pip install .` and Ray on every node; the trace at a path every node sees).
    #[arg(long, value_name = "ADDRESS")]
    pub ray: Option<String>,
}

const DEFAULT_POLICIES: [&str; 7] = ["fifo", "lru", "clock", "lfu", "arc", "s3fifo", "belady"];
const DEFAULT_FRACTIONS: [f64; 8] = [0.001, 0.003, 0.01, 0.03, 0.05, 0.1, 0.2, 0.5];

/// The trace's requests in memory, and whether its times are logical (it has none).
pub(crate) fn load(trace: &TraceArgs) -> anyhow::Result<(Vec<Request>, bool)> {
    let mut reader = TraceReader::open(&trace.trace, &trace.options()?)?;
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
    anyhow::ensure!(!requests.is_empty(), "{}: the trace has no requests", trace.trace.display());
    Ok((requests, !reader.info().has_time))
}

/// The capacities given, or by default 0.1% to 50% of the trace's footprint in `unit`.
pub(crate) fn capacities(
    given: &[String],
    unit: &str,
    requests: &[Request],
) -> anyhow::Result<Vec<Capacity>> {
    let unit = if unit == "objects" { Unit::Objects } else { Unit::Bytes };
    if !given.is_empty() {
        return given
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
    let (mut requests, logical_time) = load(&args.trace)?;
    let capacities = capacities(&args.capacities, &args.unit, &requests)?;
    if let Some(address) = &args.ray {
        drop(requests);
        return on_ray(args, address, &names, &capacities);
    }
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
    let curves: Vec<(String, u64, f64)> =
        points.iter().map(|p| (p.policy.clone(), p.capacity, p.miss_ratio)).collect();
    let plots = plot(&args.out, &args.trace, &args.unit, &curves)?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&points)?);
    } else {
        print_table(&curves, &capacities);
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

/// The miss-ratio curves of (policy, capacity, miss ratio) points, as `out/mrc.svg` and `.png`.
pub(crate) fn plot(
    out: &std::path::Path,
    trace: &TraceArgs,
    unit: &str,
    points: &[(String, u64, f64)],
) -> anyhow::Result<Vec<PathBuf>> {
    let mut series: Vec<Series> = Vec::new();
    for (policy, capacity, miss_ratio) in points {
        let point = (*capacity as f64, *miss_ratio);
        match series.iter_mut().find(|s| &s.name == policy) {
            Some(s) => s.points.push(point),
            None => series.push(Series { name: policy.clone(), points: vec![point] }),
        }
    }
    // The ticks carry the unit of a size ("64 MiB"); a count's is the label's.
    let x_label = if unit == "objects" { "cache size (objects)" } else { "cache size" };
    let name = trace.trace.file_name().and_then(|n| n.to_str()).unwrap_or("trace");
    let title = format!("miss ratio: {name}");
    let x_format = if unit == "objects" { axis_count } else { axis_bytes };
    let chart = Chart {
        title: &title,
        x_label,
        y_label: "miss ratio",
        log_x: Some(match unit {
            "objects" => crate::plot::Ticks::Decimal,
            _ => crate::plot::Ticks::Binary,
        }),
        x_format,
        y_format: None,
        series: &series,
    };
    write_chart(&out.join("mrc"), &chart)
}

/// The curves as a table: a row per policy, a column per capacity.
pub(crate) fn print_table(points: &[(String, u64, f64)], capacities: &[Capacity]) {
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
        print!("           {:<14}", chunk[0].0);
        for (_, _, miss_ratio) in chunk {
            print!(" {:>9.2}%", miss_ratio * 100.0);
        }
        println!();
    }
}

/// The Python package's Ray sweep, run by `python3`: it reads the cells as JSON on stdin and
/// prints the DataFrame's rows as JSON.
const RAY_SWEEP: &str = r#"
import json, sys
try:
    import ray, tiercache
except ImportError as e:
    sys.exit(f"--ray needs the Python package and Ray: pip install . ray ({e})")
a = json.load(sys.stdin)
ray.init(address=a["address"], log_to_driver=False)
frame = tiercache.sweep(a["trace"], policies=a["policies"], capacities=a["capacities"],
                        backend="ray", **a["options"])
print(json.dumps({"columns": list(frame.columns), "rows": frame.astype(object)
                  .where(frame.notna(), None).values.tolist()}))
"#;

/// `sweep --ray`: the cells as Ray tasks; sweep.csv holds the DataFrame's columns (the trace,
/// the report's columns as without --ray, and `error`).
fn on_ray(
    args: &SweepArgs,
    address: &str,
    policies: &[&str],
    capacities: &[Capacity],
) -> anyhow::Result<()> {
    use std::io::Write;
    let mut options = serde_json::json!({
        "unit": args.unit,
        "admission": args.admission,
        "seed": args.seed,
        "format": args.trace.format,
        "skip_bad": args.trace.skip_bad,
    });
    if let Some(spec) = &args.trace.csv_spec {
        options["csv_spec"] = spec.clone().into();
    }
    if let Some(block) = &args.trace.block_size {
        options["block_size"] = block.clone().into();
    }
    let request = serde_json::json!({
        "address": address,
        "trace": std::fs::canonicalize(&args.trace.trace)?,
        "policies": policies,
        "capacities": capacities.iter().map(|c| c.amount).collect::<Vec<_>>(),
        "options": options,
    });
    let mut child = std::process::Command::new("python3")
        .args(["-c", RAY_SWEEP])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .context("--ray runs python3, which could not be started")?;
    child.stdin.take().expect("piped stdin").write_all(request.to_string().as_bytes())?;
    let output = child.wait_with_output()?;
    anyhow::ensure!(output.status.success(), "--ray: the Python sweep failed (above)");
    let frame: serde_json::Value = serde_json::from_slice(&output.stdout)
        .context("--ray: the Python sweep printed no result")?;
    let columns: Vec<String> = serde_json::from_value(frame["columns"].clone())?;
    let rows: Vec<Vec<serde_json::Value>> = serde_json::from_value(frame["rows"].clone())?;
    let at = |name: &str| columns.iter().position(|c| c == name);
    let (policy, capacity, miss, error) =
        (at("policy"), at("capacity"), at("miss_ratio"), at("error"));
    let mut failed = Vec::new();
    let mut curves = Vec::new();
    for row in &rows {
        let cell = |i: Option<usize>| i.and_then(|i| row.get(i)).cloned().unwrap_or_default();
        let name = cell(policy).as_str().unwrap_or("").to_string();
        if let Some(why) = cell(error).as_str() {
            failed.push(format!("{name} at {}: {why}", cell(capacity)));
            continue;
        }
        let amount = cell(capacity).as_f64().unwrap_or(0.0) as u64;
        curves.push((name, amount, cell(miss).as_f64().unwrap_or(f64::NAN)));
    }
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("cannot create {}", args.out.display()))?;
    let csv = args.out.join("sweep.csv");
    let mut text = columns.join(",") + "\n";
    for row in &rows {
        let fields: Vec<String> = row
            .iter()
            .map(|v| match v {
                serde_json::Value::Null => String::new(),
                serde_json::Value::String(s) if s.contains([',', '"', '\n']) => {
                    format!("\"{}\"", s.replace('"', "\"\""))
                }
                serde_json::Value::String(s) => s.clone(),
                other => other.to_string(),
            })
            .collect();
        text += &(fields.join(",") + "\n");
    }
    std::fs::write(&csv, text).with_context(|| format!("cannot write {}", csv.display()))?;
    anyhow::ensure!(failed.is_empty(), "cells failed on Ray:\n{}", failed.join("\n"));
    let plots = plot(&args.out, &args.trace, &args.unit, &curves)?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&frame)?);
    } else {
        print_table(&curves, capacities);
        println!();
        println!("wrote {}", csv.display());
        for p in plots {
            println!("wrote {}", p.display());
        }
    }
    Ok(())
}
