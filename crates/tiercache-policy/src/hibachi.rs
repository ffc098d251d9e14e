//! Hibachi (Fan et al., "Hibachi: A Cooperative Hybrid Cache with NVRAM and DRAM for Storage
//! Arrays", MSST'17, section IV), over two tiers: DRAM (tier 0) and NVRAM (tier 1).
//!
//! - A clean cache (LFU-Aging, threshold 5.5) holds clean pages in DRAM, and in NVRAM when it
//!   borrows space; a dirty cache (LRU) holds dirty pages, all in NVRAM (IV-A, IV-B).
//! - Read hits raise a page's count (clean or dirty); a write hit on a clean page migrates it to
//!   NVRAM as dirty; a write hit on a dirty page moves it to the MRU end (IV-C).
//! - Evicting a dirty page: if the longest run of consecutive dirty pages is longer than
//!   `threshold` (10; "over a given threshold", IV-E; "if the length is equal to or below the
//!   threshold, Hibachi favors temporal locality", IV-F), the run is written back, its least
//!   frequent page evicted and the rest become clean at the LRU end of the clean cache (IV-E).
//!   Otherwise the LRU dirty page is compared with the
//!   least frequent clean page in DRAM: if it is more frequent, that clean page is evicted and
//!   the dirty page, written back, moves to DRAM; if not, it is written back and evicted (IV-C).
//! - Ghost caches of recently evicted clean and dirty pages resize the desired sizes: a clean
//!   ghost hit grows the clean side by one page; a dirty ghost hit grows the dirty side by two,
//!   or by 2 x |clean ghost| / |dirty ghost| when the clean ghost is not smaller (IV-D). The
//!   dirty side's desired size is at most NVRAM's capacity and the clean side's at most both
//!   tiers' ("the dirty cache can only grow up to the capacity of the NVRAM, while the clean
//!   cache can grow up to the sum of the capacity of the DRAM and NVRAM", IV-F).
//! - All counts, clean and dirty, age together (IV-C).
//!
//! Capacities are in pages (objects). Invariants: DRAM holds only clean pages; a dirty page is
//! written back before it is evicted or leaves NVRAM; no tier is over capacity.

use std::collections::{BTreeSet, VecDeque};

use serde::{Deserialize, Serialize};
use tiercache_core::{Action, Capacity, Decision, Key, KeyMap, Op, Request, TierId};

use crate::policy::Policy;
use crate::seqlist::SequentialList;

const DRAM: TierId = TierId(0);
const NVRAM: TierId = TierId(1);

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct HibachiConfig {
    /// Average count above which all counts are halved (LFU-Aging).
    pub aging_threshold: f64,
    /// Runs of consecutive dirty pages longer than this are written back as one (section
    /// IV-E).
    pub seq_threshold: u64,
    /// The paper's Hybrid-LRU baseline (section V-A) instead: DRAM an LRU clean cache, NVRAM
    /// an LRU write buffer for dirty pages; no frequency, borrowing, resizing or run flushing.
    pub hybrid_lru: bool,
}

impl Default for HibachiConfig {
    fn default() -> HibachiConfig {
        HibachiConfig { aging_threshold: 5.5, seq_threshold: 10, hybrid_lru: false }
    }
}

#[derive(Clone, Copy)]
struct Page {
    count: u32,
    /// Recency stamp: clean pages order by (count, stamp); dirty pages by stamp alone.
    stamp: u64,
    tier: TierId,
    dirty: bool,
    size: u32,
}

/// Keys of recently evicted pages, oldest first, at most `limit` of them. Entries taken out
/// early stay in `order` until they reach the front, where their stamp no longer matches.
#[derive(Default)]
struct Ghost {
    order: VecDeque<(u64, Key)>,
    members: KeyMap<u64>,
    stamp: u64,
    limit: usize,
}

impl Ghost {
    fn push(&mut self, key: Key) {
        self.stamp += 1;
        self.members.insert(key, self.stamp);
        self.order.push_back((self.stamp, key));
        while self.members.len() > self.limit || self.order.len() > 2 * self.limit.max(1) {
            let Some((stamp, old)) = self.order.pop_front() else { break };
            if self.members.get(&old) == Some(&stamp) {
                self.members.remove(&old);
            }
        }
    }

    fn take(&mut self, key: Key) -> bool {
        self.members.remove(&key).is_some()
    }

    fn len(&self) -> usize {
        self.members.len()
    }
}

