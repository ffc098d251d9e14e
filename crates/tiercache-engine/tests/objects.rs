//! Objects of any size (`CacheBuilder::max_value`): values larger than a block span pages, as
//! one entry of the policy sized as its pages; they read back whole or miss, never torn and
//! never another key's, under concurrency, across restarts and after crashes that tear them;
//! the engine decides as the simulator on a trace of real object sizes; the limits are errors
//! that name them.

mod common;
/// The README's lines for objects (`examples/objects.rs`), run here so that CI runs them.
#[path = "../examples/objects.rs"]
mod example;

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};

use common::{value, version_of};
use tiercache_core::{Capacity, Decision, Request, SeededRng};
use tiercache_engine::{Cache, CacheBuilder, KeyedCache, TierKind};
use tiercache_policy::admission::AdmissionConfig;
use tiercache_policy::cas::{CacheMode, CasConfig, SeqCutoffPolicy};
use tiercache_policy::{AnyPolicy, Policy, PolicyConfig};

const BLOCK: usize = 4096;

fn scratch(name: &str) -> PathBuf {
    common::scratch("objects", name)
}

fn objects(tier: TierKind, shards: usize, blocks: u64, classes: u8) -> Cache {
    CacheBuilder::new(PolicyConfig::Lru)
        .tier(tier)
        .block_size(BLOCK)
        .shards(shards)
        .capacity_bytes(blocks * BLOCK as u64)
        .size_classes(classes)
        .max_value(1 << 20)
        .build()
        .unwrap()
}

/// A length from 16 bytes to 300 KiB, most small, some of many pages.
fn length(rng: &mut SeededRng) -> usize {
    match rng.below(10) {
        0..=5 => 16 + rng.below(3000) as usize,
        6..=8 => 4096 + rng.below(40_000) as usize,
        _ => 100_000 + rng.below(200_000) as usize,
    }
}

/// Values of many sizes, written, overwritten (same and other sizes) and removed, read back
/// as last written or missed; the bytes cached never pass the capacity, counted as pages.
#[test]
fn objects_of_any_size_read_back_as_last_written() {
    for classes in [1u8, 4] {
        let cache = objects(TierKind::Dram, 2, 512, classes);
        let mut rng = SeededRng::new(11);
        let mut last = std::collections::HashMap::new();
        let mut spanned = 0;
        for version in 1..3000u64 {
            let key = rng.below(120);
            match rng.below(10) {
                0 => {
                    cache.invalidate(key);
                    last.remove(&key);
                }
                1..=4 => {
                    let len = length(&mut rng);
                    spanned += (len > BLOCK) as u64;
                    cache.put(key, &value(key, version, len)).unwrap();
                    last.insert(key, (version, len));
                }
                _ => {
                    if let Some(got) = cache.get_object(key) {
                        let (version, len) = last[&key];
                        assert_eq!(got.len(), len, "key {key}");
                        assert_eq!(version_of(key, &got), version, "key {key}");
                    }
                }
            }
            let (used, capacity) = cache.bytes_cached();
            assert!(used <= capacity, "{used} bytes cached in {capacity}");
        }
        assert!(spanned > 200, "values spanning pages: {spanned}");
        let stats = cache.stats();
        assert!(stats.hits > 300, "{classes} classes: {stats:?}");
        assert_eq!(stats.checksum_failures + stats.writes_dropped, 0);
    }
}

/// Threads writing and reading objects of changing sizes over shared keys: every value read is
/// whole and its key's own (each 16 bytes name the key and the version). In DRAM with size
/// classes, and in DRAM over flash, whose objects are read with the shard unlocked.
#[test]
fn concurrent_objects_are_never_torn_or_foreign() {
    concurrent_objects(objects(TierKind::Dram, 4, 1024, 4));
    let flash = CacheBuilder::new(PolicyConfig::Lru)
        .block_size(BLOCK)
        .shards(4)
        .capacity_bytes(128 * BLOCK as u64)
        .lower_tier(
            TierKind::Flash { path: scratch("concurrent.flash") },
            1024 * BLOCK as u64,
            PolicyConfig::Lru,
        )
        .max_value(1 << 20)
        .build()
        .unwrap();
    concurrent_objects(flash);
}

