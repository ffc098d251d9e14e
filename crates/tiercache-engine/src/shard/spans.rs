//! Values larger than a block (objects, `KeyedCache`'s): one entry of the policy, sized as the
//! pages it takes, stored on as many pages of its tier as it needs. Its first page is its place
//! (the place map's slot), the others are kept here, in order. Every page is written with a
//! header of its own carrying the key, one sequence number for the whole object and which page
//! it is (`crate::tier::block::Part`), so recovery keeps an object only whole.
//!
//! Pages are taken wherever free, not in one run: a tier never has to be compacted to find
//! room, and the policy's byte count is exactly the pages used, so the engine decides as the
//! simulator does on the same sizes. Objects spanning pages are kept clean (the builder refuses
//! them in modes that keep data dirty). On memory tiers they are read and written under the
//! shard's lock (a cache with them publishes nothing for hits without it); on flash, an
//! object's pages are read with the shard unlocked, pinned meanwhile, and pages in adjacent
//! slots are written as one device write, behind the caller where the pages can be pinned.

use tiercache_core::{Key, TierId};

use super::Shard;
use crate::error::EngineError;
use crate::tier::block::{Part, ReadFault, Stamp};
use crate::tier::Place;

impl Shard {
    /// Lets values span pages (`CacheBuilder::max_value` beyond a block).
    pub fn allow_spans(&mut self, on: bool) {
        self.span_pages = on;
    }

    /// Whether the policy is told each value's size (size classes, or values spanning pages)
    /// rather than a block for every key.
    #[inline]
    pub(super) fn sized(&self) -> bool {
        self.classes || self.span_pages
    }

    /// The size the policy counts for a value of `len` bytes: its pages beyond a block, the
    /// smallest class that holds it within one.
    pub(super) fn size_of_value(&self, len: u32) -> u32 {
        if len > self.block_size {
            return len.div_ceil(self.block_size) * self.block_size;
        }
        self.class_size(len)
    }

    /// Whether `key`'s value spans pages.
    #[inline]
    pub(super) fn spans_pages(&self, key: Key) -> bool {
        !self.spans.is_empty() && self.spans.contains_key(&key)
    }

    /// The pages of `key`'s value after the first, if it spans pages.
    pub(super) fn pages_after(&self, key: Key) -> Option<&[u32]> {
        self.spans.get(&key).map(|pages| &pages[..])
    }

    /// Every page of `key`'s value spanning pages, its first (`first`, its place's slot) first.
    pub(super) fn span_slots(&self, key: Key, first: u32) -> Vec<u32> {
        let pages = self.pages_after(key).expect("a value spanning pages has its pages");
        std::iter::once(first).chain(pages.iter().copied()).collect()
    }

    /// Takes the first page and the pages after it of a value of `size` bytes on `tier`, for
    /// `key`; the first is returned, the others recorded.
    fn take_span(&mut self, tier: TierId, key: Key, size: u32) -> u32 {
        let first = self.allocate(tier, 0, key);
        self.take_pages(tier, key, first, size);
        first
    }

    /// Frees the pages `first` and `after` of `key`'s old copy on tier `t`.
    fn free_span(&mut self, t: usize, key: Key, first: u32, after: &[u32]) {
        self.free_slot(t, first, key);
        for &page in after {
            self.free_slot(t, page, key);
        }
    }

    /// Takes the pages after `first` that a value of `size` bytes (a multiple of the block)
    /// needs on `tier`, for `key`, and records them.
    pub(super) fn take_pages(&mut self, tier: TierId, key: Key, first: u32, size: u32) {
        let count = size.div_ceil(self.block_size) as usize;
        self.gathering.clear();
        self.gathering.push(first);
        while self.gathering.len() < count {
            let page = self.allocate(tier, 0, key);
            self.gathering.push(page);
        }
        let pages = self.gathering[1..].into();
        self.gathering.clear();
        self.spans.insert(key, pages);
    }

    /// Frees the pages after the first of `key`'s value on `tier`, if it spans pages.
    pub(super) fn free_pages(&mut self, tier: usize, key: Key) {
        if let Some(pages) = self.spans.remove(&key) {
            for page in pages.iter() {
                self.free_slot(tier, *page, key);
            }
        }
    }

    /// Writes `data`, a value spanning pages, to its first page (`place`) and the pages
    /// recorded after it, one sequence number for them all.
    pub(super) fn write_span(
        &mut self,
        place: Place,
        key: Key,
        data: &[u8],
    ) -> Result<Place, EngineError> {
        let slots = self.span_slots(key, place.slot);
        let count = slots.len() as u32;
        let block = self.block_size as usize;
        assert_eq!(data.len().div_ceil(block), count as usize, "key {key}: pages for its value");
        self.seq += 1;
        let seq = self.seq;
        // Pages in a run of adjacent slots (a log-ordered flash tier hands them out so) are
        // written behind as one job, read from the staged copy until it lands.
        let adjacent = slots.iter().zip(place.slot..).all(|(slot, next)| *slot == next);
        if self.staging.is_on() && adjacent {
            let store = &mut self.tiers[place.tier as usize];
            if let Some(staged) = store.begin_write_pages(place.slot, key, data, seq) {
                let place = Place { staged: true, ..place };
                let slack = store.region.slack();
                let run = crate::tier::behind::run_slots(store.region.slot_bytes(), slack);
                self.staging.stage(key, place, staged, run);
                self.stats.writes_behind += 1;
                return Ok(place);
            }
        }
        let region = &mut self.tiers[place.tier as usize].region;
        region.write_pages(&slots, key, data, |i| Stamp {
            seq,
            dirty: false,
            part: Part::of(i as u32, count),
        })?;
        Ok(Place { staged: false, ..place })
    }

