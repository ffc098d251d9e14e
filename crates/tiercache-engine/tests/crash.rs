//! Staged crashes (`docs/DURABILITY.md`, crash testing): a seeded workload of reads, writes and
//! syncs runs through `CachedFile` with its tier and its backing file each behind a
//! `CrashImage`; at every sync point of the first operations, both crash (every write since the
//! last completed sync undone, the tier's last write optionally torn at a sector), the cache
//! reopens over what is left, and every block must read back as the last synced write or a
//! later one: never older (stale), never torn.

mod common;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use tiercache_core::SeededRng;
use tiercache_engine::device::{CrashImage, Device, FileDevice, Tear};
use tiercache_engine::{CacheBuilder, CachedFile, Recover, TierKind};
use tiercache_policy::cas::{AlruConfig, CacheMode, CasConfig, SeqCutoffPolicy};
use tiercache_policy::PolicyConfig;

use common::{value, version_of, Killed};

const BLOCK: usize = 4096;
const BLOCKS: u64 = 48;
/// Operations between syncs.
const EVERY: u64 = 5;
/// Sync points crashed at: after 0, 1, ... of them.
const SYNC_POINTS: u64 = 10;

fn file_device(path: &Path) -> Arc<dyn Device> {
    let file = std::fs::OpenOptions::new().read(true).write(true).open(path).unwrap();
    Arc::new(FileDevice::new(file, path))
}

fn tier(kind: &str, path: &Path) -> TierKind {
    match kind {
        "mapped" => TierKind::Mapped { path: path.to_path_buf() },
        "flash" | "flash-sets" => TierKind::Flash { path: path.to_path_buf() },
        _ => TierKind::File { path: path.to_path_buf() },
    }
}

/// A cache of 16 blocks (so blocks are evicted and written again while not cached) in `mode`.
/// With `cleaner`, the cache holds every block and the ALRU cleaner writes back up to 4 dirty
/// blocks whenever the test ticks (after every operation): blocks written back stay cached and
/// are written again, with no eviction between to sync the backing file. A kind `dram+K` puts
/// a DRAM tier of 4 blocks over the tier of kind K, whose dirty blocks a sync moves down; a
/// kind `dram+K+L` puts DRAM over a tier of kind K of 8 blocks (at `path`) over one of kind L
/// (at `lower_path(path)`), three tiers whose dirty blocks move down through the two below. A
/// kind may end in `@PLACEMENT` (`dram+mapped@scm-first:2`): the tiers' placement, DRAM-first
/// without it.
fn builder(kind: &str, path: &Path, mode: CacheMode, cleaner: bool) -> CacheBuilder {
    let (kind, placement) = match kind.split_once('@') {
        Some((kind, placement)) => (kind, tiercache_policy::Placement::parse(placement).unwrap()),
        None => (kind, tiercache_policy::Placement::DramFirst),
    };
    let mut config = CasConfig { seq_cutoff: SeqCutoffPolicy::Never, ..CasConfig::new(mode) };
    if cleaner {
        config.cleaning = AlruConfig {
            wake_up_us: 0,
            staleness_us: 0,
            flush_max_buffers: 4,
            activity_threshold_us: 0,
        };
    }
    let blocks = if cleaner { BLOCKS } else { 16 } * BLOCK as u64;
    // "flash-sets": a flash tier run by the set-associative policy, whose blocks lie where it
    // places them (`docs/DURABILITY.md`).
    let policy = |kind: &str| match kind {
        "flash-sets" => PolicyConfig::parse("setassoc:ways=4").unwrap(),
        _ => PolicyConfig::Lru,
    };
    let parts: Vec<&str> = kind.split('+').collect();
    let cache = match kind.strip_prefix("dram+") {
        Some(_) if parts.len() == 3 => CacheBuilder::new(PolicyConfig::Lru)
            .tier(TierKind::Dram)
            .capacity_bytes(4 * BLOCK as u64)
            .lower_tier(tier(parts[1], path), 8 * BLOCK as u64, policy(parts[1]))
            .add_tier(tier(parts[2], &lower_path(path)), blocks, policy(parts[2])),
        Some(lower) => CacheBuilder::new(PolicyConfig::Lru)
            .tier(TierKind::Dram)
            .capacity_bytes(4 * BLOCK as u64)
            .lower_tier(tier(lower, path), blocks, policy(lower)),
        None => CacheBuilder::new(policy(kind)).tier(tier(kind, path)).capacity_bytes(blocks),
    };
    let cache = cache.block_size(BLOCK).shards(2).placement(placement);
    cache.mode(config).without_worker()
}

