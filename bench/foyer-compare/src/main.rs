//! DRAM-tier hits, tiercache next to foyer's in-memory cache, like against like, in one run:
//! 4 KiB values, every key cached, the same Zipf(0.9) key stream (scrambled, over 8192 keys)
//! for both, the same eviction policy in both (LRU, then S3-FIFO), 32 shards in both.
//!
//! Two ways to read a hit, each done the same way by both:
//! - copy-out: the value lands in the caller's buffer. `Cache::get` copies it itself; foyer's
//!   `get` returns an entry handle and the harness copies from it (foyer plus the same copy).
//!   A raw 4 KiB copy loop over the same keys is the ceiling.
//! - handle: tiercache's `get_ref` (the block read in place, its slot pinned until the handle
//!   drops) against foyer's entry handle; through each, the first and last 8 bytes of the value
//!   are read (a page's header and trailer), then the handle is dropped.
//!
//! Threads: `--threads 1,4,16` (any list; 1 and 2 by default). Prints ops/s per system as a
//! table, or with `--json` one JSON object per policy, read kind and thread count.
//!
//! Run: `cargo run --release -- [--threads 1,4,16] [--seconds 3] [--json]` in this directory.
//! foyer-memory is pinned to 0.22.3.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use clap::Parser;
use foyer_compare::{Common, Row};
use foyer_memory::{
    CacheBuilder as FoyerBuilder, CacheProperties, EvictionConfig, LruConfig, S3FifoConfig,
};
use tiercache_engine::CacheBuilder;
use tiercache_policy::PolicyConfig;
use tiercache_workload::gen::{KeyDistribution, SizeDistribution, Synthetic, SyntheticConfig};

const BLOCK: usize = 4096;
const KEYS: u64 = 8192;
const SHARDS: usize = 32;
const SECONDS: f64 = 3.0;

/// DRAM-tier hits, tiercache next to foyer's in-memory cache.
#[derive(Debug, Parser)]
struct Args {
    #[command(flatten)]
    common: Common,
}

fn keys(seed: u64) -> Vec<u64> {
    let config = SyntheticConfig {
        distribution: KeyDistribution::ScrambledZipf { theta: 0.9 },
        objects: KEYS,
        requests: 1 << 20,
        read_ratio: 1.0,
        size: SizeDistribution::Fixed { bytes: BLOCK as u32 },
        seed,
    };
    Synthetic::new(config).expect("valid workload").map(|r| r.key).collect()
}

fn value(key: u64) -> Vec<u8> {
    (0..BLOCK).map(|i| (key as usize + i) as u8).collect()
}

/// Runs `op` on `threads` threads for `seconds`; returns operations per second.
fn run(threads: usize, seconds: f64, op: &(dyn Fn(u64, &mut [u8]) + Sync)) -> f64 {
    let stop = AtomicBool::new(false);
    let start = Instant::now();
    let total: u64 = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let stop = &stop;
                s.spawn(move || {
                    let stream = keys(t as u64 + 1);
                    let mut buf = vec![0u8; BLOCK];
                    let mut done = 0u64;
                    while !stop.load(Ordering::Relaxed) {
                        for key in stream.iter().take(4096) {
                            op(*key, &mut buf);
                        }
                        done += 4096;
                        std::hint::black_box(&buf);
                    }
                    done
                })
            })
            .collect();
        std::thread::sleep(Duration::from_secs_f64(seconds));
        stop.store(true, Ordering::Relaxed);
        handles.into_iter().map(|h| h.join().unwrap()).sum()
    });
    total as f64 / start.elapsed().as_secs_f64()
}

/// What a handle is used for in the handle rows: a page's header and trailer.
fn peek(value: &[u8], buf: &mut [u8]) {
    buf[..8].copy_from_slice(&value[..8]);
    buf[8..16].copy_from_slice(&value[value.len() - 8..]);
}

fn main() {
    let args = Args::parse();
    let seconds = args.common.seconds.unwrap_or(SECONDS);
    let json = args.common.json;
    if !json {
        println!(
            "4 KiB hits, {KEYS} keys all cached, Zipf(0.9), {SHARDS} shards, {seconds} s each"
        );
        println!(
            "{:<9} {:<8} {:<10} {:>16} {:>16} {:>16} {:>10} {:>10}",
            "policy",
            "threads",
            "read",
            "tiercache ops/s",
            "foyer ops/s",
            "raw copy ops/s",
            "vs foyer",
            "vs raw"
        );
    }
    let policies: [(&str, PolicyConfig, EvictionConfig); 2] = [
        ("lru", PolicyConfig::Lru, LruConfig::default().into()),
        (
            "s3fifo",
            PolicyConfig::parse("s3fifo").expect("a policy"),
            S3FifoConfig::default().into(),
        ),
    ];
    let raw: Vec<Vec<u8>> = (0..KEYS).map(value).collect();
    for (name, policy, eviction) in policies {
        let ours = CacheBuilder::new(policy)
            .capacity_bytes(2 * KEYS * BLOCK as u64)
            .block_size(BLOCK)
            .shards(SHARDS)
            .build()
            .expect("valid cache");
        let foyer = FoyerBuilder::new(2 * KEYS as usize)
            .with_shards(SHARDS)
            .with_eviction_config(eviction)
            .build::<CacheProperties>();
        for key in 0..KEYS {
            ours.put(key, &value(key)).expect("fits");
            foyer.insert(key, value(key).into_boxed_slice());
        }
        for &threads in &args.common.threads {
            let t = run(threads, seconds, &|key, buf| {
                assert!(ours.get(key, buf).is_some(), "a cached key missed");
            });
            let f = run(threads, seconds, &|key, buf| {
                let entry = foyer.get(&key).expect("a cached key missed");
                buf.copy_from_slice(&entry);
            });
            let r = run(threads, seconds, &|key, buf| buf.copy_from_slice(&raw[key as usize]));
            report(json, name, threads, "copy-out", t, f, Some(r));
            let t = run(threads, seconds, &|key, buf| {
                peek(&ours.get_ref(key).expect("a cached key missed"), buf);
            });
            let f = run(threads, seconds, &|key, buf| {
                peek(&foyer.get(&key).expect("a cached key missed"), buf);
            });
            report(json, name, threads, "handle", t, f, None);
        }
    }
}

/// One row, as a table line or a JSON object. Every key is cached and a miss panics, so both
/// hit ratios are 1 and nothing is dropped.
fn report(json: bool, policy: &str, threads: usize, read: &str, t: f64, f: f64, r: Option<f64>) {
    if json {
        let row = Row {
            threads,
            cache: format!("{policy} {read}"),
            tiercache_ops_per_second: t,
            foyer_ops_per_second: f,
            tiercache_dropped: 0,
            foyer_dropped: 0,
            tiercache_hit_ratio: 1.0,
            foyer_hit_ratio: 1.0,
            tiercache_blocks_per_write: None,
            raw_ops_per_second: r,
            ..Row::default()
        };
        row.print_json();
        return;
    }
    let (raw, vs_raw) = match r {
        Some(r) => (format!("{r:.0}"), format!("{:.0}%", t / r * 100.0)),
        None => (String::new(), String::new()),
    };
    println!(
        "{policy:<9} {threads:<8} {read:<10} {t:>16.0} {f:>16.0} {raw:>16} {:>9.0}% {vs_raw:>10}",
        t / f * 100.0
    );
}
