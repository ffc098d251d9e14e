//! YCSB on redb: the load phase and the run phase of the core workloads A-F (Cooper et al.,
//! SoCC'10) against a redb database, every value read checked against what was written.
//!
//! A record is the table `usertable`'s value under the key [`ycsb_hash`] of its number, as
//! YCSB's hashed key names order them, so a scan reads records in YCSB's key order. Its bytes
//! carry their own proof ([`fill_record`]): the record's number, a version, filler drawn from
//! both, and a CRC32C of all that, so a read that returns another record, a torn one or stale
//! bytes is caught. Versions grow with every committed write (they are taken inside the write
//! transaction, which redb runs one at a time), so a client that reads a record it wrote sees
//! at least that version, and a crash test can check that every acknowledged commit survived.
//!
//! Each operation is one transaction, as YCSB's bindings for embedded stores do: a read or a
//! scan in a read transaction, an update, an insert or a read-modify-write in a write
//! transaction committed at the durability asked for.

use std::collections::{BTreeMap, HashMap};
use std::io::Write;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Instant;

use hdrhistogram::Histogram;
use redb::{Database, Durability, ReadableDatabase, ReadableTable, TableDefinition};
use serde::Serialize;
use tiercache_engine::latency::{self, Percentiles};
use tiercache_workload::gen::ycsb::{ycsb_hash, YcsbChooser, YcsbConfig, YcsbOperation};

pub use tiercache_workload::gen::ycsb::records::{
    check_record, fill_record, Records, MIN_RECORD_BYTES,
};
pub use tiercache_workload::gen::ycsb::YcsbWorkload;

/// The records, by the hash of their number.
pub const TABLE: TableDefinition<u64, &[u8]> = TableDefinition::new("usertable");

/// Records per write transaction in the load phase.
const LOAD_BATCH: u64 = 1000;

/// How the run phase runs.
pub struct RunOptions<'a> {
    pub workload: YcsbWorkload,
    pub operations: u64,
    pub threads: usize,
    /// Bytes of a record (YCSB: 10 fields of 100 bytes).
    pub record_bytes: usize,
    pub seed: u64,
    pub durability: Durability,
    /// Where each committed write is told, as `NUMBER VERSION` lines (for crash tests).
    pub commit_log: Option<&'a Mutex<std::fs::File>>,
    /// Called now and then with the operations done so far, from one client.
    pub progress: &'a (dyn Fn(u64) + Sync),
}

/// What the load phase did.
#[derive(Clone, Debug, Serialize)]
pub struct LoadReport {
    pub records: u64,
    pub record_bytes: usize,
    pub seconds: f64,
    pub records_per_second: f64,
}

/// What a run phase did.
#[derive(Clone, Debug, Serialize)]
pub struct RunReport {
    pub workload: String,
    pub operations: u64,
    pub threads: usize,
    pub seconds: f64,
    pub ops_per_second: f64,
    /// Latency of each kind of operation the workload made: read, update, insert, scan,
    /// read_modify_write.
    pub latency: BTreeMap<&'static str, Percentiles>,
    /// Records read (a scan reads many) and written.
    pub records_read: u64,
    pub records_written: u64,
    /// Every record read was whole, the one asked for, and no older than this client's last
    /// write of it; and no record that exists was missing.
    pub verified: bool,
    pub failures: u64,
    pub first_failure: Option<String>,
    /// Records in the database at the end.
    pub records: u64,
}

/// Loads records `0..records` at version 0, in transactions of [`LOAD_BATCH`] records.
pub fn load(
    db: &Database,
    records: u64,
    record_bytes: usize,
    durability: Durability,
    progress: &mut dyn FnMut(u64),
) -> Result<LoadReport, redb::Error> {
    assert!(record_bytes >= MIN_RECORD_BYTES);
    let started = Instant::now();
    let mut value = vec![0u8; record_bytes];
    let mut keynum = 0;
    while keynum < records {
        let mut txn = db.begin_write()?;
        txn.set_durability(durability)?;
        {
            let mut table = txn.open_table(TABLE)?;
            for k in keynum..(keynum + LOAD_BATCH).min(records) {
                fill_record(k, 0, &mut value);
                table.insert(ycsb_hash(k), value.as_slice())?;
            }
        }
        txn.commit()?;
        keynum = (keynum + LOAD_BATCH).min(records);
        progress(keynum);
    }
    let seconds = started.elapsed().as_secs_f64();
    Ok(LoadReport {
        records,
        record_bytes,
        seconds,
        records_per_second: records as f64 / seconds.max(1e-9),
    })
}

/// What the clients share.
struct Shared<'a> {
    db: &'a Database,
    records: &'a Records,
    options: &'a RunOptions<'a>,
    /// The last version given to a write.
    version: &'a AtomicU64,
    done: AtomicU64,
    failures: AtomicU64,
    first_failure: Mutex<Option<String>>,
    /// Set by a client that failed with an error, so the others stop.
    stop: AtomicBool,
}

