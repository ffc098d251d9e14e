//! Where a shard keeps its blocks: a disjoint run of pages on its tier's medium, each page one
//! block, or with size classes split into 2, 4, 8... blocks of one class. Each shard owns its
//! run exclusively and writes it only under its own lock; read handles read pinned slots,
//! which nothing writes. The one exception is the upper tier's hits served without the lock
//! (`crate::optimistic`): they copy a slot while it may be written, and throw the copy away
//! when the slot's sequence number says a write overlapped it.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use memmap2::{MmapOptions, MmapRaw};

use crate::atomic_bytes;
use crate::block::{copy_value, decode, encode, BlockFault, HEADER_BYTES};
use crate::direct::{open_direct, AlignedBuf, DirectSlots};
use crate::emulate::Emulator;
use crate::error::EngineError;
use crate::optimistic::{Sets, SlotTable};
use crate::tierfile;
use tiercache_core::Direction;

/// The medium of a tier.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TierKind {
    /// Process memory.
    Dram,
    /// A file mapped into memory: a DAX file on persistent memory, a file on a CXL-backed or
    /// NUMA-bound tmpfs, or `/dev/shm` to emulate one. Blocks are checksummed.
    Mapped { path: PathBuf },
    /// A file read and written with buffered positioned I/O. Checksummed.
    File { path: PathBuf },
    /// Flash: a file or block device read and written with direct I/O in whole aligned blocks
    /// (block size a multiple of 4096). Checksummed, with the checksums in DRAM.
    Flash { path: PathBuf },
}

impl TierKind {
    /// Whether the tier is read and written with file I/O (file and flash tiers).
    pub fn is_io(&self) -> bool {
        matches!(self, TierKind::File { .. } | TierKind::Flash { .. })
    }

    /// Slots a shard's region has beyond its policy's capacity: for a block moving in while
    /// the block it swaps with has not left yet (a promotion that demotes the upper tier's
    /// victim first), an overwrite's new copy, and slots freed while pinned (by unlocked reads
    /// and writes on file and flash tiers, by read handles on memory tiers).
    pub fn slack_slots(&self) -> u64 {
        match self {
            TierKind::File { .. } | TierKind::Flash { .. } => crate::shard::IO_SLACK_SLOTS,
            TierKind::Dram | TierKind::Mapped { .. } => crate::shard::MEMORY_SLACK_SLOTS,
        }
    }

    /// Bytes a page takes on the medium for blocks of `block_size`, split into at most
    /// `chunks` blocks of a size class: DRAM and flash blocks are headerless (their lengths,
    /// and flash's keys and checksums, are kept in DRAM), so they stay aligned; blocks on
    /// mapped and file tiers carry their header, one per chunk.
    pub fn slot_bytes(&self, block_size: usize, chunks: u32) -> usize {
        match self {
            TierKind::Flash { .. } | TierKind::Dram => block_size,
            _ => block_size + HEADER_BYTES * chunks as usize,
        }
    }
}

/// Fault injection, to see what a cache over a failing device does: every `every`-th write to
/// a file or flash tier fails with an I/O error, as a failing device's would, and writes
/// nothing.
pub struct WriteFaults {
    every: u64,
    writes: std::sync::atomic::AtomicU64,
}

impl WriteFaults {
    pub fn new(every: u64) -> WriteFaults {
        WriteFaults { every: every.max(1), writes: std::sync::atomic::AtomicU64::new(0) }
    }

    /// Counts a write; the error it fails with if it is one to fail.
    fn strike(&self, path: &Path) -> Result<(), EngineError> {
        let n = self.writes.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
        if n.is_multiple_of(self.every) {
            return Err(EngineError::Io {
                path: path.to_path_buf(),
                action: "cannot write a block",
                source: std::io::Error::other("injected write fault"),
            });
        }
        Ok(())
    }
}

/// A read that found no usable block.
#[derive(Debug)]
pub enum ReadFault {
    Corrupt(BlockFault),
    Io(std::io::Error),
}

