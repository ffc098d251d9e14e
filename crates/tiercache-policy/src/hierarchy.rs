//! Tiers as one exclusive hierarchy: DRAM in front of slow memory (and, below it, any further
//! tiers such as flash), each tier run by any single-tier policy, with the admission placements
//! of Kassa et al. ("Improving Performance of Flash Based Key-Value Stores Using Storage Class
//! Memory as a Volatile Memory Extension", USENIX ATC'21, section 4). A lookup checks the tiers
//! in order; each tier's victims move to the tier below; the last tier's victims are dropped.
//!
//! - DRAM-first: a miss is inserted in DRAM; a hit in SCM is served there and not promoted.
//!   The paper found it the best placement on its read-dominated workloads and attributes
//!   that to the data moved between tiers; the simulator counts those bytes to check it.
//! - SCM-first(threshold): a miss is inserted in SCM (the second tier); a block hit more than
//!   `threshold` times while in SCM moves to DRAM (2 and 6 in the paper).
//! - Bidirectional(threshold): as DRAM-first, plus a block hit more than `threshold` times in
//!   SCM moves back to DRAM (4 in the paper).
//!
//! The paper has two tiers. With more, "SCM" reads "any tier below DRAM": a promoted block
//! goes to the top, and a block's hit count starts at zero each time it enters a lower tier.
//!
//! Large values ([`Hybrid::with_large_values`], off unless asked for): a miss of a value
//! larger than a set size goes to the tier below the top whatever the placement, and is never
//! promoted. Inserted at the top, such a value would push out as many bytes of smaller, more
//! often hit values, each then moved (written) to the tier below; AdaptSize (Berger et al.,
//! "AdaptSize: Orchestrating the Hot Object Memory Cache in a Content Delivery Network", NSDI
//! 2017, section 2) measures how much hit ratio a small memory tier loses to the few large
//! objects it admits. A size threshold is the simplest of the admission rules it compares.
//!
//! Invariants: a key is resident in at most one tier (exclusive); each tier stays within its
//! capacity; a demotion is a `Move` from a tier to the one below, preceded by the evictions
//! (or further demotions) that make room for it. A victim the tier below will not take (LFRU
//! when full, S3-FIFO for an object larger than its small queue) is dropped.

use serde::{Deserialize, Serialize};
use tiercache_core::{Action, Capacity, Decision, Key, KeyMap, Op, Request, TierId};

use crate::admission::Admission;
use crate::frame::{Eviction, Sink};
use crate::policy::Policy;

