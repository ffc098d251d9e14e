//! `tiercache profile measure`: a device profile measured on the medium itself, the way the
//! papers measured theirs: 4 KiB read and write latency at queue depth 1; read and write
//! bandwidth with large sequential requests on many threads; parallelism, the concurrency where
//! 4 KiB read throughput stops growing, and contention, how much short of `parallelism` times
//! one reader's rate it gets there; and write-to-read interference, read throughput with 0, 1
//! and many concurrent writers (Writes Hurt §2, Figure 2's method). The result is the TOML the
//! simulator (`sim --profile`) and the emulator (`--slow-profile`, `--backing-profile`) read.
//!
//! The simulator charges an operation its profile's latency plus its bytes at the device's
//! bandwidth shared among its `parallelism` servers; so the latency written is the measured
//! 4 KiB time less that transfer, and the simulator then charges a 4 KiB operation at queue
//! depth 1 what was measured (the bandwidth is raised where one server's share would move a
//! 4 KiB block slower than it moved alone, as memory does). The measured times are in the JSON
//! as they are. (`tiercache lab run calibrate` found the first version, which wrote the
//! measured time as the latency, charging memory the transfer twice.)

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use clap::Args;
use memmap2::MmapRaw;
use serde::Serialize;
use tiercache_core::{format_size, parse_size, DeviceProfile, SeededRng};
use tiercache_engine::aligned::AlignedBuf;
use tiercache_engine::device::DirectFile;
use tiercache_engine::device::{Device, FileDevice};

use crate::progress::Progress;

#[derive(Args, Clone, Debug)]
pub struct MeasureArgs {
    /// A new file to measure on, made for the measurement and removed after: where it lies
    /// decides the medium (a DAX mount, a CXL or NUMA-bound tmpfs, a disk). A file that exists
    /// is refused, since the measurement writes all of it. Not with --kind dram.
    #[arg(long)]
    pub path: Option<PathBuf>,
    /// memory (the file mapped), file (read and written through the page cache), direct
    /// (O_DIRECT, around the page cache), or dram (the process's own memory, no file).
    #[arg(long, default_value = "file")]
    pub kind: String,
    /// Size of the file (at least 16 MiB): larger than the caches in front of the medium.
    #[arg(long, default_value = "256MiB")]
    pub size: String,
    /// Most threads of the bandwidth, parallelism and interference steps [default: twice the
    /// cores, at least 4].
    #[arg(long)]
    pub threads: Option<usize>,
    /// Seconds of each step (there are 7 plus the parallelism curve's).
    #[arg(long, default_value_t = 0.5)]
    pub duration: f64,
    /// The profile's name [default: measured-KIND].
    #[arg(long)]
    pub name: Option<String>,
    /// Write the profile's TOML here.
    #[arg(short, long)]
    pub output: Option<PathBuf>,
    /// Print the measurement (the profile, the nearest preset, the raw figures) as one JSON
    /// object instead of the comparison and the TOML.
    #[arg(long)]
    pub json: bool,
}

const BLOCK: usize = 4096;
const LARGE: usize = 1 << 20;

/// The medium under measurement.
enum Medium {
    Memory(MmapRaw),
    Io(Arc<dyn Device>),
}

impl Medium {
    fn read(&self, buf: &mut [u8], at: u64) -> anyhow::Result<()> {
        match self {
            // SAFETY: `at + buf.len()` lies in the mapping (the callers stay below its size);
            // other threads may store to the same bytes, so they are loaded as atomics.
            Medium::Memory(map) => unsafe {
                tiercache_engine::atomic_bytes::load(
                    map.as_ptr().add(at as usize),
                    buf.as_mut_ptr(),
                    buf.len(),
                )
            },
            Medium::Io(device) => {
                tiercache_engine::device::read_exact_at(&**device, buf, at)?;
            }
        }
        Ok(())
    }

