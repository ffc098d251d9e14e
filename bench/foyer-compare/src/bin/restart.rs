//! Restarts, tiercache next to foyer's hybrid cache on the same disk-tier size (#53): a child
//! process fills each cache's disk tier with 4 KiB values (a quarter more keys than it holds,
//! so it is full), waits for its writes to land, then either stops cleanly or is killed with
//! SIGKILL; the parent reopens the same directory, times the open (both caches recover while
//! they open: tiercache reads its slot records, foyer scans its regions) and counts the keys it
//! holds. Both get 16 MiB of memory and a disk tier with direct I/O; tiercache's runs the `log`
//! policy, as in the `hybrid` harness.
//!
//! Run: `cargo run --release --bin restart -- [DIR] [--mib 1024] [--rounds 1] [--json]`. The
//! figures: keys back, the open's seconds, and keys back per second of it, for each cache after
//! a clean stop and after a kill, rounds alternating foyer and tiercache (medians by seconds).

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use clap::Parser;
use foyer::{
    BlockEngineConfig, DeviceBuilder, FsDeviceBuilder, HybridCache, HybridCacheBuilder,
    PsyncIoEngineConfig, RecoverMode,
};
use serde::Serialize;
use tiercache_engine::{Cache, CacheBuilder, Recover, TierKind};
use tiercache_policy::PolicyConfig;

const BLOCK: usize = 4096;
const MEMORY: usize = 16 << 20;
/// How long a filled cache waits before it stops or is killed: tiercache's checkpoints run
/// every second, and both caches' disk writes run behind their inserts.
const SETTLE: Duration = Duration::from_secs(3);
/// Passes of foyer's fill at most (see `child`).
const PASSES: usize = 4;
/// The child's environment variable: `CACHE STOP DIR MIB`.
const CHILD: &str = "TIERCACHE_RESTART_CHILD";

/// Restarts of tiercache and foyer's hybrid cache after a clean stop and after SIGKILL.
#[derive(Debug, Parser)]
struct Args {
    /// Scratch directory for both caches' disk tiers.
    dir: Option<PathBuf>,
    /// The disk tier's size in MiB, the same for both caches.
    #[arg(long, default_value_t = 1024)]
    mib: u64,
    /// Rounds, foyer and tiercache alternating; each figure the median by seconds.
    #[arg(long, default_value_t = 1)]
    rounds: usize,
    /// Print one JSON object per row instead of the table.
    #[arg(long)]
    json: bool,
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Which {
    Tiercache,
    Foyer,
}

impl Which {
    fn name(self) -> &'static str {
        match self {
            Which::Tiercache => "tiercache",
            Which::Foyer => "foyer",
        }
    }
}

/// One reopen: keys back and the open's seconds.
#[derive(Clone, Copy, Debug)]
struct Reopened {
    keys: u64,
    seconds: f64,
}

#[derive(Debug, Serialize)]
struct Row {
    cache: &'static str,
    stop: &'static str,
    disk_mib: u64,
    keys_written: u64,
    keys_back: u64,
    open_seconds: f64,
    keys_per_second: f64,
}

/// The keys a child writes: a quarter more than the disk tier holds.
fn keys(mib: u64) -> u64 {
    (mib << 20) / BLOCK as u64 * 5 / 4
}

fn value(key: u64) -> Vec<u8> {
    let mut v = vec![(key % 251) as u8; BLOCK];
    v[..8].copy_from_slice(&key.to_le_bytes());
    v
}

fn tiercache(dir: &Path, mib: u64) -> Cache {
    CacheBuilder::new(PolicyConfig::Lru)
        .capacity_bytes(MEMORY as u64)
        .lower_tier(
            TierKind::Flash { path: dir.join("tiercache.flash") },
            mib << 20,
            PolicyConfig::parse("log").expect("the log policy"),
        )
        .block_size(BLOCK)
        .recover(Recover::Quiet)
        .build()
        .expect("a tiercache cache")
}

fn foyer(runtime: &tokio::runtime::Runtime, dir: &Path, mib: u64) -> HybridCache<u64, Vec<u8>> {
    runtime.block_on(async {
        let device = FsDeviceBuilder::new(dir.join("foyer"))
            .with_capacity((mib << 20) as usize)
            .with_direct(true)
            .build()
            .expect("a foyer device");
        HybridCacheBuilder::new()
            .memory(MEMORY)
            .with_weighter(|_: &u64, v: &Vec<u8>| v.len())
            .storage()
            .with_io_engine_config(PsyncIoEngineConfig::new())
            .with_engine_config(BlockEngineConfig::new(device))
            .with_recover_mode(RecoverMode::Quiet)
            .build()
            .await
            .expect("a foyer hybrid cache")
    })
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("a runtime")
}

/// Says the cache is filled, then waits for the SIGKILL that ends the child.
fn wait_to_be_killed() -> ! {
    let mut out = std::io::stdout().lock();
    writeln!(out, "filled").unwrap();
    out.flush().unwrap();
    loop {
        std::thread::sleep(Duration::from_secs(1));
    }
}

