//! One shard: a policy instance, the map from key to the slot that holds it, and the shard's
//! part of each tier, top down (`TierStore`: its region, free slots, pins, and slots held for
//! a sync). Everything here runs under the shard's lock. `apply` is where a decision becomes
//! bytes: evict, invalidate, insert, update and move; the rest is in submodules, one concern
//! each: where a block is (`places`), serving hits (`hits`), writing dirty blocks back
//! (`write_back`), slots held for a sync (`syncing`), and recovery (`recovery`).

use std::sync::Arc;

use tiercache_core::{Action, Decision, Key, KeyMap, KeySet, Op, Request, TierId};
use tiercache_policy::{AnyPolicy, Policy};

use crate::behind::{Job, WriteBehind};
use crate::block::Stamp;
use crate::cleaner::{Batch, Flight, Flights};
use crate::device::Device;
use crate::error::EngineError;
use crate::io::{ReadFault, Staged};
use crate::region::Region;
use crate::stats::Stats;
use crate::tier::Place;
use crate::tier_store::TierStore;

mod hits;
mod places;
mod recovery;
mod syncing;
mod write_back;

pub use hits::{Held, Served};
pub use recovery::Scanned;

/// Laid out in order: what every request writes (the decision, the time, the first counters)
/// comes first, so it shares the cache line of the lock in front of the shard. With several
/// cores, each line a request writes is one more the other cores may hold.
#[repr(C)]
pub struct Shard {
    pub decision: Decision,
    /// Time of the request being decided.
    now_us: u64,
    pub stats: Stats,
    pub policy: AnyPolicy,
    places: KeyMap<Place>,
    /// The read-through load each filling slot waits for (`Place::filling`): apart from the
    /// places, which it would make three times larger, and nearly always empty.
    fills: KeyMap<u64>,
    tiers: Vec<TierStore>,
    classes: bool,
    block_size: u32,
    loads: u64,
    /// The sequence number of the shard's last block write (`crate::block::Stamp`).
    seq: u64,
    /// A block's bytes on their way between tiers.
    scratch: Vec<u8>,
    /// Read and write latency, when recorded.
    pub latency: Option<Box<[hdrhistogram::Histogram<u64>; 2]>>,
    /// Where file and flash writes go to be written with the shard unlocked, if they do, and
    /// this shard's index there.
    pub behind: Option<(Arc<WriteBehind>, usize)>,
    /// The blocks whose writes are behind, by key.
    staging: KeyMap<Arc<Staged>>,
    /// Staged writes held back while they make a run of adjacent slots (see `gather_write`).
    run: Vec<Job>,
    /// Where dirty blocks are written back (write-back and write-only modes), once attached.
    pub backing: Option<Arc<dyn Device>>,
    /// A block was written back since the backing device last synced: before a slot is freed
    /// (marked free on its tier), the backing device syncs, so no crash can find a block
    /// neither in the cache nor durable on the backing device.
    backing_unsynced: bool,
    /// Keys whose dirty data was lost (unreadable, or dropped without a write-back): reading
    /// one fails with `EngineError::DataLost` until it is written again, rather than serve
    /// the backing device's older data as current.
    pub lost: KeySet,
    /// Whether any tier is placed (see `TierStore::placed`).
    any_placed: bool,
    /// While the cache drains every shard in device order, or its cleaner gathers: the keys
    /// the policy writes back, whose writes the cache does itself (`deferred_write_backs`).
    deferred: Option<Vec<Key>>,
    /// The cache's cleaner, shared by every shard (see `crate::cleaner`).
    pub cleaner: Option<Arc<Flights>>,
    /// Blocks whose copies the cleaner is writing back with the shard unlocked: dirty until it
    /// has, and settled before anything else writes them back or drops them.
    flights: KeyMap<Flight>,
}

