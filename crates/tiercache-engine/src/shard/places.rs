//! Where a key's block is: the place map, or, on a tier whose policy places its blocks
//! (set-associative), the slot the policy gives the key, with the shard's dirty bit for it. The
//! slot a placed tier's block goes to, and whether a slot may take a block or a pin now.

use tiercache_core::{Key, TierId};
use tiercache_policy::placed::PlacedSlots;
use tiercache_policy::{AnyPolicy, Policy};

use super::Shard;
use crate::tier::Place;
use crate::tier_store::Placed;

/// The slots of placed tier `t` as its policy holds them (see `TierStore::placed`): the map of
/// the tier's blocks, which the shard does not keep a second time.
pub(super) fn sets(policy: &AnyPolicy, t: usize) -> &dyn PlacedSlots {
    policy.placement_ref(TierId(t as u8)).expect("a placed tier's policy places its blocks")
}

/// As [`sets`], to change (a block moved to another free slot of its set).
pub(super) fn sets_mut(policy: &mut AnyPolicy, t: usize) -> &mut dyn PlacedSlots {
    policy.placement(TierId(t as u8)).expect("a placed tier's policy places its blocks")
}

impl Shard {
    /// The placed tiers (see `TierStore::placed`).
    pub(super) fn placed_tiers(&self) -> impl Iterator<Item = (usize, &Placed)> {
        self.tiers.iter().enumerate().filter_map(|(t, tier)| Some((t, tier.placed.as_ref()?)))
    }

    /// Blocks at rest on placed tiers: resident in their policy, not in the place map.
    pub(super) fn at_rest_on_placed_tiers(&self) -> u64 {
        if !self.any_placed {
            return 0;
        }
        let in_passing =
            self.places.values().filter(|p| self.tiers[p.tier as usize].placed.is_some()).count();
        let resident: u64 =
            self.placed_tiers().map(|(t, _)| self.policy.resident(TierId(t as u8))).sum();
        resident - in_passing as u64
    }

    /// Blocks resident, in every tier.
    pub fn resident_count(&self) -> u64 {
        self.places.len() as u64 + self.at_rest_on_placed_tiers()
    }

    /// Whether `key` is resident.
    pub fn contains(&self, key: Key) -> bool {
        self.place(key).is_some()
    }

    /// Where `key`'s block is, if resident: in the place map, or, for a block at rest on a
    /// placed tier, the slot its policy gives it, or gave it if the decision being applied
    /// has just dropped or moved it (`pending`).
    pub fn place(&self, key: Key) -> Option<Place> {
        if let Some(place) = self.places.get(&key) {
            return Some(*place);
        }
        if !self.any_placed {
            return None;
        }
        let pending = self.placed_tiers().find_map(|(t, p)| Some((t, p.pending_slot(key)?)));
        if let Some((t, slot)) = pending {
            return Some(self.at_rest(t, slot));
        }
        self.placed_tiers().find_map(|(t, _)| {
            let slot = self.policy.placement_ref(TierId(t as u8))?.slot_of(key)?;
            Some(self.at_rest(t, slot))
        })
    }

    /// The place of the block at rest in `slot` of placed tier `t`.
    pub(super) fn at_rest(&self, t: usize, slot: u32) -> Place {
        let dirty = self.tiers[t].placed_ref().is_dirty(slot);
        Place { dirty, ..Place::new(t as u8, slot) }
    }

    /// Records where `key`'s block is: for a block at rest on a placed tier only its dirty
    /// bit (its policy knows the slot), for any other in the place map.
    pub(super) fn set_place(&mut self, key: Key, place: Place) {
        if let Some(placed) = self.tiers[place.tier as usize].placed.as_mut() {
            placed.set_dirty(place.slot, place.dirty);
            if !place.filling && !place.staged {
                self.places.remove(&key);
                return;
            }
        }
        self.places.insert(key, place);
    }

    /// Forgets where `key`'s block is and returns it: the block leaves its slot.
    pub(super) fn take_place(&mut self, key: Key) -> Option<Place> {
        let pending = self.tiers.iter_mut().enumerate().find_map(|(t, tier)| {
            let pending = &mut tier.placed.as_mut()?.pending;
            let i = pending.iter().position(|(k, _)| *k == key)?;
            Some((t, pending.remove(i).1))
        });
        let place = match (self.places.remove(&key), pending) {
            (Some(place), _) => Some(place),
            (None, Some((t, slot))) => Some(self.at_rest(t, slot)),
            (None, None) => self.place(key),
        }?;
        if let Some(placed) = self.tiers[place.tier as usize].placed.as_mut() {
            placed.set_dirty(place.slot, false);
        }
        Some(place)
    }

