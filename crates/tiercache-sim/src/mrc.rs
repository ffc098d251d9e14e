//! Miss-ratio curves without a simulation per size.
//!
//! - **LRU, exactly, in one pass** ([`lru_exact`]): a request hits an LRU cache of capacity `C`
//!   exactly when its stack distance is at most `C` (Mattson, Gecsei, Slutz and Traiger, "Evaluation
//!   techniques for storage hierarchies", IBM Systems Journal 9(2), 1970): the objects, or the
//!   bytes, of the distinct keys requested since the key's previous request, the key itself
//!   included. With sizes this holds because LRU's cache is always the longest prefix of the
//!   recency stack that fits: a miss pushes a key and evicts from the tail until it fits, a hit
//!   moves a key inside the prefix to the top. It stops holding where the simulator refuses a
//!   key larger than the capacity, or a lookup misses without inserting, or a delete takes a key
//!   out of the middle, so a stream with lookups or deletes is refused (the curve is then
//!   simulated), and a block larger than a capacity is named as such.
//! - **Any policy, by spatial sampling** ([`sampled`]): keep the requests of the keys whose hash
//!   falls below a threshold, a fraction `R` of the key space, and simulate the policy on them
//!   over `R` times the capacity (SHARDS, Waldspurger, Park, Garthwaite and Ahmad, FAST'15;
//!   its use for any policy, the "miniature simulations" of Waldspurger, Saemundsson, Ahmad and
//!   Park, ATC'17). A sample's requests are about `R` of the stream's, so a curve costs about `R`
//!   of the simulations it replaces. The rate is fixed ([`Sampling::Rate`]) or follows from a
//!   bound on the sampled keys ([`Sampling::Keys`]: a first pass finds the threshold that keeps
//!   that many, the "fixed-size" variant, whose memory does not grow with the trace). Each
//!   point is run over several independent samples (a salt per sample in the key hash); the
//!   curve is their mean and its `spread` their range, the sampling error as measured.
//! - **Post-stratified by how often keys are requested** ([`Estimator::Stratified`], the
//!   default): a sample's miss ratio as SHARDS takes it (its misses over its requests) swings
//!   with the few hot keys that happen to fall in it: on arc_OLTP, 100 of 186,880 keys take
//!   13.6% of the requests, and at rate 0.01 whether one or three of them are sampled moves the
//!   ratio by points. One counting pass over the stream puts each key in a stratum by its request
//!   count (⌊log₂⌋), and gives each stratum's share of the stream's requests and bytes; a
//!   sample's hits are counted per stratum, and its estimate is each stratum's hit ratio in the
//!   sample weighted by the stratum's share of the stream (post-stratification: Holt and Smith,
//!   "Post Stratification", Journal of the Royal Statistical Society A 142(1), 1979). A stratum
//!   the sample holds no key of takes the ratio of the nearest strata it does. On arc_OLTP at
//!   rate 0.01, over the sizes whose sampled cache holds at least 100 blocks, this takes the
//!   mean absolute error from 2.57 to 0.23 points (docs/RESULTS.md). The counting pass runs
//!   beside the sampling. What choosing keys alone costs, with a perfect miniature (each sampled
//!   key hit exactly as in the full run), is 2.4 points there with the plain ratio and 0.9
//!   post-stratified, averaged over 100 draws at the eight default sizes
//!   (`scripts/mrc_sampling_floor.py`); a cache of a few objects adds its own error.

use rayon::prelude::*;
use serde::Serialize;
use tiercache_core::{annotate_next_access, Capacity, KeyMap, KeySet, Op, Request, Unit};
use tiercache_policy::index::KeyIndex;
use tiercache_policy::{AdmissionConfig, PolicyConfig, PolicyError, StackConfig};

use crate::run::{simulate_slice, simulate_slice_observed, RunOptions};