const UPPER: TierId = TierId(0);

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
    pub fn parse(text: &str) -> Result<Placement, crate::error::PolicyError> {
        let (name, arg) = match text.split_once(':') {
            Some((n, a)) => (n, Some(a)),
            None => (text, None),
        };
        let threshold = |default: u32| -> Result<u32, crate::error::PolicyError> {
            arg.map_or(Ok(default), |a| {
                a.parse().map_err(|_| {
                    crate::error::PolicyError::bad(name, "threshold", format!("cannot be '{a}'"))
                })
            })
        };
        Ok(match name {
            "dram-first" => Placement::DramFirst,
            "scm-first" => Placement::ScmFirst { threshold: threshold(2)? },
            "bidirectional" => Placement::Bidirectional { threshold: threshold(4)? },
            _ => {
                let known = "dram-first, scm-first[:T], bidirectional[:T]".to_string();
                return Err(crate::error::PolicyError::UnknownPolicy { name: text.into(), known });
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

/// The hybrid cache: two tiers (Kassa et al.), or more in order (DRAM, slow memory, flash).
pub struct Hybrid {
    tiers: Vec<Box<dyn Eviction + Send>>,
    capacities: Vec<Capacity>,
    admission: Admission,
    placement: Placement,
    /// Hits of each block since it entered a lower tier (placements that promote).
    scm_hits: KeyMap<u32>,
    /// Values larger than this many bytes start in the tier below the top (see the module).
    large_values: Option<u64>,
}

impl Hybrid {
    /// Tiers from the top (DRAM) down, each with its capacity; at least two.
    pub fn new(
        tiers: Vec<Box<dyn Eviction + Send>>,
        capacities: Vec<Capacity>,
        admission: Admission,
        placement: Placement,
    ) -> Hybrid {
        assert!(tiers.len() >= 2 && tiers.len() == capacities.len(), "two or more tiers");
        assert!(tiers.len() <= u8::MAX as usize, "tier ids are one byte");
        Hybrid {
            tiers,
            capacities,
            admission,
            placement,
            scm_hits: KeyMap::default(),
            large_values: None,
        }
    }

    /// Places a miss of a value larger than `bytes` in the tier below the top, never to be
    /// promoted (see the module).
    pub fn with_large_values(mut self, bytes: u64) -> Hybrid {
        self.large_values = Some(bytes);
        self
    }

    /// Whether a value of `size` bytes is large (see the module).
    fn large(&self, size: u32) -> bool {
        self.large_values.is_some_and(|bytes| size as u64 > bytes)
    }

    fn tier(t: usize) -> TierId {
        TierId(t as u8)
    }

    /// Makes room in tier `t` for `req` (its victims move one tier down, the last tier's are
    /// dropped) and inserts it there; false if the tier's policy will not take it. The caller
    /// has checked the admission of the top tier.
    fn place(&mut self, t: usize, req: &Request, out: &mut Decision) -> bool {
        let charge = self.charge(t, req.size);
        if t > 0 {
            let needs_room = self.tiers[t].used() + charge > self.capacities[t].amount;
            if !self.capacities[t].fits(req.size) || self.tiers[t].admit(req, needs_room).is_err() {
                return false;
            }
        }
        // Victims reported outside the eviction loop (ARC's ghostless eviction) move down
        // like the others.
        let mut early = Decision::new();
        self.tiers[t].prepare_insert(req, &mut Sink::new(&mut early, Self::tier(t)));
        for action in early.actions {
            match action {
                Action::Evict { key, size, .. } => self.demote(t, key, size, req.time_us, out),
                other => out.push(other),
            }
        }
        while self.tiers[t].used() + charge > self.capacities[t].amount {
            let (key, size) = self.tiers[t].evict(req).expect("a full tier has a victim");
            self.demote(t, key, size, req.time_us, out);
        }
        self.tiers[t].insert(req);
        if t > 0 && self.placement.promotion_threshold().is_some() {
            self.scm_hits.insert(req.key, 0);
        }
        true
    }

    /// Moves a victim of tier `t` to the tier below, or drops it from the last tier (or when
    /// the tier below will not take it).
    fn demote(&mut self, t: usize, key: Key, size: u32, time_us: u64, out: &mut Decision) {
        if !self.move_below(t, key, size, time_us, out) {
            out.push(Action::Evict { tier: Self::tier(t), key, size });
        }
    }

    /// Places a block that left tier `t` in the tier below (its victims moving on down) and
    /// says so with a `Move`; false, with nothing done there, if there is no tier below or it
    /// will not take the block.
    fn move_below(
        &mut self,
        t: usize,
        key: Key,
        size: u32,
        time_us: u64,
        out: &mut Decision,
    ) -> bool {
        self.scm_hits.remove(&key);
        let victim = Request::new(time_us, key, size, Op::Read);
        if t + 1 >= self.tiers.len() || !self.place(t + 1, &victim, out) {
            return false;
        }
        out.push(Action::Move { key, size, from: Self::tier(t), to: Self::tier(t + 1) });
        true
    }

    /// Counts a hit in a lower tier and moves the block to DRAM once it passes the threshold.
    fn on_lower_hit(&mut self, t: usize, req: &Request, stored: u32, out: &mut Decision) {
        let Some(threshold) = self.placement.promotion_threshold() else { return };
        if self.large(stored) {
            return;
        }
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
        self.tiers[t].remove(req.key);
        self.scm_hits.remove(&req.key);
        self.place(0, &up, out);
        out.push(Action::Move { key: req.key, size: stored, from: Self::tier(t), to: UPPER });
    }

    fn charge(&self, tier: usize, size: u32) -> u64 {
        self.capacities[tier].charge(size)
    }

    fn on_miss(&mut self, req: &Request, out: &mut Decision) {
        let reject = |out: &mut Decision, reason| {
            out.push(Action::Reject { key: req.key, size: req.size, reason })
        };
        let large = self.large(req.size);
        if !self.capacities[large as usize].fits(req.size) {
            return reject(out, tiercache_core::RejectReason::TooLarge);
        }
        if let Err(reason) = self.admission.admit(req) {
            return reject(out, reason);
        }
        let scm_first = matches!(self.placement, Placement::ScmFirst { .. });
        let first = (scm_first || large) as usize;
        if first == 0 {
            let needs_room =
                self.tiers[0].used() + self.charge(0, req.size) > self.capacities[0].amount;
            if let Err(reason) = self.tiers[0].admit(req, needs_room) {
                return reject(out, reason);
            }
        }
        if self.place(first, req, out) {
            let tier = Self::tier(first);
            out.push(Action::Insert { tier, key: req.key, size: req.size, dirty: false });
        } else {
            reject(out, tiercache_core::RejectReason::NoSpace);
        }
    }
}

impl Policy for Hybrid {
    /// Into the tier just below only, as an eviction from the key's tier would move it.
    fn move_down(&mut self, key: Key, to: TierId, now_us: u64, out: &mut Decision) -> bool {
        let Some((from, _)) = self.peek(key) else { return false };
        let t = from.index();
        if to.index() != t + 1 || to.index() >= self.tiers.len() {
            return false;
        }
        let Some(size) = self.tiers[t].remove(key) else { return false };
        if self.move_below(t, key, size, now_us, out) {
            return true;
        }
        // The tier below would not take it: back into the room it just left, as its tier's
        // newest block.
        self.tiers[t].insert(&Request::new(now_us, key, size, Op::Read));
        false
    }

    fn peek(&self, key: Key) -> Option<(TierId, u32)> {
        self.tiers
            .iter()
            .enumerate()
            .find_map(|(t, tier)| tier.peek(key).map(|s| (Self::tier(t), s)))
    }

    fn tick(&mut self, now_us: u64, out: &mut Decision) {
        let at = Request::new(now_us, 0, 0, Op::Lookup);
        for (t, tier) in self.tiers.iter_mut().enumerate() {
            tier.tick(&at, &mut Sink::new(out, Self::tier(t)));
        }
    }

    fn decide(&mut self, req: &Request, out: &mut Decision) {
        for (t, tier) in self.tiers.iter_mut().enumerate() {
            tier.tick(req, &mut Sink::new(out, Self::tier(t)));
        }
        if req.op == Op::Delete {
            self.scm_hits.remove(&req.key);
            for (t, tier) in self.tiers.iter_mut().enumerate() {
                if let Some(size) = tier.remove(req.key) {
                    out.push(Action::Invalidate { tier: Self::tier(t), key: req.key, size });
                }
            }
            return;
        }
        for t in 0..self.tiers.len() {
            if let Some(stored) = self.tiers[t].access(req) {
                let tier = Self::tier(t);
                out.hit = Some(tier);
                if req.op == Op::Write {
                    // The copy keeps the size it was admitted with (block caches: fixed sizes).
                    out.push(Action::Update { tier, key: req.key, size: stored, dirty: false });
                }
                if t > 0 {
                    self.on_lower_hit(t, req, stored, out);
                }
                return;
            }
        }
        if req.op != Op::Lookup {
            self.on_miss(req, out);
        }
    }

    /// A restored block goes into its tier as a block moving in would (its tier's victims
    /// move down). Dirty blocks are refused: the hierarchy's copies are all clean.
    fn restore(
        &mut self,
        key: Key,
        size: u32,
        tier: TierId,
        dirty: bool,
        out: &mut Decision,
    ) -> bool {
        let t = tier.index();
        if dirty || t >= self.tiers.len() || self.peek(key).is_some() {
            return false;
        }
        let req = Request::new(0, key, size, Op::Write);
        if t == 0 && !self.capacities[0].fits(size) {
            return false;
        }
        self.place(t, &req, out)
    }

    #[inline]
    fn prefetch(&self, key: Key) {
        self.tiers[0].prefetch(key);
    }

    fn tier_count(&self) -> usize {
        self.tiers.len()
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

    fn placement(&mut self, tier: TierId) -> Option<&mut dyn crate::placed::PlacedSlots> {
        self.tiers.get_mut(tier.index())?.placement()
    }

    fn placement_ref(&self, tier: TierId) -> Option<&dyn crate::placed::PlacedSlots> {
        self.tiers.get(tier.index())?.placement_ref()
    }

    fn label(&self) -> String {
        let tiers: Vec<String> = self.tiers.iter().map(|t| t.label()).collect();
        format!("{}({})", self.placement.label(), tiers.join(" > "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LOWER: TierId = TierId(1);
    use crate::registry::{AnyPolicy, PolicyConfig};

    fn run(policy: &mut AnyPolicy, req: Request) -> Decision {
        let mut d = Decision::new();
        policy.decide(&req, &mut d);
        d
    }

    /// The implementation audit of Kassa et al.'s placements (ATC'21, section 4.2; the
    /// transcription in `shared/papers` stops at its first lines, so the rules are as its
    /// README summarises them), each replayed by hand, every decision checked; this test and
    /// the two below. DRAM-first: "insert in DRAM, DRAM's LRU victims move to SCM, SCM's LRU
    /// victims are dropped, no promotion".
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
    fn a_large_value_starts_below_dram_and_is_never_promoted() {
        let caps = [Capacity::bytes(8), Capacity::bytes(64)];
        let placement = Placement::Bidirectional { threshold: 0 };
        let lru = PolicyConfig::Lru;
        let policy = AnyPolicy::hybrid(placement, &lru, &lru, caps, &[], 0).unwrap();
        let AnyPolicy::Hybrid(hybrid) = policy else { panic!("a hierarchy") };
        let mut p = AnyPolicy::Hybrid(Box::new(hybrid.with_large_values(4)));
        // Small values start in DRAM; one of 5 bytes (over the limit) below it, and one of 16,
        // which DRAM could not hold at all, too, where it would be refused as too large.
        let d = run(&mut p, Request::read(1, 4));
        assert_eq!(d.actions, vec![Action::Insert { tier: UPPER, key: 1, size: 4, dirty: false }]);
        for (key, size) in [(2, 5), (3, 16)] {
            let d = run(&mut p, Request::read(key, size));
            assert_eq!(d.actions, vec![Action::Insert { tier: LOWER, key, size, dirty: false }]);
        }
        // Hits in the tier below leave a large value there, however many.
        for _ in 0..3 {
            assert_eq!(run(&mut p, Request::read(2, 5)).actions, vec![]);
        }
        assert_eq!(p.peek(2), Some((LOWER, 5)));
        // A small value pushed down moves up at its next hit (this placement promotes at once).
        run(&mut p, Request::read(4, 4));
        run(&mut p, Request::read(5, 4));
        assert_eq!(p.peek(1), Some((LOWER, 4)));
        let d = run(&mut p, Request::read(1, 4));
        assert!(d.actions.contains(&Action::Move { key: 1, size: 4, from: LOWER, to: UPPER }));
        // Too large for the tier below too: refused.
        assert_eq!(
            run(&mut p, Request::read(9, 65)).actions[0].clone(),
            Action::Reject { key: 9, size: 65, reason: tiercache_core::RejectReason::TooLarge }
        );
    }

    #[test]
    fn with_three_tiers_victims_cascade_down_and_the_last_tiers_drop() {
        let tiers = [
            (PolicyConfig::Lru, Capacity::objects(1)),
            (PolicyConfig::Lru, Capacity::objects(1)),
            (PolicyConfig::Fifo, Capacity::objects(1)),
        ];
        let mut p = AnyPolicy::hierarchy(Placement::DramFirst, &tiers, &[], 0).unwrap();
        const FLASH: TierId = TierId(2);
        for key in [1, 2, 3] {
            run(&mut p, Request::read(key, 1));
        }
        // 1 went DRAM > SCM > flash, 2 DRAM > SCM; 3 is in DRAM. 4 pushes everything down one
        // tier: flash makes room first, then SCM, then DRAM.
        let d = run(&mut p, Request::read(4, 1));
        assert_eq!(
            d.actions,
            vec![
                Action::Evict { tier: FLASH, key: 1, size: 1 },
                Action::Move { key: 2, size: 1, from: LOWER, to: FLASH },
                Action::Move { key: 3, size: 1, from: UPPER, to: LOWER },
                Action::Insert { tier: UPPER, key: 4, size: 1, dirty: false },
            ]
        );
        assert_eq!(run(&mut p, Request::read(2, 1)).hit, Some(FLASH));
        assert_eq!(p.label(), "dram-first(lru > lru > fifo)");
        let one = [(PolicyConfig::Lru, Capacity::objects(1))];
        assert!(AnyPolicy::hierarchy(Placement::DramFirst, &one, &[], 0).is_err());
    }

    #[test]
    fn a_block_hit_often_in_flash_moves_to_dram() {
        let tiers = [
            (PolicyConfig::Lru, Capacity::objects(1)),
            (PolicyConfig::Lru, Capacity::objects(1)),
            (PolicyConfig::Lru, Capacity::objects(4)),
        ];
        let placement = Placement::Bidirectional { threshold: 1 };
        let mut p = AnyPolicy::hierarchy(placement, &tiers, &[], 0).unwrap();
        for key in [1, 2, 3] {
            run(&mut p, Request::read(key, 1));
        }
        assert_eq!(run(&mut p, Request::read(1, 1)).hit, Some(TierId(2)), "one hit stays");
        let d = run(&mut p, Request::read(1, 1));
        assert_eq!(d.hit, Some(TierId(2)));
        // DRAM's 3 moves to SCM, whose 2 moves to flash, then 1 goes to the top.
        assert_eq!(
            d.actions,
            vec![
                Action::Move { key: 2, size: 1, from: LOWER, to: TierId(2) },
                Action::Move { key: 3, size: 1, from: UPPER, to: LOWER },
                Action::Move { key: 1, size: 1, from: TierId(2), to: UPPER },
            ]
        );
    }

    /// Kassa's SCM-first (audit, see above): "insert in SCM, a block whose hit count while in
    /// SCM exceeds a threshold, 2 or 6, moves to DRAM; DRAM victims go back to SCM".
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

    /// Kassa's Bidirectional (audit, see above): "as DRAM-first, plus a demoted block whose hit
    /// count in SCM exceeds a threshold, 4, moves back to DRAM".
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