fn concurrent_objects(cache: Cache) {
    let versions = AtomicU64::new(1);
    let read = AtomicU64::new(0);
    std::thread::scope(|scope| {
        for t in 0..4u64 {
            let (cache, versions, read) = (&cache, &versions, &read);
            scope.spawn(move || {
                let mut rng = SeededRng::new(100 + t);
                for _ in 0..3000 {
                    let key = rng.below(64);
                    if rng.below(3) == 0 {
                        let version = versions.fetch_add(1, Ordering::Relaxed);
                        let len = length(&mut rng);
                        cache.put(key, &value(key, version, len)).unwrap();
                    } else if let Some(got) = cache.get_object(key) {
                        version_of(key, &got);
                        read.fetch_add(1, Ordering::Relaxed);
                    }
                }
            });
        }
    });
    assert!(read.load(Ordering::Relaxed) > 1000);
    let stats = cache.stats();
    assert_eq!(stats.checksum_failures, 0, "{stats:?}");
    if stats.tier_hits.len() > 1 {
        assert!(stats.unlocked_reads > 100 && stats.tier_hits[1] > 100, "{stats:?}");
    }
}

/// Objects move between tiers whole: a DRAM tier over a mapped one, objects spanning pages
/// demoted, read back from either as written.
#[test]
fn objects_move_between_tiers_whole() {
    let path = scratch("two-tiers.mem");
    let _ = std::fs::remove_file(&path);
    let cache = CacheBuilder::new(PolicyConfig::Lru)
        .block_size(BLOCK)
        .shards(1)
        .capacity_bytes(128 * BLOCK as u64)
        .lower_tier(TierKind::Mapped { path }, 512 * BLOCK as u64, PolicyConfig::Lru)
        .max_value(1 << 20)
        .build()
        .unwrap();
    let mut rng = SeededRng::new(3);
    let lens: Vec<usize> = (0..60).map(|_| 5000 + rng.below(60_000) as usize).collect();
    for (key, len) in lens.iter().enumerate() {
        cache.put(key as u64, &value(key as u64, 1, *len)).unwrap();
    }
    for _ in 0..3 {
        for (key, len) in lens.iter().enumerate() {
            let got = cache.get_object(key as u64).unwrap_or_else(|| panic!("key {key}"));
            assert_eq!((got.len(), version_of(key as u64, &got)), (*len, 1));
        }
    }
    let stats = cache.stats();
    assert!(stats.demotions > 30 && stats.lower_hits > 30, "{stats:?}");
    assert_eq!(stats.checksum_failures, 0);
}

/// DRAM's objects moved down into the flash tier below before a stop come back after it,
/// with what the flash tier held; a cache that keeps blocks dirty is refused the move.
#[test]
fn objects_moved_down_from_dram_survive_a_restart() {
    let path = scratch("moved-down.flash");
    let _ = std::fs::remove_file(&path);
    let build = || {
        CacheBuilder::new(PolicyConfig::Lru)
            .block_size(BLOCK)
            .shards(2)
            .capacity_bytes(256 * BLOCK as u64)
            .lower_tier(
                TierKind::Flash { path: path.clone() },
                2048 * BLOCK as u64,
                PolicyConfig::Lru,
            )
            .max_value(1 << 20)
            .build()
            .unwrap()
    };
    let len = |key: u64| 100 + (key as usize * 7919) % 20_000;
    let cache = build();
    for key in 0..200 {
        cache.put(key, &value(key, 1, len(key))).unwrap();
    }
    let before = cache.stats();
    assert!(before.demotions > 0, "some went down already: {before:?}");
    cache.move_down_and_sync().unwrap();
    let moved = cache.stats().demotions - before.demotions;
    assert!(moved > 20, "DRAM's objects moved down: {moved}");
    drop(cache);
    let cache = build();
    assert_eq!(cache.stats().recovered, 200, "{:?}", cache.stats());
    for key in 0..200 {
        let got = cache.get_object(key).unwrap_or_else(|| panic!("object {key}"));
        assert_eq!((got.len(), version_of(key, &got)), (len(key), 1));
    }
    drop(cache);
    std::fs::remove_file(&path).unwrap();
    let dirty = CacheBuilder::new(PolicyConfig::Lru)
        .block_size(BLOCK)
        .capacity_bytes(64 * BLOCK as u64)
        .lower_tier(TierKind::Flash { path: path.clone() }, 256 * BLOCK as u64, PolicyConfig::Lru)
        .mode(CasConfig {
            seq_cutoff: SeqCutoffPolicy::Never,
            ..CasConfig::new(CacheMode::WriteBack)
        })
        .build()
        .unwrap();
    let err = dirty.move_down_and_sync().unwrap_err().to_string();
    assert!(err.contains("dirty"), "{err}");
}

