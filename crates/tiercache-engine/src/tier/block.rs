//! The header of a block on a mapped or file tier, 32 bytes. On a file tier it lies in the
//! block's slot, before the value; on a mapped tier, in an array of headers apart from the
//! slots, so that values stay page-aligned (`crate::tier::medium`).
//!
//! ```text
//! 0   u32 magic "TCB2"
//! 4   u32 CRC32C of bytes 8.. (key, length, flags, sequence number, value)
//! 8   u64 key
//! 16  u32 value length
//! 20  u32 flags (bit 0: dirty; bit 1: a page of an object spanning pages, bit 2: its first,
//!         bits 8..32: the first page's count of pages, any other's index among them)
//! 24  u64 sequence number
//! ```
//!
//! A value larger than a block (an object, `KeyedCache`'s) spans pages, each a block with its
//! own header, all with its key and one sequence number; the first says how many there are.
//! Recovery keeps an object only if every page of that number checks out: a crash in the middle
//! of writing one leaves pages of two numbers, or too few, and the object is dropped whole.
//!
//! The checksum covers bytes 8..32 of the header and then the value.
//!
//! Every write of a block takes the next number of its shard's sequence, so of two copies of a
//! key that both check out, the newer is known (`docs/DURABILITY.md`): a stale copy left by a
//! lost rewrite can never pass as current.
//!
//! The header is checked right before a block is written and right after it is read back
//! (asserting in pairs): a block whose magic, key, length or checksum is wrong is never
//! returned.

pub const HEADER_BYTES: usize = 32;
const MAGIC: u32 = u32::from_le_bytes(*b"TCB2");

/// The magic of a slot whose block was dropped (evicted, invalidated, moved away, or found
/// stale at recovery): a freed slot is marked so, so that recovery never brings back a block
/// the cache had let go of, whose data the backing device may since have changed.
pub const FREE: [u8; 4] = *b"TCB0";

/// Flag bit: the block is dirty (newer than the backing device's copy).
const DIRTY: u32 = 1;
/// Flag bits: the block is a page of an object spanning pages; the first of them.
const SPAN: u32 = 2;
const FIRST: u32 = 4;
/// Where a page's count or index starts in the flags.
const PART_SHIFT: u32 = 8;

/// The most pages one object spans: what the flash tier's records have room to count
/// (`crate::tier::flash`, 15 bits), 128 MiB in 4 KiB blocks.
pub const MAX_PAGES: u32 = (1 << 15) - 1;

/// The flash record's bit of a first page's count.
const SHORT_FIRST: u16 = 1 << 15;

/// Which part of a value a block is: the whole of it, or a page of an object spanning pages.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Part {
    #[default]
    Whole,
    /// The first page, of `count` in all.
    First { count: u32 },
    /// Page `index` (1 or more).
    Page { index: u32 },
}

impl Part {
    /// Page `index` of an object of `count` pages.
    pub fn of(index: u32, count: u32) -> Part {
        match index {
            0 => Part::First { count },
            index => Part::Page { index },
        }
    }

    fn flags(self) -> u32 {
        match self {
            Part::Whole => 0,
            Part::First { count } => SPAN | FIRST | count << PART_SHIFT,
            Part::Page { index } => SPAN | index << PART_SHIFT,
        }
    }

    /// The part in 16 bits, as a flash tier's record keeps it: 0 for a whole block, a first
    /// page's count with bit 15 set, another page's index.
    pub fn short(self) -> u16 {
        match self {
            Part::Whole => 0,
            Part::First { count } => SHORT_FIRST | count as u16,
            Part::Page { index } => index as u16,
        }
    }

    /// The part a flash record's 16 bits say (see [`short`](Self::short)).
    pub fn from_short(bits: u16) -> Part {
        match (bits, bits & SHORT_FIRST != 0) {
            (0, _) => Part::Whole,
            (_, true) => Part::First { count: (bits & !SHORT_FIRST) as u32 },
            (index, false) => Part::Page { index: index as u32 },
        }
    }

    fn from_flags(flags: u32) -> Part {
        match (flags & SPAN != 0, flags & FIRST != 0) {
            (false, _) => Part::Whole,
            (true, true) => Part::First { count: flags >> PART_SHIFT },
            (true, false) => Part::Page { index: flags >> PART_SHIFT },
        }
    }
}

/// What a block's header records of its write: when (the shard's sequence number) and whether
/// its data is dirty.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stamp {
    pub seq: u64,
    pub dirty: bool,
    /// Which part of its value the block is (written on mapped and file tiers only).
    pub part: Part,
}

/// Why a stored block was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BlockFault {
    Magic,
    Key,
    Length,
    Checksum,
}

