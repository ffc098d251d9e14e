//! Segmented LRU (Karedla, Love and Wherry, "Caching Strategies to Improve Disk System
//! Performance", IEEE Computer 27(3), 1994): the cache is cut into LRU segments. A missed key
//! enters the lowest (probationary) segment; a hit moves a key one segment up (to the head of
//! the top one if it is there already); a segment over its share passes its least recent key
//! down to the head of the segment below; the cache evicts from the lowest non-empty segment's
//! tail. So a key must be hit once per segment to climb, and one scan cannot flush the keys
//! that did.
//!
//! The paper has two segments, a protected one of fixed size and a probationary one taking the
//! rest of the cache; `segments` generalises it (default 4, each upper segment a quarter of the
//! capacity, libCacheSim's `SLRU` default, so the lowest takes what the upper ones leave). Hits
//! never evict: a cascade of demotions stops in the lowest segment, which has no share of its
//! own.
//!
//! libCacheSim's `SLRU` departs from the paper in one place: the lowest segment has a share too,
//! and a missed key enters the lowest segment with room for it, so while the cache fills, new
//! keys go straight into the upper segments as if they had been hit. `fill_first_room = true`
//! does the same and then agrees with it exactly in objects (`tests/peer_libcachesim.rs`); the
//! paper's rule (the default) differs by the points pinned there. (In bytes, libCacheSim also
//! evicts when a hit's demotions overfill its lowest segment; here hits stay quiet.)

use serde::{Deserialize, Serialize};
use tiercache_core::{Capacity, Key, Request, Unit};

use crate::error::PolicyError;
use crate::frame::Eviction;
use crate::index::KeyIndex;
use crate::list::{Arena, List};
use crate::queue::expected_objects;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SlruConfig {
    /// The number of segments (2 to 16): the paper's two, libCacheSim's four.
    pub segments: u32,
    /// A missed key enters the lowest segment with room (libCacheSim), not the lowest one.
    pub fill_first_room: bool,
}

impl Default for SlruConfig {
    fn default() -> SlruConfig {
        SlruConfig { segments: 4, fill_first_room: false }
    }
}

pub struct Slru {
    arena: Arena,
    /// Segment 0 is the probationary one; a node's `aux` is its segment.
    segments: Vec<List>,
    map: KeyIndex,
    unit: Unit,
    /// Each segment's share of the capacity (the lowest one's matters only with
    /// `fill_first_room`).
    share: u64,
    fill_first_room: bool,
}

impl crate::frame::Registered for Slru {
    type Config = SlruConfig;
    const VARIANTS: &'static [&'static str] = &["segments=2", "fill_first_room=true"];
    const QUIET_HITS: bool = true;

    fn validate(config: &SlruConfig) -> Result<(), PolicyError> {
        if !(2..=16).contains(&config.segments) {
            let why = format!("must be 2 to 16, got {}", config.segments);
            return Err(PolicyError::bad("slru", "segments", why));
        }
        Ok(())
    }

    fn build(config: &SlruConfig, capacity: Capacity) -> Result<Slru, PolicyError> {
        let expected = expected_objects(capacity).min(1 << 24);
        Ok(Slru {
            arena: Arena::with_capacity(expected),
            segments: vec![List::default(); config.segments as usize],
            map: KeyIndex::with_capacity(expected),
            unit: capacity.unit,
            share: capacity.amount / config.segments as u64,
            fill_first_room: config.fill_first_room,
        })
    }
}

impl Slru {
    fn over(&self, segment: usize) -> bool {
        segment > 0 && self.segments[segment].charge(self.unit) > self.share
    }

    /// Brings `segment` back within its share, each key it passes down settling the segment
    /// below first.
    fn settle(&mut self, segment: usize) {
        while self.over(segment) {
            let tail = self.arena.back(&self.segments[segment]).expect("an overfull segment");
            self.arena.relink(&mut self.segments, tail, segment as u32 - 1);
            self.settle(segment - 1);
        }
    }

    fn forget(&mut self, node: u32) -> (Key, u32) {
        let n = self.arena.take(&mut self.segments, node);
        self.map.remove(n.key);
        (n.key, n.size)
    }
}

