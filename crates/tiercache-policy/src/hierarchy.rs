//! Two tiers as one exclusive hierarchy: the upper tier (DRAM) in front of the lower (slow
//! memory), each run by any single-tier policy, with the admission placements of Kassa et al.
//! ("Improving Performance of Flash Based Key-Value Stores Using Storage Class Memory as a
//! Volatile Memory Extension", USENIX ATC'21, section 4). A lookup checks DRAM, then SCM; SCM's
//! victims are dropped; DRAM's victims move to SCM.
//!
//! - DRAM-first: a miss is inserted in DRAM; a hit in SCM is served there and not promoted.
//!   The paper found it the best placement on its read-dominated workloads and attributes
//!   that to the data moved between tiers; the simulator counts those bytes to check it.
//! - SCM-first(threshold): a miss is inserted in SCM; a block hit more than `threshold` times
//!   while in SCM moves to DRAM (2 and 6 in the paper).
//! - Bidirectional(threshold): as DRAM-first, plus a block hit more than `threshold` times in
//!   SCM moves back to DRAM (4 in the paper).
//!
//! A block's SCM hit count starts at zero each time it enters SCM.
//!
//! Invariants: a key is resident in at most one tier (exclusive); each tier stays within its
//! capacity; a demotion is a `Move` from tier 0 to tier 1, preceded by the lower tier's
//! evictions that make room for it. A victim the lower tier's policy will not take (LFRU when
//! full, S3-FIFO for an object larger than its small queue) is dropped from the upper tier.

use serde::{Deserialize, Serialize};
use tiercache_core::{Action, Capacity, Decision, Key, KeyMap, Op, Request, TierId};

use crate::admission::Admission;
use crate::frame::{Eviction, Sink};
use crate::Policy;

const UPPER: TierId = TierId(0);
const LOWER: TierId = TierId(1);

/// Where misses go and when blocks move up.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "placement", rename_all = "kebab-case")]
pub enum Placement {
    DramFirst,
    ScmFirst { threshold: u32 },
    Bidirectional { threshold: u32 },
}

impl Placement {
    /// Parses `dram-first`, `scm-first[:T]` (default 2), `bidirectional[:T]` (default 4).
    pub fn parse(text: &str) -> Result<Placement, crate::PolicyError> {
        let (name, arg) = match text.split_once(':') {
            Some((n, a)) => (n, Some(a)),
            None => (text, None),
        };
        let threshold = |default: u32| -> Result<u32, crate::PolicyError> {
            arg.map_or(Ok(default), |a| {
                a.parse().map_err(|_| {
                    crate::PolicyError::bad(name, "threshold", format!("cannot be '{a}'"))
                })
            })
        };
        Ok(match name {
            "dram-first" => Placement::DramFirst,
            "scm-first" => Placement::ScmFirst { threshold: threshold(2)? },
            "bidirectional" => Placement::Bidirectional { threshold: threshold(4)? },
            _ => {
                let known = "dram-first, scm-first[:T], bidirectional[:T]".to_string();
                return Err(crate::PolicyError::UnknownPolicy { name: text.into(), known });
            }
        })
    }

    fn promotion_threshold(self) -> Option<u32> {
        match self {
            Placement::DramFirst => None,
            Placement::ScmFirst { threshold } | Placement::Bidirectional { threshold } => {
                Some(threshold)
            }
        }
    }

    fn label(self) -> String {
        match self {
            Placement::DramFirst => "dram-first".into(),
            Placement::ScmFirst { threshold } => format!("scm-first({threshold})"),
            Placement::Bidirectional { threshold } => format!("bidirectional({threshold})"),
        }
    }
}

/// The two-tier hybrid cache.
pub struct Hybrid {
    tiers: [Box<dyn Eviction + Send>; 2],
    capacities: [Capacity; 2],
    admission: Admission,
    placement: Placement,
    /// Hits of each block since it entered SCM (placements that promote).
    scm_hits: KeyMap<u32>,
}

impl Hybrid {
    pub fn new(
        upper: Box<dyn Eviction + Send>,
        lower: Box<dyn Eviction + Send>,
        capacities: [Capacity; 2],
        admission: Admission,
        placement: Placement,
    ) -> Hybrid {
        Hybrid {
            tiers: [upper, lower],
            capacities,
            admission,
            placement,
            scm_hits: KeyMap::default(),
        }
    }

