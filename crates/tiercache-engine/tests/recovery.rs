//! Recovery: a cache reopened over its tier files keeps what they hold (warm restart), never
//! brings back a block it had let go of, and treats damage as its recover mode says
//! (`docs/DURABILITY.md`): quiet drops and counts it, strict refuses to start naming the file
//! and the offset, wipe starts empty.

mod common;

use std::path::{Path, PathBuf};

use tiercache_engine::tier::block::{FREE, HEADER_BYTES as BLOCK_HEADER};
use tiercache_engine::tier::superblock::HEADER_BYTES;
use tiercache_engine::{Cache, CacheBuilder, CachedFile, Recover, TierKind};
use tiercache_policy::PolicyConfig;
use tiercache_workload::gen::{KeyDistribution, SizeDistribution, Synthetic, SyntheticConfig};

use common::{value, version_of};

const BLOCK: usize = 4096;
const SLOT: usize = BLOCK + BLOCK_HEADER;

fn scratch(name: &str) -> PathBuf {
    common::scratch("recovery", name)
}

fn tier(kind: &str, path: &Path) -> TierKind {
    match kind {
        "mapped" => TierKind::Mapped { path: path.to_path_buf() },
        "flash" | "flash-sets" => TierKind::Flash { path: path.to_path_buf() },
        _ => TierKind::File { path: path.to_path_buf() },
    }
}

/// One tier of `kind` at `path`, `blocks` blocks in `shards` shards, opened as `recover` says.
fn open(kind: &str, path: &Path, blocks: u64, shards: usize, recover: Recover) -> Cache {
    try_open(kind, path, blocks, shards, recover).unwrap()
}

fn try_open(
    kind: &str,
    path: &Path,
    blocks: u64,
    shards: usize,
    recover: Recover,
) -> Result<Cache, String> {
    // "flash-sets": a flash tier run by the set-associative policy, whose blocks lie where it
    // places them (`docs/DURABILITY.md`).
    let policy = match kind {
        "flash-sets" => PolicyConfig::parse("setassoc:ways=8").unwrap(),
        _ => PolicyConfig::Lru,
    };
    CacheBuilder::new(policy)
        .tier(tier(kind, path))
        .block_size(BLOCK)
        .shards(shards)
        .capacity_bytes(blocks * BLOCK as u64)
        .recover(recover)
        .build()
        .map_err(|e| e.to_string())
}

/// Keys of a skewed stream (scrambled Zipf 0.9 over 4,000 objects).
fn stream() -> Vec<u64> {
    let config = SyntheticConfig {
        distribution: KeyDistribution::ScrambledZipf { theta: 0.9 },
        objects: 4000,
        requests: 20_000,
        read_ratio: 1.0,
        size: SizeDistribution::Fixed { bytes: BLOCK as u32 },
        seed: 5,
    };
    Synthetic::new(config).unwrap().map(|r| r.key).collect()
}

/// Runs `keys` as a read-through workload (a miss puts the key's value) and returns the hit
/// ratio, checking every hit's bytes.
fn replay(cache: &Cache, keys: &[u64]) -> f64 {
    let mut buf = vec![0u8; BLOCK];
    let mut hits = 0;
    for &key in keys {
        match cache.get(key, &mut buf) {
            Some(len) => {
                assert_eq!(version_of(key, &buf[..len]), 1, "key {key}");
                hits += 1;
            }
            None => {
                cache.put(key, &value(key, 1, BLOCK)).unwrap();
            }
        }
    }
    hits as f64 / keys.len() as f64
}

