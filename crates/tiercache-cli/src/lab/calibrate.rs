//! Lab `calibrate`: the simulator's timing model checked against the engine on this machine.
//! No paper has done this (libCacheSim and the papers' simulators never ran their timing beside
//! a real cache on the same device); the rule is ours, stated before the runs: the simulator
//! predicts the engine's throughput within 15% and its hit ratio within 1 point in every
//! configuration.
//!
//! 1. The devices are measured as `tiercache profile measure` does: this machine's DRAM (the
//!    process's memory), a tmpfs file mapped (the slow-memory tier), a disk file with O_DIRECT
//!    (the flash tier) and a disk file through the page cache (the backing file, which `bench`
//!    reads and writes buffered).
//! 2. The cache's own work (lookup, policy, bookkeeping), which no device profile holds, is fitted
//!    on two runs of the engine that are not among the checked configurations: a DRAM tier
//!    holding the whole working set (every read a hit) and a tiny one (nearly every read a miss),
//!    at each thread count. What the engine took beyond the measured devices' time is the
//!    simulator's CPU model (`sim --cpu`).
//! 3. Each configuration runs the engine (`bench`, its threads sharing one request stream) and
//!    the simulator in virtual time (`sim --clients`, the same stream, the same sizes, the
//!    measured profiles, the fitted CPU model), and the report puts throughput, mean and p99
//!    latency and hit ratio side by side. A configuration the rule fails is explained by the part
//!    of the model its neighbours single out (concurrency, writes, OBP's controller, a tier's
//!    device model, or the policy's placement), computed from the table.
//! 4. Writes Hurt's Figure 2 on this machine: read throughput of `cores` readers against the
//!    number of concurrent writers, on DRAM and on the disk, beside the paper's Optane and DRAM.

use std::path::{Path, PathBuf};

use anyhow::Context;
use tiercache_core::{format_size, DeviceProfile, Direction, Request, TierId};
use tiercache_policy::stack::Amount;
use tiercache_policy::{AnyPolicy, StackConfig, StackSpec};
use tiercache_sim::timed::{simulate_timed, CpuModel, TimedOptions, TimedReport};
use tiercache_workload::gen::KeyDistribution;

use super::{blocks, f0, f1, f3, pct, series, signed, Case, Claim, Lab, Scale, BLOCK};
use crate::bench::{self, BenchReport, Replay};
use crate::measure::{self, MeasureArgs};
use crate::plot::Chart;

/// The rule's tolerances.
const THROUGHPUT_TOLERANCE: f64 = 0.15;
const HIT_POINTS: f64 = 0.01;
/// Writes Hurt §2, Figure 2: read throughput of 8 readers with 0, 1 and 8 writers, in GB/s on
/// Optane (two NVDIMMs), and as a share of no writers on DRAM (18% and 35% lost).
const OPTANE_GB_S: [(usize, f64); 3] = [(0, 12.0), (1, 3.4), (8, 0.8)];
const DRAM_SHARE: [(usize, f64); 3] = [(0, 1.0), (1, 0.82), (8, 0.65)];
const WRITERS: [usize; 5] = [0, 1, 2, 4, 8];

struct Sizes {
    working_set: u64,
    dram: u64,
    lower: u64,
    warm: u64,
    measured: u64,
    step_seconds: f64,
}

fn sizes(scale: Scale) -> Sizes {
    match scale {
        Scale::Smoke => Sizes {
            working_set: 16 << 20,
            dram: 2 << 20,
            lower: 4 << 20,
            warm: 4000,
            measured: 4000,
            step_seconds: 0.02,
        },
        Scale::Quick => Sizes {
            working_set: 256 << 20,
            dram: 32 << 20,
            lower: 64 << 20,
            warm: 300_000,
            measured: 300_000,
            step_seconds: 0.25,
        },
        Scale::Full => Sizes {
            working_set: 1 << 30,
            dram: 128 << 20,
            lower: 256 << 20,
            warm: 1_500_000,
            measured: 1_000_000,
            step_seconds: 1.0,
        },
    }
}

/// The tier under DRAM, if any.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Lower {
    None,
    Mapped,
    Direct,
}

impl Lower {
    fn name(self) -> &'static str {
        match self {
            Lower::None => "dram",
            Lower::Mapped => "dram+mapped",
            Lower::Direct => "dram+direct",
        }
    }
}

#[derive(Clone, Copy)]
struct Config {
    lower: Lower,
    obp: bool,
    threads: usize,
    reads: f64,
    /// The DRAM tier's size.
    dram: u64,
}

impl Config {
    fn label(&self) -> String {
        format!(
            "{}{} / {} thread{} / {}",
            self.lower.name(),
            if self.obp { " obp" } else { "" },
            self.threads,
            if self.threads == 1 { "" } else { "s" },
            if self.reads >= 1.0 { "reads".to_string() } else { pct(self.reads) + " reads" }
        )
    }

    /// The configuration that differs from this one in `differs` alone.
    fn twin(&self, all: &[(Config, Outcome)], differs: impl Fn(&Config) -> bool) -> Option<f64> {
        all.iter().find(|(c, _)| differs(c)).map(|(_, o)| o.throughput_error())
    }
}

