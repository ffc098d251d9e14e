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

/// Device profiles: the ranges a modelled or emulated device may have. Past them a run would
/// allocate without bound (parallelism) or sleep for centuries (bandwidth, latency).
pub const PROFILE_PARALLELISM_MAX: u32 = 1 << 16;
/// Most contention a profile may state: each other operation in service makes one take at most
/// this many times longer.
pub const PROFILE_CONTENTION_MAX: f64 = 100.0;
/// 1 MB/s and up; a model may make transfers all but free with a bandwidth near the top.
pub const PROFILE_BANDWIDTH_GB_S: (f64, f64) = (1e-3, 1e12);
/// 0 to 10 s, for one operation.
pub const PROFILE_LATENCY_US_MAX: f64 = 1e7;

/// Most shards a cache (the engine, or the simulator's model of it) may have: a power of two.
pub const SHARDS_MAX: usize = 4096;

/// Closed-loop clients of a run in virtual time (each holds a request slot).
pub const CLIENTS_MAX: usize = 1 << 16;
/// Open-loop arrival rate of a run in virtual time, requests per second (one a nanosecond).
pub const ARRIVAL_RATE_MAX: f64 = 1e9;

const _: () = assert!(BLOCK_SIZE_MAX <= OBJECT_SIZE_MAX);
const _: () = assert!(VOLUME_BITS >= 16 && VOLUME_ADDRESS_BITS >= 40);
const _: () = assert!(TIERS_MAX <= u8::MAX as usize);
