//! Counters of a simulation, kept from decisions alone.

use serde::Serialize;
use tiercache_core::{Action, Decision, Op, RejectReason, Request};

/// What a run did. Hit ratios count reads and writes; deletes are counted apart.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Counters {
    pub requests: u64,
    pub reads: u64,
    pub writes: u64,
    pub deletes: u64,
    pub hits: u64,
    /// Hits by tier: the upper (0) and, in a two-tier cache, the lower (1).
    pub upper_hits: u64,
    pub lower_hits: u64,
    pub read_hits: u64,
    pub write_hits: u64,
    pub bytes_requested: u64,
    pub bytes_hit: u64,
    pub read_bytes: u64,
    pub read_bytes_hit: u64,
    pub write_bytes: u64,
    pub write_bytes_hit: u64,
    pub insertions: u64,
    pub evictions: u64,
    pub invalidations: u64,
    pub moves: u64,
    /// Blocks and bytes moved down (upper to lower) and up (lower to upper).
    pub demotions: u64,
    pub bytes_demoted: u64,
    pub promotions: u64,
    pub bytes_promoted: u64,
    pub write_backs: u64,
    /// Bytes copied into cache tiers: inserts, in-place updates and moves.
    pub bytes_written_to_cache: u64,
    /// Bytes read from the backing device: read misses and dirty data being written back.
    pub bytes_read_from_backing: u64,
    /// Bytes written to the backing device: writes (write-through) and write-backs.
    pub bytes_written_to_backing: u64,
    pub rejections: u64,
    /// Rejections by reason, in the order of [`RejectReason::ALL`].
    pub rejections_by_reason: [u64; RejectReason::ALL.len()],
}

impl Counters {
    /// Counts one request and the decision made for it.
    #[inline]
    pub fn record(&mut self, req: &Request, decision: &Decision) {
        let size = req.size as u64;
        let hit = decision.hit.is_some();
        self.requests += 1;
        match req.op {
            Op::Read | Op::Lookup => {
                self.reads += 1;
                self.read_bytes += size;
                if hit {
                    self.read_hits += 1;
                    self.read_bytes_hit += size;
                } else {
                    self.bytes_read_from_backing += size;
                }
            }
            Op::Write => {
                self.writes += 1;
                self.write_bytes += size;
                self.bytes_written_to_backing += size;
                if hit {
                    self.write_hits += 1;
                    self.write_bytes_hit += size;
                }
            }
            Op::Delete => self.deletes += 1,
        }
        if req.op != Op::Delete {
            self.bytes_requested += size;
            if let Some(tier) = decision.hit {
                self.hits += 1;
                self.bytes_hit += size;
                match tier.0 {
                    0 => self.upper_hits += 1,
                    _ => self.lower_hits += 1,
                }
            }
        }
        for action in &decision.actions {
            self.apply(action);
        }
    }

    #[inline]
    fn apply(&mut self, action: &Action) {
        match *action {
            Action::Insert { size, .. } => {
                self.insertions += 1;
                self.bytes_written_to_cache += size as u64;
            }
            Action::Update { size, .. } => self.bytes_written_to_cache += size as u64,
            Action::Move { size, from, to, .. } => {
                self.moves += 1;
                self.bytes_written_to_cache += size as u64;
                if to > from {
                    self.demotions += 1;
                    self.bytes_demoted += size as u64;
                } else {
                    self.promotions += 1;
                    self.bytes_promoted += size as u64;
                }
            }
            Action::Evict { .. } => self.evictions += 1,
            Action::Invalidate { .. } => self.invalidations += 1,
            Action::WriteBack { size, .. } => {
                self.write_backs += 1;
                self.bytes_written_to_backing += size as u64;
            }
            Action::Reject { reason, .. } => {
                self.rejections += 1;
                self.rejections_by_reason[reason.index()] += 1;
            }
        }
    }

    fn ratio(part: u64, whole: u64) -> f64 {
        if whole == 0 {
            0.0
        } else {
            part as f64 / whole as f64
        }
    }

    pub fn hit_ratio(&self) -> f64 {
        Self::ratio(self.hits, self.reads + self.writes)
    }

    pub fn byte_hit_ratio(&self) -> f64 {
        Self::ratio(self.bytes_hit, self.bytes_requested)
    }

    pub fn read_hit_ratio(&self) -> f64 {
        Self::ratio(self.read_hits, self.reads)
    }

    pub fn write_hit_ratio(&self) -> f64 {
        Self::ratio(self.write_hits, self.writes)
    }

    pub fn read_byte_hit_ratio(&self) -> f64 {
        Self::ratio(self.read_bytes_hit, self.read_bytes)
    }

    pub fn write_byte_hit_ratio(&self) -> f64 {
        Self::ratio(self.write_bytes_hit, self.write_bytes)
    }
}
