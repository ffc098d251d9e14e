//! The [`Policy`] trait: what every policy is, one deterministic state machine over a
//! hierarchy of one or more tiers, and how a policy that wraps another hands it the parts it
//! does not change (`delegate_to_inner!`).

use tiercache_core::{Capacity, Decision, Interval, Key, Request, TierId};

use crate::placed;

/// A cache policy: one deterministic state machine over a hierarchy of one or more tiers.
pub trait Policy {
    /// Decides one request. `out` is cleared by the caller; the policy sets `out.hit` and
    /// appends the actions that carry its decision out, in the order they must be applied.
    fn decide(&mut self, req: &Request, out: &mut Decision);

    /// Periodic work due at `now_us` (LFRU's sweep), done between requests: the engine's
    /// background worker calls it so an idle cache still keeps its schedule. Appends the
    /// actions to `out`. Most policies have none.
    fn tick(&mut self, _now_us: u64, _out: &mut Decision) {}

    /// Holds (`true`) or lets go the evictions a policy makes of its own accord rather than to
    /// make room for an insert (LFRU's periodic sweep): NVCache abstains from admitting and
    /// from evicting while its overhead bypass ratio is over target (Writes Hurt, section 3.2).
    /// Policies without such evictions ignore it.
    fn hold_evictions(&mut self, _hold: bool) {}

    /// The measurement of the interval just ended (throughput, latency, hit counts), for
    /// policies with a controller that adapts to it (NHC's scheduler). Wrappers pass it on to
    /// the policy they wrap. Most policies ignore it.
    fn observe(&mut self, _interval: &Interval) {}

    /// A hint that `key` will be decided on soon: a policy may prefetch its metadata into the
    /// CPU cache. It must not change any state a decision depends on.
    #[inline]
    fn prefetch(&self, _key: Key) {}

    /// Takes back a block a restarted cache found on its media: `key`, of `size`, in `tier`,
    /// dirty or clean. The engine restores blocks oldest first, so a policy that orders by
    /// recency ends up in the order they were last written. True if the policy now holds the
    /// key in `tier`; the actions in `out` are what it did to make room (evictions,
    /// demotions), for the caller to apply. No admission filter is asked: the block was
    /// admitted before the restart. The default takes nothing (the block is dropped, and the
    /// cache restarts cold for that policy).
    fn restore(
        &mut self,
        _key: Key,
        _size: u32,
        _tier: TierId,
        _dirty: bool,
        _out: &mut Decision,
    ) -> bool {
        false
    }

    /// Writes back every dirty block, or those in `tier` if given: appends a `WriteBack` for
    /// each and counts it clean from then on. The engine asks it of a sync (the dirty blocks of
    /// volatile tiers, which a crash would lose) and of a clean stop (all of them). Policies
    /// that keep nothing dirty have nothing to do.
    fn write_back(&mut self, _tier: Option<TierId>, _out: &mut Decision) {}

    /// Makes the dirty blocks of the volatile `tier` durable, for a sync: the engine asks it
    /// with `below`, the nearest persistent tier under it, if there is one. A policy may move
    /// them there, still dirty (a `Move`, the tier below making room as the policy does), or
    /// write them back; the default writes them back (`write_back`). Blocks of `tier` still
    /// dirty after the actions in `out` are written back by the engine.
    fn persist(&mut self, tier: TierId, _below: Option<TierId>, _now_us: u64, out: &mut Decision) {
        self.write_back(Some(tier), out)
    }

    /// Moves the resident `key` down to tier `to`, below its own, as if its tier had evicted
    /// it and the tier below taken it (that tier's victims go as the policy's do). True if it
    /// moved: `out` then holds a `Move` of it, after what made room. False (and nothing in
    /// `out`) if the policy has no such move, `key` is not resident above `to`, or `to` will
    /// not take it. A block cache's sync asks it through `persist`; most policies have none.
    fn move_down(&mut self, _key: Key, _to: TierId, _now_us: u64, _out: &mut Decision) -> bool {
        false
    }

    /// Where a resident key is and its stored size, without touching any state.
    fn peek(&self, key: Key) -> Option<(TierId, u32)>;

    /// Number of tiers the policy manages.
    fn tier_count(&self) -> usize;

    /// Capacity of a tier.
    fn capacity(&self, tier: TierId) -> Capacity;

