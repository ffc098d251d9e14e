//! One shard's slots on a tier's medium, and how blocks lie in them (the tier's format): bare
//! values in DRAM, headers apart from page-aligned values on mapped tiers, a header before the
//! value on file tiers, whole aligned blocks with their records kept apart on flash
//! (`crate::tier::flash`). A region is written only under its shard's lock, except by the I/O
//! it prepares to run with the shard unlocked, on slots the shard pins: a read of a file or
//! flash tier ([`PinnedRead`]) and a block written behind ([`Staged`], see
//! `crate::tier::behind`). The upper tier's hits without the lock copy slots as byte-wise
//! atomics (`crate::tier::optimistic`). A region's recovery scan is in [`scan`](Region::scan).

use std::sync::Arc;

use memmap2::MmapRaw;

use crate::aligned::AlignedBuf;
use crate::atomic_bytes;
use crate::device::{read_exact_at, Device};
use crate::error::EngineError;
use crate::tier::block::{
    check, copy_value, decode, encode, BlockFault, Part, ReadFault, Stamp, HEADER_BYTES,
};
use crate::tier::flash::DirectSlots;
use crate::tier::optimistic::{Sets, SlotLayout, SlotTable};
use crate::tier::TierKind;

mod pages;
mod scan;

/// How blocks lie in a region's slots.
enum Format {
    /// Headerless, each slot's value length beside them in DRAM: the DRAM tier (process memory
    /// has no media errors to catch).
    Bare { lens: Vec<u32> },
    /// A header (key, length, CRC32C) before the value: file tiers.
    Headed,
    /// The value alone in its slot, page-aligned, and its header in an array of headers
    /// (one per slot, in slot order) at `headers_at` on the device: mapped tiers.
    Apart { headers_at: u64 },
    /// Whole aligned headerless blocks, their key, length and CRC32C in DRAM: the flash tier.
    Aligned(DirectSlots),
}

impl Format {
    /// Stores `value` for `key` in `slot`, whose `bytes` bytes start at `target`, of a tier
    /// read in place. The caller holds the
    /// shard's lock (`&mut`) and writes only slots no read handle pins. Readers without the
    /// lock may be copying these bytes (see `optimistic`), so they are stored as byte-wise
    /// atomics through a raw pointer, and no reference to them is made.
    fn write_in_place(
        &mut self,
        (target, bytes, head): (*mut u8, usize, *mut u8),
        (slot, key): (u32, u64),
        value: &[u8],
        stamp: Stamp,
    ) {
        match self {
            Format::Bare { lens } => {
                assert!(
                    value.len() <= bytes,
                    "a value of {} bytes in a {bytes}-byte slot",
                    value.len()
                );
                // SAFETY: `value.len()` bytes from `target` lie in the slot (asserted), and
                // only the lock holder writes them.
                unsafe { atomic_bytes::store(value.as_ptr(), target, value.len()) };
                lens[slot as usize] = value.len() as u32;
            }
            Format::Headed => {
                assert!(HEADER_BYTES + value.len() <= bytes, "value larger than its slot");
                let header = crate::tier::block::header(key, value, stamp);
                // SAFETY: header and value lie in the slot (asserted); as above.
                unsafe {
                    atomic_bytes::store(header.as_ptr(), target, HEADER_BYTES);
                    atomic_bytes::store(value.as_ptr(), target.add(HEADER_BYTES), value.len());
                }
            }
            Format::Apart { .. } => {
                assert!(value.len() <= bytes, "value larger than its slot");
                assert!(!head.is_null(), "a mapped slot in memory has its header in memory");
                let header = crate::tier::block::header(key, value, stamp);
                // SAFETY: the value lies in the slot (asserted) and `head` is the slot's
                // header in the mapping (`Region::header_in_memory`); as above.
                unsafe {
                    atomic_bytes::store(value.as_ptr(), target, value.len());
                    atomic_bytes::store(header.as_ptr(), head, HEADER_BYTES);
                }
            }
            Format::Aligned(_) => unreachable!("flash blocks are never in memory"),
        }
    }
}

