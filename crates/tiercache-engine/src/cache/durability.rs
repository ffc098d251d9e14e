//! What makes a cache's data durable: attaching the backing device, writing dirty blocks
//! back, syncing the tiers, and a clean stop.

use std::sync::Arc;

use tiercache_policy::cas::CacheMode;

use std::io;

use super::CacheCore;
use crate::error::EngineError;
use crate::tier::medium::Medium;
use crate::tier::superblock::Backing;

impl CacheCore {
    /// Gives the cache the device its dirty blocks are written back to, keys being block
    /// numbers (`CachedFile` does this). A cache that keeps dirty blocks decides nothing until
    /// it has one.
    pub fn attach_device(&self, device: Arc<dyn crate::device::Device>) {
        for mut shard in self.each_shard() {
            shard.attach_backing(device.clone());
        }
        self.attached.store(true, std::sync::atomic::Ordering::Release);
    }

    /// Refuses to decide while dirty blocks would have nowhere to go.
    pub(super) fn check_attached(&self) -> Result<(), EngineError> {
        if self.keeps_dirty && !self.attached.load(std::sync::atomic::Ordering::Acquire) {
            return Err(EngineError::config(
                "mode",
                "this cache keeps dirty blocks and writes them back to its backing device: use \
                 it through a CachedFile, which attaches that device",
            ));
        }
        Ok(())
    }

    /// Whether the cache may hold dirty blocks (see [`PutOutcome::absorbed`]).
    pub fn keeps_dirty(&self) -> bool {
        self.keeps_dirty
    }

    /// Dirty blocks now, over all shards.
    pub fn dirty_blocks(&self) -> usize {
        self.each_shard().map(|s| s.dirty_blocks()).sum()
    }

    /// Writes every dirty block back to the backing device and syncs it: afterwards the
    /// backing device alone has every acknowledged write (the blocks stay cached, clean).
    /// An error if a block could not be written back; it stays dirty in the cache.
    pub fn flush_backing(&self) -> Result<(), EngineError> {
        self.flush();
        if !self.keeps_dirty {
            return Ok(());
        }
        self.check_attached()?;
        // No cleaner tick meanwhile: its writes would break the sweep into seeks.
        let _turn = self.cleaner.drain_turn();
        // Every shard locked: no block changes between its copy and its write.
        let mut shards: Vec<_> = self.each_shard().collect();
        drain_in_device_order(&mut shards, self.block_size)?;
        let mut left = 0;
        for shard in &mut shards {
            // What the ordered drain left (a write that failed): one by one, as before.
            shard.write_back_all()?;
            left += shard.dirty_blocks();
        }
        if left > 0 {
            return Err(EngineError::Io {
                path: "<backing device>".into(),
                action: "dirty blocks could not be written back (counted in write_back_errors)",
                source: io::Error::other(format!("{left} blocks stay dirty in the cache")),
            });
        }
        Ok(())
    }

    /// The Open CAS mode the cache's policy runs in (`CacheBuilder::mode`), if any: it decides
    /// what a write places, updates or drops, and whether reads are served from the cache.
    pub fn mode(&self) -> Option<CacheMode> {
        self.mode
    }

    /// Waits until every block written behind so far is on its tier (or failed and was
    /// dropped). Reads never need this (a staged block is served from DRAM); it is for
    /// callers that look at the tier files themselves, and for `CachedFile::sync`.
    pub fn flush(&self) {
        if let Some(behind) = &self.behind {
            self.release_runs();
            behind.wait_idle();
        }
    }

    /// Hands every shard's held-back run (see `Staging::stage`) to the write-behind
    /// threads.
    pub(crate) fn release_runs(&self) {
        for mut shard in self.each_shard() {
            shard.release_run();
        }
    }

    /// Moves what each DRAM tier holds down into the persistent tier below it, as its
    /// evictions would (the policy choosing what that tier gives up for it), then syncs
    /// ([`sync`](Self::sync)): a cache reopened over the same files then starts with what DRAM
    /// held too, as foyer's hybrid cache flushes its memory to disk when it closes. For a clean
    /// stop; the cache serves on meanwhile. A cache that keeps blocks dirty is refused: its
    /// `sync` already makes them durable, by its policy's rules.
    pub fn move_down_and_sync(&self) -> Result<(), EngineError> {
        if self.keeps_dirty {
            return Err(EngineError::config(
                "mode",
                "moving DRAM's blocks down is for caches that keep nothing dirty; sync instead",
            ));
        }
        self.flush();
        for mut shard in self.each_shard() {
            for &(tier, below) in &self.volatile {
                if let Some(below) = below {
                    shard.move_down_all(tier, below)?;
                }
            }
        }
        self.sync()
    }

