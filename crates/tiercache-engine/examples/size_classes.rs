//! What size classes buy: a look-aside cache of values from 100 bytes to 4 KiB, with whole
//! blocks and with four size classes, on the same Zipf(0.9) stream. Each miss puts the value
//! (the caller loaded it elsewhere). Prints hit ratio, ops/s, values resident and bytes used.
//!
//! Run: `cargo run --release -p tiercache-engine --example size_classes`

use std::time::Instant;

use tiercache_core::SeededRng;
use tiercache_engine::CacheBuilder;
use tiercache_policy::PolicyConfig;
use tiercache_workload::gen::Zipf;

const BLOCK: usize = 4096;
const KEYS: u64 = 200_000;
const CACHE: u64 = 64 << 20;
const REQUESTS: u64 = 4_000_000;

/// A key's value length: 100 bytes to a block, most of them small (a log-uniform spread).
fn length(key: u64) -> usize {
    let mixed = key.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 11;
    let unit = mixed as f64 / (1u64 << 53) as f64;
    (100.0 * (BLOCK as f64 / 100.0).powf(unit)) as usize
}

fn main() {
    println!(
        "{KEYS} keys of 100 B to 4 KiB (log-uniform), Zipf(0.9), {} MiB of DRAM, LRU, {REQUESTS} requests",
        CACHE >> 20
    );
    println!(
        "{:<16} {:>9} {:>12} {:>10} {:>12} {:>16}",
        "layout", "hit ratio", "ops/s", "resident", "bytes used", "space evictions"
    );
    for classes in [1u8, 4] {
        let cache = CacheBuilder::new(PolicyConfig::Lru)
            .block_size(BLOCK)
            .capacity_bytes(CACHE)
            .size_classes(classes)
            .build()
            .expect("a valid cache");
        let mut zipf = Zipf::new(KEYS, 0.9);
        let mut rng = SeededRng::new(1);
        let mut buf = vec![0u8; BLOCK];
        let value = vec![7u8; BLOCK];
        let (mut hits, started) = (0u64, Instant::now());
        for _ in 0..REQUESTS {
            let key = zipf.next(&mut rng);
            match cache.get(key, &mut buf) {
                Some(_) => hits += 1,
                None => {
                    cache.put(key, &value[..length(key)]).expect("fits a block");
                }
            }
        }
        let seconds = started.elapsed().as_secs_f64();
        let (resident, _) = cache.occupancy();
        let (used, capacity) = cache.bytes_cached();
        let name = if classes == 1 { "whole blocks" } else { "4 size classes" };
        println!(
            "{name:<16} {:>8.2}% {:>12.0} {resident:>10} {:>11.1}% {:>16}",
            hits as f64 / REQUESTS as f64 * 100.0,
            REQUESTS as f64 / seconds,
            used as f64 / capacity as f64 * 100.0,
            cache.stats().space_evictions
        );
    }
}