/// One shard's slots.
pub struct Region {
    device: Arc<dyn Device>,
    /// The device's bytes, read and written in place (an unwrapped memory tier).
    memory: Option<Arc<MmapRaw>>,
    /// Where the region starts on the device.
    offset: u64,
    format: Format,
    /// Reads of this region are I/O, done with the shard unlocked (file and flash tiers).
    io: bool,
    /// A slot's bytes, for reads and writes through the device under the lock.
    scratch: Vec<u8>,
    slot_bytes: usize,
    /// Pages: without size classes, one block each, and a block's slot is its page.
    count: u64,
    /// With size classes, a page of class `c` holds `1 << c` blocks of `1 / (1 << c)` of it,
    /// and slot `s` is chunk `s % chunks` of page `s / chunks`.
    chunks: u32,
    page_class: Vec<u8>,
    /// Slots beyond the policy's capacity (see `TierKind::slack_slots`).
    slack: u64,
    /// Of the slack, the slots pins never take: room for an object's new copy while its old
    /// pages are held (see `CacheBuilder::max_value`).
    copy_reserve: u64,
    /// Buffers for reads done with the shard unlocked, reused.
    spare: Vec<IoBuf>,
    /// Buffers for objects' pages read and written with the shard unlocked, reused.
    spare_runs: Vec<AlignedBuf>,
    /// The slots as readers without the lock see them, when hits are served that way.
    published: Option<SlotTable>,
    /// A compact flash region (see [`Region::new`]).
    compact: bool,
}

impl Region {
    /// The region of `count` pages of `slot_bytes` at `offset` on `device`, a tier of `kind`
    /// whose headers (mapped) or records (flash) start at `records_at`, pages split into at
    /// most `chunks` blocks. A `compact` flash region keeps only what reads check in DRAM
    /// (its policy knows each slot's key: `DirectSlots`).
    pub fn new(
        kind: &TierKind,
        device: Arc<dyn Device>,
        (offset, records_at, count): (u64, u64, u64),
        (slot_bytes, chunks): (usize, u32),
        compact: bool,
    ) -> Region {
        let memory = device.memory().cloned();
        if let Some(mapping) = &memory {
            let bytes = count * slot_bytes as u64;
            assert!(offset + bytes <= mapping.len() as u64, "region past the mapping");
        }
        let format = match kind {
            TierKind::Dram => Format::Bare { lens: vec![0; (count * chunks as u64) as usize] },
            TierKind::Mapped { .. } => Format::Apart { headers_at: records_at },
            TierKind::File { .. } => Format::Headed,
            TierKind::Flash { .. } => {
                let slots =
                    DirectSlots::new(device.clone(), count, slot_bytes, records_at, compact);
                Format::Aligned(slots)
            }
        };
        Region {
            device,
            memory,
            offset,
            format,
            io: kind.is_io(),
            scratch: Vec::new(),
            slot_bytes,
            count,
            chunks,
            // Without size classes every page is of class 0, kept by nothing.
            page_class: if chunks > 1 { vec![0; count as usize] } else { Vec::new() },
            slack: kind.slack_slots(),
            copy_reserve: 0,
            spare: Vec::new(),
            spare_runs: Vec::new(),
            published: None,
            compact: compact && matches!(kind, TierKind::Flash { .. }),
        }
    }

    /// Whether this is a compact flash region, for a policy that places its blocks.
    pub fn is_compact(&self) -> bool {
        self.compact
    }

    /// Whether reads of this region are I/O, done with the shard unlocked.
    pub fn is_io(&self) -> bool {
        self.io
    }

    /// Whether blocks are read where they lie: a memory tier nothing wraps. Only these are
    /// pinned for read handles and published for hits without the lock.
    pub fn in_place(&self) -> bool {
        self.memory.is_some()
    }

    /// Whether the region is on a medium that outlives the process (a mapped, file or flash
    /// tier): the DRAM tier's is the only bare format.
    pub fn persistent(&self) -> bool {
        !matches!(self.format, Format::Bare { .. })
    }

    /// Whether slots are handed out in log order (see `crate::tier::store`): a flash tier
    /// without size classes, whose writes go out as runs of adjacent slots.
    pub fn in_log_order(&self) -> bool {
        matches!(self.format, Format::Aligned(_)) && self.chunks == 1
    }

