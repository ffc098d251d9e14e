//! One simulation: a policy over a stream, with progress reports and a report at the end.

use std::time::Instant;

use serde::Serialize;
use tiercache_core::{annotate_next_access, Decision, RejectReason, Request};
use tiercache_policy::{AnyPolicy, Policy, PolicyError, StackConfig};

use crate::counters::Counters;

/// How often (in requests) the progress callback is called.
pub const PROGRESS_EVERY: u64 = 1 << 16;

/// What to simulate: a policy stack, and how to read time.
#[derive(Clone, Debug)]
pub struct RunOptions {
    /// The cache's policies (tiers, placement, admission, NVCache, cache mode, NHC).
    pub stack: StackConfig,
    /// Replace request times by their index (for traces without timestamps).
    pub logical_time: bool,
}

impl RunOptions {
    pub fn new(stack: StackConfig) -> RunOptions {
        RunOptions { stack, logical_time: false }
    }
}

/// The outcome of a run, for people (the CLI's table) and programs (JSON).
#[derive(Clone, Debug, Serialize)]
pub struct SimReport {
    pub policy: String,
    pub capacity: u64,
    pub unit: &'static str,
    pub hit_ratio: f64,
    pub miss_ratio: f64,
    pub byte_hit_ratio: f64,
    pub byte_miss_ratio: f64,
    pub read_hit_ratio: f64,
    pub write_hit_ratio: f64,
    pub read_byte_hit_ratio: f64,
    pub write_byte_hit_ratio: f64,
    #[serde(flatten)]
    pub counters: Counters,
    pub rejections_by_reason: std::collections::BTreeMap<&'static str, u64>,
    /// Write-back runs by length, keyed by the shortest length of each bucket: 1, 2 (2-3),
    /// 4 (4-7), ..., 128 (128 and more); the empty buckets left out.
    pub write_back_runs_by_length: std::collections::BTreeMap<u64, u64>,
    pub mean_write_back_run: f64,
    /// Hits in each tier, keyed by tier (0 the top), for caches of more than one tier.
    pub hits_by_tier: std::collections::BTreeMap<usize, u64>,
    /// Read hits in each tier, likewise.
    pub read_hits_by_tier: std::collections::BTreeMap<usize, u64>,
    pub resident_objects: u64,
    pub used: u64,
    /// Capacity of the lower tier, in the same unit, when there are two.
    pub lower_capacity: Option<u64>,
    pub elapsed_seconds: f64,
    pub requests_per_second: f64,
}

impl SimReport {
    fn new(policy: &AnyPolicy, counters: Counters, elapsed_seconds: f64) -> SimReport {
        let tier = tiercache_core::TierId(0);
        let capacity = policy.capacity(tier);
        let rejections_by_reason = RejectReason::ALL
            .iter()
            .map(|r| (r.as_str(), counters.rejections_by_reason[r.index()]))
            .filter(|(_, n)| *n > 0)
            .collect();
        let write_back_runs_by_length = counters
            .write_back_run_lengths
            .iter()
            .enumerate()
            .filter(|(_, n)| **n > 0)
            .map(|(bucket, n)| (1u64 << bucket, *n))
            .collect();
        SimReport {
            policy: policy.label(),
            capacity: capacity.amount,
            unit: capacity.unit.as_str(),
            hit_ratio: counters.hit_ratio(),
            miss_ratio: 1.0 - counters.hit_ratio(),
            byte_hit_ratio: counters.byte_hit_ratio(),
            byte_miss_ratio: 1.0 - counters.byte_hit_ratio(),
            read_hit_ratio: counters.read_hit_ratio(),
            write_hit_ratio: counters.write_hit_ratio(),
            read_byte_hit_ratio: counters.read_byte_hit_ratio(),
            write_byte_hit_ratio: counters.write_byte_hit_ratio(),
            rejections_by_reason,
            write_back_runs_by_length,
            mean_write_back_run: counters.mean_write_back_run(),
            hits_by_tier: match policy.tier_count() {
                1 => Default::default(),
                n => (0..n).map(|t| (t, counters.tier_hits[t])).collect(),
            },
            read_hits_by_tier: match policy.tier_count() {
                1 => Default::default(),
                n => (0..n).map(|t| (t, counters.read_tier_hits[t])).collect(),
            },
            resident_objects: policy.resident(tier),
            used: policy.used(tier),
            lower_capacity: (policy.tier_count() > 1)
                .then(|| policy.capacity(tiercache_core::TierId(1)).amount),
            requests_per_second: if elapsed_seconds > 0.0 {
                counters.requests as f64 / elapsed_seconds
            } else {
                0.0
            },
            elapsed_seconds,
            counters,
        }
    }
}

