//! One shard: a policy instance, the map from key to the slot that holds it, and the shard's
//! part of each tier, top down (`TierStore`: its region, free slots, pins, and slots held for
//! a sync). Everything here runs under the shard's lock.
//!
//! A request is a short conversation with its shard: one locked call per step, each doing its
//! own counting and returning what, if anything, the caller does with the lock released.
//!
//! - [`read`](Shard::read) decides a lookup or a read and serves it: a hit on a memory tier
//!   (or a block staged for a file or flash tier) is copied out at once ([`Read::Done`]); a hit
//!   on a file or flash tier pins its slot and hands back the read to run unlocked
//!   ([`Read::Tier`]), which [`finish_read`](Shard::finish_read) ends; a read-through miss
//!   hands back the load ([`Read::Load`]), which [`finish_load`](Shard::finish_load) fills in.
//! - [`write`](Shard::write), [`update`](Shard::update) and [`delete`](Shard::delete) are
//!   one step each; a block they stage for a file or flash tier lands with
//!   [`land`](Shard::land), the write-behind's one step.
//!
//! `apply` is where a decision becomes bytes: evict, invalidate, insert, update and move. The
//! rest is in submodules, one concern each: serving a decided read (`serving`), where a block
//! is (`places`), blocks that change place (`moves`), values spanning pages (`spans`), read
//! handles and hits served without the lock (`handles`), and what makes blocks durable and
//! brings them back (`durable`).

use std::sync::Arc;
use std::time::Instant;

use tiercache_core::{Action, Decision, Key, KeyMap, KeySet, Op, Request, TierId};
use tiercache_policy::{AnyPolicy, Policy};

use crate::cleaner::{Flight, Flights};
use crate::device::Device;
use crate::error::EngineError;
use crate::latency::Operation;
use crate::stats::Stats;
use crate::tier::behind::{run_slots, Job, Staging, Written};
use crate::tier::block::{ReadFault, Stamp};
use crate::tier::region::{PinnedRead, Region};
use crate::tier::store::TierStore;
use crate::tier::Place;

mod durable;
mod handles;
mod moves;
mod places;
mod serving;
mod spans;

use places::sets_mut;

pub use durable::Scanned;
pub use handles::{Held, Hold};

/// What a read did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReadOutcome {
    /// Served from the cache.
    pub hit: bool,
    /// Bytes of the value (copied into the buffer up to its length).
    pub len: usize,
}

/// What a write did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PutOutcome {
    /// The key was resident when the write arrived.
    pub hit: bool,
    /// The value is now in the cache.
    pub cached: bool,
    /// The cache keeps the value dirty (write-back and write-only modes): the backing device
    /// gets it when it is written back. Otherwise the caller writes it to the backing device.
    pub absorbed: bool,
}

/// What a read's locked step leaves its caller to do with the shard unlocked.
pub enum Read {
    /// Nothing: the value's length if a hit was served, `None` for a lookup's miss.
    Done(Option<usize>),
    /// A read of a file or flash tier: run it ([`TierRead::run`]) into the caller's buffer,
    /// then end it with [`Shard::finish_read`].
    Tier(TierRead),
    /// A read-through miss: load the value, then [`Shard::finish_load`] with this, the load a
    /// slot is reserved for if the policy admitted the key.
    Load(Option<u64>),
    /// The key's dirty data was lost: the read fails until it is written again.
    Lost,
}

/// A read of a file or flash tier's block, its slot pinned, to run with the shard unlocked.
pub struct TierRead {
    read: PinnedRead,
    place: Place,
    /// Where the policy found the block (a hit counts there even if the decision moved it).
    hit: Option<TierId>,
    /// When the read began, if tier reads are timed (see `Shard::time_tier_reads`).
    timed: Option<Instant>,
    op: Op,
}

impl TierRead {
    /// Reads and checks the block, copying its value into `buf` (as far as it goes); returns
    /// the value's length.
    pub fn run(&mut self, buf: &mut [u8]) -> Result<usize, ReadFault> {
        self.read.run(buf)
    }

    /// The length of an object spanning pages (`None` for a block, at most a block long).
    pub fn object_len(&self) -> Option<usize> {
        self.read.object_len()
    }

    /// Reads and checks an object's pages into a vector of its length.
    pub fn run_to_vec(&mut self) -> Result<Vec<u8>, ReadFault> {
        self.read.run_to_vec()
    }
}

