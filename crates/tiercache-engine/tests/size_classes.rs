//! Size classes: values take the smallest class that holds them, capacity is counted in bytes,
//! pages move between classes, and nothing returned is ever stale, torn or another key's.

mod common;

use std::path::PathBuf;

use common::{value, version_of};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use tiercache_core::SeededRng;
use tiercache_engine::{Cache, CacheBuilder, TierKind};
use tiercache_policy::PolicyConfig;

const BLOCK: usize = 4096;

fn scratch(name: &str) -> PathBuf {
    common::scratch("classes", name)
}

/// The length a key's version has in the concurrent test: small, large or anything, in
/// phases as versions go up, so the mix of classes keeps shifting.
fn length(key: u64, version: u64) -> usize {
    if version == 0 {
        return 100; // the small values every key starts with
    }
    let mixed = (key * 31 + version).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 40;
    match (version / 4) % 3 {
        0 => 16 + (mixed as usize % 496),
        1 => 2049 + (mixed as usize % 2047),
        _ => 16 + (mixed as usize % (BLOCK - 16)),
    }
}

/// The class size a value of `len` bytes takes with four classes of 4 KiB.
fn class_bytes(len: usize) -> usize {
    [512, 1024, 2048, 4096].into_iter().find(|c| *c >= len).unwrap()
}

fn dram(blocks: u64, classes: u8) -> Cache {
    CacheBuilder::new(PolicyConfig::Lru)
        .block_size(BLOCK)
        .shards(1)
        .capacity_bytes(blocks * BLOCK as u64)
        .size_classes(classes)
        .build()
        .unwrap()
}

#[test]
fn small_values_take_small_classes() {
    let mut buf = vec![0u8; BLOCK];
    // 64 blocks hold 64 values of 500 bytes as whole blocks, 512 in the 512-byte class.
    for (classes, fit) in [(1u8, 64usize), (4, 400)] {
        let cache = dram(64, classes);
        for key in 0..400 {
            cache.put(key, &value(key, 1, 500)).unwrap();
        }
        let cached = (0..400u64)
            .filter(|k| cache.get(*k, &mut buf).map(|n| version_of(*k, &buf[..n])) == Some(1))
            .count();
        assert_eq!(cached, fit, "{classes} classes");
        assert_eq!(cache.stats().space_evictions, 0);
    }
}

#[test]
fn pages_change_class_and_bytes_stay_within_capacity() {
    let cache = dram(32, 4);
    let capacity = 32 * BLOCK;
    let mut buf = vec![0u8; BLOCK];
    let mut rng = SeededRng::new(5);
    let mut last = std::collections::HashMap::new();
    // Waves of small, then large, then mixed values: pages split for one class must be
    // emptied and taken back for another.
    for wave in 0..6u64 {
        for i in 0..300u64 {
            let key = rng.below(200);
            let len = match wave % 3 {
                0 => 16 + rng.below(496) as usize,
                1 => 2049 + rng.below(2047) as usize,
                _ => 16 + rng.below(BLOCK as u64 - 16) as usize,
            };
            let version = wave * 1000 + i + 1;
            cache.put(key, &value(key, version, len)).unwrap();
            last.insert(key, version);
        }
        let mut bytes = 0;
        for key in 0..200u64 {
            if let Some(n) = cache.get(key, &mut buf) {
                assert_eq!(Some(&version_of(key, &buf[..n])), last.get(&key), "key {key}");
                bytes += class_bytes(n);
            }
        }
        assert!(bytes <= capacity, "wave {wave}: {bytes} bytes cached in {capacity}");
        let (used, total) = cache.bytes_cached();
        assert_eq!(total, capacity as u64);
        assert!(used as usize >= bytes && used <= total, "wave {wave}: {used} of {total}");
        assert!(bytes > capacity / 2, "wave {wave}: only {bytes} bytes cached");
    }
    let stats = cache.stats();
    assert!(stats.space_evictions > 0, "no page ever changed class: {stats:?}");
    assert_eq!(stats.writes_dropped, 0);
}

#[test]
fn a_value_that_changes_class_reads_back_whole() {
    let cache = dram(16, 4);
    let mut buf = vec![0u8; BLOCK];
    for (version, len) in [(1, 100), (2, 3000), (3, 600), (4, BLOCK), (5, 16)] {
        cache.put(7, &value(7, version, len)).unwrap();
        assert_eq!(cache.get(7, &mut buf), Some(len));
        assert_eq!(version_of(7, &buf[..len]), version);
    }
    // Write-around's update of a cached key: within its class, in place; to another class,
    // the key is dropped (write-around admits nothing; the backing store has the value).
    assert!(cache.update_if_cached(7, &value(7, 6, 300)).unwrap());
    assert_eq!(cache.get(7, &mut buf).map(|n| version_of(7, &buf[..n])), Some(6));
    assert!(!cache.update_if_cached(7, &value(7, 7, 2500)).unwrap());
    assert_eq!(cache.get(7, &mut buf), None);
    cache.put(7, &value(7, 8, 2500)).unwrap();
    let held = cache.get_ref(7).unwrap();
    assert_eq!((held.len(), version_of(7, &held)), (2500, 8));
}

