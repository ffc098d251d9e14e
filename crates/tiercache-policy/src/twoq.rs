//! 2Q (Johnson and Shasha, "2Q: A Low Overhead High Performance Buffer Management Replacement
//! Algorithm", VLDB'94), the full version of its section 2: a missed key enters A1in, a FIFO
//! holding `in_ratio` of the cache (the paper's Kin, 25%); a hit there changes nothing. When
//! room is needed and A1in is over Kin, its oldest key leaves the cache and its name goes to
//! A1out, a FIFO of names only (Kout, 50% of the cache); otherwise the least recent key of Am,
//! an LRU of the rest of the cache, is evicted (its name is not kept). A miss on a name in
//! A1out is a key seen again after a while: it enters Am. So one-time keys pass through A1in
//! without disturbing Am, and correlated references (a burst inside A1in) do not count twice.
//!
//! libCacheSim's `TwoQ` (the same defaults) departs from the paper in one place: Am is a cache
//! of its own, capped at the capacity less Kin, and a key entering it evicts Am's least recent
//! key when Am is at that cap even though A1in has room to spare. `cap_am = true` does the
//! same and then agrees with it exactly (`tests/peer_libcachesim.rs`); the paper's rule (the
//! default) lets Am take what A1in leaves. The two differ only once A1in falls below Kin, which
//! it never does on the CloudPhysics trace in `data/` (there they agree exactly; pinned).

use serde::{Deserialize, Serialize};
use tiercache_core::{Capacity, Key, RejectReason, Request, Unit};

use crate::error::PolicyError;
use crate::frame::{Eviction, Sink};
use crate::index::KeyIndex;
use crate::list::{Arena, List};
use crate::queue::expected_objects;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TwoQConfig {
    /// A1in's share of the capacity (the paper's Kin).
    pub in_ratio: f64,
    /// How many names A1out keeps, as a share of the capacity (the paper's Kout).
    pub out_ratio: f64,
    /// Am is capped at the capacity less Kin and evicts within itself (libCacheSim).
    pub cap_am: bool,
}

impl Default for TwoQConfig {
    fn default() -> TwoQConfig {
        TwoQConfig { in_ratio: 0.25, out_ratio: 0.5, cap_am: false }
    }
}

const IN: u32 = 0;
const MAIN: u32 = 1;
const OUT: u32 = 2;

pub struct TwoQ {
    arena: Arena,
    /// Indexed by a node's `aux`: A1in, Am, A1out.
    lists: [List; 3],
    map: KeyIndex,
    unit: Unit,
    in_target: u64,
    out_target: u64,
    am_cap: Option<u64>,
    seen_again: bool,
}

impl crate::frame::Registered for TwoQ {
    type Config = TwoQConfig;
    const VARIANTS: &'static [&'static str] = &["cap_am=true"];
    const QUIET_HITS: bool = true;

    fn validate(config: &TwoQConfig) -> Result<(), PolicyError> {
        if !(config.in_ratio > 0.0 && config.in_ratio < 1.0) {
            return Err(PolicyError::bad("2q", "in_ratio", "must be in (0, 1)"));
        }
        if !(0.0..=4.0).contains(&config.out_ratio) {
            return Err(PolicyError::bad("2q", "out_ratio", "must be in [0, 4]"));
        }
        Ok(())
    }

    fn build(config: &TwoQConfig, capacity: Capacity) -> Result<TwoQ, PolicyError> {
        let expected = expected_objects(capacity).min(1 << 24);
        let in_target = (capacity.amount as f64 * config.in_ratio) as u64;
        Ok(TwoQ {
            arena: Arena::with_capacity(expected * 2),
            lists: [List::default(); 3],
            map: KeyIndex::with_capacity(expected * 2),
            unit: capacity.unit,
            in_target,
            out_target: (capacity.amount as f64 * config.out_ratio) as u64,
            am_cap: config.cap_am.then(|| capacity.amount - in_target),
            seen_again: false,
        })
    }
}

impl TwoQ {
    fn forget(&mut self, node: u32) -> (Key, u32) {
        let n = self.arena.take(&mut self.lists, node);
        self.map.remove(n.key);
        (n.key, n.size)
    }

    fn evict_main(&mut self) -> Option<(Key, u32)> {
        let tail = self.arena.back(&self.lists[MAIN as usize])?;
        Some(self.forget(tail))
    }

    /// A1in's oldest key leaves the cache; its name goes to A1out.
    fn evict_in(&mut self) -> Option<(Key, u32)> {
        let node = self.arena.pop_back(&mut self.lists[IN as usize])?;
        let n = *self.arena.get(node);
        if self.unit.charge(n.size) > self.out_target {
            self.arena.release(node);
            self.map.remove(n.key);
            return Some((n.key, n.size));
        }
        self.arena.get_mut(node).aux = OUT;
        self.arena.push_front(&mut self.lists[OUT as usize], node);
        while self.lists[OUT as usize].charge(self.unit) > self.out_target {
            let oldest = self.arena.back(&self.lists[OUT as usize]).expect("A1out over its size");
            self.forget(oldest);
        }
        Some((n.key, n.size))
    }
}