/// An error of a run: the policy could not be built, or the stream failed.
#[derive(Debug, thiserror::Error)]
pub enum RunError<E: std::error::Error + 'static> {
    #[error(transparent)]
    Policy(#[from] PolicyError),
    #[error(transparent)]
    Stream(E),
}

/// Simulates over batches of requests: `next_batch` replaces its argument's contents with the
/// next batch, empty at the end. Policies that need the future (Belady) read everything into
/// memory first to annotate it; the others run in constant memory.
pub fn simulate<E: std::error::Error + 'static>(
    options: &RunOptions,
    next_batch: &mut dyn FnMut(&mut Vec<Request>) -> Result<(), E>,
    progress: &mut dyn FnMut(u64),
) -> Result<SimReport, RunError<E>> {
    if options.stack.needs_future() {
        let mut requests = Vec::new();
        for_each_batch(next_batch, |batch| requests.extend_from_slice(batch))
            .map_err(RunError::Stream)?;
        annotate_next_access(&mut requests);
        return Ok(simulate_slice(options, &requests)?);
    }
    let mut policy = build(options)?;
    let mut state = LoopState::new(options.logical_time, options.stack.tick_us);
    let start = Instant::now();
    for_each_batch(next_batch, |batch| state.run(&mut policy, batch, progress))
        .map_err(RunError::Stream)?;
    Ok(SimReport::new(&policy, state.counters, start.elapsed().as_secs_f64()))
}

/// The policy a run uses: its stack, built.
pub fn build(options: &RunOptions) -> Result<AnyPolicy, PolicyError> {
    options.stack.build()
}

fn for_each_batch<E>(
    next_batch: &mut dyn FnMut(&mut Vec<Request>) -> Result<(), E>,
    mut each: impl FnMut(&[Request]),
) -> Result<(), E> {
    let mut batch = Vec::new();
    loop {
        next_batch(&mut batch)?;
        if batch.is_empty() {
            return Ok(());
        }
        each(&batch);
    }
}

/// Simulates over requests already in memory (annotated already if the policy needs it).
pub fn simulate_slice(
    options: &RunOptions,
    requests: &[Request],
) -> Result<SimReport, PolicyError> {
    let mut policy = build(options)?;
    let mut state = LoopState::new(options.logical_time, options.stack.tick_us);
    let start = Instant::now();
    state.run(&mut policy, requests, &mut |_| {});
    Ok(SimReport::new(&policy, state.counters, start.elapsed().as_secs_f64()))
}

/// As [`simulate_slice`], showing `observe` every request and the policy's decision for it,
/// in order: what a caller logs of a run (the write-backs a disk would see) comes from the
/// run the report describes.
pub fn simulate_slice_observed<F: FnMut(&Request, &Decision)>(
    options: &RunOptions,
    requests: &[Request],
    mut observe: F,
) -> Result<SimReport, PolicyError> {
    let mut policy = build(options)?;
    let mut state = LoopState::new(options.logical_time, options.stack.tick_us);
    let start = Instant::now();
    state.run_observed(&mut policy, requests, &mut |_| {}, &mut observe);
    Ok(SimReport::new(&policy, state.counters, start.elapsed().as_secs_f64()))
}

