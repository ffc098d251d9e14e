//! Media behind the device trait: wrapped tiers and backing files behave, faults never serve a
//! bad block, and a crash image keeps exactly what was synced.

mod common;

use std::io;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use tiercache_core::SeededRng;
use tiercache_engine::device::{CrashImage, Device, Faults, FileDevice, Tear};
use tiercache_engine::{CacheBuilder, CachedFile, TierKind};
use tiercache_policy::PolicyConfig;

const BLOCK: usize = 512;
const KEYS: u64 = 200;

/// A wrapper written outside the engine, as a user's would be: it counts the I/O it passes on.
struct Counting {
    inner: Arc<dyn Device>,
    reads: Arc<AtomicU64>,
    writes: Arc<AtomicU64>,
}

impl Device for Counting {
    fn path(&self) -> &Path {
        self.inner.path()
    }
    fn read_at(&self, buf: &mut [u8], at: u64) -> io::Result<usize> {
        self.reads.fetch_add(1, Ordering::Relaxed);
        self.inner.read_at(buf, at)
    }
    fn write_at(&self, data: &[u8], at: u64) -> io::Result<()> {
        self.writes.fetch_add(1, Ordering::Relaxed);
        self.inner.write_at(data, at)
    }
    fn sync(&self) -> io::Result<()> {
        self.inner.sync()
    }
    fn len(&self) -> io::Result<u64> {
        self.inner.len()
    }
}

/// Random puts and gets of `KEYS` keys; every get must return the latest version put.
fn exercise(cache: &tiercache_engine::Cache, seed: u64, ops: usize) {
    let mut latest = vec![0u64; KEYS as usize];
    let mut rng = SeededRng::new(seed);
    let mut buf = vec![0u8; BLOCK];
    for _ in 0..ops {
        let key = rng.below(KEYS);
        match rng.below(10) {
            0..=3 => {
                latest[key as usize] += 1;
                cache.put(key, &common::value(key, latest[key as usize], BLOCK)).unwrap();
            }
            4..=7 => {
                if let Some(len) = cache.get(key, &mut buf) {
                    assert_eq!(common::version_of(key, &buf[..len]), latest[key as usize]);
                }
            }
            _ => {
                if let Some(held) = cache.get_ref(key) {
                    assert_eq!(common::version_of(key, &held), latest[key as usize]);
                }
            }
        }
    }
}

#[test]
fn wrapped_memory_tiers_are_read_and_written_through_their_device() {
    let mapped = common::scratch("devices", "wrapped-mapped");
    for kind in [TierKind::Dram, TierKind::Mapped { path: mapped }] {
        let (reads, writes) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
        let (r, w) = (reads.clone(), writes.clone());
        let cache = CacheBuilder::new(PolicyConfig::Lru)
            .tier(kind.clone())
            .block_size(BLOCK)
            .shards(2)
            .capacity_bytes(64 * BLOCK as u64)
            .wrap_tier(0, move |inner| Arc::new(Counting { inner, reads: r, writes: w }))
            .build()
            .unwrap();
        exercise(&cache, 1, 5000);
        let stats = cache.stats();
        // Nothing is read in place: no hit skips the lock, no handle pins a slot, and every
        // hit and insert is I/O the wrapper saw.
        assert!(stats.hits > 500, "{kind:?}: {stats:?}");
        assert_eq!(stats.unlocked_hits + stats.pinned_reads, 0, "{kind:?}: {stats:?}");
        // A mapped block's header lies apart from its value: two reads a hit.
        let per_hit = if kind == TierKind::Dram { 1 } else { 2 };
        assert_eq!(reads.load(Ordering::Relaxed), per_hit * stats.hits, "{kind:?}: {stats:?}");
        assert!(writes.load(Ordering::Relaxed) >= stats.inserts, "{kind:?}: {stats:?}");
    }
}