/// The devices, measured.
struct Devices {
    dram: DeviceProfile,
    mapped: DeviceProfile,
    direct: DeviceProfile,
    backing: DeviceProfile,
    /// What the engine's mapped tier adds per read and per write, in ns ([`fit_mapped`], added
    /// to the mapped profile's latencies).
    mapped_extra: (f64, f64),
}

/// What the engine did and the simulator predicted for one configuration.
struct Outcome {
    engine: BenchReport,
    sim: TimedReport,
    words: Vec<String>,
}

impl Outcome {
    fn engine_mean_us(&self) -> f64 {
        let (r, w) = (&self.engine.read, &self.engine.write);
        (r.mean_us * r.count as f64 + w.mean_us * w.count as f64)
            / (r.count + w.count).max(1) as f64
    }

    fn engine_hit_ratio(&self) -> f64 {
        self.engine.hit_ratio.unwrap_or(0.0)
    }

    fn throughput_error(&self) -> f64 {
        self.sim.ops_per_second / self.engine.ops_per_second - 1.0
    }

    fn hit_points(&self) -> f64 {
        self.sim.hit_ratio - self.engine_hit_ratio()
    }

    fn holds(&self) -> bool {
        self.throughput_error().abs() <= THROUGHPUT_TOLERANCE
            && self.hit_points().abs() <= HIT_POINTS
    }
}

/// Scratch files, removed at the end.
struct Scratch(Vec<PathBuf>);

impl Drop for Scratch {
    fn drop(&mut self) {
        for path in &self.0 {
            let _ = std::fs::remove_file(path);
        }
    }
}

fn words(list: &[&str]) -> Vec<String> {
    list.iter().map(|w| w.to_string()).collect()
}

fn mib(bytes: u64) -> String {
    format!("{}MiB", bytes >> 20)
}