    /// Takes what the placed tiers' policies dropped or moved since last asked (`pending`).
    pub(super) fn collect_vacated(&mut self) {
        if !self.any_placed {
            return;
        }
        for t in 0..self.tiers.len() {
            if self.tiers[t].placed.is_none() {
                continue;
            }
            let sets = sets_mut(&mut self.policy, t);
            let placed = self.tiers[t].placed_mut();
            placed.pending.extend(sets.take_vacated());
        }
    }

    /// Whether `key`'s set on placed tier `t` has a slot for a new copy of its block, other
    /// than `old`, the current one's; slots held for a sync are freed (the tier synced) if
    /// that makes one.
    pub(super) fn has_fresh_slot(&mut self, t: usize, key: Key, old: u32) -> bool {
        loop {
            let sets = sets(&self.policy, t);
            if sets.first_free(key, &mut |s| s != old && !self.busy(t, s)).is_some() {
                return true;
            }
            if self.tiers[t].limbo.is_empty() {
                return false;
            }
            self.free_held_slots(t);
        }
    }

    /// Whether `slot` of placed tier `t` may not take a block now: a read or a write runs on
    /// it, it holds the only durable copy of a block until the next sync (`limbo`), or the
    /// decision being applied has yet to take its block out (`pending`).
    pub(super) fn busy(&self, t: usize, slot: u32) -> bool {
        let tier = &self.tiers[t];
        tier.pins.held(slot)
            || tier.holds_for_sync(slot)
            || tier.placed.as_ref().is_some_and(|p| p.is_pending(slot))
    }

    /// Whether `slot` of `tier` may be pinned once more (see `TierStore::has_room_to_pin`). On a
    /// placed tier the slot's set must keep a free slot that is not busy for any insert or
    /// overwrite: of the set's spare slots, all but one may be busy.
    pub(super) fn can_pin(&self, t: usize, slot: u32) -> bool {
        let tier = &self.tiers[t];
        if !tier.has_room_to_pin(slot) {
            return false;
        }
        let Some(placed) = &tier.placed else { return true };
        if tier.pins.held(slot) {
            return true;
        }
        let set = placed.set_of(slot);
        let busy = set.clone().filter(|&s| self.busy(t, s)).count() as u32;
        busy + 1 < placed.spare
    }

    /// The slot of placed tier `t` for `key`, which its policy has just placed there: the
    /// policy's choice, or, if that one is busy, another free slot of the set, the policy
    /// told (a choice of slot changes no decision). With `fresh`, a slot other than that
    /// one, the key's current copy's (an overwrite's new copy).
    pub(super) fn placed_slot(&mut self, t: usize, key: Key, fresh: Option<u32>) -> u32 {
        let tier = TierId(t as u8);
        let chosen = sets(&self.policy, t).slot_of(key);
        if let Some(chosen) = chosen.filter(|&slot| fresh.is_none() && !self.busy(t, slot)) {
            return chosen;
        }
        let avoid = fresh.unwrap_or(u32::MAX);
        assert!(
            self.has_fresh_slot(t, key, avoid),
            "every free slot of key {key}'s set is busy, none held for a sync: pins are \
             limited to leave one"
        );
        let sets = sets(&self.policy, t);
        let to = sets.first_free(key, &mut |s| s != avoid && !self.busy(t, s)).expect("found");
        match chosen {
            Some(_) => {
                let sets = sets_mut(&mut self.policy, tier.index());
                sets.relocate(key, to).expect("a free slot of the key's set");
            }
            None => {
                // An overwrite of a block the same decision moves or drops next (the policy
                // has let it go): its new copy waits in a free slot the policy does not know,
                // as the old one did, for the action that takes it.
                assert!(fresh.is_some(), "the policy placed key {key} it stores");
                self.tiers[t].placed_mut().pending.push((key, to));
            }
        }
        to
    }

    /// The size a policy counts for a resident key (its class's size), if resident.
    pub fn stored_size(&self, key: Key) -> Option<u32> {
        let place = self.place(key)?;
        Some(self.block_size >> self.class_at(place.tier as usize, place.slot))
    }

    /// The size class of a block of `size` bytes: the smallest that holds it.
    #[inline]
    pub fn class_of(&self, size: u32) -> u8 {
        let mut class = 0;
        let chunks = self.tiers[0].region.chunks();
        while (1u32 << (class + 1)) <= chunks && self.block_size >> (class + 1) >= size {
            class += 1;
        }
        class
    }

    /// The size class of `slot` of `tier`.
    pub fn class_at(&self, tier: usize, slot: u32) -> u8 {
        self.tiers[tier].region.page_class(slot / self.tiers[tier].region.chunks())
    }
}