    /// Makes every block written and dropped so far durable on the persistent tiers (waits for
    /// the blocks written behind, then `msync` or `fdatasync`s each tier): after a crash, the
    /// cache reopens with these blocks, and with none it had dropped. Syncs take turns (a
    /// background checkpoint's included: see `checkpoint`).
    pub fn sync(&self) -> Result<(), EngineError> {
        self.syncs.run(|| self.sync_now())
    }

    fn sync_now(&self) -> Result<(), EngineError> {
        self.flush();
        if self.keeps_dirty && !self.volatile.is_empty() {
            // Dirty blocks of DRAM tiers would not survive: moved down to a persistent tier
            // or written back (and the backing device synced) first.
            self.check_attached()?;
            for mut shard in self.each_shard() {
                for &(tier, below) in &self.volatile {
                    shard.persist(tier, below)?;
                }
            }
        }
        for mut shard in self.each_shard() {
            shard.flush_records()?;
        }
        self.media().iter().try_for_each(Medium::sync)?;
        // What was held until the newer copies were durable can go now.
        for mut shard in self.each_shard() {
            shard.release_limbo();
        }
        Ok(())
    }

    /// Records `backing` (at `path`) as the file whose blocks the cache holds, in every tier
    /// file's superblock. Refused if the cache recovered blocks of another file: serving them
    /// as this one's would return another file's data.
    pub(crate) fn attach_backing(
        &self,
        backing: Backing,
        path: &std::path::Path,
    ) -> Result<(), EngineError> {
        let recovered = self.recovery.as_ref().filter(|_| self.stats().recovered > 0);
        let mut media = self.media();
        let same = |tier: &std::path::Path| Backing::at(tier) == Some(backing);
        if let Some(tier) = media.iter().filter_map(|m| m.path()).find(|t| same(t)) {
            let reason = format!(
                "the backing file {} is this cache's tier file {}: a tier needs a file of its own",
                path.display(),
                tier.display()
            );
            return Err(EngineError::config("tier path", reason));
        }
        if let Some(found) = recovered.map(|r| r.backing).filter(|b| *b != Some(backing)) {
            let tier = media.iter().find_map(|m| m.path()).expect("a tier file was recovered");
            return Err(EngineError::mismatch(tier, found, backing, path));
        }
        media.iter_mut().try_for_each(|m| m.set_backing(Some(backing)))
    }

    /// A clean stop's last step: every tier synced, then marked clean.
    pub(super) fn close_clean(&self) -> Result<(), EngineError> {
        self.flush();
        let written_back =
            match self.keeps_dirty && self.attached.load(std::sync::atomic::Ordering::Acquire) {
                true => self.flush_backing(),
                false => Ok(()),
            };
        for mut shard in self.each_shard() {
            shard.flush_records()?;
        }
        // Blocks left dirty are synced on the tiers, and the superblock says they are dirty.
        let dirty_left = self.keeps_dirty && self.dirty_blocks() > 0;
        self.media().iter_mut().try_for_each(|m| m.close_clean(dirty_left))?;
        written_back
    }
}

/// Writes back every dirty block of `shards` (all locked) in device order: the policies' write-
/// backs gathered from every shard, sorted by key, consecutive whole blocks written as one write
/// (`crate::cleaner::Runs`), then one sync of the backing device. A disk then sees one sweep
/// instead of a random write per block (shards hold keys by hash). A block whose write fails
/// stays dirty, for its shard to write back on its own.
fn drain_in_device_order(
    shards: &mut [super::Locked<'_>],
    block_size: usize,
) -> Result<(), EngineError> {
    let mut keys: Vec<(tiercache_core::Key, usize)> = Vec::new();
    for (i, shard) in shards.iter_mut().enumerate() {
        keys.extend(shard.deferred_write_backs()?.into_iter().map(|key| (key, i)));
    }
    let Some(backing) = shards.first().and_then(|s| s.backing().cloned()) else { return Ok(()) };
    if keys.is_empty() {
        return Ok(());
    }
    keys.sort_unstable();
    keys.dedup();
    let mut runs = crate::cleaner::Runs::new(&*backing, block_size);
    // The blocks written, told to their shards once their run is (a failed one stays dirty:
    // written back one by one after the drain, or counted there).
    let mut written = Vec::new();
    let mut done = |member: crate::cleaner::Member, ok: bool| {
        if ok {
            written.push(member);
        }
    };
    for &(key, s) in &keys {
        let shard = &mut shards[s];
        runs.add(key, s, |out| shard.dirty_block(key, out), &mut done);
    }
    runs.write(&mut done);
    for member in written {
        shards[member.tag].wrote_back(member.key, member.len);
    }
    shards[0].count_written_back(runs.runs, runs.failed, 0);
    if runs.wrote {
        let synced = backing.sync().is_ok();
        for shard in shards.iter_mut() {
            shard.backing_synced();
        }
        shards[0].count_written_back(0, !synced as u64, 1);
    }
    Ok(())
}
