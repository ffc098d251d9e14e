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

const _: () = assert!(BLOCK_SIZE_MAX <= OBJECT_SIZE_MAX);
const _: () = assert!(TIERS_MAX <= u8::MAX as usize);
