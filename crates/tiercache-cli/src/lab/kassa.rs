//! Kassa et al. (ATC'21): a DRAM + SCM block cache in front of flash, and where blocks go.

use std::collections::HashMap;

use tiercache_core::{Capacity, DeviceProfile, Op, Request};
use tiercache_policy::{AnyPolicy, Placement, PolicyConfig};
use tiercache_workload::gen::mixgraph::{Mixgraph, MixgraphConfig};
use tiercache_workload::gen::KeyDistribution;

use super::*;

/// Blocks per scaled "GB": the paper's GB become MiB.
const PER_GB: u64 = 256;
const CLIENTS: usize = 32;
const SPLITS: [(u64, u64); 4] = [(64, 0), (64, 128), (32, 128), (32, 256)];

#[derive(Clone, Copy)]
enum Layout {
    Hybrid(Placement),
    AllDram,
    AllScm,
}

const LAYOUTS: [(&str, Layout); 6] = [
    ("DRAM-first", Layout::Hybrid(Placement::DramFirst)),
    ("SCM-first(2)", Layout::Hybrid(Placement::ScmFirst { threshold: 2 })),
    ("SCM-first(6)", Layout::Hybrid(Placement::ScmFirst { threshold: 6 })),
    ("Bidirectional(4)", Layout::Hybrid(Placement::Bidirectional { threshold: 4 })),
    ("all-SCM", Layout::AllScm),
    ("all-DRAM", Layout::AllDram),
];

/// The devices of Kassa et al.'s Table 1 (per module, from product specifications): DRAM
/// 75 ns and 15 GB/s, SCM 170 ns and 2.4 GB/s read, flash 85 us and 1.6 GB/s. The table gives
/// read figures only: write latency and bandwidth, parallelism and interference come from our
/// presets of the same kind (`dram`, `optane-dcpm`, `nvme`).
fn paper_devices() -> [DeviceProfile; 3] {
    let with = |preset_name: &str, name: &str, latency_us: f64, bandwidth: f64| DeviceProfile {
        name: name.to_string(),
        read_latency_us: latency_us,
        read_bandwidth_gb_s: bandwidth,
        ..preset(preset_name)
    };
    [
        with("dram", "kassa-dram", 0.075, 15.0),
        with("optane-dcpm", "kassa-scm", 0.17, 2.4),
        with("nvme", "kassa-flash", 85.0, 1.6),
    ]
}

/// One run's figures.
#[derive(Clone, Copy)]
struct Figures {
    ops: f64,
    p95: f64,
    per_cost: f64,
}

/// Per split, per layout; `None` where a layout needs SCM and the split has none.
type Results = Vec<Vec<Option<Figures>>>;

/// Every layout at every split over `devices` (DRAM, SCM, flash).
fn sweep(
    lab: &mut Lab,
    labels: [&str; 2],
    devices: &[DeviceProfile; 3],
    warm: &[Request],
    stream: &[Request],
    rows: &mut Vec<Vec<String>>,
) -> anyhow::Result<Results> {
    let [workload, devices_label] = labels;
    let mut results = Vec::new();
    for (dram, scm) in SPLITS {
        let mut per_split = Vec::new();
        for (name, layout) in LAYOUTS {
            if scm == 0 && !matches!(layout, Layout::AllDram) {
                per_split.push(None);
                continue;
            }
            lab.step(format!("{workload}, {devices_label}: {dram}-{scm}, {name}"));
            let lru = PolicyConfig::Lru;
            let (d, s) = (Capacity::objects(dram * PER_GB), Capacity::objects(scm * PER_GB));
            let whole = Capacity::objects((dram + scm) * PER_GB);
            let [dram_device, scm_device, flash] = devices.clone();
            let (policy, tiers, cost) = match layout {
                Layout::Hybrid(placement) => (
                    AnyPolicy::hybrid(placement, &lru, &lru, [d, s], &[], 1)?,
                    vec![dram_device, scm_device],
                    dram as f64 + 0.38 * scm as f64,
                ),
                Layout::AllDram => (
                    AnyPolicy::from_config(&lru, whole, &[], 1)?,
                    vec![dram_device],
                    (dram + scm) as f64,
                ),
                Layout::AllScm => (
                    AnyPolicy::from_config(&lru, whole, &[], 1)?,
                    vec![scm_device],
                    0.38 * (dram + scm) as f64,
                ),
            };
            let mut policy = warmed(policy, warm);
            let r = timed(&mut policy, stream, CLIENTS, tiers, flash, 100_000);
            let per_cost = r.ops_per_second / cost;
            rows.push(vec![
                workload.to_string(),
                devices_label.to_string(),
                format!("{dram}-{scm}"),
                name.to_string(),
                f0(r.ops_per_second),
                f1(r.latency_us_p95),
                pct(r.hit_ratio),
                f1(cost),
                f1(per_cost),
            ]);
            per_split.push(Some(Figures {
                ops: r.ops_per_second,
                p95: r.latency_us_p95,
                per_cost,
            }));
        }
        results.push(per_split);
    }
    Ok(results)
}