pub fn run(lab: &mut Lab) -> anyhow::Result<()> {
    let s = sizes(lab.scale);
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let memory = super::memory_dir();
    let disk = std::env::temp_dir();
    let id = std::process::id();
    let mapped_path = memory.join(format!("tiercache-calibrate-{id}.mapped"));
    let direct_path = disk.join(format!("tiercache-calibrate-{id}.direct"));
    let _scratch = Scratch(vec![mapped_path.clone(), direct_path.clone()]);
    let media = Media { mapped: mapped_path, direct: direct_path, shards: bench::default_shards() };
    lab.setup(format!("Machine: {}, {cores} cores", super::cpu_model()));

    lab.step("measuring the devices");
    let mut devices = measure_devices(lab, &s, &memory, &disk)?;
    let table_rows: Vec<Vec<String>> = [
        ("DRAM (the DRAM tier)", &devices.dram),
        ("tmpfs, mapped (the slow-memory tier)", &devices.mapped),
        ("disk, O_DIRECT (the flash tier)", &devices.direct),
        ("disk, page cache (the backing file)", &devices.backing),
    ]
    .iter()
    .map(|(what, p)| {
        vec![
            what.to_string(),
            f3(p.read_latency_us),
            f3(p.write_latency_us),
            f1(p.read_bandwidth_gb_s),
            f1(p.write_bandwidth_gb_s),
            p.parallelism.to_string(),
            f3(p.read_share_one_writer),
            f3(p.read_share_eight_writers),
            f3(p.service_ns(Direction::Read, BLOCK, 0) / 1000.0),
        ]
    })
    .collect();
    lab.heading("The devices, measured");
    lab.table(
        "devices",
        &[
            "device",
            "read latency us",
            "write latency us",
            "read GB/s",
            "write GB/s",
            "parallelism",
            "read share, 1 writer",
            "read share, many writers",
            "4 KiB read as modeled, us",
        ],
        &table_rows,
    )?;

    let blocks_in_set = s.working_set / BLOCK;
    let (warm, measured) = {
        let zipf = KeyDistribution::ScrambledZipf { theta: 0.9 };
        let stream = |reads: f64| {
            let all = blocks(zipf.clone(), blocks_in_set, s.warm + s.measured, reads, 7);
            let (warm, measured) = all.split_at(s.warm as usize);
            (warm.to_vec(), measured.to_vec())
        };
        let (w1, m1) = stream(1.0);
        let (w7, m7) = stream(0.7);
        ([w1, w7], [m1, m7])
    };
    lab.setup(format!(
        "Requests: one stream of 4 KiB blocks, scrambled Zipf 0.9 over a {} working set ({} \
         blocks), read-only or 70% reads; {} requests of warm-up (the engine runs them \
         unmeasured, the simulator's policy decides them untimed), then {} measured; the \
         engine's threads take the next request when they finish one, as the simulator's \
         closed-loop clients do",
        format_size(s.working_set),
        blocks_in_set,
        s.warm,
        s.measured
    ));
    lab.setup(format!(
        "Caches: a DRAM tier of {} alone, or over a {} tier (a tmpfs file mapped, or a disk file \
         with O_DIRECT), DRAM-first, LRU in each, write-through; with and without NVCache's \
         OBP at 10% (it counts admissions and removals per lookup, in each shard of the \
         engine); the backing file is a new disk file `bench` writes first, so \
         its blocks are in the page cache; the engine's {} shards each run their own LRU (and \
         OBP) over their keys with their share of each tier, and so does the simulator \
         (`sim --shards {}`)",
        format_size(s.dram),
        format_size(s.lower),
        media.shards,
        media.shards
    ));

    lab.step("fitting the cache's own work per request");
    let cpu: Vec<(usize, CpuModel)> = [1, 2]
        .iter()
        .map(|&t| fit_cpu(lab, &s, &devices, &media, t, cores).map(|m| (t, m)))
        .collect::<anyhow::Result<_>>()?;
    fit_mapped(lab, &s, &mut devices, &cpu[0].1)?;
    let mut below = Vec::new();
    for lower in [Lower::Mapped, Lower::Direct] {
        for (threads, model) in &cpu {
            let ns = fit_lower_hits(lab, &s, &devices, &media, model, lower, *threads)?;
            below.push((lower, *threads, ns));
        }
    }
    lab.heading("The cache's own work, fitted");
    let fit_rows: Vec<Vec<String>> = cpu
        .iter()
        .map(|(t, m)| {
            let (mapped, direct) =
                (lower_hit(&below, Lower::Mapped, *t), lower_hit(&below, Lower::Direct, *t));
            let spec = format!(
                "`--cpu request_ns={:.0},miss_ns={:.0},write_ns={:.0},lower_hit_ns={:.0},cores={}` \
                 (over the mapped tier)",
                m.request_ns, m.miss_ns, m.write_ns, mapped, m.cores
            );
            vec![
                t.to_string(),
                f0(m.request_ns),
                f0(m.miss_ns),
                f0(m.write_ns),
                f0(mapped),
                f0(direct),
                spec,
            ]
        })
        .collect();
    lab.table(
        "cpu",
        &[
            "threads",
            "ns per request",
            "ns more per miss",
            "ns more per write",
            "ns more per hit below DRAM, mapped tier",
            "ns more per hit below DRAM, direct tier",
            "as `sim` takes it",
        ],
        &fit_rows,
    )?;
    let mapped_toml = lab.dir().join("memory-as-the-engine-uses-it.toml");
    std::fs::write(&mapped_toml, devices.mapped.to_toml())
        .with_context(|| format!("cannot write {}", mapped_toml.display()))?;
    lab.setup(format!(
        "The engine's mapped tier checks each block it reads and seals each it writes (CRC32C, \
         a header): the fit found {:.0} ns more per read and {:.0} ns more per write than the \
         tmpfs medium, added to the mapped profile's latencies for the simulator \
         (memory-as-the-engine-uses-it.toml); the direct-I/O tier's own work is small beside \
         the disk's time and not fitted. The engine writes its flash tier behind the requests \
         (4 threads): the simulator keeps the disk busy with those writes without making the \
         request wait",
        devices.mapped_extra.0, devices.mapped_extra.1
    ));
    lab.setup(
        "A hit below DRAM (DRAM-first serves it where it is, without moving it) costs the \
         engine more than a DRAM hit beyond the device's read: the engine serves it under the \
         shard's lock and checks the block every time (the mapped tier), or pins its slot, \
         reads it with direct I/O into an aligned buffer and checks it (the direct tier). That \
         cost is fitted per lower tier and thread count on a run that is not among the checked \
         configurations: a uniform set of twice the DRAM tier that the hierarchy holds whole, \
         so that nearly every request hits and half the hits are below DRAM; the simulator \
         counts those hits on the same stream",
    );

    let mut configs = Vec::new();
    for lower in [Lower::None, Lower::Mapped, Lower::Direct] {
        for obp in [false, true] {
            if obp && lower == Lower::None {
                continue;
            }
            for reads in [1.0, 0.7] {
                for threads in [1, 2] {
                    configs.push(Config { lower, obp, threads, reads, dram: s.dram });
                }
            }
        }
    }
    let mut results: Vec<(Config, Outcome)> = Vec::new();
    for (i, config) in configs.iter().enumerate() {
        lab.step(format!("{}/{}: {}", i + 1, configs.len(), config.label()));
        let mix = if config.reads >= 1.0 { 0 } else { 1 };
        let cpu = cpu_for(&cpu, &below, config);
        let stream = (&warm[mix][..], &measured[mix][..]);
        let outcome = run_config(&s, &devices, &media, config, s.working_set, &cpu, stream)?;
        results.push((*config, outcome));
    }
    report(lab, &results)?;
    figure_2(lab, &s, &disk, cores)
}

/// Where the lower tiers live, and the engine's shards (the simulator models them).
struct Media {
    mapped: PathBuf,
    direct: PathBuf,
    shards: usize,
}

/// The CPU model of `config`: the one fitted at its thread count, with the cost of a hit
/// below DRAM fitted for its lower tier.
fn cpu_for(cpu: &[(usize, CpuModel)], below: &[(Lower, usize, f64)], config: &Config) -> CpuModel {
    let mut model = cpu.iter().find(|(t, _)| *t == config.threads).expect("fitted").1.clone();
    model.lower_hit_ns = lower_hit(below, config.lower, config.threads);
    model
}

/// The cost of a hit below DRAM fitted for `lower` at `threads` (none without a lower tier).
fn lower_hit(below: &[(Lower, usize, f64)], lower: Lower, threads: usize) -> f64 {
    below.iter().find(|(l, t, _)| *l == lower && *t == threads).map_or(0.0, |m| m.2)
}

