//! The flash tier: a file or block device read and written with direct I/O (`O_DIRECT`), so
//! the page cache neither doubles the memory used nor hides the device's speed. Direct I/O
//! needs block-aligned offsets, lengths and buffers, so blocks here are whole and headerless
//! and their key, length and CRC32C live in DRAM metadata, checked on every read. Where the
//! file system refuses `O_DIRECT` (tmpfs on older kernels, some overlay file systems), the tier
//! falls back to buffered I/O and the cache reports it once in its warnings.

use std::fs::File;
use std::path::Path;

use crate::aligned::{AlignedBuf, DIRECT_ALIGN};
use crate::bits::SlotBits;
use crate::device::{read_exact_at, Device};
use crate::error::EngineError;
use crate::tier::block::ReadFault;
use crate::tier::block::{BlockFault, Part, Stamp};
use crate::tier::superblock::{record_pages, RECORD_BYTES};

/// Opens the tier file `path` (made and sized by [`crate::tier::superblock::open`]) for direct I/O;
/// falls back to buffered I/O where the file system refuses `O_DIRECT`, returning the warning
/// to report.
pub fn open_direct(path: &Path) -> Result<(File, Option<String>), EngineError> {
    let io = |action, source| EngineError::Io { path: path.to_path_buf(), action, source };
    let open = crate::tier::superblock::open_tier_path;
    let (file, warning) = match open(path, libc::O_RDWR | libc::O_DIRECT) {
        Ok(file) => (file, None),
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {
            return Err(io(crate::tier::superblock::SYMLINK, e))
        }
        Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {
            let file = open(path, libc::O_RDWR).map_err(|e| io("cannot open the tier file", e))?;
            let note = format!(
                "{}: the file system refuses direct I/O; the flash tier uses buffered I/O",
                path.display()
            );
            (file, Some(note))
        }
        Err(e) => return Err(io("cannot open the tier file", e)),
    };
    Ok((file, warning))
}

/// Puts `value` at the start of a block buffer, zeroes the rest, and returns its CRC32C.
fn fill(buf: &mut AlignedBuf, value: &[u8]) -> u32 {
    let bytes = buf.as_mut_slice();
    bytes[..value.len()].copy_from_slice(value);
    bytes[value.len()..].fill(0);
    crate::tier::block::crc32c(value)
}

/// Where a record's sequence field keeps the block's part of an object spanning pages: the
/// sequence number has the 47 bits below (a shard writing a million blocks a second for four
/// years).
const PART_AT: u32 = 48;

/// A record's first bytes: a block lies in the slot; the slot was freed.
const LIVE: [u8; 4] = *b"TCR1";
const FREED: [u8; 4] = *b"TCR0";

/// DRAM the metadata of one flash slot takes: its record and whether it may be read.
pub(crate) const SLOT_META_BYTES: usize = RECORD_BYTES + 1;

/// DRAM the metadata of one slot of a compact flash tier takes, rounded up: the check of its
/// value (4 bytes), whether it may be read and whether its record changed (two bits). A value
/// shorter than the block adds an entry to a map of lengths.
pub(crate) const COMPACT_SLOT_META_BYTES: usize = 5;

/// What a compact tier's shard says a slot holds, when its record is written: the slot's key
/// is not kept beside the policy's.
#[derive(Clone, Copy)]
pub enum SlotState {
    /// A block of `key`, whose bytes are down.
    Block { key: u64, dirty: bool },
    /// Nothing.
    Free,
    /// An older copy of `key`, dirty, held until a sync makes its newer copy durable.
    Held { key: u64 },
    /// A write not landed yet: its record waits for the next flush.
    InFlight,
}