pub struct Hibachi {
    config: HibachiConfig,
    capacities: [Capacity; 2],
    pages: KeyMap<Page>,
    /// Clean pages by (count, stamp), per tier.
    clean: [BTreeSet<(u32, u64, Key)>; 2],
    /// Dirty pages by stamp (LRU first).
    dirty: BTreeSet<(u64, Key)>,
    runs: SequentialList,
    used: [u64; 2],
    clean_ghost: Ghost,
    dirty_ghost: Ghost,
    /// Desired clean and dirty sizes, in pages; they sum to the total.
    clean_target: f64,
    dirty_target: f64,
    count_sum: u64,
    clock: u64,
    /// Lengths of the runs written back as one, for reports.
    pub flushed_runs: Vec<u64>,
}

impl Hibachi {
    pub fn new(config: HibachiConfig, capacities: [Capacity; 2]) -> Hibachi {
        let total = (capacities[0].amount + capacities[1].amount) as usize;
        Hibachi {
            clean_target: capacities[0].amount as f64,
            dirty_target: capacities[1].amount as f64,
            config,
            capacities,
            pages: KeyMap::default(),
            clean: [BTreeSet::new(), BTreeSet::new()],
            dirty: BTreeSet::new(),
            runs: SequentialList::default(),
            used: [0, 0],
            clean_ghost: Ghost { limit: total, ..Ghost::default() },
            dirty_ghost: Ghost { limit: total, ..Ghost::default() },
            count_sum: 0,
            clock: 0,
            flushed_runs: Vec::new(),
        }
    }

    /// The desired clean and dirty sizes now, in pages.
    pub fn targets(&self) -> (f64, f64) {
        (self.clean_target, self.dirty_target)
    }

    /// A resident page's frequency count (clean pages' reads, dirty pages' read hits), as
    /// LFU-Aging has left it.
    pub fn frequency(&self, key: Key) -> Option<u32> {
        self.pages.get(&key).map(|page| page.count)
    }

    /// Whether a resident page is dirty.
    pub fn is_dirty(&self, key: Key) -> Option<bool> {
        self.pages.get(&key).map(|page| page.dirty)
    }

    fn total(&self) -> f64 {
        (self.capacities[0].amount + self.capacities[1].amount) as f64
    }

    fn free(&self, tier: TierId) -> u64 {
        self.capacities[tier.index()].amount - self.used[tier.index()]
    }

    fn stamp(&mut self) -> u64 {
        self.clock += 1;
        self.clock
    }

    fn clean_len(&self) -> usize {
        self.clean[0].len() + self.clean[1].len()
    }

    /// A clean page's place in the clean order: by count then recency, or (Hybrid-LRU) by
    /// recency alone.
    fn order(&self, page: &Page, key: Key) -> (u32, u64, Key) {
        let count = if self.config.hybrid_lru { 0 } else { page.count };
        (count, page.stamp, key)
    }

    fn add(&mut self, key: Key, page: Page) {
        if page.dirty {
            debug_assert_eq!(page.tier, NVRAM, "dirty pages live in NVRAM");
            self.dirty.insert((page.stamp, key));
            self.runs.insert(key);
        } else {
            let order = self.order(&page, key);
            self.clean[page.tier.index()].insert(order);
        }
        self.used[page.tier.index()] += 1;
        self.count_sum += page.count as u64;
        self.pages.insert(key, page);
    }

    fn remove(&mut self, key: Key) -> Option<Page> {
        let page = self.pages.remove(&key)?;
        if page.dirty {
            self.dirty.remove(&(page.stamp, key));
            self.runs.remove(key);
        } else {
            let order = self.order(&page, key);
            self.clean[page.tier.index()].remove(&order);
        }
        self.used[page.tier.index()] -= 1;
        self.count_sum -= page.count as u64;
        Some(page)
    }

    /// LFU-Aging over every page, clean and dirty: halve all counts when their average passes
    /// the threshold.
    fn age_if_due(&mut self) {
        if self.config.hybrid_lru
            || self.pages.is_empty()
            || (self.count_sum as f64 / self.pages.len() as f64) <= self.config.aging_threshold
        {
            return;
        }
        self.clean = [BTreeSet::new(), BTreeSet::new()];
        self.count_sum = 0;
        for (key, page) in self.pages.iter_mut() {
            page.count = page.count.div_ceil(2);
            self.count_sum += page.count as u64;
            if !page.dirty {
                self.clean[page.tier.index()].insert((page.count, page.stamp, *key));
            }
        }
    }