#[test]
fn a_clean_restart_is_warm_on_mapped_file_and_flash_tiers() {
    let keys = stream();
    for kind in ["mapped", "file", "flash", "flash-sets"] {
        let path = scratch(&format!("warm.{kind}"));
        let cache = open(kind, &path, 1000, 4, Recover::Quiet);
        assert!(cache.recovery().is_none(), "a new file holds nothing");
        replay(&cache, &keys);
        let before = replay(&cache, &keys);
        let resident = cache.occupancy().0;
        drop(cache);
        let cache = open(kind, &path, 1000, 4, Recover::Quiet);
        let recovery = cache.recovery().expect("the tier held blocks");
        assert!(recovery.clean, "{kind}: the cache before stopped cleanly");
        let stats = cache.stats();
        assert_eq!(stats.recovered, resident, "{kind}: every block came back");
        assert_eq!(
            (stats.recovery_damaged, stats.recovery_stale, stats.recovery_declined),
            (0, 0, 0),
            "{kind}"
        );
        let after = replay(&cache, &keys);
        assert!(
            (after - before).abs() <= 0.02,
            "{kind}: hit ratio {before:.4} before the restart, {after:.4} after"
        );
        drop(cache);
        // Wiped, it starts empty, and so does the next recovery.
        let wiped = open(kind, &path, 1000, 4, Recover::Wipe);
        assert_eq!(wiped.occupancy().0, 0);
        drop(wiped);
        let cache = open(kind, &path, 1000, 4, Recover::Quiet);
        assert_eq!(cache.stats().recovered, 0, "{kind}: nothing of the wiped run came back");
    }
}

/// A process that replays a stream, syncs and is killed with SIGKILL (no destructor runs, the
/// tier file stays marked open) restarts warm and correct. The test runs itself as the child:
/// with `TIERCACHE_KILL_CHILD` set, it is the process that gets killed.
#[test]
fn a_restart_after_kill_9_is_warm_and_correct() {
    use std::io::{BufRead, BufReader, Write};
    let keys = stream();
    if let Ok(spec) = std::env::var("TIERCACHE_KILL_CHILD") {
        let (kind, path) = spec.split_once(' ').unwrap();
        let cache = open(kind, Path::new(path), 1000, 4, Recover::Quiet);
        replay(&cache, &keys);
        let before = replay(&cache, &keys);
        cache.sync().unwrap();
        let mut out = std::io::stdout().lock();
        writeln!(out, "\nbefore {before} resident {}", cache.occupancy().0).unwrap();
        out.flush().unwrap();
        loop {
            std::thread::sleep(std::time::Duration::from_secs(1));
        }
    }
    for kind in ["mapped", "file", "flash", "flash-sets"] {
        let path = scratch(&format!("killed.{kind}"));
        let mut child = std::process::Command::new(std::env::current_exe().unwrap())
            .args(["--exact", "a_restart_after_kill_9_is_warm_and_correct", "--nocapture"])
            .env("TIERCACHE_KILL_CHILD", format!("{kind} {}", path.display()))
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        let said = stdout.lines().map(|l| l.unwrap()).find(|l| l.starts_with("before "));
        child.kill().unwrap();
        child.wait().unwrap();
        let said = said.expect("the child reports its hit ratio");
        let words: Vec<&str> = said.split_whitespace().collect();
        let (before, resident): (f64, u64) = (words[1].parse().unwrap(), words[3].parse().unwrap());
        let cache = open(kind, &path, 1000, 4, Recover::Quiet);
        let recovery = cache.recovery().expect("the tier held blocks");
        assert!(!recovery.clean, "{kind}: a killed cache did not stop cleanly");
        let stats = cache.stats();
        assert_eq!(stats.recovered, resident, "{kind}: every synced block came back");
        assert_eq!((stats.recovery_damaged, stats.recovery_stale), (0, 0), "{kind}");
        // `replay` checks every hit's bytes.
        let after = replay(&cache, &keys);
        assert!(
            (after - before).abs() <= 0.02,
            "{kind}: hit ratio {before:.4} before the kill, {after:.4} after"
        );
    }
}

