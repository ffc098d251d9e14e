//! db_bench's mixgraph workload: the key-value model Cao, Dong, Vemuri and Du fitted to
//! Facebook's RocksDB deployments ("Characterizing, Modeling, and Benchmarking RocksDB
//! Key-Value Workloads at Facebook", FAST'20, section 6), as RocksDB's
//! `db_bench --benchmarks=mixgraph` exposes it. Kassa et al. (ATC'21, section 2.1.2) built
//! their benchmarks by the same procedure.
//!
//! The model, and the db_bench parameter that sets each part:
//!
//! - **Key-range hotness** (`keyrange_dist_a..d`, `keyrange_num`): the key space is cut into
//!   `keyrange_num` equal ranges; the x-th hottest range is drawn with weight
//!   `a*exp(b*x) + c*exp(d*x)`, and the ranges are shuffled over the key space (by the seed), so
//!   the hot ones are not adjacent.
//! - **Key hotness within a range** (`key_dist_a`, `key_dist_b`): a power law, `CDF(s) = a*s^b`;
//!   the drawn rank `s` is hashed to an offset in the range, so hot keys are scattered. Without
//!   it the offset is uniform.
//! - **Value sizes** (`value_theta`, `value_k`, `value_sigma`, `mix_max_value_size`): a
//!   generalized Pareto, capped as db_bench caps it (a size above the maximum wraps modulo it).
//! - **Operations** (`mix_get_ratio`, `mix_put_ratio`, `mix_seek_ratio`): Get, Put, and Seek
//!   followed by a generalized-Pareto number of Nexts (`iter_theta`, `iter_k`, `iter_sigma`,
//!   `mix_max_scan_len`).
//! - **Load over time** (`sine_a..d`): queries per second `a*sin(b*t + c) + d` at second `t`,
//!   the diurnal pattern; without it `time_us` is the request's index.
//!
//! The defaults are the parameters RocksDB documents for the model (the example of RocksDB
//! pull request 5953 and the wiki page "RocksDB Trace, Replay, Analyzer, and Workload
//! Generation"), 48-byte keys and no sine. The distributions are db_bench's; the stream is not
//! db_bench's bit for bit (our generator, and the operation type is drawn apart from the key).
//! Two choices differ on purpose: a key's value has one size for the whole stream, drawn from
//! the value distribution when the key is first sized (db_bench loads fixed-size values and
//! draws a new size per Put), and a seek emits its key and the `n` keys after it.
//!
//! The seed draws the stream. The database itself (where the hot ranges sit, which keys a
//! rank hashes to, each value's size) depends on the parameters and the key count only, as in
//! db_bench, so streams of other seeds (a warm-up and a measured run) read the same database.
//!
//! **Block view** (`block_bytes`): RocksDB's block cache sees data blocks, not keys. The keys
//! are laid out in key order, packed into blocks of `block_bytes` at the mean record size
//! (key plus value), as a table file's data blocks hold them; a Get reads its key's block, a
//! seek the blocks its keys span (each once), a Put writes its key's block. RocksDB sends Puts
//! to the memtable, not the block cache: a model of the block cache drops them.

use serde::{Deserialize, Serialize};
use tiercache_core::{Op, Request, SeededRng};

use crate::error::TraceError;

/// A generalized Pareto distribution: location `theta`, shape `k`, scale `sigma`.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Pareto {
    pub theta: f64,
    pub k: f64,
    pub sigma: f64,
}

impl Pareto {
    /// The value at cumulative probability `1 - u`, `u` in (0, 1].
    fn inverse(&self, u: f64) -> f64 {
        if self.k == 0.0 {
            self.theta - self.sigma * u.ln()
        } else {
            self.theta + self.sigma * (u.powf(-self.k) - 1.0) / self.k
        }
    }
}

/// The two-term exponential weight of key ranges: `a*exp(b*x) + c*exp(d*x)`.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct KeyRanges {
    pub a: f64,
    pub b: f64,
    pub c: f64,
    pub d: f64,
    pub count: u64,
}

