//! Lab `ycsb`: Writes Hurt's YCSB evaluation (§3.4 Lesson 3 and Figure 6, §4.1 Figure 7,
//! §4.2 Figure 8) end to end, measured on this machine: YCSB A-F on a redb database whose
//! page cache plays the storage engine's DRAM cache, over tiercache's engine, the database
//! file behaving as a SATA SSD and the slow tier as Optane DC persistent memory (their
//! profiles, emulated). Unlike the other experiments, nothing here is simulated: every figure is
//! a run of the engine, so figures move from run to run by a few percent.
//!
//! The stacks below redb, all with the same redb cache:
//! - `none`: no tiercache (the paper's "zero NVRAM"; the file's page cache does not count,
//!   since the emulated file charges every access its device time);
//! - `dram`: a DRAM block cache costing what the slow tier costs (0.38 x its size; the
//!   all-DRAM configuration of Figure 8 and Kassa's equal-cost comparison);
//! - `slow`: the slow tier alone, admitting every block (a cache that does not throttle, as
//!   the paper's Open CAS);
//! - `slow-obp`: the slow tier with NVCache's admission, OBP at 10% and small-bypass (§3.3);
//! - `dram+slow`: a small DRAM tier over the slow tier, admitting every block.

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicU64;

use anyhow::Context;
use tiercache_core::format_size;
use tiercache_redb::redb::{self, Durability};
use tiercache_redb::ycsb::{self as driver, Records, RunOptions, YcsbWorkload};

use super::{f0, f1, ratio, series, Case, Claim, Lab, Scale};
use crate::plot::Chart;
use crate::ycsb::Opened;

/// NVRAM's price per byte as a share of DRAM's (Writes Hurt §4.2, after Kassa et al.).
const NVRAM_COST: f64 = 0.38;
const RECORD_BYTES: usize = 1000;
const THREADS: usize = 4;
const WORKLOADS: [YcsbWorkload; 6] = [
    YcsbWorkload::A,
    YcsbWorkload::B,
    YcsbWorkload::C,
    YcsbWorkload::F,
    YcsbWorkload::D,
    YcsbWorkload::E,
];

struct Sizes {
    records: u64,
    operations: u64,
    warmup: u64,
    rounds: usize,
}

fn sizes(scale: Scale) -> Sizes {
    match scale {
        Scale::Smoke => Sizes { records: 3000, operations: 300, warmup: 300, rounds: 1 },
        Scale::Quick => Sizes { records: 100_000, operations: 4000, warmup: 20_000, rounds: 2 },
        Scale::Full => Sizes { records: 400_000, operations: 20_000, warmup: 100_000, rounds: 3 },
    }
}

/// How many times the base number of operations a workload runs, so that each run lasts
/// about as long: reads are much faster than writes.
fn stretch(workload: YcsbWorkload) -> u64 {
    match workload {
        YcsbWorkload::C => 5,
        YcsbWorkload::B | YcsbWorkload::D => 2,
        _ => 1,
    }
}

/// One stack under the database.
struct Stack {
    name: &'static str,
    words: Vec<String>,
    /// Memory cost in DRAM MiB: redb's cache, tiercache's DRAM, the slow tier at 0.38.
    cost: f64,
    opened: Option<Opened>,
    records: Records,
    version: AtomicU64,
}

fn mib(bytes: u64) -> u64 {
    (bytes >> 20).max(1)
}

/// Where the slow tier's files go: tmpfs when there is one (memory, as the tier is).
fn memory_dir(work: &Path) -> PathBuf {
    match super::memory_dir() {
        shm if shm != std::env::temp_dir() => {
            shm.join(format!("tiercache-lab-ycsb-{}", std::process::id()))
        }
        _ => work.join("tiers"),
    }
}

struct Dirs(Vec<PathBuf>);

