//! Kassa et al. (ATC'21): a DRAM + SCM block cache in front of flash, and where blocks go.

use std::collections::HashMap;

use tiercache_core::{Capacity, DeviceProfile, Op, Request};
use tiercache_policy::{AnyPolicy, Placement, PolicyConfig};
use tiercache_workload::gen::mixgraph::{Mixgraph, MixgraphConfig};
use tiercache_workload::gen::KeyDistribution;

use super::*;

/// The paper's data block: "In our case, the optimal size was 16KB" (section 4.1.1).
const KASSA_BLOCK: u64 = 16 * 1024;
/// Blocks per scaled "GB": the paper's GB become MiB (1/1024 of the size).
const PER_GB: u64 = (1 << 20) / KASSA_BLOCK;
/// The database: "our hybrid DRAM-SCM cache configuration to accommodate several workloads
/// with larger DB sizes (2TB total KV storage per server)" (section 3.2), in scaled GB.
const DB_GB: u64 = 2048;
/// The DRAM that is not block cache: "Out of this DRAM, memtable, index, and filter blocks
/// consume 10-15 GBs" (section 3.1); the middle of the range, in blocks of scaled GB.
const RESERVED_GB: f64 = 12.5;
const RESERVED: u64 = (RESERVED_GB * PER_GB as f64) as u64;
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

/// One run of `layout` at DRAM-SCM `split` over `devices` (DRAM, SCM, flash), warmed by `warm`
/// and timed over `stream`; its report and its memory's cost.
fn one(
    layout: Layout,
    (dram, scm): (u64, u64),
    devices: &[DeviceProfile; 3],
    warm: &[Request],
    stream: &[Request],
) -> anyhow::Result<(TimedReport, f64)> {
    let lru = PolicyConfig::Lru;
    // The server's DRAM less what the memtables, index and filter blocks take is block cache.
    let dram_cache = dram * PER_GB - RESERVED;
    let (d, s) = (Capacity::objects(dram_cache), Capacity::objects(scm * PER_GB));
    let whole = Capacity::objects(dram_cache + scm * PER_GB);
    let [dram_device, scm_device, flash] = devices.clone();
    let (policy, tiers, cost) = match layout {
        Layout::Hybrid(placement) => (
            AnyPolicy::hybrid(placement, &lru, &lru, [d, s], &[], 1)?,
            vec![dram_device, scm_device],
            dram as f64 + SCM_COST * scm as f64,
        ),
        Layout::AllDram => {
            (AnyPolicy::from_config(&lru, whole, &[], 1)?, vec![dram_device], (dram + scm) as f64)
        }
        // The whole block cache in SCM; the memtables, index and filter blocks stay in DRAM.
        Layout::AllScm => (
            AnyPolicy::from_config(&lru, whole, &[], 1)?,
            vec![scm_device],
            RESERVED_GB + SCM_COST * (dram as f64 - RESERVED_GB + scm as f64),
        ),
    };
    let mut policy = warmed(policy, warm);
    Ok((timed(&mut policy, stream, CLIENTS, tiers, flash, 100_000), cost))
}

/// The SCM's cost per GB relative to DRAM's (Kassa et al.).
const SCM_COST: f64 = 0.38;

/// The paper's devices with `modules` SCM modules of Table 1's figures, interleaved: `modules`
/// times the bandwidth, shared by as many operations at once as one module's (so each
/// operation's share grows with it), and with or without Optane's write-to-read interference
/// on the SCM.
fn with_modules(modules: u32, interference: bool) -> [DeviceProfile; 3] {
    let [dram, scm, flash] = paper_devices();
    let n = modules as f64;
    let scm = DeviceProfile {
        name: format!("kassa-scm-x{modules}"),
        read_bandwidth_gb_s: scm.read_bandwidth_gb_s * n,
        write_bandwidth_gb_s: scm.write_bandwidth_gb_s * n,
        read_share_one_writer: if interference { scm.read_share_one_writer } else { 1.0 },
        read_share_eight_writers: if interference { scm.read_share_eight_writers } else { 1.0 },
        ..scm
    };
    [dram, scm, flash]
}