/// How far ahead of the request being decided the policy is asked to prefetch its metadata.
const PREFETCH_DISTANCE: usize = 8;

/// Most periodic work run for one gap between requests; a longer gap runs its last period's.
pub const TICKS_PER_GAP: u64 = 1024;

/// The inner loop's state across batches.
struct LoopState {
    counters: Counters,
    decision: Decision,
    index: u64,
    logical_time: bool,
    /// Periodic work every `StackConfig::tick_us` of the trace's time.
    ticks: Ticks,
}

/// When periodic work is due on a clock that requests advance: a period after the first
/// request, then every period; a gap of more than [`TICKS_PER_GAP`] periods runs its last one
/// only. The simulator ticks by it, and a test of the engine ticks the engine at the same times.
#[derive(Clone, Debug)]
pub struct Ticks {
    every: Option<u64>,
    next: Option<u64>,
}

impl Ticks {
    /// Every `every` microseconds; never without it.
    pub fn new(every: Option<u64>) -> Ticks {
        Ticks { every, next: None }
    }

    /// The next tick time at or before `now_us` not yet run, if one is due; call it until
    /// `None`.
    #[inline]
    pub fn next_due(&mut self, now_us: u64) -> Option<u64> {
        let every = self.every?;
        let next = *self.next.get_or_insert(now_us.saturating_add(every));
        if now_us < next {
            return None;
        }
        let at = match (now_us - next) / every >= TICKS_PER_GAP {
            true => now_us - (now_us - next) % every,
            false => next,
        };
        self.next = Some(at.saturating_add(every));
        Some(at)
    }
}

impl LoopState {
    fn new(logical_time: bool, tick_us: Option<u64>) -> LoopState {
        LoopState {
            counters: Counters::default(),
            decision: Decision::new(),
            index: 0,
            logical_time,
            ticks: Ticks::new(tick_us),
        }
    }

    /// The periodic work due by `now_us` (`Policy::tick` at each tick time passed), counted.
    /// The engine's worker does the same on its clock (`CacheBuilder::tick_every`).
    #[inline]
    fn tick(&mut self, policy: &mut AnyPolicy, now_us: u64) {
        while let Some(at) = self.ticks.next_due(now_us) {
            self.decision.clear();
            policy.tick(at, &mut self.decision);
            self.counters.record_actions(&self.decision);
        }
    }

    /// Decide, count, repeat. The decision buffer is reused, so the loop does not allocate once
    /// warm. The policy is told a few requests ahead which keys are coming, so it can prefetch
    /// their metadata: the simulator is bound by memory latency, not by computation.
    fn run(&mut self, policy: &mut AnyPolicy, requests: &[Request], progress: &mut dyn FnMut(u64)) {
        self.run_observed(policy, requests, progress, &mut |_, _| {});
    }

    /// As [`LoopState::run`], showing `observe` each request (its time as decided) and its
    /// decision.
    fn run_observed<F: FnMut(&Request, &Decision)>(
        &mut self,
        policy: &mut AnyPolicy,
        requests: &[Request],
        progress: &mut dyn FnMut(u64),
        observe: &mut F,
    ) {
        for (i, req) in requests.iter().enumerate() {
            if let Some(ahead) = requests.get(i + PREFETCH_DISTANCE) {
                policy.prefetch(ahead.key);
            }
            let mut req = *req;
            if self.logical_time {
                req.time_us = self.index;
            }
            self.tick(policy, req.time_us);
            self.decision.clear();
            policy.decide(&req, &mut self.decision);
            self.counters.record(&req, &self.decision);
            observe(&req, &self.decision);
            self.index += 1;
            if self.index.is_multiple_of(PROGRESS_EVERY) {
                progress(self.index);
            }
        }
    }
}
