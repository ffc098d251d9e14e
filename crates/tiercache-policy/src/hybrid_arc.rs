//! Hybrid-ARC, the second baseline Hibachi is compared with (Fan et al., MSST'17, section V-A:
//! "an ARC-like algorithm to dynamically split NVRAM to cache both clean pages and dirty pages,
//! while DRAM is a clean cache for clean pages"). The paper gives no more detail; this is our
//! reading, kept as close to ARC (Megiddo and Modha, FAST'03) as the description allows:
//!
//! - DRAM is an LRU cache of clean pages; its victims move to NVRAM's clean list.
//! - NVRAM holds two LRU lists, clean (C) and dirty (D), with a target size `p` for D, and two
//!   ghost lists of the keys recently evicted from each.
//! - A miss whose key is in C's ghost shrinks `p` by max(|ghost D| / |ghost C|, 1); one in D's
//!   ghost grows it by max(|ghost C| / |ghost D|, 1), as ARC moves its target.
//! - Making room in NVRAM evicts from D (written back first) while D is over `p` or C is empty,
//!   else from C.
//! - A read hit moves a page to the MRU end of its list; a write hit on a clean page makes it
//!   dirty in D (moving it to NVRAM if it was in DRAM); a write miss inserts into D.

use std::collections::{BTreeSet, VecDeque};

use tiercache_core::{Action, Capacity, Decision, Key, KeyMap, Op, Request, TierId};

use crate::policy::Policy;

const DRAM: TierId = TierId(0);
const NVRAM: TierId = TierId(1);

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum List {
    Dram,
    Clean,
    Dirty,
}

#[derive(Clone, Copy)]
struct Page {
    list: List,
    stamp: u64,
    size: u32,
}

/// Keys recently evicted from one list, oldest first, bounded; stale entries are skipped.
#[derive(Default)]
struct Ghost {
    order: VecDeque<(u64, Key)>,
    members: KeyMap<u64>,
    limit: usize,
}

impl Ghost {
    fn push(&mut self, key: Key, stamp: u64) {
        self.members.insert(key, stamp);
        self.order.push_back((stamp, key));
        while self.members.len() > self.limit || self.order.len() > 2 * self.limit.max(1) {
            let Some((s, old)) = self.order.pop_front() else { break };
            if self.members.get(&old) == Some(&s) {
                self.members.remove(&old);
            }
        }
    }
}

pub struct HybridArc {
    capacities: [Capacity; 2],
    pages: KeyMap<Page>,
    /// Per list, pages by recency (LRU first).
    lists: [BTreeSet<(u64, Key)>; 3],
    ghosts: [Ghost; 2],
    /// Target size of the dirty list, in pages.
    p: f64,
    clock: u64,
    /// Misses found in the clean and the dirty ghost list so far, for reports.
    pub ghost_hits: [u64; 2],
}

fn index(list: List) -> usize {
    match list {
        List::Dram => 0,
        List::Clean => 1,
        List::Dirty => 2,
    }
}

fn tier(list: List) -> TierId {
    if list == List::Dram {
        DRAM
    } else {
        NVRAM
    }
}

impl HybridArc {
    pub fn new(capacities: [Capacity; 2]) -> HybridArc {
        let limit = capacities[1].amount as usize;
        HybridArc {
            capacities,
            pages: KeyMap::default(),
            lists: [BTreeSet::new(), BTreeSet::new(), BTreeSet::new()],
            ghosts: [Ghost { limit, ..Ghost::default() }, Ghost { limit, ..Ghost::default() }],
            p: capacities[1].amount as f64 / 2.0,
            clock: 0,
            ghost_hits: [0, 0],
        }
    }

    fn stamp(&mut self) -> u64 {
        self.clock += 1;
        self.clock
    }

    fn len(&self, list: List) -> u64 {
        self.lists[index(list)].len() as u64
    }

    fn put(&mut self, key: Key, list: List, size: u32) {
        let stamp = self.stamp();
        self.lists[index(list)].insert((stamp, key));
        self.pages.insert(key, Page { list, stamp, size });
    }

    fn take(&mut self, key: Key) -> Option<Page> {
        let page = self.pages.remove(&key)?;
        self.lists[index(page.list)].remove(&(page.stamp, key));
        Some(page)
    }

    fn lru(&self, list: List) -> Option<Key> {
        self.lists[index(list)].first().map(|(_, k)| *k)
    }

    /// Frees one NVRAM page, from the dirty list while it is over target or the clean list is
    /// empty, else from the clean list.
    fn replace(&mut self, out: &mut Decision) {
        let dirty_over = self.len(List::Dirty) as f64 > self.p || self.len(List::Clean) == 0;
        let list = if dirty_over { List::Dirty } else { List::Clean };
        let key = self.lru(list).expect("a full NVRAM has pages");
        let page = self.take(key).expect("listed");
        if list == List::Dirty {
            out.push(Action::WriteBack { tier: NVRAM, key, size: page.size });
        }
        out.push(Action::Evict { tier: NVRAM, key, size: page.size });
        let stamp = self.stamp();
        self.ghosts[if list == List::Dirty { 1 } else { 0 }].push(key, stamp);
    }

    fn nvram_room(&mut self, out: &mut Decision) {
        while self.len(List::Clean) + self.len(List::Dirty) >= self.capacities[1].amount {
            self.replace(out);
        }
    }

    /// Makes room in DRAM by moving its LRU page to NVRAM's clean list.
    fn dram_room(&mut self, out: &mut Decision) {
        while self.len(List::Dram) >= self.capacities[0].amount {
            let key = self.lru(List::Dram).expect("a full DRAM has pages");
            let page = self.take(key).expect("listed");
            self.nvram_room(out);
            self.put(key, List::Clean, page.size);
            out.push(Action::Move { key, size: page.size, from: DRAM, to: NVRAM });
        }
    }