    /// Copies `key`'s value spanning pages out under the lock into `buf`, or, if it is
    /// shorter than the value, into the spill (`take_spill`) and as much as fits into `buf`;
    /// returns the value's length.
    pub(super) fn copy_span(
        &mut self,
        key: Key,
        place: Place,
        buf: &mut [u8],
    ) -> Result<usize, ReadFault> {
        let size = self.stored_size(key).expect("resident") as usize;
        if buf.len() >= size {
            return self.read_block(key, place, buf);
        }
        // Grown, never shrunk nor zeroed again: the read overwrites what it returns.
        let mut spill = std::mem::take(&mut self.spill);
        if spill.len() < size {
            spill.resize(size, 0);
        }
        let read = self.read_block(key, place, &mut spill[..size]);
        if let Ok(len) = read {
            self.spilled = len;
            let n = len.min(buf.len());
            buf[..n].copy_from_slice(&spill[..n]);
        }
        self.spill = spill;
        read
    }

    /// The whole value of the last read whose value was longer than its buffer.
    pub fn take_spill(&mut self) -> Vec<u8> {
        self.spill[..self.spilled].to_vec()
    }

    /// Moves a value spanning pages between tiers (see `relocate`); false if it did not read
    /// back whole (the caller drops it).
    pub(super) fn relocate_span(&mut self, key: Key, from: TierId, to: TierId) -> bool {
        let old = self.take_place(key).expect("a move of a resident key");
        let size = self.stored_size_of_span(key);
        let mut scratch = std::mem::take(&mut self.scratch);
        if scratch.len() < size as usize {
            scratch.resize(size as usize, 0);
        }
        let read = self.read_block(key, old, &mut scratch[..size as usize]);
        // The object leaves its pages: a write of them still behind is not its copy any more.
        self.staging.remove(key);
        let old_pages = self.spans.remove(&key).expect("spans pages");
        let mut new = Place::new(to.0, self.take_span(to, key, size));
        let good = match read {
            Ok(len) => match self.write_span(new, key, &scratch[..len]) {
                Ok(written) => {
                    new = written;
                    self.count_move(from, to, len);
                    true
                }
                Err(_) => {
                    self.stats.io_errors += 1;
                    false
                }
            },
            Err(fault) => {
                self.count_fault(&fault);
                false
            }
        };
        self.scratch = scratch;
        self.free_span(from.index(), key, old.slot, &old_pages);
        self.set_place(key, new);
        good
    }

    /// The size of `key`'s value spanning pages, as its pages.
    fn stored_size_of_span(&self, key: Key) -> u32 {
        (self.spans[&key].len() as u32 + 1) * self.block_size
    }

    /// Overwrites `key`'s value spanning pages in place with `data`, of as many pages (a value
    /// of another size was dropped before its write was decided: `drop_if_reclassed`). A crash
    /// in the middle leaves pages of two sequence numbers, which recovery drops whole.
    ///
    /// Where a read or a write running with the shard unlocked holds its pages (file and flash
    /// tiers), the new value goes to fresh pages (the region keeps room for them: its
    /// `copy_reserve`) and the old ones are freed, given back once let go.
    pub(super) fn overwrite_span(&mut self, key: Key, data: &[u8]) -> bool {
        let place = self.place(key).expect("an overwrite of a resident key");
        let store = &self.tiers[place.tier as usize];
        let held = self.span_slots(key, place.slot).into_iter().any(|s| store.pins.held(s));
        if held {
            return self.overwrite_span_elsewhere(key, data);
        }
        let old = self.take_place(key).expect("an overwrite of a resident key");
        let written = self.store_or_fail(Place::new(old.tier, old.slot), key, data);
        self.stats.updates += written as u64;
        written
    }

    /// Overwrites `key`'s value spanning pages with `data` in fresh pages of its tier, the old
    /// ones freed once the new are written (see `overwrite_span`).
    fn overwrite_span_elsewhere(&mut self, key: Key, data: &[u8]) -> bool {
        let old = self.take_place(key).expect("an overwrite of a resident key");
        if old.staged {
            self.staging.remove(key);
        }
        let old_pages = self.spans.remove(&key).expect("spans pages");
        let first = self.take_span(TierId(old.tier), key, self.size_of_value(data.len() as u32));
        let written = self.store_or_fail(Place::new(old.tier, first), key, data);
        self.free_span(old.tier as usize, key, old.slot, &old_pages);
        self.stats.updates += written as u64;
        written
    }

    /// Whether `key`'s value holds `slot` of tier `t` (its first page, or one after it).
    pub(super) fn holds_slot(&self, t: usize, key: Key, slot: u32) -> bool {
        self.places.get(&key).is_some_and(|p| {
            p.tier as usize == t
                && (p.slot == slot || self.pages_after(key).is_some_and(|ps| ps.contains(&slot)))
        })
    }
}
