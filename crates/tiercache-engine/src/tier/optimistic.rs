//! Hits served without the shard's lock, the policy told afterwards in batches.
//!
//! With the lock on the hit path, every hit writes the shard's lock word and its policy state,
//! and with several cores those cache lines keep moving between them: on this project's 2-core
//! machine two threads hitting a shared cache ran at 5.6M ops/s where two private caches ran at
//! 7.9M. BP-Wrapper (Ding, Jiang and Zhang, "BP-Wrapper: A System Framework Making Any
//! Replacement Algorithms (Almost) Lock Contention Free", ICDE 2009) takes the replacement
//! policy off the hit path: a hit is recorded in a per-thread queue and committed to the policy
//! in a batch, under one lock acquisition. Here:
//!
//! - **Finding and copying a block without the lock.** The upper tier of each shard publishes
//!   its blocks in a [`SlotTable`]: a set-associative table from key to slot, value length and
//!   sequence number, three keys to a 64-byte set. Writers (holding the shard's lock) make a
//!   key's sequence number odd, write the slot, and make it even again; a block that leaves
//!   its slot is unpublished first. A reader copies the value between two reads of the
//!   sequence number and keeps the copy only if it did not change and the way still names the
//!   key (a seqlock). Both sides copy the bytes as byte-wise atomics (`atomic_bytes`), so a
//!   read racing a write is defined behaviour. Where the caller keeps its buffer on a miss
//!   (`get`) the reader copies to its stack first, and the caller's buffer receives only a copy
//!   that checked out; a read through to the backing store copies straight into the caller's
//!   buffer and overwrites a refused copy (see [`Landing`]). A mapped block's header and
//!   checksum are checked on its first hit and the way marked; later hits skip the check until
//!   the way changes, and the scrubber checks marked blocks again (see the `scrub` module).
//!   Anything unusual (a key not published, a write under way, a checksum that fails on a
//!   mapped tier) falls back to the locked path, which deals with it as before.
//! - **Telling the policy.** The hit is appended to the calling thread's ring for the shard
//!   (a [`HitLog`]: one writer per ring, so no atomic read-modify-write per hit). The rings
//!   are committed, in order, before anything else is done under the shard's lock, and a
//!   full ring takes the lock to commit, so the policy hears of a thread's hits before any
//!   request of that thread that follows them. One thread therefore gets exactly the
//!   decisions it would get with the lock on every hit; the engine-equals-simulator test runs
//!   over this path, with the lock on every hit and without. With several threads, a hit may be
//!   told a little later than a request of another thread that came after it, as in BP-Wrapper.
//! - **Telling the policy less.** Under the hit rule `epochs` (the engine's default,
//!   `tiercache_policy::told`), a policy is told only a key's first hit an epoch. The epoch's
//!   tag is the shard's (`SlotTable::set_tag`), and a key's last told hit is stamped in its
//!   way's state (see [`STAMPS`]): a reader that finds the current tag there copies the block
//!   and counts the hit in its thread's stripe (`HitLog::count_untold`), with no ring entry;
//!   one that does not stamps the way and logs the hit as above. The policy's wrapper keeps
//!   the same stamps and decides the hits that reach it the same way, so one thread still
//!   decides as the simulator replaying the rule.
//!
//! Only policies whose hits in the upper tier are *quiet* take this path: a hit decides
//! nothing but the policy's own bookkeeping (no move, no eviction, no read sent elsewhere, no
//! periodic work), and a lookup of a key no longer resident changes nothing. See
//! `AnyPolicy::quiet_hits`. Read handles (`get_ref`) take the same path without a copy: they
//! pin the slot (an atomic count per slot, `crate::pins`) and check the way unchanged after,
//! so the slot is neither rewritten nor reused while held (`SlotTable::hold`); their hits are
//! told to the policy in the same batches.

use std::sync::Arc;

#[cfg(not(loom))]
use memmap2::MmapRaw;
use tiercache_core::Key;

use crate::sync::{fence, AtomicU32, AtomicU64, Ordering};

use crate::tier::block::{self, HEADER_BYTES};

/// Ways per set: three keys, each with its slot, length and sequence number, in one 64-byte
/// cache line, so a lookup reads one line.
const WAYS: usize = 3;