    /// Makes room in the lower tier for `req` and inserts it there; false if the lower tier's
    /// policy will not take it.
    fn place_lower(&mut self, req: &Request, out: &mut Decision) -> bool {
        let charge = self.charge(1, req.size);
        let needs_room = self.tiers[1].used() + charge > self.capacities[1].amount;
        if !self.capacities[1].fits(req.size) || self.tiers[1].admit(req, needs_room).is_err() {
            return false;
        }
        self.tiers[1].prepare_insert(req, &mut Sink::new(out, LOWER));
        while self.tiers[1].used() + charge > self.capacities[1].amount {
            let (k, s) = self.tiers[1].evict(req).expect("a full tier has a victim");
            self.scm_hits.remove(&k);
            out.push(Action::Evict { tier: LOWER, key: k, size: s });
        }
        self.tiers[1].insert(req);
        if self.placement.promotion_threshold().is_some() {
            self.scm_hits.insert(req.key, 0);
        }
        true
    }

    /// Makes room in the upper tier for `req` (its victims move down) and inserts it there.
    fn place_upper(&mut self, req: &Request, out: &mut Decision) {
        // Upper-tier victims reported outside the eviction loop (ARC's ghostless eviction)
        // are demoted like the others.
        let mut early = Decision::new();
        self.tiers[0].prepare_insert(req, &mut Sink::new(&mut early, UPPER));
        for action in early.actions {
            if let Action::Evict { key, size, .. } = action {
                self.demote(key, size, req.time_us, out);
            }
        }
        let charge = self.charge(0, req.size);
        while self.tiers[0].used() + charge > self.capacities[0].amount {
            let (key, size) = self.tiers[0].evict(req).expect("a full tier has a victim");
            self.demote(key, size, req.time_us, out);
        }
        self.tiers[0].insert(req);
    }

    /// Counts a hit in SCM and moves the block up once it passes the threshold.
    fn on_lower_hit(&mut self, req: &Request, stored: u32, out: &mut Decision) {
        let Some(threshold) = self.placement.promotion_threshold() else { return };
        let hits = self.scm_hits.entry(req.key).or_insert(0);
        *hits += 1;
        if *hits <= threshold {
            return;
        }
        let up = Request { size: stored, ..*req };
        let needs_room = self.tiers[0].used() + self.charge(0, stored) > self.capacities[0].amount;
        if !self.capacities[0].fits(stored) || self.tiers[0].admit(&up, needs_room).is_err() {
            return;
        }
        self.tiers[1].remove(req.key);
        self.scm_hits.remove(&req.key);
        self.place_upper(&up, out);
        out.push(Action::Move { key: req.key, size: stored, from: LOWER, to: UPPER });
    }

    fn charge(&self, tier: usize, size: u32) -> u64 {
        self.capacities[tier].charge(size)
    }

    /// Moves one upper-tier victim to the lower tier (or drops it if that tier will not take it).
    fn demote(&mut self, key: Key, size: u32, time_us: u64, out: &mut Decision) {
        let victim = Request::new(time_us, key, size, Op::Read);
        if self.place_lower(&victim, out) {
            out.push(Action::Move { key, size, from: UPPER, to: LOWER });
        } else {
            out.push(Action::Evict { tier: UPPER, key, size });
        }
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
        let first = if let Placement::ScmFirst { .. } = self.placement { 1 } else { 0 };
        let needs_room =
            self.tiers[first].used() + self.charge(first, req.size) > self.capacities[first].amount;
        if first == 0 {
            if let Err(reason) = self.tiers[0].admit(req, needs_room) {
                return reject(out, reason);
            }
        }
        if let Placement::ScmFirst { .. } = self.placement {
            if self.place_lower(req, out) {
                out.push(Action::Insert {
                    tier: LOWER,
                    key: req.key,
                    size: req.size,
                    dirty: false,
                });
            } else {
                out.push(Action::Reject {
                    key: req.key,
                    size: req.size,
                    reason: tiercache_core::RejectReason::NoSpace,
                });
            }
            return;
        }
        self.place_upper(req, out);
        out.push(Action::Insert { tier: UPPER, key: req.key, size: req.size, dirty: false });
    }
}

