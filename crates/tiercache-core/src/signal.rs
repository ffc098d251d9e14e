//! What a cache did over one measurement interval: the signal adaptive controllers are fed
//! (DESIGN: controllers are pure; the simulator models the interval, the engine measures it).

use serde::{Deserialize, Serialize};

/// Completed requests over one interval, with their latency and the read hit counts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Interval {
    /// Length of the interval.
    pub seconds: f64,
    /// Requests completed in it.
    pub completed: u64,
    /// Reads completed in it and how many of them hit a cache tier (wherever they were
    /// served from).
    pub reads: u64,
    pub read_hits: u64,
    /// Latency of the completed requests, in microseconds.
    pub mean_latency_us: f64,
    pub p99_latency_us: f64,
    /// Reads the cache tier served in the interval (block reads from tier 0, measured by the
    /// engine or modeled by the simulator's device), and their mean service time: how the
    /// tier's reads are slowed by the writes beside them.
    pub tier_reads: u64,
    pub tier_read_mean_us: f64,
}

impl Interval {
    pub fn ops_per_second(&self) -> f64 {
        if self.seconds > 0.0 {
            self.completed as f64 / self.seconds
        } else {
            0.0
        }
    }
}
