//! How often a policy hears of its hits: every one ([`HitRule::Exact`]), or a key's first hit
//! in each epoch of insertions ([`HitRule::Epochs`]).
//!
//! Telling a policy of every hit costs a concurrent cache more than the hit itself: the hit
//! must be logged, the policy's lock taken and its state written from whichever core served
//! the hit (docs/RESULTS.md, "The floor under a hit"). Production caches do not do it.
//! CacheLib moves an item up its LRU at most once per refresh interval (`lruRefreshTime`, 60 s
//! by default), and CLOCK sets a bit. [`Told`] is such a rule in logical time, so that the
//! simulator replays it exactly:
//!
//! - The cache's time is counted in insertions into the top tier. An *epoch* is
//!   `capacity / divisor` of them (the top tier's capacity in objects; in 4 KiB blocks when it
//!   counts bytes), so it scales with how fast the cache turns over, not with how often it is
//!   hit.
//! - A read hit in the top tier is told to the policy unless the key's last told hit was in the
//!   current epoch. A key's first hit after it was inserted or written is always told: the
//!   policies that learn from a second access (ARC's move to T2, CLOCK's and S3-FIFO's bit)
//!   see it.
//! - A hit that is not told decides a hit in the top tier and nothing else, as a quiet
//!   policy's hit does ([`crate::Policy::quiet_hits`]); only the policy's order misses it.
//!
//! For LRU this bounds the error: a key told in this epoch has at most one epoch of insertions
//! (plus the other keys' told hits) ahead of it, so it is evicted no earlier than LRU would
//! evict a key last hit an epoch earlier. A key's epoch is kept as a 7-bit tag, as the engine's
//! readers keep it beside the key's slot (`tiercache_engine::optimistic`): tags repeat every
//! [`TAGS`] epochs, and a key whose last told hit is exactly a multiple of that behind has its
//! next hit taken as told. The simulator and the engine share the tags, so they still decide
//! alike.
//!
//! Only policies with quiet hits are wrapped: for the others, where a hit decides more than
//! its own bookkeeping, every hit is told.

use tiercache_core::{Action, Capacity, Decision, KeyMap, Op, Request, TierId, Unit};

use crate::{Policy, PolicyError};

/// Epoch tags: 1 to `TAGS`; 0 is no tag.
pub const TAGS: u64 = 127;

/// How a policy with quiet hits is told of read hits in its top tier.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HitRule {
    /// Every hit, in order (the simulator's default, and the engine's equivalence tests').
    Exact,
    /// A key's first hit in each epoch of `capacity / divisor` insertions (see the module).
    Epochs { divisor: u32 },
}

impl HitRule {
    /// The engine's default: epochs of 1/32 of the top tier. It costs at most 0.04 points of
    /// hit ratio on the traces in `data/` (docs/RESULTS.md, "Hits told once an epoch").
    pub const ENGINE: HitRule = HitRule::Epochs { divisor: 32 };

    /// `exact` or `epochs[:DIVISOR]` (32 if not given).
    pub fn parse(text: &str) -> Result<HitRule, PolicyError> {
        let bad = |reason: String| PolicyError::setting("hit_rule", reason);
        match text.trim().split_once(':') {
            None if text.trim() == "exact" => Ok(HitRule::Exact),
            None if text.trim() == "epochs" => Ok(HitRule::ENGINE),
            Some(("epochs", n)) => match n.trim().parse::<u32>() {
                Ok(divisor) if divisor > 0 => Ok(HitRule::Epochs { divisor }),
                _ => Err(bad(format!("'{text}': the divisor is a whole number above 0"))),
            },
            _ => Err(bad(format!("'{text}': use exact or epochs[:DIVISOR], e.g. epochs:32"))),
        }
    }

    /// As written to `parse`.
    pub fn label(&self) -> String {
        match self {
            HitRule::Exact => "exact".into(),
            HitRule::Epochs { divisor } => format!("epochs:{divisor}"),
        }
    }
}

impl std::fmt::Display for HitRule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.label())
    }
}

