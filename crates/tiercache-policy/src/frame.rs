//! The frame shared by every single-tier policy. An [`Eviction`] is the policy proper (which key
//! to keep, which to drop); [`SingleTier`] turns it into a [`Policy`] by handling what every
//! policy does the same way:
//!
//! - a read or write of a resident key is a hit; a write hit updates the copy in place
//!   (write-through, so the copy stays clean);
//! - a miss of either kind is admitted unless the object can never fit, an admission filter
//!   declines it, or the policy itself declines it; then victims are evicted until it fits;
//! - a delete invalidates the key (remove-on-free);
//! - a lookup (look-aside get) that misses changes nothing: a following read decides as if the
//!   lookup had not happened, which is how the engine's read-through matches the simulator.
//!
//! Invariant: after every decision the used space is at most the capacity.

use tiercache_core::{Action, Capacity, Decision, Key, Op, RejectReason, Request, TierId};

use crate::admission::Admission;
use crate::policy::Policy;

/// What a single-tier policy tells the registry (`registry.rs`, where one line names it):
/// its parameters, how to build it over a capacity, and what callers must know of it. Written
/// in the policy's own file, beside its [`Eviction`].
pub trait Registered: Eviction + Sized {
    /// Its parameters (serde, with the paper's defaults), set from option strings through
    /// [`crate::params`]; `()` for a policy without any.
    type Config: Clone
        + std::fmt::Debug
        + Default
        + PartialEq
        + serde::Serialize
        + serde::de::DeserializeOwned;

    /// Settings besides the defaults that the conformance suite also runs, as options
    /// (`"bits=2"`).
    const VARIANTS: &'static [&'static str] = &[];

    /// Whether its hits are quiet ([`Policy::quiet_hits`]).
    const QUIET_HITS: bool;

    /// Whether its order counts hits (LFU's counts, S3-FIFO's saturating counters). Such a
    /// policy is told every hit whatever the hit rule (`crate::told`): told only a key's
    /// first hit an epoch, it would count something else, and lose up to 2.2 (LFU) and 0.7
    /// (S3-FIFO) points of hit ratio on the traces in `data/` (docs/RESULTS.md).
    const COUNTS_HITS: bool = false;

    /// Whether it reads request times (periodic work), so callers must supply them.
    const USES_TIME: bool = false;

    /// Whether it reads `next_access` (the future), so the stream must be annotated; such a
    /// policy runs no tier of a hierarchy.
    const NEEDS_FUTURE: bool = false;

    /// Checks the parameters; an error names the policy and the parameter.
    fn validate(_config: &Self::Config) -> Result<(), crate::error::PolicyError> {
        Ok(())
    }

    /// The policy over `capacity` (parameters valid), or why it cannot run over it.
    fn build(config: &Self::Config, capacity: Capacity) -> Result<Self, crate::error::PolicyError>;
}

/// Where an [`Eviction`] reports blocks it drops outside the frame's own eviction loop (ARC's
/// ghostless eviction, LFRU's sweep).
pub struct Sink<'a> {
    decision: &'a mut Decision,
    tier: TierId,
}

impl Sink<'_> {
    pub fn new(decision: &mut Decision, tier: TierId) -> Sink<'_> {
        Sink { decision, tier }
    }

    pub fn evicted(&mut self, key: Key, size: u32) {
        self.decision.push(Action::Evict { tier: self.tier, key, size });
    }
}

/// The policy-specific half of a single-tier policy. Sizes are bytes; `used` is in the unit of
/// the capacity the policy was built with.
pub trait Eviction {
    /// Periodic work done before the lookup (LFRU's sweep).
    fn tick(&mut self, _req: &Request, _sink: &mut Sink) {}

    /// Each request decided, in the stream's order, before its lookup (a periodic tick is not
    /// a request): the clock of a policy that weighs how far off a key's next request is.
    fn request(&mut self, _req: &Request) {}