/// One shard's run of blocks on the flash tier. Blocks are headerless (direct I/O writes whole
/// aligned blocks), so each slot has a 32-byte record on the tier instead, on pages between the
/// superblock and the blocks:
///
/// | bytes | field |
/// |---|---|
/// | 0..4 | `TCR1` (a block), `TCR0` (freed) or zeros (never written) |
/// | 4..8 | CRC32C of bytes 8..32 |
/// | 8..16 | key |
/// | 16..20 | value length |
/// | 20..24 | CRC32C of the value |
/// | 24..32 | sequence number << 1, dirty in bit 0; in bits 48..64, which page of an object spanning pages the block is (`crate::tier::block::Part::short`), 0 for a whole block |
///
/// Records change as blocks are written and slots freed. A full tier's (below) writes each one
/// as it changes, through the page cache ([`Device::write_buffered_at`]): a process killed at
/// any point leaves the file with the records of every block written and every slot freed so
/// far, and recovery takes them back. The device has them at the next sync, with the blocks.
/// A compact tier's, and any whose buffered write failed, are written at the next sync, before
/// the device syncs ([`flush`](DirectSlots::flush)). Between syncs the records on the device
/// may lag its blocks, which is safe: a record whose slot now holds other bytes fails the
/// value's checksum and is dropped at recovery, the shard holds a rewritten dirty block's old
/// slot until the sync (so it is not overwritten while its record is the durable one), and a
/// written-back block's slot is freed only after the backing device has its copy.
///
/// What DRAM keeps of them ([`Records`]): every record as on the tier (33 bytes a slot), or,
/// for a compact tier (a set-associative policy's, which knows each slot's key), only what a
/// read checks, 4 bytes and two bits a slot; the records of the slots changed since the last
/// flush are made again from what the shard knows of them when they are written.
pub struct DirectSlots {
    /// The tier's device, which a full tier's records are written to as they change.
    device: std::sync::Arc<dyn Device>,
    buf: AlignedBuf,
    /// Where the records start on the device.
    records_at: u64,
    records: Records,
    /// Per slot, a bit: whether it may be read.
    readable: SlotBits,
    /// Bytes of a block.
    block: usize,
}

/// What DRAM keeps of a shard's flash records.
enum Records {
    /// Every record, as on the tier, and which pages changed since they were last written.
    Mirror { all: AlignedBuf, changed: Vec<bool> },
    /// Per slot the CRC32C of its value XOR a hash of its key, which a read for another key
    /// fails; the lengths of values shorter than a block; and a bit per slot whose record
    /// changed since the last flush, which writes it by reading its page, patching it and
    /// writing it back.
    Compact { checks: Vec<u32>, short: std::collections::HashMap<u32, u32>, changed: SlotBits },
}

/// A record's fields.
#[derive(Clone, Copy)]
struct Record {
    key: u64,
    len: u32,
    crc: u32,
    stamp: Stamp,
}

/// The record in `r` (32 bytes), if it is a whole one of a block.
fn parse_record(r: &[u8]) -> Result<Option<Record>, BlockFault> {
    let magic: [u8; 4] = r[..4].try_into().expect("4 bytes");
    if magic == [0; 4] || magic == FREED {
        return Ok(None);
    }
    let u32_at = |at: usize| u32::from_le_bytes(r[at..at + 4].try_into().expect("4 bytes"));
    let u64_at = |at: usize| u64::from_le_bytes(r[at..at + 8].try_into().expect("8 bytes"));
    if magic != LIVE {
        return Err(BlockFault::Magic);
    }
    if u32_at(4) != crate::tier::block::crc32c(&r[8..]) {
        return Err(BlockFault::Checksum);
    }
    let seq = u64_at(24);
    let part = Part::from_short((seq >> PART_AT) as u16);
    let seq = seq & ((1 << PART_AT) - 1);
    Ok(Some(Record {
        key: u64_at(8),
        len: u32_at(16),
        crc: u32_at(20),
        stamp: Stamp { seq: seq >> 1, dirty: seq & 1 == 1, part },
    }))
}

/// Writes `record` (a block's, or freed) into `r` (32 bytes).
fn encode_record(r: &mut [u8], record: Option<Record>) {
    r.fill(0);
    match record {
        None => r[..4].copy_from_slice(&FREED),
        Some(Record { key, len, crc, stamp }) => {
            r[8..16].copy_from_slice(&key.to_le_bytes());
            r[16..20].copy_from_slice(&len.to_le_bytes());
            r[20..24].copy_from_slice(&crc.to_le_bytes());
            debug_assert!(stamp.seq < 1 << (PART_AT - 1), "sequence numbers run past 2^47");
            let seq = (stamp.part.short() as u64) << PART_AT | stamp.seq << 1 | stamp.dirty as u64;
            r[24..32].copy_from_slice(&seq.to_le_bytes());
            let check = crate::tier::block::crc32c(&r[8..]);
            r[4..8].copy_from_slice(&check.to_le_bytes());
            r[..4].copy_from_slice(&LIVE);
        }
    }
}

/// What a compact tier keeps to check a read: the value's CRC32C XOR a hash of the key, so a
/// slot read for a key other than the one written there fails as a checksum would.
fn key_check(key: u64, crc: u32) -> u32 {
    let mixed = (key ^ 0x2545_F491_4F6C_DD1D).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    crc ^ (mixed >> 32) as u32
}

