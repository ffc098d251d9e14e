//! MQ, the Multi-Queue algorithm (Zhou, Philbin and Li, "The Multi-Queue Replacement Algorithm
//! for Second Level Buffer Caches", USENIX ATC'01, section 4): m LRU queues; a key referenced
//! f times lives in queue min(log2 f, m - 1), so keys referenced often sit in higher queues and
//! the cache evicts from the lowest non-empty queue's LRU end. Every key carries an expiry,
//! `lifetime` references after it was last placed; at each reference the least recent key of
//! each queue above the first, if expired, moves down one queue (the paper's Adjust), so keys
//! that stop being referenced sink however often they were used. An evicted key's reference
//! count is remembered in Qout, a FIFO of names only, and restored if it returns.
//!
//! Defaults are the paper's and libCacheSim's `MQ`: 8 queues, a lifetime of 10,000 references,
//! Qout four times the capacity (in the capacity's unit). This agrees with libCacheSim exactly
//! (`tests/peer_libcachesim.rs`).

use serde::{Deserialize, Serialize};
use tiercache_core::{Capacity, Key, Request, Unit};

use crate::error::PolicyError;
use crate::frame::{Eviction, Sink};
use crate::index::KeyIndex;
use crate::list::{Arena, List};
use crate::queue::expected_objects;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MqConfig {
    /// The number of queues, m (1 to 32).
    pub queues: u32,
    /// References a key may go unreferenced before it moves down a queue.
    pub lifetime: u64,
    /// Qout's size as a multiple of the capacity.
    pub out_ratio: f64,
}

impl Default for MqConfig {
    fn default() -> MqConfig {
        MqConfig { queues: 8, lifetime: 10_000, out_ratio: 4.0 }
    }
}

/// A node's `aux` when it is a name in Qout (below it: its queue).
const OUT: u32 = u32::MAX;

#[derive(Clone, Copy, Default)]
struct Meta {
    references: u32,
    expires: u64,
}

pub struct Mq {
    arena: Arena,
    queues: Vec<List>,
    out: List,
    /// Per arena node: its reference count and expiry.
    meta: Vec<Meta>,
    map: KeyIndex,
    unit: Unit,
    lifetime: u64,
    out_target: u64,
    /// References so far (the paper's CurrentTime).
    now: u64,
    /// The reference count Qout remembered for the key being inserted.
    returning: Option<u32>,
}

impl crate::frame::Registered for Mq {
    type Config = MqConfig;
    const VARIANTS: &'static [&'static str] = &["queues=2,lifetime=100"];
    const QUIET_HITS: bool = true;
    const COUNTS_HITS: bool = true;

    fn validate(config: &MqConfig) -> Result<(), PolicyError> {
        if !(1..=32).contains(&config.queues) {
            let why = format!("must be 1 to 32, got {}", config.queues);
            return Err(PolicyError::bad("mq", "queues", why));
        }
        if config.lifetime == 0 {
            return Err(PolicyError::bad("mq", "lifetime", "must be at least 1"));
        }
        if !(0.0..=64.0).contains(&config.out_ratio) {
            return Err(PolicyError::bad("mq", "out_ratio", "must be in [0, 64]"));
        }
        Ok(())
    }

    fn build(config: &MqConfig, capacity: Capacity) -> Result<Mq, PolicyError> {
        let expected = expected_objects(capacity).min(1 << 22);
        Ok(Mq {
            arena: Arena::with_capacity(expected * 2),
            queues: vec![List::default(); config.queues as usize],
            out: List::default(),
            meta: Vec::with_capacity(expected * 2),
            map: KeyIndex::with_capacity(expected * 2),
            unit: capacity.unit,
            lifetime: config.lifetime,
            out_target: (capacity.amount as f64 * config.out_ratio) as u64,
            now: 0,
            returning: None,
        })
    }
}

impl Mq {
    /// QueueNum(f) = min(floor(log2 f), m - 1).
    fn queue_of(&self, references: u32) -> usize {
        (references.max(1).ilog2() as usize).min(self.queues.len() - 1)
    }

    fn meta(&mut self, node: u32) -> &mut Meta {
        let at = node as usize;
        if at >= self.meta.len() {
            self.meta.resize(at + 1, Meta::default());
        }
        &mut self.meta[at]
    }

    /// Links a resident node at the MRU end of the queue its count names, with a new expiry.
    fn place(&mut self, node: u32) {
        let (now, lifetime) = (self.now, self.lifetime);
        let meta = self.meta(node);
        meta.expires = now + lifetime;
        let references = meta.references;
        let queue = self.queue_of(references);
        self.arena.get_mut(node).aux = queue as u32;
        self.arena.push_front(&mut self.queues[queue], node);
    }

    /// The paper's Adjust: a reference passes; each queue's expired LRU key moves down one.
    fn adjust(&mut self) {
        self.now += 1;
        for queue in 1..self.queues.len() {
            let Some(tail) = self.arena.back(&self.queues[queue]) else { continue };
            if self.meta(tail).expires < self.now {
                self.arena.unlink(&mut self.queues[queue], tail);
                self.arena.push_front(&mut self.queues[queue - 1], tail);
                self.arena.get_mut(tail).aux = (queue - 1) as u32;
                let expires = self.now + self.lifetime;
                self.meta(tail).expires = expires;
            }
        }
    }