/// A point of the sweeps: the module count, and DRAM-first at 64-128 and at 32-256.
type SweptPoint = (f64, [Figures; 2]);

/// One run's figures.
#[derive(Clone, Copy)]
struct Figures {
    ops: f64,
    p95: f64,
    per_cost: f64,
    hits: f64,
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
            let (r, cost) = one(layout, (dram, scm), devices, warm, stream)?;
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
                hits: r.hit_ratio,
            }));
        }
        results.push(per_split);
    }
    Ok(results)
}

/// A headline result swept over the SCM's module count, from the paper's setup of one.
fn by_modules<'a>(
    name: &'a str,
    result: &'a str,
    measure: &'a str,
    y_format: fn(f64) -> String,
    lines: Vec<Line>,
    note: String,
) -> Sensitivity<'a> {
    Sensitivity {
        name,
        result,
        assumption: "SCM modules",
        measure,
        x_format: |x| format!("{x:.0}"),
        y_format,
        paper_x: 1.0,
        paper_setup: "Table 1's devices with one SCM module (2.4 GB/s) and Optane's write-to-read interference, the paper's DRAM and SCM sizes less 12.5 GB of DRAM for memtables, index and filters, 16 KiB blocks, a 2 TB database (all scaled 1/1024)",
        lines,
        note,
    }
}

/// Mixgraph with RocksDB's fit over a database of `blocks` 16 KiB data blocks.
fn mixgraph(blocks: u64, seed: u64) -> MixgraphConfig {
    let fit = MixgraphConfig { seed, ..Default::default() };
    let keys = (blocks as f64 * KASSA_BLOCK as f64 / fit.mean_record_bytes()) as u64;
    MixgraphConfig { keys, operations: u64::MAX, ..fit }
}