#[test]
fn a_block_the_cache_let_go_of_never_comes_back() {
    for kind in ["mapped", "file", "flash"] {
        let path = scratch(&format!("dropped.{kind}"));
        let cache = open(kind, &path, 8, 1, Recover::Quiet);
        for key in 0..8 {
            cache.put(key, &value(key, 1, BLOCK)).unwrap();
        }
        cache.invalidate(3);
        // Two more keys: the first takes the invalidated block's room, the second evicts the
        // least recently used (0).
        for key in 8..10 {
            cache.put(key, &value(key, 1, BLOCK)).unwrap();
        }
        cache.put(5, &value(5, 2, BLOCK)).unwrap();
        cache.sync().unwrap();
        drop(cache);
        let cache = open(kind, &path, 8, 1, Recover::Quiet);
        let mut buf = vec![0u8; BLOCK];
        let mut held: Vec<(u64, u64)> = (0..10)
            .filter_map(|key| {
                let len = cache.get(key, &mut buf)?;
                Some((key, version_of(key, &buf[..len])))
            })
            .collect();
        held.sort();
        let expected = [(1, 1), (2, 1), (4, 1), (5, 2), (6, 1), (7, 1), (8, 1), (9, 1)];
        assert_eq!(held, expected, "{kind}");
    }
}

/// Bytes of the tier file at `path`, and a way to write them back.
fn bytes(path: &Path) -> Vec<u8> {
    std::fs::read(path).unwrap()
}

/// Where slot `slot` of a one-shard tier starts in its file.
fn slot_at(slot: usize) -> usize {
    HEADER_BYTES as usize + slot * SLOT
}

/// The slot holding `key`'s block in a tier file, if any.
fn slot_of(file: &[u8], key: u64) -> Option<usize> {
    file[HEADER_BYTES as usize..]
        .chunks_exact(SLOT)
        .position(|slot| tiercache_engine::tier::block::decode(slot, key).is_ok())
}

/// The page of a one-shard tier file holding `key`'s block, by its header (wherever the
/// tier's layout puts headers), and where that page's value starts.
fn page_of(path: &Path, key: u64) -> Option<(u64, u64)> {
    let geometry = tiercache_engine::tier::superblock::read_superblock(path).unwrap()?.geometry;
    let file = bytes(path);
    (0..geometry.slots_per_shard()).find_map(|page| {
        let header = &file[geometry.header_at(0, page) as usize..][..BLOCK_HEADER];
        let holds = header[..4] == *b"TCB2" && header[8..16] == key.to_le_bytes();
        holds.then(|| (page, geometry.slot_at(0, page)))
    })
}

/// A one-shard tier of eight blocks, keys 0..8 at version 1, stopped cleanly.
fn eight_blocks(name: &str) -> PathBuf {
    eight_blocks_on("file", name)
}

fn eight_blocks_on(kind: &str, name: &str) -> PathBuf {
    let path = scratch(name);
    let cache = open(kind, &path, 8, 1, Recover::Quiet);
    for key in 0..8 {
        cache.put(key, &value(key, 1, BLOCK)).unwrap();
    }
    drop(cache);
    path
}

#[test]
fn a_flipped_bit_is_dropped_quietly_refused_strictly_and_wiped() {
    let places = [("data", BLOCK_HEADER as u64 + 100), ("header", 12), ("magic", 1)];
    for (kind, (name, at)) in ["file", "mapped"].into_iter().flat_map(|k| places.map(|p| (k, p))) {
        let path = eight_blocks_on(kind, &format!("flip-{name}.{kind}"));
        let (page, value_at) = page_of(&path, 6).unwrap();
        common::flip_block_bit(&path, 0, page, at, 4);
        let file = bytes(&path);
        let e = try_open(kind, &path, 8, 1, Recover::Strict).err().expect("strict refuses");
        let offset = value_at.to_string();
        assert!(e.contains("flip-") && e.contains(&offset) && e.contains("strict"), "{e}");
        assert!(bytes(&path) == file, "{kind} {name}: a refused start changes nothing");
        let cache = open(kind, &path, 8, 1, Recover::Quiet);
        let stats = cache.stats();
        // A mapped tier whose headers are as its clean stop left them is taken from its
        // headers: a flipped bit in a value is found when the block is first read.
        let at_first_read = kind == "mapped" && name == "data";
        assert_eq!(cache.recovery().unwrap().headers_only, at_first_read as usize);
        let (recovered, damaged) = if at_first_read { (8, 0) } else { (7, 1) };
        assert_eq!(
            (stats.recovered, stats.recovery_damaged),
            (recovered, damaged),
            "{kind} {name}"
        );
        let mut buf = vec![0u8; BLOCK];
        assert_eq!(cache.get(6, &mut buf), None, "{kind} {name}: the damaged block is gone");
        assert_eq!(cache.stats().checksum_failures, at_first_read as u64, "{kind} {name}");
        assert_eq!(cache.get(5, &mut buf), Some(BLOCK));
        drop(cache);
        // The damaged slot was marked free: a strict start now finds nothing wrong.
        let cache = open(kind, &path, 8, 1, Recover::Strict);
        assert_eq!(cache.stats().recovered, 7, "{kind} {name}");
        drop(cache);
        let cache = open(kind, &path, 8, 1, Recover::Wipe);
        assert_eq!(cache.occupancy().0, 0);
    }
}