    /// The least frequent clean page: in `tier`, or anywhere.
    fn coldest_clean(&self, tier: Option<TierId>) -> Option<(u32, u64, Key)> {
        match tier {
            Some(t) => self.clean[t.index()].first().copied(),
            None => {
                [self.clean[0].first(), self.clean[1].first()].into_iter().flatten().min().copied()
            }
        }
    }

    fn evict_clean(&mut self, key: Key, out: &mut Decision) {
        let page = self.remove(key).expect("a listed clean page");
        out.push(Action::Evict { tier: page.tier, key, size: page.size });
        self.clean_ghost.push(key);
    }

    /// Evicts from the dirty cache (section IV-E, then IV-C); frees at least one NVRAM page.
    fn evict_dirty(&mut self, out: &mut Decision) {
        let flush_runs = !self.config.hybrid_lru;
        if let Some((start, end)) =
            self.runs.longest().filter(|(a, b)| flush_runs && b - a + 1 > self.config.seq_threshold)
        {
            let run = self.runs.take_run(start);
            for &key in &run {
                out.push(Action::WriteBack { tier: NVRAM, key, size: self.pages[&key].size });
            }
            let coldest =
                *run.iter().min_by_key(|k| (self.pages[k].count, **k)).expect("a run has pages");
            let page = self.remove(coldest).expect("run pages are resident");
            out.push(Action::Evict { tier: NVRAM, key: coldest, size: page.size });
            self.dirty_ghost.push(coldest);
            for key in run.into_iter().filter(|k| *k != coldest) {
                // Clean now, at the LRU end of the clean cache, still in NVRAM.
                let page = self.remove(key).expect("run pages are resident");
                self.add(key, Page { dirty: false, stamp: 0, ..page });
            }
            self.flushed_runs.push(end - start + 1);
            return;
        }
        let &(_, key) = self.dirty.first().expect("evicting from an empty dirty cache");
        let page = self.pages[&key];
        out.push(Action::WriteBack { tier: NVRAM, key, size: page.size });
        let rival = self.coldest_clean(Some(DRAM)).filter(|_| !self.config.hybrid_lru);
        match rival {
            Some((count, _, victim)) if page.count > count => {
                // Hotter than DRAM's coldest clean page: that page goes, this one moves to DRAM.
                self.evict_clean(victim, out);
                self.remove(key);
                let stamp = self.stamp();
                self.add(key, Page { dirty: false, tier: DRAM, stamp, ..page });
                out.push(Action::Move { key, size: page.size, from: NVRAM, to: DRAM });
            }
            _ => {
                self.remove(key);
                out.push(Action::Evict { tier: NVRAM, key, size: page.size });
                self.dirty_ghost.push(key);
            }
        }
    }

    /// Frees one NVRAM page: a borrowed clean page first (the dirty cache has priority over
    /// NVRAM), else from the dirty cache.
    fn make_room_in_nvram(&mut self, out: &mut Decision) {
        while self.free(NVRAM) == 0 {
            match self.coldest_clean(Some(NVRAM)) {
                Some((_, _, key)) => self.evict_clean(key, out),
                None => self.evict_dirty(out),
            }
        }
    }

    /// Frees one page somewhere: from the clean side while it is over its desired size (or the
    /// dirty side is empty), else from the dirty side.
    fn evict_one(&mut self, out: &mut Decision) {
        let clean_over = self.clean_len() as f64 > self.clean_target;
        match self.coldest_clean(None) {
            Some((_, _, key)) if clean_over || self.dirty.is_empty() => self.evict_clean(key, out),
            _ => self.evict_dirty(out),
        }
    }

    /// Where a new clean page goes: DRAM if it has room, NVRAM while the clean side may borrow.
    fn place_clean(&mut self, out: &mut Decision) -> TierId {
        let mut evicted = false;
        loop {
            if self.free(DRAM) > 0 {
                return DRAM;
            }
            let may_borrow = !self.config.hybrid_lru;
            if may_borrow
                && self.free(NVRAM) > 0
                && (evicted || (self.clean_len() as f64) < self.clean_target)
            {
                return NVRAM;
            }
            if !may_borrow {
                // Hybrid-LRU: DRAM alone holds clean pages.
                let (_, _, victim) =
                    self.coldest_clean(Some(DRAM)).expect("a full DRAM holds clean pages");
                self.evict_clean(victim, out);
                continue;
            }
            self.evict_one(out);
            evicted = true;
        }
    }

