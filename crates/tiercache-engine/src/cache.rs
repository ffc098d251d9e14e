//! The cache: builder, shards, and the operations `get`, `read_through`, `put`, `invalidate`.
//!
//! Every operation becomes a request to the key's shard's policy, and the policy's decision is
//! applied to the shard's slots. Reads use the same ops as a simulated trace (`Read`, `Write`,
//! `Delete`; `get` is a `Lookup`), and the policy is sized in slots, so a single-shard engine
//! run over a trace decides exactly as the simulator does on it.
//!
//! A read-through miss that the policy admits reserves its slot in a *filling* state, loads the
//! data with the shard unlocked, then fills the slot if it is still reserved for that load.
//! Readers of a filling slot see a miss.

use std::io;
use std::sync::{Arc, Mutex, MutexGuard};

use tiercache_core::limits::BLOCK_SIZE_MAX;
use tiercache_core::{Action, Capacity, Decision, Key, KeyMap, Op, Request};
use tiercache_policy::{AdmissionConfig, AnyPolicy, Policy, PolicyConfig};

use crate::block::HEADER_BYTES;
use crate::clock::{Clock, MonotonicClock};
use crate::error::EngineError;
use crate::stats::{Stats, StatsSnapshot};
use crate::store::{Medium, ReadFault, Region, TierKind};

/// Most shards a cache may have.
pub const SHARDS_MAX: usize = 4096;
/// Smallest block: one sector.
pub const BLOCK_SIZE_MIN: usize = 512;

/// What the builder needs; every field is validated by [`CacheBuilder::build`].
pub struct CacheBuilder {
    policy: PolicyConfig,
    admission: Vec<AdmissionConfig>,
    tier: TierKind,
    capacity_bytes: u64,
    block_size: usize,
    shards: usize,
    seed: u64,
    clock: Arc<dyn Clock>,
}

impl CacheBuilder {
    /// A DRAM cache of 64 MiB in 4 KiB blocks, 16 shards, with `policy`.
    pub fn new(policy: PolicyConfig) -> CacheBuilder {
        CacheBuilder {
            policy,
            admission: Vec::new(),
            tier: TierKind::Dram,
            capacity_bytes: 64 << 20,
            block_size: 4096,
            shards: 16,
            seed: 0,
            clock: Arc::new(MonotonicClock::default()),
        }
    }

    pub fn tier(mut self, tier: TierKind) -> Self {
        self.tier = tier;
        self
    }

    /// Bytes of values the tier holds (headers come on top).
    pub fn capacity_bytes(mut self, bytes: u64) -> Self {
        self.capacity_bytes = bytes;
        self
    }

    pub fn block_size(mut self, bytes: usize) -> Self {
        self.block_size = bytes;
        self
    }

    pub fn shards(mut self, shards: usize) -> Self {
        self.shards = shards;
        self
    }