/// After a clean stop a mapped tier is taken from its headers alone, and a flash tier from its
/// slot records alone, when they are the ones the stop left (their digest in the superblock
/// matches), and every block still reads back checked; after a crash, or when any header
/// changed, every block is read and checked.
#[test]
fn a_clean_restart_reads_only_headers_or_records_unless_they_changed() {
    for kind in ["mapped", "flash"] {
        let path = scratch(&format!("headers-only.{kind}"));
        let cache = open(kind, &path, 64, 4, Recover::Quiet);
        for key in 0..48 {
            cache.put(key, &value(key, 1, BLOCK)).unwrap();
        }
        cache.put(7, &value(7, 2, BLOCK)).unwrap();
        drop(cache);
        let reads_back = |cache: &Cache| {
            let mut buf = vec![0u8; BLOCK];
            for key in 0..48 {
                let len = cache.get(key, &mut buf).unwrap_or_else(|| panic!("{kind}: {key} lost"));
                assert_eq!(version_of(key, &buf[..len]), if key == 7 { 2 } else { 1 });
            }
        };
        let cache = open(kind, &path, 64, 4, Recover::Quiet);
        let recovery = cache.recovery().unwrap().clone();
        assert_eq!((recovery.headers_only, cache.stats().recovered), (1, 48), "{kind}");
        assert!(recovery.stop().contains("first read"), "{}", recovery.stop());
        reads_back(&cache);
        // Not stopped cleanly (a copy of the file as a crash would leave it, the superblock
        // saying open): a start reads everything.
        let crashed = scratch(&format!("headers-only-crashed.{kind}"));
        std::fs::write(&crashed, bytes(&path)).unwrap();
        drop(cache);
        let cache = open(kind, &crashed, 64, 4, Recover::Quiet);
        let recovered = (cache.recovery().unwrap().headers_only, cache.stats().recovered);
        assert_eq!(recovered, (0, 48), "{kind}");
        reads_back(&cache);
        drop(cache);
        // A header changed after the clean stop (a byte of a free slot's): everything is read.
        let geometry =
            tiercache_engine::tier::superblock::read_superblock(&path).unwrap().unwrap().geometry;
        let file = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
        std::os::unix::fs::FileExt::write_all_at(&file, &[1], geometry.header_at(3, 60) + 20)
            .unwrap();
        let cache = open(kind, &path, 64, 4, Recover::Quiet);
        let recovery = cache.recovery().unwrap();
        assert_eq!(recovery.headers_only, 0, "{kind}");
        let noted = recovery.notes.iter().any(|n| n.contains("headers changed"));
        assert!(noted, "{kind}: {:?}", recovery.notes);
        reads_back(&cache);
        // Strict always reads everything (and the headers did not change: no such note).
        drop(cache);
        let cache = open(kind, &path, 64, 4, Recover::Strict);
        let recovery = cache.recovery().unwrap();
        assert_eq!(recovery.headers_only, 0, "{kind}");
        assert!(recovery.notes.iter().all(|n| !n.contains("headers changed")), "{kind}");
        drop(cache);
        // A flipped bit in a value after the clean stop: the headers are unchanged, so it is
        // found at the block's first read, a checksum failure and a miss, never its bytes.
        let (shard, page) = (0..geometry.shards)
            .flat_map(|shard| (0..geometry.slots_per_shard()).map(move |page| (shard, page)))
            .find(|&(shard, page)| {
                let at = geometry.header_at(shard, page) as usize;
                let header = &bytes(&path)[at..at + 16];
                [*b"TCB2", *b"TCR1"].contains(&header[..4].try_into().unwrap())
                    && header[8..16] == 9u64.to_le_bytes()
            })
            .expect("key 9's block");
        let at = geometry.slot_at(shard, page) + 100;
        let flipped = bytes(&path)[at as usize] ^ 0x08;
        std::os::unix::fs::FileExt::write_all_at(&file, &[flipped], at).unwrap();
        let cache = open(kind, &path, 64, 4, Recover::Quiet);
        assert_eq!((cache.recovery().unwrap().headers_only, cache.stats().recovered), (1, 48));
        let mut buf = vec![0u8; BLOCK];
        assert_eq!(cache.get(9, &mut buf), None, "{kind}: the flipped block is not served");
        assert_eq!(cache.stats().checksum_failures, 1, "{kind}");
        assert!(cache.get(8, &mut buf).is_some(), "{kind}");
    }
}