    /// Ghost hits resize the desired sizes (section IV-D).
    fn adjust(&mut self, key: Key) {
        if self.config.hybrid_lru {
            return;
        }
        let total = self.total();
        let (clean_ghost, dirty_ghost) =
            (self.clean_ghost.len() as f64, self.dirty_ghost.len() as f64);
        let nvram = self.capacities[1].amount as f64;
        if self.clean_ghost.take(key) {
            self.clean_target = (self.clean_target + 1.0).min(total);
            self.dirty_target = total - self.clean_target;
        } else if self.dirty_ghost.take(key) {
            let step =
                if clean_ghost < dirty_ghost { 2.0 } else { 2.0 * clean_ghost / dirty_ghost };
            self.dirty_target = (self.dirty_target + step).min(nvram);
            self.clean_target = total - self.dirty_target;
        }
    }

    fn on_hit(&mut self, req: &Request, page: Page, out: &mut Decision) {
        out.hit = Some(page.tier);
        let key = req.key;
        match (req.op, page.dirty) {
            (Op::Write, true) => {
                self.remove(key);
                let stamp = self.stamp();
                self.add(key, Page { stamp, ..page });
                out.push(Action::Update { tier: NVRAM, key, size: page.size, dirty: true });
            }
            (Op::Write, false) => {
                // A written clean page becomes dirty and lives in NVRAM.
                self.remove(key);
                if page.tier == DRAM {
                    self.make_room_in_nvram(out);
                    out.push(Action::Move { key, size: page.size, from: DRAM, to: NVRAM });
                }
                let stamp = self.stamp();
                self.add(key, Page { dirty: true, tier: NVRAM, stamp, ..page });
                out.push(Action::Update { tier: NVRAM, key, size: page.size, dirty: true });
            }
            (_, dirty) => {
                // A read hit: the count rises; a clean page is also the most recent of its count.
                self.remove(key);
                let stamp = if dirty { page.stamp } else { self.stamp() };
                self.add(key, Page { count: page.count.saturating_add(1), stamp, ..page });
                self.age_if_due();
            }
        }
    }

    fn on_miss(&mut self, req: &Request, out: &mut Decision) {
        self.adjust(req.key);
        let (key, size) = (req.key, req.size);
        if req.op == Op::Write {
            self.make_room_in_nvram(out);
            let stamp = self.stamp();
            self.add(key, Page { count: 0, stamp, tier: NVRAM, dirty: true, size });
            out.push(Action::Insert { tier: NVRAM, key, size, dirty: true });
        } else {
            let tier = self.place_clean(out);
            let stamp = self.stamp();
            self.add(key, Page { count: 1, stamp, tier, dirty: false, size });
            out.push(Action::Insert { tier, key, size, dirty: false });
            self.age_if_due();
        }
    }
}

impl Policy for Hibachi {
    fn decide(&mut self, req: &Request, out: &mut Decision) {
        let page = self.pages.get(&req.key).copied();
        match (req.op, page) {
            (Op::Delete, Some(page)) => {
                self.remove(req.key);
                out.push(Action::Invalidate { tier: page.tier, key: req.key, size: page.size });
            }
            (Op::Delete, None) | (Op::Lookup, None) => {}
            (_, Some(page)) => self.on_hit(req, page, out),
            (_, None) => self.on_miss(req, out),
        }
    }

    /// A dirty block goes back to the dirty cache, a clean one to the clean cache of its tier
    /// (NVRAM's borrowed space), as if read once; a tier already full takes nothing more.
    fn restore(
        &mut self,
        key: Key,
        size: u32,
        tier: TierId,
        dirty: bool,
        _out: &mut Decision,
    ) -> bool {
        let fits = tier.index() < 2 && self.free(tier) > 0 && !self.pages.contains_key(&key);
        if !fits || (dirty && tier != NVRAM) {
            return false;
        }
        let stamp = self.stamp();
        self.add(key, Page { count: (!dirty) as u32, stamp, tier, dirty, size });
        true
    }

