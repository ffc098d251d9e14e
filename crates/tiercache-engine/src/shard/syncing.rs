//! Slots held for a sync: a dirty block superseded by a newer copy stays until the tier
//! syncs (`TierStore::limbo`), and an older copy whose free mark is not durable yet keeps the
//! key's current copy from being rewritten (`settle_erasures`).

use tiercache_core::Key;

use super::places::sets;
use super::Shard;
use crate::error::EngineError;
use crate::tier_store::TierStore;

impl Shard {
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
    /// before the tiers sync.
    pub fn flush_records(&mut self) -> Result<(), EngineError> {
        (0..self.tiers.len()).try_for_each(|t| self.flush_tier(t))
    }

    /// Writes tier `t`'s records not yet written (see `flush_records`). A placed tier's are
    /// made from what the shard knows of each changed slot: the policy's key there, or the
    /// block the decision being applied has yet to take out, or one held for a sync.
    pub(super) fn flush_tier(&mut self, t: usize) -> Result<(), EngineError> {
        use crate::direct::SlotState;
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

    /// Frees the slots held since the last sync: the caller has just synced every tier, so the
    /// newer copies they were held for are durable, and so are the free marks written before
    /// the sync.
    pub fn release_limbo(&mut self) {
        for t in 0..self.tiers.len() {
            self.tiers[t].released.clear();
            for (slot, key) in std::mem::take(&mut self.tiers[t].limbo) {
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
        self.release_limbo();
    }
}
