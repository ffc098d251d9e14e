//! Trace statistics in one pass: request and byte counts by operation, unique keys and
//! footprint, time span, and the histogram of reuse distances (LRU stack distances: how many
//! distinct other keys were requested since the key's previous request; Mattson et al., 1970).
//! A request whose reuse distance is below `c` hits in an LRU cache of `c` objects, so the
//! histogram is the whole LRU miss-ratio curve.
//!
//! Distances are counted exactly with a Fenwick tree over request positions that marks each
//! key's latest request, so memory grows with the trace (one bit and four bytes a request).
//! A trace with a volume column also gets counts per volume.

use serde::Serialize;
use tiercache_core::{split_volume_key, KeyMap, Op, Request};

/// Counts of requests with reuse distance in `[2^(i-1), 2^i)` (bucket 0 holds distance 0).
#[derive(Clone, Debug, Default, Serialize)]
pub struct ReuseHistogram {
    pub buckets: Vec<u64>,
    /// First requests of their key (infinite distance).
    pub cold: u64,
}

impl ReuseHistogram {
    fn add(&mut self, distance: u64) {
        let bucket = if distance == 0 { 0 } else { 64 - distance.leading_zeros() as usize };
        if self.buckets.len() <= bucket {
            self.buckets.resize(bucket + 1, 0);
        }
        self.buckets[bucket] += 1;
    }

    /// Lower and upper (exclusive) distance of bucket `i`.
    pub fn bounds(i: usize) -> (u64, u64) {
        if i == 0 {
            (0, 1)
        } else {
            (1 << (i - 1), 1 << i)
        }
    }
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct TraceStats {
    pub requests: u64,
    pub reads: u64,
    pub writes: u64,
    pub deletes: u64,
    pub unique_keys: u64,
    /// Sum of the sizes of the distinct keys (first size seen).
    pub footprint_bytes: u64,
    pub bytes_requested: u64,
    pub read_bytes: u64,
    pub write_bytes: u64,
    pub first_time_us: Option<u64>,
    pub last_time_us: Option<u64>,
    pub reuse: ReuseHistogram,
    /// Counts per volume, by volume number, when the trace has a volume column.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub volumes: Vec<VolumeStats>,
}

/// One volume's share of a trace.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct VolumeStats {
    pub volume: u64,
    pub requests: u64,
    pub reads: u64,
    pub writes: u64,
    pub read_bytes: u64,
    pub write_bytes: u64,
    pub unique_keys: u64,
    pub footprint_bytes: u64,
}

/// Fenwick tree over positions, growing by doubling.
#[derive(Default)]
struct Fenwick {
    tree: Vec<u32>,
    marks: Vec<bool>,
}

impl Fenwick {
    fn grow(&mut self) {
        let size = (self.marks.len() * 2).max(1024);
        self.marks.resize(size, false);
        self.tree = vec![0; size + 1];
        for i in 0..size {
            if self.marks[i] {
                self.add_raw(i, 1);
            }
        }
    }

    fn add_raw(&mut self, pos: usize, delta: i32) {
        let mut i = pos + 1;
        while i < self.tree.len() {
            self.tree[i] = (self.tree[i] as i64 + delta as i64) as u32;
            i += i & i.wrapping_neg();
        }
    }

    fn set(&mut self, pos: usize, on: bool) {
        while pos >= self.marks.len() {
            self.grow();
        }
        if self.marks[pos] != on {
            self.marks[pos] = on;
            self.add_raw(pos, if on { 1 } else { -1 });
        }
    }

    /// Marks in positions `0..end`.
    fn prefix(&self, end: usize) -> u64 {
        let mut i = end.min(self.marks.len());
        let mut sum = 0u64;
        while i > 0 {
            sum += self.tree[i] as u64;
            i -= i & i.wrapping_neg();
        }
        sum
    }
}

/// Accumulates [`TraceStats`] one request at a time.
#[derive(Default)]
pub struct StatsBuilder {
    stats: TraceStats,
    last_position: KeyMap<u64>,
    fenwick: Fenwick,
    /// Per volume, when keys are volume keys.
    volumes: Option<KeyMap<VolumeStats>>,
}

