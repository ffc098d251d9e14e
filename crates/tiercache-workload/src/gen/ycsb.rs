//! The YCSB core workloads A-F (Cooper et al., "Benchmarking Cloud Serving Systems with YCSB",
//! SoCC'10), with the defaults of YCSB's `workloads/workload{a..f}` files: 1000 records of
//! 10 fields x 100 bytes, Zipfian request distribution with constant 0.99 (scrambled, as
//! YCSB's `CoreWorkload` uses it), scans of uniform length 1..=100.
//!
//! | workload | mix | distribution |
//! |---|---|---|
//! | A | 50% read, 50% update | zipfian |
//! | B | 95% read, 5% update | zipfian |
//! | C | 100% read | zipfian |
//! | D | 95% read, 5% insert | latest |
//! | E | 95% scan, 5% insert | zipfian |
//! | F | 50% read, 50% read-modify-write | zipfian |
//!
//! As cache requests: a read is a read of the record; an update or insert is a write; a
//! read-modify-write is a read then a write; a scan of length L reads L consecutive records.
//! Keys are the numbers in YCSB's key names: `user<fnvhash64(keynum)>`.

use serde::{Deserialize, Serialize};
use tiercache_core::{fnv1a_64, Op, Request, SeededRng};

use super::zipf::Zipf;
use crate::error::TraceError;

/// YCSB's `Utils.fnvhash64`: FNV-1a over the 8 little-endian bytes, then `Math.abs`.
pub fn ycsb_hash(keynum: u64) -> u64 {
    (fnv1a_64(&keynum.to_le_bytes()) as i64).unsigned_abs()
}

