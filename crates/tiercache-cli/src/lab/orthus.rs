//! Orthus (Wu et al., FAST'21): classic caching, splitting and non-hierarchical caching.

use tiercache_core::{Capacity, Request};
use tiercache_policy::nhc::NhcConfig;
use tiercache_policy::{AnyPolicy, PolicyConfig};
use tiercache_sim::timed::{simulate_timed, TimedOptions, TimedReport};
use tiercache_workload::gen::KeyDistribution;

use super::*;

const CACHE_BLOCKS: u64 = 8192;

const PAIRS: [(&str, &str, &str); 3] = [
    ("DRAM+NVM", "dram", "optane-dcpm"),
    ("NVM+Optane SSD", "optane-dcpm", "optane-ssd"),
    ("Optane SSD+Flash", "optane-ssd", "nvme"),
];

fn lru() -> AnyPolicy {
    AnyPolicy::from_config(&PolicyConfig::Lru, Capacity::objects(CACHE_BLOCKS), &[], 1)
        .expect("a valid policy")
}

fn nhc(load_admit: Option<f64>) -> NhcConfig {
    NhcConfig { window: 10, fixed_load_admit: load_admit, ..NhcConfig::default() }
}

/// A static split held once the cache is warm, with read misses admitted or not.
fn split(load_admit: f64, data_admit: bool) -> NhcConfig {
    NhcConfig { held_data_admit: data_admit, ..nhc(Some(load_admit)) }
}

/// 4 KiB reads per second a device sustains with enough in flight: the lower of its
/// parallelism over its latency and its bandwidth over 4 KiB.
fn read_iops(name: &str) -> f64 {
    let d = preset(name);
    (d.parallelism as f64 / (d.read_latency_us * 1e-6)).min(d.read_bandwidth_gb_s * 1e9 / 4096.0)
}

/// Orthus section 6.1, Figure 7: NHC's gain at 95% hits and load 2.0, per hierarchy.
const PAPER_GAIN_95_LOAD_2: [f64; 3] = [0.21, 0.32, 0.54];

/// A closed-loop run of `clients` over the pair (cache device, capacity device).
fn run_timed(
    policy: &mut AnyPolicy,
    stream: &[Request],
    clients: usize,
    pair: (&str, &str),
    interval_us: u64,
) -> TimedReport {
    let options = TimedOptions {
        interval_us,
        ..TimedOptions::closed(clients, vec![preset(pair.0)], preset(pair.1))
    };
    simulate_timed(policy, stream, &options)
}

/// Throughput over the second half of the series (the tuning settled).
fn steady(r: &TimedReport) -> f64 {
    let points =
        &r.series[r.series.len() / 2..r.series.len().saturating_sub(1).max(r.series.len() / 2 + 1)];
    points.iter().map(|p| p.ops_per_second).sum::<f64>() / points.len().max(1) as f64
}