impl StatsBuilder {
    /// A builder that also counts per volume: for traces whose keys are volume keys
    /// (`TraceInfo::volumes`).
    pub fn by_volume() -> StatsBuilder {
        StatsBuilder { volumes: Some(KeyMap::default()), ..StatsBuilder::default() }
    }

    pub fn add(&mut self, req: &Request) {
        let s = &mut self.stats;
        let position = s.requests;
        s.requests += 1;
        s.bytes_requested += req.size as u64;
        match req.op {
            Op::Read | Op::Lookup => (s.reads += 1, s.read_bytes += req.size as u64),
            Op::Write => (s.writes += 1, s.write_bytes += req.size as u64),
            Op::Delete => (s.deletes += 1, ()),
        };
        s.first_time_us.get_or_insert(req.time_us);
        s.last_time_us = Some(req.time_us);
        let previous = self.last_position.insert(req.key, position);
        if let Some(volumes) = &mut self.volumes {
            let volume = split_volume_key(req.key).0;
            let v = volumes
                .entry(volume)
                .or_insert_with(|| VolumeStats { volume, ..Default::default() });
            v.requests += 1;
            match req.op {
                Op::Read | Op::Lookup => (v.reads += 1, v.read_bytes += req.size as u64),
                Op::Write => (v.writes += 1, v.write_bytes += req.size as u64),
                Op::Delete => ((), ()),
            };
            if previous.is_none() {
                v.unique_keys += 1;
                v.footprint_bytes += req.size as u64;
            }
        }
        match previous {
            None => {
                s.unique_keys += 1;
                s.footprint_bytes += req.size as u64;
                s.reuse.cold += 1;
            }
            Some(previous) => {
                let between = self.fenwick.prefix(position as usize)
                    - self.fenwick.prefix(previous as usize + 1);
                s.reuse.add(between);
                self.fenwick.set(previous as usize, false);
            }
        }
        self.fenwick.set(position as usize, true);
    }

    pub fn finish(mut self) -> TraceStats {
        if let Some(volumes) = self.volumes {
            self.stats.volumes = volumes.into_values().collect();
            self.stats.volumes.sort_by_key(|v| v.volume);
        }
        self.stats
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_reuse_distances() {
        let mut b = StatsBuilder::default();
        // a b c a b b: a at distance 2 (b, c), b at 2 (c, a), b at 0.
        for key in [1, 2, 3, 1, 2, 2] {
            b.add(&Request::read(key, 10));
        }
        let s = b.finish();
        assert_eq!((s.requests, s.unique_keys, s.footprint_bytes), (6, 3, 30));
        assert_eq!(s.reuse.cold, 3);
        assert_eq!(s.reuse.buckets, vec![1, 0, 2]);
    }

    #[test]
    fn counts_per_volume() {
        let mut b = StatsBuilder::by_volume();
        let on = |volume, address| tiercache_core::volume_key(volume, address).unwrap();
        for (key, op) in [(on(2, 5), Op::Read), (on(0, 5), Op::Write), (on(2, 5), Op::Write)] {
            b.add(&Request::new(0, key, 512, op));
        }
        let s = b.finish();
        assert_eq!(s.unique_keys, 2);
        let counts: Vec<_> = s
            .volumes
            .iter()
            .map(|v| (v.volume, v.requests, v.reads, v.writes, v.unique_keys))
            .collect();
        assert_eq!(counts, vec![(0, 1, 0, 1, 1), (2, 2, 1, 1, 1)]);
        assert_eq!(s.volumes[1].write_bytes, 512);
    }

    #[test]
    fn grows_past_the_first_block() {
        let mut b = StatsBuilder::default();
        for i in 0..5000u64 {
            b.add(&Request::read(i % 100, 1));
        }
        let s = b.finish();
        // Every reuse has exactly 99 distinct keys in between: bucket of [64, 128).
        assert_eq!(s.reuse.buckets[7], 4900);
    }
}