    fn write(&self, data: &[u8], at: u64) -> anyhow::Result<()> {
        match self {
            // SAFETY: as in `read`; stores are atomic for concurrent readers of these bytes.
            Medium::Memory(map) => unsafe {
                tiercache_engine::atomic_bytes::store(
                    data.as_ptr(),
                    map.as_mut_ptr().add(at as usize),
                    data.len(),
                )
            },
            Medium::Io(device) => device.write_at(data, at)?,
        }
        Ok(())
    }
}

/// Removes the measured file at the end, whatever happens.
struct Scratch(PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Makes the file and opens it as `kind` (or, for `dram`, takes anonymous memory); the file
/// goes when the returned guard drops (and at once if opening it fails).
fn open(path: Option<&Path>, kind: &str, size: u64) -> anyhow::Result<(Medium, Option<Scratch>)> {
    let path = match (kind, path) {
        ("dram", None) => {
            let map = memmap2::MmapMut::map_anon(size as usize)
                .with_context(|| format!("cannot take {} of memory", format_size(size)))?;
            return Ok((Medium::Memory(MmapRaw::from(map)), None));
        }
        ("dram", Some(path)) => {
            bail!("--kind dram measures the process's memory: no --path ({})", path.display())
        }
        (_, Some(path)) => path,
        (_, None) => bail!("--kind {kind} measures a file: give --path"),
    };
    let shown = path.display();
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .open(path)
        .with_context(|| match path.exists() {
            true => format!(
                "--path {shown} exists: the measurement writes all of it, so it takes a new file"
            ),
            false => format!("--path {shown}: cannot create the file"),
        })?;
    let scratch = Scratch(path.to_path_buf());
    file.set_len(size).with_context(|| format!("{shown}: cannot make it {size} bytes"))?;
    let medium = match kind {
        "memory" => {
            let map = MmapRaw::map_raw(&file).with_context(|| format!("{shown}: cannot map it"))?;
            Medium::Memory(map)
        }
        "file" => Medium::Io(Arc::new(FileDevice::new(file, path))),
        "direct" => {
            drop(file);
            Medium::Io(Arc::new(DirectFile::open(path).map_err(anyhow::Error::new)?))
        }
        other => bail!("--kind {other}: use memory, file, direct or dram"),
    };
    Ok((medium, Some(scratch)))
}

/// A buffer direct I/O accepts (aligned), filled with `byte`.
fn buffer(len: usize, byte: u8) -> AlignedBuf {
    let mut buf = AlignedBuf::new(len);
    buf.as_mut_slice().fill(byte);
    buf
}

/// What one thread of a step does, again and again until the step ends: `op(rng, buf)`.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Work {
    RandomRead,
    RandomWrite,
    /// Sequential large requests over this thread's share of the file.
    SequentialRead,
    SequentialWrite,
}

/// Runs `work` on `threads` threads for `seconds` (and `background` writers beside them, not
/// counted); returns operations done by the counted threads and their mean latency in us.
fn step(
    medium: &Medium,
    size: u64,
    seconds: f64,
    threads: usize,
    work: Work,
    background: usize,
) -> anyhow::Result<(f64, f64)> {
    let stop = AtomicBool::new(false);
    let ops = AtomicU64::new(0);
    let nanos = AtomicU64::new(0);
    let all = threads + background;
    let result: anyhow::Result<()> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..all)
            .map(|t| {
                let (stop, ops, nanos) = (&stop, &ops, &nanos);
                let work = if t < threads { work } else { Work::RandomWrite };
                scope.spawn(move || -> anyhow::Result<()> {
                    let large = matches!(work, Work::SequentialRead | Work::SequentialWrite);
                    let len = if large { LARGE } else { BLOCK };
                    let mut buf = buffer(len, t as u8);
                    let mut rng = SeededRng::new(t as u64 + 1);
                    let slots = size / len as u64;
                    // Each sequential thread walks its own share of the file.
                    let share = (slots / threads.max(1) as u64).max(1);
                    let mut next = t as u64 * share;
                    let (mut done, mut spent) = (0u64, 0u64);
                    while !stop.load(Ordering::Relaxed) {
                        let slot = match large {
                            true => {
                                next = if next + 1 >= (t as u64 + 1) * share || next + 1 >= slots {
                                    t as u64 * share
                                } else {
                                    next + 1
                                };
                                next
                            }
                            false => rng.below(slots),
                        };
                        let at = slot * len as u64;
                        let started = Instant::now();
                        match work {
                            Work::RandomRead | Work::SequentialRead => {
                                medium.read(buf.as_mut_slice(), at)?
                            }
                            Work::RandomWrite | Work::SequentialWrite => {
                                medium.write(buf.as_slice(), at)?
                            }
                        }
                        spent += started.elapsed().as_nanos() as u64;
                        done += 1;
                    }
                    if t < threads {
                        ops.fetch_add(done, Ordering::Relaxed);
                        nanos.fetch_add(spent, Ordering::Relaxed);
                    }
                    Ok(())
                })
            })
            .collect();
        std::thread::sleep(Duration::from_secs_f64(seconds));
        stop.store(true, Ordering::Relaxed);
        handles.into_iter().try_for_each(|h| h.join().expect("a measuring thread panicked"))
    });
    result?;
    let done = ops.load(Ordering::Relaxed);
    let mean_us = nanos.load(Ordering::Relaxed) as f64 / done.max(1) as f64 / 1000.0;
    Ok((done as f64 / seconds, mean_us))
}