/// One point of a curve.
#[derive(Clone, Debug, Serialize)]
pub struct MrcPoint {
    pub policy: String,
    pub capacity: u64,
    pub unit: &'static str,
    pub miss_ratio: f64,
    pub byte_miss_ratio: f64,
    /// `exact` (stack distances) or `sampled`.
    pub method: &'static str,
    /// The fraction of the key space sampled (1 when exact).
    pub rate: f64,
    /// Requests simulated, summed over the samples (the stream's when exact).
    pub simulated_requests: u64,
    /// The range of the samples' miss ratios (0 when exact or one sample).
    pub spread: f64,
    pub samples: u32,
    /// How a sampled point's miss ratio is estimated: `plain` or `stratified` (exact: `exact`).
    pub estimator: &'static str,
}

/// How many requests ahead the exact pass prefetches a key's index slot.
const PREFETCH_AHEAD: usize = 8;

/// Why a stream has no exact LRU curve.
#[derive(Debug, thiserror::Error)]
pub enum ExactError {
    #[error(
        "request {index} is a {op}: stack distances give LRU's curve for reads and writes only"
    )]
    Op { index: usize, op: &'static str },
    #[error("{requests} requests: the exact curve takes at most 2^32 (sample it instead)")]
    TooLong { requests: usize },
}

/// A Fenwick tree of weights over request positions: the weight of each key at the position of
/// its latest request.
struct Fenwick {
    tree: Vec<u64>,
}

impl Fenwick {
    fn new(positions: usize) -> Fenwick {
        Fenwick { tree: vec![0; positions + 1] }
    }

    fn add(&mut self, position: usize, delta: i64) {
        let mut i = position + 1;
        while i < self.tree.len() {
            self.tree[i] = self.tree[i].wrapping_add(delta as u64);
            i += i & i.wrapping_neg();
        }
    }

    /// The weights at positions `start..end` (`start <= end`): the two prefix sums' walks, up
    /// to where they meet (a recent reuse, the common case, meets soon).
    fn range(&self, start: usize, end: usize) -> u64 {
        let (mut i, mut j, mut sum) = (end, start, 0u64);
        while i != j {
            if i > j {
                sum = sum.wrapping_add(self.tree[i]);
                i -= i & i.wrapping_neg();
            } else {
                sum = sum.wrapping_sub(self.tree[j]);
                j -= j & j.wrapping_neg();
            }
        }
        sum
    }
}

/// LRU's exact miss ratios at `capacities` (all of one unit), from stack distances in one pass.
pub fn lru_exact(
    requests: &[Request],
    capacities: &[Capacity],
) -> Result<Vec<MrcPoint>, ExactError> {
    let unit = capacities.first().map_or(Unit::Bytes, |c| c.unit);
    let weight = |r: &Request| if unit == Unit::Objects { 1 } else { r.size as u64 };
    let mut sorted: Vec<u64> = capacities.iter().map(|c| c.amount).collect();
    sorted.sort_unstable();
    sorted.dedup();
    // Hits (and their bytes) whose distance is above sorted[j - 1] and at most sorted[j].
    let mut hits_from = vec![0u64; sorted.len() + 1];
    let mut bytes_from = vec![0u64; sorted.len() + 1];
    let mut fenwick = Fenwick::new(requests.len());
    // Each key's latest position (the policies' open-addressing index, whose slots are
    // prefetched a few requests ahead as the simulator does: the map is most of the pass's
    // memory traffic), and the weight at each position.
    let mut latest = KeyIndex::with_capacity((requests.len() / 4).min(1 << 22));
    let mut weights = vec![0u32; requests.len()];
    let (mut total, mut total_bytes) = (0u64, 0u64);
    if requests.len() >= u32::MAX as usize {
        return Err(ExactError::TooLong { requests: requests.len() });
    }
    for (index, req) in requests.iter().enumerate() {
        if !matches!(req.op, Op::Read | Op::Write) {
            return Err(ExactError::Op { index, op: req.op.as_str() });
        }
        total += 1;
        total_bytes += req.size as u64;
        if let Some(ahead) = requests.get(index + PREFETCH_AHEAD) {
            latest.prefetch(ahead.key);
        }
        let w = weight(req);
        weights[index] = w as u32;
        if let Some(position) = latest.insert(req.key, index as u32) {
            let position = position as usize;
            let old = weights[position] as u64;
            let distance = fenwick.range(position + 1, index) + old;
            let bucket = sorted.partition_point(|&c| c < distance);
            hits_from[bucket] += 1;
            bytes_from[bucket] += req.size as u64;
            fenwick.add(position, -(old as i64));
        }
        fenwick.add(index, w as i64);
    }
    let (mut hits, mut bytes) = (0u64, 0u64);
    let mut by_capacity = KeyMap::default();
    for (j, &capacity) in sorted.iter().enumerate() {
        hits += hits_from[j];
        bytes += bytes_from[j];
        by_capacity.insert(capacity, (hits, bytes));
    }
    let ratio = |part: u64, whole: u64| if whole == 0 { 0.0 } else { part as f64 / whole as f64 };
    Ok(capacities
        .iter()
        .map(|c| {
            let (hits, bytes) = by_capacity[&c.amount];
            MrcPoint {
                policy: "lru".into(),
                capacity: c.amount,
                unit: c.unit.as_str(),
                miss_ratio: 1.0 - ratio(hits, total),
                byte_miss_ratio: 1.0 - ratio(bytes, total_bytes),
                method: "exact",
                rate: 1.0,
                simulated_requests: total,
                spread: 0.0,
                samples: 1,
                estimator: "exact",
            }
        })
        .collect())
}

