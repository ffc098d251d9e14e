//! LIRS (Jiang and Zhang, "LIRS: An Efficient Low Inter-reference Recency Set Replacement
//! Policy to Improve Buffer Cache Performance", SIGMETRICS'02, section 3.3). A key's
//! inter-reference recency (IRR: how many other keys were referenced between its last two
//! references) decides, not its recency: keys of low IRR hold LIR status and most of the cache
//! (`capacity - Lhirs`); the others, HIR, share `Lhirs` (1% of the cache, the paper's
//! setting) and are the only ones evicted. Two lists carry this:
//!
//! - S, a recency stack of LIR keys, resident HIR keys and the names of HIR keys no longer
//!   resident, pruned so that its bottom is always an LIR key (a key below the oldest LIR key
//!   could never gain LIR status by its next reference);
//! - Q, the resident HIR keys in the order of their last reference; its front is evicted.
//!
//! A hit on an LIR key moves it to the top of S (pruning if it was the bottom). A hit on a
//! resident HIR key in S gives it LIR status, takes it out of Q, and moves the bottom LIR key
//! to the end of Q as HIR (then pruning): its IRR is lower than the demoted key's recency. A
//! hit on a resident HIR key not in S moves it to the top of S and the end of Q, still HIR.
//! On a miss the front of Q is evicted (its name stays in S if it is there); a missed key whose
//! name is in S gains LIR status at once (the bottom LIR key demoted as above); any other
//! enters as HIR at the top of S and the end of Q, or as LIR while the LIR keys fill less than
//! their share (the cold start).
//!
//! The paper leaves the names S may keep unbounded; a bound is needed, and this takes
//! libCacheSim's: while S holds more than twice the capacity, the name that left the cache
//! longest ago is dropped from it. libCacheSim's `LIRS` (the same `Lhirs`) departs from the
//! paper once: a hit on a resident HIR key not in S first demotes the bottom LIR key whenever
//! the LIR keys fill their share (as they do from the cold start on), evicting Q's front to
//! make room for it, so a hit evicts; the LIR keys then hold less than their share, and the
//! next key missed enters as LIR. Elsewhere the two decide alike: on CloudPhysics in objects
//! such hits number 0, 1, 5 and 22 at 500 to 20,000 objects, and the miss counts are equal,
//! equal, 2 apart and 9 apart (`tests/peer_libcachesim.rs` in the command line's crate).
//!
//! Sizes: every charge is in the capacity's unit. A key larger than `Lhirs` is refused (it
//! could never be held as HIR). In bytes, Q may pass `Lhirs` after a hit moved a larger LIR
//! key into it, until the next miss evicts from its front.

use serde::{Deserialize, Serialize};
use tiercache_core::{Capacity, Key, RejectReason, Request, Unit};

use crate::error::PolicyError;
use crate::frame::Eviction;
use crate::index::KeyIndex;
use crate::list::{Arena, List};
use crate::queue::expected_objects;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LirsConfig {
    /// The HIR keys' share of the capacity (the paper's `Lhirs`, 1%; at least one object).
    pub hir_ratio: f64,
    /// How much S may hold, resident or not, as a multiple of the capacity.
    pub stack_ratio: f64,
}

impl Default for LirsConfig {
    fn default() -> LirsConfig {
        LirsConfig { hir_ratio: 0.01, stack_ratio: 2.0 }
    }
}

/// The lists, indexed by a node's `aux`: S, Q, and the names in S of keys no longer resident,
/// newest first (the order in which the bound on S drops them).
const S: u32 = 0;
const Q: u32 = 1;
const GONE: u32 = 2;

const NONE: u32 = u32::MAX;

/// A key's place: its nodes in S, Q and the list of names gone (`NONE` where it has none),
/// and whether it holds LIR status. Resident when LIR or in Q.
#[derive(Clone, Copy)]
struct Entry {
    s: u32,
    q: u32,
    gone: u32,
    lir: bool,
}

pub struct Lirs {
    arena: Arena,
    lists: [List; 3],
    /// Key to its entry in `entries`.
    map: KeyIndex,
    entries: Vec<Entry>,
    free: Vec<u32>,
    unit: Unit,
    lir_limit: u64,
    hir_limit: u64,
    stack_limit: u64,
    /// The LIR keys' charge and count.
    lir_used: u64,
    lir_count: u64,
}

