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

pub mod records;
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

/// One operation of a YCSB run phase, its records named by key number (YCSB's `keynum`; the
/// stored key is [`ycsb_hash`] of it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum YcsbOperation {
    Read(u64),
    Update(u64),
    /// A new record: its number is the next one the caller gives out.
    Insert,
    /// `length` records in key order from the record `start`.
    Scan {
        start: u64,
        length: u64,
    },
    ReadModifyWrite(u64),
}

impl YcsbOperation {
    /// The names of the kinds of operation, in the order of [`kind`](Self::kind).
    pub const KINDS: [&'static str; 5] = ["read", "update", "insert", "scan", "read_modify_write"];

    /// This operation's kind: its index in [`KINDS`](Self::KINDS).
    pub fn kind(&self) -> usize {
        match self {
            YcsbOperation::Read(_) => 0,
            YcsbOperation::Update(_) => 1,
            YcsbOperation::Insert => 2,
            YcsbOperation::Scan { .. } => 3,
            YcsbOperation::ReadModifyWrite(_) => 4,
        }
    }
}

/// The operations of a YCSB run phase, with YCSB's choice of keys: a generator per client
/// thread, the records that exist told by the caller (YCSB's acknowledged insert counter), so
/// clients that insert side by side never read a record before it is there.
pub struct YcsbChooser {
    config: YcsbConfig,
    rng: SeededRng,
    zipf: Zipf,
}

impl YcsbChooser {
    pub fn new(config: YcsbConfig) -> Result<YcsbChooser, TraceError> {
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
        if config.max_scan_length == 0 {
            return Err(TraceError::BadOption("YCSB's longest scan must be at least 1".into()));
        }
        let zipf = Zipf::new(items, config.zipfian_constant);
        Ok(YcsbChooser { rng: SeededRng::new(config.seed), zipf, config })
    }

    pub fn config(&self) -> &YcsbConfig {
        &self.config
    }

    /// A record among the `existing` ones (numbered from 0), by the workload's distribution.
    fn choose_keynum(&mut self, existing: u64) -> u64 {
        if self.config.workload == YcsbWorkload::D {
            // SkewedLatest: Zipf over the existing records, newest hottest.
            self.zipf.resize(existing);
            return existing - 1 - self.zipf.next(&mut self.rng);
        }
        loop {
            let rank = self.zipf.next(&mut self.rng);
            let keynum = fnv1a_64(&rank.to_le_bytes()) % self.zipf.items();
            if keynum < existing {
                return keynum;
            }
        }
    }

    /// The next operation, when records `0..existing` exist (at least one).
    pub fn next(&mut self, existing: u64) -> YcsbOperation {
        let [read, update, insert, scan, _] = self.config.workload.mix();
        let u = self.rng.next_f64();
        if u < read {
            YcsbOperation::Read(self.choose_keynum(existing))
        } else if u < read + update {
            YcsbOperation::Update(self.choose_keynum(existing))
        } else if u < read + update + insert {
            YcsbOperation::Insert
        } else if u < read + update + insert + scan {
            let start = self.choose_keynum(existing);
            let length = 1 + self.rng.below(self.config.max_scan_length);
            YcsbOperation::Scan { start, length }
        } else {
            YcsbOperation::ReadModifyWrite(self.choose_keynum(existing))
        }
    }
}

/// The request stream of a YCSB run phase (the load phase is not emitted), one client.
pub struct Ycsb {
    chooser: YcsbChooser,
    /// Records that exist: the initial ones plus those inserted so far.
    inserted: u64,
    operations: u64,
    pending: Vec<Request>,
    time: u64,
}

impl Ycsb {
    pub fn new(config: YcsbConfig) -> Result<Ycsb, TraceError> {
        let chooser = YcsbChooser::new(config)?;
        let config = chooser.config();
        Ok(Ycsb {
            inserted: config.record_count,
            operations: 0,
            pending: Vec::with_capacity(config.max_scan_length as usize),
            time: 0,
            chooser,
        })
    }

    fn push(&mut self, keynum: u64, op: Op) {
        let bytes = self.chooser.config.record_bytes;
        let request = Request::new(self.time, ycsb_hash(keynum), bytes, op);
        self.time += 1;
        self.pending.push(request);
    }

    fn operation(&mut self) {
        match self.chooser.next(self.inserted) {
            YcsbOperation::Read(k) => self.push(k, Op::Read),
            YcsbOperation::Update(k) => self.push(k, Op::Write),
            YcsbOperation::Insert => {
                let k = self.inserted;
                self.inserted += 1;
                self.push(k, Op::Write);
            }
            YcsbOperation::Scan { start, length } => {
                // As blocks: consecutive record numbers (a block device has no key order).
                for k in start..(start + length).min(self.inserted) {
                    self.push(k, Op::Read);
                }
            }
            YcsbOperation::ReadModifyWrite(k) => {
                self.push(k, Op::Read);
                self.push(k, Op::Write);
            }
        }
        // Emitted in order: the stream pops from the back.
        self.pending.reverse();
    }
}

impl Iterator for Ycsb {
    type Item = Request;

    fn next(&mut self) -> Option<Request> {
        while self.pending.is_empty() {
            if self.operations >= self.chooser.config.operation_count {
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