/// How much of the key space a sampled curve keeps.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Sampling {
    /// A fixed fraction of the keys, in (0, 1].
    Rate(f64),
    /// As many keys as this at most (the rate follows, per sample, from a first pass).
    Keys(u64),
}

/// The hash that decides whether a key is sampled: SplitMix64's finalizer over the key and the
/// sample's salt, uniform over 64 bits for any key set.
fn sample_hash(key: u64, salt: u64) -> u64 {
    let mut z = key ^ salt.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// One sample of a stream: its requests and the fraction of the key space it kept.
pub struct Sample {
    pub requests: Vec<Request>,
    pub rate: f64,
}

/// The threshold below which `keys` distinct keys of the stream hash (`u64::MAX`, all of them,
/// if there are no more): the `keys` smallest hashes kept in a heap, the largest on top.
fn threshold_for_keys(requests: &[Request], salt: u64, keys: u64) -> u64 {
    let keys = keys.max(1) as usize;
    let mut heap = std::collections::BinaryHeap::with_capacity(keys + 1);
    let mut seen = KeySet::default();
    let mut largest_kept = u64::MAX;
    for req in requests {
        let hash = sample_hash(req.key, salt);
        if hash >= largest_kept || !seen.insert(req.key) {
            continue;
        }
        heap.push(hash);
        if heap.len() > keys {
            heap.pop();
            largest_kept = *heap.peek().expect("a full heap");
        }
    }
    if heap.len() < keys || largest_kept == u64::MAX {
        u64::MAX
    } else {
        largest_kept + 1
    }
}

/// The sample of `requests` with this salt.
pub fn sample(requests: &[Request], sampling: Sampling, salt: u64) -> Sample {
    let threshold = match sampling {
        Sampling::Rate(rate) if rate >= 1.0 => u64::MAX,
        Sampling::Rate(rate) => (rate * 2f64.powi(64)) as u64,
        Sampling::Keys(keys) => threshold_for_keys(requests, salt, keys),
    };
    let requests: Vec<Request> = if threshold == u64::MAX {
        requests.to_vec()
    } else {
        requests.iter().filter(|r| sample_hash(r.key, salt) < threshold).copied().collect()
    };
    let rate = if threshold == u64::MAX { 1.0 } else { threshold as f64 / 2f64.powi(64) };
    Sample { requests, rate }
}

/// A capacity scaled to a sample's rate (at least one unit).
pub fn scaled(capacity: Capacity, rate: f64) -> Capacity {
    let amount = ((capacity.amount as f64 * rate).round() as u64).max(1);
    Capacity { amount, ..capacity }
}

/// A sample's (miss ratio, byte miss ratio, policy label). (SHARDS' adjustment, counting as
/// hits the difference between the requests a sample holds and the `R` of the stream it should,
/// was tried here and did not help: mean absolute error 3.5 instead of 4.2 points on arc_OLTP,
/// 0.29 instead of 0.27 on arc_P3, 0.87 instead of 0.67 on arc_P2, at rate 0.01.)
fn point_of(report: &crate::run::SimReport) -> (f64, f64, String) {
    (report.miss_ratio, report.byte_miss_ratio, report.policy.clone())
}

/// How a sample's miss ratio stands for the stream's.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Estimator {
    /// Its misses over its requests (SHARDS').
    Plain,
    /// Post-stratified by the keys' request counts (see the module comment).
    #[default]
    Stratified,
}

