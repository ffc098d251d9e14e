//! NVCache's admission to a slow-memory block cache (Writes Hurt: Lessons in Cache Design for
//! Optane NVRAM, section 3.2). The cache sits below the engine's DRAM cache and is looked up
//! on the blocks the engine reads from storage. On Optane a single writer cuts read throughput
//! by almost 4x, so admissions (and the removals and evictions they cause) are writes that cost
//! lookups their speed. Two rules, each optional:
//!
//! - small-bypass: admit nothing while the dataset (here: the distinct bytes seen so far) fits
//!   in the DRAM the engine is given;
//! - overhead bypass: OBP = (blocks inserted + blocks removed) / blocks looked up; while it
//!   exceeds the target (10% in the paper; 5-30% acceptable) admit nothing, and so evict
//!   nothing. The ratio is cumulative (as shipped in WiredTiger) or over the last lookups.
//!
//! The paper's baselines are the same controller with both rules off: alloc-read-write (read
//! misses and writes admitted) and no-write-allocate (read misses only). Remove-on-free: a write
//! to a cached block makes the cached copy stale, so it is invalidated and counts as a removal;
//! with write-allocate the new version is then admitted like any other block.
//!
//! Like every policy here it only decides: the inner single-tier policy keeps the blocks, and
//! this wrapper chooses which requests may reach it.

use std::collections::VecDeque;

use serde::{Deserialize, Serialize};
use tiercache_core::{Action, Decision, Direction, KeySet, Op, RejectReason, Request, TierId};

use crate::policy::Policy;

/// How OBP is measured.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum ObpWindow {
    /// Since the start (WiredTiger's NVCache).
    Cumulative,
    /// Over about the last `lookups` lookups (in 16 buckets).
    Sliding { lookups: u64 },
}

/// What NVCache's admission does.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NvcacheConfig {
    /// The OBP target; `None` turns overhead bypass off.
    pub obp_target: Option<f64>,
    pub window: ObpWindow,
    /// DRAM bytes the engine is given; `Some` turns small-bypass on.
    pub small_bypass_bytes: Option<u64>,
    /// Admit written blocks too (alloc-read-write); otherwise read misses only.
    pub write_allocate: bool,
    /// Evict to make room once full (eager eviction); `false`: once full, admit only into
    /// space freed by removals (the paper's "no eviction", Table 1).
    pub evict: bool,
    /// Interference-aware admission, our step past the paper: weigh the ratio by what the
    /// slow tier's profile says each operation costs, so that `obp_target` is the share of
    /// the tier's read throughput lost to admission writes (see [`Nvcache`]).
    pub interference: Option<tiercache_core::DeviceProfile>,
    /// With `interference`: correct the model by measurement. Each interval's mean read time
    /// on the tier against the lowest of recent intervals gives the read throughput actually
    /// lost; the admission threshold is scaled down while that loss exceeds the target and up
    /// while it stays under (see [`Nvcache::observe`]).
    pub measured: bool,
}

impl NvcacheConfig {
    /// The paper's admission: OBP 10%, cumulative, read misses only, small-bypass off (it
    /// needs the DRAM size).
    pub fn obp(target: f64) -> NvcacheConfig {
        NvcacheConfig {
            obp_target: Some(target),
            window: ObpWindow::Cumulative,
            small_bypass_bytes: None,
            write_allocate: false,
            evict: true,
            interference: None,
            measured: false,
        }
    }

    /// Interference-aware admission on a tier shaped like `profile`: admit while the modeled
    /// share of read throughput lost to admission writes stays under `target`.
    pub fn interference(target: f64, profile: tiercache_core::DeviceProfile) -> NvcacheConfig {
        NvcacheConfig { interference: Some(profile), ..NvcacheConfig::obp(target) }
    }

    /// The always-admit baseline.
    pub fn alloc_read_write() -> NvcacheConfig {
        NvcacheConfig { write_allocate: true, obp_target: None, ..NvcacheConfig::obp(0.1) }
    }