/// Objects on a mapped, file or flash tier come back after a clean stop, with their keys;
/// objects of another size written meanwhile replace them.
#[test]
fn objects_on_persistent_tiers_survive_a_restart() {
    let path = scratch("restart.tier");
    for tier in [
        TierKind::Mapped { path: path.clone() },
        TierKind::File { path: path.clone() },
        TierKind::Flash { path: path.clone() },
    ] {
        let _ = std::fs::remove_file(&path);
        objects_survive_a_restart(tier);
    }
}

fn objects_survive_a_restart(tier: TierKind) {
    let build = || {
        // Whole pages: size-classed tiers are not recovered yet.
        let cache = objects(tier.clone(), 2, 2048, 1);
        KeyedCache::new(cache).unwrap()
    };
    let key = |i: u32| format!("sst/{i:06}.sst@0").into_bytes();
    let len = |i: u32| [100, 5000, 70_000, 300_000][i as usize % 4] + i as usize;
    let body =
        |i: u32, v: u8| -> Vec<u8> { (0..len(i)).map(|b| (b as u8) ^ v ^ i as u8).collect() };
    let cache = build();
    for i in 0..20 {
        cache.insert(&key(i), &body(i, 1)).unwrap();
    }
    // Overwritten: in place with as many pages, or with another size.
    cache.insert(&key(2), &body(2, 2)).unwrap();
    cache.insert(&key(3), &body(1, 3)).unwrap();
    drop(cache);
    let cache = build();
    let stats = cache.cache().stats();
    assert_eq!(stats.recovered, 20, "{tier:?}: {stats:?}");
    assert_eq!(stats.recovery_damaged, 0);
    for i in 0..20 {
        let want = match i {
            2 => body(2, 2),
            3 => body(1, 3),
            _ => body(i, 1),
        };
        assert_eq!(cache.get(&key(i)), Some(want), "{tier:?}: object {i}");
    }
}

/// Crash images: an object whose pages are of two writes (a crash in the middle of an
/// overwrite), or one of whose pages is damaged, is a miss after a restart, never torn; the
/// objects beside it come back.
#[test]
fn an_object_torn_by_a_crash_is_a_miss() {
    let path = scratch("torn.mem");
    let _ = std::fs::remove_file(&path);
    let build = || objects(TierKind::Mapped { path: path.clone() }, 1, 256, 1);
    let len = 5 * BLOCK + 100; // Pages 0..6 (the first object written takes the lowest).
    let cache = build();
    cache.put(1, &value(1, 1, len)).unwrap();
    cache.put(2, &value(2, 1, 3 * BLOCK)).unwrap();
    drop(cache);
    let first = std::fs::read(&path).unwrap();
    let cache = build();
    cache.put(1, &value(1, 2, len)).unwrap();
    drop(cache);
    // Pages 3 and 4 as the first write left them: header and value.
    let mut file = std::fs::read(&path).unwrap();
    for page in 3..5 {
        for i in 0..(32 + BLOCK) as u64 {
            let at = common::block_byte(&path, 0, page, i) as usize;
            file[at] = first[at];
        }
    }
    std::fs::write(&path, &file).unwrap();
    let cache = build();
    assert_eq!(cache.get_object(1), None, "pages of two writes");
    assert_eq!(cache.stats().recovery_damaged, 6, "{:?}", cache.stats());
    assert_eq!(version_of(2, &cache.get_object(2).unwrap()), 1);
    // A flipped bit in an object's last page: the whole object goes.
    cache.put(3, &value(3, 1, 2 * BLOCK + 1)).unwrap();
    let pages: Vec<u64> = (0..256).filter(|&p| page_holds(&path, p, 3)).collect();
    assert_eq!(pages.len(), 3, "{pages:?}");
    drop(cache);
    common::flip_block_bit(&path, 0, pages[2], 32, 0);
    let cache = build();
    assert_eq!(cache.get_object(3), None);
    assert_eq!(version_of(2, &cache.get_object(2).unwrap()), 1);
}