impl crate::frame::Registered for Lirs {
    type Config = LirsConfig;
    const VARIANTS: &'static [&'static str] = &["hir_ratio=0.1"];
    const QUIET_HITS: bool = true;
    /// Every hit moves its key in S, and the key at S's bottom is the one demoted: told only a
    /// key's first hit an epoch, LIRS would demote other keys than its rule names (on
    /// CloudPhysics' object sizes the engine parted from the simulator within 24,000
    /// requests), so it hears every hit.
    const COUNTS_HITS: bool = true;

    fn validate(config: &LirsConfig) -> Result<(), PolicyError> {
        if !(config.hir_ratio > 0.0 && config.hir_ratio < 1.0) {
            return Err(PolicyError::bad("lirs", "hir_ratio", "must be in (0, 1)"));
        }
        if config.stack_ratio.is_nan() || config.stack_ratio < 1.0 {
            return Err(PolicyError::bad("lirs", "stack_ratio", "must be at least 1"));
        }
        Ok(())
    }

    fn build(config: &LirsConfig, capacity: Capacity) -> Result<Lirs, PolicyError> {
        // At least one object's worth; at a capacity that small, no room is left for LIR keys
        // and every key is HIR (as libCacheSim sets it).
        let hir_limit = ((capacity.amount as f64 * config.hir_ratio) as u64).max(1);
        let expected = expected_objects(capacity).min(1 << 24);
        Ok(Lirs {
            arena: Arena::with_capacity(expected * 3),
            lists: [List::default(); 3],
            map: KeyIndex::with_capacity(expected * 2),
            entries: Vec::with_capacity(expected * 2),
            free: Vec::new(),
            unit: capacity.unit,
            lir_limit: capacity.amount.saturating_sub(hir_limit),
            hir_limit,
            stack_limit: (capacity.amount as f64 * config.stack_ratio) as u64,
            lir_used: 0,
            lir_count: 0,
        })
    }
}

impl Lirs {
    fn entry(&self, key: Key) -> Option<(u32, Entry)> {
        let at = self.map.get(key)?;
        Some((at, self.entries[at as usize]))
    }

    fn is_resident(entry: &Entry) -> bool {
        entry.lir || entry.q != NONE
    }

    /// A node for `key` at the top of `list`.
    fn push(&mut self, list: u32, key: Key, size: u32) -> u32 {
        let node = self.arena.alloc(key, size, list);
        self.arena.push_front(&mut self.lists[list as usize], node);
        node
    }

    /// Unlinks and frees `node` (from the list its `aux` names).
    fn drop_node(&mut self, node: u32) {
        if node != NONE {
            self.arena.take(&mut self.lists, node);
        }
    }

    fn new_entry(&mut self, key: Key, entry: Entry) -> u32 {
        let at = match self.free.pop() {
            Some(at) => {
                self.entries[at as usize] = entry;
                at
            }
            None => {
                self.entries.push(entry);
                (self.entries.len() - 1) as u32
            }
        };
        self.map.insert(key, at);
        at
    }

    /// Forgets `key` entirely; its nodes must be dropped already.
    fn free_entry(&mut self, key: Key, at: u32) {
        self.map.remove(key);
        self.free.push(at);
    }

    /// Drops HIR keys and names from the bottom of S until an LIR key is there.
    fn prune(&mut self) {
        while let Some(bottom) = self.arena.back(&self.lists[S as usize]) {
            let key = self.arena.get(bottom).key;
            let (at, entry) = self.entry(key).expect("a key in S has an entry");
            if entry.lir {
                return;
            }
            self.drop_node(bottom);
            self.entries[at as usize].s = NONE;
            if entry.q == NONE {
                // A name only: the key is not resident, and S was all that remembered it.
                self.drop_node(entry.gone);
                self.free_entry(key, at);
            }
        }
    }

    /// While the LIR keys pass their share, the one at the bottom of S becomes HIR at the end
    /// of Q; S is pruned after each.
    fn demote_over_share(&mut self) {
        while self.lir_used > self.lir_limit && self.demote_bottom() {}
    }

    /// The LIR key at the bottom of S becomes HIR at the end of Q, and S is pruned; false if
    /// S holds no LIR key. (S is pruned first: with no LIR keys at all, as at a capacity of
    /// one object, HIR keys can be at its bottom.)
    fn demote_bottom(&mut self) -> bool {
        self.prune();
        let Some(bottom) = self.arena.back(&self.lists[S as usize]) else { return false };
        let (key, size) = (self.arena.get(bottom).key, self.arena.get(bottom).size);
        let (at, entry) = self.entry(key).expect("a key in S has an entry");
        debug_assert!(entry.lir, "S's bottom is an LIR key after pruning");
        self.drop_node(bottom);
        let q = self.push(Q, key, size);
        self.entries[at as usize] = Entry { s: NONE, q, gone: NONE, lir: false };
        self.lir_used -= self.unit.charge(size);
        self.lir_count -= 1;
        self.prune();
        true
    }