    /// The no-write-allocate baseline.
    pub fn no_write_allocate() -> NvcacheConfig {
        NvcacheConfig { obp_target: None, ..NvcacheConfig::obp(0.1) }
    }
}

impl NvcacheConfig {
    /// Parses `obp[:TARGET]`, `alloc-read-write` or `no-write-allocate`, then options after
    /// commas: `small-bypass=BYTES` (the DRAM size, e.g. `16GiB`), `window=LOOKUPS` (sliding
    /// OBP), `write-allocate`, `no-eviction`, read into fields by the one grammar of options
    /// ([`crate::params`]).
    pub fn parse(text: &str) -> Result<NvcacheConfig, crate::error::PolicyError> {
        let bad =
            |key: &str, reason: String| crate::error::PolicyError::bad("nvcache", key, reason);
        let mut parts = text.split(',');
        let base = parts.next().unwrap_or_default();
        let mut config = match base.split_once(':') {
            Some(("obp", target)) => {
                let target: f64 = target
                    .parse()
                    .map_err(|_| bad("obp", format!("target '{target}' is not a number")))?;
                if !(target > 0.0 && target.is_finite()) {
                    return Err(bad(
                        "obp",
                        format!("target {target} must be above 0 (0.1 is 10%)"),
                    ));
                }
                NvcacheConfig::obp(target)
            }
            None if base == "obp" => NvcacheConfig::obp(0.1),
            Some(("interference", target)) => {
                let target: f64 =
                    target.parse().ok().filter(|t: &f64| *t > 0.0 && t.is_finite()).ok_or_else(
                        || {
                            bad(
                                "interference",
                                format!("target '{target}' must be a number above 0 (0.1 is 10%)"),
                            )
                        },
                    )?;
                NvcacheConfig::interference(target, optane())
            }
            None if base == "interference" => NvcacheConfig::interference(0.1, optane()),
            None if base == "alloc-read-write" => NvcacheConfig::alloc_read_write(),
            None if base == "no-write-allocate" => NvcacheConfig::no_write_allocate(),
            _ => {
                let known =
                    "obp[:TARGET], interference[:TARGET], alloc-read-write, no-write-allocate"
                        .to_string();
                return Err(crate::error::PolicyError::UnknownPolicy { name: base.into(), known });
            }
        };
        // The options after the base, by the one grammar of options (`crate::params`): each a
        // field of `NvcacheOptions`; a bare flag (`write-allocate`) is the flag set to true.
        let flags: Vec<String> = parts
            .map(str::trim)
            .filter(|p| !p.is_empty())
            .map(|p| if p.contains('=') { p.to_string() } else { format!("{p}=true") })
            .collect();
        let joined = flags.join(",");
        let pairs = crate::params::pairs("nvcache", &joined)?;
        let options = crate::params::apply("nvcache", &NvcacheOptions::default(), &pairs)?;
        if let Some(bytes) = options.small_bypass {
            config.small_bypass_bytes = Some(bytes);
        }
        if let Some(lookups) = options.window {
            config.window = ObpWindow::Sliding { lookups: lookups.max(1) };
        }
        config.write_allocate |= options.write_allocate;
        config.evict &= !options.no_eviction;
        let interference = config.interference.is_some();
        if let Some(name) = options.profile {
            let profile = tiercache_core::DeviceProfile::preset(&name)
                .filter(|_| interference)
                .ok_or_else(|| match interference {
                    true => {
                        bad("profile", format!("'{name}' is not a preset (tiercache profile list)"))
                    }
                    false => bad("profile", "is an option of interference only".into()),
                })?;
            config.interference = Some(profile);
        }
        if options.measured && !interference {
            return Err(bad("measured", "is an option of interference only".into()));
        }
        config.measured = options.measured;
        Ok(config)
    }
}