impl Estimator {
    /// `plain` or `stratified`; anything else names the two.
    pub fn parse(name: &str) -> Result<Estimator, String> {
        match name {
            "plain" => Ok(Estimator::Plain),
            "stratified" => Ok(Estimator::Stratified),
            other => Err(format!("estimator '{other}': use stratified or plain")),
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Estimator::Plain => "plain",
            Estimator::Stratified => "stratified",
        }
    }
}

/// What a sampled curve runs: the policies, the capacities, the filters, the policies' seed and
/// the estimator.
#[derive(Clone, Copy)]
pub struct SampledRun<'a> {
    pub policies: &'a [PolicyConfig],
    pub capacities: &'a [Capacity],
    pub admission: &'a [AdmissionConfig],
    pub seed: u64,
    pub logical_time: bool,
    pub estimator: Estimator,
    /// With a fixed rate, a rate raised for each capacity whose sampled cache would hold fewer
    /// objects than this ([`samplings`]).
    pub min_sampled_objects: Option<u64>,
}

/// Requests, hits and their bytes per stratum (deletes aside, as the simulator's ratios).
struct Tally {
    requests: Vec<u64>,
    bytes: Vec<u64>,
    hits: Vec<u64>,
    bytes_hit: Vec<u64>,
}

impl Tally {
    fn with_strata(strata: usize) -> Tally {
        let zeros = vec![0; strata];
        Tally {
            requests: zeros.clone(),
            bytes: zeros.clone(),
            hits: zeros.clone(),
            bytes_hit: zeros,
        }
    }

    fn add(&mut self, stratum: usize, size: u32, hit: bool) {
        self.requests[stratum] += 1;
        self.bytes[stratum] += size as u64;
        if hit {
            self.hits[stratum] += 1;
            self.bytes_hit[stratum] += size as u64;
        }
    }
}

/// The stream's strata: each key's request count (deletes aside), whose ⌊log₂⌋ is its stratum,
/// and each stratum's requests.
struct Strata {
    counts: KeyIndex,
    requests: Vec<u64>,
}

impl Strata {
    /// One pass over the stream (the keys' open-addressing index, each slot holding its key's
    /// count, prefetched a few requests ahead as the exact pass's is).
    fn of(requests: &[Request]) -> Strata {
        let mut counts = KeyIndex::with_capacity((requests.len() / 4).min(1 << 22));
        for (index, req) in requests.iter().enumerate() {
            if let Some(ahead) = requests.get(index + PREFETCH_AHEAD) {
                counts.prefetch(ahead.key);
            }
            if req.op != Op::Delete {
                counts.count(req.key);
            }
        }
        let mut per_stratum = vec![0u64; u32::BITS as usize];
        for (_, n) in counts.iter() {
            per_stratum[n.ilog2() as usize] += n as u64;
        }
        Strata { counts, requests: per_stratum }
    }

    /// A key's stratum (0 for a key with deletes only).
    fn of_key(&self, key: u64) -> u8 {
        self.counts.get(key).map_or(0, |n| n.ilog2() as u8)
    }

