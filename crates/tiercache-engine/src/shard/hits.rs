//! Serving hits: copied out under the lock, read from a file or flash tier with the shard
//! unlocked on a pinned slot, held in place for a read handle, or recorded after being served
//! without the lock (`crate::optimistic`).

use std::sync::Arc;

use tiercache_core::{Key, Op, Request, TierId};

use super::Shard;
use crate::io::{PinnedRead, ReadFault};
use crate::tier::Place;
use crate::tier_store::TierStore;

/// A hit held for a read handle.
pub enum Held {
    /// The block in place on a memory tier; its slot is pinned until released.
    Pinned { tier: u8, slot: u32, bytes: *const u8, len: usize },
    /// A copy (file and flash tiers, staged blocks, or no room left to pin).
    Copied(Vec<u8>),
}

/// How a hit is served.
pub enum Served {
    /// Done under the lock (memory tiers), or nothing to serve.
    Now(Option<usize>),
    /// A read of a file or flash tier, to run with the shard unlocked, then `finish_copy`.
    Later(PinnedRead, Place),
}

impl Shard {
    /// Starts serving a hit: memory tiers copy now; file and flash tiers pin the slot and hand
    /// back a read to run with the shard unlocked.
    pub fn begin_copy(&mut self, key: Key, buf: &mut [u8]) -> Served {
        let place = self.place(key).expect("the policy reported a hit with no slot");
        let tier = place.tier as usize;
        // Keep one slack slot for an overwrite's copy; past that, read under the lock.
        let room = self.can_pin(tier, place.slot);
        if place.filling || place.staged || !self.tiers[tier].region.is_io() || !room {
            return Served::Now(self.copy_out(key, buf));
        }
        match self.tiers[tier].region.begin_read(place.slot, key) {
            Some(read) => {
                self.tiers[tier].pin(place.slot);
                self.stats.unlocked_reads += 1;
                Served::Later(read, place)
            }
            None => {
                self.count_fault(&ReadFault::Corrupt(crate::block::BlockFault::Key));
                self.drop_key(key);
                Served::Now(None)
            }
        }
    }

    /// Ends a read started by `begin_copy`: unpins the slot, counts, and drops the block if it
    /// did not check out (unless it was replaced meanwhile).
    pub fn finish_copy(
        &mut self,
        key: Key,
        read: PinnedRead,
        place: Place,
        result: Result<usize, ReadFault>,
    ) -> Option<usize> {
        let tier = place.tier as usize;
        self.tiers[tier].region.end_read(read);
        self.tiers[tier].unpin(place.slot, &mut self.stats);
        match result {
            Ok(len) => {
                self.stats.bytes_read += len as u64;
                Some(len)
            }
            Err(fault) => {
                self.count_fault(&fault);
                if self.place(key).is_some_and(|p| p.same_slot(&place)) {
                    self.drop_key(key);
                }
                None
            }
        }
    }

    /// Whether `hold` would keep a resident key's block in place (a memory tier read in
    /// place, data there, not staged, and a spare slot to pin).
    pub fn holds_in_place(&self, key: Key) -> bool {
        self.place(key).is_some_and(|place| {
            let tier = place.tier as usize;
            !place.filling
                && !place.staged
                && self.tiers[tier].region.in_place()
                && self.can_pin(tier, place.slot)
        })
    }

    /// Holds a hit for a read handle in place, when `holds_in_place` says it can: the slot is
    /// pinned (release it with `unpin`), or, if readers without the lock took the room to pin
    /// meanwhile (see `crate::pins`), copied. `None` if the block did not check out (then
    /// dropped).
    pub fn hold(&mut self, key: Key) -> Option<Held> {
        let place = self.place(key).expect("the policy reported a hit with no slot");
        let tier = place.tier as usize;
        let TierStore { region, pins, .. } = &self.tiers[tier];
        match region.locate(place.slot, key) {
            Ok(value) => {
                self.stats.bytes_read += value.len() as u64;
                if !pins.pin(place.slot) {
                    return Some(Held::Copied(value.to_vec()));
                }
                self.stats.pinned_reads += 1;
                let (bytes, len) = (value.as_ptr(), value.len());
                Some(Held::Pinned { tier: place.tier, slot: place.slot, bytes, len })
            }
            Err(fault) => {
                self.count_fault(&fault);
                self.drop_key(key);
                None
            }
        }
    }

