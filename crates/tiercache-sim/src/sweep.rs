//! Sweeps: every policy at every capacity over one trace held in memory, in parallel on all
//! cores. The points are what a miss-ratio curve is drawn from.

use rayon::prelude::*;
use serde::Serialize;
use tiercache_core::{annotate_next_access, Capacity, Request};
use tiercache_policy::{AdmissionConfig, PolicyConfig, PolicyError, StackConfig};

use crate::run::{simulate_slice, RunOptions, SimReport};

#[derive(Clone, Debug, Serialize)]
pub struct SweepPoint {
    pub policy: String,
    pub capacity: u64,
    pub unit: &'static str,
    pub miss_ratio: f64,
    pub byte_miss_ratio: f64,
    pub read_hit_ratio: f64,
    pub write_hit_ratio: f64,
    pub report: SimReport,
}

/// Runs every (policy, capacity) pair. `requests` is annotated with next accesses when a
/// policy needs them. Results come in policy-major order.
pub fn sweep(
    requests: &mut [Request],
    policies: &[PolicyConfig],
    capacities: &[Capacity],
    admission: &[AdmissionConfig],
    seed: u64,
    logical_time: bool,
    done: &(dyn Fn() + Sync),
) -> Result<Vec<SweepPoint>, PolicyError> {
    if policies.iter().any(|p| p.needs_future()) {
        annotate_next_access(requests);
    }
    if logical_time {
        requests.iter_mut().enumerate().for_each(|(i, r)| r.time_us = i as u64);
    }
    let requests: &[Request] = requests;
    let jobs: Vec<(&PolicyConfig, Capacity)> =
        policies.iter().flat_map(|p| capacities.iter().map(move |c| (p, *c))).collect();
    jobs.par_iter()
        .map(|(policy, capacity)| {
            let stack = StackConfig {
                admission: admission.to_vec(),
                seed,
                ..StackConfig::single((*policy).clone(), *capacity)
            };
            let options = RunOptions::new(stack);
            let report = simulate_slice(&options, requests)?;
            done();
            Ok(SweepPoint {
                policy: report.policy.clone(),
                capacity: capacity.amount,
                unit: capacity.unit.as_str(),
                miss_ratio: report.miss_ratio,
                byte_miss_ratio: report.byte_miss_ratio,
                read_hit_ratio: report.read_hit_ratio,
                write_hit_ratio: report.write_hit_ratio,
                report,
            })
        })
        .collect()
}