/// The largest block (with its header) read without the lock: it is copied to the stack
/// first, checked, and only then to the caller. Larger blocks take the lock. (Small under
/// loom, whose threads run on small stacks.)
#[cfg(not(loom))]
pub const SCRATCH_BYTES: usize = 16 << 10;
#[cfg(loom)]
pub const SCRATCH_BYTES: usize = 64;

/// Hits a batch holds before it is committed: BP-Wrapper's 64 (its queue size, on one lock).
/// Committing a batch takes the shard's lock and its lines from the core that last had them;
/// on this project's 2-core machine, batches of 64 rather than 16 took two threads' hits
/// from 69% to 75% of a raw copy's rate on DRAM (docs/history/RESULTS-2026-11.md). A thread's
/// rings for shards it never hits are never touched, so their memory is not committed
/// (`empty_rings`).
/// (Two under loom, so that its models fill and wrap rings in a few steps.)
#[cfg(not(loom))]
pub const BATCH: usize = 64;
#[cfg(loom)]
pub const BATCH: usize = 2;

/// One key's published block, a way of a set. `state` is the sequence number (high half; odd
/// while the slot is being written) and the slot plus one (low half; 0 when the way holds no
/// block).
#[derive(Clone, Copy)]
pub struct Way<'a> {
    key: &'a AtomicU64,
    state: &'a AtomicU64,
    len: &'a AtomicU32,
}

impl Way<'_> {
    /// The seqlock's second look, after a copy made under `state`: whether the way still
    /// holds `key` in that state, so the copy is whole and the key's. The acquire fence pairs
    /// with the release fence of `begin_write`: a copy that saw any byte written after it
    /// sees the new state here.
    #[inline(always)]
    fn unchanged(&self, state: u64, key: Key) -> bool {
        fence(Ordering::Acquire);
        self.state.load(Ordering::Relaxed) == state && self.key.load(Ordering::Relaxed) == key
    }

    /// A reader's change of the mark: from the state it checked to `to`, only if the way is
    /// still in that state (a write since changed it, and leaves the mark off).
    #[inline]
    fn remark(&self, from: u64, to: u64) {
        let _ = self.state.compare_exchange(from, to, Ordering::Relaxed, Ordering::Relaxed);
    }

    /// The lock holder's change of the way's state to `next` of it, without the marks
    /// (`marks`: the check's, and the hit's stamp where the table has one). A
    /// read-modify-write, not a load and a store: a reader's mark (a compare-and-swap from the
    /// state it checked) lands either before the change, which then drops it, or fails.
    #[inline]
    fn change(&self, order: Ordering, marks: u64, next: impl Fn(u64) -> u64) {
        let _ =
            self.state.fetch_update(order, Ordering::Relaxed, |state| Some(next(state) & !marks));
    }
}

/// A set's ways, field by field so that three fit a line (60 of its 64 bytes).
#[repr(C, align(64))]
struct Set {
    keys: [AtomicU64; WAYS],
    states: [AtomicU64; WAYS],
    lens: [AtomicU32; WAYS],
}

impl Set {
    /// A set with every way empty (all atomics 0), as anonymous memory starts out.
    #[cfg(loom)]
    fn empty() -> Set {
        Set {
            keys: std::array::from_fn(|_| AtomicU64::new(0)),
            states: std::array::from_fn(|_| AtomicU64::new(0)),
            lens: std::array::from_fn(|_| AtomicU32::new(0)),
        }
    }

    #[inline]
    fn ways(&self) -> impl Iterator<Item = Way<'_>> {
        (0..WAYS).map(|i| Way { key: &self.keys[i], state: &self.states[i], len: &self.lens[i] })
    }
}

const SEQ_ONE: u64 = 1 << 32;

/// In a way's state, below the slot: the block was checked (header and checksum) by a hit
/// since the way last changed. Set only by a compare-and-swap from the state the checking
/// reader saw; every change of the way by the lock holder leaves it off.
const VERIFIED: u64 = 1 << 31;

/// In a way's state, above the slot, on a table of fewer slots than [`STAMPED_SLOTS`]: the
/// tag of the epoch of the key's last hit told to the policy, 0 for none, where the policy is
/// told a key's first hit an epoch (`tiercache_policy::told`). A reader that finds the current
/// epoch's tag there tells the policy nothing; one that does not tells it and sets the tag
/// (a compare-and-swap from the state it checked, as the check's mark). Every change of the
/// way by the lock holder clears it, as a write clears the policy's stamp.
const STAMP_SHIFT: u32 = 24;
const STAMPS: u64 = 0x7F << STAMP_SHIFT;