    /// A sample's (miss ratio, byte miss ratio) from its tally: each stratum's hit ratio in the
    /// sample, weighted by the stratum's share of the stream's requests; in bytes, each
    /// stratum's bytes hit and bytes per request in the sample, so weighted. A stratum the
    /// sample has no request of takes the pooled ratios of the nearest strata (widening both
    /// ways) it has.
    fn estimate(&self, sample: &Tally) -> (f64, f64) {
        let strata = self.requests.len();
        let (mut hits, mut bytes_hit, mut bytes) = (0.0, 0.0, 0.0);
        for s in (0..strata).filter(|&s| self.requests[s] > 0) {
            let (mut low, mut high) = (s, s);
            let pooled = |v: &[u64], low: usize, high: usize| v[low..=high].iter().sum::<u64>();
            while pooled(&sample.requests, low, high) == 0 {
                if low == 0 && high == strata - 1 {
                    return (1.0, 1.0);
                }
                (low, high) = (low.saturating_sub(1), (high + 1).min(strata - 1));
            }
            let per_request = |v: &[u64]| {
                self.requests[s] as f64 * pooled(v, low, high) as f64
                    / pooled(&sample.requests, low, high) as f64
            };
            hits += per_request(&sample.hits);
            bytes_hit += per_request(&sample.bytes_hit);
            bytes += per_request(&sample.bytes);
        }
        let requests = self.requests.iter().sum::<u64>() as f64;
        let miss = |hit: f64, whole: f64| if whole == 0.0 { 0.0 } else { 1.0 - hit / whole };
        (miss(hits, requests), miss(bytes_hit, bytes))
    }
}

/// A sample ready to run: with the stratified estimator, each of its requests' stratum.
struct Prepared {
    sample: Sample,
    strata_of: Vec<u8>,
}

/// Every policy's curve at every capacity over `samples` samples (salts 1 to `samples`), in
/// policy-major order; `done` is called after each simulation.
pub fn sampled(
    requests: &[Request],
    run: &SampledRun,
    sampling: Sampling,
    samples: u32,
    done: &(dyn Fn() + Sync),
) -> Result<Vec<MrcPoint>, PolicyError> {
    let needs_future = run.policies.iter().any(|p| p.needs_future());
    let per_capacity = samplings(requests, run, sampling);
    // Each distinct sampling once, its samples by salt.
    let mut distinct: Vec<Sampling> = Vec::new();
    for s in &per_capacity {
        if !distinct.contains(s) {
            distinct.push(*s);
        }
    }
    let wanted: Vec<(usize, u64)> = distinct
        .iter()
        .enumerate()
        .flat_map(|(i, s)| (1..=samples_of(*s, samples) as u64).map(move |salt| (i, salt)))
        .collect();
    // The samples, and beside them the counting pass that strata take.
    let stratified = run.estimator == Estimator::Stratified;
    let (strata, sets): (Option<Strata>, Vec<Sample>) = rayon::join(
        || stratified.then(|| Strata::of(requests)),
        || {
            wanted
                .par_iter()
                .map(|&(i, salt)| {
                    let mut sample = sample(requests, distinct[i], salt);
                    if run.logical_time {
                        let at = |(i, r): (usize, &mut Request)| r.time_us = i as u64;
                        sample.requests.iter_mut().enumerate().for_each(at);
                    }
                    if needs_future {
                        annotate_next_access(&mut sample.requests);
                    }
                    sample
                })
                .collect()
        },
    );
    // With the stratified estimator, each sampled request's stratum.
    let sets: Vec<Prepared> = sets
        .into_par_iter()
        .map(|sample| {
            let strata_of = match &strata {
                Some(strata) => sample.requests.iter().map(|r| strata.of_key(r.key)).collect(),
                None => Vec::new(),
            };
            Prepared { sample, strata_of }
        })
        .collect();
    // One group of runs per point, one run per sample of its capacity's sampling.
    let mut groups: Vec<(Capacity, std::ops::Range<usize>)> = Vec::new();
    let mut jobs: Vec<(&PolicyConfig, Capacity, &Prepared)> = Vec::new();
    for policy in run.policies {
        for (capacity, s) in run.capacities.iter().zip(&per_capacity) {
            let which = distinct.iter().position(|d| d == s).expect("listed");
            let start = jobs.len();
            let of_it = wanted.iter().zip(&sets).filter(|((i, _), _)| *i == which);
            jobs.extend(of_it.map(|(_, sample)| (policy, *capacity, sample)));
            groups.push((*capacity, start..jobs.len()));
        }
    }
    let reports = jobs
        .par_iter()
        .map(|(policy, capacity, Prepared { sample, strata_of })| {
            let stack = StackConfig {
                admission: run.admission.to_vec(),
                seed: run.seed,
                ..StackConfig::single((*policy).clone(), scaled(*capacity, sample.rate))
            };
            let options = RunOptions::new(stack);
            let point = match &strata {
                None => point_of(&simulate_slice(&options, &sample.requests)?),
                Some(strata) => {
                    let mut tally = Tally::with_strata(strata.requests.len());
                    let mut of = strata_of.iter();
                    let report = simulate_slice_observed(&options, &sample.requests, |req, d| {
                        let stratum = *of.next().expect("a stratum per request") as usize;
                        if req.op != Op::Delete {
                            tally.add(stratum, req.size, d.hit.is_some());
                        }
                    })?;
                    let (miss, byte_miss) = strata.estimate(&tally);
                    (miss, byte_miss, report.policy)
                }
            };
            done();
            Ok((point, sample.rate, sample.requests.len() as u64))
        })
        .collect::<Result<Vec<_>, PolicyError>>()?;
    let points = groups
        .into_iter()
        .map(|(capacity, range)| {
            let runs = &reports[range];
            let n = runs.len() as f64;
            let miss: Vec<f64> = runs.iter().map(|(r, _, _)| r.0).collect();
            let (low, high) =
                miss.iter().fold((f64::MAX, f64::MIN), |(l, h), &m| (l.min(m), h.max(m)));
            MrcPoint {
                policy: runs[0].0 .2.clone(),
                capacity: capacity.amount,
                unit: capacity.unit.as_str(),
                miss_ratio: miss.iter().sum::<f64>() / n,
                byte_miss_ratio: runs.iter().map(|(r, _, _)| r.1).sum::<f64>() / n,
                method: "sampled",
                rate: runs.iter().map(|(_, rate, _)| rate).sum::<f64>() / n,
                simulated_requests: runs.iter().map(|(_, _, len)| len).sum(),
                spread: high - low,
                samples: runs.len() as u32,
                estimator: run.estimator.as_str(),
            }
        })
        .collect();
    Ok(points)
}