/// The tiers of a cache of `kind` (see `builder`) that keep its blocks: those under DRAM.
fn persistent_tiers(kind: &str) -> Vec<usize> {
    let tiers = kind.split('@').next().expect("a kind");
    match tiers.split('+').count() {
        1 => vec![0],
        n => (1..n).collect(),
    }
}

/// Where the third tier of a `dram+K+L` cache keeps its file.
fn lower_path(path: &Path) -> PathBuf {
    path.with_extension("lower")
}

/// A run's backing file (every block at version `INITIAL`) and tier file, new to this run.
fn files(name: &str) -> (PathBuf, PathBuf) {
    let (backing, tier) =
        (common::scratch("crash", name), common::scratch("crash", &format!("{name}.tier")));
    let initial: Vec<u8> = (0..BLOCKS).flat_map(|b| value(b, INITIAL, BLOCK)).collect();
    std::fs::write(&backing, &initial).unwrap();
    (backing, tier)
}

/// Removes a run's files once it passed (a run that fails keeps them, to look at): the kill
/// tests make a thousand runs.
fn remove_files(backing: &Path, cache_path: &Path) {
    for path in [backing, cache_path, &lower_path(cache_path)] {
        let _ = std::fs::remove_file(path);
    }
}

/// A cache built by `builder` with each of its `tiers` behind a crash image, over `backing`
/// behind one.
fn over_crash_images(
    mut builder: CacheBuilder,
    tiers: &[usize],
    backing: &Path,
) -> (CachedFile, Vec<Arc<CrashImage>>, Arc<CrashImage>) {
    let images: Arc<Mutex<Vec<Arc<CrashImage>>>> = Arc::default();
    for &tier in tiers {
        let all = images.clone();
        builder = builder.wrap_tier(tier, move |device| {
            let image = Arc::new(CrashImage::new(device));
            all.lock().unwrap().push(image.clone());
            image
        });
    }
    let backing_image = Arc::new(CrashImage::new(file_device(backing)));
    let cache = builder.backing_device(backing_image.clone()).build().unwrap();
    let tier_images = std::mem::take(&mut *images.lock().unwrap());
    assert_eq!(tier_images.len(), tiers.len(), "every tier was wrapped");
    (CachedFile::over(backing_image.clone(), cache), tier_images, backing_image)
}

/// The version every block of the backing file starts at (not 0: block 0's version 0 is all
/// zeros, as a discarded block reads), above any the workloads write.
const INITIAL: u64 = 1 << 40;
/// The version the model gives a discarded block, which reads as zeros.
const DISCARDED: u64 = u64::MAX;

/// The version `bytes` hold, or [`DISCARDED`] for zeros.
fn version_or_discarded(block: u64, bytes: &[u8]) -> u64 {
    match bytes.iter().all(|&b| b == 0) {
        true => DISCARDED,
        false => version_of(block, bytes),
    }
}

/// Per block: its version now, at the last completed sync, and those written since.
struct Model {
    now: Vec<u64>,
    durable: Vec<u64>,
    since: Vec<Vec<u64>>,
}

impl Model {
    fn new() -> Model {
        let blocks = BLOCKS as usize;
        let initial = vec![INITIAL; blocks];
        Model { now: initial.clone(), durable: initial, since: vec![Vec::new(); blocks] }
    }

    fn written(&mut self, block: u64, version: u64) {
        self.now[block as usize] = version;
        self.since[block as usize].push(version);
    }

    /// A sync completed: what was written is durable.
    fn synced(&mut self) {
        self.durable.clone_from(&self.now);
        self.since.iter_mut().for_each(Vec::clear);
    }

    /// Every block must read as its last synced version or one written since, whole.
    fn check(&self, name: &str, file: &CachedFile) {
        let mut buf = vec![0u8; BLOCK];
        for block in 0..BLOCKS {
            let len = file.read_at(block * BLOCK as u64, &mut buf);
            assert_eq!(
                len.unwrap_or_else(|e| panic!(
                    "{name}: block {block}: {e} {:?}",
                    file.cache().stats()
                )),
                BLOCK
            );
            let read = version_or_discarded(block, &buf);
            let (last_synced, later) = (self.durable[block as usize], &self.since[block as usize]);
            assert!(
                read == last_synced || later.contains(&read),
                "{name}: block {block} reads version {read}; synced {last_synced}, written since {later:?}"
            );
        }
    }
}

