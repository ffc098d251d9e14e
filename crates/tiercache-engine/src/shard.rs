//! One shard: a policy instance, the map from key to the slot that holds it, free pages and
//! slots per tier (per size class), and the tier regions the shard owns. Everything here runs under the shard's lock.
//! `apply` is where a decision becomes bytes: evict, invalidate, insert, update and move.

use std::sync::Arc;

use tiercache_core::{Action, Decision, Key, KeyMap, KeySet, Op, Request, TierId};
use tiercache_policy::{AnyPolicy, Policy};

use crate::behind::{Job, WriteBehind};
use crate::block::Stamp;
use crate::device::Device;
use crate::error::EngineError;
use crate::io::{PinnedRead, ReadFault, Staged};
use crate::region::Region;
use crate::stats::Stats;
use crate::tier::Place;

/// A slot freed while a read holds it: it returns to the free list when the last read ends.
const ZOMBIE: u8 = 1 << 7;
/// Pins one slot may have at once (the bits below `ZOMBIE`); past that, reads are copies or
/// run under the lock.
const MAX_PINS: u8 = ZOMBIE - 1;

/// A tier's free space in one shard: pages never split (or emptied and taken back), and per
/// size class the free slots of pages split for it. Without size classes a page is a slot.
struct Space {
    /// Per class: free slots.
    free: Vec<Vec<u32>>,
    /// Unsplit pages, the lowest on top.
    pages: Vec<u32>,
    /// Per page: slots in use, counting freed ones still pinned.
    live: Vec<u16>,
}

impl Space {
    /// No free space to hand out: a tier whose policy places its blocks (`Tier::placed`).
    fn none(region: &Region) -> Space {
        let classes = region.chunks().trailing_zeros() as usize + 1;
        Space { free: vec![Vec::new(); classes], pages: Vec::new(), live: Vec::new() }
    }

    fn new(region: &Region) -> Space {
        let classes = region.chunks().trailing_zeros() as usize + 1;
        Space {
            free: vec![Vec::new(); classes],
            pages: (0..region.pages() as u32).rev().collect(),
            live: vec![0; region.pages() as usize],
        }
    }

    /// A free slot of `class`: a free chunk, or the first chunk of a page split for it (an
    /// unsplit page, or an emptied one taken back from its class).
    fn take(&mut self, region: &mut Region, class: u8) -> Option<u32> {
        let chunks = region.chunks();
        let slot = match self.free[class as usize].pop() {
            Some(slot) => slot,
            None => {
                let page = self.pages.pop().or_else(|| self.reclaim(region))?;
                region.set_page_class(page, class);
                let first = page * chunks;
                self.free[class as usize].extend((first + 1..first + (1 << class)).rev());
                first
            }
        };
        self.live[(slot / chunks) as usize] += 1;
        Some(slot)
    }

    /// Takes back a page whose slots are all free, from whichever class split it (called when
    /// no page is unsplit). A scan of the pages: the slow path of a change of class.
    fn reclaim(&mut self, region: &Region) -> Option<u32> {
        debug_assert!(self.pages.is_empty(), "unsplit pages are taken first");
        let chunks = region.chunks();
        let page = (0..region.pages() as u32).find(|&p| self.live[p as usize] == 0)?;
        let class = region.page_class(page) as usize;
        self.free[class].retain(|slot| slot / chunks != page);
        Some(page)
    }

    /// Takes `held` (pages of blocks recovered) out of the free pages, before any is handed
    /// out (pages unsplit, without size classes).
    fn claim(&mut self, held: &[u32]) {
        for &page in held {
            self.live[page as usize] = 1;
        }
        self.pages.retain(|&page| self.live[page as usize] == 0);
    }

    /// Returns a slot no read holds any more.
    fn give_back(&mut self, region: &Region, slot: u32) {
        let page = slot / region.chunks();
        self.live[page as usize] -= 1;
        self.free[region.page_class(page) as usize].push(slot);
    }
}