/// The rate above which a sample is taken whole: sampling half the keys three times costs more
/// than the full simulation, and says less.
const WHOLE_FROM: f64 = 0.5;

/// Each capacity's sampling: `sampling`, or where `run.min_sampled_objects` asks (a fixed rate
/// only), a rate raised so that the sampled cache holds that many objects of the stream's mean
/// size, the whole stream from [`WHOLE_FROM`] up.
pub fn samplings(requests: &[Request], run: &SampledRun, sampling: Sampling) -> Vec<Sampling> {
    let (Sampling::Rate(rate), Some(least)) = (sampling, run.min_sampled_objects) else {
        return vec![sampling; run.capacities.len()];
    };
    let mean_size = mean_size(requests).max(1.0);
    run.capacities
        .iter()
        .map(|capacity| {
            let objects = match capacity.unit {
                Unit::Objects => capacity.amount as f64,
                Unit::Bytes => capacity.amount as f64 / mean_size,
            };
            let needed = (least as f64 / objects).max(rate);
            Sampling::Rate(if needed >= WHOLE_FROM { 1.0 } else { needed })
        })
        .collect()
}

/// The requests' mean size in bytes (0 for none).
pub fn mean_size(requests: &[Request]) -> f64 {
    requests.iter().map(|r| r.size as f64).sum::<f64>() / requests.len().max(1) as f64
}

/// The samples a point takes at `sampling`: one of the whole stream, else `samples`.
pub fn samples_of(sampling: Sampling, samples: u32) -> u32 {
    match sampling {
        Sampling::Rate(rate) if rate >= 1.0 => 1,
        _ => samples,
    }
}