pub fn run(lab: &mut Lab) -> anyhow::Result<()> {
    let requests = lab.scale.requests(1_600_000);
    lab.setup(format!(
        "One LRU cache tier of {CACHE_BLOCKS} 4 KiB blocks over a capacity device; device pairs from \
         the presets, whose latencies and bandwidths are Orthus's Table 1 (parallelism and \
         write-to-read interference are our assumptions, in the preset's comments): {}. \
         {requests} requests per run after an untimed warm-up.",
        PAIRS.iter().map(|p| format!("{} = {} over {}", p.0, p.1, p.2)).collect::<Vec<_>>().join("; ")
    ));
    lab.setup(
        "Hit ratios 80% and 95%: uniform reads over 8192/H blocks (the paper's microbenchmarks are \
         uniformly random). Load: closed-loop clients at 0.5-2.0 times the cache device's \
         parallelism (its saturation: every server busy). NHC: Algorithm 1, 2% steps, one measurement per \
         interval of about 2000 completions, stability over 10 intervals. Static splits: \
         the same controller holding load_admit fixed once the cache is warm, searched over a grid, \
         once with read misses no longer admitted (data_admit off, as Orthus's splitting) and once \
         still admitted (data_admit on), so splitting and not admitting are measured apart.",
    );
    let grid: Vec<f64> = match lab.scale {
        Scale::Full => (0..=20).map(|i| 0.5 + 0.025 * i as f64).collect(),
        _ => (0..=5).map(|i| 0.5 + 0.1 * i as f64).collect(),
    };
    let loads = [0.5, 1.0, 1.5, 2.0];
    lab.heading("Classic caching, static splits and NHC by hierarchy, hit ratio and load");
    let mut rows = Vec::new();
    let mut source_rows = Vec::new();
    let (mut high_load, mut near_best, mut low_load) = (Vec::new(), Vec::new(), Vec::new());
    let mut gain_95_2 = [0.0; 3];
    for (pair, (name, hi, lo)) in PAIRS.into_iter().enumerate() {
        let parallelism = preset(hi).parallelism as f64;
        for h in [0.8, 0.95] {
            let objects = (CACHE_BLOCKS as f64 / h).round() as u64;
            let warm = blocks(KeyDistribution::Uniform, objects, objects * 4, 1.0, 3);
            let stream = blocks(KeyDistribution::Uniform, objects, requests, 1.0, 5);
            for load in loads {
                lab.step(format!("{name}, H={h}, load {load}"));
                let how = ((load * parallelism).round() as usize).max(1);
                // About 2000 completions per measurement interval.
                let probe = run_timed(&mut warmed(lru(), &warm), &stream, how, (hi, lo), 1_000_000);
                let interval_us = ((2000.0 / probe.ops_per_second) * 1e6).max(1.0) as u64;
                let classic =
                    run_timed(&mut warmed(lru(), &warm), &stream, how, (hi, lo), interval_us);
                let classic_ops = steady(&classic);
                // best[data_admit] = (load_admit, steady ops/s); and data_admit off alone.
                let mut best = [(1.0, classic_ops); 2];
                let mut not_admitting = classic_ops;
                for (d, data_admit) in [false, true].into_iter().enumerate() {
                    for &la in &grid {
                        let mut p = warmed(lru(), &warm).with_nhc(split(la, data_admit), 7);
                        let ops = steady(&run_timed(&mut p, &stream, how, (hi, lo), interval_us));
                        if !data_admit && la == 1.0 {
                            not_admitting = ops;
                        }
                        if ops > best[d].1 * 1.001 {
                            best[d] = (la, ops);
                        }
                    }
                }
                let mut p = warmed(lru(), &warm).with_nhc(nhc(None), 7);
                let tuned = run_timed(&mut p, &stream, how, (hi, lo), interval_us);
                let nhc_ops = steady(&tuned);
                let la = tuned
                    .series
                    .last()
                    .and_then(|s| s.knobs.get("load_admit").copied())
                    .unwrap_or(1.0);
                rows.push(vec![
                    name.to_string(),
                    pct(h),
                    f1(load),
                    f0(classic_ops),
                    f1(classic.latency_us_mean),
                    f1(classic.latency_us_p99),
                    format!("{:.2}", best[0].0),
                    f0(best[0].1),
                    format!("{:.2}", best[1].0),
                    f0(best[1].1),
                    f0(nhc_ops),
                    f1(tuned.latency_us_mean),
                    f1(tuned.latency_us_p99),
                    format!("{la:.2}"),
                ]);
                let case = format!("{name}, H={h:.2}, load {load}");
                let gain = nhc_ops / classic_ops - 1.0;
                if load >= 1.5 {
                    high_load.push(Case::at_least(case.clone(), gain, -0.01, signed));
                    let top = best[0].1.max(best[1].1);
                    near_best.push(Case::at_least(case.clone(), nhc_ops / top, 0.9, ratio));
                }
                if load <= 0.5 {
                    low_load.push(Case::at_least(case.clone(), gain, -0.02, signed));
                }
                if h == 0.95 && load == 2.0 {
                    gain_95_2[pair] = gain;
                    source_rows.push(vec![
                        name.to_string(),
                        f0(read_iops(hi)),
                        f0(read_iops(lo)),
                        format!("{:.2}", read_iops(lo) / read_iops(hi)),
                        signed(not_admitting / classic_ops - 1.0),
                        signed(best[1].1 / classic_ops - 1.0),
                        signed(best[0].1 / classic_ops - 1.0),
                        signed(gain),
                        signed(PAPER_GAIN_95_LOAD_2[pair]),
                    ]);
                }
            }
        }
    }
    lab.table(
        "hierarchies",
        &[
            "hierarchy",
            "hit ratio",
            "load",
            "classic ops/s",
            "classic mean us",
            "classic p99 us",
            "best load_admit, data_admit off",
            "its ops/s",
            "best load_admit, data_admit on",
            "its ops/s",
            "NHC ops/s",
            "NHC mean us",
            "NHC p99 us",
            "NHC load_admit at end",
        ],
        &rows,
    )?;
    lab.heading("Where the gain comes from (H = 95%, load 2.0)");
    lab.table(
        "gain-sources",
        &[
            "hierarchy",
            "cache device 4 KiB reads/s",
            "capacity device 4 KiB reads/s",
            "capacity / cache",
            "not admitting alone (data_admit off, load_admit 1)",
            "best split, data_admit on",
            "best split, data_admit off",
            "NHC",
            "paper's NHC",
        ],
        &source_rows,
    )?;
    lab.claim(
        Claim::shape(
            "Orthus sections 4 and 6.1",
            "Under high load NHC delivers more than classic caching by using the capacity device too",
            "in every high-load case (1.5x and 2x the cache device's saturation), NHC's throughput is at least 0.99 of classic's",
        )
        .cases(high_load),
    );
    let order = |a: usize, b: usize| {
        Case::new(
            format!("{} below {}", PAIRS[a].0, PAIRS[b].0),
            format!("{} against {}", signed(gain_95_2[a]), signed(gain_95_2[b])),
            "the first gain smaller",
            gain_95_2[a] < gain_95_2[b],
        )
        .paper(format!(
            "{} against {}",
            signed(PAPER_GAIN_95_LOAD_2[a]),
            signed(PAPER_GAIN_95_LOAD_2[b])
        ))
    };
    lab.claim(
        Claim::shape(
            "Orthus section 6.1, Figure 7",
            "With 95% hits and load 2.0, NHC gains 21%, 32% and 54% over classic caching on DRAM+NVM, NVM+Optane and Optane+Flash: the gain grows down the hierarchy",
            "NHC's gains at H = 95%, load 2.0 are ordered DRAM+NVM < NVM+Optane < Optane+Flash",
        )
        .case(order(0, 1))
        .case(order(1, 2))
        .context(format!(
            "splitting can add at most the capacity device's share of the pair's read throughput: the capacity / cache ratios of the profiles are {}; admissions are writes, and the optane-dcpm profile keeps 28% of its reads with one writer, so on the pairs with NVM as the cache device part of the gain is not admitting (the 'where the gain comes from' table)",
            PAIRS.iter().map(|p| format!("{} {:.2}", p.0, read_iops(p.2) / read_iops(p.1))).collect::<Vec<_>>().join(", ")
        )),
    );
    lab.claim(
        Claim::value(
            "Orthus section 6.1, Figure 7",
            "With 95% hits and load 2.0, NHC gains 21%, 32% and 54% over classic caching on DRAM+NVM, NVM+Optane and Optane+Flash",
            "each hierarchy's gain within 10 points of the paper's",
        )
        .cases((0..PAIRS.len()).map(|p| {
            Case::near(PAIRS[p].0, gain_95_2[p] * 100.0, PAPER_GAIN_95_LOAD_2[p] * 100.0, 10.0, |x| format!("{x:+.1}%"))
        })),
    );
    lab.claim(
        Claim::shape(
            "Orthus section 4.3",
            "NHC's tuning finds about the best split without knowing the devices",
            "in every high-load case, NHC's throughput is at least 0.9 of the best static split's (data_admit on or off)",
        )
        .cases(near_best)
        .context("hill climbing in 2% steps on one interval per point, against a grid searched offline"),
    );
    lab.claim(
        Claim::shape(
            "Orthus section 5",
            "Under light load NHC falls back to classic caching and loses nothing",
            "at half of saturation, NHC's throughput is at least 0.98 of classic's in every case",
        )
        .cases(low_load),
    );
    for (source, says, why) in [
        ("Orthus section 6.1, Table 2", "Tuning for throughput or average latency improves both on both hierarchies but raises P99; tuning for P99 improves P99", "not run in this lab yet: the controller has the three targets (nhc:target=...), the experiment that compares them is still to be written"),
        ("Orthus section 6.1, Figure 8", "NHC improves on classic caching under write-around, write-back and write-through, least with many dirty reads under write-back", "not run in this lab yet: it needs a workload whose writes touch a set share of the working set (the dirty-read ratio)"),
        ("Orthus section 6.2, Figure 11", "Orthus-KV improves YCSB A, B, D, E and F over Wisckey, more with more gets", "Orthus-KV and Wisckey are key-value stores; this lab models a block cache, and updates, inserts and range queries of a key-value store are not modelled"),
        ("Orthus section 6.2, Figure 12a", "On the ZippyDB replay with a diurnal load, Orthus-KV gains up to 100% by day and tracks classic caching by night", "the ZippyDB benchmark and its diurnal load model are not available here"),
        ("Orthus section 6.2, Figure 12c", "On YCSB-D (reads of recent inserts) NHC cycles between tuning and classic caching and stays above it", "not run in this lab yet: YCSB-D reads keys as they are inserted, and our latest-biased generator draws from a fixed key space with no inserts"),
    ] {
        lab.claim(Claim::untested(source, says, why));
    }

    ycsb_c(lab, requests)?;
    moving_hot_set(lab, requests)?;
    Ok(())
}