impl DirectSlots {
    /// The metadata of `slots` slots of `block` bytes whose records start at `records_at`;
    /// `compact` keeps only what reads check in DRAM (see [`Records`]).
    pub fn new(
        device: std::sync::Arc<dyn Device>,
        slots: u64,
        block: usize,
        records_at: u64,
        compact: bool,
    ) -> DirectSlots {
        let pages = record_pages(slots).max(1) as usize;
        let records = match compact {
            false => Records::Mirror {
                all: AlignedBuf::new(pages * DIRECT_ALIGN),
                changed: vec![false; pages],
            },
            true => Records::Compact {
                checks: vec![0; slots as usize],
                short: Default::default(),
                changed: SlotBits::new(slots as usize),
            },
        };
        DirectSlots {
            device,
            buf: AlignedBuf::new(block),
            records_at,
            records,
            readable: SlotBits::new(slots as usize),
            block,
        }
    }

    fn is_readable(&self, slot: u32) -> bool {
        self.readable.get(slot)
    }

    fn set_readable(&mut self, slot: u32, readable: bool) {
        self.readable.set(slot, readable);
    }

    /// Sets `slot`'s record: a block's, or freed (`None`); a full tier's on the file at once,
    /// a compact tier's at the next [`flush`](Self::flush).
    fn set_record(&mut self, slot: u32, record: Option<Record>) {
        match &mut self.records {
            Records::Mirror { all, changed } => {
                let at = slot as usize * RECORD_BYTES;
                let bytes = &mut all.as_mut_slice()[at..at + RECORD_BYTES];
                encode_record(bytes, record);
                let on_file = self.device.write_buffered_at(bytes, self.records_at + at as u64);
                if on_file.is_err() {
                    // Written whole at the next flush, whose error the sync reports.
                    changed[at / DIRECT_ALIGN] = true;
                }
            }
            Records::Compact { checks, short, changed } => {
                changed.set(slot, true);
                match record {
                    Some(r) => {
                        checks[slot as usize] = key_check(r.key, r.crc);
                        match r.len as usize == self.block {
                            true => short.remove(&slot),
                            false => short.insert(slot, r.len),
                        };
                    }
                    None => {
                        short.remove(&slot);
                    }
                }
            }
        }
    }

    /// Writes the records changed since they were last written (a sync does, before the
    /// device syncs): whole pages of the mirror, or, compact, each changed page read, patched
    /// with the records `state` and `seq` make (see [`SlotState`]) and written back.
    pub fn flush(
        &mut self,
        device: &dyn Device,
        state: &dyn Fn(u32) -> SlotState,
        seq: &mut u64,
    ) -> std::io::Result<()> {
        let (records_at, block, readable) = (self.records_at, self.block, &self.readable);
        match &mut self.records {
            Records::Mirror { all, changed } => {
                for (page, changed) in changed.iter_mut().enumerate().filter(|(_, c)| **c) {
                    let bytes = &all.as_slice()[page * DIRECT_ALIGN..(page + 1) * DIRECT_ALIGN];
                    device.write_at(bytes, records_at + (page * DIRECT_ALIGN) as u64)?;
                    *changed = false;
                }
            }
            Records::Compact { checks, short, changed } => {
                // What each changed slot holds, numbered: copies held for a sync (older than
                // their key's current copy, whatever their slots) before current blocks, so
                // the newest copy of a key is the current one.
                // A block not down yet (its slot given to a key whose write has not run) waits,
                // as one in flight does.
                let states: Vec<(u32, SlotState)> = changed
                    .ones()
                    .map(|slot| (slot, state(slot)))
                    .filter(|(slot, state)| match state {
                        SlotState::InFlight => false,
                        SlotState::Block { .. } | SlotState::Held { .. } => readable.get(*slot),
                        SlotState::Free => true,
                    })
                    .collect();
                let mut records: Vec<(u32, Option<Record>)> = Vec::with_capacity(states.len());
                for held_first in [true, false] {
                    for &(slot, state) in &states {
                        let (key, dirty) = match state {
                            SlotState::Free if held_first => {
                                records.push((slot, None));
                                continue;
                            }
                            SlotState::Held { key } if held_first => (key, true),
                            SlotState::Block { key, dirty } if !held_first => (key, dirty),
                            _ => continue,
                        };
                        *seq += 1;
                        let record = Record {
                            key,
                            len: short.get(&slot).copied().unwrap_or(block as u32),
                            crc: key_check(key, checks[slot as usize]),
                            stamp: Stamp { seq: *seq, dirty, ..Stamp::default() },
                        };
                        records.push((slot, Some(record)));
                    }
                }
                records.sort_unstable_by_key(|(slot, _)| *slot);
                let per_page = (DIRECT_ALIGN / RECORD_BYTES) as u32;
                let mut page_buf = AlignedBuf::new(DIRECT_ALIGN);
                for page_records in records.chunk_by(|a, b| a.0 / per_page == b.0 / per_page) {
                    let page = page_records[0].0 / per_page;
                    let at = records_at + page as u64 * DIRECT_ALIGN as u64;
                    read_exact_at(device, page_buf.as_mut_slice(), at)?;
                    for &(slot, record) in page_records {
                        let offset = (slot % per_page) as usize * RECORD_BYTES;
                        encode_record(
                            &mut page_buf.as_mut_slice()[offset..offset + RECORD_BYTES],
                            record,
                        );
                    }
                    device.write_at(page_buf.as_slice(), at)?;
                    // Only once the page is down: a failed write leaves them to try again.
                    for &(slot, _) in page_records {
                        changed.set(slot, false);
                    }
                }
            }
        }
        Ok(())
    }

