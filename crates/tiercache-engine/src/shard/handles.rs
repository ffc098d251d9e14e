//! Hits served elsewhere than in a read's step, and what the cache reads of a shard: read
//! handles, whose blocks are held in place (their slots pinned) or copied; hits served without
//! the lock (`crate::tier::optimistic`), told to the policy afterwards, and the published table they
//! are found in; the counters, latency and knobs the cache reports.

use std::sync::Arc;
use std::time::Instant;

use tiercache_core::{Interval, Key, Op, Request};
use tiercache_policy::cas::CacheMode;
use tiercache_policy::Policy;

use super::{Read, Shard, TierRead};
use crate::latency::Operation;
use crate::stats::Stats;
use crate::tier::behind::{Staging, WriteBehind};
use crate::tier::store::TierStore;

/// What a read handle's locked step ([`Shard::hold`]) leaves its caller to do.
pub enum Hold {
    /// The block, held in place or copied.
    Held(Held),
    /// A copy to read from a file or flash tier, as [`Read::Tier`].
    Tier(TierRead),
    Miss,
}

/// A hit held for a read handle.
pub enum Held {
    /// The block in place on a memory tier; its slot is pinned until released.
    Pinned { tier: u8, slot: u32, bytes: *const u8, len: usize },
    /// A copy (file and flash tiers, staged blocks, or no room left to pin).
    Copied(Vec<u8>),
}

impl Shard {
    /// A lookup for a read handle: a block on DRAM or a mapped tier is held in place, its slot
    /// pinned (release it with `unpin`); a block on a file or flash tier, or one that cannot be
    /// pinned (staged, filling, no spare slot), comes as a copy. A miss admits nothing.
    pub fn hold(&mut self, req: &Request, started: Option<Instant>) -> Hold {
        let key = req.key;
        self.decide(req);
        self.apply(key, None).expect("a lookup's decision does no tier I/O");
        if self.decision.hit.is_some() && !self.holds_in_place(key) {
            let mut copy = vec![0; self.stored_size(key).unwrap_or(self.block_size) as usize];
            return match self.serve(key, Op::Lookup, &mut copy, None, started) {
                Read::Done(Some(len)) => {
                    copy.truncate(len);
                    Hold::Held(Held::Copied(copy))
                }
                Read::Tier(read) => Hold::Tier(read),
                Read::Done(None) | Read::Load(_) | Read::Lost => Hold::Miss,
            };
        }
        self.stats.lookups += 1;
        if self.decision.from_backing {
            self.stats.offloaded += 1;
            return Hold::Miss;
        }
        let hit = self.decision.hit;
        let held = hit.and_then(|_| self.hold_in_place(key));
        self.count_read(held.as_ref().and(hit));
        self.record(Operation::Read, started);
        held.map_or(Hold::Miss, Hold::Held)
    }

    /// Whether `hold_in_place` would keep a resident key's block in place (a memory tier read
    /// in place, data there, not staged, and a spare slot to pin).
    fn holds_in_place(&self, key: Key) -> bool {
        self.place(key).is_some_and(|place| {
            let tier = &self.tiers[place.tier as usize];
            !place.filling && !place.staged && tier.region.in_place() && tier.can_pin(place.slot)
        }) && !self.spans_pages(key)
    }

