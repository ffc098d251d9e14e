//! Write-behind on a flash tier (direct I/O, 4 KiB blocks) under concurrent writers, readers,
//! read handles and invalidations: reads never see a value older than the last completed
//! write, nor torn or foreign bytes, while blocks are staged, land, get evicted or promoted.

mod common;

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use tiercache_core::SeededRng;
use tiercache_engine::{CacheBuilder, TierKind};
use tiercache_policy::PolicyConfig;

const BLOCK: usize = 4096;
const KEYS: u64 = 48;

fn scratch(name: &str) -> PathBuf {
    common::scratch("behind", name)
}

/// A block naming its key and version in every 16 bytes.
fn value(key: u64, version: u64) -> Vec<u8> {
    common::value(key, version, BLOCK)
}

fn version_of(key: u64, bytes: &[u8]) -> u64 {
    assert_eq!(bytes.len(), BLOCK, "key {key}: a value of the wrong length");
    common::version_of(key, bytes)
}

#[test]
fn staged_blocks_are_never_stale_torn_or_lost() {
    // The flash tier under LRU, and run by the set-associative policy (its blocks where the
    // policy places them, outside the shards' maps: 4 ways and 2 spare slots a set).
    for (name, two_tiers, flash_policy) in [
        ("flash-only", false, "lru"),
        ("dram-over-flash", true, "lru"),
        ("flash-sets", false, "setassoc:ways=4"),
        ("dram-over-flash-sets", true, "setassoc:ways=4"),
    ] {
        let path = scratch(name);
        let flash_policy = PolicyConfig::parse(flash_policy).unwrap();
        let upper = if two_tiers { PolicyConfig::Lru } else { flash_policy.clone() };
        let builder = CacheBuilder::new(upper).block_size(BLOCK).shards(2);
        let cache = if two_tiers {
            builder.capacity_bytes(8 * BLOCK as u64).lower_tier(
                TierKind::Flash { path: path.clone() },
                24 * BLOCK as u64,
                flash_policy,
            )
        } else {
            builder.tier(TierKind::Flash { path: path.clone() }).capacity_bytes(32 * BLOCK as u64)
        }
        .write_behind(2)
        .build()
        .unwrap();
        let completed: Vec<AtomicU64> = (0..KEYS).map(|_| AtomicU64::new(0)).collect();
        let turns: Vec<Mutex<()>> = (0..KEYS).map(|_| Mutex::new(())).collect();
        std::thread::scope(|s| {
            for t in 0..4u64 {
                let (cache, completed, turns) = (&cache, &completed, &turns);
                s.spawn(move || {
                    let mut rng = SeededRng::new(77 + t);
                    let mut buf = vec![0u8; BLOCK];
                    for _ in 0..3000 {
                        let key = rng.below(KEYS);
                        let floor = completed[key as usize].load(Ordering::Acquire);
                        match rng.below(10) {
                            0..=2 => {
                                if let Some(n) = cache.get(key, &mut buf) {
                                    assert!(version_of(key, &buf[..n]) >= floor, "stale get");
                                }
                            }
                            3 | 4 => {
                                if let Some(held) = cache.get_ref(key) {
                                    assert!(version_of(key, &held) >= floor, "stale handle");
                                }
                            }
                            5..=8 => {
                                let _turn = turns[key as usize].lock().unwrap();
                                let next = completed[key as usize].load(Ordering::Acquire) + 1;
                                cache.put(key, &value(key, next)).unwrap();
                                completed[key as usize].store(next, Ordering::Release);
                            }
                            _ => cache.invalidate(key),
                        }
                    }
                });
            }
        });
        let stats = cache.stats();
        assert!(stats.writes_behind > 0, "{name}: nothing was written behind: {stats:?}");
        assert_eq!(stats.checksum_failures + stats.io_errors + stats.writes_dropped, 0, "{name}");
        let (used, slots) = cache.occupancy();
        assert!(used <= slots, "{name}: {used} of {slots}");
        // Once everything has landed, each resident block reads back from the device itself,
        // at the last version written (nothing runs now, so none is newer or older).
        cache.flush();
        let mut buf = vec![0u8; BLOCK];
        for key in 0..KEYS {
            if let Some(n) = cache.get(key, &mut buf) {
                let last = completed[key as usize].load(Ordering::Acquire);
                assert_eq!(version_of(key, &buf[..n]), last, "{name}: key {key}");
            }
        }
        assert_eq!(cache.stats().checksum_failures, 0, "{name}");
        drop(cache);
        std::fs::remove_file(path).unwrap();
    }
}

