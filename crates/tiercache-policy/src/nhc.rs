//! Non-hierarchical caching (Wu et al., "The Storage Hierarchy is Not a Hierarchy", FAST '21,
//! section 4). When the cache device already delivers its peak, classic caching leaves the
//! capacity device idle; NHC sends part of the read hits there and stops admitting new data.
//!
//! Two decision points on top of any classic policy (section 4.2):
//! - `data_admit`: whether a read miss is admitted (classic caching: always);
//! - `load_admit`: the share of clean read hits served by the cache tier; each other read hit
//!   is served by the capacity device (each hit draws R in [0, 1) and goes to the cache when
//!   R < load_admit). Dirty blocks are never read from the capacity device, whose copy is
//!   stale. Writes are the inner policy's business: NHC does not touch write allocation.
//!
//! The scheduler (Algorithm 1) has two states. Classic: data_admit on, load_admit 1, until the
//! read hit rate is stable (it changes by less than 0.1% between two windows of intervals;
//! the paper's "within 0.1% in the last 100 ms" with 5 ms intervals, section 5; or by less
//! than the sampling noise of windows too small to resolve 0.1%, our adaptation). Tuning:
//! data_admit off; hill-climb load_admit, measuring the target metric over one interval at
//! each of `la`, `la - step` and `la + step` (kept in [0, 1]) and moving to the best. It goes
//! back to classic caching when the best is 1.0 and so is the current value, or when the hit
//! rate falls below (1 - alpha) times the rate it started tuning at (the workload's locality
//! changed). The paper does not give alpha; 5% is ours.
//!
//! Like every controller here it is pure: it is fed one [`Interval`] at a time, modeled by the
//! simulator or measured by the engine, and changes only its knobs.

use std::collections::VecDeque;

use serde::{Deserialize, Serialize};
use tiercache_core::{Action, Decision, Interval, Key, KeySet, Op, RejectReason, Request};
use tiercache_core::{SeededRng, TierId};

use crate::error::PolicyError;
use crate::policy::Policy;

/// The performance metric the scheduler maximizes (section 5: throughput by default).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Target {
    Throughput,
    #[serde(alias = "mean")]
    MeanLatency,
    #[serde(alias = "p99")]
    P99Latency,
}

impl Target {
    /// The score of an interval: higher is better.
    fn score(self, interval: &Interval) -> f64 {
        match self {
            Target::Throughput => interval.ops_per_second(),
            Target::MeanLatency => -interval.mean_latency_us,
            Target::P99Latency => -interval.p99_latency_us,
        }
    }

    fn as_str(self) -> &'static str {
        match self {
            Target::Throughput => "throughput",
            Target::MeanLatency => "mean-latency",
            Target::P99Latency => "p99-latency",
        }
    }
}

/// What NHC does: tune with Algorithm 1, or hold a static split (the baseline it is measured
/// against).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NhcConfig {
    pub target: Target,
    /// Change of `load_admit` per step (2% in the paper).
    pub step: f64,
    /// The hit rate is stable when two consecutive windows differ by at most this much.
    #[serde(rename = "stable")]
    pub stable_within: f64,
    /// Intervals per window of the stability check.
    pub window: usize,
    /// Back to classic caching when the hit rate falls below (1 - alpha) x the starting one.
    pub alpha: f64,
    /// A static split instead of tuning, the baseline tuning is measured against: classic
    /// caching until the hit rate is stable, as Algorithm 1, then data_admit off and this
    /// `load_admit` for good.
    #[serde(rename = "load_admit")]
    pub fixed_load_admit: Option<f64>,
    /// Keep admitting read misses once the hit rate is stable (data_admit on): in the held
    /// split of `fixed_load_admit`, so a split is measured apart from not admitting, or while
    /// tuning `load_admit` (the alternative of Orthus section 6.3, Figure 12c).
    #[serde(rename = "data_admit")]
    pub held_data_admit: bool,
}

impl Default for NhcConfig {
    fn default() -> NhcConfig {
        NhcConfig {
            target: Target::Throughput,
            step: 0.02,
            stable_within: 0.001,
            window: 20,
            alpha: 0.05,
            fixed_load_admit: None,
            held_data_admit: false,
        }
    }
}