/// `config` run by the engine over a working set of `set` bytes, and predicted by the
/// simulator on the same request stream (warm-up, then measured) with `cpu`.
fn run_config(
    s: &Sizes,
    devices: &Devices,
    media: &Media,
    config: &Config,
    set: u64,
    cpu: &CpuModel,
    (warm, measured): (&[Request], &[Request]),
) -> anyhow::Result<Outcome> {
    let mut engine_words = words(&[
        "--threads",
        &config.threads.to_string(),
        "--working-set",
        &mib(set),
        "--dram",
        &mib(config.dram),
        "--shards",
        &media.shards.to_string(),
    ]);
    let tier = |kind: &str, path: &Path| {
        let (path, size) = (path.to_string_lossy(), mib(s.lower));
        words(&[&format!("--{kind}-path"), &path, &format!("--{kind}-size"), &size])
    };
    engine_words.extend(match config.lower {
        Lower::None => vec![],
        Lower::Mapped => tier("slow", &media.mapped),
        Lower::Direct => tier("flash", &media.direct),
    });
    if config.obp {
        engine_words.extend(words(&["--nvcache", "obp"]));
    }
    let args = crate::args_from::<bench::BenchArgs, _>("bench", engine_words.clone())?;
    let replay = Replay::new(warm.to_vec(), measured.to_vec());
    let engine = bench::measure(&args, Some(replay))?;
    let sim = predict(s, devices, media, config, cpu, (warm, measured))?;
    Ok(Outcome { engine, sim, words: engine_words })
}

/// The simulator's stack for `config`: LRU in each tier, sharded as the engine is.
fn stack(s: &Sizes, media: &Media, config: &Config) -> anyhow::Result<AnyPolicy> {
    let mut spec = StackSpec::new("lru", Amount::Text(mib(config.dram)));
    if config.lower != Lower::None {
        spec.lower_capacity = Some(Amount::Text(mib(s.lower)));
    }
    if config.obp {
        spec.nvcache = Some("obp".into());
    }
    spec.shards = Some(media.shards);
    Ok(StackConfig::try_from(spec)?.build()?)
}

/// The simulator's prediction of `config` in virtual time, its policy warmed untimed.
fn predict(
    s: &Sizes,
    devices: &Devices,
    media: &Media,
    config: &Config,
    cpu: &CpuModel,
    (warm, measured): (&[Request], &[Request]),
) -> anyhow::Result<TimedReport> {
    let mut policy = super::warmed(stack(s, media, config)?, warm);
    let mut tiers = vec![devices.dram.clone()];
    tiers.extend(match config.lower {
        Lower::None => None,
        Lower::Mapped => Some(devices.mapped.clone()),
        Lower::Direct => Some(devices.direct.clone()),
    });
    let options = TimedOptions {
        interval_us: 10_000,
        cpu: Some(cpu.clone()),
        // The engine writes its flash tier behind the requests (4 threads by default).
        written_behind: vec![false, config.lower == Lower::Direct],
        ..TimedOptions::closed(config.threads, tiers, devices.backing.clone())
    };
    Ok(simulate_timed(&mut policy, measured, &options))
}

/// What a hit below DRAM in `lower` costs the engine beyond the device's read and the
/// per-request work, at `threads`: one run of a hierarchy holding a uniform set of twice the
/// DRAM tier, so that nearly every request hits and half of them below DRAM. The simulator
/// counts those hits on the same stream; the engine's mean time beyond its prediction without
/// the cost, over the hits below DRAM a request has, is the cost (corrected once by a second
/// prediction with it).
fn fit_lower_hits(
    lab: &Lab,
    s: &Sizes,
    devices: &Devices,
    media: &Media,
    cpu: &CpuModel,
    lower: Lower,
    threads: usize,
) -> anyhow::Result<f64> {
    let set = (2 * s.dram).min(s.dram + s.lower * 3 / 4);
    let (warm, measured) = fit_stream(s, (set, KeyDistribution::Uniform), 1.0, (3, 13));
    let (warm, measured) = (&warm[..], &measured[..]);
    let config = Config { lower, obp: false, threads, reads: 1.0, dram: s.dram };
    let outcome = run_config(s, devices, media, &config, set, cpu, (warm, measured))?;
    let mut policy = super::warmed(stack(s, media, &config)?, warm);
    let mut decision = tiercache_core::Decision::new();
    let mut hits_below = 0;
    for req in measured {
        decision.clear();
        tiercache_policy::Policy::decide(&mut policy, req, &mut decision);
        hits_below += matches!(decision.hit, Some(t) if t != TierId::DRAM) as usize;
    }
    let per_request = hits_below as f64 / measured.len().max(1) as f64;
    let measured_ns = outcome.engine_mean_us() * 1000.0;
    let mut fitted = CpuModel { lower_hit_ns: 0.0, ..cpu.clone() };
    let mut predicted_ns = outcome.sim.latency_us_mean * 1000.0;
    for _ in 0..2 {
        let step = (measured_ns - predicted_ns) / per_request.max(1e-6);
        fitted.lower_hit_ns = (fitted.lower_hit_ns + step).max(0.0);
        let sim = predict(s, devices, media, &config, &fitted, (warm, measured))?;
        predicted_ns = sim.latency_us_mean * 1000.0;
    }
    lab.step(format!(
        "  {}: {:.0} ops/s, hit ratio {}, {:.0}% of requests hit below DRAM, {:.0} ns more each",
        config.label(),
        outcome.engine.ops_per_second,
        pct(outcome.engine_hit_ratio()),
        per_request * 100.0,
        fitted.lower_hit_ns
    ));
    Ok(fitted.lower_hit_ns)
}