impl Shard {
    pub fn new(mut policy: AnyPolicy, regions: Vec<Region>, block_size: usize) -> Shard {
        let classes = regions.iter().any(|r| r.chunks() > 1);
        let mut any_placed = false;
        let tiers = regions
            .into_iter()
            .enumerate()
            .map(|(t, region)| {
                let sets = policy.placement(TierId(t as u8)).filter(|_| region.is_compact());
                let placed = sets.map(|sets| {
                    sets.track_vacated(true);
                    assert_eq!(
                        sets.slots() as u64,
                        region.slots(),
                        "a placed region is the policy's slots"
                    );
                    (sets.stride(), sets.spare())
                });
                any_placed |= placed.is_some();
                TierStore::new(region, placed)
            })
            .collect();
        Shard {
            any_placed,
            deferred: None,
            cleaner: None,
            flights: KeyMap::default(),
            policy,
            decision: Decision::new(),
            places: KeyMap::default(),
            fills: KeyMap::default(),
            tiers,
            classes,
            block_size: block_size as u32,
            loads: 0,
            seq: 0,
            stats: Stats::default(),
            scratch: Vec::new(),
            now_us: 0,
            latency: None,
            behind: None,
            staging: KeyMap::default(),
            run: Vec::new(),
            backing: None,
            backing_unsynced: false,
            lost: KeySet::default(),
        }
    }