/// Whether page `page` of shard 0 of the mapped tier at `path` has a header for `key`.
fn page_holds(path: &std::path::Path, page: u64, key: u64) -> bool {
    let file = std::fs::read(path).unwrap();
    let at = common::block_byte(path, 0, page, 0) as usize;
    &file[at..at + 4] == b"TCB2" && file[at + 8..at + 16] == key.to_le_bytes()
}

/// The engine decides as the simulator on a trace of real object sizes (CloudPhysics in
/// libCacheSim's oracleGeneral, whose objects are the trace's requests, 512 bytes to 1 MiB and
/// more): every read a look-up, and on a miss the object read through (`fetch_object`); the
/// simulator's policy counts bytes, each object as the pages it takes. The same hit or miss on
/// every request, for every policy the engine runs.
#[test]
fn the_engine_decides_as_the_simulator_on_object_sizes() {
    let reqs: Vec<Request> = cloudphysics_objects().into_iter().take(40_000).collect();
    let largest = reqs.iter().map(|r| r.size).max().unwrap() as usize;
    let spanning = reqs.iter().filter(|r| r.size as usize > BLOCK).count();
    assert!(spanning > 5000, "objects larger than a block: {spanning}");
    let names: Vec<&str> = PolicyConfig::NAMES
        .iter()
        .copied()
        .filter(|n| !PolicyConfig::parse(n).unwrap().needs_future())
        .collect();
    // The policies one after another on as many threads as the machine has (each its own
    // simulator and one-shard engine; the one-thread engine is what is compared).
    let next = std::sync::atomic::AtomicUsize::new(0);
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get()).min(names.len());
    std::thread::scope(|scope| {
        for _ in 0..threads {
            scope.spawn(|| loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let Some(name) = names.get(i) else { return };
                engine_decides_as_simulator(name, &reqs, largest);
            });
        }
    });
}

/// CloudPhysics' requests in libCacheSim's oracleGeneral (`data/`), each object of its size.
fn cloudphysics_objects() -> Vec<Request> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../data/cloudPhysicsIO.oracleGeneral.bin.zst");
    tiercache_workload::TraceReader::open(&path, &tiercache_workload::TraceOptions::default())
        .unwrap()
        .map(|r| r.unwrap())
        .collect()
}

/// `name`'s one-shard engine serving `reqs` through `fetch_object` hits and misses exactly as
/// its simulator does with byte capacity, each object sized as the pages it takes.
fn engine_decides_as_simulator(name: &str, reqs: &[Request], largest: usize) {
    let pages = |size: u32| size.max(1).div_ceil(BLOCK as u32) * BLOCK as u32;
    let capacity = 16_000 * BLOCK as u64;
    let config = PolicyConfig::parse(name).unwrap();
    let Ok(mut policy) = AnyPolicy::from_config(&config, Capacity::bytes(capacity), &[], 0) else {
        // A policy of fixed slots (set-associative): neither runs objects by size.
        let built = CacheBuilder::new(config.clone()).max_value(2 * BLOCK).build();
        assert!(built.is_err(), "{name}");
        return;
    };
    let mut decision = Decision::new();
    let simulated: Vec<bool> = reqs
        .iter()
        .map(|r| {
            decision.clear();
            policy.decide(&Request { size: pages(r.size), ..*r }, &mut decision);
            decision.hit.is_some()
        })
        .collect();
    let clock = std::sync::Arc::new(tiercache_engine::ManualClock::default());
    let cache = CacheBuilder::new(config.clone())
        .clock(clock.clone())
        .block_size(BLOCK)
        .shards(1)
        .capacity_bytes(capacity)
        .max_value(largest.max(2 * BLOCK))
        .without_worker()
        .build()
        .unwrap();
    let engine = fetch_all(&cache, reqs, Some(&clock));
    let parted = simulated.iter().zip(&engine).position(|(a, b)| a != b);
    assert_eq!(parted, None, "{name}: engine and simulator part at request {parted:?}");
    assert!(engine.iter().filter(|h| **h).count() > 1000, "{name}");
}

