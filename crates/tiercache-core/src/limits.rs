//! Every limit in one place. Relations between them are checked at compile time.

/// Most tiers a hierarchy may have (DRAM, slow memory, flash, and room to grow).
pub const TIERS_MAX: usize = 8;

/// Largest object or request a policy accepts, in bytes. Larger requests in a trace are an error
/// in readers that cannot split them (object traces); block views split them.
pub const OBJECT_SIZE_MAX: u64 = u32::MAX as u64;

/// Largest block size of a block view.
pub const BLOCK_SIZE_MAX: u64 = 64 << 20;

/// Longest text line a trace reader accepts before it calls the line malformed.
pub const TRACE_LINE_BYTES_MAX: usize = 64 << 10;

/// Blocks one trace request may expand into in a block view (1 GiB of 512-byte sectors).
pub const BLOCKS_PER_REQUEST_MAX: u64 = 1 << 21;

/// Bits of a key that name the volume in a trace with a volume column (a volume, LUN or device):
/// volumes are numbered 0 to 2^20 - 1, and each has 2^44 addresses (16 TiB in bytes, 8 PiB in
/// 512-byte sectors). See `request::volume_key`.
pub const VOLUME_BITS: u32 = 20;

/// Bits of such a key left for the address (or block number) within the volume.
pub const VOLUME_ADDRESS_BITS: u32 = 64 - VOLUME_BITS;

const _: () = assert!(BLOCK_SIZE_MAX <= OBJECT_SIZE_MAX);
const _: () = assert!(VOLUME_BITS >= 16 && VOLUME_ADDRESS_BITS >= 40);
const _: () = assert!(TIERS_MAX <= u8::MAX as usize);