/// Every policy's curve, in the policies' order: LRU's exact from stack distances when
/// `exact_lru` and the run has no admission filter (unless the stream has lookups or deletes:
/// then it is sampled like the others, and the returned note says why), the others sampled.
pub fn curves(
    requests: &[Request],
    run: &SampledRun,
    sampling: Sampling,
    samples: u32,
    exact_lru: bool,
    done: &(dyn Fn() + Sync),
) -> Result<(Vec<MrcPoint>, Option<String>), PolicyError> {
    let filtered = run.admission.iter().any(|a| *a != AdmissionConfig::Always);
    let try_exact = exact_lru && !filtered && run.policies.contains(&PolicyConfig::Lru);
    let rest: Vec<PolicyConfig> =
        run.policies.iter().filter(|p| !try_exact || **p != PolicyConfig::Lru).cloned().collect();
    // The exact pass (one core) beside the sampled simulations.
    let (exact, others) = rayon::join(
        || try_exact.then(|| lru_exact(requests, run.capacities)),
        || sampled(requests, &SampledRun { policies: &rest, ..*run }, sampling, samples, done),
    );
    let mut others = others?.into_iter();
    let (lru, note) = match exact {
        None => (None, None),
        Some(Ok(points)) => (Some(points), None),
        Some(Err(why)) => {
            let alone = SampledRun { policies: &[PolicyConfig::Lru], ..*run };
            let points = sampled(requests, &alone, sampling, samples, done)?;
            (Some(points), Some(format!("LRU sampled like the others: {why}")))
        }
    };
    let mut points = Vec::new();
    for policy in run.policies {
        match (&lru, policy) {
            (Some(lru), PolicyConfig::Lru) => points.extend(lru.iter().cloned()),
            _ => points.extend(others.by_ref().take(run.capacities.len())),
        }
    }
    Ok((points, note))
}

#[cfg(test)]
mod tests {
    use super::*;
    use tiercache_core::Request;

    fn stream(keys: &[(u64, u32)]) -> Vec<Request> {
        keys.iter().map(|&(k, s)| Request::read(k, s)).collect()
    }

    fn simulated_lru(requests: &[Request], capacity: Capacity) -> (f64, f64) {
        let stack = StackConfig::single(PolicyConfig::Lru, capacity);
        let report = simulate_slice(&RunOptions::new(stack), requests).unwrap();
        (report.miss_ratio, report.byte_miss_ratio)
    }

    /// Stack distances give what the simulator gives, in objects and in bytes with mixed sizes,
    /// at every capacity from one object or block up.
    #[test]
    fn exact_lru_is_the_simulators_lru_at_every_capacity() {
        let mut state = 7u64;
        let requests: Vec<Request> = (0..5000)
            .map(|_| {
                state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                let key = (state >> 33) % 300;
                Request::read(key, 512 * (1 + (key % 8) as u32))
            })
            .collect();
        for unit in [Unit::Objects, Unit::Bytes] {
            let amounts: Vec<u64> = match unit {
                Unit::Objects => vec![1, 2, 10, 50, 150, 299, 300, 1000],
                Unit::Bytes => vec![4096, 8192, 50_000, 300_000, 600_000, 1 << 20, 10 << 20],
            };
            let capacities: Vec<Capacity> =
                amounts.iter().map(|&amount| Capacity { amount, unit }).collect();
            let exact = lru_exact(&requests, &capacities).unwrap();
            for (point, capacity) in exact.iter().zip(&capacities) {
                let (miss, byte_miss) = simulated_lru(&requests, *capacity);
                assert_eq!(point.miss_ratio, miss, "{capacity:?}");
                assert_eq!(point.byte_miss_ratio, byte_miss, "{capacity:?}");
            }
        }
    }

    #[test]
    fn a_stream_with_a_delete_has_no_exact_curve_and_says_where() {
        let mut requests = stream(&[(1, 1), (2, 1)]);
        requests.push(Request::new(0, 1, 1, Op::Delete));
        let capacities = [Capacity { amount: 1, unit: Unit::Objects }];
        let err = lru_exact(&requests, &capacities).unwrap_err().to_string();
        assert!(err.contains("request 2") && err.contains("delete"), "{err}");
    }