    /// Writes `value` for `key` into `slot`, at `at` on `device`; its record follows at the
    /// next flush.
    pub fn write(
        &mut self,
        device: &dyn Device,
        (slot, at): (u32, u64),
        key: u64,
        value: &[u8],
        stamp: Stamp,
    ) -> std::io::Result<()> {
        let crc = fill(&mut self.buf, value);
        // Until the new bytes are down, the slot holds nothing a read may trust.
        self.set_readable(slot, false);
        device.write_at(self.buf.as_slice(), at)?;
        self.set_record(slot, Some(Record { key, len: value.len() as u32, crc, stamp }));
        self.set_readable(slot, true);
        Ok(())
    }

    /// Fills `buf` with `pages`, the pages of an object bound for the adjacent slots from
    /// `first`, each padded to the block, marking those slots unreadable until each has
    /// [`landed`](Self::landed); returns each page's slot, length and CRC32C.
    pub fn stage_pages(
        &mut self,
        first: u32,
        pages: &[&[u8]],
        buf: &mut [u8],
    ) -> Vec<(u32, u32, u32)> {
        let block = self.block;
        (pages.iter().enumerate())
            .map(|(i, page)| {
                let into = &mut buf[i * block..(i + 1) * block];
                into[..page.len()].copy_from_slice(page);
                into[page.len()..].fill(0);
                let slot = first + i as u32;
                self.set_readable(slot, false);
                (slot, page.len() as u32, crate::tier::block::crc32c(page))
            })
            .collect()
    }

    /// Fills `buf` with `value` for a write done elsewhere (with the shard unlocked), marking
    /// the slot unreadable until [`landed`](Self::landed); returns the value's CRC32C.
    pub fn stage(&mut self, slot: u32, value: &[u8], buf: &mut AlignedBuf) -> u32 {
        self.set_readable(slot, false);
        fill(buf, value)
    }

    /// Records that a staged write of `key` to `slot` ended: if it succeeded, the block reads
    /// back and its record follows at the next flush.
    pub fn landed(&mut self, slot: u32, (key, len, crc): (u64, u32, u32), stamp: Stamp, ok: bool) {
        if ok {
            self.set_record(slot, Some(Record { key, len, crc, stamp }));
        }
        self.set_readable(slot, ok);
    }

    /// Marks `slot` freed; on the tier at the next flush, so that a recovery after that sync
    /// never brings its block back.
    pub fn erase(&mut self, slot: u32) {
        self.set_readable(slot, false);
        self.set_record(slot, None);
    }

    /// What a written block for `key` in `slot` must check out as: (length, CRC32C); `None` if
    /// the slot holds no block for `key` (a compact tier trusts its caller for the key, and
    /// gives a CRC that another key's block fails).
    pub fn expect(&self, slot: u32, key: u64) -> Option<(u32, u32)> {
        if !self.is_readable(slot) {
            return None;
        }
        match &self.records {
            Records::Mirror { all, .. } => {
                let at = slot as usize * RECORD_BYTES;
                match parse_record(&all.as_slice()[at..at + RECORD_BYTES]) {
                    Ok(Some(r)) if r.key == key => Some((r.len, r.crc)),
                    _ => None,
                }
            }
            Records::Compact { checks, short, .. } => {
                let len = short.get(&slot).copied().unwrap_or(self.block as u32);
                Some((len, key_check(key, checks[slot as usize])))
            }
        }
    }

