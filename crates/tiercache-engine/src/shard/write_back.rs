//! Write-back: dirty blocks written to the backing device, one by one or as runs of
//! consecutive keys, the backing device synced before any slot whose block was written back is
//! freed, and dirty data that could not be read back recorded as lost.

use tiercache_core::{Decision, Key, TierId};
use tiercache_policy::{AnyPolicy, Policy};

use super::places::sets;
use super::Shard;
use crate::error::EngineError;
use crate::io::ReadFault;
use crate::tier::Place;

impl Shard {
    /// Syncs the backing device if a block was written back since it last synced. A failed
    /// sync is counted; the slot is freed all the same (the data reached the device's cache,
    /// and holding slots forever would stop the cache).
    pub fn sync_backing(&mut self) {
        if !self.backing_unsynced {
            return;
        }
        let Some(backing) = &self.backing else { return };
        self.stats.backing_syncs += 1;
        if backing.sync().is_err() {
            self.stats.write_back_errors += 1;
        }
        self.backing_unsynced = false;
    }

    /// Writes `key`'s block back to the backing device if it is dirty; it stays resident,
    /// clean. False if its data is lost: the block did not read back (failed checksum, I/O
    /// error), so the caller drops it. A failed write to the backing device keeps the block
    /// dirty, to be tried again before it is dropped. Without a backing device attached yet,
    /// the block stays dirty.
    pub(super) fn write_back(&mut self, key: Key) -> bool {
        self.settle_flight(key);
        let Some(place) = self.place(key) else { return true };
        if !place.dirty || place.filling {
            return true;
        }
        let Some(backing) = self.backing.clone() else { return true };
        match self.copy_to_backing(key, place, &*backing) {
            Ok(len) => {
                self.set_place(key, Place { dirty: false, ..place });
                self.stats.write_backs += 1;
                self.stats.bytes_written_back += len as u64;
            }
            Err(None) => self.stats.write_back_errors += 1,
            Err(Some(fault)) => {
                self.count_fault(&fault);
                self.lose(key);
                return false;
            }
        }
        true
    }

    /// Reads `key`'s block at `place` and writes it to `backing` at the key's offset, leaving
    /// the block as it is (dirty or not): its length, or why not (`Some` the read's fault,
    /// `None` a failed write). The backing device then needs a sync (`sync_backing`).
    pub(super) fn copy_to_backing(
        &mut self,
        key: Key,
        place: Place,
        backing: &dyn crate::device::Device,
    ) -> Result<usize, Option<ReadFault>> {
        let mut scratch = std::mem::take(&mut self.scratch);
        scratch.resize(self.tiers[place.tier as usize].region.value_bytes(), 0);
        let copied = match self.read_block(key, place, &mut scratch) {
            Ok(len) => match backing.write_at(&scratch[..len], key * self.block_size as u64) {
                Ok(()) => Ok(len),
                Err(_) => Err(None),
            },
            Err(fault) => Err(Some(fault)),
        };
        self.scratch = scratch;
        if copied.is_ok() {
            self.backing_unsynced = true;
        }
        copied
    }

    /// Copies `key`'s block at `place` into `out`: from its staged copy while its write is
    /// behind, else read and checked from its tier. Returns the value's length.
    pub(super) fn read_block(
        &mut self,
        key: Key,
        place: Place,
        out: &mut [u8],
    ) -> Result<usize, ReadFault> {
        match self.staging.get(&key).filter(|_| place.staged) {
            Some(staged) => Ok(crate::block::copy_value(staged.value(), out)),
            None => self.tiers[place.tier as usize].region.read(place.slot, key, out),
        }
    }

    /// Writes back the dirty blocks `first..first + count` as one write to the backing
    /// device. False, having written nothing, unless every one is resident, dirty, whole,
    /// and reads back: the caller then writes them back one by one.
    pub(super) fn write_back_run(&mut self, first: Key, count: u64) -> bool {
        let Some(backing) = self.backing.clone() else { return false };
        let bs = self.block_size as usize;
        let mut run = vec![0u8; bs * count as usize];
        let mut places = Vec::with_capacity(count as usize);
        (first..first + count).for_each(|key| self.settle_flight(key));
        for (key, chunk) in (first..first + count).zip(run.chunks_mut(bs)) {
            let Some(place) = self.place(key) else { return false };
            if !place.dirty || place.filling {
                return false;
            }
            if !matches!(self.read_block(key, place, chunk), Ok(n) if n == bs) {
                return false;
            }
            places.push((key, place));
        }
        if backing.write_at(&run, first * bs as u64).is_err() {
            return false;
        }
        for (key, place) in places {
            self.set_place(key, Place { dirty: false, ..place });
        }
        self.backing_unsynced = true;
        self.stats.write_backs += count;
        self.stats.bytes_written_back += run.len() as u64;
        self.stats.write_back_runs += 1;
        true
    }

    /// Whether `key`'s dirty data was lost (see `lost`); nearly always none is, and then
    /// nothing is looked up.
    #[inline]
    pub fn is_lost(&self, key: Key) -> bool {
        !self.lost.is_empty() && self.lost.contains(&key)
    }

    /// Records that `key`'s dirty data is lost (its block is about to be dropped): reads of it
    /// fail until it is written again.
    pub(super) fn lose(&mut self, key: Key) {
        if let Some(place) = self.place(key).filter(|p| p.dirty) {
            self.set_place(key, Place { dirty: false, ..place });
            self.stats.dirty_lost += 1;
            self.lost.insert(key);
        }
    }

