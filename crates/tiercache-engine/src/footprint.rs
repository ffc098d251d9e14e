//! The DRAM a cache's configuration needs, computed before anything is allocated, so that an
//! absurd size (a 1 TiB flash tier on a small machine) is a clear error naming the setting
//! instead of an abort in the allocator halfway through building.
//!
//! What a slot costs besides its bytes: up front, its shard's free list, use, pin and page-class
//! entries, a flash slot's metadata, a DRAM slot's length, a size-class owner; as the cache
//! fills, the block's place in its shard's map and the policy's entry for it.

use std::mem::size_of;

use crate::tier::Place;
use crate::tier::TierKind;

/// The policy's entry for a resident block, an estimate for the list-and-index policies (two
/// list links, the key, its size and an index slot at the map's load factor); ghost entries of
/// ARC and S3-FIFO come within the same bound per block.
pub const POLICY_ENTRY_BYTES: u64 = 64;

/// DRAM one slot of a placed flash tier costs (a set-associative policy's, which places the
/// blocks): the policy's key and order byte, the value's check, the readable and dirty bits
/// and the pin count, rounded up; its sets' bytes besides.
pub const PLACED_SLOT_BYTES: u64 = tiercache_policy::setassoc::SetAssoc::BYTES_PER_SLOT as u64
    + crate::tier::flash::COMPACT_SLOT_META_BYTES as u64
    + 1;

/// DRAM one slot of `kind` costs beside its bytes, once the cache is full, for pages of
/// `chunks` size-class blocks.
pub fn slot_bytes(kind: &TierKind, chunks: u32) -> u64 {
    // Free page list (u32), live count (u16), pin count (u32), page class (u8).
    let shard = (4 + 2 + 4 + 1) as u64;
    let medium = match kind {
        TierKind::Flash { .. } => crate::tier::flash::SLOT_META_BYTES as u64,
        TierKind::Dram => 4 * chunks as u64,
        TierKind::Mapped { .. } | TierKind::File { .. } => 0,
    };
    let owners = if chunks > 1 { 8 * chunks as u64 } else { 0 };
    // The place map: a key and its place, at a load factor of 7/8, one control byte each.
    let place = ((size_of::<(u64, Place)>() + 1) * 8 / 7) as u64;
    shard + medium + owners + (place + POLICY_ENTRY_BYTES) * chunks as u64
}

/// Physical memory of this machine, when the system says.
pub fn physical_memory_bytes() -> Option<u64> {
    // SAFETY: sysconf reads system constants and has no preconditions.
    let (pages, page) =
        unsafe { (libc::sysconf(libc::_SC_PHYS_PAGES), libc::sysconf(libc::_SC_PAGESIZE)) };
    (pages > 0 && page > 0).then(|| pages as u64 * page as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_flash_slot_costs_more_than_a_mapped_one_and_classes_multiply() {
        let flash = slot_bytes(&TierKind::Flash { path: "f".into() }, 1);
        let mapped = slot_bytes(&TierKind::Mapped { path: "m".into() }, 1);
        assert!(flash > mapped && mapped > POLICY_ENTRY_BYTES, "{flash} {mapped}");
        assert!(slot_bytes(&TierKind::Dram, 8) > 8 * POLICY_ENTRY_BYTES);
        assert!(physical_memory_bytes().unwrap() > 1 << 20);
    }

    #[test]
    fn a_place_is_eight_bytes_so_a_map_entry_is_sixteen() {
        assert_eq!(size_of::<Place>(), 8);
        assert_eq!(size_of::<(u64, Place)>(), 16);
    }
}