    /// Publishes this region's slots for reads without the shard's lock (see
    /// [`crate::tier::optimistic`]); from now on every write and vacated slot updates the table.
    /// `None` where that cannot be done: blocks not in place (file, flash and wrapped tiers),
    /// size classes.
    pub fn publish(
        &mut self,
        sets: (&Arc<Sets>, usize),
        pins: Arc<crate::pins::Pins>,
    ) -> Option<SlotTable> {
        let mapping = self.memory.as_ref().filter(|_| self.chunks == 1)?;
        let headers = match self.format {
            Format::Apart { headers_at } => Some(headers_at as usize),
            Format::Bare { .. } => None,
            Format::Headed | Format::Aligned(_) => return None,
        };
        let layout = SlotLayout {
            slots_at: self.offset as usize,
            slots: self.count as usize,
            slot_bytes: self.slot_bytes,
            headers_at: headers,
        };
        let table = SlotTable::new(sets, mapping.clone(), layout).with_pins(pins);
        self.published = Some(table.clone());
        Some(table)
    }

    /// Whether this region's blocks are published for readers without the lock.
    pub fn is_published(&self) -> bool {
        self.published.is_some()
    }

    /// Follows the policy's hit rule in the published table, if there is one: `tag` is the
    /// current epoch's, and `told` a key whose read hit the policy was just told of (see
    /// `crate::tier::optimistic::SlotTable::restamp`).
    #[inline]
    pub fn follow_hit_rule(&self, tag: u8, told: Option<u64>) {
        if let Some(table) = &self.published {
            table.set_tag(tag);
            if let Some(key) = told {
                table.restamp(key, tag);
            }
        }
    }

    /// `key`'s block leaves `slot` (readers without the lock stop taking it).
    pub fn vacate(&self, slot: u32, key: u64) {
        if let Some(table) = &self.published {
            table.vacate(slot, key);
        }
    }

    /// Publishes `key`'s block of `len` bytes in `slot` for readers without the lock, if it
    /// is not (its set was full when it was written).
    pub fn republish(&self, slot: u32, key: u64, len: usize) {
        if let Some(table) = self.published.as_ref().filter(|t| !t.is_published(key)) {
            table.publish(slot, key, len);
        }
    }

    /// Where `slot` starts on the device (for errors that name it).
    pub fn offset_of(&self, slot: u32) -> u64 {
        self.at(slot)
    }

    /// Where `slot` starts on the device.
    fn at(&self, slot: u32) -> u64 {
        self.offset + self.span(slot).0 as u64
    }

    /// Prepares a read of `slot` to run with the shard unlocked (file and flash tiers).
    pub fn begin_read(&mut self, slot: u32, key: u64) -> Option<PinnedRead> {
        if !self.io {
            return None;
        }
        let expect = match &self.format {
            Format::Aligned(direct) => Some(direct.expect(slot, key)?),
            Format::Headed | Format::Bare { .. } | Format::Apart { .. } => None,
        };
        let buf = self.spare.pop().unwrap_or_else(|| match expect {
            Some(_) => IoBuf::Aligned(AlignedBuf::new(self.slot_bytes)),
            None => IoBuf::Plain(vec![0; self.slot_bytes]),
        });
        let (device, at) = (self.device.clone(), self.at(slot));
        Some(PinnedRead { device, at, key, expect, buf, pages: Vec::new(), stride: 0 })
    }

    /// Prepares the write of `value` for `key` into `slot` to run with the shard unlocked (file
    /// and flash tiers; `None` on memory tiers). The slot reads as empty until
    /// [`end_write`](Self::end_write).
    pub fn begin_write(
        &mut self,
        slot: u32,
        key: u64,
        value: &[u8],
        stamp: Stamp,
    ) -> Option<Staged> {
        if !self.io {
            return None;
        }
        let at = self.at(slot);
        let (mut buf, written, value_at, crc) = match &mut self.format {
            Format::Headed => {
                let mut buf = match self.spare.pop() {
                    Some(buf @ IoBuf::Plain(_)) => buf,
                    _ => IoBuf::Plain(vec![0; self.slot_bytes]),
                };
                encode(buf.bytes(), key, value, stamp);
                (buf, HEADER_BYTES + value.len(), HEADER_BYTES, 0)
            }
            Format::Aligned(direct) => {
                let mut aligned = match self.spare.pop() {
                    Some(IoBuf::Aligned(a)) => a,
                    _ => AlignedBuf::new(self.slot_bytes),
                };
                let crc = direct.stage(slot, value, &mut aligned);
                (IoBuf::Aligned(aligned), self.slot_bytes, 0, crc)
            }
            Format::Bare { .. } | Format::Apart { .. } => return None,
        };
        debug_assert_eq!(&buf.bytes()[value_at..value_at + value.len()], value);
        let device = self.device.clone();
        let len = value.len() as u32;
        Some(Staged { device, at, key, buf, written, value_at, len, crc, stamp, pages: Vec::new() })
    }