#[test]
fn a_stale_copy_whose_free_mark_was_lost_loses_to_the_newer_one() {
    let path = eight_blocks("stale.img");
    let old = bytes(&path);
    let cache = open("file", &path, 8, 1, Recover::Quiet);
    cache.put(2, &value(2, 2, BLOCK)).unwrap();
    drop(cache);
    // As if the old copy's free mark never reached the medium: its bytes are put back.
    let mut file = bytes(&path);
    let first = slot_at(slot_of(&old, 2).unwrap());
    assert_eq!(file[first..first + 4], FREE, "the old slot was marked free");
    file[first..first + SLOT].copy_from_slice(&old[first..first + SLOT]);
    std::fs::write(&path, &file).unwrap();
    let cache = open("file", &path, 8, 1, Recover::Strict);
    let stats = cache.stats();
    assert_eq!((stats.recovered, stats.recovery_stale), (8, 1));
    let mut buf = vec![0u8; BLOCK];
    assert_eq!(cache.get(2, &mut buf), Some(BLOCK));
    assert_eq!(version_of(2, &buf), 2, "the newer copy wins");
}

#[test]
fn a_misdirected_block_is_damage() {
    let path = scratch("misdirected.img");
    let cache = open("file", &path, 64, 4, Recover::Quiet);
    for key in 0..64 {
        cache.put(key, &value(key, 1, BLOCK)).unwrap();
    }
    let resident = cache.occupancy().0;
    drop(cache);
    // A block copied into a free slot of every other shard's region (a quarter of the slots):
    // in those shards, its key is not theirs.
    let mut file = bytes(&path);
    let per_shard = (file.len() - HEADER_BYTES as usize) / SLOT / 4;
    let region = |shard: usize| (0..per_shard).map(move |s| slot_at(shard * per_shard + s));
    let from = region(0).find(|at| file[*at..*at + 4] == *b"TCB2").expect("shard 0 holds a block");
    let block = file[from..from + SLOT].to_vec();
    for shard in 1..4 {
        let at = region(shard).find(|at| file[*at..*at + 4] != *b"TCB2").expect("a free slot");
        file[at..at + SLOT].copy_from_slice(&block);
    }
    std::fs::write(&path, &file).unwrap();
    let e = try_open("file", &path, 64, 4, Recover::Strict).err().unwrap();
    assert!(e.contains("not this shard's") && e.contains("3 shards have damage"), "{e}");
    let cache = open("file", &path, 64, 4, Recover::Quiet);
    let stats = cache.stats();
    assert_eq!((stats.recovered, stats.recovery_damaged), (resident, 3), "{stats:?}");
}