/// What a shard has of one tier: its region, the free space and pins of its slots.
struct Tier {
    region: Region,
    space: Space,
    /// Per slot, with size classes: the key whose block the slot holds (to empty a page for
    /// another class). Empty without size classes.
    owners: Vec<Key>,
    /// Per slot: reads running on it with the shard unlocked, and the zombie bit.
    pins: Vec<u8>,
    /// Slots with reads running on them.
    pinned: u64,
    /// The tier's policy places its blocks (set-associative): a block's slot is the one the
    /// policy gives its key, the shard keeps no free lists, and resident blocks are not in the
    /// place map, only their dirty bits here. `None` for other tiers.
    placed: Option<Placed>,
}

/// What a shard keeps of a tier whose policy places its blocks.
struct Placed {
    /// Slots per set, and how many of them the policy never fills.
    stride: u32,
    spare: u32,
    /// Per slot, a bit: the block there is dirty.
    dirty: crate::bits::SlotBits,
}

impl Placed {
    fn is_dirty(&self, slot: u32) -> bool {
        self.dirty.get(slot)
    }

    fn set_dirty(&mut self, slot: u32, dirty: bool) {
        self.dirty.set(slot, dirty);
    }

    /// The slots of `slot`'s set.
    fn set_of(&self, slot: u32) -> std::ops::Range<u32> {
        let first = slot - slot % self.stride;
        first..first + self.stride
    }
}

impl Tier {
    fn new(region: Region, placed: Option<(u32, u32)>) -> Tier {
        let slots = region.slots() as usize;
        let owners = if region.chunks() > 1 { vec![0; slots] } else { Vec::new() };
        let placed = placed.map(|(stride, spare)| Placed {
            stride,
            spare,
            dirty: crate::bits::SlotBits::new(slots),
        });
        let space = match placed {
            Some(_) => Space::none(&region),
            None => Space::new(&region),
        };
        Tier { space, owners, pins: vec![0; slots], pinned: 0, placed, region }
    }

    /// A free slot of `class` for `key`, if there is one.
    fn take(&mut self, class: u8, key: Key) -> Option<u32> {
        let slot = self.space.take(&mut self.region, class)?;
        if !self.owners.is_empty() {
            self.owners[slot as usize] = key;
        }
        Some(slot)
    }

    /// Returns a slot to the free list, or, while reads hold it, marks it to return when they
    /// end: a slot is never rewritten under a running read.
    fn free_slot(&mut self, slot: u32, key: Key, stats: &mut Stats) {
        self.region.vacate(slot, key);
        let pins = &mut self.pins[slot as usize];
        if *pins > 0 {
            *pins |= ZOMBIE;
        } else {
            self.give_back(slot, stats);
        }
    }

    /// Marks a slot free on the medium, so recovery never brings its block back (a failure
    /// is counted). Slots found at recovery and never claimed need only this.
    fn mark_free(&mut self, slot: u32, stats: &mut Stats) {
        if self.region.erase(slot).is_err() {
            stats.erase_errors += 1;
        }
    }

    /// Marks a slot free on the medium and returns it to the free list (a placed tier's
    /// policy keeps its own).
    fn give_back(&mut self, slot: u32, stats: &mut Stats) {
        self.mark_free(slot, stats);
        if self.placed.is_none() {
            self.space.give_back(&self.region, slot);
        }
    }

    /// Whether `slot` may be pinned once more: every pinned slot may be freed while pinned,
    /// and two slots must stay free for a promotion's swap and an overwrite's copy (on a
    /// placed tier, in the slot's set as well: see `Shard::can_pin`). This also bounds the
    /// reads and writes a shard has in flight, and the buffers they hold.
    fn has_room_to_pin(&self, slot: u32) -> bool {
        self.pinned + 2 <= self.region.slack() && self.pins[slot as usize] & MAX_PINS < MAX_PINS
    }

    fn pin(&mut self, slot: u32) {
        let pins = &mut self.pins[slot as usize];
        if *pins & !ZOMBIE == 0 {
            self.pinned += 1;
        }
        *pins += 1;
    }

    /// Releases a pin (of an unlocked read or write, or a read handle).
    fn unpin(&mut self, slot: u32, stats: &mut Stats) {
        let pins = &mut self.pins[slot as usize];
        *pins -= 1;
        if *pins & !ZOMBIE == 0 {
            self.pinned -= 1;
        }
        if *pins == ZOMBIE {
            *pins = 0;
            self.give_back(slot, stats);
        }
    }
}