impl Shared<'_> {
    fn fail(&self, what: String) {
        self.failures.fetch_add(1, Ordering::Relaxed);
        self.first_failure.lock().unwrap_or_else(|p| p.into_inner()).get_or_insert(what);
    }
}

/// One client's tallies.
struct Client {
    histograms: Vec<Histogram<u64>>,
    read: u64,
    written: u64,
    /// The version of each record this client last wrote.
    own: HashMap<u64, u64>,
    value: Vec<u8>,
}

impl Client {
    /// Checks a record read for `keynum`: present, whole, its own, and not older than this
    /// client's last write of it.
    fn expect(&mut self, shared: &Shared, keynum: u64, bytes: Option<&[u8]>) {
        self.read += 1;
        let key = ycsb_hash(keynum);
        let Some(bytes) = bytes else {
            return shared.fail(format!("record {keynum} (key {key}) is missing"));
        };
        match check_record(key, bytes) {
            Err(e) => shared.fail(e),
            Ok((_, version)) => {
                if let Some(&wrote) = self.own.get(&keynum) {
                    if version < wrote {
                        shared.fail(format!(
                            "record {keynum} read at version {version} after this client \
                             committed version {wrote}"
                        ));
                    }
                }
            }
        }
    }

    /// Writes a new version of `keynum` in its own transaction; `read_first` reads and checks
    /// the old one in the same transaction (a read-modify-write).
    fn write(&mut self, shared: &Shared, keynum: u64, read_first: bool) -> Result<(), redb::Error> {
        let mut txn = shared.db.begin_write()?;
        txn.set_durability(shared.options.durability)?;
        // Write transactions run one at a time: versions grow in commit order.
        let version = shared.version.fetch_add(1, Ordering::Relaxed) + 1;
        {
            let mut table = txn.open_table(TABLE)?;
            if read_first {
                let old = table.get(ycsb_hash(keynum))?.map(|v| v.value().to_vec());
                self.expect(shared, keynum, old.as_deref());
            }
            fill_record(keynum, version, &mut self.value);
            table.insert(ycsb_hash(keynum), self.value.as_slice())?;
        }
        txn.commit()?;
        self.written += 1;
        self.own.insert(keynum, version);
        if let Some(log) = shared.options.commit_log {
            let line = format!("{keynum} {version}\n");
            let mut log = log.lock().unwrap_or_else(|p| p.into_inner());
            // One write per line: a kill leaves whole lines and at most one partial one.
            log.write_all(line.as_bytes()).map_err(redb::Error::Io)?;
        }
        Ok(())
    }

    fn operation(&mut self, shared: &Shared, op: YcsbOperation) -> Result<(), redb::Error> {
        match op {
            YcsbOperation::Read(keynum) => {
                let txn = shared.db.begin_read()?;
                let table = txn.open_table(TABLE)?;
                let value = table.get(ycsb_hash(keynum))?;
                self.expect(shared, keynum, value.as_ref().map(|v| v.value()));
            }
            YcsbOperation::Update(keynum) => self.write(shared, keynum, false)?,
            YcsbOperation::ReadModifyWrite(keynum) => self.write(shared, keynum, true)?,
            YcsbOperation::Insert => {
                let keynum = shared.records.take();
                self.write(shared, keynum, false)?;
                shared.records.acknowledge(keynum);
            }
            YcsbOperation::Scan { start, length } => {
                let txn = shared.db.begin_read()?;
                let table = txn.open_table(TABLE)?;
                let first = ycsb_hash(start);
                for (i, item) in table.range(first..)?.take(length as usize).enumerate() {
                    let (key, value) = item?;
                    let (key, bytes) = (key.value(), value.value());
                    if i == 0 && key != first {
                        self.read += 1;
                        shared.fail(format!("record {start} (key {first}) is missing"));
                        continue;
                    }
                    match check_record(key, bytes) {
                        Ok((keynum, _)) => self.expect(shared, keynum, Some(bytes)),
                        Err(e) => {
                            self.read += 1;
                            shared.fail(e);
                        }
                    }
                }
            }
        }
        Ok(())
    }
}