/// A tier's medium, opened and sized; shards take disjoint regions of it.
pub struct Medium {
    kind: TierKind,
    mapping: Option<Arc<MmapRaw>>,
    file: Option<Arc<File>>,
    slot_bytes: usize,
    /// Chunks a page may be split into (1 without size classes).
    chunks: u32,
    emulator: Option<Arc<Emulator>>,
    faults: Option<Arc<WriteFaults>>,
    /// Something the user should know about how the medium runs (a fallback taken).
    pub warning: Option<String>,
    /// The tier file, locked for this cache while the medium lives (`tierfile`).
    _locked: Option<File>,
    /// Bytes before the first slot: the tier file's header.
    base: u64,
}

impl Medium {
    /// Opens the tier: DRAM is allocated; a mapped, file or flash tier's file is made or taken
    /// as `tierfile` allows (a foreign file only when `overwrite`), locked, and sized.
    pub fn open(
        kind: &TierKind,
        slots: u64,
        slot_bytes: usize,
        chunks: u32,
        overwrite: bool,
    ) -> Result<Medium, EngineError> {
        let bytes = slots * slot_bytes as u64;
        let mut warning = None;
        let geometry = tierfile::Geometry { slot_bytes: slot_bytes as u32, slots };
        let locked = match kind {
            TierKind::Dram => None,
            TierKind::Mapped { path } | TierKind::File { path } | TierKind::Flash { path } => {
                Some(tierfile::open(path, geometry, overwrite)?)
            }
        };
        let (mapping, file) = match kind {
            TierKind::Dram => {
                // Anonymous memory, page-aligned, touched only through raw slot slices so a
                // read handle may keep pointing at its slot while the shard writes others.
                let mapping = MmapOptions::new().len((bytes as usize).max(1)).map_anon().map_err(
                    |source| EngineError::Io {
                        path: "<DRAM tier>".into(),
                        action: "cannot allocate the tier's memory",
                        source,
                    },
                )?;
                // Huge pages where the kernel has them: hits land on random slots, and with
                // 4 KiB pages nearly every one would also miss the TLB. A hint; refusals
                // (no transparent huge pages) change nothing else.
                #[cfg(target_os = "linux")]
                let _ = mapping.advise(memmap2::Advice::HugePage);
                (Some(Arc::new(MmapRaw::from(mapping))), None)
            }
            TierKind::Flash { path } => {
                let (file, note) = open_direct(path)?;
                warning = note;
                (None, Some(Arc::new(file)))
            }
            TierKind::Mapped { path } => {
                let file = locked.as_ref().expect("a tier file");
                let length = (tierfile::HEADER_BYTES + bytes) as usize;
                let mapping = MmapOptions::new().len(length).map_raw(file).map_err(|source| {
                    EngineError::Io {
                        path: path.clone(),
                        action: "cannot map the tier file",
                        source,
                    }
                })?;
                (Some(Arc::new(mapping)), None)
            }
            TierKind::File { path } => {
                let file = locked.as_ref().expect("a tier file").try_clone().map_err(|source| {
                    EngineError::Io {
                        path: path.clone(),
                        action: "cannot open the tier file",
                        source,
                    }
                })?;
                (None, Some(Arc::new(file)))
            }
        };
        let base = if locked.is_some() { tierfile::HEADER_BYTES } else { 0 };
        Ok(Medium {
            kind: kind.clone(),
            mapping,
            file,
            slot_bytes,
            chunks,
            emulator: None,
            faults: None,
            warning,
            _locked: locked,
            base,
        })
    }

    /// Makes every `every`-th write to this medium fail (file and flash tiers; see
    /// [`WriteFaults`]).
    pub fn fail_writes(&mut self, every: u64) {
        self.faults = Some(Arc::new(WriteFaults::new(every)));
    }

    /// Makes every region of this medium behave like `profile`.
    pub fn emulate(&mut self, profile: tiercache_core::DeviceProfile) {
        self.emulator = Some(Arc::new(Emulator::new(profile)));
    }