/// CRC32C (the Castagnoli polynomial, as iSCSI and ext4 use) of `bytes`. Computed with
/// carry-less multiplication (AVX-512 VPCLMULQDQ where the CPU has it), which checks a 4 KiB
/// block in about a third of the time the SSE4.2 `crc32` instruction takes on its own.
#[inline]
pub fn crc32c(bytes: &[u8]) -> u32 {
    crc_fast::checksum(crc_fast::CrcAlgorithm::Crc32Iscsi, bytes) as u32
}

/// CRC32C of `first` followed by `second`, as if they were one slice.
#[inline]
pub fn crc32c_parts(first: &[u8], second: &[u8]) -> u32 {
    let mut digest = crc_fast::Digest::new(crc_fast::CrcAlgorithm::Crc32Iscsi);
    digest.update(first);
    digest.update(second);
    digest.finalize() as u32
}

/// Copies a value into `out`, as much as fits; returns the value's whole length.
pub fn copy_value(value: &[u8], out: &mut [u8]) -> usize {
    let n = value.len().min(out.len());
    out[..n].copy_from_slice(&value[..n]);
    value.len()
}

/// The header of `value` stored for `key`, written as `stamp` says.
pub fn header(key: u64, value: &[u8], stamp: Stamp) -> [u8; HEADER_BYTES] {
    let mut header = [0u8; HEADER_BYTES];
    header[8..16].copy_from_slice(&key.to_le_bytes());
    header[16..20].copy_from_slice(&(value.len() as u32).to_le_bytes());
    let flags = if stamp.dirty { DIRTY } else { 0 } | stamp.part.flags();
    header[20..24].copy_from_slice(&flags.to_le_bytes());
    header[24..32].copy_from_slice(&stamp.seq.to_le_bytes());
    let crc = crc32c_parts(&header[8..], value);
    header[0..4].copy_from_slice(&MAGIC.to_le_bytes());
    header[4..8].copy_from_slice(&crc.to_le_bytes());
    header
}

/// Whether `header` and `value`, copied out of a slot, are a whole block of `key`: its
/// magic, key, length and checksum (the checks of [`check`], the value's length exact).
pub fn holds(header: &[u8], key: u64, value: &[u8]) -> bool {
    check(header, key, value).is_ok_and(|v| v.len() == value.len())
}

/// The stamp a stored block's header records (meaningful once [`decode`] accepted it).
pub fn stamp_of(slot: &[u8]) -> Stamp {
    let flags = u32::from_le_bytes(slot[20..24].try_into().expect("4 bytes"));
    let seq = u64::from_le_bytes(slot[24..32].try_into().expect("8 bytes"));
    Stamp { seq, dirty: flags & DIRTY != 0, part: Part::from_flags(flags) }
}

/// Which values a recovery scan reads and checks against their headers or records; a value not
/// read then is checked when it is first read, as every read checks it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Check {
    /// Every value: a file tier's crash, or `Recover::Strict`.
    Every,
    /// Dirty blocks' values alone: a mapped or flash tier after a crash, whose headers (flash:
    /// slot records) reach its file as they change. A clean block found damaged later is a
    /// miss, read again from the backing device; a dirty one must be known whole now, since an
    /// older copy held beside it may be the one to keep. File tiers read every value.
    Dirty,
    /// None: the headers (or records) of a clean stop, unchanged since.
    Headers,
}

/// What recovery finds in a slot of a mapped or file tier.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Found {
    /// Never written (zeros) or freed ([`FREE`]).
    Empty,
    /// A whole block: its key, value length and stamp.
    Block { key: u64, len: u32, stamp: Stamp },
    /// Neither: a block that fails its checks (a torn or partial write, flipped bits).
    Damaged(BlockFault),
}

/// Looks at a slot's bytes (header, then value) as recovery does.
pub fn inspect(slot: &[u8]) -> Found {
    let (header, area) = slot.split_at(HEADER_BYTES);
    inspect_apart(header, area)
}

/// Looks at a block's header and the slot its value lies in, apart, as recovery does.
pub fn inspect_apart(header: &[u8], area: &[u8]) -> Found {
    match inspect_header(header, area.len()) {
        Found::Block { key, .. } => match check(header, key, area) {
            Ok(value) => Found::Block { key, len: value.len() as u32, stamp: stamp_of(header) },
            Err(fault) => Found::Damaged(fault),
        },
        other => other,
    }
}

/// Looks at a block's header alone, its value (in a slot of `room` bytes) unread: what a
/// restart takes when the headers are those a clean stop left (their digest matched), each
/// value then checked when it is first read.
pub fn inspect_header(header: &[u8], room: usize) -> Found {
    let magic: [u8; 4] = header[..4].try_into().expect("4 bytes");
    if magic == [0; 4] || magic == FREE {
        return Found::Empty;
    }
    if u32::from_le_bytes(magic) != MAGIC {
        return Found::Damaged(BlockFault::Magic);
    }
    let key = u64::from_le_bytes(header[8..16].try_into().expect("8 bytes"));
    let len = u32::from_le_bytes(header[16..20].try_into().expect("4 bytes"));
    if len as usize > room {
        return Found::Damaged(BlockFault::Length);
    }
    Found::Block { key, len, stamp: stamp_of(header) }
}