    pub fn admission(mut self, filters: Vec<AdmissionConfig>) -> Self {
        self.admission = filters;
        self
    }

    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }

    pub fn clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    fn validate(&self) -> Result<u64, EngineError> {
        let b = self.block_size;
        if !(BLOCK_SIZE_MIN..=BLOCK_SIZE_MAX as usize).contains(&b)
            || !b.is_multiple_of(BLOCK_SIZE_MIN)
        {
            let reason =
                format!("{b} must be a multiple of {BLOCK_SIZE_MIN} up to {BLOCK_SIZE_MAX}");
            return Err(EngineError::config("block_size", reason));
        }
        if !self.shards.is_power_of_two() || self.shards > SHARDS_MAX {
            let reason = format!("{} must be a power of two up to {SHARDS_MAX}", self.shards);
            return Err(EngineError::config("shards", reason));
        }
        if self.policy.needs_future() {
            let reason =
                format!("{} reads the future and runs only in the simulator", self.policy.name());
            return Err(EngineError::config("policy", reason));
        }
        let per_shard = self.capacity_bytes / b as u64 / self.shards as u64;
        if per_shard == 0 {
            let reason = format!(
                "{} bytes do not hold one {b}-byte block for each of {} shards",
                self.capacity_bytes, self.shards
            );
            return Err(EngineError::config("capacity_bytes", reason));
        }
        Ok(per_shard)
    }

    pub fn build(self) -> Result<Cache, EngineError> {
        let per_shard = self.validate()?;
        let medium = Medium::open(
            &self.tier,
            per_shard * self.shards as u64,
            HEADER_BYTES + self.block_size,
        )?;
        let mut shards = Vec::with_capacity(self.shards);
        for i in 0..self.shards as u64 {
            let capacity = Capacity::objects(per_shard);
            let seed = self.seed ^ i.wrapping_mul(0x9E37_79B9_7F4A_7C15);
            let policy = AnyPolicy::from_config(&self.policy, capacity, &self.admission, seed)?;
            let region = medium.region(i * per_shard, per_shard);
            shards.push(Mutex::new(Shard::new(policy, region)));
        }
        Ok(Cache {
            shards: shards.into_boxed_slice(),
            shard_bits: self.shards.trailing_zeros(),
            block_size: self.block_size,
            clock: self.clock,
            _medium: medium,
        })
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Slot {
    Valid { slot: u32 },
    Filling { slot: u32, load: u64 },
}

impl Slot {
    fn index(self) -> u32 {
        match self {
            Slot::Valid { slot } | Slot::Filling { slot, .. } => slot,
        }
    }
}

struct Shard {
    policy: AnyPolicy,
    decision: Decision,
    slots: KeyMap<Slot>,
    free: Vec<u32>,
    region: Region,
    loads: u64,
    stats: Stats,
}

/// What a read did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReadOutcome {
    /// Served from the cache.
    pub hit: bool,
    /// Bytes of the value (copied into the buffer up to its length).
    pub len: usize,
}

/// What a write did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PutOutcome {
    /// The key was resident when the write arrived.
    pub hit: bool,
    /// The value is now in the cache.
    pub cached: bool,
}

impl Shard {
    fn new(policy: AnyPolicy, region: Region) -> Shard {
        let free = (0..region.slots() as u32).rev().collect();
        Shard {
            policy,
            decision: Decision::new(),
            slots: KeyMap::default(),
            free,
            region,
            loads: 0,
            stats: Stats::default(),
        }
    }

    fn decide(&mut self, req: &Request) {
        self.decision.clear();
        self.policy.decide(req, &mut self.decision);
    }

    fn release(&mut self, key: Key) {
        let entry = self.slots.remove(&key).expect("the policy drops only resident keys");
        self.free.push(entry.index());
    }

    /// Applies the decision in `self.decision`. `value` is the data of a write; a read-through
    /// miss has none yet, and its insert reserves the slot for the load returned.
    fn apply(&mut self, key: Key, value: Option<&[u8]>) -> Result<Option<u64>, EngineError> {
        let mut load = None;
        for i in 0..self.decision.actions.len() {
            match self.decision.actions[i] {
                Action::Evict { key, .. } => {
                    self.release(key);
                    self.stats.evictions += 1;
                }
                Action::Invalidate { key, .. } => {
                    self.release(key);
                    self.stats.invalidations += 1;
                }
                Action::Insert { key: k, .. } => {
                    debug_assert_eq!(k, key, "single-tier policies insert the requested key");
                    let slot = self.free.pop().expect("the policy is sized to the slots");
                    self.stats.inserts += 1;
                    let entry = match value {
                        Some(data) => self.store(slot, key, data)?,
                        None => {
                            self.loads += 1;
                            load = Some(self.loads);
                            Slot::Filling { slot, load: self.loads }
                        }
                    };
                    self.slots.insert(key, entry);
                }
                Action::Update { key: k, .. } => {
                    if let Some(data) = value {
                        let slot = self.slots[&k].index();
                        let entry = self.store(slot, k, data)?;
                        self.slots.insert(k, entry);
                        self.stats.updates += 1;
                    }
                }
                Action::Reject { reason, .. } => self.stats.rejections[reason.index()] += 1,
                action @ (Action::Move { .. } | Action::WriteBack { .. }) => {
                    unreachable!("a single-tier cache got {action:?}")
                }
            }
        }
        Ok(load)
    }