/// YCSB-C (read-only) over Zipf 0.6-0.99 on Optane SSD + Flash, many clients.
fn ycsb_c(lab: &mut Lab, requests: u64) -> anyhow::Result<()> {
    lab.heading("YCSB-C over Zipf 0.6-0.99 (Optane SSD over Flash, 64 clients)");
    let objects = 65_536;
    let mut rows = Vec::new();
    let mut cases = Vec::new();
    let mut classic_points = Vec::new();
    let mut nhc_points = Vec::new();
    for theta in [0.6, 0.8, 0.9, 0.99] {
        lab.step(format!("YCSB-C, zipf {theta}"));
        let dist = KeyDistribution::ScrambledZipf { theta };
        let warm = blocks(dist.clone(), objects, requests / 2, 1.0, 8);
        let stream = blocks(dist, objects, requests, 1.0, 9);
        let pair = ("optane-ssd", "nvme");
        let classic = run_timed(&mut warmed(lru(), &warm), &stream, 64, pair, 20_000);
        let mut p = warmed(lru(), &warm).with_nhc(nhc(None), 7);
        let tuned = run_timed(&mut p, &stream, 64, pair, 20_000);
        rows.push(vec![
            format!("{theta}"),
            pct(classic.hit_ratio),
            f0(steady(&classic)),
            f0(steady(&tuned)),
            format!("{:+.1}%", (steady(&tuned) / steady(&classic) - 1.0) * 100.0),
        ]);
        classic_points.push((theta, steady(&classic)));
        nhc_points.push((theta, steady(&tuned)));
        let gain = steady(&tuned) / steady(&classic) - 1.0;
        cases.push(Case::at_least(format!("Zipf {theta}"), gain, -0.01, signed));
    }
    lab.table(
        "ycsb-c",
        &["zipf theta", "hit ratio", "classic ops/s", "NHC ops/s", "NHC gain"],
        &rows,
    )?;
    lab.chart(
        "ycsb-c",
        &Chart {
            title: "YCSB-C on Optane SSD over Flash",
            x_label: "Zipf theta",
            y_label: "ops/s",
            log_x: false,
            x_format: |x| format!("{x:.2}"),
            series: &[series("classic", classic_points), series("NHC", nhc_points)],
        },
    )?;
    lab.claim(
        Claim::shape(
            "Orthus section 6.2, Figure 9",
            "On YCSB-C (Zipfian reads), NHC outperforms classic caching",
            "for every Zipf exponent, NHC's throughput is at least 0.99 of classic's",
        )
        .cases(cases)
        .context("Optane SSD over flash, 64 closed-loop clients, 65,536 blocks of which 8192 fit"),
    );
    Ok(())
}

