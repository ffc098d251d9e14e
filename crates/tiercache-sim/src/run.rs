//! One simulation: a policy over a stream, with progress reports and a report at the end.

use std::time::Instant;

use serde::Serialize;
use tiercache_core::{annotate_next_access, Decision, RejectReason, Request};
use tiercache_policy::{AdmissionConfig, AnyPolicy, Policy, PolicyConfig, PolicyError};

use crate::counters::Counters;

/// How often (in requests) the progress callback is called.
pub const PROGRESS_EVERY: u64 = 1 << 16;

/// What to simulate.
#[derive(Clone, Debug)]
pub struct RunOptions {
    pub policy: PolicyConfig,
    pub capacity: tiercache_core::Capacity,
    pub admission: Vec<AdmissionConfig>,
    pub seed: u64,
    /// Replace request times by their index (for traces without timestamps).
    pub logical_time: bool,
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
    pub resident_objects: u64,
    pub used: u64,
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
            resident_objects: policy.resident(tier),
            used: policy.used(tier),
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

/// Simulates over a stream. Policies that need the future (Belady) read the whole stream into
/// memory first to annotate it; the others run in constant memory.
pub fn simulate<E, I>(
    options: &RunOptions,
    stream: I,
    progress: &mut dyn FnMut(u64),
) -> Result<SimReport, RunError<E>>
where
    E: std::error::Error + 'static,
    I: Iterator<Item = Result<Request, E>>,
{
    let mut policy = AnyPolicy::from_config(
        &options.policy,
        options.capacity,
        &options.admission,
        options.seed,
    )?;
    if options.policy.needs_future() {
        let mut requests: Vec<Request> =
            stream.collect::<Result<_, E>>().map_err(RunError::Stream)?;
        if options.logical_time {
            requests.iter_mut().enumerate().for_each(|(i, r)| r.time_us = i as u64);
        }
        annotate_next_access(&mut requests);
        let start = Instant::now();
        let counters =
            run_loop(&mut policy, requests.iter().map(|r| Ok::<_, E>(*r)), false, progress)
                .map_err(RunError::Stream)?;
        return Ok(SimReport::new(&policy, counters, start.elapsed().as_secs_f64()));
    }
    let start = Instant::now();
    let counters =
        run_loop(&mut policy, stream, options.logical_time, progress).map_err(RunError::Stream)?;
    Ok(SimReport::new(&policy, counters, start.elapsed().as_secs_f64()))
}

/// Simulates over requests already in memory (annotated already if the policy needs it).
pub fn simulate_slice(
    options: &RunOptions,
    requests: &[Request],
) -> Result<SimReport, PolicyError> {
    let mut policy = AnyPolicy::from_config(
        &options.policy,
        options.capacity,
        &options.admission,
        options.seed,
    )?;
    let start = Instant::now();
    let stream = requests.iter().map(|r| Ok::<_, std::convert::Infallible>(*r));
    let counters = match run_loop(&mut policy, stream, options.logical_time, &mut |_| {}) {
        Ok(c) => c,
        Err(never) => match never {},
    };
    Ok(SimReport::new(&policy, counters, start.elapsed().as_secs_f64()))
}

/// The inner loop: decide, count, repeat. The decision buffer is reused, so the loop does not
/// allocate once warm.
fn run_loop<E, I>(
    policy: &mut AnyPolicy,
    stream: I,
    logical_time: bool,
    progress: &mut dyn FnMut(u64),
) -> Result<Counters, E>
where
    I: Iterator<Item = Result<Request, E>>,
{
    let mut counters = Counters::default();
    let mut decision = Decision::new();
    for (index, item) in stream.enumerate() {
        let mut req = item?;
        if logical_time {
            req.time_us = index as u64;
        }
        decision.clear();
        policy.decide(&req, &mut decision);
        counters.record(&req, &decision);
        if (index as u64 + 1).is_multiple_of(PROGRESS_EVERY) {
            progress(index as u64 + 1);
        }
    }
    Ok(counters)
}