    /// Holds a hit for a read handle in place, when `holds_in_place` says it can: the slot is
    /// pinned, or, if readers without the lock took the room to pin meanwhile (see
    /// `crate::pins`), copied. `None` if the block did not check out (then dropped).
    fn hold_in_place(&mut self, key: Key) -> Option<Held> {
        let place = self.place(key).expect("the policy reported a hit with no slot");
        let TierStore { region, pins, .. } = &self.tiers[place.tier as usize];
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

    /// Tells the policy of a hit served without the lock, as it would have been told then,
    /// and counts it. It is told as a lookup, which for a policy with quiet hits decides a
    /// read's hit the same way (`AnyPolicy::quiet_hits`). Hits are committed before any other
    /// request of the shard is decided, so the key is still resident in the upper tier, unless
    /// another thread dropped it between the hit and its recording: the lookup then finds
    /// nothing and changes nothing (quiet hits again), and the hit, served, still counts. A
    /// read handle's hit (`len` with `Hit::HELD`) counts in `pinned_reads`; one the hit rule
    /// spared the policy (`Hit::UNTOLD`) is only counted.
    pub fn commit_hit(&mut self, key: Key, len: u32, ns: u32) {
        use crate::tier::optimistic::Hit;
        self.stats.lookups += 1;
        self.stats.hits += 1;
        self.stats.bytes_read += (len & !Hit::FLAGS) as u64;
        match len & Hit::HELD {
            0 => self.stats.unlocked_hits += 1,
            _ => self.stats.pinned_reads += 1,
        }
        if let Some(histograms) = &mut self.latency {
            histograms[Operation::Read as usize].saturating_record(ns as u64);
        }
        if len & Hit::UNTOLD != 0 {
            // The hit rule spared the policy this hit (see `crate::tier::optimistic`): only counted.
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

    /// Releases a pin (of a read handle).
    pub fn unpin(&mut self, tier: usize, slot: u32) {
        self.tiers[tier].unpin(slot, &mut self.stats);
    }

    /// Gives back a slot of `tier` freed while pinned, whose last pin went without the lock
    /// (`crate::pins::Unpinned::Zombie`).
    pub fn give_back_zombie(&mut self, tier: usize, slot: u32) {
        self.tiers[tier].give_back_zombie(slot, &mut self.stats);
    }

    /// Hands the staged writes held back (see `Staging::stage`) to the write-behind threads.
    pub fn release_run(&mut self) {
        self.staging.release_run();
    }

    /// How the shard runs, as its cache's builder settles it: shard `index` of a cache whose
    /// file and flash writes go to `behind`, if they are written behind; whether latency is
    /// recorded, and whether tier reads are timed (for a controller fed measurements).
    pub fn configure(
        &mut self,
        (behind, index): (Option<Arc<WriteBehind>>, usize),
        record_latency: bool,
        time_tier_reads: bool,
    ) {
        self.staging = Staging::new(behind, index);
        if record_latency {
            let histograms = [crate::latency::histogram(), crate::latency::histogram()];
            self.latency = Some(Box::new(histograms));
        }
        self.time_tier_reads = time_tier_reads;
    }

    /// The shard's counters.
    pub fn stats(&self) -> &Stats {
        &self.stats
    }

    /// Read and write latency, when recorded.
    pub fn latency(&self) -> Option<&[hdrhistogram::Histogram<u64>; 2]> {
        self.latency.as_deref()
    }

    /// The policy's hits the hit rule spared it (`tiercache_policy::told`).
    pub fn untold_hits(&self) -> u64 {
        self.policy.untold_hits()
    }

    /// The Open CAS mode the policy runs in, if any.
    pub fn mode(&self) -> Option<CacheMode> {
        self.policy.cache_mode()
    }

    /// A hint that `key` will be decided on soon (the policy prefetches its metadata).
    #[inline]
    pub fn prefetch(&self, key: Key) {
        self.policy.prefetch(key);
    }

    /// Feeds the policy's controller the measurement of the interval just ended.
    pub fn observe(&mut self, interval: &Interval) {
        self.policy.observe(interval);
    }

    /// The policy's adaptive knobs now.
    pub fn knobs(&self) -> Vec<(&'static str, f64)> {
        self.policy.knobs()
    }

    /// The pins of each tier's slots, tier by tier (shared with read handles).
    pub fn pins(&self) -> impl Iterator<Item = Arc<crate::pins::Pins>> + '_ {
        self.tiers.iter().map(|t| t.pins.clone())
    }

    /// Publishes the upper tier's slots for hits served without the lock; see
    /// [`crate::tier::optimistic`].
    pub fn publish(
        &mut self,
        sets: (&Arc<crate::tier::optimistic::Sets>, usize),
    ) -> Option<crate::tier::optimistic::SlotTable> {
        let pins = self.tiers[0].pins.clone();
        self.tiers[0].region.publish(sets, pins)
    }

    /// Whether the policy's hits are quiet (see `Policy::quiet_hits`).
    pub fn quiet_hits(&self) -> bool {
        self.policy.quiet_hits()
    }
}