impl NhcConfig {
    /// Parses `nhc` or `nhc:key=value,...`, the keys the fields of the config as the one grammar
    /// of options reads them ([`crate::params`]): `target` (throughput, mean-latency,
    /// p99-latency), `step`, `stable`, `window` (intervals), `alpha`, and `load_admit`
    /// (a static split; no tuning), with `data_admit=on` to keep admitting read misses in the
    /// split or while tuning.
    pub fn parse(text: &str) -> Result<NhcConfig, PolicyError> {
        let (base, options) = text.split_once(':').unwrap_or((text, ""));
        if base.trim() != "nhc" {
            return Err(PolicyError::UnknownPolicy {
                name: base.into(),
                known: "nhc[:target=throughput|mean-latency|p99-latency,step=F,stable=F,window=N,alpha=F,load_admit=F,data_admit=on|off]"
                    .into(),
            });
        }
        let pairs = crate::params::pairs("nhc", options)?;
        let config = crate::params::apply("nhc", &NhcConfig::default(), &pairs)?;
        config.validate()?;
        Ok(config)
    }

    /// Checks the numbers: `step` above 0, `stable`, `alpha` and `load_admit` fractions,
    /// `window` at least one interval. An error names the option.
    pub fn validate(&self) -> Result<(), PolicyError> {
        let fraction = |key: &str, value: f64, low: f64| match value >= low && value <= 1.0 {
            true => Ok(()),
            false => Err(PolicyError::bad("nhc", key, format!("{value} must be from {low} to 1"))),
        };
        fraction("step", self.step, 1e-6)?;
        fraction("stable", self.stable_within, 0.0)?;
        fraction("alpha", self.alpha, 0.0)?;
        if let Some(load_admit) = self.fixed_load_admit {
            fraction("load_admit", load_admit, 0.0)?;
        }
        if self.window == 0 {
            return Err(PolicyError::bad("nhc", "window", "must be at least 1 interval"));
        }
        Ok(())
    }
}

/// Which of the three points of one hill-climbing round is being measured.
const PROBES: [f64; 3] = [0.0, -1.0, 1.0];

#[derive(Clone, Copy, Debug, PartialEq)]
enum State {
    /// State 1: classic caching until the hit rate is stable.
    Classic,
    /// State 2: measuring `center + PROBES[probe] * step`; `scores` holds the round so far.
    Tuning { center: f64, probe: usize, scores: [f64; 3] },
    /// A static split, once the cache is warm.
    Held,
}

/// Algorithm 1 as a pure state machine: fed intervals, it sets `data_admit` and `load_admit`.
#[derive(Clone, Debug)]
pub struct Scheduler {
    config: NhcConfig,
    state: State,
    data_admit: bool,
    load_admit: f64,
    /// (reads, read hits) of the last intervals, at most two windows of them.
    history: VecDeque<(u64, u64)>,
    start_hit_rate: f64,
    /// Times tuning started and times it gave up (back to classic caching).
    pub tunings: u64,
    pub returns: u64,
}

impl Scheduler {
    pub fn new(config: NhcConfig) -> Scheduler {
        Scheduler {
            config,
            state: State::Classic,
            data_admit: true,
            load_admit: 1.0,
            history: VecDeque::new(),
            start_hit_rate: 0.0,
            tunings: 0,
            returns: 0,
        }
    }

    pub fn data_admit(&self) -> bool {
        self.data_admit
    }

    pub fn load_admit(&self) -> f64 {
        self.load_admit
    }

    pub fn tuning(&self) -> bool {
        matches!(self.state, State::Tuning { .. })
    }

    /// Reads and read hits over `intervals` intervals kept, `skip` back from the last.
    fn window(&self, skip: usize, intervals: usize) -> (u64, u64) {
        self.history
            .iter()
            .rev()
            .skip(skip)
            .take(intervals)
            .fold((0, 0), |(r, h), (reads, hits)| (r + reads, h + hits))
    }