/// Measures the four devices; their profiles go in the report's directory as TOML.
fn measure_devices(
    lab: &mut Lab,
    s: &Sizes,
    memory: &Path,
    disk: &Path,
) -> anyhow::Result<Devices> {
    let id = std::process::id();
    let size = |bytes: u64| format_size(bytes.max(16 << 20)).replace(' ', "");
    let media = [
        ("dram", None, size(s.dram)),
        ("memory", Some(memory.join(format!("tiercache-calibrate-{id}.m"))), size(s.lower)),
        ("direct", Some(disk.join(format!("tiercache-calibrate-{id}.d"))), size(s.working_set)),
        ("file", Some(disk.join(format!("tiercache-calibrate-{id}.f"))), size(s.working_set)),
    ];
    let mut profiles = Vec::new();
    for (kind, path, size) in media {
        let args = MeasureArgs {
            path,
            kind: kind.into(),
            size: size.clone(),
            threads: None,
            duration: s.step_seconds,
            name: Some(format!("measured-{kind}")),
            output: None,
            json: false,
        };
        let (measurement, text) = measure::measure(&args)?;
        let file = lab.dir().join(format!("{kind}.toml"));
        std::fs::write(&file, text).with_context(|| format!("cannot write {}", file.display()))?;
        profiles.push(measurement.profile);
    }
    lab.setup(format!(
        "Devices measured by `tiercache profile measure` ({} s a step): `--kind dram --size \
         {0}`, `--kind memory` on a tmpfs file, `--kind direct` and `--kind file` on disk files \
         of the working set's size; the profiles are in [calibrate/](calibrate/) as TOML",
        s.step_seconds,
    ));
    let mut profiles = profiles.into_iter();
    let mut next = || profiles.next().expect("four profiles");
    Ok(Devices {
        dram: next(),
        mapped: next(),
        direct: next(),
        backing: next(),
        mapped_extra: (0.0, 0.0),
    })
}

/// A fit's requests: `distribution` over `set` bytes, `reads` of them reads, seeded by `seed`;
/// `passes` passes over the set of warm-up, then `s.measured` (at most 200,000) measured.
fn fit_stream(
    s: &Sizes,
    (set, distribution): (u64, KeyDistribution),
    reads: f64,
    (passes, seed): (u64, u64),
) -> (Vec<Request>, Vec<Request>) {
    let blocks_in_set = set / BLOCK;
    let count = s.measured.min(200_000) + blocks_in_set * passes;
    let mut warm = blocks(distribution, blocks_in_set, count, reads, seed);
    let measured = warm.split_off((blocks_in_set * passes) as usize);
    (warm, measured)
}

/// One engine run for a fit: `words` over a uniform stream of `set` bytes (`reads` of them
/// reads), warmed by two passes over the set; its mean time per read and per write in ns, and
/// its hit ratio.
fn fit_run(
    lab: &Lab,
    s: &Sizes,
    what: &str,
    engine: Vec<String>,
    set: u64,
    reads: f64,
) -> anyhow::Result<(f64, f64, f64)> {
    let (warm, measured) = fit_stream(s, (set, KeyDistribution::Uniform), reads, (2, 11));
    let mut words = engine;
    words.extend(["--working-set".to_string(), mib(set)]);
    let args = crate::args_from::<bench::BenchArgs, _>("bench", words)?;
    let report = bench::measure(&args, Some(Replay::new(warm, measured)))?;
    let hit = report.hit_ratio.unwrap_or(0.0);
    lab.step(format!(
        "  {what}: {:.0} ops/s, hit ratio {}, {:.3} us a read, {:.3} us a write",
        report.ops_per_second,
        pct(hit),
        report.read.mean_us,
        report.write.mean_us
    ));
    Ok((report.read.mean_us * 1000.0, report.write.mean_us * 1000.0, hit))
}

fn service(p: &DeviceProfile, d: Direction) -> f64 {
    p.service_ns(d, BLOCK, 0)
}

