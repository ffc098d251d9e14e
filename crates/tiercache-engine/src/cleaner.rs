//! Write-backs in device order: runs of consecutive blocks written as one write, and the
//! cleaner's write-backs done with the shards unlocked.
//!
//! Shards hold keys by hash, so one shard's dirty blocks are scattered over the backing device:
//! written back shard by shard, a disk sees a seek a block. Both the drain (`flush_backing`,
//! a clean stop) and the cleaner gather every shard's write-backs, sort them by key and write
//! consecutive blocks as one write ([`Runs`]). The drain holds every shard's lock; the cleaner
//! runs beside the requests, so a tick (`CacheCore::tick`) has three steps:
//!
//! 1. **gather**: shard by shard, locked, the policy's periodic work decides, and the blocks it
//!    writes back are copied out and recorded in flight (`Shard::flights`). They stay dirty.
//! 2. **write**: with no shard locked, every shard's copies are written in key order, then the
//!    backing device syncs once ([`Flights::write`]).
//! 3. **settle**: shard by shard, each block in flight whose copy is durable, and which was not
//!    written again meanwhile, is marked clean.
//!
//! A block in flight is dirty in the engine, so a crash at any step finds it dirty in the
//! cache. What must never happen is the copy landing on the backing device after something
//! newer, or after the block left the cache (a later miss would read the older data, or a
//! dropped block come back). So before a shard writes a block in flight back itself, drops it,
//! or copies it out for a drain, it settles it ([`Flights::settle`]): while the batch is being
//! written, it waits for the write and sync to end (the writer holds no shard lock, so this
//! cannot deadlock); before that, it takes the block out of the batch, which the writer then
//! skips; after, it learns whether the copy is durable. Data written to a block in flight only
//! marks it stale: the older copy still lands, and the block stays dirty.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard};

use tiercache_core::{Key, KeySet};

use crate::device::Device;

/// Bytes of one write of a drain or a cleaner's batch: consecutive dirty blocks up to this many
/// go to the backing device as one write.
pub const RUN_BYTES: usize = 4 << 20;

/// Bytes a cleaner's batch copies at most: shards past it write their write-backs under their
/// own locks that tick (each shard's policy may write back `flush_max_buffers` blocks a tick).
pub const BATCH_BYTES: usize = 64 << 20;

/// A block of a run: its key, a tag the caller gives (the drain's shard), and its length.
#[derive(Clone, Copy, Debug)]
pub struct Member {
    pub key: Key,
    pub tag: usize,
    pub len: usize,
}

/// Blocks given in key order, written as runs: consecutive keys, all whole blocks but the last,
/// up to [`RUN_BYTES`], each run one write.
pub struct Runs<'a> {
    backing: &'a dyn Device,
    block_size: usize,
    bytes: Vec<u8>,
    members: Vec<Member>,
    /// Writes of more than one block.
    pub runs: u64,
    /// Writes that failed.
    pub failed: u64,
    /// Whether any write succeeded (the backing device then needs a sync).
    pub wrote: bool,
}