/// YCSB's key name for a key number with hashed inserts (`user` + hash, zero padding 1).
pub fn ycsb_key_name(keynum: u64) -> String {
    format!("user{}", ycsb_hash(keynum))
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum YcsbWorkload {
    A,
    B,
    C,
    D,
    E,
    F,
}

impl YcsbWorkload {
    pub fn parse(name: &str) -> Result<YcsbWorkload, TraceError> {
        Ok(match name.trim().to_ascii_uppercase().as_str() {
            "A" => YcsbWorkload::A,
            "B" => YcsbWorkload::B,
            "C" => YcsbWorkload::C,
            "D" => YcsbWorkload::D,
            "E" => YcsbWorkload::E,
            "F" => YcsbWorkload::F,
            other => {
                return Err(TraceError::BadOption(format!(
                    "YCSB workload '{other}' is not one of A-F"
                )))
            }
        })
    }

    /// (read, update, insert, scan, read-modify-write) proportions.
    fn mix(self) -> [f64; 5] {
        match self {
            YcsbWorkload::A => [0.5, 0.5, 0.0, 0.0, 0.0],
            YcsbWorkload::B => [0.95, 0.05, 0.0, 0.0, 0.0],
            YcsbWorkload::C => [1.0, 0.0, 0.0, 0.0, 0.0],
            YcsbWorkload::D => [0.95, 0.0, 0.05, 0.0, 0.0],
            YcsbWorkload::E => [0.0, 0.0, 0.05, 0.95, 0.0],
            YcsbWorkload::F => [0.5, 0.0, 0.0, 0.0, 0.5],
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct YcsbConfig {
    pub workload: YcsbWorkload,
    pub record_count: u64,
    pub operation_count: u64,
    pub record_bytes: u32,
    pub zipfian_constant: f64,
    pub max_scan_length: u64,
    pub seed: u64,
}

impl YcsbConfig {
    pub fn new(workload: YcsbWorkload) -> YcsbConfig {
        YcsbConfig {
            workload,
            record_count: 1000,
            operation_count: 1000,
            record_bytes: 1000,
            zipfian_constant: 0.99,
            max_scan_length: 100,
            seed: 0,
        }
    }
}

/// The request stream of a YCSB run phase (the load phase is not emitted).
pub struct Ycsb {
    config: YcsbConfig,
    rng: SeededRng,
    zipf: Zipf,
    /// Records that exist: the initial ones plus those inserted so far.
    inserted: u64,
    operations: u64,
    pending: Vec<Request>,
    time: u64,
}

impl Ycsb {
    pub fn new(config: YcsbConfig) -> Result<Ycsb, TraceError> {
        if config.record_count == 0 {
            return Err(TraceError::BadOption("YCSB record count must be at least 1".into()));
        }
        if !(config.zipfian_constant > 0.0 && config.zipfian_constant < 1.0) {
            return Err(TraceError::BadOption("YCSB's Zipfian constant must be in (0, 1)".into()));
        }
        // YCSB sizes the key chooser for the inserts it expects (operations x insert share x 2).
        let expected_new = (config.operation_count as f64 * config.workload.mix()[2] * 2.0) as u64;
        let items = match config.workload {
            YcsbWorkload::D => config.record_count,
            _ => config.record_count + expected_new,
        };
        let zipf = Zipf::new(items, config.zipfian_constant);
        let pending = Vec::with_capacity(config.max_scan_length as usize);
        Ok(Ycsb {
            rng: SeededRng::new(config.seed),
            inserted: config.record_count,
            zipf,
            operations: 0,
            pending,
            time: 0,
            config,
        })
    }

    fn choose_keynum(&mut self) -> u64 {
        if self.config.workload == YcsbWorkload::D {
            // SkewedLatest: Zipf over the existing records, newest hottest.
            self.zipf.resize(self.inserted);
            return self.inserted - 1 - self.zipf.next(&mut self.rng);
        }
        loop {
            let rank = self.zipf.next(&mut self.rng);
            let keynum = fnv1a_64(&rank.to_le_bytes()) % self.zipf.items();
            if keynum < self.inserted {
                return keynum;
            }
        }
    }

    fn push(&mut self, keynum: u64, op: Op) {
        let request = Request::new(self.time, ycsb_hash(keynum), self.config.record_bytes, op);
        self.time += 1;
        self.pending.push(request);
    }

    fn operation(&mut self) {
        let [read, update, insert, scan, _] = self.config.workload.mix();
        let u = self.rng.next_f64();
        if u < read {
            let k = self.choose_keynum();
            self.push(k, Op::Read);
        } else if u < read + update {
            let k = self.choose_keynum();
            self.push(k, Op::Write);
        } else if u < read + update + insert {
            let k = self.inserted;
            self.inserted += 1;
            self.push(k, Op::Write);
        } else if u < read + update + insert + scan {
            let start = self.choose_keynum();
            let length = 1 + self.rng.below(self.config.max_scan_length);
            let end = (start + length).min(self.inserted);
            for k in start..end {
                self.push(k, Op::Read);
            }
        } else {
            let k = self.choose_keynum();
            self.push(k, Op::Read);
            self.push(k, Op::Write);
        }
        // Emitted in order: the stream pops from the back.
        self.pending.reverse();
    }
}

impl Iterator for Ycsb {
    type Item = Request;

    fn next(&mut self) -> Option<Request> {
        while self.pending.is_empty() {
            if self.operations >= self.config.operation_count {
                return None;
            }
            self.operations += 1;
            self.operation();
        }
        self.pending.pop()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_names_match_ycsb() {
        // The first keys YCSB loads with hashed insert order (seen in every YCSB run's output).
        assert_eq!(ycsb_key_name(0), "user6284781860667377211");
        assert_eq!(ycsb_key_name(1), "user8517097267634966620");
        assert_eq!(ycsb_key_name(2), "user1820151046732198393");
    }

    #[test]
    fn mixes_follow_the_workloads() {
        let count = |w: YcsbWorkload| {
            let config = YcsbConfig { operation_count: 20_000, seed: 3, ..YcsbConfig::new(w) };
            let reqs: Vec<Request> = Ycsb::new(config).unwrap().collect();
            let writes = reqs.iter().filter(|r| r.op == Op::Write).count();
            (reqs.len(), writes)
        };
        let (n, w) = count(YcsbWorkload::A);
        assert_eq!(n, 20_000);
        assert!((w as f64 / n as f64 - 0.5).abs() < 0.02);
        assert_eq!(count(YcsbWorkload::C).1, 0);
        let (n, w) = count(YcsbWorkload::F);
        assert!(n > 29_000 && (w as f64 / 10_000.0 - 1.0).abs() < 0.05, "{n} {w}");
        let (n, _) = count(YcsbWorkload::E);
        assert!(n > 20_000 * 40, "scans read about 50 records each: {n}");
    }

    #[test]
    fn workload_d_reads_recent_inserts() {
        let config =
            YcsbConfig { operation_count: 50_000, seed: 1, ..YcsbConfig::new(YcsbWorkload::D) };
        let reqs: Vec<Request> = Ycsb::new(config).unwrap().collect();
        let newest = ycsb_hash(1000 + 2000);
        let reads_of_new = reqs.iter().filter(|r| r.op == Op::Read && r.key != newest).count();
        assert!(reads_of_new > 0);
        let same_seed: Vec<Request> = Ycsb::new(YcsbConfig {
            operation_count: 50_000,
            seed: 1,
            ..YcsbConfig::new(YcsbWorkload::D)
        })
        .unwrap()
        .collect();
        assert_eq!(reqs, same_seed);
    }
}