/// The block cache's view of mixgraph: the data blocks its Gets and Seeks read, over a
/// database of `blocks` 16 KiB blocks. Puts go to RocksDB's memtable, not the block cache.
fn mixgraph_reads(blocks: u64, reads: u64, seed: u64) -> Vec<Request> {
    let config = MixgraphConfig { block_bytes: Some(KASSA_BLOCK as u32), ..mixgraph(blocks, seed) };
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

/// The large-DRAM 2P server's block cache (Figure 1a: 256 GB of DRAM).
const TWO_P: (u64, u64) = (256, 0);

/// SCM module counts the headline results are swept over: one to a socket's six channels.
const MODULES: [u32; 5] = [1, 2, 3, 4, 6];

/// The lines of the sweeps: (workload, the SCM's write interference, name).
const SWEPT: [(usize, bool, &str); 3] =
    [(0, true, "Zipf 0.9"), (1, true, "mixgraph"), (1, false, "mixgraph, no interference")];

/// The headline results' setup as the paper states it beside the lab's.
pub(super) fn fidelity(requests: u64) -> Fidelity {
    use super::fidelity::{KASSA, WRITES_HURT};
    let scale = 1.0 / 1024.0;
    let scaled = || {
        How::Scaled {
        factor: scale,
        why: "every size 1/1024 (the paper's GB are MiB here), so a run takes seconds; the sizes keep their ratios".into(),
    }
    };
    // The transcription keeps Table 1's caption and header but not its figures; they are the
    // ones shared/papers/README.md gives for it.
    let table_1 =
        (KASSA, 9, "Table 1: Example of memory characteristics of DRAM, SCM and flash per module");
    let [dram, scm, flash] = paper_devices();
    let table_row = |name: &str, what: &str, paper: Value, lab: Value| {
        let name =
            format!("{name} (Table 1: {what}, as the papers' README gives its lost figures)");
        Param::stated(&name, table_1, paper, lab, How::Same)
    };
    Fidelity::new(
        "Kassa abstract and Figures 4-5 (the placements, the 1P server against the 2P)",
        vec![
            Param::stated("data block size", (KASSA, 17, "The data block size is configurable in RocksDB. In our case, the optimal size was 16KB"), Value::kib(16.0), Value::Bytes(KASSA_BLOCK as f64), How::Same),
            Param::stated("database size", (KASSA, 15, "larger DB sizes ( 2TB total KV storage per server)"), Value::gib(2048.0), Value::mib(DB_GB as f64), scaled()),
            Param::stated("DRAM not block cache", (KASSA, 13, "Out of this DRAM, memtable, index, and filter blocks consume 10-15 GBs"), Value::ByteRange(10.0 * GIB, 15.0 * GIB), Value::mib(RESERVED_GB), scaled()),
            Param::stated("small-DRAM 1P server", (KASSA, 9, "Server with reduced (64GB) memory"), Value::gib(64.0), Value::mib(SPLITS[0].0 as f64), scaled()),
            Param::stated("DRAM-SCM splits", (KASSA, 13, "Figures 3 and 4b's axis, DRAM (GB) - SCM(GB): 32 - 64, 32 - 128, 32 - 256"), Value::words("32-64, 32-128, 32-256 (and 64-0)"), Value::words("64-128, 32-128, 32-256 (and 64-0)"), How::Differs("64-128 added (the abstract's 'adding SCM to the 64 GB server'); 32-64 left out: the smallest SCM tells least, and each split costs a run of every layout".into())),
            Param::stated("large-DRAM 2P server", (KASSA, 9, "256GB memory, high hit rate to DRAM and low IO utilization"), Value::gib(256.0), Value::mib(TWO_P.0 as f64), scaled()),
            table_row("DRAM read latency", "DRAM 75 ns", Value::Number(75.0, "ns"), Value::Number(dram.read_latency_us * 1000.0, "ns")),
            table_row("DRAM read bandwidth", "DRAM 15 GB/s", Value::Number(15.0, "GB/s"), Value::Number(dram.read_bandwidth_gb_s, "GB/s")),
            table_row("SCM read latency", "SCM 170 ns", Value::Number(170.0, "ns"), Value::Number(scm.read_latency_us * 1000.0, "ns")),
            table_row("SCM read bandwidth per module", "SCM 2.4 GB/s", Value::Number(2.4, "GB/s"), Value::Number(scm.read_bandwidth_gb_s, "GB/s")),
            table_row("flash read latency", "flash 85 us", Value::Number(85_000.0, "ns"), Value::Number(flash.read_latency_us * 1000.0, "ns")),
            table_row("flash read bandwidth", "flash 1.6 GB/s", Value::Number(1.6, "GB/s"), Value::Number(flash.read_bandwidth_gb_s, "GB/s")),
            Param::stated("SCM cost per GB against DRAM's", (WRITES_HURT, 303, "We use the NVRAM/DRAM per-byte cost ratio of 0.38, same as in a recent study with Optane memory"), Value::Number(0.38, ""), Value::Number(SCM_COST, ""), How::Same),
            Param::stated("workloads", (KASSA, 7, "WhatsApp, Tectonic Metadata, and Laser"), Value::words("WhatsApp, Tectonic Metadata, Laser through db_bench"), Value::words("Zipf 0.9 over the blocks; db_bench's mixgraph with RocksDB's published fit"), How::Differs("Facebook's workloads and their db_bench profiles are not published; mixgraph is db_bench's own model of Facebook's RocksDB workloads (Cao et al., FAST'20)".into())),
            Param::assumed("SCM modules", Value::Number(1.0, "module"), How::Swept("1 to 6 ('Where the headline results flip'); the transcription stops before the server's description, so the paper's count is not known".into())),
            Param::assumed("SCM write-to-read interference", Value::words("Optane's (Writes Hurt: reads keep 3.4 of 12 GB/s beside one writer)"), How::Swept("with and without, on mixgraph".into())),
            Param::assumed("write latency and bandwidth, parallelism", Value::words("from the presets dram, optane-dcpm, nvme"), How::Assumed("Table 1 gives read figures only; the block cache is read-only, so writes are the DRAM-first demotions into SCM, whose cost the interference sweep varies".into())),
            Param::assumed("clients", Value::Number(CLIENTS as f64, "closed-loop clients"), How::Assumed("enough to keep the flash's 32 operations in flight; the paper's db_bench thread count is not in the transcription".into())),
            Param::assumed("run length", Value::Number(requests as f64, "block reads"), How::Assumed("after an untimed warm-up of four reads per block of the database, so every layout starts full".into())),
        ],
    )
}

const GIB: f64 = 1024.0 * 1024.0 * 1024.0;

pub fn run(lab: &mut Lab) -> anyhow::Result<()> {
    let requests = lab.scale.requests(1_600_000);
    lab.fidelity(fidelity(requests))?;
    setup(lab, requests);
    let runs = placements(lab, requests)?;
    let spread = spread(lab, &runs)?;
    placement_claims(lab, &runs, spread);
    let two_p = against_2p(lab, &runs)?;
    module_sweeps(lab, &runs, &two_p)?;
    locality(lab, &runs)
}

/// The setup's lines of the report.
fn setup(lab: &mut Lab, requests: u64) {
    lab.setup(format!(
        "DRAM and SCM LRU block caches over flash, {CLIENTS} closed-loop clients, {requests} reads of \
         16 KiB data blocks per run after an untimed warm-up, over a database of {DB_GB} scaled GB \
         (the paper's 2 TB; the paper's GB are MiB here, 1/1024 of the size). Of each server's \
         DRAM, {RESERVED_GB} GB go to memtables, index and filter blocks (the paper's 10-15 GB) \
         and the rest is block cache. The paper's workloads are Facebook's (WhatsApp, Tectonic, \
         Laser) through db_bench; ours are two stand-ins: a read-only scrambled Zipf 0.9 over the \
         blocks, and db_bench's mixgraph model (Cao et al., FAST'20) with RocksDB's documented \
         fit (`tiercache trace gen --mixgraph --block-size 16KiB`): keys in 30 ranges of \
         two-term-exponential hotness, a power law within a range, Pareto value sizes (48-byte \
         keys, {:.1} records per 16 KiB data block), 85% Gets, 14% Puts, 1% Seeks; the block cache \
         sees the blocks the Gets and Seeks read (Puts go to the memtable).",
        KASSA_BLOCK as f64 / MixgraphConfig::default().mean_record_bytes()
    ));
    lab.setup(
        "Two sets of devices: the paper's own (Table 1: DRAM 75 ns / 15 GB/s, SCM 170 ns / 2.4 GB/s \
         read per module, flash 85 us / 1.6 GB/s; what the table leaves out from our presets), \
         which the claims are judged on, and our presets (`dram`, `optane-dcpm`, `nvme`) beside \
         them. The paper's SCM module count is not known (the transcription stops before its \
         server's description): the claims use one module, the fewest its SCM sizes allow, and \
         the sweeps at the end run 1 to 6. From the `optane-dcpm` preset the SCM takes Optane's \
         write-to-read interference (Writes Hurt: reads keep 3.4 of 12 GB/s beside one writer, \
         0.8 beside eight): every DRAM victim a DRAM-first cache demotes is a write to it; the \
         sweeps run with and without it.",
    );
    lab.setup(
        "Splits DRAM-SCM 64-0, 64-128, 32-128, 32-256. all-SCM and all-DRAM put the split's whole \
         block cache in one tier (the memtables, index and filters stay in DRAM). Cost: DRAM 1 \
         per GB, SCM 0.38 per GB (the paper's ratio), memory alone.",
    );
}

/// Every layout at every split on both workloads, over the paper's devices and over our
/// presets: what the claims are judged on, and the streams the runs read.
struct Runs {
    requests: u64,
    objects: u64,
    dist: KeyDistribution,
    /// Per workload, (warm-up, measured).
    streams: [(Vec<Request>, Vec<Request>); 2],
    /// Per workload, on the paper's devices and on our presets.
    paper: Vec<Results>,
    ours: Vec<Results>,
}

/// A layout's figures at a split; the run must have happened.
fn get(set: &Results, s: usize, l: usize) -> Figures {
    set[s][l].expect("a run")
}

fn split_name(s: usize) -> String {
    format!("{}-{}", SPLITS[s].0, SPLITS[s].1)
}

/// Every (workload, its name, split with SCM): the cases each placement claim is judged on.
fn each() -> impl Iterator<Item = (usize, &'static str, usize)> + Clone {
    WORKLOADS.iter().enumerate().flat_map(|(w, name)| (1..SPLITS.len()).map(move |s| (w, *name, s)))
}

/// The placements across the splits: the runs, their table and charts.
fn placements(lab: &mut Lab, requests: u64) -> anyhow::Result<Runs> {
    let objects = DB_GB * PER_GB;
    let dist = KeyDistribution::ScrambledZipf { theta: 0.9 };
    let warm_reads = lab.scale.requests(4 * objects);
    let streams = [
        (
            sized_blocks(KASSA_BLOCK, dist.clone(), objects, warm_reads, 1.0, 20),
            sized_blocks(KASSA_BLOCK, dist.clone(), objects, requests, 1.0, 21),
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
                log_x: None,
                x_format: |x| {
                    ["64-0", "64-128", "32-128", "32-256"]
                        .get(x.round() as usize)
                        .unwrap_or(&"")
                        .to_string()
                },
                y_format: None,
                series: &chart_series,
            },
        )?;
    }

    Ok(Runs { requests, objects, dist, streams, paper, ours })
}