    /// While S holds more than its bound, the name of the key that left the cache longest ago
    /// is dropped from it (libCacheSim's bound; the paper sets none).
    fn bound_stack(&mut self) {
        while self.lists[S as usize].charge(self.unit) > self.stack_limit {
            let Some(oldest) = self.arena.back(&self.lists[GONE as usize]) else { return };
            let key = self.arena.get(oldest).key;
            let (at, entry) = self.entry(key).expect("a name has an entry");
            self.drop_node(oldest);
            self.drop_node(entry.s);
            self.free_entry(key, at);
        }
    }
}

impl Eviction for Lirs {
    fn peek(&self, key: Key) -> Option<u32> {
        let (_, entry) = self.entry(key)?;
        let node = if entry.lir { entry.s } else { entry.q };
        Self::is_resident(&entry).then(|| self.arena.get(node).size)
    }

    #[inline]
    fn prefetch(&self, key: Key) {
        self.map.prefetch(key);
    }

    fn access(&mut self, req: &Request) -> Option<u32> {
        let (at, entry) = self.entry(req.key)?;
        if !Self::is_resident(&entry) {
            return None;
        }
        let size = if entry.lir {
            let size = self.arena.get(entry.s).size;
            let was_bottom = self.arena.back(&self.lists[S as usize]) == Some(entry.s);
            self.arena.move_to_front(&mut self.lists[S as usize], entry.s);
            if was_bottom {
                self.prune();
            }
            size
        } else if entry.s != NONE {
            // A resident HIR key in S: its IRR beats the recency of the bottom LIR key.
            let size = self.arena.get(entry.q).size;
            self.arena.move_to_front(&mut self.lists[S as usize], entry.s);
            self.drop_node(entry.q);
            self.entries[at as usize] = Entry { s: entry.s, q: NONE, gone: NONE, lir: true };
            self.lir_used += self.unit.charge(size);
            self.lir_count += 1;
            self.demote_over_share();
            size
        } else {
            // A resident HIR key S no longer holds: back on top of S, and to the end of Q.
            let size = self.arena.get(entry.q).size;
            self.arena.move_to_front(&mut self.lists[Q as usize], entry.q);
            let s = self.push(S, req.key, size);
            self.entries[at as usize].s = s;
            self.bound_stack();
            size
        };
        Some(size)
    }

    fn admit(&mut self, req: &Request, _needs_room: bool) -> Result<(), RejectReason> {
        if self.unit.charge(req.size) > self.hir_limit {
            return Err(RejectReason::TooLarge);
        }
        Ok(())
    }

    /// The front of Q leaves the cache; its name stays in S if S holds it. With Q empty (only
    /// after removals), the bottom LIR key is demoted first, so there is always one to evict.
    fn evict(&mut self, _incoming: &Request) -> Option<(Key, u32)> {
        if self.lists[Q as usize].is_empty() {
            self.demote_bottom();
        }
        let front = self.arena.back(&self.lists[Q as usize])?;
        let (key, size) = (self.arena.get(front).key, self.arena.get(front).size);
        let (at, entry) = self.entry(key).expect("a key in Q has an entry");
        self.drop_node(front);
        if entry.s == NONE {
            self.free_entry(key, at);
        } else {
            let gone = self.push(GONE, key, size);
            self.entries[at as usize] = Entry { s: entry.s, q: NONE, gone, lir: false };
        }
        Some((key, size))
    }

    fn insert(&mut self, req: &Request) {
        let charge = self.unit.charge(req.size);
        match self.entry(req.key) {
            Some((at, entry)) => {
                // A name in S: the key's IRR is its recency there, within the LIR keys'.
                debug_assert!(!Self::is_resident(&entry));
                // (At the size it comes back with.)
                self.drop_node(entry.gone);
                self.arena.resize(&mut self.lists[S as usize], entry.s, req.size);
                self.arena.move_to_front(&mut self.lists[S as usize], entry.s);
                self.entries[at as usize] = Entry { s: entry.s, q: NONE, gone: NONE, lir: true };
                self.lir_used += charge;
                self.lir_count += 1;
                self.demote_over_share();
            }
            None if self.lir_used + charge <= self.lir_limit => {
                let s = self.push(S, req.key, req.size);
                self.new_entry(req.key, Entry { s, q: NONE, gone: NONE, lir: true });
                self.lir_used += charge;
                self.lir_count += 1;
            }
            None => {
                let s = self.push(S, req.key, req.size);
                let q = self.push(Q, req.key, req.size);
                self.new_entry(req.key, Entry { s, q, gone: NONE, lir: false });
            }
        }
        self.bound_stack();
    }

