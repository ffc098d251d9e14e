//! `CachedFile`: byte-exact reads and writes at any offset against an in-memory model in every
//! write mode, the Open CAS mode table, concurrent block writers and readers, and backing-file
//! errors.

mod common;

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};

use tiercache_core::SeededRng;
use tiercache_engine::{CacheBuilder, CachedFile, TierKind};
use tiercache_policy::cas::{CacheMode, CasConfig, SeqCutoffPolicy};
use tiercache_policy::PolicyConfig;

const BLOCK: usize = 512;

fn scratch(name: &str) -> PathBuf {
    common::scratch("file", name)
}

/// LRU in `mode` (the engine runs no sequential cutoff).
fn in_mode(mode: CacheMode) -> CasConfig {
    CasConfig { seq_cutoff: SeqCutoffPolicy::Never, ..CasConfig::new(mode) }
}

fn open(name: &str, mode: CacheMode, initial: &[u8], blocks: u64) -> CachedFile {
    let path = scratch(name);
    std::fs::write(&path, initial).unwrap();
    let cache = CacheBuilder::new(PolicyConfig::Lru)
        .tier(TierKind::Mapped { path: scratch(&format!("{name}.cache")) })
        .block_size(BLOCK)
        .shards(2)
        .capacity_bytes(blocks * BLOCK as u64)
        .mode(in_mode(mode))
        .build()
        .unwrap();
    let file = CachedFile::open(&path, cache).unwrap();
    assert_eq!(file.mode(), mode);
    file
}

const MODES: [CacheMode; 4] = [
    CacheMode::WriteThrough,
    CacheMode::WriteAround,
    CacheMode::WriteInvalidate,
    CacheMode::PassThrough,
];

#[test]
fn random_reads_and_writes_match_a_model_in_every_mode() {
    for mode in MODES {
        let mut rng = SeededRng::new(77);
        let mut model: Vec<u8> = (0..10_000u32).map(|i| (i % 251) as u8).collect();
        let file = open(&format!("model-{mode:?}"), mode, &model, 8);
        for step in 0..3000u32 {
            let offset = rng.below(12_000);
            let len = 1 + rng.below(1500) as usize;
            if rng.chance(0.4) {
                let data: Vec<u8> = (0..len).map(|i| (step as usize * 7 + i) as u8).collect();
                file.write_at(offset, &data).unwrap();
                let end = offset as usize + len;
                if model.len() < end {
                    model.resize(end, 0);
                }
                model[offset as usize..end].copy_from_slice(&data);
            } else {
                let mut buf = vec![0xEE; len];
                let n = file.read_at(offset, &mut buf).unwrap();
                let expected = model
                    .get(offset as usize..)
                    .map(|rest| &rest[..rest.len().min(len)])
                    .unwrap_or(&[]);
                assert_eq!(&buf[..n], expected, "{mode:?}: read of {len} at {offset}, step {step}");
            }
        }
        assert_eq!(file.len().unwrap(), model.len() as u64);
        let stats = file.cache().stats();
        if mode == CacheMode::PassThrough {
            assert_eq!(stats.hits + stats.inserts, 0, "pass-through reads bypass the cache");
        } else {
            assert!(stats.hits > 0, "{mode:?}: {stats:?}");
        }
    }
}

/// (mode, block read before the write?) -> cached after the write? In pass-through a read
/// caches nothing, so the block is never cached before.
#[test]
fn write_modes_follow_the_open_cas_table() {
    let table = [
        (CacheMode::WriteThrough, true, true),
        (CacheMode::WriteThrough, false, true),
        (CacheMode::WriteAround, true, true),
        (CacheMode::WriteAround, false, false),
        (CacheMode::WriteInvalidate, true, false),
        (CacheMode::WriteInvalidate, false, false),
        (CacheMode::PassThrough, true, false),
        (CacheMode::PassThrough, false, false),
    ];
    for (mode, read_before, cached_after) in table {
        let file = open(&format!("table-{mode:?}-{read_before}"), mode, &[1u8; 4 * BLOCK], 8);
        let mut buf = vec![0u8; BLOCK];
        if read_before {
            file.read_at(2 * BLOCK as u64, &mut buf).unwrap();
            let cached = file.cache().get(2, &mut buf).is_some();
            assert_eq!(cached, mode != CacheMode::PassThrough, "{mode:?}: a read miss");
        }
        file.write_at(2 * BLOCK as u64, &[9u8; BLOCK]).unwrap();
        let cached = file.cache().get(2, &mut buf);
        assert_eq!(cached.is_some(), cached_after, "{mode:?}, read before: {read_before}");
        if cached.is_some() {
            assert_eq!(buf, vec![9u8; BLOCK], "{mode:?}: the cache holds the new data");
        }
        let mut back = vec![0u8; BLOCK];
        assert_eq!(file.read_at(2 * BLOCK as u64, &mut back).unwrap(), BLOCK);
        assert_eq!(back, vec![9u8; BLOCK]);
    }
}