#[test]
fn failing_reads_and_torn_writes_never_serve_a_bad_block() {
    let faults = Faults { write_every: Some(4), read_every: Some(5), tear_sector: Some(64) };
    for (name, behind) in [("faults-file", 0), ("faults-file-behind", 2)] {
        let cache = CacheBuilder::new(PolicyConfig::Lru)
            .tier(TierKind::File { path: common::scratch("devices", name) })
            .block_size(BLOCK)
            .shards(2)
            .capacity_bytes(64 * BLOCK as u64)
            .write_behind(behind)
            .faults(0, faults)
            .build()
            .unwrap();
        exercise(&cache, 2, 5000);
        cache.flush();
        let stats = cache.stats();
        assert!(stats.io_errors > 300 && stats.hits > 300, "{name}: {stats:?}");
        assert_eq!(stats.checksum_failures, 0, "{name}: a torn slot was read: {stats:?}");
    }
    let torn = Faults { tear_sector: Some(0), ..faults };
    let e = CacheBuilder::new(PolicyConfig::Lru)
        .tier(TierKind::File { path: common::scratch("devices", "faults-refused") })
        .faults(0, torn)
        .build()
        .err()
        .expect("a sector of no bytes is refused")
        .to_string();
    assert!(e.contains("fail_writes") && e.contains("sector"), "{e}");
    let e = CacheBuilder::new(PolicyConfig::Lru).wrap_tier(1, |d| d).build().err().unwrap();
    assert!(e.to_string().contains("wrap_tier"), "{e}");
}

/// Opens `path` as a device.
fn file_device(path: &Path) -> Arc<dyn Device> {
    let file = std::fs::OpenOptions::new().read(true).write(true).open(path).unwrap();
    Arc::new(FileDevice::new(file, path))
}

#[test]
fn a_crashed_backing_file_keeps_what_was_synced() {
    let path = common::scratch("devices", "crash-backing");
    std::fs::write(&path, vec![0u8; 64 * BLOCK]).unwrap();
    for tear in [Tear::None, Tear::Keep { sector: 64, sectors: 3 }] {
        let image = Arc::new(CrashImage::new(file_device(&path)));
        let cache = CacheBuilder::new(PolicyConfig::Lru).block_size(BLOCK).build().unwrap();
        let file = CachedFile::over(image.clone(), cache);
        for block in 0..64u64 {
            file.write_at(block * BLOCK as u64, &common::value(block, 1, BLOCK)).unwrap();
        }
        file.sync().unwrap();
        for block in 0..8u64 {
            file.write_at(block * BLOCK as u64, &common::value(block, 2, BLOCK)).unwrap();
        }
        // Extends the file by a block: cut back at the crash (to a torn prefix, if torn).
        file.write_at(64 * BLOCK as u64, &common::value(64, 2, BLOCK)).unwrap();
        let mut buf = vec![0u8; BLOCK];
        file.read_at(0, &mut buf).unwrap();
        assert_eq!(common::version_of(0, &buf), 2, "before the crash, the cache has it");
        assert_eq!(image.crash(tear).unwrap(), 9);
        assert!(file.len().is_err(), "the device is gone");
        drop(file);
        let bytes = std::fs::read(&path).unwrap();
        // The extension was the last write: torn, it keeps its first sectors.
        let kept = match tear {
            Tear::None => 0,
            Tear::Keep { sector, sectors } => sector * sectors,
        };
        assert_eq!(bytes.len(), 64 * BLOCK + kept, "{tear:?}");
        assert_eq!(&bytes[64 * BLOCK..], &common::value(64, 2, BLOCK)[..kept]);
        for block in 0..64u64 {
            let at = block as usize * BLOCK;
            assert_eq!(common::version_of(block, &bytes[at..at + BLOCK]), 1, "{tear:?}");
        }
        // Restore the same start for the next round.
        std::fs::write(&path, vec![0u8; 64 * BLOCK]).unwrap();
    }
}