impl Drop for Dirs {
    fn drop(&mut self) {
        for dir in &self.0 {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

pub fn run(lab: &mut Lab) -> anyhow::Result<()> {
    let s = sizes(lab.scale);
    let work = std::env::temp_dir().join(format!("tiercache-lab-ycsb-{}", std::process::id()));
    let tiers = memory_dir(&work);
    let _dirs = Dirs(vec![work.clone(), tiers.clone()]);
    for dir in [&work, &tiers] {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    // One load, copied for every stack: loading through an emulated SSD takes minutes.
    let base = work.join("base.redb");
    lab.step(format!("loading {} records", s.records));
    let load = {
        let db = redb::Database::builder()
            .set_cache_size(64 << 20)
            .create(&base)
            .with_context(|| format!("cannot create {}", base.display()))?;
        driver::load(&db, s.records, RECORD_BYTES, Durability::Immediate, &mut |_| {})?
    };
    let file_bytes = std::fs::metadata(&base)?.len();
    let data = s.records * RECORD_BYTES as u64;
    // The paper's proportions (§4, Table 3): the engine's cache 16 GB (half of 32 GB of DRAM)
    // over datasets of 130-259 GB, about a twelfth; NVCache 64-128 GB, about half of them.
    let db_cache = mib(data / 12);
    let slow = mib(data / 2);
    let equal_dram = ((slow as f64 * NVRAM_COST).round() as u64).max(1);
    let small_dram = mib(data / 24);
    let words = |list: &[&str]| list.iter().map(|w| w.to_string()).collect::<Vec<_>>();
    // The slow tier's options, its path (a scratch file) added when the stack opens.
    let slow_tier = words(&["--slow-size", &format!("{slow}MiB"), "--slow-profile", "optane-dcpm"]);
    let db = db_cache as f64;
    let slow_cost = NVRAM_COST * slow as f64;
    // (name, options shown in the report, whether it has the slow tier, memory cost).
    let specs: Vec<(&'static str, Vec<String>, bool, f64)> = vec![
        ("none", words(&["--no-cache"]), false, db),
        ("dram", words(&["--dram", &format!("{equal_dram}MiB")]), false, db + equal_dram as f64),
        ("slow", [words(&["--dram", "0"]), slow_tier.clone()].concat(), true, db + slow_cost),
        (
            "slow-obp",
            [
                words(&["--dram", "0"]),
                slow_tier.clone(),
                words(&["--nvcache", "obp:0.1,small-bypass=0"]),
            ]
            .concat(),
            true,
            db + slow_cost,
        ),
        (
            "dram+slow",
            [words(&["--dram", &format!("{small_dram}MiB")]), slow_tier].concat(),
            true,
            db + small_dram as f64 + slow_cost,
        ),
    ];
    lab.setup(format!(
        "{} records of {RECORD_BYTES} B ({} of data, a {} redb file) loaded once with redb \
         alone and copied for each stack; {} clients; {} operations of A, E and F per \
         round, twice as many of B and D and five times of C (their operations are faster), {} \
         rounds, the stacks' order reversed every other round; a warm-up of {} \
         YCSB-C operations first, not measured",
        s.records,
        format_size(data),
        format_size(file_bytes),
        THREADS,
        s.operations,
        s.rounds,
        s.warmup
    ));
    lab.setup(format!(
        "redb's page cache {db_cache} MiB in every stack (the engine's DRAM cache); the slow \
         tier {slow} MiB behaving as `optane-dcpm`; `dram` {equal_dram} MiB (the slow tier's \
         cost in DRAM); `dram+slow` {small_dram} MiB of DRAM over the slow tier; the database \
         file behaving as `sata-ssd`; 4 KiB blocks (redb's pages), write-through"
    ));
    lab.setup(format!(
        "Commits are not synced (redb's Durability::None): the runs measure the caches, not \
         an fsync per update; loaded in {:.1} s",
        load.seconds
    ));
    lab.setup("Costs in DRAM MiB: DRAM 1 per MiB, NVRAM 0.38 (Writes Hurt §4.2)");
    lab.setup(format!(
        "Machine: {}, {} cores",
        super::cpu_model(),
        std::thread::available_parallelism().map_or(0, |n| n.get())
    ));
    let mut stacks = Vec::new();
    for (name, mut shown, tiered, cost) in specs {
        let path = work.join(format!("{name}.redb"));
        std::fs::copy(&base, &path)
            .with_context(|| format!("cannot copy to {}", path.display()))?;
        shown.extend(words(&["--backing-profile", "sata-ssd"]));
        let mut all = shown.clone();
        if tiered {
            let tier = tiers.join(format!("{name}.tier"));
            all.extend(["--slow-path".to_string(), tier.display().to_string()]);
        }
        let args = crate::args_from::<crate::ycsb::YcsbArgs, _>("ycsb", all)?;
        let opened = crate::ycsb::open(&args, &path, db_cache << 20)?;
        lab.step(format!("{name}: {}", opened.setup));
        stacks.push(Stack {
            name,
            words: shown,
            cost,
            opened: Some(opened),
            records: Records::new(s.records),
            version: AtomicU64::new(0),
        });
    }
    let run_one = |stack: &Stack, workload: YcsbWorkload, operations: u64, seed: u64| {
        let opened = stack.opened.as_ref().expect("open until the end");
        let options = RunOptions {
            workload,
            operations,
            threads: THREADS,
            record_bytes: RECORD_BYTES,
            seed,
            durability: Durability::None,
            commit_log: None,
            progress: &|_| {},
        };
        let run = opened
            .run(&stack.records, &stack.version, &options, 0)
            .with_context(|| format!("{}: workload {workload:?}", stack.name))?;
        anyhow::ensure!(
            run.report.verified,
            "{}: workload {workload:?} read what was not written: {}",
            stack.name,
            run.report.first_failure.clone().unwrap_or_default()
        );
        let cache = run.cache.as_ref();
        anyhow::Ok(Measured {
            ops: run.report.ops_per_second,
            db_hits: run.db_cache.hit_ratio.unwrap_or(0.0),
            cache_hits: cache.and_then(|c| c.hit_ratio),
            slow_written: cache.map_or(0, |c| c.slow_tier_bytes_written),
        })
    };
    for stack in &stacks {
        lab.step(format!("{}: warm-up", stack.name));
        run_one(stack, YcsbWorkload::C, s.warmup, 1_000)?;
    }
    // results[workload][stack] = the rounds' measurements.
    let mut results: Vec<Vec<Vec<Measured>>> = Vec::new();
    for (w, &workload) in WORKLOADS.iter().enumerate() {
        let mut per_stack: Vec<Vec<Measured>> = stacks.iter().map(|_| Vec::new()).collect();
        for round in 0..s.rounds {
            let mut order: Vec<usize> = (0..stacks.len()).collect();
            if round % 2 == 1 {
                order.reverse();
            }
            for i in order {
                let seed = 7 + (w * 100 + round) as u64;
                lab.step(format!("{workload:?} round {round}: {}", stacks[i].name));
                let operations = s.operations * stretch(workload);
                per_stack[i].push(run_one(&stacks[i], workload, operations, seed)?);
            }
        }
        results.push(per_stack);
    }
    for stack in &mut stacks {
        drop(stack.opened.take());
    }
    report(lab, &stacks, &results)
}

#[derive(Clone, Copy, Debug)]
struct Measured {
    ops: f64,
    db_hits: f64,
    cache_hits: Option<f64>,
    slow_written: u64,
}

fn mean(values: impl Iterator<Item = f64>) -> f64 {
    let (sum, n) = values.fold((0.0, 0), |(s, n), v| (s + v, n + 1));
    sum / n.max(1) as f64
}

fn report(lab: &mut Lab, stacks: &[Stack], results: &[Vec<Vec<Measured>>]) -> anyhow::Result<()> {
    let index = |name: &str| stacks.iter().position(|s| s.name == name).expect("a stack");
    let ops = |w: usize, s: usize| mean(results[w][s].iter().map(|m| m.ops));
    let written = |w: usize, s: usize| mean(results[w][s].iter().map(|m| m.slow_written as f64));
    let spread = |w: usize, s: usize| {
        let runs: Vec<f64> = results[w][s].iter().map(|m| m.ops).collect();
        let (lo, hi) = runs.iter().fold((f64::MAX, 0f64), |(l, h), v| (l.min(*v), h.max(*v)));
        (hi - lo) / ops(w, s).max(1e-9)
    };

    lab.heading("The stacks");
    let rows: Vec<Vec<String>> = stacks
        .iter()
        .map(|s| vec![s.name.to_string(), format!("`{}`", s.words.join(" ")), f1(s.cost)])
        .collect();
    lab.table(
        "stacks",
        &["stack", "options of `tiercache ycsb`", "memory cost (DRAM MiB)"],
        &rows,
    )?;

    lab.heading("Throughput (operations per second, mean of the rounds)");
    let mut header = vec!["workload".to_string()];
    header.extend(stacks.iter().map(|s| s.name.to_string()));
    header.push("largest spread of a stack's rounds".into());
    let rows: Vec<Vec<String>> = WORKLOADS
        .iter()
        .enumerate()
        .map(|(w, workload)| {
            let mut row = vec![format!("{workload:?}")];
            row.extend((0..stacks.len()).map(|s| f0(ops(w, s))));
            let worst = (0..stacks.len()).map(|s| spread(w, s)).fold(0f64, f64::max);
            row.push(format!("{:.1}%", worst * 100.0));
            row
        })
        .collect();
    let header_refs: Vec<&str> = header.iter().map(String::as_str).collect();
    lab.table("throughput", &header_refs, &rows)?;

    lab.heading("Relative to no tiercache, and per memory cost relative to `dram`");
    let none = index("none");
    let dram = index("dram");
    let rows: Vec<Vec<String>> = WORKLOADS
        .iter()
        .enumerate()
        .map(|(w, workload)| {
            let mut row = vec![format!("{workload:?}")];
            row.extend((0..stacks.len()).map(|s| ratio(ops(w, s) / ops(w, none))));
            row.extend((0..stacks.len()).map(|s| {
                let per_cost = ops(w, s) / stacks[s].cost;
                ratio(per_cost / (ops(w, dram) / stacks[dram].cost))
            }));
            row
        })
        .collect();
    let mut header = vec!["workload".to_string()];
    header.extend(stacks.iter().map(|s| format!("{} / none", s.name)));
    header.extend(stacks.iter().map(|s| format!("{} per cost / dram's", s.name)));
    let header_refs: Vec<&str> = header.iter().map(String::as_str).collect();
    lab.table("relative", &header_refs, &rows)?;

    lab.heading("Hit ratios and bytes written to the slow tier (mean of the rounds)");
    let rows: Vec<Vec<String>> = WORKLOADS
        .iter()
        .enumerate()
        .flat_map(|(w, workload)| {
            stacks.iter().enumerate().map(move |(s, stack)| (w, workload, s, stack))
        })
        .map(|(w, workload, s, stack)| {
            let runs = &results[w][s];
            let cache = runs.iter().filter_map(|m| m.cache_hits);
            vec![
                format!("{workload:?}"),
                stack.name.to_string(),
                format!("{:.1}%", mean(runs.iter().map(|m| m.db_hits)) * 100.0),
                match runs.iter().any(|m| m.cache_hits.is_some()) {
                    true => format!("{:.1}%", mean(cache) * 100.0),
                    false => "-".into(),
                },
                format_size(written(w, s) as u64),
            ]
        })
        .collect();
    lab.table(
        "hits",
        &["workload", "stack", "redb cache hits", "tiercache hits", "written to the slow tier"],
        &rows,
    )?;
    let chart_series: Vec<_> = stacks
        .iter()
        .enumerate()
        .map(|(s, stack)| {
            series(
                stack.name,
                (0..WORKLOADS.len()).map(|w| (w as f64, ops(w, s) / ops(w, none))).collect(),
            )
        })
        .collect();
    lab.chart(
        "relative",
        &Chart {
            title: "YCSB on redb: throughput relative to no tiercache (A B C F D E)",
            x_label: "workload (0 A, 1 B, 2 C, 3 F, 4 D, 5 E)",
            y_label: "x no tiercache",
            log_x: None,
            x_format: |x| {
                ["A", "B", "C", "F", "D", "E"].get(x.round() as usize).unwrap_or(&"").to_string()
            },
            y_format: None,
            series: &chart_series,
        },
    )?;

    let w_of = |name: YcsbWorkload| WORKLOADS.iter().position(|w| *w == name).expect("a workload");
    let read_heavy = [YcsbWorkload::B, YcsbWorkload::C, YcsbWorkload::D, YcsbWorkload::E];
    let write_heavy = [YcsbWorkload::A, YcsbWorkload::F];
    let (slow, obp) = (index("slow"), index("slow-obp"));
    let ratio_case = |w: YcsbWorkload, s: usize, base: usize, bound: f64, at_least: bool| {
        let label = format!("YCSB-{w:?}: {} / {}", stacks[s].name, stacks[base].name);
        let x = ops(w_of(w), s) / ops(w_of(w), base);
        match at_least {
            true => Case::at_least(label, x, bound, ratio),
            false => Case::at_most(label, x, bound, ratio),
        }
    };
    lab.claim(
        Claim::shape(
            "Writes Hurt §3.4 (Figure 6), §4.1 (Figure 7)",
            "read-dominant workloads run faster with NVCache than with no NVRAM (evict-btree-scan over 3x; YCSB-B to -E gain)",
            "slow-obp / none >= 1.05 on B, C, D and E (5% above the runs' noise)",
        )
        .cases(read_heavy.iter().map(|w| ratio_case(*w, obp, none, 1.05, true)))
        .context("the same redb cache above both; NVCache's slow tier holds half the data"),
    );
    lab.claim(
        Claim::shape(
            "Writes Hurt §3.4 (Figure 6), §4.1 Observation 2",
            "with OBP, write-dominant workloads are not slowed by the NVRAM cache (YCSB-A unchanged)",
            "slow-obp / none >= 0.95 on A and F",
        )
        .cases(write_heavy.iter().map(|w| ratio_case(*w, obp, none, 0.95, true)))
        .context("updates are write-through: every write reaches the emulated SSD in every stack"),
    );
    lab.claim(
        Claim::shape(
            "Writes Hurt §3.4 (Table 2, columns 6-7)",
            "OBP filters the majority of the write traffic to NVRAM",
            "bytes written to the slow tier by slow-obp <= 0.5 x those of slow (admitting every block) on every workload",
        )
        .cases(WORKLOADS.iter().enumerate().map(|(w, workload)| {
            let (ours, all) = (written(w, obp), written(w, slow));
            Case::new(
                format!("YCSB-{workload:?}"),
                format!("{} against {}", format_size(ours as u64), format_size(all as u64)),
                "<= 0.5 x",
                ours <= 0.5 * all,
            )
        })),
    );
    lab.claim(
        Claim::shape(
            "Writes Hurt §4.1 Observation 1",
            "a cache that does not throttle admission (Open CAS) derives no performance benefit from NVRAM",
            "slow / none <= 1.05 on B, C, D and E",
        )
        .cases(read_heavy.iter().map(|w| ratio_case(*w, slow, none, 1.05, false)))
        .context("`slow` admits every block missed or written, in write-through; the paper's Open CAS ran write-around; the emulated Optane charges a write 0.3 us plus its transfer at 2.3 GB/s"),
    );
    let per_cost = |w: YcsbWorkload, s: usize| {
        let w = w_of(w);
        (ops(w, s) / stacks[s].cost) / (ops(w, dram) / stacks[dram].cost)
    };
    lab.claim(
        Claim::shape(
            "Writes Hurt §4.2 (Figure 8a)",
            "read-only and read-mostly workloads gain performance per dollar when NVRAM replaces DRAM",
            "slow-obp's throughput per memory cost >= dram's (the same cost in DRAM) on B and C",
        )
        .cases([YcsbWorkload::B, YcsbWorkload::C].iter().map(|w| {
            Case::at_least(format!("YCSB-{w:?}"), per_cost(*w, obp), 1.0, ratio)
        }))
        .context("the redb cache is in both costs; NVRAM costs 0.38 of DRAM per byte"),
    );
    lab.claim(
        Claim::shape(
            "Writes Hurt §4.2 (Figure 8a)",
            "YCSB-A loses performance per dollar: its throughput drops faster than the memory cost",
            "slow-obp's throughput per memory cost < dram's on A",
        )
        .case({
            let x = per_cost(YcsbWorkload::A, obp);
            Case::new("YCSB-A", ratio(x), "< 1.00x", x < 1.0)
        }),
    );
    Ok(())
}
