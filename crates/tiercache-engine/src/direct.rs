//! The flash tier: a file or block device read and written with direct I/O (`O_DIRECT`), so
//! the page cache neither doubles the memory used nor hides the device's speed. Direct I/O
//! needs block-aligned offsets, lengths and buffers, so blocks here are whole and headerless
//! and their key, length and CRC32C live in DRAM metadata, checked on every read. Where the
//! file system refuses `O_DIRECT` (tmpfs on older kernels, some overlay file systems), the tier
//! falls back to buffered I/O and the cache reports it once in its warnings.

use std::alloc::{alloc_zeroed, dealloc, Layout};
use std::fs::{File, OpenOptions};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::ptr::NonNull;

use crate::block::BlockFault;
use crate::device::{read_exact_at, Device};
use crate::error::EngineError;
use crate::store::ReadFault;

/// Alignment of direct I/O: offsets, lengths and buffer addresses.
pub const DIRECT_ALIGN: usize = 4096;

/// A zeroed heap buffer aligned for direct I/O.
pub struct AlignedBuf {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: the buffer is plain owned memory: shared references only read it, and writing needs
// `&mut self`, so it may move between threads and be read from several at once.
unsafe impl Send for AlignedBuf {}
unsafe impl Sync for AlignedBuf {}

impl AlignedBuf {
    pub fn new(len: usize) -> AlignedBuf {
        assert!(
            len > 0 && len.is_multiple_of(DIRECT_ALIGN),
            "aligned buffers are whole 4 KiB pages"
        );
        let layout = Layout::from_size_align(len, DIRECT_ALIGN).expect("valid layout");
        // SAFETY: the layout has a non-zero size.
        let ptr = unsafe { alloc_zeroed(layout) };
        let ptr = NonNull::new(ptr).unwrap_or_else(|| std::alloc::handle_alloc_error(layout));
        AlignedBuf { ptr, len }
    }

    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: `ptr` is a live allocation of `len` initialised bytes owned by `self`.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }

    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: as above, and `&mut self` makes this the only reference.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        let layout = Layout::from_size_align(self.len, DIRECT_ALIGN).expect("valid layout");
        // SAFETY: allocated in `new` with this layout, freed once.
        unsafe { dealloc(self.ptr.as_ptr(), layout) };
    }
}

/// Opens the tier file `path` (made and sized by [`crate::tierfile::open`]) for direct I/O;
/// falls back to buffered I/O where the file system refuses `O_DIRECT`, returning the warning
/// to report.
pub fn open_direct(path: &Path) -> Result<(File, Option<String>), EngineError> {
    let io = |action, source| EngineError::Io { path: path.to_path_buf(), action, source };
    let mut options = OpenOptions::new();
    options.read(true).write(true);
    let direct = options.clone().custom_flags(libc::O_DIRECT).open(path);
    let (file, warning) = match direct {
        Ok(file) => (file, None),
        Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {
            let file = options.open(path).map_err(|e| io("cannot open the tier file", e))?;
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
    crate::block::crc32c(value)
}

/// What DRAM knows of a block on flash.
#[derive(Clone, Copy, Default)]
struct SlotMeta {
    key: u64,
    len: u32,
    crc: u32,
    written: bool,
}

/// DRAM the metadata of one flash slot takes.
pub(crate) const SLOT_META_BYTES: usize = std::mem::size_of::<SlotMeta>();

/// What DRAM knows of one shard's run of blocks on the flash tier, and a buffer for the
/// writes and reads done under the shard's lock. The blocks themselves are read and written
/// through the tier's device, at offsets the region gives.
pub struct DirectSlots {
    buf: AlignedBuf,
    meta: Vec<SlotMeta>,
}

impl DirectSlots {
    pub fn new(slots: u64, block: usize) -> DirectSlots {
        DirectSlots { buf: AlignedBuf::new(block), meta: vec![SlotMeta::default(); slots as usize] }
    }

    /// Writes `value` for `key` into `slot`, at `at` on `device`.
    pub fn write(
        &mut self,
        device: &dyn Device,
        (slot, at): (u32, u64),
        key: u64,
        value: &[u8],
    ) -> std::io::Result<()> {
        let crc = fill(&mut self.buf, value);
        // Until the new bytes are down, the slot holds nothing a read may trust.
        self.meta[slot as usize].written = false;
        device.write_at(self.buf.as_slice(), at)?;
        self.meta[slot as usize] = SlotMeta { key, len: value.len() as u32, crc, written: true };
        Ok(())
    }

    /// Fills `buf` with `value` for a write done elsewhere (with the shard unlocked), marking
    /// the slot unreadable until [`landed`](Self::landed); returns the value's CRC32C.
    pub fn stage(&mut self, slot: u32, value: &[u8], buf: &mut AlignedBuf) -> u32 {
        self.meta[slot as usize].written = false;
        fill(buf, value)
    }

    /// Records that a staged write of `key` to `slot` ended: readable if it succeeded.
    pub fn landed(&mut self, slot: u32, key: u64, len: u32, crc: u32, ok: bool) {
        self.meta[slot as usize] = SlotMeta { key, len, crc, written: ok };
    }

    /// What a written block for `key` in `slot` must check out as: (length, CRC32C); `None` if
    /// the slot holds no block for `key`.
    pub fn expect(&self, slot: u32, key: u64) -> Option<(u32, u32)> {
        let meta = self.meta[slot as usize];
        (meta.written && meta.key == key).then_some((meta.len, meta.crc))
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
        if crate::block::crc32c(value) != crc {
            return Err(ReadFault::Corrupt(BlockFault::Checksum));
        }
        Ok(crate::block::copy_value(value, out))
    }
}