#[test]
fn concurrent_block_writers_and_readers_never_go_back_in_time() {
    let blocks = 48u64;
    let file = open("concurrent", CacheMode::WriteThrough, &vec![0u8; blocks as usize * BLOCK], 16);
    let completed: Vec<AtomicU64> = (0..blocks).map(|_| AtomicU64::new(0)).collect();
    let turns: Vec<std::sync::Mutex<()>> = (0..blocks).map(|_| std::sync::Mutex::new(())).collect();
    std::thread::scope(|s| {
        for t in 0..4u64 {
            let (file, completed, turns) = (&file, &completed, &turns);
            s.spawn(move || {
                let mut rng = SeededRng::new(t);
                let mut buf = vec![0u8; BLOCK];
                for _ in 0..4000 {
                    let block = rng.below(blocks);
                    let floor = completed[block as usize].load(Ordering::Acquire);
                    if t % 2 == 0 && rng.chance(0.5) {
                        // Even threads also write whole blocks, one version after another.
                        let _turn = turns[block as usize].lock().unwrap();
                        let version = completed[block as usize].load(Ordering::Acquire) + 1;
                        let data: Vec<u8> =
                            version.to_le_bytes().iter().copied().cycle().take(BLOCK).collect();
                        file.write_at(block * BLOCK as u64, &data).unwrap();
                        completed[block as usize].store(version, Ordering::Release);
                    } else {
                        file.read_at(block * BLOCK as u64, &mut buf).unwrap();
                        let version = u64::from_le_bytes(buf[..8].try_into().unwrap());
                        assert!(buf.chunks(8).all(|c| c == &buf[..8]), "torn block {block}");
                        assert!(version >= floor, "block {block}: read {version}, floor {floor}");
                    }
                }
            });
        }
    });
    assert_eq!(file.cache().stats().checksum_failures, 0);
}

#[test]
fn backing_file_errors_are_typed() {
    let cache = || CacheBuilder::new(PolicyConfig::Lru).block_size(BLOCK).build().unwrap();
    let missing = scratch("missing.img");
    let err = CachedFile::open(&missing, cache()).err().unwrap().to_string();
    assert!(err.contains("missing.img") && err.contains("cannot open the backing file"), "{err}");
    let path = scratch("present.img");
    std::fs::write(&path, [5u8; 2048]).unwrap();
    // The modes that keep dirty blocks need a persistent tier (tests/write_back.rs);
    // sequential cutoff cannot see runs across shards.
    for (config, says) in [
        (in_mode(CacheMode::WriteBack), "wb over DRAM only"),
        (in_mode(CacheMode::WriteOnly), "wo over DRAM only"),
        (CasConfig::new(CacheMode::WriteThrough), "seq_cutoff"),
    ] {
        let builder = CacheBuilder::new(PolicyConfig::Lru).mode(config);
        let err = builder.build().err().unwrap().to_string();
        assert!(err.contains(says), "{err}");
    }
    // The backing file vanishes from the directory while open: its data stays readable through
    // the open descriptor, and nothing panics.
    let file = CachedFile::open(&path, cache()).unwrap();
    std::fs::remove_file(&path).unwrap();
    let mut buf = [0u8; 100];
    assert_eq!(file.read_at(0, &mut buf).unwrap(), 100);
    assert_eq!(buf, [5u8; 100]);
    file.write_at(4000, b"tail").unwrap();
    assert_eq!(file.len().unwrap(), 4004);
    file.sync().unwrap();
}