#[test]
fn size_classes_refuse_what_cannot_work() {
    let err = |builder: CacheBuilder| builder.build().err().expect("refused").to_string();
    let flash = CacheBuilder::new(PolicyConfig::Lru)
        .tier(TierKind::Flash { path: scratch("refused.img") })
        .size_classes(2);
    assert!(err(flash).contains("size_classes"));
    let too_fine = CacheBuilder::new(PolicyConfig::Lru).block_size(4096).size_classes(8);
    let e = err(too_fine);
    assert!(e.contains("size_classes") && e.contains("64"), "{e}");
    let too_small = CacheBuilder::new(PolicyConfig::Lru).capacity_bytes(8 * 4096).size_classes(2);
    assert!(err(too_small).contains("capacity_bytes"));
}

#[test]
fn concurrent_mixed_sizes_are_never_stale_or_torn() {
    let keys = 160u64;
    for (name, two_tiers) in [("dram", false), ("dram-over-mapped", true)] {
        let builder =
            CacheBuilder::new(PolicyConfig::Lru).block_size(BLOCK).shards(1).size_classes(4);
        let cache = if two_tiers {
            builder.capacity_bytes(32 * BLOCK as u64).lower_tier(
                TierKind::Mapped { path: scratch("classes-lower.mem") },
                48 * BLOCK as u64,
                PolicyConfig::Lru,
            )
        } else {
            builder.capacity_bytes(48 * BLOCK as u64)
        }
        .build()
        .unwrap();
        // Start fragmented: every key small, then recency shuffled, so that making room for a
        // large value frees chunks scattered over many pages.
        for key in 0..keys {
            cache.put(key, &value(key, 0, length(key, 0))).unwrap();
        }
        let mut rng = SeededRng::new(8);
        let mut buf = vec![0u8; BLOCK];
        for _ in 0..keys * 4 {
            cache.get(rng.below(keys), &mut buf);
        }
        let completed: Vec<AtomicU64> = (0..keys).map(|_| AtomicU64::new(0)).collect();
        let turns: Vec<Mutex<()>> = (0..keys).map(|_| Mutex::new(())).collect();
        std::thread::scope(|s| {
            for t in 0..4u64 {
                let (cache, completed, turns) = (&cache, &completed, &turns);
                s.spawn(move || {
                    let mut rng = SeededRng::new(300 + t);
                    let mut buf = vec![0u8; BLOCK];
                    for _ in 0..6000 {
                        let key = rng.below(keys);
                        let floor = completed[key as usize].load(Ordering::Acquire);
                        match rng.below(10) {
                            0..=2 => {
                                if let Some(n) = cache.get(key, &mut buf) {
                                    let version = version_of(key, &buf[..n]);
                                    assert!(version >= floor, "{name}: stale get");
                                    assert_eq!(n, length(key, version), "{name}: length");
                                }
                            }
                            3 | 4 => {
                                if let Some(held) = cache.get_ref(key) {
                                    let version = version_of(key, &held);
                                    assert!(version >= floor, "{name}: stale handle");
                                    std::thread::yield_now();
                                    assert_eq!(version_of(key, &held), version, "{name}: moved");
                                }
                            }
                            5..=8 => {
                                let _turn = turns[key as usize].lock().unwrap();
                                let next = completed[key as usize].load(Ordering::Acquire) + 1;
                                let bytes = value(key, next, length(key, next));
                                cache.put(key, &bytes).unwrap();
                                completed[key as usize].store(next, Ordering::Release);
                            }
                            _ => cache.invalidate(key),
                        }
                    }
                });
            }
        });
        let stats = cache.stats();
        assert_eq!(stats.checksum_failures + stats.writes_dropped, 0, "{name}: {stats:?}");
        assert!(stats.space_evictions > 0 && stats.hits > 0, "{name}: exercised little: {stats:?}");
        if two_tiers {
            assert!(stats.demotions > 0 && stats.lower_hits > 0, "{name}: {stats:?}");
        }
        let (used, total) = cache.bytes_cached();
        assert!(used <= total, "{name}: {used} bytes cached in {total}");
    }
}