/// Laid out in order: what every request writes (the decision, the time, the first counters)
/// comes first, so it shares the cache line of the lock in front of the shard. With several
/// cores, each line a request writes is one more the other cores may hold.
#[repr(C)]
pub struct Shard {
    decision: Decision,
    /// Time of the request being decided.
    now_us: u64,
    stats: Stats,
    policy: AnyPolicy,
    places: KeyMap<Place>,
    /// The read-through load each filling slot waits for (`Place::filling`): apart from the
    /// places, which it would make three times larger, and nearly always empty.
    fills: KeyMap<u64>,
    tiers: Vec<TierStore>,
    classes: bool,
    /// Values may span pages (`spans`).
    span_pages: bool,
    /// Per value spanning pages, its pages after the first (its place's slot).
    spans: KeyMap<Box<[u32]>>,
    /// The pages being taken for a value spanning pages, which no page emptied for a size
    /// class may be.
    gathering: Vec<u32>,
    /// The whole value of the last read whose value was longer than its buffer: its first
    /// `spilled` bytes.
    spill: Vec<u8>,
    spilled: usize,
    block_size: u32,
    loads: u64,
    /// The sequence number of the shard's last block write (`crate::tier::block::Stamp`).
    seq: u64,
    /// A block's bytes on their way between tiers.
    scratch: Vec<u8>,
    /// Read and write latency, when recorded.
    latency: Option<Box<[hdrhistogram::Histogram<u64>; 2]>>,
    /// Whether reads of tiers are timed, for a controller fed measurements: how writes beside
    /// them slow them is the signal of interference-aware admission.
    time_tier_reads: bool,
    /// The blocks whose writes to file and flash tiers are behind.
    staging: Staging,
    /// Where dirty blocks are written back (write-back and write-only modes), once attached.
    backing: Option<Arc<dyn Device>>,
    /// A block was written back since the backing device last synced: before a slot is freed
    /// (marked free on its tier), the backing device syncs, so no crash can find a block
    /// neither in the cache nor durable on the backing device.
    backing_unsynced: bool,
    /// Keys whose dirty data was lost (unreadable, or dropped without a write-back): reading
    /// one fails with `EngineError::DataLost` until it is written again, rather than serve
    /// the backing device's older data as current.
    lost: KeySet,
    /// Whether any tier is placed (see `TierStore::placed`).
    any_placed: bool,
    /// While the cache drains every shard in device order, or its cleaner gathers: the keys
    /// the policy writes back, whose writes the cache does itself (`deferred_write_backs`).
    deferred: Option<Vec<Key>>,
    /// The cache's cleaner, shared by every shard (see `crate::cleaner`).
    cleaner: Option<Arc<Flights>>,
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
            span_pages: false,
            spans: KeyMap::default(),
            gathering: Vec::new(),
            spill: Vec::new(),
            spilled: 0,
            block_size: block_size as u32,
            loads: 0,
            seq: 0,
            stats: Stats::default(),
            scratch: Vec::new(),
            now_us: 0,
            latency: None,
            time_tier_reads: false,
            staging: Staging::default(),
            backing: None,
            backing_unsynced: false,
            lost: KeySet::default(),
        }
    }

    // The steps of a request.

    /// A lookup (`Op::Lookup`: a miss admits nothing) or a read through the cache
    /// (`Op::Read`): decided, applied, and served into `buf` where that can be done now; see
    /// [`Read`] for what is left to the caller. `started` times the read's latency.
    pub fn read(
        &mut self,
        req: &Request,
        buf: &mut [u8],
        started: Option<Instant>,
    ) -> Result<Read, EngineError> {
        if req.op == Op::Read && self.is_lost(req.key) {
            return Ok(Read::Lost);
        }
        self.decide(req);
        let load = self.apply(req.key, None)?;
        Ok(self.serve(req.key, req.op, buf, load, started))
    }

    /// Ends a read of a file or flash tier that [`read`](Self::read) or [`hold`](Self::hold)
    /// handed out, with what it found (`result`): the slot unpinned, the read counted, and a
    /// block that did not check out dropped. A read-through whose block did not check out
    /// goes on as a miss ([`Read::Load`], or [`Read::Lost`] for dirty data).
    pub fn finish_read(
        &mut self,
        key: Key,
        tier: TierRead,
        result: Result<usize, ReadFault>,
        started: Option<Instant>,
    ) -> Read {
        let TierRead { read, place, hit, timed, op } = tier;
        let t = place.tier as usize;
        self.tiers[t].end_read(place.slot, read, &mut self.stats);
        let served = match result {
            Ok(len) => {
                self.stats.bytes_read += len as u64;
                Some(len)
            }
            Err(fault) => {
                self.count_fault(&fault);
                // Unless it was replaced meanwhile.
                if self.place(key).is_some_and(|p| p.same_slot(&place)) {
                    self.drop_key(key);
                }
                None
            }
        };
        self.end_read(key, (op, hit), served, (timed, None), started)
    }

    /// Writes `value` for `req.key` (write-allocate: a missed key is cached if the policy
    /// admits it).
    pub fn write(
        &mut self,
        mut req: Request,
        value: &[u8],
        started: Option<Instant>,
    ) -> Result<PutOutcome, EngineError> {
        let key = req.key;
        if self.sized() {
            req.size = value.len() as u32;
            self.drop_if_reclassed(key, value.len());
        }
        self.decide(&req);
        self.stats.puts += 1;
        let hit = self.decision.hit.is_some();
        self.apply(key, Some(value))?;
        let place = self.place(key).filter(|p| !p.filling);
        let (cached, absorbed) = (place.is_some(), place.is_some_and(|p| p.dirty));
        // A write replaces data that was lost: the key reads again.
        if self.is_lost(key) {
            self.lost.remove(&key);
        }
        self.record(Operation::Write, started);
        Ok(PutOutcome { hit, cached, absorbed })
    }

    /// Reads `value`, just loaded after a lookup of `req.key` missed, through the cache
    /// (`req` a read): decided as the read that a read-through would have made (the policy
    /// sized by the value), and cached if the policy admits it. Whether the cache holds it now.
    pub fn admit(
        &mut self,
        req: &Request,
        value: &[u8],
        started: Option<Instant>,
    ) -> Result<bool, EngineError> {
        let size = if self.sized() { self.size_of_value(value.len() as u32) } else { req.size };
        self.decide_sized(&Request { size, ..*req });
        self.apply(req.key, Some(value))?;
        self.record(Operation::Read, started);
        Ok(self.place(req.key).is_some_and(|p| !p.filling))
    }

    /// The write-behind's step: `job`'s write ended as `written` says. The slot is unpinned
    /// and, if the job's key still lives there, its block is now read from the tier, or
    /// dropped (and the policy told) if the write failed.
    pub fn land(&mut self, job: Job, (result, request): Written) {
        let Job { key, place, staged, .. } = job;
        let tier = place.tier as usize;
        self.stats.behind_requests += request as u64;
        let now = self.places.get(&key).copied().filter(|p| p.staged && p.same_slot(&place));
        if now.is_some() {
            self.staging.remove(key);
        }
        self.tiers[tier].end_write(place.slot, staged, result.is_ok(), &mut self.stats);
        match (result, now) {
            (Ok(()), Some(now)) => self.set_place(key, Place { staged: false, ..now }),
            (Ok(()), None) => {}
            (Err(_), now) => {
                self.stats.io_errors += 1;
                if now.is_some() {
                    self.drop_key(key);
                }
            }
        }
    }

    // Deciding.

    /// Lets the policy decide `req`. With size classes, the size the policy sees is a class's:
    /// a write's value (`req.size` its length) takes the smallest class that holds it; any
    /// other request is sized as the key's stored block, or a whole block if not resident.
    fn decide(&mut self, req: &Request) {
        let size = match req.op {
            _ if !self.sized() => req.size,
            Op::Write => self.size_of_value(req.size),
            _ => self.stored_size(req.key).unwrap_or(self.block_size),
        };
        self.decide_sized(&Request { size, ..*req });
    }

    /// Lets the policy decide `req` with its size as given.
    fn decide_sized(&mut self, req: &Request) {
        self.decide_told(req, true);
    }

    /// Lets the policy decide `req`. Where the policy is told a key's first hit an epoch
    /// (`tiercache_policy::told`), the published table follows it: the epoch's tag, and with
    /// `stamp` the tag of a read hit decided here (hits served without the lock stamp their
    /// own), so readers without the lock spare the policy what it would not be told.
    fn decide_told(&mut self, req: &Request, stamp: bool) {
        self.now_us = req.time_us;
        self.decision.clear();
        self.policy.decide(req, &mut self.decision);
        if let Some(tag) = self.policy.hit_tag() {
            let read_hit =
                matches!(req.op, Op::Read | Op::Lookup) && self.decision.hit == Some(TierId(0));
            self.tiers[0].region.follow_hit_rule(tag, (stamp && read_hit).then_some(req.key));
        }
    }

    // Where a block is.

    /// Whether `key` lies on a memory tier, read where it lies.
    pub fn in_memory(&self, key: Key) -> bool {
        self.place(key).is_some_and(|place| self.tiers[place.tier as usize].region.in_place())
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
    fn at_rest(&self, t: usize, slot: u32) -> Place {
        let dirty = self.tiers[t].placed_ref().is_dirty(slot);
        Place { dirty, ..Place::new(t as u8, slot) }
    }

    /// Records where `key`'s block is: for a block at rest on a placed tier only its dirty
    /// bit (its policy knows the slot), for any other in the place map.
    fn set_place(&mut self, key: Key, place: Place) {
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
    fn take_place(&mut self, key: Key) -> Option<Place> {
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
    fn collect_vacated(&mut self) {
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

    /// Whether `key`'s dirty data was lost (see `lost`); nearly always none is, and then
    /// nothing is looked up.
    #[inline]
    pub fn is_lost(&self, key: Key) -> bool {
        !self.lost.is_empty() && self.lost.contains(&key)
    }

    // Applying a decision.

    /// Applies the decision in `self.decision`. `value` is the data of a write; a read-through
    /// miss has none yet, and its insert reserves the slot for the load returned.
    fn apply(&mut self, key: Key, value: Option<&[u8]>) -> Result<Option<u64>, EngineError> {
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
                    if let Some(reserved) = self.insert(key, (tier, size, dirty), value, &mut lost)
                    {
                        load = Some(reserved);
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

    /// Inserts `key` into `tier` (`size`, `dirty` as the policy decided): `value` written to
    /// a fresh slot (a key whose write failed goes to `lost`), or, for a read-through miss, the
    /// slot reserved for the load returned.
    fn insert(
        &mut self,
        key: Key,
        (tier, size, dirty): (TierId, u32, bool),
        value: Option<&[u8]>,
        lost: &mut Vec<Key>,
    ) -> Option<u64> {
        let class = self.class_of(size);
        let slot = self.allocate(tier, class, key);
        if size > self.block_size {
            self.take_pages(tier, key, slot, size);
        }
        self.stats.inserts += 1;
        let mut place = Place::new(tier.0, slot);
        // Only written data is dirty: a read's insert is the backing's own.
        place.dirty = dirty && value.is_some();
        match value {
            Some(data) => {
                if !self.store_or_fail(place, key, data) {
                    lost.push(key);
                }
                None
            }
            None => {
                self.loads += 1;
                place.filling = true;
                self.fills.insert(key, self.loads);
                self.set_place(key, place);
                Some(self.loads)
            }
        }
    }

    fn release(&mut self, key: Key, tier: TierId) {
        self.settle_flight(key);
        let place = self.take_place(key).expect("the policy drops only resident keys");
        debug_assert_eq!(place.tier, tier.0, "key {key} dropped from the wrong tier");
        if place.staged {
            self.staging.remove(key);
        }
        if place.filling {
            self.fills.remove(&key);
        }
        self.free_slot(place.tier as usize, place.slot, key);
        self.free_pages(place.tier as usize, key);
    }

    /// Writes a block into `place` and records it as `key`'s. False if the write failed (an
    /// I/O error of a file or flash tier), counted in `io_errors`: the place is recorded all
    /// the same, unreadable, for the caller to drop once the decision's other actions are
    /// done, so that the policy hears of it and stays in step. The caller's data is safe in the
    /// backing store; the cache just does not keep it.
    fn store_or_fail(&mut self, place: Place, key: Key, data: &[u8]) -> bool {
        let stored = self.store(place, key, data);
        self.set_place(key, *stored.as_ref().unwrap_or(&place));
        self.fills_done(key);
        if stored.is_err() {
            self.stats.io_errors += 1;
        }
        stored.is_ok()
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
    /// the tier is a file or flash one and the shard may pin one more of its slots (the same
    /// room rule as unlocked reads: pinned slots may all be freed meanwhile, and an
    /// overwrite's copy must still find a slot); at once otherwise. Returns the place, marked
    /// staged if the write is behind.
    fn write_block(&mut self, place: Place, key: Key, data: &[u8]) -> Result<Place, EngineError> {
        if self.spans_pages(key) {
            return self.write_span(place, key, data);
        }
        let store = &mut self.tiers[place.tier as usize];
        self.seq += 1;
        let stamp = Stamp { seq: self.seq, dirty: place.dirty, ..Stamp::default() };
        if self.staging.is_on() {
            if let Some(staged) = store.begin_write(place.slot, key, data, stamp) {
                let place = Place { staged: true, ..place };
                let run = run_slots(store.region.slot_bytes(), store.region.slack());
                self.staging.stage(key, place, staged, run);
                self.stats.writes_behind += 1;
                return Ok(place);
            }
        }
        store.region.write(place.slot, key, data, stamp)?;
        Ok(Place { staged: false, ..place })
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
            let (page, victims) = self.page_to_empty(t, key).expect(
                "a shard's tier has at least SIZE_CLASS_PAGES_MIN pages, more than its pins and \
                 one decision can hold",
            );
            for victim in victims {
                self.stats.space_evictions += 1;
                self.drop_key(victim);
            }
            // Each pass empties a page, or this loop would spin with the shard locked.
            let left = self.tiers[t].space.live[page as usize];
            assert_eq!(left, 0, "page {page} of tier {t} chosen to empty keeps {left} slots");
        }
    }
}