/// Non-hierarchical caching live: once the scheduler (fed by the background worker) holds a
/// static split of 0, every clean read hit is loaded from the backing file instead, with the
/// right bytes, and counted as sent there; writes still go through the cache.
#[test]
fn nhc_sends_read_hits_to_the_backing_file_with_the_right_data() {
    use tiercache_policy::nhc::NhcConfig;
    let path = scratch("nhc");
    let initial: Vec<u8> = (0..64 * BLOCK as u32).map(|i| (i % 253) as u8).collect();
    std::fs::write(&path, &initial).unwrap();
    let config = NhcConfig { fixed_load_admit: Some(0.0), window: 2, ..NhcConfig::default() };
    let cache = CacheBuilder::new(PolicyConfig::Lru)
        .block_size(BLOCK)
        .shards(2)
        .capacity_bytes(128 * BLOCK as u64)
        .nhc(config)
        .measure_every(std::time::Duration::from_millis(1))
        .build()
        .unwrap();
    let file = CachedFile::open(&path, cache).unwrap();
    let mut buf = vec![0u8; BLOCK];
    // Warm until the hit rate is stable and the split is held (a generous deadline; the
    // scheduler needs a few 1 ms intervals with reads in them).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let held = || file.cache().knobs().iter().any(|(k, v)| *k == "data_admit" && *v == 0.0);
    while !held() && std::time::Instant::now() < deadline {
        for block in 0..64u64 {
            file.read_at(block * BLOCK as u64, &mut buf).unwrap();
        }
    }
    assert!(held(), "the scheduler never saw a stable hit rate");
    let before = file.cache().stats();
    for block in 0..64u64 {
        let at = block as usize * BLOCK;
        assert_eq!(file.read_at(at as u64, &mut buf).unwrap(), BLOCK);
        assert_eq!(buf, initial[at..at + BLOCK], "block {block}");
    }
    let after = file.cache().stats();
    assert_eq!(after.offloaded - before.offloaded, 64, "every clean hit went to the backing file");
    assert_eq!(after.hits, before.hits);
    // A write is still written through and visible to the next read, wherever it is served.
    let fresh = vec![7u8; BLOCK];
    file.write_at(3 * BLOCK as u64, &fresh).unwrap();
    file.read_at(3 * BLOCK as u64, &mut buf).unwrap();
    assert_eq!(buf, fresh);
}

#[test]
fn nhc_needs_the_background_worker_and_a_measurement_interval() {
    use tiercache_policy::nhc::NhcConfig;
    let without_worker =
        CacheBuilder::new(PolicyConfig::Lru).nhc(NhcConfig::default()).without_worker().build();
    let err = without_worker.err().expect("refused").to_string();
    assert!(err.contains("nhc") && err.contains("worker"), "{err}");
    let zero = CacheBuilder::new(PolicyConfig::Lru)
        .nhc(NhcConfig::default())
        .measure_every(std::time::Duration::ZERO)
        .build();
    let err = zero.err().expect("refused").to_string();
    assert!(err.contains("measure_every"), "{err}");
}