    fn remove(&mut self, key: Key) -> Option<u32> {
        let (at, entry) = self.entry(key)?;
        let size = match (entry.lir, entry.q) {
            (true, _) => Some(self.arena.get(entry.s).size),
            (false, NONE) => None,
            (false, q) => Some(self.arena.get(q).size),
        };
        self.drop_node(entry.s);
        self.drop_node(entry.q);
        self.drop_node(entry.gone);
        self.free_entry(key, at);
        if entry.lir {
            self.lir_used -= self.unit.charge(size.expect("an LIR key is resident"));
            self.lir_count -= 1;
            self.prune();
        }
        size
    }

    fn used(&self) -> u64 {
        self.lir_used + self.lists[Q as usize].charge(self.unit)
    }

    fn resident(&self) -> u64 {
        self.lir_count + self.lists[Q as usize].len
    }

    fn label(&self) -> String {
        "lirs".into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::Registered;

    fn read(key: Key) -> Request {
        Request::read(key, 1)
    }

    fn keys(l: &Lirs, list: u32) -> Vec<Key> {
        l.arena.iter(&l.lists[list as usize]).map(|n| n.key).collect()
    }

    /// A miss as the frame runs it: room made by evicting, then the insertion; the evicted key.
    fn miss(l: &mut Lirs, key: Key) -> Option<Key> {
        assert_eq!(l.access(&read(key)), None, "{key} should miss");
        let evicted = (l.used() + 1 > 3).then(|| l.evict(&read(key)).unwrap().0);
        l.insert(&read(key));
        evicted
    }

    /// The paper's cases on a 3-object cache (two LIR keys, one HIR): the cold start gives
    /// LIR status, a miss evicts Q's front and keeps its name in S, a missed key whose name is
    /// in S gains LIR status and demotes the bottom LIR key, a hit on a resident HIR key not
    /// in S puts it back in S still HIR, a second hit there makes it LIR, and pruning drops
    /// names from S's bottom.
    #[test]
    fn the_papers_cases_on_a_small_cache() {
        let capacity = Capacity { amount: 3, unit: Unit::Objects };
        let mut l = Lirs::build(&LirsConfig::default(), capacity).unwrap();
        assert_eq!((l.lir_limit, l.hir_limit), (2, 1));
        assert_eq!([miss(&mut l, 1), miss(&mut l, 2), miss(&mut l, 3)], [None; 3]);
        assert_eq!((keys(&l, S), keys(&l, Q)), (vec![3, 2, 1], vec![3]));
        assert_eq!(miss(&mut l, 4), Some(3), "Q's front goes; its name stays in S");
        assert_eq!(
            (keys(&l, S), keys(&l, Q), keys(&l, GONE)),
            (vec![4, 3, 2, 1], vec![4], vec![3])
        );
        assert_eq!(miss(&mut l, 3), Some(4), "3's name was in S: it enters as LIR");
        assert_eq!((keys(&l, S), keys(&l, Q)), (vec![3, 4, 2], vec![1]), "1 demoted, S pruned");
        assert_eq!(l.peek(4), None, "4 is a name only");
        assert_eq!(l.access(&read(1)), Some(1), "a hit on a resident HIR key");
        assert_eq!((keys(&l, S), keys(&l, Q)), (vec![1, 3, 4, 2], vec![1]), "1 in S, still HIR");
        assert_eq!(l.access(&read(1)), Some(1));
        assert_eq!((keys(&l, S), keys(&l, Q)), (vec![1, 3], vec![2]), "1 LIR, 2 demoted, 4 pruned");
        assert_eq!(l.map.get(4), None, "a pruned name is forgotten");
        assert_eq!((l.used(), l.resident()), (3, 3));
        // A removed LIR key at S's bottom leaves S pruned to the next LIR key.
        assert_eq!(l.remove(3), Some(1));
        assert_eq!(keys(&l, S), vec![1]);
    }

    /// Names S keeps beyond twice the capacity are dropped, the one gone longest first.
    #[test]
    fn s_holds_at_most_twice_the_capacity() {
        let capacity = Capacity { amount: 3, unit: Unit::Objects };
        let mut l = Lirs::build(&LirsConfig::default(), capacity).unwrap();
        for key in 1..=40 {
            miss(&mut l, key);
            assert!(l.lists[S as usize].len <= 6, "S: {:?}", keys(&l, S));
        }
        assert_eq!(keys(&l, S).len(), 6);
        assert_eq!(keys(&l, GONE), vec![39, 38, 37], "the newest names are kept");
    }
}
