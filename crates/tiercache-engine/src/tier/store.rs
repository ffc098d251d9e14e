//! A tier's store in one shard: its region (the slots on the medium and the block format
//! there), which slots are free, pinned by reads, held until a sync or released since one, and
//! on a set-associative tier which blocks are dirty; whether a slot may take a block or a pin
//! now; and the pinned reads and staged writes of its slots. The shard applies a policy's
//! decisions to an ordered list of these; everything here runs under the shard's lock.
//!
//! Slots are handed out two ways: from free lists (`Space`: pages, split into size classes
//! where a memory tier has them), or, on a tier whose policy places its blocks, by the policy
//! itself (`Placed`), which keeps no map of its own in the shard.

use std::sync::Arc;

use tiercache_core::{Key, KeySet};

use crate::pins::{Pins, Unpinned};
use crate::stats::Stats;
use crate::tier::block::Stamp;
use crate::tier::region::{PinnedRead, Region, Staged};

/// A tier's free space in one shard: pages never split (or emptied and taken back), and per
/// size class the free slots of pages split for it. Without size classes a page is a slot.
pub(crate) struct Space {
    /// Per class: free slots.
    pub(crate) free: Vec<Vec<u32>>,
    /// Unsplit pages, the lowest on top.
    pub(crate) pages: Vec<u32>,
    /// Per page: slots in use, counting freed ones still pinned.
    pub(crate) live: Vec<u16>,
    /// On a tier written in log order, its free slots (`free` and `pages` stay empty).
    log: Option<Log>,
}

/// A flash tier's free slots, handed out in order from a head that moves on past each one
/// taken and wraps around: consecutive writes land in adjacent slots wherever the slots ahead
/// are free. Under the `log` policy they always are, since it evicts in the order blocks were
/// written and keeps a freed block's space until its own head reaches it, so the slot its head
/// frees is the one this head takes next. The write-behind then writes such runs as one (see
/// `crate::tier::behind::Staging::stage`): the device sees large sequential writes, as a
/// log-structured cache's regions, instead of a 4 KiB write at each evicted block's place.
/// Which slots are free is the policy's doing; this only picks among them.
struct Log {
    free: std::collections::BTreeSet<u32>,
    head: u32,
}

impl Log {
    /// The first free slot from the head on, wrapping around, taken.
    fn take(&mut self) -> Option<u32> {
        let slot = *self.free.range(self.head..).next().or_else(|| self.free.first())?;
        self.free.remove(&slot);
        self.head = slot + 1;
        Some(slot)
    }
}

impl Space {
    /// No free space to hand out: a tier whose policy places its blocks (`TierStore::placed`).
    fn none(region: &Region) -> Space {
        let classes = region.chunks().trailing_zeros() as usize + 1;
        Space { free: vec![Vec::new(); classes], pages: Vec::new(), live: Vec::new(), log: None }
    }

    fn new(region: &Region) -> Space {
        let classes = region.chunks().trailing_zeros() as usize + 1;
        let pages = 0..region.pages() as u32;
        let (pages, log) = match region.in_log_order() {
            true => (Vec::new(), Some(Log { free: pages.collect(), head: 0 })),
            false => (pages.rev().collect(), None),
        };
        Space {
            free: vec![Vec::new(); classes],
            pages,
            live: vec![0; region.pages() as usize],
            log,
        }
    }

