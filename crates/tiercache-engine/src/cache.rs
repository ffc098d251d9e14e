//! The cache's operations: `get`, `get_ref`, `read_through`, `put`, `update_if_cached`,
//! `invalidate`, `discard`. Each picks its key's shard, locks it, makes one call (a step of the
//! request: see `crate::shard`), and does what the step hands back with the lock released (a
//! read of a file or flash tier, a miss's load), locking again for the one step that ends it.
//! The cache never reaches into a shard: it only chooses, locks, calls, does the unlocked I/O
//! and relocks. A hit on DRAM or a mapped tier is served without the lock where the policy's
//! hits are quiet (`crate::tier::optimistic`).
//!
//! Reads use the same ops as a simulated trace (`Read`, `Write`, `Delete`; `get` is a
//! `Lookup`), and policies are sized in slots, so a single-shard engine run over a trace
//! decides exactly as the simulator does on it. A read-through miss that the policy admits
//! reserves its slot in a *filling* state, loads the data with the shard unlocked, then fills
//! the slot if it is still reserved for that load. Readers of a filling slot see a miss.

use std::io;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use tiercache_core::{Key, Op, Request};
use tiercache_policy::cas::CacheMode;

use crate::clock::Clock;
use crate::error::EngineError;
use crate::latency;
use crate::recovery::Recovery;
use crate::scrub::{Scrub, ScrubCounts};
use crate::shard::{Held, PutOutcome, Read, ReadOutcome, Shard};
use crate::tier::behind::WriteBehind;
use crate::tier::medium::Medium;
use crate::tier::optimistic::{Hit, HitLog, Landing, Recorded, SlotTable};

mod checkpoint;
pub use checkpoint::DEFAULT_SYNC_INTERVAL;
mod durability;
mod fetch;
mod handles;
mod report;
#[cfg(test)]
mod tests;

/// A cached value held for reading, from [`CacheCore::get_ref`]: in place on a memory tier
/// (its slot pinned until this drops), or a copy. Dereferences to the value's bytes.
pub struct BlockRef<'a> {
    core: &'a CacheCore,
    shard: usize,
    held: Held,
}

impl std::ops::Deref for BlockRef<'_> {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        match &self.held {
            // SAFETY: the slot is pinned until this handle drops, and a pinned slot is neither
            // written nor reused, so its `len` bytes stay valid and unchanged; the cache (and
            // its memory) outlives the handle, which borrows it.
            Held::Pinned { bytes, len, .. } => unsafe { std::slice::from_raw_parts(*bytes, *len) },
            Held::Copied(copy) => copy,
        }
    }
}

impl Drop for BlockRef<'_> {
    fn drop(&mut self) {
        if let Held::Pinned { tier, slot, .. } = self.held {
            self.core.unpin(self.shard, tier as usize, slot);
        }
    }
}

// SAFETY: the handle holds a shared view of bytes nothing writes while it lives, and releases
// its pin through the cache's locks, from whichever thread drops it.
unsafe impl Send for BlockRef<'_> {}
unsafe impl Sync for BlockRef<'_> {}

/// A sharded cache of fixed-size blocks over one or two tiers: a handle to the shared core,
/// the background worker when the policies have periodic work, and the write-behind threads
/// when a tier is written behind. Dropping the handle stops and joins the worker, then lets
/// the write-behind threads write everything queued and joins them.
pub struct Cache {
    core: Arc<CacheCore>,
    worker: Option<Worker>,
    scrubber: Option<Worker>,
    checkpointer: Option<Worker>,
    writers: Vec<std::thread::JoinHandle<()>>,
}

impl std::ops::Deref for Cache {
    type Target = CacheCore;

    fn deref(&self) -> &CacheCore {
        &self.core
    }
}