/// The run-to-run spread: DRAM-first at 64-128 on two more request streams of each workload;
/// a rule that needs one layout faster than another needs it by more than this.
fn spread(lab: &mut Lab, runs: &Runs) -> anyhow::Result<f64> {
    let Runs { requests, objects, dist, streams, paper, .. } = runs;
    let (requests, objects) = (*requests, *objects);
    let mut spread: f64 = 0.0;
    let mut spread_rows = Vec::new();
    for (w, workload) in WORKLOADS.iter().enumerate() {
        let mut runs = vec![get(&paper[w], 1, 0).ops];
        for seed in [22, 23] {
            lab.step(format!("{workload}: run-to-run spread, seed {seed}"));
            let stream = match w {
                0 => sized_blocks(KASSA_BLOCK, dist.clone(), objects, requests, 1.0, seed),
                _ => mixgraph_reads(objects, requests, seed),
            };
            let layout = Layout::Hybrid(Placement::DramFirst);
            runs.push(
                one(layout, (64, 128), &paper_devices(), &streams[w].0, &stream)?.0.ops_per_second,
            );
        }
        let mean = runs.iter().sum::<f64>() / runs.len() as f64;
        let (low, high) = range(&runs);
        spread = spread.max((high - low) / mean);
        let mut row = vec![workload.to_string()];
        row.extend(runs.iter().map(|&x| f0(x)));
        row.push(pct((high - low) / mean));
        spread_rows.push(row);
    }
    lab.heading(
        "Run-to-run spread (DRAM-first, 64-128, the paper's devices, three request streams)",
    );
    lab.paragraph(format!(
        "A rule below that needs one layout faster than another needs it faster by more than \
         the widest range here, {}, of the mean.",
        pct(spread)
    ));
    lab.table(
        "spread",
        &["workload", "seed 21 ops/s", "seed 22", "seed 23", "range / mean"],
        &spread_rows,
    )?;

    Ok(spread)
}