    /// A free slot of `class`: a free chunk, or the first chunk of a page split for it (an
    /// unsplit page, or an emptied one taken back from its class).
    fn take(&mut self, region: &mut Region, class: u8) -> Option<u32> {
        let chunks = region.chunks();
        if let Some(log) = &mut self.log {
            let slot = log.take()?;
            self.live[slot as usize] += 1;
            return Some(slot);
        }
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

    /// Takes `held` (pages of blocks recovered, oldest first) out of the free pages, before
    /// any is handed out (pages unsplit, without size classes). A log goes on after the newest.
    pub(crate) fn claim(&mut self, held: &[u32]) {
        for &page in held {
            self.live[page as usize] = 1;
            if let Some(log) = &mut self.log {
                log.free.remove(&page);
                log.head = page + 1;
            }
        }
        self.pages.retain(|&page| self.live[page as usize] == 0);
    }

    /// Returns a slot no read holds any more.
    fn give_back(&mut self, region: &Region, slot: u32) {
        let page = slot / region.chunks();
        self.live[page as usize] -= 1;
        match &mut self.log {
            Some(log) => {
                log.free.insert(slot);
            }
            None => self.free[region.page_class(page) as usize].push(slot),
        }
    }
}

/// What a shard has of one tier: its region, the free space and pins of its slots, and the
/// slots whose blocks wait for a sync before they may go.
pub(crate) struct TierStore {
    pub(crate) region: Region,
    pub(crate) space: Space,
    /// Per slot, with size classes: the key whose block the slot holds (to empty a page for
    /// another class). Empty without size classes.
    pub(crate) owners: Vec<Key>,
    /// Per slot: reads running on it with the shard unlocked and read handles holding it,
    /// and whether it was freed meanwhile. Shared with read handles taken without the lock on
    /// the published upper tier (see `crate::pins`).
    pub(crate) pins: Arc<Pins>,
    /// Slots of dirty blocks superseded since the tier last synced (slot, key): each may be
    /// the only durable copy of a synced write until the newer copy is synced too, so it is
    /// freed only after the tier's next sync (a device may persist writes out of order).
    pub(crate) limbo: Vec<(u32, Key)>,
    /// How many of `limbo`'s first slots the sync under way may free: those held when the
    /// shard's records were flushed for it. Slots held after that wait for the next sync,
    /// whose flush writes their newer copies' records.
    pub(crate) limbo_covered: usize,
    /// Keys whose held slot (`limbo`) was marked free after the tier last synced. The mark is
    /// not durable yet, so a crash could bring that older copy back; the key's current copy
    /// must survive until it is (see `Shard::settle_erasures`).
    pub(crate) released: KeySet,
    /// The tier's policy places its blocks (set-associative): a block's slot is the one the
    /// policy gives its key, the shard keeps no free lists, and resident blocks are not in the
    /// place map, only their dirty bits here. `None` for other tiers.
    pub(crate) placed: Option<Placed>,
}

/// What a shard keeps of a tier whose policy places its blocks.
pub(crate) struct Placed {
    /// Slots per set, and how many of them the policy never fills.
    pub(crate) stride: u32,
    pub(crate) spare: u32,
    /// Per slot, a bit: the block there is dirty.
    pub(crate) dirty: crate::bits::SlotBits,
    /// Blocks the policy has dropped or moved and the shard not yet (key, slot): by the time
    /// a decision is applied, the policy no longer knows where they were, and may have given
    /// their slots to other keys.
    pub(crate) pending: Vec<(Key, u32)>,
}

impl Placed {
    pub(crate) fn is_dirty(&self, slot: u32) -> bool {
        self.dirty.get(slot)
    }

    pub(crate) fn set_dirty(&mut self, slot: u32, dirty: bool) {
        self.dirty.set(slot, dirty);
    }

    /// The slots of `slot`'s set.
    pub(crate) fn set_of(&self, slot: u32) -> std::ops::Range<u32> {
        let first = slot - slot % self.stride;
        first..first + self.stride
    }
}

impl Placed {
    /// The slot `key`'s block waits in for the decision's action that takes it (`pending`).
    pub(crate) fn pending_slot(&self, key: Key) -> Option<u32> {
        self.pending.iter().find(|(k, _)| *k == key).map(|p| p.1)
    }

    /// Whether a block waits in `slot` for the decision's action that takes it.
    pub(crate) fn is_pending(&self, slot: u32) -> bool {
        self.pending.iter().any(|&(_, s)| s == slot)
    }
}

impl TierStore {
    pub(crate) fn new(region: Region, placed: Option<(u32, u32)>) -> TierStore {
        let slots = region.slots() as usize;
        let owners = if region.chunks() > 1 { vec![0; slots] } else { Vec::new() };
        let placed = placed.map(|(stride, spare)| Placed {
            stride,
            spare,
            dirty: crate::bits::SlotBits::new(slots),
            pending: Vec::new(),
        });
        let space = match placed {
            Some(_) => Space::none(&region),
            None => Space::new(&region),
        };
        TierStore {
            space,
            owners,
            pins: Arc::new(Pins::new(slots, region.slack() - region.copy_reserve())),
            limbo: Vec::new(),
            limbo_covered: 0,
            released: KeySet::default(),
            placed,
            region,
        }
    }

    /// A free slot of `class` for `key`, if there is one.
    pub(crate) fn take(&mut self, class: u8, key: Key) -> Option<u32> {
        let slot = self.space.take(&mut self.region, class)?;
        if !self.owners.is_empty() {
            self.owners[slot as usize] = key;
        }
        Some(slot)
    }