    /// Ends a staged write of `slot`: the block reads back if the write succeeded (and, on
    /// flash, its record set). Takes the buffer back when the staged block is no longer shared.
    pub fn end_write(&mut self, slot: u32, staged: Arc<Staged>, ok: bool) {
        if let Format::Aligned(direct) = &mut self.format {
            if staged.pages.is_empty() {
                direct.landed(slot, (staged.key, staged.len, staged.crc), staged.stamp, ok);
            }
            let count = staged.pages.len() as u32;
            for (i, &(page, len, crc)) in staged.pages.iter().enumerate() {
                let stamp = Stamp { part: Part::of(i as u32, count), ..staged.stamp };
                direct.landed(page, (staged.key, len, crc), stamp, ok);
            }
        }
        match Arc::try_unwrap(staged) {
            Ok(staged) if staged.pages.is_empty() => self.spare.push(staged.buf),
            Ok(Staged { buf: IoBuf::Aligned(buf), .. }) => self.keep_run_buf(buf),
            _ => {}
        }
    }

    /// Writes what this region keeps in DRAM for the medium and has not written yet (a flash
    /// region's changed slot records); a sync does this before the device syncs.
    /// A compact region's records are made from what `state` says each changed slot holds,
    /// numbered from `seq` on (see `DirectSlots::flush`).
    pub fn flush_records(
        &mut self,
        state: &dyn Fn(u32) -> crate::tier::flash::SlotState,
        seq: &mut u64,
    ) -> Result<(), EngineError> {
        let Format::Aligned(direct) = &mut self.format else { return Ok(()) };
        direct.flush(&*self.device, state, seq).map_err(|source| EngineError::Io {
            path: self.device.path().to_path_buf(),
            action: "cannot write the flash tier's slot records",
            source,
        })
    }

    /// Takes back a read's buffer.
    pub fn end_read(&mut self, read: PinnedRead) {
        match (read.pages.is_empty(), read.into_buf()) {
            (true, buf) => self.spare.push(buf),
            (false, IoBuf::Aligned(buf)) => self.keep_run_buf(buf),
            (false, IoBuf::Plain(_)) => {}
        }
    }

    /// Makes this region's writes durable (syncs the whole tier's device).
    pub fn sync(&self) -> Result<(), EngineError> {
        self.device.sync().map_err(|source| EngineError::Io {
            path: self.device.path().to_path_buf(),
            action: "cannot sync the tier",
            source,
        })
    }

    /// Slot numbers: every chunk of every page.
    pub fn slots(&self) -> u64 {
        self.count * self.chunks as u64
    }

    pub fn pages(&self) -> u64 {
        self.count
    }

    pub fn chunks(&self) -> u32 {
        self.chunks
    }

    pub fn page_class(&self, page: u32) -> u8 {
        self.page_class.get(page as usize).copied().unwrap_or(0)
    }

    /// Splits `page` (holding no blocks) into blocks of `class`.
    pub fn set_page_class(&mut self, page: u32, class: u8) {
        debug_assert!(1u32 << class <= self.chunks, "class {class} splits a page too finely");
        if let Some(kept) = self.page_class.get_mut(page as usize) {
            *kept = class;
        }
    }

    /// Where `slot` lies in the region and its bytes.
    #[inline]
    fn span(&self, slot: u32) -> (usize, usize) {
        assert!((slot as u64) < self.slots(), "slot {slot} outside the region");
        if self.chunks == 1 {
            return (slot as usize * self.slot_bytes, self.slot_bytes);
        }
        let (page, chunk) = (slot / self.chunks, slot % self.chunks);
        let class = self.page_class[page as usize];
        debug_assert!(chunk < 1 << class, "slot {slot}: no chunk {chunk} in a class-{class} page");
        let bytes = self.slot_bytes >> class;
        (page as usize * self.slot_bytes + chunk as usize * bytes, bytes)
    }