/// Everything measured, beside the profile made of it.
#[derive(Serialize)]
pub struct Measurement {
    pub path: Option<PathBuf>,
    pub kind: String,
    pub size: u64,
    pub threads: usize,
    pub step_seconds: f64,
    pub profile: DeviceProfile,
    /// Mean time of one 4 KiB read and write at queue depth 1, in microseconds, as measured.
    pub read_4k_us: f64,
    pub write_4k_us: f64,
    /// 4 KiB random reads per second at each concurrency.
    pub parallelism_curve: Vec<(usize, f64)>,
    /// 4 KiB random reads per second of one reader with 0, 1 and `writers` writers.
    pub interference: Vec<(usize, f64)>,
    pub nearest_preset: String,
}

/// The preset nearest to `profile`: the smallest sum of squared log ratios of the latencies
/// and bandwidths.
fn nearest(profile: &DeviceProfile) -> DeviceProfile {
    let distance = |p: &DeviceProfile| {
        let pairs = [
            (profile.read_latency_us, p.read_latency_us),
            (profile.write_latency_us, p.write_latency_us),
            (profile.read_bandwidth_gb_s, p.read_bandwidth_gb_s),
            (profile.write_bandwidth_gb_s, p.write_bandwidth_gb_s),
        ];
        pairs.iter().map(|(a, b)| (a.max(1e-6) / b.max(1e-6)).ln().powi(2)).sum::<f64>()
    };
    DeviceProfile::PRESETS
        .split(", ")
        .filter_map(DeviceProfile::preset)
        .min_by(|a, b| distance(a).total_cmp(&distance(b)))
        .expect("presets exist")
}

/// The checked size, step time and thread count of `args`.
fn settings(args: &MeasureArgs) -> anyhow::Result<(u64, f64, usize)> {
    let size = parse_size(&args.size).context("--size")?;
    anyhow::ensure!(size >= 16 << 20, "--size {}: at least 16 MiB", args.size);
    anyhow::ensure!(size <= 1 << 40, "--size {}: at most 1 TiB", args.size);
    let size = size.next_multiple_of(LARGE as u64);
    anyhow::ensure!(
        args.duration.is_finite() && (0.01..=600.0).contains(&args.duration),
        "--duration {}: between 0.01 and 600 seconds",
        args.duration
    );
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let threads = args.threads.unwrap_or((2 * cores).max(4));
    anyhow::ensure!((1..=256).contains(&threads), "--threads {threads}: between 1 and 256");
    Ok((size, args.duration, threads))
}

/// Opens the medium `args` name and writes all of it, so reads read what it holds.
fn prepared(args: &MeasureArgs, size: u64) -> anyhow::Result<(Medium, Option<Scratch>)> {
    let (medium, scratch) = open(args.path.as_deref(), &args.kind, size)?;
    let chunk = buffer(LARGE, 0x5a);
    for at in (0..size).step_by(LARGE) {
        medium.write(chunk.as_slice(), at)?;
    }
    Ok((medium, scratch))
}