/// The cache's own work at `threads` threads: what engine runs took beyond what the simulator
/// predicts of them. Three runs of a DRAM tier alone: holding its whole set (every read a
/// hit); of the checked size under a uniform stream over the working set (mostly misses);
/// writes only, Zipf over the whole working set, into a DRAM tier that holds it. Each takes
/// `request + (1 - hit) miss [+ write]` of the cores beside the devices' time (every miss of
/// these runs brings its block in; one the admission keeps out costs no `miss`). The simulator
/// predicts each run with the model so far, and the three residuals give corrections to the
/// three unknowns; three rounds, so that what the model adds at two threads (queueing for the
/// cores, devices' contention) is fitted through the model itself, not beside it.
///
/// The writes run over the working set as the checked configurations' do because a write
/// through the page cache costs more the more of the file is written (dirtying a clean page
/// costs the file system more than rewriting a dirty one): on 2026-11-25 the same writes cost
/// 4.4 us a block over 32 MiB and 9 to 15 us over 256 MiB.
fn fit_cpu(
    lab: &Lab,
    s: &Sizes,
    devices: &Devices,
    media: &Media,
    threads: usize,
    cores: usize,
) -> anyhow::Result<CpuModel> {
    let dram =
        |reads: f64, dram: u64| Config { lower: Lower::None, obp: false, threads, reads, dram };
    let zipf = KeyDistribution::ScrambledZipf { theta: 0.9 };
    let runs = [
        ("every read a hit", dram(1.0, 2 * s.dram), (s.dram, KeyDistribution::Uniform)),
        ("mostly misses", dram(1.0, s.dram), (s.working_set, KeyDistribution::Uniform)),
        ("every write a hit", dram(0.0, 2 * s.working_set), (s.working_set, zipf)),
    ];
    let mut model =
        CpuModel { cores, request_ns: 0.0, miss_ns: 0.0, write_ns: 0.0, lower_hit_ns: 0.0 };
    let mut fits = Vec::new();
    for (what, config, (set, distribution)) in runs {
        let (warm, measured) = fit_stream(s, (set, distribution), config.reads, (2, 11));
        let stream = (&warm[..], &measured[..]);
        let outcome = run_config(s, devices, media, &config, set, &model, stream)?;
        lab.step(format!(
            "  {threads} thread(s), {what}: {:.0} ops/s, hit ratio {}, {:.3} us a request",
            outcome.engine.ops_per_second,
            pct(outcome.engine_hit_ratio()),
            outcome.engine_mean_us()
        ));
        fits.push((config, outcome.engine_mean_us() * 1000.0, warm, measured));
    }
    for _ in 0..3 {
        // Per run: what the engine took beyond the prediction, and the prediction's misses.
        let mut residual = [(0.0, 0.0); 3];
        for (i, (config, took_ns, warm, measured)) in fits.iter().enumerate() {
            let sim = predict(s, devices, media, config, &model, (warm, measured))?;
            residual[i] = (took_ns - sim.latency_us_mean * 1000.0, 1.0 - sim.hit_ratio);
        }
        let [(r_hit, m_hit), (r_miss, m_miss), (r_write, m_write)] = residual;
        let d_miss = (r_miss - r_hit) / (m_miss - m_hit).max(1e-6);
        let d_request = r_hit - m_hit * d_miss;
        let d_write = r_write - d_request - m_write * d_miss;
        model.request_ns = (model.request_ns + d_request).max(0.0);
        model.miss_ns = (model.miss_ns + d_miss).max(0.0);
        model.write_ns = (model.write_ns + d_write).max(0.0);
    }
    Ok(model)
}

/// What the engine's mapped tier adds to the medium per read and per write (its checks and
/// seals), added to the mapped profile's latencies: two runs at one thread of a mapped tier
/// alone, holding its set or nearly nothing, each taking `request + hit (read + extra_read) +
/// (1 - hit) (miss + backing read + write + extra_write)` with `cpu` fitted at one thread.
fn fit_mapped(lab: &Lab, s: &Sizes, devices: &mut Devices, cpu: &CpuModel) -> anyhow::Result<()> {
    let (request_ns, miss_ns) = (cpu.request_ns, cpu.miss_ns);
    let backing_read = service(&devices.backing, Direction::Read);
    let label = |what: &str| format!("1 thread(s), {what}");
    let path = super::memory_dir().join(format!("tiercache-calibrate-{}.fit", std::process::id()));
    let _scratch = Scratch(vec![path.clone()]);
    // Every read checks its block: the medium's own cost of a check, whatever the path.
    let mapped = |size: u64| {
        let p = path.to_string_lossy().to_string();
        words(&["--slow-path", &p, "--slow-size", &mib(size), "--scrub-rate", "0"])
    };
    let (took_c, _, hit_c) =
        fit_run(lab, s, &label("mapped tier, every read a hit"), mapped(2 * s.dram), s.dram, 1.0)?;
    let (took_d, _, hit_d) =
        fit_run(lab, s, &label("mapped tier, mostly misses"), mapped(s.dram), s.working_set, 1.0)?;
    let (mapped_read, mapped_write) =
        (service(&devices.mapped, Direction::Read), service(&devices.mapped, Direction::Write));
    // What is left is hit * extra_read + (1 - hit) * extra_write.
    let left = |took: f64, hit: f64| {
        took - request_ns
            - hit * mapped_read
            - (1.0 - hit) * (miss_ns + backing_read + mapped_write)
    };
    let (left_c, left_d) = (left(took_c, hit_c), left(took_d, hit_d));
    let extra_write = ((left_d * hit_c - left_c * hit_d) / (hit_c - hit_d).max(1e-6)).max(0.0);
    let extra_read = ((left_c - (1.0 - hit_c) * extra_write) / hit_c.max(1e-6)).max(0.0);
    devices.mapped.read_latency_us += extra_read / 1000.0;
    devices.mapped.write_latency_us += extra_write / 1000.0;
    devices.mapped_extra = (extra_read, extra_write);
    Ok(())
}