    /// Slots beyond what the policy may fill.
    /// Sets the slots this region has beyond its policy's capacity (`slack`), when the builder
    /// gives it more than its kind's, and how many of them pins never take (`copy_reserve`):
    /// room to pin an object's pages, and to write its new copy while they are held.
    pub fn set_slack(&mut self, slack: u64, copy_reserve: u64) {
        self.slack = slack;
        self.copy_reserve = copy_reserve;
    }

    /// Slots of the slack pins never take.
    pub fn copy_reserve(&self) -> u64 {
        self.copy_reserve
    }

    pub fn slack(&self) -> u64 {
        self.slack
    }

    /// Bytes of a page (a whole-block slot).
    pub fn slot_bytes(&self) -> usize {
        self.slot_bytes
    }

    /// Where a slot starts in memory, and its bytes, for a tier read in place.
    fn in_memory(&self, slot: u32) -> Option<(*mut u8, usize)> {
        let mapping = self.memory.as_ref()?;
        let (at, bytes) = self.span(slot);
        // SAFETY: the slot lies inside this region (`span` asserts it), and the region inside
        // the mapping (asserted when it was made).
        Some((unsafe { mapping.as_mut_ptr().add(self.offset as usize + at) }, bytes))
    }

    /// Where `slot`'s header lies on the device (a mapped tier's, whose headers lie apart).
    fn header_at(&self, slot: u32) -> Option<u64> {
        let Format::Apart { headers_at } = self.format else { return None };
        assert!((slot as u64) < self.slots(), "slot {slot} outside the region");
        Some(headers_at + slot as u64 * HEADER_BYTES as u64)
    }

    /// Where `slot`'s header starts in memory (a mapped tier read in place); null on tiers
    /// whose headers do not lie apart.
    fn header_in_memory(&self, slot: u32) -> *mut u8 {
        match (self.header_at(slot), &self.memory) {
            (Some(at), Some(mapping)) => {
                assert!(at as usize + HEADER_BYTES <= mapping.len(), "a header past the mapping");
                // SAFETY: inside the mapping (asserted).
                unsafe { mapping.as_mut_ptr().add(at as usize) }
            }
            _ => std::ptr::null_mut(),
        }
    }

    /// The value stored for `key` in `slot` of a tier read in place, checked (its header and
    /// checksum on mapped tiers). The bytes stay valid and unchanged for as long as the shard
    /// keeps the slot pinned: pinned slots are never written or reused.
    pub fn locate(&self, slot: u32, key: u64) -> Result<&[u8], ReadFault> {
        let (start, bytes) = self.in_memory(slot).expect("located blocks are read in place");
        // SAFETY: as in `in_memory`. Slots are written only under the shard's lock, and never
        // while pinned, so nothing writes these bytes while this borrow or a handle's view
        // lives; shared references may coexist.
        let bytes = unsafe { std::slice::from_raw_parts(start as *const u8, bytes) };
        match &self.format {
            Format::Bare { lens } => Ok(&bytes[..lens[slot as usize] as usize]),
            Format::Apart { .. } => {
                // SAFETY: the slot's header, inside the mapping (`header_in_memory`); as for
                // the value, nothing writes it while the slot is pinned or the lock held.
                let header = unsafe {
                    std::slice::from_raw_parts(
                        self.header_in_memory(slot).cast_const(),
                        HEADER_BYTES,
                    )
                };
                check(header, key, bytes).map_err(ReadFault::Corrupt)
            }
            _ => decode(bytes, key).map_err(ReadFault::Corrupt),
        }
    }

    /// The largest value a slot holds.
    pub fn value_bytes(&self) -> usize {
        match self.format {
            Format::Aligned(_) | Format::Bare { .. } | Format::Apart { .. } => self.slot_bytes,
            Format::Headed => self.slot_bytes - HEADER_BYTES,
        }
    }

