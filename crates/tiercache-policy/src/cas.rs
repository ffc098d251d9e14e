//! Open CAS cache modes over any policy or hierarchy, with their promotion, cleaning and
//! sequential-cutoff policies (Open CAS Linux documentation: cache modes, NHIT promotion, ALRU
//! cleaning, sequential cutoff; open-cas.github.io). The wrapped policy keeps deciding what
//! stays; the mode decides which requests may place data and which data is dirty.
//!
//! | mode | read hit | read miss | write hit | write miss |
//! |---|---|---|---|---|
//! | write-through | cache | inserted | updated, clean | inserted, clean |
//! | write-back | cache | inserted | updated, dirty | inserted, dirty |
//! | write-around | cache | inserted | updated, clean | not inserted |
//! | write-invalidate | cache | inserted | invalidated | not inserted |
//! | write-only | cache | not inserted | updated, dirty | inserted, dirty |
//! | pass-through | backing | not inserted | invalidated | not inserted |
//!
//! Dirty blocks are written back before they are evicted, and by ALRU cleaning: when the cache
//! has been idle for `activity_threshold_us`, at most every `wake_up_us`, up to
//! `flush_max_buffers` blocks dirty for at least `staleness_us`, oldest first; or by ACP-like
//! cleaning (`cleaning_policy`, [`AcpConfig`]): in periodic work, while the dirty share is above
//! a watermark, chunks of dirty blocks in block order; or not at all (`nop`). NHIT promotion
//! admits a missed key only on its `insertion_threshold`-th miss, and only filters once the
//! cache is `trigger_fill` full. Sequential cutoff handles a run of consecutive blocks longer
//! than `threshold_bytes` in pass-through: always, only when the cache is full (`full`, the
//! default), or never.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};
use tiercache_core::{Action, Decision, Key, KeyMap, Op, Request, TierId};

use crate::policy::Policy;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum CacheMode {
    WriteThrough,
    WriteBack,
    WriteAround,
    WriteInvalidate,
    WriteOnly,
    PassThrough,
}

impl CacheMode {
    pub fn parse(text: &str) -> Option<CacheMode> {
        Some(match text {
            "wt" | "write-through" => CacheMode::WriteThrough,
            "wb" | "write-back" => CacheMode::WriteBack,
            "wa" | "write-around" => CacheMode::WriteAround,
            "wi" | "write-invalidate" => CacheMode::WriteInvalidate,
            "wo" | "write-only" => CacheMode::WriteOnly,
            "pt" | "pass-through" => CacheMode::PassThrough,
            _ => return None,
        })
    }