impl Drop for Cache {
    fn drop(&mut self) {
        if let Some(worker) = self.worker.take() {
            worker.stop();
        }
        for worker in [self.scrubber.take(), self.checkpointer.take()].into_iter().flatten() {
            worker.stop();
        }
        if let Some(behind) = &self.core.behind {
            self.core.release_runs();
            behind.stop();
        }
        for writer in self.writers.drain(..) {
            // A panic in a writer is a bug that already printed; shutting down goes on.
            let _ = writer.join();
        }
        if let Err(e) = self.core.close_clean() {
            // Nothing to return it to: the tiers stay marked open, and the next start checks
            // every block as after a crash.
            eprintln!("tiercache: the cache did not stop cleanly: {e}");
        }
    }
}

/// A background thread that wakes every interval and runs a step: the periodic work of the
/// shards' policies, or the scrubber.
struct Worker {
    stop: Arc<(Mutex<bool>, std::sync::Condvar)>,
    handle: std::thread::JoinHandle<()>,
}

impl Worker {
    fn start(
        name: &str,
        interval: std::time::Duration,
        mut step: impl FnMut() + Send + 'static,
    ) -> Worker {
        let stop = Arc::new((Mutex::new(false), std::sync::Condvar::new()));
        let signal = stop.clone();
        let handle = std::thread::Builder::new()
            .name(name.into())
            .spawn(move || loop {
                let (lock, wake) = &*signal;
                let stopped = lock.lock().unwrap_or_else(|p| p.into_inner());
                // Looked at before waiting too: a stop while the step ran has no one to wake.
                if *stopped {
                    return;
                }
                let (stopped, _) =
                    wake.wait_timeout(stopped, interval).unwrap_or_else(|p| p.into_inner());
                if *stopped {
                    return;
                }
                drop(stopped);
                step();
            })
            .expect("the worker thread starts");
        Worker { stop, handle }
    }

    fn stop(self) {
        let (lock, wake) = &*self.stop;
        *lock.lock().unwrap_or_else(|p| p.into_inner()) = true;
        wake.notify_all();
        // A panic in the worker is a bug that already printed; shutting down goes on.
        let _ = self.handle.join();
    }
}

impl Cache {
    pub(crate) fn start(
        core: CacheCore,
        tick_every: Option<std::time::Duration>,
        writers: usize,
        (scrub_rate, sync_every): (u64, Option<std::time::Duration>),
    ) -> Cache {
        let core = Arc::new(core);
        let persistent = core.media().iter().any(|m| m.path().is_some());
        let checkpointer = sync_every.filter(|_| persistent).map(|interval| {
            let core = core.clone();
            Worker::start("tiercache-checkpoint", interval, move || core.checkpoint(interval))
        });
        let worker = tick_every.map(|interval| {
            let core = core.clone();
            Worker::start("tiercache-worker", interval, move || {
                core.tick();
                core.measure();
            })
        });
        let scrubber = match &core.unlocked {
            Some(unlocked) if scrub_rate > 0 && unlocked.tables.iter().any(|t| t.marks()) => {
                let mut scrub =
                    Scrub::new(unlocked.tables.to_vec(), scrub_rate, core.scrubbed.clone());
                Some(Worker::start("tiercache-scrubber", crate::scrub::STEP, move || scrub.step()))
            }
            _ => None,
        };
        let writers = match &core.behind {
            Some(behind) => {
                let landing = core.clone();
                crate::tier::behind::start_writers(behind, writers, move |job, written| {
                    landing.lock(job.shard).land(job, written)
                })
            }
            None => Vec::new(),
        };
        Cache { core, worker, scrubber, checkpointer, writers }
    }

    /// Whether a background worker runs periodic work.
    pub fn has_worker(&self) -> bool {
        self.worker.is_some()
    }
}