/// A policy with quiet hits, told of a key's read hits in its top tier once an epoch (see the
/// module).
pub struct Told<P> {
    inner: P,
    /// Insertions an epoch.
    every: u64,
    /// Insertions into the top tier so far in this epoch.
    inserted: u64,
    /// The current epoch's tag, 1 to `TAGS`.
    tag: u8,
    /// The tag of the epoch of each key's last told hit, for keys in the top tier.
    stamps: KeyMap<u8>,
    /// Hits decided without the policy.
    untold: u64,
}

impl<P: Policy> Told<P> {
    /// `inner` told by `divisor`'s epochs of its top tier's capacity.
    pub fn new(inner: P, divisor: u32) -> Told<P> {
        let every = epoch_length(inner.capacity(TierId(0)), divisor);
        Told { inner, every, inserted: 0, tag: 1, stamps: KeyMap::default(), untold: 0 }
    }

    /// The current epoch's tag (1 to [`TAGS`]): a key whose last told hit carries it has its
    /// read hits decided without the policy.
    #[inline]
    pub fn tag(&self) -> u8 {
        self.tag
    }

    /// Insertions an epoch.
    pub fn epoch_length(&self) -> u64 {
        self.every
    }

    /// Hits decided without the policy so far.
    pub fn untold(&self) -> u64 {
        self.untold
    }

    fn inserted_one(&mut self) {
        self.inserted += 1;
        if self.inserted == self.every {
            self.inserted = 0;
            self.tag = (self.tag as u64 % TAGS + 1) as u8;
        }
    }
}

/// Insertions an epoch: the capacity in objects (4 KiB blocks for bytes) over `divisor`, at
/// least one.
fn epoch_length(capacity: Capacity, divisor: u32) -> u64 {
    let objects = match capacity.unit {
        Unit::Objects => capacity.amount,
        Unit::Bytes => capacity.amount / 4096,
    };
    (objects / divisor.max(1) as u64).max(1)
}

impl<P: Policy> Policy for Told<P> {
    crate::delegate_to_inner!(restore);

    #[inline]
    fn decide(&mut self, req: &Request, out: &mut Decision) {
        let read = matches!(req.op, Op::Read | Op::Lookup);
        if read && self.stamps.get(&req.key) == Some(&self.tag) {
            out.hit = Some(TierId(0));
            self.untold += 1;
            return;
        }
        self.inner.decide(req, out);
        for action in &out.actions {
            match *action {
                Action::Insert { tier: TierId(0), key, .. } => {
                    self.stamps.remove(&key);
                    self.inserted_one();
                }
                Action::Evict { tier: TierId(0), key, .. }
                | Action::Invalidate { tier: TierId(0), key, .. }
                | Action::Move { from: TierId(0), key, .. } => {
                    self.stamps.remove(&key);
                }
                _ => {}
            }
        }
        if read && out.hit == Some(TierId(0)) {
            self.stamps.insert(req.key, self.tag);
        } else if req.op == Op::Write {
            self.stamps.remove(&req.key);
        }
    }

    fn tick(&mut self, now_us: u64, out: &mut Decision) {
        self.inner.tick(now_us, out);
    }

    fn observe(&mut self, interval: &tiercache_core::Interval) {
        self.inner.observe(interval);
    }

    fn label(&self) -> String {
        format!("{} (hits told once an epoch of {} insertions)", self.inner.label(), self.every)
    }

    fn quiet_hits(&self) -> bool {
        self.inner.quiet_hits()
    }

    fn knobs(&self) -> Vec<(&'static str, f64)> {
        self.inner.knobs()
    }
}

impl<P> Told<P> {
    /// The policy told.
    pub fn inner(&self) -> &P {
        &self.inner
    }
}