#[test]
fn a_torn_crash_tears_the_last_write_only() {
    let path = common::scratch("devices", "crash-torn");
    std::fs::write(&path, vec![0u8; 4 * BLOCK]).unwrap();
    let image = Arc::new(CrashImage::new(file_device(&path)));
    let cache = CacheBuilder::new(PolicyConfig::Lru).block_size(BLOCK).build().unwrap();
    let file = CachedFile::over(image.clone(), cache);
    file.write_at(0, &common::value(0, 1, BLOCK)).unwrap();
    file.write_at(BLOCK as u64, &common::value(1, 1, BLOCK)).unwrap();
    image.crash(Tear::Keep { sector: 64, sectors: 3 }).unwrap();
    let bytes = std::fs::read(&path).unwrap();
    assert_eq!(&bytes[..BLOCK], &vec![0u8; BLOCK][..], "the first write is lost whole");
    assert_eq!(&bytes[BLOCK..BLOCK + 192], &common::value(1, 1, BLOCK)[..192], "three sectors");
    assert_eq!(&bytes[BLOCK + 192..], &vec![0u8; 3 * BLOCK - 192][..]);
}

/// A backing file read and written with direct I/O takes any byte range, aligned or not
/// (whole pages go straight to the file; others through an aligned buffer, the pages at either
/// end read first), reads short only past its end, and a cache over it serves what was
/// written. A file of a length not in whole pages, and blocks smaller than a page, are errors
/// naming them.
#[test]
fn a_direct_backing_file_reads_and_writes_any_range() {
    use tiercache_engine::device::DirectFile;
    const LEN: usize = 64 << 10;
    let path = common::scratch("devices", "direct.img");
    let mut reference: Vec<u8> = (0..LEN).map(|i| (i % 251) as u8).collect();
    std::fs::write(&path, &reference).unwrap();
    let device = DirectFile::open(&path).unwrap();
    let mut rng = SeededRng::new(7);
    let mut buf = vec![0u8; 20_000];
    for round in 0..400 {
        let at = rng.below(LEN as u64 + 100);
        let len = 1 + rng.below(20_000) as usize;
        if rng.chance(0.5) {
            let end = (at as usize + len).min(LEN);
            if at as usize >= end {
                continue;
            }
            let data: Vec<u8> = (0..end - at as usize).map(|_| rng.below(256) as u8).collect();
            device.write_at(&data, at).unwrap();
            reference[at as usize..end].copy_from_slice(&data);
        } else {
            let n = device.read_at(&mut buf[..len], at).unwrap();
            let expected = LEN.saturating_sub(at as usize).min(len);
            assert_eq!(n, expected, "round {round}: read {len} at {at}");
            assert!(buf[..n] == reference[at as usize..at as usize + n], "round {round}");
        }
    }
    drop(device);
    assert!(std::fs::read(&path).unwrap() == reference, "the file holds what was written");

    let cache =
        || CacheBuilder::new(PolicyConfig::Lru).block_size(4096).shards(2).capacity_bytes(8 << 10);
    let file = CachedFile::open_direct(&path, cache().build().unwrap()).unwrap();
    file.write_at(5000, b"direct").unwrap();
    let mut back = [0u8; 6];
    file.read_at(5000, &mut back).unwrap();
    assert_eq!(&back, b"direct");
    drop(file);
    assert_eq!(&std::fs::read(&path).unwrap()[5000..5006], b"direct");

    let small = CachedFile::open_direct(&path, cache().block_size(512).build().unwrap());
    let error = small.err().unwrap().to_string();
    assert!(error.contains("block_size") && error.contains("4 KiB"), "{error}");
    let odd = common::scratch("devices", "odd.img");
    std::fs::write(&odd, vec![0u8; 5000]).unwrap();
    let error = DirectFile::open(&odd).err().unwrap().to_string();
    assert!(error.contains("odd.img") && error.contains("5000"), "{error}");
}