/// The shared part of a cache: its shards and settings. Used through [`Cache`].
pub struct CacheCore {
    shards: Box<[ShardLock]>,
    /// Each shard's pins of each tier's slots (shard by shard, tier by tier): read handles let
    /// go of their pins without the shard's lock (see `crate::pins`).
    pins: Box<[Arc<crate::pins::Pins>]>,
    shard_bits: u32,
    block_size: usize,
    /// The largest value a put takes (`CacheBuilder::max_value`).
    max_value: usize,
    clock: Arc<dyn Clock>,
    /// Holds the tiers' files and mappings open for the shards' regions; locked to sync them
    /// and to rewrite their superblocks.
    media: Mutex<Vec<Medium>>,
    /// How many tiers the cache has (the media's count, read without their lock).
    tiers: usize,
    /// What the cache found on its tiers when it opened, if any tier held blocks.
    pub(crate) recovery: Option<Recovery>,
    record_latency: bool,
    /// Whether any tier's policy reads request times.
    timed: bool,
    /// The measurement fed to the policies' controllers each interval, when they have one.
    meter: Option<Mutex<Meter>>,
    /// The queue of blocks written behind, when file and flash tiers are.
    behind: Option<Arc<WriteBehind>>,
    /// Upper-tier hits served without the shard's lock, when the policy's hits are quiet.
    unlocked: Option<Unlocked>,
    /// What the scrubber found.
    scrubbed: Arc<ScrubCounts>,
    /// Syncs' turns and the background checkpoints' counts.
    syncs: checkpoint::Syncs,
    /// The Open CAS mode the policies run in, if any.
    mode: Option<CacheMode>,
    /// Whether blocks may be dirty (a write-back mode, or dirty blocks recovered): the cache
    /// then needs its backing device attached before it decides anything.
    keeps_dirty: bool,
    /// Whether the backing device is attached (`attach_device`).
    attached: std::sync::atomic::AtomicBool,
    /// The cleaner's write-backs in flight (see `crate::cleaner`).
    cleaner: Arc<crate::cleaner::Flights>,
    /// Tiers that lose their blocks in a crash (DRAM), each with the nearest persistent tier
    /// below it: a sync moves their dirty blocks down there or writes them back, as the
    /// policy says (`Policy::persist`).
    volatile: Vec<(tiercache_core::TierId, Option<tiercache_core::TierId>)>,
    /// The loads `fetch` has under way, by key.
    loads: fetch::Loads,
    /// Calls into the shards, counted for the tests of how many times a request crosses into
    /// its shard (see [`Locked`]).
    #[cfg(test)]
    calls: std::sync::atomic::AtomicU64,
}

/// What hits without the lock need: each shard's published upper-tier slots, and the hits
/// not yet told to the policies (see [`crate::tier::optimistic`]).
pub(crate) struct Unlocked {
    pub tables: Box<[SlotTable]>,
    pub log: HitLog,
}

/// A shard behind its lock, on cache lines of its own: the lock word and the fields every
/// request writes share the first line, and no two shards share a line.
#[repr(align(128))]
struct ShardLock(Mutex<Shard>);

impl std::ops::Deref for ShardLock {
    type Target = Mutex<Shard>;

    fn deref(&self) -> &Mutex<Shard> {
        &self.0
    }
}

/// A shard locked for a step of a request: every call into the shard goes through here. In
/// the engine's tests each call is counted (`cache/tests.rs`), to measure how often a request
/// crosses into its shard; elsewhere it is the lock's guard and nothing more.
pub(crate) struct Locked<'a> {
    guard: MutexGuard<'a, Shard>,
    #[cfg(test)]
    calls: &'a std::sync::atomic::AtomicU64,
}

impl std::ops::Deref for Locked<'_> {
    type Target = Shard;

    #[inline]
    fn deref(&self) -> &Shard {
        #[cfg(test)]
        self.calls.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        &self.guard
    }
}

impl std::ops::DerefMut for Locked<'_> {
    #[inline]
    fn deref_mut(&mut self) -> &mut Shard {
        #[cfg(test)]
        self.calls.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        &mut self.guard
    }
}

/// How a core runs, as the builder settled it.
pub(crate) struct Settings {
    pub block_size: usize,
    pub clock: Arc<dyn Clock>,
    pub record_latency: bool,
    /// Whether any tier's policy reads request times.
    pub timed: bool,
    pub meter: Option<Meter>,
    pub behind: Option<Arc<WriteBehind>>,
    /// Whether the policy keeps written data dirty (write-back modes, Hibachi).
    pub keeps_dirty: bool,
    pub unlocked: Option<Unlocked>,
    /// The largest value a put takes (`CacheBuilder::max_value`).
    pub max_value: usize,
}