    /// The read hit rate over the last `intervals` intervals kept.
    fn hit_rate(&self, skip: usize, intervals: usize) -> Option<f64> {
        let (reads, hits) = self.window(skip, intervals);
        (reads > 0).then(|| hits as f64 / reads as f64)
    }

    /// Whether the hit rate is stable: the last window's and the one before differ by at most
    /// `stable_within`, or by no more than sampling noise (two standard errors of the
    /// difference) when the windows hold too few reads to resolve 0.1%. The paper's windows
    /// (100 ms of a fast device) hold tens of thousands of reads; ours may hold fewer.
    fn stable(&self) -> bool {
        let window = self.config.window;
        let ((r1, h1), (r0, h0)) = (self.window(0, window), self.window(window, window));
        if r1 == 0 || r0 == 0 {
            return false;
        }
        let (now, before) = (h1 as f64 / r1 as f64, h0 as f64 / r0 as f64);
        let pooled = (h1 + h0) as f64 / (r1 + r0) as f64;
        let noise = 2.0 * (pooled * (1.0 - pooled) * (1.0 / r1 as f64 + 1.0 / r0 as f64)).sqrt();
        (now - before).abs() <= self.config.stable_within.max(noise)
    }

    /// Takes the measurement of the interval just ended under the current knobs.
    pub fn observe(&mut self, interval: &Interval) {
        if self.state == State::Held || interval.completed == 0 {
            return;
        }
        let window = self.config.window;
        self.history.push_back((interval.reads, interval.read_hits));
        while self.history.len() > 2 * window {
            self.history.pop_front();
        }
        match self.state {
            State::Classic => {
                if self.history.len() < 2 * window || !self.stable() {
                    return;
                }
                let now = self.hit_rate(0, window).unwrap_or(0.0);
                self.data_admit = false;
                if let Some(load_admit) = self.config.fixed_load_admit {
                    self.data_admit = self.config.held_data_admit;
                    self.load_admit = load_admit;
                    self.state = State::Held;
                    return;
                }
                self.data_admit = self.config.held_data_admit;
                self.start_hit_rate = now;
                self.tunings += 1;
                self.state = State::Tuning { center: self.load_admit, probe: 0, scores: [0.0; 3] };
            }
            State::Held => {}
            State::Tuning { center, probe, mut scores } => {
                let recent = self.hit_rate(0, window.min(self.history.len())).unwrap_or(0.0);
                if recent < (1.0 - self.config.alpha) * self.start_hit_rate {
                    return self.back_to_classic();
                }
                scores[probe] = self.config.target.score(interval);
                // The next point of the round that lies in [0, 1]; points outside score -inf
                // (the paper's penalty keeps load_admit in its domain).
                let mut next = probe + 1;
                while next < PROBES.len() && !self.in_domain(center, next) {
                    scores[next] = f64::NEG_INFINITY;
                    next += 1;
                }
                if next < PROBES.len() {
                    self.load_admit = self.point(center, next);
                    self.state = State::Tuning { center, probe: next, scores };
                    return;
                }
                // The round is measured: Algorithm 1's lines 9-14 take the best of the three,
                // looking at ratio - step first, then ratio + step, then ratio, so a tie goes
                // to the lower neighbour, then the upper one (a flat metric walks load_admit
                // down, moving load off the cache device while it costs nothing).
                let max = scores.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                let best = if scores[1] == max {
                    1
                } else if scores[2] == max {
                    2
                } else {
                    0
                };
                let center = self.point(center, best);
                if best == 0 && center >= 1.0 {
                    return self.back_to_classic();
                }
                self.load_admit = center;
                self.state = State::Tuning { center, probe: 0, scores: [0.0; 3] };
            }
        }
    }

    fn point(&self, center: f64, probe: usize) -> f64 {
        let value = center + PROBES[probe] * self.config.step;
        // Snap to the grid of steps so repeated additions do not drift.
        let steps = (value / self.config.step).round();
        (steps * self.config.step).clamp(0.0, 1.0)
    }

    fn in_domain(&self, center: f64, probe: usize) -> bool {
        let value = center + PROBES[probe] * self.config.step;
        (-1e-9..=1.0 + 1e-9).contains(&value)
    }