    /// Space of a tier in use, in the unit of its capacity.
    fn used(&self, tier: TierId) -> u64;

    /// Objects resident in a tier.
    fn resident(&self, tier: TierId) -> u64;

    /// A short name with the parameters that matter, e.g. `s3fifo(small=0.1)`.
    fn label(&self) -> String;

    /// The set-associative policy running `tier`, when one does: it places each key in a
    /// slot of its own choosing, which the engine stores the block at (set-associative).
    fn placement(&mut self, _tier: TierId) -> Option<&mut dyn placed::PlacedSlots> {
        None
    }

    /// As [`placement`](Self::placement), to read.
    fn placement_ref(&self, _tier: TierId) -> Option<&dyn placed::PlacedSlots> {
        None
    }

    /// Whether the policy's hits are *quiet*: a lookup or a read that hits in tier 0 decides a
    /// hit in tier 0 with no actions and nothing sent elsewhere, both update the policy's state
    /// alike, a lookup of a key not resident changes nothing, and there is no periodic work.
    /// A caller may then serve such hits first and tell the policy later, as lookups, in
    /// order, before any other request (the engine does, BP-Wrapper style), and the policy
    /// decides exactly as if told at once. True of the classic single-tier policies: their
    /// `access` ignores the op and leaves ghosts alone, a lookup hit of the size stored never
    /// resizes, and a lookup miss admits nothing (`SingleTier::decide`); a test checks it.
    /// An Open CAS mode keeps its policy's quiet hits in the clean modes without sequential
    /// cutoff (`cas::Cas`).
    fn quiet_hits(&self) -> bool {
        false
    }

    /// The policy's adaptive knobs now (ARC's target size, Hibachi's desired sizes...), for
    /// time series. Most policies have none.
    fn knobs(&self) -> Vec<(&'static str, f64)> {
        Vec::new()
    }
}

/// For a policy that wraps another (`inner: Box<AnyPolicy>`) and changes only its decisions:
/// the tiers, their contents and prefetching are the inner policy's. With `restore`, restored
/// blocks are the inner policy's too.
macro_rules! delegate_to_inner {
    (restore) => {
        fn restore(
            &mut self,
            key: tiercache_core::Key,
            size: u32,
            tier: tiercache_core::TierId,
            dirty: bool,
            out: &mut tiercache_core::Decision,
        ) -> bool {
            self.inner.restore(key, size, tier, dirty, out)
        }

        fn write_back(
            &mut self,
            tier: Option<tiercache_core::TierId>,
            out: &mut tiercache_core::Decision,
        ) {
            self.inner.write_back(tier, out)
        }

        fn persist(
            &mut self,
            tier: tiercache_core::TierId,
            below: Option<tiercache_core::TierId>,
            now_us: u64,
            out: &mut tiercache_core::Decision,
        ) {
            self.inner.persist(tier, below, now_us, out)
        }

        $crate::policy::delegate_to_inner!();
    };
    () => {
        #[inline]
        fn prefetch(&self, key: tiercache_core::Key) {
            self.inner.prefetch(key);
        }

        fn peek(&self, key: tiercache_core::Key) -> Option<(tiercache_core::TierId, u32)> {
            self.inner.peek(key)
        }

        fn move_down(
            &mut self,
            key: tiercache_core::Key,
            to: tiercache_core::TierId,
            now_us: u64,
            out: &mut tiercache_core::Decision,
        ) -> bool {
            self.inner.move_down(key, to, now_us, out)
        }

        fn tier_count(&self) -> usize {
            self.inner.tier_count()
        }

        fn capacity(&self, tier: tiercache_core::TierId) -> tiercache_core::Capacity {
            self.inner.capacity(tier)
        }

        fn used(&self, tier: tiercache_core::TierId) -> u64 {
            self.inner.used(tier)
        }

        fn resident(&self, tier: tiercache_core::TierId) -> u64 {
            self.inner.resident(tier)
        }

        fn placement(
            &mut self,
            tier: tiercache_core::TierId,
        ) -> Option<&mut dyn $crate::placed::PlacedSlots> {
            self.inner.placement(tier)
        }

        fn placement_ref(
            &self,
            tier: tiercache_core::TierId,
        ) -> Option<&dyn $crate::placed::PlacedSlots> {
            self.inner.placement_ref(tier)
        }
    };
}

pub(crate) use delegate_to_inner;