/// What the engine had done at the end of the last interval, to take the next one's
/// measurement as the difference.
pub(crate) struct Meter {
    at: Instant,
    completed: u64,
    reads: u64,
    read_hits: u64,
    tier_reads: u64,
    tier_read_ns: u64,
    latency: hdrhistogram::Histogram<u64>,
}

impl Meter {
    pub(crate) fn new() -> Meter {
        Meter {
            at: Instant::now(),
            completed: 0,
            reads: 0,
            read_hits: 0,
            tier_reads: 0,
            tier_read_ns: 0,
            latency: latency::histogram(),
        }
    }
}

impl CacheCore {
    /// A core over `shards` (a power of two of them); the other settings as in [`Settings`].
    pub(crate) fn new(shards: Vec<Shard>, media: Vec<Medium>, settings: Settings) -> Self {
        let shard_bits = shards.len().trailing_zeros();
        let mode = shards.first().and_then(Shard::mode);
        let keeps_dirty = settings.keeps_dirty || shards.iter().any(|s| s.dirty_blocks() > 0);
        let is_volatile = |m: &Medium| matches!(m.kind(), crate::tier::TierKind::Dram);
        let volatile = (0..media.len())
            .filter(|&t| is_volatile(&media[t]))
            .map(|t| {
                let below = (t + 1..media.len()).find(|&b| !is_volatile(&media[b]));
                (tiercache_core::TierId(t as u8), below.map(|b| tiercache_core::TierId(b as u8)))
            })
            .collect();
        let cleaner = Arc::new(crate::cleaner::Flights::default());
        let pins = shards.iter().flat_map(Shard::pins).collect();
        let shards: Box<[ShardLock]> = shards
            .into_iter()
            .map(|mut s| {
                s.join_cleaner(cleaner.clone());
                ShardLock(Mutex::new(s))
            })
            .collect();
        CacheCore {
            cleaner,
            shards,
            pins,
            shard_bits,
            block_size: settings.block_size,
            max_value: settings.max_value,
            clock: settings.clock,
            tiers: media.len(),
            media: Mutex::new(media),
            recovery: None,
            record_latency: settings.record_latency,
            timed: settings.timed,
            meter: settings.meter.map(Mutex::new),
            behind: settings.behind,
            unlocked: settings.unlocked,
            scrubbed: Arc::default(),
            syncs: Default::default(),
            mode,
            keeps_dirty,
            attached: Default::default(),
            volatile,
            loads: Default::default(),
            #[cfg(test)]
            calls: Default::default(),
        }
    }

    /// Runs every shard's periodic work now (what the background worker does each interval).
    pub fn tick(&self) {
        if self.check_attached().is_err() {
            return;
        }
        // The write-backs the policies decide are gathered shard by shard, each locked only
        // while its blocks are copied, and written in device order with every shard unlocked
        // (see `crate::cleaner`): holding the locks for the disk's time stopped the requests
        // (measured: 1M ops/s down to 356).
        let now_us = self.clock.now_us();
        let (_turn, mut batch) = self.cleaner.begin();
        let mut gathered = Vec::new();
        let mut backing = None;
        for (i, mut shard) in self.each_shard().enumerate() {
            let before = batch.blocks.len();
            shard.tick_gathering(now_us, &mut batch);
            if batch.blocks.len() > before {
                gathered.push(i);
                backing = backing.or_else(|| shard.backing().cloned());
            }
        }
        let Some(backing) = backing else { return };
        let written = self.cleaner.write(&mut batch, &*backing, self.block_size);
        for (n, &i) in gathered.iter().enumerate() {
            let mut shard = self.lock(i);
            shard.settle_batch(batch.id);
            if n == 0 {
                shard.count_written_back(written.runs, written.errors, written.synced as u64);
            }
        }
    }

    /// The start of an operation, when latency is recorded.
    #[inline]
    fn started(&self) -> Option<Instant> {
        self.record_latency.then(Instant::now)
    }

