//! What makes a shard's blocks durable, and what brings them back after a restart:
//!
//! - write-back: dirty blocks written to the backing device, one by one or as runs of
//!   consecutive keys, the backing device synced before any slot whose block was written
//!   back is freed, and dirty data that could not be read back recorded as lost; the
//!   cleaner's copies in flight, settled before anything else writes a block back or drops
//!   it (`crate::cleaner`);
//! - slots held for a sync: a dirty block superseded by a newer copy stays until the tier
//!   syncs (`TierStore::limbo`), and an older copy whose free mark is not durable yet keeps
//!   the key's current copy from being rewritten (`settle_erasures`);
//! - the shard's steps of recovery (the routine in `recovery.rs`): its tiers read as a cache opening
//!   over them does ([`Shard::scan`]), and what was found taken back ([`Shard::restore`]):
//!   the newest whole copy of each key, told to the policy.

use std::sync::Arc;

use tiercache_core::{Decision, Key, KeyMap, Op, Request, TierId};
use tiercache_policy::{AnyPolicy, Policy};

use super::places::{sets, sets_mut};
use super::Shard;
use crate::cleaner::{Batch, Flight};
use crate::device::Device;
use crate::error::EngineError;
use crate::tier::block::{Part, ReadFault};
use crate::tier::store::TierStore;
use crate::tier::Place;

/// A whole block found by a recovery scan.
struct Copy {
    seq: u64,
    key: Key,
    tier: usize,
    slot: u32,
    len: u32,
    dirty: bool,
    /// Which part of its value the block is; for an object's first page once its pages are
    /// gathered, the pages after it, in order.
    part: Part,
    pages: Vec<u32>,
}

/// What a recovery scan found on a shard's tiers ([`Shard::scan`]).
#[derive(Default)]
pub struct Scanned {
    copies: Vec<Copy>,
    /// Tier, slot and what is wrong.
    damaged: Vec<(usize, u32, String)>,
}

impl Scanned {
    /// Whether the scan found no whole block.
    pub fn is_empty(&self) -> bool {
        self.copies.is_empty()
    }

    /// Counts the copies on `tiers` clean: their cache stopped after writing every dirty block
    /// back, so the dirty flags their headers still carry are history.
    pub fn written_back(&mut self, tiers: &[usize]) {
        for copy in self.copies.iter_mut().filter(|c| tiers.contains(&c.tier)) {
            copy.dirty = false;
        }
    }
}

impl Shard {
    /// Periodic work due at `now_us`, applied like any decision (it only drops blocks).
    pub fn tick(&mut self, now_us: u64) {
        self.release_run();
        self.now_us = now_us;
        self.decision.clear();
        self.policy.tick(now_us, &mut self.decision);
        if !self.decision.actions.is_empty() {
            self.apply(0, None)
                .expect("periodic work drops and writes back blocks, whose errors are counted");
        }
    }

    /// Periodic work due at `now_us`, as [`tick`](Self::tick), with the policy's write-backs
    /// copied into `batch` for the cache's cleaner to write (see `crate::cleaner`) instead of
    /// written here. The blocks stay dirty, in flight, until [`settle_batch`](Self::settle_batch).
    pub fn tick_gathering(&mut self, now_us: u64, batch: &mut Batch) {
        let full = batch.bytes.len() >= crate::cleaner::BATCH_BYTES;
        if self.backing.is_none() || self.cleaner.is_none() || full {
            return self.tick(now_us);
        }
        self.deferred = Some(Vec::new());
        self.tick(now_us);
        let keys = self.deferred.take().unwrap_or_default();
        for key in keys {
            let at = batch.bytes.len();
            batch.bytes.resize(at + self.block_size as usize, 0);
            match self.dirty_block(key, &mut batch.bytes[at..]) {
                Some(len) => {
                    batch.bytes.truncate(at + len);
                    batch.blocks.push((key, at, len));
                    let flight = Flight { batch: batch.id, len: len as u32, stale: false };
                    self.flights.insert(key, flight);
                }
                None => batch.bytes.truncate(at),
            }
        }
    }

    /// The cleaner's last step for `batch`: each of this shard's blocks still in it is clean
    /// if its copy is durable and no newer data was written to it.
    pub fn settle_batch(&mut self, batch: u64) {
        let keys: Vec<Key> =
            self.flights.iter().filter(|(_, f)| f.batch == batch).map(|(k, _)| *k).collect();
        for key in keys {
            self.settle_flight(key);
        }
    }

