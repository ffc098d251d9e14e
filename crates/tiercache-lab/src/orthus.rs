//! Orthus (Wu et al., FAST'21): classic caching, splitting and non-hierarchical caching.

use tiercache_core::{Capacity, DeviceProfile, Op, Request, SeededRng};
use tiercache_policy::cas::{CacheMode, CasConfig};
use tiercache_policy::nhc::{NhcConfig, Target};
use tiercache_policy::{AnyPolicy, PolicyConfig};
use tiercache_sim::timed::{simulate_timed, IntervalPoint, TimedOptions, TimedReport};
use tiercache_workload::gen::ycsb::{Ycsb, YcsbConfig, YcsbWorkload};
use tiercache_workload::gen::KeyDistribution;

use super::*;

const CACHE_BLOCKS: u64 = 8192;

/// Section 6.1's microbenchmarks (Figure 7, Table 2): "The accesses are uniformly random and
/// 64KB (the suggested page size for Open CAS). We use 1GB of the cache device."
const PAGE: u64 = 64 * 1024;
const CACHE_PAGES: u64 = (1 << 30) / PAGE;

const PAIRS: [(&str, &str, &str); 3] = [
    ("DRAM+NVM", "dram", "optane-dcpm"),
    ("NVM+Optane SSD", "optane-dcpm", "optane-ssd"),
    ("Optane SSD+Flash", "optane-ssd", "nvme"),
];

fn lru() -> AnyPolicy {
    lru_of(CACHE_BLOCKS)
}

fn lru_of(entries: u64) -> AnyPolicy {
    AnyPolicy::from_config(&PolicyConfig::Lru, Capacity::objects(entries), &[], 1)
        .expect("a valid policy")
}

/// Section 6.1's uniformly random 64 KiB reads over `objects` pages.
fn pages(objects: u64, requests: u64, seed: u64) -> Vec<Request> {
    sized_blocks(PAGE, KeyDistribution::Uniform, objects, requests, 1.0, seed)
}

fn nhc(load_admit: Option<f64>) -> NhcConfig {
    NhcConfig { window: 10, fixed_load_admit: load_admit, ..NhcConfig::default() }
}

/// A static split held once the cache is warm, with read misses admitted or not.
fn split(load_admit: f64, data_admit: bool) -> NhcConfig {
    NhcConfig { held_data_admit: data_admit, ..nhc(Some(load_admit)) }
}

/// 64 KiB reads per second a device sustains with enough in flight: its parallelism over the
/// service time of one read at its share of the bandwidth (the device model's).
fn read_iops(name: &str) -> f64 {
    let d = preset(name);
    d.parallelism as f64 / (d.service_ns(tiercache_core::Direction::Read, PAGE, 0) * 1e-9)
}

/// Orthus section 6.1, Figure 7: NHC's gain at 95% hits and load 2.0, per hierarchy.
const PAPER_GAIN_95_LOAD_2: [f64; 3] = [0.21, 0.32, 0.54];
/// Figure 7's average latency with load 2.0, NHC against classic caching (section 6.1,
/// "Latency Improvement"): -19%, -25%, -39%.
const PAPER_LATENCY_LOAD_2: [f64; 3] = [-0.19, -0.25, -0.39];

/// A closed-loop run of `clients` over the pair (cache device, capacity device).
fn run_timed(
    policy: &mut AnyPolicy,
    stream: &[Request],
    clients: usize,
    pair: (&str, &str),
    interval_us: u64,
) -> TimedReport {
    let devices = [preset(pair.0), preset(pair.1)];
    run_on(policy, stream, clients, devices, interval_us)
}

/// A closed-loop run over (cache device, capacity device) profiles.
fn run_on(
    policy: &mut AnyPolicy,
    stream: &[Request],
    clients: usize,
    [cache, capacity]: [DeviceProfile; 2],
    interval_us: u64,
) -> TimedReport {
    let options =
        TimedOptions { interval_us, ..TimedOptions::closed(clients, vec![cache], capacity) };
    simulate_timed(policy, stream, &options)
}

/// A preset whose reads keep their whole bandwidth under concurrent writes.
fn without_interference(name: &str) -> DeviceProfile {
    DeviceProfile { read_share_one_writer: 1.0, read_share_eight_writers: 1.0, ..preset(name) }
}

/// The second half of the series (the tuning settled), without the last, partial interval.
fn second_half(r: &TimedReport) -> &[IntervalPoint] {
    let n = r.series.len();
    &r.series[(n / 2).min(n)..n.saturating_sub(1).max(n / 2 + 1).min(n)]
}

/// Throughput over the second half of the series.
fn steady(r: &TimedReport) -> f64 {
    let points = second_half(r);
    points.iter().map(|p| p.ops_per_second).sum::<f64>() / points.len().max(1) as f64
}

/// Mean latency (weighted by completions) and the mean of the intervals' P99 over the
/// second half of the series.
fn steady_latency(r: &TimedReport) -> (f64, f64) {
    let points = second_half(r);
    let ops: f64 = points.iter().map(|p| p.ops_per_second).sum();
    let mean = points.iter().map(|p| p.mean_latency_us * p.ops_per_second).sum::<f64>() / ops;
    let p99 = points.iter().map(|p| p.p99_latency_us).sum::<f64>() / points.len().max(1) as f64;
    (mean, p99)
}

/// A measurement interval of about 2000 completions, from a probe run of `policy`.
fn interval_for(
    mut policy: AnyPolicy,
    stream: &[Request],
    clients: usize,
    pair: (&str, &str),
) -> u64 {
    let probe = run_timed(&mut policy, stream, clients, pair, 1_000_000);
    ((2000.0 / probe.ops_per_second) * 1e6).max(1.0) as u64
}

