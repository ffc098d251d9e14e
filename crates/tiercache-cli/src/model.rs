//! `tiercache model orthus`: the Orthus paper's analytic model of caching and splitting
//! (equations 1-9) as Figure 3's four panels, in CSV and plots.

use std::path::PathBuf;

use anyhow::Context;
use clap::{Args, Subcommand};
use tiercache_sim::model::{figure3, Figure3Point, FIGURE3_RATIOS};

use crate::plot::{write_chart, Chart, Series};

#[derive(Subcommand)]
pub enum ModelCommand {
    /// Orthus (FAST'21) section 3.1: throughput of caching and splitting over a fast and a slow
    /// device, one request at a time and many, at device ratios 100:1, 100:10, 100:50, 100:100
    /// (Figure 3). Writes orthus-figure3.csv and one plot per ratio.
    Orthus(OrthusArgs),
}

#[derive(Args)]
pub struct OrthusArgs {
    /// Directory for the CSV and the plots (created if missing).
    #[arg(long, default_value = "model-results")]
    pub out: PathBuf,
    /// Hit (split) rates from 0 to 1 in this many steps.
    #[arg(long, default_value_t = 100)]
    pub steps: usize,
}

pub fn run(command: &ModelCommand) -> anyhow::Result<()> {
    match command {
        ModelCommand::Orthus(args) => orthus(args),
    }
}

fn orthus(args: &OrthusArgs) -> anyhow::Result<()> {
    anyhow::ensure!(args.steps >= 1, "--steps must be at least 1");
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("cannot create {}", args.out.display()))?;
    let points = figure3(args.steps);
    let csv = args.out.join("orthus-figure3.csv");
    let mut text = String::from("r_hi,r_lo,rate,cache_one,cache_many,split_one,split_many\n");
    for p in &points {
        text += &format!(
            "{},{},{:.4},{:.6},{:.6},{:.6},{:.6}\n",
            p.r_hi, p.r_lo, p.rate, p.cache_one, p.cache_many, p.split_one, p.split_many
        );
    }
    std::fs::write(&csv, text).with_context(|| format!("cannot write {}", csv.display()))?;
    let mut written = vec![csv];

    println!("Orthus model (FAST'21, eq. 1-9), fast device 100 ops/s; best over rates 0..1:");
    println!(
        "{:>8} {:>16} {:>16} {:>22} {:>22}",
        "ratio", "cache, 1 (H=1)", "cache, many", "split, 1", "split, many (at S)"
    );
    for (r_hi, r_lo) in FIGURE3_RATIOS {
        let panel: Vec<&Figure3Point> = points.iter().filter(|p| p.r_lo == r_lo).collect();
        let best = |f: fn(&Figure3Point) -> f64| {
            panel
                .iter()
                .map(|p| (f(p), p.rate))
                .fold((0.0, 0.0), |a, b| if b.0 > a.0 { b } else { a })
        };
        let (c1, cm, s1, sm) = (
            best(|p| p.cache_one),
            best(|p| p.cache_many),
            best(|p| p.split_one),
            best(|p| p.split_many),
        );
        println!(
            "{:>8} {:>16.1} {:>9.1} (H={:.2}) {:>13.1} (S={:.2}) {:>13.1} (S={:.2})",
            format!("{r_hi}:{r_lo}"),
            c1.0,
            cm.0,
            cm.1,
            s1.0,
            s1.1,
            sm.0,
            sm.1
        );
        let series = |name: &str, f: fn(&Figure3Point) -> f64| Series {
            name: name.into(),
            points: panel.iter().map(|p| (p.rate, f(p))).collect(),
        };
        let all = [
            series("caching, 1", |p| p.cache_one),
            series("caching, many", |p| p.cache_many),
            series("splitting, 1", |p| p.split_one),
            series("splitting, many", |p| p.split_many),
        ];
        let title = format!("Orthus model, devices {r_hi}:{r_lo} ops/s");
        let chart = Chart {
            title: &title,
            x_label: "hit rate H (caching) / split rate S (splitting)",
            y_label: "throughput (ops/s)",
            log_x: None,
            x_format: |x| format!("{x:.1}"),
            y_format: None,
            series: &all,
        };
        let stem = args.out.join(format!("orthus-figure3-{r_hi}-{r_lo}"));
        written.extend(write_chart(&stem, &chart)?);
    }
    for path in written {
        println!("wrote {}", path.display());
    }
    Ok(())
}
