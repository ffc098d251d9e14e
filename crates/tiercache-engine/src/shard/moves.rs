//! Blocks that change place or content beyond a plain insert: overwrites (in place, or as a
//! new copy where a crash or a reader could see the old one torn, and write-around's update
//! step), moves between tiers, drops (a delete's step, and blocks the policy must hear are
//! gone), a read-through's reserved slot filled when its load comes back, and, with size
//! classes, a page emptied for another class and a block dropped when its value changes class.

use std::time::Instant;

use tiercache_core::{Key, Op, Request, TierId};
use tiercache_policy::Policy;

use super::{ReadOutcome, Shard};
use crate::error::EngineError;
use crate::latency::Operation;
use crate::tier::Place;

impl Shard {
    /// Moves every block at rest in the volatile `tier` down into `below`, where the policy
    /// will (`Policy::move_down`), as if `tier` had evicted it: what `below` gives up for
    /// them goes as its evictions do. For a clean stop of a cache that keeps nothing dirty,
    /// whose DRAM a restart would otherwise find empty. Blocks in passing (loading, or written
    /// behind) stay.
    pub fn move_down_all(&mut self, tier: TierId, below: TierId) -> Result<(), EngineError> {
        let keys: Vec<Key> = self
            .places
            .iter()
            .filter(|(_, p)| p.tier == tier.0 && !p.filling && !p.staged && !p.dirty)
            .map(|(key, _)| *key)
            .collect();
        let now_us = self.now_us;
        let saved = std::mem::take(&mut self.decision);
        for key in keys {
            self.policy.move_down(key, below, now_us, &mut self.decision);
        }
        let result = self.apply(u64::MAX, None);
        self.decision = saved;
        result.map(|_| ())
    }

    /// Overwrites a resident key's block: in place on memory tiers; into a fresh slot on file
    /// and flash tiers, whose blocks a running read may hold, and wherever a read handle pins
    /// the slot or the value changed size class.
    /// False if the write failed (see `store_or_fail`): the caller drops the key.
    pub(super) fn overwrite(&mut self, key: Key, data: &[u8], dirty: bool) -> bool {
        if self.spans_pages(key) {
            return self.overwrite_span(key, data);
        }
        self.written_in_flight(key);
        // On a placed tier, a block whose set has no slot for a new copy (the spare ones busy,
        // or taken by a block this decision moved in while it let this one go) is written in
        // place, made clean first: a crash that tears it then loses nothing synced.
        let in_place = match self.place(key) {
            Some(p) if self.tiers[p.tier as usize].placed.is_some() => {
                !self.has_fresh_slot(p.tier as usize, key, p.slot)
            }
            _ => false,
        };
        if in_place && self.place(key).is_some_and(|p| p.dirty) {
            self.write_back(key);
        }
        let old = self.take_place(key).expect("an overwrite of a resident key");
        let tier = old.tier as usize;
        let mut place = Place { dirty, ..Place::new(old.tier, old.slot) };
        let class = self.class_of(data.len() as u32);
        let same_class = self.class_at(tier, old.slot) == class;
        // A dirty block is the only copy of its data: it is never overwritten in place, where
        // a crash could tear it, but copied, and its slot freed once the copy is written (a
        // process killed between the two leaves the old copy, never neither).
        let copy = match self.tiers[tier].placed {
            Some(_) => !in_place,
            None => {
                self.tiers[tier].region.is_io()
                    || !same_class
                    || old.dirty
                    || self.held_for_overwrite(tier, old.slot, key)
            }
        };
        if copy {
            place.slot = match self.tiers[tier].placed {
                Some(_) => self.placed_slot(tier, key, Some(old.slot)),
                None => self.allocate(TierId(old.tier), class, key),
            };
            // Readers without the lock stop finding the old copy before the new one is found.
            self.tiers[tier].region.vacate(old.slot, key);
        } else {
            // In place, a crash may tear the block: what was written back from it must be
            // durable on the backing device first, and no older copy may be left to come back.
            self.sync_backing();
            self.settle_erasures(key);
            // Never a pinned block on a placed tier: a pin leaves its set no other busy slot
            // (`can_pin`), and a write's decision moves at most one block into the set, so of
            // the two or more free slots beside the pinned one, one is neither pinned nor
            // waiting for an action of this decision. (On the published tier a reader without
            // the lock may pin the slot after `held_for_overwrite` looked, but only to find
            // the block unpublished and let go unread: no assertion there.)
            if self.tiers[tier].placed.is_some() {
                assert!(!self.tiers[tier].pins.held(old.slot), "a pinned block in place");
            }
            let placed = self.policy.placement_ref(TierId(old.tier));
            if placed.is_some_and(|sets| sets.slot_of(key).is_none()) {
                // Let go by the policy in this decision: the block stays where the action
                // that takes it will look.
                self.tiers[tier].placed_mut().pending.push((key, old.slot));
            }
        }
        if old.staged {
            self.staging.remove(key);
        }
        let written = self.store_or_fail(place, key, data);
        match (copy, old.dirty) {
            (true, true) => self.tiers[tier].limbo.push((old.slot, key)),
            (true, false) => self.free_slot(tier, old.slot, key),
            (false, _) => {}
        }
        self.stats.updates += written as u64;
        written
    }