/// The options after NVCache's base in its option string, as the one grammar of options reads
/// them into fields (keys with `-` for `_`).
#[derive(Default, Serialize, Deserialize)]
struct NvcacheOptions {
    /// The DRAM size (`16GiB`): turns small-bypass on.
    small_bypass: Option<u64>,
    /// A sliding OBP window of this many lookups.
    window: Option<u64>,
    write_allocate: bool,
    no_eviction: bool,
    /// Interference only: the tier's device preset.
    profile: Option<String>,
    /// Interference only: correct the model by measurement.
    measured: bool,
}

/// Measured interference: intervals with fewer tier reads than this are skipped, and the
/// fastest of the last this-many intervals is the undisturbed read time.
const MEASURED_READS_MIN: u64 = 32;
const MEASURED_WINDOW: usize = 64;

fn optane() -> tiercache_core::DeviceProfile {
    tiercache_core::DeviceProfile::preset("optane-dcpm").expect("a preset")
}

const BUCKETS: usize = 16;

/// Lookups and writes (inserts plus removals), each weighed by its cost (1 for OBP): totals
/// since the start, or over a window of buckets of lookups (the last one open), the totals
/// then being the buckets' sums.
struct Ratio {
    window: ObpWindow,
    lookups: f64,
    writes: f64,
    /// Per bucket: lookups counted, their weight, and the writes' weight.
    buckets: VecDeque<(u64, f64, f64)>,
}

impl Ratio {
    fn new(window: ObpWindow) -> Ratio {
        Ratio { window, lookups: 0.0, writes: 0.0, buckets: VecDeque::new() }
    }

    fn value(&self) -> f64 {
        if self.lookups <= 0.0 {
            0.0
        } else {
            self.writes / self.lookups
        }
    }

    fn lookup(&mut self, weight: f64) {
        self.lookups += weight;
        let ObpWindow::Sliding { lookups } = self.window else { return };
        let per_bucket = (lookups / BUCKETS as u64).max(1);
        let open = self.open();
        open.0 += 1;
        open.1 += weight;
        if open.0 >= per_bucket {
            self.buckets.push_back((0, 0.0, 0.0));
            if self.buckets.len() > BUCKETS {
                let (_, l, w) = self.buckets.pop_front().expect("a full window");
                self.lookups -= l;
                self.writes -= w;
            }
        }
    }

    fn write(&mut self, weight: f64) {
        self.writes += weight;
        if let ObpWindow::Sliding { .. } = self.window {
            self.open().2 += weight;
        }
    }

    fn open(&mut self) -> &mut (u64, f64, f64) {
        if self.buckets.is_empty() {
            self.buckets.push_back((0, 0.0, 0.0));
        }
        self.buckets.back_mut().expect("an open bucket")
    }
}

/// The weights of interference-aware admission on a tier shaped like a profile: a lookup
/// weighs the time the tier takes to read the block (what it could serve); an insert weighs
/// the time the tier spends writing it times the share of read throughput a writer takes
/// away (Writes Hurt, Figure 2: one writer leaves Optane reads 28% of their throughput); a
/// removal updates the allocator's metadata, a 64-byte write.
struct Weights {
    profile: tiercache_core::DeviceProfile,
    lost_share: f64,
}

impl Weights {
    fn new(profile: tiercache_core::DeviceProfile) -> Weights {
        let lost_share = 1.0 - profile.read_share(1);
        Weights { profile, lost_share }
    }

    fn lookup(&self, size: u32) -> f64 {
        self.profile.service_ns(Direction::Read, size as u64, 0)
    }

    fn write(&self, size: u32) -> f64 {
        self.profile.service_ns(Direction::Write, size as u64, 0) * self.lost_share
    }
}

const METADATA_BYTES: u32 = 64;

/// NVCache's admission around a single-tier policy (the slow-memory cache).
pub struct Nvcache<P> {
    inner: Box<P>,
    config: NvcacheConfig,
    ratio: Ratio,
    weights: Option<Weights>,
    /// Measured correction (interference-aware, measured): the threshold's scale, the recent
    /// intervals' mean tier read times, and the loss measured last.
    calibration: f64,
    read_times: VecDeque<f64>,
    measured_loss: Option<f64>,
    seen: KeySet,
    footprint: u64,
    /// Totals over the run, for reports.
    pub inserted: u64,
    pub removed: u64,
    pub looked_up: u64,
}