/// Runs the workload until `syncs` syncs have completed and three more operations ran, crashes,
/// reopens and checks every block. With `discards`, one operation in eight discards one to
/// three blocks (a TRIM), which then read as zeros. Returns the blocks read back from the
/// cache.
fn crash_after(
    kind: &str,
    (mode, cleaner, discards): (CacheMode, bool, bool),
    syncs: u64,
    tear: Tear,
    seed: u64,
) -> u64 {
    let name = format!(
        "{kind}-{mode:?}-{cleaner}-{discards}-{syncs}-{seed}-{}",
        matches!(tear, Tear::None)
    );
    let (backing, cache_path) = files(&name);
    let (file, tier_images, backing_image) = over_crash_images(
        builder(kind, &cache_path, mode, cleaner),
        &persistent_tiers(kind),
        &backing,
    );
    let mut model = Model::new();
    let mut rng = SeededRng::new(seed);
    let mut buf = vec![0u8; BLOCK];
    let (mut done, mut synced, mut version) = (0u64, 0u64, 0u64);
    while synced < syncs || done % EVERY != 3 {
        // Skewed: a third of the operations go to the first eight blocks.
        let block = if rng.chance(0.33) { rng.below(8) } else { rng.below(BLOCKS) };
        let at = block * BLOCK as u64;
        if discards && rng.chance(0.125) {
            let count = (1 + rng.below(3)).min(BLOCKS - block);
            file.discard(at, count * BLOCK as u64).unwrap();
            (block..block + count).for_each(|b| model.written(b, DISCARDED));
        } else if rng.chance(0.5) {
            version += 1;
            file.write_at(at, &value(block, version, BLOCK)).unwrap();
            model.written(block, version);
        } else {
            assert_eq!(file.read_at(at, &mut buf).unwrap(), BLOCK);
            assert_eq!(
                version_or_discarded(block, &buf),
                model.now[block as usize],
                "block {block} before the crash"
            );
        }
        done += 1;
        if cleaner {
            file.cache().tick();
        }
        if done % EVERY == 0 && synced < syncs {
            file.sync().unwrap();
            synced += 1;
            model.synced();
        }
    }
    for image in &tier_images {
        image.crash(tear).unwrap();
    }
    backing_image.crash(Tear::None).unwrap();
    // The tiers' devices share the locked tier files: all of it goes before the reopen.
    drop((file, tier_images, backing_image));
    // Recovery runs with the backing file attached (`CacheBuilder::backing_device`), as the
    // fronts open it, so a block it cannot keep is written back.
    let device = file_device(&backing);
    let cache = builder(kind, &cache_path, mode, cleaner).recover(Recover::Quiet);
    let file = CachedFile::over(device.clone(), cache.backing_device(device).build().unwrap());
    model.check(&name, &file);
    let recovered = file.cache().stats().recovered;
    drop(file);
    remove_files(&backing, &cache_path);
    recovered
}

#[test]
fn every_sync_point_survives_a_crash_with_nothing_stale() {
    let tears = [Tear::None, Tear::Keep { sector: 512, sectors: 1 }];
    let mut recovered = 0;
    for kind in ["file", "mapped", "flash", "flash-sets"] {
        for (mode, cleaner) in [
            (CacheMode::WriteThrough, false),
            (CacheMode::WriteInvalidate, false),
            (CacheMode::WriteBack, false),
            (CacheMode::WriteBack, true),
            (CacheMode::WriteOnly, false),
        ] {
            for syncs in 0..=SYNC_POINTS {
                for (i, tear) in tears.into_iter().enumerate() {
                    let seed = 1000 + syncs * 2 + i as u64;
                    recovered += crash_after(kind, (mode, cleaner, false), syncs, tear, seed);
                }
            }
        }
    }
    // The check is only worth something if restarts found blocks to serve.
    assert!(recovered > 200, "{recovered} blocks recovered over all the crashes");
}

/// Write-back under a DRAM tier: each sync moves DRAM's dirty blocks down into the tier below
/// (`Policy::persist`), and a crash at any sync point finds them there, never the backing
/// file's older bytes. With SCM-first and bidirectional placement too, whose hits move blocks
/// up into DRAM (a write that promoted its block once lost its data there).
#[test]
fn write_back_under_dram_survives_a_crash_at_every_sync_point() {
    let tears = [Tear::None, Tear::Keep { sector: 512, sectors: 1 }];
    let mut recovered = 0;
    let kinds = [
        "dram+file",
        "dram+mapped",
        "dram+flash",
        "dram+flash-sets",
        "dram+mapped@scm-first:2",
        "dram+file@bidirectional:2",
    ];
    for kind in kinds {
        for cleaner in [false, true] {
            for syncs in 0..=SYNC_POINTS {
                for (i, tear) in tears.into_iter().enumerate() {
                    let seed = 3000 + syncs * 2 + i as u64;
                    let run = (CacheMode::WriteBack, cleaner, false);
                    recovered += crash_after(kind, run, syncs, tear, seed);
                }
            }
        }
    }
    assert!(recovered > 100, "{recovered} blocks recovered over all the crashes");
}