    /// Whether a read holds `slot` of `tier`, where `key`'s block is about to be overwritten
    /// in place. On the published tier, where read handles pin without the lock, the block is
    /// unpublished first (`crate::pins`), so that no reader can pin it unseen; the write
    /// publishes it again.
    fn held_for_overwrite(&self, tier: usize, slot: u32, key: Key) -> bool {
        let store = &self.tiers[tier];
        if !store.region.is_published() {
            return store.pins.held(slot);
        }
        store.region.vacate(slot, key);
        store.pins.held_once_unpublished(slot)
    }

    /// Moves a block between tiers; false if its bytes did not verify (it is then only
    /// reserved in the lower tier, and the caller drops it).
    pub(super) fn relocate(
        &mut self,
        key: Key,
        from: TierId,
        to: TierId,
        size: u32,
    ) -> Result<bool, EngineError> {
        if self.spans_pages(key) {
            return Ok(self.relocate_span(key, from, to));
        }
        let old = self.take_place(key).expect("a move of a resident key");
        debug_assert_eq!(old.tier, from.0);
        // The block keeps its class (the policy's size is that class's).
        let class = self.class_at(from.index(), old.slot);
        debug_assert!(!self.classes || self.block_size >> class == size, "key {key}: size {size}");
        let slot = self.allocate(to, class, key);
        let mut new = Place { filling: old.filling, dirty: old.dirty, ..Place::new(to.0, slot) };
        let mut good = true;
        if !old.filling {
            // Grown, never shrunk: an object's move may have made it larger, and zeroing it
            // again for every block would cost more than the copy.
            let mut scratch = std::mem::take(&mut self.scratch);
            let bytes = self.tiers[from.index()].region.value_bytes();
            if scratch.len() < bytes {
                scratch.resize(bytes, 0);
            }
            let read = self.read_block(key, old, &mut scratch[..bytes]);
            // The block leaves its place: a write of it still behind is not its copy any more.
            self.staging.remove(key);
            match read.map(|len| (len, self.write_block(new, key, &scratch[..len]))) {
                Ok((_, Err(_))) => {
                    // The tier's write failed: dropped like a block that did not check out.
                    self.stats.io_errors += 1;
                    good = false;
                }
                Ok((len, Ok(written))) => {
                    new = written;
                    self.count_move(from, to, len);
                }
                Err(fault) => {
                    self.count_fault(&fault);
                    good = false;
                }
            }
            self.scratch = scratch;
        }
        if old.dirty && good {
            self.tiers[from.index()].region.vacate(old.slot, key);
            self.tiers[from.index()].limbo.push((old.slot, key));
        } else {
            self.free_slot(from.index(), old.slot, key);
        }
        self.set_place(key, new);
        Ok(good)
    }

    /// Counts a block of `len` bytes moved from tier `from` to `to`.
    pub(super) fn count_move(&mut self, from: TierId, to: TierId, len: usize) {
        if to > from {
            self.stats.demotions += 1;
            self.stats.bytes_demoted += len as u64;
        } else {
            self.stats.promotions += 1;
            self.stats.bytes_promoted += len as u64;
        }
        if self.tiers[to.index()].region.persistent() {
            self.stats.persistent_bytes_written += len as u64;
        }
    }