    /// Settles `key`'s block if the cleaner has a copy of it in flight (see `crate::cleaner`),
    /// before the block is written back, dropped or copied out otherwise: waits for the copy's
    /// write if it is under way, or takes the block out of the batch if not yet; the block is
    /// clean afterwards if the copy is durable and still its data.
    #[inline]
    pub(super) fn settle_flight(&mut self, key: Key) {
        if self.flights.is_empty() {
            return;
        }
        let Some(flight) = self.flights.remove(&key) else { return };
        let cleaner = self.cleaner.as_ref().expect("only the cleaner puts blocks in flight");
        match (cleaner.settle(key, flight.batch), flight.stale) {
            (true, false) => self.mark_written_back(key, flight.len as usize),
            (true, true) => self.stats.write_backs_overtaken += 1,
            (false, _) => {}
        }
    }

    /// Records new data written to `key`: a copy of its older data in flight leaves it dirty.
    #[inline]
    pub(super) fn written_in_flight(&mut self, key: Key) {
        if let Some(flight) = self.flights.get_mut(&key) {
            flight.stale = true;
        }
    }

    // Write-back.

    /// Attaches the device dirty blocks are written back to.
    pub fn attach_backing(&mut self, device: Arc<dyn Device>) {
        self.backing = Some(device);
    }

    /// The device dirty blocks are written back to, once attached.
    pub fn backing(&self) -> Option<&Arc<dyn Device>> {
        self.backing.as_ref()
    }

    /// Joins the cache's cleaner (see `crate::cleaner`), shared by every shard.
    pub fn join_cleaner(&mut self, cleaner: Arc<crate::cleaner::Flights>) {
        self.cleaner = Some(cleaner);
    }