    /// Stores `value` for `key` in `slot`, its header (if it has one) stamped `stamp`.
    pub fn write(
        &mut self,
        slot: u32,
        key: u64,
        value: &[u8],
        stamp: Stamp,
    ) -> Result<(), EngineError> {
        if let Some((target, bytes)) = self.in_memory(slot) {
            let head = self.header_in_memory(slot);
            let way = self.published.as_ref().map(|table| table.begin_write(slot, key));
            self.format.write_in_place((target, bytes, head), (slot, key), value, stamp);
            if let (Some(table), Some(way)) = (&self.published, way) {
                table.end_write(way, slot, key, value.len());
            }
            return Ok(());
        }
        let at = self.at(slot);
        let header_at = self.header_at(slot);
        let device = &*self.device;
        let written = match &mut self.format {
            Format::Bare { lens } => device.write_at(value, at).map(|()| {
                lens[slot as usize] = value.len() as u32;
            }),
            Format::Headed => {
                let used = HEADER_BYTES + value.len();
                self.scratch.resize(used, 0);
                encode(&mut self.scratch, key, value, stamp);
                device.write_at(&self.scratch, at)
            }
            Format::Apart { .. } => {
                // The value, then its header: a crash between them leaves a header whose
                // checksum the slot's value fails, and the block is dropped at recovery.
                let header = crate::tier::block::header(key, value, stamp);
                let header_at = header_at.expect("a mapped tier's header");
                device.write_at(value, at).and_then(|()| device.write_at(&header, header_at))
            }
            Format::Aligned(direct) => direct.write(device, (slot, at), key, value, stamp),
        };
        written.map_err(|source| write_error(device, source))
    }

    /// Marks `slot`, whose block was dropped, free on the medium (the header of a mapped or
    /// file tier's slot, the record of a flash slot), so that recovery never brings the block
    /// back. The caller holds the shard's lock and no read holds the slot. DRAM has nothing
    /// to mark.
    pub fn erase(&mut self, slot: u32) -> Result<(), EngineError> {
        let error = |device: &dyn Device, source| EngineError::Io {
            path: device.path().to_path_buf(),
            action: "cannot mark a dropped block's slot free",
            source,
        };
        match &mut self.format {
            Format::Bare { .. } => return Ok(()),
            Format::Aligned(direct) => {
                direct.erase(slot);
                return Ok(());
            }
            Format::Headed | Format::Apart { .. } => {}
        }
        let header_at = self.header_at(slot).unwrap_or_else(|| self.at(slot));
        if let Some((target, _)) = self.in_memory(slot) {
            let head = self.header_in_memory(slot);
            let target = if head.is_null() { target } else { head };
            // SAFETY: the slot's header lies in the mapping (`in_memory`,
            // `header_in_memory`); only the lock holder writes it, and readers without the
            // lock copy it as atomics too.
            unsafe { atomic_bytes::store(crate::tier::block::FREE.as_ptr(), target, 4) };
            return Ok(());
        }
        let device = &*self.device;
        device.write_at(&crate::tier::block::FREE, header_at).map_err(|e| error(device, e))
    }

    /// Copies the value stored for `key` in `slot` into `out` after checking it; returns its
    /// length.
    pub fn read(&mut self, slot: u32, key: u64, out: &mut [u8]) -> Result<usize, ReadFault> {
        if self.in_place() {
            return self.locate(slot, key).map(|value| copy_value(value, out));
        }
        let at = self.at(slot);
        let header_at = self.header_at(slot);
        let device = &*self.device;
        let bytes = self.span(slot).1;
        match &mut self.format {
            Format::Aligned(direct) => direct.read(device, (slot, at), key, out),
            Format::Bare { lens } => {
                let len = lens[slot as usize] as usize;
                self.scratch.resize(len, 0);
                read_exact_at(device, &mut self.scratch, at).map_err(ReadFault::Io)?;
                Ok(copy_value(&self.scratch, out))
            }
            Format::Headed => {
                self.scratch.resize(bytes, 0);
                read_exact_at(device, &mut self.scratch, at).map_err(ReadFault::Io)?;
                decode(&self.scratch, key).map(|v| copy_value(v, out)).map_err(ReadFault::Corrupt)
            }
            Format::Apart { .. } => {
                // Header and value side by side in the scratch, as a headed slot holds them.
                self.scratch.resize(HEADER_BYTES + bytes, 0);
                let (header, area) = self.scratch.split_at_mut(HEADER_BYTES);
                let header_at = header_at.expect("a mapped tier's header");
                read_exact_at(device, header, header_at).map_err(ReadFault::Io)?;
                read_exact_at(device, area, at).map_err(ReadFault::Io)?;
                decode(&self.scratch, key).map(|v| copy_value(v, out)).map_err(ReadFault::Corrupt)
            }
        }
    }
}