/// Write-back over three tiers: DRAM over a mapped or file tier over a flash tier, DRAM-first,
/// SCM-first and bidirectional, the bottom tier fully associative or set-associative. A sync
/// moves DRAM's dirty blocks down, the middle tier's victims move down to the bottom one still
/// dirty (and up again, with the placements that promote), and a crash of both tier files at
/// any sync point finds every synced write.
#[test]
fn write_back_over_three_tiers_survives_a_crash_at_every_sync_point() {
    let tears = [Tear::None, Tear::Keep { sector: 512, sectors: 1 }];
    let mut recovered = 0;
    let kinds = [
        "dram+mapped+flash",
        "dram+file+flash",
        "dram+mapped+flash@scm-first:2",
        "dram+file+flash@bidirectional:2",
    ];
    for kind in kinds {
        for cleaner in [false, true] {
            for syncs in 0..=SYNC_POINTS {
                for (i, tear) in tears.into_iter().enumerate() {
                    let seed = 7000 + syncs * 2 + i as u64;
                    let run = (CacheMode::WriteBack, cleaner, false);
                    recovered += crash_after(kind, run, syncs, tear, seed);
                }
            }
        }
    }
    assert!(recovered > 100, "{recovered} blocks recovered over all the crashes");
}

/// Discards (TRIM) among the writes: a crash at any sync point finds each discarded block as
/// its last synced version, zeros, or a later write; never the backing file's older bytes in
/// place of a dirty block the discard dropped.
#[test]
fn discards_survive_a_crash_at_every_sync_point() {
    let tears = [Tear::None, Tear::Keep { sector: 512, sectors: 1 }];
    let mut recovered = 0;
    for kind in ["file", "mapped", "flash", "flash-sets"] {
        for (mode, cleaner) in [
            (CacheMode::WriteThrough, false),
            (CacheMode::WriteBack, false),
            (CacheMode::WriteBack, true),
        ] {
            for syncs in 0..=SYNC_POINTS {
                for (i, tear) in tears.into_iter().enumerate() {
                    let seed = 5000 + syncs * 2 + i as u64;
                    recovered += crash_after(kind, (mode, cleaner, true), syncs, tear, seed);
                }
            }
        }
    }
    assert!(recovered > 100, "{recovered} blocks recovered over all the crashes");
}

/// The cleaner writes a synced dirty block back (the backing file not synced yet), and the
/// block is written again in place; a crash tears that write. The block must read as its
/// synced version: the torn copy fails its checksum, so the backing file's copy must be
/// durable before a clean block is overwritten in place.
#[test]
fn a_block_written_back_then_overwritten_survives_a_torn_crash() {
    for kind in ["mapped", "file"] {
        let name = format!("cleaned-{kind}");
        let (backing, cache_path) = files(&name);
        let (file, mut tier_images, backing_image) = over_crash_images(
            builder(kind, &cache_path, CacheMode::WriteBack, true),
            &[0],
            &backing,
        );
        let tier_image = tier_images.pop().expect("one tier");
        file.write_at(BLOCK as u64, &value(1, 1, BLOCK)).unwrap();
        file.sync().unwrap();
        file.cache().tick();
        assert_eq!(file.cache().stats().write_backs, 1, "{kind}: the cleaner wrote back");
        file.write_at(BLOCK as u64, &value(1, 2, BLOCK)).unwrap();
        tier_image.crash(Tear::Keep { sector: 512, sectors: 1 }).unwrap();
        backing_image.crash(Tear::None).unwrap();
        drop((file, tier_image, backing_image));
        let cache = builder(kind, &cache_path, CacheMode::WriteBack, true).build().unwrap();
        let file = CachedFile::over(file_device(&backing), cache);
        let mut buf = vec![0u8; BLOCK];
        file.read_at(BLOCK as u64, &mut buf).unwrap();
        let read = version_of(1, &buf);
        assert!(read >= 1, "{kind}: block 1 reads version {read}, synced 1");
    }
}