    /// Returns a slot to the free list, or, while reads hold it, marks it to return when they
    /// end: a slot is never rewritten under a running read.
    pub(crate) fn free_slot(&mut self, slot: u32, key: Key, stats: &mut Stats) {
        self.region.vacate(slot, key);
        if self.pins.free(slot) {
            self.give_back(slot, stats);
        }
    }

    /// Marks a slot free on the medium, so recovery never brings its block back (a failure
    /// is counted). Slots found at recovery and never claimed need only this.
    pub(crate) fn mark_free(&mut self, slot: u32, stats: &mut Stats) {
        if self.region.erase(slot).is_err() {
            stats.erase_errors += 1;
        }
    }

    /// Marks a slot free on the medium and returns it to the free list (a placed tier's
    /// policy keeps its own).
    pub(crate) fn give_back(&mut self, slot: u32, stats: &mut Stats) {
        self.mark_free(slot, stats);
        if self.placed.is_none() {
            self.space.give_back(&self.region, slot);
        }
    }

    /// What the shard keeps of this tier, whose policy places its blocks.
    pub(crate) fn placed_ref(&self) -> &Placed {
        self.placed.as_ref().expect("a placed tier")
    }

    /// As [`placed_ref`](Self::placed_ref), to change.
    pub(crate) fn placed_mut(&mut self) -> &mut Placed {
        self.placed.as_mut().expect("a placed tier")
    }

    /// Whether `slot` holds a block superseded since the last sync (`limbo`).
    pub(crate) fn holds_for_sync(&self, slot: u32) -> bool {
        self.limbo.iter().any(|&(s, _)| s == slot)
    }

    /// Whether `slot` of a placed tier may not take a block now: a read or a write runs on
    /// it, it holds the only durable copy of a block until the next sync (`limbo`), or the
    /// decision being applied has yet to take its block out (`Placed::pending`).
    pub(crate) fn busy(&self, slot: u32) -> bool {
        self.pins.held(slot)
            || self.holds_for_sync(slot)
            || self.placed.as_ref().is_some_and(|p| p.is_pending(slot))
    }

    /// Whether `slot` may be pinned once more: every pinned slot may be freed while pinned,
    /// and two slots must stay free for a promotion's swap and an overwrite's copy. This also
    /// bounds the reads and writes a shard has in flight, and the buffers they hold. On a
    /// placed tier the slot's set must keep a free slot that is not busy for any insert or
    /// overwrite: of the set's spare slots, all but one may be busy.
    pub(crate) fn can_pin(&self, slot: u32) -> bool {
        if !self.pins.has_room(slot) {
            return false;
        }
        let Some(placed) = &self.placed else { return true };
        if self.pins.held(slot) {
            return true;
        }
        let busy = placed.set_of(slot).filter(|&s| self.busy(s)).count() as u32;
        busy + 1 < placed.spare
    }

    /// Pins `slot`, which [`can_pin`](Self::can_pin) allowed: on a tier that nobody pins
    /// without the lock, nothing took the room meanwhile.
    pub(crate) fn pin(&mut self, slot: u32) {
        let pinned = self.pins.pin(slot);
        assert!(pinned, "slot {slot} pinned without room");
    }

    /// Starts a read of `key`'s block in `slot` of a file or flash tier, to run with the shard
    /// unlocked: the slot is pinned until [`end_read`](Self::end_read). `None` if the tier's
    /// records say the slot holds no block of `key`.
    pub(crate) fn begin_read(&mut self, slot: u32, key: Key) -> Option<PinnedRead> {
        let read = self.region.begin_read(slot, key)?;
        self.pin(slot);
        Some(read)
    }

    /// Ends a read that [`begin_read`](Self::begin_read) started: its buffer taken back, the
    /// slot unpinned.
    pub(crate) fn end_read(&mut self, slot: u32, read: PinnedRead, stats: &mut Stats) {
        match read.pinned_pages() {
            Some(pages) => {
                let pages: Vec<u32> = pages.collect();
                for page in pages {
                    self.unpin(page, stats);
                }
            }
            None => self.unpin(slot, stats),
        }
        self.region.end_read(read);
    }