    fn back_to_classic(&mut self) {
        self.returns += 1;
        self.state = State::Classic;
        self.data_admit = true;
        self.load_admit = 1.0;
        self.history.clear();
    }
}

/// A classic policy with NHC's decision points and scheduler.
pub struct Nhc<P> {
    inner: Box<P>,
    scheduler: Scheduler,
    rng: SeededRng,
    /// Keys the inner policy holds dirty, followed from its actions.
    dirty: KeySet,
    /// Read hits served by the capacity device, and read misses not admitted.
    pub offloaded: u64,
    pub not_admitted: u64,
}

impl<P: Policy> Nhc<P> {
    pub fn new(inner: P, config: NhcConfig, seed: u64) -> Nhc<P> {
        Nhc {
            inner: Box::new(inner),
            scheduler: Scheduler::new(config),
            rng: SeededRng::new(seed ^ 0x4e48_4321),
            dirty: KeySet::default(),
            offloaded: 0,
            not_admitted: 0,
        }
    }

    pub fn scheduler(&self) -> &Scheduler {
        &self.scheduler
    }

    fn follow_dirt(&mut self, actions: &[Action]) {
        for action in actions {
            match *action {
                Action::Insert { key, dirty, .. } | Action::Update { key, dirty, .. } => {
                    self.mark(key, dirty)
                }
                Action::WriteBack { key, .. }
                | Action::Evict { key, .. }
                | Action::Invalidate { key, .. } => self.mark(key, false),
                Action::Move { .. } | Action::Reject { .. } => {}
            }
        }
    }

    #[inline]
    fn mark(&mut self, key: Key, dirty: bool) {
        if dirty {
            self.dirty.insert(key);
        } else if !self.dirty.is_empty() {
            self.dirty.remove(&key);
        }
    }
}

impl<P: Policy> Policy for Nhc<P> {
    crate::policy::delegate_to_inner!(restore);

    fn decide(&mut self, req: &Request, out: &mut Decision) {
        let from = out.actions.len();
        let read = matches!(req.op, Op::Read | Op::Lookup);
        if req.op == Op::Read && !self.scheduler.data_admit() && self.inner.peek(req.key).is_none()
        {
            self.inner.decide(&Request { op: Op::Lookup, ..*req }, out);
            if out.hit.is_none() {
                let (key, size) = (req.key, req.size);
                out.push(Action::Reject { key, size, reason: RejectReason::DataAdmitOff });
                self.not_admitted += 1;
            }
        } else {
            self.inner.decide(req, out);
        }
        // Dirty as the request found it: the read is served before the decision's own
        // write-backs run.
        let dirty = self.dirty.contains(&req.key);
        self.follow_dirt(&out.actions[from..]);
        let load_admit = self.scheduler.load_admit();
        if read && out.hit.is_some() && load_admit < 1.0 && !dirty && !self.rng.chance(load_admit) {
            out.from_backing = true;
            self.offloaded += 1;
        }
    }

    fn tick(&mut self, now_us: u64, out: &mut Decision) {
        let from = out.actions.len();
        self.inner.tick(now_us, out);
        self.follow_dirt(&out.actions[from..]);
    }

    fn observe(&mut self, interval: &Interval) {
        self.scheduler.observe(interval);
        self.inner.observe(interval);
    }

    fn label(&self) -> String {
        let config = &self.scheduler.config;
        let how = match config.fixed_load_admit {
            Some(la) => format!("load_admit={la}"),
            None => config.target.as_str().to_string(),
        };
        format!("nhc[{how}]({})", self.inner.label())
    }

    fn knobs(&self) -> Vec<(&'static str, f64)> {
        let mut knobs = self.inner.knobs();
        knobs.push(("load_admit", self.scheduler.load_admit()));
        knobs.push(("data_admit", self.scheduler.data_admit() as u8 as f64));
        knobs
    }
}