/// Runs the seeded workload of `crash_after` until the process is "killed" at its
/// `budget`-th device write, reopens and checks every block. Returns whether the kill landed
/// (the workload had that many writes).
fn killed_after(kind: &str, cleaner: bool, budget: i64, tear: bool) -> bool {
    killed_draining(kind, cleaner, budget, tear, false)
}

/// As [`killed_after`]; with `drain`, the workload ends with `flush_backing` (every dirty block
/// written back in device order, across shards), so the kill also lands inside the drain.
fn killed_draining(kind: &str, cleaner: bool, budget: i64, tear: bool, drain: bool) -> bool {
    killed_in(kind, (cleaner, drain), budget, tear, (budget as u64, EVERY))
}

/// As [`killed_draining`], the workload's seed and the writes between its syncs given.
fn killed_in(
    kind: &str,
    (cleaner, drain): (bool, bool),
    budget: i64,
    tear: bool,
    (seed, every): (u64, u64),
) -> bool {
    let name = format!("killed-{kind}-{cleaner}-{budget}-{tear}-{drain}-{seed}-{every}");
    let (backing, cache_path) = files(&name);
    let left = Arc::new(std::sync::atomic::AtomicI64::new(budget));
    let shared = left.clone();
    let mut cache = builder(kind, &cache_path, CacheMode::WriteBack, cleaner);
    for tier in persistent_tiers(kind) {
        let budget = shared.clone();
        cache = cache.wrap_tier(tier, move |inner| Arc::new(Killed { inner, budget, tear }));
    }
    let killed = Arc::new(Killed { inner: file_device(&backing), budget: left.clone(), tear });
    let cache = cache.backing_device(killed.clone()).build().unwrap();
    let file = CachedFile::over(killed, cache);
    let mut model = Model::new();
    let mut rng = SeededRng::new(seed);
    let mut buf = vec![0u8; BLOCK];
    let mut version = 0;
    for done in 1..=120u64 {
        let block = if rng.chance(0.33) { rng.below(8) } else { rng.below(BLOCKS) };
        if rng.chance(0.5) {
            version += 1;
            file.write_at(block * BLOCK as u64, &value(block, version, BLOCK)).unwrap();
            model.written(block, version);
        } else {
            file.read_at(block * BLOCK as u64, &mut buf).unwrap();
        }
        if cleaner {
            file.cache().tick();
        }
        if Killed::dead(&left) {
            break;
        }
        if done % every == 0 {
            file.sync().unwrap();
            if Killed::dead(&left) {
                break; // The sync did not finish before the kill.
            }
            model.synced();
        }
    }
    if drain && !Killed::dead(&left) {
        let drained = file.flush_backing();
        if !Killed::dead(&left) {
            drained.unwrap();
            model.synced();
        }
    }
    let landed = Killed::dead(&left);
    if !landed && kind.contains("mapped") {
        // The workload ran out of writes before the kill: the clean stop runs whole. (Killed
        // stops device writes, not a mapped tier's stores to memory; a kill inside the stop
        // would let its clean marks land after writes that never did, which no killed process
        // does.)
        left.store(i64::MAX, std::sync::atomic::Ordering::SeqCst);
    }
    // Dropping writes nothing more: the process is dead.
    drop(file);
    let device = file_device(&backing);
    let cache = builder(kind, &cache_path, CacheMode::WriteBack, cleaner);
    let file = CachedFile::over(device.clone(), cache.backing_device(device).build().unwrap());
    model.check(&name, &file);
    drop(file);
    remove_files(&backing, &cache_path);
    landed
}

/// Kill -9 at every write: a process writing through a write-back cache is killed after each
/// of its device writes in turn (the tier's and the backing file's, the last one whole or
/// torn), on file and mapped tiers, with and without the cleaner. Every block must then read
/// as its last synced version or a later one. A dirty block's old copy freed before its new
/// copy is written fails it.
#[test]
fn a_kill_at_every_write_loses_no_synced_write() {
    let mut kills = 0;
    for kind in ["file", "mapped", "flash", "flash-sets"] {
        // Flash (direct I/O and a record page beside every block) without the cleaner only,
        // to keep the test short.
        for cleaner in [false, true].into_iter().filter(|c| !c || !kind.starts_with("flash")) {
            for tear in [false, true] {
                for budget in 1.. {
                    if !killed_after(kind, cleaner, budget, tear) {
                        break;
                    }
                    kills += 1;
                }
            }
        }
    }
    assert!(kills > 400, "{kills} kills");
}