/// Tables with fewer slots than this keep the hits' stamps beside the slot (its number and one
/// fit the 24 bits below [`STAMPS`]); larger ones tell every hit.
pub const STAMPED_SLOTS: usize = (1 << STAMP_SHIFT) - 1;

/// The current epoch's tag (see [`STAMPS`]), set by the shard's lock holder as its policy
/// moves on, read by every hit; 0 when every hit is told. On a line of its own.
#[repr(align(128))]
pub struct Tag(AtomicU32);

/// The sets of every shard's table, in one anonymous mapping on huge pages where the kernel
/// gives them: a hit reads one set at random, and with 4 KiB pages most would also miss the
/// TLB (one mapping, so that its size reaches a huge page).
pub struct Sets {
    #[cfg(not(loom))]
    memory: memmap2::MmapMut,
    /// Where the first set starts in `memory`: at a huge-page boundary.
    #[cfg(not(loom))]
    start: usize,
    /// Under loom, whose atomics are objects of their own, a plain allocation of empty sets.
    #[cfg(loom)]
    sets: Box<[Set]>,
    count: usize,
}

/// The huge-page size the sets are aligned to (x86-64 and most arm64 kernels).
#[cfg(not(loom))]
const HUGE_PAGE: usize = 2 << 20;

impl Sets {
    /// Sets for `shards` tables of `slots` slots each.
    #[cfg(loom)]
    pub fn new(shards: usize, slots: usize) -> std::io::Result<Arc<Sets>> {
        let count = shards * Sets::per_table(slots);
        Ok(Arc::new(Sets { sets: (0..count).map(|_| Set::empty()).collect(), count }))
    }

    /// Sets for `shards` tables of `slots` slots each.
    #[cfg(not(loom))]
    pub fn new(shards: usize, slots: usize) -> std::io::Result<Arc<Sets>> {
        let count = shards * Sets::per_table(slots);
        let bytes = count * std::mem::size_of::<Set>();
        // A huge page more than needed, to start the sets at a huge-page boundary: the kernel
        // backs only aligned 2 MiB runs with huge pages.
        let memory = memmap2::MmapOptions::new().len(bytes + HUGE_PAGE).map_anon()?;
        #[cfg(target_os = "linux")]
        let _ = memory.advise(memmap2::Advice::HugePage);
        let start = memory.as_ptr().align_offset(HUGE_PAGE);
        Ok(Arc::new(Sets { memory, start, count }))
    }

    /// Sets of a table of `slots` slots: at least one per slot, so a key rarely finds its
    /// three-way set full. With the table full, sets hold between half a key and one key on
    /// average, and between one key in 260 and one in 43 finds its set full (Poisson); its
    /// hits then take the lock.
    fn per_table(slots: usize) -> usize {
        slots.next_power_of_two()
    }

    #[cfg(loom)]
    fn as_ptr(&self) -> *const Set {
        self.sets.as_ptr()
    }

    #[cfg(not(loom))]
    fn as_ptr(&self) -> *const Set {
        // Anonymous memory is zeroed, and `start` page-aligned: all-zero sets (every way empty,
        // its atomics 0) at an alignment beyond `Set`'s 64 bytes.
        // SAFETY: `start` is within the huge page added at the end, so the sets fit after it.
        unsafe { self.memory.as_ptr().add(self.start).cast() }
    }
}

/// The blocks of one shard's upper tier as readers without the lock see them: a
/// set-associative table from key to slot, length and sequence number. Written only under the
/// shard's lock (through its region), read by anyone. A key whose set is full is not published
/// (its hits take the lock) until a way frees up and a locked hit publishes it.
///
/// Cloning gives another handle on the same sets: the region writes through one, and the
/// cache keeps one per shard inline, so a reader goes from the cache to its set in one step.
#[derive(Clone)]
#[repr(align(64))]
pub struct SlotTable {
    /// The first of `set_mask + 1` sets in `_sets`, which keeps them allocated.
    sets: *const Set,
    set_mask: usize,
    _sets: Arc<Sets>,
    memory: SlotMemory,
    /// Where slot 0 starts in `memory`.
    slots_at: usize,
    slot_bytes: usize,
    slots: u32,
    /// Where the blocks' headers start in `memory` (a header and checksum per slot, in slot
    /// order, on mapped tiers), checked with the copy; `None` on DRAM.
    headers_at: Option<usize>,
    /// A block's check is marked in its way and not repeated while the way is unchanged.
    mark: bool,
    /// The pins of the table's slots, for read handles taken without the lock (`hold`, which
    /// the loom models do not build).
    #[cfg_attr(loom, allow(dead_code))]
    pins: Option<Arc<crate::pins::Pins>>,
    /// The bits of a way's state that hold its slot (plus one).
    slot_bits: u64,
    /// The bits that hold the stamp of its last told hit ([`STAMPS`]), or none.
    stamps: u64,
    /// The current epoch's tag, shared by the table's handles.
    tag: Arc<Tag>,
}