/// Writes header and value into `slot` (which is `HEADER_BYTES + capacity` long).
pub fn encode(slot: &mut [u8], key: u64, value: &[u8], stamp: Stamp) {
    assert!(HEADER_BYTES + value.len() <= slot.len(), "value larger than its slot");
    slot[..HEADER_BYTES].copy_from_slice(&header(key, value, stamp));
    slot[HEADER_BYTES..HEADER_BYTES + value.len()].copy_from_slice(value);
    debug_assert_eq!(decode(slot, key).map(|v| v.len()), Ok(value.len()));
}

/// Checks a stored block for `key` (header, then value, in one slot) and returns its value.
pub fn decode(slot: &[u8], key: u64) -> Result<&[u8], BlockFault> {
    if slot.len() < HEADER_BYTES {
        return Err(BlockFault::Length);
    }
    let (header, area) = slot.split_at(HEADER_BYTES);
    check(header, key, area)
}

/// Checks a block for `key` whose header lies apart from its value, the value at the start of
/// `area` (its slot); returns the value.
pub fn check<'a>(header: &[u8], key: u64, area: &'a [u8]) -> Result<&'a [u8], BlockFault> {
    let word = |at: usize| u32::from_le_bytes(header[at..at + 4].try_into().expect("4 bytes"));
    if word(0) != MAGIC {
        return Err(BlockFault::Magic);
    }
    if u64::from_le_bytes(header[8..16].try_into().expect("8 bytes")) != key {
        return Err(BlockFault::Key);
    }
    let len = word(16) as usize;
    if len > area.len() {
        return Err(BlockFault::Length);
    }
    let value = &area[..len];
    if crc32c_parts(&header[8..HEADER_BYTES], value) != word(4) {
        return Err(BlockFault::Checksum);
    }
    Ok(value)
}

/// A read that found no usable block.
#[derive(Debug)]
pub enum ReadFault {
    Corrupt(BlockFault),
    Io(std::io::Error),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_checksum_is_crc32c() {
        // The check value of CRC-32/ISCSI (Castagnoli) from the CRC catalogue.
        assert_eq!(crc32c(b"123456789"), 0xE306_9283);
        assert_eq!(crc32c(b""), 0);
        // Long inputs take the vector path; compare against a bitwise reference.
        let long: Vec<u8> = (0..5000u32).map(|i| (i * 7 + 3) as u8).collect();
        let mut reference = !0u32;
        for byte in &long {
            reference ^= *byte as u32;
            for _ in 0..8 {
                reference = (reference >> 1) ^ (0x82F6_3B78 & (reference & 1).wrapping_neg());
            }
        }
        assert_eq!(crc32c(&long), !reference);
        let (head, tail) = long.split_at(16);
        assert_eq!(crc32c_parts(head, tail), !reference);
    }

    #[test]
    fn recovery_tells_empty_whole_and_damaged_slots_apart() {
        let mut slot = vec![0u8; HEADER_BYTES + 16];
        assert_eq!(inspect(&slot), Found::Empty);
        let stamp = Stamp { seq: 7, dirty: false, part: Part::Whole };
        encode(&mut slot, 9, b"value", stamp);
        assert_eq!(inspect(&slot), Found::Block { key: 9, len: 5, stamp });
        let mut torn = slot.clone();
        torn[HEADER_BYTES + 2] ^= 0x40;
        assert_eq!(inspect(&torn), Found::Damaged(BlockFault::Checksum));
        // A flipped bit in the magic is damage too, not a free slot.
        let mut flipped = slot.clone();
        flipped[1] ^= 1;
        assert_eq!(inspect(&flipped), Found::Damaged(BlockFault::Magic));
        slot[..4].copy_from_slice(&FREE);
        assert_eq!(inspect(&slot), Found::Empty);
    }

    #[test]
    fn round_trip_and_every_flipped_bit_is_caught() {
        let mut slot = vec![0u8; HEADER_BYTES + 64];
        let stamp =
            Stamp { seq: 0x0123_4567_89AB_CDEF, dirty: true, part: Part::First { count: 9 } };
        encode(&mut slot, 42, b"hello, slow memory", stamp);
        assert_eq!(decode(&slot, 42), Ok(&b"hello, slow memory"[..]));
        assert_eq!(stamp_of(&slot), stamp);
        assert_eq!(decode(&slot, 43), Err(BlockFault::Key));
        for bit in 0..(HEADER_BYTES + 18) * 8 {
            let mut bad = slot.clone();
            bad[bit / 8] ^= 1 << (bit % 8);
            assert!(decode(&bad, 42).is_err(), "flipped bit {bit} went unnoticed");
        }
    }
}