impl<'a> Runs<'a> {
    pub fn new(backing: &'a dyn Device, block_size: usize) -> Runs<'a> {
        Runs {
            backing,
            block_size,
            bytes: Vec::with_capacity(RUN_BYTES.max(block_size)),
            members: Vec::new(),
            runs: 0,
            failed: 0,
            wrote: false,
        }
    }

    /// Adds `key`'s block, which `copy` puts at the start of the slice it is given (a whole
    /// block's room) and returns its length, or `None` to leave the block out. A key that does
    /// not continue the run writes the run first, and `done` hears of each of its blocks and
    /// whether the write succeeded.
    pub fn add(
        &mut self,
        key: Key,
        tag: usize,
        copy: impl FnOnce(&mut [u8]) -> Option<usize>,
        done: &mut impl FnMut(Member, bool),
    ) {
        let follows = self.members.last().is_some_and(|last| {
            key == last.key + 1
                && last.len == self.block_size
                && self.bytes.len() + self.block_size <= RUN_BYTES
        });
        if !follows {
            self.write(done);
        }
        let at = self.bytes.len();
        self.bytes.resize(at + self.block_size, 0);
        match copy(&mut self.bytes[at..]) {
            Some(len) => {
                self.bytes.truncate(at + len);
                self.members.push(Member { key, tag, len });
            }
            None => self.bytes.truncate(at),
        }
    }

    /// Writes the run being gathered, if any (the caller's last step).
    pub fn write(&mut self, done: &mut impl FnMut(Member, bool)) {
        let Some(first) = self.members.first() else { return };
        let ok = self.backing.write_at(&self.bytes, first.key * self.block_size as u64).is_ok();
        self.wrote |= ok;
        self.failed += !ok as u64;
        self.runs += (ok && self.members.len() > 1) as u64;
        for member in self.members.drain(..) {
            done(member, ok);
        }
        self.bytes.clear();
    }
}

/// A block whose copy is in the cleaner's batch, as its shard records it.
#[derive(Clone, Copy, Debug)]
pub struct Flight {
    pub batch: u64,
    /// The copy's length.
    pub len: u32,
    /// New data was written to the block since it was copied: it stays dirty.
    pub stale: bool,
}

/// The copies of one tick: every shard's blocks, in the order gathered.
pub struct Batch {
    pub id: u64,
    pub bytes: Vec<u8>,
    /// Key, and where its copy is in `bytes`, and its length.
    pub blocks: Vec<(Key, usize, usize)>,
}

/// What writing a batch did, for the stats.
#[derive(Default, Debug)]
pub struct Written {
    pub runs: u64,
    pub errors: u64,
    pub synced: bool,
}

/// The cleaner's batches: the one being gathered or written, and what became of the last one
/// written. Shared by the cache and its shards.
#[derive(Default)]
pub struct Flights {
    state: Mutex<State>,
    /// One tick at a time.
    turn: Mutex<()>,
    /// A drain waits for the turn: the batch being written stops at its next run, the rest
    /// left dirty for the drain's own sweep.
    yield_to_drain: AtomicBool,
}

#[derive(Default)]
struct State {
    /// The last batch begun.
    begun: u64,
    /// The last batch written (its writes done and the backing device synced, or failed).
    written: u64,
    /// Blocks of the batch begun that their shards took back before it was written.
    taken_back: KeySet,
    /// Blocks of the batch written whose copy is not durable (a write or the sync failed).
    failed: KeySet,
}

impl Flights {
    fn state(&self) -> MutexGuard<'_, State> {
        // Plain data, consistent between statements: a panic elsewhere leaves it usable.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Waits for the tick under way, if any, and keeps others from starting until the guard
    /// drops: a drain takes it, so that the cleaner's writes do not break its sweep into seeks.
    pub fn turn(&self) -> MutexGuard<'_, ()> {
        self.turn.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// [`turn`](Self::turn) for a drain: the batch being written stops at its next run.
    pub fn drain_turn(&self) -> MutexGuard<'_, ()> {
        self.yield_to_drain.store(true, Ordering::Release);
        let turn = self.turn();
        self.yield_to_drain.store(false, Ordering::Release);
        turn
    }

    /// Starts a tick: the caller holds the returned guard until the tick's last step, and
    /// gathers into the batch.
    pub fn begin(&self) -> (MutexGuard<'_, ()>, Batch) {
        let turn = self.turn();
        let mut state = self.state();
        state.begun += 1;
        state.taken_back.clear();
        state.failed.clear();
        (turn, Batch { id: state.begun, bytes: Vec::new(), blocks: Vec::new() })
    }

    /// Writes `batch` to `backing` in key order, runs as one write each, then syncs it; the
    /// blocks taken back meanwhile are left out. Shards that settle a block of the batch wait
    /// until this returns.
    pub fn write(&self, batch: &mut Batch, backing: &dyn Device, block_size: usize) -> Written {
        let mut state = self.state();
        let taken_back = std::mem::take(&mut state.taken_back);
        batch.blocks.retain(|(key, ..)| !taken_back.contains(key));
        batch.blocks.sort_unstable_by_key(|&(key, ..)| key);
        let mut failed = KeySet::default();
        let mut runs = Runs::new(backing, block_size);
        let mut done = |member: Member, ok: bool| {
            if !ok {
                failed.insert(member.key);
            }
        };
        let mut unwritten = &batch.blocks[..0];
        for (i, &(key, at, len)) in batch.blocks.iter().enumerate() {
            if self.yield_to_drain.load(Ordering::Acquire) {
                // Not written: dirty still, for the drain to write in its sweep.
                unwritten = &batch.blocks[i..];
                break;
            }
            let copy = &batch.bytes[at..at + len];
            runs.add(
                key,
                0,
                |out| {
                    out[..len].copy_from_slice(copy);
                    Some(len)
                },
                &mut done,
            );
        }
        runs.write(&mut done);
        failed.extend(unwritten.iter().map(|&(key, ..)| key));
        let synced = runs.wrote && backing.sync().is_ok();
        if runs.wrote && !synced {
            // Nothing written is known durable.
            failed.extend(batch.blocks.iter().map(|&(key, ..)| key));
        }
        let written = Written {
            runs: runs.runs,
            errors: runs.failed + (runs.wrote && !synced) as u64,
            synced: runs.wrote,
        };
        state.failed = failed;
        state.written = batch.id;
        written
    }

    /// What became of `key`'s copy in batch `batch`, for a shard about to write the block back
    /// itself, drop it or copy it out: true if the copy is durable on the backing device. While
    /// the batch is being written this waits for it; before, the block is taken out of the
    /// batch (false: it was not written, and will not be).
    pub fn settle(&self, key: Key, batch: u64) -> bool {
        let mut state = self.state();
        if state.written >= batch {
            return !state.failed.contains(&key);
        }
        state.taken_back.insert(key);
        false
    }
}