    /// The stratified estimate by hand: two strata of the stream (keys seen once, 60 requests;
    /// keys seen 4 to 7 times, 40), the sample's hit ratios 1/4 and 3/4 in them, so a miss
    /// ratio of 1 - (60 · 1/4 + 40 · 3/4) / 100 = 0.55, where the sample's own ratio (4 hits of
    /// 8) says 0.5. A stratum the sample misses (keys seen twice or three times) takes its
    /// neighbours' pooled ratio.
    #[test]
    fn the_stratified_estimate_weighs_each_stratum_by_its_share_of_the_stream() {
        let mut requests: Vec<Request> = (0..60).map(|k| Request::read(k, 100)).collect();
        for k in 1000..1010 {
            requests.extend((0..4).map(|_| Request::read(k, 100)));
        }
        let strata = Strata::of(&requests);
        assert_eq!((strata.requests[0], strata.requests[2]), (60, 40));
        assert_eq!((strata.of_key(7), strata.of_key(1003)), (0, 2));
        let mut tally = Tally::with_strata(strata.requests.len());
        for (stratum, hit) in [(0, true), (0, false), (0, false), (0, false)] {
            tally.add(stratum, 100, hit);
        }
        for (stratum, hit) in [(2, true), (2, true), (2, true), (2, false)] {
            tally.add(stratum, 100, hit);
        }
        let (miss, byte_miss) = strata.estimate(&tally);
        assert!((miss - 0.55).abs() < 1e-12 && (byte_miss - 0.55).abs() < 1e-12, "{miss}");
        // Keys seen twice: stratum 1, which the sample lacks; it pools strata 0 to 2 (4 hits
        // of 8).
        requests.extend((2000..2010).flat_map(|k| [Request::read(k, 100), Request::read(k, 100)]));
        let strata = Strata::of(&requests);
        let (miss, _) = strata.estimate(&tally);
        let expected = 1.0 - (60.0 * 0.25 + 20.0 * 0.5 + 40.0 * 0.75) / 120.0;
        assert!((miss - expected).abs() < 1e-12, "{miss} against {expected}");
    }

    /// With a delete in the stream, LRU's curve is sampled like the others, in the policies'
    /// order, and the note says why.
    #[test]
    fn a_stream_with_a_delete_has_lru_sampled_in_its_place() {
        let mut requests: Vec<Request> = (0..4000u64).map(|i| Request::read(i % 500, 1)).collect();
        requests.push(Request::new(0, 3, 1, Op::Delete));
        let policies = [PolicyConfig::Fifo, PolicyConfig::Lru];
        let capacities = [Capacity { amount: 100, unit: Unit::Objects }];
        let run = SampledRun {
            policies: &policies,
            capacities: &capacities,
            admission: &[],
            seed: 0,
            logical_time: true,
            estimator: Estimator::Stratified,
            min_sampled_objects: None,
        };
        let (points, note) = curves(&requests, &run, Sampling::Rate(0.5), 2, true, &|| {}).unwrap();
        let methods: Vec<(&str, &str)> =
            points.iter().map(|p| (p.policy.as_str(), p.method)).collect();
        assert_eq!(methods, [("fifo", "sampled"), ("lru", "sampled")]);
        assert!(note.unwrap().contains("delete"));
        let (points, note) =
            curves(&requests[..4000], &run, Sampling::Rate(0.5), 2, true, &|| {}).unwrap();
        assert_eq!((points[1].method, note), ("exact", None));
    }

    #[test]
    fn a_sample_keeps_whole_keys_near_the_rate_and_a_key_bound_holds() {
        let requests: Vec<Request> =
            (0..200_000u64).map(|i| Request::read(i % 20_000, 1)).collect();
        let sample = sample(&requests, Sampling::Rate(0.1), 1);
        let keys: KeySet = sample.requests.iter().map(|r| r.key).collect();
        assert!((1800..2200).contains(&keys.len()), "{} keys of 20,000 at 0.1", keys.len());
        assert_eq!(sample.requests.len(), keys.len() * 10, "every request of a sampled key");
        let bounded = super::sample(&requests, Sampling::Keys(500), 1);
        let keys: KeySet = bounded.requests.iter().map(|r| r.key).collect();
        assert_eq!(keys.len(), 500);
        assert!((0.02..0.03).contains(&bounded.rate), "rate {}", bounded.rate);
        let all = super::sample(&requests, Sampling::Keys(50_000), 1);
        assert_eq!((all.requests.len(), all.rate), (requests.len(), 1.0));
    }
}