    pub fn block_size(&self) -> usize {
        self.block_size
    }

    /// The largest value a put takes: the block size, unless values may span pages
    /// (`CacheBuilder::max_value`).
    pub fn max_value(&self) -> usize {
        self.max_value
    }

    fn shard_of(&self, key: Key) -> usize {
        tiercache_core::shard_index(key, self.shard_bits)
    }

    /// Runs `f` on shard `index`, locked: for the engine's tests of a shard's own steps.
    #[cfg(test)]
    pub(crate) fn with_shard<R>(&self, index: usize, f: impl FnOnce(&mut Shard) -> R) -> R {
        f(&mut self.lock(index))
    }

    /// Locks a shard. Hits served without the lock and not yet told to its policy (the
    /// calling thread's, and the other threads' that are flagged) are told first, so the
    /// policy hears of a thread's requests in the order they were served.
    fn lock(&self, index: usize) -> Locked<'_> {
        self.lock_and_tell(index, false)
    }

    /// Locks a shard and tells its policy the hits served without the lock: those flagged, or
    /// with `every` those in every thread's ring (for counts that must be whole).
    fn lock_and_tell(&self, index: usize, every: bool) -> Locked<'_> {
        // A panic while holding a shard lock is a bug that already failed loudly; the shard's
        // state is still consistent at every await-free step, so later users may continue.
        let guard = self.shards[index].lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let mut shard = Locked {
            guard,
            #[cfg(test)]
            calls: &self.calls,
        };
        if let Some(unlocked) = &self.unlocked {
            unlocked.log.take(index, every, |hits| {
                // The policy's index entries for the whole batch, fetched together (BP-Wrapper
                // prefetches too), rather than one hit's miss after another's.
                for hit in hits {
                    shard.prefetch(hit.key);
                }
                for hit in hits {
                    shard.commit_hit(hit.key, hit.len, hit.ns);
                }
            });
        }
        shard
    }

    /// Serves a hit in the upper tier without the shard's lock, if the block can be read that
    /// way (see [`crate::tier::optimistic`]); `None` sends the caller down the locked path, with
    /// `buf` as `landing` leaves it.
    #[inline]
    fn get_unlocked(&self, key: Key, buf: &mut [u8], landing: Landing) -> Option<usize> {
        let unlocked = self.unlocked.as_ref()?;
        let started = self.started();
        let index = self.shard_of(key);
        let (len, told) = unlocked.tables[index].read(key, buf, landing)?;
        self.record_unlocked(unlocked, index, key, len as u32, told, started);
        Some(len)
    }

    /// Copies `key`'s value into `buf` if it is a hit served from memory without the shard's
    /// lock (a DRAM or mapped upper tier, a quiet policy): a call that never waits on a device
    /// or a lock. `None` says nothing of whether the key is cached (`get` finds out).
    pub fn get_in_memory(&self, key: Key, buf: &mut [u8]) -> Option<usize> {
        self.get_unlocked(key, buf, Landing::Direct)
    }

    /// Records a hit served without the lock (`len` with `Hit::HELD` for a read handle's) in
    /// the calling thread's ring for shard `index`, timed from `started`, to tell the policy
    /// (`told`) or only to count it. An untold hit whose latency is not recorded is counted in
    /// the thread's stripe and never logged.
    #[inline]
    fn record_unlocked(
        &self,
        unlocked: &Unlocked,
        index: usize,
        key: Key,
        len: u32,
        told: bool,
        started: Option<Instant>,
    ) {
        if !told && started.is_none() && unlocked.log.count_untold(len) {
            return;
        }
        let len = if told { len } else { len | Hit::UNTOLD };
        let ns = started.map_or(0, |s| s.elapsed().as_nanos().min(u32::MAX as u128) as u32);
        match unlocked.log.record(index, Hit { key, len, ns }) {
            Recorded::Yes => {}
            // Locking the shard commits this thread's ring (with the others flagged); then
            // this hit is told at once, after them.
            Recorded::Full | Recorded::NoStripe => self.lock(index).commit_hit(key, len, ns),
        }
    }

    fn shard(&self, key: Key) -> Locked<'_> {
        self.lock(self.shard_of(key))
    }

    /// Each shard in turn, locked while it is looked at (every hit served so far told).
    fn each_shard(&self) -> impl Iterator<Item = Locked<'_>> {
        (0..self.shards.len()).map(|i| self.lock_and_tell(i, true))
    }

    fn request(&self, key: Key, op: Op) -> Request {
        // Only policies with periodic work read the time; the others are spared the clock.
        let now_us = if self.timed { self.clock.now_us() } else { 0 };
        Request::new(now_us, key, self.block_size as u32, op)
    }

    /// Looks `key` up (look-aside): copies its value into `buf` and returns its length on a
    /// hit; a miss admits nothing.
    pub fn get(&self, key: Key, buf: &mut [u8]) -> Option<usize> {
        // A miss leaves `buf` as it was.
        if let Some(len) = self.get_unlocked(key, buf, Landing::Checked) {
            return Some(len);
        }
        let started = self.started();
        let req = self.request(key, Op::Lookup);
        let step = self.shard(key).read(&req, buf, started);
        match self.read_tier(key, step.expect("a lookup's decision does no tier I/O"), buf, started)
        {
            Read::Done(served) => served,
            Read::Tier(_) | Read::Load(_) | Read::Lost => unreachable!("a lookup ends done"),
        }
    }

    /// Runs a read of a file or flash tier that a shard's step handed back (`Read::Tier`)
    /// into `buf` with the shard unlocked, and ends it with the shard's next step (the read
    /// timed from `started`); any other step comes back as it is.
    fn read_tier(&self, key: Key, step: Read, buf: &mut [u8], started: Option<Instant>) -> Read {
        match step {
            Read::Tier(mut read) => {
                let result = read.run(buf);
                self.shard(key).finish_read(key, read, result, started)
            }
            step => step,
        }
    }

    /// Reads `key` through the cache: a hit is copied into `buf`; on a miss `load` fills `buf`
    /// from the backing store (with the shard unlocked) and returns the length, and the value is
    /// cached if the policy admits it. On an error `buf`'s contents are unspecified (as
    /// after a failed `read(2)`): a hit read without the lock copies straight into it, and
    /// only a copy that checked out is kept, but a torn one is left for the locked path or
    /// `load` to overwrite.
    pub fn read_through(
        &self,
        key: Key,
        buf: &mut [u8],
        load: impl FnOnce(&mut [u8]) -> io::Result<usize>,
    ) -> Result<ReadOutcome, EngineError> {
        if let Some(len) = self.get_unlocked(key, buf, Landing::Direct) {
            return Ok(ReadOutcome { hit: true, len });
        }
        self.check_attached()?;
        let started = self.started();
        let req = self.request(key, Op::Read);
        let step = self.shard(key).read(&req, buf, started)?;
        match self.read_tier(key, step, buf, started) {
            Read::Done(Some(len)) => Ok(ReadOutcome { hit: true, len }),
            Read::Lost => Err(EngineError::DataLost { key }),
            Read::Load(fill) => {
                let loaded = load(buf);
                // The time a policy that reads it sees, should the load fail and its slot go.
                let now_us = if self.timed { self.clock.now_us() } else { 0 };
                self.shard(key).finish_load(key, (fill, loaded), buf, (started, now_us))
            }
            Read::Done(None) | Read::Tier(_) => unreachable!("a read-through ends served or loads"),
        }
    }

    fn check_len(&self, value: &[u8]) -> Result<(), EngineError> {
        if value.len() > self.max_value {
            if self.max_value > self.block_size {
                return Err(EngineError::OverMaximum { len: value.len(), max: self.max_value });
            }
            return Err(EngineError::TooLarge { len: value.len(), block_size: self.block_size });
        }
        Ok(())
    }

    /// Looks `key` up (look-aside) and returns its whole value on a hit, however long (a value
    /// spanning pages included); a miss admits nothing.
    pub fn get_object(&self, key: Key) -> Option<Vec<u8>> {
        let mut buf = vec![0u8; self.block_size];
        if let Some(len) = self.get_unlocked(key, &mut buf, Landing::Checked) {
            buf.truncate(len);
            return Some(buf);
        }
        let started = self.started();
        let req = self.request(key, Op::Lookup);
        let step = {
            let mut shard = self.shard(key);
            let step = shard.read(&req, &mut buf, started);
            if let Ok(Read::Done(Some(len))) = &step {
                if *len > buf.len() {
                    return Some(shard.take_spill());
                }
            }
            step
        };
        let step = match step.expect("a lookup's decision does no tier I/O") {
            Read::Tier(mut read) if read.object_len().is_some() => {
                // An object's pages, read into a vector of its length.
                let mut value = None;
                let len = read.run_to_vec().map(|v| value.insert(v).len());
                return match self.shard(key).finish_read(key, read, len, started) {
                    Read::Done(Some(_)) => value,
                    _ => None,
                };
            }
            step => step,
        };
        match self.read_tier(key, step, &mut buf, started) {
            Read::Done(Some(len)) => {
                buf.truncate(len);
                Some(buf)
            }
            Read::Done(None) => None,
            Read::Tier(_) | Read::Load(_) | Read::Lost => unreachable!("a lookup ends done"),
        }
    }

    /// Reads `value`, loaded by the caller after a look-up of `key` missed, through the cache:
    /// decided as the read a read-through would have made (`Op::Lookup`), and cached if the
    /// policy admits it. Whether the cache holds it now.
    pub fn admit(&self, key: Key, value: &[u8]) -> Result<bool, EngineError> {
        self.check_len(value)?;
        self.check_attached()?;
        let started = self.started();
        let req = self.request(key, Op::Read);
        self.shard(key).admit(&req, value, started)
    }

    /// Writes `value` for `key` (write-allocate: a missed key is cached if the policy admits it).
    pub fn put(&self, key: Key, value: &[u8]) -> Result<PutOutcome, EngineError> {
        self.check_len(value)?;
        self.check_attached()?;
        let started = self.started();
        let req = self.request(key, Op::Write);
        self.shard(key).write(req, value, started)
    }

    /// Overwrites `key`'s cached value if it is cached; never admits it (write-around). Decided
    /// as a lookup: a cached key's state moves as on a read hit.
    pub fn update_if_cached(&self, key: Key, value: &[u8]) -> Result<bool, EngineError> {
        self.check_len(value)?;
        self.check_attached()?;
        let started = self.started();
        let req = self.request(key, Op::Lookup);
        self.shard(key).update(&req, value, started)
    }

    /// Drops `key` if cached (its data was freed or overwritten elsewhere).
    pub fn invalidate(&self, key: Key) {
        let req = self.request(key, Op::Delete);
        self.shard(key).delete(&req, false);
    }

    /// Drops `key`, dirty or not, without writing it back: its data was discarded (a TRIM).
    /// The caller has made the backing device's copy of it read as zeros, durably, first: a
    /// crash after the drop must not find the backing device's older bytes. A block whose
    /// dirty data was lost reads again, as the backing device's.
    pub fn discard(&self, key: Key) {
        let req = self.request(key, Op::Delete);
        self.shard(key).delete(&req, true);
    }

    /// Whether `key` is resident (in any tier). The answer may be stale by the time it is
    /// used unless the caller keeps the key from being loaded.
    pub fn contains(&self, key: Key) -> bool {
        self.shard(key).contains(key)
    }

    /// Whether `key` is resident and dirty, so that the backing device's copy is older. As
    /// stale as [`contains`](Self::contains)'s answer.
    pub fn is_dirty(&self, key: Key) -> bool {
        self.keeps_dirty() && self.shard(key).is_dirty(key)
    }

    fn media(&self) -> MutexGuard<'_, Vec<Medium>> {
        self.media.lock().unwrap_or_else(|p| p.into_inner())
    }
}