/// Measured interference-aware admission: the worker times the tier's reads each interval and
/// feeds them to the admission rule, whose calibration then moves off its start.
#[test]
fn measured_interference_admission_is_fed_tier_read_times() {
    use tiercache_policy::nvcache::NvcacheConfig;
    let config = NvcacheConfig::parse("interference:0.1,measured,window=1000").unwrap();
    let cache = CacheBuilder::new(PolicyConfig::Lru)
        .tier(TierKind::Mapped { path: scratch("measured.cache") })
        .block_size(BLOCK)
        .shards(2)
        .capacity_bytes(64 * BLOCK as u64)
        .nvcache(config)
        .measure_every(std::time::Duration::from_millis(1))
        .build()
        .unwrap();
    let value = vec![9u8; BLOCK];
    let mut buf = vec![0u8; BLOCK];
    let calibration = |c: &tiercache_engine::Cache| {
        c.knobs().iter().find(|(k, _)| *k == "calibration").map(|(_, v)| *v).unwrap()
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while calibration(&cache) == 1.0 && std::time::Instant::now() < deadline {
        for key in 0..256u64 {
            cache
                .read_through(key % 48, &mut buf, |b| {
                    b.copy_from_slice(&value);
                    Ok(BLOCK)
                })
                .unwrap();
        }
    }
    assert_ne!(calibration(&cache), 1.0, "no interval with tier reads reached the rule");
    assert!(cache.stats().tier_reads > 0);
    assert!(cache.stats().tier_read_ns > 0);
}

#[test]
fn set_len_grows_with_zeros_and_cuts_and_no_cached_block_outlives_it() {
    for mode in [CacheMode::WriteThrough, CacheMode::WriteBack] {
        let name = format!("set-len-{}", mode.short());
        // One and a half blocks, read so the short last block is cached.
        let initial: Vec<u8> = (0..BLOCK + BLOCK / 2).map(|i| (i % 251) as u8 + 1).collect();
        let file = open(&name, mode, &initial, 16);
        let mut buf = vec![0u8; 2 * BLOCK];
        assert_eq!(file.read_at(0, &mut buf).unwrap(), initial.len());
        // Dirty in write-back: set_len must write it back before cutting around it.
        file.write_at(10, &[0xEE; 4]).unwrap();
        file.set_len(3 * BLOCK as u64).unwrap();
        assert_eq!(file.len().unwrap(), 3 * BLOCK as u64);
        let mut grown = vec![0xFFu8; 3 * BLOCK];
        assert_eq!(file.read_at(0, &mut grown).unwrap(), 3 * BLOCK);
        assert_eq!(&grown[10..14], &[0xEE; 4]);
        assert_eq!(&grown[14..initial.len()], &initial[14..], "{mode:?}");
        assert!(
            grown[initial.len()..].iter().all(|b| *b == 0),
            "{mode:?}: the grown part is zeros"
        );
        // Cut inside the first block: reads end there, and growing again gives zeros, not
        // the cut bytes from a cached copy.
        file.set_len(100).unwrap();
        assert_eq!(file.read_at(0, &mut buf).unwrap(), 100);
        file.set_len(2 * BLOCK as u64).unwrap();
        assert_eq!(file.read_at(0, &mut buf).unwrap(), 2 * BLOCK);
        assert_eq!(&buf[14..100], &initial[14..100]);
        assert!(buf[100..].iter().all(|b| *b == 0), "{mode:?}: cut bytes came back");
    }
}

#[test]
fn in_write_back_growing_writes_nothing_back_and_a_write_past_the_end_extends_the_file() {
    // One and a half blocks, the short last block dirty.
    let initial: Vec<u8> = (0..BLOCK + BLOCK / 2).map(|i| (i % 251) as u8 + 1).collect();
    let file = open("grow-wb", CacheMode::WriteBack, &initial, 16);
    file.write_at(BLOCK as u64 + 8, &[0xEE; 4]).unwrap();
    // Growing keeps the dirty block dirty: a database that grows its file at every commit
    // must not pay a write-back of the whole cache each time.
    file.set_len(4 * BLOCK as u64).unwrap();
    assert_eq!(file.cache().stats().write_backs, 0, "growing wrote blocks back");
    assert_eq!(file.len().unwrap(), 4 * BLOCK as u64);
    let mut grown = vec![0xFFu8; 4 * BLOCK];
    assert_eq!(file.read_at(0, &mut grown).unwrap(), 4 * BLOCK);
    assert_eq!(&grown[BLOCK + 8..BLOCK + 12], &[0xEE; 4]);
    assert_eq!(&grown[BLOCK + 12..initial.len()], &initial[BLOCK + 12..]);
    assert!(grown[initial.len()..].iter().all(|b| *b == 0), "the grown part is zeros");
    // A write past the end: the file is that long at once, the data still only in the cache.
    file.write_at(6 * BLOCK as u64, &[7; 100]).unwrap();
    assert_eq!(file.len().unwrap(), 6 * BLOCK as u64 + 100);
    let mut buf = vec![0xFFu8; 2 * BLOCK + 100];
    assert_eq!(file.read_at(4 * BLOCK as u64, &mut buf).unwrap(), 2 * BLOCK + 100);
    assert!(buf[..2 * BLOCK].iter().all(|b| *b == 0), "the hole reads as zeros");
    assert_eq!(&buf[2 * BLOCK..], &[7; 100]);
    // Written back, the file holds all of it.
    file.flush_backing().unwrap();
    let on_disk = std::fs::read(scratch("grow-wb")).unwrap();
    assert_eq!(on_disk.len(), 6 * BLOCK + 100);
    assert_eq!(&on_disk[BLOCK + 8..BLOCK + 12], &[0xEE; 4]);
    assert_eq!(&on_disk[6 * BLOCK..], &[7; 100]);
}

/// Every read returns the last write, whatever the tiers' placement moves: DRAM over a file
/// tier, and DRAM over a mapped tier over a flash tier, in write-through and write-back, with
/// DRAM-first, SCM-first and bidirectional placement (write-back over two persistent tiers is
/// DRAM-first only). A write whose hit promoted its block into DRAM once moved the old bytes
/// up and dropped the write's: a read then returned the version before it.
#[test]
fn every_read_returns_the_last_write_whatever_the_placement_moves() {
    use tiercache_policy::Placement;
    const BLOCK: usize = 4096;
    const BLOCKS: u64 = 48;
    for (case, mode, placement, tiers) in [
        (0, CacheMode::WriteThrough, "scm-first:2", 2),
        (1, CacheMode::WriteBack, "scm-first:2", 2),
        (2, CacheMode::WriteBack, "bidirectional:2", 2),
        (3, CacheMode::WriteThrough, "scm-first:2", 3),
        (4, CacheMode::WriteThrough, "bidirectional:1", 3),
        (5, CacheMode::WriteBack, "dram-first", 3),
    ] {
        let name = format!("placement-{case}");
        let backing = scratch(&name);
        let initial: Vec<u8> = (0..BLOCKS).flat_map(|b| common::value(b, 0, BLOCK)).collect();
        std::fs::write(&backing, &initial).unwrap();
        let mut cache = CacheBuilder::new(PolicyConfig::Lru)
            .placement(Placement::parse(placement).unwrap())
            .capacity_bytes(4 * BLOCK as u64)
            .block_size(BLOCK)
            .shards(1)
            .mode(in_mode(mode));
        let lower = |suffix: &str| scratch(&format!("{name}.{suffix}"));
        cache = match tiers {
            2 => cache.lower_tier(
                TierKind::File { path: lower("file") },
                16 * BLOCK as u64,
                PolicyConfig::Lru,
            ),
            _ => cache
                .lower_tier(
                    TierKind::Mapped { path: lower("mapped") },
                    8 * BLOCK as u64,
                    PolicyConfig::Lru,
                )
                .add_tier(
                    TierKind::Flash { path: lower("flash") },
                    16 * BLOCK as u64,
                    PolicyConfig::Lru,
                ),
        };
        let file = CachedFile::open(&backing, cache.build().unwrap()).unwrap();
        let mut rng = SeededRng::new(case);
        let mut now = vec![0u64; BLOCKS as usize];
        let mut buf = vec![0u8; BLOCK];
        for op in 1..=2000u64 {
            let block = if rng.chance(0.33) { rng.below(8) } else { rng.below(BLOCKS) };
            let at = block * BLOCK as u64;
            if rng.chance(0.5) {
                file.write_at(at, &common::value(block, op, BLOCK)).unwrap();
                now[block as usize] = op;
            } else {
                file.read_at(at, &mut buf).unwrap();
                let read = common::version_of(block, &buf);
                assert_eq!(
                    read, now[block as usize],
                    "{mode:?} {placement} {tiers} tiers: op {op}, block {block}"
                );
            }
            if op % 5 == 0 {
                file.sync().unwrap();
            }
        }
        let stats = file.cache().stats();
        assert!(stats.promotions > 0 || placement == "dram-first", "{placement}: {stats:?}");
        assert!(stats.demotions > 0, "{placement}: {stats:?}");
    }
}