/// The placement claims on the paper's devices: DRAM-first the best, the abstract's gains,
/// Figures 4a, 4b and 5b.
fn placement_claims(lab: &mut Lab, runs: &Runs, spread: f64) {
    let (paper, ours) = (&runs.paper, &runs.ours);
    let hybrid_splits = 1..SPLITS.len();
    let mut claim = Claim::shape(
        "Kassa section 4.2, section 6",
        "DRAM-first is the best of the admission policies: insert in DRAM, DRAM victims to SCM",
        &format!("on both workloads, at every split with SCM, DRAM-first's throughput above each of SCM-first(2), SCM-first(6) and Bidirectional(4)'s by more than the run-to-run spread ({})", pct(spread)),
    );
    for (w, workload, s) in each() {
        for (l, (rival, _)) in LAYOUTS.iter().enumerate().take(4).skip(1) {
            let r = get(&paper[w], s, 0).ops / get(&paper[w], s, l).ops;
            claim = claim.case(Case::new(
                format!("{workload}, {} against {rival}", split_name(s)),
                ratio(r),
                format!("above {}", ratio(1.0 + spread)),
                r > 1.0 + spread,
            ));
        }
    }
    lab.claim(claim.context("DRAM-first never promotes: a block demoted once is served from SCM until it leaves; SCM-first moves a block hit T times in SCM up to DRAM"));

    let p95_of = |w: usize, s: usize| get(&paper[w], s, 0).p95 / get(&paper[w], 0, 5).p95 - 1.0;
    let gain_of = |w: usize, s: usize| get(&paper[w], s, 0).ops / get(&paper[w], 0, 5).ops - 1.0;
    // "Up to X": the best case of a workload is X, within a tolerance stated here.
    let best =
        |f: &dyn Fn(usize, usize) -> f64, w: usize, pick: fn(f64, f64) -> f64, start: f64| {
            hybrid_splits.clone().map(|s| f(w, s)).fold(start, pick)
        };
    lab.claim(
        Claim::value(
            "Kassa abstract, section 6",
            "Adding SCM to the small-DRAM server (64 GB) improves throughput by up to 80%",
            "on each workload, DRAM-first's largest throughput gain over 64-0 all-DRAM across the splits with SCM within 20 points of +80%",
        )
        .cases(WORKLOADS.iter().enumerate().map(|(w, workload)| {
            let top = best(&gain_of, w, f64::max, f64::MIN);
            Case::near(format!("{workload}: the largest gain"), top, 0.8, 0.2, signed).paper("up to +80%")
        })),
    );
    lab.claim(
        Claim::value(
            "Kassa abstract, section 6",
            "Adding SCM to the small-DRAM server (64 GB) improves P95 latency by up to 20%",
            "on each workload, DRAM-first's largest cut of P95 latency against 64-0 all-DRAM across the splits with SCM within 10 points of -20%",
        )
        .cases(WORKLOADS.iter().enumerate().map(|(w, workload)| {
            let top = best(&p95_of, w, f64::min, f64::MAX);
            Case::near(format!("{workload}: the largest cut"), top, -0.2, 0.1, signed).paper("up to -20%")
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
            Case::between(format!("{workload}, {} GB of block cache", SPLITS[s].0 as f64 + SPLITS[s].1 as f64 - RESERVED_GB), slower(&paper[w], s), (0.13, 0.57), pct)
                .paper("13-57%")
        }))
        .context(format!(
            "every hit pays SCM's latency and its share of SCM's bandwidth; with our presets (optane-dcpm, 300 ns, 6.8 GB/s) the loss is {}",
            each().map(|(w, workload, s)| format!("{} ({workload}, {} GB)", pct(slower(&ours[w], s)), SPLITS[s].0 as f64 + SPLITS[s].1 as f64 - RESERVED_GB)).collect::<Vec<_>>().join(", ")
        )),
    );

    let hybrid_gain =
        |w: usize, s: usize| get(&paper[w], s, 0).ops / get(&paper[w], s, 4).ops - 1.0;
    lab.claim(
        Claim::value(
            "Kassa section 3.1, Figure 4b",
            "The hybrid cache is up to 45% faster than the naive all-SCM block cache",
            "on each workload, DRAM-first's largest gain over all-SCM of the same block cache size, across the splits with SCM, within 15 points of +45%",
        )
        .cases(WORKLOADS.iter().enumerate().map(|(w, workload)| {
            let top = best(&hybrid_gain, w, f64::max, f64::MIN);
            Case::near(format!("{workload}: the largest gain"), top, 0.45, 0.15, signed).paper("up to +45%")
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
}

/// The abstract's other half: the 1P server with SCM against the large-DRAM 2P server (Figure
/// 1a: 256 GB of DRAM), on the paper's devices. The 2P server's runs, per workload.
fn against_2p(lab: &mut Lab, runs: &Runs) -> anyhow::Result<Vec<(TimedReport, f64)>> {
    let (paper, streams) = (&runs.paper, &runs.streams);
    let mut two_p = Vec::new();
    for (workload, (warm, stream)) in WORKLOADS.iter().zip(streams) {
        lab.step(format!("{workload}, paper's devices: the 2P server, 256 GB of DRAM"));
        two_p.push(one(Layout::AllDram, TWO_P, &paper_devices(), warm, stream)?);
    }
    let cost_cut = 1.0 - (32.0 + SCM_COST * 256.0) / TWO_P.0 as f64;
    lab.claim(
        Claim::shape(
            "Kassa abstract",
            "The 1P server with SCM keeps the large-DRAM 2P server's performance",
            "on both workloads: 32-256 DRAM-first's throughput at least 0.90 of the 2P server's (256 GB of DRAM, less the same 12.5 GB for memtables, index and filters)",
        )
        .cases(WORKLOADS.iter().enumerate().map(|(w, workload)| {
            let r = get(&paper[w], 3, 0).ops / two_p[w].0.ops_per_second;
            Case::at_least(format!("{workload}: 32-256 DRAM-first against 2P, throughput"), r, 0.9, ratio)
        }))
        .context("we model no CPU, so the 2P server's second socket adds nothing here"),
    );
    lab.claim(
        Claim::value(
            "Kassa abstract",
            "... at a 43-48% lower cost",
            "32-256's memory cost (DRAM 1, SCM 0.38 per GB) at least 43% below the 2P server's 256 GB of DRAM",
        )
        .case(Case::at_least("memory cost below 2P's", cost_cut, 0.43, pct).paper("43-48%"))
        .arithmetic("the cost follows from the sizes and the price ratio alone, (32 + 0.38 x 256) / 256, with no run; the paper prices whole servers (the 2P server's second socket and its power too)"),
    );

    Ok(two_p)
}

/// Where the headline results flip: the SCM's module count (its bandwidth) and its write
/// interference, on both stand-ins.
fn module_sweeps(lab: &mut Lab, runs: &Runs, two_p: &[(TimedReport, f64)]) -> anyhow::Result<()> {
    let (paper, streams) = (&runs.paper, &runs.streams);
    let mut swept: Vec<(String, Vec<SweptPoint>)> = Vec::new();
    for (w, interference, name) in SWEPT {
        let (warm, stream) = &streams[w];
        let mut points = Vec::new();
        for modules in MODULES {
            lab.step(format!("{name}: {modules} SCM modules"));
            let devices = with_modules(modules, interference);
            let at = |split| -> anyhow::Result<Figures> {
                let (r, cost) =
                    one(Layout::Hybrid(Placement::DramFirst), split, &devices, warm, stream)?;
                Ok(Figures {
                    ops: r.ops_per_second,
                    p95: r.latency_us_p95,
                    per_cost: r.ops_per_second / cost,
                    hits: r.hit_ratio,
                })
            };
            points.push((modules as f64, [at((64, 128))?, at((32, 256))?]));
        }
        swept.push((name.to_string(), points));
    }
    let lines = |measure: &dyn Fn(usize, &[Figures; 2]) -> f64, needs: Needs| -> Vec<Line> {
        SWEPT
            .iter()
            .zip(&swept)
            .map(|((w, _, _), (name, points))| Line {
                name: name.clone(),
                points: points.iter().map(|(x, f)| (*x, measure(*w, f))).collect(),
                needs,
            })
            .collect()
    };
    let hit_ratios: Vec<String> = WORKLOADS
        .iter()
        .enumerate()
        .map(|(w, workload)| {
            let (small, large) = (get(&paper[w], 0, 5).hits, get(&paper[w], 1, 0).hits);
            format!("{workload} {} and {}", pct(small), pct(large))
        })
        .collect();
    let p95_note = format!(
        "Why no SCM bandwidth brings the P95 below 64-0's: a run's 95th percentile is a flash \
         read while more than 5% of the reads miss, and 64-0's and 64-128's hit ratios are {}. \
         Both P95s are then flash reads, the larger cache's queued behind more requests a \
         second; the paper's P95 includes RocksDB's own work per request, which this model does \
         not have.",
        hit_ratios.join("; ")
    );
    let sweeps = [
        by_modules(
            "sensitivity-abstract-throughput",
            "Kassa abstract, throughput: adding SCM to the 64 GB server gains up to 80%.",
            "the larger of 64-128's and 32-256's DRAM-first throughput over 64-0's",
            signed,
            lines(&|w, f| f[0].ops.max(f[1].ops) / get(&paper[w], 0, 5).ops - 1.0, Needs::Near { target: 0.8, tolerance: 0.2 }),
            String::new(),
        ),
        by_modules(
            "sensitivity-abstract-p95",
            "Kassa abstract, P95 latency: adding SCM to the 64 GB server cuts it by up to 20%.",
            "the lower of 64-128's and 32-256's DRAM-first P95 latency against 64-0's",
            signed,
            lines(&|w, f| f[0].p95.min(f[1].p95) / get(&paper[w], 0, 5).p95 - 1.0, Needs::Near { target: -0.2, tolerance: 0.1 }),
            p95_note,
        ),
        by_modules(
            "sensitivity-abstract-2p",
            "Kassa abstract, against the 2P server: its performance at a 43-48% lower cost.",
            "32-256 DRAM-first's throughput over the 2P server's",
            ratio,
            lines(&|w, f| f[1].ops / two_p[w].0.ops_per_second, Needs::AtLeast(0.9)),
            String::new(),
        ),
        by_modules(
            "sensitivity-figure-5b",
            "Kassa Figure 5b: throughput per cost of 32-256 above 64-0's for read-dominated workloads.",
            "32-256 DRAM-first's ops/s per cost over 64-0's",
            ratio,
            lines(&|w, f| f[1].per_cost / get(&paper[w], 0, 5).per_cost, Needs::AtLeast(1.0)),
            String::new(),
        ),
    ];
    lab.heading("Where the headline results flip");
    lab.paragraph(
        "Each headline result below is swept over the SCM's module count (each module Table 1's 2.4 GB/s, \
         interleaved, so an operation's share of the bandwidth grows with the count) with and without Optane's write-to-read interference on the SCM, whose \
         reads a DRAM-first cache's demotions (a write to the SCM per miss) slow. The transcription \
         stops before the paper's server description, so its module count is not known: the \
         paper-setup point is one module, the fewest its SCM sizes allow, as in the claims above.",
    );
    for sweep in &sweeps {
        lab.sensitivity(sweep)?;
    }
    Ok(())
}

/// Locality of the stand-ins, measured on the streams the runs above read: Zipf's keys are its
/// blocks; mixgraph's are its keys, from the key-value view of the same model.
fn locality(lab: &mut Lab, runs: &Runs) -> anyhow::Result<()> {
    let (requests, objects, streams) = (runs.requests, runs.objects, &runs.streams);
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