    /// The region of slots `first..first + count` for one shard. Regions of one medium must be
    /// disjoint: the cache hands each slot range out once.
    pub fn region(&self, first: u64, count: u64) -> Result<Region, EngineError> {
        let offset = self.base + first * self.slot_bytes as u64;
        let bytes = (count * self.slot_bytes as u64) as usize;
        let storage = match (&self.kind, &self.mapping, &self.file) {
            (TierKind::Mapped { .. }, Some(mapping), _) => {
                assert!(offset as usize + bytes <= mapping.len(), "region past the mapping");
                Storage::Mapped { mapping: mapping.clone(), offset: offset as usize }
            }
            (TierKind::File { path }, _, Some(file)) => Storage::File {
                file: file.clone(),
                offset,
                path: path.clone(),
                scratch: vec![0; self.slot_bytes],
            },
            (TierKind::Flash { path }, _, Some(file)) => Storage::Direct(DirectSlots::new(
                file.clone(),
                offset,
                path.clone(),
                count,
                self.slot_bytes,
            )),
            (TierKind::Dram, Some(mapping), _) => {
                assert!(offset as usize + bytes <= mapping.len(), "region past the mapping");
                Storage::Dram {
                    mapping: mapping.clone(),
                    offset: offset as usize,
                    lens: vec![0; (count * self.chunks as u64) as usize],
                }
            }
            _ => unreachable!("every medium opens what its regions need"),
        };
        Ok(Region {
            storage,
            slot_bytes: self.slot_bytes,
            count,
            chunks: self.chunks,
            page_class: vec![0; count as usize],
            slack: self.kind.slack_slots(),
            emulator: self.emulator.clone(),
            faults: self.faults.clone(),
            spare: Vec::new(),
            published: None,
        })
    }
}

/// What a read of a file or flash tier needs once the shard is unlocked: the file, where the
/// slot is, what DRAM knows of the block, and a buffer. Slots are never rewritten while a read
/// holds them (the shard pins them and writes elsewhere), so the read sees one block, whole.
pub struct PinnedRead {
    file: Arc<File>,
    at: u64,
    key: u64,
    /// Length and CRC32C of the value, for headerless (flash) blocks.
    expect: Option<(u32, u32)>,
    buf: IoBuf,
    emulator: Option<Arc<Emulator>>,
}

pub enum IoBuf {
    Plain(Vec<u8>),
    Aligned(AlignedBuf),
}

impl IoBuf {
    fn bytes(&mut self) -> &mut [u8] {
        match self {
            IoBuf::Plain(v) => v,
            IoBuf::Aligned(a) => a.as_mut_slice(),
        }
    }

    fn as_slice(&self) -> &[u8] {
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
    file: Arc<File>,
    at: u64,
    path: PathBuf,
    key: u64,
    /// The bytes to write: header and value on file tiers, the value padded to the block on
    /// flash.
    buf: IoBuf,
    written: usize,
    value_at: usize,
    len: u32,
    /// CRC32C of the value (flash blocks keep it in DRAM).
    crc: u32,
    emulator: Option<Arc<Emulator>>,
    faults: Option<Arc<WriteFaults>>,
}

impl Staged {
    /// The block's value.
    pub fn value(&self) -> &[u8] {
        &self.buf.as_slice()[self.value_at..self.value_at + self.len as usize]
    }

    /// Writes the block (as the tier's device profile would, if emulated).
    pub fn run(&self) -> Result<(), EngineError> {
        if let Some(faults) = &self.faults {
            faults.strike(&self.path)?;
        }
        let write = || {
            self.file.write_all_at(&self.buf.as_slice()[..self.written], self.at).map_err(
                |source| EngineError::Io {
                    path: self.path.clone(),
                    action: "cannot write a block",
                    source,
                },
            )
        };
        match &self.emulator {
            Some(e) => e.serve(Direction::Write, self.len as u64, write),
            None => write(),
        }
    }
}

impl PinnedRead {
    /// Reads and checks the block, copying its value into `out`; returns the value's length.
    pub fn run(&mut self, out: &mut [u8]) -> Result<usize, ReadFault> {
        let emulator = self.emulator.clone();
        let bytes = self.buf.bytes().len() as u64;
        match emulator {
            Some(e) => e.serve(Direction::Read, bytes, || self.run_now(out)),
            None => self.run_now(out),
        }
    }