    /// Publishes the upper tier's slots for hits served without the lock; see
    /// [`crate::optimistic`].
    pub fn publish(
        &mut self,
        sets: (&Arc<crate::optimistic::Sets>, usize),
    ) -> Option<crate::optimistic::SlotTable> {
        let pins = self.tiers[0].pins.clone();
        self.tiers[0].region.publish(sets, pins)
    }

    /// Tells the policy of a hit served without the lock, as it would have been told then,
    /// and counts it. It is told as a lookup, which for a policy with quiet hits decides a
    /// read's hit the same way (`AnyPolicy::quiet_hits`). Hits are committed before any other
    /// request of the shard is decided, so the key is still resident in the upper tier, unless
    /// another thread dropped it between the hit and its recording: the lookup then finds
    /// nothing and changes nothing (quiet hits again), and the hit, served, still counts. A
    /// read handle's hit (`len` with `Hit::HELD`) counts in `pinned_reads`; one the hit rule
    /// spared the policy (`Hit::UNTOLD`) is only counted.
    pub fn commit_hit(&mut self, key: Key, len: u32, ns: u32) {
        use crate::optimistic::Hit;
        self.stats.lookups += 1;
        self.stats.hits += 1;
        self.stats.bytes_read += (len & !Hit::FLAGS) as u64;
        match len & Hit::HELD {
            0 => self.stats.unlocked_hits += 1,
            _ => self.stats.pinned_reads += 1,
        }
        if let Some(histograms) = &mut self.latency {
            histograms[crate::latency::Operation::Read as usize].saturating_record(ns as u64);
        }
        if len & Hit::UNTOLD != 0 {
            // The hit rule spared the policy this hit (see `crate::optimistic`): only counted.
            self.stats.untold_hits += 1;
            return;
        }
        self.decide_told(&Request::new(self.now_us, key, self.block_size, Op::Lookup), false);
        debug_assert!(
            self.decision.hit.is_none_or(|tier| tier.0 == 0) && self.decision.actions.is_empty(),
            "a quiet policy's hit on key {key} decided {:?}",
            self.decision
        );
    }

    /// Counts a decided read: a hit served from the tier the policy found the block in (even
    /// if the same decision moved it), or a miss (`None`).
    pub fn count_read(&mut self, served_from: Option<TierId>) {
        match served_from {
            Some(tier) => {
                self.stats.hits += 1;
                if tier.0 > 0 {
                    self.stats.lower_hits += 1;
                    self.stats.lower_tier_hits[tier.index()] += 1;
                }
            }
            None => self.stats.misses += 1,
        }
    }

    /// Copies a resident key's value out under the lock; a bad block is dropped and reported
    /// as a miss.
    pub fn copy_out(&mut self, key: Key, buf: &mut [u8]) -> Option<usize> {
        let place = self.place(key).expect("the policy reported a hit with no slot");
        if place.filling {
            self.stats.fill_misses += 1;
            return None;
        }
        if place.staged {
            let len = crate::block::copy_value(self.staging[&key].value(), buf);
            self.stats.bytes_read += len as u64;
            self.stats.staged_reads += 1;
            return Some(len);
        }
        match self.tiers[place.tier as usize].region.read(place.slot, key, buf) {
            Ok(len) => {
                self.stats.bytes_read += len as u64;
                // A key whose set was full when it was written may find room now.
                self.tiers[place.tier as usize].region.republish(place.slot, key, len);
                Some(len)
            }
            Err(fault) => {
                self.count_fault(&fault);
                self.drop_key(key);
                None
            }
        }
    }
}
