//! The engine: a real cache over DRAM, memory-mapped files (persistent memory, CXL memory,
//! tmpfs) and files, running the policies of `tiercache-policy` unchanged. A policy decides;
//! the engine carries the decision out on real bytes.
//!
//! Every request is decided by its shard's policy, one single-threaded instance behind the
//! shard's lock: hash the key, pick its shard, lock it, let the policy decide, copy the bytes,
//! unlock. A hit in a DRAM or mapped upper tier, under a policy whose hits are quiet (FIFO, LRU,
//! CLOCK, LFU, ARC, S3-FIFO), skips the lock: the block is found in a published table and
//! copied under a seqlock, and the policy is told of the hit later, in a batch, before anything
//! else its shard does (see [`optimistic`]). `get_ref` skips the copy: it pins the block's slot
//! on a memory tier and hands out its bytes until the handle drops (a pinned slot is neither
//! rewritten nor reused). Each shard owns a disjoint set of slots on the tier, so shards never
//! contend. Blocks on memory-mapped and file tiers carry a CRC32C checked on every
//! read; a mismatch is counted, the block dropped, and the caller sees a miss, never wrong data.
//!
//! [`CachedFile`] puts a backing file behind a cache with Open CAS's write modes.
//!
//! A cache has one tier, or two forming an exclusive DRAM-first hierarchy (the upper tier's
//! victims move down). Any tier can be made to behave like a device profile (emulation).
//! A background worker runs the policies' periodic work (LFRU's sweep) while the cache is
//! idle and is joined when the cache is dropped. The flash tier uses direct I/O, and its
//! writes (demotions, admitted misses) are done behind the caller by write-behind threads,
//! the block served from a DRAM copy until it lands (see [`behind`]).

pub mod atomic_bytes;
pub mod behind;
pub mod block;
pub mod builder;
pub mod cache;
pub mod clock;
pub mod direct;
pub mod emulate;
pub mod error;
pub mod file;
pub mod footprint;
pub mod latency;
pub mod optimistic;
pub mod shard;
pub mod stats;
pub mod store;
pub mod tierfile;

pub use builder::{CacheBuilder, TierSpec};
pub use cache::{BlockRef, Cache, CacheCore, PutOutcome, ReadOutcome};
pub use clock::{Clock, ManualClock, MonotonicClock};
pub use error::EngineError;
pub use file::{CachedFile, WriteMode};
pub use latency::{LatencySnapshot, Percentiles};
pub use stats::StatsSnapshot;
pub use store::TierKind;