/// Writes Hurt's Figure 2 method on the medium `args` names: 4 KiB random reads per second of
/// `readers` threads with each number of concurrent writers in `writers`.
pub fn reads_under_writers(
    args: &MeasureArgs,
    readers: usize,
    writers: &[usize],
) -> anyhow::Result<Vec<(usize, f64)>> {
    let (size, seconds, _) = settings(args)?;
    let (medium, _scratch) = prepared(args, size)?;
    let mut curve = Vec::new();
    for &w in writers {
        let (ops, _) = step(&medium, size, seconds, readers, Work::RandomRead, w)?;
        curve.push((w, ops));
    }
    Ok(curve)
}

/// Measures the medium `args` names; returns the measurement and the TOML of its profile.
pub fn measure(args: &MeasureArgs) -> anyhow::Result<(Measurement, String)> {
    let (size, seconds, threads) = settings(args)?;
    let shown = args.path.as_ref().map_or("memory".into(), |p| p.display().to_string());
    let mut curve_points = vec![1];
    while curve_points.last().is_some_and(|c| c * 2 <= threads) {
        curve_points.push(curve_points.last().expect("non-empty") * 2);
    }
    let writers = threads.min(8);
    let total = 7 + curve_points.len() as u64;
    let mut progress = Progress::new(&format!("measuring {shown}"), Some(total));
    let mut done = 0;
    let mut tick = |progress: &mut Progress| {
        done += 1;
        progress.set(done);
    };
    let (medium, _scratch) = prepared(args, size)?;
    tick(&mut progress);
    let (_, read_4k_us) = step(&medium, size, seconds, 1, Work::RandomRead, 0)?;
    tick(&mut progress);
    let (_, write_4k_us) = step(&medium, size, seconds, 1, Work::RandomWrite, 0)?;
    tick(&mut progress);
    let (reads, _) = step(&medium, size, seconds, threads, Work::SequentialRead, 0)?;
    let read_bandwidth_gb_s = reads * LARGE as f64 / 1e9;
    tick(&mut progress);
    let (writes, _) = step(&medium, size, seconds, threads, Work::SequentialWrite, 0)?;
    let write_bandwidth_gb_s = writes * LARGE as f64 / 1e9;
    tick(&mut progress);
    let mut parallelism_curve = Vec::new();
    for &c in &curve_points {
        let (ops, _) = step(&medium, size, seconds, c, Work::RandomRead, 0)?;
        parallelism_curve.push((c, ops));
        tick(&mut progress);
    }
    // Where throughput stops growing: the least concurrency within 10% of the best.
    let best = parallelism_curve.iter().map(|(_, ops)| *ops).fold(0.0, f64::max);
    let (parallelism, at_parallelism) =
        parallelism_curve.iter().copied().find(|(_, ops)| *ops >= 0.9 * best).unwrap_or((1, best));
    // How much `parallelism` reads at once slow each other: together they reach `speedup`
    // times one read's rate, where servers that did not meet would reach `parallelism` times.
    let speedup = at_parallelism / parallelism_curve[0].1.max(1e-9);
    let contention = match parallelism {
        1 => 0.0,
        p => ((p as f64 / speedup - 1.0) / (p as f64 - 1.0)).clamp(0.0, 10.0),
    };
    // A server's share of the bandwidth moves one 4 KiB block in at most the time it took
    // alone: memory moves small blocks at random faster than one large stream.
    let floor = |block_us: f64| parallelism as f64 * BLOCK as f64 / (block_us * 1e3);
    let read_bandwidth_gb_s = read_bandwidth_gb_s.max(floor(read_4k_us));
    let write_bandwidth_gb_s = write_bandwidth_gb_s.max(floor(write_4k_us));
    let mut interference = Vec::new();
    for background in [0, 1, writers] {
        let (ops, _) = step(&medium, size, seconds, 1, Work::RandomRead, background)?;
        interference.push((background, ops));
    }
    tick(&mut progress);
    progress.finish();
    let share = |with: f64| (with / interference[0].1.max(1e-9)).clamp(1e-3, 1.0);
    // The simulator adds the transfer at a server's share of bandwidth to the latency.
    let latency = |measured_us: f64, bandwidth_gb_s: f64| {
        let transfer_us = BLOCK as f64 / (bandwidth_gb_s * 1e3 / parallelism as f64);
        (measured_us - transfer_us).max(0.0)
    };
    let profile = DeviceProfile {
        name: args.name.clone().unwrap_or_else(|| format!("measured-{}", args.kind)),
        read_latency_us: latency(read_4k_us, read_bandwidth_gb_s),
        write_latency_us: latency(write_4k_us, write_bandwidth_gb_s),
        read_bandwidth_gb_s,
        write_bandwidth_gb_s,
        parallelism: parallelism as u32,
        read_share_one_writer: share(interference[1].1),
        read_share_eight_writers: share(interference[2].1),
        cost_per_gb: 0.0,
        sequential_latency_us: None,
        contention,
    };
    profile.validate().map_err(anyhow::Error::msg).context("the measured profile")?;
    let text = format!(
        "# Measured by `tiercache profile measure --kind {} --size {}` on {shown} ({} threads, \
         {} s a step; the eight-writer share with {writers} writers; 4 KiB at queue depth 1: \
         read {read_4k_us:.3} us, write {write_4k_us:.3} us). cost_per_gb is not measured: set \
         it.\n{}",
        args.kind,
        format_size(size),
        threads,
        seconds,
        profile.to_toml()
    );
    let measurement = Measurement {
        path: args.path.clone(),
        kind: args.kind.clone(),
        size,
        threads,
        step_seconds: seconds,
        nearest_preset: nearest(&profile).name,
        profile,
        read_4k_us,
        write_4k_us,
        parallelism_curve,
        interference,
    };
    Ok((measurement, text))
}