    fn store(&mut self, slot: u32, key: Key, data: &[u8]) -> Result<Slot, EngineError> {
        self.region.write(slot, key, data)?;
        self.stats.bytes_written += data.len() as u64;
        Ok(Slot::Valid { slot })
    }

    /// Copies a resident key's value out; a bad block is dropped (a `Delete` decision keeps the
    /// policy in step) and reported as a miss.
    fn copy_out(&mut self, key: Key, buf: &mut [u8], now_us: u64) -> Option<usize> {
        let slot = match self.slots.get(&key) {
            Some(Slot::Valid { slot }) => *slot,
            Some(Slot::Filling { .. }) => {
                self.stats.fill_misses += 1;
                return None;
            }
            None => unreachable!("the policy reported a hit on key {key} with no slot"),
        };
        match self.region.read(slot, key, buf) {
            Ok(len) => {
                self.stats.bytes_read += len as u64;
                Some(len)
            }
            Err(fault) => {
                match fault {
                    ReadFault::Corrupt(_) => self.stats.checksum_failures += 1,
                    ReadFault::Io(_) => self.stats.io_errors += 1,
                };
                self.decide(&Request::new(now_us, key, 0, Op::Delete));
                self.apply(key, None).expect("dropping a block does no I/O");
                None
            }
        }
    }
}

/// A sharded, single-tier cache of fixed-size blocks.
pub struct Cache {
    shards: Box<[Mutex<Shard>]>,
    shard_bits: u32,
    block_size: usize,
    clock: Arc<dyn Clock>,
    _medium: Medium,
}

impl Cache {
    pub fn block_size(&self) -> usize {
        self.block_size
    }