/// Each of `reqs` through `fetch_object` (a miss loads the key's value, version 0, of the
/// request's size), the clock set to the request's time if given; whether each was a hit.
fn fetch_all(
    cache: &Cache,
    reqs: &[Request],
    clock: Option<&tiercache_engine::ManualClock>,
) -> Vec<bool> {
    reqs.iter()
        .map(|r| {
            if let Some(clock) = clock {
                clock.set(r.time_us);
            }
            let (got, hit) =
                cache.fetch_object(r.key, || Ok(value(r.key, 0, r.size.max(16) as usize))).unwrap();
            assert_eq!(version_of(r.key, &got), 0);
            hit
        })
        .collect()
}

/// With `large_values`, a miss of a value larger than the limit goes to the tier below DRAM:
/// the engine (DRAM over a mapped tier, one shard) still decides as the simulator's stack on
/// the trace of real object sizes, request by request, and the rule did place values there.
#[test]
fn large_values_start_below_dram_as_the_simulator_places_them() {
    let reqs: Vec<Request> = cloudphysics_objects().into_iter().take(20_000).collect();
    let largest = reqs.iter().map(|r| r.size).max().unwrap() as usize;
    let pages = |size: u32| size.max(1).div_ceil(BLOCK as u32) * BLOCK as u32;
    let (dram, lower, large) = (2_000 * BLOCK as u64, 16_000 * BLOCK as u64, 64 << 10);
    // Every miss admitted, then large values only on their second miss.
    for spec in ["always", "second-hit-over:64KiB"] {
        let admission = AdmissionConfig::parse_chain(spec).unwrap();
        let stack = tiercache_policy::StackConfig {
            tiers: vec![
                (PolicyConfig::Lru, Capacity::bytes(dram)),
                (PolicyConfig::Lru, Capacity::bytes(lower)),
            ],
            large_values: Some(large),
            admission: admission.clone(),
            ..tiercache_policy::StackConfig::single(PolicyConfig::Lru, Capacity::bytes(dram))
        };
        let mut policy = stack.build().unwrap();
        let (mut decision, mut placed_below, mut first_misses) = (Decision::new(), 0, 0);
        let simulated: Vec<bool> = reqs
            .iter()
            .map(|r| {
                decision.clear();
                policy.decide(&Request { size: pages(r.size), ..*r }, &mut decision);
                let below = tiercache_core::Action::Insert {
                    tier: tiercache_core::TierId(1),
                    key: r.key,
                    size: pages(r.size),
                    dirty: false,
                };
                placed_below += decision.actions.contains(&below) as usize;
                first_misses += decision.actions.iter().any(|a| {
                    matches!(a, tiercache_core::Action::Reject { reason, .. }
                        if *reason == tiercache_core::RejectReason::FirstMiss)
                }) as usize;
                decision.hit.is_some()
            })
            .collect();
        // Large values that miss twice, or every one, are placed below DRAM.
        let least = if spec == "always" { 100 } else { 10 };
        assert!(placed_below > least, "{spec}: misses placed below DRAM: {placed_below}");
        assert_eq!(first_misses > 100, spec != "always", "{spec}: {first_misses} first misses");
        let path = scratch("large-values.mem");
        let _ = std::fs::remove_file(&path);
        let cache = CacheBuilder::new(PolicyConfig::Lru)
            .block_size(BLOCK)
            .shards(1)
            .capacity_bytes(dram)
            .lower_tier(TierKind::Mapped { path }, lower, PolicyConfig::Lru)
            .large_values(large)
            .admission(admission)
            .max_value(largest)
            .hit_rule(tiercache_policy::HitRule::Exact)
            .without_worker()
            .build()
            .unwrap();
        let engine = fetch_all(&cache, &reqs, None);
        let parted = simulated.iter().zip(&engine).position(|(a, b)| a != b);
        assert_eq!(parted, None, "{spec}: engine and simulator part at request {parted:?}");
    }
    let e = CacheBuilder::new(PolicyConfig::Lru).large_values(large).build().err();
    let e = e.expect("one tier refused").to_string();
    assert!(e.contains("large_values") && e.contains("second tier"), "{e}");
}