impl Policy for Hybrid {
    fn peek(&self, key: Key) -> Option<(TierId, u32)> {
        (0..2).find_map(|t| self.tiers[t].peek(key).map(|size| (TierId(t as u8), size)))
    }

    fn tick(&mut self, now_us: u64, out: &mut Decision) {
        let at = Request::new(now_us, 0, 0, Op::Lookup);
        self.tiers[0].tick(&at, &mut Sink::new(out, UPPER));
        self.tiers[1].tick(&at, &mut Sink::new(out, LOWER));
    }

    fn decide(&mut self, req: &Request, out: &mut Decision) {
        self.tiers[0].tick(req, &mut Sink::new(out, UPPER));
        self.tiers[1].tick(req, &mut Sink::new(out, LOWER));
        if req.op == Op::Delete {
            self.scm_hits.remove(&req.key);
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
                if tier == LOWER {
                    self.on_lower_hit(req, stored, out);
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
        format!("{}({} > {})", self.placement.label(), self.tiers[0].label(), self.tiers[1].label())
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

    fn hybrid(placement: &str, upper: u64, lower: u64) -> AnyPolicy {
        let caps = [Capacity::objects(upper), Capacity::objects(lower)];
        let placement = Placement::parse(placement).unwrap();
        AnyPolicy::hybrid(placement, &PolicyConfig::Lru, &PolicyConfig::Lru, caps, &[], 0).unwrap()
    }

    #[test]
    fn scm_first_promotes_after_more_than_threshold_hits_in_scm() {
        let mut p = hybrid("scm-first:2", 1, 4);
        let d = run(&mut p, Request::read(7, 1));
        assert_eq!(d.actions, vec![Action::Insert { tier: LOWER, key: 7, size: 1, dirty: false }]);
        for _ in 0..2 {
            let d = run(&mut p, Request::read(7, 1));
            assert_eq!((d.hit, d.actions.len()), (Some(LOWER), 0), "two hits stay in SCM");
        }
        // The third hit exceeds the threshold: served from SCM, then moved to DRAM.
        let d = run(&mut p, Request::read(7, 1));
        assert_eq!(d.hit, Some(LOWER));
        assert_eq!(d.actions, vec![Action::Move { key: 7, size: 1, from: LOWER, to: UPPER }]);
        assert_eq!(run(&mut p, Request::read(7, 1)).hit, Some(UPPER));
        // Another block earns its way up: DRAM's victim (7) goes back to SCM first.
        run(&mut p, Request::read(8, 1));
        for _ in 0..2 {
            run(&mut p, Request::read(8, 1));
        }
        let d = run(&mut p, Request::read(8, 1));
        assert_eq!(
            d.actions,
            vec![
                Action::Move { key: 7, size: 1, from: UPPER, to: LOWER },
                Action::Move { key: 8, size: 1, from: LOWER, to: UPPER },
            ]
        );
    }

    #[test]
    fn bidirectional_inserts_in_dram_and_promotes_after_threshold_hits_in_scm() {
        let mut p = hybrid("bidirectional:4", 1, 4);
        run(&mut p, Request::read(1, 1));
        let d = run(&mut p, Request::read(2, 1));
        assert_eq!(d.actions[0], Action::Move { key: 1, size: 1, from: UPPER, to: LOWER });
        for _ in 0..4 {
            assert!(run(&mut p, Request::read(1, 1)).actions.is_empty(), "four hits stay in SCM");
        }
        let d = run(&mut p, Request::read(1, 1));
        assert_eq!(
            d.actions,
            vec![
                Action::Move { key: 2, size: 1, from: UPPER, to: LOWER },
                Action::Move { key: 1, size: 1, from: LOWER, to: UPPER },
            ]
        );
        assert!(Placement::parse("bidirectional:x").is_err());
        assert!(Placement::parse("scm-last").is_err());
        assert_eq!(Placement::parse("scm-first").unwrap(), Placement::ScmFirst { threshold: 2 });
    }
}
