//! Where a key's block is: the place map, or, on a tier whose policy places its blocks
//! (set-associative), the slot the policy gives the key, with the shard's dirty bit for it; the
//! slot a placed tier's block goes to; what the resident blocks take, and their size classes.

use tiercache_core::{Key, TierId};
use tiercache_policy::placed::PlacedSlots;
use tiercache_policy::{AnyPolicy, Policy};

use super::Shard;
use crate::tier::store::Placed;

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

    /// Blocks the shard's policy may keep, over all tiers (file and flash regions have a few
    /// slots more, as slack).
    pub fn slots(&self) -> u64 {
        self.capacity_bytes() / self.block_size as u64
    }

    /// Bytes of blocks the shard's policy may keep, over all tiers.
    pub fn capacity_bytes(&self) -> u64 {
        (0..self.policy.tier_count())
            .map(|t| {
                let capacity = self.policy.capacity(TierId(t as u8));
                match capacity.unit {
                    tiercache_core::Unit::Bytes => capacity.amount,
                    tiercache_core::Unit::Objects => capacity.amount * self.block_size as u64,
                }
            })
            .sum()
    }

    /// Bytes the resident blocks take: each a whole block, or with size classes its class's
    /// size.
    pub fn resident_bytes(&self) -> u64 {
        let mapped: u64 =
            self.places.keys().map(|k| self.stored_size(*k).unwrap_or(0) as u64).sum();
        mapped + self.at_rest_on_placed_tiers() * self.block_size as u64
    }

    /// Blocks resident, in every tier.
    pub fn resident_count(&self) -> u64 {
        self.places.len() as u64 + self.at_rest_on_placed_tiers()
    }

    /// Whether `key` is resident.
    pub fn contains(&self, key: Key) -> bool {
        self.place(key).is_some()
    }

    /// Whether `key` is resident and dirty: newer than the backing device's copy (a copy the
    /// cleaner has in flight stays dirty until it is durable).
    pub fn is_dirty(&self, key: Key) -> bool {
        self.place(key).is_some_and(|place| place.dirty)
    }

    /// Whether `key`'s set on placed tier `t` has a slot for a new copy of its block, other
    /// than `old`, the current one's; slots held for a sync are freed (the tier synced) if
    /// that makes one.
    pub(super) fn has_fresh_slot(&mut self, t: usize, key: Key, old: u32) -> bool {
        loop {
            let sets = sets(&self.policy, t);
            if sets.first_free(key, &mut |s| s != old && !self.tiers[t].busy(s)).is_some() {
                return true;
            }
            if self.tiers[t].limbo.is_empty() {
                return false;
            }
            self.free_held_slots(t);
        }
    }

    /// The slot of placed tier `t` for `key`, which its policy has just placed there: the
    /// policy's choice, or, if that one is busy, another free slot of the set, the policy
    /// told (a choice of slot changes no decision). With `fresh`, a slot other than that
    /// one, the key's current copy's (an overwrite's new copy).
    pub(super) fn placed_slot(&mut self, t: usize, key: Key, fresh: Option<u32>) -> u32 {
        let tier = TierId(t as u8);
        let chosen = sets(&self.policy, t).slot_of(key);
        if let Some(chosen) = chosen.filter(|&slot| fresh.is_none() && !self.tiers[t].busy(slot)) {
            return chosen;
        }
        let avoid = fresh.unwrap_or(u32::MAX);
        assert!(
            self.has_fresh_slot(t, key, avoid),
            "every free slot of key {key}'s set is busy, none held for a sync: pins are \
             limited to leave one"
        );
        let sets = sets(&self.policy, t);
        let to =
            sets.first_free(key, &mut |s| s != avoid && !self.tiers[t].busy(s)).expect("found");
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

    /// Whether the memory tiers split pages into size classes.
    #[inline]
    pub fn has_classes(&self) -> bool {
        self.classes
    }

    /// The size of the smallest class holding `len` bytes.
    pub fn class_size(&self, len: u32) -> u32 {
        self.block_size >> self.class_of(len)
    }

    /// The size a policy counts for a resident key (its class's size), if resident.
    pub fn stored_size(&self, key: Key) -> Option<u32> {
        let place = self.place(key)?;
        if let Some(pages) = self.pages_after(key) {
            return Some((pages.len() as u32 + 1) * self.block_size);
        }
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
