//! How often a policy hears of its hits: every one ([`HitRule::Exact`]), or a key's first hit
//! in each epoch of insertions ([`HitRule::Epochs`]).
//!
//! Telling a policy of every hit costs a concurrent cache more than the hit itself: the hit
//! must be logged, the policy's lock taken and its state written from whichever core served
//! the hit (docs/history/RESULTS-2026-11.md, "The floor under a hit"). Production caches do
//! not do it. CacheLib moves an item up its LRU at most once per refresh interval
//! (`lruRefreshTime`, 60 s by default), and CLOCK sets a bit. [`Told`] is such a rule in
//! logical time, so that the simulator replays it exactly:
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
//!   policy's hit does ([`crate::policy::Policy::quiet_hits`]); only the policy's order misses it.
//!
//! For LRU this bounds the error: a key told in this epoch has at most one epoch of insertions
//! (plus the other keys' told hits) ahead of it, so it is evicted no earlier than LRU would
//! evict a key last hit an epoch earlier. A key's epoch is kept as a 7-bit tag, as the engine's
//! readers keep it beside the key's slot (`tiercache_engine::tier::optimistic`): tags repeat every
//! [`TAGS`] epochs, and a key whose last told hit is exactly a multiple of that behind has its
//! next hit taken as told. The simulator and the engine share the tags, so they still decide
//! alike.
//!
//! Only policies with quiet hits are wrapped: for the others, where a hit decides more than
//! its own bookkeeping, every hit is told.

use tiercache_core::{Action, Capacity, Decision, KeyMap, Op, Request, TierId, Unit};

use crate::error::PolicyError;
use crate::policy::Policy;

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
    /// hit ratio on the traces in `data/` (docs/history/RESULTS-2026-11.md, "Hits told once an
    /// epoch").
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
    crate::policy::delegate_to_inner!(restore);

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