#[test]
fn a_short_file_is_recovered_quietly_and_refused_strictly() {
    let path = eight_blocks("short.img");
    let file = bytes(&path);
    let keep = slot_at(4);
    std::fs::write(&path, &file[..keep]).unwrap();
    let e = try_open("file", &path, 8, 1, Recover::Strict).err().unwrap();
    assert!(e.contains("short.img") && e.contains("short of"), "{e}");
    let cache = open("file", &path, 8, 1, Recover::Quiet);
    assert_eq!(cache.stats().recovered, 4, "the four whole slots before the cut");
    assert!(cache.warnings().iter().any(|w| w.contains("shorter")), "{:?}", cache.warnings());
}

#[test]
fn another_geometry_is_an_error_naming_both_unless_wiped() {
    let path = eight_blocks("geometry.img");
    let file = bytes(&path);
    for recover in [Recover::Quiet, Recover::Strict] {
        let e = CacheBuilder::new(PolicyConfig::Lru)
            .tier(TierKind::File { path: path.clone() })
            .block_size(8192)
            .shards(1)
            .capacity_bytes(8 * 8192)
            .recover(recover)
            .build()
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("4096-byte blocks") && e.contains("8192-byte blocks"), "{e}");
        let e = try_open("file", &path, 16, 1, recover).err().unwrap();
        assert!(e.contains("geometry.img") && e.contains("wipe"), "{e}");
    }
    assert!(bytes(&path) == file, "refusing changed nothing");
    let cache = open("file", &path, 16, 1, Recover::Wipe);
    assert_eq!(cache.occupancy().0, 0);
}

#[test]
fn blocks_of_another_backing_file_are_refused() {
    let (a, b) = (scratch("backing-a"), scratch("backing-b"));
    std::fs::write(&a, vec![1u8; 16 * BLOCK]).unwrap();
    std::fs::write(&b, vec![2u8; 16 * BLOCK]).unwrap();
    let path = scratch("backed.img");
    let file = CachedFile::open(&a, open("file", &path, 8, 1, Recover::Quiet)).unwrap();
    let mut buf = vec![0u8; BLOCK];
    for block in 0..4 {
        file.read_at(block * BLOCK as u64, &mut buf).unwrap();
    }
    drop(file);
    let e = CachedFile::open(&b, open("file", &path, 8, 1, Recover::Quiet)).err().unwrap();
    let e = e.to_string();
    assert!(e.contains("backed.img") && e.contains("backing-b") && e.contains("inode"), "{e}");
    // Given to the builder, the other file is refused before recovery writes anything to it.
    let (tier_bytes, b_bytes) = (bytes(&path), bytes(&b));
    let builder = CacheBuilder::new(PolicyConfig::Lru)
        .tier(tier("file", &path))
        .block_size(BLOCK)
        .shards(1)
        .capacity_bytes(8 * BLOCK as u64)
        .backing_file(&b, false)
        .unwrap();
    let e = builder.build().err().unwrap().to_string();
    assert!(e.contains("backed.img") && e.contains("backing-b") && e.contains("inode"), "{e}");
    assert!(bytes(&path) == tier_bytes && bytes(&b) == b_bytes, "refusing changed nothing");
    // Over its own file, the cache is warm and serves that file's bytes.
    let file = CachedFile::open(&a, open("file", &path, 8, 1, Recover::Strict)).unwrap();
    assert_eq!(file.cache().stats().recovered, 4);
    file.read_at(0, &mut buf).unwrap();
    assert!(buf.iter().all(|b| *b == 1));
    assert_eq!(file.cache().stats().hits, 1);
    drop(file);
    // Wiped, any file may be put behind it.
    CachedFile::open(&b, open("file", &path, 8, 1, Recover::Wipe)).unwrap();
}

#[test]
fn a_hierarchy_restarts_with_its_lower_tier() {
    let path = scratch("lower.mem");
    let build = || {
        CacheBuilder::new(PolicyConfig::Lru)
            .capacity_bytes(4 * BLOCK as u64)
            .lower_tier(
                TierKind::Mapped { path: path.clone() },
                16 * BLOCK as u64,
                PolicyConfig::Lru,
            )
            .block_size(BLOCK)
            .shards(1)
            .build()
            .unwrap()
    };
    let cache = build();
    for key in 0..20 {
        cache.put(key, &value(key, 1, BLOCK)).unwrap();
    }
    drop(cache);
    let cache = build();
    // DRAM's four blocks (16..20) are gone with the process; the lower tier's sixteen are back.
    assert_eq!(cache.stats().recovered, 16);
    let mut buf = vec![0u8; BLOCK];
    let held: Vec<u64> = (0..20).filter(|k| cache.get(*k, &mut buf).is_some()).collect();
    assert_eq!(held, (0..16).collect::<Vec<_>>());
}