/// Write-back over two persistent tiers where a crash could leave a tier too full to take back
/// its dirty blocks (see `CacheBuilder::check_dirty_moves`): a placement that moves blocks up
/// needs the backing device given to the builder, attached before recovery, and without it
/// the build is refused; a set-associative tier below another persistent tier is refused with
/// it too. Each error names the setting and the way out.
#[test]
fn three_tier_write_back_refuses_what_a_crash_could_lose() {
    let path = common::scratch("crash", "refused.tier");
    let refused = |kind: &str| match builder(kind, &path, CacheMode::WriteBack, false).build() {
        Ok(_) => panic!("{kind}: built"),
        Err(e) => e.to_string(),
    };
    let e = refused("dram+mapped+flash@scm-first:2");
    assert!(e.contains("placement") && e.contains("backing_file"), "{e}");
    let e = refused("dram+mapped+flash-sets");
    assert!(e.contains("policy") && e.contains("set-associative"), "{e}");
    let (backing, _) = files("refused-backing");
    let with_backing = |kind: &str, name: &str| {
        let path = common::scratch("crash", name);
        let builder = builder(kind, &path, CacheMode::WriteBack, false);
        builder.backing_device(file_device(&backing)).build()
    };
    let built = with_backing("dram+mapped+flash@scm-first:2", "given-0.tier");
    assert!(built.is_ok(), "SCM-first with its backing device: {:?}", built.err());
    let e = with_backing("dram+mapped+flash-sets", "given-1.tier").err().expect("refused");
    assert!(e.to_string().contains("set-associative"), "{e}");
    // Write-through keeps nothing dirty: any placement, any tier.
    for (i, kind) in ["dram+mapped+flash@scm-first:2", "dram+mapped+flash-sets"].iter().enumerate()
    {
        let path = common::scratch("crash", &format!("refused-{i}.tier"));
        let built = builder(kind, &path, CacheMode::WriteThrough, false).build();
        assert!(built.is_ok(), "{kind}: {:?}", built.err());
    }
}

/// Kill -9 at every write of a write-back cache over three tiers (DRAM, mapped, flash;
/// DRAM-first and SCM-first, the flash tier fully or set-associative): the kill lands at one
/// point of the writes to both tier files and the backing file together, and every block then
/// reads as its last synced version or a later one.
#[test]
fn a_kill_at_every_write_over_three_tiers_loses_no_synced_write() {
    let mut kills = 0;
    let kinds =
        ["dram+mapped+flash", "dram+mapped+flash@scm-first:2", "dram+file+flash@bidirectional:2"];
    for kind in kinds {
        for tear in [false, true] {
            for budget in 1.. {
                if !killed_after(kind, false, budget, tear) {
                    break;
                }
                kills += 1;
            }
        }
    }
    assert!(kills > 300, "{kills} kills");
}

/// Kill -9 at every write of one workload over three tiers whose syncs are far apart, so that
/// dirty blocks move from the mapped tier down to the flash tier many times between them, and
/// the mapped tier runs out of slots that are not held for a sync. A held slot keeps the last
/// durable copy of a block until its new copy on the flash tier is durable: freeing it when
/// the mapped tier alone synced, before the flash tier's record of the new copy was written,
/// lost the block (found by `tiercache crashtest --tier dram+mapped+flash --seed 11`).
#[test]
fn a_kill_at_every_write_between_distant_syncs_over_three_tiers_loses_nothing() {
    let mut kills = 0;
    for seed in [1, 2] {
        for budget in 1.. {
            if !killed_in("dram+mapped+flash", (false, false), budget, false, (seed, 60)) {
                break;
            }
            kills += 1;
        }
    }
    assert!(kills > 100, "{kills} kills");
}

/// Kill -9 at every write of a write-back cache's ordered drain (`flush_backing`: the dirty
/// blocks of every shard sorted by key and written back as runs, then one sync) and of the
/// writes before it: every block reads as its last synced version or a later one, and once the
/// drain returns, as its last write.
#[test]
fn a_kill_at_every_write_of_an_ordered_drain_loses_nothing() {
    let mut kills = 0;
    for kind in ["mapped", "flash", "dram+mapped+flash"] {
        for tear in [false, true] {
            for budget in 1.. {
                if !killed_draining(kind, false, budget, tear, true) {
                    break;
                }
                kills += 1;
            }
        }
    }
    assert!(kills > 300, "{kills} kills");
}
