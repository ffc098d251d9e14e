//! The engine: a real cache over DRAM, memory-mapped files (persistent memory, CXL memory,
//! tmpfs), files and flash, running the policies of `tiercache-policy` unchanged. A policy
//! decides; the engine carries the decision out on real bytes. `docs/ARCHITECTURE.md` draws
//! the layers and the way a read and a write travel through them.
//!
//! Every request is decided by its shard's policy, one single-threaded instance behind the
//! shard's lock: hash the key, pick its shard, lock it, and hold a short conversation with it,
//! one locked call per step ([`shard`]): look up or write, then, for a read of a file or
//! flash tier or a miss's load, the I/O with the lock released and one call to finish. A hit
//! in a DRAM or mapped upper tier, under a policy whose hits are quiet (FIFO, LRU, CLOCK, LFU,
//! ARC, S3-FIFO), skips the lock: the block is found in a published table and copied under a
//! seqlock, and the policy is told of the hit later, in a batch, before anything else its
//! shard does (see [`tier::optimistic`]). `get_ref` skips the copy: it pins the block's slot on a
//! memory tier and hands out its bytes until the handle drops (a pinned slot is neither
//! rewritten nor reused); on the published upper tier it pins without the lock too (see
//! [`pins`]). Each shard owns a disjoint set of slots on each tier, so shards never contend.
//! Blocks on memory-mapped, file and flash tiers carry a CRC32C, checked on every read from a
//! file or flash tier and every locked read; a hit without the lock on a mapped tier checks a
//! block once, until it changes, and a scrubber checks those blocks again in the background
//! (see [`scrub`]). A mismatch is counted, the block dropped, and the caller sees a miss.
//!
//! [`CachedFile`] puts a backing file behind a cache in one of Open CAS's modes, the policy's.
//!
//! A cache has any number of tiers top down ([`tier`]); the policy's hierarchy moves blocks
//! between them. Every medium, tier or backing file, is a [`device::Device`]; emulation of a
//! device profile, fault injection and staged crashes are wrappers around one. A background
//! worker runs the policies' periodic work (LFRU's sweep) while the cache is idle and is
//! joined when the cache is dropped. The flash tier uses direct I/O, and its writes
//! (demotions, admitted misses) are done behind the caller by write-behind threads, the block
//! served from a DRAM copy until it lands (see [`tier::behind`]). A cache opening over tier
//! files that hold blocks takes them back in one routine ([`recovery`]).

// The lock-free hit path, which `--cfg loom` builds alone to model-check it (see `sync`): the
// published table and the hits' log (`tier::optimistic`), with the block format it checks
// (`tier::block`; the tier's other layers left out).
pub mod atomic_bytes;
pub mod pins;
mod sync;
pub mod tier;

// The rest of the engine.
#[cfg(not(loom))]
pub mod aligned;
#[cfg(not(loom))]
mod bits;
#[cfg(not(loom))]
pub mod builder;
#[cfg(not(loom))]
pub mod cache;
#[cfg(not(loom))]
pub mod cleaner;
#[cfg(not(loom))]
pub mod clock;
#[cfg(not(loom))]
pub mod config;
#[cfg(not(loom))]
pub mod device;
#[cfg(not(loom))]
pub mod emulate;
#[cfg(not(loom))]
pub mod error;
#[cfg(not(loom))]
pub mod file;
#[cfg(not(loom))]
pub mod footprint;
#[cfg(not(loom))]
pub mod keyed;
#[cfg(not(loom))]
pub mod latency;
#[cfg(not(loom))]
pub mod nonblocking;
#[cfg(not(loom))]
pub mod recovery;
#[cfg(not(loom))]
pub mod scrub;
#[cfg(not(loom))]
pub mod shard;
#[cfg(not(loom))]
pub mod stats;

#[cfg(not(loom))]
pub use {
    builder::{CacheBuilder, TierSpec},
    cache::{BlockRef, Cache, CacheCore},
    clock::{Clock, ManualClock, MonotonicClock},
    config::{parse_interval, CacheConfig, EngineOptions, MediumKind, MediumSpec},
    error::EngineError,
    file::{CachedFile, Extent},
    keyed::{KeyBytes, KeyHash, KeyedCache, TypedCache},
    latency::{LatencySnapshot, Percentiles},
    nonblocking::{AsyncCache, Pending},
    recovery::Recovery,
    shard::{PutOutcome, ReadOutcome},
    stats::StatsSnapshot,
    tier::superblock::Recover,
    tier::TierKind,
};