impl<P: Policy> Nvcache<P> {
    pub fn new(inner: P, config: NvcacheConfig) -> Nvcache<P> {
        Nvcache {
            inner: Box::new(inner),
            ratio: Ratio::new(config.window),
            weights: config.interference.clone().map(Weights::new),
            calibration: 1.0,
            read_times: VecDeque::new(),
            measured_loss: None,
            config,
            seen: KeySet::default(),
            footprint: 0,
            inserted: 0,
            removed: 0,
            looked_up: 0,
        }
    }

    /// The current overhead-bypass ratio.
    pub fn obp(&self) -> f64 {
        self.ratio.value()
    }

    /// Why `req` may not be admitted now, if it may not.
    fn refusal(&self, req: &Request) -> Option<RejectReason> {
        if !self.config.evict {
            let tier = TierId(0);
            let capacity = self.inner.capacity(tier);
            if self.inner.used(tier) + capacity.charge(req.size) > capacity.amount {
                return Some(RejectReason::NoSpace);
            }
        }
        if self.config.small_bypass_bytes.is_some_and(|dram| self.footprint <= dram) {
            return Some(RejectReason::SmallDataset);
        }
        self.abstaining().then_some(RejectReason::Throttled)
    }

    /// Whether overhead bypass abstains: OBP over its target (scaled by the measured
    /// correction). NVCache then "abstains from admitting or evicting cache blocks".
    fn abstaining(&self) -> bool {
        self.config.obp_target.is_some_and(|target| self.ratio.value() > target * self.calibration)
    }

    /// Counts the writes (inserts and removals) the inner policy's actions cause.
    fn count(&mut self, out: &Decision, from: usize) {
        let mut writes = 0.0;
        for action in &out.actions[from..] {
            match *action {
                Action::Insert { size, .. } => {
                    self.inserted += 1;
                    writes += self.weights.as_ref().map_or(1.0, |w| w.write(size));
                }
                Action::Evict { .. } | Action::Invalidate { .. } => {
                    self.removed += 1;
                    writes += self.weights.as_ref().map_or(1.0, |w| w.write(METADATA_BYTES));
                }
                _ => {}
            }
        }
        if writes > 0.0 {
            self.ratio.write(writes);
        }
    }

    /// Admits `req` if the rules allow, else records why not.
    fn admit(&mut self, req: &Request, out: &mut Decision) {
        match self.refusal(req) {
            Some(reason) => out.push(Action::Reject { key: req.key, size: req.size, reason }),
            None => {
                let from = out.actions.len();
                self.inner.decide(&Request { op: Op::Read, ..*req }, out);
                self.count(out, from);
            }
        }
    }
}

impl<P: Policy> Policy for Nvcache<P> {
    crate::policy::delegate_to_inner!(restore);

    fn decide(&mut self, req: &Request, out: &mut Decision) {
        if req.op != Op::Delete && self.seen.insert(req.key) {
            self.footprint += req.size as u64;
        }
        let from = out.actions.len();
        // Evictions of the inner policy's own accord (LFRU's sweeps) wait while OBP abstains.
        self.inner.hold_evictions(self.abstaining());
        match req.op {
            Op::Delete => {
                self.inner.decide(req, out);
                self.count(out, from);
            }
            Op::Read | Op::Lookup => {
                self.inner.decide(&Request { op: Op::Lookup, ..*req }, out);
                // A sweep that ran during the lookup evicted: removals, counted.
                self.count(out, from);
                self.looked_up += 1;
                self.ratio.lookup(self.weights.as_ref().map_or(1.0, |w| w.lookup(req.size)));
                if out.hit.is_none() && req.op == Op::Read {
                    self.admit(req, out);
                }
            }
            Op::Write => {
                // Remove-on-free: the cached copy is stale.
                self.inner.decide(&Request { op: Op::Delete, ..*req }, out);
                out.hit = out.invalidated_from(from, req.key);
                self.count(out, from);
                if self.config.write_allocate {
                    self.admit(req, out);
                }
            }
        }
    }