    /// Open CAS's short name: wt, wb, wa, wi, wo, pt.
    pub fn short(self) -> &'static str {
        match self {
            CacheMode::WriteThrough => "wt",
            CacheMode::WriteBack => "wb",
            CacheMode::WriteAround => "wa",
            CacheMode::WriteInvalidate => "wi",
            CacheMode::WriteOnly => "wo",
            CacheMode::PassThrough => "pt",
        }
    }

    pub const ALL: [CacheMode; 6] = [
        CacheMode::WriteThrough,
        CacheMode::WriteBack,
        CacheMode::WriteAround,
        CacheMode::WriteInvalidate,
        CacheMode::WriteOnly,
        CacheMode::PassThrough,
    ];

    fn inserts_read_misses(self) -> bool {
        !matches!(self, CacheMode::WriteOnly | CacheMode::PassThrough)
    }

    fn writes_dirty(self) -> bool {
        matches!(self, CacheMode::WriteBack | CacheMode::WriteOnly)
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NhitConfig {
    pub insertion_threshold: u32,
    /// Occupancy of the top tier above which NHIT filters.
    pub trigger_fill: f64,
    /// Most missed keys whose counts are kept (then the counts start over).
    pub tracked_keys: usize,
}

impl Default for NhitConfig {
    fn default() -> NhitConfig {
        NhitConfig { insertion_threshold: 3, trigger_fill: 0.8, tracked_keys: 1 << 20 }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AlruConfig {
    pub wake_up_us: u64,
    pub staleness_us: u64,
    pub flush_max_buffers: usize,
    pub activity_threshold_us: u64,
}

impl Default for AlruConfig {
    fn default() -> AlruConfig {
        AlruConfig {
            wake_up_us: 20_000_000,
            staleness_us: 120_000_000,
            flush_max_buffers: 100,
            activity_threshold_us: 10_000_000,
        }
    }
}

/// Which dirty blocks a write-back cache writes back on its own, before they are evicted (Open
/// CAS's cleaning policies).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Cleaning {
    /// None: dirty blocks are written back when evicted, flushed or at a stop.
    Nop,
    /// The stalest dirty blocks, when the cache is idle ([`AlruConfig`]).
    Alru,
    /// Dirty blocks in block order, while too many are dirty ([`AcpConfig`]).
    Acp,
}

/// ACP-like cleaning: Open CAS's aggressive cleaning policy writes dirty blocks back in address
/// order, chunk after chunk, whether or not the cache is idle; ours does so between a dirty high
/// and low watermark. Every `wake_up_us`, once the dirty blocks are `high_watermark` of the
/// cache or more, up to `flush_max_buffers` of them are written back in block order from where
/// the last pass stopped (wrapping around), until they are `low_watermark` or less. It runs in
/// the periodic work (`Policy::tick`), not in requests, so that the engine can write every
/// shard's chunk as one sweep of the disk.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct AcpConfig {
    pub wake_up_us: u64,
    pub flush_max_buffers: usize,
    /// Dirty share of the cache (of its capacity, all tiers) at which cleaning starts.
    pub high_watermark: f64,
    /// Dirty share at which it stops.
    pub low_watermark: f64,
}

impl Default for AcpConfig {
    /// Aggressive, as Open CAS's: every 10 ms, 1,024 blocks, whenever any block is dirty.
    fn default() -> AcpConfig {
        AcpConfig {
            wake_up_us: 10_000,
            flush_max_buffers: 1024,
            high_watermark: 0.0,
            low_watermark: 0.0,
        }
    }
}

impl AcpConfig {
    /// Checks the watermarks: fractions, the low one at most the high one.
    pub fn validate(&self) -> Result<(), crate::error::PolicyError> {
        let bad = |key: &str, reason: String| crate::error::PolicyError::bad("acp", key, reason);
        for (key, value) in
            [("high_watermark", self.high_watermark), ("low_watermark", self.low_watermark)]
        {
            if !(0.0..=1.0).contains(&value) {
                return Err(bad(key, format!("{value} must be from 0 to 1")));
            }
        }
        if self.low_watermark > self.high_watermark {
            return Err(bad("low_watermark", "must be at most high_watermark".into()));
        }
        if self.flush_max_buffers == 0 {
            return Err(bad("flush_max_buffers", "must be at least 1".into()));
        }
        Ok(())
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SeqCutoffPolicy {
    Always,
    Full,
    Never,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CasConfig {
    pub mode: CacheMode,
    pub nhit: Option<NhitConfig>,
    pub cleaning: AlruConfig,
    /// Which cleaning runs: ALRU (with `cleaning`), ACP (with `acp`) or none.
    pub cleaning_policy: Cleaning,
    pub acp: AcpConfig,
    pub seq_cutoff: SeqCutoffPolicy,
    pub seq_threshold_bytes: u64,
}

impl CasConfig {
    pub fn new(mode: CacheMode) -> CasConfig {
        CasConfig {
            mode,
            nhit: None,
            cleaning: AlruConfig::default(),
            cleaning_policy: Cleaning::Alru,
            acp: AcpConfig::default(),
            seq_cutoff: SeqCutoffPolicy::Full,
            seq_threshold_bytes: 1 << 20,
        }
    }
}

/// A policy run in an Open CAS cache mode: `P` is the policy it runs (the registry's
/// `AnyPolicy`).
pub struct Cas<P> {
    inner: Box<P>,
    config: CasConfig,
    /// Dirty keys: when they were last written, where they are and their size; and the same
    /// keys oldest first.
    dirty: KeyMap<(u64, TierId, u32)>,
    dirty_order: BTreeSet<(u64, Key)>,
    /// With ACP cleaning: the dirty keys in block order, where the last pass stopped, and
    /// whether a pass is on (between the watermarks).
    dirty_blocks: BTreeSet<Key>,
    acp_cursor: Key,
    acp_on: bool,
    /// Bytes of the dirty blocks.
    dirty_bytes: u64,
    misses: KeyMap<u32>,
    next_sequential_key: Key,
    run_bytes: u64,
    last_io_us: u64,
    next_clean_us: u64,
}

impl<P: Policy> Cas<P> {
    pub fn new(inner: P, config: CasConfig) -> Cas<P> {
        Cas {
            inner: Box::new(inner),
            config,
            dirty: KeyMap::default(),
            dirty_order: BTreeSet::new(),
            dirty_blocks: BTreeSet::new(),
            acp_cursor: 0,
            acp_on: false,
            dirty_bytes: 0,
            misses: KeyMap::default(),
            next_sequential_key: u64::MAX,
            run_bytes: 0,
            last_io_us: 0,
            next_clean_us: 0,
        }
    }

    /// The policy run in the mode.
    pub fn inner(&self) -> &P {
        &self.inner
    }

    /// The mode requests are handled in.
    pub fn mode(&self) -> CacheMode {
        self.config.mode
    }

    /// Dirty blocks now.
    pub fn dirty_blocks(&self) -> usize {
        self.dirty.len()
    }

    fn fill(&self) -> f64 {
        let cap = self.inner.capacity(TierId(0)).amount.max(1);
        self.inner.used(TierId(0)) as f64 / cap as f64
    }

    /// Whether this request continues a sequential run past the cutoff.
    fn sequential(&mut self, req: &Request) -> bool {
        self.run_bytes = if req.key == self.next_sequential_key {
            self.run_bytes + req.size as u64
        } else {
            req.size as u64
        };
        self.next_sequential_key = req.key.wrapping_add(1);
        let long = self.run_bytes > self.config.seq_threshold_bytes;
        match self.config.seq_cutoff {
            SeqCutoffPolicy::Never => false,
            SeqCutoffPolicy::Always => long,
            SeqCutoffPolicy::Full => long && self.fill() >= 1.0,
        }
    }

    /// NHIT: whether a missed key may be inserted now (counting the miss if not).
    fn promote(&mut self, key: Key) -> bool {
        let Some(nhit) = &self.config.nhit else { return true };
        if self.fill() < nhit.trigger_fill {
            return true;
        }
        if self.misses.len() >= nhit.tracked_keys {
            self.misses.clear();
        }
        let count = self.misses.entry(key).or_insert(0);
        *count += 1;
        if *count >= nhit.insertion_threshold {
            self.misses.remove(&key);
            return true;
        }
        false
    }

    /// Looks the key up; on a hit a write updates the copy; on a miss the request places its
    /// data only if `place` allows (and then NHIT does).
    fn access(&mut self, req: &Request, place: bool, out: &mut Decision) {
        self.inner.decide(&Request { op: Op::Lookup, ..*req }, out);
        if out.hit.is_some() {
            // A lookup of another size than stored resizes the copy, or drops it if the new
            // size does not fit, with an action of its own; otherwise the write updates the
            // copy, which keeps the size it was placed with (block caches: fixed sizes). A
            // lookup that promoted the block (a `Move`) did neither: the write updates the
            // copy where it now is, after the move.
            let resized =
                out.actions.iter().any(|a| a.key() == req.key && !matches!(a, Action::Move { .. }));
            if req.op == Op::Write && !resized {
                if let Some((tier, size)) = self.inner.peek(req.key) {
                    out.push(Action::Update { tier, key: req.key, size, dirty: false });
                }
            }
            return;
        }
        if place && self.promote(req.key) {
            self.inner.decide(req, out);
        }
    }

    fn mark_dirty(&mut self, key: Key, now_us: u64, tier: TierId, size: u32) {
        match self.dirty.insert(key, (now_us, tier, size)) {
            Some((old, _, old_size)) => {
                self.dirty_order.remove(&(old, key));
                self.dirty_bytes -= old_size as u64;
            }
            None if self.config.cleaning_policy == Cleaning::Acp => {
                self.dirty_blocks.insert(key);
            }
            None => {}
        }
        self.dirty_bytes += size as u64;
        self.dirty_order.insert((now_us, key));
    }

    fn forget_dirty(&mut self, key: Key) -> bool {
        match self.dirty.remove(&key) {
            Some((since, _, size)) => {
                self.dirty_bytes -= size as u64;
                if self.config.cleaning_policy == Cleaning::Acp {
                    self.dirty_blocks.remove(&key);
                }
                self.dirty_order.remove(&(since, key))
            }
            None => false,
        }
    }

    /// Makes the request's placed data dirty (write-back modes) and writes dirty blocks back
    /// before they are evicted.
    fn settle(&mut self, req: &Request, dirty: bool, from: usize, out: &mut Decision) {
        let mut settled = Vec::with_capacity(out.actions.len() - from + 2);
        for mut action in out.actions.drain(from..) {
            match &mut action {
                Action::Insert { tier, key, size, dirty: d }
                | Action::Update { tier, key, size, dirty: d }
                    if *key == req.key =>
                {
                    *d = dirty;
                    if dirty {
                        self.mark_dirty(req.key, req.time_us, *tier, *size);
                    } else {
                        self.forget_dirty(req.key);
                    }
                }
                Action::Move { key, to, .. } => {
                    if let Some(entry) = self.dirty.get_mut(key) {
                        entry.1 = *to;
                    }
                }
                Action::Evict { tier, key, size } if self.forget_dirty(*key) => {
                    settled.push(Action::WriteBack { tier: *tier, key: *key, size: *size });
                }
                Action::Invalidate { key, .. } => {
                    self.forget_dirty(*key);
                }
                _ => {}
            }
            settled.push(action);
        }
        out.actions.extend(settled);
    }

    /// The cleaning policy's write-backs due at `now_us`: ALRU's in requests and periodic work
    /// alike, ACP's in periodic work only (`periodic`).
    fn clean(&mut self, now_us: u64, periodic: bool, out: &mut Decision) {
        match self.config.cleaning_policy {
            Cleaning::Nop => {}
            Cleaning::Alru => self.clean_alru(now_us, out),
            Cleaning::Acp if periodic => self.clean_acp(now_us, out),
            Cleaning::Acp => {}
        }
    }

    /// ACP-like cleaning ([`AcpConfig`]): while the dirty share is between the watermarks, a
    /// chunk of dirty blocks in block order from the cursor, wrapping around.
    fn clean_acp(&mut self, now_us: u64, out: &mut Decision) {
        let acp = &self.config.acp;
        if now_us < self.next_clean_us || self.dirty.is_empty() {
            self.acp_on &= !self.dirty.is_empty();
            return;
        }
        let share = self.dirty_share();
        self.acp_on = match self.acp_on {
            false => share >= acp.high_watermark,
            true => share > acp.low_watermark,
        };
        if !self.acp_on {
            return;
        }
        self.next_clean_us = now_us + acp.wake_up_us;
        let chunk: Vec<Key> = self
            .dirty_blocks
            .range(self.acp_cursor..)
            .chain(self.dirty_blocks.range(..self.acp_cursor))
            .take(acp.flush_max_buffers)
            .copied()
            .collect();
        if let Some(&last) = chunk.last() {
            self.acp_cursor = last.wrapping_add(1);
        }
        for key in chunk {
            self.write_back_key(key, out);
        }
    }

    /// The dirty blocks' share of the cache: of its bytes, or of its blocks where the tiers
    /// count objects.
    fn dirty_share(&self) -> f64 {
        let tiers = (0..self.inner.tier_count()).map(|t| self.inner.capacity(TierId(t as u8)));
        let (mut bytes, mut objects) = (0u64, 0u64);
        for capacity in tiers {
            match capacity.unit {
                tiercache_core::Unit::Bytes => bytes += capacity.amount,
                tiercache_core::Unit::Objects => objects += capacity.amount,
            }
        }
        match bytes > 0 {
            true => self.dirty_bytes as f64 / bytes as f64,
            false => self.dirty.len() as f64 / objects.max(1) as f64,
        }
    }

    /// ALRU cleaning: when idle long enough and due, write back the stalest dirty blocks.
    fn clean_alru(&mut self, now_us: u64, out: &mut Decision) {
        let alru = &self.config.cleaning;
        let idle = now_us.saturating_sub(self.last_io_us) >= alru.activity_threshold_us;
        if !idle || now_us < self.next_clean_us || self.dirty.is_empty() {
            return;
        }
        self.next_clean_us = now_us + alru.wake_up_us;
        let stale_before = now_us.saturating_sub(alru.staleness_us);
        let due: Vec<(u64, Key)> = self
            .dirty_order
            .iter()
            .take_while(|(since, _)| *since <= stale_before)
            .take(alru.flush_max_buffers)
            .copied()
            .collect();
        for (_, key) in due {
            self.write_back_key(key, out);
        }
    }

    /// The dirty keys in `tier` (or all), in block order.
    fn dirty_in(&self, tier: Option<TierId>) -> Vec<Key> {
        let mut keys: Vec<Key> = self
            .dirty
            .iter()
            .filter(|(_, (_, t, _))| tier.is_none_or(|wanted| *t == wanted))
            .map(|(key, _)| *key)
            .collect();
        keys.sort_unstable();
        keys
    }

    /// Writes a dirty key back: it is clean from now on.
    fn write_back_key(&mut self, key: Key, out: &mut Decision) {
        let (_, tier, size) = self.dirty[&key];
        self.forget_dirty(key);
        out.push(Action::WriteBack { tier, key, size });
    }
}

impl<P: Policy> Policy for Cas<P> {
    /// Hits are quiet in a mode that serves reads from the cache and keeps nothing dirty
    /// (write-through, write-around, write-invalidate), without sequential cutoff, over a
    /// policy whose hits are quiet. The cutoff's run follows
    /// every request, hits included, so hits told later would move it; in pass-through reads
    /// never hit; dirty modes clean on time.
    fn quiet_hits(&self) -> bool {
        let clean = matches!(
            self.config.mode,
            CacheMode::WriteThrough | CacheMode::WriteAround | CacheMode::WriteInvalidate
        );
        clean && self.config.seq_cutoff == SeqCutoffPolicy::Never && self.inner.quiet_hits()
    }

    crate::policy::delegate_to_inner!();

    /// The block goes to the policy the mode wraps, as clean (its copies are); a dirty one is
    /// then remembered dirty here, as if written at time 0, so the cleaner writes it back.
    fn restore(
        &mut self,
        key: Key,
        size: u32,
        tier: TierId,
        dirty: bool,
        out: &mut Decision,
    ) -> bool {
        if !self.inner.restore(key, size, tier, false, out) {
            return false;
        }
        if dirty {
            self.mark_dirty(key, 0, tier, size);
        }
        true
    }

    /// In block order, so that a disk behind sees one sweep and consecutive blocks go as one
    /// write.
    fn write_back(&mut self, tier: Option<TierId>, out: &mut Decision) {
        for key in self.dirty_in(tier) {
            self.write_back_key(key, out);
        }
    }

    /// Moves the dirty blocks of `tier` into `below` where the policy it wraps can
    /// (`move_down`), in block order, still dirty: a sync then makes them durable without a
    /// write to the backing device. The others are written back.
    fn persist(&mut self, tier: TierId, below: Option<TierId>, now_us: u64, out: &mut Decision) {
        let Some(below) = below else {
            return self.write_back(Some(tier), out);
        };
        for key in self.dirty_in(Some(tier)) {
            let Some(&(_, _, size)) = self.dirty.get(&key) else { continue };
            let from = out.actions.len();
            if self.inner.move_down(key, below, now_us, out) {
                // Its victims below that were dirty are written back first; it stays dirty.
                self.settle(&Request::new(now_us, key, size, Op::Read), true, from, out);
            } else {
                self.write_back_key(key, out);
            }
        }
    }

    fn decide(&mut self, req: &Request, out: &mut Decision) {
        self.clean(req.time_us, false, out);
        self.last_io_us = req.time_us;
        let from = out.actions.len();
        let mode = self.config.mode;
        let sequential = req.op != Op::Delete && self.sequential(req);
        match req.op {
            Op::Delete => self.inner.decide(req, out),
            Op::Lookup => self.access(req, false, out),
            Op::Read if mode == CacheMode::PassThrough => {}
            Op::Read => self.access(req, mode.inserts_read_misses() && !sequential, out),
            Op::Write => match mode {
                CacheMode::PassThrough | CacheMode::WriteInvalidate => {
                    // The write goes to the backing device; a cached copy is a write hit, and
                    // is dropped as stale.
                    self.inner.decide(&Request { op: Op::Delete, ..*req }, out);
                    out.hit = out.invalidated_from(from, req.key);
                }
                CacheMode::WriteAround => self.access(req, false, out),
                CacheMode::WriteThrough | CacheMode::WriteBack | CacheMode::WriteOnly => {
                    self.access(req, !sequential, out)
                }
            },
        }
        let dirty = req.op == Op::Write && mode.writes_dirty();
        self.settle(req, dirty, from, out);
    }

    fn observe(&mut self, interval: &tiercache_core::Interval) {
        self.inner.observe(interval);
    }

    fn tick(&mut self, now_us: u64, out: &mut Decision) {
        let from = out.actions.len();
        self.inner.tick(now_us, out);
        let idle = Request::new(now_us, u64::MAX, 0, Op::Lookup);
        self.settle(&idle, false, from, out);
        self.clean(now_us, true, out);
    }

    fn label(&self) -> String {
        format!("{}[{}]", self.inner.label(), self.config.mode.short())
    }

    fn knobs(&self) -> Vec<(&'static str, f64)> {
        let mut knobs = self.inner.knobs();
        knobs.push(("dirty_blocks", self.dirty.len() as f64));
        knobs
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hierarchy::Placement;
    use crate::registry::{AnyPolicy, PolicyConfig};
    use tiercache_core::Capacity;

    fn cas(config: CasConfig, objects: u64) -> Cas<AnyPolicy> {
        Cas::new(
            AnyPolicy::from_config(&PolicyConfig::Lru, Capacity::objects(objects), &[], 0).unwrap(),
            config,
        )
    }

    fn run(c: &mut Cas<AnyPolicy>, op: Op, key: u64, time_us: u64) -> Decision {
        let mut d = Decision::new();
        c.decide(&Request::new(time_us, key * 10, 4096, op), &mut d);
        d
    }

    /// ACP-like cleaning: above the high watermark, each wake-up writes back a chunk of dirty
    /// blocks in block order from where the last stopped, in periodic work only, and stops
    /// once the dirty share is at the low watermark.
    #[test]
    fn acp_cleans_in_block_order_between_its_watermarks() {
        let mut config = CasConfig {
            seq_cutoff: SeqCutoffPolicy::Never,
            ..CasConfig::new(CacheMode::WriteBack)
        };
        config.cleaning_policy = Cleaning::Acp;
        config.acp = AcpConfig {
            wake_up_us: 10,
            flush_max_buffers: 10,
            high_watermark: 0.5,
            low_watermark: 0.2,
        };
        let mut c = cas(config, 100);
        // 49 dirty blocks (keys 10, 20, ..., written out of order): under the high watermark.
        for i in 0..49u64 {
            let d = run(&mut c, Op::Write, (i * 5) % 49, 1);
            assert!(
                !d.actions.iter().any(|a| matches!(a, Action::WriteBack { .. })),
                "in a request"
            );
        }
        let tick = |c: &mut Cas<AnyPolicy>, now| {
            let mut d = Decision::new();
            c.tick(now, &mut d);
            d.actions
                .iter()
                .filter_map(|a| match a {
                    Action::WriteBack { key, .. } => Some(key / 10),
                    _ => None,
                })
                .collect::<Vec<u64>>()
        };
        assert!(tick(&mut c, 100).is_empty(), "49% dirty: under the high watermark");
        run(&mut c, Op::Write, 60, 101);
        // 50% dirty: passes, ten blocks each, in block order, until 20% (20 blocks) are left.
        assert_eq!(tick(&mut c, 200), (0..10).collect::<Vec<_>>());
        assert!(tick(&mut c, 205).is_empty(), "not woken up yet");
        assert_eq!(tick(&mut c, 210), (10..20).collect::<Vec<_>>());
        assert_eq!(tick(&mut c, 220), (20..30).collect::<Vec<_>>());
        // Block 5 written again: dirty behind the cursor, taken when the pass wraps around.
        run(&mut c, Op::Write, 5, 221);
        assert_eq!(tick(&mut c, 230), [30, 31, 32, 33, 34, 35, 36, 37, 38, 39]);
        assert_eq!(c.dirty.len(), 11, "40..49, 60 and 5");
        assert!(tick(&mut c, 240).is_empty(), "11% dirty: at most the low watermark");
        let mut config = CasConfig::new(CacheMode::WriteBack);
        config.acp = AcpConfig { low_watermark: 0.6, ..AcpConfig::default() };
        assert!(config.acp.validate().unwrap_err().to_string().contains("low_watermark"));
    }

    /// Found by fuzzing the policy stack: in a mode that looks writes up first (write-around),
    /// a write of another size than the cached copy's resizes the copy, or drops it when the
    /// new size does not fit; the write hit then found nothing to update and panicked.
    #[test]
    fn a_write_hit_that_resizes_its_copy_is_applied_once() {
        for mode in [CacheMode::WriteAround, CacheMode::WriteThrough] {
            let inner = AnyPolicy::from_config(&PolicyConfig::Lru, Capacity::bytes(4317), &[], 0);
            let mut c = Cas::new(inner.unwrap(), CasConfig::new(mode));
            let mut d = Decision::new();
            c.decide(&Request::new(0, 1, 1024, Op::Read), &mut d);
            assert_eq!(c.inner.peek(1).map(|(_, size)| size), Some(1024), "{mode:?}");
            // Larger than the whole cache: the copy is dropped, once.
            d.clear();
            c.decide(&Request::new(1, 1, 4608, Op::Write), &mut d);
            let actions: Vec<_> = d.actions.iter().filter(|a| a.key() == 1).collect();
            assert_eq!(actions.len(), 1, "{mode:?}: {actions:?}");
            assert!(matches!(actions[0], Action::Invalidate { .. }), "{mode:?}: {actions:?}");
            assert_eq!(c.inner.peek(1), None);
            // Smaller: resized in place, one update of the new size.
            c.decide(&Request::new(2, 2, 1024, Op::Read), &mut Decision::new());
            d.clear();
            c.decide(&Request::new(3, 2, 2048, Op::Write), &mut d);
            let sizes: Vec<_> = d
                .actions
                .iter()
                .filter_map(|a| match a {
                    Action::Update { key: 2, size, .. } => Some(*size),
                    _ => None,
                })
                .collect();
            assert_eq!(sizes, vec![2048], "{mode:?}");
        }
    }

    /// (mode, read miss inserts, write hit dirty, write miss inserts, write hit stays cached)
    #[test]
    fn modes_follow_the_table() {
        let table = [
            (CacheMode::WriteThrough, true, false, true, true),
            (CacheMode::WriteBack, true, true, true, true),
            (CacheMode::WriteAround, true, false, false, true),
            (CacheMode::WriteInvalidate, true, false, false, false),
            (CacheMode::WriteOnly, false, true, true, true),
            (CacheMode::PassThrough, false, false, false, false),
        ];
        for (mode, read_inserts, dirty, write_inserts, write_keeps) in table {
            let mut c = cas(CasConfig::new(mode), 8);
            let d = run(&mut c, Op::Read, 1, 0);
            assert_eq!(
                d.actions.iter().any(|a| matches!(a, Action::Insert { .. })),
                read_inserts,
                "{mode:?} read miss"
            );
            assert_eq!(
                run(&mut c, Op::Read, 1, 1).hit.is_some(),
                read_inserts,
                "{mode:?} read hit"
            );
            let d = run(&mut c, Op::Write, 2, 2);
            let inserted = d.actions.iter().find(|a| matches!(a, Action::Insert { .. }));
            assert_eq!(inserted.is_some(), write_inserts, "{mode:?} write miss");
            if let Some(Action::Insert { dirty: d, .. }) = inserted {
                assert_eq!(*d, dirty, "{mode:?} write miss dirtiness");
            }
            if read_inserts {
                let d = run(&mut c, Op::Write, 1, 3);
                assert!(d.hit.is_some(), "{mode:?} write hit");
                assert_eq!(
                    run(&mut c, Op::Read, 1, 4).hit.is_some(),
                    write_keeps,
                    "{mode:?} after write"
                );
            }
        }
    }

    #[test]
    fn dirty_blocks_are_written_back_before_eviction_and_by_alru_when_idle() {
        let mut c = cas(CasConfig::new(CacheMode::WriteBack), 2);
        run(&mut c, Op::Write, 1, 0);
        run(&mut c, Op::Write, 2, 0);
        let d = run(&mut c, Op::Read, 3, 0);
        assert_eq!(
            d.actions[..2],
            [
                Action::WriteBack { tier: TierId(0), key: 10, size: 4096 },
                Action::Evict { tier: TierId(0), key: 10, size: 4096 }
            ]
        );
        assert_eq!(c.dirty_blocks(), 1);
        // Idle for 10 s and dirty for 120 s: the cleaner writes key 20 back before request 4.
        let d = run(&mut c, Op::Read, 3, 130_000_000);
        assert_eq!(d.actions, vec![Action::WriteBack { tier: TierId(0), key: 20, size: 4096 }]);
        assert_eq!(c.dirty_blocks(), 0);
    }

    #[test]
    fn write_back_on_demand_writes_back_every_dirty_block_once_in_block_order() {
        let mut c = cas(CasConfig::new(CacheMode::WriteBack), 4);
        run(&mut c, Op::Write, 2, 5);
        run(&mut c, Op::Write, 1, 7);
        run(&mut c, Op::Read, 3, 8);
        let mut d = Decision::new();
        c.write_back(Some(TierId(1)), &mut d);
        assert!(d.actions.is_empty(), "no dirty block lives in tier 1: {:?}", d.actions);
        c.write_back(None, &mut d);
        let wb = |key| Action::WriteBack { tier: TierId(0), key, size: 4096 };
        assert_eq!(d.actions, vec![wb(10), wb(20)]);
        assert_eq!(c.dirty_blocks(), 0);
        d.clear();
        c.write_back(None, &mut d);
        assert!(d.actions.is_empty(), "written back twice: {:?}", d.actions);
    }

    /// A write whose lookup promotes its block (SCM-first, bidirectional) still updates the
    /// copy, where the block now is: the promotion's `Move` is not a resize. Without the
    /// update, the block moved up with its old bytes and the write was lost.
    #[test]
    fn a_write_hit_that_promotes_its_block_updates_it_after_the_move() {
        let lru = |n| (PolicyConfig::Lru, Capacity::objects(n));
        for mode in [CacheMode::WriteThrough, CacheMode::WriteBack] {
            for placement in ["scm-first:2", "bidirectional:1"] {
                let placement = Placement::parse(placement).unwrap();
                let inner = AnyPolicy::hierarchy(placement, &[lru(2), lru(4)], &[], 0).unwrap();
                let mut c = Cas::new(inner, CasConfig::new(mode));
                let (dram, below) = (TierId(0), TierId(1));
                // Into the lower tier (SCM-first inserts there; bidirectional's DRAM is pushed
                // down by two more keys), then hit there until the block is promoted.
                run(&mut c, Op::Write, 1, 1);
                run(&mut c, Op::Write, 2, 2);
                run(&mut c, Op::Write, 3, 3);
                assert_eq!(c.peek(10).map(|p| p.0), Some(below), "{mode:?} {placement:?}");
                let promoted = (4..10)
                    .map(|t| run(&mut c, Op::Write, 1, t))
                    .find(|d| d.actions.iter().any(|a| matches!(a, Action::Move { key: 10, .. })))
                    .unwrap_or_else(|| panic!("{mode:?} {placement:?}: never promoted"));
                let at = |want: &dyn Fn(&Action) -> bool| promoted.actions.iter().position(want);
                let moved = at(&|a| matches!(a, Action::Move { key: 10, to, .. } if *to == dram));
                let updated =
                    at(&|a| matches!(a, Action::Update { key: 10, tier, .. } if *tier == dram));
                assert!(
                    moved.is_some() && updated > moved,
                    "{mode:?} {placement:?}: {:?}",
                    promoted.actions
                );
            }
        }
    }

    /// A sync over DRAM and a persistent tier: DRAM's dirty blocks move down still dirty, in
    /// block order; a dirty victim below is written back before it is evicted.
    #[test]
    fn persisting_moves_dirty_blocks_down_and_writes_back_the_victims_they_push_out() {
        let lru = |n| (PolicyConfig::Lru, Capacity::objects(n));
        let tiers = [lru(2), lru(2)];
        let inner = AnyPolicy::hierarchy(Placement::DramFirst, &tiers, &[], 0).unwrap();
        let mut c = Cas::new(inner, CasConfig::new(CacheMode::WriteBack));
        let (dram, below) = (TierId(0), TierId(1));
        let moved = |key| Action::Move { key, size: 4096, from: dram, to: below };
        run(&mut c, Op::Write, 2, 1);
        run(&mut c, Op::Write, 1, 2);
        let mut d = Decision::new();
        c.persist(dram, Some(below), 3, &mut d);
        assert_eq!(d.actions, vec![moved(10), moved(20)]);
        assert_eq!(c.dirty_blocks(), 2);
        assert_eq!(c.peek(10), Some((below, 4096)));
        run(&mut c, Op::Write, 3, 4);
        d.clear();
        c.persist(dram, Some(below), 5, &mut d);
        let wb = |key| Action::WriteBack { tier: below, key, size: 4096 };
        let evict = |key| Action::Evict { tier: below, key, size: 4096 };
        assert_eq!(d.actions, vec![wb(10), evict(10), moved(30)]);
        assert_eq!(c.dirty_blocks(), 2);
        // Without a persistent tier below, a sync writes them back.
        run(&mut c, Op::Write, 4, 6);
        d.clear();
        c.persist(dram, None, 7, &mut d);
        assert_eq!(d.actions, vec![Action::WriteBack { tier: dram, key: 40, size: 4096 }]);
    }

    #[test]
    fn nhit_inserts_on_the_third_miss_once_the_cache_is_80_percent_full() {
        let mut config = CasConfig::new(CacheMode::WriteThrough);
        config.nhit = Some(NhitConfig::default());
        let mut c = cas(config, 5);
        for key in 0..4 {
            assert!(run(&mut c, Op::Read, key, 0)
                .actions
                .iter()
                .any(|a| matches!(a, Action::Insert { .. })));
        }
        // 4 of 5 is 80% full: key 9 is filtered until its third miss.
        for attempt in 1..=3 {
            let inserted = run(&mut c, Op::Read, 9, 0)
                .actions
                .iter()
                .any(|a| matches!(a, Action::Insert { .. }));
            assert_eq!(inserted, attempt == 3, "miss {attempt}");
        }
    }

    #[test]
    fn sequential_runs_past_the_threshold_bypass_the_cache() {
        let mut config = CasConfig::new(CacheMode::WriteThrough);
        config.seq_cutoff = SeqCutoffPolicy::Always;
        config.seq_threshold_bytes = 3 * 4096;
        let mut c = cas(config, 100);
        let mut d = Decision::new();
        let inserted: Vec<bool> = (0..6)
            .map(|block| {
                d.clear();
                c.decide(&Request::new(0, 500 + block, 4096, Op::Read), &mut d);
                d.actions.iter().any(|a| matches!(a, Action::Insert { .. }))
            })
            .collect();
        assert_eq!(inserted, vec![true, true, true, false, false, false]);
    }
}