    /// Writes back every dirty block, then syncs the backing device: what a clean stop and
    /// `flush_backing` ask. Blocks the policy no longer counts dirty but the shard does (a
    /// write-back that failed) are written back too.
    pub fn write_back_all(&mut self) -> Result<(), EngineError> {
        self.clean_up(None, |policy, out| policy.write_back(None, out))
    }

    /// Makes the dirty blocks of the volatile `tier` durable, as the policy says: moved down
    /// into `below` (the nearest persistent tier under it), still dirty, or written back. What
    /// a sync asks of volatile tiers; the caller then syncs the tiers. Blocks of `tier` still
    /// dirty afterwards are written back.
    pub fn persist(&mut self, tier: TierId, below: Option<TierId>) -> Result<(), EngineError> {
        let now_us = self.now_us;
        self.clean_up(Some(tier), |policy, out| policy.persist(tier, below, now_us, out))
    }

    /// Applies what `decide` puts in a decision of its own, then writes back the blocks of
    /// `tier` (or all) still dirty, and syncs the backing device.
    pub(super) fn clean_up(
        &mut self,
        tier: Option<TierId>,
        decide: impl FnOnce(&mut AnyPolicy, &mut Decision),
    ) -> Result<(), EngineError> {
        let saved = std::mem::take(&mut self.decision);
        decide(&mut self.policy, &mut self.decision);
        let result = self.apply(u64::MAX, None);
        self.decision = saved;
        result?;
        let stragglers = self.dirty_keys(tier);
        for key in stragglers {
            if !self.write_back(key) {
                self.drop_key(key);
            }
        }
        self.sync_backing();
        Ok(())
    }

    /// Dirty blocks now, and whether any failed to be written back.
    pub fn dirty_blocks(&self) -> usize {
        self.dirty_keys(None).len()
    }

    /// The keys of the dirty blocks on `tier` (or all tiers).
    pub(super) fn dirty_keys(&self, tier: Option<TierId>) -> Vec<Key> {
        let on = |t: u8| tier.is_none_or(|tier| tier.0 == t);
        let mut keys: Vec<Key> =
            self.places.iter().filter(|(_, p)| p.dirty && on(p.tier)).map(|(k, _)| *k).collect();
        for (t, placed) in self.placed_tiers() {
            if !on(t as u8) {
                continue;
            }
            let sets = sets(&self.policy, t);
            // Blocks in passing (staged, filling) are in the place map, counted there.
            let at_rest = placed.dirty.ones().filter_map(|slot| sets.key_at(slot));
            keys.extend(at_rest.filter(|k| !self.places.contains_key(k)));
        }
        keys
    }

    /// The policy's write-back of every dirty block, as [`write_back_all`](Self::write_back_all)
    /// asks it, with the writes left to the caller: the keys come back (with the shard's other
    /// dirty blocks, some maybe twice) for the cache to write with the other shards' in device
    /// order (`flush_backing`). The
    /// decision's other actions are applied. The blocks stay dirty here until the caller says
    /// each was written ([`wrote_back`](Self::wrote_back)); one it never does is written back
    /// on its own by the next `write_back_all`.
    pub fn deferred_write_backs(&mut self) -> Result<Vec<Key>, EngineError> {
        self.deferred = Some(Vec::new());
        let saved = std::mem::take(&mut self.decision);
        self.policy.write_back(None, &mut self.decision);
        let result = self.apply(u64::MAX, None);
        self.decision = saved;
        let mut keys = self.deferred.take().unwrap_or_default();
        // And those the policy counts clean but the shard does not (a write-back that failed,
        // the cleaner's copies that did not land), for the same sweep.
        keys.extend(self.dirty_keys(None));
        result.map(|_| keys)
    }

    /// Copies dirty `key`'s value into `out` for a write-back the caller does; its length.
    /// `None` if the block is no longer resident and dirty, or did not read back (its data is
    /// then lost and the block dropped, as in `write_back`).
    pub fn dirty_block(&mut self, key: Key, out: &mut [u8]) -> Option<usize> {
        self.settle_flight(key);
        let place = self.place(key).filter(|p| p.dirty && !p.filling)?;
        match self.read_block(key, place, out) {
            Ok(len) => Some(len),
            Err(fault) => {
                self.count_fault(&fault);
                self.lose(key);
                self.drop_key(key);
                None
            }
        }
    }

    /// Records that the caller wrote `key`'s block (`len` bytes, copied by `dirty_block`) to
    /// the backing device: it is clean now, and the device must sync before a slot is freed.
    pub fn wrote_back(&mut self, key: Key, len: usize) {
        self.mark_written_back(key, len);
        self.backing_unsynced = true;
    }

    /// Marks `key`'s block clean, its `len` bytes written back (and synced, or the caller
    /// records that they are not).
    pub(super) fn mark_written_back(&mut self, key: Key, len: usize) {
        if let Some(place) = self.place(key).filter(|p| p.dirty) {
            self.set_place(key, Place { dirty: false, ..place });
        }
        self.stats.write_backs += 1;
        self.stats.bytes_written_back += len as u64;
    }

    /// Records that the caller synced the backing device after the writes it reported.
    pub fn backing_synced(&mut self) {
        self.backing_unsynced = false;
    }
}