/// The limits: a value over max_value, a max_value no shard can hold or of too many pages,
/// an over-long key; each an error that names the limit.
#[test]
fn the_limits_of_objects_are_errors_naming_them() {
    let cache = objects(TierKind::Dram, 2, 1024, 1);
    let e = cache.put(1, &vec![0; (1 << 20) + 1]).unwrap_err().to_string();
    assert!(e.contains("1048577 bytes") && e.contains("max_value = 1048576"), "{e}");
    let build = |b: CacheBuilder| b.build().err().expect("refused").to_string();
    let base = || {
        CacheBuilder::new(PolicyConfig::Lru)
            .block_size(BLOCK)
            .shards(4)
            .capacity_bytes(64 * BLOCK as u64)
    };
    let e = build(base().max_value(1 << 20));
    assert!(e.contains("max_value") && e.contains("a shard's largest tier"), "{e}");
    let e = build(base().capacity_bytes(1 << 30).max_value(200 << 20));
    assert!(e.contains("max_value") && e.contains("spans at most 32767"), "{e}");
    let keyed = KeyedCache::new(objects(TierKind::Dram, 2, 1024, 1)).unwrap();
    let e = keyed.insert(&[1; 70_000], b"v").unwrap_err().to_string();
    assert!(e.contains("65536"), "{e}");
    let e = keyed.insert(b"k", &vec![0; 1 << 20]).unwrap_err().to_string();
    assert!(e.contains("share 1048572 bytes"), "{e}"); // max_value less the key's length
}

/// A read answered only from memory: a value on the DRAM tier is handed over in place; one on
/// a file tier is not (that read may wait on the device), though `get_with` finds it; another
/// key's object under the same hash is never handed over.
#[test]
fn a_read_from_memory_only_never_goes_to_a_device() {
    let dram = KeyedCache::new(objects(TierKind::Dram, 2, 1024, 1)).unwrap();
    dram.insert(b"sst/000001@7", b"a data block").unwrap();
    assert_eq!(dram.get_in_memory_with(b"sst/000001@7", <[u8]>::to_vec).unwrap(), b"a data block");
    assert!(dram.get_in_memory_with(b"sst/000001@8", |_| ()).is_none());
    let path = scratch("in-memory.tier");
    let _ = std::fs::remove_file(&path);
    let file = KeyedCache::new(objects(TierKind::File { path }, 2, 1024, 1)).unwrap();
    file.insert(b"sst/000001@7", b"a data block").unwrap();
    assert!(file.get_in_memory_with(b"sst/000001@7", |_| ()).is_none());
    assert_eq!(file.get_with(b"sst/000001@7", <[u8]>::to_vec).unwrap(), b"a data block");
}

/// 64 threads fetch one cold object spanning pages at once: the loader runs once, and every
/// thread gets the whole value.
#[test]
fn sixty_four_fetches_of_one_cold_object_load_it_once() {
    let cache = KeyedCache::new(objects(TierKind::Dram, 4, 1024, 4)).unwrap();
    let loads = AtomicU64::new(0);
    let barrier = std::sync::Barrier::new(64);
    let want: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
    std::thread::scope(|scope| {
        for _ in 0..64 {
            scope.spawn(|| {
                barrier.wait();
                let got = cache
                    .fetch(b"table/000042.sst", || {
                        loads.fetch_add(1, Ordering::SeqCst);
                        std::thread::sleep(std::time::Duration::from_millis(200));
                        Ok(want.clone())
                    })
                    .unwrap();
                assert!(got == want);
            });
        }
    });
    assert_eq!(loads.load(Ordering::SeqCst), 1);
    assert_eq!(cache.get(b"table/000042.sst"), Some(want));
}

