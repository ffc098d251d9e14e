//! What a cache reports: its counters, latency, occupancy and warnings, and the controllers'
//! periodic measurement.

use std::time::Instant;

use super::{CacheCore, Meter};
use crate::latency::{self, LatencySnapshot, Percentiles};
use crate::recovery::Recovery;
use crate::stats::{Stats, StatsSnapshot};

impl CacheCore {
    /// Ends a measurement interval (what the background worker does after each tick when a
    /// policy has a controller): the operations completed since the last one, their latency
    /// and the read hits (served or sent to backing), fed to every shard's policy. All shards
    /// see the same measurement of the whole engine, so their controllers agree.
    pub fn measure(&self) {
        let Some(meter) = &self.meter else { return };
        let mut meter = meter.lock().unwrap_or_else(|p| p.into_inner());
        let mut total = Stats::default();
        let mut latency = latency::histogram();
        for shard in self.each_shard() {
            total.merge(shard.stats());
            if let Some(h) = shard.latency() {
                latency.add(&h[0]).expect("same bounds");
                latency.add(&h[1]).expect("same bounds");
            }
        }
        let now = Instant::now();
        let completed = total.lookups + total.puts;
        let read_hits = total.hits + total.offloaded;
        let mut interval_latency = latency.clone();
        interval_latency.subtract(&meter.latency).expect("counts only grow");
        let us = |q: f64| interval_latency.value_at_quantile(q) as f64 / 1000.0;
        let tier_reads = total.tier_reads - meter.tier_reads;
        let tier_read_ns = total.tier_read_ns - meter.tier_read_ns;
        let interval = tiercache_core::Interval {
            seconds: now.duration_since(meter.at).as_secs_f64(),
            completed: completed - meter.completed,
            reads: total.lookups - meter.reads,
            read_hits: read_hits - meter.read_hits,
            mean_latency_us: interval_latency.mean() / 1000.0,
            p99_latency_us: us(0.99),
            tier_reads,
            tier_read_mean_us: if tier_reads > 0 {
                tier_read_ns as f64 / tier_reads as f64 / 1000.0
            } else {
                0.0
            },
        };
        *meter = Meter {
            at: now,
            completed,
            reads: total.lookups,
            read_hits,
            tier_reads: total.tier_reads,
            tier_read_ns: total.tier_read_ns,
            latency,
        };
        drop(meter);
        for mut shard in self.each_shard() {
            shard.observe(&interval);
        }
    }

    /// The policy's knobs now (those of shard 0: all shards' controllers see the same
    /// measurements).
    pub fn knobs(&self) -> Vec<(&'static str, f64)> {
        self.lock(0).knobs()
    }

    /// What the user should know about how the tiers run (fallbacks taken, tiers not
    /// recovered), once each.
    pub fn warnings(&self) -> Vec<String> {
        let media = self.media();
        let notes = self.recovery.iter().flat_map(|r| r.notes.iter().cloned());
        media.iter().flat_map(|m| m.warnings.iter().cloned()).chain(notes).collect()
    }

    /// What the cache found on its tiers when it opened, if a tier file held blocks: how long
    /// recovery took and whether the cache before it had stopped cleanly. The blocks counted
    /// are in [`stats`](Self::stats).
    pub fn recovery(&self) -> Option<&Recovery> {
        self.recovery.as_ref()
    }

    /// Read and write latency over all shards; `None` unless built with `record_latency`.
    pub fn latency(&self) -> Option<LatencySnapshot> {
        if !self.record_latency {
            return None;
        }
        let (mut read, mut write) = (latency::histogram(), latency::histogram());
        for shard in self.each_shard() {
            if let Some(h) = shard.latency() {
                read.add(&h[0]).expect("same bounds");
                write.add(&h[1]).expect("same bounds");
            }
        }
        Some(LatencySnapshot { read: Percentiles::of(&read), write: Percentiles::of(&write) })
    }

    pub fn stats(&self) -> StatsSnapshot {
        let mut total = Stats::default();
        for shard in self.each_shard() {
            total.merge(shard.stats());
            total.untold_hits += shard.untold_hits();
        }
        if let Some(unlocked) = &self.unlocked {
            let untold = unlocked.log.untold();
            let hits = untold.copied + untold.held;
            total.lookups += hits;
            total.hits += hits;
            total.untold_hits += hits;
            total.unlocked_hits += untold.copied;
            total.pinned_reads += untold.held;
            total.bytes_read += untold.bytes;
        }
        self.scrubbed.add_to(&mut total);
        self.syncs.add_to(&mut total);
        total.snapshot(self.tiers)
    }

    /// Bytes the resident blocks take over all shards (each a whole block, or with size
    /// classes its class's size), and the bytes the policies may keep.
    pub fn bytes_cached(&self) -> (u64, u64) {
        self.each_shard().fold((0, 0), |(used, total), shard| {
            (used + shard.resident_bytes(), total + shard.capacity_bytes())
        })
    }

    /// Blocks resident over all shards, and the whole blocks the policies may keep (with size
    /// classes, more small blocks than that may be resident: see `bytes_cached`).
    pub fn occupancy(&self) -> (u64, u64) {
        self.each_shard().fold((0, 0), |(used, total), shard| {
            (used + shard.resident_count(), total + shard.slots())
        })
    }
}
