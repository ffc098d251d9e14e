//! Two tiers as one exclusive hierarchy: the upper tier (DRAM) in front of the lower (slow
//! memory), each run by any single-tier policy. This is the DRAM-first policy of Kassa et al.
//! ("Improving Performance of Flash Based Key-Value Stores Using Storage Class Memory as a
//! Volatile Memory Extension", USENIX ATC'21, section 4): a lookup checks DRAM, then SCM; a miss
//! is inserted in DRAM; DRAM's victims move to SCM; SCM's victims are dropped; a hit in SCM is
//! served from SCM and not promoted. The paper found it the best of its placements, because
//! it moves the least data between tiers.
//!
//! Invariants: a key is resident in at most one tier (exclusive); each tier stays within its
//! capacity; a demotion is a `Move` from tier 0 to tier 1, preceded by the lower tier's
//! evictions that make room for it. A victim the lower tier's policy will not take (LFRU when
//! full, S3-FIFO for an object larger than its small queue) is dropped from the upper tier.

use tiercache_core::{Action, Capacity, Decision, Key, Op, Request, TierId};

use crate::admission::Admission;
use crate::frame::{Eviction, Sink};
use crate::Policy;

const UPPER: TierId = TierId(0);
const LOWER: TierId = TierId(1);

pub struct DramFirst {
    tiers: [Box<dyn Eviction + Send>; 2],
    capacities: [Capacity; 2],
    admission: Admission,
}

impl DramFirst {
    pub fn new(
        upper: Box<dyn Eviction + Send>,
        lower: Box<dyn Eviction + Send>,
        capacities: [Capacity; 2],
        admission: Admission,
    ) -> DramFirst {
        DramFirst { tiers: [upper, lower], capacities, admission }
    }

    fn charge(&self, tier: usize, size: u32) -> u64 {
        self.capacities[tier].charge(size)
    }

    /// Makes room in the lower tier and moves one upper-tier victim there (or drops it).
    fn demote(&mut self, key: Key, size: u32, time_us: u64, out: &mut Decision) {
        let victim = Request::new(time_us, key, size, Op::Read);
        let charge = self.charge(1, size);
        let needs_room = self.tiers[1].used() + charge > self.capacities[1].amount;
        if !self.capacities[1].fits(size) || self.tiers[1].admit(&victim, needs_room).is_err() {
            out.push(Action::Evict { tier: UPPER, key, size });
            return;
        }
        self.tiers[1].prepare_insert(&victim, &mut Sink::new(out, LOWER));
        while self.tiers[1].used() + charge > self.capacities[1].amount {
            let (k, s) = self.tiers[1].evict(&victim).expect("a full tier has a victim");
            out.push(Action::Evict { tier: LOWER, key: k, size: s });
        }
        self.tiers[1].insert(&victim);
        out.push(Action::Move { key, size, from: UPPER, to: LOWER });
    }

    fn on_miss(&mut self, req: &Request, out: &mut Decision) {
        let reject = |out: &mut Decision, reason| {
            out.push(Action::Reject { key: req.key, size: req.size, reason })
        };
        if !self.capacities[0].fits(req.size) {
            return reject(out, tiercache_core::RejectReason::TooLarge);
        }
        if let Err(reason) = self.admission.admit(req) {
            return reject(out, reason);
        }
        let charge = self.charge(0, req.size);
        let needs_room = self.tiers[0].used() + charge > self.capacities[0].amount;
        if let Err(reason) = self.tiers[0].admit(req, needs_room) {
            return reject(out, reason);
        }
        // Upper-tier victims reported outside the eviction loop (ARC's ghostless eviction)
        // are demoted like the others.
        let mut early = Decision::new();
        self.tiers[0].prepare_insert(req, &mut Sink::new(&mut early, UPPER));
        for action in early.actions {
            if let Action::Evict { key, size, .. } = action {
                self.demote(key, size, req.time_us, out);
            }
        }
        while self.tiers[0].used() + charge > self.capacities[0].amount {
            let (key, size) = self.tiers[0].evict(req).expect("a full tier has a victim");
            self.demote(key, size, req.time_us, out);
        }
        self.tiers[0].insert(req);
        out.push(Action::Insert { tier: UPPER, key: req.key, size: req.size, dirty: false });
    }
}

