//! The engine's sharding, as a policy: `2^bits` independent stacks, each deciding over the keys
//! of its shard with a `1/shards` share of every tier. The engine splits its keys so
//! (`tiercache_core::shard_index`) to run shards under separate locks; each shard's LRU sees
//! only its own keys, and NVCache's overhead ratio is counted per shard. A simulator that runs
//! one stack over the whole cache decides differently (one LRU of 8,192 blocks is not 32 LRUs of
//! 256), so to predict what the engine does, the simulator runs this model of it.
//!
//! A key's shard holds it and decides every request on it; periodic work, measurements, write-
//! backs and syncs go to every shard in turn, as the engine's worker and sync visit each.

use tiercache_core::{shard_index, Capacity, Decision, Interval, Key, Request, TierId};

use crate::policy::Policy;

/// `P` is the stack each shard runs (the registry's `AnyPolicy`).
pub struct Sharded<P> {
    shards: Vec<P>,
    bits: u32,
}

impl<P: Policy> Sharded<P> {
    /// One stack per shard, shard `i` deciding the keys `shard_index` gives `i`. Their number
    /// is a power of two.
    pub fn new(shards: Vec<P>) -> Sharded<P> {
        assert!(shards.len().is_power_of_two(), "shards come in powers of two");
        let bits = shards.len().trailing_zeros();
        Sharded { shards, bits }
    }

    #[inline]
    fn of(&self, key: Key) -> usize {
        shard_index(key, self.bits)
    }
}

impl<P: Policy> Policy for Sharded<P> {
    #[inline]
    fn decide(&mut self, req: &Request, out: &mut Decision) {
        let shard = self.of(req.key);
        self.shards[shard].decide(req, out)
    }

    fn tick(&mut self, now_us: u64, out: &mut Decision) {
        self.shards.iter_mut().for_each(|s| s.tick(now_us, out))
    }

    fn observe(&mut self, interval: &Interval) {
        self.shards.iter_mut().for_each(|s| s.observe(interval))
    }

    #[inline]
    fn prefetch(&self, key: Key) {
        self.shards[self.of(key)].prefetch(key)
    }

    fn restore(
        &mut self,
        key: Key,
        size: u32,
        tier: TierId,
        dirty: bool,
        out: &mut Decision,
    ) -> bool {
        let shard = self.of(key);
        self.shards[shard].restore(key, size, tier, dirty, out)
    }

    fn write_back(&mut self, tier: Option<TierId>, out: &mut Decision) {
        self.shards.iter_mut().for_each(|s| s.write_back(tier, out))
    }

    fn persist(&mut self, tier: TierId, below: Option<TierId>, now_us: u64, out: &mut Decision) {
        self.shards.iter_mut().for_each(|s| s.persist(tier, below, now_us, out))
    }

    fn move_down(&mut self, key: Key, to: TierId, now_us: u64, out: &mut Decision) -> bool {
        let shard = self.of(key);
        self.shards[shard].move_down(key, to, now_us, out)
    }

    fn peek(&self, key: Key) -> Option<(TierId, u32)> {
        self.shards[self.of(key)].peek(key)
    }

    fn tier_count(&self) -> usize {
        self.shards[0].tier_count()
    }

    fn capacity(&self, tier: TierId) -> Capacity {
        let unit = self.shards[0].capacity(tier).unit;
        Capacity { amount: self.shards.iter().map(|s| s.capacity(tier).amount).sum(), unit }
    }

    fn used(&self, tier: TierId) -> u64 {
        self.shards.iter().map(|s| s.used(tier)).sum()
    }

    fn resident(&self, tier: TierId) -> u64 {
        self.shards.iter().map(|s| s.resident(tier)).sum()
    }

    fn label(&self) -> String {
        format!("{} in {} shards", self.shards[0].label(), self.shards.len())
    }

    /// Each knob's mean over the shards (OBP's ratio, an adaptive size: each shard has its own).
    fn knobs(&self) -> Vec<(&'static str, f64)> {
        let mut knobs = self.shards[0].knobs();
        for shard in &self.shards[1..] {
            for ((_, sum), (_, value)) in knobs.iter_mut().zip(shard.knobs()) {
                *sum += value;
            }
        }
        let n = self.shards.len() as f64;
        knobs.iter_mut().for_each(|(_, v)| *v /= n);
        knobs
    }
}