/// Why a configuration fails the rule: the part of the model its neighbours single out.
fn blame(config: &Config, outcome: &Outcome, all: &[(Config, Outcome)]) -> String {
    if outcome.holds() {
        return "-".into();
    }
    let error = outcome.throughput_error();
    let within = |e: f64| e.abs() <= THROUGHPUT_TOLERANCE;
    let direction = if error > 0.0 { "predicted too fast" } else { "predicted too slow" };
    if outcome.hit_points().abs() > HIT_POINTS {
        return format!(
            "placement: the hit ratios differ by {:+.1} points (each of the engine's shards \
             decides over its share, with its own LRU and OBP ratio; the simulator over the \
             whole cache), so the devices see other work",
            outcome.hit_points() * 100.0
        );
    }
    let same =
        |c: &Config| c.lower == config.lower && c.obp == config.obp && c.reads == config.reads;
    if config.threads > 1 {
        if let Some(e) = config.twin(all, |c| same(c) && c.threads == 1).filter(|e| within(*e)) {
            return format!(
                "concurrency ({direction}): the same at 1 thread is within {}, so the error \
                 is in how threads share the cores and devices (queueing, contention)",
                signed(e)
            );
        }
    }
    let same_but_mix =
        |c: &Config| c.lower == config.lower && c.obp == config.obp && c.threads == config.threads;
    if config.reads < 1.0 {
        if let Some(e) =
            config.twin(all, |c| same_but_mix(c) && c.reads >= 1.0).filter(|e| within(*e))
        {
            return format!(
                "writes ({direction}): read-only it is within {}, so a write's cost (the \
                 backing file's page-cache write, the tier's update) is modeled wrong",
                signed(e)
            );
        }
    }
    if config.obp {
        let twin = config.twin(all, |c| {
            c.lower == config.lower
                && !c.obp
                && c.threads == config.threads
                && c.reads == config.reads
        });
        if let Some(e) = twin.filter(|e| within(*e)) {
            let knob = |k: &std::collections::BTreeMap<&'static str, f64>| {
                k.get("obp").map_or("-".to_string(), |v| f3(*v))
            };
            let sim_knob = outcome.sim.series.last().map_or("-".to_string(), |p| knob(&p.knobs));
            return format!(
                "OBP's controller ({direction}): without OBP it is within {}; OBP ended at {} \
                 in the engine, {} in the simulator",
                signed(e),
                knob(&outcome.engine.knobs),
                sim_knob
            );
        }
    }
    if config.lower != Lower::None {
        let twin = config.twin(all, |c| {
            c.lower == Lower::None && c.threads == config.threads && c.reads == config.reads
        });
        if let Some(e) = twin.filter(|e| within(*e)) {
            return format!(
                "the {} tier's device model ({direction}): DRAM alone is within {}",
                config.lower.name().trim_start_matches("dram+"),
                signed(e)
            );
        }
    }
    format!(
        "the cost per operation ({direction}): no neighbouring configuration is within the rule \
         either, so the fitted CPU model or the DRAM and backing devices' are off"
    )
}

fn report(lab: &mut Lab, results: &[(Config, Outcome)]) -> anyhow::Result<()> {
    lab.heading("Predicted against measured");
    let rows: Vec<Vec<String>> = results
        .iter()
        .map(|(c, o)| {
            let mean = o.engine_mean_us();
            vec![
                c.label(),
                f0(o.engine.ops_per_second),
                f0(o.sim.ops_per_second),
                signed(o.throughput_error()),
                f3(mean),
                f3(o.sim.latency_us_mean),
                signed(o.sim.latency_us_mean / mean - 1.0),
                f3(o.engine.read.p99_us),
                f3(o.sim.reads.p99_us),
                pct(o.engine_hit_ratio()),
                pct(o.sim.hit_ratio),
                format!("{:+.2}", o.hit_points() * 100.0),
                blame(c, o, results),
            ]
        })
        .collect();
    lab.table(
        "predicted",
        &[
            "configuration",
            "measured ops/s",
            "predicted ops/s",
            "error",
            "measured mean us",
            "predicted mean us",
            "error",
            "measured read p99 us",
            "predicted read p99 us",
            "measured hit ratio",
            "predicted hit ratio",
            "points",
            "where a miss comes from",
        ],
        &rows,
    )?;
    let commands: Vec<Vec<String>> = results
        .iter()
        .map(|(c, o)| vec![c.label(), format!("`tiercache bench {}`", o.words.join(" "))])
        .collect();
    lab.table("commands", &["configuration", "the engine's options"], &commands)?;
    let points = |f: fn(&Outcome) -> f64| -> Vec<(f64, f64)> {
        results.iter().enumerate().map(|(i, (_, o))| (i as f64, f(o))).collect()
    };
    lab.chart(
        "throughput",
        &Chart {
            title: "Throughput: the engine measured, the simulator's prediction",
            x_label: "configuration (as listed in the table)",
            y_label: "ops/s",
            log_x: None,
            x_format: |x| format!("{}", x.round() as i64 + 1),
            y_format: None,
            series: &[
                series("measured (engine)", points(|o| o.engine.ops_per_second)),
                series("predicted (simulator)", points(|o| o.sim.ops_per_second)),
            ],
        },
    )?;
    lab.claim(
        Claim::value(
            "Model target",
            "The simulator predicts the engine's throughput within 15% in every configuration",
            "|predicted / measured - 1| <= 15% in each configuration",
        )
        .ours()
        .cases(results.iter().map(|(c, o)| {
            let e = o.throughput_error();
            Case::new(c.label(), signed(e), "within +-15.0%", e.abs() <= THROUGHPUT_TOLERANCE)
        }))
        .context("devices measured on this machine, the CPU model fitted on other runs"),
    );
    lab.claim(
        Claim::value(
            "Model target",
            "The simulator predicts the engine's hit ratio within 1 point in every configuration",
            "|predicted - measured| <= 1 point in each configuration",
        )
        .ours()
        .cases(results.iter().map(|(c, o)| {
            let d = o.hit_points() * 100.0;
            Case::new(c.label(), format!("{d:+.2} points"), "within +-1 point", d.abs() <= 1.0)
        })),
    );
    Ok(())
}