    fn run_now(&mut self, out: &mut [u8]) -> Result<usize, ReadFault> {
        let (key, at, expect) = (self.key, self.at, self.expect);
        let buf = self.buf.bytes();
        self.file.read_exact_at(buf, at).map_err(ReadFault::Io)?;
        let value = match expect {
            None => decode(buf, key).map_err(ReadFault::Corrupt)?,
            Some((len, crc)) => {
                let value = &buf[..len as usize];
                if crate::block::crc32c(value) != crc {
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

enum Storage {
    /// Headerless blocks in process memory (which has no media errors to catch), with each
    /// slot's value length beside them.
    Dram {
        mapping: Arc<MmapRaw>,
        offset: usize,
        lens: Vec<u32>,
    },
    Direct(DirectSlots),
    Mapped {
        mapping: Arc<MmapRaw>,
        offset: usize,
    },
    File {
        file: Arc<File>,
        offset: u64,
        path: PathBuf,
        scratch: Vec<u8>,
    },
}

impl Storage {
    /// Stores `value` for `key` in `slot`, which spans `bytes` bytes at `at` in the region,
    /// on a memory tier; false on other tiers. The caller holds the shard's lock (`&mut`) and
    /// writes only slots no read handle pins. Readers without the lock may be copying these
    /// bytes (see `optimistic`), so they are stored as byte-wise atomics through a raw pointer,
    /// and no reference to them is made.
    fn write_memory(
        &mut self,
        (at, bytes): (usize, usize),
        slot: u32,
        key: u64,
        value: &[u8],
    ) -> bool {
        let (mapping, offset) = match self {
            Storage::Dram { mapping, offset, .. } | Storage::Mapped { mapping, offset } => {
                (mapping, *offset)
            }
            Storage::File { .. } | Storage::Direct(_) => return false,
        };
        assert!(offset + at + bytes <= mapping.len(), "slot {slot} past the mapping");
        // SAFETY: inside the mapping (asserted above), which outlives this call (held by
        // `self`).
        let target = unsafe { mapping.as_mut_ptr().add(offset + at) };
        match self {
            Storage::Dram { lens, .. } => {
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
            _ => {
                assert!(HEADER_BYTES + value.len() <= bytes, "value larger than its slot");
                let header = crate::block::header(key, value);
                // SAFETY: header and value lie in the slot (asserted); as above.
                unsafe {
                    atomic_bytes::store(header.as_ptr(), target, HEADER_BYTES);
                    atomic_bytes::store(value.as_ptr(), target.add(HEADER_BYTES), value.len());
                }
            }
        }
        true
    }
}

/// One shard's slots.
pub struct Region {
    storage: Storage,
    slot_bytes: usize,
    /// Pages: without size classes, one block each, and a block's slot is its page.
    count: u64,
    /// With size classes, a page of class `c` holds `1 << c` blocks of `1 / (1 << c)` of it,
    /// and slot `s` is chunk `s % chunks` of page `s / chunks`.
    chunks: u32,
    page_class: Vec<u8>,
    /// Slots beyond the policy's capacity (see `TierKind::slack_slots`).
    slack: u64,
    emulator: Option<Arc<Emulator>>,
    faults: Option<Arc<WriteFaults>>,
    /// Buffers for reads done with the shard unlocked, reused.
    spare: Vec<IoBuf>,
    /// The slots as readers without the lock see them, when hits are served that way.
    published: Option<SlotTable>,
}

impl Region {
    /// Whether reads of this region are I/O, done with the shard unlocked.
    pub fn is_io(&self) -> bool {
        matches!(self.storage, Storage::File { .. } | Storage::Direct(_))
    }

    /// Publishes this region's slots for reads without the shard's lock (see
    /// [`crate::optimistic`]); from now on every write and vacated slot updates the table.
    /// `None` where that cannot be done: file and flash tiers, size classes, emulated media.
    pub fn publish(&mut self, sets: (&Arc<Sets>, usize)) -> Option<SlotTable> {
        if self.chunks != 1 || self.emulator.is_some() {
            return None;
        }
        let (mapping, offset, headers) = match &self.storage {
            Storage::Dram { mapping, offset, .. } => (mapping, *offset, false),
            Storage::Mapped { mapping, offset } => (mapping, *offset, true),
            Storage::File { .. } | Storage::Direct(_) => return None,
        };
        let slots = self.count as usize;
        let table = SlotTable::new(sets, mapping.clone(), offset, slots, self.slot_bytes, headers);
        self.published = Some(table.clone());
        Some(table)
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

    /// Prepares a read of `slot` to run with the shard unlocked (file and flash tiers).
    pub fn begin_read(&mut self, slot: u32, key: u64) -> Option<PinnedRead> {
        let at = slot as u64 * self.slot_bytes as u64;
        let (file, at, expect, aligned) = match &self.storage {
            Storage::File { file, offset, .. } => (file.clone(), offset + at, None, false),
            Storage::Direct(direct) => {
                let (file, at, expect) = direct.locate(slot, key)?;
                (file, at, Some(expect), true)
            }
            _ => return None,
        };
        let buf = self.spare.pop().unwrap_or_else(|| match aligned {
            true => IoBuf::Aligned(AlignedBuf::new(self.slot_bytes)),
            false => IoBuf::Plain(vec![0; self.slot_bytes]),
        });
        Some(PinnedRead { file, at, key, expect, buf, emulator: self.emulator.clone() })
    }

    /// Prepares the write of `value` for `key` into `slot` to run with the shard unlocked (file
    /// and flash tiers; `None` on memory tiers). The slot reads as empty until
    /// [`end_write`](Self::end_write).
    pub fn begin_write(&mut self, slot: u32, key: u64, value: &[u8]) -> Option<Staged> {
        let at = slot as u64 * self.slot_bytes as u64;
        let (file, at, path, mut buf, written, value_at, crc) = match &mut self.storage {
            Storage::File { file, offset, path, .. } => {
                let mut buf = match self.spare.pop() {
                    Some(buf @ IoBuf::Plain(_)) => buf,
                    _ => IoBuf::Plain(vec![0; self.slot_bytes]),
                };
                encode(buf.bytes(), key, value);
                let written = HEADER_BYTES + value.len();
                (file.clone(), *offset + at, path.clone(), buf, written, HEADER_BYTES, 0)
            }
            Storage::Direct(direct) => {
                let mut aligned = match self.spare.pop() {
                    Some(IoBuf::Aligned(a)) => a,
                    _ => AlignedBuf::new(self.slot_bytes),
                };
                let (file, at, crc) = direct.stage(slot, value, &mut aligned);
                let path = direct.path().to_path_buf();
                (file, at, path, IoBuf::Aligned(aligned), self.slot_bytes, 0, crc)
            }
            Storage::Dram { .. } | Storage::Mapped { .. } => return None,
        };
        debug_assert_eq!(&buf.bytes()[value_at..value_at + value.len()], value);
        Some(Staged {
            file,
            at,
            path,
            key,
            buf,
            written,
            value_at,
            len: value.len() as u32,
            crc,
            emulator: self.emulator.clone(),
            faults: self.faults.clone(),
        })
    }

    /// Ends a staged write of `slot`: the block reads back if the write succeeded. Takes the
    /// buffer back when the staged block is no longer shared.
    pub fn end_write(&mut self, slot: u32, staged: Arc<Staged>, ok: bool) {
        if let Storage::Direct(direct) = &mut self.storage {
            direct.landed(slot, staged.key, staged.len, staged.crc, ok);
        }
        if let Ok(staged) = Arc::try_unwrap(staged) {
            self.spare.push(staged.buf);
        }
    }

    /// Takes back a read's buffer.
    pub fn end_read(&mut self, read: PinnedRead) {
        self.spare.push(read.into_buf());
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
        self.page_class[page as usize]
    }

    /// Splits `page` (holding no blocks) into blocks of `class`.
    pub fn set_page_class(&mut self, page: u32, class: u8) {
        debug_assert!(1u32 << class <= self.chunks, "class {class} splits a page too finely");
        self.page_class[page as usize] = class;
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
    pub fn slack(&self) -> u64 {
        self.slack
    }

    /// The value stored for `key` in `slot` of a memory tier, checked (its header
    /// and checksum on mapped tiers). The bytes stay valid and unchanged for as long as the
    /// shard keeps the slot pinned: pinned slots are never written or reused.
    pub fn locate(&self, slot: u32, key: u64) -> Result<&[u8], ReadFault> {
        if let Storage::Dram { mapping, offset, lens } = &self.storage {
            let at = offset + self.span(slot).0;
            let len = lens[slot as usize] as usize;
            // SAFETY: the slot lies inside the region (`span` asserts it), the region inside
            // the mapping. Slots are written only under the shard's lock, and never while
            // pinned, so nothing writes these bytes while this borrow or a handle's view lives.
            return Ok(unsafe { std::slice::from_raw_parts(mapping.as_ptr().add(at), len) });
        }
        let bytes = self.memory(slot).expect("located blocks are on memory tiers");
        decode(bytes, key).map_err(ReadFault::Corrupt)
    }

    /// The largest value a slot holds.
    pub fn value_bytes(&self) -> usize {
        match self.storage {
            Storage::Direct(_) | Storage::Dram { .. } => self.slot_bytes,
            _ => self.slot_bytes - HEADER_BYTES,
        }
    }

    /// Where a slot of a mapped tier starts.
    fn mapped(&self, slot: u32) -> Option<(*mut u8, usize)> {
        let (at, bytes) = self.span(slot);
        match &self.storage {
            // SAFETY: the slot lies inside this region (`span` asserts it), and the region
            // inside the mapping (asserted when it was made).
            Storage::Mapped { mapping, offset } => {
                Some((unsafe { mapping.as_mut_ptr().add(*offset + at) }, bytes))
            }
            _ => None,
        }
    }

    /// The bytes of a slot of a mapped tier, to read. Read handles may read them at the same
    /// time; nothing writes them while the shard's lock is held (`&self`).
    fn memory(&self, slot: u32) -> Option<&[u8]> {
        let (start, bytes) = self.mapped(slot)?;
        // SAFETY: as above; shared references may coexist, and writes happen only through
        // `Storage::write_memory` under the lock, to unpinned slots.
        Some(unsafe { std::slice::from_raw_parts(start, bytes) })
    }

    /// Stores `value` for `key` in `slot` (as the tier's device profile would, if emulated).
    pub fn write(&mut self, slot: u32, key: u64, value: &[u8]) -> Result<(), EngineError> {
        match self.emulator.clone() {
            Some(e) => {
                e.serve(Direction::Write, value.len() as u64, || self.write_now(slot, key, value))
            }
            None => self.write_now(slot, key, value),
        }
    }

    fn write_now(&mut self, slot: u32, key: u64, value: &[u8]) -> Result<(), EngineError> {
        let span = self.span(slot);
        if let Some(table) = &self.published {
            let way = table.begin_write(slot, key);
            self.storage.write_memory(span, slot, key, value);
            table.end_write(way, slot, key, value.len());
            return Ok(());
        }
        if self.storage.write_memory(span, slot, key, value) {
            return Ok(());
        }
        let at = slot as u64 * self.slot_bytes as u64;
        if let Some(faults) = &self.faults {
            let path = match &self.storage {
                Storage::Direct(direct) => direct.path(),
                Storage::File { path, .. } => path,
                Storage::Dram { .. } | Storage::Mapped { .. } => {
                    unreachable!("memory tiers return above")
                }
            };
            faults.strike(path)?;
        }
        match &mut self.storage {
            Storage::Direct(direct) => direct.write(slot, key, value),
            Storage::File { file, offset, path, scratch } => {
                let used = HEADER_BYTES + value.len();
                encode(&mut scratch[..], key, value);
                file.write_all_at(&scratch[..used], *offset + at).map_err(|source| {
                    EngineError::Io { path: path.clone(), action: "cannot write a block", source }
                })
            }
            Storage::Dram { .. } | Storage::Mapped { .. } => {
                unreachable!("memory tiers return above")
            }
        }
    }

    /// Copies the value stored for `key` in `slot` into `out` after checking it; returns its
    /// length.
    pub fn read(&mut self, slot: u32, key: u64, out: &mut [u8]) -> Result<usize, ReadFault> {
        match self.emulator.clone() {
            Some(e) => {
                e.serve(Direction::Read, self.slot_bytes as u64, || self.read_now(slot, key, out))
            }
            None => self.read_now(slot, key, out),
        }
    }

    fn read_now(&mut self, slot: u32, key: u64, out: &mut [u8]) -> Result<usize, ReadFault> {
        if matches!(self.storage, Storage::Dram { .. } | Storage::Mapped { .. }) {
            return self.locate(slot, key).map(|value| copy_value(value, out));
        }
        if let Storage::Direct(direct) = &mut self.storage {
            return direct.read(slot, key, out);
        }
        let at = slot as u64 * self.slot_bytes as u64;
        let Storage::File { file, offset, scratch, .. } = &mut self.storage else { unreachable!() };
        file.read_exact_at(&mut scratch[..], *offset + at).map_err(ReadFault::Io)?;
        decode(scratch, key).map(|v| copy_value(v, out)).map_err(ReadFault::Corrupt)
    }
}