/// A process killed at any point of a workload of objects spanning up to 20 pages, synced now
/// and then (killed at its `budget`-th device write, torn or whole, and nothing after): after a
/// restart every object reads back whole as its last acknowledged version, or the one being
/// written when the kill landed, or misses; never torn, never another key's. On mapped (written
/// through its device) and file tiers, whose writes a killed process leaves in the page cache.
/// A flash tier's slot records reach it at a sync (`docs/DURABILITY.md`), so there an object
/// may also read back as a version acknowledged since the last completed sync began, or the one
/// durable then; never older. Returns whether the kill landed, and how many objects came back.
fn killed_writing_objects(
    (tier, writers): (TierKind, usize),
    budget: i64,
    tear: bool,
) -> (bool, usize) {
    use std::sync::atomic::AtomicI64;
    let path = match &tier {
        TierKind::Mapped { path } | TierKind::File { path } | TierKind::Flash { path } => {
            path.clone()
        }
        TierKind::Dram => unreachable!("a persistent tier"),
    };
    let _ = std::fs::remove_file(&path);
    let build = || {
        CacheBuilder::new(PolicyConfig::Lru)
            .tier(tier.clone())
            .block_size(BLOCK)
            .shards(2)
            .capacity_bytes(96 * BLOCK as u64)
            .max_value(20 * BLOCK)
            .write_behind(writers)
            .without_worker()
    };
    let left = std::sync::Arc::new(AtomicI64::new(budget));
    let budget_left = left.clone();
    let cache = build()
        .wrap_tier(0, move |inner| {
            std::sync::Arc::new(common::Killed { inner, budget: budget_left, tear })
        })
        .build()
        .unwrap();
    let mut rng = SeededRng::new(budget as u64);
    let mut acked: std::collections::HashMap<u64, (u64, usize)> = Default::default();
    // Every version acknowledged since the last completed sync began, and the one durable then.
    let mut since_sync: Vec<(u64, (u64, usize))> = Vec::new();
    let mut pending = None;
    for version in 1..200u64 {
        let key = rng.below(12);
        if version % 8 == 0 {
            let durable = acked.iter().map(|(k, v)| (*k, *v)).collect();
            cache.sync().unwrap();
            if common::Killed::dead(&left) {
                break; // The sync did not complete: the last one that did still stands.
            }
            since_sync = durable;
            continue;
        }
        if rng.below(4) == 0 {
            if let Some(got) = cache.get_object(key) {
                assert_eq!((version_of(key, &got), got.len()), acked[&key]);
            }
            continue;
        }
        let len = 100 + rng.below(20 * BLOCK as u64 - 100) as usize;
        cache.put(key, &value(key, version, len)).unwrap();
        if common::Killed::dead(&left) {
            pending = Some((key, (version, len)));
            break;
        }
        acked.insert(key, (version, len));
        since_sync.push((key, (version, len)));
    }
    let flash = matches!(tier, TierKind::Flash { .. });
    let landed = common::Killed::dead(&left);
    drop(cache);
    let cache = build().build().unwrap();
    let mut back = 0;
    for key in 0..12 {
        let Some(got) = cache.get_object(key) else { continue };
        back += 1;
        let found = (version_of(key, &got), got.len());
        let allowed = acked.get(&key) == Some(&found)
            || pending == Some((key, found))
            || flash && since_sync.contains(&(key, found));
        assert!(
            allowed,
            "{tier:?}, killed at write {budget} (torn {tear}): key {key} reads {found:?}, \
             acknowledged {:?}, in flight {pending:?}",
            acked.get(&key)
        );
    }
    assert_eq!(cache.stats().checksum_failures, 0);
    (landed, back)
}