    /// A hint that `key` comes soon; prefetch its metadata. Changes nothing.
    #[inline]
    fn prefetch(&self, _key: Key) {}

    /// The stored size of a resident key, without touching its state.
    fn peek(&self, key: Key) -> Option<u32>;

    /// Looks the key up. On a hit, updates the key's state and returns the stored size.
    fn access(&mut self, req: &Request) -> Option<u32>;

    /// Whether the policy itself declines a missed key that fits and passed the filters.
    /// `needs_room` says whether admitting it would require evictions.
    fn admit(&mut self, _req: &Request, _needs_room: bool) -> Result<(), RejectReason> {
        Ok(())
    }

    /// Bookkeeping for a missed key about to be inserted (ghost lists, adaptation). May drop
    /// blocks through `sink`.
    fn prepare_insert(&mut self, _req: &Request, _sink: &mut Sink) {}

    /// Room for a restored key that the capacity alone does not make (a set-associative
    /// policy's full set). May drop blocks through `sink`.
    fn prepare_restore(&mut self, _req: &Request, _sink: &mut Sink) {}

    /// Chooses one victim, removes it and returns it; `None` only when empty.
    fn evict(&mut self, incoming: &Request) -> Option<(Key, u32)>;

    /// Inserts a missed key. The frame made room first.
    fn insert(&mut self, req: &Request);

    /// Removes a key if resident and returns its size.
    fn remove(&mut self, key: Key) -> Option<u32>;

    /// Space in use, in the capacity's unit.
    fn used(&self) -> u64;

    /// Resident objects.
    fn resident(&self) -> u64;

    fn label(&self) -> String;

    /// The slots of a policy that chooses each key's slot (set-associative); no other.
    fn placement(&mut self) -> Option<&mut dyn crate::placed::PlacedSlots> {
        None
    }

    fn placement_ref(&self) -> Option<&dyn crate::placed::PlacedSlots> {
        None
    }

    /// Adaptive knobs, for time series.
    fn knobs(&self) -> Vec<(&'static str, f64)> {
        Vec::new()
    }
}

/// A single-tier [`Policy`] made of an [`Eviction`] and an [`Admission`] filter.
pub struct SingleTier<E> {
    eviction: E,
    capacity: Capacity,
    admission: Admission,
    tier: TierId,
}

impl<E: Eviction> SingleTier<E> {
    pub fn new(eviction: E, capacity: Capacity, admission: Admission) -> SingleTier<E> {
        SingleTier { eviction, capacity, admission, tier: TierId(0) }
    }

    pub fn eviction(&self) -> &E {
        &self.eviction
    }

    pub fn eviction_mut(&mut self) -> &mut E {
        &mut self.eviction
    }

    fn sink<'a>(&self, out: &'a mut Decision) -> Sink<'a> {
        Sink { decision: out, tier: self.tier }
    }

    fn on_miss(&mut self, req: &Request, out: &mut Decision) {
        let reject = |out: &mut Decision, reason| {
            out.push(Action::Reject { key: req.key, size: req.size, reason });
        };
        if !self.capacity.fits(req.size) {
            return reject(out, RejectReason::TooLarge);
        }
        if let Err(reason) = self.admission.admit(req) {
            return reject(out, reason);
        }
        let needs_room =
            self.eviction.used() + self.capacity.charge(req.size) > self.capacity.amount;
        if let Err(reason) = self.eviction.admit(req, needs_room) {
            return reject(out, reason);
        }
        self.eviction.prepare_insert(req, &mut self.sink(out));
        self.make_room(req, out);
        self.eviction.insert(req);
        let (tier, key, size) = (self.tier, req.key, req.size);
        out.push(Action::Insert { tier, key, size, dirty: false });
    }

    fn make_room(&mut self, req: &Request, out: &mut Decision) {
        let charge = self.capacity.charge(req.size);
        while self.eviction.used() + charge > self.capacity.amount {
            let (key, size) =
                self.eviction.evict(req).expect("a policy over capacity has something to evict");
            out.push(Action::Evict { tier: self.tier, key, size });
        }
    }

    /// A hit whose request size differs from the stored one: the copy is replaced by one of the
    /// new size, making room if it grew, or dropped if it can no longer fit.
    fn on_resize(&mut self, req: &Request, stored: u32, out: &mut Decision) {
        self.eviction.remove(req.key);
        if !self.capacity.fits(req.size) {
            let (tier, key) = (self.tier, req.key);
            out.push(Action::Invalidate { tier, key, size: stored });
            return;
        }
        self.make_room(req, out);
        self.eviction.insert(req);
        let (tier, key, size) = (self.tier, req.key, req.size);
        out.push(Action::Update { tier, key, size, dirty: false });
    }
}