/// The slot whose record names `key` in the bytes of a one-shard flash tier file of 8 blocks
/// (its records on the page after the superblock).
fn record_slot(bytes: &[u8], key: u64) -> usize {
    let records = HEADER_BYTES as usize;
    (0..24)
        .find(|s| {
            let r = &bytes[records + s * 32..records + s * 32 + 32];
            r[..4] == *b"TCR1" && r[8..16] == key.to_le_bytes()
        })
        .expect("a record for the key")
}

/// A flash tier's blocks are headerless: each slot has a 32-byte record (key, length,
/// checksum, sequence) on pages between the superblock and the blocks. A restart recovers from
/// the records, checking every block against its record's checksum: a flipped bit in a block
/// or in a record is damage, dropped by quiet and refused by strict.
#[test]
fn a_flash_tier_recovers_from_its_slot_records_and_drops_what_fails_them() {
    let path = scratch("records.flash");
    let cache = open("flash", &path, 8, 1, Recover::Quiet);
    for key in 0..8 {
        cache.put(key, &value(key, 1, BLOCK)).unwrap();
    }
    cache.sync().unwrap();
    drop(cache);
    let mut bytes = std::fs::read(&path).unwrap();
    let (records, blocks) = (HEADER_BYTES as usize, HEADER_BYTES as usize + 4096);
    let (three, five) = (record_slot(&bytes, 3), record_slot(&bytes, 5));
    bytes[blocks + three * BLOCK + 10] ^= 0x01; // key 3's block
    bytes[records + five * 32 + 17] ^= 0x01; // key 5's record (its length)
    std::fs::write(&path, &bytes).unwrap();
    let message = try_open("flash", &path, 8, 1, Recover::Strict).err().unwrap();
    assert!(message.contains("records.flash") && message.contains("fails its checks"), "{message}");
    let cache = open("flash", &path, 8, 1, Recover::Quiet);
    let stats = cache.stats();
    assert_eq!((stats.recovered, stats.recovery_damaged), (6, 2), "{stats:?}");
    let mut buf = vec![0u8; BLOCK];
    for key in 0..8 {
        match cache.get(key, &mut buf) {
            Some(len) => assert_eq!(version_of(key, &buf[..len]), 1, "key {key}"),
            None => assert!(key == 3 || key == 5, "key {key} was not recovered"),
        }
    }
    assert_eq!(cache.stats().hits, 6);
}

/// Whatever bytes of a tier file rot while the cache is stopped, a restart either refuses the
/// file or serves each block whole and current, or as a miss: never other bytes. Random bit
/// flips anywhere past the superblock of mapped, file and flash tiers stopped cleanly, so that
/// both recoveries run: from the headers alone (flips in values only; each found at its first
/// read) and reading everything (a flip in the headers changes their digest).
#[test]
fn rotten_bytes_after_a_clean_stop_are_refused_or_missed_never_served() {
    for kind in ["mapped", "file", "flash"] {
        let path = scratch(&format!("rot.{kind}"));
        let cache = open(kind, &path, 64, 2, Recover::Quiet);
        for key in 0..48 {
            cache.put(key, &value(key, 1, BLOCK)).unwrap();
        }
        drop(cache);
        let clean = bytes(&path);
        let (mut headers_only, mut missed) = (0, 0);
        for seed in 0..40 {
            let mut rng = tiercache_core::SeededRng::new(seed);
            let mut file = clean.clone();
            for _ in 0..1 + rng.below(3) {
                let at = HEADER_BYTES + rng.below(file.len() as u64 - HEADER_BYTES);
                file[at as usize] ^= 1 << rng.below(8);
            }
            let copy = scratch(&format!("rot-{seed}.{kind}"));
            std::fs::write(&copy, &file).unwrap();
            let Ok(cache) = try_open(kind, &copy, 64, 2, Recover::Quiet) else { continue };
            headers_only += cache.recovery().map_or(0, |r| r.headers_only);
            let mut buf = vec![0u8; BLOCK];
            for key in 0..48 {
                match cache.get(key, &mut buf) {
                    Some(len) => assert_eq!(version_of(key, &buf[..len]), 1, "{kind} {seed}"),
                    None => missed += 1,
                }
            }
            drop(cache);
            std::fs::remove_file(&copy).unwrap();
        }
        // Rot was found, and on mapped and flash tiers both recoveries ran (file tiers keep
        // their headers in the slots, and always read everything).
        assert!(missed > 0, "{kind}: nothing missed");
        assert_eq!(headers_only > 0, kind != "file", "{kind}: {headers_only} headers-only starts");
    }
}