/// Mixgraph with RocksDB's fit over a database of `blocks` 4 KiB data blocks.
fn mixgraph(blocks: u64, seed: u64) -> MixgraphConfig {
    let fit = MixgraphConfig { seed, ..Default::default() };
    let keys = (blocks as f64 * BLOCK as f64 / fit.mean_record_bytes()) as u64;
    MixgraphConfig { keys, operations: u64::MAX, ..fit }
}

/// The block cache's view of mixgraph: the data blocks its Gets and Seeks read, over a
/// database of `blocks` 4 KiB blocks. Puts go to RocksDB's memtable, not the block cache.
fn mixgraph_reads(blocks: u64, reads: u64, seed: u64) -> Vec<Request> {
    let config = MixgraphConfig { block_bytes: Some(BLOCK as u32), ..mixgraph(blocks, seed) };
    Mixgraph::new(config)
        .expect("a valid mixgraph")
        .filter(|r| r.op == Op::Read)
        .take(reads as usize)
        .collect()
}

/// The share of accesses that go to the most accessed tenth of the keys accessed (Kassa et
/// al.'s Figure 6 measure of locality).
fn top_tenth_share(keys: impl Iterator<Item = u64>) -> f64 {
    let mut counts: HashMap<u64, u64> = HashMap::new();
    for key in keys {
        *counts.entry(key).or_default() += 1;
    }
    let mut by_count: Vec<u64> = counts.into_values().collect();
    by_count.sort_unstable_by(|a, b| b.cmp(a));
    let total: u64 = by_count.iter().sum();
    let top: u64 = by_count[..by_count.len().div_ceil(10)].iter().sum();
    top as f64 / total.max(1) as f64
}

const WORKLOADS: [&str; 2] = ["Zipf 0.9", "mixgraph"];