impl Eviction for Slru {
    fn peek(&self, key: Key) -> Option<u32> {
        self.map.get(key).map(|node| self.arena.get(node).size)
    }

    #[inline]
    fn prefetch(&self, key: Key) {
        self.map.prefetch(key);
    }

    fn access(&mut self, req: &Request) -> Option<u32> {
        let node = self.map.get(req.key)?;
        let n = *self.arena.get(node);
        let segment = n.aux as usize;
        let top = self.segments.len() - 1;
        if segment == top {
            self.arena.move_to_front(&mut self.segments[top], node);
        } else {
            self.arena.relink(&mut self.segments, node, segment as u32 + 1);
            self.settle(segment + 1);
        }
        Some(n.size)
    }

    fn evict(&mut self, _incoming: &Request) -> Option<(Key, u32)> {
        let segment = self.segments.iter().position(|s| !s.is_empty())?;
        let tail = self.arena.back(&self.segments[segment])?;
        Some(self.forget(tail))
    }

    fn insert(&mut self, req: &Request) {
        let charge = self.unit.charge(req.size);
        let segment = if self.fill_first_room {
            let has_room = |s: &List| s.charge(self.unit) + charge <= self.share;
            self.segments.iter().position(has_room).unwrap_or(0)
        } else {
            0
        };
        let node = self.arena.alloc(req.key, req.size, segment as u32);
        self.arena.push_front(&mut self.segments[segment], node);
        self.map.insert(req.key, node);
    }

    fn remove(&mut self, key: Key) -> Option<u32> {
        let node = self.map.get(key)?;
        Some(self.forget(node).1)
    }

    fn used(&self) -> u64 {
        self.segments.iter().map(|s| s.charge(self.unit)).sum()
    }

    fn resident(&self) -> u64 {
        self.segments.iter().map(|s| s.len).sum()
    }

    fn label(&self) -> String {
        "slru".into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::Registered;

    fn read(key: Key) -> Request {
        Request::read(key, 1)
    }

    fn slru(segments: u32, amount: u64) -> Slru {
        let config = SlruConfig { segments, fill_first_room: false };
        Slru::build(&config, Capacity { amount, unit: Unit::Objects }).unwrap()
    }

    fn segment_keys(slru: &Slru, segment: usize) -> Vec<Key> {
        slru.arena.iter(&slru.segments[segment]).map(|n| n.key).collect()
    }

    /// Two segments of a 4-key cache (the paper's protected segment holds 2): a hit promotes,
    /// a full protected segment passes its least recent key down, eviction takes the
    /// probationary tail, so a scan of new keys cannot evict the protected ones.
    #[test]
    fn hits_climb_a_full_segment_passes_its_tail_down_and_scans_leave_protected_keys() {
        let mut slru = slru(2, 4);
        for key in 1..=4 {
            slru.insert(&read(key));
        }
        assert_eq!(segment_keys(&slru, 0), vec![4, 3, 2, 1]);
        for key in [1, 2, 3] {
            slru.access(&read(key));
        }
        // 3 pushed the protected segment over its 2: its least recent key, 1, came down.
        assert_eq!(segment_keys(&slru, 1), vec![3, 2]);
        assert_eq!(segment_keys(&slru, 0), vec![1, 4]);
        for key in 10..20 {
            let victim = slru.evict(&read(key)).unwrap().0;
            assert!(![2, 3].contains(&victim), "a scan evicted protected key {victim}");
            slru.insert(&read(key));
        }
        assert_eq!(segment_keys(&slru, 1), vec![3, 2]);
    }

    #[test]
    fn filling_first_room_puts_new_keys_in_upper_segments_until_full() {
        let config = SlruConfig { segments: 2, fill_first_room: true };
        let mut slru = Slru::build(&config, Capacity { amount: 4, unit: Unit::Objects }).unwrap();
        for key in 1..=4 {
            slru.insert(&read(key));
        }
        assert_eq!(segment_keys(&slru, 0), vec![2, 1]);
        assert_eq!(segment_keys(&slru, 1), vec![4, 3]);
    }

    #[test]
    fn a_segment_count_outside_2_to_16_is_named() {
        let err = Slru::validate(&SlruConfig { segments: 1, ..Default::default() }).unwrap_err();
        assert!(err.to_string().contains("segments"), "{err}");
    }
}