// SAFETY: `sets` points into `_sets`, living as long as the table; the sets are all atomics.
// The slots' bytes are only read here, as byte-wise atomics, and a copy is used only once the
// seqlock validates it (see `SlotTable::read`).
unsafe impl Send for SlotTable {}
unsafe impl Sync for SlotTable {}

/// Where a table's slots, and their headers if they have them, lie in its memory.
#[derive(Clone, Copy, Debug)]
pub struct SlotLayout {
    pub slots_at: usize,
    pub slots: usize,
    pub slot_bytes: usize,
    pub headers_at: Option<usize>,
}

impl SlotLayout {
    /// The bytes of memory the layout reaches to.
    fn end(&self) -> usize {
        let headers = self.headers_at.map_or(0, |at| at + self.slots * HEADER_BYTES);
        headers.max(self.slots_at + self.slots * self.slot_bytes)
    }
}

/// The bytes of a table's slots: the tier's mapping.
#[cfg(not(loom))]
#[derive(Clone)]
struct SlotMemory {
    base: *const u8,
    /// Keeps the memory `base` points into mapped.
    _mapping: Arc<MmapRaw>,
}

#[cfg(not(loom))]
impl SlotMemory {
    /// Copies `len` bytes at `at` to `dst` as byte-wise atomics.
    ///
    /// # Safety
    /// `at..at + len` lies in the table's slots; `dst..dst + len` is writable and private.
    #[inline]
    unsafe fn load(&self, at: usize, dst: *mut u8, len: usize) {
        // SAFETY: the caller's contract.
        unsafe { crate::atomic_bytes::load(self.base.add(at), dst, len) }
    }
}

/// Under loom, the slots are words of loom atomics, which the model's writer stores to (its
/// reads and writes are then part of what loom explores).
#[cfg(loom)]
#[derive(Clone)]
pub struct SlotMemory {
    pub words: Arc<[AtomicU64]>,
}

#[cfg(loom)]
impl SlotMemory {
    /// Copies `len` bytes at `at` (a multiple of 8) to `dst`, a relaxed load a word.
    unsafe fn load(&self, at: usize, dst: *mut u8, len: usize) {
        assert_eq!(at % 8, 0, "the model's slots start on words");
        for (i, word) in self.words[at / 8..].iter().take(len.div_ceil(8)).enumerate() {
            let bytes = word.load(Ordering::Relaxed).to_le_bytes();
            let n = (len - i * 8).min(8);
            // SAFETY: inside `dst..dst + len`.
            unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), dst.add(i * 8), n) };
        }
    }

    /// The model's writer: `bytes` (a multiple of 8 long) at `at`, a relaxed store a word.
    pub fn store(&self, at: usize, bytes: &[u8]) {
        for (i, chunk) in bytes.chunks(8).enumerate() {
            let word = u64::from_le_bytes(chunk.try_into().expect("whole words"));
            self.words[at / 8 + i].store(word, Ordering::Relaxed);
        }
    }
}

impl SlotTable {
    /// Table `shard` of `sets`, over the slots `layout` places in `mapping`.
    #[cfg(not(loom))]
    pub fn new(sets: (&Arc<Sets>, usize), mapping: Arc<MmapRaw>, layout: SlotLayout) -> SlotTable {
        assert!(layout.end() <= mapping.len(), "slot table past its mapping");
        let memory = SlotMemory { base: mapping.as_ptr(), _mapping: mapping };
        SlotTable::over(sets, memory, layout)
    }

