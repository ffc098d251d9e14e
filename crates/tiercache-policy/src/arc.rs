//! ARC, the Adaptive Replacement Cache of Megiddo and Modha ("ARC: A Self-Tuning, Low Overhead
//! Replacement Cache", FAST'03, Figure 4). Two resident lists, T1 (seen once recently) and T2
//! (seen at least twice), and two ghost lists of recently evicted keys, B1 and B2. A ghost hit in
//! B1 grows the target size `p` of T1, one in B2 shrinks it; REPLACE evicts from T1 or T2 toward
//! that target. `p` is fractional, as in the paper: `p += max(|B2| / |B1|, 1)`.
//!
//! Sizes: with a capacity in objects this is the paper's algorithm exactly (the ARC golden tests
//! reproduce its Table VII). With a capacity in bytes every `|X|` is the bytes of list X and the
//! adaptation steps are scaled by the object's size, the usual generalisation.
//!
//! Invariants: `|T1| + |T2| <= c`; `|T1| + |B1| <= c` and the four lists together hold at most
//! `2c` after each insert of a new key.

use tiercache_core::{Capacity, Key, Request, Unit};

use crate::index::KeyIndex;

use crate::frame::{Eviction, Sink};
use crate::list::{Arena, List};
use crate::queue::expected_objects;

const T1: usize = 0;
const T2: usize = 1;
const B1: usize = 2;
const B2: usize = 3;

pub struct Arc {
    arena: Arena,
    lists: [List; 4],
    map: KeyIndex,
    unit: Unit,
    c: u64,
    p: f64,
    /// The missed key being inserted was found in a ghost list (it goes to T2).
    ghost_hit: Option<usize>,
}

impl crate::frame::Registered for Arc {
    type Config = ();
    const QUIET_HITS: bool = true;

    fn build(_: &(), capacity: Capacity) -> Result<Arc, crate::error::PolicyError> {
        Ok(Arc::new(capacity))
    }
}

impl Arc {
    pub fn new(capacity: Capacity) -> Arc {
        let expected = expected_objects(capacity).min(1 << 24);
        let map = KeyIndex::with_capacity(expected * 2);
        Arc {
            arena: Arena::with_capacity(expected * 2),
            lists: [List::default(); 4],
            map,
            unit: capacity.unit,
            c: capacity.amount,
            p: 0.0,
            ghost_hit: None,
        }
    }

    /// The current target size of T1, in capacity units.
    pub fn target_t1(&self) -> f64 {
        self.p
    }

    #[inline]
    fn charge(&self, list: usize) -> u64 {
        self.lists[list].charge(self.unit)
    }

    fn size_charge(&self, size: u32) -> u64 {
        match self.unit {
            Unit::Bytes => size as u64,
            Unit::Objects => 1,
        }
    }

    /// Moves `node` from list `from` to the head of list `to`.
    #[inline]
    fn relink(&mut self, node: u32, from: usize, to: usize) {
        self.arena.unlink(&mut self.lists[from], node);
        self.arena.push_front(&mut self.lists[to], node);
        self.arena.get_mut(node).aux = to as u32;
    }

    fn drop_oldest(&mut self, list: usize) -> Option<(Key, u32)> {
        let node = self.arena.pop_back(&mut self.lists[list])?;
        let (key, size) = (self.arena.get(node).key, self.arena.get(node).size);
        self.map.remove(key);
        self.arena.release(node);
        Some((key, size))
    }

    fn forget(&mut self, key: Key) -> Option<(usize, u32)> {
        let node = self.map.remove(key)?;
        let list = self.arena.get(node).aux as usize;
        let size = self.arena.get(node).size;
        self.arena.unlink(&mut self.lists[list], node);
        self.arena.release(node);
        Some((list, size))
    }