/// Writes Hurt Figure 2's method on DRAM and the disk: `cores` readers, 0 to 8 writers.
fn figure_2(lab: &mut Lab, s: &Sizes, disk: &Path, cores: usize) -> anyhow::Result<()> {
    lab.step("Writes Hurt Figure 2 on DRAM and the disk");
    let id = std::process::id();
    let dram_args = MeasureArgs {
        path: None,
        kind: "dram".into(),
        size: mib(s.lower.max(16 << 20)),
        threads: None,
        duration: s.step_seconds,
        name: None,
        output: None,
        json: false,
    };
    let disk_args = MeasureArgs {
        path: Some(disk.join(format!("tiercache-calibrate-{id}.fig2"))),
        kind: "direct".into(),
        size: mib(s.working_set.max(16 << 20)),
        ..dram_args.clone()
    };
    let dram = measure::reads_under_writers(&dram_args, cores, &WRITERS)?;
    let direct = measure::reads_under_writers(&disk_args, cores, &WRITERS)?;
    let gb = |ops: f64| ops * BLOCK as f64 / 1e9;
    let share = |curve: &[(usize, f64)], w: usize| {
        let base = curve[0].1.max(1e-9);
        curve.iter().find(|(x, _)| *x == w).map_or(f64::NAN, |(_, ops)| ops / base)
    };
    let paper =
        |w: usize, table: &[(usize, f64)]| table.iter().find(|(x, _)| *x == w).map(|(_, v)| *v);
    let rows: Vec<Vec<String>> = WRITERS
        .iter()
        .map(|&w| {
            let optane = paper(w, &OPTANE_GB_S);
            vec![
                w.to_string(),
                format!("{:.2}", gb(dram.iter().find(|(x, _)| *x == w).map_or(0.0, |p| p.1))),
                pct(share(&dram, w)),
                format!("{:.3}", gb(direct.iter().find(|(x, _)| *x == w).map_or(0.0, |p| p.1))),
                pct(share(&direct, w)),
                optane.map_or("-".into(), |v| format!("{v:.1}")),
                optane.map_or("-".into(), |v| pct(v / OPTANE_GB_S[0].1)),
                paper(w, &DRAM_SHARE).map_or("-".into(), pct),
            ]
        })
        .collect();
    lab.heading("Writes Hurt Figure 2 on this machine");
    lab.setup(format!(
        "Figure 2: {cores} reader threads (one per core; the paper ran 8 on a larger machine) \
         of 4 KiB random reads, with 0-8 writer threads of 4 KiB random writes, {} s each; DRAM \
         is the process's memory, the disk a file with O_DIRECT. Writers beyond the free cores \
         take the readers' processor time as well as the medium's",
        s.step_seconds
    ));
    lab.table(
        "figure2",
        &[
            "writers",
            "DRAM read GB/s",
            "DRAM share",
            "disk read GB/s",
            "disk share",
            "paper: Optane GB/s",
            "paper: Optane share",
            "paper: DRAM share",
        ],
        &rows,
    )?;
    let curve = |c: &[(usize, f64)]| -> Vec<(f64, f64)> {
        c.iter().map(|(w, _)| (*w as f64, share(c, *w))).collect()
    };
    let paper_curve = |t: &[(usize, f64)]| -> Vec<(f64, f64)> {
        t.iter().map(|(w, v)| (*w as f64, v / t[0].1)).collect()
    };
    lab.chart(
        "figure2",
        &Chart {
            title: "Read throughput with concurrent writers, relative to none (Writes Hurt Fig. 2)",
            x_label: "concurrent writers",
            y_label: "share of read throughput",
            log_x: None,
            x_format: |x| format!("{x:.0}"),
            y_format: None,
            series: &[
                series("this machine: DRAM", curve(&dram)),
                series("this machine: disk (O_DIRECT)", curve(&direct)),
                series("paper: Optane NVRAM", paper_curve(&OPTANE_GB_S)),
                series("paper: DRAM", paper_curve(&DRAM_SHARE)),
            ],
        },
    )?;
    let optane_share = |w: usize| paper(w, &OPTANE_GB_S).expect("in the table") / OPTANE_GB_S[0].1;
    lab.claim(
        Claim::shape(
            "Writes Hurt §2, Figure 2",
            "Concurrent writers cost DRAM's reads far less than Optane's: DRAM loses 18% with one \
             writer and 35% with eight, Optane 72% and 93%",
            "this machine's DRAM keeps a larger share of its read throughput than the paper's \
             Optane with 1 writer (28.3%) and with 8 writers (6.7%)",
        )
        .cases([1, 8].map(|w| {
            Case::at_least(format!("DRAM, {w} writer(s)"), share(&dram, w), optane_share(w), pct)
                .paper(pct(paper(w, &DRAM_SHARE).expect("in the table")))
        }))
        .context(format!("{cores} readers; the paper's 8 readers ran on 2 NVDIMMs")),
    );
    Ok(())
}