#[test]
fn objects_killed_at_any_write_read_back_whole_or_miss() {
    let path = scratch("killed.tier");
    // Flash also with its writes behind (objects written as one job each, by other threads).
    let tiers = [
        (TierKind::Mapped { path: path.clone() }, 0),
        (TierKind::File { path: path.clone() }, 0),
        (TierKind::Flash { path: path.clone() }, 0),
        (TierKind::Flash { path: path.clone() }, 2),
    ];
    for tier in tiers {
        let (mut budget, mut runs, mut back) = (1, 0, 0);
        loop {
            let (landed, found) = killed_writing_objects(tier.clone(), budget, budget % 2 == 0);
            if !landed {
                break;
            }
            budget += 1 + budget / 16;
            runs += 1;
            back += found;
        }
        assert!(runs > 40, "{tier:?}: the kill landed in {runs} runs");
        assert!(back > runs * 3, "{tier:?}: {back} objects came back in {runs} runs");
    }
}

/// Keys of a Rust type (`TypedCache`): a file number and an offset, as an LSM's block cache
/// keys its blocks, and strings; a program's own key type by its bytes (two tenants' objects of
/// one name apart).
#[test]
fn typed_keys_read_back_their_own_values() {
    use std::borrow::Cow;
    use tiercache_engine::{KeyBytes, TypedCache};
    let blocks: TypedCache<(u64, u64)> =
        TypedCache::new(objects(TierKind::Dram, 2, 1024, 1)).unwrap();
    for file in 1..4u64 {
        for offset in (0..5u64).map(|b| b * 4096) {
            let block = value(file << 32 | offset, 1, 3000 + offset as usize);
            assert!(blocks.insert(&(file, offset), &block).unwrap());
        }
    }
    for file in 1..4u64 {
        for offset in (0..5u64).map(|b| b * 4096) {
            let got = blocks.get(&(file, offset)).unwrap();
            assert_eq!(version_of(file << 32 | offset, &got), 1);
        }
    }
    assert_eq!(blocks.get(&(9, 0)), None);
    blocks.remove(&(1, 0));
    assert!(!blocks.contains(&(1, 0)) && blocks.contains(&(1, 4096)));
    let index = blocks.fetch(&(3, u64::MAX), || Ok(vec![5; 70_000])).unwrap();
    assert_eq!(index.len(), 70_000);
    assert_eq!(blocks.get(&(3, u64::MAX)), Some(vec![5; 70_000]));

    let paths: TypedCache<str> = TypedCache::new(objects(TierKind::Dram, 2, 1024, 1)).unwrap();
    paths.insert("table/part-0001.parquet", b"footer").unwrap();
    assert_eq!(paths.get("table/part-0001.parquet").as_deref(), Some(&b"footer"[..]));
    assert_eq!(paths.get("table/part-0002.parquet"), None);

    /// A program's own key: a tenant and a name.
    struct Named {
        tenant: u32,
        name: &'static str,
    }
    impl KeyBytes for Named {
        fn key_bytes(&self) -> Cow<'_, [u8]> {
            let mut bytes = self.tenant.to_le_bytes().to_vec();
            bytes.extend_from_slice(self.name.as_bytes());
            Cow::Owned(bytes)
        }
    }
    let named: TypedCache<Named> = TypedCache::new(objects(TierKind::Dram, 2, 1024, 1)).unwrap();
    named.insert(&Named { tenant: 1, name: "a" }, b"one's").unwrap();
    named.insert(&Named { tenant: 2, name: "a" }, b"two's").unwrap();
    assert_eq!(named.get(&Named { tenant: 1, name: "a" }).as_deref(), Some(&b"one's"[..]));
    assert_eq!(named.get(&Named { tenant: 2, name: "a" }).as_deref(), Some(&b"two's"[..]));
}

/// The README's example of objects runs as written (`readme.rs` checks that its lines are the
/// README's).
#[test]
fn the_readmes_example_runs() {
    example::main().unwrap();
}