impl<P: Policy> Nhc<P> {
    /// The tier a key is in, for tests.
    pub fn tier_of(&self, key: Key) -> Option<TierId> {
        self.inner.peek(key).map(|(tier, _)| tier)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::{AnyPolicy, PolicyConfig};
    use tiercache_core::Capacity;

    fn interval(ops: u64, hit_rate: f64) -> Interval {
        Interval {
            seconds: 1.0,
            completed: ops,
            reads: 10_000,
            read_hits: (hit_rate * 10_000.0) as u64,
            mean_latency_us: 1e6 / ops as f64,
            p99_latency_us: 1e6 / ops as f64,
            ..Interval::default()
        }
    }

    fn small_window() -> NhcConfig {
        NhcConfig { window: 2, ..NhcConfig::default() }
    }

    /// Throughput that peaks at load_admit = `best`, falling 10 ops per 1% away from it.
    fn peaked(la: f64, best: f64) -> u64 {
        (10_000.0 - 1000.0 * (la - best).abs()) as u64
    }

    #[test]
    fn classic_until_the_hit_rate_is_stable_then_climbs_to_the_best_split() {
        let mut s = Scheduler::new(small_window());
        // Warming: the hit rate rises; no tuning.
        for hit_rate in [0.5, 0.6, 0.7, 0.8, 0.85] {
            s.observe(&interval(5000, hit_rate));
            assert!(!s.tuning() && s.data_admit() && s.load_admit() == 1.0);
        }
        for _ in 0..4 {
            s.observe(&interval(5000, 0.9));
        }
        assert!(s.tuning() && !s.data_admit(), "a stable hit rate starts tuning");
        for _ in 0..200 {
            let ops = peaked(s.load_admit(), 0.7);
            s.observe(&interval(ops, 0.9));
        }
        assert!((s.load_admit() - 0.7).abs() <= 0.021, "settles at 0.7: {}", s.load_admit());
        assert!(s.tuning());
    }

    #[test]
    fn returns_to_classic_when_one_is_best_or_the_hit_rate_drops() {
        let mut s = Scheduler::new(small_window());
        for _ in 0..4 {
            s.observe(&interval(5000, 0.9));
        }
        assert!(s.tuning());
        // Throughput falls as soon as load_admit does: the round picks 1.0, and tuning stops.
        for _ in 0..3 {
            let ops = peaked(s.load_admit(), 1.0);
            s.observe(&interval(ops, 0.9));
        }
        assert!(!s.tuning() && s.data_admit() && s.load_admit() == 1.0);
        assert_eq!(s.returns, 1);
        // Tuning again, toward 0.5; then the locality changes.
        for _ in 0..4 {
            s.observe(&interval(5000, 0.9));
        }
        for _ in 0..30 {
            let ops = peaked(s.load_admit(), 0.5);
            s.observe(&interval(ops, 0.9));
        }
        assert!(s.load_admit() < 0.95);
        s.observe(&interval(5000, 0.5));
        s.observe(&interval(5000, 0.5));
        assert!(!s.tuning() && s.load_admit() == 1.0 && s.data_admit());
    }

    #[test]
    fn a_lower_latency_target_climbs_the_other_way() {
        let config = NhcConfig { target: Target::P99Latency, ..small_window() };
        let mut s = Scheduler::new(config);
        for _ in 0..4 {
            s.observe(&interval(5000, 0.9));
        }
        for _ in 0..200 {
            let p99 = 100.0 + 500.0 * (s.load_admit() - 0.8).abs();
            s.observe(&Interval { p99_latency_us: p99, ..interval(5000, 0.9) });
        }
        assert!((s.load_admit() - 0.8).abs() <= 0.021, "{}", s.load_admit());
    }

    fn lru(blocks: u64) -> AnyPolicy {
        AnyPolicy::from_config(&PolicyConfig::Lru, Capacity::objects(blocks), &[], 0).unwrap()
    }

    #[test]
    fn a_static_split_serves_its_share_of_clean_hits_from_backing() {
        let config = NhcConfig { fixed_load_admit: Some(0.25), ..small_window() };
        let mut nhc = Nhc::new(lru(100), config, 7);
        let mut d = Decision::new();
        for key in 0..100 {
            d.clear();
            nhc.decide(&Request::read(key, 1), &mut d);
            assert!(!d.from_backing, "classic caching while warming");
        }
        for _ in 0..4 {
            nhc.observe(&interval(5000, 0.9));
        }
        assert!(!nhc.scheduler().data_admit() && nhc.scheduler().load_admit() == 0.25);
        let mut from_backing = 0;
        for i in 0..10_000 {
            d.clear();
            nhc.decide(&Request::read(i % 100, 1), &mut d);
            assert!(d.hit.is_some());
            from_backing += d.from_backing as u64;
        }
        assert!((7300..7700).contains(&from_backing), "{from_backing} of 10000, expected 7500");
    }

    #[test]
    fn a_static_split_with_data_admit_on_keeps_admitting_read_misses() {
        let config = NhcConfig::parse("nhc:load_admit=0.5,data_admit=on").unwrap();
        assert!(config.held_data_admit);
        let config = NhcConfig { window: small_window().window, ..config };
        let mut nhc = Nhc::new(lru(100), config, 7);
        let mut d = Decision::new();
        for _ in 0..4 {
            nhc.observe(&interval(5000, 0.9));
        }
        assert!(nhc.scheduler().data_admit() && nhc.scheduler().load_admit() == 0.5);
        nhc.decide(&Request::read(5, 1), &mut d);
        assert!(d.actions.iter().any(|a| matches!(a, Action::Insert { key: 5, .. })), "{d:?}");
        let off = NhcConfig::parse("nhc:load_admit=0.5").unwrap();
        assert!(!off.held_data_admit, "a static split stops admitting by default");
        assert!(NhcConfig::parse("nhc:load_admit=0.5,data_admit=maybe").is_err());
    }

    #[test]
    fn dirty_blocks_are_never_read_from_backing() {
        use crate::cas::{CacheMode, CasConfig};
        let config = NhcConfig { fixed_load_admit: Some(0.0), ..small_window() };
        let inner = lru(100).in_mode(CasConfig::new(CacheMode::WriteBack));
        let mut nhc = Nhc::new(inner, config, 1);
        let mut d = Decision::new();
        nhc.decide(&Request::write(1, 1), &mut d);
        d.clear();
        nhc.decide(&Request::read(2, 1), &mut d);
        for _ in 0..4 {
            nhc.observe(&interval(5000, 0.9));
        }
        for _ in 0..100 {
            d.clear();
            nhc.decide(&Request::read(1, 1), &mut d);
            assert!(d.hit.is_some() && !d.from_backing, "dirty block 1 served from the cache");
            d.clear();
            nhc.decide(&Request::read(2, 1), &mut d);
            assert!(d.hit.is_some() && d.from_backing, "clean block 2 served from backing");
        }
    }

    #[test]
    fn with_data_admit_off_read_misses_are_not_cached() {
        let mut nhc = Nhc::new(lru(10), small_window(), 1);
        for _ in 0..4 {
            nhc.observe(&interval(5000, 0.9));
        }
        assert!(!nhc.scheduler().data_admit());
        let mut d = Decision::new();
        nhc.decide(&Request::read(5, 1), &mut d);
        assert_eq!(d.hit, None);
        assert_eq!(
            d.actions,
            vec![Action::Reject { key: 5, size: 1, reason: RejectReason::DataAdmitOff }]
        );
        assert_eq!(nhc.tier_of(5), None);
        // Writes are still the inner policy's: admitted.
        d.clear();
        nhc.decide(&Request::write(6, 1), &mut d);
        assert_eq!(nhc.tier_of(6), Some(TierId(0)));
    }

    #[test]
    fn tuning_may_keep_admitting_read_misses() {
        let config = NhcConfig { held_data_admit: true, ..small_window() };
        let mut nhc = Nhc::new(lru(10), config, 1);
        for _ in 0..4 {
            nhc.observe(&interval(5000, 0.9));
        }
        assert!(nhc.scheduler().tuning() && nhc.scheduler().data_admit());
        let mut d = Decision::new();
        nhc.decide(&Request::read(5, 1), &mut d);
        assert_eq!(nhc.tier_of(5), Some(TierId(0)));
    }
}