    /// The page with the fewest live blocks on tier `t` that dropping its blocks empties, and
    /// the keys to drop: pages with pinned slots are skipped, and pages holding a key the
    /// current decision names (`requested` among them), and pages with a slot in use that no
    /// resident key holds, which dropping keys would not free: an overwrite's old copy while
    /// its new one is placed (its read handle gone since the overwrite looked), or a copy held
    /// for a sync. Such a page, chosen, would stay full, and the caller would choose it again.
    pub(super) fn page_to_empty(&self, t: usize, requested: Key) -> Option<(u32, Vec<Key>)> {
        let region = &self.tiers[t].region;
        let chunks = region.chunks();
        let named = |k: Key| k == requested || self.decision.actions.iter().any(|a| a.key() == k);
        let mut best: Option<(u16, u32)> = None;
        for page in 0..region.pages() as u32 {
            let live = self.tiers[t].space.live[page as usize];
            if live == 0 || best.is_some_and(|(fewest, _)| live >= fewest) {
                continue;
            }
            let slots = page * chunks..page * chunks + (1 << region.page_class(page));
            if slots.clone().any(|s| self.tiers[t].pins.held(s) || self.gathering.contains(&s)) {
                continue;
            }
            let mut held = 0;
            let mut holds_named = false;
            for s in slots {
                let k = self.tiers[t].owners[s as usize];
                if self.holds_slot(t, k, s) {
                    held += 1;
                    holds_named |= named(k);
                }
            }
            if held == live && !holds_named {
                best = Some((live, page));
            }
        }
        let (_, page) = best?;
        let slots = page * chunks..page * chunks + (1 << region.page_class(page));
        let mut victims: Vec<Key> = slots
            .filter(|&s| self.holds_slot(t, self.tiers[t].owners[s as usize], s))
            .map(|s| self.tiers[t].owners[s as usize])
            .collect();
        victims.dedup();
        Some((page, victims))
    }

    /// With size classes, drops `key` if resident in another class than a value of `len`
    /// bytes takes, so the write that follows places it anew: a block keeps its class while
    /// resident (hierarchies keep the size a block was admitted with).
    pub(super) fn drop_if_reclassed(&mut self, key: Key, len: usize) {
        let new = self.size_of_value(len as u32);
        if self.sized() && self.stored_size(key).is_some_and(|stored| stored != new) {
            self.drop_key(key);
        }
    }

    /// Drops a resident key (a block that did not check out, or one emptied out of a page),
    /// deciding a `Delete` so the policy stays in step.
    pub(super) fn drop_key(&mut self, key: Key) {
        self.lose(key);
        let saved = std::mem::take(&mut self.decision);
        self.decide_sized(&Request::new(self.now_us, key, 0, Op::Delete));
        self.apply(key, None).expect("dropping a block does no I/O");
        self.decision = saved;
    }

    /// Overwrites `req.key`'s block with `value` if it is cached; never admits it
    /// (write-around). Decided as a lookup (`req`): a cached key's state moves as on a read
    /// hit. Whether it was cached.
    pub fn update(
        &mut self,
        req: &Request,
        value: &[u8],
        started: Option<Instant>,
    ) -> Result<bool, EngineError> {
        let key = req.key;
        if self.sized() {
            // A value that changes class is dropped rather than updated (write-around admits
            // nothing): the backing store has it.
            self.drop_if_reclassed(key, value.len());
        }
        self.decide(req);
        self.apply(key, None)?;
        self.stats.puts += 1;
        let cached = self.decision.hit.is_some();
        if cached && !self.overwrite(key, value, false) {
            self.drop_key(key);
        }
        self.record(Operation::Write, started);
        Ok(cached)
    }

    /// Drops `req.key` if cached, as the policy decides a delete (`req`); with `forget_lost`,
    /// a loss of its dirty data is forgotten too (its data was discarded).
    pub fn delete(&mut self, req: &Request, forget_lost: bool) {
        if forget_lost {
            self.lost.remove(&req.key);
        }
        self.decide(req);
        self.apply(req.key, None).expect("dropping a block does no I/O");
    }