    /// Case IV of the paper: a key in no list. Trims the ghosts so the directory stays within
    /// its bounds; when T1 alone fills the cache, its LRU is dropped without a ghost.
    fn make_directory_room(&mut self, charge: u64, sink: &mut Sink) {
        let l1 = self.charge(T1) + self.charge(B1);
        if l1 + charge > self.c {
            while self.charge(T1) + self.charge(B1) + charge > self.c
                && !self.lists[B1].is_empty()
                && self.charge(T1) + charge <= self.c
            {
                self.drop_oldest(B1);
            }
            while self.charge(T1) + charge > self.c {
                let Some((key, size)) = self.drop_oldest(T1) else { break };
                sink.evicted(key, size);
            }
        } else {
            let mut total: u64 = (0..4).map(|l| self.charge(l)).sum();
            while total + charge > 2 * self.c && !self.lists[B2].is_empty() {
                self.drop_oldest(B2);
                total = (0..4).map(|l| self.charge(l)).sum();
            }
        }
    }
}

impl Eviction for Arc {
    fn peek(&self, key: Key) -> Option<u32> {
        let node = self.arena.get(self.map.get(key)?);
        (node.aux as usize == T1 || node.aux as usize == T2).then_some(node.size)
    }

    #[inline]
    fn prefetch(&self, key: Key) {
        self.map.prefetch(key);
    }

    #[inline]
    fn access(&mut self, req: &Request) -> Option<u32> {
        let node = self.map.get(req.key)?;
        let list = self.arena.get(node).aux as usize;
        if list == T1 || list == T2 {
            self.relink(node, list, T2);
            Some(self.arena.get(node).size)
        } else {
            None
        }
    }

    fn prepare_insert(&mut self, req: &Request, sink: &mut Sink) {
        let charge = self.size_charge(req.size) as f64;
        self.ghost_hit = None;
        match self.map.get(req.key).map(|n| self.arena.get(n).aux as usize) {
            Some(B1) => {
                let ratio = self.charge(B2) as f64 / self.charge(B1) as f64;
                self.p = (self.p + ratio.max(1.0) * charge).min(self.c as f64);
                self.forget(req.key);
                self.ghost_hit = Some(B1);
            }
            Some(B2) => {
                let ratio = self.charge(B1) as f64 / self.charge(B2) as f64;
                self.p = (self.p - ratio.max(1.0) * charge).max(0.0);
                self.forget(req.key);
                self.ghost_hit = Some(B2);
            }
            _ => self.make_directory_room(self.size_charge(req.size), sink),
        }
    }

    /// REPLACE(x, p): evict from T1 if it exceeds its target (or meets it and x was in B2),
    /// else from T2; the victim's key becomes a ghost.
    fn evict(&mut self, _incoming: &Request) -> Option<(Key, u32)> {
        let t1 = self.charge(T1);
        let from_b2 = self.ghost_hit == Some(B2);
        let take_t1 = !self.lists[T1].is_empty()
            && ((from_b2 && t1 as f64 == self.p)
                || t1 as f64 > self.p
                || self.lists[T2].is_empty());
        let (from, to) = if take_t1 { (T1, B1) } else { (T2, B2) };
        let node = self.arena.back(&self.lists[from])?;
        self.relink(node, from, to);
        let victim = self.arena.get(node);
        Some((victim.key, victim.size))
    }

    fn insert(&mut self, req: &Request) {
        let list = if self.ghost_hit.take().is_some() { T2 } else { T1 };
        let node = self.arena.alloc(req.key, req.size, list as u32);
        self.arena.push_front(&mut self.lists[list], node);
        self.map.insert(req.key, node);
    }

    fn remove(&mut self, key: Key) -> Option<u32> {
        let node = self.map.get(key)?;
        let list = self.arena.get(node).aux as usize;
        let (_, size) = self.forget(key)?;
        (list == T1 || list == T2).then_some(size)
    }

    fn used(&self) -> u64 {
        self.charge(T1) + self.charge(T2)
    }

    fn resident(&self) -> u64 {
        self.lists[T1].len + self.lists[T2].len
    }

    fn label(&self) -> String {
        "arc".into()
    }

    fn knobs(&self) -> Vec<(&'static str, f64)> {
        vec![("arc_target_t1", self.p)]
    }
}