    /// ARC's adaptation on a ghost hit.
    fn adapt(&mut self, key: Key) {
        let (clean, dirty) =
            (self.ghosts[0].members.len() as f64, self.ghosts[1].members.len() as f64);
        let nvram = self.capacities[1].amount as f64;
        if self.ghosts[0].members.remove(&key).is_some() {
            self.ghost_hits[0] += 1;
            self.p = (self.p - (dirty / clean.max(1.0)).max(1.0)).max(0.0);
        } else if self.ghosts[1].members.remove(&key).is_some() {
            self.ghost_hits[1] += 1;
            self.p = (self.p + (clean / dirty.max(1.0)).max(1.0)).min(nvram);
        }
    }
}

impl Policy for HybridArc {
    fn decide(&mut self, req: &Request, out: &mut Decision) {
        let key = req.key;
        match (req.op, self.pages.get(&key).copied()) {
            (Op::Delete, Some(page)) => {
                self.take(key);
                out.push(Action::Invalidate { tier: tier(page.list), key, size: page.size });
            }
            (Op::Delete | Op::Lookup, None) => {}
            (Op::Write, Some(page)) => {
                out.hit = Some(tier(page.list));
                self.take(key);
                if page.list == List::Dram {
                    self.nvram_room(out);
                    out.push(Action::Move { key, size: page.size, from: DRAM, to: NVRAM });
                }
                self.put(key, List::Dirty, page.size);
                out.push(Action::Update { tier: NVRAM, key, size: page.size, dirty: true });
            }
            (_, Some(page)) => {
                out.hit = Some(tier(page.list));
                self.take(key);
                self.put(key, page.list, page.size);
            }
            (Op::Write, None) => {
                self.adapt(key);
                self.nvram_room(out);
                self.put(key, List::Dirty, req.size);
                out.push(Action::Insert { tier: NVRAM, key, size: req.size, dirty: true });
            }
            (_, None) => {
                self.adapt(key);
                self.dram_room(out);
                self.put(key, List::Dram, req.size);
                out.push(Action::Insert { tier: DRAM, key, size: req.size, dirty: false });
            }
        }
    }

    /// A block goes back to its list: DRAM, NVRAM's clean list or its dirty list, as the most
    /// recent; a tier already full takes nothing more.
    fn restore(
        &mut self,
        key: Key,
        size: u32,
        tier: TierId,
        dirty: bool,
        _out: &mut Decision,
    ) -> bool {
        let list = match (tier, dirty) {
            (DRAM, false) => List::Dram,
            (NVRAM, false) => List::Clean,
            (NVRAM, true) => List::Dirty,
            _ => return false,
        };
        if self.pages.contains_key(&key) || self.used(tier) >= self.capacities[tier.index()].amount
        {
            return false;
        }
        self.put(key, list, size);
        true
    }

    /// Every dirty page is written back, in block order, and moves to the clean list, keeping
    /// its recency.
    fn write_back(&mut self, tier: Option<TierId>, out: &mut Decision) {
        if tier.is_some_and(|t| t != NVRAM) {
            return;
        }
        let mut dirty: Vec<(u64, Key)> = self.lists[index(List::Dirty)].iter().copied().collect();
        dirty.sort_unstable_by_key(|(_, key)| *key);
        for (stamp, key) in dirty {
            let page = self.take(key).expect("listed");
            out.push(Action::WriteBack { tier: NVRAM, key, size: page.size });
            self.lists[index(List::Clean)].insert((stamp, key));
            self.pages.insert(key, Page { list: List::Clean, ..page });
        }
    }

    fn peek(&self, key: Key) -> Option<(TierId, u32)> {
        self.pages.get(&key).map(|p| (tier(p.list), p.size))
    }

    fn tier_count(&self) -> usize {
        2
    }

    fn capacity(&self, tier: TierId) -> Capacity {
        self.capacities[tier.index()]
    }

    fn used(&self, t: TierId) -> u64 {
        match t {
            DRAM => self.len(List::Dram),
            _ => self.len(List::Clean) + self.len(List::Dirty),
        }
    }

    fn resident(&self, t: TierId) -> u64 {
        self.used(t)
    }

    fn label(&self) -> String {
        "hybrid-arc".into()
    }

    fn knobs(&self) -> Vec<(&'static str, f64)> {
        vec![("dirty_target", self.p)]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(h: &mut HybridArc, op: Op, key: u64) -> Decision {
        let mut d = Decision::new();
        h.decide(&Request::new(0, key, 1, op), &mut d);
        d
    }

    #[test]
    fn dram_victims_go_to_nvram_clean_and_the_dirty_target_adapts() {
        let mut h = HybridArc::new([Capacity::objects(1), Capacity::objects(2)]);
        run(&mut h, Op::Read, 1);
        let d = run(&mut h, Op::Read, 2);
        assert_eq!(d.actions[0], Action::Move { key: 1, size: 1, from: DRAM, to: NVRAM });
        run(&mut h, Op::Write, 3); // NVRAM: clean 1, dirty 3
        assert_eq!((h.len(List::Clean), h.len(List::Dirty)), (1, 1));
        // NVRAM is full; p = 1: the dirty list is not over target, so the clean page goes.
        let d = run(&mut h, Op::Write, 4);
        assert_eq!(d.actions[0], Action::Evict { tier: NVRAM, key: 1, size: 1 });
        // 1 is in the clean ghost: reading it again shrinks the dirty target.
        let before = h.p;
        run(&mut h, Op::Read, 1);
        assert!(h.p < before, "{} -> {}", before, h.p);
    }
}