/// A whole block found by a recovery scan.
struct Copy {
    seq: u64,
    key: Key,
    tier: usize,
    slot: u32,
    len: u32,
    dirty: bool,
}

/// What a recovery scan found on a shard's tiers ([`Shard::scan`]).
#[derive(Default)]
pub struct Scanned {
    copies: Vec<Copy>,
    /// Tier, slot and what is wrong.
    damaged: Vec<(usize, u32, String)>,
}

impl Scanned {
    /// Counts the copies on `tiers` clean: their cache stopped after writing every dirty block
    /// back, so the dirty flags their headers still carry are history.
    pub fn written_back(&mut self, tiers: &[usize]) {
        for copy in self.copies.iter_mut().filter(|c| tiers.contains(&c.tier)) {
            copy.dirty = false;
        }
    }
}

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
    tiers: Vec<Tier>,
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
    /// Slots of dirty blocks superseded since the last sync (tier, slot, key): each may be
    /// the only durable copy of a synced write until the newer copy is synced too, so it is
    /// freed only after the tier's next sync (a device may persist writes out of order).
    limbo: Vec<(usize, u32, Key)>,
    /// Per tier: keys whose held slot (`limbo`) was marked free after the tier last synced.
    /// The mark is not durable yet, so a crash could bring that older copy back; the key's
    /// current copy must survive until it is (see `settle_erasures`).
    released: Vec<KeySet>,
    /// Blocks of placed tiers the policy has dropped or moved and the shard not yet (tier,
    /// key, slot): by the time a decision is applied, the policy no longer knows where they
    /// were, and may have given their slots to other keys.
    pending: Vec<(usize, Key, u32)>,
    /// Whether any tier is placed (see `Tier::placed`).
    any_placed: bool,
}