/// Runs `options.operations` operations of the workload over `options.threads` clients, each
/// with its own key chooser (seeded apart), against records `records` says exist.
pub fn run(
    db: &Database,
    records: &Records,
    version: &AtomicU64,
    options: &RunOptions,
) -> Result<RunReport, redb::Error> {
    assert!(options.record_bytes >= MIN_RECORD_BYTES && options.threads > 0);
    let shared = Shared {
        db,
        records,
        options,
        version,
        done: AtomicU64::new(0),
        failures: AtomicU64::new(0),
        first_failure: Mutex::new(None),
        stop: AtomicBool::new(false),
    };
    let threads = options.threads as u64;
    let started = Instant::now();
    let clients: Vec<Result<Client, redb::Error>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let shared = &shared;
                let operations =
                    options.operations / threads + u64::from(t < options.operations % threads);
                scope.spawn(move || client(shared, t, operations))
            })
            .collect();
        handles.into_iter().map(|h| h.join().expect("a YCSB client panicked")).collect()
    });
    let seconds = started.elapsed().as_secs_f64();
    let mut histograms: Vec<Histogram<u64>> =
        YcsbOperation::KINDS.iter().map(|_| latency::histogram()).collect();
    let (mut read, mut written) = (0, 0);
    for c in clients {
        let c = c?;
        for (all, one) in histograms.iter_mut().zip(&c.histograms) {
            all.add(one).expect("histograms of the same bounds");
        }
        read += c.read;
        written += c.written;
    }
    let failures = shared.failures.load(Ordering::Relaxed);
    let latency = YcsbOperation::KINDS
        .iter()
        .zip(&histograms)
        .filter(|(_, h)| !h.is_empty())
        .map(|(name, h)| (*name, Percentiles::of(h)))
        .collect();
    Ok(RunReport {
        workload: format!("{:?}", options.workload),
        operations: options.operations,
        threads: options.threads,
        seconds,
        ops_per_second: options.operations as f64 / seconds.max(1e-9),
        latency,
        records_read: read,
        records_written: written,
        verified: failures == 0,
        failures,
        first_failure: shared.first_failure.into_inner().unwrap_or_else(|p| p.into_inner()),
        records: records.existing(),
    })
}

fn client(shared: &Shared, index: u64, operations: u64) -> Result<Client, redb::Error> {
    let options = shared.options;
    let config = YcsbConfig {
        record_count: shared.records.existing(),
        operation_count: operations,
        record_bytes: options.record_bytes as u32,
        // Clients' streams apart: the seed, then each client a golden-ratio step further.
        seed: options.seed.wrapping_add(index.wrapping_mul(0x9E37_79B9_7F4A_7C15)),
        ..YcsbConfig::new(options.workload)
    };
    let mut chooser =
        YcsbChooser::new(config).map_err(|e| redb::Error::Io(std::io::Error::other(e)))?;
    let mut client = Client {
        histograms: YcsbOperation::KINDS.iter().map(|_| latency::histogram()).collect(),
        read: 0,
        written: 0,
        own: HashMap::new(),
        value: vec![0; options.record_bytes],
    };
    for i in 0..operations {
        if shared.stop.load(Ordering::Relaxed) {
            break;
        }
        let op = chooser.next(shared.records.existing());
        let started = Instant::now();
        if let Err(e) = client.operation(shared, op) {
            shared.stop.store(true, Ordering::Relaxed);
            return Err(e);
        }
        let ns = started.elapsed().as_nanos() as u64;
        client.histograms[op.kind()].saturating_record(ns.max(1));
        let done = shared.done.fetch_add(1, Ordering::Relaxed) + 1;
        if index == 0 && i % 256 == 0 {
            (options.progress)(done);
        }
    }
    Ok(client)
}

/// What [`check_all`] found.
#[derive(Clone, Debug, Default, Serialize)]
pub struct CheckReport {
    pub records: u64,
    /// Records that are not whole or not under their own key.
    pub bad: u64,
    pub first_bad: Option<String>,
    /// Record numbers 0..n all present: the loaded ones and every insert acknowledged.
    pub contiguous_records: u64,
    pub highest_version: u64,
    /// Each record's version, by number.
    #[serde(skip)]
    pub versions: HashMap<u64, u64>,
}

/// Reads every record and checks it.
pub fn check_all(db: &Database) -> Result<CheckReport, redb::Error> {
    let txn = db.begin_read()?;
    let table = txn.open_table(TABLE)?;
    let mut report = CheckReport::default();
    for item in table.iter()? {
        let (key, value) = item?;
        report.records += 1;
        match check_record(key.value(), value.value()) {
            Ok((keynum, version)) => {
                report.versions.insert(keynum, version);
                report.highest_version = report.highest_version.max(version);
            }
            Err(e) => {
                report.bad += 1;
                report.first_bad.get_or_insert(e);
            }
        }
    }
    while report.versions.contains_key(&report.contiguous_records) {
        report.contiguous_records += 1;
    }
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_proves_what_it_is() {
        let mut value = vec![0u8; 1000];
        fill_record(7, 3, &mut value);
        assert_eq!(check_record(ycsb_hash(7), &value), Ok((7, 3)));
        // Another record's key, one flipped bit, a short read: each caught.
        assert!(check_record(ycsb_hash(8), &value).unwrap_err().contains("holds record 7"));
        let mut flipped = value.clone();
        flipped[500] ^= 4;
        assert!(check_record(ycsb_hash(7), &flipped).unwrap_err().contains("checksum"));
        assert!(check_record(ycsb_hash(7), &value[..12]).is_err());
        // Versions differ in their filler, not only in their header.
        let mut other = vec![0u8; 1000];
        fill_record(7, 4, &mut other);
        assert_ne!(value[16..996], other[16..996]);
    }

    #[test]
    fn records_exist_once_every_lower_insert_committed() {
        let records = Records::new(10);
        let (a, b) = (records.take(), records.take());
        assert_eq!((a, b), (10, 11));
        records.acknowledge(b);
        assert_eq!(records.existing(), 10, "11 committed, 10 not yet");
        records.acknowledge(a);
        assert_eq!(records.existing(), 12);
    }
}