/// Figure 7's setup as the paper states it (section 6.1 and Table 1) beside the lab's.
pub(super) fn figure_7_fidelity(requests: u64) -> Fidelity {
    use super::fidelity::ORTHUS;
    let pattern = (ORTHUS, 312, "The accesses are uniformly random");
    let page = (ORTHUS, 312, "and 64KB (the suggested page size for Open CAS)");
    let cache = (ORTHUS, 312, "We use 1GB of the cache device");
    let figure = (ORTHUS, 329, "Read-only workloads");
    let loads = (ORTHUS, 316, "we generate Load-0.5, 1.5, and 2.0 by scaling load-1.0");
    let ratios = (ORTHUS, 320, "with 95% hit ratio and Load-2.0 ... with an 80% hit ratio");
    let hierarchies = (ORTHUS, 320, "for DRAM+NVM, NVM+Optane, and Optane+Flash");
    let mut params = vec![
        Param::stated(
            "access pattern",
            pattern,
            Value::words("uniformly random"),
            Value::words("uniformly random"),
            How::Same,
        ),
        Param::stated(
            "page (request) size",
            page,
            Value::kib(64.0),
            Value::Bytes(PAGE as f64),
            How::Same,
        ),
        Param::stated(
            "cache device used",
            cache,
            Value::gib(1.0),
            Value::Bytes((CACHE_PAGES * PAGE) as f64),
            How::Same,
        ),
        Param::stated(
            "reads",
            figure,
            Value::words("read-only"),
            Value::words("read-only"),
            How::Same,
        ),
        Param::stated(
            "hit ratios",
            ratios,
            Value::words("80%, 95%"),
            Value::words("80%, 95%"),
            How::Same,
        ),
        Param::stated(
            "hierarchies",
            hierarchies,
            Value::words("DRAM+NVM, NVM+Optane, Optane+Flash"),
            Value::words("DRAM+NVM, NVM+Optane, Optane+Flash"),
            How::Same,
        ),
        Param::stated(
            "loads",
            loads,
            Value::words("0.5, 1.0, 1.5, 2.0"),
            Value::words("0.5, 1.0, 1.5, 2.0"),
            How::Same,
        ),
    ];
    // Table 1's rows: example, latency, read GB/s, write GB/s.
    for (device, preset_name, (line, text), latency_ns, read, write) in [
        ("DRAM", "dram", (45, "DRAM 80ns 15 15"), 80.0, 15.0, 15.0),
        ("NVM", "optane-dcpm", (46, "NVDIMM 300ns 6.8 2.3"), 300.0, 6.8, 2.3),
        ("Optane SSD", "optane-ssd", (47, "Low-latency SSD 10us 2.5 2.3"), 10_000.0, 2.5, 2.3),
        ("Flash", "nvme", (48, "NVMe Flash SSD 80us ~3.0 ~2.0"), 80_000.0, 3.0, 2.0),
    ] {
        let d = preset(preset_name);
        let table_1 = (ORTHUS, line, text);
        params.push(Param::stated(
            &format!("{device} latency"),
            table_1,
            Value::Number(latency_ns, "ns"),
            Value::Number(d.read_latency_us * 1000.0, "ns"),
            How::Same,
        ));
        params.push(Param::stated(
            &format!("{device} read bandwidth"),
            table_1,
            Value::Number(read, "GB/s"),
            Value::Number(d.read_bandwidth_gb_s, "GB/s"),
            How::Same,
        ));
        params.push(Param::stated(
            &format!("{device} write bandwidth"),
            table_1,
            Value::Number(write, "GB/s"),
            Value::Number(d.write_bandwidth_gb_s, "GB/s"),
            How::Same,
        ));
    }
    params.extend([
        Param::assumed("clients at Load-1.0 (\"the minimum read load to achieve the maximum read bandwidth of the cache device\", line 316)", Value::words("the cache device's parallelism (dram 16, optane-dcpm 8, optane-ssd 16)"), How::Assumed("in the device model a device serves `parallelism` requests at once, each at its share of the bandwidth, so its read bandwidth peaks with exactly that many in flight: the paper's definition of Load-1.0".into())),
        Param::assumed("device parallelism", Value::words("the presets' (dram 16, optane-dcpm 8, optane-ssd 16, nvme 32)"), How::Swept("the load sweep ('Where Figure 7 flips'), 1.0 to 6.0 times it".into())),
        Param::assumed("write-to-read interference", Value::words("the presets' (Writes Hurt's Optane and DRAM figures)"), How::Swept("with and without, in 'Where the gain comes from' and the load sweep".into())),
        Param::assumed("classic caching (Open CAS)", Value::words("LRU, every read miss admitted"), How::Assumed("Open CAS's default eviction is LRU, and its write-through read path admits every miss".into())),
        Param::assumed("run length", Value::Number(requests as f64, "requests"), How::Assumed("after a warm-up of four times the pages; the paper reports 'the stable performance': the second half of each run, after NHC's tuning settles (its knob at the end is in the table)".into())),
    ]);
    Fidelity::new("Orthus Figure 7 and Table 2 (section 6.1's microbenchmarks)", params)
}

pub fn run(lab: &mut Lab) -> anyhow::Result<()> {
    let requests = lab.scale.requests(1_600_000);
    lab.fidelity(figure_7_fidelity(requests))?;
    setup(lab, requests);
    let spread = gain_spread(lab, requests)?;
    let figure_7 = figure_7(lab, requests, spread)?;
    figure_7_claims(lab, figure_7);
    figure_7_sensitivity(lab, requests)?;
    targets(lab, requests)?;
    write_allocation(lab, requests, spread)?;
    ycsb_c(lab, requests, spread)?;
    moving_hot_set(lab, requests)?;
    ycsb_d(lab, requests)?;
    Ok(())
}

/// The setup's lines of the report.
fn setup(lab: &mut Lab, requests: u64) {
    lab.setup(format!(
        "Figure 7 and Table 2: one LRU cache tier of 1 GiB ({CACHE_PAGES} pages of 64 KiB, the paper's) over a capacity device; device pairs from \
         the presets, whose latencies and bandwidths are Orthus's Table 1 (parallelism and \
         write-to-read interference are our assumptions, in the preset's comments): {}. \
         {requests} requests per run after an untimed warm-up.",
        PAIRS.iter().map(|p| format!("{} = {} over {}", p.0, p.1, p.2)).collect::<Vec<_>>().join("; ")
    ));
    lab.setup(
        "Hit ratios 80% and 95%: uniform 64 KiB reads over 16384/H pages (the paper's microbenchmarks are \
         uniformly random). Load: closed-loop clients at 0.5-2.0 times the cache device's \
         parallelism (its saturation: every server busy). NHC: Algorithm 1, 2% steps, one measurement per \
         interval of about 2000 completions, stability over 10 intervals. Static splits: \
         the same controller holding load_admit fixed once the cache is warm, searched over a grid, \
         once with read misses no longer admitted (data_admit off, as Orthus's splitting) and once \
         still admitted (data_admit on), so splitting and not admitting are measured apart.",
    );
}