    /// Ends a read-through miss: the value `load` fetched (its length, copied into `buf`) fills
    /// the slot reserved for it (`fill`, from [`Read::Load`]) if it still waits; a failed load
    /// gives the reservation up (decided as a delete at `now_us`) and is the error.
    pub fn finish_load(
        &mut self,
        key: Key,
        (fill, loaded): (Option<u64>, std::io::Result<usize>),
        buf: &[u8],
        (started, now_us): (Option<Instant>, u64),
    ) -> Result<ReadOutcome, EngineError> {
        self.record(Operation::Read, started);
        match loaded {
            Ok(len) => {
                let len = len.min(buf.len()).min(self.block_size as usize);
                if let Some(load) = fill {
                    self.fill(key, load, &buf[..len])?;
                }
                Ok(ReadOutcome { hit: false, len })
            }
            Err(source) => {
                if fill.is_some_and(|load| self.is_filling(key, load)) {
                    self.decide(&Request::new(now_us, key, self.block_size, Op::Delete));
                    self.apply(key, None)?;
                }
                Err(EngineError::Io {
                    path: "<loader>".into(),
                    action: "loading a missed block failed",
                    source,
                })
            }
        }
    }

    /// Fills a slot reserved by read-through `load`, if it is still waiting for it.
    pub(super) fn fill(&mut self, key: Key, load: u64, data: &[u8]) -> Result<(), EngineError> {
        match self.places.get(&key).copied() {
            Some(place) if self.is_filling(key, load) => {
                if !self.store_or_fail(Place { filling: false, ..place }, key, data) {
                    self.drop_key(key);
                }
                Ok(())
            }
            _ => Ok(()),
        }
    }

    pub(super) fn is_filling(&self, key: Key, load: u64) -> bool {
        self.places.get(&key).is_some_and(|p| p.filling) && self.fills.get(&key) == Some(&load)
    }
}

#[cfg(test)]
mod tests {
    use tiercache_core::TierId;
    use tiercache_policy::PolicyConfig;

    use crate::tier::MEMORY_SLACK_SLOTS;
    use crate::CacheBuilder;

    const BLOCK: usize = 4096;

    /// An overwrite copies a block whose slot a read handle pins; the handle may go before
    /// the copy's slot is found. The old slot is then in use, unpinned, and held by no key
    /// (its key's place is out while it moves), so dropping keys cannot empty its page: that
    /// page must not be chosen, though it has the fewest live slots, or the allocation would
    /// choose it again and again with the shard locked (CI's concurrent size-class test hung
    /// so once).
    #[test]
    fn a_page_chosen_to_empty_is_one_that_dropping_its_blocks_frees() {
        let cache = CacheBuilder::new(PolicyConfig::Lru)
            .block_size(BLOCK)
            .shards(1)
            .capacity_bytes(16 * BLOCK as u64)
            .size_classes(4)
            .build()
            .unwrap();
        // Sixteen pages of eight 512-byte values, least recently used four of each page, then
        // whole blocks in the unsplit pages beyond them (the slack), each evicting eight of
        // those: no page is free, and the free chunks are all 512 bytes.
        for key in 0..128u64 {
            cache.put(key, &[key as u8; 500]).unwrap();
        }
        let mut order: Vec<u64> = (0..128).collect();
        order.sort_by_key(|k| (k % 8, *k));
        let mut buf = vec![0u8; BLOCK];
        for key in order {
            cache.get(key, &mut buf).unwrap();
        }
        let whole: Vec<u64> = (1000..1000 + MEMORY_SLACK_SLOTS).collect();
        for &key in &whole {
            cache.put(key, &[1; BLOCK]).unwrap();
        }
        // Key 4's page with key 4 alone in it.
        let page_of = |key| cache.with_shard(0, |shard| shard.place(key).map(|p| p.slot / 8));
        let lonely = page_of(4).unwrap();
        for key in (0..128).filter(|&k| k != 4 && page_of(k) == Some(lonely)) {
            cache.invalidate(key);
        }
        cache.with_shard(0, |shard| {
            let before = shard.stats.space_evictions;
            // Key 4's overwrite with a whole block, from where its old copy is out of its
            // place to where the new copy's slot is found.
            let old = shard.take_place(4).unwrap();
            let slot = shard.allocate(TierId(0), 0, 4);
            assert_ne!(slot / 8, lonely, "the old copy's page is in use");
            let emptied = whole.iter().filter(|&&k| !shard.contains(k)).count();
            assert_eq!(shard.stats.space_evictions - before, 1, "one page emptied");
            assert_eq!(emptied, 1, "the page emptied is a whole block's, the fewest live");
            // Back as it was: the new slot given back, key 4 in its old one.
            shard.free_slot(0, slot, 4);
            shard.set_place(4, old);
        });
        assert_eq!(cache.get(4, &mut buf), Some(500));
        assert_eq!(&buf[..500], &[4u8; 500][..]);
    }
}