impl<E: Eviction> Policy for SingleTier<E> {
    fn peek(&self, key: Key) -> Option<(TierId, u32)> {
        self.eviction.peek(key).map(|size| (self.tier, size))
    }

    fn tick(&mut self, now_us: u64, out: &mut Decision) {
        let at = Request::new(now_us, 0, 0, Op::Lookup);
        self.eviction.tick(&at, &mut self.sink(out));
    }

    #[inline]
    fn prefetch(&self, key: Key) {
        self.eviction.prefetch(key);
    }

    fn decide(&mut self, req: &Request, out: &mut Decision) {
        self.eviction.request(req);
        self.eviction.tick(req, &mut self.sink(out));
        if req.op == Op::Delete {
            if let Some(size) = self.eviction.remove(req.key) {
                out.push(Action::Invalidate { tier: self.tier, key: req.key, size });
            }
            return;
        }
        match self.eviction.access(req) {
            Some(stored) => {
                out.hit = Some(self.tier);
                if stored != req.size {
                    self.on_resize(req, stored, out);
                } else if req.op == Op::Write {
                    let (tier, key, size) = (self.tier, req.key, req.size);
                    out.push(Action::Update { tier, key, size, dirty: false });
                }
            }
            None if req.op == Op::Lookup => {}
            None => self.on_miss(req, out),
        }
    }

    /// A restored block is inserted as a miss would be, less the admission filters; a dirty
    /// one is refused (the frame's copies are all clean: dirty blocks are a cache mode's).
    fn restore(
        &mut self,
        key: Key,
        size: u32,
        tier: TierId,
        dirty: bool,
        out: &mut Decision,
    ) -> bool {
        let req = Request::new(0, key, size, Op::Write);
        if tier != self.tier
            || dirty
            || !self.capacity.fits(size)
            || self.eviction.peek(key).is_some()
        {
            return false;
        }
        self.eviction.prepare_restore(&req, &mut self.sink(out));
        self.make_room(&req, out);
        self.eviction.insert(&req);
        true
    }

    fn tier_count(&self) -> usize {
        1
    }

    fn capacity(&self, _tier: TierId) -> Capacity {
        self.capacity
    }

    fn used(&self, _tier: TierId) -> u64 {
        self.eviction.used()
    }

    fn resident(&self, _tier: TierId) -> u64 {
        self.eviction.resident()
    }

    fn placement(&mut self, tier: TierId) -> Option<&mut dyn crate::placed::PlacedSlots> {
        (tier == self.tier).then(|| self.eviction.placement()).flatten()
    }

    fn placement_ref(&self, tier: TierId) -> Option<&dyn crate::placed::PlacedSlots> {
        (tier == self.tier).then(|| self.eviction.placement_ref()).flatten()
    }

    fn knobs(&self) -> Vec<(&'static str, f64)> {
        self.eviction.knobs()
    }

    fn label(&self) -> String {
        match self.admission.label() {
            None => self.eviction.label(),
            Some(filter) => format!("{}+{}", self.eviction.label(), filter),
        }
    }
}