    /// Records an operation that started at `started`, now that it ends.
    #[inline]
    pub fn record(&mut self, op: crate::latency::Operation, started: Option<std::time::Instant>) {
        if let (Some(histograms), Some(started)) = (&mut self.latency, started) {
            histograms[op as usize].saturating_record(started.elapsed().as_nanos() as u64);
        }
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
    fn settle_flight(&mut self, key: Key) {
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
    fn written_in_flight(&mut self, key: Key) {
        if let Some(flight) = self.flights.get_mut(&key) {
            flight.stale = true;
        }
    }

    /// Lets the policy decide `req`. With size classes, the size the policy sees is a class's:
    /// a write's value (`req.size` its length) takes the smallest class that holds it; any
    /// other request is sized as the key's stored block, or a whole block if not resident.
    pub fn decide(&mut self, req: &Request) {
        let size = match req.op {
            _ if !self.has_classes() => req.size,
            Op::Write => self.class_size(req.size),
            _ => self.stored_size(req.key).unwrap_or(self.block_size),
        };
        self.decide_sized(&Request { size, ..*req });
    }

    /// Lets the policy decide `req` with its size as given.
    pub fn decide_sized(&mut self, req: &Request) {
        self.decide_told(req, true);
    }

    /// Lets the policy decide `req`. Where the policy is told a key's first hit an epoch
    /// (`tiercache_policy::told`), the published table follows it: the epoch's tag, and with
    /// `stamp` the tag of a read hit decided here (hits served without the lock stamp their
    /// own), so readers without the lock spare the policy what it would not be told.
    pub fn decide_told(&mut self, req: &Request, stamp: bool) {
        self.now_us = req.time_us;
        self.decision.clear();
        self.policy.decide(req, &mut self.decision);
        if let Some(tag) = self.policy.hit_tag() {
            let read_hit =
                matches!(req.op, Op::Read | Op::Lookup) && self.decision.hit == Some(TierId(0));
            self.tiers[0].region.follow_hit_rule(tag, (stamp && read_hit).then_some(req.key));
        }
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

    fn release(&mut self, key: Key, tier: TierId) {
        self.settle_flight(key);
        let place = self.take_place(key).expect("the policy drops only resident keys");
        debug_assert_eq!(place.tier, tier.0, "key {key} dropped from the wrong tier");
        if place.staged {
            self.staging.remove(&key);
        }
        if place.filling {
            self.fills.remove(&key);
        }
        self.free_slot(place.tier as usize, place.slot, key);
    }

    /// Releases a pin (of an unlocked read or write, or a read handle).
    pub fn unpin(&mut self, tier: usize, slot: u32) {
        self.tiers[tier].unpin(slot, &mut self.stats);
    }

    /// Gives back a slot of `tier` freed while pinned, whose last pin went without the lock
    /// (`crate::pins::Unpinned::Zombie`).
    pub fn give_back_zombie(&mut self, tier: usize, slot: u32) {
        self.tiers[tier].give_back_zombie(slot, &mut self.stats);
    }

    /// The pins of each tier's slots, tier by tier (shared with read handles).
    pub fn pins(&self) -> impl Iterator<Item = Arc<crate::pins::Pins>> + '_ {
        self.tiers.iter().map(|t| t.pins.clone())
    }

    /// Overwrites a resident key's block: in place on memory tiers; into a fresh slot on file
    /// and flash tiers, whose blocks a running read may hold, and wherever a read handle pins
    /// the slot or the value changed size class.
    /// False if the write failed (see `store_or_fail`): the caller drops the key.
    fn overwrite(&mut self, key: Key, data: &[u8], dirty: bool) -> bool {
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
            self.staging.remove(&key);
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

    /// Writes a block into `place` and records it as `key`'s. False if the write failed (an
    /// I/O error of a file or flash tier), counted in `io_errors`: the place is recorded all
    /// the same, unreadable, for the caller to drop once the decision's other actions are
    /// done, so that the policy hears of it and stays in step. The caller's data is safe in the
    /// backing store; the cache just does not keep it.
    fn store_or_fail(&mut self, place: Place, key: Key, data: &[u8]) -> bool {
        match self.store(place, key, data) {
            Ok(stored) => {
                self.set_place(key, stored);
                self.fills_done(key);
                true
            }
            Err(_) => {
                self.stats.io_errors += 1;
                self.set_place(key, place);
                self.fills_done(key);
                false
            }
        }
    }

    /// `key`'s slot holds data now (or never will): no load fills it any more.
    fn fills_done(&mut self, key: Key) {
        if !self.fills.is_empty() {
            self.fills.remove(&key);
        }
    }

    /// A free slot of `class` on `tier` for `key`. With size classes, when no page is free and
    /// no free chunk is of this class, the page with the fewest live blocks (none pinned, none
    /// the current decision moves) is emptied first: its blocks are dropped and the policy told.
    fn allocate(&mut self, tier: TierId, class: u8, key: Key) -> u32 {
        let t = tier.index();
        if self.tiers[t].placed.is_some() {
            return self.placed_slot(t, key, None);
        }
        loop {
            if let Some(slot) = self.tiers[t].take(class, key) {
                return slot;
            }
            if !self.tiers[t].limbo.is_empty() {
                // The free slots are all held for a sync: sync the tier now, then free them.
                self.free_held_slots(t);
                continue;
            }
            assert!(self.tiers[t].region.chunks() > 1, "the policy is sized to the slots");
            let victims = self.page_to_empty(t, key).expect(
                "a shard's tier has at least SIZE_CLASS_PAGES_MIN pages, more than its pins and \
                 one decision can hold",
            );
            for victim in victims {
                self.stats.space_evictions += 1;
                self.drop_key(victim);
            }
        }
    }

    /// The keys to drop to empty the page with the fewest live blocks on tier `t` (skipping
    /// pages with pinned slots and pages holding a key the current decision names).
    fn page_to_empty(&self, t: usize, requested: Key) -> Option<Vec<Key>> {
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
            if slots.clone().any(|s| self.tiers[t].pins.held(s)) {
                continue;
            }
            let holds_named = slots.clone().any(|s| {
                let k = self.tiers[t].owners[s as usize];
                self.places.get(&k).is_some_and(|p| p.tier as usize == t && p.slot == s) && named(k)
            });
            if !holds_named {
                best = Some((live, page));
            }
        }
        let (_, page) = best?;
        let slots = page * chunks..page * chunks + (1 << region.page_class(page));
        Some(
            slots
                .map(|s| self.tiers[t].owners[s as usize])
                .filter(|k| {
                    self.places
                        .get(k)
                        .is_some_and(|p| p.tier as usize == t && p.slot / chunks == page)
                })
                .collect(),
        )
    }

    /// Applies the decision in `self.decision`. `value` is the data of a write; a read-through
    /// miss has none yet, and its insert reserves the slot for the load returned.
    pub fn apply(&mut self, key: Key, value: Option<&[u8]>) -> Result<Option<u64>, EngineError> {
        self.collect_vacated();
        let mut load = None;
        let mut lost = Vec::new();
        let mut i = 0;
        while i < self.decision.actions.len() {
            let action = self.decision.actions[i];
            i += 1;
            match action {
                Action::Evict { tier, key, .. } => {
                    // The policy wrote a dirty block back first; if it did not (or that
                    // failed), the block is written back now, never dropped dirty.
                    if self.place(key).is_some_and(|p| p.dirty) {
                        self.write_back(key);
                    }
                    if self.place(key).is_some_and(|p| p.dirty) {
                        self.lose(key);
                    }
                    self.release(key, tier);
                    self.stats.evictions += 1;
                }
                Action::Invalidate { tier, key, .. } => {
                    self.release(key, tier);
                    self.stats.invalidations += 1;
                }
                Action::Insert { tier, key: k, size, dirty } => {
                    debug_assert_eq!(k, key, "policies insert the requested key");
                    let class = self.class_of(size);
                    let slot = self.allocate(tier, class, key);
                    self.stats.inserts += 1;
                    let mut place = Place::new(tier.0, slot);
                    // Only written data is dirty: a read's insert is the backing's own.
                    place.dirty = dirty && value.is_some();
                    match value {
                        Some(data) => {
                            if !self.store_or_fail(place, key, data) {
                                lost.push(key);
                            }
                        }
                        None => {
                            self.loads += 1;
                            load = Some(self.loads);
                            place.filling = true;
                            self.fills.insert(key, self.loads);
                            self.set_place(key, place);
                        }
                    }
                }
                Action::Update { key: k, dirty, .. } => {
                    if value.is_some_and(|data| !self.overwrite(k, data, dirty)) {
                        lost.push(k);
                    }
                }
                Action::Move { key: k, from, to, size } => {
                    if !self.relocate(k, from, to, size)? {
                        lost.push(k);
                    }
                }
                Action::Reject { reason, .. } => self.stats.rejections[reason.index()] += 1,
                Action::WriteBack { key: k, .. } if self.deferred.is_some() => {
                    self.deferred.as_mut().expect("deferring").push(k);
                }
                Action::WriteBack { key: k, .. } => {
                    // Write-backs of consecutive blocks that follow one another (Hibachi's
                    // sequential runs, section IV-E) go to the backing device as one write.
                    let run = self.decision.actions[i..]
                        .iter()
                        .zip(k + 1..)
                        .take_while(
                            |(a, next)| matches!(a, Action::WriteBack { key, .. } if key == next),
                        )
                        .count();
                    if run > 0 && self.write_back_run(k, run as u64 + 1) {
                        i += run;
                        continue;
                    }
                    if !self.write_back(k) {
                        lost.push(k);
                    }
                }
            }
        }
        // A block that failed its checksum on the way down, or whose write failed, is dropped,
        // and the policy told.
        for k in lost {
            self.drop_key(k);
        }
        Ok(load)
    }

    /// Moves a block between tiers; false if its bytes did not verify (it is then only
    /// reserved in the lower tier, and the caller drops it).
    fn relocate(
        &mut self,
        key: Key,
        from: TierId,
        to: TierId,
        size: u32,
    ) -> Result<bool, EngineError> {
        let old = self.take_place(key).expect("a move of a resident key");
        debug_assert_eq!(old.tier, from.0);
        // The block keeps its class (the policy's size is that class's).
        let class = self.class_at(from.index(), old.slot);
        debug_assert!(!self.classes || self.block_size >> class == size, "key {key}: size {size}");
        let slot = self.allocate(to, class, key);
        let mut new = Place { filling: old.filling, dirty: old.dirty, ..Place::new(to.0, slot) };
        let mut good = true;
        if !old.filling {
            let mut scratch = std::mem::take(&mut self.scratch);
            scratch.resize(self.tiers[from.index()].region.value_bytes(), 0);
            let read = self.read_block(key, old, &mut scratch);
            // The block leaves its place: a write of it still behind is not its copy any more.
            self.staging.remove(&key);
            match read.map(|len| (len, self.write_block(new, key, &scratch[..len]))) {
                Ok((_, Err(_))) => {
                    // The tier's write failed: dropped like a block that did not check out.
                    self.stats.io_errors += 1;
                    good = false;
                }
                Ok((len, Ok(written))) => {
                    new = written;
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

    /// Writes a block into `place`, counting its bytes; returns the place as it now stands.
    fn store(&mut self, place: Place, key: Key, data: &[u8]) -> Result<Place, EngineError> {
        let place = self.write_block(place, key, data)?;
        self.stats.bytes_written += data.len() as u64;
        if self.tiers[place.tier as usize].region.persistent() {
            self.stats.persistent_bytes_written += data.len() as u64;
        }
        Ok(place)
    }

    /// Writes `data` for `key` into `place`'s slot: staged for the write-behind threads when
    /// the tier is a file or flash one and the shard may pin one more of its slots; at once
    /// otherwise. Returns the place, marked staged if the write is behind.
    fn write_block(&mut self, place: Place, key: Key, data: &[u8]) -> Result<Place, EngineError> {
        let tier = place.tier as usize;
        self.seq += 1;
        let stamp = Stamp { seq: self.seq, dirty: place.dirty };
        if let Some((_, shard)) = self.behind {
            // The same room rule as unlocked reads: pinned slots may all be freed meanwhile,
            // and an overwrite's copy must still find a slot.
            if self.can_pin(tier, place.slot) {
                if let Some(staged) =
                    self.tiers[tier].region.begin_write(place.slot, key, data, stamp)
                {
                    let staged = Arc::new(staged);
                    let place = Place { staged: true, ..place };
                    self.tiers[tier].pin(place.slot);
                    self.staging.insert(key, staged.clone());
                    self.gather_write(Job { shard, key, place, staged });
                    self.stats.writes_behind += 1;
                    return Ok(place);
                }
            }
        }
        self.tiers[tier].region.write(place.slot, key, data, stamp)?;
        Ok(Place { staged: false, ..place })
    }

    /// Queues a staged write for the write-behind threads, holding it back while it continues
    /// a run of adjacent slots on its tier, so that the run reaches the device as one write
    /// (see `crate::behind`). A flash tier hands its slots out in log order (see
    /// `tier_store::Log`), so the writes of a tier run by the `log` policy follow one another
    /// (LRU's, which free slots wherever its victims lie, seldom do). The run goes when the
    /// next write does not continue it, when it is full, at the next tick and at shutdown;
    /// until then its blocks are read from their staged copies, as any block behind is.
    fn gather_write(&mut self, job: Job) {
        let tier = job.place.tier as usize;
        let continues = self.run.last().is_some_and(|last| {
            last.place.tier == job.place.tier && last.place.slot + 1 == job.place.slot
        });
        if !continues {
            self.release_run();
        }
        self.run.push(job);
        if self.run.len() >= self.tiers[tier].region.run_slots() {
            self.release_run();
        }
    }

    /// Hands the staged writes held back (see `gather_write`) to the write-behind threads.
    pub fn release_run(&mut self) {
        if let Some((behind, _)) = &self.behind {
            behind.submit_all(self.run.drain(..));
        }
    }

    /// Ends a write-behind: the slot is unpinned and, if `key` still lives there, its block is
    /// now read from the tier, or dropped (and the policy told) if the write failed.
    pub fn finish_write(
        &mut self,
        key: Key,
        place: Place,
        staged: Arc<Staged>,
        (result, request): (Result<(), EngineError>, bool),
    ) {
        let tier = place.tier as usize;
        self.stats.behind_requests += request as u64;
        let now = self.places.get(&key).copied().filter(|p| p.staged && p.same_slot(&place));
        if now.is_some() {
            self.staging.remove(&key);
        }
        self.tiers[tier].region.end_write(place.slot, staged, result.is_ok());
        self.tiers[tier].unpin(place.slot, &mut self.stats);
        let current = now.is_some();
        match result {
            Ok(()) if current => {
                self.set_place(key, Place { staged: false, ..now.expect("current") });
            }
            Ok(()) => {}
            Err(_) => {
                self.stats.io_errors += 1;
                if current {
                    self.drop_key(key);
                }
            }
        }
    }

    /// Overwrites a resident key's block (write-around's write hit).
    pub fn apply_update(&mut self, key: Key, data: &[u8]) -> Result<(), EngineError> {
        if !self.overwrite(key, data, false) {
            self.drop_key(key);
        }
        Ok(())
    }

    /// Fills a slot reserved by read-through `load`, if it is still waiting for it.
    pub fn fill(&mut self, key: Key, load: u64, data: &[u8]) -> Result<(), EngineError> {
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

    pub fn is_filling(&self, key: Key, load: u64) -> bool {
        self.places.get(&key).is_some_and(|p| p.filling) && self.fills.get(&key) == Some(&load)
    }

    fn count_fault(&mut self, fault: &ReadFault) {
        match fault {
            ReadFault::Corrupt(_) => self.stats.checksum_failures += 1,
            ReadFault::Io(_) => self.stats.io_errors += 1,
        }
    }

    /// With size classes, drops `key` if resident in another class than a value of `len`
    /// bytes takes, so the write that follows places it anew: a block keeps its class while
    /// resident (hierarchies keep the size a block was admitted with).
    pub fn drop_if_reclassed(&mut self, key: Key, len: usize) {
        let new = self.class_size(len as u32);
        if self.classes && self.stored_size(key).is_some_and(|stored| stored != new) {
            self.drop_key(key);
        }
    }

    /// Drops a resident key (a block that did not check out, or one emptied out of a page),
    /// deciding a `Delete` so the policy stays in step.
    fn drop_key(&mut self, key: Key) {
        self.lose(key);
        let saved = std::mem::take(&mut self.decision);
        self.decide_sized(&Request::new(self.now_us, key, 0, Op::Delete));
        self.apply(key, None).expect("dropping a block does no I/O");
        self.decision = saved;
    }
}