    /// Interference-aware, measured: the loss is 1 - (lowest mean tier read time of the last
    /// intervals) / (this interval's). Over the target, the threshold scales down by a fifth;
    /// under it, up by a tenth (between 1/16 and 16 times the modeled threshold). Intervals
    /// with few tier reads say nothing and are skipped.
    fn observe(&mut self, interval: &tiercache_core::Interval) {
        self.inner.observe(interval);
        let Some(target) = self.config.obp_target.filter(|_| self.config.measured) else {
            return;
        };
        if interval.tier_reads < MEASURED_READS_MIN || interval.tier_read_mean_us <= 0.0 {
            return;
        }
        self.read_times.push_back(interval.tier_read_mean_us);
        if self.read_times.len() > MEASURED_WINDOW {
            self.read_times.pop_front();
        }
        let fastest = self.read_times.iter().copied().fold(f64::MAX, f64::min);
        let loss = (1.0 - fastest / interval.tier_read_mean_us).max(0.0);
        self.measured_loss = Some(loss);
        self.calibration =
            if loss > target { self.calibration * 0.8 } else { self.calibration * 1.1 }
                .clamp(1.0 / 16.0, 16.0);
    }

    fn tick(&mut self, now_us: u64, out: &mut Decision) {
        let from = out.actions.len();
        self.inner.hold_evictions(self.abstaining());
        self.inner.tick(now_us, out);
        self.count(out, from);
    }

    fn label(&self) -> String {
        let mut rules = Vec::new();
        match (self.config.obp_target, &self.config.interference) {
            (Some(target), Some(profile)) => rules.push(format!(
                "interference {:.0}% on {}{}",
                target * 100.0,
                profile.name,
                if self.config.measured { ", measured" } else { "" }
            )),
            (Some(target), None) => rules.push(format!("obp {:.0}%", target * 100.0)),
            (None, _) => {}
        }
        if self.config.small_bypass_bytes.is_some() {
            rules.push("small-bypass".into());
        }
        if !self.config.evict {
            rules.push("no eviction".into());
        }
        rules.push(
            if self.config.write_allocate { "write-allocate" } else { "read-allocate" }.into(),
        );
        format!("nvcache[{}]({})", rules.join(", "), self.inner.label())
    }