/// Figure 12b: the hot set moves from the start of the key space to its end halfway through.
fn moving_hot_set(lab: &mut Lab, requests: u64) -> anyhow::Result<()> {
    lab.heading("A hot set that moves (Figure 12b)");
    let objects = 16_384u64;
    let total = requests * 2;
    let mut stream = blocks(KeyDistribution::Zipf { theta: 0.8 }, objects, total, 1.0, 12);
    for req in &mut stream[total as usize / 2..] {
        req.key = objects - 1 - req.key;
    }
    let warm = blocks(KeyDistribution::Zipf { theta: 0.8 }, objects, requests / 2, 1.0, 13);
    let pair = ("optane-ssd", "nvme");
    lab.step("moving hot set");
    let classic = run_timed(&mut warmed(lru(), &warm), &stream, 64, pair, 20_000);
    let mut p = warmed(lru(), &warm).with_nhc(nhc(None), 7);
    let tuned = run_timed(&mut p, &stream, 64, pair, 20_000);
    let mut rows = Vec::new();
    for (i, point) in tuned.series.iter().enumerate() {
        let classic_ops = classic.series.get(i).map_or(0.0, |p| p.ops_per_second);
        rows.push(vec![
            format!("{:.2}", point.start_seconds),
            f0(classic_ops),
            f0(point.ops_per_second),
            pct(point.hit_ratio),
            format!("{:.2}", point.knobs.get("load_admit").copied().unwrap_or(1.0)),
            format!("{:.0}", point.knobs.get("data_admit").copied().unwrap_or(1.0)),
        ]);
    }
    lab.table(
        "moving-hot-set",
        &["time s", "classic ops/s", "NHC ops/s", "NHC hit ratio", "load_admit", "data_admit"],
        &rows,
    )?;
    let knob = |name: &'static str| -> Vec<(f64, f64)> {
        tuned
            .series
            .iter()
            .map(|p| (p.start_seconds, p.knobs.get(name).copied().unwrap_or(1.0)))
            .collect()
    };
    lab.chart(
        "moving-hot-set-knobs",
        &Chart {
            title: "NHC's knobs as the hot set moves",
            x_label: "virtual seconds",
            y_label: "ratio",
            log_x: false,
            x_format: |x| format!("{x:.1}"),
            series: &[
                series("load_admit", knob("load_admit")),
                series("data_admit", knob("data_admit")),
            ],
        },
    )?;
    let ops = |r: &TimedReport| -> Vec<(f64, f64)> {
        r.series.iter().map(|p| (p.start_seconds, p.ops_per_second)).collect()
    };
    lab.chart(
        "moving-hot-set-throughput",
        &Chart {
            title: "Throughput as the hot set moves",
            x_label: "virtual seconds",
            y_label: "ops/s",
            log_x: false,
            x_format: |x| format!("{x:.1}"),
            series: &[series("classic", ops(&classic)), series("NHC", ops(&tuned))],
        },
    )?;
    // When did the move happen, in NHC's run? At the interval where half the requests were done.
    let mut done = 0.0;
    let interval = tuned.series.get(1).map_or(0.02, |p| p.start_seconds);
    let mut change = tuned.series.len();
    for (i, p) in tuned.series.iter().enumerate() {
        done += p.ops_per_second * interval;
        if done >= total as f64 / 2.0 {
            change = i;
            break;
        }
    }
    let tuning = |points: &[tiercache_sim::timed::IntervalPoint]| {
        let off = points.iter().filter(|p| p.knobs.get("data_admit") == Some(&0.0)).count();
        off as f64 / points.len().max(1) as f64
    };
    let n = tuned.series.len();
    let change = change.min(n);
    let before = tuning(&tuned.series[change / 2..change]);
    let after = &tuned.series[change..];
    let returned = after.iter().take((after.len() / 4).max(1)).any(|p| {
        p.knobs.get("data_admit") == Some(&1.0) && p.knobs.get("load_admit") == Some(&1.0)
    });
    let retuned = tuning(&tuned.series[n * 4 / 5..]);
    let tail = |r: &TimedReport| {
        let n = r.series.len();
        let points = &r.series[n * 4 / 5..n.saturating_sub(1).max(n * 4 / 5 + 1)];
        points.iter().map(|p| p.ops_per_second).sum::<f64>() / points.len().max(1) as f64
    };
    let (tail_classic, tail_nhc) = (tail(&classic), tail(&tuned));
    lab.claim(
        Claim::shape(
            "Orthus section 6.2, Figure 12b",
            "When the working set changes, NHC detects the hit-rate drop, returns to classic caching (data_admit and load_admit back to 1), then tunes again and ends above classic",
            "all four: tuning (data_admit off) at least half of the second quarter; back to classic within the first quarter after the move; tuning at least half of the last fifth; last fifth's throughput above classic's",
        )
        .case(Case::at_least("tuning before the move", before, 0.5, pct))
        .case(Case::new("back to classic after the move", if returned { "yes" } else { "no" }, "yes", returned))
        .case(Case::at_least("tuning in the last fifth", retuned, 0.5, pct))
        .case(Case::new(
            "last fifth, NHC against classic",
            format!("{tail_nhc:.0} against {tail_classic:.0} ops/s"),
            "NHC above",
            tail_nhc > tail_classic,
        ))
        .context("alpha = 5% of the starting hit rate triggers the return (the paper does not give its alpha); the hot set is Zipf 0.8 over 16,384 blocks, half of which fit in the cache"),
    );
    Ok(())
}