    fn forget(&mut self, node: u32) -> (Key, u32) {
        let n = *self.arena.get(node);
        let list = if n.aux == OUT { &mut self.out } else { &mut self.queues[n.aux as usize] };
        self.arena.unlink(list, node);
        self.arena.release(node);
        self.map.remove(n.key);
        (n.key, n.size)
    }
}

impl Eviction for Mq {
    fn peek(&self, key: Key) -> Option<u32> {
        let node = self.arena.get(self.map.get(key)?);
        (node.aux != OUT).then_some(node.size)
    }

    #[inline]
    fn prefetch(&self, key: Key) {
        self.map.prefetch(key);
    }

    fn access(&mut self, req: &Request) -> Option<u32> {
        let node = self.map.get(req.key)?;
        let n = *self.arena.get(node);
        if n.aux == OUT {
            return None;
        }
        self.arena.unlink(&mut self.queues[n.aux as usize], node);
        let meta = self.meta(node);
        meta.references = meta.references.saturating_add(1);
        self.place(node);
        self.adjust();
        Some(n.size)
    }

    fn prepare_insert(&mut self, req: &Request, _sink: &mut Sink) {
        self.returning = None;
        if let Some(node) = self.map.get(req.key) {
            debug_assert_eq!(self.arena.get(node).aux, OUT);
            self.returning = Some(self.meta(node).references);
            self.forget(node);
        }
    }

    fn evict(&mut self, _incoming: &Request) -> Option<(Key, u32)> {
        let queue = self.queues.iter().position(|q| !q.is_empty())?;
        let node = self.arena.pop_back(&mut self.queues[queue])?;
        let n = *self.arena.get(node);
        let charge = self.unit.charge(n.size);
        if charge > self.out_target {
            self.arena.release(node);
            self.map.remove(n.key);
            return Some((n.key, n.size));
        }
        while self.out.charge(self.unit) + charge > self.out_target {
            let oldest = self.arena.back(&self.out).expect("Qout over its size");
            self.forget(oldest);
        }
        self.arena.get_mut(node).aux = OUT;
        self.arena.push_front(&mut self.out, node);
        Some((n.key, n.size))
    }

    fn insert(&mut self, req: &Request) {
        let references = self.returning.take().map_or(1, |r| r.saturating_add(1));
        let node = self.arena.alloc(req.key, req.size, 0);
        self.meta(node).references = references;
        self.place(node);
        self.map.insert(req.key, node);
        self.adjust();
    }

    fn remove(&mut self, key: Key) -> Option<u32> {
        let node = self.map.get(key)?;
        let resident = self.arena.get(node).aux != OUT;
        let (_, size) = self.forget(node);
        resident.then_some(size)
    }

    fn used(&self) -> u64 {
        self.queues.iter().map(|q| q.charge(self.unit)).sum()
    }

    fn resident(&self) -> u64 {
        self.queues.iter().map(|q| q.len).sum()
    }

    fn label(&self) -> String {
        "mq".into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::Registered;

    fn read(key: Key) -> Request {
        Request::read(key, 1)
    }

    fn queue_keys(mq: &Mq, queue: usize) -> Vec<Key> {
        mq.arena.iter(&mq.queues[queue]).map(|n| n.key).collect()
    }

    fn request(mq: &mut Mq, key: Key) {
        if mq.access(&read(key)).is_none() {
            let mut decision = tiercache_core::Decision::default();
            mq.prepare_insert(&read(key), &mut Sink::new(&mut decision, tiercache_core::TierId(0)));
            if mq.used() >= 4 {
                mq.evict(&read(key));
            }
            mq.insert(&read(key));
        }
    }

    /// Counts pick the queue (1 → Q0, 2-3 → Q1, 4-7 → Q2); an expired LRU key moves down one
    /// queue per reference; an evicted key's count comes back with it from Qout.
    #[test]
    fn counts_pick_queues_expired_keys_sink_and_qout_remembers() {
        let config = MqConfig { queues: 4, lifetime: 3, out_ratio: 1.0 };
        let mut mq = Mq::build(&config, Capacity { amount: 4, unit: Unit::Objects }).unwrap();
        for key in [1, 1, 1, 1, 2, 2] {
            request(&mut mq, key);
        }
        assert_eq!(queue_keys(&mq, 2), vec![1], "4 references");
        assert_eq!(queue_keys(&mq, 1), vec![2], "2 references");
        for key in [3, 4, 5] {
            request(&mut mq, key);
        }
        // 5 found the cache full and evicted Q0's LRU key, 3. 1, last placed at time 3 (expiry
        // 6), sank at time 7; 2, placed at time 5 (expiry 8), at time 9.
        assert_eq!(mq.peek(3), None);
        assert_eq!(queue_keys(&mq, 1), vec![1]);
        assert_eq!(queue_keys(&mq, 0), vec![2, 5, 4]);
        request(&mut mq, 3); // back from Qout with 1 + 1 references: Q1; 4 evicted
        assert_eq!(mq.peek(4), None);
        assert_eq!(mq.arena.get(mq.map.get(3).unwrap()).aux, 1);
    }
}