pub fn run(args: &MeasureArgs) -> anyhow::Result<()> {
    let (measurement, text) = measure(args)?;
    if let Some(output) = &args.output {
        std::fs::write(output, &text)
            .with_context(|| format!("cannot write {}", output.display()))?;
    }
    let near = DeviceProfile::preset(&measurement.nearest_preset).expect("a preset's name");
    if args.json {
        println!("{}", serde_json::to_string_pretty(&measurement)?);
        return Ok(());
    }
    print_beside(&measurement, &near);
    if args.output.is_none() {
        print!("\n{text}");
    }
    Ok(())
}

fn print_beside(m: &Measurement, near: &DeviceProfile) {
    let p = &m.profile;
    println!("{:<26} {:>14} {:>14}", "", "measured", format!("{} (nearest)", near.name));
    let rows = [
        ("read latency (us)", p.read_latency_us, near.read_latency_us),
        ("write latency (us)", p.write_latency_us, near.write_latency_us),
        ("read bandwidth (GB/s)", p.read_bandwidth_gb_s, near.read_bandwidth_gb_s),
        ("write bandwidth (GB/s)", p.write_bandwidth_gb_s, near.write_bandwidth_gb_s),
        ("parallelism", p.parallelism as f64, near.parallelism as f64),
        ("read share, 1 writer", p.read_share_one_writer, near.read_share_one_writer),
        ("read share, 8 writers", p.read_share_eight_writers, near.read_share_eight_writers),
    ];
    for (what, ours, theirs) in rows {
        println!("{what:<26} {ours:>14.3} {theirs:>14.3}");
    }
    let curve: Vec<String> =
        m.parallelism_curve.iter().map(|(c, ops)| format!("{c}: {:.0}", ops)).collect();
    println!("4 KiB reads/s by concurrency: {}", curve.join(", "));
    let inter: Vec<String> =
        m.interference.iter().map(|(w, ops)| format!("{w} writers: {:.0}", ops)).collect();
    println!("one reader's 4 KiB reads/s: {}", inter.join(", "));
}