    /// Table `shard` of `sets` over the slots `layout` places in `memory`.
    #[cfg(loom)]
    pub fn new(sets: (&Arc<Sets>, usize), memory: SlotMemory, layout: SlotLayout) -> SlotTable {
        assert!(layout.end() <= memory.words.len() * 8, "slot table past its memory");
        SlotTable::over(sets, memory, layout)
    }

    fn over(
        (sets, shard): (&Arc<Sets>, usize),
        memory: SlotMemory,
        layout: SlotLayout,
    ) -> SlotTable {
        let SlotLayout { slots_at, slots, slot_bytes, headers_at } = layout;
        assert!(slots < VERIFIED as usize, "slot numbers fit in 31 bits");
        let stamped = slots < STAMPED_SLOTS;
        let count = Sets::per_table(slots);
        assert!((shard + 1) * count <= sets.count, "table {shard} past its sets");
        SlotTable {
            // SAFETY: inside the sets (asserted above).
            sets: unsafe { sets.as_ptr().add(shard * count) },
            set_mask: count - 1,
            _sets: sets.clone(),
            memory,
            slots_at,
            slot_bytes,
            slots: slots as u32,
            headers_at,
            mark: headers_at.is_some(),
            pins: None,
            slot_bits: if stamped { (1 << STAMP_SHIFT) - 1 } else { VERIFIED - 1 },
            stamps: if stamped { STAMPS } else { 0 },
            tag: Arc::new(Tag(AtomicU32::new(0))),
        }
    }

    /// The slot a way's state names, `None` for an empty way.
    #[inline(always)]
    fn slot_of(&self, state: u64) -> Option<u32> {
        ((state & self.slot_bits) as u32).checked_sub(1)
    }

    /// The marks a change by the lock holder clears.
    #[inline(always)]
    fn cleared(&self) -> u64 {
        VERIFIED | self.stamps
    }

    /// Sets the current epoch's tag (the lock holder, as its policy moves on; see
    /// [`STAMPS`]). Written only when it changes: every hit reads its line.
    #[inline]
    pub fn set_tag(&self, tag: u8) {
        if self.tag.0.load(Ordering::Relaxed) != tag as u32 {
            self.tag.0.store(tag as u32, Ordering::Relaxed);
        }
    }