/// What a read of a file or flash tier needs once the shard is unlocked: the device, where the
/// slot is, what DRAM knows of the block, and a buffer. Slots are never rewritten while a read
/// holds them (the shard pins them and writes elsewhere), so the read sees one block, whole.
pub struct PinnedRead {
    pub(crate) device: Arc<dyn Device>,
    pub(crate) at: u64,
    pub(crate) key: u64,
    /// Length and CRC32C of the value, for headerless (flash) blocks.
    pub(crate) expect: Option<(u32, u32)>,
    pub(crate) buf: IoBuf,
    /// For an object spanning pages of a flash tier, each page's slot, where it lies, and its
    /// length and CRC32C, in order (empty for a block).
    pub(crate) pages: Vec<(u32, u64, (u32, u32))>,
    /// Bytes from one page to the next on the device (an object's reads).
    pub(crate) stride: usize,
}

pub enum IoBuf {
    Plain(Vec<u8>),
    Aligned(AlignedBuf),
}

impl IoBuf {
    pub(crate) fn bytes(&mut self) -> &mut [u8] {
        match self {
            IoBuf::Plain(v) => v,
            IoBuf::Aligned(a) => a.as_mut_slice(),
        }
    }

    pub(crate) fn as_slice(&self) -> &[u8] {
        match self {
            IoBuf::Plain(v) => v,
            IoBuf::Aligned(a) => a.as_slice(),
        }
    }
}

/// A block on its way to a file or flash tier, written with the shard unlocked (write-behind).
/// Until it lands, reads of the block are served from its bytes here, and its slot is pinned
/// so nothing else is written there meanwhile.
pub struct Staged {
    pub(crate) device: Arc<dyn Device>,
    pub(crate) at: u64,
    pub(crate) key: u64,
    /// The bytes to write: header and value on file tiers, the value padded to the block on
    /// flash.
    pub(crate) buf: IoBuf,
    pub(crate) written: usize,
    pub(crate) value_at: usize,
    pub(crate) len: u32,
    /// CRC32C of the value (flash blocks keep it in their slot's record).
    pub(crate) crc: u32,
    /// The block's sequence number and dirty flag (for a flash block's record).
    pub(crate) stamp: Stamp,
    /// For an object spanning adjacent pages of a flash tier, written as one: each page's slot,
    /// value length and CRC32C, in order (empty for a block).
    pub(crate) pages: Vec<(u32, u32, u32)>,
}

/// The error of a block write that failed on `device`.
pub(crate) fn write_error(device: &dyn Device, source: std::io::Error) -> EngineError {
    EngineError::Io { path: device.path().to_path_buf(), action: "cannot write a block", source }
}

impl Staged {
    /// The block's value.
    pub fn value(&self) -> &[u8] {
        &self.buf.as_slice()[self.value_at..self.value_at + self.len as usize]
    }

    /// Writes the block.
    pub fn run(&self) -> Result<(), EngineError> {
        self.device
            .write_at(&self.buf.as_slice()[..self.written], self.at)
            .map_err(|source| write_error(&*self.device, source))
    }
}

impl PinnedRead {
    /// Reads and checks the block, copying its value into `out`; returns the value's length.
    pub fn run(&mut self, out: &mut [u8]) -> Result<usize, ReadFault> {
        if !self.pages.is_empty() {
            return self.run_pages(out);
        }
        let (key, at, expect) = (self.key, self.at, self.expect);
        let buf = self.buf.bytes();
        read_exact_at(&*self.device, buf, at).map_err(ReadFault::Io)?;
        let value = match expect {
            None => decode(buf, key).map_err(ReadFault::Corrupt)?,
            Some((len, crc)) => {
                let value = &buf[..len as usize];
                if crate::tier::block::crc32c(value) != crc {
                    return Err(ReadFault::Corrupt(BlockFault::Checksum));
                }
                value
            }
        };
        Ok(copy_value(value, out))
    }

    pub fn into_buf(self) -> IoBuf {
        self.buf
    }
}
