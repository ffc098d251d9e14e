//! A tier: its medium and everything the engine keeps on it, in one folder, layer by layer from
//! the bytes up:
//!
//! - [`block`]: the block format (a block's header, its checksum, what a slot holds);
//! - [`superblock`]: a tier file's identity and geometry, and how an existing file is taken;
//! - [`medium`]: a tier's medium opened and sized (DRAM, a mapped file, a file, flash), cut into
//!   one region per shard;
//! - [`region`]: one shard's slots on the medium and how blocks lie in them, with the I/O done
//!   on them with the shard unlocked (a pinned read, a staged write); [`flash`] is the flash
//!   format's slot records;
//! - [`optimistic`]: the upper tier's slots published for hits served without the shard's
//!   lock, and the log of those hits the policies are told of later;
//! - [`store`]: what a shard keeps of a tier: its region, free slots, pins, slots held for a
//!   sync, and whether a slot may take a block or a pin now;
//! - [`behind`]: write-behind, the blocks a shard stages for a file or flash tier, the queue
//!   and the threads that write them.
//!
//! This file holds what every layer and the shard above them share: the kind of a tier's
//! medium ([`TierKind`]), the slots a region keeps beyond its policy's capacity, and where a
//! block lies ([`Place`]).

#[cfg(not(loom))]
pub mod behind;
pub mod block;
#[cfg(not(loom))]
pub mod flash;
#[cfg(not(loom))]
pub mod medium;
pub mod optimistic;
#[cfg(not(loom))]
pub mod region;
#[cfg(not(loom))]
pub(crate) mod store;
#[cfg(not(loom))]
pub mod superblock;

use std::path::PathBuf;

use block::HEADER_BYTES;

/// Slots a file or flash region has beyond what its policy may fill: room for the slots reads
/// and staged writes hold after they were freed, and for an overwrite's new copy. Reads and
/// writes beyond what this leaves room for run under the lock instead.
pub const IO_SLACK_SLOTS: u64 = 16;

/// Slots a DRAM or mapped region has beyond what its policy may fill: one for a promotion's
/// swap, one for an overwrite's copy, and the rest for slots read handles hold after they were
/// freed. Handles past that get a copy instead.
pub const MEMORY_SLACK_SLOTS: u64 = 8;

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
    /// The tier's file, where it has one (every tier but DRAM).
    pub fn path(&self) -> Option<&std::path::Path> {
        match self {
            TierKind::Dram => None,
            TierKind::Mapped { path } | TierKind::File { path } | TierKind::Flash { path } => {
                Some(path)
            }
        }
    }

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
            TierKind::File { .. } | TierKind::Flash { .. } => IO_SLACK_SLOTS,
            TierKind::Dram | TierKind::Mapped { .. } => MEMORY_SLACK_SLOTS,
        }
    }

    /// Bytes a page takes on the medium for blocks of `block_size`, split into at most
    /// `chunks` blocks of a size class: DRAM, mapped and flash slots hold values alone (DRAM
    /// keeps their lengths in DRAM, mapped tiers their headers and flash its records apart),
    /// so they stay aligned; blocks on file tiers carry their header, one per chunk.
    pub fn slot_bytes(&self, block_size: usize, chunks: u32) -> usize {
        match self {
            TierKind::Flash { .. } | TierKind::Dram | TierKind::Mapped { .. } => block_size,
            TierKind::File { .. } => block_size + HEADER_BYTES * chunks as usize,
        }
    }
}

/// Where a resident key's block is, and whether its data is there yet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Place {
    pub tier: u8,
    pub slot: u32,
    /// The slot waits for a read-through load (`Shard::fills` says which); false once it
    /// holds data.
    pub filling: bool,
    /// The block's write is behind: its bytes are in the shard's staging until it lands.
    pub staged: bool,
    /// The block holds data the backing device does not have yet (write-back modes): it is
    /// written back before its slot is freed, whatever the policy says.
    pub dirty: bool,
}

// Under loom only the block format is built, and nothing places blocks.
#[cfg_attr(loom, allow(dead_code))]
impl Place {
    pub(crate) fn new(tier: u8, slot: u32) -> Place {
        Place { tier, slot, filling: false, staged: false, dirty: false }
    }

    /// Whether `other` is the same slot (a block's place stays the same slot while it turns
    /// clean or lands).
    pub(crate) fn same_slot(&self, other: &Place) -> bool {
        self.tier == other.tier && self.slot == other.slot
    }
}

#[cfg(not(loom))]
impl superblock::Backing {
    /// The identity of the file at `path`, if there is one there (beside `Backing::of`, for an
    /// open file, in superblock.rs, which is at the engine's file-length limit).
    pub fn at(path: &std::path::Path) -> Option<superblock::Backing> {
        use std::os::unix::fs::MetadataExt;
        let meta = std::fs::metadata(path).ok()?;
        Some(superblock::Backing { device: meta.dev(), inode: meta.ino() })
    }
}