    /// Stamps `key`'s way with `tag`, the lock holder's record of a hit it told the policy
    /// (readers without the lock stamp their own).
    pub fn restamp(&self, key: Key, tag: u8) {
        let want = (tag as u64) << STAMP_SHIFT;
        let Some(way) = self.way_of(key, None).filter(|_| self.stamps != 0) else { return };
        let _ = way.state.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |state| {
            (state & self.stamps != want).then_some(state & !self.stamps | want)
        });
    }

    /// Whether a hit in `state` is told to the policy, and the state that records it: the
    /// current epoch's stamp in it (see [`STAMPS`]).
    #[inline(always)]
    fn tell(&self, state: u64) -> (bool, u64) {
        let tag = self.tag.0.load(Ordering::Relaxed) as u64;
        if tag == 0 || self.stamps == 0 {
            return (true, state);
        }
        let stamp = tag << STAMP_SHIFT;
        match state & self.stamps == stamp {
            true => (false, state),
            false => (true, state & !self.stamps | stamp),
        }
    }

    /// This table, with the pins of its slots: read handles may then hold its blocks without
    /// the lock (`hold`).
    pub fn with_pins(self, pins: Arc<crate::pins::Pins>) -> SlotTable {
        SlotTable { pins: Some(pins), ..self }
    }

    fn set_of(&self, key: Key) -> &Set {
        // Shards take the top bits of another mix of the key; take these from a second one.
        let mixed = key.wrapping_mul(0x9E37_79B9_7F4A_7C15);
        // SAFETY: the index is masked to one of the `set_mask + 1` sets `_sets` holds.
        unsafe { &*self.sets.add((mixed >> 20) as usize & self.set_mask) }
    }

    /// The way holding `key`'s block (any slot if `slot` is `None`).
    fn way_of(&self, key: Key, slot: Option<u32>) -> Option<Way<'_>> {
        self.set_of(key).ways().find(|way| {
            let held = self.slot_of(way.state.load(Ordering::Relaxed));
            held.is_some()
                && way.key.load(Ordering::Relaxed) == key
                && slot.is_none_or(|slot| held == Some(slot))
        })
    }

    /// Starts writing `key`'s block into `slot` (under the shard's lock). If `key` is
    /// published in `slot` (an overwrite in place), readers stop taking it until `end_write`,
    /// which is given the way returned; any other slot of `key` was vacated first.
    pub fn begin_write(&self, slot: u32, key: Key) -> Option<Way<'_>> {
        let way = self.way_of(key, Some(slot));
        if let Some(way) = way {
            way.change(Ordering::Relaxed, self.cleared(), |state| state + SEQ_ONE);
        }
        // Orders what came before (this way's odd number, or the `vacate` of the key that had
        // the slot before) before the slot's bytes written next: a reader whose copy sees any
        // of them sees that state on its second read (it reads with an acquire fence between)
        // and drops the copy. Without it, on arm64 a reader of the slot's previous key could
        // take the new key's bytes as its own.
        fence(Ordering::Release);
        way
    }

    /// Ends a write begun with `begin_write` (`way` what it returned): `slot` now holds `len`
    /// bytes for `key`, published if its set has a way for it.
    pub fn end_write(&self, way: Option<Way<'_>>, slot: u32, key: Key, len: usize) {
        match way {
            Some(way) => {
                way.len.store(len as u32, Ordering::Relaxed);
                way.change(Ordering::Release, self.cleared(), |state| state + SEQ_ONE);
            }
            None => self.publish(slot, key, len),
        }
    }

    /// Publishes `key`'s block in `slot` in a free way of its set, if there is one. A way
    /// that held another key is re-keyed first, while empty: a reader that paired the old
    /// key with the new state finds the key changed when it checks again.
    pub fn publish(&self, slot: u32, key: Key, len: usize) {
        debug_assert!(!self.is_published(key), "key {key} published twice");
        let set = self.set_of(key);
        let free = |way: &Way| self.slot_of(way.state.load(Ordering::Relaxed)).is_none();
        let Some(way) = set.ways().find(free) else { return };
        // Release: a reader that finds the new key (acquire) then reads this way's emptied
        // state or a newer one, not the state of the key it held before (on arm64, a relaxed
        // store here let a reader pair the new key with the old key's slot).
        way.key.store(key, Ordering::Release);
        way.len.store(len as u32, Ordering::Relaxed);
        let cleared = self.cleared();
        way.change(Ordering::Release, cleared, |state| {
            ((state >> 32) + 2) << 32 | (slot as u64 + 1)
        });
    }

    /// `key`'s block leaves `slot` (dropped, moved, or rewritten elsewhere). The slot may still
    /// hold the bytes for a read handle; readers without the lock no longer take them.
    pub fn vacate(&self, slot: u32, key: Key) {
        if let Some(way) = self.way_of(key, Some(slot)) {
            way.change(Ordering::Release, self.cleared(), |state| ((state >> 32) + 2) << 32);
        }
    }

    /// Whether `key` is published (in any slot).
    pub fn is_published(&self, key: Key) -> bool {
        self.way_of(key, None).is_some()
    }

    /// Copies `key`'s value into `out` without the lock; returns its length and whether to
    /// tell the policy of the hit (see [`STAMPS`]), or `None` if the block could not be read
    /// this way (not published, being written, moved, a mapped block that did not check out,
    /// `out` too small, or, landing [`Landing::Checked`], larger than [`SCRATCH_BYTES`]): the
    /// caller takes the lock. What `out` holds on `None` is up to `landing`.
    #[inline]
    pub fn read(&self, key: Key, out: &mut [u8], landing: Landing) -> Option<(usize, bool)> {
        match landing {
            Landing::Direct => self.read_into(key, out.as_mut_ptr(), out.len()),
            Landing::Checked => {
                // The copy goes to the stack, and to `out` only once it checked out.
                let mut scratch = [std::mem::MaybeUninit::<u8>::uninit(); SCRATCH_BYTES];
                let room = out.len().min(SCRATCH_BYTES);
                let (len, told) = self.read_into(key, scratch.as_mut_ptr().cast(), room)?;
                // SAFETY: `read_into` wrote `len` bytes of the scratch.
                let value = unsafe { std::slice::from_raw_parts(scratch.as_ptr().cast(), len) };
                out[..len].copy_from_slice(value);
                Some((len, told))
            }
        }
    }

    /// A reader's first look at `key`: the way holding it, the way's state, the slot and the
    /// value's length, if the block is settled there (not being written, inside the table).
    #[inline(always)]
    fn settled(&self, key: Key) -> Option<(Way<'_>, u64, u32, usize)> {
        let set = self.set_of(key);
        // Acquire: a way re-keyed to `key` was emptied first (`publish`), so its state read
        // below is the emptied one or newer, never the previous key's slot.
        let way = set.ways().find(|w| w.key.load(Ordering::Acquire) == key)?;
        let state = way.state.load(Ordering::Acquire);
        let len = way.len.load(Ordering::Relaxed) as usize;
        let slot = self.slot_of(state)?;
        let settled = (state >> 32) & 1 == 0 && slot < self.slots && len <= self.slot_bytes;
        settled.then_some((way, state, slot, len))
    }

    /// Copies `key`'s value to `dst`, which has room for `room` bytes and is this thread's;
    /// returns its length and whether to tell the policy if the copy checked out (`dst` may
    /// hold a torn copy otherwise).
    #[inline(always)]
    fn read_into(&self, key: Key, dst: *mut u8, room: usize) -> Option<(usize, bool)> {
        let (way, state, slot, len) = self.settled(key)?;
        // A mapped block's header and checksum are checked on its first hit after it was
        // written; until its way changes the bytes are those checked (the scrubber looks for
        // any that rot meanwhile).
        let check = self.headers_at.is_some() && !(self.mark && state & VERIFIED != 0);
        if room < len {
            return None;
        }
        let mut head = [0u8; HEADER_BYTES];
        // SAFETY: the slot and its header lie inside the table's memory (checked above, and
        // the layout when the table was made) and `len` bytes of value fit the slot; `dst`
        // has room for `len` bytes (checked above) and is this thread's. The shard's lock
        // holder may be storing to the slot meanwhile: both sides are byte-wise atomic
        // (`atomic_bytes`), so the race is defined, and the copy is used only if the way is
        // unchanged afterwards (`Way::unchanged`).
        let value = unsafe {
            if let Some(headers_at) = self.headers_at.filter(|_| check) {
                let header = headers_at + slot as usize * HEADER_BYTES;
                self.memory.load(header, head.as_mut_ptr(), HEADER_BYTES);
            }
            self.memory.load(self.slots_at + slot as usize * self.slot_bytes, dst, len);
            std::slice::from_raw_parts(dst.cast_const(), len)
        };
        if !way.unchanged(state, key) {
            return None;
        }
        let (told, mut next) = self.tell(state);
        if check {
            // The block's own header and checksum, checked on the copy: a corrupted block
            // fails here and is found, counted and dropped by the locked path.
            if !block::holds(&head, key, value) {
                return None;
            }
            // Later hits skip the check while the way stays as it was.
            if self.mark {
                next |= VERIFIED;
            }
        }
        if next != state {
            way.remark(state, next);
        }
        Some((len, told))
    }

    /// Holds `key`'s block in place without the lock, for a read handle: its slot pinned (see
    /// `crate::pins`), then the way that led there checked unchanged, so the block can be
    /// neither rewritten nor its slot reused until the pin goes. Only a block whose way is
    /// settled: not being written, and on a tier with headers, checked since it was written
    /// (marked). The slot, where its value starts, its length and whether to tell the policy
    /// (see [`STAMPS`]); or why not: `Err(Some(slot))` if the pin taken and let go was a freed
    /// slot's last, which the caller gives back under the shard's lock, `Err(None)` otherwise
    /// (the caller takes the lock).
    #[cfg(not(loom))]
    pub fn hold(&self, key: Key) -> Result<(u32, *const u8, usize, bool), Option<u32>> {
        let pins = self.pins.as_ref().ok_or(None)?;
        let (way, state, slot, len) = self.settled(key).ok_or(None)?;
        let checked = self.headers_at.is_none() || (self.mark && state & VERIFIED != 0);
        if !checked {
            return Err(None);
        }
        if !pins.pin(slot) {
            return Err(None);
        }
        // Between the pin and the second look (see `crate::pins`): the shard unpublishes a
        // slot before it looks at its pins to free it.
        fence(Ordering::SeqCst);
        let unchanged =
            way.state.load(Ordering::SeqCst) == state && way.key.load(Ordering::SeqCst) == key;
        if !unchanged {
            return match pins.unpin(slot) {
                crate::pins::Unpinned::Zombie => Err(Some(slot)),
                crate::pins::Unpinned::Done => Err(None),
            };
        }
        let (told, next) = self.tell(state);
        if next != state {
            way.remark(state, next);
        }
        // SAFETY: the slot lies inside the table's memory (checked above, and the layout when
        // the table was made), and the pin keeps its bytes as they are until it goes.
        let value =
            unsafe { self.memory.base.add(self.slots_at + slot as usize * self.slot_bytes) };
        Ok((slot, value, len, told))
    }

    /// Checks the blocks hits have checked before (marked) in sets `from..from + sets` of
    /// this table (a mapped tier's), as a reader without the lock reads them, copying each to
    /// `buf`. A block that no longer checks out loses its mark, so its next hit checks it,
    /// fails, and takes the locked path, which counts and drops it.
    pub fn scrub(&self, from: usize, sets: usize, buf: &mut Vec<u8>) -> Scrubbed {
        let mut scrubbed = Scrubbed::default();
        let Some(headers_at) = self.headers_at else {
            return scrubbed;
        };
        buf.resize(HEADER_BYTES + self.slot_bytes, 0);
        for index in from..(from + sets).min(self.sets()) {
            scrubbed.bytes += std::mem::size_of::<Set>() as u64;
            // SAFETY: `index` is below the table's set count.
            let set = unsafe { &*self.sets.add(index) };
            for way in set.ways() {
                let key = way.key.load(Ordering::Acquire);
                let state = way.state.load(Ordering::Acquire);
                let len = way.len.load(Ordering::Relaxed) as usize;
                let Some(slot) = self.slot_of(state) else { continue };
                if state & VERIFIED == 0
                    || (state >> 32) & 1 == 1
                    || slot >= self.slots
                    || len > self.slot_bytes
                {
                    continue;
                }
                // SAFETY: as in `read`: inside the slot, its header and `buf`, atomic against
                // the writer, used only if the way is unchanged.
                unsafe {
                    let header = headers_at + slot as usize * HEADER_BYTES;
                    self.memory.load(header, buf.as_mut_ptr(), HEADER_BYTES);
                    let at = self.slots_at + slot as usize * self.slot_bytes;
                    self.memory.load(at, buf.as_mut_ptr().add(HEADER_BYTES), len);
                }
                if !way.unchanged(state, key) {
                    continue;
                }
                scrubbed.checked += 1;
                scrubbed.bytes += (HEADER_BYTES + len) as u64;
                let (head, value) = buf[..HEADER_BYTES + len].split_at(HEADER_BYTES);
                if !block::holds(head, key, value) {
                    scrubbed.failed += 1;
                    way.remark(state, state & !VERIFIED);
                }
            }
        }
        scrubbed
    }

    /// The sets of this table.
    pub fn sets(&self) -> usize {
        self.set_mask + 1
    }

    /// Whether hits check a block only until it is marked (the default for tables with
    /// headers), or every time.
    pub fn check_every_hit(&mut self, every: bool) {
        self.mark = self.headers_at.is_some() && !every;
    }

    /// Whether the table marks checked blocks, so that a scrubber has something to do.
    pub fn marks(&self) -> bool {
        self.mark
    }
}

/// Where a read without the lock copies the value (see [`SlotTable::read`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Landing {
    /// To this thread's stack first, then to `out` once the copy checked out: on `None`,
    /// `out` holds what it held before. For `get`, whose caller keeps its buffer on a miss.
    Checked,
    /// Straight into `out`, saving a copy: on `None`, `out[..]` may hold a torn copy of some
    /// block. Only for callers that fill `out` themselves whenever this gives `None` (a read
    /// through to the backing store) and return an error, not `out`, if they cannot.
    Direct,
}

/// What [`SlotTable::scrub`] did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Scrubbed {
    /// Blocks checked, and those of them that failed.
    pub checked: u64,
    pub failed: u64,
    /// Bytes read: the sets and the blocks.
    pub bytes: u64,
}

mod hit_log;

pub use hit_log::{Hit, HitLog, Recorded, Stripe, UntoldHits};

/// The model of the hit path: loom runs each scenario over every interleaving (up to a bound
/// on preemptions) and every outcome its weak memory model allows. Run with
/// `RUSTFLAGS="--cfg loom" cargo test -p tiercache-engine --lib --release model`.
#[cfg(all(test, loom))]
mod model;