#[test]
fn dropping_the_cache_writes_everything_staged_first() {
    let path = scratch("drain");
    let cache = CacheBuilder::new(PolicyConfig::Lru)
        .tier(TierKind::Flash { path: path.clone() })
        .block_size(BLOCK)
        .shards(1)
        .capacity_bytes(64 * BLOCK as u64)
        .write_behind(1)
        .build()
        .unwrap();
    for key in 0..64 {
        cache.put(key, &value(key, 1)).unwrap();
    }
    assert!(cache.stats().writes_behind > 0);
    drop(cache);
    // Every block the cache took is on the device once the cache is gone, queued or not.
    let device = std::fs::read(&path).unwrap();
    let blocks: std::collections::HashSet<&[u8]> = device.chunks(BLOCK).collect();
    for key in 0..64 {
        assert!(blocks.contains(&value(key, 1)[..]), "block of key {key} never landed");
    }
    std::fs::remove_file(path).unwrap();
}

/// A tier whose writes fail (every third, injected): blocks whose write failed are dropped and
/// counted, the policy stays in step (a drop it was not told of would trip its bookkeeping),
/// no caller sees an error, and no read returns anything but the latest value or a miss. On
/// the caller's thread and behind it, on a single failing tier and under DRAM (demotions).
#[test]
fn failing_tier_writes_drop_blocks_never_data() {
    let cases = [
        ("fail-file-sync", false, false, 0),
        ("fail-file-behind", false, false, 2),
        ("fail-flash-behind", true, false, 2),
        ("fail-flash-under-dram", true, true, 0),
        ("fail-flash-under-dram-behind", true, true, 2),
    ];
    for (name, flash, two_tiers, behind) in cases {
        let path = scratch(name);
        let kind = match flash {
            true => TierKind::Flash { path: path.clone() },
            false => TierKind::File { path: path.clone() },
        };
        let builder =
            CacheBuilder::new(PolicyConfig::Lru).block_size(BLOCK).shards(2).write_behind(behind);
        let (builder, failing) = match two_tiers {
            true => (
                builder.capacity_bytes(8 * BLOCK as u64).lower_tier(
                    kind,
                    24 * BLOCK as u64,
                    PolicyConfig::Lru,
                ),
                1,
            ),
            false => (builder.tier(kind).capacity_bytes(32 * BLOCK as u64), 0),
        };
        let cache = builder.fail_writes(failing, 3).build().unwrap();
        let mut latest = vec![0u64; KEYS as usize];
        let mut rng = SeededRng::new(5);
        let mut buf = vec![0u8; BLOCK];
        let mut check = |cache: &tiercache_engine::Cache, key: u64, latest: &[u64]| {
            if let Some(len) = cache.get(key, &mut buf) {
                assert_eq!(version_of(key, &buf[..len]), latest[key as usize], "{name}: key {key}");
            }
        };
        for _ in 0..3000 {
            let key = rng.below(KEYS);
            if rng.below(10) < 6 {
                latest[key as usize] += 1;
                cache.put(key, &value(key, latest[key as usize])).unwrap();
            } else {
                check(&cache, key, &latest);
            }
        }
        cache.flush();
        for key in 0..KEYS {
            check(&cache, key, &latest);
        }
        let stats = cache.stats();
        let (used, slots) = cache.occupancy();
        assert!(stats.io_errors > 100 && stats.hits > 100, "{name}: {stats:?}");
        assert_eq!(stats.writes_dropped + stats.checksum_failures, 0, "{name}: {stats:?}");
        assert!(used <= slots, "{name}: {used} of {slots}");
        if behind > 0 {
            assert!(stats.writes_behind > 0, "{name}: {stats:?}");
        }
    }
    // Only file and flash tiers can be made to fail, and only tiers that exist.
    for (builder, says) in [
        (CacheBuilder::new(PolicyConfig::Lru).fail_writes(0, 3), "memory"),
        (CacheBuilder::new(PolicyConfig::Lru).fail_writes(1, 3), "no tier 1"),
    ] {
        let e = builder.build().err().expect("refused").to_string();
        assert!(e.contains("fail_writes") && e.contains(says), "{e}");
    }
}
