//! Counters of a simulation, kept from decisions alone.

use serde::Serialize;
use tiercache_core::{Action, Decision, Op, RejectReason, Request};

/// Buckets of [`Counters::write_back_run_lengths`].
pub const RUN_LENGTH_BUCKETS: usize = 8;

/// The bucket of a run of `len` blocks: powers of two, the last open-ended.
pub fn run_length_bucket(len: u64) -> usize {
    (len.max(1).ilog2() as usize).min(RUN_LENGTH_BUCKETS - 1)
}

/// The label of a bucket: "1", "2-3", "4-7", ..., "128+".
pub fn run_length_label(bucket: usize) -> String {
    let low = 1u64 << bucket;
    match bucket {
        0 => "1".into(),
        b if b == RUN_LENGTH_BUCKETS - 1 => format!("{low}+"),
        _ => format!("{low}-{}", 2 * low - 1),
    }
}

/// What a run did. Hit ratios count reads and writes; deletes are counted apart.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Counters {
    pub requests: u64,
    pub reads: u64,
    pub writes: u64,
    pub deletes: u64,
    pub hits: u64,
    /// Hits by tier: the upper (0) and any below it.
    pub upper_hits: u64,
    pub lower_hits: u64,
    /// Hits in each tier, top down (the report lists those of the tiers there are).
    #[serde(skip)]
    pub tier_hits: [u64; tiercache_policy::MAX_TIERS],
    /// Read hits in each tier, top down.
    #[serde(skip)]
    pub read_tier_hits: [u64; tiercache_policy::MAX_TIERS],
    /// Bytes written into each tier, top down: blocks inserted, updated or moved into it (what
    /// a slow tier's endurance and bandwidth pay for; NVCache's OBP saves some of it).
    #[serde(skip)]
    pub bytes_written_to_tier: [u64; tiercache_policy::MAX_TIERS],
    pub read_hits: u64,
    /// Read hits served by the backing device all the same (non-hierarchical caching).
    pub read_hits_from_backing: u64,
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
    /// Runs of write-backs: blocks written back one after another in one decision, each the
    /// block after the previous one, which a disk takes without seeking (Hibachi flushes whole
    /// runs, section IV-E). A lone write-back is a run of one.
    pub write_back_runs: u64,
    /// Runs by length: 1, 2-3, 4-7, ..., 128 and more (see [`run_length_bucket`]).
    #[serde(skip)]
    pub write_back_run_lengths: [u64; RUN_LENGTH_BUCKETS],
    /// Bytes copied into cache tiers: inserts, in-place updates and moves.
    pub bytes_written_to_cache: u64,
    /// Bytes read from the backing device: read misses and hits sent there.
    pub bytes_read_from_backing: u64,
    /// Bytes written to the backing device: writes the cache does not absorb, and write-backs.
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
                }
                if decision.served_from() == tiercache_core::Location::Backing {
                    self.bytes_read_from_backing += size;
                    self.read_hits_from_backing += hit as u64;
                }
            }
            Op::Write => {
                self.writes += 1;
                self.write_bytes += size;
                if !decision.absorbs_write(req.key) {
                    self.bytes_written_to_backing += size;
                }
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
                self.tier_hits[tier.index()] += 1;
                if matches!(req.op, Op::Read | Op::Lookup) {
                    self.read_tier_hits[tier.index()] += 1;
                }
            }
        }
        self.record_actions(decision);
    }

    /// Counts what a decision does (inserts, moves, evictions, write-backs and their runs):
    /// a request's, or periodic work's (`Policy::tick`).
    pub fn record_actions(&mut self, decision: &Decision) {
        // The write-back run being counted: its last block and its length.
        let mut run: Option<(u64, u64)> = None;
        for action in &decision.actions {
            self.apply(action);
            let Action::WriteBack { key, .. } = *action else { continue };
            run = match run {
                Some((last, len)) if last.checked_add(1) == Some(key) => Some((key, len + 1)),
                Some((_, len)) => {
                    self.end_run(len);
                    Some((key, 1))
                }
                None => Some((key, 1)),
            };
        }
        if let Some((_, len)) = run {
            self.end_run(len);
        }
    }

    fn end_run(&mut self, len: u64) {
        self.write_back_runs += 1;
        self.write_back_run_lengths[run_length_bucket(len)] += 1;
    }

    /// Mean blocks per write-back run.
    pub fn mean_write_back_run(&self) -> f64 {
        Self::ratio(self.write_backs, self.write_back_runs)
    }

    #[inline]
    fn apply(&mut self, action: &Action) {
        match *action {
            Action::Insert { size, tier, .. } => {
                self.insertions += 1;
                self.bytes_written_to_cache += size as u64;
                self.bytes_written_to_tier[tier.index()] += size as u64;
            }
            Action::Update { size, tier, .. } => {
                self.bytes_written_to_cache += size as u64;
                self.bytes_written_to_tier[tier.index()] += size as u64;
            }
            Action::Move { size, from, to, .. } => {
                self.moves += 1;
                self.bytes_written_to_cache += size as u64;
                self.bytes_written_to_tier[to.index()] += size as u64;
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