impl Shard {
    pub fn new(mut policy: AnyPolicy, regions: Vec<Region>, block_size: usize) -> Shard {
        let classes = regions.iter().any(|r| r.chunks() > 1);
        let released = regions.iter().map(|_| KeySet::default()).collect();
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
                Tier::new(region, placed)
            })
            .collect();
        Shard {
            pending: Vec::new(),
            any_placed,
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
            backing: None,
            backing_unsynced: false,
            lost: KeySet::default(),
            limbo: Vec::new(),
            released,
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
        self.now_us = now_us;
        self.decision.clear();
        self.policy.tick(now_us, &mut self.decision);
        if !self.decision.actions.is_empty() {
            self.apply(0, None)
                .expect("periodic work drops and writes back blocks, whose errors are counted");
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
        self.now_us = req.time_us;
        self.decision.clear();
        self.policy.decide(req, &mut self.decision);
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

    /// Frees a slot once what was written back from it is durable (see `backing_unsynced`),
    /// and once no older copy of its key can come back in its place (`settle_erasures`).
    fn free_slot(&mut self, tier: usize, slot: u32, key: Key) {
        self.sync_backing();
        self.settle_erasures(key);
        self.tiers[tier].free_slot(slot, key, &mut self.stats);
    }

    /// Before `key`'s current copy is freed or overwritten in place: an older copy of it,
    /// held until a sync and marked free after it (`released`), is not durably free yet. Were
    /// the current copy's slot rewritten (torn, or reused for another key) and the mark lost
    /// in a crash, the older copy would come back as current: stale. So the tiers holding
    /// such a mark sync first (`erase_syncs`).
    fn settle_erasures(&mut self, key: Key) {
        for t in 0..self.tiers.len() {
            if self.released[t].is_empty() || !self.released[t].contains(&key) {
                continue;
            }
            if self.flush_tier(t).and_then(|()| self.tiers[t].region.sync()).is_err() {
                self.stats.io_errors += 1;
            }
            self.stats.erase_syncs += 1;
            self.released[t].clear();
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
    fn flush_tier(&mut self, t: usize) -> Result<(), EngineError> {
        use crate::direct::SlotState;
        let Tier { region, placed, .. } = &mut self.tiers[t];
        let Some(placed) = placed.as_ref() else {
            return region.flush_records(&|_| SlotState::Free, &mut self.seq);
        };
        let (policy, places, pending, limbo) =
            (&self.policy, &self.places, &self.pending, &self.limbo);
        let sets = policy.placement_ref(TierId(t as u8)).expect("a placed tier");
        let state = |slot: u32| {
            let in_flight = |key: Key| {
                places.get(&key).is_some_and(|p| {
                    p.tier as usize == t && p.slot == slot && (p.staged || p.filling)
                })
            };
            let dirty = placed.is_dirty(slot);
            let held = pending.iter().find(|&&(pt, _, ps)| pt == t && ps == slot).map(|p| p.1);
            let key = sets.key_at(slot).or(held);
            if let Some(key) = key {
                return match in_flight(key) {
                    true => SlotState::InFlight,
                    false => SlotState::Block { key, dirty },
                };
            }
            match limbo.iter().find(|&&(lt, ls, _)| lt == t && ls == slot) {
                Some(&(_, _, key)) => SlotState::Held { key },
                None => SlotState::Free,
            }
        };
        region.flush_records(&state, &mut self.seq)
    }

    /// Frees the slots held since the last sync (of tier `only`, or all): the caller has just
    /// synced the tiers, so the newer copies they were held for are durable, and so are the
    /// free marks written before the sync.
    pub fn release_limbo(&mut self, only: Option<usize>) {
        for (t, released) in self.released.iter_mut().enumerate() {
            if only.is_none_or(|o| o == t) {
                released.clear();
            }
        }
        let held = std::mem::take(&mut self.limbo);
        for (tier, slot, key) in held {
            if only.is_some_and(|t| t != tier) {
                self.limbo.push((tier, slot, key));
                continue;
            }
            // The key's current copy is newer; this one is only ever freed.
            self.sync_backing();
            self.tiers[tier].free_slot(slot, key, &mut self.stats);
            self.released[tier].insert(key);
        }
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
    fn write_back(&mut self, key: Key) -> bool {
        let Some(place) = self.place(key) else { return true };
        if !place.dirty || place.filling {
            return true;
        }
        let Some(backing) = self.backing.clone() else { return true };
        let mut scratch = std::mem::take(&mut self.scratch);
        scratch.resize(self.tiers[place.tier as usize].region.value_bytes(), 0);
        let kept = match self.read_block(key, place, &mut scratch) {
            Ok(len) => {
                let at = key * self.block_size as u64;
                match backing.write_at(&scratch[..len], at) {
                    Ok(()) => {
                        self.set_place(key, Place { dirty: false, ..place });
                        self.backing_unsynced = true;
                        self.stats.write_backs += 1;
                        self.stats.bytes_written_back += len as u64;
                    }
                    Err(_) => self.stats.write_back_errors += 1,
                }
                true
            }
            Err(fault) => {
                self.count_fault(&fault);
                self.lose(key);
                false
            }
        };
        self.scratch = scratch;
        kept
    }

    /// Copies `key`'s block at `place` into `out`: from its staged copy while its write is
    /// behind, else read and checked from its tier. Returns the value's length.
    fn read_block(&mut self, key: Key, place: Place, out: &mut [u8]) -> Result<usize, ReadFault> {
        match self.staging.get(&key).filter(|_| place.staged) {
            Some(staged) => Ok(crate::block::copy_value(staged.value(), out)),
            None => self.tiers[place.tier as usize].region.read(place.slot, key, out),
        }
    }

    /// Writes back the dirty blocks `first..first + count` as one write to the backing
    /// device. False, having written nothing, unless every one is resident, dirty, whole,
    /// and reads back: the caller then writes them back one by one.
    fn write_back_run(&mut self, first: Key, count: u64) -> bool {
        let Some(backing) = self.backing.clone() else { return false };
        let bs = self.block_size as usize;
        let mut run = vec![0u8; bs * count as usize];
        let mut places = Vec::with_capacity(count as usize);
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
    fn lose(&mut self, key: Key) {
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
    fn clean_up(
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
    fn dirty_keys(&self, tier: Option<TierId>) -> Vec<Key> {
        let on = |t: u8| tier.is_none_or(|tier| tier.0 == t);
        let mut keys: Vec<Key> =
            self.places.iter().filter(|(_, p)| p.dirty && on(p.tier)).map(|(k, _)| *k).collect();
        for (t, placed) in self.placed_tiers() {
            if !on(t as u8) {
                continue;
            }
            let sets = self.policy.placement_ref(TierId(t as u8)).expect("a placed tier");
            // Blocks in passing (staged, filling) are in the place map, counted there.
            let at_rest = placed.dirty.ones().filter_map(|slot| sets.key_at(slot));
            keys.extend(at_rest.filter(|k| !self.places.contains_key(k)));
        }
        keys
    }

    /// The placed tiers (see `Tier::placed`).
    fn placed_tiers(&self) -> impl Iterator<Item = (usize, &Placed)> {
        self.tiers.iter().enumerate().filter_map(|(t, tier)| Some((t, tier.placed.as_ref()?)))
    }

    /// Blocks at rest on placed tiers: resident in their policy, not in the place map.
    fn at_rest_on_placed_tiers(&self) -> u64 {
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
        if let Some(&(t, _, slot)) = self.pending.iter().find(|(_, k, _)| *k == key) {
            return Some(self.at_rest(t, slot));
        }
        self.placed_tiers().find_map(|(t, _)| {
            let slot = self.policy.placement_ref(TierId(t as u8))?.slot_of(key)?;
            Some(self.at_rest(t, slot))
        })
    }

    /// The place of the block at rest in `slot` of placed tier `t`.
    fn at_rest(&self, t: usize, slot: u32) -> Place {
        let dirty = self.tiers[t].placed.as_ref().expect("a placed tier").is_dirty(slot);
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
        let pending = match self.pending.iter().position(|(_, k, _)| *k == key) {
            Some(i) => Some(self.pending.remove(i)),
            None => None,
        };
        let place = match (self.places.remove(&key), pending) {
            (Some(place), _) => Some(place),
            (None, Some((t, _, slot))) => Some(self.at_rest(t, slot)),
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
            let sets = self.policy.placement(TierId(t as u8)).expect("a placed tier");
            self.pending.extend(sets.take_vacated().into_iter().map(|(k, slot)| (t, k, slot)));
        }
    }

    /// Whether `key`'s set on placed tier `t` has a slot for a new copy of its block, other
    /// than `old`, the current one's; slots held for a sync are freed (the tier synced) if
    /// that makes one.
    fn has_fresh_slot(&mut self, t: usize, key: Key, old: u32) -> bool {
        loop {
            let sets = self.policy.placement_ref(TierId(t as u8)).expect("a placed tier");
            if sets.first_free(key, &mut |s| s != old && !self.busy(t, s)).is_some() {
                return true;
            }
            if !self.limbo.iter().any(|(lt, _, _)| *lt == t) {
                return false;
            }
            self.free_held_slots(t);
        }
    }

    /// Whether `slot` of placed tier `t` may not take a block now: a read or a write runs on
    /// it, it holds the only durable copy of a block until the next sync (`limbo`), or the
    /// decision being applied has yet to take its block out (`pending`).
    fn busy(&self, t: usize, slot: u32) -> bool {
        self.tiers[t].pins[slot as usize] != 0
            || self.limbo.iter().any(|&(lt, ls, _)| lt == t && ls == slot)
            || self.pending.iter().any(|&(pt, _, ps)| pt == t && ps == slot)
    }

    /// Whether `slot` of `tier` may be pinned once more (see `Tier::has_room_to_pin`). On a
    /// placed tier the slot's set must keep a free slot that is not busy for any insert or
    /// overwrite: of the set's spare slots, all but one may be busy.
    fn can_pin(&self, t: usize, slot: u32) -> bool {
        let tier = &self.tiers[t];
        if !tier.has_room_to_pin(slot) {
            return false;
        }
        let Some(placed) = &tier.placed else { return true };
        if tier.pins[slot as usize] != 0 {
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
    fn placed_slot(&mut self, t: usize, key: Key, fresh: Option<u32>) -> u32 {
        let tier = TierId(t as u8);
        let chosen = self.policy.placement_ref(tier).expect("a placed tier").slot_of(key);
        if let Some(chosen) = chosen.filter(|&slot| fresh.is_none() && !self.busy(t, slot)) {
            return chosen;
        }
        let avoid = fresh.unwrap_or(u32::MAX);
        assert!(
            self.has_fresh_slot(t, key, avoid),
            "every free slot of key {key}'s set is busy, none held for a sync: pins are \
             limited to leave one"
        );
        let sets = self.policy.placement_ref(tier).expect("a placed tier");
        let to = sets.first_free(key, &mut |s| s != avoid && !self.busy(t, s)).expect("found");
        match chosen {
            Some(_) => {
                let sets = self.policy.placement(tier).expect("a placed tier");
                sets.relocate(key, to).expect("a free slot of the key's set");
            }
            None => {
                // An overwrite of a block the same decision moves or drops next (the policy
                // has let it go): its new copy waits in a free slot the policy does not know,
                // as the old one did, for the action that takes it.
                assert!(fresh.is_some(), "the policy placed key {key} it stores");
                self.pending.push((t, key, to));
            }
        }
        to
    }

    /// Syncs tier `t` (its records first) and frees the slots held for that sync (`limbo`).
    fn free_held_slots(&mut self, t: usize) {
        if self.flush_tier(t).and_then(|()| self.tiers[t].region.sync()).is_err() {
            self.stats.io_errors += 1;
        }
        self.stats.limbo_syncs += 1;
        self.release_limbo(Some(t));
    }

    /// Releases a pin (of an unlocked read or write, or a read handle).
    pub fn unpin(&mut self, tier: usize, slot: u32) {
        self.tiers[tier].unpin(slot, &mut self.stats);
    }

    /// Overwrites a resident key's block: in place on memory tiers; into a fresh slot on file
    /// and flash tiers, whose blocks a running read may hold, and wherever a read handle pins
    /// the slot or the value changed size class.
    /// False if the write failed (see `store_or_fail`): the caller drops the key.
    fn overwrite(&mut self, key: Key, data: &[u8], dirty: bool) -> bool {
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
                    || self.tiers[tier].pins[old.slot as usize] > 0
                    || !same_class
                    || old.dirty
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
            // waiting for an action of this decision.
            assert_eq!(self.tiers[tier].pins[old.slot as usize], 0, "a pinned block in place");
            let placed = self.policy.placement_ref(TierId(old.tier));
            if placed.is_some_and(|sets| sets.slot_of(key).is_none()) {
                // Let go by the policy in this decision: the block stays where the action
                // that takes it will look.
                self.pending.push((tier, key, old.slot));
            }
        }
        if old.staged {
            self.staging.remove(&key);
        }
        let written = self.store_or_fail(place, key, data);
        match (copy, old.dirty) {
            (true, true) => self.limbo.push((tier, old.slot, key)),
            (true, false) => self.free_slot(tier, old.slot, key),
            (false, _) => {}
        }
        self.stats.updates += written as u64;
        written
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

    /// The size a policy counts for a resident key (its class's size), if resident.
    pub fn stored_size(&self, key: Key) -> Option<u32> {
        let place = self.place(key)?;
        Some(self.block_size >> self.class_at(place.tier as usize, place.slot))
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
            if self.limbo.iter().any(|(lt, _, _)| *lt == t) {
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
            if slots.clone().any(|s| self.tiers[t].pins[s as usize] != 0) {
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
            self.limbo.push((from.index(), old.slot, key));
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
        if let Some((behind, shard)) = self.behind.clone() {
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
                    behind.submit(Job { shard, key, place, staged });
                    self.stats.writes_behind += 1;
                    return Ok(place);
                }
            }
        }
        self.tiers[tier].region.write(place.slot, key, data, stamp)?;
        Ok(Place { staged: false, ..place })
    }

    /// Ends a write-behind: the slot is unpinned and, if `key` still lives there, its block is
    /// now read from the tier, or dropped (and the policy told) if the write failed.
    pub fn finish_write(
        &mut self,
        key: Key,
        place: Place,
        staged: Arc<Staged>,
        result: Result<(), EngineError>,
    ) {
        let tier = place.tier as usize;
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
    /// pinned (release it with `unpin`). `None` if the block did not check out (then dropped).
    pub fn hold(&mut self, key: Key) -> Option<Held> {
        debug_assert!(self.holds_in_place(key), "key {key} cannot be held in place");
        let place = self.place(key).expect("the policy reported a hit with no slot");
        let tier = place.tier as usize;
        match self.tiers[tier].region.locate(place.slot, key) {
            Ok(value) => {
                let (bytes, len) = (value.as_ptr(), value.len());
                self.tiers[tier].pin(place.slot);
                self.stats.bytes_read += len as u64;
                self.stats.pinned_reads += 1;
                Some(Held::Pinned { tier: place.tier, slot: place.slot, bytes, len })
            }
            Err(fault) => {
                self.count_fault(&fault);
                self.drop_key(key);
                None
            }
        }
    }

    /// Reads the tiers `tiers` (mapped and file tiers of this geometry) as a cache opening
    /// over them does, changing nothing: every whole block, and every slot that fails its
    /// checks. `belongs` says whether a key is this shard's: a block of another shard's key
    /// was misdirected, and counts as damage.
    pub fn scan(
        &mut self,
        tiers: &[(usize, bool)],
        belongs: impl Fn(Key) -> bool,
    ) -> Result<Scanned, EngineError> {
        use crate::block::Found;
        let mut scanned = Scanned::default();
        for &(t, headers_only) in tiers {
            self.tiers[t].region.scan(headers_only, |slot, found| match found {
                Found::Empty => {}
                Found::Block { key, len, stamp } if belongs(key) => scanned.copies.push(Copy {
                    seq: stamp.seq,
                    key,
                    tier: t,
                    slot,
                    len,
                    dirty: stamp.dirty,
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
        // The newest copy of each key wins; older ones are freed.
        copies.sort_unstable_by_key(|c| std::cmp::Reverse(c.seq));
        let mut newest = KeyMap::default();
        copies.retain(|c| {
            let first = newest.insert(c.key, ()).is_none();
            if !first {
                self.stats.recovery_stale += 1;
                self.tiers[c.tier].mark_free(c.slot, &mut self.stats);
            }
            first
        });
        copies.reverse();
        for t in 0..self.tiers.len() {
            if self.tiers[t].placed.is_some() {
                continue;
            }
            let held: Vec<u32> = copies.iter().filter(|c| c.tier == t).map(|c| c.slot).collect();
            self.tiers[t].space.claim(&held);
        }
        let size = self.block_size;
        for copy in copies {
            self.decision.clear();
            let tier = TierId(copy.tier as u8);
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
                self.tiers[copy.tier].give_back(copy.slot, &mut self.stats);
                continue;
            }
            if self.tiers[copy.tier].placed.is_some() {
                // Kept in the slot it lies in, which the policy is told (no decision changes);
                // a slot outside the key's set (a tier laid out for other ways) is dropped.
                let sets = self.policy.placement(tier).expect("a placed tier");
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
                    self.pending.retain(|(_, k, _)| *k != copy.key);
                    self.stats.recovery_declined += 1;
                    self.tiers[copy.tier].give_back(copy.slot, &mut self.stats);
                    continue;
                }
            }
            let place = Place { dirty: copy.dirty, ..Place::new(copy.tier as u8, copy.slot) };
            self.set_place(copy.key, place);
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

    /// Publishes the upper tier's slots for hits served without the lock; see
    /// [`crate::optimistic`].
    pub fn publish(
        &mut self,
        sets: (&Arc<crate::optimistic::Sets>, usize),
    ) -> Option<crate::optimistic::SlotTable> {
        self.tiers[0].region.publish(sets)
    }

    /// Tells the policy of a hit served without the lock, as it would have been told then,
    /// and counts it. It is told as a lookup, which for a policy with quiet hits decides a
    /// read's hit the same way (`AnyPolicy::quiet_hits`). Hits are committed before any other
    /// request of the shard is decided, so the key is still resident in the upper tier, unless
    /// another thread dropped it between the hit and its recording: the lookup then finds
    /// nothing and changes nothing (quiet hits again), and the hit, served, still counts.
    pub fn commit_hit(&mut self, key: Key, len: u32, ns: u32) {
        self.stats.lookups += 1;
        self.stats.hits += 1;
        self.stats.bytes_read += len as u64;
        self.stats.unlocked_hits += 1;
        if let Some(histograms) = &mut self.latency {
            histograms[crate::latency::Operation::Read as usize].saturating_record(ns as u64);
        }
        self.decide(&Request::new(self.now_us, key, self.block_size, Op::Lookup));
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
