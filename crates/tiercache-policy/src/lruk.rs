//! LRU-K (O'Neil, O'Neil and Weikum, "The LRU-K Page Replacement Algorithm for Database Disk
//! Buffering", SIGMOD'93): evict the key whose K-th most recent reference is the oldest (the
//! largest backward K-distance). A key referenced fewer than K times has an infinite distance
//! and goes first; among those, the paper leaves the order to a subsidiary policy, here the
//! order they entered the cache (with K = 2 that is LRU among them, since a second reference
//! ranks a key). K = 1 is LRU; K = 2, the paper's recommendation, tells keys referenced again
//! from keys seen once.
//!
//! The paper's two periods are zero here: no correlated-reference period (every reference
//! counts) and no retained-information period (a key's history leaves the cache with it). So
//! does libCacheSim's `LRUK` (K = 2 by default), with which this agrees exactly
//! (`tests/peer_libcachesim.rs`).

use std::collections::{HashMap, VecDeque};

use serde::{Deserialize, Serialize};
use tiercache_core::{Capacity, Key, Request};

use crate::error::PolicyError;
use crate::frame::Eviction;
use crate::queue::expected_objects;
use crate::rank::Ranked;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LruKConfig {
    /// How many references back the distance looks (1 to 8).
    pub k: u32,
}

impl Default for LruKConfig {
    fn default() -> LruKConfig {
        LruKConfig { k: 2 }
    }
}

/// The rank of keys with fewer than K references: below every K-th reference time, so they
/// go first, in the order they were ranked.
const UNRANKED: u64 = 0;

pub struct LruK {
    ranked: Ranked,
    /// Each resident key's last K reference times, oldest first.
    history: HashMap<Key, VecDeque<u64>>,
    k: usize,
    /// The time of the current request (one tick per request).
    now: u64,
}

impl crate::frame::Registered for LruK {
    type Config = LruKConfig;
    const VARIANTS: &'static [&'static str] = &["k=1", "k=3"];
    const QUIET_HITS: bool = true;
    const COUNTS_HITS: bool = true;

    fn validate(config: &LruKConfig) -> Result<(), PolicyError> {
        if !(1..=8).contains(&config.k) {
            return Err(PolicyError::bad(
                "lru-k",
                "k",
                format!("must be 1 to 8, got {}", config.k),
            ));
        }
        Ok(())
    }

    fn build(config: &LruKConfig, capacity: Capacity) -> Result<LruK, PolicyError> {
        let expected = expected_objects(capacity).min(1 << 24);
        Ok(LruK {
            ranked: Ranked::new(capacity.unit, expected),
            history: HashMap::with_capacity(expected),
            k: config.k as usize,
            now: 0,
        })
    }
}

impl LruK {
    /// The rank of a key with this history: one past its K-th most recent reference time.
    fn rank(&self, history: &VecDeque<u64>) -> u64 {
        if history.len() < self.k {
            UNRANKED
        } else {
            history[0] + 1
        }
    }
}

impl Eviction for LruK {
    fn peek(&self, key: Key) -> Option<u32> {
        self.ranked.get(key).map(|e| e.size)
    }

    #[inline]
    fn prefetch(&self, key: Key) {
        self.ranked.prefetch(key);
    }

    fn access(&mut self, req: &Request) -> Option<u32> {
        self.now += 1;
        let entry = *self.ranked.get(req.key)?;
        let mut history = self.history.remove(&req.key).expect("a resident key's history");
        history.push_back(self.now);
        if history.len() > self.k {
            history.pop_front();
        }
        let rank = self.rank(&history);
        // A key still short of K references keeps its place among those.
        if rank != UNRANKED {
            self.ranked.rerank(req.key, entry.count + 1, rank);
        }
        self.history.insert(req.key, history);
        Some(entry.size)
    }

    fn evict(&mut self, _incoming: &Request) -> Option<(Key, u32)> {
        let entry = self.ranked.pop_lowest()?;
        self.history.remove(&entry.key);
        Some((entry.key, entry.size))
    }

    fn insert(&mut self, req: &Request) {
        let history = VecDeque::from([self.now]);
        self.ranked.insert(req.key, req.size, 1, self.rank(&history));
        self.history.insert(req.key, history);
    }

    fn remove(&mut self, key: Key) -> Option<u32> {
        self.history.remove(&key);
        self.ranked.remove(key).map(|e| e.size)
    }

    fn used(&self) -> u64 {
        self.ranked.used()
    }

    fn resident(&self) -> u64 {
        self.ranked.len()
    }

    fn label(&self) -> String {
        "lru-k".into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::Registered;
    use tiercache_core::Unit;

    fn read(key: Key) -> Request {
        Request::read(key, 1)
    }

    /// LRU-2: a key seen once goes before any key seen twice, however recent; among keys seen
    /// twice, the one whose second-to-last reference is oldest goes first.
    #[test]
    fn keys_seen_once_go_first_then_the_oldest_second_to_last_reference() {
        let config = LruKConfig { k: 2 };
        let mut lru2 = LruK::build(&config, Capacity { amount: 8, unit: Unit::Objects }).unwrap();
        let request = |lru2: &mut LruK, key| {
            if lru2.access(&read(key)).is_none() {
                lru2.insert(&read(key));
            }
        };
        for key in [1, 2, 1, 3, 2, 4] {
            request(&mut lru2, key); // times 1..=6
        }
        // 1: refs at 1, 3; 2: at 2, 5; 3 and 4 seen once.
        assert_eq!(lru2.evict(&read(9)).unwrap().0, 3);
        assert_eq!(lru2.evict(&read(9)).unwrap().0, 4);
        request(&mut lru2, 1); // 1: refs at 3, 7 — its K-th is now after 2's (2)
        assert_eq!(lru2.evict(&read(9)).unwrap().0, 2);
        assert_eq!(lru2.evict(&read(9)).unwrap().0, 1);
    }

    #[test]
    fn k_outside_1_to_8_is_named() {
        let err = LruK::validate(&LruKConfig { k: 0 }).unwrap_err().to_string();
        assert!(err.contains("lru-k") && err.contains('k'), "{err}");
    }
}