    /// Every dirty page (all live in NVRAM) is written back, in block order, and becomes clean
    /// where it is, at the LRU end of the clean cache, as a flushed run's pages do (IV-E).
    fn write_back(&mut self, tier: Option<TierId>, out: &mut Decision) {
        if tier.is_some_and(|t| t != NVRAM) {
            return;
        }
        let mut dirty: Vec<Key> = self.dirty.iter().map(|(_, k)| *k).collect();
        dirty.sort_unstable();
        for key in dirty {
            let page = self.remove(key).expect("dirty pages are resident");
            out.push(Action::WriteBack { tier: NVRAM, key, size: page.size });
            self.add(key, Page { dirty: false, stamp: 0, ..page });
        }
    }

    fn peek(&self, key: Key) -> Option<(TierId, u32)> {
        self.pages.get(&key).map(|p| (p.tier, p.size))
    }

    fn tier_count(&self) -> usize {
        2
    }

    fn capacity(&self, tier: TierId) -> Capacity {
        self.capacities[tier.index()]
    }

    fn used(&self, tier: TierId) -> u64 {
        self.used[tier.index()]
    }

    fn resident(&self, tier: TierId) -> u64 {
        self.used[tier.index()]
    }

    fn knobs(&self) -> Vec<(&'static str, f64)> {
        vec![("clean_target", self.clean_target), ("dirty_target", self.dirty_target)]
    }

