//! How many times a request crosses into its shard: every call the cache makes into a shard
//! goes through the shard's lock guard, which counts it in tests (`Locked`). A read hit on
//! DRAM, on a mapped tier and on flash, and a write-back write, each cross at most twice; the
//! write-behind lands a staged block in one.

use std::path::PathBuf;
use std::sync::atomic::Ordering;

use tiercache_policy::cas::{CacheMode, CasConfig, SeqCutoffPolicy};
use tiercache_policy::PolicyConfig;

use crate::{Cache, CacheBuilder, CachedFile, TierKind};

const BLOCK: usize = 4096;

/// A directory of this test's own, removed when dropped.
struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Scratch {
        let dir =
            std::env::temp_dir().join(format!("tiercache-crossings-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Scratch(dir)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The calls `cache` makes into its shards while `run` runs.
fn crossings(cache: &Cache, run: impl FnOnce()) -> u64 {
    let before = cache.calls.load(Ordering::Relaxed);
    run();
    cache.calls.load(Ordering::Relaxed) - before
}

/// A cache of one shard over `tier` (every hit taking the lock, so it is counted), with
/// `key` put in it.
fn with_block(tier: TierKind, key: u64) -> Cache {
    let cache = CacheBuilder::new(PolicyConfig::Lru)
        .tier(tier)
        .capacity_bytes(64 * BLOCK as u64)
        .shards(1)
        .unlocked_hits(false)
        .write_behind(0)
        .build()
        .unwrap();
    cache.put(key, &[7; BLOCK]).unwrap();
    cache
}

#[test]
fn a_read_hit_crosses_into_its_shard_once_on_memory_tiers_and_twice_on_flash() {
    let scratch = Scratch::new("reads");
    let tiers = [
        ("DRAM", TierKind::Dram, 1),
        ("mapped", TierKind::Mapped { path: scratch.0.join("mapped.tc") }, 1),
        ("flash", TierKind::Flash { path: scratch.0.join("flash.tc") }, 2),
    ];
    for (name, tier, most) in tiers {
        let cache = with_block(tier, 3);
        let mut buf = vec![0; BLOCK];
        let get = crossings(&cache, || assert_eq!(cache.get(3, &mut buf), Some(BLOCK)));
        let through = crossings(&cache, || {
            let outcome = cache.read_through(3, &mut buf, |_| panic!("a hit loads nothing"));
            assert!(outcome.unwrap().hit);
        });
        assert_eq!((get, through), (most, most), "a read hit on {name}: get, read_through");
        let stats = cache.stats();
        let unlocked = u64::from(name == "flash") * 2;
        assert_eq!(stats.unlocked_reads, unlocked, "{name}: flash reads run unlocked");
    }
}

#[test]
fn a_write_back_write_crosses_once_and_a_block_written_behind_lands_in_one() {
    let scratch = Scratch::new("writes");
    // Write-back over flash: the write is absorbed dirty, in one crossing.
    let backing = scratch.0.join("backing.img");
    std::fs::write(&backing, vec![0; 16 * BLOCK]).unwrap();
    let flash = TierKind::Flash { path: scratch.0.join("wb.tc") };
    let mode =
        CasConfig { seq_cutoff: SeqCutoffPolicy::Never, ..CasConfig::new(CacheMode::WriteBack) };
    let cache = CacheBuilder::new(PolicyConfig::Lru)
        .tier(flash)
        .capacity_bytes(64 * BLOCK as u64)
        .shards(1)
        .mode(mode)
        .build()
        .unwrap();
    let file = CachedFile::open(&backing, cache).unwrap();
    let write = crossings(file.cache(), || {
        assert_eq!(file.write_at(5 * BLOCK as u64, &[9; BLOCK]).unwrap(), BLOCK);
    });
    assert_eq!(write, 1, "a write-back write");
    assert_eq!(file.cache().dirty_blocks(), 1, "absorbed dirty");
    drop(file);

    // Write-through over flash, written behind: the write crosses once, and so does the
    // landing of each block (the flush's own locks counted apart: one a shard).
    let flash = TierKind::Flash { path: scratch.0.join("behind.tc") };
    let cache = CacheBuilder::new(PolicyConfig::Lru)
        .tier(flash)
        .capacity_bytes(64 * BLOCK as u64)
        .shards(1)
        .write_behind(1)
        .build()
        .unwrap();
    let put = crossings(&cache, || assert!(cache.put(8, &[1; BLOCK]).unwrap().cached));
    assert_eq!(put, 1, "a write staged behind");
    let landed = crossings(&cache, || cache.flush());
    assert_eq!(landed, 1 + 1, "the flush's call to its one shard, and one landing");
    assert_eq!(cache.stats().writes_behind, 1);
}