impl Eviction for TwoQ {
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
        match n.aux {
            OUT => return None,
            MAIN => self.arena.move_to_front(&mut self.lists[MAIN as usize], node),
            _ => {}
        }
        Some(n.size)
    }

    fn admit(&mut self, req: &Request, _needs_room: bool) -> Result<(), RejectReason> {
        if self.unit.charge(req.size) > self.in_target {
            return Err(RejectReason::TooLarge);
        }
        Ok(())
    }

    fn prepare_insert(&mut self, req: &Request, sink: &mut Sink) {
        self.seen_again = false;
        if let Some(node) = self.map.get(req.key) {
            debug_assert_eq!(self.arena.get(node).aux, OUT);
            self.forget(node);
            self.seen_again = true;
            if let Some(cap) = self.am_cap {
                let charge = self.unit.charge(req.size);
                while self.lists[MAIN as usize].charge(self.unit) + charge > cap {
                    let Some((key, size)) = self.evict_main() else { break };
                    sink.evicted(key, size);
                }
            }
        }
    }

    fn evict(&mut self, _incoming: &Request) -> Option<(Key, u32)> {
        if self.lists[IN as usize].charge(self.unit) > self.in_target {
            return self.evict_in();
        }
        self.evict_main().or_else(|| self.evict_in())
    }

    fn insert(&mut self, req: &Request) {
        let list = if std::mem::take(&mut self.seen_again) { MAIN } else { IN };
        let node = self.arena.alloc(req.key, req.size, list);
        self.arena.push_front(&mut self.lists[list as usize], node);
        self.map.insert(req.key, node);
    }

    fn remove(&mut self, key: Key) -> Option<u32> {
        let node = self.map.get(key)?;
        let resident = self.arena.get(node).aux != OUT;
        let (_, size) = self.forget(node);
        resident.then_some(size)
    }

    fn used(&self) -> u64 {
        self.lists[IN as usize].charge(self.unit) + self.lists[MAIN as usize].charge(self.unit)
    }

    fn resident(&self) -> u64 {
        self.lists[IN as usize].len + self.lists[MAIN as usize].len
    }

    fn label(&self) -> String {
        "2q".into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::Registered;

    fn read(key: Key) -> Request {
        Request::read(key, 1)
    }

    fn keys(q: &TwoQ, list: u32) -> Vec<Key> {
        q.arena.iter(&q.lists[list as usize]).map(|n| n.key).collect()
    }

    /// The paper's rules on an 8-key cache (Kin 2, Kout 4): a hit in A1in changes nothing, a
    /// key leaving A1in leaves its name in A1out, a miss on that name enters Am, and Am is
    /// evicted only while A1in is within Kin.
    #[test]
    fn a_key_seen_again_after_a1in_enters_am() {
        let config = TwoQConfig::default();
        let mut q = TwoQ::build(&config, Capacity { amount: 8, unit: Unit::Objects }).unwrap();
        let mut sink_decision = tiercache_core::Decision::default();
        for key in 1..=8 {
            q.insert(&read(key));
        }
        q.access(&read(1));
        assert_eq!(keys(&q, IN), vec![8, 7, 6, 5, 4, 3, 2, 1], "a hit in A1in moves nothing");
        assert_eq!(q.evict(&read(9)), Some((1, 1)));
        assert_eq!(keys(&q, OUT), vec![1]);
        q.insert(&read(9));
        // 1 again: its name is in A1out, so it misses and enters Am.
        assert_eq!(q.access(&read(1)), None);
        q.prepare_insert(&read(1), &mut Sink::new(&mut sink_decision, tiercache_core::TierId(0)));
        assert_eq!(q.evict(&read(1)), Some((2, 1)));
        q.insert(&read(1));
        assert_eq!(keys(&q, MAIN), vec![1]);
        assert_eq!(keys(&q, OUT), vec![2]);
        // Fill A1in down to Kin by evicting it; then Am's LRU key is the one to go.
        for key in 10..=15 {
            q.evict(&read(key));
            q.insert(&read(key));
        }
        assert_eq!(q.lists[IN as usize].len, 7);
        while q.lists[IN as usize].len > 2 {
            q.evict(&read(99)).unwrap();
        }
        assert_eq!(q.evict(&read(99)), Some((1, 1)), "A1in within Kin: Am's LRU goes");
        assert_eq!(keys(&q, OUT).len(), 4, "A1out keeps Kout names");
    }
}