/// Queries per second over time: `a*sin(b*t + c) + d`, `t` in seconds.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Sine {
    pub a: f64,
    pub b: f64,
    pub c: f64,
    pub d: f64,
}

impl Sine {
    pub fn qps(&self, seconds: f64) -> f64 {
        self.a * (self.b * seconds + self.c).sin() + self.d
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MixgraphConfig {
    /// Keys in the database (db_bench's `num`).
    pub keys: u64,
    /// Operations; a seek is one operation however many keys it reads.
    pub operations: u64,
    pub key_bytes: u32,
    pub value: Pareto,
    pub max_value_bytes: u32,
    /// `key_dist_a`, `key_dist_b`; `None` draws offsets uniformly.
    pub key_power: Option<(f64, f64)>,
    /// `keyrange_*`; `None` is one range over all keys.
    pub key_ranges: Option<KeyRanges>,
    pub get_ratio: f64,
    pub put_ratio: f64,
    pub seek_ratio: f64,
    pub scan: Pareto,
    pub max_scan: u64,
    pub sine: Option<Sine>,
    /// Emit data blocks of this many bytes instead of key-value requests.
    pub block_bytes: Option<u32>,
    pub seed: u64,
}

impl Default for MixgraphConfig {
    /// RocksDB's documented fit (see the module's notes), 10M keys, 1M operations.
    fn default() -> MixgraphConfig {
        MixgraphConfig {
            keys: 10_000_000,
            operations: 1_000_000,
            key_bytes: 48,
            value: Pareto { theta: 0.0, k: 0.2615, sigma: 25.45 },
            max_value_bytes: 1024,
            key_power: Some((0.002312, 0.3467)),
            key_ranges: Some(KeyRanges { a: 14.18, b: -2.917, c: 0.0164, d: -0.08082, count: 30 }),
            get_ratio: 0.85,
            put_ratio: 0.14,
            seek_ratio: 0.01,
            scan: Pareto { theta: 0.0, k: 2.517, sigma: 14.236 },
            max_scan: 10_000,
            sine: None,
            block_bytes: None,
            seed: 0,
        }
    }
}

/// The db_bench names [`MixgraphConfig::set`] takes.
pub const PARAMETERS: [&str; 23] = [
    "key_size",
    "key_dist_a",
    "key_dist_b",
    "keyrange_dist_a",
    "keyrange_dist_b",
    "keyrange_dist_c",
    "keyrange_dist_d",
    "keyrange_num",
    "value_theta",
    "value_k",
    "value_sigma",
    "mix_max_value_size",
    "iter_theta",
    "iter_k",
    "iter_sigma",
    "mix_max_scan_len",
    "mix_get_ratio",
    "mix_put_ratio",
    "mix_seek_ratio",
    "sine_a",
    "sine_b",
    "sine_c",
    "sine_d",
];

impl MixgraphConfig {
    /// Sets one parameter by its db_bench name. As in db_bench, key_dist_a or key_dist_b at 0
    /// turns the power law off, all four keyrange_dist parameters at 0 turn ranges off, and
    /// sine_a or sine_d at 0 turns the sine off.
    pub fn set(&mut self, name: &str, value: &str) -> Result<(), TraceError> {
        let bad = |why: String| TraceError::BadOption(format!("mixgraph {name}={value}: {why}"));
        let number: f64 = value.trim().parse().map_err(|_| bad("not a number".into()))?;
        if !number.is_finite() {
            return Err(bad("not a finite number".into()));
        }
        let whole = || -> Result<u64, TraceError> {
            if number < 0.0 || number.fract() != 0.0 || number > u32::MAX as f64 {
                return Err(bad("must be a whole number".into()));
            }
            Ok(number as u64)
        };
        let power = self.key_power.get_or_insert((0.0, 0.0));
        let ranges =
            self.key_ranges.get_or_insert(KeyRanges { a: 0.0, b: 0.0, c: 0.0, d: 0.0, count: 1 });
        let sine = self.sine.get_or_insert(Sine { a: 0.0, b: 0.0, c: 0.0, d: 0.0 });
        match name {
            "key_size" => self.key_bytes = whole()? as u32,
            "key_dist_a" => power.0 = number,
            "key_dist_b" => power.1 = number,
            "keyrange_dist_a" => ranges.a = number,
            "keyrange_dist_b" => ranges.b = number,
            "keyrange_dist_c" => ranges.c = number,
            "keyrange_dist_d" => ranges.d = number,
            "keyrange_num" => ranges.count = whole()?,
            "value_theta" => self.value.theta = number,
            "value_k" => self.value.k = number,
            "value_sigma" => self.value.sigma = number,
            "mix_max_value_size" => self.max_value_bytes = whole()? as u32,
            "iter_theta" => self.scan.theta = number,
            "iter_k" => self.scan.k = number,
            "iter_sigma" => self.scan.sigma = number,
            "mix_max_scan_len" => self.max_scan = whole()?,
            "mix_get_ratio" => self.get_ratio = number,
            "mix_put_ratio" => self.put_ratio = number,
            "mix_seek_ratio" => self.seek_ratio = number,
            "sine_a" => sine.a = number,
            "sine_b" => sine.b = number,
            "sine_c" => sine.c = number,
            "sine_d" => sine.d = number,
            "num" | "reads" => {
                return Err(bad("give the key count and the operations with --objects and \
                                --requests"
                    .into()))
            }
            _ => {
                return Err(TraceError::BadOption(format!(
                    "mixgraph: unknown parameter '{name}'; known: {}",
                    PARAMETERS.join(", ")
                )))
            }
        }
        self.normalize_off_switches();
        Ok(())
    }

    /// db_bench's switches: a power law, ranges or a sine with zero parameters is off.
    fn normalize_off_switches(&mut self) {
        if matches!(self.key_power, Some((a, b)) if a == 0.0 || b == 0.0) {
            self.key_power = None;
        }
        if matches!(self.key_ranges, Some(r) if r.a == 0.0 && r.b == 0.0 && r.c == 0.0 && r.d == 0.0)
        {
            self.key_ranges = None;
        }
        if matches!(self.sine, Some(s) if s.a == 0.0 && s.d == 0.0) {
            self.sine = None;
        }
    }

    /// Applies db_bench-style parameters: `name=value` words separated by spaces or commas,
    /// leading dashes allowed, so a db_bench command line's mixgraph flags paste as they are.
    /// The word `default` (or nothing) changes nothing.
    pub fn apply(&mut self, text: &str) -> Result<(), TraceError> {
        let words = text.split(|c: char| c.is_whitespace() || c == ',');
        for word in words.filter(|w| !w.is_empty() && *w != "default") {
            let word = word.trim_start_matches('-');
            let Some((name, value)) = word.split_once('=') else {
                return Err(TraceError::BadOption(format!(
                    "mixgraph: '{word}' is not name=value (for example keyrange_num=30)"
                )));
            };
            self.set(name, value)?;
        }
        Ok(())
    }

    pub fn validate(&self) -> Result<(), TraceError> {
        let bad = |what: String| Err(TraceError::BadOption(format!("mixgraph: {what}")));
        if self.keys == 0 {
            return bad("the key count (--objects) must be at least 1".into());
        }
        let mix = [self.get_ratio, self.put_ratio, self.seek_ratio];
        if mix.iter().any(|r| r.is_nan() || *r < 0.0) || mix.iter().sum::<f64>() <= 0.0 {
            return bad(format!(
                "mix_get_ratio, mix_put_ratio and mix_seek_ratio must be at least 0 and not all \
                 0, got {}, {}, {}",
                self.get_ratio, self.put_ratio, self.seek_ratio
            ));
        }
        if let Some((a, b)) = self.key_power {
            if !(a > 0.0 && b > 0.0) {
                return bad(format!("key_dist_a and key_dist_b must be above 0, got {a}, {b}"));
            }
        }
        if let Some(r) = self.key_ranges {
            if r.count == 0 || r.count > self.keys {
                return bad(format!(
                    "keyrange_num must be between 1 and the key count {}, got {}",
                    self.keys, r.count
                ));
            }
            if range_weights(&r).iter().sum::<f64>() <= 0.0 {
                return bad("the keyrange_dist parameters give every key range weight 0".into());
            }
        }
        for (name, p) in [("value", self.value), ("iter", self.scan)] {
            if p.sigma.is_nan() || p.sigma <= 0.0 {
                return bad(format!("{name}_sigma must be above 0, got {}", p.sigma));
            }
        }
        if self.max_value_bytes == 0 || self.max_scan == 0 {
            return bad("mix_max_value_size and mix_max_scan_len must be at least 1".into());
        }
        if let Some(s) = self.sine {
            if (s.d - s.a.abs()).is_nan() || s.d - s.a.abs() <= 0.0 {
                return bad(format!(
                    "sine_d ({}) must exceed |sine_a| ({}): the rate must stay above 0",
                    s.d, s.a
                ));
            }
        }
        if self.block_bytes == Some(0) {
            return bad("the block size must be at least 1 byte".into());
        }
        Ok(())
    }

    /// The value size of `key`, fixed for the stream.
    pub fn value_bytes(&self, key: u64) -> u32 {
        let u = 1.0 - SeededRng::new(key ^ 0x5641_4C55_4553).next_f64();
        self.capped_value(u)
    }

    fn capped_value(&self, u: f64) -> u32 {
        let size = self.value.inverse(u).ceil();
        let max = self.max_value_bytes as f64;
        if size < 0.0 {
            10
        } else if size > max {
            (size % max) as u32
        } else {
            size as u32
        }
    }

    /// The mean record size, key plus value, by quadrature over the value distribution.
    pub fn mean_record_bytes(&self) -> f64 {
        const POINTS: u32 = 1 << 16;
        let total: f64 =
            (0..POINTS).map(|i| self.capped_value((i as f64 + 0.5) / POINTS as f64) as f64).sum();
        self.key_bytes as f64 + total / POINTS as f64
    }
}

/// The weight of each range, x = 1 (the first) to `count`.
fn range_weights(r: &KeyRanges) -> Vec<f64> {
    (1..=r.count)
        .map(|x| {
            let x = x as f64;
            let w = r.a * (r.b * x).exp() + r.c * (r.d * x).exp();
            if w.is_finite() && w >= 1e-16 {
                w
            } else {
                0.0
            }
        })
        .collect()
}

/// The request stream of a [`MixgraphConfig`].
pub struct Mixgraph {
    config: MixgraphConfig,
    rng: SeededRng,
    /// Per range in key order: cumulative weight up to and including it.
    cumulative: Vec<f64>,
    /// Key-space position of the range at the same index as `cumulative`.
    range_slot: Vec<u64>,
    records_per_block: f64,
    operations: u64,
    seconds: f64,
    pending: Vec<Request>,
}

impl Mixgraph {
    pub fn new(config: MixgraphConfig) -> Result<Mixgraph, TraceError> {
        config.validate()?;
        let ranges =
            config.key_ranges.unwrap_or(KeyRanges { a: 1.0, b: 0.0, c: 0.0, d: 0.0, count: 1 });
        let weights = range_weights(&ranges);
        // Shuffle where each range sits in the key space, by the seed (Fisher-Yates).
        let mut slot: Vec<u64> = (0..ranges.count).collect();
        let mut shuffle = SeededRng::new(config.keys ^ ranges.count.rotate_left(40));
        for i in (1..slot.len()).rev() {
            let j = shuffle.below(i as u64 + 1) as usize;
            slot.swap(i, j);
        }
        let mut sum = 0.0;
        let cumulative = weights
            .iter()
            .map(|w| {
                sum += w;
                sum
            })
            .collect();
        let records_per_block = match config.block_bytes {
            Some(bytes) => (bytes as f64 / config.mean_record_bytes()).max(f64::MIN_POSITIVE),
            None => 1.0,
        };
        Ok(Mixgraph {
            rng: SeededRng::new(config.seed),
            cumulative,
            range_slot: slot,
            records_per_block,
            operations: 0,
            seconds: 0.0,
            pending: Vec::new(),
            config,
        })
    }

    /// Records per data block in the block view (1 without it).
    pub fn records_per_block(&self) -> f64 {
        self.records_per_block
    }

    fn next_key(&mut self) -> u64 {
        let count = self.range_slot.len() as u64;
        let total = *self.cumulative.last().expect("at least one range");
        let target = self.rng.next_f64() * total;
        let range = self.cumulative.partition_point(|c| *c <= target).min(count as usize - 1);
        let slot = self.range_slot[range];
        let keys = self.config.keys;
        let (start, end) = (slot * keys / count, (slot + 1) * keys / count);
        let width = end - start;
        let offset = match self.config.key_power {
            None => self.rng.below(width),
            Some((a, b)) => {
                let u = self.rng.next_f64();
                let rank = (u / a).powf(1.0 / b).ceil();
                let rank = if rank.is_finite() { rank as u64 } else { u64::MAX };
                SeededRng::new(rank ^ 0x4B45_5953).next_u64() % width
            }
        };
        start + offset
    }

    fn block_of(&self, key: u64) -> u64 {
        (key as f64 / self.records_per_block) as u64
    }

    fn push(&mut self, key: u64, op: Op, time_us: u64) {
        let request = match self.config.block_bytes {
            Some(bytes) => Request::new(time_us, self.block_of(key), bytes, op),
            None => {
                let size = self.config.key_bytes.saturating_add(self.config.value_bytes(key));
                Request::new(time_us, key, size.max(1), op)
            }
        };
        self.pending.push(request);
    }

    fn operation(&mut self) {
        let time_us = match self.config.sine {
            Some(sine) => {
                let now = (self.seconds * 1e6) as u64;
                self.seconds += 1.0 / sine.qps(self.seconds);
                now
            }
            None => self.operations,
        };
        let key = self.next_key();
        let c = &self.config;
        let pick = self.rng.next_f64() * (c.get_ratio + c.put_ratio + c.seek_ratio);
        if pick < c.get_ratio {
            self.push(key, Op::Read, time_us);
        } else if pick < c.get_ratio + c.put_ratio {
            self.push(key, Op::Write, time_us);
        } else {
            let u = 1.0 - self.rng.next_f64();
            let length = self.config.scan.inverse(u).ceil().max(0.0);
            let length = if length.is_finite() { length as u64 } else { u64::MAX };
            let nexts = length % self.config.max_scan;
            let last = key.saturating_add(nexts).min(self.config.keys - 1);
            let mut previous_block = None;
            for k in key..=last {
                if self.config.block_bytes.is_some() {
                    let block = self.block_of(k);
                    if previous_block == Some(block) {
                        continue;
                    }
                    previous_block = Some(block);
                }
                self.push(k, Op::Read, time_us);
            }
        }
        // Emitted in order: the stream pops from the back.
        self.pending.reverse();
    }
}

impl Iterator for Mixgraph {
    type Item = Request;

    fn next(&mut self) -> Option<Request> {
        while self.pending.is_empty() {
            if self.operations >= self.config.operations {
                return None;
            }
            self.operation();
            self.operations += 1;
        }
        self.pending.pop()
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    fn small() -> MixgraphConfig {
        MixgraphConfig { keys: 300_000, operations: 200_000, seed: 5, ..Default::default() }
    }

    #[test]
    fn same_seed_same_stream_other_seed_other_stream() {
        let a: Vec<Request> = Mixgraph::new(small()).unwrap().collect();
        let b: Vec<Request> = Mixgraph::new(small()).unwrap().collect();
        let c: Vec<Request> =
            Mixgraph::new(MixgraphConfig { seed: 6, ..small() }).unwrap().collect();
        assert_eq!(a, b);
        assert_ne!(a, c);
        assert!(a.iter().all(|r| r.key < 300_000));
        // Another seed, the same database: the same hot range, the same value sizes.
        let hot =
            |seed: u64| Mixgraph::new(MixgraphConfig { seed, ..small() }).unwrap().range_slot[0];
        assert_eq!(hot(5), hot(6));
        let sizes: HashMap<u64, u32> = a.iter().map(|r| (r.key, r.size)).collect();
        assert!(c.iter().all(|r| sizes.get(&r.key).is_none_or(|s| *s == r.size)));
    }

    #[test]
    fn operations_follow_the_mix_and_seeks_read_runs_of_keys() {
        let config = small();
        let requests: Vec<Request> = Mixgraph::new(config.clone()).unwrap().collect();
        let puts = requests.iter().filter(|r| r.op == Op::Write).count() as f64;
        assert!((puts / 200_000.0 - 0.14).abs() < 0.005, "{puts}");
        // Reads beyond the gets are the seeks' keys: 1% of operations, each 1 + n keys with n
        // from the Pareto of shape 2.517 (median 14.236 * (2^2.517 - 1) / 2.517 = 26.7; its
        // mean is infinite, about 840 under the cap of 10,000).
        let reads = requests.len() as f64 - puts;
        let seek_reads = reads - 0.85 * 200_000.0;
        assert!(seek_reads > 0.01 * 200_000.0 * 20.0, "{seek_reads}");
        // Sizes: the key plus the value, fixed per key.
        let mut sizes = HashMap::new();
        for r in &requests {
            assert_eq!(*sizes.entry(r.key).or_insert(r.size), r.size);
            assert!(r.size >= 48 && r.size <= 48 + 1024);
        }
    }

    #[test]
    fn value_sizes_have_the_pareto_mean() {
        // Generalized Pareto mean theta + sigma / (1 - k) = 25.45 / 0.7385 = 34.46 bytes (the
        // cap at 1024 moves it by less than 0.2).
        let config = small();
        let mean = (0..200_000u64).map(|k| config.value_bytes(k) as f64).sum::<f64>() / 200_000.0;
        assert!((mean - 34.96).abs() < 0.6, "{mean}");
        assert!((config.mean_record_bytes() - 48.0 - 34.96).abs() < 0.6);
    }

    #[test]
    fn key_ranges_are_drawn_by_their_two_term_exponential_weight() {
        let config = MixgraphConfig {
            key_power: None,
            operations: 300_000,
            get_ratio: 1.0,
            put_ratio: 0.0,
            seek_ratio: 0.0,
            ..small()
        };
        let ranges = config.key_ranges.unwrap();
        let weights = range_weights(&ranges);
        let expected = weights[0] / weights.iter().sum::<f64>();
        let mut per_range = vec![0u64; 30];
        let generator = Mixgraph::new(config.clone()).unwrap();
        let hottest_slot = generator.range_slot[0];
        for r in generator {
            per_range[(r.key / 10_000) as usize] += 1;
        }
        let total: u64 = per_range.iter().sum();
        let share = per_range[hottest_slot as usize] as f64 / total as f64;
        assert!((share - expected).abs() < 0.01, "{share} against {expected}");
        assert_eq!(per_range.iter().max(), Some(&per_range[hottest_slot as usize]));
    }

    #[test]
    fn the_power_law_concentrates_accesses() {
        // Kassa et al.'s Figure 6: 10% of the keys carry half the accesses. With RocksDB's fit
        // the most popular 10% of accessed keys carry well over a third.
        let gets_only =
            MixgraphConfig { get_ratio: 1.0, put_ratio: 0.0, seek_ratio: 0.0, ..small() };
        let requests: Vec<Request> = Mixgraph::new(gets_only).unwrap().collect();
        let mut counts: HashMap<u64, u64> = HashMap::new();
        for r in &requests {
            *counts.entry(r.key).or_default() += 1;
        }
        let mut by_count: Vec<u64> = counts.values().copied().collect();
        by_count.sort_unstable_by(|a, b| b.cmp(a));
        let top: u64 = by_count[..by_count.len() / 10].iter().sum();
        let share = top as f64 / requests.len() as f64;
        assert!(share > 0.35, "{share}");
    }

    #[test]
    fn the_block_view_packs_records_in_key_order() {
        let config = MixgraphConfig { block_bytes: Some(4096), ..small() };
        let generator = Mixgraph::new(config.clone()).unwrap();
        let per_block = generator.records_per_block();
        assert!((per_block - 4096.0 / config.mean_record_bytes()).abs() < 1e-9);
        assert!((per_block - 49.6).abs() < 0.5, "{per_block}");
        let blocks = (300_000.0 / per_block).ceil() as u64;
        let requests: Vec<Request> = generator.collect();
        assert!(requests.iter().all(|r| r.size == 4096 && r.key < blocks));
        // Same keys, same operations: the block view's gets are the key view's gets, mapped.
        let kv: Vec<Request> = Mixgraph::new(small()).unwrap().collect();
        let puts = |v: &[Request]| v.iter().filter(|r| r.op == Op::Write).count();
        assert_eq!(puts(&requests), puts(&kv));
        let first_put = kv.iter().find(|r| r.op == Op::Write).unwrap();
        let first_block_put = requests.iter().find(|r| r.op == Op::Write).unwrap();
        assert_eq!(first_block_put.key, (first_put.key as f64 / per_block) as u64);
    }

    #[test]
    fn the_sine_sets_the_rate() {
        let sine = Sine { a: 400.0, b: std::f64::consts::PI / 10.0, c: 0.0, d: 1000.0 };
        let config =
            MixgraphConfig { sine: Some(sine), operations: 20_000, seek_ratio: 0.0, ..small() };
        let mut per_second = [0u64; 40];
        for r in Mixgraph::new(config).unwrap() {
            if let Some(slot) = per_second.get_mut((r.time_us / 1_000_000) as usize) {
                *slot += 1;
            }
        }
        // Operations per second track the curve (no seeks: a seek's keys share its time).
        for (s, n) in per_second.iter().enumerate().take(15) {
            let expected = sine.qps(s as f64 + 0.5);
            assert!((*n as f64 - expected).abs() < 0.05 * expected + 60.0, "{s}: {n} {expected}");
        }
    }

    #[test]
    fn db_bench_flags_paste_and_bad_ones_are_named() {
        let mut config = MixgraphConfig::default();
        config
            .apply("-keyrange_num=10 -mix_get_ratio=1 -mix_put_ratio=0 -mix_seek_ratio=0 -sine_a=1000 -sine_b=0.000073 -sine_d=4500")
            .unwrap();
        assert_eq!(config.key_ranges.unwrap().count, 10);
        assert_eq!(config.sine.unwrap().d, 4500.0);
        config.apply("key_dist_a=0").unwrap();
        assert_eq!(config.key_power, None);
        let error = |text: &str| {
            let mut c = MixgraphConfig::default();
            c.apply(text).and_then(|_| c.validate()).unwrap_err().to_string()
        };
        assert!(error("keyrange_nun=3").contains("unknown parameter 'keyrange_nun'"));
        assert!(error("value_k=abc").contains("value_k=abc: not a number"));
        assert!(error("keyrange_num=2.5").contains("whole number"));
        assert!(error("sine_a=100,sine_d=50").contains("sine_d (50) must exceed |sine_a|"));
        assert!(error("mix_get_ratio=-1").contains("mix_get_ratio"));
        assert!(error("num=5").contains("--objects"));
        assert!(error("keyrange_num").contains("not name=value"));
    }
}