impl Policy for DramFirst {
    fn tick(&mut self, now_us: u64, out: &mut Decision) {
        let at = Request::new(now_us, 0, 0, Op::Lookup);
        self.tiers[0].tick(&at, &mut Sink::new(out, UPPER));
        self.tiers[1].tick(&at, &mut Sink::new(out, LOWER));
    }

    fn decide(&mut self, req: &Request, out: &mut Decision) {
        self.tiers[0].tick(req, &mut Sink::new(out, UPPER));
        self.tiers[1].tick(req, &mut Sink::new(out, LOWER));
        if req.op == Op::Delete {
            for (t, tier) in [UPPER, LOWER].into_iter().enumerate() {
                if let Some(size) = self.tiers[t].remove(req.key) {
                    out.push(Action::Invalidate { tier, key: req.key, size });
                }
            }
            return;
        }
        for (t, tier) in [UPPER, LOWER].into_iter().enumerate() {
            if let Some(stored) = self.tiers[t].access(req) {
                out.hit = Some(tier);
                if req.op == Op::Write {
                    // The copy keeps the size it was admitted with (block caches: fixed sizes).
                    out.push(Action::Update { tier, key: req.key, size: stored, dirty: false });
                }
                return;
            }
        }
        if req.op != Op::Lookup {
            self.on_miss(req, out);
        }
    }

    #[inline]
    fn prefetch(&self, key: Key) {
        self.tiers[0].prefetch(key);
    }

    fn tier_count(&self) -> usize {
        2
    }

    fn capacity(&self, tier: TierId) -> Capacity {
        self.capacities[tier.index()]
    }

    fn used(&self, tier: TierId) -> u64 {
        self.tiers[tier.index()].used()
    }

    fn resident(&self, tier: TierId) -> u64 {
        self.tiers[tier.index()].resident()
    }

    fn label(&self) -> String {
        format!("dram-first({} > {})", self.tiers[0].label(), self.tiers[1].label())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::{AnyPolicy, PolicyConfig};

    fn run(policy: &mut AnyPolicy, req: Request) -> Decision {
        let mut d = Decision::new();
        policy.decide(&req, &mut d);
        d
    }

    #[test]
    fn dram_victims_move_to_scm_scm_hits_stay_and_scm_victims_drop() {
        let lru = PolicyConfig::Lru;
        let caps = [Capacity::objects(2), Capacity::objects(2)];
        let mut p = AnyPolicy::dram_first(&lru, &lru, caps, &[], 0).unwrap();
        for key in [1, 2] {
            let d = run(&mut p, Request::read(key, 1));
            assert_eq!(d.actions, vec![Action::Insert { tier: UPPER, key, size: 1, dirty: false }]);
        }
        // DRAM is full: its LRU (1) moves to SCM to make room for 3.
        let d = run(&mut p, Request::read(3, 1));
        assert_eq!(
            d.actions,
            vec![
                Action::Move { key: 1, size: 1, from: UPPER, to: LOWER },
                Action::Insert { tier: UPPER, key: 3, size: 1, dirty: false },
            ]
        );
        // A hit in SCM is served there and not promoted.
        let d = run(&mut p, Request::read(1, 1));
        assert_eq!((d.hit, d.actions.len()), (Some(LOWER), 0));
        // Two more misses: DRAM's victims 2 then 3 move down; SCM's LRU victim is dropped.
        run(&mut p, Request::read(4, 1));
        let d = run(&mut p, Request::read(5, 1));
        assert_eq!(
            d.actions,
            vec![
                Action::Evict { tier: LOWER, key: 1, size: 1 },
                Action::Move { key: 3, size: 1, from: UPPER, to: LOWER },
                Action::Insert { tier: UPPER, key: 5, size: 1, dirty: false },
            ]
        );
        assert_eq!(p.label(), "dram-first(lru > lru)");
    }
}