    fn knobs(&self) -> Vec<(&'static str, f64)> {
        let mut knobs = self.inner.knobs();
        knobs.push((if self.weights.is_some() { "read_loss" } else { "obp" }, self.obp()));
        if self.config.measured {
            knobs.push(("measured_loss", self.measured_loss.unwrap_or(0.0)));
            knobs.push(("calibration", self.calibration));
        }
        knobs.push(("footprint_bytes", self.footprint as f64));
        knobs
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conformance::check_stream;
    use crate::registry::{AnyPolicy, PolicyConfig};
    use tiercache_core::{Capacity, SeededRng};

    fn nvcache(blocks: u64, config: NvcacheConfig) -> AnyPolicy {
        let lru = AnyPolicy::from_config(&PolicyConfig::Lru, Capacity::objects(blocks), &[], 0);
        lru.unwrap().with_nvcache(config)
    }

    fn run(policy: &mut AnyPolicy, requests: &[Request]) -> (u64, u64) {
        let (mut inserts, mut hits) = (0, 0);
        let mut d = Decision::new();
        for req in requests {
            d.clear();
            policy.decide(req, &mut d);
            hits += d.hit.is_some() as u64;
            inserts +=
                d.actions.iter().filter(|a| matches!(a, Action::Insert { .. })).count() as u64;
        }
        (inserts, hits)
    }

    /// `n` requests over `blocks` blocks of 4 KiB, uniformly, reads with probability `reads`.
    fn workload(n: usize, blocks: u64, reads: f64, seed: u64) -> Vec<Request> {
        let mut rng = SeededRng::new(seed);
        (0..n)
            .map(|_| {
                let key = rng.below(blocks);
                if rng.chance(reads) {
                    Request::read(key, 4096)
                } else {
                    Request::write(key, 4096)
                }
            })
            .collect()
    }

    #[test]
    fn a_write_heavy_dataset_that_fits_in_dram_is_not_admitted() {
        // 1000 blocks (4 MB), 90% writes, DRAM of 8 MB: small-bypass admits nothing.
        let requests = workload(50_000, 1000, 0.1, 1);
        let config = NvcacheConfig { small_bypass_bytes: Some(8 << 20), ..NvcacheConfig::obp(0.1) };
        let (inserts, _) = run(&mut nvcache(500, config), &requests);
        assert_eq!(inserts, 0);
        // Without small-bypass: always admitting writes nearly every request into the slow
        // tier; OBP alone holds inserts to its share of lookups.
        let (always, _) = run(&mut nvcache(500, NvcacheConfig::alloc_read_write()), &requests);
        let (obp, _) = run(&mut nvcache(500, NvcacheConfig::obp(0.1)), &requests);
        let lookups = requests.iter().filter(|r| r.op == Op::Read).count() as u64;
        assert!(always > 40_000, "{always}");
        assert!(
            obp <= lookups / 10 + 1,
            "OBP keeps inserts under 10% of lookups: {obp} of {lookups}"
        );
    }

    #[test]
    fn a_read_only_dataset_larger_than_dram_fills_the_slow_tier() {
        // 20,000 blocks (80 MB) read uniformly; DRAM of 16 MB; the slow tier holds 5000 blocks.
        let requests = workload(200_000, 20_000, 1.0, 2);
        let config =
            NvcacheConfig { small_bypass_bytes: Some(16 << 20), ..NvcacheConfig::obp(0.1) };
        let mut policy = nvcache(5000, config);
        let (inserts, hits) = run(&mut policy, &requests);
        assert_eq!(policy.resident(TierId(0)), 5000, "the slow tier fills");
        // Once full, every admission also evicts: about 5% of lookups are admitted.
        assert!(inserts > 8000 && inserts < 200_000 / 10, "{inserts}");
        assert!(hits > 0);
        let AnyPolicy::Nvcache(inner) = &policy else { unreachable!() };
        assert!((inner.obp() - 0.1).abs() < 0.01, "OBP sits at its target: {}", inner.obp());
    }

    #[test]
    fn interference_aware_admission_weighs_writes_by_what_they_cost_the_tier() {
        // Read-only, uniform over 20,000 blocks; the slow tier holds 2000. The same 10% target
        // admits far more on a DRAM-like tier (a writer costs reads 18%) than on Optane (a
        // writer costs 72%, and a write takes 2.3x a read).
        let requests = workload(100_000, 20_000, 1.0, 3);
        let lookups = requests.len() as f64;
        let inserts = |config: NvcacheConfig| {
            let mut policy = nvcache(2000, config);
            let (inserts, _) = run(&mut policy, &requests);
            let AnyPolicy::Nvcache(inner) = &policy else { unreachable!() };
            (inserts as f64 / lookups, inner.obp())
        };
        let profile = |name| tiercache_core::DeviceProfile::preset(name).unwrap();
        let (obp, _) = inserts(NvcacheConfig::obp(0.1));
        let (dram, dram_loss) = inserts(NvcacheConfig::interference(0.1, profile("dram")));
        let (optane, optane_loss) =
            inserts(NvcacheConfig::interference(0.1, profile("optane-dcpm")));
        assert!(optane < obp && obp < dram, "optane {optane:.3}, obp {obp:.3}, dram {dram:.3}");
        // Each keeps the modeled read loss at its target. Optane: an insert weighs
        // (0.3 + 4096 B / 2.3 GB/s) us x (1 - 0.283) = 1.49 us against a 0.90 us lookup, and
        // a removal 0.22 us: about 5.3% of lookups admitted for 10% lost.
        for loss in [dram_loss, optane_loss] {
            assert!((loss - 0.1).abs() < 0.01, "read loss {loss}");
        }
        assert!((optane - 0.053).abs() < 0.005, "{optane}");
    }

    #[test]
    fn measured_interference_throttles_while_reads_are_slowed_and_relaxes_after() {
        let config = NvcacheConfig {
            measured: true,
            window: ObpWindow::Sliding { lookups: 4000 },
            ..NvcacheConfig::interference(
                0.1,
                tiercache_core::DeviceProfile::preset("optane-dcpm").unwrap(),
            )
        };
        let mut policy = nvcache(2000, config);
        let requests = workload(40_000, 20_000, 1.0, 4);
        let interval = |mean: f64| tiercache_core::Interval {
            tier_reads: 1000,
            tier_read_mean_us: mean,
            ..Default::default()
        };
        let calibration = |p: &AnyPolicy| {
            p.knobs().iter().find(|(k, _)| *k == "calibration").map(|(_, v)| *v).unwrap()
        };
        // Undisturbed reads (1 us), then reads at 2 us: half the throughput lost, far over
        // 10%: the threshold shrinks each interval, and admissions with it.
        policy.observe(&interval(1.0));
        let (calm, _) = run(&mut policy, &requests[..20_000]);
        for _ in 0..10 {
            policy.observe(&interval(2.0));
        }
        assert!(calibration(&policy) < 0.2, "{}", calibration(&policy));
        let (slowed, _) = run(&mut policy, &requests[20_000..]);
        assert!(slowed * 3 < calm, "admitted {slowed} while slowed against {calm} before");
        // Reads back at 1.02 us (2% lost): the threshold grows again.
        for _ in 0..40 {
            policy.observe(&interval(1.02));
        }
        assert!(calibration(&policy) > 1.0, "{}", calibration(&policy));
        // An interval with hardly any tier reads is no evidence.
        let before = calibration(&policy);
        policy.observe(&tiercache_core::Interval {
            tier_reads: 3,
            tier_read_mean_us: 50.0,
            ..Default::default()
        });
        assert_eq!(calibration(&policy), before);
    }

    #[test]
    fn interference_configurations_parse() {
        let config = NvcacheConfig::parse("interference:0.2,profile=cxl").unwrap();
        assert_eq!(config.obp_target, Some(0.2));
        assert_eq!(config.interference.unwrap().name, "cxl");
        let config = NvcacheConfig::parse("interference").unwrap();
        assert_eq!(config.interference.unwrap().name, "optane-dcpm");
        let err = NvcacheConfig::parse("interference,profile=tape").unwrap_err().to_string();
        assert!(err.contains("tape") && err.contains("profile"), "{err}");
        assert!(NvcacheConfig::parse("interference:0.1,measured").unwrap().measured);
        let err = NvcacheConfig::parse("obp,measured").unwrap_err().to_string();
        assert!(err.contains("measured"), "{err}");
        let err = NvcacheConfig::parse("obp,profile=dram").unwrap_err().to_string();
        assert!(err.contains("profile"), "{err}");
    }

    #[test]
    fn remove_on_free_invalidates_overwritten_blocks_and_counts_them() {
        let mut policy = nvcache(10, NvcacheConfig::no_write_allocate());
        run(&mut policy, &[Request::read(1, 4096)]);
        let mut d = Decision::new();
        policy.decide(&Request::write(1, 4096), &mut d);
        assert_eq!(d.hit, Some(TierId(0)));
        assert_eq!(d.actions, vec![Action::Invalidate { tier: TierId(0), key: 1, size: 4096 }]);
        assert_eq!(policy.peek(1), None);
        let AnyPolicy::Nvcache(inner) = &policy else { unreachable!() };
        assert_eq!((inner.inserted, inner.removed, inner.looked_up), (1, 1, 1));
    }

    #[test]
    fn a_sliding_window_forgets_an_old_burst_of_admissions() {
        // A cold start fills 1000 blocks; then a long run of hits. Cumulative OBP remembers
        // the fill; a window of 10,000 lookups does not.
        let mut requests = workload(1000, 1000, 1.0, 3);
        requests.extend((0..50_000u64).map(|i| Request::read(i % 10, 4096)));
        let windowed = NvcacheConfig {
            window: ObpWindow::Sliding { lookups: 10_000 },
            ..NvcacheConfig::alloc_read_write()
        };
        let mut policy = nvcache(2000, windowed);
        run(&mut policy, &requests);
        let AnyPolicy::Nvcache(inner) = &policy else { unreachable!() };
        assert_eq!(inner.obp(), 0.0, "no writes in the last window");
        let mut cumulative = nvcache(2000, NvcacheConfig::alloc_read_write());
        run(&mut cumulative, &requests);
        let AnyPolicy::Nvcache(inner) = &cumulative else { unreachable!() };
        assert!(inner.obp() > 0.01, "{}", inner.obp());
    }

    #[test]
    fn configurations_parse_and_bad_ones_name_the_problem() {
        let c = NvcacheConfig::parse("obp:0.05,small-bypass=16MiB,window=1000").unwrap();
        assert_eq!(c.obp_target, Some(0.05));
        assert_eq!(c.small_bypass_bytes, Some(16 << 20));
        assert_eq!(c.window, ObpWindow::Sliding { lookups: 1000 });
        assert!(!c.write_allocate);
        assert_eq!(
            NvcacheConfig::parse("alloc-read-write").unwrap(),
            NvcacheConfig::alloc_read_write()
        );
        assert_eq!(NvcacheConfig::parse("obp").unwrap(), NvcacheConfig::obp(0.1));
        for (text, needle) in
            [("obp:x", "'x'"), ("obp:0", "above 0"), ("lru", "lru"), ("obp,size=3", "size")]
        {
            let e = NvcacheConfig::parse(text).unwrap_err().to_string();
            assert!(e.contains(needle), "{text}: {e}");
        }
    }

    #[test]
    fn without_eviction_a_full_cache_admits_only_into_freed_space() {
        let config = NvcacheConfig { evict: false, ..NvcacheConfig::no_write_allocate() };
        let mut policy = nvcache(100, config);
        let requests = workload(20_000, 1000, 0.8, 5);
        let mut d = Decision::new();
        for req in &requests {
            d.clear();
            policy.decide(req, &mut d);
            assert!(!d.actions.iter().any(|a| matches!(a, Action::Evict { .. })), "{req:?}: {d:?}");
        }
        assert!(policy.resident(TierId(0)) > 90, "the cache fills, and writes free space in it");
        let (eager_inserts, eager_hits) =
            run(&mut nvcache(100, NvcacheConfig::no_write_allocate()), &requests);
        let config = NvcacheConfig { evict: false, ..NvcacheConfig::no_write_allocate() };
        let (inserts, hits) = run(&mut nvcache(100, config), &requests);
        // Table 1's shape: eager eviction writes far more into the cache for its hits.
        assert!(eager_inserts > 3 * inserts, "{eager_inserts} vs {inserts}");
        assert!(hits > 0 && eager_hits > 0);
        assert!(NvcacheConfig::parse("obp,no-eviction").is_ok_and(|c| !c.evict));
    }

    #[test]
    fn every_configuration_conforms() {
        let requests = workload(20_000, 300, 0.5, 4);
        for config in [
            NvcacheConfig::alloc_read_write(),
            NvcacheConfig::no_write_allocate(),
            NvcacheConfig::obp(0.05),
            NvcacheConfig {
                window: ObpWindow::Sliding { lookups: 500 },
                ..NvcacheConfig::obp(0.3)
            },
            NvcacheConfig {
                small_bypass_bytes: Some(1 << 20),
                write_allocate: true,
                ..NvcacheConfig::obp(0.1)
            },
        ] {
            let mut policy = nvcache(100, config.clone());
            check_stream(&mut policy, &requests).unwrap_or_else(|e| panic!("{config:?}: {e}"));
        }
    }
}
