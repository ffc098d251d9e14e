//! What a policy returns: where a request is served from and the list of actions that carry out
//! its decision. The simulator applies these to counters and device models; the engine applies
//! the same list to real media. Nothing here performs anything.
//!
//! Invariant of every action list: a dirty block is written back (`WriteBack`) before the action
//! that drops it (`Evict`), and evictions that make room for an insert come before the insert.

use serde::{Deserialize, Serialize};

use crate::request::Key;

/// A cache tier, numbered from the fastest (0, usually DRAM) down.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct TierId(pub u8);

impl TierId {
    pub const DRAM: TierId = TierId(0);

    pub fn index(self) -> usize {
        self.0 as usize
    }
}

/// Where data is read from or lands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Location {
    Tier(TierId),
    /// The capacity (backing) device behind every tier.
    Backing,
}

/// Why a policy declined to admit a missed key. Counted per reason.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum RejectReason {
    /// A probabilistic filter said no.
    Probability,
    /// The second-hit filter has not seen the key miss recently.
    FirstMiss,
    /// The object is larger than the size limit or than the whole tier.
    TooLarge,
    /// The tier is full and the policy evicts only on its own schedule (LFRU sweep).
    NoSpace,
    /// The policy's own choice that caching this key is worth less than not (Belady).
    NotWorthIt,
    /// The cache's write budget is spent: admissions and removals outweigh lookups (NVCache's
    /// overhead bypass).
    Throttled,
    /// The dataset still fits in DRAM, so the slower tier would only add writes (small-bypass).
    SmallDataset,
    /// Non-hierarchical caching has stopped admitting read misses: the cache tier already
    /// gives its peak, so new data would only move load onto it (Orthus `data_admit`).
    DataAdmitOff,
}

impl RejectReason {
    pub const ALL: [RejectReason; 8] = [
        RejectReason::Probability,
        RejectReason::FirstMiss,
        RejectReason::TooLarge,
        RejectReason::NoSpace,
        RejectReason::NotWorthIt,
        RejectReason::Throttled,
        RejectReason::SmallDataset,
        RejectReason::DataAdmitOff,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            RejectReason::Probability => "probability",
            RejectReason::FirstMiss => "first_miss",
            RejectReason::TooLarge => "too_large",
            RejectReason::NoSpace => "no_space",
            RejectReason::NotWorthIt => "not_worth_it",
            RejectReason::Throttled => "throttled",
            RejectReason::SmallDataset => "small_dataset",
            RejectReason::DataAdmitOff => "data_admit_off",
        }
    }

    pub fn index(self) -> usize {
        RejectReason::ALL.iter().position(|r| *r == self).unwrap_or(0)
    }
}

/// One step of a decision. Deliberately exhaustive: every applier (simulator, engine,
/// conformance shadow) must handle every action, so a new one cannot be silently ignored.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Action {
    /// Place the request's data (read from where it was served, or the written data) in `tier`.
    Insert { tier: TierId, key: Key, size: u32, dirty: bool },
    /// Overwrite the resident copy in `tier` in place (a write hit).
    Update { tier: TierId, key: Key, size: u32, dirty: bool },
    /// Move a resident block from one tier to another (promotion or demotion).
    Move { key: Key, size: u32, from: TierId, to: TierId },
    /// Drop a block to make room. A dirty block was written back earlier in the same list.
    Evict { tier: TierId, key: Key, size: u32 },
    /// Drop a block whose data is stale or freed.
    Invalidate { tier: TierId, key: Key, size: u32 },
    /// Write a dirty block to the backing device; it stays resident and becomes clean.
    WriteBack { tier: TierId, key: Key, size: u32 },
    /// The missed key was not admitted.
    Reject { key: Key, size: u32, reason: RejectReason },
}

impl Action {
    /// The key the action is about.
    pub fn key(&self) -> Key {
        match *self {
            Action::Insert { key, .. }
            | Action::Update { key, .. }
            | Action::Move { key, .. }
            | Action::Evict { key, .. }
            | Action::Invalidate { key, .. }
            | Action::WriteBack { key, .. }
            | Action::Reject { key, .. } => key,
        }
    }
}

/// A policy's answer to one request. Reused across requests so the hot path never allocates.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Decision {
    /// The tier the key was found in when the request arrived, if any.
    pub hit: Option<TierId>,
    /// A clean read hit that the policy serves from the backing device instead of the tier
    /// it hit (non-hierarchical caching, Orthus section 4.2: `load_admit` below 1). The block
    /// stays cached and the read counts as a hit; only the device serving it changes.
    pub from_backing: bool,
    pub actions: Vec<Action>,
}

impl Decision {
    pub fn new() -> Decision {
        Decision { hit: None, from_backing: false, actions: Vec::with_capacity(16) }
    }

    #[inline]
    pub fn clear(&mut self) {
        self.hit = None;
        self.from_backing = false;
        self.actions.clear();
    }

    /// Where a read is served from: the tier it hit, or the backing device (a miss, or a hit
    /// the policy sends there).
    pub fn served_from(&self) -> Location {
        match self.hit {
            Some(tier) if !self.from_backing => Location::Tier(tier),
            _ => Location::Backing,
        }
    }

    #[inline]
    pub fn push(&mut self, action: Action) {
        self.actions.push(action);
    }

    /// The tier an `Invalidate` of `key` among the actions from index `from` on dropped it
    /// from: where a write found the copy it made stale.
    pub fn invalidated_from(&self, from: usize, key: Key) -> Option<TierId> {
        self.actions[from..].iter().find_map(|action| match *action {
            Action::Invalidate { tier, key: k, .. } if k == key => Some(tier),
            _ => None,
        })
    }

    /// Whether the cache absorbs a write of `key`: the decision leaves the written data dirty
    /// in a tier (write-back), so the backing device sees it only when it is written back.
    /// Otherwise a write goes through to the backing device.
    pub fn absorbs_write(&self, key: Key) -> bool {
        self.actions.iter().any(|action| {
            matches!(*action,
                Action::Insert { key: k, dirty: true, .. } | Action::Update { key: k, dirty: true, .. }
                    if k == key)
        })
    }
}