pub fn run(lab: &mut Lab) -> anyhow::Result<()> {
    let requests = lab.scale.requests(1_600_000);
    let objects = 512 * PER_GB;
    lab.setup(format!(
        "DRAM and SCM LRU block caches over flash, {CLIENTS} closed-loop clients, {requests} block \
         reads per run after an untimed warm-up, over a database of 512 scaled GB (the paper's GB \
         are MiB here, 1000x smaller). The paper's workloads are Facebook's (WhatsApp, Tectonic, \
         Laser) through db_bench; ours are two stand-ins: a read-only scrambled Zipf 0.9 over the \
         blocks, and db_bench's mixgraph model (Cao et al., FAST'20) with RocksDB's documented \
         fit (`tiercache trace gen --mixgraph --block-size 4KiB`): keys in 30 ranges of \
         two-term-exponential hotness, a power law within a range, Pareto value sizes (48-byte \
         keys, {:.1} records per 4 KiB data block), 85% Gets, 14% Puts, 1% Seeks; the block cache \
         sees the blocks the Gets and Seeks read (Puts go to the memtable).",
        BLOCK as f64 / MixgraphConfig::default().mean_record_bytes()
    ));
    lab.setup(
        "Two sets of devices: the paper's own (Table 1: DRAM 75 ns / 15 GB/s, SCM 170 ns / 2.4 GB/s \
         read per module, flash 85 us / 1.6 GB/s; what the table leaves out from our presets), \
         which the claims are judged on, and our presets (`dram`, `optane-dcpm`, `nvme`) beside \
         them.",
    );
    lab.setup(
        "Splits DRAM-SCM 64-0, 64-128, 32-128, 32-256. all-SCM and all-DRAM put the split's whole \
         size in one tier. Cost: DRAM 1 per GB, SCM 0.38 per GB (the paper's ratio).",
    );
    let dist = KeyDistribution::ScrambledZipf { theta: 0.9 };
    let warm_reads = lab.scale.requests(4 * objects);
    let streams = [
        (
            blocks(dist.clone(), objects, warm_reads, 1.0, 20),
            blocks(dist, objects, requests, 1.0, 21),
        ),
        (mixgraph_reads(objects, warm_reads, 20), mixgraph_reads(objects, requests, 21)),
    ];
    let mut rows = Vec::new();
    let presets = [preset("dram"), preset("optane-dcpm"), preset("nvme")];
    let mut paper = Vec::new();
    let mut ours = Vec::new();
    for (workload, (warm, stream)) in WORKLOADS.iter().zip(&streams) {
        let labels = [*workload, "paper's devices"];
        paper.push(sweep(lab, labels, &paper_devices(), warm, stream, &mut rows)?);
        let labels = [*workload, "our presets"];
        ours.push(sweep(lab, labels, &presets, warm, stream, &mut rows)?);
    }
    lab.heading("Placements across DRAM-SCM splits");
    lab.table(
        "placements",
        &[
            "workload",
            "devices",
            "DRAM-SCM",
            "layout",
            "ops/s",
            "p95 us",
            "hit ratio",
            "cost",
            "ops/s per cost",
        ],
        &rows,
    )?;
    for (w, workload) in WORKLOADS.iter().enumerate() {
        let chart_series: Vec<Series> = LAYOUTS
            .iter()
            .enumerate()
            .map(|(l, (name, _))| {
                let points = paper[w]
                    .iter()
                    .enumerate()
                    .filter_map(|(s, split)| split[l].map(|f| (s as f64, f.ops)))
                    .collect();
                series(*name, points)
            })
            .collect();
        let title =
            format!("Throughput by layout and DRAM-SCM split, {workload} (the paper's devices)");
        let name = if w == 0 { "placements".to_string() } else { format!("placements-{workload}") };
        lab.chart(
            &name,
            &Chart {
                title: &title,
                x_label: "split (0: 64-0, 1: 64-128, 2: 32-128, 3: 32-256)",
                y_label: "ops/s",
                log_x: false,
                x_format: |x| {
                    ["64-0", "64-128", "32-128", "32-256"]
                        .get(x.round() as usize)
                        .unwrap_or(&"")
                        .to_string()
                },
                series: &chart_series,
            },
        )?;
    }

    let get = |set: &Results, s: usize, l: usize| set[s][l].expect("a run");
    let hybrid_splits = 1..SPLITS.len();
    let split_name = |s: usize| format!("{}-{}", SPLITS[s].0, SPLITS[s].1);
    // Every claim is judged on both workloads: its cases are per workload and split.
    let cases: Vec<(usize, &str, usize)> = WORKLOADS
        .iter()
        .enumerate()
        .flat_map(|(w, name)| hybrid_splits.clone().map(move |s| (w, *name, s)))
        .collect();
    let each = || cases.iter().copied();

    let mut claim = Claim::shape(
        "Kassa section 4.2, section 6",
        "DRAM-first is the best of the admission policies: insert in DRAM, DRAM victims to SCM",
        "on both workloads, at every split with SCM, DRAM-first's throughput is at least 0.99 of each of SCM-first(2), SCM-first(6) and Bidirectional(4)",
    );
    for (w, workload, s) in each() {
        for (l, (rival, _)) in LAYOUTS.iter().enumerate().take(4).skip(1) {
            let r = get(&paper[w], s, 0).ops / get(&paper[w], s, l).ops;
            claim = claim.case(Case::at_least(
                format!("{workload}, {} against {rival}", split_name(s)),
                r,
                0.99,
                ratio,
            ));
        }
    }
    lab.claim(claim.context("DRAM-first never promotes: a block demoted once is served from SCM until it leaves; SCM-first moves a block hit T times in SCM up to DRAM"));

    let p95_of = |w: usize, s: usize| get(&paper[w], s, 0).p95 / get(&paper[w], 0, 5).p95 - 1.0;
    let gain_of = |w: usize, s: usize| get(&paper[w], s, 0).ops / get(&paper[w], 0, 5).ops - 1.0;
    lab.claim(
        Claim::shape(
            "Kassa abstract, section 6",
            "Adding SCM to the small-DRAM server (64 GB) improves throughput by up to 80% and P95 latency by up to 20%",
            "on both workloads, at every split with SCM, DRAM-first against 64-0 all-DRAM: throughput change in (0%, +80%] and P95 latency change in [-20%, 0%)",
        )
        .cases(each().flat_map(|(w, workload, s)| {
            let (gain, p95) = (gain_of(w, s), p95_of(w, s));
            [
                Case::new(format!("{workload}, {}: throughput", split_name(s)), signed(gain), "in (0%, +80%]", gain > 0.0 && gain <= 0.8).paper("up to +80%"),
                Case::new(format!("{workload}, {}: P95 latency", split_name(s)), signed(p95), "in [-20%, 0%)", (-0.2..0.0).contains(&p95)).paper("down up to 20%"),
            ]
        }))
        .context("more cache in total means fewer flash reads; the P95 of a read that misses is the flash's, so P95 falls only when the 95th percentile moves from a flash read to a cache hit"),
    );

    let slower = |set: &Results, s: usize| 1.0 - get(set, s, 4).ops / get(set, s, 5).ops;
    lab.claim(
        Claim::shape(
            "Kassa section 3.1, Figure 4a",
            "A block cache all in SCM is 13-57% slower than the same cache in DRAM",
            "on both workloads, at every total size, all-SCM's throughput is 13% to 57% below all-DRAM's",
        )
        .cases(each().map(|(w, workload, s)| {
            Case::between(format!("{workload}, {} GB total", SPLITS[s].0 + SPLITS[s].1), slower(&paper[w], s), (0.13, 0.57), pct)
                .paper("13-57%")
        }))
        .context(format!(
            "every hit pays SCM's latency and its share of SCM's bandwidth; with our presets (optane-dcpm, 300 ns, 6.8 GB/s) the loss is {}",
            each().map(|(w, workload, s)| format!("{} ({workload}, {} GB)", pct(slower(&ours[w], s)), SPLITS[s].0 + SPLITS[s].1)).collect::<Vec<_>>().join(", ")
        )),
    );

    let hybrid_gain =
        |w: usize, s: usize| get(&paper[w], s, 0).ops / get(&paper[w], s, 4).ops - 1.0;
    lab.claim(
        Claim::shape(
            "Kassa section 3.1, Figure 4b",
            "The hybrid cache is up to 45% faster than the naive all-SCM block cache",
            "on both workloads, at every split with SCM, DRAM-first's throughput is above all-SCM's of the same total size by more than 0% and at most 45%",
        )
        .cases(each().map(|(w, workload, s)| {
            let g = hybrid_gain(w, s);
            Case::new(format!("{workload}, {}", split_name(s)), signed(g), "in (0%, +45%]", g > 0.0 && g <= 0.45).paper("up to +45%")
        })),
    );
    lab.claim(
        Claim::shape(
            "Kassa section 3.2, Figure 5b",
            "Throughput per cost of 32-256 is above that of 64-0 for read-dominated workloads",
            "memory cost only, on both workloads: 32-256 DRAM-first's ops/s per cost unit above 64-0's",
        )
        .cases(WORKLOADS.iter().enumerate().map(|(w, workload)| {
            let (small, large) = (get(&paper[w], 3, 0).per_cost, get(&paper[w], 0, 5).per_cost);
            Case::at_least(format!("{workload}, 32-256 over 64-0"), small / large, 1.0, ratio)
        }))
        .context("the paper prices whole servers (1P with SCM against 2P); we price memory alone, DRAM 1 and SCM 0.38 per GB"),
    );

    // Locality of the stand-ins, measured on the streams the runs above read: Zipf's keys are
    // its blocks; mixgraph's are its keys, from the key-value view of the same model.
    let mixgraph_keys =
        Mixgraph::new(MixgraphConfig { operations: requests, ..mixgraph(objects, 21) })?;
    let shares = [
        top_tenth_share(streams[0].1.iter().map(|r| r.key)),
        top_tenth_share(mixgraph_keys.filter(|r| r.op == Op::Read).map(|r| r.key)),
    ];
    lab.claim(
        Claim::value(
            "Kassa section 3.2, Figure 6",
            "Key-value locality: 10% of the key-value pairs carry 50% of the accesses (WhatsApp, Tectonic Metadata, Laser)",
            "for each stand-in workload, the most accessed 10% of the keys accessed carry within 10 points of 50% of the accesses",
        )
        .cases(WORKLOADS.iter().zip(shares).map(|(workload, share)| {
            Case::near(format!("{workload}: share of accesses to the top 10% of keys"), share, 0.5, 0.1, pct).paper("50%")
        }))
        .context("this judges the stand-ins, not tiercache: a stand-in far from 50% has more (above) or less (below) locality than the paper's workloads, and the cases above on it weigh accordingly"),
    );
    lab.claim(Claim::untested(
        "Kassa section 5, db_bench",
        "The gains hold on the paper's production workloads (WhatsApp, Tectonic Metadata, Laser) through db_bench",
        "the production workloads and the db_bench profiles distilled from them are Facebook's and not published; every claim above has cases on mixgraph, db_bench's model of Facebook's RocksDB workloads with its published fit, as the nearest stand-in",
    ));
    Ok(())
}