    /// Starts a read of the object of `key` spanning the pages `slots` of a flash tier, to run
    /// with the shard unlocked, every page pinned until [`end_read`](Self::end_read). `None`
    /// (nothing pinned) where there is no room to pin them all, or a page's record is not of
    /// `key`: the caller reads under the lock.
    pub(crate) fn begin_read_pages(&mut self, slots: &[u32], key: Key) -> Option<PinnedRead> {
        if !self.pin_all(slots) {
            return None;
        }
        let read = self.region.begin_read_pages(slots, key);
        if read.is_none() {
            self.unpin_all(slots);
        }
        read
    }

    /// Pins every slot of `slots` (none pinned yet, under the lock), or none where there is no
    /// room for them all (false).
    fn pin_all(&self, slots: &[u32]) -> bool {
        for (i, &slot) in slots.iter().enumerate() {
            if !self.pins.pin(slot) {
                self.unpin_all(&slots[..i]);
                return false;
            }
        }
        true
    }

    /// Lets go of pins `pin_all` took, none of them on a slot freed meanwhile.
    fn unpin_all(&self, slots: &[u32]) {
        for &slot in slots {
            self.pins.unpin(slot);
        }
    }

    /// Prepares the write of `value` for `key` into `slot` of a file or flash tier to run
    /// with the shard unlocked (written behind), the slot pinned until it lands
    /// ([`end_write`](Self::end_write)); `None` (nothing done) on memory tiers, or when the
    /// slot may not be pinned now: the caller writes it at once.
    pub(crate) fn begin_write(
        &mut self,
        slot: u32,
        key: Key,
        value: &[u8],
        stamp: Stamp,
    ) -> Option<Staged> {
        if !self.can_pin(slot) {
            return None;
        }
        let staged = self.region.begin_write(slot, key, value, stamp)?;
        self.pin(slot);
        Some(staged)
    }

    /// Ends a write that [`begin_write`](Self::begin_write) prepared: the block reads back if
    /// it landed (`ok`), and the slot is unpinned.
    pub(crate) fn end_write(
        &mut self,
        slot: u32,
        staged: Arc<Staged>,
        ok: bool,
        stats: &mut Stats,
    ) {
        let pages: Vec<u32> = staged.pages.iter().map(|p| p.0).collect();
        self.region.end_write(slot, staged, ok);
        if pages.is_empty() {
            self.unpin(slot, stats);
        }
        for page in pages {
            self.unpin(page, stats);
        }
    }

    /// Prepares the write of `data`, an object of `key` spanning `count` adjacent pages from
    /// `first` of a flash tier, to run with the shard unlocked, every page pinned until it
    /// lands ([`end_write`](Self::end_write)); `None` (nothing done) where the pages cannot
    /// all be pinned now: the caller writes them at once.
    pub(crate) fn begin_write_pages(
        &mut self,
        first: u32,
        key: Key,
        data: &[u8],
        seq: u64,
    ) -> Option<Staged> {
        let count = data.len().div_ceil(self.region.slot_bytes()) as u32;
        let slots: Vec<u32> = (first..first + count).collect();
        if !self.pin_all(&slots) {
            return None;
        }
        let staged = self.region.begin_write_pages(first, key, data, seq);
        if staged.is_none() {
            self.unpin_all(&slots);
        }
        staged
    }

    /// Releases a pin (of an unlocked read or write, or a read handle).
    pub(crate) fn unpin(&mut self, slot: u32, stats: &mut Stats) {
        if self.pins.unpin(slot) == Unpinned::Zombie {
            self.give_back_zombie(slot, stats);
        }
    }

    /// A slot freed while pinned, whose last pin has gone: back to the free list.
    pub(crate) fn give_back_zombie(&mut self, slot: u32, stats: &mut Stats) {
        self.give_back(slot, stats);
        self.pins.revive(slot);
    }
}

#[cfg(test)]
mod tests {
    use super::Log;

    #[test]
    fn a_log_hands_out_free_slots_in_order_from_its_head_and_wraps() {
        let mut log = Log { free: (0..8).collect(), head: 0 };
        let taken: Vec<u32> = (0..8).map(|_| log.take().unwrap()).collect();
        assert_eq!(taken, [0, 1, 2, 3, 4, 5, 6, 7]);
        assert_eq!(log.take(), None, "full");
        // Freed in any order, taken from the head on (it stands past 7, so it wraps to 0).
        log.free.extend([6, 1, 3]);
        assert_eq!(log.take(), Some(1));
        log.free.insert(0);
        assert_eq!([log.take(), log.take(), log.take()], [Some(3), Some(6), Some(0)]);
    }
}