/// The child: fills `which`'s disk tier, waits for its writes, then stops cleanly (`clean`)
/// or says it is filled and waits to be killed.
fn child(spec: &str) {
    let words: Vec<&str> = spec.split(' ').collect();
    let [which, stop, dir, mib] = words[..] else { panic!("{CHILD}: `{spec}`") };
    let (dir, mib): (&Path, u64) = (Path::new(dir), mib.parse().expect("MiB"));
    let runtime = runtime();
    match which {
        "tiercache" => {
            let cache = tiercache(dir, mib);
            for key in 0..keys(mib) {
                cache.put(key, &value(key)).expect("a put");
            }
            std::thread::sleep(SETTLE);
            if stop == "clean" {
                drop(cache);
            } else {
                wait_to_be_killed();
            }
        }
        _ => {
            let cache = foyer(&runtime, dir, mib);
            // foyer drops disk writes its flushers have no room for, so keys go in until its
            // disk tier holds as many as it will: a pass inserts those not held, after its
            // writes settle.
            let mut held = 0;
            for _ in 0..PASSES {
                for key in (0..keys(mib)).filter(|key| !cache.contains(key)) {
                    drop(cache.insert(key, value(key)));
                    std::thread::sleep(Duration::from_micros(20));
                }
                std::thread::sleep(SETTLE);
                let now = (0..keys(mib)).filter(|key| cache.contains(key)).count();
                if now <= held {
                    break;
                }
                held = now;
            }
            eprintln!("foyer holds {held} keys before it stops");
            if stop == "clean" {
                runtime.block_on(cache.close()).expect("foyer closes");
            } else {
                wait_to_be_killed();
            }
        }
    }
    println!("stopped");
}

/// Fills `which` in a child process, stops it as `stop` says, reopens and counts.
fn run(which: Which, stop: &str, dir: &Path, mib: u64) -> Reopened {
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir_all(dir).expect("the scratch directory");
    let mut child = Command::new(std::env::current_exe().expect("this program"))
        .env(CHILD, format!("{} {stop} {} {mib}", which.name(), dir.display()))
        .stdout(Stdio::piped())
        .spawn()
        .expect("a child");
    let said = BufReader::new(child.stdout.take().expect("its stdout")).lines().next();
    let said = said.expect("the child says how it ended").expect("a line");
    if stop == "kill" {
        assert_eq!(said, "filled");
        child.kill().expect("SIGKILL");
    }
    let status = child.wait().expect("the child ends");
    assert!(stop == "kill" || status.success(), "the child failed: {status}");
    let started = Instant::now();
    let (seconds, keys) = match which {
        Which::Tiercache => {
            let cache = tiercache(dir, mib);
            let seconds = started.elapsed().as_secs_f64();
            (seconds, (0..keys(mib)).filter(|&key| cache.contains(key)).count() as u64)
        }
        Which::Foyer => {
            let runtime = runtime();
            let cache = foyer(&runtime, dir, mib);
            let seconds = started.elapsed().as_secs_f64();
            let back = (0..keys(mib)).filter(|key| cache.contains(key)).count() as u64;
            runtime.block_on(cache.close()).expect("foyer closes");
            (seconds, back)
        }
    };
    let _ = std::fs::remove_dir_all(dir);
    Reopened { keys, seconds }
}

fn main() {
    if let Ok(spec) = std::env::var(CHILD) {
        child(&spec);
        return;
    }
    let args = Args::parse();
    let dir = args.dir.unwrap_or_else(|| std::env::temp_dir().join("tiercache-foyer-restart"));
    if !args.json {
        println!(
            "{} MiB disk tier, {} MiB of memory, {} keys of 4 KiB written; dir {}",
            args.mib,
            MEMORY >> 20,
            keys(args.mib),
            dir.display()
        );
        println!(
            "{:>10} {:>6} {:>10} {:>10} {:>14}",
            "cache", "stop", "keys back", "open s", "keys/s"
        );
    }
    for stop in ["kill", "clean"] {
        let mut runs: Vec<(Which, Reopened)> = Vec::new();
        for _ in 0..args.rounds.max(1) {
            for which in [Which::Foyer, Which::Tiercache] {
                runs.push((which, run(which, stop, &dir.join(which.name()), args.mib)));
            }
        }
        for which in [Which::Foyer, Which::Tiercache] {
            let mut mine: Vec<Reopened> =
                runs.iter().filter(|(w, _)| *w == which).map(|(_, r)| *r).collect();
            mine.sort_by(|a, b| a.seconds.total_cmp(&b.seconds));
            let median = mine[(mine.len() - 1) / 2];
            let row = Row {
                cache: which.name(),
                stop,
                disk_mib: args.mib,
                keys_written: keys(args.mib),
                keys_back: median.keys,
                open_seconds: median.seconds,
                keys_per_second: median.keys as f64 / median.seconds,
            };
            match args.json {
                true => println!("{}", serde_json::to_string(&row).expect("a row serializes")),
                false => println!(
                    "{:>10} {:>6} {:>10} {:>10.3} {:>14.0}",
                    row.cache, row.stop, row.keys_back, row.open_seconds, row.keys_per_second
                ),
            }
        }
    }
}