    fn shard(&self, key: Key) -> MutexGuard<'_, Shard> {
        let mixed = (key ^ (key >> 29)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        let index =
            if self.shard_bits == 0 { 0 } else { (mixed >> (64 - self.shard_bits)) as usize };
        // A panic while holding a shard lock is a bug that already failed loudly; the shard's
        // state is still consistent at every await-free step, so later users may continue.
        self.shards[index].lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn request(&self, key: Key, op: Op) -> Request {
        Request::new(self.clock.now_us(), key, self.block_size as u32, op)
    }

    /// Looks `key` up (look-aside): copies its value into `buf` and returns its length on a
    /// hit; a miss admits nothing.
    pub fn get(&self, key: Key, buf: &mut [u8]) -> Option<usize> {
        let req = self.request(key, Op::Lookup);
        let mut shard = self.shard(key);
        shard.decide(&req);
        // A lookup inserts nothing, but periodic work (a sweep) may have evicted.
        shard.apply(key, None).expect("a lookup's decision does no tier I/O");
        self.read_decided(&mut shard, &req, buf)
    }

    fn read_decided(&self, shard: &mut Shard, req: &Request, buf: &mut [u8]) -> Option<usize> {
        shard.stats.lookups += 1;
        let served = match shard.decision.hit {
            Some(_) => shard.copy_out(req.key, buf, req.time_us),
            None => None,
        };
        if served.is_some() {
            shard.stats.hits += 1;
        } else {
            shard.stats.misses += 1;
        }
        served
    }

    /// Reads `key` through the cache: a hit is copied into `buf`; on a miss `load` fills `buf`
    /// from the backing store (with the shard unlocked) and returns the length, and the value is
    /// cached if the policy admits it.
    pub fn read_through(
        &self,
        key: Key,
        buf: &mut [u8],
        load: impl FnOnce(&mut [u8]) -> io::Result<usize>,
    ) -> Result<ReadOutcome, EngineError> {
        let req = self.request(key, Op::Read);
        let reserved = {
            let mut shard = self.shard(key);
            shard.decide(&req);
            let reserved = shard.apply(key, None)?;
            if let Some(len) = self.read_decided(&mut shard, &req, buf) {
                return Ok(ReadOutcome { hit: true, len });
            }
            reserved
        };
        let loaded = load(buf);
        let mut shard = self.shard(key);
        let filling = |shard: &Shard| {
            reserved.is_some_and(|load| {
                matches!(shard.slots.get(&key), Some(Slot::Filling { load: l, .. }) if *l == load)
            })
        };
        match loaded {
            Ok(len) => {
                let len = len.min(buf.len()).min(self.block_size);
                if filling(&shard) {
                    let slot = shard.slots[&key].index();
                    let entry = shard.store(slot, key, &buf[..len])?;
                    shard.slots.insert(key, entry);
                }
                Ok(ReadOutcome { hit: false, len })
            }
            Err(source) => {
                if filling(&shard) {
                    shard.decide(&self.request(key, Op::Delete));
                    shard.apply(key, None)?;
                }
                Err(EngineError::Io {
                    path: "<loader>".into(),
                    action: "loading a missed block failed",
                    source,
                })
            }
        }
    }

    /// Writes `value` for `key` (write-allocate: a missed key is cached if the policy admits it).
    pub fn put(&self, key: Key, value: &[u8]) -> Result<PutOutcome, EngineError> {
        if value.len() > self.block_size {
            return Err(EngineError::TooLarge { len: value.len(), block_size: self.block_size });
        }
        let req = self.request(key, Op::Write);
        let mut shard = self.shard(key);
        shard.decide(&req);
        shard.stats.puts += 1;
        let hit = shard.decision.hit.is_some();
        shard.apply(key, Some(value))?;
        let cached = matches!(shard.slots.get(&key), Some(Slot::Valid { .. }));
        Ok(PutOutcome { hit, cached })
    }

    /// Overwrites `key`'s cached value if it is cached; never admits it (write-around). Decided
    /// as a lookup: a cached key's state moves as on a read hit.
    pub fn update_if_cached(&self, key: Key, value: &[u8]) -> Result<bool, EngineError> {
        if value.len() > self.block_size {
            return Err(EngineError::TooLarge { len: value.len(), block_size: self.block_size });
        }
        let req = self.request(key, Op::Lookup);
        let mut shard = self.shard(key);
        shard.decide(&req);
        shard.apply(key, None)?;
        shard.stats.puts += 1;
        if shard.decision.hit.is_none() {
            return Ok(false);
        }
        let slot = shard.slots[&key].index();
        let entry = shard.store(slot, key, value)?;
        shard.slots.insert(key, entry);
        shard.stats.updates += 1;
        Ok(true)
    }

    /// Drops `key` if cached (its data was freed or overwritten elsewhere).
    pub fn invalidate(&self, key: Key) {
        let req = self.request(key, Op::Delete);
        let mut shard = self.shard(key);
        shard.decide(&req);
        shard.apply(key, None).expect("dropping a block does no I/O");
    }

    pub fn stats(&self) -> StatsSnapshot {
        let mut total = Stats::default();
        for shard in self.shards.iter() {
            total.merge(&shard.lock().unwrap_or_else(|p| p.into_inner()).stats);
        }
        total.snapshot()
    }

    /// Blocks resident over all shards, and the slots there are.
    pub fn occupancy(&self) -> (u64, u64) {
        self.shards.iter().fold((0, 0), |(used, total), shard| {
            let shard = shard.lock().unwrap_or_else(|p| p.into_inner());
            (used + shard.slots.len() as u64, total + shard.region.slots())
        })
    }
}