    fn label(&self) -> String {
        if self.config.hybrid_lru {
            return "hybrid-lru".into();
        }
        format!("hibachi(aging={}, seq={})", self.config.aging_threshold, self.config.seq_threshold)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hibachi(dram: u64, nvram: u64) -> Hibachi {
        Hibachi::new(HibachiConfig::default(), [Capacity::objects(dram), Capacity::objects(nvram)])
    }

    fn run(h: &mut Hibachi, op: Op, key: u64) -> Decision {
        let mut d = Decision::new();
        h.decide(&Request::new(0, key, 1, op), &mut d);
        d
    }

    #[test]
    fn reads_fill_dram_then_writes_make_pages_dirty_in_nvram() {
        let mut h = hibachi(2, 2);
        run(&mut h, Op::Read, 1);
        assert_eq!(h.peek(1), Some((DRAM, 1)));
        let d = run(&mut h, Op::Write, 1);
        assert_eq!(d.hit, Some(DRAM));
        assert_eq!(
            d.actions,
            vec![
                Action::Move { key: 1, size: 1, from: DRAM, to: NVRAM },
                Action::Update { tier: NVRAM, key: 1, size: 1, dirty: true },
            ]
        );
        let d = run(&mut h, Op::Write, 2);
        assert_eq!(d.actions, vec![Action::Insert { tier: NVRAM, key: 2, size: 1, dirty: true }]);
    }

    #[test]
    fn a_hotter_dirty_victim_trades_places_with_drams_coldest_clean_page() {
        let mut h = hibachi(1, 1);
        run(&mut h, Op::Read, 10); // clean, count 1, in DRAM
        run(&mut h, Op::Write, 20); // dirty, count 0, in NVRAM
        for _ in 0..2 {
            run(&mut h, Op::Read, 20); // dirty page read twice: count 2
        }
        // A new write needs NVRAM: the LRU dirty page (20, count 2) beats DRAM's clean page
        // (10, count 1): 10 is evicted, 20 is written back and moves to DRAM.
        let d = run(&mut h, Op::Write, 30);
        assert_eq!(
            d.actions,
            vec![
                Action::WriteBack { tier: NVRAM, key: 20, size: 1 },
                Action::Evict { tier: DRAM, key: 10, size: 1 },
                Action::Move { key: 20, size: 1, from: NVRAM, to: DRAM },
                Action::Insert { tier: NVRAM, key: 30, size: 1, dirty: true },
            ]
        );
        // A colder dirty victim is written back and evicted instead.
        let d = run(&mut h, Op::Write, 40);
        assert_eq!(
            d.actions[..2],
            [
                Action::WriteBack { tier: NVRAM, key: 30, size: 1 },
                Action::Evict { tier: NVRAM, key: 30, size: 1 }
            ]
        );
    }

    #[test]
    fn a_run_of_eleven_dirty_pages_is_flushed_together_and_ten_are_not() {
        for (run_length, flushed) in [(11u64, true), (10, false)] {
            let mut h = hibachi(1, run_length);
            for key in 100..100 + run_length {
                run(&mut h, Op::Write, key);
            }
            run(&mut h, Op::Read, 105); // one page of the run is hotter
            let d = run(&mut h, Op::Write, 500);
            let write_backs =
                d.actions.iter().filter(|a| matches!(a, Action::WriteBack { .. })).count();
            if flushed {
                assert_eq!(write_backs, 11, "the whole run is written back");
                // The coldest page (lowest count, then lowest number) leaves; the rest stay as
                // clean pages in NVRAM.
                assert!(d.actions.contains(&Action::Evict { tier: NVRAM, key: 100, size: 1 }));
                assert_eq!(h.peek(105), Some((NVRAM, 1)));
                assert!(!h.pages[&105].dirty);
                assert_eq!(h.flushed_runs, vec![11]);
            } else {
                assert_eq!(write_backs, 1, "below the threshold only the LRU dirty page goes");
                assert!(h.flushed_runs.is_empty());
            }
        }
    }

    #[test]
    fn hybrid_lru_writes_back_one_page_even_with_a_long_dirty_run() {
        let config = HibachiConfig { hybrid_lru: true, ..HibachiConfig::default() };
        let mut h = Hibachi::new(config, [Capacity::objects(1), Capacity::objects(12)]);
        for key in 100..112 {
            run(&mut h, Op::Write, key);
        }
        let d = run(&mut h, Op::Write, 500);
        assert_eq!(
            d.actions,
            vec![
                Action::WriteBack { tier: NVRAM, key: 100, size: 1 },
                Action::Evict { tier: NVRAM, key: 100, size: 1 },
                Action::Insert { tier: NVRAM, key: 500, size: 1, dirty: true },
            ],
            "the paper's baseline is LRU: no run flushing"
        );
    }

    #[test]
    fn hybrid_lru_keeps_clean_pages_in_dram_and_dirty_pages_in_nvram_by_recency() {
        let config = HibachiConfig { hybrid_lru: true, ..HibachiConfig::default() };
        let mut h = Hibachi::new(config, [Capacity::objects(2), Capacity::objects(2)]);
        for key in [1, 2] {
            run(&mut h, Op::Read, key);
        }
        for _ in 0..5 {
            run(&mut h, Op::Read, 1); // frequency does not matter
        }
        run(&mut h, Op::Read, 2);
        let d = run(&mut h, Op::Read, 3);
        assert_eq!(d.actions[0], Action::Evict { tier: DRAM, key: 1, size: 1 }, "LRU, not LFU");
        for key in [10, 11, 12] {
            run(&mut h, Op::Write, key);
        }
        assert_eq!(h.peek(10), None, "the oldest dirty page was written back and evicted");
        assert!(h.flushed_runs.is_empty());
    }

    /// Section IV-D's increments, worked by hand (DRAM 4 pages, NVRAM 8, so S = 12), with
    /// IV-F's bound on the dirty side; no request here evicts anything, so the ghosts hold
    /// only what the test puts there.
    #[test]
    fn ghost_hits_move_the_desired_sizes_by_the_papers_increments() {
        let mut h = hibachi(4, 8);
        assert_eq!(h.targets(), (4.0, 8.0));
        // "Every time there is a ghost hit, C increases by one page and D decreases by one."
        for key in 1..=7 {
            h.clean_ghost.push(key);
        }
        for key in 1..=5 {
            run(&mut h, Op::Read, key);
        }
        assert_eq!(h.targets(), (9.0, 3.0));
        // "If the clean ghost cache size is greater than or equal to the dirty ghost cache
        // size, D increases by two times the quotient": 2 x 2 / 1.
        h.dirty_ghost.push(20);
        run(&mut h, Op::Write, 20);
        assert_eq!(h.targets(), (5.0, 7.0));
        run(&mut h, Op::Read, 6);
        assert_eq!(h.targets(), (6.0, 6.0));
        // "If the clean ghost cache size is smaller than the dirty ghost cache, D increases by
        // two": clean ghost {7}, dirty ghost {21, 22, 23}.
        for key in [21, 22, 23] {
            h.dirty_ghost.push(key);
        }
        run(&mut h, Op::Write, 21);
        assert_eq!(h.targets(), (4.0, 8.0));
        run(&mut h, Op::Read, 7);
        assert_eq!(h.targets(), (5.0, 7.0));
        // "The dirty cache can only grow up to the capacity of the NVRAM" (IV-F): 7 + 2 stops
        // at 8.
        run(&mut h, Op::Write, 22);
        assert_eq!(h.targets(), (4.0, 8.0), "the dirty side is at most NVRAM's capacity");
        assert!(h.flushed_runs.is_empty() && h.used(DRAM) == 4);
    }
}