/// The tag of `key`'s last told hit, for tests.
#[cfg(test)]
fn stamped<P>(told: &Told<P>, key: tiercache_core::Key) -> Option<u8> {
    told.stamps.get(&key).copied()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{AnyPolicy, PolicyConfig};
    use tiercache_core::Key;

    fn lru(objects: u64, divisor: u32) -> Told<AnyPolicy> {
        let policy =
            AnyPolicy::from_config(&PolicyConfig::Lru, Capacity::objects(objects), &[], 0).unwrap();
        Told::new(policy, divisor)
    }

    fn decide(p: &mut Told<AnyPolicy>, key: Key, op: Op) -> Decision {
        let mut out = Decision::new();
        p.decide(&Request::new(0, key, 4096, op), &mut out);
        out
    }

    #[test]
    fn rules_parse_and_bad_ones_name_the_setting() {
        assert_eq!(HitRule::parse("exact").unwrap(), HitRule::Exact);
        assert_eq!(HitRule::parse("epochs").unwrap(), HitRule::ENGINE);
        assert_eq!(HitRule::parse("epochs:8").unwrap(), HitRule::Epochs { divisor: 8 });
        for bad in ["epochs:0", "epochs:x", "sometimes"] {
            let err = HitRule::parse(bad).unwrap_err().to_string();
            assert!(err.contains("hit_rule") && err.contains(bad), "{err}");
        }
        assert_eq!(HitRule::parse(&HitRule::ENGINE.label()).unwrap(), HitRule::ENGINE);
    }

    /// LRU over 8 objects, epochs of 2 insertions, worked by hand.
    #[test]
    fn a_key_is_told_its_first_hit_an_epoch_and_after_each_write() {
        let mut p = lru(8, 4);
        assert_eq!(p.epoch_length(), 2);
        decide(&mut p, 1, Op::Read); // miss, insert: 1 insertion of this epoch
        assert_eq!(stamped(&p, 1), None);
        decide(&mut p, 1, Op::Read); // first hit: told, stamped with the epoch
        assert_eq!((stamped(&p, 1), p.untold()), (Some(1), 0));
        let skipped = decide(&mut p, 1, Op::Lookup); // again in the same epoch: not told
        assert_eq!((skipped.hit, skipped.actions.len(), p.untold()), (Some(TierId(0)), 0, 1));
        decide(&mut p, 1, Op::Write); // a write is told and clears the stamp
        assert_eq!(stamped(&p, 1), None);
        decide(&mut p, 1, Op::Read);
        assert_eq!(p.untold(), 1, "the first hit after a write is told");
        decide(&mut p, 2, Op::Read); // second insertion: epoch 2 begins
        assert_eq!(p.tag(), 2);
        decide(&mut p, 1, Op::Read);
        assert_eq!((stamped(&p, 1), p.untold()), (Some(2), 1), "told again in a new epoch");
    }

    /// The rule changes LRU's order only within an epoch: key 1, hit early in the epoch and
    /// again late (not told), is evicted before key 2, hit once in between.
    #[test]
    fn an_untold_hit_leaves_the_key_where_its_told_hit_put_it() {
        let mut p = lru(3, 1); // epochs of 3 insertions
        for key in [1, 2, 3] {
            decide(&mut p, key, Op::Read); // fills the cache: epoch 2 begins
        }
        decide(&mut p, 1, Op::Read); // told: 1 is most recent
        decide(&mut p, 2, Op::Read); // told: 2 is most recent
        decide(&mut p, 1, Op::Read); // not told: exact LRU would put 1 ahead of 2
        let miss = decide(&mut p, 4, Op::Read);
        assert!(miss.actions.contains(&Action::Evict { tier: TierId(0), key: 3, size: 4096 }));
        let miss = decide(&mut p, 5, Op::Read);
        assert!(
            miss.actions.contains(&Action::Evict { tier: TierId(0), key: 1, size: 4096 }),
            "{miss:?}"
        );
    }

    #[test]
    fn an_evicted_key_loses_its_stamp_and_tags_wrap() {
        let mut p = lru(2, 2); // epochs of 1 insertion
        decide(&mut p, 1, Op::Read);
        decide(&mut p, 1, Op::Read);
        assert!(stamped(&p, 1).is_some());
        decide(&mut p, 2, Op::Read);
        decide(&mut p, 3, Op::Read); // evicts 1
        assert_eq!(stamped(&p, 1), None);
        for key in 4..4 + TAGS {
            decide(&mut p, key, Op::Read);
        }
        assert!((1..=TAGS as u8).contains(&p.tag()));
        assert_eq!(p.tag() as u64, 1 + (3 + TAGS) % TAGS, "130 insertions, a tag each");
    }
}