    /// Counts write-backs the cache did for several shards at once, in device order (the
    /// cleaner's, a drain's): `runs` written, `errors`, and `syncs` of the backing device.
    pub fn count_written_back(&mut self, runs: u64, errors: u64, syncs: u64) {
        self.stats.write_back_runs += runs;
        self.stats.write_back_errors += errors;
        self.stats.backing_syncs += syncs;
    }

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
        let bytes = self.tiers[place.tier as usize].region.value_bytes();
        if scratch.len() < bytes {
            scratch.resize(bytes, 0);
        }
        let copied = match self.read_block(key, place, &mut scratch[..bytes]) {
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
    /// behind, else read and checked from its tier (a value spanning pages, every page, into
    /// an `out` of its pages' size). Returns the value's length.
    pub(super) fn read_block(
        &mut self,
        key: Key,
        place: Place,
        out: &mut [u8],
    ) -> Result<usize, ReadFault> {
        if let Some(staged) = self.staging.get(key).filter(|_| place.staged) {
            return Ok(crate::tier::block::copy_value(staged.value(), out));
        }
        let slots = self.spans_pages(key).then(|| self.span_slots(key, place.slot));
        let region = &mut self.tiers[place.tier as usize].region;
        match slots {
            Some(slots) => region.read_pages(&slots, key, out),
            None => region.read(place.slot, key, out),
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

    // Slots held for a sync.

    /// Frees a slot once what was written back from it is durable (see `backing_unsynced`),
    /// and once no older copy of its key can come back in its place (`settle_erasures`).
    pub(super) fn free_slot(&mut self, tier: usize, slot: u32, key: Key) {
        self.sync_backing();
        self.settle_erasures(key);
        self.tiers[tier].free_slot(slot, key, &mut self.stats);
    }

    /// Before `key`'s current copy is freed or overwritten in place: an older copy of it,
    /// held until a sync and marked free after it (`released`), is not durably free yet. Were
    /// the current copy's slot rewritten (torn, or reused for another key) and the mark lost
    /// in a crash, the older copy would come back as current: stale. So the tiers holding
    /// such a mark sync first (`erase_syncs`).
    pub(super) fn settle_erasures(&mut self, key: Key) {
        for t in 0..self.tiers.len() {
            let released = &self.tiers[t].released;
            if released.is_empty() || !released.contains(&key) {
                continue;
            }
            if self.flush_tier(t).and_then(|()| self.tiers[t].region.sync()).is_err() {
                self.stats.io_errors += 1;
            }
            self.stats.erase_syncs += 1;
            self.tiers[t].released.clear();
        }
    }

    /// Writes what the shard's regions keep in DRAM for their media (flash slot records),
    /// before the tiers sync; the sync that follows may free the slots held now.
    pub fn flush_records(&mut self) -> Result<(), EngineError> {
        (0..self.tiers.len()).try_for_each(|t| self.flush_tier(t))?;
        self.cover_limbo();
        Ok(())
    }

    /// Lets the next [`release_limbo`](Self::release_limbo) free every slot held now: their
    /// newer copies' records have just been written (`limbo_covered`).
    fn cover_limbo(&mut self) {
        for tier in self.tiers.iter_mut() {
            tier.limbo_covered = tier.limbo.len();
        }
    }

    /// Writes tier `t`'s records not yet written (see `flush_records`). A placed tier's are
    /// made from what the shard knows of each changed slot: the policy's key there, or the
    /// block the decision being applied has yet to take out, or one held for a sync.
    pub(super) fn flush_tier(&mut self, t: usize) -> Result<(), EngineError> {
        use crate::tier::flash::SlotState;
        let TierStore { region, placed, limbo, .. } = &mut self.tiers[t];
        let Some(placed) = placed.as_ref() else {
            return region.flush_records(&|_| SlotState::Free, &mut self.seq);
        };
        let (policy, places) = (&self.policy, &self.places);
        let sets = sets(policy, t);
        let state = |slot: u32| {
            let in_flight = |key: Key| {
                places.get(&key).is_some_and(|p| {
                    p.tier as usize == t && p.slot == slot && (p.staged || p.filling)
                })
            };
            let dirty = placed.is_dirty(slot);
            let held = placed.pending.iter().find(|&&(_, ps)| ps == slot).map(|p| p.0);
            let key = sets.key_at(slot).or(held);
            if let Some(key) = key {
                return match in_flight(key) {
                    true => SlotState::InFlight,
                    false => SlotState::Block { key, dirty },
                };
            }
            match limbo.iter().find(|&&(ls, _)| ls == slot) {
                Some(&(_, key)) => SlotState::Held { key },
                None => SlotState::Free,
            }
        };
        region.flush_records(&state, &mut self.seq)
    }

    /// Frees the slots held for the sync the caller has just made of every tier, after this
    /// shard's [`flush_records`](Self::flush_records): the newer copies they were held for are
    /// durable, and so are the free marks written before the sync. Slots held since the flush
    /// (the shard served on meanwhile) wait for the next sync.
    pub fn release_limbo(&mut self) {
        for t in 0..self.tiers.len() {
            self.tiers[t].released.clear();
            let covered = std::mem::take(&mut self.tiers[t].limbo_covered);
            let covered = covered.min(self.tiers[t].limbo.len());
            let freed: Vec<(u32, Key)> = self.tiers[t].limbo.drain(..covered).collect();
            for (slot, key) in freed {
                // The key's current copy is newer; this one is only ever freed.
                self.sync_backing();
                self.tiers[t].free_slot(slot, key, &mut self.stats);
                self.tiers[t].released.insert(key);
            }
        }
    }

    /// Frees the slots held for a sync (`limbo`) when tier `t` has no other free slot. A held
    /// slot keeps the last durable copy of a dirty block whose newer copy may lie on another
    /// tier (a move's): so every tier syncs, records first, not only `t`. Found by the kill
    /// test over DRAM, a mapped and a flash tier: a dirty block moved from the mapped tier to
    /// the flash tier had its mapped slot freed when the mapped tier synced, before the flash
    /// tier's record of the new copy was written, and a kill then lost it.
    ///
    /// A newer copy on a volatile tier (a dirty block written again into DRAM) would not
    /// survive a crash: it is copied to the backing device (synced) first, and stays dirty, so
    /// that its policy writes it back in its turn as it would have (`limbo_write_backs`
    /// counts these copies apart from the policy's write-backs). If the copy fails the block
    /// is recorded lost, as a write-back that fails is.
    pub(super) fn free_held_slots(&mut self, t: usize) {
        let held: Vec<Key> = self.tiers[t].limbo.iter().map(|&(_, key)| key).collect();
        for key in held {
            // A cleaner's copy of it on the way lands first (or is taken back).
            self.settle_flight(key);
            let place = self.place(key);
            let Some(place) = place.filter(|p| {
                p.dirty && !p.filling && !self.tiers[p.tier as usize].region.persistent()
            }) else {
                continue;
            };
            let backing = self.backing.clone();
            match backing.map(|b| self.copy_to_backing(key, place, &*b)) {
                Some(Ok(_)) => self.stats.limbo_write_backs += 1,
                _ => self.lose(key),
            }
        }
        self.sync_backing();
        for tier in 0..self.tiers.len() {
            if self.flush_tier(tier).and_then(|()| self.tiers[tier].region.sync()).is_err() {
                self.stats.io_errors += 1;
            }
        }
        self.stats.limbo_syncs += 1;
        self.cover_limbo();
        self.release_limbo();
    }

    // Recovery.

    /// Reads the tiers `tiers` (mapped and file tiers of this geometry) as a cache opening
    /// over them does, changing nothing: every whole block, and every slot that fails its
    /// checks. `belongs` says whether a key is this shard's: a block of another shard's key
    /// was misdirected, and counts as damage.
    pub fn scan(
        &mut self,
        tiers: &[(usize, crate::tier::block::Check)],
        belongs: impl Fn(Key) -> bool,
    ) -> Result<Scanned, EngineError> {
        use crate::tier::block::Found;
        let mut scanned = Scanned::default();
        for &(t, check) in tiers {
            self.tiers[t].region.scan(check, |slot, found| match found {
                Found::Empty => {}
                Found::Block { key, len, stamp } if belongs(key) => scanned.copies.push(Copy {
                    seq: stamp.seq,
                    key,
                    tier: t,
                    slot,
                    len,
                    dirty: stamp.dirty,
                    part: stamp.part,
                    pages: Vec::new(),
                }),
                Found::Block { key, .. } => scanned.damaged.push((
                    t,
                    slot,
                    format!("a block of key {key}, not this shard's"),
                )),
                Found::Damaged(fault) => {
                    scanned.damaged.push((t, slot, format!("{fault:?}").to_lowercase()))
                }
            })?;
        }
        Ok(scanned)
    }

    /// The first damaged slot `scanned` found, if any: its tier, byte offset and what is wrong.
    pub fn first_damage(&self, scanned: &Scanned) -> Option<(usize, u64, String)> {
        let (t, slot, what) = scanned.damaged.first()?;
        Some((*t, self.tiers[*t].region.offset_of(*slot), what.clone()))
    }

    /// Takes back what [`scan`](Self::scan) found: the newest whole copy of each key is told to
    /// the policy, oldest first, and kept where it lies if the policy takes it; older copies,
    /// blocks the policy declines and damaged slots are marked free. The shard's sequence
    /// restarts above every number found.
    pub fn restore(&mut self, scanned: Scanned) -> Result<(), EngineError> {
        let Scanned { mut copies, damaged } = scanned;
        for (t, slot, _) in damaged {
            self.stats.recovery_damaged += 1;
            self.tiers[t].mark_free(slot, &mut self.stats);
        }
        self.seq = copies.iter().map(|c| c.seq).max().unwrap_or(0);
        self.gather_objects(&mut copies);
        // The newest copy of each key wins; older ones are freed.
        copies.sort_unstable_by_key(|c| std::cmp::Reverse(c.seq));
        let mut newest = KeyMap::default();
        copies.retain(|c| {
            let first = newest.insert(c.key, ()).is_none();
            if !first {
                self.stats.recovery_stale += 1;
                for &slot in std::iter::once(&c.slot).chain(&c.pages) {
                    self.tiers[c.tier].mark_free(slot, &mut self.stats);
                }
            }
            first
        });
        copies.reverse();
        for t in 0..self.tiers.len() {
            if self.tiers[t].placed.is_some() {
                continue;
            }
            let held: Vec<u32> = copies
                .iter()
                .filter(|c| c.tier == t)
                .flat_map(|c| std::iter::once(c.slot).chain(c.pages.iter().copied()))
                .collect();
            self.tiers[t].space.claim(&held);
        }
        for copy in copies {
            self.decision.clear();
            let tier = TierId(copy.tier as u8);
            let size = (copy.pages.len() as u32 + 1) * self.block_size;
            if !self.policy.restore(copy.key, size, tier, copy.dirty, &mut self.decision) {
                // Dirty data is never dropped: the builder checked the policy keeps it.
                if copy.dirty {
                    return Err(EngineError::config(
                        "mode",
                        format!(
                            "a tier holds dirty block {} (written by a write-back cache and \
                             not yet written back), and this policy keeps nothing dirty: open \
                             the cache in an Open CAS mode (mode = wb) to write it back",
                            copy.key
                        ),
                    ));
                }
                self.stats.recovery_declined += 1;
                for &slot in std::iter::once(&copy.slot).chain(&copy.pages) {
                    self.tiers[copy.tier].give_back(slot, &mut self.stats);
                }
                continue;
            }
            if self.tiers[copy.tier].placed.is_some() {
                // Kept in the slot it lies in, which the policy is told (no decision changes);
                // a slot outside the key's set (a tier laid out for other ways) is dropped.
                let sets = sets_mut(&mut self.policy, tier.index());
                if sets.slot_of(copy.key) != Some(copy.slot)
                    && sets.relocate(copy.key, copy.slot).is_none()
                {
                    // What the policy evicted to make room goes; then the key is forgotten
                    // without touching the slot the policy had chosen for it, which may hold
                    // a block still to be restored.
                    self.apply(copy.key, None)?;
                    self.decide_sized(&Request::new(self.now_us, copy.key, 0, Op::Delete));
                    self.decision.clear();
                    self.collect_vacated();
                    let placed = self.tiers[copy.tier].placed_mut();
                    placed.pending.retain(|(k, _)| *k != copy.key);
                    self.stats.recovery_declined += 1;
                    if copy.dirty {
                        self.write_back_found(&copy);
                    }
                    self.tiers[copy.tier].give_back(copy.slot, &mut self.stats);
                    continue;
                }
            }
            let place = Place { dirty: copy.dirty, ..Place::new(copy.tier as u8, copy.slot) };
            self.set_place(copy.key, place);
            if !copy.pages.is_empty() {
                self.spans.insert(copy.key, copy.pages.into());
            }
            self.tiers[copy.tier].region.republish(copy.slot, copy.key, copy.len as usize);
            // Room the policy made (a policy whose capacity is less than its tier's slots):
            // earlier blocks go.
            self.apply(copy.key, None)?;
        }
        // Nothing else has run on the shard: what it holds was recovered, and what the policy
        // evicted to make room was not kept.
        self.stats.recovered = self.resident_count();
        self.stats.recovery_declined += std::mem::take(&mut self.stats.evictions);
        Ok(())
    }

    /// Gathers the pages of objects spanning pages among `copies` into one copy each, their
    /// first page's with the others in order, as the object is kept or dropped whole. An
    /// object missing a page of its sequence number (a crash in the middle of its write, a
    /// page overwritten since), and every object of a cache that does not let values span
    /// pages, is dropped: its pages are marked free, counted as damaged.
    fn gather_objects(&mut self, copies: &mut Vec<Copy>) {
        if copies.iter().all(|c| c.part == Part::Whole) {
            return;
        }
        let (mut parts, whole): (Vec<Copy>, Vec<Copy>) =
            std::mem::take(copies).into_iter().partition(|c| c.part != Part::Whole);
        *copies = whole;
        // Each object's pages side by side, its first page first, the others by index.
        let order = |c: &Copy| match c.part {
            Part::First { .. } => 0,
            Part::Page { index } => index,
            Part::Whole => unreachable!("whole blocks are apart"),
        };
        parts.sort_unstable_by_key(|c| (c.key, c.seq, c.tier, order(c)));
        let mut rest = &parts[..];
        while let Some(first) = rest.first() {
            let same = rest
                .iter()
                .take_while(|c| (c.key, c.seq, c.tier) == (first.key, first.seq, first.tier))
                .count();
            let (object, after) = rest.split_at(same);
            rest = after;
            let whole = match object[0].part {
                Part::First { count } => {
                    self.span_pages
                        && object.len() == count as usize
                        && object.iter().enumerate().all(|(i, c)| order(c) == i as u32)
                }
                _ => false,
            };
            if whole {
                let pages = object[1..].iter().map(|c| c.slot).collect();
                let len = object.iter().map(|c| c.len).sum();
                let head = &object[0];
                copies.push(Copy { pages, len, part: head.part, ..*head });
                continue;
            }
            for c in object {
                self.stats.recovery_damaged += 1;
                self.tiers[c.tier].mark_free(c.slot, &mut self.stats);
            }
        }
    }

    /// Writes back a dirty block recovery found and does not keep (its set has no room for
    /// it), from the slot it lies in, before that slot is freed: to the backing device
    /// attached before recovery (`CacheBuilder::backing_file`), synced. Without one, or if the
    /// block does not read back or the write fails, its key is recorded lost (reads fail until
    /// it is written again) rather than served from the backing device's older data.
    fn write_back_found(&mut self, copy: &Copy) {
        let region = &mut self.tiers[copy.tier].region;
        let mut value = vec![0u8; region.value_bytes()];
        let read = region.read(copy.slot, copy.key, &mut value);
        let at = copy.key * self.block_size as u64;
        let written = match (&self.backing, read) {
            (Some(backing), Ok(len)) => backing.write_at(&value[..len], at).is_ok().then_some(len),
            _ => None,
        };
        match written {
            Some(len) => {
                self.wrote_back(copy.key, len);
                self.sync_backing();
            }
            None => {
                self.stats.dirty_lost += 1;
                self.lost.insert(copy.key);
            }
        }
    }
}