    /// Reads the records from the tier and checks the blocks they name that `check` says, as
    /// recovery does: `found` hears of each slot that holds something. Blocks that check out,
    /// or are taken on their records, become readable (each then checked when first read).
    pub fn scan(
        &mut self,
        device: &dyn Device,
        (offset, slot_bytes, count): (u64, usize, u64),
        check: crate::tier::block::Check,
        mut found: impl FnMut(u32, crate::tier::block::Found),
    ) -> std::io::Result<()> {
        use crate::tier::block::{Check, Found};
        let mut read = AlignedBuf::new(record_pages(count).max(1) as usize * DIRECT_ALIGN);
        read_exact_at(device, read.as_mut_slice(), self.records_at)?;
        let record = |slot: u32| {
            let at = slot as usize * RECORD_BYTES;
            parse_record(&read.as_slice()[at..at + RECORD_BYTES])
        };
        // Whether a block's value is read and checked now; the others are taken as their
        // records say, each checked against its record's checksum when first read.
        let read_now = |r: &Record| match check {
            Check::Every => true,
            Check::Dirty => r.stamp.dirty,
            Check::Headers => false,
        };
        let mut whole = Vec::new();
        const BATCH: usize = 256;
        let mut blocks = AlignedBuf::new(BATCH * slot_bytes);
        for first in (0..count as usize).step_by(BATCH) {
            let n = BATCH.min(count as usize - first);
            let mut live = Vec::new();
            for slot in first as u32..(first + n) as u32 {
                match record(slot) {
                    Ok(None) => {}
                    Err(fault) => found(slot, Found::Damaged(fault)),
                    Ok(Some(r)) if r.len as usize > slot_bytes => {
                        found(slot, Found::Damaged(BlockFault::Length))
                    }
                    Ok(Some(r)) if read_now(&r) => live.push((slot, r)),
                    Ok(Some(r)) => whole.push((slot, r)),
                }
            }
            if live.is_empty() {
                continue;
            }
            // The batch's slots in one read, from the first to check to the last.
            let (from, to) = (live[0].0 as usize, live[live.len() - 1].0 as usize + 1);
            let bytes = &mut blocks.as_mut_slice()[..(to - from) * slot_bytes];
            read_exact_at(device, bytes, offset + (from * slot_bytes) as u64)?;
            for (slot, r) in live {
                let block = &bytes[(slot as usize - from) * slot_bytes..][..slot_bytes];
                match crate::tier::block::crc32c(&block[..r.len as usize]) == r.crc {
                    true => whole.push((slot, r)),
                    false => found(slot, Found::Damaged(BlockFault::Checksum)),
                }
            }
        }
        // DRAM takes the records as read: the mirror whole, a compact tier what reads check.
        match &mut self.records {
            Records::Mirror { all, .. } => {
                all.as_mut_slice().copy_from_slice(read.as_slice());
            }
            Records::Compact { checks, short, changed } => {
                changed.clear();
                for &(slot, r) in &whole {
                    checks[slot as usize] = key_check(r.key, r.crc);
                    if r.len as usize != self.block {
                        short.insert(slot, r.len);
                    }
                }
            }
        }
        whole.sort_unstable_by_key(|&(slot, _)| slot);
        for (slot, r) in whole {
            self.set_readable(slot, true);
            found(slot, Found::Block { key: r.key, len: r.len, stamp: r.stamp });
        }
        Ok(())
    }

    /// Reads and checks `key`'s block in `slot`, at `at` on `device`, copying its value into
    /// `out`; returns the value's length.
    pub fn read(
        &mut self,
        device: &dyn Device,
        (slot, at): (u32, u64),
        key: u64,
        out: &mut [u8],
    ) -> Result<usize, ReadFault> {
        let (len, crc) = self.expect(slot, key).ok_or(ReadFault::Corrupt(BlockFault::Key))?;
        read_exact_at(device, self.buf.as_mut_slice(), at).map_err(ReadFault::Io)?;
        let value = &self.buf.as_slice()[..len as usize];
        if crate::tier::block::crc32c(value) != crc {
            return Err(ReadFault::Corrupt(BlockFault::Checksum));
        }
        Ok(crate::tier::block::copy_value(value, out))
    }
}