/// After a crash (the tier file still marked open) a flash tier's clean blocks are taken from
/// their slot records without reading their values, which are checked when first read: a block
/// damaged meanwhile comes back, then misses on its first read and is never served. Strict
/// reads every value, and refuses the same file.
#[test]
fn after_a_crash_a_flash_tier_reads_only_dirty_values_and_checks_the_rest_when_read() {
    let path = scratch("crash-records.flash");
    let cache = open("flash", &path, 8, 1, Recover::Quiet);
    for key in 0..8 {
        cache.put(key, &value(key, 1, BLOCK)).unwrap();
    }
    cache.sync().unwrap();
    // A crash image: the file as it is while the cache still has it open.
    let mut image = bytes(&path);
    drop(cache);
    let blocks = HEADER_BYTES as usize + 4096;
    let three = record_slot(&image, 3);
    image[blocks + three * BLOCK + 10] ^= 0x01;
    let copy = scratch("crash-records-image.flash");
    std::fs::write(&copy, &image).unwrap();
    let message = try_open("flash", &copy, 8, 1, Recover::Strict).err().unwrap();
    assert!(message.contains("fails its checks"), "{message}");
    std::fs::write(&copy, &image).unwrap();
    let cache = open("flash", &copy, 8, 1, Recover::Quiet);
    let recovery = cache.recovery().expect("the tier held blocks").clone();
    assert!(!recovery.clean && recovery.headers_only == 0, "{recovery:?}");
    assert_eq!(recovery.clean_unread, 1, "{recovery:?}");
    let stats = cache.stats();
    assert_eq!((stats.recovered, stats.recovery_damaged), (8, 0), "taken from the records");
    let mut buf = vec![0u8; BLOCK];
    for key in 0..8 {
        match cache.get(key, &mut buf) {
            Some(len) => assert_eq!(version_of(key, &buf[..len]), 1, "key {key}"),
            None => assert_eq!(key, 3, "key {key} was not recovered"),
        }
    }
    assert_eq!((cache.stats().hits, cache.stats().checksum_failures), (7, 1));
}

/// What the engine stores to through a mapping is allocated on the file system when a tier
/// file is opened (a mapped tier's whole file, a flash tier's superblock and slot records), so
/// that a full file system is an error at the start and never a SIGBUS later.
#[test]
fn the_parts_stored_to_through_a_mapping_are_allocated_when_opened() {
    use std::os::unix::fs::MetadataExt;
    for kind in ["mapped", "flash"] {
        let path = scratch(&format!("allocated.{kind}"));
        let cache = open(kind, &path, 64, 2, Recover::Quiet);
        let file = std::fs::metadata(&path).unwrap();
        let (allocated, len) = (file.blocks() * 512, file.len());
        // Mapped: the whole file; flash: the superblock and at least a page of records.
        let mapped = if kind == "mapped" { len } else { HEADER_BYTES + 4096 };
        assert!(allocated >= mapped, "{kind}: {allocated} bytes allocated of {mapped} ({len})");
        drop(cache);
    }
}