/// What Figure 7's runs give its claims: per high-load and low-load case, and per hierarchy at
/// 95% hits and load 2.0.
struct Figure7 {
    high_load: Vec<Case>,
    near_best: Vec<Case>,
    low_load: Vec<Case>,
    gain_95_2: [f64; 3],
    quiet_gain_95_2: [f64; 3],
    latency_95_2: [f64; 3],
}

/// Figure 7 (and the static splits beside it): classic caching, the best static splits and
/// NHC by hierarchy, hit ratio and load; their table, and where the gain comes from.
fn figure_7(lab: &mut Lab, requests: u64, spread: f64) -> anyhow::Result<Figure7> {
    let grid: Vec<f64> = match lab.scale {
        Scale::Full => (0..=20).map(|i| 0.5 + 0.025 * i as f64).collect(),
        _ => (0..=5).map(|i| 0.5 + 0.1 * i as f64).collect(),
    };
    let loads = [0.5, 1.0, 1.5, 2.0];
    let lru = || lru_of(CACHE_PAGES);
    lab.heading("Classic caching, static splits and NHC by hierarchy, hit ratio and load");
    let mut rows = Vec::new();
    let mut source_rows = Vec::new();
    let (mut high_load, mut near_best, mut low_load) = (Vec::new(), Vec::new(), Vec::new());
    let mut gain_95_2 = [0.0; 3];
    let mut quiet_gain_95_2 = [0.0; 3];
    let mut latency_95_2 = [0.0; 3];
    for (pair, (name, hi, lo)) in PAIRS.into_iter().enumerate() {
        let parallelism = preset(hi).parallelism as f64;
        for h in [0.8, 0.95] {
            let objects = (CACHE_PAGES as f64 / h).round() as u64;
            let warm = pages(objects, objects * 4, 3);
            let stream = pages(objects, requests, 5);
            for load in loads {
                lab.step(format!("{name}, H={h}, load {load}"));
                let how = ((load * parallelism).round() as usize).max(1);
                // About 2000 completions per measurement interval.
                let interval_us = interval_for(warmed(lru(), &warm), &stream, how, (hi, lo));
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
                    high_load.push(Case::new(
                        case.clone(),
                        signed(gain),
                        format!("above {}", signed(spread)),
                        gain > spread,
                    ));
                    let top = best[0].1.max(best[1].1);
                    near_best.push(Case::at_least(case.clone(), nhc_ops / top, 0.9, ratio));
                }
                if load <= 0.5 {
                    low_load.push(Case::at_least(case.clone(), gain, -spread, signed));
                }
                if h == 0.95 && load == 2.0 {
                    gain_95_2[pair] = gain;
                    latency_95_2[pair] = tuned.latency_us_mean / classic.latency_us_mean - 1.0;
                    // The same pair with write-to-read interference switched off.
                    lab.step(format!("{name}, H={h}, load {load}, without interference"));
                    let quiet = || [without_interference(hi), without_interference(lo)];
                    let classic =
                        run_on(&mut warmed(lru(), &warm), &stream, how, quiet(), interval_us);
                    let mut p = warmed(lru(), &warm).with_nhc(nhc(None), 7);
                    let tuned = run_on(&mut p, &stream, how, quiet(), interval_us);
                    quiet_gain_95_2[pair] = steady(&tuned) / steady(&classic) - 1.0;
                    source_rows.push(vec![
                        name.to_string(),
                        f0(read_iops(hi)),
                        f0(read_iops(lo)),
                        format!("{:.2}", read_iops(lo) / read_iops(hi)),
                        signed(not_admitting / classic_ops - 1.0),
                        signed(best[1].1 / classic_ops - 1.0),
                        signed(best[0].1 / classic_ops - 1.0),
                        signed(gain),
                        signed(quiet_gain_95_2[pair]),
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
            "cache device 64 KiB reads/s",
            "capacity device 64 KiB reads/s",
            "capacity / cache",
            "not admitting alone (data_admit off, load_admit 1)",
            "best split, data_admit on",
            "best split, data_admit off",
            "NHC",
            "NHC, no write interference",
            "paper's NHC",
        ],
        &source_rows,
    )?;
    Ok(Figure7 { high_load, near_best, low_load, gain_95_2, quiet_gain_95_2, latency_95_2 })
}

/// Figure 7's claims, and those of sections 4.3 and 5 judged on the same runs.
fn figure_7_claims(lab: &mut Lab, figure: Figure7) {
    let Figure7 { high_load, near_best, low_load, gain_95_2, quiet_gain_95_2, latency_95_2 } =
        figure;
    lab.claim(
        Claim::shape(
            "Orthus sections 4 and 6.1",
            "Under high load NHC delivers more than classic caching by using the capacity device too",
            "in every high-load case (1.5x and 2x the cache device's saturation), NHC's gain over classic caching above the run-to-run spread of the gain (measured first: the 'run-to-run spread' table)",
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
            "splitting can add at most the capacity device's share of the pair's read throughput: the capacity / cache ratios of the profiles are {}; admissions are writes, and the optane-dcpm profile keeps 28% of its reads with one writer, so on the pairs with NVM as the cache device part of the gain is not admitting; with write-to-read interference switched off in both devices the gains are {} (the 'where the gain comes from' table)",
            PAIRS.iter().map(|p| format!("{} {:.2}", p.0, read_iops(p.2) / read_iops(p.1))).collect::<Vec<_>>().join(", "),
            PAIRS.iter().zip(quiet_gain_95_2).map(|(p, g)| format!("{} {}", p.0, signed(g))).collect::<Vec<_>>().join(", ")
        )),
    );
    lab.claim(
        Claim::value(
            "Orthus section 6.1, Figure 7",
            "With 95% hits and load 2.0, NHC gains 21%, 32% and 54% over classic caching on DRAM+NVM, NVM+Optane and Optane+Flash",
            "each hierarchy's gain within 10 points of the paper's",
        )
        .cases(within_ten_points(gain_95_2, PAPER_GAIN_95_LOAD_2)),
    );
    let latency_case = |p: usize| {
        Case::new(PAIRS[p].0, signed(latency_95_2[p]), "below 0%", latency_95_2[p] < 0.0)
            .paper(signed(PAPER_LATENCY_LOAD_2[p]))
    };
    lab.claim(
        Claim::shape(
            "Orthus section 6.1, Figure 7 (latency)",
            "Orthus-CAS also improves average latency on all hierarchies: with load 2.0, NHC reduces it by 19%, 25% and 39% on DRAM+NVM, NVM+Optane and Optane+Flash",
            "at H = 95%, load 2.0 (the hit ratio of the throughput gains quoted beside it; the text names none), NHC's mean latency below classic caching's on every hierarchy",
        )
        .cases((0..PAIRS.len()).map(latency_case))
        .context("the mean latency of the same runs as the throughput claims (the table's classic and NHC mean us)")
        .follows("Figure 7's throughput claims: a closed loop of a fixed number of clients has mean latency = clients / throughput (Little's law), so a throughput gain g is a latency change of 1/(1+g) - 1"),
    );
    lab.claim(
        Claim::value(
            "Orthus section 6.1, Figure 7 (latency)",
            "With load 2.0, NHC reduces average latency by 19%, 25% and 39% on DRAM+NVM, NVM+Optane and Optane+Flash",
            "each hierarchy's change of mean latency at H = 95%, load 2.0 within 10 points of the paper's",
        )
        .cases(within_ten_points(latency_95_2, PAPER_LATENCY_LOAD_2))
        .follows("Figure 7's throughput claims: a closed loop of a fixed number of clients has mean latency = clients / throughput (Little's law)"),
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
            "at half of saturation, NHC's change of throughput against classic's no worse than minus the run-to-run spread of the gain, in every case",
        )
        .cases(low_load),
    );
    for (source, says, why) in [
        ("Orthus section 6.2, Figure 11", "Orthus-KV improves YCSB A, B, D, E and F over Wisckey, more with more gets", "Orthus-KV and Wisckey are key-value stores: the gain there comes from the store's own value log and its scans, which a block cache does not have; YCSB-C (Figure 9) and YCSB-D (Figure 12c) are run below as block streams"),
        ("Orthus section 6.3.1, Figure 12a", "On the ZippyDB replay with a diurnal load, Orthus-KV gains up to 100% by day and tracks classic caching by night", "the ZippyDB trace is Facebook's and not published; the load NHC sees by night and by day is what the low- and high-load cases above vary"),
    ] {
        lab.claim(Claim::untested(source, says, why));
    }
}

/// The run-to-run spread of NHC's gain over classic caching: Figure 7's setup at 95% hits and
/// load 2.0, each hierarchy on three request streams (seeds); the widest range of the gain
/// over a hierarchy's three. A shape rule that needs NHC "more" than classic needs it by more
/// than this, so a difference the seed alone makes is never read as a result.
fn gain_spread(lab: &mut Lab, requests: u64) -> anyhow::Result<f64> {
    const SEEDS: [u64; 3] = [5, 6, 8];
    let lru = || lru_of(CACHE_PAGES);
    let objects = (CACHE_PAGES as f64 / 0.95).round() as u64;
    let warm = pages(objects, objects * 4, 3);
    let mut rows = Vec::new();
    let mut spread: f64 = 0.0;
    for (name, hi, lo) in PAIRS {
        let how = 2 * preset(hi).parallelism as usize;
        let mut gains = Vec::new();
        for seed in SEEDS {
            lab.step(format!("run-to-run spread: {name}, seed {seed}"));
            let stream = pages(objects, requests, seed);
            let interval_us = interval_for(warmed(lru(), &warm), &stream, how, (hi, lo));
            let classic = run_timed(&mut warmed(lru(), &warm), &stream, how, (hi, lo), interval_us);
            let mut p = warmed(lru(), &warm).with_nhc(nhc(None), 7);
            let tuned = run_timed(&mut p, &stream, how, (hi, lo), interval_us);
            gains.push(steady(&tuned) / steady(&classic) - 1.0);
        }
        let (low, high) = range(&gains);
        spread = spread.max(high - low);
        let mut row = vec![name.to_string()];
        row.extend(gains.iter().map(|&g| signed(g)));
        row.push(signed(high - low));
        rows.push(row);
    }
    lab.heading("Run-to-run spread of NHC's gain (H = 95%, load 2.0, three request streams)");
    lab.paragraph(format!(
        "The rules below that need NHC to do more than classic caching need it by more than the \
         widest of these ranges, {}; a rule that needs it to lose nothing allows a loss of as \
         much.",
        signed(spread)
    ));
    lab.table("spread", &["hierarchy", "seed 5", "seed 6", "seed 8", "range"], &rows)?;
    Ok(spread)
}

/// A point of Figure 7's sweep: the load, NHC's gain and its change of mean latency.
type LoadPoint = (f64, (f64, f64));

/// Loads Figure 7's results are swept over, in the cache device's parallelism.
const SWEPT_LOADS: [f64; 6] = [1.0, 1.5, 2.0, 3.0, 4.0, 6.0];

/// Figure 7 at H = 95% swept over the load and write interference: NHC's gain in throughput
/// and its change of mean latency against classic caching, per hierarchy.
fn figure_7_sensitivity(lab: &mut Lab, requests: u64) -> anyhow::Result<()> {
    let h = 0.95;
    let lru = || lru_of(CACHE_PAGES);
    let objects = (CACHE_PAGES as f64 / h).round() as u64;
    let warm = pages(objects, objects * 4, 3);
    let stream = pages(objects, requests, 5);
    // Per hierarchy, with and without interference: per load, (gain, latency change).
    let mut swept: Vec<(usize, bool, Vec<LoadPoint>)> = Vec::new();
    for (pair, (name, hi, lo)) in PAIRS.into_iter().enumerate() {
        // A pair neither of whose profiles has interference is run once.
        let interferes = [hi, lo].iter().any(|d| preset(d).read_share_one_writer < 1.0);
        for quiet in [false, true].into_iter().filter(|&q| !q || interferes) {
            let mut points = Vec::new();
            for load in SWEPT_LOADS {
                let what = if quiet { ", no interference" } else { "" };
                lab.step(format!("{name}, H={h}, load {load}{what}"));
                let how = ((load * preset(hi).parallelism as f64).round() as usize).max(1);
                let interval_us = interval_for(warmed(lru(), &warm), &stream, how, (hi, lo));
                let devices = || match quiet {
                    true => [without_interference(hi), without_interference(lo)],
                    false => [preset(hi), preset(lo)],
                };
                let classic =
                    run_on(&mut warmed(lru(), &warm), &stream, how, devices(), interval_us);
                let mut p = warmed(lru(), &warm).with_nhc(nhc(None), 7);
                let tuned = run_on(&mut p, &stream, how, devices(), interval_us);
                let gain = steady(&tuned) / steady(&classic) - 1.0;
                let latency = tuned.latency_us_mean / classic.latency_us_mean - 1.0;
                points.push((load, (gain, latency)));
            }
            swept.push((pair, quiet, points));
        }
    }
    let lines = |pick: fn((f64, f64)) -> f64, paper: [f64; 3]| -> Vec<Line> {
        swept
            .iter()
            .map(|(pair, quiet, points)| Line {
                name: format!(
                    "{}{}",
                    PAIRS[*pair].0,
                    if *quiet { ", no interference" } else { "" }
                ),
                points: points.iter().map(|(x, v)| (*x, pick(*v))).collect(),
                needs: Needs::Near { target: paper[*pair], tolerance: 0.1 },
            })
            .collect()
    };
    let load = |x: f64| format!("{x:.1}");
    let setup = "Table 1's devices (the presets), 95% hits, load 2.0, the presets' write-to-read interference";
    // The ordering the paper reports (the gain grows down the hierarchy), load by load.
    let ordered: Vec<String> = [false, true]
        .iter()
        .map(|&quiet| {
            let gains = |i: usize| {
                // A pair without interference has one line, the same either way.
                let line = swept.iter().find(|(p, q, _)| *p == i && *q == quiet);
                let line = line.or_else(|| swept.iter().find(|(p, _, _)| *p == i));
                let points = &line.expect("a line").2;
                points.iter().map(|(_, (g, _))| *g).collect::<Vec<f64>>()
            };
            let (a, b, c) = (gains(0), gains(1), gains(2));
            let at: Vec<String> = SWEPT_LOADS
                .iter()
                .enumerate()
                .filter(|&(i, _)| a[i] < b[i] && b[i] < c[i])
                .map(|(_, x)| load(*x))
                .collect();
            let with =
                if quiet { "without interference" } else { "with the presets' interference" };
            match at.is_empty() {
                true => format!("{with}, at no load swept"),
                false => format!("{with}, at load {}", at.join(", ")),
            }
        })
        .collect();
    let order_note = format!(
        "The paper's order of the gains (DRAM+NVM < NVM+Optane < Optane+Flash) holds {}.",
        ordered.join("; ")
    );
    lab.heading("Where Figure 7 flips: the load and write interference");
    lab.paragraph(
        "The paper defines Load-1.0 as the least load at which the cache device reaches its \
         highest read bandwidth, and runs 2.0; here a load is closed-loop clients in multiples of \
         the cache device's parallelism. Splitting adds the capacity device's throughput only \
         while enough requests are in flight to keep it busy too, and a slow capacity device \
         (flash: 80 us a read) holds each client it serves for longer, so the gain depends on \
         the load as well as on the devices' throughput. Interference: admissions are writes to \
         the cache device, which the NVM profiles let slow its reads.",
    );
    for sweep in [
        Sensitivity {
            name: "sensitivity-figure-7-throughput",
            result: "Orthus Figure 7: with 95% hits and load 2.0, NHC gains 21%, 32% and 54% over classic caching on DRAM+NVM, NVM+Optane and Optane+Flash.",
            assumption: "load",
            measure: "NHC's throughput gain over classic",
            x_format: load,
            y_format: signed,
            paper_x: 2.0,
            paper_setup: setup,
            note: order_note,
            lines: lines(|(gain, _)| gain, PAPER_GAIN_95_LOAD_2),
        },
        Sensitivity {
            name: "sensitivity-figure-7-latency",
            result: "Orthus Figure 7 (latency): with load 2.0, NHC cuts mean latency by 19%, 25% and 39% on DRAM+NVM, NVM+Optane and Optane+Flash.",
            assumption: "load",
            measure: "NHC's change of mean latency",
            x_format: load,
            y_format: signed,
            paper_x: 2.0,
            paper_setup: setup,
            note: String::new(),
            lines: lines(|(_, latency)| latency, PAPER_LATENCY_LOAD_2),
        },
    ] {
        lab.sensitivity(&sweep)?;
    }
    Ok(())
}

/// Per hierarchy, a change (a fraction) against the paper's, within 10 points of it.
fn within_ten_points(ours: [f64; 3], paper: [f64; 3]) -> impl Iterator<Item = Case> {
    (0..PAIRS.len()).map(move |p| {
        Case::near(PAIRS[p].0, ours[p] * 100.0, paper[p] * 100.0, 10.0, |x| format!("{x:+.1}%"))
    })
}

/// Orthus Table 2 (read-only, 95% hits): Open CAS, then NHC tuned for throughput, average
/// latency and P99 latency: (GB/s, mean us, P99 us) per hierarchy.
const PAPER_TABLE_2: [[(f64, f64, f64); 4]; 2] = [
    [(6.7, 77.0, 115.0), (8.0, 64.0, 147.0), (8.0, 64.0, 143.0), (6.9, 75.0, 106.0)],
    [(2.3, 227.0, 269.0), (3.9, 132.0, 289.0), (3.9, 132.0, 285.0), (3.3, 155.0, 245.0)],
];

/// Table 2: the scheduler's three target metrics against classic caching.
fn targets(lab: &mut Lab, requests: u64) -> anyhow::Result<()> {
    lab.heading("Target metrics (Table 2)");
    let lru = || lru_of(CACHE_PAGES);
    let objects = (CACHE_PAGES as f64 / 0.95).round() as u64;
    let warm = pages(objects, objects * 4, 3);
    let stream = pages(objects, requests, 5);
    let runs = [
        ("classic", None),
        ("NHC, throughput", Some(Target::Throughput)),
        ("NHC, mean latency", Some(Target::MeanLatency)),
        ("NHC, P99 latency", Some(Target::P99Latency)),
    ];
    let mut rows = Vec::new();
    let (mut improves, mut raises, mut tail) = (Vec::new(), Vec::new(), Vec::new());
    for (h, &(name, hi, lo)) in PAIRS[1..].iter().enumerate() {
        let clients = 2 * preset(hi).parallelism as usize;
        let interval_us = interval_for(warmed(lru(), &warm), &stream, clients, (hi, lo));
        // (ops/s, mean us, P99 us) per run.
        let mut figures = Vec::new();
        for (label, target) in runs {
            lab.step(format!("targets: {name}, {label}"));
            let mut policy = warmed(lru(), &warm);
            if let Some(target) = target {
                policy = policy.with_nhc(NhcConfig { target, ..nhc(None) }, 7);
            }
            let r = run_timed(&mut policy, &stream, clients, (hi, lo), interval_us);
            let (mean, p99) = steady_latency(&r);
            figures.push((steady(&r), mean, p99));
        }
        let paper = PAPER_TABLE_2[h];
        for (i, (label, _)) in runs.iter().enumerate() {
            let (ops, mean, p99) = figures[i];
            let (gb, paper_mean, paper_p99) = paper[i];
            rows.push(vec![
                name.to_string(),
                label.to_string(),
                f0(ops),
                format!("{:.2}", ops * PAGE as f64 / 1e9),
                f1(mean),
                f1(p99),
                format!("{gb} GB/s, {paper_mean} us, {paper_p99} us"),
            ]);
        }
        let (ops0, mean0, p990) = figures[0];
        for i in 1..=2 {
            let (ops, mean, p99) = figures[i];
            let (p_ops, p_mean, p_p99) =
                (paper[i].0 / paper[0].0, paper[i].1 / paper[0].1, paper[i].2 / paper[0].2);
            let case = format!("{name}, {}", runs[i].0);
            improves.push(
                Case::new(
                    format!("{case}: throughput, mean latency"),
                    format!("{}, {}", ratio(ops / ops0), ratio(mean / mean0)),
                    "above 1.00x, below 1.00x",
                    ops > ops0 && mean < mean0,
                )
                .paper(format!("{}, {}", ratio(p_ops), ratio(p_mean))),
            );
            raises.push(
                Case::new(format!("{case}: P99"), ratio(p99 / p990), "above 1.00x", p99 > p990)
                    .paper(ratio(p_p99)),
            );
        }
        let (_, _, p99_tail) = figures[3];
        let others = figures[1].2.min(figures[2].2);
        tail.push(
            Case::new(
                format!("{name}: P99 against classic's, and the other targets' best"),
                format!("{}, {}", ratio(p99_tail / p990), ratio(p99_tail / others)),
                "both below 1.00x",
                p99_tail < p990 && p99_tail < others,
            )
            .paper(format!(
                "{}, {}",
                ratio(paper[3].2 / paper[0].2),
                ratio(paper[3].2 / paper[1].2.min(paper[2].2))
            )),
        );
    }
    lab.table(
        "targets",
        &["hierarchy", "run", "ops/s", "GB/s", "mean us", "P99 us", "paper"],
        &rows,
    )?;
    let setting = "95% hits, read-only, 2x the cache device's parallelism in closed-loop clients (the paper's 8 saturate its devices; ours saturate at their parallelism); the second half of each run, P99 as the mean of its intervals' P99";
    lab.claim(
        Claim::shape(
            "Orthus section 6.1.3, Table 2",
            "Tuning for throughput or for average latency improves both metrics on both hierarchies",
            "for both hierarchies and both targets, NHC's throughput above classic's and its mean latency below",
        )
        .cases(improves)
        .context(setting),
    );
    lab.claim(
        Claim::shape(
            "Orthus section 6.1.3, Table 2",
            "... but raises tail latency, because the cache device has the better tail",
            "for both hierarchies and both targets, NHC's P99 above classic's",
        )
        .cases(raises)
        .context(format!("{setting}; our device models serve every request in a fixed time (latency plus transfer at a share of bandwidth), with no variance, so P99 here is queueing, which offloading relieves: the paper's reason, the cache device's better tail, needs a service-time tail the models do not have")),
    );
    lab.claim(
        Claim::shape(
            "Orthus section 6.1.3, Table 2",
            "With P99 as the target, Orthus-CAS has a better tail than Open CAS and than with the other targets",
            "for both hierarchies, the P99 target's P99 below classic's and below the other targets' best",
        )
        .cases(tail)
        .context(setting),
    );
    Ok(())
}

/// Uniform reads over `objects` blocks; a `writes` share of the requests writes one of the
/// first `touched` share of them, so under write-back that share of the reads finds its
/// block dirty (Orthus section 6.1.2's way of setting the dirty-read ratio).
fn dirty_stream(objects: u64, requests: u64, writes: f64, touched: f64, seed: u64) -> Vec<Request> {
    let mut rng = SeededRng::new(seed);
    let touched = ((objects as f64 * touched) as u64).max(1);
    (0..requests)
        .map(|i| match rng.chance(writes) {
            true => Request::new(i, rng.below(touched), BLOCK as u32, Op::Write),
            false => Request::new(i, rng.below(objects), BLOCK as u32, Op::Read),
        })
        .collect()
}

/// Figure 8: NHC against classic caching in write-around, write-back and write-through, by
/// write ratio and dirty-read ratio.
fn write_allocation(lab: &mut Lab, requests: u64, spread: f64) -> anyhow::Result<()> {
    lab.heading("Write-allocation policies and dirty reads (Figure 8)");
    const MODES: [CacheMode; 3] =
        [CacheMode::WriteAround, CacheMode::WriteBack, CacheMode::WriteThrough];
    const WRITES: [f64; 3] = [0.1, 0.3, 0.5];
    const DIRTY: [f64; 2] = [0.2, 0.8];
    let objects = (CACHE_BLOCKS as f64 / 0.95).round() as u64;
    let in_mode =
        |mode: CacheMode, warm: &[Request]| warmed(lru().in_mode(CasConfig::new(mode)), warm);
    // gain[hierarchy][dirty][mode][writes]
    let mut gain = [[[[0.0; WRITES.len()]; MODES.len()]; DIRTY.len()]; 2];
    let label = |h: usize, d: usize, m: usize, w: usize| {
        format!(
            "{}, {}, {:.0}% dirty, {:.0}% writes",
            PAIRS[h + 1].0,
            MODES[m].short().to_uppercase(),
            DIRTY[d] * 100.0,
            WRITES[w] * 100.0
        )
    };
    let mut rows = Vec::new();
    let mut all = Vec::new();
    for (h, &(name, hi, lo)) in PAIRS[1..].iter().enumerate() {
        let clients = 2 * preset(hi).parallelism as usize;
        for (d, dirty) in DIRTY.into_iter().enumerate() {
            for (w, writes) in WRITES.into_iter().enumerate() {
                let warm = dirty_stream(objects, objects * 4, writes, dirty, 3);
                let stream = dirty_stream(objects, requests, writes, dirty, 5);
                for (m, mode) in MODES.into_iter().enumerate() {
                    lab.step(format!(
                        "{name}, {:.0}% dirty, {:.0}% writes, {}",
                        dirty * 100.0,
                        writes * 100.0,
                        mode.short()
                    ));
                    let pair = (hi, lo);
                    let interval_us = interval_for(in_mode(mode, &warm), &stream, clients, pair);
                    let classic =
                        run_timed(&mut in_mode(mode, &warm), &stream, clients, pair, interval_us);
                    let mut p = in_mode(mode, &warm).with_nhc(nhc(None), 7);
                    let tuned = run_timed(&mut p, &stream, clients, pair, interval_us);
                    let g = steady(&tuned) / steady(&classic) - 1.0;
                    gain[h][d][m][w] = g;
                    all.push(Case::new(
                        label(h, d, m, w),
                        signed(g),
                        format!("above {}", signed(spread)),
                        g > spread,
                    ));
                    rows.push(vec![
                        name.to_string(),
                        pct(dirty),
                        pct(writes),
                        mode.short().to_uppercase(),
                        f0(steady(&classic)),
                        f0(steady(&tuned)),
                        signed(g),
                    ]);
                }
            }
        }
    }
    lab.table(
        "write-allocation",
        &["hierarchy", "writes touch", "writes", "mode", "classic ops/s", "NHC ops/s", "NHC gain"],
        &rows,
    )?;
    let setting = "95% read hits, 2x the cache device's parallelism in clients (the paper's 16); writes go to the first 20% or 80% of the blocks; Open CAS's ALRU cleaning waits for idle time, which a closed loop never has, so written blocks stay dirty until evicted";
    lab.claim(
        Claim::shape(
            "Orthus section 6.1.2, Figure 8",
            "NHC improves performance relative to classic caching with each write-allocation policy",
            "in every case (hierarchy, mode, write ratio, dirty-read ratio), NHC's gain over classic caching above the run-to-run spread of the gain",
        )
        .cases(all)
        .context(setting),
    );
    let wb = MODES.iter().position(|m| *m == CacheMode::WriteBack).expect("WB is run");
    lab.claim(
        Claim::shape(
            "Orthus section 6.1.2, Figure 8",
            "With write-back, NHC cannot offload reads of dirty blocks and does much better with fewer dirty reads",
            "for both hierarchies and every write ratio, NHC's gain in write-back with 20% dirty reads above its gain with 80%",
        )
        .cases((0..2).flat_map(|h| {
            (0..WRITES.len()).map(move |w| {
                let (few, many) = (gain[h][0][wb][w], gain[h][1][wb][w]);
                Case::new(
                    format!("{}, {:.0}% writes", PAIRS[h + 1].0, WRITES[w] * 100.0),
                    format!("{} against {}", signed(few), signed(many)),
                    "the first larger",
                    few > many,
                )
            })
        }))
        .context(setting),
    );
    lab.claim(
        Claim::shape(
            "Orthus section 6.1.2, Figure 8",
            "Write-around and write-through keep the copies consistent, so NHC's benefit does not depend on the dirty-read ratio",
            "for both hierarchies, WA and WT, every write ratio: NHC's gains with 20% and 80% of the blocks written within 5 points of each other",
        )
        .cases((0..2).flat_map(|h| {
            [0usize, 2].into_iter().flat_map(move |m| {
                (0..WRITES.len()).map(move |w| {
                    let (few, many) = (gain[h][0][m][w], gain[h][1][m][w]);
                    Case::new(
                        format!("{}, {}, {:.0}% writes", PAIRS[h + 1].0, MODES[m].short().to_uppercase(), WRITES[w] * 100.0),
                        format!("{} against {}", signed(few), signed(many)),
                        "within 5 points",
                        (few - many).abs() <= 0.05,
                    )
                })
            })
        }))
        .context(setting),
    );
    lab.claim(
        Claim::shape(
            "Orthus section 6.1.2, Figure 8",
            "NHC offers more benefit when there are fewer writes",
            "for every hierarchy, mode and dirty-read ratio, NHC's gain with 10% writes above its gain with 50%",
        )
        .cases((0..2).flat_map(|h| {
            (0..DIRTY.len()).flat_map(move |d| {
                (0..MODES.len()).map(move |m| {
                    let (few, many) = (gain[h][d][m][0], gain[h][d][m][WRITES.len() - 1]);
                    Case::new(
                        format!("{}, {}, {:.0}% dirty", PAIRS[h + 1].0, MODES[m].short().to_uppercase(), DIRTY[d] * 100.0),
                        format!("{} against {}", signed(few), signed(many)),
                        "the first larger",
                        few > many,
                    )
                })
            })
        }))
        .context(setting),
    );
    Ok(())
}

/// Figure 12c: YCSB-D, reads of recent inserts, on Optane SSD over flash in write-around (the
/// mode of Orthus-KV's Wisckey).
fn ycsb_d(lab: &mut Lab, requests: u64) -> anyhow::Result<()> {
    lab.heading("YCSB-D: the working set moves with the inserts (Figure 12c)");
    let warm_ops = requests / 2;
    let config = YcsbConfig {
        record_count: 65_536,
        operation_count: warm_ops + requests,
        record_bytes: BLOCK as u32,
        seed: 14,
        ..YcsbConfig::new(YcsbWorkload::D)
    };
    let all: Vec<Request> = Ycsb::new(config)?.collect();
    let (warm, stream) = all.split_at(warm_ops as usize);
    let pair = ("optane-ssd", "nvme");
    let wa = || warmed(lru().in_mode(CasConfig::new(CacheMode::WriteAround)), warm);
    let runs = [
        ("classic", None),
        ("NHC", Some(nhc(None))),
        ("NHC, admitting while tuning", Some(NhcConfig { held_data_admit: true, ..nhc(None) })),
    ];
    let mut reports = Vec::new();
    for (label, config) in &runs {
        lab.step(format!("YCSB-D, {label}"));
        let mut policy = wa();
        if let Some(config) = config {
            policy = policy.with_nhc(config.clone(), 7);
        }
        reports.push(run_timed(&mut policy, stream, 64, pair, 20_000));
    }
    let switches = |r: &TimedReport| {
        r.series
            .windows(2)
            .filter(|w| {
                w[0].knobs.get("data_admit") == Some(&0.0)
                    && w[1].knobs.get("data_admit") == Some(&1.0)
            })
            .count()
    };
    let mut rows = Vec::new();
    for ((label, _), r) in runs.iter().zip(&reports) {
        rows.push(vec![
            label.to_string(),
            f0(r.ops_per_second),
            pct(r.hit_ratio),
            f1(r.latency_us_mean),
            if r.series.iter().any(|p| p.knobs.contains_key("data_admit")) {
                switches(r).to_string()
            } else {
                "-".into()
            },
        ]);
    }
    lab.table(
        "ycsb-d",
        &["run", "ops/s", "hit ratio", "mean us", "returns to classic caching"],
        &rows,
    )?;
    // One line per run of an interval's figure over time.
    let over_time = |value: fn(&IntervalPoint) -> f64| -> Vec<Series> {
        let runs = runs.iter().zip(&reports);
        runs.map(|((label, _), r)| {
            series(*label, r.series.iter().map(|p| (p.start_seconds, value(p))).collect())
        })
        .collect()
    };
    for (name, title, y_label, value) in [
        (
            "ycsb-d-throughput",
            "YCSB-D on Optane SSD over Flash",
            "ops/s",
            (|p| p.ops_per_second) as fn(&IntervalPoint) -> f64,
        ),
        ("ycsb-d-hit-ratio", "YCSB-D: hit ratio over time", "hit ratio", |p| p.hit_ratio),
    ] {
        let chart = Chart {
            title,
            x_label: "virtual seconds",
            y_label,
            log_x: None,
            x_format: |x| format!("{x:.1}"),
            y_format: None,
            series: &over_time(value),
        };
        lab.chart(name, &chart)?;
    }
    let (classic, tuned, admitting) = (&reports[0], &reports[1], &reports[2]);
    lab.claim(
        Claim::shape(
            "Orthus section 6.3.2, Figure 12c",
            "On YCSB-D NHC's hit rate decays while it tunes without admitting, it returns to classic caching, and the cycle resumes; it stays above classic caching",
            "NHC returns to classic caching at least twice, and its throughput over the run is above classic's",
        )
        .case(Case::at_least("returns to classic caching", switches(tuned) as f64, 2.0, |x| format!("{x:.0}")))
        .case(Case::at_least("NHC against classic, ops/s", tuned.ops_per_second / classic.ops_per_second, 1.0, ratio))
        .context("65,536 records of 4 KiB (8192 fit), 5% inserts, reads Zipf 0.99 over recency (YCSB's latest), 64 clients, write-around: an insert is not cached until it is read"),
    );
    let std_dev = |r: &TimedReport| {
        let h: Vec<f64> = r.series.iter().map(|p| p.hit_ratio).collect();
        let mean = h.iter().sum::<f64>() / h.len().max(1) as f64;
        (h.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / h.len().max(1) as f64).sqrt()
    };
    lab.claim(
        Claim::shape(
            "Orthus section 6.3.2, Figure 12c",
            "Admitting data while tuning load_admit keeps the hit rate stable, without the abrupt phases of admitting",
            "the spread (standard deviation) of the interval hit ratios is smaller with admission kept on than without",
        )
        .case(Case::new(
            "hit ratio spread, admitting against not",
            format!("{} against {}", pct(std_dev(admitting)), pct(std_dev(tuned))),
            "the first smaller",
            std_dev(admitting) < std_dev(tuned),
        )),
    );
    Ok(())
}

/// YCSB-C (read-only) over Zipf 0.6-0.99 on Optane SSD + Flash, many clients.
fn ycsb_c(lab: &mut Lab, requests: u64, spread: f64) -> anyhow::Result<()> {
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
        cases.push(Case::new(
            format!("Zipf {theta}"),
            signed(gain),
            format!("above {}", signed(spread)),
            gain > spread,
        ));
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
            log_x: None,
            x_format: |x| format!("{x:.2}"),
            y_format: None,
            series: &[series("classic", classic_points), series("NHC", nhc_points)],
        },
    )?;
    lab.claim(
        Claim::shape(
            "Orthus section 6.2, Figure 9",
            "On YCSB-C (Zipfian reads), NHC outperforms classic caching",
            "for every Zipf exponent, NHC's gain over classic caching above the run-to-run spread of the gain",
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
            log_x: None,
            x_format: |x| format!("{x:.1}"),
            y_format: None,
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
            log_x: None,
            x_format: |x| format!("{x:.1}"),
            y_format: None,
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
    let tuning = |points: &[IntervalPoint]| {
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
            "Orthus section 6.3.2, Figure 12b",
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
